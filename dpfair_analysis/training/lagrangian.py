"""F-LD and PF-LD: (private) Lagrangian-dual fair training, paper 003 (AAAI'21).

F-LD (Algorithm 1): primal SGD steps on Poisson-sampled batches with the multipliers' constraint terms
(:mod:`dpfair_analysis.fairness.constraints`), one dual ascent step per epoch. PF-LD is private in the sensitive
attribute only: by default (:func:`private_primal_step`, :func:`private_dual_update`) it releases group *sums*
over public denominators (noisy counts released once), with the un-noised public part on its own independently
Poisson-sampled batch, and the ledger composes the replace-one releases
(:mod:`dpfair_analysis.privacy.pfld_accounting`). ``paper_exact=True`` runs Eqs. (7), (10), (11), (13) as
printed and warns (:class:`~dpfair_analysis.privacy.sensitivity.PrivacyNotEstablishedWarning`). What epsilon
covers: the model after every step, the multipliers, signs, noisy gaps and counts, and the ``steps`` columns
:data:`RELEASED_STEP_COLUMNS`; the other columns and the ``train`` violation are not covered. Missing sensitive
values (Sec. 7): ``missing_rate``.

The algorithm, the corrected releases and why the public part needs its own batch (claim
``003.lemma1.shared-batch``): docs/methods/pfld.md, the "F-LD and PF-LD" page of the documentation's Methods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from dp_accounting import dp_event
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.constraints import FairnessConstraint
from dpfair_analysis.gradients import add_gaussian_noise, clipped_sum, parameters_of, per_sample_gradients, \
    per_sample_norms
from dpfair_analysis.privacy.accounting import AccountingSpec, PrivacyLedger
from dpfair_analysis.privacy.pfld_accounting import PFLD_ACCOUNTING, calibrate_pfld_noise, pfld_accounting, \
    replace_one_gaussian_event
from dpfair_analysis.privacy.sensitivity import count_distance, dual_group_sums, dual_sum_distance, \
    group_counts, paper_dual_sensitivity, paper_primal_sensitivity, primal_contribution_bound, \
    warn_paper_exact, warn_shared_batch
from dpfair_analysis.training.loop import TrainCallback, apply_update, batch_indices, check_finite, evaluate_groups, \
    make_generators, predict_logits, run_steps, schedule
from dpfair_analysis.validation import check_choice, check_delta, check_device, check_positive, check_positive_int, \
    check_seed

METHODS = ("fld", "pfld")
PUBLIC_BATCHES = ("independent", "shared")
#: The per-step record columns a PF-LD run releases (public functions of earlier releases);
#: every other column of ``LagrangianResult.steps`` is a non-private diagnostic.
RELEASED_STEP_COLUMNS = ("step", "released", "noise_std", "delta1", "public_batch_size")

__all__ = ["METHODS", "PUBLIC_BATCHES", "RELEASED_STEP_COLUMNS", "LagrangianConfig", "LagrangianResult",
           "PrivateState", "train_lagrangian", "private_primal_step", "private_dual_update", "public_objective",
           "release_group_counts", "reported_mask"]


@dataclass(frozen=True)
class LagrangianConfig:
    """Settings of F-LD / PF-LD. Paper defaults (paper 003 Sec. 8): epsilon = 1,
    delta = 1e-5, C_p = 10, C_d = 5. The paper gives no epochs, batch size, learning
    rates or lambda_max; the values here are this toolkit's choice.

    ``noise_multiplier`` fixes sigma_p (no calibration); otherwise sigma_p is the
    smallest multiplier meeting (``epsilon``, ``delta``) with sigma_d =
    ``dual_noise_ratio`` * sigma_p and sigma_c = ``count_noise_ratio`` * sigma_p.

    ``public_batch``: ``"independent"`` (default) computes the un-noised public part of
    each primal step on its own Poisson batch, which the guarantee needs (module
    docstring); ``"shared"`` computes it on the private batch -- the earlier design,
    whose stated epsilon is false (``privacy_established=False``), kept as a negative
    control for the audits. ``paper_exact`` always shares the batch (Eq. 10 as printed).

    ``accounting``: how epsilon is computed (replace-one: the neighbours differ in one
    person's attribute); ``paper_exact`` runs are accounted with the paper's add/remove
    bookkeeping instead (:attr:`effective_accounting`).
    """

    method: str = "pfld"
    epochs: int = 10
    batch_size: int = 256
    lr: float = 0.05
    dual_lr: float = 1.0
    lambda_max: float = 2.0
    epsilon: float = 1.0
    delta: float = 1e-5
    clip_primal: float = 10.0
    clip_dual: float = 5.0
    noise_multiplier: float | None = None
    dual_noise_ratio: float = 4.0
    count_noise_ratio: float = 4.0
    missing_rate: float = 0.0
    paper_exact: bool = False
    public_batch: str = "independent"
    accounting: AccountingSpec = PFLD_ACCOUNTING
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_choice(self.method, "method", METHODS)
        check_positive_int(self.epochs, "epochs")
        check_positive_int(self.batch_size, "batch_size")
        for name in ("lr", "dual_lr", "lambda_max", "epsilon", "clip_primal", "clip_dual",
                     "dual_noise_ratio", "count_noise_ratio"):
            check_positive(getattr(self, name), name)
        check_delta(self.delta)
        if self.noise_multiplier is not None:
            check_positive(self.noise_multiplier, "noise_multiplier")
        if not (isinstance(self.missing_rate, (int, float)) and 0 <= self.missing_rate < 1):
            raise ValueError(f"missing_rate must be in [0, 1), got {self.missing_rate!r}")
        if not isinstance(self.paper_exact, bool):
            raise TypeError(f"paper_exact must be a bool, got {self.paper_exact!r}")
        pfld_accounting(self.accounting, paper_exact=self.paper_exact)  # validates the spec
        check_choice(self.public_batch, "public_batch", PUBLIC_BATCHES)
        check_seed(self.seed)
        check_device(self.device)

    @property
    def effective_accounting(self) -> AccountingSpec:
        """The spec the run's ledger is accounted with (the paper's add/remove for ``paper_exact``)."""
        return pfld_accounting(self.accounting, paper_exact=self.paper_exact)

    @property
    def shares_batch(self) -> bool:
        """Whether the public part is computed on the private batch (paper-exact or the control)."""
        return self.paper_exact or self.public_batch == "shared"


@dataclass
class PrivateState:
    """What PF-LD has released so far (all public): multipliers, signs, denominators."""

    lambdas: torch.Tensor
    signs: torch.Tensor
    denominators: torch.Tensor | None = None  # m_i = max(noisy count, 1) (default mode)
    noisy_gap: torch.Tensor | None = None


@dataclass
class LagrangianResult:
    """A trained model, its tidy history and (PF-LD) privacy ledger.

    ``history`` columns: epoch, split (train/test/dual/privacy), group, metric, value -- the
    training loop's tidy layout (:func:`~dpfair_analysis.training.loop.evaluate_groups`), so
    PF-LD and DP-SGD histories concatenate. Metrics: accuracy and loss per group and for
    ``all``, violation (the paper's, hard predictions; ``all``); ``lambda[<term>]`` and
    ``noisy_gap[<term>]`` (split dual); epsilon (split privacy, spent so far).
    ``noise_multipliers``: sigma_p (per primal step, relative to Delta_1 = one person's
    largest contribution), sigma_d and sigma_c (relative to the replace distance of the
    dual sums and of the counts). ``ledger`` events follow the replace-one convention of
    dp_accounting's PLD (:mod:`~dpfair_analysis.privacy.pfld_accounting`) unless ``paper_exact``.

    ``epsilon`` covers the model after every step, the ``dual`` rows of ``history``, the
    noisy denominators in ``info`` and the ``steps`` columns :data:`RELEASED_STEP_COLUMNS`;
    the other ``steps`` columns (the private batch's size, its clipped fraction) and the
    ``train`` violation are computed without noise: diagnostics, not covered.
    """

    model: nn.Module
    history: pd.DataFrame
    steps: pd.DataFrame
    ledger: PrivacyLedger
    config: LagrangianConfig
    constraint: FairnessConstraint
    lambdas: torch.Tensor
    noise_multipliers: dict[str, float]
    epsilon: float | None
    privacy_established: bool
    reported_fraction: float
    info: dict[str, Any] = field(default_factory=dict)

    def per_epoch(self) -> pd.DataFrame:
        """One row per epoch: train/test accuracy and violation (population), epsilon, lambdas."""
        h = self.history[self.history["group"] == "all"]
        h = h.assign(column=np.where(h["split"].isin(["train", "test"]), h["split"] + "_" + h["metric"],
                                     h["metric"]))
        return h.pivot_table(index="epoch", columns="column", values="value", aggfunc="first").reset_index()

    def final(self, split: str = "test") -> dict[str, Any]:
        """The last epoch's summary row (JSON-ready)."""
        last = self.per_epoch().iloc[-1]
        split = split if f"{split}_accuracy" in last else "train"
        return {"method": self.config.method + ("-paper" if self.config.paper_exact else ""),
                "constraint": self.constraint.kind, "split": split,
                "accuracy": float(last[f"{split}_accuracy"]), "violation": float(last[f"{split}_violation"]),
                "epsilon": self.epsilon, "delta": self.config.delta if self.config.method == "pfld" else None,
                "privacy_established": self.privacy_established,
                "accountant": self.info.get("accountant"), "epochs": self.config.epochs,
                "lambdas": [float(v) for v in self.lambdas], "noise_multipliers": self.noise_multipliers,
                "clip_primal": self.config.clip_primal, "clip_dual": self.config.clip_dual,
                "reported_fraction": self.reported_fraction, "seed": self.config.seed}


# ------------------------------------------------------------- private releases
def release_group_counts(y: torch.Tensor, group: torch.Tensor, *, constraint: FairnessConstraint,
                         sigma_c: float, generator: torch.Generator,
                         reported: torch.Tensor | None = None) -> tuple[torch.Tensor, dp_event.DpEvent]:
    """Noisy per-term group counts and their event; returns the denominators max(noisy, 1).

    Release: n_i + N(0, (sigma_c * sqrt(2 t_max))^2); replace distance sqrt(2 t_max)
    (:func:`~dpfair_analysis.privacy.sensitivity.count_distance`).
    """
    counts = group_counts(y, group, constraint=constraint, reported=reported)
    std = sigma_c * count_distance(constraint=constraint)
    noisy = counts + (torch.randn(counts.shape, generator=generator, dtype=torch.float64) * std).to(counts.device)
    return noisy.clamp(min=1.0), replace_one_gaussian_event(sigma_c)


def private_primal_step(model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                        reported: torch.Tensor | None, constraint: FairnessConstraint, state: PrivateState,
                        sampling_rate: float, clip: float, sigma_p: float, lr: float,
                        generator: torch.Generator, public: tuple[torch.Tensor, torch.Tensor] | None = None,
                        paper_exact: bool = False, reported_fraction: float = 1.0,
                        lambda_max: float = 1.0) -> dict[str, Any]:
    """One PF-LD primal update of ``model`` in place (paper 003 Eq. 10; default: corrected).

    theta <- theta - lr (grad P(theta; B') - V) with P = J + sum_i lambda_i s_i mu(B'_{P_i})
    the public part on ``public`` = (X', y') and V the noisy group sum over the private
    batch (X, y, group). ``public=None`` computes the public part on the private batch
    itself (Eq. 10 as printed, and the ``public_batch="shared"`` control): then the
    update reveals who was sampled and the subsampled accounting does not hold (module
    docstring).

    Returns a record: ``released`` (bool), ``noise_std``, ``delta1`` (the per-person
    contribution bound, or the paper's Delta_p), ``event`` (DpEvent or None), and the
    diagnostic ``frac_clipped`` (share of the private batch's group members whose
    gradient of h was clipped: computed without noise, not covered by the guarantee).
    """
    params = parameters_of(model)
    names = list(params)
    lambdas = state.lambdas.to(torch.float64)
    logits = model(X)
    h = constraint.h(logits, y)
    grp = constraint.group_masks(y, group, reported)
    if paper_exact:
        with torch.no_grad():
            pop = constraint.population_masks(y)
            mu_p = (h.unsqueeze(1) * pop).sum(0) / pop.sum(0).clamp(min=1)
            n_grp = grp.sum(0)
            mu_g = (h.unsqueeze(1) * grp).sum(0) / n_grp.clamp(min=1)
            signs = torch.sign(mu_p - mu_g).to(torch.float64) * (n_grp > 0)
            denominators = n_grp.to(torch.float64).clamp(min=1)
            sizes = constraint.group_masks(y, group, None).sum(0)  # full sizes for the Sec. 7 rule
            delta = paper_primal_sensitivity(sizes.cpu().numpy(), clip=clip, lambda_max=lambda_max) / reported_fraction
        coefficients = lambdas * signs / denominators
    else:
        signs = state.signs.to(torch.float64)
        coefficients = lambdas * signs / (sampling_rate * state.denominators)
        delta = primal_contribution_bound(coefficients, clip=clip, constraint=constraint)
    X_pub, y_pub = (X, y) if public is None else public
    logits_pub = logits if public is None else model(X_pub)
    grads_public = torch.autograd.grad(public_objective(logits_pub, y_pub, constraint, lambdas * signs),
                                       [dict(model.named_parameters())[k] for k in names], allow_unused=True)
    total = {k: (g if g is not None else torch.zeros_like(params[k])) for k, g in zip(names, grads_public)}
    record: dict[str, Any] = {"released": False, "noise_std": 0.0, "delta1": delta, "event": None}
    active = bool((coefficients != 0).any()) and math.isfinite(delta) and delta > 0
    if active:
        rows = grp.any(dim=1).nonzero().flatten()
        per_person = (grp[rows].to(torch.float64) @ coefficients)
        std = sigma_p * delta
        if len(rows):
            grads = per_sample_gradients(model, X[rows], y[rows], params=params,
                                         loss_fn=lambda logit, t: constraint.h(logit, t).sum())
            norms = per_sample_norms(grads)
            group_sum = clipped_sum(grads, clip, weights=per_person.to(norms.dtype), norms=norms)
            record["frac_clipped"] = float((norms > clip).double().mean())
        else:
            group_sum = {k: torch.zeros_like(p) for k, p in params.items()}
        noisy = add_gaussian_noise(group_sum, std, generator=generator)
        total = {k: total[k] - noisy[k] for k in names}
        event = dp_event.PoissonSampledDpEvent(sampling_rate, dp_event.GaussianDpEvent(sigma_p))
        record.update(released=True, noise_std=std, event=event)
    apply_update(params, total, lr=lr)
    return record


def public_objective(logits: torch.Tensor, y: torch.Tensor, constraint: FairnessConstraint,
                      weights: torch.Tensor) -> torch.Tensor:
    """The primal objective's public part J(B') + sum_i w_i mu(B'_{P_i}), w_i = lambda_i s_i.

    Features and labels are public, so this needs no noise; the population means divide
    by the batch's own population counts (terms with an empty population contribute 0).
    """
    if not len(y):
        return logits.sum() * 0.0
    h = constraint.h(logits, y)
    pop = constraint.population_masks(y)
    n_pop = pop.sum(0)
    mu_p = (h.unsqueeze(1) * pop).sum(0) / n_pop.clamp(min=1)
    population_term = (weights.to(h.dtype) * torch.where(n_pop > 0, mu_p, torch.zeros_like(mu_p))).sum()
    return F.cross_entropy(logits, y) + population_term


def private_dual_update(model: nn.Module, data: GroupedDataset, *, reported: torch.Tensor | None,
                        constraint: FairnessConstraint, state: PrivateState, clip: float, sigma_d: float,
                        dual_lr: float, lambda_max: float, generator: torch.Generator,
                        paper_exact: bool = False, reported_fraction: float = 1.0) -> dp_event.DpEvent:
    """One PF-LD dual step on the whole data (paper 003 Eq. 13; default: corrected).

    Updates ``state`` (lambdas, signs, noisy_gap) in place and returns the DpEvent.
    """
    with torch.no_grad():
        h = constraint.h(predict_logits(model, data.X), data.y).double()
        pop = constraint.population_masks(data.y).double()
        mu_p = (pop * h.unsqueeze(1)).sum(0) / pop.sum(0).clamp(min=1)
        if paper_exact:
            grp = constraint.group_masks(data.y, data.group, reported)
            sizes = constraint.group_masks(data.y, data.group, None).sum(0)
            clipped = h.clamp(-clip, clip)
            mu_g = (grp.double() * clipped.unsqueeze(1)).sum(0) / grp.sum(0).clamp(min=1)
            gap = mu_p - mu_g
            delta = paper_dual_sensitivity(sizes.cpu().numpy(), clip=clip) / reported_fraction
            noisy_violation = gap.abs() + (torch.randn(gap.shape, generator=generator, dtype=torch.float64) * (
                sigma_d * delta)).to(gap.device)
            state.signs = torch.sign(gap)  # unused by paper_exact's primal (batch signs)
            state.noisy_gap = noisy_violation
            event: dp_event.DpEvent = dp_event.GaussianDpEvent(sigma_d)
        else:
            sums = dual_group_sums(h, data.y, data.group, constraint=constraint, clip=clip, reported=reported)
            std = sigma_d * dual_sum_distance(clip=clip, constraint=constraint)
            noisy_sums = sums + (torch.randn(sums.shape, generator=generator, dtype=torch.float64) * std).to(sums.device)
            gap = mu_p - noisy_sums / state.denominators
            noisy_violation = gap.abs()
            state.signs = torch.sign(gap)
            state.noisy_gap = gap
            event = replace_one_gaussian_event(sigma_d)
        state.lambdas = (state.lambdas + dual_lr * noisy_violation).clamp(min=0.0, max=lambda_max)
    return event


# ------------------------------------------------------------------ the trainer
def reported_mask(n: int, missing_rate: float, *, seed: int) -> torch.Tensor | None:
    """Who reports the group: each row independently with probability 1 - missing_rate."""
    if missing_rate == 0:
        return None
    g = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, 7]).generate_state(1)[0]))
    return torch.rand(n, generator=g) >= missing_rate


