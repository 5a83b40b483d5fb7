"""How a diagnosis is shown: the terminal table (:func:`format_diagnosis`) and a self-contained HTML page
(:func:`report_html`, the page itself in ``report.html``)."""

from __future__ import annotations

import base64
import html
import string
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from dpfair_analysis.diagnose.diagnosis import Diagnosis


def format_diagnosis(diagnosis: Diagnosis) -> str:
    """The terminal table: one row per group (most hurt first), then the explanation and the recommendations."""
    plan = diagnosis.plan
    p = plan.plan
    head = (f"{diagnosis.dataset}: {diagnosis.model}, {p.method}, b={p.batch_size}, {p.epochs} epochs "
            f"({plan.steps} steps, r={plan.lr:.3g}), σ={plan.sigma:.3g}, C={p.clip_bound:g}, "
            f"ε={plan.epsilon:.3g} at δ={p.delta:g}  [diagnosis in {diagnosis.seconds:.1f} s]")
    header = ["rank", "group", "n", "predicted Δ", "90% interval", "P(most hurt)", "clip part", "noise part", "clipped",
              "clip bias", "R^clip/step", "R^noise/step", "Tr(H)", "1-Σf²", "reasons"]
    body = [header]
    for row in diagnosis.groups.itertuples():
        body.append([str(row.rank), str(row.group), f"{row.n:,}", f"{row.cost:+.4f}",
                     f"[{row.low:+.3f}, {row.high:+.3f}]", _chance(row.p_most_hurt), f"{row.clip_part:+.4f}",
                     f"{row.noise_part:+.4f}",
                     f"{row.clip_fraction:.0%}", f"{row.clip_bias:.3g}", f"{row.clip_term:.2e}",
                     f"{row.noise_term:.2e}", f"{row.trace:.3g}", f"{row.boundary:.3f}",
                     ", ".join(row.reasons) or "-"])
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    lines = [head, ""]
    for r in body:
        lines.append("  ".join(v.ljust(w) if i in (1, 14) else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    lines.append("")
    lines += diagnosis.explanation()
    if diagnosis.recommendations:
        lines += ["", "What would help (predictions, not measurements; cost vs the planned non-private model):"]
        for rec in diagnosis.recommendations:
            costs = ", ".join(f"{g} {c:+.4f}" for g, c in rec["predicted_costs"].items())
            lines.append(f"  - {rec['description']}: worst {rec['worst_group']} {rec['worst_cost']:+.4f}, "
                         f"gap {rec['max_gap']:.4f} ({costs})")
    return "\n".join(lines)


def report_html(diagnosis: Diagnosis, *, figure_png: bytes | None = None, title: str | None = None) -> str:
    """A self-contained HTML page: the settings, the table, the figure (inlined base64 PNG) and the explanation
    (the page is ``report.html`` beside this module, a :class:`string.Template`)."""
    esc = html.escape
    title = title or f"dpfair diagnose: {diagnosis.dataset}"
    settings = diagnosis.settings()
    rows = []
    for row in diagnosis.groups.itertuples():
        css = ' class="hurt"' if str(row.group) == diagnosis.most_hurt.get("group") else ""
        rows.append(
            f"<tr{css}><td>{row.rank}</td><td>{esc(str(row.group))}</td><td>{row.n:,}</td>"
            f"<td>{row.cost:+.4f}</td><td>[{row.low:+.3f}, {row.high:+.3f}]</td><td>{_chance(row.p_most_hurt)}</td>"
            f"<td>{row.clip_part:+.4f}</td>"
            f"<td>{row.noise_part:+.4f}</td><td>{row.clip_fraction:.1%}</td><td>{row.clip_bias:.3g}</td>"
            f"<td>{row.clip_term:.2e}</td><td>{row.noise_term:.2e}</td><td>{row.trace:.3g}</td>"
            f"<td>{row.boundary:.3f}</td><td>{esc(', '.join(row.reasons) or '-')}</td></tr>")
    recs = []
    for rec in diagnosis.recommendations:
        costs = ", ".join(f"{esc(g)} {c:+.4f}" for g, c in rec["predicted_costs"].items())
        recs.append(f"<tr><td class=\"text\">{esc(rec['description'])}</td><td>{esc(rec['worst_group'])}</td>"
                    f"<td>{rec['worst_cost']:+.4f}</td><td>{rec['max_gap']:.4f}</td><td>{costs}</td></tr>")
    figure = ("" if figure_png is None else
              f'<figure><img alt="predicted cost of privacy per group" src="data:image/png;base64,'
              f'{base64.b64encode(figure_png).decode("ascii")}"/><figcaption>Predicted cost of privacy per group '
              f'(bars: clipping and noise parts; whiskers: 90% interval).</figcaption></figure>')
    settings_rows = "".join(f"<tr><th>{esc(label)}</th><td>{esc(_fmt(settings[key]))}</td></tr>"
                            for key, label in SETTING_LABELS.items())
    explanation = "".join(f"<li>{esc(line)}</li>" for line in diagnosis.explanation())
    page = string.Template((Path(__file__).with_name("report.html")).read_text(encoding="utf-8"))
    return page.substitute(title=esc(title), epsilon=f"{diagnosis.plan.epsilon:.3g}",
                           delta=f"{diagnosis.plan.plan.delta:g}", settings_rows=settings_rows,
                           group_rows="".join(rows), figure=figure, explanation=explanation,
                           recommendation_rows="".join(recs))


#: The report's settings table: key of :meth:`Diagnosis.settings` -> what a reader is told it is.
SETTING_LABELS = {"method": "method", "noise_multiplier": "noise multiplier σ", "clip_bound": "clipping bound C",
                  "batch_size": "expected batch size b", "epochs": "epochs", "steps": "steps T",
                  "learning_rate": "learning rate r", "n_train": "training rows n", "delta": "δ",
                  "split_mode": "predicted for", "mechanism": "dominant mechanism",
                  "collapse_predicted": "ends as a constant classifier (predicted)",
                  "noise_per_weight": "accumulated noise per weight (std)"}


def _chance(value: float) -> str:
    """A probability as a percentage ("-" where there is none)."""
    return "-" if value is None or value != value else f"{value:.0%}"


def _fmt(value) -> str:
    """A setting as a person reads it: yes/no, integers with thousands separators, 4 significant digits."""
    if value in ("expectation", "per-split"):
        return {"expectation": "the expectation over random train/test splits", "per-split": "this split"}[value]
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer() and abs(value) >= 1e3):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
