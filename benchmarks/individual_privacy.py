#!/usr/bin/env python
"""Who spends how much of DP-SGD's budget: per-record, per-group epsilon_i on Adult by sex (issue 52.1).

One DP-SGD run at ``dpfair compare``'s defaults (Adult, logistic regression, sigma = 1, C = 0.5, b = 256,
20 epochs, r = 1/sqrt(T), delta = 1e-6, Poisson sampling, seed 0's split) with a
:class:`~dpfair_analysis.training.norm_recorder.NormRecorder` recording every training record's gradient norm at
every step's parameters; then :func:`~dpfair_analysis.privacy.individual.individual_privacy` and
:func:`~dpfair_analysis.privacy.individual.group_privacy`. epsilon_i is an ex-post, data-dependent estimate
(module docstring), never the run's guarantee, which is the worst case printed beside it.

Measured (process CPU time, single-threaded): the run alone; the run with the recorder at every step, every
10 steps and once an epoch (every n/b steps); the accounting. The error of held norms (checkpoints every k
steps) against every step is measured on the same run. Nothing is asserted: tests/privacy/test_individual.py
holds the checks.

Usage (from the repository root)::

    .venv/bin/python benchmarks/individual_privacy.py            # Adult, ~1 minute of CPU
    .venv/bin/python benchmarks/individual_privacy.py --quick    # smoke test: synthetic data, seconds
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser, positive_int

OUT = Path(__file__).resolve().parent / "results" / "individual_privacy.json"


def parse_args(argv=None):
    """The command line, checked (before any heavy import)."""
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="synthetic data, 2 epochs (smoke test)")
    parser.add_argument("--resolution", type=positive_int, default=None,
                        help="sensitivity grid points K (default privacy.individual.DEFAULT_RESOLUTION; 16 with "
                             "--quick)")
    parser.add_argument("--out", type=Path, default=None, help=f"JSON file (default {OUT}; none with --quick)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    parse_args()  # a bad command line is refused before the imports below (seconds)

import numpy as np
import torch

from dpfair_analysis.data.synthetic import synthetic_groups
from dpfair_analysis.experiments.compare import CompareConfig, _run_spec, load_data, split_for_seed
from dpfair_analysis.privacy.individual import DEFAULT_RESOLUTION, group_privacy, individual_privacy
from dpfair_analysis.training.loop import schedule, train
from dpfair_analysis.training.norm_recorder import NormRecorder


def _spec(quick: bool):
    config = CompareConfig(methods=("dpsgd",))
    if quick:
        data = synthetic_groups(sizes=(600, 200), dim=5, seed=0, group_names=("a", "b"))
        config = replace(config, train=replace(config.train, epochs=2, batch_size=32))
        return config, data, None
    full, official = load_data(config)
    train_data, test_data = split_for_seed(config, full, official, seed=0)
    return config, train_data, test_data


def _timed_run(config, train_data, test_data, recorder=None):
    spec = _run_spec(config, "dpsgd", train_data, test_data, seed=0)
    start = time.process_time()
    result = train(spec.model, spec.train_data, spec.policy, spec.config, test_data=test_data, progress=False,
                   callbacks=[] if recorder is None else [recorder])
    return result, time.process_time() - start


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    config, train_data, test_data = _spec(args.quick)
    n, b = len(train_data), config.train.batch_size
    steps, _ = schedule(n, config.train)
    per_epoch = math.ceil(n / b)
    sigma, clip, delta = config.noise_multiplier, config.clip_bound, config.train.delta

    _timed_run(config, train_data, test_data)  # warm-up: first-call costs (imports, allocator) stay out of the timings
    plain, plain_cpu = _timed_run(config, train_data, test_data)
    timings = {"run": plain_cpu}
    recorders = {}
    for every in (1, 10, per_epoch):
        recorder = NormRecorder(train_data, every=every, total_steps=steps)
        result, cpu = _timed_run(config, train_data, test_data, recorder)
        assert result.epsilon == plain.epsilon
        timings[f"run_with_recorder_every_{every}"] = cpu
        recorders[every] = recorder
    kwargs = {"clip": clip, "noise_multiplier": sigma, "sampling_rate": b / n, "delta": delta,
              "accounting": config.train.accounting,
              "resolution": args.resolution or (16 if args.quick else DEFAULT_RESOLUTION)}
    start = time.process_time()
    exact = individual_privacy(recorders[1].norms, **kwargs)
    timings["accounting_first_call"] = time.process_time() - start  # includes the grid's curves (memoised)
    start = time.process_time()
    individual_privacy(recorders[1].norms, **kwargs)
    timings["accounting_curves_memoised"] = time.process_time() - start

    held_error = {}
    for every in (10, per_epoch):
        held = individual_privacy(recorders[every].norms, repeats=recorders[every].repeats, **kwargs)
        relative = np.abs(held.epsilons - exact.epsilons) / np.maximum(exact.epsilons, 1e-300)
        held_error[every] = {"max_relative": float(relative.max()), "mean_relative": float(relative.mean()),
                             "group_means": group_privacy(held, train_data).query("metric == 'mean'")
                             .set_index("group")["value"].to_dict()}

    frame = group_privacy(exact, train_data)
    table = frame.pivot(index="group", columns="metric", values="value")
    columns = ["n", "mean", "min", "q10", "q25", "q50", "q75", "q90", "max", "worst_case_share", "mean_over_run"]
    table = table.loc[["all", *train_data.group_names], columns]
    accuracy = plain.history.query("split == 'test' and metric == 'accuracy' and epoch == @config.train.epochs") \
        if test_data is not None else None

    print(f"DP-SGD on {'synthetic' if args.quick else 'Adult'} (n = {n}, b = {b}, q = {b / n:.5f}, sigma = {sigma}, "
          f"C = {clip}, T = {steps}, delta = {delta}): the run's guarantee epsilon = {plain.epsilon:.4f} "
          f"(every record); worst case of the estimate {exact.run_epsilon:.4f}")
    print("epsilon_i per group (ex-post estimates from every step's norms of every record; not guarantees):")
    with np.printoptions(precision=4):
        print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    if accuracy is not None:
        print("test accuracy:", {row.group: round(row.value, 4) for row in accuracy.itertuples()})
    print("held norms against every step:", json.dumps(held_error, indent=None))
    print("CPU seconds:", {k: round(v, 2) for k, v in timings.items()})

    payload = {"settings": {"dataset": "synthetic" if args.quick else "adult", "n": n, "batch_size": b,
                            "noise_multiplier": sigma, "clip": clip, "steps": steps, "delta": delta,
                            "epochs": config.train.epochs, "resolution": exact.resolution, "quick": args.quick},
               "run_epsilon": plain.epsilon, "estimate_worst_case": exact.run_epsilon, "what": exact.what,
               "groups": frame.to_dict("records"), "held_error": {str(k): v for k, v in held_error.items()},
               "cpu_seconds": timings,
               "test_accuracy": None if accuracy is None else
               {row.group: row.value for row in accuracy.itertuples()}}
    out = args.out if args.out is not None else (None if args.quick else OUT)
    if out is not None:
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, indent=1))
        tmp.replace(out)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
