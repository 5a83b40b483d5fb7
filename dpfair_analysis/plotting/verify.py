"""The verification: audited epsilons per mechanism and claim verdicts per paper."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd


# ------------------------------------------------------------------ verify/ (claims and audits)
def plot_audit_epsilon(audited: pd.DataFrame, *, names: list[str] | None = None) -> plt.Figure:
    """Per mechanism: the audit's 95% lower bound on epsilon as shipped and for its
    under-noised twin (noise fraction 0.25), beside the claimed epsilon (black ticks).
    ``audited`` from :func:`~dpfair_analysis.verify.audits.audit_table`; ``names`` orders
    the mechanisms (default: as they appear)."""
    names = list(dict.fromkeys(audited["mechanism"])) if names is None else list(names)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    x = range(len(names))
    for offset, fraction, label in ((-0.2, 1.0, "as shipped"), (0.2, 0.25, "under-noised twin (0.25)")):
        sel = audited[audited.noise_fraction == fraction].set_index("mechanism").loc[names]
        ax.bar([i + offset for i in x], sel.epsilon_lower, width=0.4, label=label)
    claimed = audited[audited.noise_fraction == 1.0].set_index("mechanism").loc[names].epsilon_claimed
    ax.scatter(list(x), claimed, marker="_", s=600, color="k", label="claimed ε", zorder=3)
    ax.set_xticks(list(x), names, rotation=20)
    ax.set_ylabel("95% lower bound on ε")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig

def plot_verdicts_by_paper(table: pd.DataFrame) -> plt.Figure:
    """Number of claims per paper, stacked by standing (the verdict, with "holds, but rests on violated premises"
    apart from a plain holds; the verdict where the table has no standing). ``table`` from
    :func:`~dpfair_analysis.verify.claims.verdict_table`."""
    fig, ax = plt.subplots(figsize=(6, 3))
    by = "standing" if "standing" in table else "verdict"
    counts = table.groupby(["paper", by]).size().unstack(fill_value=0)
    counts.plot.bar(stacked=True, ax=ax)
    ax.set_ylabel("claims")
    fig.tight_layout()
    return fig
