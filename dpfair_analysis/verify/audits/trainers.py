"""Audits of the private trainers as they run: Poisson sampling, every step, all they release.

A one-step, full-batch audit (q = 1) cannot see a flaw of amplification or composition:
the PF-LD design whose un-noised public part revealed who was sampled passed it. The
audits here run each trainer's own entry point -- :func:`~dpfair_analysis.training.loop.train`
with a clipping policy (and objective), :func:`~dpfair_analysis.training.lagrangian.train_lagrangian`
-- on a small worst-case pair of data sets, with the trainer's own Poisson sampling at
q = b/n < 1, all its steps and epochs, and the claim the trainer itself reports
(``result.epsilon``, its ledger).

The adversary (white box, Nasr et al. 2021's strongest) knows both data sets, the
model's initialisation and the algorithm, and sees the model after **every** step and
every public column of the step records (noise scales, released bounds and weights,
public batch sizes). It scores a run by the exact log-likelihood ratio of what it sees
on one *canary coordinate*: the weight of a feature that only the canary has (every
other row has 0 there, so no other row's gradient, public or private, ever moves it).
At step t, with theta_t known, it computes the canary's would-be contribution and forms

* loop trainers (add/remove, D' = D + canary): the step's update of that coordinate is
  z_t = 1[c in B_t] u_t + N(0, s_t^2) in units of the noisy sum, with u_t the canary's
  weighted, clipped gradient coordinate (bound and weight from the step's released
  record) and s_t the released noise scale; the score is
  sum_t log((1 - q) + q exp((z_t u_t - u_t^2/2) / s_t^2));
* PF-LD (replace-one of the canary's group, a in D, b in D'): the update is
  o_t = -1[c in B'_t] p_t + 1[c in B_t] u_t(A) + N(0, s_t^2) with p_t the canary's
  public gradient over the public batch's released size and u_t(A) = a_A clip(grad h)
  its group-sum contribution (a_A = lambda_A s_A / (q m_A), all public). B' is drawn
  independently of B in the shipped design (four-way mixture) and equals B in the
  shared-batch control (two-way); the score is the log-ratio of the two mixtures.

Any score gives a valid lower bound (:func:`~dpfair_analysis.testing.specs.audit_spec`); this one is the
Neyman-Pearson statistic of the canary coordinate's trajectory given everything public,
so a mechanism whose released trajectory depends on the canary more than its claim
allows is caught. The dual and count releases of PF-LD and the counts of DPSGD-F are
left out of the score (a weaker adversary; the bound stays valid).

What is *not* seen: each trainer's ``history`` ``train``/``batches`` rows and the
``steps`` diagnostic columns (private batch sizes, clipped fractions) are computed from
the private data without noise. They are not covered by any guarantee (the trainers'
docstrings say so) and are not given to the adversary.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from tqdm import tqdm

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.constraints import make_constraint
from dpfair_analysis.gradients import flatten, parameters_of, per_sample_gradients
from dpfair_analysis.models import build_model, count_parameters
from dpfair_analysis.privacy.sensitivity import PrivacyNotEstablishedWarning
from dpfair_analysis.testing.specs import AuditSpec, MechanismSamples, audit_spec
from dpfair_analysis.testing.steps import mixture_log_likelihood, poisson_gaussian_llr
from dpfair_analysis.training import methods
from dpfair_analysis.training.fedavg import FedAvgConfig, local_update, train_dpfedavg
from dpfair_analysis.training.lagrangian import LagrangianConfig, PrivateState, public_objective, train_lagrangian
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.training.mitigation import FairnessLensMitigation
from dpfair_analysis.training.policies import make_policy
from dpfair_analysis.verify.audits.mechanisms import sample_output_perturbation
from dpfair_analysis.verify.audits.registry import DEFAULT_DELTA, sampled_row

#: The canary's own feature: every other row has 0 there.
CANARY_FEATURE = 0
CANARY_VALUE = 100.0
BASE_ROWS = 39
PFLD_BASE_ROWS = 49
LOOP_BATCH = 2
LOOP_EPOCHS = 2
LOOP_SIGMA = 1.5
LOOP_CLIP = 1.0
LOOP_LR = 1e-4  # tiny steps keep the canary's logit near 0 (its gradient unsaturated)
PFLD_BATCH = 1
PFLD_EPOCHS = 2
PFLD_SIGMA = 1.0
PFLD_CLIP = 1.0


# ------------------------------------------------------------------ the worst-case pairs
def _base_rows(rows: int = BASE_ROWS, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` rows: two informative features, 0 in the canary's column."""
    rng = np.random.default_rng(seed)
    X = np.zeros((rows, 3), dtype=np.float32)
    X[:, 1:] = rng.normal(size=(rows, 2))
    y = (X[:, 1] + 0.5 * rng.normal(size=rows) > 0).astype(np.int64)
    return torch.from_numpy(X), torch.from_numpy(y)


