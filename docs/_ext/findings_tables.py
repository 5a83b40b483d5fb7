"""Tables of the findings page, written at build time from the committed CSVs (so the page cannot drift from them).

* ``_generated/registry_<paper>.md``: every registered claim of one paper with its verdict and key number, from
  ``paper_figs/verify/verdicts.csv`` (what ``notebooks/verify_claims.ipynb`` wrote from ``dpfair verify``);
* ``_generated/pfld_table2_<data>.md``: paper 003's Table 2, our mean beside the paper's, from
  ``paper_figs/pfld/table2_<data>.csv``.
"""

from __future__ import annotations

import csv
from pathlib import Path

VERDICT_WORDS = {"holds": "holds", "violated": "**violated**", "misprinted": "*misprinted*",
                 "inconclusive": "inconclusive",
                 "holds, but rests on violated premises": "holds, but rests on violated premises"}
PFLD_TABLES = ("income", "compas", "bank", "m-bank3", "m-bank5")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def registry_table(rows: list[dict[str, str]], paper: str) -> str:
    """One paper's claims: id, where the paper says it, kind, statement, verdict (its standing where the CSV has one:
    "holds, but rests on violated premises" apart from a plain holds), the key -- with the premises it rests on and
    the other readings and their verdicts, where the CSV has them --, the fix if misprinted."""
    lines = ["| claim | where | kind | statement | verdict | key number | fix |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        if row["paper"] != paper:
            continue
        standing = row.get("standing") or row["verdict"]
        verdict = VERDICT_WORDS.get(standing, standing)
        key = row["key"]
        if row.get("rests_on") and standing != row["verdict"]:
            key += f"; rests on {row['rests_on']}"
        if row.get("alternative_readings"):
            key += f" (read as {row['reading']}; other reading {row['alternative_readings']})"
        lines.append("| " + " | ".join([f"`{row['id']}`", _cell(row["location"]), row["kind"], _cell(row["statement"]),
                                          verdict, _cell(key), _cell(row["fix"])]) + " |")
    return "\n".join(lines) + "\n"


def pfld_table(path: Path) -> str:
    """Accuracy and violation, ours (mean ± sd over folds) beside the paper's, per constraint and method."""
    lines = ["| constraint | method | accuracy (ours) | accuracy (paper) | violation (ours) | violation (paper) |",
             "|---|---|---|---|---|---|"]
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            def pair(key: str, row=row) -> str:
                mean, sd = row.get(key, ""), row.get(key + "_sd", "")
                if mean in ("", "nan"):
                    return "NA"
                return f"{float(mean):.3f} ± {float(sd):.3f}" if sd not in ("", "nan") else f"{float(mean):.3f}"
            lines.append(f"| {row['constraint']} | {row['label']} | {pair('accuracy')} | {pair('paper_accuracy')} "
                         f"| {pair('violation')} | {pair('paper_violation')} |")
    return "\n".join(lines) + "\n"


def write_tables(root: Path, target: Path) -> None:
    """Write every generated table of the findings page under ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    with (root / "paper_figs" / "verify" / "verdicts.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for paper in ("000", "001", "002", "003", "004"):
        (target / f"registry_{paper}.md").write_text(registry_table(rows, paper))
    for name in PFLD_TABLES:
        (target / f"pfld_table2_{name}.md").write_text(pfld_table(root / "paper_figs" / "pfld" / f"table2_{name}.csv"))
