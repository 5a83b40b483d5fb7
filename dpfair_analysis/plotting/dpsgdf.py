"""Paper 000 (DPSGD-F): the group clipping bounds over training (Fig. 2), Eq. (1)'s bias-variance bounds, and
the accuracy loss against epsilon (Fig. 3)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


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