def canary_row() -> tuple[torch.Tensor, torch.Tensor]:
    """The canary: a large value in its own column (gradient ~ CANARY_VALUE, clipped to its bound)."""
    x = torch.zeros(1, 3)
    x[0, CANARY_FEATURE] = CANARY_VALUE
    return x, torch.tensor([1])


def loop_pair() -> tuple[GroupedDataset, GroupedDataset]:
    """Add/remove pair for the loop's policies: D = the base rows (group 0), D' = D + canary
    alone in group 1 (its group is then the most clipped and the smallest, which puts its
    contribution at the noise's reference scale under DPSGD-F and Naive)."""
    X, y = _base_rows()
    x_c, y_c = canary_row()
    names = dict(group_names=("base", "canary"), label_names=("0", "1"), feature_names=("canary", "x1", "x2"))
    without = GroupedDataset(X=X, y=y, group=torch.zeros(len(y), dtype=torch.int64), name="audit-D", **names)
    with_ = GroupedDataset(X=torch.cat([X, x_c]), y=torch.cat([y, y_c]),
                           group=torch.cat([torch.zeros(len(y), dtype=torch.int64), torch.tensor([1])]),
                           name="audit-D'", **names)
    return without, with_


def pfld_training_pair() -> tuple[GroupedDataset, GroupedDataset]:
    """Replace-one pair for PF-LD's training run: the same rows, the canary's group a = 0 in D, b = 1 in D'.
    The groups differ in their positive rate, so the dual multipliers grow and the group
    terms' signs are opposite (a_0 and a_1 of opposite sign: the largest replace distance).
    (One step's audit uses seven rows: :func:`~dpfair_analysis.verify.audits.canaries.pfld_step_pair`.)"""
    X, y = _base_rows(PFLD_BASE_ROWS)
    x_c, y_c = canary_row()
    group = torch.from_numpy((X[:, 1].numpy() > np.median(X[:, 1].numpy())).astype(np.int64))  # 1: more positives
    names = dict(group_names=("a", "b"), label_names=("0", "1"), feature_names=("canary", "x1", "x2"))
    X_all, y_all = torch.cat([X, x_c]), torch.cat([y, y_c])
    return (GroupedDataset(X=X_all, y=y_all, group=torch.cat([group, torch.tensor([0])]), name="audit-D", **names),
            GroupedDataset(X=X_all, y=y_all, group=torch.cat([group, torch.tensor([1])]), name="audit-D'", **names))


def audit_model() -> torch.nn.Module:
    """Logistic regression without L2 (every update is the released sum, nothing else),
    started with the canary's weight at 0 (the adversary picks the public starting
    point): its logit starts at 0, where its gradients are largest."""
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=0)
    with torch.no_grad():
        model.linear.weight[..., CANARY_FEATURE] = 0.0
    return model


