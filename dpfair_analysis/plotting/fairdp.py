"""Paper 002 (FairDP): Eq. (4)'s tau against C (Fig. 1), membership inference (Fig. 3), per-group sweeps
(Figs. 4-6) and FairDP's bounds over training."""

from __future__ import annotations

import itertools
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from dpfair_analysis.plotting.common import _log_ticks_at


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


# ------------------------------------------------------------------ the MNIST tuning study (papers 000 and 002)
def plot_tuning_grid(rows: pd.DataFrame, *, groups: Sequence[str], split: str = "test",
                     chosen: pd.DataFrame | None = None) -> plt.Figure:
    """A tuning study's runs (:func:`~dpfair_analysis.experiments.tuning.recorded_tuning_runs` rows, e.g. the MNIST
    study's): accuracy of each of ``groups`` (columns) against the learning rate, one row of panels per method,
    solid Poisson and dashed shuffled batches; each method's chosen configuration circled, ``chosen`` being the
    tuned rows of :func:`~dpfair_analysis.experiments.tuning.printed_and_tuned` (by the overall validation
    accuracy; a method without a row there -- its budget not complete -- has no circle). ``split`` is the accuracy
    drawn (the choice is always the validation one's)."""
    methods = list(dict.fromkeys(rows["method"]))
    chosen = pd.DataFrame(columns=["configuration_index"]) if chosen is None else chosen.set_index("method")
    fig, axes = plt.subplots(len(methods), len(groups), figsize=(3.2 * len(groups), 2.3 * len(methods)),
                             sharex=True, sharey=True, squeeze=False)
    part = rows[rows["split"] == split]
    for r, method in enumerate(methods):
        for c, group in enumerate(groups):
            ax = axes[r, c]
            for sampling, style in (("poisson", "-"), ("shuffle", "--")):
                line = part[(part["method"] == method) & (part["group"] == group) & (part["cfg_sampling"] == sampling)]
                line = line.groupby("cfg_lr")["accuracy"].mean()
                ax.plot(line.index, line.to_numpy(), style, marker="o", label=sampling)
            if method in chosen.index:
                pick = part[(part["method"] == method) & (part["group"] == group)
                            & (part["configuration_index"] == chosen.loc[method, "configuration_index"])]
                ax.scatter(pick["cfg_lr"], pick["accuracy"], s=160, facecolors="none", edgecolors="crimson",
                           label="chosen on validation", zorder=3)
            ax.set_xscale("log")
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(f"{method}: {'total' if group == 'all' else 'class ' + group}", fontsize=9)
            if r == len(methods) - 1:
                ax.set_xlabel("learning rate")
            if c == 0:
                ax.set_ylabel(f"{split} accuracy")
    legend = {label: handle for ax in axes.flat for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(legend.values(), legend.keys(), loc="upper right", fontsize=8, ncol=3)
    fig.suptitle(f"MNIST tuning runs ({split} accuracy; the choice is made on the validation rows)", fontsize=10,
                 x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig
