"""``dpfair audit``: empirical privacy audits (epsilon lower bounds) of the private mechanisms."""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import UsageError, positive_int, print_json, unit_open


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="empirical privacy audit: 95%% lower bound on epsilon vs the claimed epsilon",
                       description="Run a private mechanism many times on a worst-case pair of neighbouring data "
                                   "sets, test which one was used (likelihood-ratio statistic, threshold chosen "
                                   "on held-out trials) and turn the error rates into a one-sided lower bound on "
                                   "epsilon (Clopper-Pearson; Nasr et al. 2021). A bound above the claimed "
                                   "epsilon means the implementation or its accounting is broken.")
    p.add_argument("--mechanism", required=True,
                   help="a registered mechanism (dpsgd, naive, dpsgdf, output-perturbation, ...) or 'all'")
    p.add_argument("--trials", type=positive_int, default=None,
                   help="runs on each of the two data sets (default: the mechanism's own, enough to catch a "
                        "0.25 under-noised twin); at least 8")
    p.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    p.add_argument("--noise-fraction", type=unit_open_or_one, default=1.0,
                   help="run the mechanism with its noise scaled by this fraction in (0, 1] while claiming the "
                        "same epsilon (default 1: the mechanism as shipped; e.g. 0.25 must be caught)")
    p.add_argument("--confidence", type=unit_open, default=0.95, help="confidence of the bound (default 0.95)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=run)


def unit_open_or_one(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def run(args: argparse.Namespace) -> None:
    from dpfair_analysis.privacy.audit import MECHANISMS, audit

    names = list(MECHANISMS) if args.mechanism == "all" else [args.mechanism]
    if args.mechanism != "all" and args.mechanism not in MECHANISMS:
        raise UsageError(f"--mechanism must be one of {sorted(MECHANISMS) + ['all']}, got {args.mechanism!r}")
    if args.trials is not None and args.trials < 8:
        raise UsageError(f"--trials must be at least 8 (half choose the threshold, half bound epsilon), "
                         f"got {args.trials}")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    results = [audit(name, trials=args.trials, seed=args.seed, noise_fraction=args.noise_fraction,
                     confidence=args.confidence, progress=not args.quiet) for name in names]
    if args.json:
        print_json({"results": [r.as_dict() for r in results]})
        return
    print(f"{'mechanism':<22} {'claimed ε':>10} {'audited ε ≥':>12} {'trials':>8}  consistent")
    for r in results:
        print(f"{r.mechanism:<22} {r.epsilon_claimed:>10.3f} {r.epsilon_lower:>12.3f} {r.trials:>8d}  "
              f"{'yes' if r.consistent else 'NO'}")
    for r in results:
        if not MECHANISMS[r.mechanism].expected_consistent:
            print(f"{r.mechanism}: audits a published claim that is refuted; NO is the expected answer")
    first = results[0]
    print(f"(δ = {first.delta:g}, one-sided {first.confidence:.0%} Clopper-Pearson bound; noise fraction "
          f"{args.noise_fraction:g}{' — an under-noised twin' if args.noise_fraction < 1 else ''})")
