"""Figures from the tidy result frames (seaborn), and saving them with the CSV behind them.

Every figure is readable at a paper's page width: at most :data:`MAX_WIDTH` inches wide (panels
wrap into rows), at most :data:`MAX_LEGEND` legend entries (with many groups, the two extreme
groups and the population are drawn in colour, the others as thin grey lines), and its title or
axis label says what a band or whisker is.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import matplotlib.pyplot as plt  # headless: matplotlib picks Agg itself; notebooks keep inline
import numpy as np
import pandas as pd
import seaborn as sns

from dpfair_analysis.io import write_atomically

#: Widest figure, in inches (a page's text width is about 6.5-7 in; 150 dpi gives <= 1,800 px).
MAX_WIDTH = 12.0
#: Most legend entries a figure shows.
MAX_LEGEND = 6


def focus_groups(rows: pd.DataFrame, *, value: str = "value", group: str = "group", n: int = 2) -> list[str]:
    """The groups to draw in colour when there are many: 'all' and the ``n`` groups whose last value is the
    lowest and the highest (for MNIST classes, the most and least hurt)."""
    last = rows[rows["epoch"] == rows["epoch"].max()] if "epoch" in rows.columns else rows
    means = last[last[group] != "all"].groupby(group)[value].mean().sort_values()
    picks = list(dict.fromkeys([*means.index[: n // 2 + n % 2], *means.index[len(means) - n // 2:]]))
    return (["all"] if (rows[group] == "all").any() else []) + [str(g) for g in picks]


def plot_group_history(history: pd.DataFrame, *, metric: str, split: str = "test",
                       style: str | None = "method", ax: plt.Axes | None = None,
                       focus: list[str] | None = None) -> plt.Figure:
    """``metric`` per group over epochs: mean line, and a ± 1 sd band over seeds when there are several.

    ``history`` is a training history (``TrainingResult.history`` or the concatenated
    ``CompareResult.histories``) with columns epoch, split, group, metric, value. With more than four
    groups only ``focus`` (default :func:`focus_groups`: 'all' and the two extreme groups) is coloured and
    in the legend; the other groups are thin grey lines.
    """
    rows = history[(history["metric"] == metric) & (history["split"] == split)]
    if rows.empty:
        raise ValueError(f"history has no rows with metric={metric!r} and split={split!r}; metrics present: "
                         f"{sorted(history['metric'].unique())}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    style = style if style in rows.columns else None
    seeds = rows["seed"].nunique() if "seed" in rows.columns else 1
    if rows["group"].nunique() > 4:
        focus = focus or focus_groups(rows)
        for _, part in rows[~rows["group"].isin(focus)].groupby("group"):
            mean = part.groupby("epoch")["value"].mean()
            ax.plot(mean.index, mean.to_numpy(), color="0.75", lw=0.8, zorder=1)
        rows = rows[rows["group"].isin(focus)]
    sns.lineplot(data=rows, x="epoch", y="value", hue="group", style=style, ax=ax, errorbar="sd")
    ax.set_ylabel(f"{metric.replace('_', ' ')} ({split})" + (f"; band: ± 1 sd, {seeds} seeds" if seeds > 1 else ""))
    fig.tight_layout()
    return fig


def plot_costs(table: pd.DataFrame, *, ax: plt.Axes | None = None, focus: list[str] | None = None) -> plt.Figure:
    """Mean cost of privacy per private method (x) and group (colour; with many groups, 'all' and
    ``focus``, by default the two extreme groups); the sd columns of ``table`` hold the spread over seeds."""
    rows = table[(table["method"] != "sgd") & ~table["group"].isin(["max_gap"])]
    if ax is None:
        fig, ax = plt.subplots(figsize=(min(plotting_width(rows["method"].nunique()), MAX_WIDTH), 4))
    else:
        fig = ax.figure
    seeds = int(table["n_seeds"].max()) if "n_seeds" in table.columns else 1
    if rows["group"].nunique() > 4:
        rows = rows[rows["group"].isin(with_population(focus) if focus else focus_groups(rows, value="cost"))]
    sns.barplot(data=rows, x="method", y="cost", hue="group", ax=ax, errorbar=None)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("Δ accuracy vs SGD (test)" + (f", mean of {seeds} seeds" if seeds > 1 else ""))
    ax.set_xlabel("")
    if rows["method"].nunique() > 3:
        ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    return fig


def with_population(groups: list[str]) -> list[str]:
    """``groups`` with 'all' (the population) first, once."""
    return ["all"] + [str(g) for g in groups if str(g) != "all"]


def plot_group_accuracy(table: pd.DataFrame, *, title: str | None = None) -> plt.Figure:
    """Final test accuracy per group (x) and method (colour), whiskers ± 1 sd over seeds when there are
    several (paper 000 Fig. 1, 004 Fig. 3: accuracy w.r.t. each MNIST class). ``table`` is a
    ``CompareResult.table`` (columns method, group, accuracy, accuracy_sd, n_seeds)."""
    rows = table[~table["group"].isin(["all", "max_gap"])].copy()
    seeds = int(rows["n_seeds"].max()) if "n_seeds" in rows.columns else 1
    groups = list(dict.fromkeys(rows["group"]))
    methods = list(dict.fromkeys(rows["method"]))
    fig, ax = plt.subplots(figsize=(min(plotting_width(len(groups)), MAX_WIDTH), 3.8))
    sns.barplot(data=rows, x="group", y="accuracy", hue="method", order=groups, hue_order=methods, ax=ax,
                errorbar=None)
    if seeds > 1:
        width = 0.8 / len(methods)
        for i, method in enumerate(methods):
            part = rows[rows["method"] == method].set_index("group").reindex(groups)
            x = [j - 0.4 + width * (i + 0.5) for j in range(len(groups))]
            ax.errorbar(x, part["accuracy"], yerr=part["accuracy_sd"], fmt="none", color="black", lw=0.8)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("group")
    ax.set_ylabel("test accuracy" + (f"; whiskers ± 1 sd, {seeds} seeds" if seeds > 1 else ", one seed"))
    ax.legend(title="method", fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plotting_width(n_categories: int) -> float:
    """A bar chart's width for ``n_categories`` on its x axis (inches)."""
    return 2.5 + 1.1 * n_categories


