#!/usr/bin/env python
"""What per-record privacy accounting adds to a run (issue 52: "it must not double a run's cost").

For each setting, one DP-SGD run (``dpfair privacy groups``' run, seed 0) three ways, in process CPU seconds at one
thread: alone; with a :class:`~dpfair_analysis.training.norm_recorder.NormRecorder` taking every record's norm once
an epoch (the old default: a pass over the data per epoch); with
:class:`~dpfair_analysis.training.norm_recorder.SampledNorms` (the new default: the norms the DP step computes for
its batch, and one pass at theta_0). Beside each, the accounting's CPU time (the grid's RDP curves timed apart:
they are computed once per sampling rate and noise, then cached) and how far the two recorders' epsilon_i are
apart (and, on Adult, each from the exact every-step norms). Nothing is asserted: tests hold the checks.

Settings: Adult by sex at ``dpfair compare``'s defaults (logistic regression, 20 epochs) and the 5k-MNIST
unbalanced CNN (paper 000's setting, 60 epochs; ``--no-mnist`` skips it).

``--accounting``: instead, the accounting of DP-SGD, DPSGD-F and FairDP (the group-bound methods: their bounds move
at every step, so every record is binned at every step) on Adult by sex, Adult by race and Dutch, with the DP step's
norms: the run alone, then the accounting of the recorded run (the grid's RDP curves included: the in-process memo
is cleared first) now and as it was computed before issue 52's speed-up (``before``: the threshold search at each
changed step and one dp_accounting curve per grid point, the same numbers), and the largest relative difference of
the two epsilon_i (``results/group_privacy_accounting.json``).

Usage (from the repository root)::

    .venv/bin/python benchmarks/group_privacy_cost.py              # ~15 CPU minutes (the CNN runs)
    .venv/bin/python benchmarks/group_privacy_cost.py --accounting # ~3 CPU minutes (9 census runs, twice accounted)
    .venv/bin/python benchmarks/group_privacy_cost.py --quick      # smoke test: synthetic data, seconds
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser, positive_int

OUT = Path(__file__).resolve().parent / "results" / "group_privacy_cost.json"
ACCOUNTING_OUT = Path(__file__).resolve().parent / "results" / "group_privacy_accounting.json"


def parse_args(argv=None):
    """The command line, checked (before any heavy import)."""
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="synthetic data, 2 epochs (smoke test)")
    parser.add_argument("--no-mnist", action="store_true", help="Adult only")
    parser.add_argument("--mnist-epochs", type=positive_int, default=60,
                        help="the CNN's epochs (default the paper's 60; each recorder's share of the run is per epoch, "
                             "but for fewer epochs the sampled recorder's one pass is a larger share)")
    parser.add_argument("--accounting", action="store_true",
                        help=f"only the accounting of DP-SGD, DPSGD-F and FairDP on the census settings, now and "
                             f"before (default --out {ACCOUNTING_OUT})")
    parser.add_argument("--no-before", action="store_true", help="--accounting without the old accounting's timing")
    parser.add_argument("--out", type=Path, default=None, help=f"JSON file (default {OUT}; none with --quick)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    parse_args()  # a bad command line is refused before the imports below (seconds)

import numpy as np
import torch

from dpfair_analysis.experiments import group_privacy
from dpfair_analysis.experiments.compare import CompareConfig, _run_spec, load_data, split_for_seed
from dpfair_analysis.experiments.dpsgdf import CENSUS, MNIST_UNBALANCED
from dpfair_analysis.experiments.group_privacy import PAPER_SETTINGS, _account, _recorded_run, _TimedRecorder
from dpfair_analysis.io import write_atomically
from dpfair_analysis.privacy import individual
from dpfair_analysis.privacy.individual import DEFAULT_RESOLUTION, grid_curves
from dpfair_analysis.training.loop import schedule, train

ACCOUNTING_METHODS = ("dpsgd", "dpsgdf", "fairdp")


def _settings(quick: bool, mnist: bool, mnist_epochs: int) -> dict[str, CompareConfig]:
    if quick:
        from dpfair_analysis.training.loop import TrainConfig

        return {"synthetic": CompareConfig(dataset="synthetic", data_options={"sizes": (300, 100), "dim": 4},
                                           methods=("dpsgd",), clip_bound=0.3,
                                           train=TrainConfig(epochs=2, batch_size=32))}
    settings = {"adult by sex": replace(CENSUS, methods=("dpsgd",))}
    if mnist:
        settings["mnist-5k unbalanced (class 8)"] = replace(MNIST_UNBALANCED, methods=("dpsgd",),
                                                            train=replace(MNIST_UNBALANCED.train, epochs=mnist_epochs))
    return settings


def _relative(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """|a - b| / b: mean and largest."""
    relative = np.abs(np.asarray(a, float) - b) / np.maximum(b, 1e-300)
    return {"mean_relative": float(relative.mean()), "max_relative": float(relative.max())}


def measure(config: CompareConfig, *, resolution: int, exact: bool) -> dict:
    """The run alone, with each recorder, and the accounting's parts, on ``config`` (seed 0, DP-SGD)."""
    full, official = load_data(config)
    train_data, test_data = split_for_seed(config, full, official, seed=0)
    n, b = len(train_data), config.train.batch_size
    spec = _run_spec(config, "dpsgd", train_data, test_data, seed=0)
    start = time.process_time()
    plain = train(spec.model, spec.train_data, spec.policy, spec.config, test_data=test_data, progress=False)
    alone = time.process_time() - start
    start = time.process_time()
    grid_curves(b / n, config.noise_multiplier, config.train.accounting, resolution)
    curves = time.process_time() - start
    ways = {"per_epoch": math.ceil(n / b), "sampled": None, **({"every_step": 1} if exact else {})}
    runs = {name: _recorded_run(config, "dpsgd", train_data, test_data, seed=0, every=every, resolution=resolution,
                                progress=False) for name, every in ways.items()}
    row = {"n": n, "batch_size": b, "steps": len(plain.steps), "epochs": config.train.epochs,
           "run_epsilon": plain.epsilon, "run_alone_cpu": alone, "grid_curves_cpu": curves, "recorders": {}}
    for name, record in runs.items():
        seconds = record["cpu_seconds"]
        row["recorders"][name] = {**seconds, "recorder_over_run": seconds["recorder"] / alone,
                                  "accounting_over_run": seconds["accounting"] / alone,
                                  "same_run": record["run_epsilon"] == plain.epsilon,
                                  "mean_epsilon_i": float(np.mean(record["epsilons"]))}
    row["sampled_vs_per_epoch"] = _relative(runs["sampled"]["epsilons"], runs["per_epoch"]["epsilons"])
    if exact:
        reference = runs["every_step"]["epsilons"]
        row["sampled_vs_every_step"] = _relative(runs["sampled"]["epsilons"], reference)
        row["per_epoch_vs_every_step"] = _relative(runs["per_epoch"]["epsilons"], reference)
    return row