def train_lagrangian(model: nn.Module, train_data: GroupedDataset, constraint: FairnessConstraint,
                     config: LagrangianConfig, *, test_data: GroupedDataset | None = None,
                     progress: bool = True, callbacks: Sequence[TrainCallback] = ()) -> LagrangianResult:
    """Train ``model`` in place with F-LD or PF-LD (``config.method``).

    ``callbacks`` are called as ``callback(t, model, state)`` at theta_t with the public
    state (multipliers, signs, denominators) step t+1 will use, for t = 0 to T; they must
    not touch the model's parameters or the state.

    Returns a :class:`LagrangianResult` with the per-epoch history and, for PF-LD, the
    privacy ledger and the epsilon spent (``result.ledger.epsilon(delta,
    accounting=config.effective_accounting)``).

    Runs on ``config.device``: the model, the data and the dual state live there, the
    random draws are made on the CPU generators and moved (the same numbers on every
    device); the model is back on its own device when this returns.
    """
    device = torch.device(config.device)
    home = next((p.device for p in model.parameters()), torch.device("cpu"))
    model.to(device)
    try:
        return _train_lagrangian(model, train_data.to(device), constraint, config,
                                 test_data=None if test_data is None else test_data.to(device), progress=progress,
                                 callbacks=callbacks, device=device)
    finally:
        model.to(home)