def plot_group_bounds(steps: pd.DataFrame, group_names: tuple[str, ...], *, method: str = "dpsgdf",
                      steps_per_epoch: float | None = None, ax: plt.Axes | None = None,
                      focus: list[str] | None = None) -> plt.Figure:
    """DPSGD-F's per-group clipping bound C^k over training (paper 000 Fig. 2, 004 Fig. 5).

    ``steps`` is a step table with columns ``C[k]`` (``TrainingResult.steps`` or
    ``CompareResult.steps``); the x axis is epochs when ``steps_per_epoch`` is given. With more than
    four groups, ``focus`` (default: the groups with the lowest and the highest mean bound) is drawn
    in colour with its 25-75% band and the other groups as thin grey lines of their per-epoch mean.
    """
    rows = steps[steps["method"] == method] if "method" in steps.columns else steps
    columns = [f"C[{k}]" for k in range(len(group_names))]
    if rows.empty or not set(columns) <= set(rows.columns):
        raise ValueError(f"steps has no per-group bounds {columns} for method {method!r}")
    id_vars = ["step"] + (["seed"] if "seed" in rows.columns else [])
    tidy = rows[id_vars + columns].melt(id_vars=id_vars, var_name="group", value_name="C^k")
    tidy["group"] = tidy["group"].map(dict(zip(columns, group_names)))
    x = "step"
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    if steps_per_epoch:
        tidy["epoch"] = (tidy["step"] / steps_per_epoch).apply(lambda e: max(1, -(-e // 1)))  # the epoch a step is in
        x = "epoch"
    if tidy["group"].nunique() > 4:
        means = tidy.groupby("group")["C^k"].mean().sort_values()
        focus = [str(g) for g in focus] if focus else [means.index[0], means.index[-1]]
        unknown = sorted(set(focus) - set(tidy["group"]))
        if unknown:
            raise ValueError(f"focus names groups {unknown} that are not among {list(group_names)}")
        for i, (_, part) in enumerate(tidy[~tidy["group"].isin(focus)].groupby("group")):
            mean = part.groupby(x)["C^k"].mean()
            ax.plot(mean.index, mean.to_numpy(), color="0.75", lw=0.8, zorder=1,
                    label="other groups (mean)" if i == 0 else None)
        tidy = tidy[tidy["group"].isin(focus)]
    sns.lineplot(data=tidy, x=x, y="C^k", hue="group", ax=ax, errorbar=("pi", 50))
    ax.legend(fontsize=8)  # seaborn's groups and, where drawn, what the grey lines are
    ax.set_xlabel("epoch" if steps_per_epoch else "step")
    ax.set_ylabel("C^k per epoch; band: 25-75% of steps")
    fig.tight_layout()
    return fig


def save_figure(fig: plt.Figure, path: str | os.PathLike, *, data: pd.DataFrame | None = None) -> Path:
    """Save ``fig`` (format from the suffix) and, if given, the CSV behind it beside it; atomic."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=150, format=path.suffix.lstrip(".") or "png"))
    if data is not None:
        write_atomically(path.with_suffix(".csv"), lambda tmp: data.to_csv(tmp, index=False))
    return path



def save_table(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``table`` as CSV to ``path`` (directories created), atomically: a result with no figure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: table.to_csv(tmp, index=False))
    return path

# ------------------------------------------------------------------ paper 001 (fairness lens)
def plot_trace_vs_risk(table: pd.DataFrame) -> plt.Figure:
    """Figure 1 of paper 001: group excess risk R_a (95% CI) vs Tr(H_a), one colour per epsilon, log y.

    Left: the measurement against the trace; right: measured R_a against Theorem 1's
    (1/2) s^2 Tr(H_a) with the identity line. ``table`` from
    :func:`~dpfair_analysis.theory.excess_risk.output_perturbation_excess_risk` (optionally
    with a ``data`` column, drawn as marker style).
    """
    rows = table[table["group"] != "all"].copy()
    rows["epsilon"] = rows["epsilon"].map(lambda e: f"{e:.3g}")
    style = "data" if "data" in rows.columns else None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    sns.scatterplot(data=rows, x="trace", y="excess_risk", hue="epsilon", style=style, ax=left, s=45)
    for _, r in rows.iterrows():
        left.plot([r["trace"], r["trace"]], [max(r["ci_low"], 1e-12), r["ci_high"]], color="grey", lw=0.6)
    left.set_yscale("log")
    left.set_xlabel("Tr(H_a) (mean loss)")
    left.set_ylabel("excess risk R_a")
    sns.scatterplot(data=rows, x="predicted_risk", y="excess_risk", hue="epsilon", style=style, ax=right, s=45,
                    legend=False)
    low = max(min(rows["predicted_risk"].min(), rows["excess_risk"].clip(lower=1e-12).min()), 1e-12)
    high = max(rows["predicted_risk"].max(), rows["excess_risk"].max())
    right.plot([low, high], [low, high], color="black", lw=0.8, ls="--")
    right.set_xscale("log"), right.set_yscale("log")
    right.set_xlabel("Theorem 1: (1/2) s² Tr(H_a)")
    right.set_ylabel("measured R_a")
    left.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    return fig


def plot_decomposition(terms: pd.DataFrame, *, steps_per_epoch: float | None = None) -> plt.Figure:
    """Theorem 2's clip and noise terms per group over training (paper 001 Eq. 4), log scale."""
    rows = terms[terms["group"] != "all"].melt(id_vars=["step", "group"], value_vars=["clip", "noise"],
                                               var_name="term", value_name="value")
    if steps_per_epoch:
        rows["epoch"] = rows["step"] / steps_per_epoch
    x = "epoch" if steps_per_epoch else "step"
    fig, ax = plt.subplots(figsize=(6.5, 4))
    sns.lineplot(data=rows, x=x, y="value", hue="group", style="term", marker="o", ax=ax)
    ax.set_yscale("symlog", linthresh=1e-6)
    ax.set_ylabel("term of E[L(θ_{t+1}; D_a)]")
    fig.tight_layout()
    return fig


def plot_clipping_and_risk(table: pd.DataFrame) -> plt.Figure:
    """Figure 3 of paper 001: per-group gradient norm before/after clipping (top) and R_a (bottom) vs C."""
    rows = table[table["group"] != "all"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 6.5), sharex=True)
    norms = rows.melt(id_vars=["clip_bound", "group"], value_vars=["mean_norm", "mean_clipped_norm"],
                      var_name="gradient", value_name="norm")
    sns.lineplot(data=norms, x="clip_bound", y="norm", hue="group", style="gradient", marker="o", ax=top)
    top.set_yscale("log")
    sns.lineplot(data=rows, x="clip_bound", y="excess_risk", hue="group", marker="o", ax=bottom, legend=False)
    for _, r in rows.iterrows():
        bottom.plot([r["clip_bound"]] * 2, [r["ci_low"], r["ci_high"]], color="grey", lw=0.8)
    bottom.set_xscale("log")
    bottom.set_xlabel("clipping bound C")
    bottom.set_ylabel("excess risk R_a (DP-SGD)")
    fig.tight_layout()
    return fig


def plot_factor_correlations(frame: pd.DataFrame, *, statistic: str = "spearman") -> plt.Figure:
    """Figures 4-5 of paper 001: correlation between per-sample factors over training."""
    rows = frame.assign(pair=frame["x"] + " ~ " + frame["y"])
    x = "epoch" if rows["epoch"].notna().all() else "step"
    fig, ax = plt.subplots(figsize=(6.5, 4))
    sns.lineplot(data=rows, x=x, y=statistic, hue="pair", marker="o", ax=ax)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_ylabel(f"{statistic} correlation")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    return fig


def plot_gap_vs_epsilon(table: pd.DataFrame) -> plt.Figure:
    """Figure 7 of paper 001: excess-risk gap R_a - R per group vs epsilon, one panel per (gamma_1, gamma_2)."""
    rows = table[table["group"] != "all"].copy()
    rows["setting"] = rows.apply(lambda r: f"γ1={r['gamma1']:g}, γ2={r['gamma2']:g}", axis=1)
    grid = sns.FacetGrid(rows, col="setting", col_wrap=min(4, rows["setting"].nunique()), height=3.2, sharey=True)
    grid.map_dataframe(sns.lineplot, x="epsilon", y="gap", hue="group", marker="o")
    for ax, (_, part) in zip(grid.axes.flat, rows.groupby("setting", sort=False)):
        for _, r in part.iterrows():
            ax.plot([r["epsilon"]] * 2, [r["gap_ci_low"], r["gap_ci_high"]], color="grey", lw=0.8)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xscale("log")
        ticks = sorted(rows["epsilon"].unique())
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    grid.add_legend()
    grid.set_axis_labels("ε", "gap R_a − R")
    return grid.figure


# ------------------------------------------------------------------ paper 000 (DPSGD-F)
def plot_bias_variance_bounds(bounds: pd.DataFrame) -> plt.Figure:
    """Eq. (1) of paper 000 per group: the claimed lower bound (half), the measured error and
    the upper bound, as bars. ``bounds`` from
    :func:`~dpfair_analysis.experiments.dpsgdf.group_bias_variance_analysis` (``"bounds"``)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    rows = bounds.melt(id_vars="group", value_vars=["lower_half", "measured_mean", "upper"])
    sns.barplot(data=rows, x="group", y="value", hue="variable", ax=ax)
    ax.set_ylabel("E‖Ĝᵏ − Gᵏ‖")
    return fig


def plot_epsilon_sweep(table: pd.DataFrame, *, tau: float = 0.05) -> plt.Figure:
    """Paper 000 Figure 3: DPSGD-F's accuracy loss on each swept group against its epsilon, one panel per
    kind of sweep (epochs, noise), each point labelled with the swept value; the dotted line is the
    equal-costs gap |Δ² − Δ⁸| with the paper's threshold τ. Points are means over seeds.

    ``table`` from :func:`~dpfair_analysis.experiments.dpsgdf.mnist_epsilon_sweep` (rows of one or both
    kinds concatenated)."""
    kinds = list(dict.fromkeys(table["kind"]))
    seeds = table["seed"].nunique()
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 3.8), sharey=True, squeeze=False)
    label = {"epochs": "{:g} epochs", "noise": "σ = {:g}"}
    for ax, kind in zip(axes.flat, kinds):
        rows = table[(table["kind"] == kind) & (table["group"] != "all")]
        means = rows.groupby(["value", "group"], as_index=False)[["epsilon", "cost", "gap_2_8"]].mean()
        sns.lineplot(data=means, x="epsilon", y="cost", hue="group", marker="o", ax=ax)
        gaps = means.drop_duplicates("value").sort_values("epsilon")
        ax.plot(gaps["epsilon"], gaps["gap_2_8"], ls=":", color="black", marker=".", label="gap |Δ² − Δ⁸|")
        ax.axhline(tau, color="grey", lw=0.8, ls="--", label=f"τ = {tau:g}")
        ax.axhline(0, color="black", lw=0.6)
        for _, r in gaps.iterrows():
            ax.annotate(label[kind].format(r["value"]), (r["epsilon"], r["gap_2_8"]), textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize="small")
        ax.set_xlabel("ε (δ = 1e-6)")
        ax.set_ylabel("accuracy loss vs SGD (test)" + (f", mean of {seeds} seeds" if seeds > 1 else ", one seed"))
        ax.set_title(f"DPSGD-F, varying the {'number of epochs' if kind == 'epochs' else 'noise scale'}")
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ paper 003 (PF-LD)
def plot_table2(rows: pd.DataFrame, side: pd.DataFrame, *, name: str) -> plt.Figure:
    """Paper 003 Table 2 for one data set: measured accuracy and violation per constraint and
    method (points: mean over folds; whiskers: ± 1 sd) with the paper's value as a black ×.

    ``rows`` (one row per method, constraint and fold) and ``side`` (the side-by-side table)
    both carry a ``label`` column naming the method; see
    :func:`~dpfair_analysis.experiments.pfld.table2_figure`.
    """
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    labels = list(dict.fromkeys(rows["label"]))
    constraints = list(dict.fromkeys(rows["constraint"]))
    dodge = 0.8 / max(len(labels), 1)
    for ax, metric in zip(axes, ["accuracy", "violation"]):
        sns.pointplot(data=rows, x="constraint", y=metric, hue="label", ax=ax, errorbar="sd", dodge=0.8 - dodge,
                      linestyle="none", markers="o", capsize=0.05, hue_order=labels, order=constraints)
        for _, r in side.iterrows():
            if r[f"paper_{metric}"] == r[f"paper_{metric}"] and r["label"] in labels:  # the paper has this cell
                x = constraints.index(r["constraint"]) - 0.4 + dodge * (labels.index(r["label"]) + 0.5)
                ax.plot(x, r[f"paper_{metric}"], "kx", markersize=6)
        ax.set_title(f"{name}: {metric} (mean ± sd over folds; ×: paper)")
    axes[0].get_legend().remove()
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    return fig


def plot_sweep(rows: pd.DataFrame, *, hue: str, title: str, palette: str | None = None,
               log_x: bool = False) -> plt.Figure:
    """A PF-LD sweep (paper 003 Figs. 1, 2, 4, 5): violation (left) and accuracy (right)
    against the requested epsilon, one line per value of ``hue``, mean and sd over seeds.
    ``rows`` from the sweeps of :mod:`dpfair_analysis.experiments.pfld`."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    seeds = rows["seed"].nunique() if "seed" in rows.columns else 1
    for ax, metric in zip(axes, ["violation", "accuracy"]):
        sns.lineplot(data=rows, x="requested_epsilon", y=metric, hue=hue, marker="o", errorbar="sd",
                     err_style="bars", err_kws={"capsize": 3}, palette=palette, ax=ax)
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel("ε")
    fig.suptitle(title + (f"  (whiskers: ± 1 sd over {seeds} seeds)" if seeds > 1 else ""))
    fig.tight_layout()
    return fig


def plot_fraction_above(table: pd.DataFrame, *, title: str) -> plt.Figure:
    """Paper 003 Fig. 3: accuracy, violation and the per-group share of per-sample ‖∇h‖ above
    C_p, against C_p. ``table`` from :func:`~dpfair_analysis.experiments.pfld.fraction_above_table`."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    runs = table.drop_duplicates(["clip_primal", "seed"])
    sns.barplot(data=runs, x="clip_primal", y="accuracy", ax=axes[0])
    sns.barplot(data=runs, x="clip_primal", y="violation", ax=axes[1])
    sns.barplot(data=table, x="clip_primal", y="fraction_above", hue="group", ax=axes[2])
    axes[2].set_ylabel("‖∇h‖ > C_p (share)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_theorem6_bound(curve: pd.DataFrame) -> plt.Figure:
    """Paper 003 Theorem 6 as printed (bound, its bias and noise parts) against C_p beside a
    Monte Carlo of E‖G − G̃‖, log-log. ``curve`` from
    :func:`~dpfair_analysis.experiments.pfld.bias_variance_curve`."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for column, style in (("paper_bound", "-"), ("bias_term", "--"), ("noise_term", ":"), ("monte_carlo", "o")):
        ax.plot(curve["clip"], curve[column], style, label=column)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("C_p")
    ax.set_ylabel("E‖G − G̃‖")
    ax.legend()
    ax.set_title("Theorem 6 (as printed) vs Monte Carlo")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ verify/ (claims and audits)
def plot_audit_epsilon(audited: pd.DataFrame, *, names: list[str] | None = None) -> plt.Figure:
    """Per mechanism: the audit's 95% lower bound on epsilon as shipped and for its
    under-noised twin (noise fraction 0.25), beside the claimed epsilon (black ticks).
    ``audited`` from :func:`~dpfair_analysis.verify.audits.audit_table`; ``names`` orders
    the mechanisms (default: as they appear)."""
    names = list(dict.fromkeys(audited["mechanism"])) if names is None else list(names)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    x = range(len(names))
    for offset, fraction, label in ((-0.2, 1.0, "as shipped"), (0.2, 0.25, "under-noised twin (0.25)")):
        sel = audited[audited.noise_fraction == fraction].set_index("mechanism").loc[names]
        ax.bar([i + offset for i in x], sel.epsilon_lower, width=0.4, label=label)
    claimed = audited[audited.noise_fraction == 1.0].set_index("mechanism").loc[names].epsilon_claimed
    ax.scatter(list(x), claimed, marker="_", s=600, color="k", label="claimed ε", zorder=3)
    ax.set_xticks(list(x), names, rotation=20)
    ax.set_ylabel("95% lower bound on ε")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_verdicts_by_paper(table: pd.DataFrame) -> plt.Figure:
    """Number of claims per paper, stacked by verdict. ``table`` from
    :func:`~dpfair_analysis.verify.claims.verdict_table`."""
    fig, ax = plt.subplots(figsize=(6, 3))
    counts = table.groupby(["paper", "verdict"]).size().unstack(fill_value=0)
    counts.plot.bar(stacked=True, ax=ax)
    ax.set_ylabel("claims")
    fig.tight_layout()
    return fig


def plot_input_norm_vs_risk(table: pd.DataFrame) -> plt.Figure:
    """Figure 6 of paper 001: each group's mean input norm against its excess risk under DP-SGD, one panel per
    data set (``table`` from :func:`~dpfair_analysis.theory.latent_factors.input_norm_vs_excess_risk`, group
    rows, with a ``data`` column), with the groups named."""
    rows = table[table["level"] == "group"] if "level" in table.columns else table
    panels = list(dict.fromkeys(rows["data"])) if "data" in rows.columns else [None]
    width = min(MAX_WIDTH, 4.0 * len(panels))
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 3.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        part = rows if panel is None else rows[rows["data"] == panel]
        sns.scatterplot(data=part, x="mean_input_norm", y="excess_risk", ax=ax, s=50)
        for _, r in part.iterrows():
            ax.annotate(str(r["group"]), (r["mean_input_norm"], r["excess_risk"]), fontsize="small",
                        xytext=(3, 3), textcoords="offset points")
        ax.set_title(panel or "")
        ax.set_xlabel("mean input norm ||X||")
        ax.set_ylabel("excess risk R_a (DP-SGD)")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ dpfair diagnose
def plot_diagnosis(diagnosis) -> plt.Figure:
    """A diagnosis at a glance: left, each group's predicted cost of privacy split into its clipping and
    noise parts (bars) with the prediction and its 90% interval (point and whisker), most hurt on top; right,
    the theory's per-group quantities, each column scaled to its largest value (the numbers are printed).
    ``diagnosis`` from :func:`dpfair_analysis.diagnose.diagnose`."""
    groups = diagnosis.groups.sort_values("rank")
    names = [str(g) for g in groups["group"]]
    fig, (ax, heat) = plt.subplots(1, 2, figsize=(11, 0.55 * len(names) + 2.2),
                                   gridspec_kw={"width_ratios": [1.25, 1]})
    parts = groups.melt(id_vars=["group"], value_vars=["clip_part", "noise_part"], var_name="part",
                        value_name="accuracy change")
    parts["part"] = parts["part"].map({"clip_part": "clipping", "noise_part": "noise"})
    parts["group"] = parts["group"].astype(str)
    sns.barplot(data=parts, y="group", x="accuracy change", hue="part", order=names, ax=ax,
                palette={"clipping": "#d95f02", "noise": "#7570b3"}, alpha=0.8)
    positions = range(len(names))
    ax.errorbar(groups["cost"], list(positions), xerr=[groups["cost"] - groups["low"], groups["high"] - groups["cost"]],
                fmt="o", color="black", capsize=4, label="predicted Δ (90%)")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("predicted Δ accuracy (private − non-private)")
    ax.set_ylabel("")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.5 / (0.55 * len(names) + 2.2) - 0.12),
              ncol=3, frameon=False)  # below the axes: never over a bar or a whisker
    p = diagnosis.plan
    ax.set_title(f"{diagnosis.dataset}: σ={p.sigma:.3g}, C={p.plan.clip_bound:g}, b={p.plan.batch_size}, "
                 f"ε={p.epsilon:.3g} — {diagnosis.mechanism}", fontsize=10)
    columns = {"clip_fraction": "clipped at C", "clip_bias": "clip bias", "trace": "Tr(H)", "boundary": "1−Σf²",
               "n": "n"}
    values = groups.set_index(groups["group"].astype(str))[list(columns)].astype(float)
    scaled = values / values.abs().max().replace(0, 1)
    labels = values.apply(lambda column: column.map((lambda v: f"{v:,.0f}") if column.name == "n" else
                                                    (lambda v: f"{v:.3g}")))
    sns.heatmap(scaled.rename(columns=columns), annot=labels.rename(columns=columns), fmt="", cmap="Oranges",
                cbar=False, ax=heat, vmin=0, vmax=1)
    heat.tick_params(axis="x", labelrotation=0)
    heat.set_ylabel("")
    heat.set_title("per-group quantities (colour: share of the column's largest)", fontsize=10)
    fig.tight_layout()
    return fig


