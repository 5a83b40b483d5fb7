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

import itertools
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
from dpfair_analysis.theory.decomposition import StepMoments, direction_magnitude, one_step_decomposition
from dpfair_analysis.theory.hessian import group_hessian_traces, is_piecewise_linear

REASONS = ("clipping", "noise", "size", "near the boundary")
#: A predicted cost smaller than this (in accuracy) is "not hurt"; a part smaller than this is no reason.
NEGLIGIBLE = 0.005
#: The most-hurt group is named when its lead in P(most hurt) over every other group is more than this many
#: standard errors of that lead (one-sided 95%); groups within it are tied with the top and nothing is named.
NAME_Z = Z90


def theory_quantities(problem: Problem, checkpoints: Sequence[torch.Tensor], plan: ResolvedPlan,
                       generator: torch.Generator) -> pd.DataFrame:
    """Per-group quantities of the theory, averaged over points of the non-private trajectory.

    clip_fraction (||g_i|| > C), clip_bias (paper 000 Eq. 1's B: mean max(0, ||g_i|| - C)),
    grad_norm (mean ||g_i||), clip_term and noise_term (paper 001 Thm 2, Eq. 4 per step,
    corrected noise term (eta^2/2) Tr(H_a) (sigma C / b)^2), clip_direction and clip_magnitude
    (clip_term split into Esipova et al.'s direction and magnitude errors,
    :func:`~dpfair_analysis.theory.decomposition.direction_magnitude`: what clipping's turn of the
    step costs the group, and what its shortening costs), trace (Tr(H_a) of the group's mean loss),
    boundary (mean 1 - sum_k f_k^2).
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
            frame["clip_direction"] = terms["clip_direction"].to_numpy()[1:]
            frame["clip_magnitude"] = terms["clip_magnitude"].to_numpy()[1:]
        else:  # first-order part of R^clip: eta <g_a, g_D - gbar_D>, and its direction and magnitude errors
            c = clip_factors(norms, torch.full_like(norms, C))
            mean_plain = per_sample.weighted_sum(torch.full_like(norms, 1.0 / len(norms)))
            mean_clipped = per_sample.weighted_sum(c / len(norms))
            diff = torch.cat([(mean_plain[k] - mean_clipped[k]).reshape(-1) for k in problem.names])
            group_gradients = []
            for k in range(K):
                rows = (data.group == k).to(torch.float64)
                g_k = per_sample.weighted_sum(rows / rows.sum().clamp(min=1))
                group_gradients.append(torch.cat([g_k[name].reshape(-1) for name in problem.names]))
            group_gradients = torch.stack(group_gradients)
            frame["clip_term"] = (r * group_gradients @ diff).numpy()
            step = torch.cat([mean_plain[k].reshape(-1) for k in problem.names])
            direction, magnitude = direction_magnitude(group_gradients, step, step - diff, lr=r)
            frame["clip_direction"], frame["clip_magnitude"] = direction.numpy(), magnitude.numpy()
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


def most_hurt_call(samples: np.ndarray, names: Sequence[str], *, blocks: Sequence[int] = ()) -> dict:
    r"""Which group is the most hurt: the one with the highest P(most hurt), unless others are tied with it.

    With :math:`N` joint cost samples, :math:`\hat p_k` the share whose most negative entry is group
    :math:`k`'s (:func:`most_hurt_probabilities`) and :math:`t = \arg\max_k \hat p_k`, the lead of the top
    over group :math:`j` is :math:`d_j = \hat p_t - \hat p_j`. Its standard error is the larger of

    * the Monte Carlo error of :math:`N` independent draws (the multinomial variance of a difference of two
      cell shares): :math:`V^{MC}_j = (\hat p_t + \hat p_j - d_j^2) / N`;
    * where the samples are :math:`S \ge 2` blocks, one per train/test split (``blocks``: their lengths, in
      order; the expectation over splits pools them), the spread of the splits' own leads
      :math:`d_{j,s}` (each block's shares): :math:`V^{split}_j = \sum_s (d_{j,s} - \bar d_j)^2 / (S (S - 1))`,
      the variance of their mean; it includes each block's Monte Carlo error, and the max keeps a chance
      agreement of few splits from shrinking the error below the draws' own.

    Group :math:`j \ne t` is **tied** with the top when :math:`d_j \le z \sqrt{\max(V^{MC}_j, V^{split}_j)}`,
    :math:`z` = :data:`NAME_Z` (1.645: the top's lead is not significant at the one-sided 5% level); equal
    shares are always tied. No tie: the top is named. A tie: nothing is named, and ``tied`` lists the top and
    every group tied with it, by :math:`\hat p` (highest first).

    Returns
    -------
    dict
        ``group`` (the named group, or None when tied), ``tied``, ``probability`` (:math:`\hat p_t`),
        ``runner_up`` (the next group by :math:`\hat p`, None with one group), ``runner_up_probability``,
        ``lead`` (:math:`d` of the runner-up) and ``lead_se`` (its standard error).
    """
    names = [str(n) for n in names]
    samples = np.asarray(samples, dtype=float)
    N = len(samples)
    sizes = [int(b) for b in blocks] or [N]
    if sum(sizes) != N:
        raise ValueError(f"blocks must add up to the {N} samples, got {list(blocks)}")
    p = most_hurt_probabilities(samples, names).to_numpy()
    order = np.argsort(-p, kind="stable")
    top = int(order[0])
    edges = np.cumsum([0, *sizes])
    per_block = np.array([most_hurt_probabilities(samples[a:b], names).to_numpy()
                          for a, b in itertools.pairwise(edges)])
    tied, leads, errors = [names[top]], {}, {}
    for j in order[1:]:
        lead = float(p[top] - p[j])
        mc = max(p[top] + p[j] - lead ** 2, 0.0) / N
        S = len(per_block)
        split = float(np.var(per_block[:, top] - per_block[:, j], ddof=1) / S) if S >= 2 else 0.0
        se = math.sqrt(max(mc, split))
        leads[names[j]], errors[names[j]] = lead, se
        if lead <= NAME_Z * se or lead <= 0:
            tied.append(names[j])
    runner = names[int(order[1])] if len(order) > 1 else None
    return {"group": names[top] if len(tied) == 1 else None, "tied": tied if len(tied) > 1 else [names[top]],
            "probability": float(p[top]), "runner_up": runner,
            "runner_up_probability": None if runner is None else float(p[int(order[1])]),
            "lead": None if runner is None else leads[runner], "lead_se": None if runner is None else errors[runner]}


def pairwise_orderings(groups: pd.DataFrame, samples: np.ndarray | None, names: Sequence[str]) -> list[dict]:
    """For each pair of neighbours in the ranking, P(the higher-ranked group loses more than the next in a run)."""
    out = []
    ranked = list(groups.sort_values("rank")["group"])
    for first, second in zip(ranked, ranked[1:]):
        p = (float(np.mean(samples[:, names.index(first)] < samples[:, names.index(second)]))
             if samples is not None and len(samples) else None)
        out.append({"more_hurt": str(first), "less_hurt": str(second), "probability": p})
    return out


def most_hurt_group(groups: pd.DataFrame, samples: np.ndarray | None = None, names: Sequence[str] = (), *,
                    blocks: Sequence[int] = ()) -> dict:
    """The most-hurt verdict of a diagnosis: the group with the highest P(most hurt), or none when others are
    tied with it (:func:`most_hurt_call`, the rule), or none when no group is hurt.

    ``groups`` is sorted by rank (the mean predicted cost, most negative first); ``samples`` the joint cost
    samples (draws x K, columns in the order of ``names``) and ``blocks`` their split blocks. No group is hurt
    when the lowest mean predicted cost is above -:data:`NEGLIGIBLE`. The named group need not be rank 1: a
    group can have the lowest mean cost and yet be the most hurt in fewer runs than another (its cost moves
    less from run to run than the other's, or the other's draws are skewed); the verdict is P's, and
    ``lowest_cost_group`` says which group has rank 1. Without samples the two lowest mean costs decide
    (named when they differ by more than one standard error of the difference from their intervals, else
    tied).

    Returns
    -------
    dict
        ``group`` (named, or None), ``callable`` (``group`` is not None), ``tied`` (the groups that cannot be
        told apart, highest P first; [group] when named; [] when no group is hurt), ``probability`` and
        ``cost`` and ``interval`` (of the named group, or of the top of ``tied``), ``runner_up`` (the next
        group by P), ``runner_up_probability``, ``runner_up_cost``, ``lead`` and ``lead_se`` (the top's lead in
        P over the runner-up and its standard error), ``margin`` (runner-up's cost minus the top's: negative
        where the top is not rank 1), ``lowest_cost_group`` (rank 1), ``lowest_cost``,
        ``lowest_cost_interval`` and ``orderings`` (:func:`pairwise_orderings`).
    """
    names = [str(n) for n in (list(names) or list(groups["group"]))]
    table = groups.assign(group=groups["group"].astype(str)).set_index("group")
    lowest = str(groups.iloc[0]["group"])
    orderings = pairwise_orderings(groups, samples, names)
    none = {"group": None, "callable": False, "tied": [], "probability": None, "cost": None, "interval": None,
            "runner_up": None, "runner_up_probability": None, "runner_up_cost": None, "lead": None, "lead_se": None,
            "margin": None, "lowest_cost_group": lowest, "lowest_cost": number_or_none(table.loc[lowest, "cost"]),
            "lowest_cost_interval": None, "orderings": orderings}
    if -float(table.loc[lowest, "cost"]) < NEGLIGIBLE:
        return none
    if len(groups) < 2:
        return none | {"group": lowest, "callable": True, "tied": [lowest], "probability": 1.0,
                       "cost": number_or_none(table.loc[lowest, "cost"])}
    if samples is not None and len(samples):
        call = most_hurt_call(samples, names, blocks=blocks)
    else:  # no samples: the two lowest mean costs, z >= 1 on their intervals
        first, second = (table.loc[str(g)] for g in groups["group"].iloc[:2])
        spread = math.hypot(float(first["half_width"]), float(second["half_width"])) / Z90
        lead = float(second["cost"] - first["cost"])
        runner = str(groups.iloc[1]["group"])
        call = {"group": lowest if lead > spread else None, "tied": [lowest] if lead > spread else [lowest, runner],
                "probability": None, "runner_up": runner, "runner_up_probability": None, "lead": None,
                "lead_se": None}
    top = call["tied"][0]
    runner = call["runner_up"]
    cost = number_or_none(table.loc[top, "cost"])
    runner_cost = number_or_none(table.loc[runner, "cost"])

    def interval(group: str) -> list[float | None]:
        row = table.loc[group]
        return [number_or_none(row.get("low", math.nan)), number_or_none(row.get("high", math.nan))]

    return {"group": call["group"], "callable": call["group"] is not None, "tied": call["tied"],
            "probability": call["probability"], "cost": cost, "interval": interval(top), "runner_up": runner,
            "runner_up_probability": call["runner_up_probability"], "runner_up_cost": runner_cost,
            "lead": call["lead"], "lead_se": call["lead_se"], "margin": runner_cost - cost,
            "lowest_cost_group": lowest, "lowest_cost": number_or_none(table.loc[lowest, "cost"]),
            "lowest_cost_interval": interval(lowest), "orderings": orderings}


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
    lines.append(most_hurt_sentence(diagnosis.most_hurt))
    lines.append(privacy_spend_sentence(diagnosis.privacy_spend))
    if diagnosis.split_mode == "expectation":
        lines.append(f"Predicted as the expectation over {len(diagnosis.split_seeds)} random train/test splits "
                     f"(seeds {', '.join(map(str, diagnosis.split_seeds))}, as dpfair compare draws them); the "
                     f"intervals and P(most hurt) are for one run on a random split.")
        own, pooled = diagnosis.split_most_hurt, diagnosis.most_hurt
        if own is not None and own.get("tied") and own.get("tied") != pooled.get("tied"):
            verdict = (f"the most hurt would be {own['group']}" if own["group"] is not None else
                       f"the most hurt could not be called between {_listed(own['tied'])}")
            lines.append(f"On seed {diagnosis.split_seeds[0]}'s split alone {verdict}: its few test rows differ "
                         f"from the average split's.")
    else:
        lines.append("Predicted for this one train/test split (its evaluation rows); another split's costs differ "
                     "(dpfair diagnose predicts the expectation over splits unless --split-mode per-split).")
    for row in diagnosis.groups.itertuples():
        if row.reasons:
            lines.append(f"{row.group}: {', '.join(row.reasons)} -- clipping part {row.clip_part:+.4f}, noise "
                         f"part {row.noise_part:+.4f}; {row.clip_fraction:.0%} of its rows clipped at C, "
                         f"Tr(H) {row.trace:.3g}, 1 - sum f^2 = {row.boundary:.3f}, n = {row.n:,}.")
            if "clipping" in row.reasons:
                lines.append(f"  {row.group}'s loss change from clipping per step, {row.clip_term:+.2e}, is "
                             f"{misalignment_share(row.clip_direction, row.clip_magnitude)} (direction "
                             f"{row.clip_direction:+.2e}, magnitude {row.clip_magnitude:+.2e}; Esipova et al. 2023).")
    lines += diagnosis.notes
    return lines


def misalignment_share(direction: float, magnitude: float) -> str:
    """Which of clipping's two errors dominates a group's clipping term, in words: the *direction* error (the
    clipped step turned away from the group's gradient: gradient misalignment, Esipova et al.'s main cause)
    or the *magnitude* error (the step shortened)."""
    total = abs(direction) + abs(magnitude)
    if total == 0:
        return "zero"
    share = abs(direction) / total
    kind = "mostly direction (misalignment)" if share >= 0.5 else "mostly magnitude (a shorter step)"
    return f"{kind}, {share:.0%} of it direction"


#: Clipped fractions closer than this are "about the same": no group is predicted to spend more privacy.
SPEND_MARGIN = 0.05


def privacy_spend_prediction(groups: pd.DataFrame, *, method: str = "dpsgd") -> dict:
    """Which group is predicted to spend the most privacy per record, from the fractions clipped at C.

    A record's per-step sensitivity under DP-SGD is :math:`\\min(\\|g_i\\|, C)/C`: at 1 (the run's worst case)
    exactly when it is clipped, below 1 otherwise, and its ex-post :math:`\\varepsilon_i` grows with it
    (:mod:`dpfair_analysis.privacy.individual`). So the group with the larger share of rows clipped at C along
    the (non-private) trajectory, ``clip_fraction``, is predicted to have the larger mean :math:`\\varepsilon_i`
    -- a prediction of the order only, called when the two shares differ by more than :data:`SPEND_MARGIN`.
    ``dpfair privacy groups`` measures it.

    Parameters
    ----------
    groups : pandas.DataFrame
        The diagnosis's groups (``group``, ``clip_fraction``).
    method : str
        The planned method (its fractions are taken at the uniform C; DPSGD-F and FairDP move the group bounds).

    Returns
    -------
    dict
        The verdict (``dpfair diagnose --json``'s ``privacy_spend``; :func:`privacy_spend_sentence` says it):
        ``most`` and ``least`` (group names; ``most`` None when the shares are within the margin),
        ``most_fraction``, ``least_fraction``, ``margin`` (:data:`SPEND_MARGIN`) and ``method``.
    """
    fractions = groups.set_index("group")["clip_fraction"].astype(float).dropna()
    verdict = {"most": None, "least": None, "most_fraction": None, "least_fraction": None, "margin": SPEND_MARGIN,
               "method": method}
    if len(fractions) < 2:
        return verdict
    most, least = str(fractions.idxmax()), str(fractions.idxmin())
    called = fractions[most] - fractions[least] > SPEND_MARGIN
    return verdict | {"most": most if called else None, "least": least, "most_fraction": float(fractions[most]),
                      "least_fraction": float(fractions[least])}


def privacy_spend_sentence(prediction: dict, *, method: str | None = None) -> str:
    """The sentence of a :func:`privacy_spend_prediction` (DPSGD-F and FairDP move the group bounds, so for
    them it is said of the uniform bound C the fractions are taken at); ``method`` (default the verdict's)."""
    method = prediction.get("method", "dpsgd") if method is None else method
    caveat = "" if method == "dpsgd" else f" (at the uniform C; {method} moves the group bounds, which changes it)"
    if prediction.get("least") is None:
        return "Privacy spent per record: one group, nothing to compare."
    if prediction["most"] is None:
        return (f"Privacy spent per record: the groups' shares of rows clipped at C are within {SPEND_MARGIN:.0%} "
                f"({prediction['least_fraction']:.0%} to {prediction['most_fraction']:.0%}), so no group is "
                f"predicted to spend noticeably more of the budget{caveat}; the run's guarantee is the same "
                f"epsilon for every record (measure with dpfair privacy groups).")
    return (f"Privacy spent per record: {prediction['most']} is predicted to spend more of the budget than "
            f"{prediction['least']} ({prediction['most_fraction']:.0%} of its rows clipped at C, where a record "
            f"spends the run's worst case, against {prediction['least_fraction']:.0%}){caveat}; the run's "
            f"guarantee is the same epsilon for every record, and what each record spends is an ex-post estimate "
            f"(measure it with dpfair privacy groups).")


def most_hurt_sentence(verdict: dict) -> str:
    """The sentence of a :func:`most_hurt_group` verdict: named, tied (cannot be called) or no group hurt; it
    says so where the named group is not the one with the lowest mean predicted cost."""
    if verdict.get("group") is None and not verdict.get("tied"):
        return f"No group is predicted to lose more than {NEGLIGIBLE:g} accuracy."

    def share(p: float | None) -> str:
        return "" if p is None else f", the most hurt in {p:.0%} of runs"

    def later(p: float | None) -> str:
        return "" if p is None else f", in {p:.0%}"

    if verdict["group"] is None:
        lead = ("" if verdict.get("lead") is None else
                f" (the lead in P(most hurt), {verdict['lead']:.2f}, is within {NAME_Z:.3g} standard errors, "
                f"{NAME_Z * verdict['lead_se']:.2f})")
        return (f"The most-hurt group cannot be called: {_listed(verdict['tied'])} are tied{lead}; "
                f"{verdict['tied'][0]} predicted {verdict['cost']:+.4f}{share(verdict['probability'])}; "
                f"{verdict['runner_up']} {verdict['runner_up_cost']:+.4f}"
                f"{later(verdict.get('runner_up_probability'))}.")
    if verdict.get("runner_up") is None:
        return f"Most hurt: {verdict['group']} (predicted {verdict['cost']:+.4f})."
    text = (f"Most hurt: {verdict['group']} (predicted {verdict['cost']:+.4f}{share(verdict['probability'])}; next "
            f"{verdict['runner_up']} {verdict['runner_up_cost']:+.4f}{later(verdict.get('runner_up_probability'))}).")
    lowest = verdict.get("lowest_cost_group")
    if lowest is not None and lowest != verdict["group"]:
        named, other = verdict.get("interval"), verdict.get("lowest_cost_interval")
        spread = ""
        if named and other and None not in (*named, *other) and named[1] - named[0] > other[1] - other[0]:
            spread = (f"{verdict['group']}'s cost varies more from run to run (90% interval [{named[0]:+.3f}, "
                      f"{named[1]:+.3f}] against [{other[0]:+.3f}, {other[1]:+.3f}]) and ")
        text += (f" {lowest} has the lowest mean predicted cost ({verdict['lowest_cost']:+.4f}), but {spread}"
                 f"{verdict['group']} is the most hurt in more runs: the name goes by P(most hurt).")
    return text


def _listed(names: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    names = [str(n) for n in names]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def number_or_none(value) -> float | None:
    """A float for JSON, or None where it is NaN."""
    value = float(value)
    return None if math.isnan(value) else value