def _train_lagrangian(model: nn.Module, train_data: GroupedDataset, constraint: FairnessConstraint,
                      config: LagrangianConfig, *, test_data: GroupedDataset | None, progress: bool,
                      callbacks: Sequence[TrainCallback], device: torch.device) -> LagrangianResult:
    if not isinstance(constraint, FairnessConstraint):
        raise TypeError(f"constraint must be a FairnessConstraint (make_constraint), got {constraint!r}")
    if constraint.n_groups != train_data.n_groups:
        raise ValueError(f"constraint has {constraint.n_groups} groups, train_data has {train_data.n_groups}")
    n = len(train_data)
    if config.batch_size > n:
        raise ValueError(f"batch_size={config.batch_size} exceeds the {n} training rows")
    private = config.method == "pfld"
    if private and config.paper_exact:
        warn_paper_exact()
    elif private and config.shares_batch:
        warn_shared_batch()
    q = config.batch_size / n
    total_steps, epoch_ends = schedule(n, config)  # Poisson: T = ceil(epochs n / b), as the accountant counts
    sampler, noise, public_sampler = make_generators(config.seed, 3)
    private_batches = batch_indices(n, config.batch_size, sampler)
    public_batches = batch_indices(n, config.batch_size, public_sampler)
    reported = reported_mask(n, config.missing_rate, seed=config.seed) if config.missing_rate else None
    reported = None if reported is None else reported.to(device)
    reported_fraction = 1.0 if reported is None else float(reported.double().mean())
    if reported is not None and reported_fraction == 0:
        raise ValueError("no training row reports its group; lower missing_rate")

    ledger = PrivacyLedger()
    sigmas = {"primal": math.nan, "dual": math.nan, "counts": math.nan}
    state = PrivateState(lambdas=torch.zeros(constraint.n_terms, dtype=torch.float64, device=device),
                         signs=torch.zeros(constraint.n_terms, dtype=torch.float64, device=device))
    if private:
        if config.noise_multiplier is not None:
            s = config.noise_multiplier
            sigmas = {"primal": s, "dual": config.dual_noise_ratio * s, "counts": config.count_noise_ratio * s}
        else:
            sigmas = calibrate_pfld_noise(n=n, batch_size=config.batch_size, epochs=config.epochs,
                                          epsilon=config.epsilon, delta=config.delta,
                                          dual_noise_ratio=config.dual_noise_ratio,
                                          count_noise_ratio=config.count_noise_ratio,
                                          accounting=config.accounting, paper_exact=config.paper_exact)
        if not config.paper_exact:
            state.denominators, event = release_group_counts(train_data.y, train_data.group, constraint=constraint,
                                                             sigma_c=sigmas["counts"], generator=noise,
                                                             reported=reported)
            ledger.record(event)

    def epsilon_now() -> float | None:
        if not private:
            return None
        return ledger.epsilon(config.delta, accounting=config.effective_accounting)

    def violation(logits: torch.Tensor, data: GroupedDataset) -> dict[str, float]:
        return {"violation": constraint.violation(logits, data.y, data.group)}

    splits = {"train": train_data, "test": test_data}

    def step(t: int) -> dict:
        index = next(private_batches).to(device)
        X, y, g = train_data.X[index], train_data.y[index], train_data.group[index]
        rep = None if reported is None else reported[index]
        if private:
            public_index = index if config.shares_batch else next(public_batches).to(device)
            public = None if config.shares_batch else (train_data.X[public_index], train_data.y[public_index])
            record = private_primal_step(model, X, y, g, reported=rep, constraint=constraint, state=state,
                                         sampling_rate=q, clip=config.clip_primal, sigma_p=sigmas["primal"],
                                         lr=config.lr, generator=noise, public=public,
                                         paper_exact=config.paper_exact, reported_fraction=reported_fraction,
                                         lambda_max=config.lambda_max)
            record["public_batch_size"] = len(public_index)
            if record.pop("event") is not None:
                ledger.record(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigmas["primal"])))
        else:
            record = _fld_primal_step(model, X, y, g, reported=rep, constraint=constraint,
                                      lambdas=state.lambdas, lr=config.lr)
        check_finite(model, step=t, total_steps=total_steps, lr=config.lr)
        return {"batch_size": len(index), **record}

    def evaluate(epoch: int) -> list[dict]:
        """After an epoch (not the last): the dual update (Algorithm 1 lines 5-6); then the evaluation with the
        violation, and the multipliers (and noisy gaps) the next epoch will use."""
        if 0 < epoch < config.epochs:
            if private:
                ledger.record(private_dual_update(
                    model, train_data, reported=reported, constraint=constraint, state=state,
                    clip=config.clip_dual, sigma_d=sigmas["dual"], dual_lr=config.dual_lr,
                    lambda_max=config.lambda_max, generator=noise, paper_exact=config.paper_exact,
                    reported_fraction=reported_fraction))
            else:
                _fld_dual_update(model, train_data, reported=reported, constraint=constraint, state=state,
                                 dual_lr=config.dual_lr, lambda_max=config.lambda_max)
        rows = evaluate_groups(model, splits, epoch=epoch, extra=violation)
        if epoch == 0:
            return rows
        for i, term in enumerate(constraint.term_names):
            rows.append({"epoch": epoch, "split": "dual", "group": "all", "metric": f"lambda[{term}]",
                         "value": float(state.lambdas[i])})
            if state.noisy_gap is not None:
                rows.append({"epoch": epoch, "split": "dual", "group": "all", "metric": f"noisy_gap[{term}]",
                             "value": float(state.noisy_gap[i])})
        return rows

    history, steps = run_steps(model, total_steps=total_steps, epoch_ends=epoch_ends, step=step, evaluate=evaluate,
                               epsilon=epsilon_now, callbacks=callbacks, state=state, desc=config.method,
                               progress=progress)
    final_eps = epsilon_now()
    return LagrangianResult(
        model=model, history=history, steps=steps, ledger=ledger,
        config=config, constraint=constraint, lambdas=state.lambdas.cpu().clone(), noise_multipliers=sigmas,
        epsilon=final_eps, privacy_established=private and not config.shares_batch,
        reported_fraction=reported_fraction,
        info={"accountant": (config.effective_accounting.describe() + (" (paper)" if config.paper_exact else ""))
              if private else None, "sampling_rate": q, "steps": total_steps,
              "public_batch": ("shared" if config.shares_batch else "independent") if private else None,
              "denominators": None if state.denominators is None else state.denominators.tolist()})


