"""Paper 001 (Tran, Dinh & Fioretto, NeurIPS'21): the settings and the figures, as functions.

The paper's appendix (data sets, model sizes, learning rates) is missing from the copy in
``papers/``; the settings chosen here are stated with each function. The functions take
any :func:`dpfair_analysis.data.load` name: the notebook runs Figures 3, 4 and 7 on Bank
(the paper's data set; ``dpfair data fetch bank --from PATH``) and adds Adult, COMPAS and
synthetic groups where the paper says similar trends hold.

* Figure 1: excess risk vs Hessian trace per group under output perturbation (Thm 1);
* Figure 3: per-group gradient norms after clipping and DP-SGD excess risk vs C;
* Figures 4-5: correlations of input norm, gradient norm, Hessian trace and distance
  to the boundary over DP-SGD training; Figure 6: input norm vs excess risk;
* Theorem 2 tracked during training, with Theorems 3 and 4's predictions checked;
* Figure 7: the mitigation's excess-risk gap per group vs epsilon for several
  (gamma_1, gamma_2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from dp_accounting import dp_event
from torch import nn
from tqdm import tqdm

from dpfair_analysis import data as datasets
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import per_sample_losses
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import calibrate_noise_multiplier, steps_for_epochs
from dpfair_analysis.privacy.output_perturbation import clip_rows_to_norm, train_regularised_erm
from dpfair_analysis.theory import decomposition as thm2
from dpfair_analysis.theory.conditions import (group_gradient_norms, margin_proxy_correlation, theorem3_agreement,
                                               theorem3_condition, theorem4_agreement)
from dpfair_analysis.theory.decomposition import DecompositionTracker
from dpfair_analysis.theory.hessian import group_hessian_traces
from dpfair_analysis.theory.excess_risk import dpsgd_excess_risk, output_perturbation_excess_risk, \
    trace_risk_rank_correlation, with_leading_columns
from dpfair_analysis.theory.latent_factors import LatentFactorTracker, clipped_gradient_norms, \
    input_norm_vs_excess_risk
from dpfair_analysis.training.clipping import NonPrivate, UniformClipping
from dpfair_analysis.training.loop import TrainConfig, schedule, train
from dpfair_analysis.training.mitigation import FairnessLensMitigation
from dpfair_analysis.validation import check_choice, check_device, check_positive

PROFILES = ("quick", "full")

#: a-priori row-norm bounds of each preprocessing (no data look-up): Adult's DPSGD-F
#: features are 6 values in [0, 1] and 4 one-hot blocks, so ||x||^2 <= 10.
PUBLIC_ROW_BOUNDS = {"adult": math.sqrt(10.0)}


@dataclass(frozen=True)
class DPSGDSetting:
    """A DP-SGD run of paper 001 §6-9 (one-hidden-layer network, C = 0.1, sigma = 1).

    The paper fixes C = 0.1 and sigma = 1 (Figs. 4-6) or 5 (Fig. 7) and "a neural network
    with a single hidden layer"; width 16, lr 1.0 (C = 0.1 makes every step short), b =
    256 and the epochs are this toolkit's choices.
    """

    hidden: tuple[int, ...] = (16,)
    clip_bound: float = 0.1
    noise_multiplier: float = 1.0
    lr: float = 1.0
    batch_size: int = 256
    epochs: int = 5
    delta: float = 1e-5

    def config(self, seed: int) -> TrainConfig:
        return TrainConfig(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, delta=self.delta, seed=seed)

    def model(self, data: GroupedDataset, seed: int):
        return build_model("mlp", input_shape=tuple(data.X.shape[1:]), n_classes=data.n_classes, seed=seed,
                           hidden=self.hidden)


def profile_setting(setting: DPSGDSetting, profile: str) -> DPSGDSetting:
    """``full``: the setting as given; ``quick`` (CI): one epoch."""
    check_choice(profile, "profile", PROFILES)
    return setting if profile == "full" else replace(setting, epochs=1)


def load_data(name: str, *, by: str | None = None, rows: int | None = None, seed: int = 0,
              **options) -> GroupedDataset:
    """A data set by name, optionally a seeded stratified subsample of ``rows`` rows (quick profiles)."""
    data = datasets.load(name, **({} if by is None else {"by": by}), **options)
    if rows is not None and rows < len(data):
        data, _ = data.split(test_fraction=1 - rows / len(data), seed=seed)
    return data


def in_unit_ball(data: GroupedDataset, *, name: str, bound: float | None = None) -> GroupedDataset:
    """Rows scaled into the unit ball, as output perturbation's sensitivity needs (||x|| <= 1).

    Divides by the data set's a-priori bound (:data:`PUBLIC_ROW_BOUNDS`) when it has one --
    a constant that does not look at the data -- and otherwise projects each row into the
    ball of radius ``bound`` (a per-record map, no privacy cost) and divides by it.
    """
    if name in PUBLIC_ROW_BOUNDS and bound is None:
        X = data.X / PUBLIC_ROW_BOUNDS[name]
    else:
        bound = check_positive(5.0 if bound is None else bound, "bound")
        X = clip_rows_to_norm(data.X, bound) / bound
    X = clip_rows_to_norm(X, 1.0)  # float rounding only
    return GroupedDataset(X, data.y, data.group, group_names=data.group_names, label_names=data.label_names,
                          feature_names=data.feature_names)


# ------------------------------------------------------------------ Figure 1
def figure1(data: GroupedDataset, *, name: str, epsilons: Sequence[float] = tuple(np.geomspace(0.005, 0.5, 7)),
            delta: float = 1e-5, l2: float = 1e-3, draws: int = 1000, seed: int = 0,
            progress: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Output perturbation on logistic regression: measured R_a beside Theorem 1, and Spearman(Tr H_a, R_a).

    lambda = 1e-3 (the paper's value is in its missing appendix; 1e-2 leaves Adult's
    model predicting the majority class). Rows scaled by :func:`in_unit_ball`.
    """
    data = in_unit_ball(data, name=name)
    model = build_model("logreg", input_shape=tuple(data.X.shape[1:]), n_classes=data.n_classes)
    table = output_perturbation_excess_risk(model, data, epsilons=epsilons, delta=delta, l2=l2, draws=draws,
                                            seed=seed, progress=progress)
    return table, trace_risk_rank_correlation(table)