def canary_coordinate(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """The canary's weight: the one coordinate no other row's gradient touches."""
    return params["linear.weight"][..., CANARY_FEATURE].reshape(-1)


# ------------------------------------------------------------------ loop trainers
@dataclass(frozen=True)
class LoopTrainerSpec:
    """A loop trainer to audit: the method name of ``make_policy`` and whether paper 001's
    mitigation objective runs on it."""

    method: str
    mitigation: bool = False


def _loop_run(spec: LoopTrainerSpec, data: GroupedDataset, *, seed: int, noise_fraction: float):
    """One run of ``train`` as shipped (noise scaled by ``noise_fraction``); returns
    (result, theta_t of the canary coordinate for t = 0..T, canary gradients at theta_t)."""
    sigma = LOOP_SIGMA * noise_fraction
    # every noise scales with noise_fraction: the count noises are 10 sigma (Opt-Q's default b/20 and bounded
    # adaptive clipping's b/10 would not scale), for every method whose options set an absolute count noise
    entry = methods.get(spec.method)
    fields = {f.name for f in dataclasses.fields(entry.options)}
    options = {"count_noise": 10 * sigma} if "count_noise" in fields else {}
    options.update(entry.audit_options(sigma) if entry.audit_options is not None else {})
    policy = make_policy(spec.method, clip_bound=LOOP_CLIP, noise_multiplier=sigma,
                         dimension=count_parameters(audit_model()), learning_rate=LOOP_LR, **options)
    objective = None
    if spec.mitigation:
        objective = FairnessLensMitigation(gamma1=1.0, gamma2=1.0, clip_bound=LOOP_CLIP,
                                           stats_noise_multiplier=2.0 * sigma, count_noise_multiplier=10.0 * sigma)
    x_c, y_c = canary_row()
    coordinates, canary_grads = [], []

    def watch(t: int, model: torch.nn.Module, state: object) -> None:
        params = parameters_of(model)
        coordinates.append(canary_coordinate(params).detach().clone())
        if objective is None:
            grads = per_sample_gradients(model, x_c, y_c, params=params)
        else:
            grads, _ = objective.per_sample_gradients(model, x_c, y_c, torch.tensor([1]), params=params)
        canary_grads.append(flatten(grads)[0].detach().clone())

    config = TrainConfig(epochs=LOOP_EPOCHS, batch_size=LOOP_BATCH, lr=LOOP_LR, delta=DEFAULT_DELTA, seed=seed)
    result = train(audit_model(), data, policy, config, progress=False, objective=objective, callbacks=[watch])
    return result, torch.stack(coordinates), torch.stack(canary_grads)


def _loop_llr(spec: LoopTrainerSpec, result, coordinates: torch.Tensor, canary_grads: torch.Tensor,
              sampling_rate: float) -> float:
    """Sum over steps of log((1 - q) + q exp((z u - u^2/2) / s^2)) (module docstring): the kit's
    :func:`~dpfair_analysis.testing.steps.poisson_gaussian_llr` of what the adversary sees."""
    b, lr = result.config.batch_size, result.learning_rate
    z = (-(coordinates[1:] - coordinates[:-1]) * b / lr).double().reshape(len(coordinates) - 1, -1)
    records = result.steps.to_dict("records")
    u, s = [], []
    for t, record in enumerate(records):
        bound, weight = methods.get(spec.method).canary(record, LOOP_CLIP, group=1)  # the canary group's rule
        g = canary_grads[t].double()
        factor = weight * min(1.0, bound / max(float(g.norm()), 1e-300))
        u.append(canary_coordinate_of_flat(g, result.model) * factor)
        s.append(float(record["noise_std"]))
    return poisson_gaussian_llr(z.numpy(), torch.stack(u).numpy(), np.array(s), sampling_rate=sampling_rate)


def canary_coordinate_of_flat(flat: torch.Tensor, model: torch.nn.Module) -> torch.Tensor:
    """The canary coordinate(s) of a flattened parameter vector (order of ``parameters_of``)."""
    start = 0
    for name, p in parameters_of(model).items():
        if name == "linear.weight":
            block = flat[start:start + p.numel()].reshape(p.shape)
            return block[..., CANARY_FEATURE].reshape(-1)
        start += p.numel()
    raise ValueError("the audit model has no 'linear.weight'")


def sample_loop_trainer(spec: LoopTrainerSpec, trials: int, *, seed: int, noise_fraction: float,
                        progress: bool = False) -> MechanismSamples:
    """``trials`` runs of ``train`` on each of D and D' (:func:`loop_pair`), scored."""
    without, with_ = loop_pair()
    claim_run, _, _ = _loop_run(spec, with_, seed=seed, noise_fraction=1.0)
    seeds = np.random.SeedSequence(seed).generate_state(2 * trials, dtype=np.uint32).reshape(2, trials)
    scores = np.zeros((2, trials))
    for i in tqdm(range(trials), desc=f"audit {spec.method if not spec.mitigation else 'mitigation'} (sampled)",
                  disable=not progress, leave=False):
        for side, data in enumerate((without, with_)):
            result, coordinates, grads = _loop_run(spec, data, seed=int(seeds[side, i]), noise_fraction=noise_fraction)
            scores[side, i] = _loop_llr(spec, result, coordinates, grads, sampling_rate=LOOP_BATCH / len(with_))
    return MechanismSamples(
        scores_without=scores[0], scores_with=scores[1], epsilon_claimed=float(claim_run.epsilon), delta=DEFAULT_DELTA,
        neighbouring="add_remove",
        setting={"trainer": "training.loop.train", "policy": spec.method, "mitigation": spec.mitigation,
                 "sampling_rate": LOOP_BATCH / len(with_), "steps": int(len(claim_run.steps)),
                 "epochs": LOOP_EPOCHS, "batch_size": LOOP_BATCH, "noise_multiplier": LOOP_SIGMA * noise_fraction,
                 "clip": LOOP_CLIP, "rows": len(with_), "accountant": claim_run.config.accounting.describe(),
                 "adversary_sees": "theta after every step; released step records"})


# ------------------------------------------------------------------ PF-LD
DP = make_constraint("dp", n_groups=2, group_names=("a", "b"))


def _pfld_config(*, seed: int, noise_fraction: float, public_batch: str) -> LagrangianConfig:
    return LagrangianConfig(method="pfld", epochs=PFLD_EPOCHS, batch_size=PFLD_BATCH, lr=1e-5, dual_lr=20.0,
                            lambda_max=2.0, clip_primal=PFLD_CLIP, clip_dual=5.0, delta=DEFAULT_DELTA,
                            noise_multiplier=PFLD_SIGMA * noise_fraction, public_batch=public_batch, seed=seed)


def _pfld_run(data: GroupedDataset, *, seed: int, noise_fraction: float, public_batch: str):
    """One run of ``train_lagrangian`` as shipped; returns the result and, per step t, what the
    adversary computes at theta_t: (canary coordinate, clipped-h-gradient coordinate and norm
    factor, public-gradient coordinate per unit batch, multipliers x signs, denominators)."""
    x_c, y_c = canary_row()
    seen: list[dict[str, torch.Tensor]] = []

    def watch(t: int, model: torch.nn.Module, state: PrivateState) -> None:
        params = parameters_of(model)
        h_grads = per_sample_gradients(model, x_c, y_c, params=params,
                                       loss_fn=lambda logit, target: DP.h(logit, target).sum())
        flat = flatten(h_grads)[0].detach().double()
        clipped = flat * min(1.0, PFLD_CLIP / max(float(flat.norm()), 1e-300))
        weights = (state.lambdas * state.signs).double()
        model.zero_grad(set_to_none=True)
        live = [p for name, p in model.named_parameters() if name in params]
        public = torch.autograd.grad(public_objective(model(x_c), y_c, DP, weights), live, allow_unused=True)
        public_flat = torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                                 for g, p in zip(public, params.values())]).double()
        seen.append({"theta": canary_coordinate(params).detach().double().clone(),
                     "h": canary_coordinate_of_flat(clipped, model), "public": canary_coordinate_of_flat(
                         public_flat, model), "weights": weights.clone(),
                     "denominators": state.denominators.double().clone()})

    config = _pfld_config(seed=seed, noise_fraction=noise_fraction, public_batch=public_batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyNotEstablishedWarning)
        result = train_lagrangian(audit_model(), data, DP, config, progress=False, callbacks=[watch])
    return result, seen


