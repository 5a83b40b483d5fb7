"""The diagnosis (``dpfair diagnose``) and its validation study: predicted costs at a glance, predicted against
actual."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


# ------------------------------------------------------------------ dpfair diagnose
def plot_diagnosis(diagnosis) -> plt.Figure:
    """A diagnosis at a glance: left, each group's predicted cost of privacy split into its clipping and
    noise parts (bars) with the prediction and its 90% interval (point and whisker), by rank (the lowest mean
    predicted cost on top), the most-hurt verdict on the group labels ("most hurt": the named group, the
    highest P(most hurt); "tied": the groups it cannot be called between); right, the theory's per-group
    quantities, each column scaled to its largest value (the numbers are printed). ``diagnosis`` from
    :func:`dpfair_analysis.diagnose.diagnose`."""
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
    verdict = diagnosis.most_hurt
    tied = set(verdict.get("tied") or ()) if verdict.get("group") is None else set()
    ax.set_yticks(list(positions), [f"{n} (most hurt)" if n == verdict.get("group") else
                                    f"{n} (tied)" if n in tied else n for n in names])
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
