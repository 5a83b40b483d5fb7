"""From the accumulated noise to each group's predicted cost of privacy and its interval.

3. **Accuracy** instead of loss. Draw zeta ~ N(0, Sigma_T) (and zeta_np for the non-private run, from
   :mod:`.dynamics`) and evaluate each group's accuracy on the evaluation rows:

       Delta^k = E[acc_k(theta_bar_T + zeta)] - E[acc_k(theta_T + zeta_np)]
               = [acc_k(theta_bar_T) - acc_k(theta_T)]                      (clipping part)
               + [E acc_k(theta_bar_T + zeta) - acc_k(theta_bar_T)] - [the same for SGD]   (noise part)

   A row flips when the noise moves its logit margin across 0: rows near the boundary (paper 001 Thm 5,
   1 - sum f^2 large) and with large inputs (Example 3, Tr(H_i) proportional to ||x||^2) flip first --
   Theorem 4's "larger Hessian trace, larger noise term" in accuracy units.
4. **Interval.** Delta^k +- 1.645 w sqrt(Var_zeta[Delta^k] + v_k / n_k): the spread over noise draws, plus
   the sampling variance of a mean over the group's n_k evaluation rows (v_k: the variance of a row's
   change of correctness), widened by w (1 unless calibrated). A :class:`~.plan.Calibration` (fitted on
   *other* data sets only: leave one data set out) may also rescale the two parts,
   Delta^k = a clip_k + b noise_k. A group with fewer than :data:`MIN_GROUP_ROWS` training or evaluation
   rows gets the whole feasible range of a cost instead (:func:`widen_small_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.diagnose.dynamics import Covariance, Trajectory, covariance, trajectory
from dpfair_analysis.diagnose.mechanisms import Mechanism
from dpfair_analysis.diagnose.plan import Calibration
from dpfair_analysis.diagnose.problem import Problem

Z90 = 1.6448536269514722  # two-sided 90% normal quantile
#: A group with fewer training or evaluation rows than this gets no point interval: the spread of its rows'
#: changes (and of its gradients) cannot be estimated from so few, so its interval is the whole feasible
#: range [-acc, 1 - acc] of a cost and its reasons say "size" (issue 34: 3 rows once got "+0.0000 [0, 0]").
MIN_GROUP_ROWS = 30


def correctness(problem: Problem, theta: torch.Tensor, covariance: Covariance | None, data: GroupedDataset, *,
                 draws: int, generator: torch.Generator, chunk: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct at theta (n,), correct at theta + zeta for each draw (draws, n)) on ``data``, as booleans."""
    X = data.X.to(torch.float64)

    def logits_at(t: torch.Tensor) -> torch.Tensor:
        return functional_call(problem.model, problem.unflatten(t), (X,))

    with torch.no_grad():
        point = logits_at(theta).argmax(1) == data.y
        if covariance is None:
            return point, point.unsqueeze(0).expand(draws, -1)
        out = []
        for start in range(0, draws, chunk):
            zeta = covariance.draw(min(chunk, draws - start), generator)
            logits = vmap(logits_at)(theta + zeta)
            out.append(logits.argmax(-1) == data.y)
    return point, torch.cat(out)


def group_means(values: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Per-group means along the last axis (rows), shape (..., K)."""
    values = values.to(torch.float64)
    one_hot = F.one_hot(group, n_groups).to(torch.float64)
    return values @ one_hot / one_hot.sum(0).clamp(min=1)


@dataclass
class Prediction:
    """The predictor's output for one mechanism: per-group frame and run-level facts."""

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


def predict(problem: Problem, mechanism: Mechanism, reference: tuple[Trajectory, torch.Tensor, torch.Tensor],
            evaluation: GroupedDataset, *, draws: int, integration_steps: int, exact: bool,
            generator: torch.Generator, calibration: Calibration) -> Prediction:
    """Delta^k for one mechanism against the non-private reference (module docstring, steps 1-4)."""
    _, np_point, np_draws = reference
    path = trajectory(problem, mechanism, integration_steps=integration_steps)
    noise = covariance(problem, mechanism, path, exact=exact)
    point, noisy = correctness(problem, path.theta, noise, evaluation, draws=draws, generator=generator)
    K, group = problem.n_groups, evaluation.group
    np_draws = np_draws[:draws]
    acc_np_point = group_means(np_point, group, K)
    acc_point = group_means(point, group, K)
    acc_draws = group_means(noisy, group, K)
    acc_np_draws = group_means(np_draws, group, K)
    clip_part = acc_point - acc_np_point
    cost_draws = acc_draws - acc_np_draws
    noise_part = cost_draws.mean(0) - clip_part
    change = noisy.to(torch.float64) - np_draws.to(torch.float64)      # per row and draw: -1, 0, +1
    row_var = group_means(change ** 2, group, K).mean(0) - cost_draws.mean(0) ** 2
    n_eval = torch.bincount(group, minlength=K).to(torch.float64)
    base_sd = (cost_draws.var(0) + row_var.clamp(min=0) / n_eval.clamp(min=1)).sqrt()
    cost = calibration.clip_scale * clip_part + calibration.noise_scale * noise_part
    half = Z90 * calibration.widen * base_sd
    with torch.no_grad():
        predicted = functional_call(problem.model, problem.unflatten(path.theta),
                                    (evaluation.X.to(torch.float64),)).argmax(1)
    labels = torch.unique(predicted)
    collapsed = len(labels) == 1 and len(torch.unique(evaluation.y)) > 1
    table = pd.DataFrame({
        "group": list(problem.group_names), "n_eval": n_eval.numpy().astype(int),
        "cost": cost.numpy(), "half_width": half.numpy(), "uncalibrated_half_width": (Z90 * base_sd).numpy(),
        "clip_part": clip_part.numpy(), "noise_part": noise_part.numpy(),
        "acc_nonprivate": acc_np_draws.mean(0).numpy(), "acc_private": acc_draws.mean(0).numpy(),
        "acc_private_noiseless": acc_point.numpy(), "acc_nonprivate_noiseless": acc_np_point.numpy()})
    table["low"], table["high"] = table["cost"] - table["half_width"], table["cost"] + table["half_width"]
    widen_small_groups(table, train_sizes=problem.train_sizes.numpy())
    return Prediction(table=table, collapsed=collapsed,
                      collapse_label=str(problem.label_names[int(labels[0])]) if collapsed else None,
                      noise_per_weight=noise.per_weight("noise"),
                      sampling_per_weight=noise.per_weight("sampling"),
                      weight_scale=float(path.theta.pow(2).mean().sqrt()),
                      unstable_directions=noise.unstable_directions, steps=path.steps,
                      integration_steps=path.integration_steps, mechanism=mechanism.name)


def widen_small_groups(table: pd.DataFrame, *, train_sizes: np.ndarray) -> None:
    """Give every group below :data:`MIN_GROUP_ROWS` training or evaluation rows the whole feasible range
    of a cost, [-acc_k(non-private), 1 - acc_k(non-private)], as its interval (in place; column
    ``too_small``): its point prediction is kept, but nothing narrower can be claimed from so few rows."""
    small = (table["n_eval"].to_numpy() < MIN_GROUP_ROWS) | (train_sizes < MIN_GROUP_ROWS)
    table["too_small"] = small
    low, high = -table["acc_nonprivate"], 1.0 - table["acc_nonprivate"]
    table.loc[small, "low"] = low[small]
    table.loc[small, "high"] = high[small]
    table.loc[small, "half_width"] = ((high - low) / 2)[small]
