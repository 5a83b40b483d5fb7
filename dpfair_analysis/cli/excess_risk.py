"""``dpfair excess-risk``: per-group excessive risk R_a and its gap under a private mechanism (paper 001).

* ``--mechanism output``: output perturbation of regularised logistic regression
  (lambda = ``--l2``), rows scaled into the unit ball, ``--draws`` releases per epsilon;
  Theorem 1's prediction (1/2) s^2 Tr(H_a) beside the measurement;
* ``--mechanism dpsgd``: DP-SGD with a one-hidden-layer ReLU network (``--hidden``),
  C = ``--clip``, the noise multiplier calibrated to each epsilon for ``--epochs`` epochs,
  ``--seeds`` private runs paired by seed with non-private SGD.
"""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import UsageError, check_dataset_options, check_workload, \
    estimated_training_seconds, int_in, positive_float, positive_int, positive_numbers, print_json, seed_value, \
    show_progress, unit_open
from dpfair_analysis.catalog import DATASETS

MECHANISMS = ("output", "dpsgd")
DESCRIPTION = """Per-group excessive risk R_a (private minus non-private loss) and its gap, with 95% intervals:

  --mechanism output  output perturbation of regularised logistic regression (lambda = --l2), rows
                      scaled into the unit ball, --draws releases per epsilon; Theorem 1's
                      prediction (1/2) s^2 Tr(H_a) printed beside the measurement
  --mechanism dpsgd   DP-SGD with a one-hidden-layer ReLU network (--hidden), C = --clip, the noise
                      multiplier calibrated to each epsilon for --epochs epochs, --seeds private runs
                      paired by seed with non-private SGD"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("excess-risk", help="per-group excessive risk and gap under a private mechanism (paper 001)",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, choices=list(DATASETS), metavar="NAME",
                   help="data set name (see `dpfair data list`)")
    p.add_argument("--group-by", default=None, help="group attribute, if the data set has several")
    p.add_argument("--mechanism", choices=MECHANISMS, required=True)
    p.add_argument("--epsilons", type=positive_numbers, default=[0.005, 0.05, 0.5],
                   help="comma-separated epsilons (default 0.005,0.05,0.5)")
    p.add_argument("--delta", type=unit_open, default=1e-5)
    p.add_argument("--l2", type=positive_float, default=1e-3, help="output: ERM regulariser lambda (default 1e-3)")
    p.add_argument("--draws", type=int_in(1, 10_000_000), default=1000, help="output: antithetic draws per epsilon")
    p.add_argument("--seeds", type=int_in(1, 1000), default=3, help="dpsgd: private runs per epsilon (>= 2)")
    p.add_argument("--epochs", type=int_in(1, 100_000), default=5, help="dpsgd: epochs (default 5)")
    p.add_argument("--clip", type=positive_float, default=0.1, help="dpsgd: clipping bound C (default 0.1)")
    p.add_argument("--hidden", type=positive_int, default=16, help="dpsgd: hidden units (one layer; default 16)")
    p.add_argument("--rows", type=positive_int, default=None, help="use a seeded stratified subsample of this size")
    p.add_argument("--seed", type=seed_value, default=0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--force", action="store_true", help="run even if the estimate is over a day")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> None:
    if args.mechanism == "dpsgd" and args.seeds < 2:
        raise UsageError(f"argument --seeds: dpsgd needs at least 2 runs for a confidence interval, got {args.seeds}")
    check_dataset_options(args.data, args.group_by)
    rows = args.rows or DATASETS[args.data].rows
    if rows is not None and args.mechanism == "dpsgd":
        check_workload(estimated_training_seconds("mlp", rows=rows, batch_size=256, epochs=args.epochs,
                                                  runs=2 * args.seeds * len(args.epsilons)),
                       what=f"{len(args.epsilons)} epsilon(s) x {args.seeds} seed(s) x {args.epochs} epochs",
                       flags="--epochs/--seeds", force=args.force, quiet=args.quiet or args.json)
    from dpfair_analysis.experiments import fairness_lens as lens

    data = lens.load_data(args.data, by=args.group_by, rows=args.rows, seed=args.seed)
    progress = show_progress(args)
    if args.mechanism == "output":
        table, _ = lens.figure1(data, name=args.data, epsilons=args.epsilons, delta=args.delta, l2=args.l2,
                                draws=args.draws, seed=args.seed, progress=progress)
        columns = ["epsilon", "group", "n", "excess_risk", "ci_low", "ci_high", "gap", "gap_ci_low", "gap_ci_high",
                   "trace", "predicted_risk", "predicted_gap", "relative_error", "noise_std"]
    else:
        setting = lens.DPSGDSetting(hidden=(args.hidden,), clip_bound=args.clip, epochs=args.epochs, delta=args.delta)
        table = lens.dpsgd_excess_risk_by_epsilon(data, setting, epsilons=args.epsilons,
                                                  seeds=range(args.seed, args.seed + args.seeds), progress=progress)
        columns = ["epsilon", "group", "n", "excess_risk", "ci_low", "ci_high", "gap", "gap_ci_low", "gap_ci_high",
                   "sigma"]
    table = table[columns]
    if args.json:
        settings = {"data": args.data, "group_by": args.group_by, "mechanism": args.mechanism,
                    "epsilons": args.epsilons, "delta": args.delta, "seed": args.seed, "rows": args.rows}
        settings.update({"l2": args.l2, "draws": args.draws} if args.mechanism == "output" else
                        {"seeds": args.seeds, "epochs": args.epochs, "clip": args.clip, "hidden": args.hidden})
        print_json({"settings": settings, "delta": args.delta, "rows": table.to_dict("records")})
        return
    print(f"{args.data}: {args.mechanism}, delta={args.delta}; excess risk R_a with 95% CI, gap = R_a - R")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