def _pfld_llr(result, seen: list[dict[str, torch.Tensor]], *, shared: bool) -> float:
    """Sum over released steps of log P(o_t | canary in b) - log P(o_t | canary in a) (module docstring); each
    side's step likelihood is the kit's :func:`~dpfair_analysis.testing.steps.mixture_log_likelihood`."""
    q, lr = result.info["sampling_rate"], result.config.lr
    records = result.steps.to_dict("records")
    log_q, log_1q = math.log(q), math.log1p(-q)
    if shared:
        combos = [(0, 0, log_1q), (1, 1, log_q)]
    else:
        combos = [(0, 0, 2 * log_1q), (1, 0, log_q + log_1q), (0, 1, log_q + log_1q), (1, 1, 2 * log_q)]
    total = 0.0
    for t, record in enumerate(records):
        s = float(record["noise_std"])
        if not record["released"] or s <= 0:
            continue
        now, after = seen[t], seen[t + 1]
        o = (after["theta"] - now["theta"]) / lr
        p = now["public"] / max(int(record["public_batch_size"]), 1)
        coefficients = now["weights"] / (q * now["denominators"])
        log_like = []
        for group in (0, 1):
            u = coefficients[group] * now["h"]
            residuals = [(o + b_pub * p - b_priv * u).numpy() for b_pub, b_priv, _ in combos]
            log_like.append(mixture_log_likelihood(residuals, [w for _, _, w in combos], s))
        total += log_like[1] - log_like[0]
    return total