# ------------------------------------------------------------------ DP-SGD runs
def _train_model(data: GroupedDataset, setting: DPSGDSetting, seed: int, *, private: bool,
                 noise_multiplier: float | None = None, objective=None, callbacks=()):
    model = setting.model(data, seed)
    policy = UniformClipping(setting.clip_bound, setting.noise_multiplier if noise_multiplier is None
                             else noise_multiplier) if private else NonPrivate()
    result = train(model, data, policy, setting.config(seed), progress=False, objective=objective,
                   callbacks=callbacks)
    return result


def dpsgd_group_excess_risk(data: GroupedDataset, setting: DPSGDSetting, *, seeds: Sequence[int],
                            progress: bool = False) -> pd.DataFrame:
    """R_a of DP-SGD (``setting``) paired by seed with non-private SGD on the same batches."""
    return dpsgd_excess_risk(lambda s: _train_model(data, setting, s, private=True).model,
                             lambda s: _train_model(data, setting, s, private=False).model,
                             data, seeds=seeds, progress=progress)


def figure3(data: GroupedDataset, setting: DPSGDSetting, *, clip_bounds: Sequence[float] = (0.01, 0.1, 1.0),
            seeds: Sequence[int] = (0, 1), progress: bool = False) -> pd.DataFrame:
    """Per group and C: mean gradient norm before/after clipping (Fig. 3 top) and DP-SGD's R_a (bottom).

    One DP-SGD model per (C, seed); norms are evaluated at the seed-0 model trained with
    that C; R_a from :func:`dpsgd_group_excess_risk`.
    """
    frames = []
    for c in tqdm(clip_bounds, desc="Figure 3: C", disable=not progress, leave=False):
        at_c = replace(setting, clip_bound=c)
        risk = dpsgd_group_excess_risk(data, at_c, seeds=seeds)
        model = _train_model(data, at_c, seeds[0], private=True).model
        norms = clipped_gradient_norms(model, data, [c])
        frames.append(norms.merge(risk[["group", "excess_risk", "stderr", "ci_low", "ci_high"]], on="group"))
    return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------------------ Figures 4-6