def figure_png(fig: plt.Figure, *, dpi: int = 120) -> bytes:
    """The figure as PNG bytes (for a self-contained HTML report)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def plot_validation(summary: pd.DataFrame) -> plt.Figure:
    """Predicted vs actual cost of privacy, one point per (cell, group) (mean over seeds), by regime; the
    diagonal is a perfect prediction. ``summary`` from :func:`dpfair_analysis.experiments.diagnosis_validation.cell_summary`."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.2), sharex=False, sharey=False)
    settings = list(dict.fromkeys(summary["setting"]))
    palette = dict(zip(settings, sns.color_palette("tab10", len(settings))))
    for ax, (regime, part) in zip(axes, summary.groupby("regime", sort=False)):
        sns.scatterplot(data=part, x="predicted", y="actual_mean", hue="setting", hue_order=settings,
                        palette=palette, ax=ax, s=40, legend=False)
        low = float(min(part["predicted"].min(), part["actual_mean"].min()))
        high = float(max(part["predicted"].max(), part["actual_mean"].max()))
        ax.plot([low, high], [low, high], color="black", linewidth=0.8)
        ax.set_xlabel("predicted Δ (diagnosis)")
        ax.set_ylabel("actual Δ (DP-SGD vs SGD, mean over seeds)")
        ax.set_title(f"regime: {regime}")
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=palette[s]) for s in settings]
    fig.legend(handles, settings, loc="lower center", ncol=min(len(settings), 5), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 * math.ceil(len(settings) / 5), 1, 1))  # the legend below both panels
    return fig


