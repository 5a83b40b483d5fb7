#!/usr/bin/env python
"""What a diagnosis costs against the run it predicts: ``dpfair diagnose`` vs one DP-SGD ``train()`` (issue 39).

For each cell (a data set, a regime of the validation study, a noise multiplier) the script times, in this
process and interleaved (:func:`dpfair_analysis.experiments.diagnosis_validation.measure_cost`: one warm-up
of each, then ``--repeats`` rounds of the three, medians):

``diagnosis``                        the prediction alone (the expectation over 3 splits, the default);
``diagnosis_with_recommendations``   with its nine predicted mitigations (what ``dpfair diagnose`` runs);
``per_split_with_recommendations``   one split's prediction and the recommendations (``--split-mode per-split``);
``dp_training``                      one DP-SGD run of ``train()`` at the same settings on the same rows;

and the ratios, in wall time and in the process's CPU time (the primary measure here: on a machine shared
with other jobs, wall time measures the scheduler as much as the code). Target (issue 39): the diagnosis
with its recommendations at most 1/10 of a run in both
regimes. Cells: the study's ``defaults`` regime (b = 256, r = 1/sqrt(T), C = 0.5, 20 epochs: clipping
dominates) and ``noisy`` regime (b = 32, r = 0.5, C = 2, 5 epochs on at most 4,000 rows: noise dominates)
on Adult by sex, German by age, Dutch by sex (where installed) and ISLR's Wage by race. Single-threaded
(``torch.set_num_threads(1)``); run it on a quiet machine, or at least read the ratios, which both sides'
load shares.

Usage (from the repository root)::

    .venv/bin/python benchmarks/diagnose_cost.py            # the cells above, ~5-15 minutes
    .venv/bin/python benchmarks/diagnose_cost.py --quick    # smoke test: one synthetic cell, seconds
"""

from __future__ import annotations

import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser, positive_int

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "diagnose_cost.json"


def parse_args(argv=None):
    """The command line, checked (before any heavy import)."""
    parser = ScriptParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one synthetic cell at the quick profile (smoke test)")
    parser.add_argument("--repeats", type=positive_int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    return parser.parse_args(argv)


if __name__ == "__main__":
    parse_args()  # a bad command line is refused before the imports below (seconds)

import numpy as np
import torch

from dpfair_analysis.diagnose import DiagnosisOptions
from dpfair_analysis.experiments import diagnosis_validation as study
from dpfair_analysis.io import write_atomically

CELLS = (("adult-sex", "defaults", 1.0), ("german-age", "defaults", 1.0), ("wage-race", "defaults", 1.0),
         ("adult-sex", "noisy", 2.0), ("dutch-sex", "noisy", 2.0), ("german-age", "noisy", 2.0),
         ("wage-race", "noisy", 2.0))


def run(cells, *, profile: str, repeats: int, options: DiagnosisOptions | None = None) -> list[dict]:
    """measure_cost for every available cell."""
    settings = {s.name: s for s in study.SETTINGS}
    regimes = {r.name: r for r in study.profile_settings(profile).regimes}
    rows = []
    for name, regime, sigma in cells:
        setting = settings[name]
        if not setting.available():
            print(f"skipped {name}: data set {setting.dataset!r} not installed", file=sys.stderr)
            continue
        row = study.measure_cost(setting, regimes[regime], sigma, profile=profile, repeats=repeats,
                                 options=options)
        print(f"{name}/{regime}/sigma={sigma:g}: CPU s diagnosis {row['diagnosis_cpu']:.3f}, with recommendations "
              f"{row['diagnosis_with_recommendations_cpu']:.3f}, DP-SGD run {row['dp_training_cpu']:.3f} -> "
              f"{row['cpu_ratio']:.3f}x / {row['cpu_ratio_with_recommendations']:.3f}x, per split "
              f"{row['cpu_ratio_per_split_with_recommendations']:.3f}x (wall "
              f"{row['ratio']:.3f}x / {row['ratio_with_recommendations']:.3f}x)", flush=True)
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    """Per regime: the largest ratio over its cells (the target is for every cell), with and without its
    recommendations, in CPU time (the measure that a busy machine does not distort) and in wall time."""
    out = {}
    for regime in dict.fromkeys(r["regime"] for r in rows):
        part = [r for r in rows if r["regime"] == regime]
        out[regime] = {"cells": len(part)}
        out[regime]["max_cpu_ratio_per_split_with_recommendations"] = float(max(
            r["cpu_ratio_per_split_with_recommendations"] for r in part))
        for prefix in ("cpu_ratio", "ratio"):
            out[regime][f"max_{prefix}"] = float(max(r[prefix] for r in part))
            out[regime][f"max_{prefix}_with_recommendations"] = float(max(r[f"{prefix}_with_recommendations"]
                                                                          for r in part))
            out[regime][f"median_{prefix}_with_recommendations"] = float(np.median(
                [r[f"{prefix}_with_recommendations"] for r in part]))
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    if args.quick:
        rows = run((("synthetic", "defaults", 1.0),), profile="quick", repeats=1,
                   options=replace(DiagnosisOptions(), rows=400, curvature_rows=200, theory_rows=200, draws=20,
                                   recommendation_draws=10, implicit_steps=8))
    else:
        rows = run(CELLS, profile="full", repeats=args.repeats)
    payload = {"benchmark": "diagnose_cost", "quick": args.quick, "rows": rows, "summary": summary(rows),
               "target": "diagnosis with recommendations <= 0.1 x one DP-SGD run, every cell",
               "seconds": time.perf_counter() - start, "threads": torch.get_num_threads(),
               "python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine()}
    write_atomically(args.out, lambda tmp: tmp.write_text(json.dumps(payload, indent=1) + "\n"))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