def latent_factors(data: GroupedDataset, setting: DPSGDSetting, *, seed: int = 0, eval_size: int = 1000,
                   evaluations_per_epoch: int = 2) -> dict[str, pd.DataFrame | dict]:
    """Figures 4-5 (correlations over DP-SGD training) and Figure 6 (input norm vs excess risk).

    Returns {"correlations": tracker frame, "figure6": group/bin table, "figure6_correlations":
    dict, "epsilon": float}. Figure 6's excess risk is per row: the DP-SGD model's loss minus
    the non-private model's (same seed and batches).
    """
    total, _ = schedule(len(data), setting.config(seed))
    per_epoch = total / setting.epochs
    tracker = LatentFactorTracker(data, every=max(1, int(per_epoch // evaluations_per_epoch)), eval_size=eval_size,
                                  seed=seed, steps_per_epoch=per_epoch)
    private = _train_model(data, setting, seed, private=True, callbacks=[tracker])
    tracker.finish()
    reference = _train_model(data, setting, seed, private=False)
    with torch.no_grad():
        excess = (per_sample_losses(private.model, data.X, data.y)
                  - per_sample_losses(reference.model, data.X, data.y)).numpy()
    by_group = {name: float(excess[(data.group == k).numpy()].mean()) for k, name in enumerate(data.group_names)}
    table, correlations = input_norm_vs_excess_risk(data, by_group, sample_excess=excess, bins=10)
    return {"correlations": tracker.frame, "figure6": table, "figure6_correlations": correlations,
            "epsilon": private.epsilon}


# ------------------------------------------------------------------ Theorem 2 over training
def decomposition_over_training(data: GroupedDataset, setting: DPSGDSetting, *, seed: int = 0,
                                eval_size: int = 2000, evaluations: int = 10) -> dict[str, pd.DataFrame]:
    """Theorem 2's terms per group along a DP-SGD run, and Theorems 3-4 checked at each evaluation.

    The terms are computed on a fixed seeded subset of ``eval_size`` training rows (the
    Hessians are explicit), at ``evaluations`` iterates spread over the run.
    """
    total, _ = schedule(len(data), setting.config(seed))
    subset = load_subset(data, eval_size, seed)
    tracker = DecompositionTracker(subset, lr=setting.lr, clip_bound=setting.clip_bound,
                                   noise_multiplier=setting.noise_multiplier,
                                   sampling_rate=setting.batch_size / len(data), every=max(1, total // evaluations))
    model_at: dict[int, dict[str, torch.Tensor]] = {}

    def keep(step: int, model, state) -> None:
        if step % tracker.every == 0:
            model_at[step] = {k: v.detach().clone() for k, v in model.named_parameters()}

    result = _train_model(data, setting, seed, private=True, callbacks=[tracker, keep])
    terms = tracker.table()
    checks = []
    for step, params in model_at.items():
        at = terms[terms.step == step]
        norms = group_gradient_norms(result.model, subset, params=params)
        condition = theorem3_condition(dict(zip(norms.group, norms.grad_norm)), dict(zip(norms.group, norms.p)),
                                       clip_bound=setting.clip_bound)
        agree3 = theorem3_agreement(condition, at[["group", "clip"]])
        agree3.insert(0, "theorem", "3")
        agree4 = theorem4_agreement(at.rename(columns={"hessian_trace": "trace"})[["group", "trace"]],
                                    at[["group", "noise"]])
        agree4.insert(0, "theorem", "4")
        for frame in (agree3, agree4):
            frame.insert(0, "step", step)
            checks.append(frame)
    return {"terms": terms, "checks": pd.concat(checks, ignore_index=True) if checks else pd.DataFrame(),
            "epsilon": result.epsilon}


def load_subset(data: GroupedDataset, rows: int, seed: int) -> GroupedDataset:
    """A seeded uniform subset of ``rows`` rows (all rows if fewer)."""
    if rows >= len(data):
        return data
    index = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))[:rows].sort().values
    return data.subset(index)


# ------------------------------------------------------------------ Figure 7: mitigation
GAMMAS = ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0))


