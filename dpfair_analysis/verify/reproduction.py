"""Reproduction verdicts: how a measured number or a paper's qualitative claim is judged against the paper.

The experiments (:mod:`dpfair_analysis.experiments`) compute; this module judges, with one vocabulary for every
reproduction in the toolkit, as :mod:`dpfair_analysis.verify.claims` judges the papers' theorems:

* a number or a claim **reproduces at the printed settings**, **reproduces after tuning** (within the stated
  budget, chosen on validation rows: :mod:`dpfair_analysis.experiments.tuning`), or **does not reproduce
  within the budget** (:func:`three_valued`); a cell is within a :class:`Tolerance` of the printed number
  (:func:`within`, :func:`cell_verdicts`), a row is its worst cell (:func:`row_verdicts`);
* paper 002 §4.1's qualitative claims on the measured tables (:func:`claim_verdicts`), carried over
  Figures 4-6 (:func:`sweep_verdicts`);
* papers 000 and 002 on MNIST under the reproduction protocol (:func:`mnist_table1_verdicts`,
  :func:`mnist_claims`);
* the later papers' printed gains on the equal-epsilon method grid (:func:`later_claim_verdicts`);
* paper 003's Table 2 under the protocol (:func:`tuned_side_by_side`, :func:`tuning_protocol`,
  :func:`format_tuned_table`) and Figures 1-5's statements (:func:`figure_claims`, :func:`figure_verdicts`).

Every verdict can fail: the tests feed each one numbers on both sides of its threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from dpfair_analysis.experiments.compare import CompareResult
from dpfair_analysis.experiments.fairdp import FIGURE_GROUPS, sweep_table
from dpfair_analysis.experiments.pfld import METHOD_LABELS, PAPER_TABLE2, PRIVATE_METHODS, summarize
from dpfair_analysis.experiments.pfld_tuned import SELECTION_SCORES, TunedTable2
from dpfair_analysis.experiments.method_grid import robustness_table
from dpfair_analysis.experiments.mnist_tuning import LATER_METHODS, LATER_SETTING, LATER_SETTING_NOTE, MNIST_GROUPS
from dpfair_analysis.experiments.tuning import SELECTION_PRIVACY, costs_of_privacy, printed_and_tuned
from dpfair_analysis.fairness.inequality import INDICES, inequality_indices
from dpfair_analysis.validation import check_choice, check_nonnegative

# ----------------------------------------------------------------------------- the vocabulary
#: the three verdicts, in order of preference
PRINTED, TUNED, NOT_REPRODUCED = ("reproduces at the printed settings", "reproduces after tuning",
                                  "does not reproduce within the budget")


VERDICTS = (PRINTED, TUNED, NOT_REPRODUCED)


@dataclass(frozen=True)
class Tolerance:
    """What "reproduces" means for one printed cell.

    A cell the paper presents as an achievement of the method (``direction="at_least"``: an accuracy, a
    cost of privacy) reproduces if the measured value is at least the printed one minus the margin; a cell
    that should be small (``"at_most"``: a fairness violation) if it is at most the printed one plus the
    margin. The margin is ``max(sd_factor x printed sd, floor)`` (no printed sd: the floor).
    """

    floor: float
    sd_factor: float = 1.0
    reason: str = ""

    def __post_init__(self) -> None:
        check_nonnegative(self.floor, "floor")
        check_nonnegative(self.sd_factor, "sd_factor")

    def margin(self, printed_sd: float | None = None) -> float:
        sd = 0.0 if printed_sd is None or not math.isfinite(printed_sd) else printed_sd
        return max(self.sd_factor * sd, self.floor)

    def describe(self) -> str:
        rule = f"max({self.sd_factor:g} x the printed sd, {self.floor:g})" if self.sd_factor else f"{self.floor:g}"
        return f"margin {rule}" + (f": {self.reason}" if self.reason else "")


DIRECTIONS = ("at_least", "at_most")


def within(measured: float, printed: float, *, margin: float, direction: str = "at_least") -> bool:
    """Whether ``measured`` reproduces ``printed`` within ``margin`` in ``direction`` (:class:`Tolerance`).
    A NaN measurement (a diverged run) never does."""
    check_choice(direction, "direction", DIRECTIONS)
    check_nonnegative(margin, "margin")
    if not (math.isfinite(measured) and math.isfinite(printed)):
        return False
    gap = measured - printed
    return bool(gap >= -margin - 1e-12) if direction == "at_least" else bool(gap <= margin + 1e-12)


def three_valued(printed_ok: bool | None, tuned_ok: bool) -> str:
    """The verdict (:data:`VERDICTS`) from whether the printed configuration's result reproduces
    (``None``: the printed configuration was not run, e.g. the paper prints nothing to run) and whether the
    chosen configuration's does."""
    if printed_ok:
        return PRINTED
    return TUNED if tuned_ok else NOT_REPRODUCED


