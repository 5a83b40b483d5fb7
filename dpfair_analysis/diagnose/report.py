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
        lines += ["", *format_recommendations(diagnosis.recommendations)]
    return "\n".join(lines)


def format_recommendations(recommendations: list[dict]) -> list[str]:
    """The recommendations as text, from their verdicts (:func:`.recommendations.recommendation_verdict`):
    those predicted to help, then those with no predicted effect, each under its heading, and those predicted
    to hurt apart, after them; each with its worst group and gap and their changes against the plan."""
    from dpfair_analysis.diagnose.explanation import NEGLIGIBLE
    from dpfair_analysis.diagnose.recommendations import VERDICTS

    first = recommendations[0]
    lines = [(f"What would help (predictions, not measurements; cost vs the planned non-private model; the plan: "
              f"worst {first['plan_worst_group']} {first['plan_worst_cost']:+.4f}, gap {first['plan_gap']:.4f}):")]
    headings = {
        VERDICTS[0]: (f"  Predicted to help (the worst group loses at least {NEGLIGIBLE:g} less, or does not move "
                      f"and the gap narrows by {NEGLIGIBLE:g}):"),
        VERDICTS[1]: f"  No predicted effect (worst group and gap within {NEGLIGIBLE:g} of the plan):",
        VERDICTS[2]: (f"Predicted to hurt (listed apart, not advice: the worst group loses at least {NEGLIGIBLE:g} "
                      f"more, or does not move and the gap widens by {NEGLIGIBLE:g}):")}
    for verdict in VERDICTS:
        chosen = [r for r in recommendations if r["verdict"] == verdict]
        if not chosen:
            continue
        if verdict == VERDICTS[2]:
            lines.append("")
        lines.append(headings[verdict])
        for rec in chosen:
            costs = ", ".join(f"{g} {c:+.4f}" for g, c in rec["predicted_costs"].items())
            lines.append(f"  - {rec['description']}: worst {rec['worst_group']} {rec['worst_cost']:+.4f} "
                         f"({rec['worst_change']:+.4f} vs the plan), gap {rec['max_gap']:.4f} "
                         f"({rec['gap_change']:+.4f}) ({costs})")
    return lines


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
            f"<td>{row.clip_term:.2e}</td><td>{row.clip_direction:.2e}</td><td>{row.clip_magnitude:.2e}</td>"
            f"<td>{row.noise_term:.2e}</td><td>{row.trace:.3g}</td>"
            f"<td>{row.boundary:.3f}</td><td>{esc(', '.join(row.reasons) or '-')}</td></tr>")
    recs = []
    for rec in diagnosis.recommendations:  # sorted by verdict: the hurting ones last, marked
        costs = ", ".join(f"{esc(g)} {c:+.4f}" for g, c in rec["predicted_costs"].items())
        css = ' class="hurts"' if rec["verdict"] == "predicted to hurt" else ""
        recs.append(f"<tr{css}><td>{esc(rec['verdict'])}</td><td class=\"text\">{esc(rec['description'])}</td>"
                    f"<td>{esc(rec['worst_group'])}</td><td>{rec['worst_cost']:+.4f} ({rec['worst_change']:+.4f})</td>"
                    f"<td>{rec['max_gap']:.4f} ({rec['gap_change']:+.4f})</td><td>{costs}</td></tr>")
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