def mitigation_noise(epsilon: float, *, setting: DPSGDSetting, n: int, stats_ratio: float = 2.0,
                     count_noise: float = 10.0) -> tuple[float, float]:
    """(sigma, sigma_s) such that the mitigation's whole run meets (epsilon, delta).

    The run releases the group counts once (multiplier ``count_noise``) and, each step,
    the gradient (sigma) and the statistics (sigma_s = ``stats_ratio`` sigma) on the same
    batch, i.e. one sampled Gaussian with joint multiplier sigma / sqrt(1 + 1/ratio^2).
    """
    q = setting.batch_size / n
    steps = steps_for_epochs(n, setting.batch_size, setting.epochs)
    joint = calibrate_noise_multiplier(epsilon, setting.delta, sampling_rate=q, steps=steps,
                                       other_events=[dp_event.GaussianDpEvent(count_noise)])
    sigma = joint * math.sqrt(1 + 1 / stats_ratio ** 2)
    return sigma, stats_ratio * sigma


def figure7(data: GroupedDataset, setting: DPSGDSetting, *, epsilons: Sequence[float] = (0.5, 1.0, 2.0, 5.0),
            gammas: Sequence[tuple[float, float]] = GAMMAS, seeds: Sequence[int] = (0, 1, 2),
            stats_ratio: float = 2.0, count_noise: float = 10.0, progress: bool = False) -> pd.DataFrame:
    """Per-group excess risk and gap vs epsilon for each (gamma_1, gamma_2) (paper 001 Fig. 7).

    (0, 0) is plain DP-SGD (no statistics released, so all its budget goes to the
    gradient); the others are DP-SGD on the mitigation objective with the noise of
    :func:`mitigation_noise` -- every run meets the same (epsilon, delta). R_a is paired by
    seed with non-private SGD on the plain loss. The paper fixes sigma = 5 and varies
    epsilon; here sigma is calibrated to each epsilon at a fixed number of epochs.
    """
    n = len(data)
    q, steps = setting.batch_size / n, steps_for_epochs(n, setting.batch_size, setting.epochs)
    references = {s: _train_model(data, setting, s, private=False).model for s in seeds}
    frames = []
    jobs = [(e, g) for e in epsilons for g in gammas]
    for epsilon, (gamma1, gamma2) in tqdm(jobs, desc="Figure 7", disable=not progress, leave=False):
        if gamma1 == 0 and gamma2 == 0:
            sigma = calibrate_noise_multiplier(epsilon, setting.delta, sampling_rate=q, steps=steps)

            def run(seed: int, sigma: float = sigma):
                return _train_model(data, setting, seed, private=True, noise_multiplier=sigma).model
            sigma_s = math.nan
        else:
            sigma, sigma_s = mitigation_noise(epsilon, setting=setting, n=n, stats_ratio=stats_ratio,
                                              count_noise=count_noise)

            def run(seed: int, sigma: float = sigma, sigma_s: float = sigma_s, g1: float = gamma1,
                    g2: float = gamma2):
                objective = FairnessLensMitigation(g1, g2, setting.clip_bound, stats_noise_multiplier=sigma_s,
                                                   count_noise_multiplier=count_noise)
                return _train_model(data, setting, seed, private=True, noise_multiplier=sigma,
                                    objective=objective).model
        table = dpsgd_excess_risk(run, references.__getitem__, data, seeds=seeds, progress=False)
        frames.append(with_leading_columns(table, epsilon=epsilon, gamma1=gamma1, gamma2=gamma2, sigma=sigma,
                                           sigma_stats=sigma_s))
    return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------------------ the commands' experiments
