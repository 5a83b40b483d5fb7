"""From the accumulated noise to each group's predicted cost of privacy, its interval and its chance to be the
most hurt.

Each group's expected accuracy under the noise of both runs gives the cost, split into a clipping and a noise
part (:func:`outcome`: exact for logistic regression, draws otherwise); the 90% interval adds the spread of the
group's rows to the noise draws' (:class:`Prediction`), small groups are widened (:func:`widen_small_groups`,
:data:`MIN_GROUP_ROWS`), and the joint draws give the probability of being the most hurt.

The derivation (steps 3-6): docs/methods/diagnosis.md, the "How dpfair diagnose predicts" page of the
documentation's Methods.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from scipy import stats
from torch.func import functional_call, vmap

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.diagnose.dynamics import Covariance, TrajectoryCache, covariance
from dpfair_analysis.diagnose.mechanisms import Mechanism
from dpfair_analysis.diagnose.plan import Calibration
from dpfair_analysis.diagnose.problem import Problem

Z90 = 1.6448536269514722  # two-sided 90% normal quantile
#: A group with fewer training or evaluation rows than this gets no model-based interval: the spread of its
#: rows' changes (and of its gradients) cannot be estimated from so few, so its interval is the binomial range
#: of its rows' changes (module docstring, step 6) and its reasons say "size" (3 rows once got "+0.0000
#: [0, 0]").
MIN_GROUP_ROWS = 30


@dataclass
class Outcome:
    """One model's correctness on the evaluation rows under its accumulated noise."""

    point: torch.Tensor             # (n,) correct at the expected endpoint, as float 0/1
    expected: torch.Tensor          # (n,) E_zeta[correct]: exact for binary logistic regression, else the draws' mean
    draws: torch.Tensor | None      # (draws, n) correct at theta + zeta, as float 0/1 (None: none drawn)

    def subset(self, rows: torch.Tensor) -> Outcome:
        """The same outcome on rows ``rows`` (positions) only."""
        return Outcome(self.point[rows], self.expected[rows], None if self.draws is None else self.draws[:, rows])


