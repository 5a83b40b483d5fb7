"""Paper 001 (the fairness lens): excess risk against the Hessian trace (Fig. 1), the clip/noise decomposition,
clipping and risk against C (Fig. 3), factor correlations (Figs. 4-5), input norms (Fig. 6) and the gap under
the mitigation (Fig. 7)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from dpfair_analysis.plotting.common import MAX_WIDTH


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
