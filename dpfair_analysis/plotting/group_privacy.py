"""Who gets less privacy (``dpfair privacy groups``): each group's per-record epsilon_i beside its accuracy cost."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from dpfair_analysis.plotting.common import MAX_WIDTH, focus_groups, plotting_width


def plot_group_privacy(epsilons: pd.DataFrame, table: pd.DataFrame, *, title: str | None = None) -> plt.Figure:
    """Left: each group's distribution of :math:`\\varepsilon_i` per method (boxes: quartiles; whiskers: 1.5
    IQR), the run's guarantee as a black tick; right: each group's test accuracy cost against SGD. With many
    groups, the two extreme groups by cost are drawn (and 'all' is left out of the boxes).

    Parameters
    ----------
    epsilons : pandas.DataFrame
        One row per record and method: ``method``, ``group``, ``epsilon``.
    table : pandas.DataFrame
        One row per method and group: ``method``, ``group``, ``cost``, ``run_epsilon``.
    title : str, optional
        The figure's title.
    """
    rows = table[table["group"] != "all"]
    groups = list(dict.fromkeys(rows["group"]))
    if len(groups) > 4:
        groups = [g for g in focus_groups(rows, value="cost") if g != "all"]
    methods = list(dict.fromkeys(table["method"]))
    width = min(2 * plotting_width(len(methods)), MAX_WIDTH)
    fig, (left, right) = plt.subplots(1, 2, figsize=(width, 4))
    shown = epsilons[epsilons["group"].isin(groups)]
    sns.boxplot(data=shown, x="method", y="epsilon", hue="group", order=methods, hue_order=groups, ax=left,
                showfliers=False)
    guarantee = table.drop_duplicates("method").set_index("method")["run_epsilon"]
    for i, method in enumerate(methods):
        left.plot([i - 0.45, i + 0.45], [guarantee[method]] * 2, color="black", linewidth=1.2)
    left.set_ylabel("ε_i per record (ex-post estimate); line: the run's ε")
    left.set_xlabel("")
    sns.barplot(data=rows[rows["group"].isin(groups)], x="method", y="cost", hue="group", order=methods,
                hue_order=groups, ax=right, errorbar=None)
    right.axhline(0, color="black", linewidth=0.8)
    right.set_ylabel("Δ test accuracy vs SGD")
    right.set_xlabel("")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
