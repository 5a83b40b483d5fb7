#!/usr/bin/env python
"""Exact per-group Hessian traces: batched basis HVPs vs the per-sample-Hessian route.

What ``dpfair hessian --method exact`` computes is Tr(H_a), the trace of group a's mean
cross-entropy Hessian. Two exact routes:

``basis_hvp``   :func:`dpfair_analysis.theory.hessian.exact_group_traces` -- P Hessian-vector
                products per group (``jvp`` of ``grad`` on basis vectors, batched by ``vmap``), no
                per-sample Hessian ever formed. This is what the toolkit ships.
``per_sample``  :func:`dpfair_analysis.theory.hessian.exact_sample_traces` -- the full P x P Hessian
                of every row by ``torch.func.hessian``, traced and averaged per group (the route
                the toolkit used before; kept as the reference).

The benchmark times ``basis_hvp`` on every row of the data set, times ``per_sample`` on a
seeded subsample (``--reference-rows``, the full route takes hours on full Adult) and projects
it linearly in rows to the full data set, checks the two routes' group traces agree on the
subsample (relative difference), and records peak resident memory (Linux ``VmHWM``).
Model: what ``dpfair hessian --model mlp`` builds (one hidden layer of 32 ReLU units, 1,378
parameters on Adult), float64, seeded initialisation, Adult's sex groups.

Usage (from the repository root)::

    .venv/bin/python benchmarks/exact_traces.py                  # full Adult, ~6-10 minutes
    .venv/bin/python benchmarks/exact_traces.py --quick          # smoke test, seconds
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser, positive_int, seed_value

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "exact_traces.json"


def parse_args(argv=None):
    """The command line, checked (before any heavy import)."""
    p = ScriptParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    p.add_argument("--rows", type=positive_int, default=None, help="subsample Adult to this many rows (default: all)")
    p.add_argument("--reference-rows", type=positive_int, default=2000,
                   help="rows for the per-sample-Hessian reference (default 2000)")
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")
    p.add_argument("--seed", type=seed_value, default=0)
    p.add_argument("--quick", action="store_true", help="smoke test: 200 rows, 40 reference rows")
    return p.parse_args(argv)


if __name__ == "__main__":
    parse_args()  # a bad command line is refused before the imports below (seconds)

import torch

from dpfair_analysis.data import load
from dpfair_analysis.io import write_atomically
from dpfair_analysis.models import build_model
from dpfair_analysis.theory.hessian import exact_group_traces, exact_sample_traces


def peak_rss_mb() -> float | None:
    """The process's resident-set high-water mark (``VmHWM``), in MB; None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def timed(fn):
    """(result, seconds) of one call."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def run(*, rows: int | None, reference_rows: int, seed: int) -> dict:
    """Time both routes and compare them; ``rows=None`` means every row of Adult."""
    data = load("adult", by="sex")
    g = torch.Generator().manual_seed(seed)
    if rows is not None:
        data = data.subset(torch.randperm(len(data), generator=g)[:rows])
    model = build_model("mlp", input_shape=(data.X.shape[1],), n_classes=data.n_classes, seed=seed,
                        hidden=(32,)).double()
    X, y, group = data.X.double(), data.y, data.group
    n_params = sum(p.numel() for p in model.parameters())

    full, full_seconds = timed(lambda: exact_group_traces(model, X, y, group, n_groups=data.n_groups))
    sub = torch.randperm(len(X), generator=g)[:min(reference_rows, len(X))]
    fast_sub, fast_sub_seconds = timed(lambda: exact_group_traces(model, X[sub], y[sub], group[sub],
                                                                  n_groups=data.n_groups))
    per_sample, reference_seconds = timed(lambda: exact_sample_traces(model, X[sub], y[sub]))
    reference = torch.stack([per_sample[group[sub] == k].mean() for k in range(data.n_groups)])
    present = ~torch.isnan(reference)
    agreement = float(((fast_sub - reference).abs() / reference.abs())[present].max())
    projected = reference_seconds * len(X) / len(sub)
    return {
        "settings": {"data": "adult", "group_by": "sex", "rows": len(X), "reference_rows": len(sub), "seed": seed,
                     "model": "mlp 32 relu, float64", "params": n_params, "threads": torch.get_num_threads(),
                     "torch": torch.__version__, "python": platform.python_version()},
        "groups": list(data.group_names),
        "traces": [float(t) for t in full],
        "basis_hvp_seconds": full_seconds,
        "reference": {"basis_hvp_seconds": fast_sub_seconds, "per_sample_seconds": reference_seconds,
                      "max_relative_difference": agreement},
        "per_sample_projected_seconds": projected,
        "speed_ratio": projected / full_seconds,
        "peak_rss_mb": peak_rss_mb(),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.quick and args.rows is None:
        args.rows, args.reference_rows = 200, 40
    torch.set_num_threads(args.threads)
    result = run(rows=args.rows, reference_rows=args.reference_rows, seed=args.seed)
    result["settings"]["quick"] = args.quick
    write_atomically(args.out, lambda tmp: tmp.write_text(json.dumps(result, indent=1)))
    print(f"exact traces on {result['settings']['rows']} rows ({result['settings']['params']} params): "
          f"{result['basis_hvp_seconds']:.1f} s by basis HVPs; per-sample Hessians projected "
          f"{result['per_sample_projected_seconds']:.0f} s (x{result['speed_ratio']:.1f}); agreement "
          f"{result['reference']['max_relative_difference']:.1e}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
