"""Figures from the tidy result frames (seaborn), and saving them with the CSV behind them."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt  # headless: matplotlib picks Agg itself; notebooks keep inline
import pandas as pd
import seaborn as sns

from dpfair_analysis.io import write_atomically


def plot_group_history(history: pd.DataFrame, *, metric: str, split: str = "test",
                       style: str | None = "method", ax: plt.Axes | None = None) -> plt.Figure:
    """``metric`` per group over epochs (mean and 95% band over seeds when there are several).

    ``history`` is a training history (``TrainingResult.history`` or the concatenated
    ``CompareResult.histories``) with columns epoch, split, group, metric, value.
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
    sns.lineplot(data=rows, x="epoch", y="value", hue="group", style=style, ax=ax, errorbar=("ci", 95))
    ax.set_ylabel(f"{metric} ({split})")
    if rows["group"].nunique() > 4:  # many groups (MNIST classes): keep the legend off the curves
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", ncol=1)
    fig.tight_layout()
    return fig


def plot_costs(table: pd.DataFrame, *, ax: plt.Axes | None = None) -> plt.Figure:
    """Mean cost of privacy per group and method (bars); the sd columns of ``table`` hold the spread."""
    rows = table[(table["method"] != "sgd") & ~table["group"].isin(["max_gap"])]
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    sns.barplot(data=rows, x="group", y="cost", hue="method", ax=ax)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("Δ accuracy vs SGD (test)")
    fig.tight_layout()
    return fig


def plot_group_bounds(steps: pd.DataFrame, group_names: tuple[str, ...], *, method: str = "dpsgdf",
                      steps_per_epoch: float | None = None, ax: plt.Axes | None = None) -> plt.Figure:
    """DPSGD-F's per-group clipping bound C^k over training (paper 000 Fig. 2, 004 Fig. 5).

    ``steps`` is a step table with columns ``C[k]`` (``TrainingResult.steps`` or
    ``CompareResult.steps``); the x axis is epochs when ``steps_per_epoch`` is given.
    """
    rows = steps[steps["method"] == method] if "method" in steps.columns else steps
    columns = [f"C[{k}]" for k in range(len(group_names))]
    if rows.empty or not set(columns) <= set(rows.columns):
        raise ValueError(f"steps has no per-group bounds {columns} for method {method!r}")
    id_vars = ["step"] + (["seed"] if "seed" in rows.columns else [])
    tidy = rows[id_vars + columns].melt(id_vars=id_vars, var_name="group", value_name="C^k")
    tidy["group"] = tidy["group"].map(dict(zip(columns, group_names)))
    x = "step"
    if steps_per_epoch:
        tidy["epoch"] = tidy["step"] / steps_per_epoch
        tidy["epoch_bin"] = tidy["epoch"].round(1)
        x = "epoch_bin"
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    sns.lineplot(data=tidy, x=x, y="C^k", hue="group", ax=ax, errorbar=("pi", 50))
    ax.set_xlabel("epoch" if steps_per_epoch else "step")
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