def _accounting_settings(quick: bool) -> dict[str, CompareConfig]:
    if quick:
        return {"synthetic": _settings(True, False, 0)["synthetic"]}
    return {name: PAPER_SETTINGS[name] for name in ("adult by sex", "adult by race", "dutch")}


def _accounted(recorder, result, spec, n: int, resolution: int) -> tuple[float, np.ndarray]:
    """CPU seconds of ``_account`` on a recorded run, the grid's curves included (memo cleared), and its epsilon_i."""
    individual._CURVES.clear()
    start = time.process_time()
    estimate = _account(recorder, result.steps, spec.policy, sampling_rate=spec.config.batch_size / n,
                        delta=spec.config.delta, accounting=spec.config.accounting, resolution=resolution)
    return time.process_time() - start, estimate.epsilons


def _dp_accounting_per_point(q, multipliers, orders):
    """The grid's curves as computed before issue 52's speed-up: one dp_accounting curve per multiplier."""
    return np.stack([individual._curves(q, float(m), orders, np.array([1.0]))[0] for m in multipliers])


def measure_accounting(config: CompareConfig, method: str, *, resolution: int, before: bool) -> dict:
    """The run alone and the accounting of the same run recorded with the DP step's norms (seed 0), now and before."""
    config = replace(config, methods=("sgd", method), seeds=(0,))
    full, official = load_data(config)
    train_data, test_data = split_for_seed(config, full, official, seed=0)
    n = len(train_data)
    spec = _run_spec(config, method, train_data, test_data, seed=0)
    start = time.process_time()
    train(spec.model, spec.train_data, spec.policy, spec.config, test_data=test_data, progress=False)
    alone = time.process_time() - start
    spec = _run_spec(config, method, train_data, test_data, seed=0)
    recorder = _TimedRecorder(train_data, every=None, total_steps=schedule(n, spec.config)[0])
    result = train(spec.model, spec.train_data, spec.policy, spec.config, test_data=test_data, progress=False,
                   callbacks=[recorder], batch_observers=[recorder.observe])
    after, epsilons = _accounted(recorder, result, spec, n, resolution)
    row = {"n": n, "steps": len(result.steps), "run_alone_cpu": alone, "recorder_cpu": recorder.seconds,
           "accounting_cpu": after, "accounting_over_run": after / alone,
           "mean_epsilon_i": float(np.mean(epsilons)), "run_epsilon": float(result.epsilon)}
    if before:
        share, rdp = group_privacy._DENSE_SHARE, individual._sampled_gaussian_rdp
        group_privacy._DENSE_SHARE, individual._sampled_gaussian_rdp = 0, _dp_accounting_per_point
        try:
            row["accounting_before_cpu"], old = _accounted(recorder, result, spec, n, resolution)
        finally:
            group_privacy._DENSE_SHARE, individual._sampled_gaussian_rdp = share, rdp
        row["before_over_run"] = row["accounting_before_cpu"] / alone
        row["max_relative_difference"] = float(np.max(np.abs(epsilons - old) / np.maximum(old, 1e-300)))
    return row


