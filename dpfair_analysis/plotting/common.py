"""Shared by every figure: the page-width and legend limits, the groups drawn in colour, and saving a figure
with the CSV behind it."""

from __future__ import annotations

import io
import os
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

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

def with_population(groups: list[str]) -> list[str]:
    """``groups`` with 'all' (the population) first, once."""
    return ["all"] + [str(g) for g in groups if str(g) != "all"]

def plotting_width(n_categories: int) -> float:
    """A bar chart's width for ``n_categories`` on its x axis (inches)."""
    return 2.5 + 1.1 * n_categories

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

def figure_png(fig: plt.Figure, *, dpi: int = 120) -> bytes:
    """The figure as PNG bytes (for a self-contained HTML report)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()

def _log_ticks_at(ax: plt.Axes, values: pd.Series) -> None:
    """A log x axis ticked and labelled (plainly) at ``values`` only."""
    ticks = sorted(set(float(v) for v in values))
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
