"""Excessive risk R_a and its gap xi_a, measured by Monte Carlo (paper 001, Eqs. (1)-(3)).

For a mechanism releasing random parameters theta~ and the non-private theta*,

    R_a = E_{theta~}[ L(theta~; D_a) ] - L(theta*; D_a),      xi_a = |R_a - R|      (1), (2)

with L(theta; D_a) the MEAN cross-entropy of group a (the data loss: the model's
data-free penalty is left out, it would add the same amount to every group) and R the
population's R. Both are estimated from independent draws of the mechanism with a
normal-approximation confidence interval; the gap's interval comes from the per-draw
paired difference (R_a - R is estimated draw by draw, which removes most of the noise
shared by the group and the population).

Theorem 1 (output perturbation, theta~ = theta* + N(0, s^2 I), s = Delta sigma) predicts

    R_a ~ (1/2) s^2 Tr(H_a),        xi_a ~ (1/2) s^2 |Tr(H_a) - Tr(H)|,            (3)

from the second-order Taylor expansion of L(theta* + z; D_a) (the linear term has mean
zero). That derivation holds for H_a = Hessian of the group's MEAN loss -- the quantity
whose expectation R_a measures. The paper prints H_a as the Hessian of the group SUM;
with it the prediction scales with |D_a| and is off by the factor |D_a| (the tables
here carry both, ``predicted_risk`` and ``predicted_risk_sum_hessian``, so the
measurement decides). The expansion needs s small against the curvature scale of the
loss; at large s (small epsilon) the loss grows like s, not s^2, and the prediction
overshoots -- ``relative_error`` shows where it holds.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from scipy import stats
from torch import nn
from torch.func import functional_call, vmap
from tqdm import tqdm

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.metrics import group_accuracy
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.privacy.output_perturbation import (certified_sensitivity, check_output_perturbation_assumptions,
                                                         gaussian_sigma, perturb, train_regularised_erm)
from dpfair_analysis.theory.hessian import group_hessian_traces
from dpfair_analysis.validation import check_delta, check_fraction, check_positive, check_positive_int, check_seed

Params = Mapping[str, torch.Tensor]


# ------------------------------------------------------------------ group losses
def group_losses(model: nn.Module, data: GroupedDataset, params: Params | None = None) -> torch.Tensor:
    """[L(theta; D), L(theta; D_1), ..., L(theta; D_K)]: population and group mean cross-entropy.

    Shape (K + 1,); an empty group gives NaN. Evaluated in the dtype of ``params``.
    """
    params = {k: v.detach() for k, v in (dict(model.named_parameters()) if params is None else params).items()}
    return group_losses_over_draws(model, data, {k: v.unsqueeze(0) for k, v in params.items()})[0]


def group_losses_over_draws(model: nn.Module, data: GroupedDataset, draws: Params, *,
                            chunk_size: int = 32) -> torch.Tensor:
    """Population and group mean losses for each of R parameter draws, shape (R, K + 1).

    ``draws`` maps every trainable parameter name to a tensor with a leading draw
    dimension R (e.g. from :func:`~dpfair_analysis.privacy.output_perturbation.perturb`).
    Vectorised with ``vmap(functional_call)`` over ``chunk_size`` draws at a time.
    """
    if not isinstance(data, GroupedDataset):
        raise TypeError(f"data must be a GroupedDataset, got {type(data).__name__}")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    names = list(draws)
    if not names:
        raise ValueError("draws has no parameters")
    count = int(draws[names[0]].shape[0])
    dtype = draws[names[0]].dtype
    X, y = data.X.to(dtype), data.y
    sizes = data.group_sizes().to(dtype)

    def losses(p: dict[str, torch.Tensor]) -> torch.Tensor:
        per_sample = F.cross_entropy(functional_call(model, p, (X,)), y, reduction="none")
        sums = torch.zeros(data.n_groups, dtype=dtype).index_add(0, data.group, per_sample)
        return torch.cat([per_sample.mean().unsqueeze(0), sums / sizes])

    batched = vmap(losses)
    out = [batched({k: draws[k][i:i + chunk_size] for k in names}) for i in range(0, count, chunk_size)]
    return torch.cat(out).detach()


def excess_risk_table(private_losses: torch.Tensor, reference_losses: torch.Tensor, *,
                      group_names: Sequence[str], group_sizes: Sequence[int],
                      confidence: float = 0.95) -> pd.DataFrame:
    """R_a and the signed gap R_a - R, each with a standard error and a confidence interval.

    ``private_losses`` has shape (R, K + 1) (one row per draw of the mechanism, column 0 the
    population) and ``reference_losses`` shape (K + 1,) or (R, K + 1) (paired: the
    non-private run that shares draw r's randomness, e.g. DP-SGD vs SGD on the same
    batches). The estimate is the mean over draws of the per-draw difference d_r, its
    standard error sd(d) / sqrt(R), the interval mean +- z_{(1+c)/2} se. ``gap`` is the
    signed R_a - R (from the per-draw paired difference); xi_a = |gap|.
    """
    confidence = check_fraction(confidence, "confidence", open_high=True)
    private_losses = torch.as_tensor(private_losses, dtype=torch.float64)
    if private_losses.ndim != 2 or private_losses.shape[1] != len(group_names) + 1:
        raise ValueError(f"private_losses must have shape (draws, {len(group_names) + 1}), got "
                         f"{tuple(private_losses.shape)}")
    draws = private_losses.shape[0]
    if draws < 2:
        raise ValueError(f"need at least 2 draws for a standard error, got {draws}")
    risk = (private_losses - torch.as_tensor(reference_losses, dtype=torch.float64)).numpy()
    gap = risk - risk[:, :1]
    z = stats.norm.ppf(0.5 + confidence / 2)
    rows = []
    for j, (name, n) in enumerate(zip(["all", *group_names], [int(sum(group_sizes)), *group_sizes])):
        mean, se = float(risk[:, j].mean()), float(risk[:, j].std(ddof=1) / math.sqrt(draws))
        gap_mean, gap_se = float(gap[:, j].mean()), float(gap[:, j].std(ddof=1) / math.sqrt(draws))
        rows.append({"group": name, "n": n, "draws": draws, "excess_risk": mean, "stderr": se,
                     "ci_low": mean - z * se, "ci_high": mean + z * se, "gap": gap_mean, "gap_stderr": gap_se,
                     "gap_ci_low": gap_mean - z * gap_se, "gap_ci_high": gap_mean + z * gap_se})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ Theorem 1
def theorem1_prediction(trace: float | np.ndarray, noise_std: float) -> float | np.ndarray:
    """(1/2) s^2 Tr(H_a): Theorem 1's excess risk of output perturbation with noise std s (Eq. 3).

    ``noise_std`` is the absolute standard deviation s = Delta sigma of every coordinate
    of the noise; ``trace`` is Tr(H_a) of the group's mean loss (see the module docstring).
    """
    return 0.5 * check_positive(noise_std, "noise_std") ** 2 * np.asarray(trace, dtype=float)


def output_perturbation_excess_risk(model: LogisticRegression, data: GroupedDataset, *, epsilons: Sequence[float],
                                    delta: float = 1e-5, l2: float, bound: float = 1.0, draws: int = 1000,
                                    seed: int = 0, calibration: str = "analytic", gtol: float = 1e-10,
                                    confidence: float = 0.95, antithetic: bool = True,
                                    progress: bool = True) -> pd.DataFrame:
    """Measured R_a, xi_a of output perturbation beside Theorem 1, for each epsilon (paper 001 Fig. 1).

    Solves the regularised ERM once (theta*, :func:`train_regularised_erm`), computes the
    sensitivity the mechanism calibrates on (:func:`certified_sensitivity`, which needs
    ||x_i|| <= ``bound``), and for each epsilon draws ``draws`` releases theta* + s Z with
    s = :func:`gaussian_sigma` (epsilon, delta, Delta). The same standard-normal Z are used
    for every epsilon (common random numbers: each epsilon's estimate is still unbiased,
    and curves over epsilon are smooth). Group traces Tr(H_a) are exact (closed form) at
    theta*.

    With ``antithetic`` (default) each draw z is paired with its mirror -z and the pair's
    mean loss is one sample: the noise is symmetric, so the estimate stays unbiased, and
    the first-order term <grad L_a(theta*), z> -- which has mean zero but dominates the
    variance when s is small, because theta* minimises the *regularised* population loss,
    not L_a -- cancels exactly. ``draws`` counts pairs then (2 x draws evaluations).

    Returns
    -------
    pandas.DataFrame
        One row per (epsilon, group): epsilon, delta, sensitivity, noise_std, group, n,
        excess_risk, stderr, ci_low, ci_high, gap, gap_stderr, gap_ci_low, gap_ci_high,
        trace (Tr of the mean-loss Hessian), predicted_risk = s^2 Tr/2, predicted_gap =
        s^2 |Tr_a - Tr|/2, predicted_risk_sum_hessian (the paper's printed H_a, the group
        sum: n_a times larger), relative_error = |excess_risk - predicted_risk| /
        predicted_risk, and the solution's accuracy per group.
    """
    epsilons = [check_positive(e, "epsilons") for e in epsilons]
    if not epsilons:
        raise ValueError("epsilons must list at least one epsilon > 0")
    check_delta(delta)
    draws = check_positive_int(draws, "draws")
    seed = check_seed(seed)
    check_output_perturbation_assumptions(data.X, bound=bound)
    solution = train_regularised_erm(model, data, l2=l2, gtol=gtol)
    if not solution.converged:
        raise RuntimeError(f"ERM solver stopped at ||grad J|| = {solution.grad_norm:.3g} > gtol={gtol}")
    sensitivity, _ = certified_sensitivity(model, solution, n=len(data), bound=bound, gtol=gtol)
    reference = group_losses(model, data, solution.params)
    traces = group_hessian_traces(model, data, method="closed", params=solution.params)
    accuracy = _group_accuracy(model, data, solution.params)
    frames = []
    for epsilon in tqdm(epsilons, desc="output perturbation", disable=not progress, leave=False):
        noise_std = gaussian_sigma(epsilon, delta, sensitivity, calibration=calibration)
        released = perturb(solution.params, noise_std, draws=draws, generator=torch.Generator().manual_seed(seed))
        losses = group_losses_over_draws(model, data, released)
        if antithetic:
            mirrored = {k: 2 * solution.params[k].unsqueeze(0) - v for k, v in released.items()}
            losses = 0.5 * (losses + group_losses_over_draws(model, data, mirrored))
        table = excess_risk_table(losses, reference,
                                  group_names=data.group_names, group_sizes=data.group_sizes().tolist(),
                                  confidence=confidence)
        table = table.merge(traces[["group", "trace"]], on="group")
        population_trace = float(traces.loc[traces.group == "all", "trace"].iloc[0])
        table["predicted_risk"] = theorem1_prediction(table["trace"].to_numpy(), noise_std)
        table["predicted_gap"] = theorem1_prediction(np.abs(table["trace"].to_numpy() - population_trace), noise_std)
        table["predicted_risk_sum_hessian"] = table["predicted_risk"] * table["n"]
        table["relative_error"] = (table["excess_risk"] - table["predicted_risk"]).abs() / table["predicted_risk"]
        table["accuracy"] = table["group"].map(accuracy)
        frames.append(with_leading_columns(table, epsilon=epsilon, delta=delta, sensitivity=sensitivity,
                                           noise_std=noise_std))
    return pd.concat(frames, ignore_index=True)


def with_leading_columns(table: pd.DataFrame, **values: object) -> pd.DataFrame:
    """``table`` with constant columns ``values`` (in the order given) put first: the settings of a sweep's row."""
    return pd.concat([pd.DataFrame({k: [v] * len(table) for k, v in values.items()}, index=table.index), table],
                     axis=1)