def _fld_primal_step(model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                     reported: torch.Tensor | None, constraint: FairnessConstraint, lambdas: torch.Tensor,
                     lr: float) -> dict[str, Any]:
    """Algorithm 1 line 4 (non-private): SGD on J + lambda^T |mu(B_P) - mu(B_G)|."""
    logits = model(X)
    objective = F.cross_entropy(logits, y) if len(y) else logits.sum() * 0.0
    if bool((lambdas > 0).any()) and len(y):
        gaps = constraint.term_gaps(constraint.h(logits, y), y, group, reported)
        objective = objective + (lambdas.to(gaps.dtype) * gaps.abs()).sum()
    model.zero_grad(set_to_none=True)
    objective.backward()
    apply_update(parameters_of(model), {name: p.grad for name, p in model.named_parameters() if p.grad is not None},
                 lr=lr)
    model.zero_grad(set_to_none=True)
    return {"released": False, "noise_std": 0.0}


def _fld_dual_update(model: nn.Module, data: GroupedDataset, *, reported: torch.Tensor | None,
                     constraint: FairnessConstraint, state: PrivateState, dual_lr: float, lambda_max: float) -> None:
    """Algorithm 1 lines 5-6 (non-private) on the whole data."""
    with torch.no_grad():
        h = constraint.h(predict_logits(model, data.X), data.y).double()
        gaps = constraint.term_gaps(h, data.y, data.group, reported)
        state.noisy_gap = gaps
        state.signs = torch.sign(gaps)
        state.lambdas = (state.lambdas + dual_lr * gaps.abs()).clamp(max=lambda_max)