def main_accounting(args) -> dict:
    """The --accounting table (and the --quick smoke version): every setting x method, printed as it goes."""
    resolution = 16 if args.quick else DEFAULT_RESOLUTION
    methods = ("dpsgdf",) if args.quick else ACCOUNTING_METHODS
    rows = {}
    for name, config in _accounting_settings(args.quick).items():
        for method in methods:
            row = measure_accounting(config, method, resolution=resolution, before=not args.no_before)
            rows[f"{name} / {method}"] = row
            print(f"{name} / {method}: n = {row['n']}, T = {row['steps']}; run {row['run_alone_cpu']:.2f} CPU s, "
                  f"accounting {row['accounting_cpu']:.2f} s ({row['accounting_over_run']:.2f}x)"
                  + (f", before {row['accounting_before_cpu']:.2f} s ({row['before_over_run']:.2f}x), epsilon_i "
                     f"apart by {row['max_relative_difference']:.1e} at most" if "accounting_before_cpu" in row
                     else ""), flush=True)
    return {"settings": {"resolution": resolution, "seed": 0, "threads": 1, "norms": "sampled"}, "results": rows}


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.accounting:
        payload = main_accounting(args)
        out = args.out if args.out is not None else (None if args.quick else ACCOUNTING_OUT)
        if out is not None:
            write_atomically(out, lambda tmp: tmp.write_text(json.dumps(payload, indent=1)))
            print(f"wrote {out}")
        return 0
    resolution = 16 if args.quick else DEFAULT_RESOLUTION
    results = {}
    out = args.out if args.out is not None else (None if args.quick else OUT)
    for name, config in _settings(args.quick, not args.no_mnist, args.mnist_epochs).items():
        row = measure(config, resolution=resolution, exact=name != "mnist-5k unbalanced (class 8)")
        results[name] = row
        print(f"{name}: n = {row['n']}, T = {row['steps']}; the run alone {row['run_alone_cpu']:.1f} CPU s, the "
              f"grid's curves {row['grid_curves_cpu']:.1f} s (once per q and sigma, cached)", flush=True)
        for way, r in row["recorders"].items():
            print(f"  {way:>10}: recorder +{r['recorder']:.1f} s ({r['recorder_over_run']:.1%} of the run), "
                  f"accounting {r['accounting']:.2f} s ({r['accounting_over_run']:.1%}), mean epsilon_i "
                  f"{r['mean_epsilon_i']:.4f}", flush=True)
        print("  epsilon_i, sampled against per-epoch:", row["sampled_vs_per_epoch"],
              *(("\n  against every step: sampled", row["sampled_vs_every_step"], "per-epoch",
                 row["per_epoch_vs_every_step"]) if "sampled_vs_every_step" in row else ()), flush=True)
        payload = {"settings": {"resolution": resolution, "quick": args.quick, "method": "dpsgd", "seed": 0,
                                "threads": 1, "mnist_epochs": args.mnist_epochs}, "results": results}
        if out is not None:  # after each setting: a long run keeps what it measured
            write_atomically(out, lambda tmp: tmp.write_text(json.dumps(payload, indent=1)))
            print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