def sample_pfld_trainer(trials: int, *, seed: int, noise_fraction: float, progress: bool = False,
                        public_batch: str = "independent") -> MechanismSamples:
    """``trials`` runs of ``train_lagrangian`` on each of D and D' (:func:`pfld_training_pair`), scored.

    ``public_batch="shared"`` audits the negative control (its claim is the same ledger's)."""
    without, with_ = pfld_training_pair()
    claim_run, _ = _pfld_run(with_, seed=seed, noise_fraction=1.0, public_batch=public_batch)
    seeds = np.random.SeedSequence(seed).generate_state(2 * trials, dtype=np.uint32).reshape(2, trials)
    scores = np.zeros((2, trials))
    shared = public_batch == "shared"
    for i in tqdm(range(trials), desc=f"audit pfld ({public_batch} public batch, sampled)", disable=not progress,
                  leave=False):
        for side, data in enumerate((without, with_)):
            result, seen = _pfld_run(data, seed=int(seeds[side, i]), noise_fraction=noise_fraction,
                                     public_batch=public_batch)
            scores[side, i] = _pfld_llr(result, seen, shared=shared)
    return MechanismSamples(
        scores_without=scores[0], scores_with=scores[1], epsilon_claimed=float(claim_run.epsilon), delta=DEFAULT_DELTA,
        neighbouring="replace_one (sensitive attribute)",
        setting={"trainer": "training.lagrangian.train_lagrangian", "public_batch": public_batch,
                 "sampling_rate": claim_run.info["sampling_rate"], "steps": int(claim_run.info["steps"]),
                 "primal_releases": int(claim_run.steps["released"].sum()), "epochs": PFLD_EPOCHS,
                 "batch_size": PFLD_BATCH, "noise_multiplier": PFLD_SIGMA * noise_fraction, "clip_primal": PFLD_CLIP,
                 "rows": len(with_), "accountant": claim_run.info["accountant"],
                 "adversary_sees": "theta after every step; multipliers, signs, noisy counts; released step records"})


# ------------------------------------------------------------------ DP-FedAvg (user level)
FEDAVG_ROWS_PER_CLIENT = 3
FEDAVG_CLIENTS_PER_ROUND = 1
FEDAVG_EPOCHS = 2
FEDAVG_LOCAL_EPOCHS = 2
FEDAVG_LOCAL_LR = 1e-3
FEDAVG_CLIP = 1e-3  # the canary client's update (~ 2 x 1e-3 x 100) is clipped to it


def fedavg_pair() -> tuple[tuple[GroupedDataset, list[torch.Tensor]], tuple[GroupedDataset, list[torch.Tensor]]]:
    """Add/remove-one-*client* pair: D = the base rows in clients of 3 rows, D' = D + a client holding only the
    canary (user-level neighbours)."""
    without, with_ = loop_pair()
    base = [torch.arange(i, min(i + FEDAVG_ROWS_PER_CLIENT, len(without)))
            for i in range(0, len(without), FEDAVG_ROWS_PER_CLIENT)]
    return (without, base), (with_, base + [torch.tensor([len(with_) - 1])])


def _fedavg_config(n_clients: int, *, seed: int, noise_fraction: float) -> FedAvgConfig:
    return FedAvgConfig(n_clients=n_clients, clients_per_round=FEDAVG_CLIENTS_PER_ROUND, local_epochs=FEDAVG_LOCAL_EPOCHS,
                        local_batch_size=FEDAVG_ROWS_PER_CLIENT, local_lr=FEDAVG_LOCAL_LR, update_clip=FEDAVG_CLIP,
                        noise_multiplier=LOOP_SIGMA * noise_fraction, epochs=FEDAVG_EPOCHS, delta=DEFAULT_DELTA,
                        seed=seed)


