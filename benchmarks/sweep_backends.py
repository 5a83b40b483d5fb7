#!/usr/bin/env python
"""Wall time of one comparison grid on each sweep backend: serial, joblib processes, Ray.

The grid is ``dpfair compare``'s: methods x seeds on a data set, every run trained from
scratch (no cache). Each backend runs the whole grid in turn; the benchmark records wall
times and checks that every backend's outputs (per-seed group accuracies and costs, the
per-epoch histories, the per-step statistics, epsilon) equal the serial run's exactly --
the runner's promise -- and exits non-zero if one does not.

Usage (from the repository root)::

    .venv/bin/python benchmarks/sweep_backends.py           # Adult, 3 methods x 4 seeds x 3 epochs, ~1 minute
    .venv/bin/python benchmarks/sweep_backends.py --quick   # smoke test: synthetic data, serial and joblib
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "sweep_backends.json"


def parse_args(argv=None):
    """The command line, checked (before any heavy import)."""
    p = ScriptParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    p.add_argument("--jobs", type=int, default=2, help="processes / Ray CPUs (default 2)")
    p.add_argument("--seeds", type=int, default=4, help="seeds in the grid (default 4)")
    p.add_argument("--backends", default="serial,joblib,ray", help="comma-separated subset of serial,joblib,ray")
    p.add_argument("--quick", action="store_true", help="smoke test: a synthetic 2 x 2 grid, serial and joblib")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.seeds < 1:
        p.error("--jobs and --seeds must be positive integers")
    args.names = ["serial", "joblib"] if args.quick else args.backends.split(",")
    if args.names[0] != "serial" or any(n not in ("serial", "joblib", "ray") for n in args.names):
        p.error(f"--backends must start with serial (the reference) and name serial, joblib or ray, got {args.backends}")
    return args


if __name__ == "__main__":
    parse_args()  # a bad command line is refused before the imports below (seconds)

import pandas as pd
import torch

from dpfair_analysis.experiments.compare import CompareConfig, run_compare
from dpfair_analysis.experiments.sweep import Backend
from dpfair_analysis.io import write_atomically
from dpfair_analysis.training.loop import TrainConfig


def grid(quick: bool, seeds: int) -> CompareConfig:
    """The comparison the backends run: Adult at the CLI's defaults, or a synthetic smoke grid."""
    if quick:
        return CompareConfig(dataset="synthetic", data_options={"sizes": (80, 20), "dim": 4, "seed": 0},
                             methods=("sgd", "dpsgd"), seeds=(0, 1),
                             train=TrainConfig(epochs=1, batch_size=16, lr=0.1, delta=1e-5))
    return CompareConfig(dataset="adult", methods=("sgd", "dpsgd", "dpsgdf"), seeds=tuple(range(seeds)),
                         train=TrainConfig(epochs=3))


def identical(a, b) -> bool:
    """Every output of two comparisons equal, bit for bit."""
    try:
        for name in ("per_seed", "histories", "steps"):
            pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    except AssertionError:
        return False
    return a.epsilon == b.epsilon and a.runs == b.runs


def time_backend(config: CompareConfig, backend: Backend) -> tuple[object, float]:
    """(result, wall seconds) of the grid on ``backend``, Ray started and stopped around it."""
    start = time.perf_counter()
    if backend.name == "ray":
        import ray

        ray.init(num_cpus=backend.jobs, include_dashboard=False, log_to_driver=False)
        try:
            result = run_compare(config, progress=False, backend=backend)
        finally:
            ray.shutdown()
    else:
        result = run_compare(config, progress=False, backend=backend)
    return result, time.perf_counter() - start


def main(argv=None) -> int:
    args = parse_args(argv)
    names = args.names
    torch.set_num_threads(1)
    config = grid(args.quick, args.seeds)
    rows, reference = [], None
    for name in names:
        backend = Backend(name, jobs=1 if name == "serial" else args.jobs)
        result, seconds = time_backend(config, backend)
        reference = reference or result
        rows.append({"backend": name, "jobs": backend.jobs, "seconds": seconds,
                     "identical_to_serial": identical(result, reference)})
        print(f"{backend.describe():<32} {seconds:8.1f} s  identical to serial: {rows[-1]['identical_to_serial']}",
              flush=True)
    payload = {"settings": {"dataset": config.dataset, "methods": list(config.methods), "seeds": list(config.seeds),
                            "epochs": config.train.epochs, "runs": len(config.methods) * len(config.seeds),
                            "quick": args.quick, "threads_per_run": 1, "cpus": os.cpu_count(),
                            "torch": torch.__version__, "python": platform.python_version()},
               "rows": rows}
    write_atomically(args.out, lambda tmp: tmp.write_text(json.dumps(payload, indent=1)))
    print(f"wrote {args.out}")
    return 0 if all(r["identical_to_serial"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
