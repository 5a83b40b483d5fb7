"""Per-group results of a comparison (``dpfair compare``): accuracy and loss curves over training, the cost of
privacy, final accuracy per group."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from dpfair_analysis.plotting.common import MAX_WIDTH, focus_groups, plotting_width, with_population


def plot_group_history(history: pd.DataFrame, *, metric: str, split: str = "test",
                       style: str | None = "method", ax: plt.Axes | None = None,
                       focus: list[str] | None = None, layout: bool = True) -> plt.Figure:
    """``metric`` per group over epochs: mean line, and a ± 1 sd band over seeds when there are several.

    ``history`` is a training history (``TrainingResult.history`` or the concatenated
    ``CompareResult.histories``) with columns epoch, split, group, metric, value. With more than four
    groups only ``focus`` (default :func:`focus_groups`: 'all' and the two extreme groups) is coloured and
    in the legend; the other groups are thin grey lines. ``layout=False`` leaves the figure's tight layout to the
    caller (one pass once every panel is drawn: a pass per panel costs as many passes over all the panels).
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
    if layout:
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