TRACE_POINTS = ("trained", "init")


def hessian_traces_at(data: GroupedDataset, *, model: str = "logreg", at: str = "trained", method: str | None = None,
                      probes: int = 60, seed: int = 0, l2: float = 1e-3, hidden: int = 32,
                      train_epochs: int = 2, device: str = "cpu") -> tuple[pd.DataFrame, str]:
    """Per-group Tr(H_a) of each group's mean cross-entropy (``dpfair hessian``), and where the model was evaluated.

    ``at="trained"``: logreg at the regularised ERM minimiser (lambda = ``l2``, every parameter penalised:
    the point at which Theorem 1 expands the loss); mlp after a short non-private SGD run (``train_epochs``,
    batch 256, lr 0.1, Poisson sampling, seeded; one hidden layer of ``hidden`` ReLU units: the paper's
    network). ``at="init"``: the seeded initialisation. ``method`` defaults to the closed form for logreg
    and GGN for the MLP (exact for ReLU nets). Returns the rows {group, n, trace, stderr, method} and a
    description of the point. ``device``: where the model is trained and the traces computed (a plain
    ``.to(device)``; the random draws stay on CPU generators, so the numbers do not depend on it).
    """
    check_choice(at, "at", TRACE_POINTS)
    check_device(device)
    method = method or ("closed" if model == "logreg" else "ggn")
    net = build_model(model, input_shape=data.X.shape[1:], n_classes=data.n_classes, seed=seed, hidden=(hidden,))
    params, where = None, "init"
    if at == "trained" and model == "logreg":
        params = train_regularised_erm(net, data, l2=l2).params
        where = f"regularised ERM minimiser, l2={l2}"
    elif at == "trained":
        batch = min(256, len(data))
        train(net, data, NonPrivate(), TrainConfig(epochs=train_epochs, batch_size=batch, lr=0.1, seed=seed,
                                                   device=device), progress=False)
        where = f"non-private SGD ({train_epochs} epoch(s), batch {batch}, lr 0.1)"
    if params is None:
        params = {k: v.detach().to(torch.float64) for k, v in net.named_parameters()}
    params = {k: v.to(device) for k, v in params.items()}
    table = group_hessian_traces(net.to(device), data.to(device), method=method, params=params, probes=probes,
                                 generator=seed)
    rows = pd.DataFrame([{"group": str(r.group), "n": int(r.n), "trace": float(r.trace), "stderr": float(r.stderr),
                          "method": method} for r in table.itertuples()])
    return rows, where


def dpsgd_excess_risk_by_epsilon(data: GroupedDataset, setting: DPSGDSetting, *, epsilons: Sequence[float],
                                 seeds: Sequence[int], progress: bool = False) -> pd.DataFrame:
    """``dpfair excess-risk --mechanism dpsgd``: for each epsilon, the noise multiplier calibrated to it for the
    setting's run (Poisson sampling, batch capped at n), then :func:`dpsgd_group_excess_risk` over ``seeds``
    (private runs paired by seed with SGD). Rows carry epsilon and sigma."""
    batch = min(setting.batch_size, len(data))
    setting = replace(setting, batch_size=batch)
    steps = steps_for_epochs(len(data), batch, setting.epochs)
    frames = []
    for epsilon in epsilons:
        sigma = calibrate_noise_multiplier(epsilon, setting.delta, sampling_rate=batch / len(data), steps=steps)
        table = dpsgd_group_excess_risk(data, replace(setting, noise_multiplier=sigma), seeds=seeds,
                                        progress=progress)
        frames.append(with_leading_columns(table, epsilon=epsilon, sigma=sigma))
    return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------------------ summaries and checks of the notebook
