"""Tables of the findings page, written at build time from the committed CSVs (so the page cannot drift from them).

* ``_generated/registry_<paper>.md``: every registered claim of one paper with its verdict and key number, from
  ``paper_figs/verify/verdicts.csv`` (what ``notebooks/verify_claims.ipynb`` wrote from ``dpfair verify``);
* ``_generated/pfld_table2_<data>.md``: paper 003's Table 2, our mean beside the paper's, from
  ``paper_figs/pfld/table2_<data>.csv``;
* ``_generated/pfld_tuned_<data>.md``: Table 2 with every method tuned on the same budget, from
  ``paper_figs/pfld/tuned_table2_<data>.json`` (``dpfair pfld-table --tune --json``): each cell's verdict with the
  part that decides it, how often the chosen configuration was chosen, the spread of the validation scores and the
  privacy the ledgers give;
* ``_generated/method_grid.md``: every method at equal epsilon, each tuned over its own grid of the same size, per
  setting, and the verdicts against the later papers' printed numbers, from ``paper_figs/equal_eps/method_grid.json``
  (``notebooks/record_issue51.py --study method-grid``);
* ``_generated/mnist_equal_epsilon.md``: every method of the full-MNIST tuning grid at equal epsilon, chosen on the
  validation worst class, and the later papers' claims judged there, from ``paper_figs/fairdp/
  mnist_tuning_equal_epsilon.csv`` and ``mnist_tuning_later_claims.csv`` (``notebooks/fairdp_mnist_tuning.ipynb``);
* ``_generated/mnist_tuned_table1.md``: paper 000's Table 1 on full MNIST with every method tuned on the same budget,
  and the qualitative claims judged there, from ``paper_figs/fairdp/mnist_tuning_table1_verdicts.csv`` and
  ``mnist_tuning_claims.csv``;
* ``_generated/recommendation_check.md``: the diagnosis' recommendations against real runs, per kind, from
  ``paper_figs/diagnose/recommendation_check.json`` (``notebooks/record_issue51.py --study recommendations``);
* ``_generated/plain_audits.md`` (the benchmarks page): the privacy-testing kit on every zoo mechanism as a plain
  function at the full budget, over the seeds recorded so far, from ``benchmarks/results/privacy_testing_plain.json``
  (``benchmarks/privacy_testing.py --parts plain --plain-records ... --plain-recorded-only``).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
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


def epsilon_bound(epsilons: list[float]) -> str:
    """The largest ledger epsilon, rounded *up* at the sixth decimal: "ε ≤ 1.000004" (never "ε = 1" for a run
    whose ledger gives 1.0000039)."""
    return f"ε ≤ {math.ceil(max(epsilons) * 1e6) / 1e6:.6f}"


def _why(row: dict) -> str:
    """The verdict's reason, from the two parts the JSON judges: accuracy and violation, each against the paper's
    value with its margin."""
    parts = []
    for part, better in (("accuracy", "below"), ("violation", "above")):
        verdict, margin = row[f"{part}_verdict"], row[f"{part}_margin"]
        if verdict.startswith("does not"):
            ours = row[f"tuned_{part}"]
            parts.append(f"{part} {ours:.3f} {better} the paper's {row[f'paper_{part}']:.3f} by more than {margin:.3f}")
        else:
            parts.append(f"{part} {verdict}")
    return "; ".join(parts)


def pfld_tuned_table(path: Path) -> str:
    """One row per constraint and method of a tuned Table 2 (the JSON of ``dpfair pfld-table --tune``)."""
    data = json.loads(path.read_text())
    rows = data["tuned_rows"]
    lines = ["| constraint | method | paper | printed settings | tuned | verdict | why | chosen most often | "
             "configurations chosen | validation score (min–max over folds) | privacy |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in data["summary"]:
        mine = [r for r in rows if (r["constraint"], r["method"]) == (row["constraint"], row["method"])]
        scores = [r["validation_score"] for r in mine]
        epsilons = [r["epsilon"] for r in mine if r.get("epsilon") is not None]
        lines.append("| " + " | ".join([
            row["constraint"], row["method"],
            f"{row['paper_accuracy']:.3f} / {row['paper_violation']:.3f}",
            f"{row['default_accuracy']:.3f} / {row['default_violation']:.3f}",
            f"{row['tuned_accuracy']:.3f} / {row['tuned_violation']:.3f}",
            row["verdict"], _cell(_why(row)),
            _cell(f"{row['chosen_most_often']} ({row['folds_choosing_it']} of {row['folds']} folds)"),
            str(len({r["configuration"] for r in mine})),
            f"{min(scores):.3f}–{max(scores):.3f}" if scores else "NA",
            epsilon_bound(epsilons) if epsilons else "not private"]) + " |")
    counts = "; ".join(f"{n} {verdict}" for verdict, n in data["verdict_counts"].items())
    return ("\n".join(lines) + f"\n\nCells (accuracy / violation): {counts}. Each method tuned over its own grid of "
            f"{', '.join(sorted({str(b['configurations']) for b in data['protocol']['budgets'].values()}))} "
            f"configurations; tolerance: {data['summary'][0]['tolerance']}; {data['summary'][0]['selection_privacy']}.\n")


KIND_WORDS = {"quantile clip bound": "C from the quantile rule", "dpsgdf": "DPSGD-F", "naive": "Naive",
              "fairdp": "FairDP", "globaladapt": "Global-Adapt (later work)",
              "boundedadaptive": "bounded adaptive (later work)", "larger epsilon": "2× ε", "larger batch": "4× batch",
              "sgd": "SGD (not private)", "dpsgd": "DP-SGD", "optq": "Opt-Q", "dpfedavg": "DP-FedAvg"}


def recommendation_check_table(path: Path) -> str:
    """Per kind of advice: sign agreement under the three rules, the changes the seeds resolve, Spearman; then each
    resolved change the advice got wrong."""
    data = json.loads(path.read_text())

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    lines = ["| kind | plain | under 0.005 as none | resolved | sign on the resolved | agreement, resolution rule "
             "| Spearman |", "|---|---|---|---|---|---|---|"]
    for row in data["table"]:
        total = row["action"] == "all"
        name = f"all {row['cells']}" if total else KIND_WORDS.get(row["action"], row["action"])
        cells = [name, pct(row["sign_agreement"]), pct(row["sign_agreement_negligible"]),
                 f"{row['resolved']} of {row['cells']}", pct(row["resolved_agreement"]), pct(row["agreement"]),
                 f"{row['spearman']:+.2f}"]
        lines.append("| " + " | ".join(f"**{c}**" if total else c for c in cells) + " |")
    wrong = [c for c in data["cells"] if c["outcome"] == "wrong"]
    text = "\n".join(lines) + f"\n\n{len(data['seeds'])} seeds per cell. Wrong on a resolved change: " + (
        "; ".join(f"{KIND_WORDS.get(c['action'], c['action'])} on {c['setting']}/{c['regime']} (predicted "
                  f"{c['predicted_worst_change']:+.4f}, measured {c['measured_worst_change']:+.3f} ± "
                  f"{c['measured_se']:.3f})" for c in wrong) or "none") + ".\n"
    return text


def method_grid_table(path: Path) -> str:
    """Per setting, one row per method: worst-group test accuracy at the defaults and tuned, the tuned gap, the range
    of worst-group accuracy over the method's grid, epsilon; then each printed claim's verdict."""
    data = json.loads(path.read_text())
    names = list(data["settings"])
    lines = ["| method | " + " | ".join(f"{name}: default → tuned worst, gap, range" for name in names) + " |",
             "|---|" + "---|" * len(names)]
    robust = {name: {r["method"]: r for r in data["settings"][name]["robustness"]} for name in names}
    epsilons = {name: next(iter(robust[name].values()))["epsilon"] for name in names}
    for method in data["methods"]:
        cells = []
        for name in names:
            r = robust[name].get(method)
            cells.append("—" if r is None else f"{r['default_worst']:.3f} → {r['chosen_worst']:.3f}, "
                                                 f"{r['chosen_gap']:.3f}, {r['range']:.3f}")
        lines.append(f"| {KIND_WORDS.get(method, method)} | " + " | ".join(cells) + " |")
    lines.append("| ε | " + " | ".join(f"{epsilons[name]:.3g}" for name in names) + " |")
    claims = "\n".join(f"- {c['statement']} ({c['paper']}; theirs: {c['paper_settings']}) on {c['setting']} "
                        f"({c['setting_note']}): gain {c['gain_at_defaults']:+.3f} at the defaults, "
                        f"{c['gain_after_tuning']:+.3f} tuned -- **{c['verdict']}**." for c in data["claims"])
    return ("\n".join(lines) + f"\n\n{len(data['seeds'])} seeds; every configuration selected on validation "
            f"worst-group accuracy ({data['selection_privacy']}).\n\n" + claims + "\n")


def mnist_equal_epsilon_table(equal_eps: Path, later: Path) -> str:
    """One row per method of the full-MNIST grid (complete budgets): printed and chosen test worst class, the chosen
    configuration (with whether its sampling is the accountant's), gap, overall accuracy, range over the grid,
    epsilon; then each later claim's verdict there."""
    with equal_eps.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    lines = ["| method | worst class: printed → chosen | chosen configuration | gap | all | range over its grid "
             "| largest ε of its grid |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        private = bool(r["epsilon"]) and not math.isnan(float(r["epsilon"]))
        accounted = "" if r["chosen_accounted"] == "True" or not private else " (shuffled: ε not a guarantee)"
        epsilon = f"{float(r['epsilon']):.3f}" if private else "—"
        lines.append(f"| {KIND_WORDS.get(r['method'], r['method'])} | {float(r['default_worst']):.3f} → "
                     f"{float(r['chosen_worst']):.3f} | {r['chosen']}{accounted} | {float(r['chosen_gap']):.3f} | "
                     f"{float(r['chosen_all']):.3f} | {float(r['range']):.3f} | {epsilon} |")
    claims = []
    if later.exists() and later.stat().st_size:
        with later.open(newline="") as handle:
            claims = list(csv.DictReader(handle))
    text = "\n".join(lines) + "\n\nOne seed (paper 000's); SGD is the non-private reference.\n"
    if claims:
        text += "\n" + "\n".join(
            f"- {c['statement']} ({c['paper']}): worst-class gain {float(c['gain_at_defaults']):+.3f} at the printed "
            f"configurations, {float(c['gain_after_tuning']):+.3f} chosen, printed {float(c['printed_gain']):+.2f} -- "
            f"**{c['verdict']}**." for c in claims) + "\n"
    return text


def mnist_tuned_table1(verdicts: Path, claims: Path) -> str:
    """Paper 000's Table 1 on full MNIST under the tuning protocol: per method and group, the printed number, ours at
    the printed configuration and tuned, the verdict; then each qualitative claim's verdict at both."""
    with verdicts.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    with claims.open(newline="") as handle:
        stated = list(csv.DictReader(handle))
    lines = ["| method | group | paper | ours, printed configuration | ours, tuned | verdict |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {KIND_WORDS.get(r['method'], r['method'])} | {r['group']} | {float(r['printed']):+.3f} | "
              f"{float(r['at_printed']):+.3f} | {float(r['tuned']):+.3f} | {r['verdict']} |" for r in rows]
    return ("\n".join(lines) + "\n\nSGD's rows are accuracies, the others costs against SGD (printed configuration "
            "against SGD's printed one, tuned against SGD's tuned one); one seed.\n\n"
            + "\n".join(f"- `{c['claim']}`: {_cell(c['detail_printed'])} at the printed configuration, "
                        f"{_cell(c['detail_tuned'])} tuned -- **{c['verdict']}**." for c in stated) + "\n")


def plain_audits_table(path: Path) -> str:
    """One row per zoo mechanism audited as a plain function: claim, whether it is correct, the seeds recorded, the
    verdicts over them, the bounds (median, min), seeds with no power, CPU seconds per audit, the published testers'
    bounds, and the part's target (met, missed, or not yet decidable on fewer than the planned seeds)."""
    data = json.loads(path.read_text())
    planned = data["settings"]["plain_seeds"]
    lines = ["| mechanism | claim ε | correct | seeds | verdicts | median ε ≥ | min ε ≥ | no power | CPU s | "
             "DP-Sniper | StatDP | target |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in data["rows"]:
        part = row.get("plain")
        if part is None:
            continue
        seeds, bounds = part["seeds"], sorted(part["epsilon_lower"])
        verdict = (f"{part['consistent']} of {seeds} consistent" if row["correct"]
                   else f"**{part['caught']} of {seeds} caught**" if part["caught"] == seeds
                   else f"{part['caught']} of {seeds} caught, **{seeds - part['caught']} missed**")
        target = ("met" if part["target_met"] else "**missed**") if seeds >= planned else (
            f"{'on track' if part['target_met'] else '**missed**'} ({seeds} of {planned} seeds)")
        anchors = row.get("anchors", {})
        sniper = max((anchors[k] for k in ("dpsniper_reg", "dpsniper_mlp") if k in anchors), default=None)
        statdp = max((anchors[k] for k in ("statdp_1", "statdp_2") if k in anchors), default=None)
        lines.append(f"| {row['mechanism']} | {row['epsilon_claimed']:.3f} | {'yes' if row['correct'] else 'no'} | "
                     f"{seeds} | {verdict} | {statistics.median(bounds):.4f} | {bounds[0]:.4f} | "
                     f"{sum(p is not None for p in part['no_power'])} | "
                     f"{sum(part['cpu_seconds']) / seeds:.0f} | {'—' if sniper is None else f'{sniper:.4f}'} | "
                     f"{'—' if statdp is None else f'{statdp:.4f}'} | {target} |")
    missing = [row["mechanism"] for row in data["rows"] if "plain" not in row]
    return "\n".join(lines) + "\n" + (f"\nNot recorded yet: {', '.join(missing)}.\n" if missing else "")


def write_tables(root: Path, target: Path) -> None:
    """Write every generated table of the findings page under ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    with (root / "paper_figs" / "verify" / "verdicts.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for paper in sorted({row["paper"] for row in rows}):  # every paper the registry has, later work included
        (target / f"registry_{paper}.md").write_text(registry_table(rows, paper))
    for name in PFLD_TABLES:
        (target / f"pfld_table2_{name}.md").write_text(pfld_table(root / "paper_figs" / "pfld" / f"table2_{name}.csv"))
        tuned = root / "paper_figs" / "pfld" / f"tuned_table2_{name}.json"
        if tuned.exists():
            (target / f"pfld_tuned_{name}.md").write_text(pfld_tuned_table(tuned))
    (target / "method_grid.md").write_text(method_grid_table(root / "paper_figs" / "equal_eps" / "method_grid.json"))
    fairdp = root / "paper_figs" / "fairdp"
    (target / "mnist_tuned_table1.md").write_text(mnist_tuned_table1(
        fairdp / "mnist_tuning_table1_verdicts.csv", fairdp / "mnist_tuning_claims.csv"))
    (target / "mnist_equal_epsilon.md").write_text(mnist_equal_epsilon_table(
        fairdp / "mnist_tuning_equal_epsilon.csv", fairdp / "mnist_tuning_later_claims.csv"))
    (target / "recommendation_check.md").write_text(
        recommendation_check_table(root / "paper_figs" / "diagnose" / "recommendation_check.json"))
    plain = root / "benchmarks" / "results" / "privacy_testing_plain.json"
    (target / "plain_audits.md").write_text(plain_audits_table(plain))