def outcome(problem: Problem, theta: torch.Tensor, noise: Covariance | None, data: GroupedDataset, *, draws: int,
            generator: torch.Generator, chunk: int = 20) -> Outcome:
    """Correctness on ``data`` at theta, its expectation under zeta ~ N(0, Sigma_T) and ``draws`` draws of it."""
    X = data.X.to(torch.float64)
    lin = problem.linear

    def logits_at(t: torch.Tensor) -> torch.Tensor:
        return functional_call(problem.model, problem.unflatten(t), (X,))

    with torch.no_grad():
        point = (logits_at(theta).argmax(1) == data.y).to(torch.float64)
        if noise is None:
            return Outcome(point, point, point.unsqueeze(0).expand(max(draws, 1), -1) if draws else None)
        sampled = None
        if draws:
            zeta = noise.draw(draws, generator)
            if lin is not None and lin.binary:  # the score of every draw at once: x~^T (theta + zeta), layout [w, b]
                Xt = problem.augmented(data)
                positive = (data.y == 1).unsqueeze(1)
                step = max(1, 2 ** 22 // max(len(Xt), 1))
                sampled = torch.cat([((Xt @ (theta + zeta[start:start + step]).T > 0) == positive).T
                                     for start in range(0, draws, step)]).to(torch.float64)
            else:
                if lin is not None:
                    Xt = problem.augmented(data)
                    predicted = torch.cat([torch.einsum("nj,dkj->dnk", Xt, torch.stack(
                        [lin.matrix(t) for t in theta + zeta[start:start + chunk]])).argmax(-1)
                        for start in range(0, draws, chunk)])
                else:
                    predicted = torch.cat([vmap(logits_at)(theta + zeta[start:start + chunk]).argmax(-1)
                                           for start in range(0, draws, chunk)])
                sampled = (predicted == data.y).to(torch.float64)
        if lin is not None and lin.binary:
            Xt = problem.augmented(data)
            score = (Xt @ lin.matrix(theta).T).squeeze(1)
            sign = 2.0 * data.y.to(torch.float64) - 1.0
            sd = noise.score_variance(Xt).clamp(min=0).sqrt()
            margin = sign * score
            # no noise on a row's score: correct iff its margin is positive (a zero score predicts label 0)
            exact = torch.where(margin > 0, 1.0, torch.where(margin < 0, 0.0, (data.y == 0).to(torch.float64)))
            z = margin / sd.clamp(min=1e-300)
            expected = torch.where(sd > 0, torch.special.ndtr(z), exact)
        elif sampled is not None:
            expected = sampled.mean(0)
        else:
            raise ValueError("a model without a closed-form flip probability needs draws > 0")
    return Outcome(point, expected, sampled)


def group_means(values: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Per-group means along the last axis (rows), shape (..., K)."""
    values = values.to(torch.float64)
    one_hot = F.one_hot(group, n_groups).to(torch.float64)
    return values @ one_hot / one_hot.sum(0).clamp(min=1)


@dataclass
class Reference:
    """The non-private run, computed once and shared by every prediction of a diagnosis."""

    trajectory: object
    outcome: Outcome


@dataclass
class Prediction:
    """The predictor's output for one mechanism: per-group frame, run-level facts, joint samples of the costs."""

    table: pd.DataFrame              # group, n_eval, cost, half_width, clip_part, noise_part, acc_nonprivate, ...
    collapsed: bool
    collapse_label: str | None
    noise_per_weight: float          # std of the accumulated Gaussian noise per parameter
    sampling_per_weight: float
    weight_scale: float              # RMS of the private endpoint's parameters
    unstable_directions: int
    steps: int
    integration_steps: int
    mechanism: str
    samples: np.ndarray | None = None   # (draws, K): the cost vector one run would show (step 5)
    sample_blocks: tuple[int, ...] = ()  # pooled over splits: each split's rows of samples, in order


def split_mean(tables: Sequence[pd.DataFrame], columns: Sequence[str]) -> pd.DataFrame:
    r"""The expectation over splits of per-split tables: each group's mean of ``columns`` over the S splits,
    :math:`\bar x_k = \frac{1}{S} \sum_s x_{k,s}` (indexed by group, in the first table's order). What the
    headline's costs are (:func:`~.diagnosis.pool_splits`) and what the recommendations' are averaged with."""
    indexed = [t.set_index("group")[list(columns)] for t in tables]
    stacked = pd.concat(indexed, keys=range(len(indexed)))
    return stacked.groupby(level=1, sort=False).mean()


def predict(problem: Problem, mechanism: Mechanism, reference: Reference, evaluation: GroupedDataset, *,
            draws: int, trajectories: TrajectoryCache, exact: bool, generator: torch.Generator,
            calibration: Calibration, interval: bool = True, integration_steps: int | None = None) -> Prediction:
    """Delta^k for one mechanism against the non-private reference (module docstring, steps 1-6).

    ``interval=False`` (the recommendations) skips the draws where the flip probability is exact: no
    interval, no samples, the same point costs. ``integration_steps``: fewer steps than the cache's for a
    trajectory not yet integrated (the recommendations').
    """
    path = trajectories.get(mechanism, integration_steps=integration_steps)
    noise = covariance(problem, mechanism, path, exact=exact)
    exact_flips = problem.linear is not None and problem.linear.binary
    n_draws = draws if (interval or not exact_flips) else 0
    private = outcome(problem, path.theta, noise, evaluation, draws=n_draws, generator=generator)
    with torch.no_grad():
        predicted = functional_call(problem.model, problem.unflatten(path.theta),
                                    (evaluation.X.to(torch.float64),)).argmax(1)
    labels = torch.unique(predicted)
    collapsed = len(labels) == 1 and len(torch.unique(evaluation.y)) > 1
    facts = dict(collapsed=collapsed, collapse_label=str(problem.label_names[int(labels[0])]) if collapsed else None,
                 noise_per_weight=noise.per_weight("noise"), sampling_per_weight=noise.per_weight("sampling"),
                 weight_scale=float(path.theta.pow(2).mean().sqrt()), unstable_directions=noise.unstable_directions,
                 steps=path.steps, integration_steps=path.integration_steps, mechanism=mechanism.name)
    table, samples = summarise(problem, private, reference.outcome, evaluation.group, draws=n_draws,
                               calibration=calibration, generator=generator)
    return Prediction(table=table, samples=samples, **facts)


def summarise(problem: Problem, private: Outcome, public: Outcome, group: torch.Tensor, *, draws: int,
              calibration: Calibration, generator: torch.Generator) -> tuple[pd.DataFrame, np.ndarray | None]:
    """The per-group table (costs, parts, interval, small-group rule) and the joint cost samples from the two
    runs' outcomes on the same rows (steps 3-6)."""
    K = problem.n_groups
    acc_np_point, acc_point = group_means(public.point, group, K), group_means(private.point, group, K)
    acc_np, acc = group_means(public.expected, group, K), group_means(private.expected, group, K)
    clip_part = acc_point - acc_np_point
    noise_part = (acc - acc_np) - clip_part
    n_eval = torch.bincount(group, minlength=K).to(torch.float64)
    # v_k: the variance over the group's rows of a row's expected change mu_i (step 4); P(change) for the report
    change = private.expected - public.expected
    row_var = (group_means(change ** 2, group, K) - (acc - acc_np) ** 2).clamp(min=0)
    second = private.expected + public.expected - 2 * private.expected * public.expected
    cost = calibration.clip_scale * clip_part + calibration.noise_scale * noise_part
    samples, half = None, torch.full((K,), float("nan"), dtype=torch.float64)
    base_sd = half.clone()
    if draws:
        cost_draws = group_means(private.draws, group, K) - group_means(public.draws[:draws], group, K)
        deviation = cost_draws - cost_draws.mean(0)
        base_sd = (cost_draws.var(0) + row_var / n_eval.clamp(min=1)).sqrt()
        half = Z90 * calibration.widen * base_sd
        rows = torch.randn(draws, K, generator=generator, dtype=torch.float64) * (row_var / n_eval.clamp(min=1)).sqrt()
        samples = (cost + calibration.widen * (deviation + rows)).numpy()
    table = pd.DataFrame({
        "group": list(problem.group_names), "n_eval": n_eval.numpy().astype(int),
        "cost": cost.numpy(), "half_width": half.numpy(), "uncalibrated_half_width": (Z90 * base_sd).numpy(),
        "clip_part": clip_part.numpy(), "noise_part": noise_part.numpy(),
        "acc_nonprivate": acc_np.numpy(), "acc_private": acc.numpy(),
        "acc_private_noiseless": acc_point.numpy(), "acc_nonprivate_noiseless": acc_np_point.numpy(),
        "change_rate": group_means(second, group, K).numpy(), "row_var": row_var.numpy()})
    # never narrower than one of a run's rows either side, never beyond the feasible range [-acc, 1 - acc]
    table["half_width"] = np.maximum(table["half_width"], 1.0 / n_eval.clamp(min=1).numpy())
    table["low"] = np.maximum(table["cost"] - table["half_width"], -table["acc_nonprivate"])
    table["high"] = np.minimum(table["cost"] + table["half_width"], 1 - table["acc_nonprivate"])
    if draws:
        widen_small_groups(table, train_sizes=problem.train_sizes.numpy(), samples=samples, generator=generator)
    else:
        table["too_small"] = (table["n_eval"].to_numpy() < MIN_GROUP_ROWS) | (problem.train_sizes.numpy()
                                                                              < MIN_GROUP_ROWS)
    return table, samples


def small_group_half_width(n_rows: int, change_rate: float, *, level: float = 0.9) -> float:
    """Half-width of the honest interval of a group of ``n_rows`` evaluation rows (module docstring, step 6):
    the upper ``level`` quantile of Binomial(n, p) / n, at least one row, 1 / n."""
    n = max(int(n_rows), 1)
    p = float(min(max(change_rate, 0.0), 1.0))
    upper = float(stats.binom.ppf(0.5 + level / 2, n, p)) if p > 0 else 0.0
    return max(upper, 1.0) / n


def widen_small_groups(table: pd.DataFrame, *, train_sizes: np.ndarray, samples: np.ndarray | None = None,
                       generator: torch.Generator | None = None) -> None:
    """Give every group below :data:`MIN_GROUP_ROWS` training or evaluation rows the honest interval of step 6
    (in place; column ``too_small``; its column of ``samples`` is rescaled to the new width): its point
    prediction is kept, the interval says how much its few rows can move."""
    small = (table["n_eval"].to_numpy() < MIN_GROUP_ROWS) | (train_sizes < MIN_GROUP_ROWS)
    table["too_small"] = small
    if not small.any():
        return
    weights = table["n_eval"].to_numpy(dtype=float)
    population = float(np.average(table["change_rate"], weights=np.maximum(weights, 1e-12)))
    for k in np.flatnonzero(small):
        row = table.iloc[k]
        half = max(small_group_half_width(int(row["n_eval"]), max(float(row["change_rate"]), population)),
                   float(row["half_width"]) if math.isfinite(row["half_width"]) else 0.0)
        acc = float(row["acc_nonprivate"])
        low, high = max(float(row["cost"]) - half, -acc), min(float(row["cost"]) + half, 1.0 - acc)
        if high - low < 1.0 / max(int(row["n_eval"]), 1):   # at a feasible end: keep one row of width
            low, high = (low, low + 1.0 / max(int(row["n_eval"]), 1)) if low <= -acc + 1e-12 else (
                high - 1.0 / max(int(row["n_eval"]), 1), high)
        if samples is not None:  # its draws spread as its interval: 90% of them within +- half
            spread = samples[:, k] - samples[:, k].mean()
            scale = float(np.quantile(np.abs(spread), 0.9))
            if scale <= 0:
                spread = torch.randn(len(spread), generator=generator, dtype=torch.float64).numpy()
                scale = Z90
            samples[:, k] = float(row["cost"]) + spread * (half / scale)
        table.loc[table.index[k], ["low", "high", "half_width"]] = [low, high, (high - low) / 2]
