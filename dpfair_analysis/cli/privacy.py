"""``dpfair privacy``: privacy accounting."""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import Parser, UsageError, accounting_from_args, add_accounting_flags, positive_float, \
    positive_int, print_json, unit_open


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("privacy", help="privacy accounting")
    psub = p.add_subparsers(dest="privacy_command", required=True, parser_class=Parser)
    e = psub.add_parser("epsilon", help="ε of DP-SGD with Poisson sampling at a given δ")
    e.add_argument("--n", type=positive_int, required=True, help="training set size")
    e.add_argument("--batch-size", type=positive_int, required=True)
    e.add_argument("--sigma", type=positive_float, required=True, help="noise multiplier")
    length = e.add_mutually_exclusive_group(required=True)
    length.add_argument("--epochs", type=positive_float)
    length.add_argument("--steps", type=positive_int)
    e.add_argument("--delta", type=unit_open, required=True)
    add_accounting_flags(e)
    e.add_argument("--json", action="store_true")
    e.set_defaults(handler=_run_privacy_epsilon)


def _run_privacy_epsilon(args: argparse.Namespace) -> None:
    if args.batch_size > args.n:
        raise UsageError(f"--batch-size {args.batch_size} must be at most --n {args.n}")
    accounting = accounting_from_args(args)
    from dpfair_analysis.privacy.accounting import dpsgd_privacy_summary

    summary = dpsgd_privacy_summary(n=args.n, batch_size=args.batch_size, noise_multiplier=args.sigma,
                                    delta=args.delta, epochs=args.epochs, steps=args.steps, accounting=accounting)
    if args.json:
        print_json(summary)
    else:
        print(f"ε = {summary['epsilon']:.4f} at δ = {summary['delta']:g} "
              f"({accounting.describe()}; {summary['steps']} steps, "
              f"q = {summary['sampling_rate']:.6f}, σ = {summary['noise_multiplier']:g})")
