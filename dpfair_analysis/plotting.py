"""Figures from the tidy result frames (seaborn), and saving them with the CSV behind them."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on these machines; notebooks still show the returned figures

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from dpfair_analysis.io import write_atomically  # noqa: E402


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


def save_figure(fig: plt.Figure, path: str | os.PathLike, *, data: pd.DataFrame | None = None) -> Path:
    """Save ``fig`` (format from the suffix) and, if given, the CSV behind it beside it; atomic."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=150, format=path.suffix.lstrip(".") or "png"))
    if data is not None:
        write_atomically(path.with_suffix(".csv"), lambda tmp: data.to_csv(tmp, index=False))
    return path