def cell_verdicts(cells: pd.DataFrame, *, tolerance: Tolerance) -> pd.DataFrame:
    """Verdicts of printed cells. ``cells`` has one row per cell with ``printed``, ``printed_sd`` (may be
    NaN), ``direction`` and the two measurements ``at_printed`` (the printed configuration's, NaN if not
    run) and ``tuned`` (the chosen configuration's). Adds ``margin``, ``diff_printed`` and ``diff_tuned``
    (measured minus printed), ``ok_printed``, ``ok_tuned``, ``verdict`` and ``note`` (the tuned measurement is
    better than printed by more than the margin: it reproduces the number, not necessarily a claim that rests
    on it being bad, e.g. a disparity)."""
    out = cells.copy()
    out["margin"] = [tolerance.margin(sd) for sd in out["printed_sd"]]
    out["diff_printed"] = out["at_printed"] - out["printed"]
    out["diff_tuned"] = out["tuned"] - out["printed"]
    out["ok_printed"] = [within(m, p, margin=g, direction=d) for m, p, g, d in
                         zip(out["at_printed"], out["printed"], out["margin"], out["direction"])]
    out["ok_tuned"] = [within(m, p, margin=g, direction=d) for m, p, g, d in
                       zip(out["tuned"], out["printed"], out["margin"], out["direction"])]
    out["verdict"] = [three_valued(a, b) for a, b in zip(out["ok_printed"], out["ok_tuned"])]
    better = [(d > g) if direction == "at_least" else (d < -g)
              for d, g, direction in zip(out["diff_tuned"], out["margin"], out["direction"])]
    out["note"] = ["better than printed by more than the margin" if b else "" for b in better]
    return out