def plot_validation_metrics(table: pd.DataFrame) -> plt.Figure:
    """Spearman, most-hurt hit rate (all and callable cells) and interval coverage per predictor, by regime.
    ``table`` from :func:`dpfair_analysis.experiments.diagnosis_validation.evaluate` with ``by="regime"``."""
    metrics = ["spearman", "most_hurt", "most_hurt_callable", "coverage"]
    tidy = table.melt(id_vars=["predictor", "regime"], value_vars=metrics, var_name="metric", value_name="value")
    grid = sns.catplot(data=tidy, x="value", y="predictor", col="metric", hue="regime", kind="bar", height=3.2,
                       aspect=0.9, sharex=False)
    for ax in grid.axes.flat:
        ax.axvline(0, color="black", linewidth=0.6)
    sns.move_legend(grid, "lower center", bbox_to_anchor=(0.5, 0.0), ncol=2, title="regime")
    grid.figure.tight_layout(rect=(0, 0.1, 1, 1))
    return grid.figure


# ------------------------------------------------------------------ paper 002 (FairDP)
def plot_tau_grid(tau: pd.DataFrame, accuracy: pd.DataFrame | None = None) -> plt.Figure:
    """Paper 002 Figure 1: Eq. (4)'s tau per group against C (log-log), one line per sigma, solid for the
    clipping bias + noise variance total and dotted grey for the bias alone; beside it (if given) per-group
    DP-SGD test accuracy against C, one line per sigma. ``tau`` from ``experiments.fairdp.tau_analysis``,
    ``accuracy`` from ``clip_noise_accuracy``."""
    panels = 2 if accuracy is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2), squeeze=False)
    ax = axes[0, 0]
    sns.lineplot(data=tau, x="C", y="tau", hue="sigma", style="group", marker="o", palette="viridis", ax=ax)
    for (group, rows), dashes in zip(tau.drop_duplicates(["C", "group"]).groupby("group", sort=True),
                                     itertools.cycle((":", (0, (1, 4)), (0, (3, 1, 1, 1))))):
        ax.plot(rows["C"], rows["bias"], color="grey", linestyle=dashes, label=f"bias only, {group}")
    ax.set_yscale("log")
    ax.set_ylabel("τ_k(C, σ; θ)")
    ax.set_title("Eq. (4) per group")
    _log_ticks_at(ax, tau["C"])
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    if accuracy is not None:
        ax = axes[0, 1]
        rows = accuracy[(accuracy["method"] == "dpsgd") & ~accuracy["group"].isin(["all"])]
        sns.lineplot(data=rows, x="C", y="accuracy", hue="sigma", style="group", marker="o", palette="viridis",
                     errorbar="sd", ax=ax)
        ax.set_ylabel("DP-SGD test accuracy")
        ax.set_title("per-group accuracy (overlapping lines: σ changes little)")
        _log_ticks_at(ax, rows["C"])
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.tight_layout()
    return fig