def _group_accuracy(model: nn.Module, data: GroupedDataset, params: Params) -> dict[str, float]:
    with torch.no_grad():
        X = data.X.to(next(iter(params.values())).dtype)
        predictions = functional_call(model, dict(params), (X,)).argmax(1)
    table = group_accuracy(data.y.numpy(), predictions.numpy(), data.group.numpy(), group_names=data.group_names)
    return dict(zip(table["group"], table["accuracy"].astype(float)))


# ------------------------------------------------------------------ DP-SGD
def dpsgd_excess_risk(private_run: Callable[[int], nn.Module], reference_run: Callable[[int], nn.Module],
                      data: GroupedDataset, *, seeds: Sequence[int], confidence: float = 0.95,
                      progress: bool = True, label: str = "dpsgd") -> pd.DataFrame:
    """R_a of a private training run by repeated runs, paired with non-private runs (paper 001 Eq. 1).

    ``private_run(seed)`` and ``reference_run(seed)`` train and return a model; draw r is
    the pair for seeds[r] (the same seed gives both the same batches, so the paired
    difference L(theta~_r; D_a) - L(theta_r; D_a) isolates what clipping and noise did).
    Losses are the group mean cross-entropies on ``data`` (the training set: excess
    *empirical* risk, as in the paper).
    """
    seeds = [check_seed(s) for s in seeds]
    if len(seeds) < 2:
        raise ValueError(f"seeds must list at least 2 seeds for a confidence interval, got {len(seeds)}")
    private, reference = [], []
    for seed in tqdm(seeds, desc=f"{label} runs", disable=not progress, leave=False):
        private.append(group_losses(private_run(seed), data))
        reference.append(group_losses(reference_run(seed), data))
    return excess_risk_table(torch.stack(private), torch.stack(reference), group_names=data.group_names,
                             group_sizes=data.group_sizes().tolist(), confidence=confidence)


# ------------------------------------------------------------------ Figure 1
def trace_risk_rank_correlation(table: pd.DataFrame) -> pd.DataFrame:
    """Spearman rank correlation between Tr(H_a) and measured R_a across groups, per epsilon (Fig. 1).

    ``table`` is :func:`output_perturbation_excess_risk`'s output; the population row is
    left out. With two groups the correlation is +-1 (or NaN on a tie).
    """
    rows = []
    for epsilon, part in table[table.group != "all"].groupby("epsilon", sort=True):
        rho = stats.spearmanr(part["trace"], part["excess_risk"]).statistic if len(part) > 1 else math.nan
        rows.append({"epsilon": epsilon, "groups": len(part), "spearman": float(rho)})
    return pd.DataFrame(rows)