def figure1_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per data set and epsilon of a Figure 1 table (with a ``data`` column): the noise std,
    Theorem 1's largest relative error with the mean-loss Hessian, and the median ratio of
    the printed group-sum-Hessian prediction to the measured excess risk."""
    return table.groupby(["data", "epsilon"]).apply(lambda t: pd.Series({
        "noise_std": t.noise_std.iloc[0], "max relative error (mean H)": t.relative_error.max(),
        "sum-H / measured (median)": (t.predicted_risk_sum_hessian / t.excess_risk).median()}),
        include_groups=False)


def theorem2_toy_data(n: int = 200, *, seed: int = 0) -> GroupedDataset:
    """Two groups in 3 features, float64: group b (30%) has inputs 3x larger; a noisy linear label."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    group = (torch.rand(n, generator=g) < 0.3).long()
    X[group == 1] *= 3
    y = (X @ torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
         + torch.randn(n, generator=g, dtype=torch.float64) > 0).long()
    return GroupedDataset(X, y, group, group_names=("a", "b"), label_names=("0", "1"))


def theorem2_check(*, draws: int = 20_000, data: GroupedDataset | None = None) -> pd.DataFrame:
    """Theorem 2 (paper 001 Eq. 4) for one DP-SGD step, term by term, against a Monte Carlo
    of ``draws`` steps on the same batches (:mod:`dpfair_analysis.theory.decomposition`).

    Two models on :func:`theorem2_toy_data`: a linear model with squared loss, where the
    second-order expansion is exact (lr 0.3, C = 1, sigma = 1, b = 20), and logistic
    regression (lr 0.05, C = 0.5, sigma = 4, b = 20). One row per (model, group) of
    :func:`~dpfair_analysis.theory.decomposition.compare_with_simulation`.
    """
    toy = theorem2_toy_data() if data is None else data
    with torch.random.fork_rng():  # nn.Linear draws its initial weights from the global generator
        torch.manual_seed(0)
        linear = nn.Linear(toy.n_features, 1).double()
    logistic = build_model("logreg", input_shape=(toy.n_features,), n_classes=2).double()
    setups = [("quadratic (exact Taylor)", linear, thm2.squared_error,
               {"lr": 0.3, "clip_bound": 1.0, "noise_multiplier": 1.0, "batch_size": 20}),
              ("logistic regression", logistic, torch.nn.functional.cross_entropy,
               {"lr": 0.05, "clip_bound": 0.5, "noise_multiplier": 4.0, "batch_size": 20})]
    checks = {}
    for label, model, loss, kw in setups:
        moments = thm2.StepMoments(model, toy, clip_bound=kw["clip_bound"], loss_fn=loss)
        predicted = thm2.one_step_decomposition(moments, lr=kw["lr"], noise_multiplier=kw["noise_multiplier"],
                                                batch_size=kw["batch_size"])
        measured = thm2.simulate_one_step(model, toy, draws=draws, generator=torch.Generator().manual_seed(1),
                                          loss_fn=loss, **kw)
        checks[label] = thm2.compare_with_simulation(predicted, measured)
    return pd.concat(checks, names=["model"]).reset_index(level=0)


def theorem5_margin_check(data: GroupedDataset, *, name: str, l2: float = 1e-3, rows: int = 5000) -> dict:
    """Theorem 5 (paper 001) on a trained model: the correlation between each row's distance
    to the decision boundary and the proxy 1 − Σ f_k², for the regularised logistic
    regression of Figure 1 (rows in the unit ball, ``l2``), on the first ``rows`` rows."""
    unit = in_unit_ball(data, name=name)
    model = build_model("logreg", input_shape=(unit.n_features,), n_classes=2)
    params = train_regularised_erm(model, unit, l2=l2).params
    with torch.no_grad():
        for key, value in model.named_parameters():
            value.copy_(params[key])
    return margin_proxy_correlation(model, unit.X[:rows])