def row_verdicts(cells: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """One verdict per ``by`` row of :func:`cell_verdicts`' output: the printed configuration reproduces
    the row if it reproduces every cell of it, the chosen one likewise. Columns ``by``, ``cells``,
    ``ok_printed``, ``ok_tuned``, ``verdict``."""
    grouped = cells.groupby(list(by), sort=False)
    table = grouped.agg(cells=("verdict", "size"), ok_printed=("ok_printed", "all"), ok_tuned=("ok_tuned", "all"))
    table["verdict"] = [three_valued(a, b) for a, b in zip(table["ok_printed"], table["ok_tuned"])]
    return table.reset_index()


def verdict_counts(verdicts: pd.Series) -> dict[str, int]:
    """How many of each of :data:`VERDICTS` (every kind listed, zeros included)."""
    counts = verdicts.value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


# ----------------------------------------------------------------------------- the later papers' printed gains (issue 51.3)
@dataclass(frozen=True)
class LaterClaim:
    """A printed number of a later paper: ``method``'s worst-group accuracy exceeds ``against``'s by at least
    ``printed`` (a fraction), on the paper's ``settings``."""

    id: str
    paper: str
    statement: str
    method: str
    against: str
    printed: float
    settings: str


#: what the two later papers print that this study can measure (only their abstracts and code were reachable here)
LATER_CLAIMS = (
    LaterClaim("zhao-vs-constant", "Zhao et al. 2025 (arXiv:2506.01396v2), abstract",
               "bounded adaptive clipping improves worst-class accuracy by 5 points compared to constant clipping",
               "boundedadaptive", "dpsgd", 0.05, "skewed MNIST and Fashion MNIST, CNNs"),
    LaterClaim("zhao-vs-unbounded", "Zhao et al. 2025 (arXiv:2506.01396v2), abstract",
               "bounded adaptive clipping improves worst-class accuracy by over 10 percentage points compared to "
               "unbounded adaptive clipping", "boundedadaptive", "optq", 0.10, "skewed MNIST and Fashion MNIST, CNNs"),
)
#: what "reproduces" means for a printed gain: at most this far below it (the paper prints no sd here)
CLAIM_MARGIN = 0.02
#: the verdict where the study's setting is not the paper's: the measured gain is reported, not judged
NO_MATCHING_SETTING = "no matching setting: measured, not judged"


def later_claim_verdicts(robustness: Mapping[str, pd.DataFrame], *, judged: Mapping[str, str] | None = None,
                         margin: float = CLAIM_MARGIN) -> pd.DataFrame:
    """One row per (claim of :data:`LATER_CLAIMS`, setting): the gain of the claim's method over the other in test
    worst-group accuracy at the defaults and after tuning (the method grid's robustness tables,
    :func:`~dpfair_analysis.experiments.method_grid.robustness_table`).

    The three-valued verdict (:func:`three_valued`: the gain at least ``printed - margin``) is drawn on the settings
    of ``judged`` (setting -> how it relates to the paper's, e.g. the nearest setting to it, shown as
    ``setting_note``); on the others the gain is reported and the verdict is :data:`NO_MATCHING_SETTING`."""
    judged = dict(judged or {})
    out = []
    for setting, table in robustness.items():
        table = table.set_index("method")
        for claim in LATER_CLAIMS:
            if claim.method not in table.index or claim.against not in table.index:
                continue
            at_default = float(table.loc[claim.method, "default_worst"] - table.loc[claim.against, "default_worst"])
            tuned = float(table.loc[claim.method, "chosen_worst"] - table.loc[claim.against, "chosen_worst"])
            verdict = three_valued(within(at_default, claim.printed, margin=margin),
                                   within(tuned, claim.printed, margin=margin))
            out.append({"claim": claim.id, "setting": setting, "paper": claim.paper, "statement": claim.statement,
                        "paper_settings": claim.settings, "setting_note": judged.get(setting, "not the paper's"),
                        "printed_gain": claim.printed, "margin": margin, "gain_at_defaults": at_default,
                        "gain_after_tuning": tuned, "verdict": verdict if setting in judged else NO_MATCHING_SETTING})
    return pd.DataFrame(out)


def mnist_later_claims(rows: pd.DataFrame, complete: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(worst-class table, verdicts) of the later papers' claims on the full-MNIST tuning grid
    (:mod:`~dpfair_analysis.experiments.mnist_tuning`'s rows): per method of
    :data:`~dpfair_analysis.experiments.mnist_tuning.LATER_METHODS` whose budget is ``complete``, the printed
    configuration's and the chosen one's test worst-class accuracy (chosen on validation worst-class accuracy, as in
    the equal-epsilon method grid: :func:`~dpfair_analysis.experiments.method_grid.robustness_table`), and
    :func:`later_claim_verdicts` judged on this setting; a claim whose two methods are not both complete has no
    row yet."""
    methods = [m for m in LATER_METHODS if m in complete]
    if not methods:
        return pd.DataFrame(), pd.DataFrame()
    worst = robustness_table(rows[rows["method"].isin(methods)])
    return worst, later_claim_verdicts({LATER_SETTING: worst}, judged={LATER_SETTING: LATER_SETTING_NOTE})


def mnist_equal_epsilon(rows: pd.DataFrame, complete: Sequence[str]) -> pd.DataFrame:
    """Every method of the full-MNIST tuning grid whose budget is ``complete``, at equal privacy, chosen on the
    validation images' worst class (:func:`~dpfair_analysis.experiments.method_grid.robustness_table`: printed and
    chosen test worst class, gap and overall accuracy, and the range of the worst class over the method's grid),
    with ``chosen_accounted``: whether the chosen configuration samples as the accountant assumes (Poisson), i.e.
    whether its epsilon is a guarantee. SGD, where complete, is the non-private reference (epsilon NaN)."""
    part = rows[rows["method"].isin(complete)] if len(rows) else rows
    if not len(part):
        return pd.DataFrame()
    table = robustness_table(part)
    return table.assign(chosen_accounted=table["chosen"].str.contains("sampling poisson"))


def mnist_findings(status: pd.DataFrame, table1: pd.DataFrame, claims: pd.DataFrame, later: pd.DataFrame,
                   equal_eps: pd.DataFrame) -> str:
    """The full-MNIST tuning study's findings as text, from its tables: how much of the budget is in, paper 000's
    Table 1 verdict counts, each qualitative claim's and each later paper's claim's verdict, and the methods with the
    highest and lowest chosen worst class at equal privacy."""
    done = int(status["configurations_run"].sum())
    lines = [f"Budget: {done} of {int(status['budget'].sum())} runs; complete: "
             f"{', '.join(status.loc[status['complete'], 'method']) or 'none'}."]
    if len(table1):
        counts = verdict_counts(table1["verdict"])
        lines.append(f"Paper 000 Table 1 (MNIST), {len(table1)} cells: "
                     + "; ".join(f"{n} {v}" for v, n in counts.items()) + ".")
    lines += [f"Claim {row['claim']}: {row['verdict']}." for row in claims.to_dict("records")]
    lines += [f"Claim {row['claim']} (printed gain {row['printed_gain']:+.2f}): worst class "
              f"{row['gain_at_defaults']:+.3f} at the printed configurations, {row['gain_after_tuning']:+.3f} chosen -- "
              f"{row['verdict']}." for row in later.to_dict("records")]
    private = equal_eps[equal_eps["method"] != "sgd"] if len(equal_eps) else equal_eps
    if len(private):
        ranked = private.sort_values("chosen_worst", ascending=False)

        def said(row: dict) -> str:
            caveat = "" if row["chosen_accounted"] else ", shuffled batches: its epsilon is not a guarantee"
            return f"{row['method']} {row['chosen_worst']:.3f} ({row['chosen']}{caveat})"

        lines.append(f"Equal privacy, chosen on the validation worst class: highest test worst class "
                     f"{said(ranked.iloc[0].to_dict())}; lowest {said(ranked.iloc[-1].to_dict())}.")
        accounted = ranked[ranked["chosen_accounted"]]
        if len(accounted) and not ranked.iloc[0]["chosen_accounted"]:
            lines.append(f"Highest of those whose chosen sampling is the accountant's: "
                         f"{said(accounted.iloc[0].to_dict())}.")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- paper 002 §4.1 on the measured tables
def claim_verdicts(results: dict[str, CompareResult], *, tolerance: float = 0.0,
                   relative_tolerance: float = 0.1) -> pd.DataFrame:
    """Paper 002 §4.1's qualitative claims, one row per (claim, data set), from the measured tables:

    * ``least_loss``: "FairDP has the least accuracy loss from SGD [of the private methods]" (overall);
      holds if FairDP's mean loss is within ``tolerance`` of the best private method's;
    * ``sgd_like_inequality``: FairDP "offers equal fair statistics as SGD (a lower value is better)": on
      >= 3 of the 4 indices FairDP's value is at most SGD's x (1 + ``relative_tolerance``);
    * ``fairest_private``: "FairDP can outperform other private learning methods on ... model fairness":
      FairDP has the lowest value of the private methods on >= 3 of the 4 indices;
    * ``optq_hurts_adult`` (Adult only): "Opt-Q ... reduces both per-class and overall accuracies":
      Opt-Q's mean loss is negative overall and in every group.

    Means over seeds; ``margin`` is the quantity the verdict compares (its sd where there is one). An index
    that is infinite (a zero-accuracy group) is no evidence either way and is left out."""
    rows = []
    for name, result in results.items():
        table = result.table
        overall = table[(table["group"] == "all") & (table["method"] != "sgd")].set_index("method")
        best = overall["cost"].idxmax()
        fair = overall.loc["fairdp", "cost"] if "fairdp" in overall.index else math.nan
        others = overall.drop(index="fairdp", errors="ignore")["cost"]
        rows.append({"claim": "least_loss", "dataset": name, "holds": bool(fair >= others.max() - tolerance),
                     "margin": float(fair - others.max()), "detail": f"best private method: {best}",
                     "sd": float(overall.loc["fairdp", "cost_sd"]) if "fairdp" in overall.index else math.nan})
        ineq = result.inequality.set_index("method")
        if "sgd" in ineq.index and "fairdp" in ineq.index:
            decided = [i for i in INDICES if np.isfinite(ineq[i]).all()]
            fair_idx, sgd_idx = ineq.loc["fairdp", decided], ineq.loc["sgd", decided]
            as_fair = fair_idx <= sgd_idx * (1 + relative_tolerance)
            rows.append({"claim": "sgd_like_inequality", "dataset": name, "holds": bool(as_fair.sum() >= 3),
                         "margin": float((fair_idx / sgd_idx).max()) if len(decided) else math.nan,
                         "detail": f"FairDP <= SGD x {1 + relative_tolerance:g} on {int(as_fair.sum())} of "
                                   f"{len(decided)} indices; margin = largest FairDP/SGD ratio", "sd": math.nan})
            private = ineq.drop(index="sgd")[decided]
            lowest = {i: private[i].idxmin() == "fairdp" for i in decided}
            wins = sum(lowest.values())
            rows.append({"claim": "fairest_private", "dataset": name, "holds": bool(wins >= 3),
                         "margin": float((private.loc["fairdp"] / private.drop(index="fairdp").min()).max())
                         if len(decided) else math.nan,
                         "detail": f"FairDP lowest of the private methods on {wins} of {len(decided)} indices; "
                                   f"margin = largest FairDP/best-other ratio", "sd": math.nan})
        if name.startswith("adult") and "optq" in table["method"].values:
            optq = table[(table["method"] == "optq") & ~table["group"].isin(["max_gap"])].set_index("group")
            rows.append({"claim": "optq_hurts_adult", "dataset": name, "holds": bool((optq["cost"] < 0).all()),
                         "margin": float(optq["cost"].max()), "detail": "largest (least negative) Opt-Q loss",
                         "sd": float(optq.loc[optq["cost"].idxmax(), "cost_sd"])})
    return pd.DataFrame(rows)


def sweep_verdicts(rows: pd.DataFrame, dataset: str, *, tolerance: float = 0.005) -> pd.DataFrame:
    """Table 1's ``least_loss`` claim carried over Figures 4-6 (§4.3, "adaptive performance": clipping tuned
    for one learning rate need not suit another, and FairDP adapts its bounds): at every swept value FairDP is
    the most accurate private method, overall and in each group the figure draws.

    One row per (parameter, group) in :func:`claim_verdicts`' layout: ``holds`` if at every value FairDP's
    mean accuracy is within ``tolerance`` of the best private method's; ``margin`` is FairDP's accuracy minus
    the best other private method's at the value where it falls furthest behind (positive: FairDP leads
    everywhere, and this is its narrowest lead); ``detail`` counts the values and names that value and the
    best other method there."""
    groups = ["all", *FIGURE_GROUPS[dataset]]
    table = sweep_table(rows, dataset)
    private = table[table.index.get_level_values("method") != "sgd"]
    verdicts = []
    for parameter in dict.fromkeys(private.index.get_level_values("parameter")):
        part = private.xs(parameter, level="parameter")
        values = list(dict.fromkeys(part.index.get_level_values("value")))
        for group in groups:
            accuracy = part[group].unstack("method")
            if "fairdp" not in accuracy:
                continue
            others = accuracy.drop(columns="fairdp")
            lead = accuracy["fairdp"] - others.max(axis=1)
            worst = lead.idxmin()
            best_count = int((lead >= -tolerance).sum())
            verdicts.append({"claim": f"least_loss_across_{parameter}", "dataset": dataset, "group": group,
                             "holds": best_count == len(values), "margin": float(lead[worst]),
                             "detail": f"FairDP within {tolerance:g} of the best private method at {best_count} "
                                       f"of {len(values)} values; " + (
                                           f"furthest behind at {worst:g} ({others.loc[worst].idxmax()} leads)"
                                           if lead[worst] < 0 else
                                           f"narrowest lead at {worst:g} (over {others.loc[worst].idxmax()})"),
                             "sd": math.nan})
    return pd.DataFrame(verdicts)


# ----------------------------------------------------------------------------- papers 000 and 002 on MNIST, tuned
#: MNIST cells of paper 000 Table 1 (accuracy of SGD, cost of the private methods): no sd is printed; our
#: own seed-to-seed sd of DPSGD's and DPSGD-F's class-8 cost at the printed settings is 0.036 (2 seeds),
#: of the totals and class 2 at most 0.009
MNIST_TOLERANCE = {"all": Tolerance(0.03, 0.0, "3 x our largest seed sd of a total or class-2 cost (0.009)"),
                   "2": Tolerance(0.03, 0.0, "3 x our largest seed sd of a total or class-2 cost (0.009)"),
                   "8": Tolerance(0.07, 0.0, "2 x our seed sd of DPSGD's and DPSGD-F's class-8 cost (0.036)")}


#: paper 000 §6.1.4: costs are "equal" when every two groups' costs differ by at most tau
EQUAL_COST_TAU = 0.05


def mnist_table1_verdicts(costs: pd.DataFrame, printed_table: pd.DataFrame, *,
                          tolerances: Mapping[str, Tolerance] = MNIST_TOLERANCE) -> pd.DataFrame:
    """Paper 000 Table 1's MNIST cells (``printed_table``: rows ``method, all, 2, 8`` with SGD's accuracy and
    the private methods' costs) against :func:`~dpfair_analysis.experiments.tuning.costs_of_privacy`: one row per
    (method, group) with the printed value, the printed and the tuned configuration's measurement, each cell's
    margin (``tolerances`` by group) and the three-valued verdict (:func:`cell_verdicts`; direction "at_least": a
    cost no worse than printed by more than the margin)."""
    cells = []
    wide = costs.set_index(["which", "method"])
    paper = printed_table.set_index("method")
    for method in paper.index:
        if ("printed", method) not in wide.index:
            continue
        for g in MNIST_GROUPS:
            cells.append({"method": method, "group": g, "printed": float(paper.loc[method, g]),
                          "printed_sd": math.nan, "direction": "at_least",
                          "at_printed": float(wide.loc[("printed", method), g]),
                          "tuned": float(wide.loc[("tuned", method), g])})
    frames = []
    for g, part in pd.DataFrame(cells).groupby("group", sort=False):
        judged = cell_verdicts(part, tolerance=tolerances[g])
        judged["tolerance"] = tolerances[g].describe()
        frames.append(judged)
    out = pd.concat(frames).sort_index(kind="stable").reset_index(drop=True)
    order = {m: i for i, m in enumerate(printed_table["method"])}
    return out.sort_values(["method", "group"], key=lambda c: c.map(order) if c.name == "method"
                           else c.map({g: i for i, g in enumerate(MNIST_GROUPS)})).reset_index(drop=True)


def mnist_claims(rows: pd.DataFrame, *, focus: tuple[str, str] = ("2", "8"), tau: float = EQUAL_COST_TAU,
                 tolerance: float = 0.0) -> pd.DataFrame:
    """The papers' qualitative claims at the printed and at the tuned configurations, with the three-valued
    verdict, on the groups ``focus`` = (reference, minority): MNIST's classes 2 and 8 (paper 000's), or e.g.
    Adult's Male and Female. From paper 000: ``dpsgd_disparate`` (DPSGD's costs on the two groups differ by
    more than tau: on MNIST class 8 loses more, on Adult the men), ``naive_equal`` and ``dpsgdf_equal`` (|Delta^ref - Delta^min| <= tau),
    ``dpsgdf_least_loss``
    (DPSGD-F's total cost is the least of DPSGD, Naive and DPSGD-F, within ``tolerance``); from paper 002
    (:func:`claim_verdicts`, on one seed): ``least_loss``,
    ``sgd_like_inequality`` and ``fairest_private`` for FairDP among DPSGD, Opt-Q, DPSGD-F and FairDP. Methods
    not run are skipped."""

    groups = [g for g in dict.fromkeys(rows["group"]) if g != "all"]
    ref, low = focus
    if ref not in groups or low not in groups:
        raise ValueError(f"focus must name two groups of the rows ({groups}), got {focus!r}")
    selection = printed_and_tuned(rows, groups=("all", *groups))
    costs = costs_of_privacy(selection, groups=("all", *groups))
    found = {}
    for which, part in costs.groupby("which", sort=False):
        by = part.set_index("method")
        accuracy = selection[selection["which"] == which].set_index("method")
        claims = {}
        if "dpsgd" in by.index:
            claims["dpsgd_disparate"] = (abs(by.loc["dpsgd", ref] - by.loc["dpsgd", low]) > tau,
                                         f"DPSGD cost {ref} {by.loc['dpsgd', ref]:+.3f}, {low} "
                                         f"{by.loc['dpsgd', low]:+.3f}")
        for method in ("naive", "dpsgdf"):
            if method in by.index:
                gap = abs(by.loc[method, ref] - by.loc[method, low])
                claims[f"{method}_equal"] = (gap <= tau, f"|Delta^{ref} - Delta^{low}| = {gap:.3f} (tau {tau:g})")
        trio = [m for m in ("dpsgd", "naive", "dpsgdf") if m in by.index]
        if "dpsgdf" in trio and len(trio) > 1:
            best = by.loc[trio, "all"].max()
            claims["dpsgdf_least_loss"] = (by.loc["dpsgdf", "all"] >= best - tolerance,
                                           ", ".join(f"{m} {by.loc[m, 'all']:+.3f}" for m in trio))
        compared = [m for m in ("sgd", "dpsgd", "optq", "dpsgdf", "fairdp") if m in by.index]
        if {"sgd", "fairdp"} <= set(compared) and len(compared) > 2:
            table = pd.DataFrame([{"method": m, "group": "all", "cost": by.loc[m, "all"], "cost_sd": math.nan}
                                  for m in compared])
            inequality = pd.DataFrame([{"method": m, **inequality_indices(accuracy.loc[m, groups].to_numpy(float))}
                                       for m in compared])[["method", *INDICES]]
            verdicts = claim_verdicts({"mnist": SimpleNamespace(table=table, inequality=inequality)},
                                      tolerance=tolerance)
            for v in verdicts.itertuples():
                claims[f"002.{v.claim}"] = (bool(v.holds), f"margin {v.margin:+.3f}; {v.detail}")
        found[which] = claims
    rows_out = []
    for claim, (printed_ok, printed_detail) in found.get("printed", {}).items():
        tuned_ok, tuned_detail = found.get("tuned", {}).get(claim, (False, "not run"))
        rows_out.append({"claim": claim, "holds_printed": bool(printed_ok), "detail_printed": printed_detail,
                         "holds_tuned": bool(tuned_ok), "detail_tuned": tuned_detail,
                         "verdict": three_valued(bool(printed_ok), bool(tuned_ok))})
    return pd.DataFrame(rows_out)


# ----------------------------------------------------------------------------- paper 003 under the protocol
#: a Table 2 cell (accuracy, violation) reproduces if the accuracy is at most the margin below the printed
#: one and the violation at most the margin above it
TABLE2_TOLERANCE = Tolerance(0.02, 1.0, "the paper's fold-to-fold sd, at least 0.02")


def _mode_configuration(part: pd.DataFrame) -> str:
    """The configuration chosen in most folds (ties: the best mean validation score)."""
    counts = part.groupby("configuration", sort=False).agg(n=("fold", "size"), score=("validation_score", "mean"))
    return counts.sort_values(["n", "score"], ascending=False).index[0]


def tuned_side_by_side(tuned: TunedTable2, *, tolerance: Tolerance = TABLE2_TOLERANCE) -> pd.DataFrame:
    """One row per (constraint, method): the paper's accuracy / violation (sd), the printed configuration's
    (:func:`~dpfair_analysis.experiments.pfld.table2`, "defaults") and the tuned one's (mean, sd over folds), the signed differences from the
    paper, each measurement's verdict per cell, and the row's three-valued verdict (:mod:`.tuning`: both the
    accuracy and the violation must reproduce). Also the budget, the configuration chosen in most folds and how
    many folds chose it, the selection score and how the selection is accounted."""

    tuned_summary = summarize(tuned.chosen.assign(dataset=tuned.dataset))
    default_summary = summarize(tuned.defaults.assign(dataset=tuned.dataset))
    key = tuned.dataset.replace("adult", "income")
    rows = []
    for t in tuned_summary.itertuples():
        d = default_summary[(default_summary["constraint"] == t.constraint) & (default_summary["method"] == t.method)]
        paper = PAPER_TABLE2[(PAPER_TABLE2["dataset"] == key) & (PAPER_TABLE2["constraint"] == t.constraint)
                             & (PAPER_TABLE2["method"] == t.method)]
        part = tuned.chosen[(tuned.chosen["constraint"] == t.constraint) & (tuned.chosen["method"] == t.method)]
        mode = _mode_configuration(part)
        row = {"dataset": tuned.dataset, "constraint": t.constraint, "method": t.method,
               "paper_accuracy": paper["accuracy"].iloc[0] if len(paper) else math.nan,
               "paper_accuracy_sd": paper["accuracy_sd"].iloc[0] if len(paper) else math.nan,
               "paper_violation": paper["violation"].iloc[0] if len(paper) else math.nan,
               "paper_violation_sd": paper["violation_sd"].iloc[0] if len(paper) else math.nan,
               "default_accuracy": d["accuracy"].iloc[0], "default_accuracy_sd": d["accuracy_sd"].iloc[0],
               "default_violation": d["violation"].iloc[0], "default_violation_sd": d["violation_sd"].iloc[0],
               "tuned_accuracy": t.accuracy, "tuned_accuracy_sd": t.accuracy_sd,
               "tuned_violation": t.violation, "tuned_violation_sd": t.violation_sd,
               "budget": len(tuned.grids[t.method]), "chosen_most_often": mode,
               "folds_choosing_it": int((part["configuration"] == mode).sum()), "folds": len(part),
               "selection_score": SELECTION_SCORES["clf" if t.method == "clf" else "fair"],
               "epsilon": (float(part["epsilon"].mean()) if t.method in PRIVATE_METHODS else None),
               "selection_privacy": SELECTION_PRIVACY if t.method in PRIVATE_METHODS else "non-private method"}
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty or table["paper_accuracy"].isna().all():
        table["verdict"] = "no printed cell"
        return table
    cells = pd.concat([
        pd.DataFrame({"constraint": table["constraint"], "method": table["method"], "quantity": quantity,
                      "printed": table[f"paper_{quantity}"], "printed_sd": table[f"paper_{quantity}_sd"],
                      "direction": direction, "at_printed": table[f"default_{quantity}"],
                      "tuned": table[f"tuned_{quantity}"]})
        for quantity, direction in (("accuracy", "at_least"), ("violation", "at_most"))], ignore_index=True)
    cells = cells[cells["printed"].notna()]
    judged = cell_verdicts(cells, tolerance=tolerance)
    for quantity in ("accuracy", "violation"):
        part = judged[judged["quantity"] == quantity].set_index(["constraint", "method"])
        index = pd.MultiIndex.from_frame(table[["constraint", "method"]])
        table[f"{quantity}_margin"] = part["margin"].reindex(index).to_numpy()
        table[f"{quantity}_verdict"] = part["verdict"].reindex(index).to_numpy()
    verdicts = row_verdicts(judged, ["constraint", "method"]).set_index(["constraint", "method"])
    table["verdict"] = verdicts["verdict"].reindex(pd.MultiIndex.from_frame(table[["constraint", "method"]])) \
        .fillna("no printed cell").to_numpy()
    table["tolerance"] = tolerance.describe()
    return table


def tuning_protocol(tuned: TunedTable2, *, tolerance: Tolerance = TABLE2_TOLERANCE) -> dict:
    """The protocol of a tuned table in JSON form: each method's budget, how configurations are chosen and
    on what, how the selection is accounted, and the tolerance of the verdicts."""

    return {"budgets": {m: g.as_dict() for m, g in tuned.grids.items()}, "selection_score": dict(SELECTION_SCORES),
            "validation": f"{tuned.validation_fraction:g} of each training fold, stratified by group x label; the "
                          "chosen configuration is refitted on the whole training fold and tested on the test fold",
            "selection_privacy": SELECTION_PRIVACY, "tolerance": tolerance.describe(),
            "verdicts": list(VERDICTS)}


def format_tuned_table(summary: pd.DataFrame) -> str:
    """Human table of :func:`tuned_side_by_side`: per constraint and method, the paper's accuracy / violation,
    the printed configuration's, the tuned one's, and the verdict."""
    def pair(acc: float, viol: float) -> str:
        return "—" if acc != acc else f"{acc:.3f} / {viol:.3f}"

    lines = [f"{'constraint':10s} {'method':7s} {'paper':15s} {'printed cfg':15s} {'tuned':15s} {'verdict':38s} "
             "chosen in most folds"]
    for _, r in summary.iterrows():
        lines.append(f"{r['constraint']:10s} {METHOD_LABELS.get(r['method'], r['method']):7s} "
                     f"{pair(r['paper_accuracy'], r['paper_violation']):15s} "
                     f"{pair(r['default_accuracy'], r['default_violation']):15s} "
                     f"{pair(r['tuned_accuracy'], r['tuned_violation']):15s} {r['verdict']:38s} "
                     f"{r['chosen_most_often']} ({r['folds_choosing_it']}/{r['folds']})")
    return "\n".join(lines)


def _per_value(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean and sd over seeds of accuracy, violation and the trade-off accuracy - violation per ``by``,
    diverged runs left out (counted in ``diverged``)."""
    rows = rows.assign(tradeoff=rows["accuracy"] - rows["violation"],
                       diverged=rows["diverged_at_step"].notna() if "diverged_at_step" in rows else False)
    grouped = rows.groupby(list(by), sort=True)
    table = grouped[["accuracy", "violation", "tradeoff"]].agg(["mean", "std"])
    table.columns = [f"{a}_{b}".replace("_mean", "") for a, b in table.columns]
    table["diverged"] = grouped["diverged"].sum()
    return table.reset_index()


def _spearman(x: Sequence[float], y: Sequence[float]) -> float:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    return float(spearmanr(x[keep], y[keep]).statistic) if keep.sum() >= 3 else math.nan


def figure_claims(sweeps: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Paper 003 §8.2-8.5's statements about Figures 1-5, each tested on sweep rows (test split of each seed;
    means over seeds, diverged runs left out). ``sweeps`` maps ``"fig1"`` (:func:`~dpfair_analysis.experiments.pfld.epsilon_sweep`, PF-LD and M),
    ``"fig2"`` (:func:`~dpfair_analysis.experiments.pfld.clip_sweep`, with its Fig. 3 columns), ``"fig4"`` (:func:`~dpfair_analysis.experiments.pfld.dual_clip_sweep`) and ``"fig5"``
    (:func:`~dpfair_analysis.experiments.pfld.missing_sweep`) to their rows; absent keys are skipped. One row per claim: ``figure``, ``claim``,
    the paper's words (``statement``), ``holds`` (None where the rows cannot test it: an sd from one seed) and
    the numbers it rests on (``detail``). The tests:

    * fig1 ``violation_falls``: "the fairness violation score decreases as the privacy budget increases" --
      PF-LD's mean violation is lower at the largest epsilon than at the smallest and its Spearman correlation
      with epsilon is at most -0.5;
    * fig1 ``accuracy_slightly_decreases``: PF-LD's mean accuracy at the largest epsilon is 0 to 0.05 below the
      smallest's;
    * fig1 ``pfld_beats_m``: "in most cases PF-LD is more accurate and produces smaller violations [than M]" --
      at more than half of the epsilons, both;
    * fig1 ``pfld_more_robust``: "more robust than M ... comparing the standard deviations" -- PF-LD's sd over
      seeds, averaged over the epsilons, is below M's for accuracy and for violation;
    * fig2 ``best_cp_10_to_20``: "the best accuracy/fairness tradeoff is obtained when C_p in [10, 20]" -- at more
      than half of the epsilons the largest mean accuracy - violation is at C_p = 10 or 20;
    * fig3 ``share_above_falls``: "the percentage ... exceeding C_p is very high when C_p is small", "at large
      C_p most individual gradients are smaller" -- at epsilon 1, in every group, the share above the smallest
      C_p is at least 0.5 and above the largest below 0.5;
    * fig4 ``intermediate_cd_best``: "intermediate clipping values suggest better accuracy/fairness tradeoffs" --
      at more than half of the epsilons the best mean trade-off is at neither the smallest nor the largest C_d;
    * fig4 ``large_cd_fluctuates``: "large values of C_d introduce large fluctuation" -- at more than half of
      the epsilons the largest C_d diverged in some seed or has the largest sd of accuracy;
    * fig5 ``fewer_missing_smaller_violation``: "the model achieves smaller fairness violations as the number of
      missing values decreases" -- at more than half of the epsilons the Spearman correlation of the missing
      rate and the mean violation is positive.
    """
    claims = []

    def add(figure: str, claim: str, statement: str, holds: bool | None, detail: str) -> None:
        claims.append({"figure": figure, "claim": claim, "statement": statement,
                       "holds": None if holds is None else bool(holds), "detail": detail})

    if "fig1" in sweeps:
        table = _per_value(sweeps["fig1"], ["method", "requested_epsilon"])
        pfld = table[table["method"] == "pfld"].sort_values("requested_epsilon")
        eps, viol, acc = pfld["requested_epsilon"], pfld["violation"].to_numpy(), pfld["accuracy"].to_numpy()
        rho = _spearman(eps, viol)
        add("1", "violation_falls", "the fairness violation score decreases as the privacy budget increases",
            viol[-1] < viol[0] and rho <= -0.5,
            f"PF-LD violation {', '.join(f'{v:.3f}' for v in viol)} at epsilon "
            f"{', '.join(f'{e:g}' for e in eps)}; Spearman {rho:.2f}")
        drop = acc[-1] - acc[0]
        add("1", "accuracy_slightly_decreases", "the model accuracy slightly decreases as epsilon increases",
            -0.05 <= drop <= 0, f"PF-LD accuracy {acc[0]:.3f} -> {acc[-1]:.3f} ({drop:+.3f})")
        m = table[table["method"] == "m"]
        both = pfld.merge(m, on="requested_epsilon", how="inner", suffixes=("", "_m"))
        if len(both):
            wins = int(((both["accuracy"] >= both["accuracy_m"]) & (both["violation"] <= both["violation_m"])).sum())
            add("1", "pfld_beats_m", "in most cases PF-LD is more accurate and produces smaller fairness violations "
                "than M", wins > len(both) / 2, f"PF-LD ahead on both at {wins} of {len(both)} epsilons")
            sd = {q: (both[f"{q}_std"].mean(), both[f"{q}_std_m"].mean()) for q in ("accuracy", "violation")}
            testable = all(math.isfinite(v) for pair in sd.values() for v in pair)  # one seed: no sd
            add("1", "pfld_more_robust", "PF-LD produces models that are more robust than M's (smaller sd)",
                all(a < b for a, b in sd.values()) if testable else None,
                "; ".join(f"mean sd of {q}: PF-LD {a:.3f}, M {b:.3f}" for q, (a, b) in sd.items()))
    if "fig2" in sweeps:
        table = _per_value(sweeps["fig2"], ["requested_epsilon", "clip_primal"])
        best = table.loc[table.groupby("requested_epsilon")["tradeoff"].idxmax()]
        hits = int(best["clip_primal"].isin([10.0, 20.0]).sum())
        add("2", "best_cp_10_to_20", "the best accuracy/fairness tradeoff is obtained when C_p is in [10, 20]",
            hits > len(best) / 2, "best C_p by accuracy - violation at epsilon "
            + ", ".join(f"{r.requested_epsilon:g}: {r.clip_primal:g}" for r in best.itertuples()))
        above = [c for c in sweeps["fig2"].columns if c.startswith("frac_above[")]
        at_one = sweeps["fig2"][sweeps["fig2"]["requested_epsilon"] == 1.0]
        if above and len(at_one):
            shares = at_one.groupby("clip_primal")[above].mean().sort_index()
            low, high = shares.iloc[0], shares.iloc[-1]
            add("3", "share_above_falls", "the share of group-gradient norms above C_p is very high for small C_p and "
                "most are below C_p for large C_p", bool((low >= 0.5).all() and (high < 0.5).all()),
                f"share above C_p = {shares.index[0]:g}: " + ", ".join(f"{v:.2f}" for v in low)
                + f"; above C_p = {shares.index[-1]:g}: " + ", ".join(f"{v:.2f}" for v in high))
    if "fig4" in sweeps:
        table = _per_value(sweeps["fig4"], ["requested_epsilon", "clip_dual"])
        clips = sorted(table["clip_dual"].unique())
        inner, fluctuating, details = 0, 0, []
        for epsilon, part in table.groupby("requested_epsilon"):
            part = part.set_index("clip_dual").reindex(clips)
            best = part["tradeoff"].idxmax() if part["tradeoff"].notna().any() else math.nan
            inner += best not in (clips[0], clips[-1])
            largest = part.loc[clips[-1]]
            fluctuating += bool(largest["diverged"] > 0 or largest["accuracy_std"] >= part["accuracy_std"].max())
            testable = bool(table["accuracy_std"].notna().any() or (table["diverged"] > 0).any())
            details.append(f"epsilon {epsilon:g}: best C_d {best:g}, C_d = {clips[-1]:g} diverged "
                           f"{int(largest['diverged'])}, accuracy sd {largest['accuracy_std']:.3f}")
        n = table["requested_epsilon"].nunique()
        add("4", "intermediate_cd_best", "intermediate clipping values C_d suggest better accuracy/fairness "
            "tradeoffs", inner > n / 2, "; ".join(details))
        add("4", "large_cd_fluctuates", "large values of C_d introduce large fluctuation to the model accuracy",
            fluctuating > n / 2 if testable else None, "; ".join(details))
    if "fig5" in sweeps:
        table = _per_value(sweeps["fig5"], ["requested_epsilon", "missing_rate"])
        rhos = {e: _spearman(p["missing_rate"], p["violation"]) for e, p in table.groupby("requested_epsilon")}
        add("5", "fewer_missing_smaller_violation", "the model achieves smaller fairness violations as the number "
            "of missing values decreases", sum(r > 0 for r in rhos.values()) > len(rhos) / 2,
            "Spearman(missing rate, violation) at epsilon " + ", ".join(f"{e:g}: {r:.2f}" for e, r in rhos.items()))
    return pd.DataFrame(claims, columns=["figure", "claim", "statement", "holds", "detail"])


def figure_verdicts(printed: pd.DataFrame, tuned: pd.DataFrame) -> pd.DataFrame:
    """:func:`figure_claims` at the printed configuration beside the same claims on sweeps started from the
    tuned configurations (:func:`~dpfair_analysis.experiments.pfld_tuned.tuned_bases`), with the three-valued verdict of :mod:`.tuning` per claim."""

    both = printed.merge(tuned[["figure", "claim", "holds", "detail"]], on=["figure", "claim"], how="left",
                         suffixes=("_printed", "_tuned"))

    def verdict(a, b) -> str:
        a, b = (None if v is None or v != v else bool(v) for v in (a, b))
        return "not tested (one seed)" if a is None and b is None else three_valued(a, bool(b))

    both["verdict"] = [verdict(a, b) for a, b in zip(both["holds_printed"], both["holds_tuned"])]
    return both