def _fedavg_run(data: GroupedDataset, clients: list[torch.Tensor], *, seed: int, noise_fraction: float):
    """One run of ``train_dpfedavg`` as shipped; (result, canary coordinate at theta_t, the canary client's
    clipped pseudo-gradient coordinate at theta_t) for t = 0..T."""
    x_c, y_c = canary_row()
    coordinates, contributions = [], []

    def watch(t: int, model: torch.nn.Module, state: object) -> None:
        params = parameters_of(model)
        coordinates.append(canary_coordinate(params).detach().clone())
        delta = local_update(model, params, x_c, y_c, epochs=FEDAVG_LOCAL_EPOCHS, batch_size=FEDAVG_ROWS_PER_CLIENT,
                             lr=FEDAVG_LOCAL_LR, generator=torch.Generator())
        flat = torch.cat([v.reshape(-1) for v in delta.values()]).double()
        factor = min(1.0, FEDAVG_CLIP / max(float(flat.norm()), 1e-300))
        contributions.append(canary_coordinate_of_flat(flat, model) * factor)

    config = _fedavg_config(len(clients), seed=seed, noise_fraction=noise_fraction)
    result = train_dpfedavg(audit_model(), data, config, clients=clients, progress=False, callbacks=[watch])
    return result, torch.stack(coordinates), torch.stack(contributions)


def _fedavg_llr(result, coordinates: torch.Tensor, contributions: torch.Tensor, sampling_rate: float) -> float:
    """As :func:`_loop_llr`, per round: z_t = -(theta_{t+1} - theta_t) m / eta_s, u_t the canary client's clipped
    pseudo-gradient coordinate, s_t the released noise scale."""
    config = result.config
    z = (-(coordinates[1:] - coordinates[:-1]) * config.clients_per_round / config.server_lr).double()
    z = z.reshape(len(coordinates) - 1, -1)
    s = np.array([float(record["noise_std"]) for record in result.steps.to_dict("records")])
    return poisson_gaussian_llr(z.numpy(), contributions[:len(s)].double().numpy(), s, sampling_rate=sampling_rate)


def sample_fedavg_trainer(trials: int, *, seed: int, noise_fraction: float, progress: bool = False
                          ) -> MechanismSamples:
    """``trials`` runs of ``train_dpfedavg`` on each of D and D' (:func:`fedavg_pair`: one client more), scored."""
    (without, base), (with_, clients) = fedavg_pair()
    claim_run, _, _ = _fedavg_run(with_, clients, seed=seed, noise_fraction=1.0)
    q = FEDAVG_CLIENTS_PER_ROUND / len(clients)
    seeds = np.random.SeedSequence(seed).generate_state(2 * trials, dtype=np.uint32).reshape(2, trials)
    scores = np.zeros((2, trials))
    for i in tqdm(range(trials), desc="audit dpfedavg (sampled)", disable=not progress, leave=False):
        for side, (data, parts) in enumerate(((without, base), (with_, clients))):
            result, coordinates, contributions = _fedavg_run(data, parts, seed=int(seeds[side, i]),
                                                             noise_fraction=noise_fraction)
            scores[side, i] = _fedavg_llr(result, coordinates, contributions, sampling_rate=q)
    return MechanismSamples(
        scores_without=scores[0], scores_with=scores[1], epsilon_claimed=float(claim_run.epsilon), delta=DEFAULT_DELTA,
        neighbouring="add_remove (one client: user level)",
        setting={"trainer": "training.fedavg.train_dpfedavg", "sampling_rate": q, "steps": int(len(claim_run.steps)),
                 "clients": len(clients), "rows_per_client": FEDAVG_ROWS_PER_CLIENT, "epochs": FEDAVG_EPOCHS,
                 "local_epochs": FEDAVG_LOCAL_EPOCHS, "update_clip": FEDAVG_CLIP,
                 "noise_multiplier": LOOP_SIGMA * noise_fraction, "accountant": "rdp (user level)",
                 "adversary_sees": "theta after every round; released round records"})


