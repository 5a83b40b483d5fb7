"""``dpfair audit``: empirical privacy audits (epsilon lower bounds) of the private mechanisms."""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import UsageError, int_in, print_json, seed_value, show_progress, unit_open


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="empirical privacy audit: 95%% lower bound on epsilon vs the claimed epsilon",
                       description="Run a private mechanism many times on a worst-case pair of neighbouring data "
                                   "sets, test which one was used (likelihood-ratio statistic, threshold chosen "
                                   "on held-out trials) and turn the error rates into a one-sided lower bound on "
                                   "epsilon (Clopper-Pearson; Nasr et al. 2021). A bound above the claimed "
                                   "epsilon means the implementation or its accounting is broken.")
    p.add_argument("--mechanism", required=True,
                   help="a registered mechanism (dpsgd, naive, dpsgdf, output-perturbation, ...) or 'all'")
    p.add_argument("--trials", type=int_in(1, 10_000_000), default=None,
                   help="runs on each of the two data sets (default: the mechanism's own, enough to catch a "
                        "0.25 under-noised twin); at least 8")
    p.add_argument("--seed", type=seed_value, default=0, help="seed of every draw (default 0)")
    p.add_argument("--noise-fraction", type=unit_open_or_one, default=1.0,
                   help="run the mechanism with its noise scaled by this fraction in (0, 1] while claiming the "
                        "same epsilon (default 1: the mechanism as shipped; e.g. 0.25 must be caught)")
    p.add_argument("--confidence", type=unit_open, default=0.95, help="confidence of the bound (default 0.95)")
    p.add_argument("--sampled", action="store_true",
                   help="audit the trainers as they run (Poisson sampling q < 1, every step, the model after every "
                        "step and every public release seen): shipped mechanisms dpsgd, naive, dpsgdf, "
                        "mitigation, pfld, output-perturbation, optq, fairdp, dpfedavg (user level); controls pfld-primal-shared-batch and each under-noised twin NAME@0.25, "
                        "which must be caught. Exit 1 if a shipped one is inconsistent or a control is not caught")
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


def run(args: argparse.Namespace) -> int | None:
    if args.sampled:
        return run_sampled(args)
    from dpfair_analysis.verify.audits import MECHANISMS, audit

    names = list(MECHANISMS) if args.mechanism == "all" else [args.mechanism]
    if args.mechanism != "all" and args.mechanism not in MECHANISMS:
        raise UsageError(f"--mechanism must be one of {sorted(MECHANISMS) + ['all']}, got {args.mechanism!r}")
    if args.trials is not None and args.trials < 8:
        raise UsageError(f"--trials must be at least 8 (half choose the threshold, half bound epsilon), "
                         f"got {args.trials}")
    results = [audit(name, trials=args.trials, seed=args.seed, noise_fraction=args.noise_fraction,
                     confidence=args.confidence, progress=show_progress(args)) for name in names]
    if args.json:
        print_json({"results": [r.as_dict() for r in results]})
        return 0 if all(_as_expected(r, MECHANISMS[r.mechanism].expected_consistent) for r in results) else 1
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
    return 0 if all(_as_expected(r, MECHANISMS[r.mechanism].expected_consistent) for r in results) else 1


def _as_expected(result, expected_consistent: bool) -> bool:
    """A mechanism as shipped must match its expectation; an under-noised twin must be caught."""
    if result.noise_fraction < 1:
        return not result.consistent
    return result.consistent == expected_consistent


def run_sampled(args: argparse.Namespace) -> int:
    """The trainers audited as they run; exit status 1 unless every shipped entry is
    consistent and every control is caught."""
    from dpfair_analysis.verify.audits.trainers import SAMPLED

    if args.mechanism != "all" and args.mechanism not in SAMPLED:
        raise UsageError(f"--mechanism with --sampled must be one of {sorted(SAMPLED) + ['all']}, "
                         f"got {args.mechanism!r}")
    if args.trials is not None and args.trials < 8:
        raise UsageError(f"--trials must be at least 8 (half choose the threshold, half bound epsilon), "
                         f"got {args.trials}")
    if args.noise_fraction != 1.0:
        raise UsageError("--noise-fraction does not apply with --sampled: the under-noised twins are the "
                         "entries NAME@0.25")
    from dpfair_analysis.verify.audits.trainers import audit_sampled

    names = list(SAMPLED) if args.mechanism == "all" else [args.mechanism]
    results = [audit_sampled(name, trials=args.trials, seed=args.seed, confidence=args.confidence,
                             progress=show_progress(args)) for name in names]
    if args.json:
        print_json({"results": results})
    else:
        print(f"{'mechanism':<26} {'control':>7} {'q':>6} {'steps':>5} {'claimed ε':>10} {'audited ε ≥':>12} "
              f"{'trials':>7}  verdict")
        for r in results:
            verdict = ("caught" if not r["consistent"] else "NOT CAUGHT") if r["control"] else (
                "consistent" if r["consistent"] else "INCONSISTENT")
            print(f"{r['mechanism']:<26} {'yes' if r['control'] else 'no':>7} {r['sampling_rate']:>6.3f} "
                  f"{r['steps']:>5d} {r['epsilon_claimed']:>10.3f} {r['epsilon_lower']:>12.3f} {r['trials']:>7d}  "
                  f"{verdict}")
        print(f"(δ = {results[0]['delta']:g}, one-sided {args.confidence:.0%} Clopper-Pearson bound)")
    return 0 if all(r["as_expected"] for r in results) else 1