def _log_ticks_at(ax: plt.Axes, values: pd.Series) -> None:
    """A log x axis ticked and labelled (plainly) at ``values`` only."""
    ticks = sorted(set(float(v) for v in values))
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()


def sweep_epsilon(rows: pd.DataFrame) -> pd.Series:
    """The privacy of each swept value: the largest epsilon any private method reached there (they stop at
    DPSGD's, so the largest is the statement that holds for all; NaN where only SGD ran), indexed by value."""
    return rows.groupby("value")["epsilon"].max()


def _group_title(dataset: str, group: str) -> str:
    """'MNIST, class 2' for MNIST's digit groups, 'Adult, Female' otherwise."""
    label = f"class {group}" if str(group).isdigit() else str(group)
    return f"{dataset.upper() if dataset.lower() == 'mnist' else dataset.capitalize()}, {label}"


def plot_group_sweep(rows: pd.DataFrame, *, groups: tuple[str, ...], title: str) -> plt.Figure:
    """Paper 002 Figures 4-6: per-group test accuracy against the swept value, one panel per group, one line
    per method (mean and sd over seeds), each method its own marker and dash so that coinciding lines stay
    visible; a log x axis ticked at the swept values (each spans a decade or more); one legend, right of the
    last panel. The privacy every private line holds (:func:`sweep_epsilon`) is in the panel titles when it is one
    epsilon for the whole sweep and under each tick when it moves with the value (sigma, batch size).
    ``title`` is the data set's name; ``rows`` from ``experiments.fairdp.sweep``."""
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 4.0), squeeze=False)
    parameter = rows["parameter"].iloc[0]
    epsilon = sweep_epsilon(rows).dropna() if "epsilon" in rows else pd.Series(dtype=float)
    one_epsilon = len(epsilon) > 0 and epsilon.max() - epsilon.min() <= 0.005 * epsilon.max()
    per_tick = len(epsilon) > 0 and not one_epsilon
    for i, (ax, group) in enumerate(zip(axes[0], groups)):
        sns.lineplot(data=rows[rows["group"] == group], x="value", y="accuracy", hue="method", style="method",
                     markers=True, dashes=True, errorbar="sd", ax=ax, legend=i == len(groups) - 1)
        _log_ticks_at(ax, rows["value"])
        if per_tick:  # two-line labels: the value, its epsilon beneath
            ax.set_xticklabels([f"{v:g}\n{epsilon[v]:.2g}" if v in epsilon.index else f"{v:g}"
                                for v in ax.get_xticks()])
        ax.set_xlabel({"lr": "learning rate", "batch_size": "batch size", "noise_multiplier": "noise multiplier σ"}
                      .get(parameter, parameter) + (" (ε beneath)" if per_tick else ""))
        ax.set_ylabel("test accuracy")
        ax.set_title(_group_title(title, group) + (f" (ε = {epsilon.iloc[0]:.3g})" if one_epsilon else ""))
    sns.move_legend(axes[0][-1], "center left", bbox_to_anchor=(1.02, 0.5), frameon=False)  # off the lines
    fig.tight_layout()
    return fig