# ------------------------------------------------------------------ the sampled registry
def _loop(method: str, mitigation: bool = False) -> Callable[..., MechanismSamples]:
    spec = LoopTrainerSpec(method, mitigation=mitigation)
    return lambda trials, **kw: sample_loop_trainer(spec, trials, **kw)


def _pfld(public_batch: str) -> Callable[..., MechanismSamples]:
    return lambda trials, **kw: sample_pfld_trainer(trials, public_batch=public_batch, **kw)


def _output_perturbation(trials: int, **kw: Any) -> MechanismSamples:
    """Output perturbation releases once (no sampling, one step): its audit as it ships is
    the one-release audit of :mod:`.mechanisms`."""
    samples = sample_output_perturbation(trials, **kw)
    setting = {**samples.setting, "trainer": "privacy.output_perturbation.output_perturbation", "sampling_rate": 1.0,
               "steps": 1}
    return MechanismSamples(samples.scores_without, samples.scores_with, samples.epsilon_claimed, samples.delta,
                            samples.neighbouring, setting)


TWIN_FRACTION = 0.25
LOOP_TRIALS = 500


def _registered_loop_methods() -> dict[str, tuple[Callable[..., MechanismSamples], int, str]]:
    """Every registered method that trains in ``train`` and states its canary rule (``Method.canary``): a new
    method module is audited as it runs with no line here."""
    registered = (methods.get(name) for name in methods.names())
    return {m.name: (_loop(m.name), LOOP_TRIALS, f"train with the {m.name} policy, canary pair of loop_pair")
            for m in registered if m.policy is not None and m.canary is not None}


def sampled_audits() -> dict[str, AuditSpec]:
    """Every trainer audited as it runs, as kit specs read from the registry at the call (a method registered since
    import is there), each with its under-noised twin (``name@0.25``, a control the audit must catch), and PF-LD's
    shared-batch design (a known-broken control: ``expected_consistent=False``)."""
    shipped = {"output-perturbation": (_output_perturbation, 400_000, "output perturbation (one release)"),
               **_registered_loop_methods(),
               "mitigation": (_loop("dpsgd", mitigation=True), LOOP_TRIALS,
                              "train with DP-SGD and paper 001's mitigation objective"),
               "pfld": (_pfld("independent"), LOOP_TRIALS, "train_lagrangian (PF-LD, independent public batch)"),
               "dpfedavg": (lambda trials, **kw: sample_fedavg_trainer(trials, **kw), LOOP_TRIALS,
                            "train_dpfedavg, one client more (user level)")}
    entries = {name: AuditSpec(name, description, fn, trials)
               for name, (fn, trials, description) in shipped.items()}
    entries["pfld-primal-shared-batch"] = AuditSpec(
        "pfld-primal-shared-batch", "PF-LD with the public batch the private one (known broken: reveals who was "
                                    "sampled)", _pfld("shared"), 2000, expected_consistent=False)
    for name, (fn, trials, description) in shipped.items():
        twin = f"{name}@{TWIN_FRACTION:g}"
        entries[twin] = AuditSpec(twin, f"{description}, at {TWIN_FRACTION:g} of its noise", fn, trials,
                                  noise_fraction=TWIN_FRACTION, base=name)
    return entries


#: The entries at import (the shipped methods).
SAMPLED: dict[str, AuditSpec] = sampled_audits()


def audit_sampled(name: str, *, trials: int | None = None, seed: int = 0, confidence: float = 0.95,
                  progress: bool = False) -> dict[str, Any]:
    """Run one sampled audit (the kit's :func:`~dpfair_analysis.testing.specs.audit_spec` of its spec); its JSON row
    (:func:`~dpfair_analysis.verify.audits.registry.sampled_row`, see ``dpfair audit --sampled``).

    ``consistent`` = epsilon_lower <= epsilon_claimed; a shipped entry must be consistent,
    a control must not (``as_expected``)."""
    entries = sampled_audits()
    if name not in entries:
        raise ValueError(f"mechanism must be one of {sorted(entries)}, got {name!r}")
    result = audit_spec(entries[name], trials=trials, seed=seed, confidence=confidence, progress=progress)
    return sampled_row(result, entries[name])
