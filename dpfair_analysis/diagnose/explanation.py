"""Why: the theory's per-group quantities, each group's reasons, the dominant mechanism, the most-hurt group.

The theory's per-group quantities are measured along the non-private trajectory (at 1/3, 2/3 and the end of
it; :func:`theory_quantities`) and reported beside the prediction: the fraction clipped at C and the clipping
bias B of paper 000 Eq. (1) (per row, mean max(0, ||g_i|| - C)), the corrected Theorem 2 clipping and noise
terms per step (paper 001), the group Hessian trace Tr(H_a) and the boundary proxy 1 - sum_k f_k^2 (paper 001
Thm 5), and the group size.

Reasons per group (:func:`reasons_for`): "clipping" (the clipping part is at least a third of its predicted
loss), "noise" (the noise part is), "near the boundary" (hurt, and its mean 1 - sum f^2 is at least 1.15
times the population's), "size" (hurt, and smaller than half an even share of the rows; or too small to
predict at all, hurt or not).
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch.func import functional_call

from dpfair_analysis.diagnose.plan import ResolvedPlan
from dpfair_analysis.diagnose.prediction import Z90, Prediction, group_means
from dpfair_analysis.diagnose.problem import Problem
from dpfair_analysis.fairness.metrics import boundary_proxy_of_logits
from dpfair_analysis.fast_gradients import fast_per_sample_gradients
from dpfair_analysis.gradients import clip_factors
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.theory.decomposition import StepMoments, one_step_decomposition
from dpfair_analysis.theory.hessian import group_hessian_traces, is_piecewise_linear

REASONS = ("clipping", "noise", "size", "near the boundary")
#: A predicted cost smaller than this (in accuracy) is "not hurt"; a part smaller than this is no reason.
NEGLIGIBLE = 0.005
#: The most-hurt group is called when its probability to be the most hurt in a run is at least this.
CALL_PROBABILITY = 0.9


def theory_quantities(problem: Problem, checkpoints: Sequence[torch.Tensor], plan: ResolvedPlan,
                       generator: torch.Generator) -> pd.DataFrame:
    """Per-group quantities of the theory, averaged over points of the non-private trajectory.

    clip_fraction (||g_i|| > C), clip_bias (paper 000 Eq. 1's B: mean max(0, ||g_i|| - C)),
    grad_norm (mean ||g_i||), clip_term and noise_term (paper 001 Thm 2, Eq. 4 per step,
    corrected noise term (eta^2/2) Tr(H_a) (sigma C / b)^2), trace (Tr(H_a) of the group's
    mean loss), boundary (mean 1 - sum_k f_k^2).
    """
    data = problem.theory_data
    C, b, r = plan.plan.clip_bound, plan.plan.batch_size, plan.lr
    K = problem.n_groups
    exact_terms = problem.P <= 500
    trace_method = ("closed" if isinstance(problem.model, LogisticRegression)
                    else "ggn" if is_piecewise_linear(problem.model) else "hutchinson")
    frames = []
    for theta in checkpoints:
        params = problem.params(theta)
        X = data.X.to(torch.float64)
        if problem.linear is not None and exact_terms:  # (the first-order terms below need the generic path)
            Xt = problem.augmented(data)
            norms = problem.linear.residuals(problem.linear.scores(theta, Xt), data.y)[0].norm(dim=1) * Xt.norm(dim=1)
        else:
            per_sample, _ = fast_per_sample_gradients(problem.model, X, data.y, params=params)
            norms = per_sample.norms.detach()
        clipped = (norms > C).to(torch.float64)
        excess = (norms - C).clamp(min=0)
        with torch.no_grad():
            phi = boundary_proxy_of_logits(functional_call(problem.model, params, (X,)))
        frame = pd.DataFrame({
            "group": list(problem.group_names),
            "clip_fraction": group_means(clipped, data.group, K).numpy(),
            "clip_bias": group_means(excess, data.group, K).numpy(),
            "grad_norm": group_means(norms, data.group, K).numpy(),
            "boundary": group_means(phi, data.group, K).numpy()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traces = group_hessian_traces(problem.model, data, method=trace_method, params=params, probes=8,
                                          generator=generator)
        frame["trace"] = traces["trace"].to_numpy()[1:]
        frame["noise_term"] = 0.5 * r ** 2 * frame["trace"] * (plan.sigma * C / b) ** 2
        if exact_terms:
            moments = (LinearStepMoments(problem, theta, data, clip_bound=C) if problem.linear is not None
                       else StepMoments(problem.model, data, clip_bound=C, params=params, max_params=500))
            terms = one_step_decomposition(moments, lr=r, noise_multiplier=plan.sigma,
                                           batch_size=max(plan.sampling_rate * len(data), 1e-9))
            frame["clip_term"] = terms["clip"].to_numpy()[1:]
        else:  # first-order part of R^clip: eta <g_a, g_D - gbar_D>
            c = clip_factors(norms, torch.full_like(norms, C))
            mean_plain = per_sample.weighted_sum(torch.full_like(norms, 1.0 / len(norms)))
            mean_clipped = per_sample.weighted_sum(c / len(norms))
            diff = torch.cat([(mean_plain[k] - mean_clipped[k]).reshape(-1) for k in problem.names])
            terms = []
            for k in range(K):
                rows = (data.group == k).to(torch.float64)
                g_k = per_sample.weighted_sum(rows / rows.sum().clamp(min=1))
                g_k = torch.cat([g_k[name].reshape(-1) for name in problem.names])
                terms.append(float(r * g_k @ diff))
            frame["clip_term"] = terms
        frames.append(frame)
    table = pd.concat(frames).groupby("group", sort=False).mean().reset_index()
    table["n"] = problem.train_sizes.numpy().astype(int)
    return table


class LinearStepMoments(StepMoments):
    """:class:`~dpfair_analysis.theory.decomposition.StepMoments` in closed form for logistic regression: the
    same attributes (losses, gradients, Hessians H_a = mean_{i in a} S_i (x) x~_i x~_i^T, the step's first and
    second moments), from :class:`~.problem.LinearScores` instead of per-sample autodiff and one
    ``torch.func.hessian`` per group (the bulk of a diagnosis's theory quantities)."""

    def __init__(self, problem: Problem, theta: torch.Tensor, data, *, clip_bound: float) -> None:  # noqa: D107
        lin = problem.linear
        self.clip_bound = float(clip_bound)
        Xt = problem.augmented(data)
        scores = lin.scores(theta, Xt)
        residuals, curvature = lin.residuals(scores, data.y)
        G = lin.per_sample(residuals, Xt)
        Gc = G * clip_factors(G.norm(dim=1), torch.full((len(G),), self.clip_bound, dtype=torch.float64)
                              ).unsqueeze(1)
        self.n, self.group_names = len(data), tuple(data.group_names)
        self.group_sizes = data.group_sizes().tolist()
        self.mean_plain, self.mean_clipped = G.mean(0), Gc.mean(0)
        self.second_plain, self.second_clipped = G.T @ G, Gc.T @ Gc
        logits = functional_call(problem.model, problem.params(theta), (data.X.to(torch.float64),))
        row_losses = torch.nn.functional.cross_entropy(logits, data.y, reduction="none")
        member = [torch.ones(self.n, dtype=torch.bool)] + [data.group == k for k in range(data.n_groups)]
        none = torch.zeros(self.n, dtype=torch.bool)
        losses, grads, hessians = [], [], []
        for rows in member:
            if not rows.any():
                losses.append(torch.tensor(math.nan, dtype=torch.float64))
                grads.append(torch.full_like(theta, math.nan))
                hessians.append(torch.full((problem.P, problem.P), math.nan, dtype=torch.float64))
                continue
            weights = rows.to(torch.float64) / rows.sum()
            losses.append(weights @ row_losses)
            grads.append(weights @ G)
            hessians.append(lin.drift_jacobian(residuals, curvature, Xt, weights, none))
        self.losses, self.gradients, self.hessians = torch.stack(losses), torch.stack(grads), torch.stack(hessians)
        self.penalty = problem.l2 * problem.weight_mask * theta


def reasons_for(row: pd.Series, *, population_boundary: float, n_total: int, n_groups: int) -> list[str]:
    """Why a group is predicted to be hurt (subset of :data:`REASONS`, in that order; empty if not hurt).

    ``row`` has cost, clip_part, noise_part, boundary, n and too_small (see the module docstring for the
    rules); a group below :data:`MIN_GROUP_ROWS` always has "size", hurt or not: its prediction is not reliable.
    """
    hurt = -float(row["cost"])
    too_small = bool(row.get("too_small", False))
    if hurt < NEGLIGIBLE:
        return ["size"] if too_small else []
    clip_harm, noise_harm = max(0.0, -float(row["clip_part"])), max(0.0, -float(row["noise_part"]))
    total = clip_harm + noise_harm
    reasons = []
    if clip_harm >= NEGLIGIBLE and clip_harm >= total / 3:
        reasons.append("clipping")
    if noise_harm >= NEGLIGIBLE and noise_harm >= total / 3:
        reasons.append("noise")
    if too_small or float(row["n"]) < 0.5 * n_total / n_groups:
        reasons.append("size")
    if population_boundary > 0 and float(row["boundary"]) >= 1.15 * population_boundary:
        reasons.append("near the boundary")
    return reasons


def dominant_mechanism(prediction: Prediction) -> str:
    """"clipping", "noise", "both" or "neither" from the size-weighted parts over the groups."""
    t = prediction.table
    weights = t["n_eval"] / t["n_eval"].sum()
    clip = float(np.sqrt((weights * t["clip_part"] ** 2).sum()))
    noise = float(np.sqrt((weights * t["noise_part"] ** 2).sum()))
    if max(clip, noise) < NEGLIGIBLE:
        return "neither"
    if clip >= 3 * noise:
        return "clipping"
    if noise >= 3 * clip:
        return "noise"
    return "both"


def most_hurt_probabilities(samples: np.ndarray | None, names: Sequence[str]) -> pd.Series:
    """P(group k is the most hurt in a run): the share of the joint cost samples (draws x K) whose most
    negative entry is k's, ties shared (NaN without samples)."""
    if samples is None or not len(samples):
        return pd.Series(np.nan, index=list(names))
    lowest = samples == samples.min(axis=1, keepdims=True)       # ties share the draw equally
    shares = (lowest / lowest.sum(axis=1, keepdims=True)).mean(axis=0)
    return pd.Series(shares, index=list(names))


def pairwise_orderings(groups: pd.DataFrame, samples: np.ndarray | None, names: Sequence[str]) -> list[dict]:
    """For each pair of neighbours in the ranking, P(the higher-ranked group loses more than the next in a run)."""
    out = []
    ranked = list(groups.sort_values("rank")["group"])
    for first, second in zip(ranked, ranked[1:]):
        p = (float(np.mean(samples[:, names.index(first)] < samples[:, names.index(second)]))
             if samples is not None and len(samples) else None)
        out.append({"more_hurt": str(first), "less_hurt": str(second), "probability": p})
    return out


def most_hurt_group(groups: pd.DataFrame, samples: np.ndarray | None = None, names: Sequence[str] = ()) -> dict:
    """The group with the most negative predicted cost, its probability to be the most hurt in a run, whether
    it can be called (that probability >= :data:`CALL_PROBABILITY`) and the pairwise orderings."""
    first = groups.iloc[0]
    names = list(names) or list(groups["group"])
    probability = number_or_none(first.get("p_most_hurt", float("nan")))
    orderings = pairwise_orderings(groups, samples, names)
    if -float(first["cost"]) < NEGLIGIBLE:
        return {"group": None, "callable": False, "probability": probability, "cost": number_or_none(first["cost"]),
                "runner_up": None, "runner_up_cost": None, "margin": None, "orderings": orderings}
    if len(groups) < 2:
        return {"group": str(first["group"]), "callable": True, "probability": 1.0,
                "cost": number_or_none(first["cost"]), "runner_up": None, "runner_up_cost": None, "margin": None,
                "orderings": orderings}
    second = groups.iloc[1]
    if probability is None:  # no samples: the z >= 1 rule on the two best intervals
        spread = math.hypot(float(first["half_width"]), float(second["half_width"])) / Z90
        callable_ = bool(float(second["cost"] - first["cost"]) > spread)
    else:
        callable_ = probability >= CALL_PROBABILITY
    return {"group": str(first["group"]), "callable": callable_, "probability": probability,
            "cost": number_or_none(first["cost"]), "runner_up": str(second["group"]),
            "runner_up_cost": number_or_none(second["cost"]), "margin": float(second["cost"] - first["cost"]),
            "orderings": orderings}


def explain(diagnosis) -> list[str]:
    """Plain sentences for a :class:`~.diagnosis.Diagnosis`: the regime, the verdict, and why per group."""
    p, plan = diagnosis.prediction, diagnosis.plan
    lines = []
    mech = {"clipping": "clipping dominates: the cost is what clipping does to learning, not noise",
            "noise": "noise dominates: the cost is the accumulated Gaussian noise flipping rows near the boundary",
            "both": "clipping and noise both matter",
            "neither": "neither clipping nor noise changes any group's accuracy by more than 0.005",
            }[diagnosis.mechanism]
    lines.append(f"At these settings {mech}. Over the run the Gaussian noise moves each weight by about "
                 f"{p.noise_per_weight:.3g} ({p.noise_per_weight / max(plan.sigma, 1e-12):.3g} sigma; the "
                 f"weights' RMS is {p.weight_scale:.3g}).")
    if p.collapsed:
        lines.append(f"DP-SGD is predicted to end as a constant classifier (it predicts {p.collapse_label!r} "
                     f"for every row): each group's cost is then its non-private accuracy above its share of "
                     f"that label.")
    mh = diagnosis.most_hurt
    if mh.get("group") is None:
        lines.append("No group is predicted to lose more than 0.005 accuracy.")
    elif mh["callable"]:
        chance = f", the most hurt in {mh['probability']:.0%} of runs" if mh.get("probability") is not None else ""
        lines.append(f"Most hurt: {mh['group']} (predicted {mh['cost']:+.4f}{chance}; next {mh['runner_up']} "
                     f"{mh['runner_up_cost']:+.4f}).")
    else:
        chance = (f" (the most hurt in only {mh['probability']:.0%} of runs)" if mh.get("probability") is not None
                  else "")
        lines.append(f"The most-hurt group cannot be called: {mh['group']} ({mh['cost']:+.4f}){chance} and "
                     f"{mh['runner_up']} ({mh['runner_up_cost']:+.4f}) are within the prediction's uncertainty.")
    if diagnosis.split_mode == "expectation":
        lines.append(f"Predicted as the expectation over {len(diagnosis.split_seeds)} random train/test splits "
                     f"(seeds {', '.join(map(str, diagnosis.split_seeds))}, as dpfair compare draws them); the "
                     f"intervals and P(most hurt) are for one run on a random split.")
        if diagnosis.split_prediction is not None:
            own = diagnosis.split_prediction.table.sort_values("cost").iloc[0]
            if own["group"] != diagnosis.groups.iloc[0]["group"] and -float(own["cost"]) >= NEGLIGIBLE:
                lines.append(f"On seed {diagnosis.split_seeds[0]}'s split alone the most hurt would be "
                             f"{own['group']} ({own['cost']:+.4f}): its few test rows differ from the average "
                             f"split's.")
    else:
        lines.append("Predicted for this one train/test split (its evaluation rows); another split's costs differ "
                     "(dpfair diagnose predicts the expectation over splits unless --split-mode per-split).")
    for row in diagnosis.groups.itertuples():
        if row.reasons:
            lines.append(f"{row.group}: {', '.join(row.reasons)} -- clipping part {row.clip_part:+.4f}, noise "
                         f"part {row.noise_part:+.4f}; {row.clip_fraction:.0%} of its rows clipped at C, "
                         f"Tr(H) {row.trace:.3g}, 1 - sum f^2 = {row.boundary:.3f}, n = {row.n:,}.")
    lines += diagnosis.notes
    return lines


def number_or_none(value) -> float | None:
    """A float for JSON, or None where it is NaN."""
    value = float(value)
    return None if math.isnan(value) else value