#: Figure 3's attacks as a reader knows them
ATTACK_TITLES = {"loss": "loss threshold (Yeom et al. 2018)", "lira_offline": "offline LiRA (Carlini et al. 2022)"}


def plot_membership(frame: pd.DataFrame, *, metric: str = "auc") -> plt.Figure:
    """Paper 002 Figure 3: membership-inference success per method and group, one panel per attack: a point per
    (method, group), side by side; for the AUC with its 95% interval (+-1.96 ``auc_se``, DeLong) and chance
    (0.5) marked, so a group's leak can be told from noise; the privacy the private methods are held to above
    (the ``epsilon`` column's largest value). ``frame`` from
    ``experiments.fairdp.membership_inference``."""
    attacks = list(dict.fromkeys(frame["attack"]))
    methods = list(dict.fromkeys(frame["method"]))
    groups = list(dict.fromkeys(frame["group"]))
    fig, axes = plt.subplots(1, len(attacks), figsize=(5.5 * len(attacks), 3.8), squeeze=False, sharey=True)
    offsets = np.linspace(-0.25, 0.25, len(groups)) if len(groups) > 1 else np.zeros(1)
    colours = sns.color_palette(n_colors=len(groups))
    for ax, attack in zip(axes[0], attacks):
        rows = frame[frame["attack"] == attack].set_index(["method", "group"])
        for offset, colour, group in zip(offsets, colours, groups):
            at = [(i + offset, rows.loc[(m, group)]) for i, m in enumerate(methods) if (m, group) in rows.index]
            x = [position for position, _ in at]
            y = [row[metric] for _, row in at]
            error = [1.96 * row["auc_se"] for _, row in at] if metric == "auc" and "auc_se" in rows else None
            ax.errorbar(x, y, yerr=error, fmt="o", color=colour, capsize=3, label=group)
        if metric == "auc":
            ax.axhline(0.5, color="black", linewidth=0.8, linestyle="--", label="chance")
        ax.set_xticks(range(len(methods)), methods, rotation=30)
        ax.set_title(ATTACK_TITLES.get(attack, attack))
        ax.set_ylabel("AUC (95% interval)" if metric == "auc" else metric)
    axes[0][-1].legend(title="group", loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    if "epsilon" in frame and frame["epsilon"].notna().any():
        fig.suptitle(f"private methods at ε = {frame['epsilon'].max():.3g}", fontsize="medium")
    fig.tight_layout()
    return fig


def fairdp_bounds_series(steps: pd.DataFrame, group_names: tuple[str, ...], *,
                         groups: tuple[str, ...] | None = None, steps_per_epoch: float | None = None,
                         max_points: int = 1500) -> pd.DataFrame:
    """FairDP's per-group bounds C_k and Opt-Q's C over training (from ``CompareResult.steps``), as the
    long table :func:`plot_fairdp_bounds` draws: columns method, bound (the group's name for FairDP's
    C_k, "C" for Opt-Q), step, x (the epoch with ``steps_per_epoch``, else the step) and value. Each series keeps every
    ceil(n / ``max_points``)-th step (a 60-epoch MNIST run has ~12,000), finer than the figure resolves."""
    series = [("fairdp", f"C[{k}]", name) for k, name in enumerate(group_names) if groups is None or name in groups]
    series.append(("optq", "C", "C"))
    frames = []
    for method, column, bound in series:
        rows = steps[steps["method"] == method]
        if rows.empty or column not in rows:
            continue
        rows = rows.iloc[::max(1, -(-len(rows) // max_points))]
        frames.append(pd.DataFrame({"method": method, "bound": bound, "step": rows["step"].to_numpy(),
                                    "x": rows["step"].to_numpy() / (steps_per_epoch or 1.0),
                                    "value": rows[column].to_numpy()}))
    return pd.concat(frames, ignore_index=True)


def plot_fairdp_bounds(series: pd.DataFrame, *, x_label: str = "epoch", floor: float | None = None,
                       initial: float | None = None) -> plt.Figure:
    """Draw :func:`fairdp_bounds_series`: FairDP's C_k per group (left) and Opt-Q's C (right), log scale, with the
    public floor of FairDP's bounds and the initial C dotted when given (a bound lying on the floor clips its
    group's gradients to almost nothing)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for bound, rows in series[series["method"] == "fairdp"].groupby("bound", sort=False):
        axes[0].plot(rows["x"], rows["value"], label=bound, linewidth=0.8)
    if floor is not None:
        axes[0].axhline(floor, color="grey", linestyle=":", linewidth=1, label=f"floor {floor:g}")
    axes[0].set_title("FairDP: C_k per group")
    optq = series[series["method"] == "optq"]
    if not optq.empty:
        axes[1].plot(optq["x"], optq["value"], color="black")
    axes[1].set_title("Opt-Q: one C")
    for ax in axes:
        if initial is not None:
            ax.axhline(initial, color="grey", linestyle="--", linewidth=0.8, label=f"initial C = {initial:g}")
        ax.set_yscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel("clipping bound")
    axes[0].legend(title="group", fontsize="small", ncol=2)
    fig.tight_layout()
    return fig
