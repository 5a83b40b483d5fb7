"""What would help: the same predictor re-run with one change each -- all *predictions*, never measurements.

They are predicted on the same expectation as the headline: on every train/test split it averages, each on
the split's own trajectories and evaluation rows, averaged over the splits as the headline is
(:func:`recommendations`), and compared with the headline's costs.

All of them share the diagnosis's non-private reference, and DP-SGD's expected trajectory wherever the drift
is the same (a larger epsilon, a larger batch: :class:`~.dynamics.TrajectoryCache`); their noise multipliers
and step counts come from :mod:`.equal_privacy`; for binary logistic regression their costs are the exact
expectation over the noise, without draws (no interval is reported for a recommendation).

C from paper 000's quantile rule (the (1 - kappa/b)-quantile of the per-sample norms, kappa =
E||N(0, sigma^2 I_P)||/sigma, :mod:`dpfair_analysis.theory.bounds`), DPSGD-F, Naive and paper 002's FairDP at
DP-SGD's epsilon, the two later methods (Global-Adapt, bounded adaptive clipping) at DP-SGD's epsilon, paper
001's mitigation (gamma = (1, 1)) at the same epsilon, a 4x larger batch and a 2x larger epsilon (sigma
recalibrated). The adaptive bounds (FairDP's, Global-Adapt's Z, bounded adaptive clipping's C) are taken where
the run's steps take them, not at their update's fixed point: a short run stays near its start. FairDP's per-group bounds move during training, at most eta_C a step
in log C; the predictor takes each group's bound on its way to the fixed point of FairDP's update on the
noise-free statistics (:func:`~.mechanisms.fairdp_stationary_bounds`), averaged over the run's steps
(:func:`~dpfair_analysis.training.fairdp.fairdp_run_bounds`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.diagnose.dynamics import TrajectoryCache, drift
from dpfair_analysis.diagnose.equal_privacy import noise_for
from dpfair_analysis.diagnose.explanation import NEGLIGIBLE
from dpfair_analysis.diagnose.mechanisms import RECOMMENDATION_TOLERANCE, Mechanism, mechanism_for
from dpfair_analysis.diagnose.plan import Calibration, PrivacyPlan, ResolvedPlan
from dpfair_analysis.diagnose.prediction import Reference, predict, split_mean
from dpfair_analysis.diagnose.problem import Problem
from dpfair_analysis.privacy.accounting import steps_for_epochs
from dpfair_analysis.theory.bounds import expected_gaussian_norm

#: A recommendation's verdict against the plan (:func:`recommendation_verdict`), in the order they are listed.
VERDICTS = ("predicted to help", "no predicted effect", "predicted to hurt")


def recommendation_verdict(*, worst_change: float, gap_change: float, tolerance: float = NEGLIGIBLE) -> str:
    r"""Whether an option is predicted to help or to hurt, against the plan: its worst group first, then its gap.

    With :math:`w = \min_k \Delta^k` the worst group's predicted cost and :math:`g = \max_k \Delta^k -
    \min_k \Delta^k` the gap, both for the option and for the plan (the headline), :math:`\delta_w =
    w_{opt} - w_{plan}` (positive: the worst-off group loses less) and :math:`\delta_g = g_{opt} - g_{plan}`
    (positive: the gap widens), and :math:`\tau` = ``tolerance`` (:data:`NEGLIGIBLE`, the accuracy change the
    diagnosis calls no change):

    * *predicted to hurt* if :math:`\delta_w \le -\tau`, or :math:`|\delta_w| < \tau` and
      :math:`\delta_g \ge \tau` (the worst group loses more; or it does not move and the gap widens);
    * *predicted to help* if :math:`\delta_w \ge \tau`, or :math:`|\delta_w| < \tau` and
      :math:`\delta_g \le -\tau`;
    * *no predicted effect* otherwise (both within :math:`\tau` of the plan: a sign there would be noise).

    The worst group decides before the gap: an option that helps the worst-off group helps even where the gap
    widens, and one that hurts it hurts even where the gap narrows (levelling down).
    """
    if not tolerance > 0:
        raise ValueError(f"tolerance must be positive, got {tolerance!r}")
    if worst_change <= -tolerance or (abs(worst_change) < tolerance and gap_change >= tolerance):
        return VERDICTS[2]
    if worst_change >= tolerance or (abs(worst_change) < tolerance and gap_change <= -tolerance):
        return VERDICTS[0]
    return VERDICTS[1]


def quantile_rule_bound(norms: torch.Tensor, *, noise_multiplier: float, batch_size: int, n_params: int) -> float:
    """Paper 000 §4.2's C for Gaussian noise: the (1 - kappa/b)-quantile of the per-sample norms.

    V + B of Eq. (1) with Gaussian noise N(0, sigma^2 C^2 I_P) on the sum has slope
    (kappa - #{||g_i|| > C}) / b in C, kappa = E||N(0, sigma^2 I_P)|| (:mod:`.theory.bounds`),
    so the minimiser clips ceil(kappa) of b rows: the (1 - kappa/b)-quantile (empirical,
    inverted CDF). Returns 0 when kappa >= b.
    """
    kappa = expected_gaussian_norm(noise_multiplier, n_params)
    level = 1.0 - kappa / batch_size
    if level <= 0:
        return 0.0
    return float(np.quantile(norms.double().numpy(), level, method="inverted_cdf"))


@dataclass(frozen=True)
class RecommendationSplit:
    """One train/test split's part of the recommendations: what :func:`~.prediction.predict` needs on it (the
    split's problem, non-private reference, evaluation rows, trajectory cache and whether its Jacobian is
    exact) -- the same split the headline predicts."""

    problem: Problem
    reference: Reference
    evaluation: GroupedDataset
    trajectories: TrajectoryCache
    exact: bool


def recommendations(splits: Sequence[RecommendationSplit], plan: PrivacyPlan, resolved: ResolvedPlan,
                    planned: pd.DataFrame, *, draws: int, calibration: Calibration,
                    integration_steps: int | None = None, generator: torch.Generator | None = None) -> list[dict]:
    r"""Predicted per-group costs under each mitigation, on the same expectation as the headline.

    Each option (module docstring) is one change to the plan, the same on every split: its settings come from
    ``resolved`` (the first split's resolution of the plan, whose epsilon and step count the headline reports)
    and the quantile rule's C from the per-sample norms along every split's non-private trajectory, pooled.
    The option is predicted on each split s of ``splits`` (its own trajectories and evaluation rows, as the
    headline's cost on that split) and its cost is the mean over the splits,
    :math:`\Delta^k_{opt} = \frac{1}{S} \sum_s \Delta^k_{opt,s}` (:func:`~.prediction.split_mean`, the
    headline's own average); one split gives that split's prediction. Changes are against ``planned``, the
    headline's table (group, cost): :math:`\Delta^k_{opt} - \Delta^k_{plan}`, both means over the same splits.

    Parameters
    ----------
    splits : sequence of RecommendationSplit
        The splits the headline averages, first split first.
    plan : PrivacyPlan
        The planned run.
    resolved : ResolvedPlan
        The plan resolved on the first split (as the headline's).
    planned : pandas.DataFrame
        The headline's per-group costs (columns group, cost).
    draws : int
        Noise draws per prediction where the flip probability has no closed form.
    calibration : Calibration
        As the headline's.
    integration_steps : int, optional
        Integration steps of the options' own trajectories.
    generator : torch.Generator, optional
        The draws' stream (used split after split).

    Returns
    -------
    list of dict
        One per option: action, description, prediction (True), changes, epsilon, steps, splits,
        predicted_costs, change_vs_plan, at_risk_change, worst_group, worst_cost, max_gap, verdict
        (:func:`recommendation_verdict`), worst_change and gap_change (against the plan), plan_worst_group,
        plan_worst_cost, plan_gap, collapse_predicted. Sorted by verdict (:data:`VERDICTS`: those predicted to
        help first, those predicted to hurt last), then by worst-group cost (best first), then by gap.
    """
    if not splits:
        raise ValueError("recommendations need at least one split")
    first = splits[0]
    planned = planned.assign(group=planned["group"].astype(str))
    at_risk = [g for g, c in zip(planned["group"], planned["cost"]) if -c >= NEGLIGIBLE]
    planned_cost = dict(zip(planned["group"], planned["cost"]))
    plan_worst = min(planned_cost, key=planned_cost.get)
    plan_worst_cost = float(planned_cost[plan_worst])
    plan_gap = float(max(planned_cost.values()) - plan_worst_cost)
    P = first.problem.P
    options: list[tuple[str, str, Mechanism, float, dict]] = []

    def view(method: str, **changes) -> Mechanism:  # the predictor's view of a method at this plan
        return mechanism_for(plan, resolved, method, dimension=P, **changes)

    # C from the quantile rule, on the norms along every split's non-private trajectory
    norms = torch.cat([drift(split.problem, replace(view("dpsgd"), name="sgd"), theta)[1]
                       for split in splits for theta in split.reference.trajectory.checkpoints])
    c_rule = quantile_rule_bound(norms, noise_multiplier=resolved.sigma, batch_size=plan.batch_size, n_params=P)
    if c_rule > 0:
        options.append(("quantile clip bound", f"C = {c_rule:.3g} from paper 000's quantile rule "
                        f"(the (1 - kappa/b)-quantile of the per-sample gradient norms; planned C = "
                        f"{plan.clip_bound:g})", view("dpsgd", clip_bound=c_rule),
                        resolved.epsilon, {"clip_bound": c_rule}))
    for method, text in (("dpsgdf", "DPSGD-F (paper 000 Alg. 2): group bounds from privately counted clipping "
                                    "rates, stopped at DP-SGD's epsilon"),
                         ("naive", "Naive reweighting (paper 000 Alg. 3): group weights from private counts, "
                                   "stopped at DP-SGD's epsilon"),
                         ("fairdp", "FairDP (paper 002, as reconstructed in training/fairdp.py): per-group bounds "
                                    "moving towards the fixed point of its tau-descent for the run's steps, stopped at "
                                    "DP-SGD's epsilon"),
                         ("globaladapt", "DPSGD-Global-Adapt (Esipova et al. 2023, later work): every gradient "
                                         "scaled by C/Z under a privately tracked bound Z, from its default Z_0 on "
                                         "the update's expected path, stopped at DP-SGD's epsilon"),
                         ("boundedadaptive", "bounded adaptive clipping (Zhao et al. 2025, later work): the quantile "
                                             "update of C kept above C_LB = C/2, on its expected path, stopped at "
                                             "DP-SGD's epsilon"),
                         ("mitigation", "paper 001's mitigation (Eq. 6 with the boundary proxy, gamma = (1, 1)) at "
                                        "DP-SGD's epsilon")):
        if method == plan.method:
            continue
        if method == "mitigation" and P > 2000:
            continue  # its per-sample objective needs materialised per-sample gradients
        options.append((method, text, view(method), resolved.epsilon, {"method": method}))
    near = resolved.accounting_point
    bigger = min(plan.batch_size * 4, resolved.n // 2)
    if bigger > plan.batch_size:
        steps = steps_for_epochs(resolved.n, bigger, plan.epochs)
        q = bigger / resolved.n
        sigma = noise_for(resolved.epsilon, plan.delta, sampling_rate=q, steps=steps, accounting=plan.accounting,
                          near=near, guess=resolved.sigma * 2, tolerance=RECOMMENDATION_TOLERANCE)
        lr = plan.lr if plan.lr is not None else 1.0 / math.sqrt(steps)
        options.append(("larger batch", f"batch size {bigger} (sigma {sigma:.3g} for the same epsilon; "
                        f"{steps} steps, learning rate {lr:.3g})",
                        view(plan.method, batch_size=bigger, sampling_rate=q, steps=steps,
                                       sigma=sigma, lr=lr), resolved.epsilon,
                        {"batch_size": bigger, "noise_multiplier": sigma}))
    target = 2 * resolved.epsilon
    try:
        sigma = noise_for(target, plan.delta, sampling_rate=resolved.sampling_rate, steps=resolved.steps,
                          accounting=plan.accounting, near=near, guess=resolved.sigma / 1.7,
                          tolerance=RECOMMENDATION_TOLERANCE)
        options.append(("larger epsilon", f"epsilon {target:.3g} (twice the plan; sigma {sigma:.3g})",
                        view(plan.method, sigma=sigma), target, {"noise_multiplier": sigma}))
    except ValueError:
        pass
    out = []
    for action, text, mechanism, epsilon, changes in options:
        predictions = [predict(split.problem, mechanism, split.reference, split.evaluation, draws=draws,
                               calibration=calibration, interval=False, trajectories=split.trajectories,
                               exact=split.exact, generator=generator, integration_steps=integration_steps)
                       for split in splits]
        mean = split_mean([p.table for p in predictions], ["cost"])["cost"]
        costs = {str(g): float(c) for g, c in mean.items()}
        worst = min(costs, key=costs.get)
        gap = float(max(costs.values()) - min(costs.values()))
        worst_change, gap_change = float(costs[worst] - plan_worst_cost), gap - plan_gap
        out.append({"action": action, "description": text, "prediction": True, "changes": changes,
                    "epsilon": float(epsilon), "steps": mechanism.steps, "splits": len(splits),
                    "predicted_costs": costs,
                    "change_vs_plan": {g: float(costs[g] - planned_cost[g]) for g in costs},
                    "at_risk_change": {g: float(costs[g] - planned_cost[g]) for g in at_risk},
                    "worst_group": worst, "worst_cost": float(costs[worst]), "max_gap": gap,
                    "verdict": recommendation_verdict(worst_change=worst_change, gap_change=gap_change),
                    "worst_change": worst_change, "gap_change": gap_change,
                    "plan_worst_group": plan_worst, "plan_worst_cost": plan_worst_cost, "plan_gap": plan_gap,
                    "collapse_predicted": float(np.mean([p.collapsed for p in predictions])) > 0.5})
    # helping first, then no effect, the hurting ones last; within each, the best worst group first
    out.sort(key=lambda r: (VERDICTS.index(r["verdict"]), -r["worst_cost"], r["max_gap"]))
    return out
