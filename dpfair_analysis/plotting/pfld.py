"""Paper 003 (PF-LD): Table 2, the sweeps (Figs. 1, 2, 4, 5), the share of large constraint gradients (Fig. 3) and
Theorem 6's bound."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


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
