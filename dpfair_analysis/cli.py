"""The ``dpfair`` command: parses, calls the library, prints.

Any bad argument or unusable input ends in one line on stderr,
``dpfair: error: <what is wrong>``, and exit status 2 -- never a traceback. Output files
are written to a temporary file and renamed, so nothing is left half-written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Callable, Sequence

from dpfair_analysis.io import write_atomically

EXIT_USAGE = 2


class UsageError(Exception):
    """A problem with the command line or its inputs, reported as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and go through the same exit path."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


# ----------------------------------------------------------------- argument types
def _number(check: Callable[[float], bool], allowed: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}") from None
        if not math.isfinite(value) or not check(value):
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}")
        return value
    return parse


positive_float = _number(lambda v: v > 0, "a positive finite number")
unit_open = _number(lambda v: 0 < v < 1, "a number in (0, 1)")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    return _number(lambda v: v >= 0, "a finite number >= 0")(text)


def output_path(text: str) -> Path:
    """A file path whose directory exists (checked before any work is done)."""
    path = Path(text)
    if not path.parent.exists() or not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"directory {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name")
    return path


def _print_json(payload: object) -> None:
    print(json.dumps(payload, indent=2, default=_json_default))


def _json_default(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


# ------------------------------------------------------------------------ compare
def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="per-group cost of privacy: SGD vs private methods (paper 000 Table 1)",
                       description="Train the non-private model and the private methods on the same split and "
                                   "seed; print per-group test accuracy and the cost of privacy.")
    p.add_argument("--data", default="adult", help="data set name (see `dpfair data list`; default adult)")
    p.add_argument("--group-by", default=None, help="group column of the data set (default: its own, e.g. sex)")
    p.add_argument("--model", default="logreg", help="logreg, mlp or cnn (default logreg)")
    p.add_argument("--methods", default="sgd,dpsgd",
                   help="comma-separated: sgd, dpsgd, naive, dpsgdf, dpsgd(C=2) (default sgd,dpsgd)")
    p.add_argument("--clips", default=None,
                   help="extra DPSGD runs with these uniform bounds, e.g. 1,2,3,4,5 (paper 000 Table 3)")
    p.add_argument("--count-noise-ratio", type=positive_float, default=10.0,
                   help="DPSGD-F/Naive count noise sigma_1 as a multiple of --sigma (default 10)")
    p.add_argument("--max-ratio", type=positive_float, default=10.0,
                   help="DPSGD-F guard: cap on (m^k/b^k)/(m/b), so C^k <= C0 (1 + cap) (default 10)")
    p.add_argument("--train-fraction", action="append", default=[], metavar="GROUP=FRACTION",
                   help="keep this fraction of a group's training rows, e.g. 8=0.08546 for paper 000's "
                        "unbalanced MNIST (500/5851); the test set is untouched; repeatable")
    p.add_argument("--no-equal-privacy", action="store_true",
                   help="let Naive/DPSGD-F run all steps instead of stopping at DPSGD's epsilon")
    p.add_argument("--epochs", type=positive_int, default=20)
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument("--sigma", type=positive_float, default=1.0, help="noise multiplier (default 1)")
    p.add_argument("--clip", type=positive_float, default=0.5, help="clipping bound C (default 0.5)")
    p.add_argument("--delta", type=unit_open, default=1e-6)
    p.add_argument("--lr", type=positive_float, default=None, help="learning rate (default 1/sqrt(T))")
    p.add_argument("--l2", type=nonnegative_float, default=0.01, help="L2 weight (default 0.01)")
    p.add_argument("--sampling", default="poisson", help="poisson (matches the accountant) or shuffle")
    p.add_argument("--accountant", default="rdp", help="rdp or pld (default rdp)")
    p.add_argument("--conversion", default="improved", help="RDP to (ε, δ): improved or classic")
    p.add_argument("--seeds", type=positive_int, default=1, help="number of seeds (mean ± sd); default 1")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--out", type=output_path, default=None, help="CSV file for the per-epoch history")
    p.add_argument("--plots", default=None, help="directory for per-group figures (created if missing)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--no-cache", action="store_true",
                   help="retrain even if this exact run is in the result cache ($DPFAIR_CACHE)")
    p.set_defaults(handler=_run_compare)


def _run_compare(args: argparse.Namespace) -> None:
    from dpfair_analysis.experiments.cache import RunCache, default_cache_dir
    from dpfair_analysis.experiments.compare import CompareConfig, format_table, run_compare, save_compare_figures
    from dpfair_analysis.training.loop import TrainConfig

    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    data_options = {} if args.group_by is None else {"by": args.group_by}
    methods = [m.strip() for m in re.split(r",(?![^(]*\))", args.methods) if m.strip()]
    if args.clips:
        methods += [f"dpsgd(C={c.strip()})" for c in args.clips.split(",") if c.strip()]
    fractions = {}
    for item in args.train_fraction:
        group, sep, value = item.partition("=")
        try:
            fractions[group] = float(value)
        except ValueError:
            raise UsageError(f"--train-fraction must look like GROUP=FRACTION, got {item!r}") from None
        if not sep or not group:
            raise UsageError(f"--train-fraction must look like GROUP=FRACTION, got {item!r}")
    config = CompareConfig(
        dataset=args.data, data_options=data_options, model=args.model, methods=tuple(methods),
        train_group_fraction=fractions,
        noise_multiplier=args.sigma, clip_bound=args.clip, l2=args.l2, count_noise_ratio=args.count_noise_ratio,
        max_ratio=args.max_ratio, equal_privacy=not args.no_equal_privacy,
        train=TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, sampling=args.sampling,
                          delta=args.delta, accountant=args.accountant, conversion=args.conversion),
        seeds=tuple(range(args.seed, args.seed + args.seeds)))
    cache = RunCache(None if args.no_cache else default_cache_dir())
    result = run_compare(config, progress=not args.quiet and not args.json, cache=cache)
    if args.out is not None:
        write_atomically(args.out, lambda tmp: result.histories.to_csv(tmp, index=False))
    figures = [] if args.plots is None else save_compare_figures(result, args.plots)
    if args.json:
        _print_json(result.to_json())
        return
    print(f"{config.dataset}: {config.model}, b={config.train.batch_size}, {config.train.epochs} epochs, "
          f"σ={config.noise_multiplier}, C={config.clip_bound}, δ={config.train.delta}, "
          f"seeds {list(config.seeds)}, sampling={config.train.sampling}")
    print(format_table(result))
    for method, eps in result.epsilon.items():
        print(f"ε({method}) = {eps:.3f} at δ={config.train.delta} ({config.train.accountant}, "
              f"{config.train.conversion} conversion)")
    for run in result.runs:
        if run["method"] not in ("sgd",) and run["epsilon"] is not None and len(config.seeds) == 1:
            print(f"  {run['method']}: {run['steps']} steps, ε = {run['epsilon']:.3f}")
    if args.out is not None:
        print(f"history written to {args.out}")
    for path in figures:
        print(f"figure written to {path}")


# ------------------------------------------------------------------------ privacy
def _add_privacy(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("privacy", help="privacy accounting")
    psub = p.add_subparsers(dest="privacy_command", required=True, parser_class=_Parser)
    e = psub.add_parser("epsilon", help="ε of DP-SGD with Poisson sampling at a given δ")
    e.add_argument("--n", type=positive_int, required=True, help="training set size")
    e.add_argument("--batch-size", type=positive_int, required=True)
    e.add_argument("--sigma", type=positive_float, required=True, help="noise multiplier")
    length = e.add_mutually_exclusive_group(required=True)
    length.add_argument("--epochs", type=positive_float)
    length.add_argument("--steps", type=positive_int)
    e.add_argument("--delta", type=unit_open, required=True)
    e.add_argument("--accountant", default="rdp", help="rdp (default) or pld")
    e.add_argument("--conversion", default="improved", help="improved (default) or classic (the papers')")
    e.add_argument("--json", action="store_true")
    e.set_defaults(handler=_run_privacy_epsilon)


def _run_privacy_epsilon(args: argparse.Namespace) -> None:
    from dpfair_analysis.privacy.accounting import dpsgd_privacy_summary

    summary = dpsgd_privacy_summary(n=args.n, batch_size=args.batch_size, noise_multiplier=args.sigma,
                                    delta=args.delta, epochs=args.epochs, steps=args.steps,
                                    accountant=args.accountant, conversion=args.conversion)
    if args.json:
        _print_json(summary)
    else:
        print(f"ε = {summary['epsilon']:.4f} at δ = {summary['delta']:g} "
              f"({summary['accountant']}, {summary['conversion']} conversion; {summary['steps']} steps, "
              f"q = {summary['sampling_rate']:.6f}, σ = {summary['noise_multiplier']:g})")


# --------------------------------------------------------------------------- data
def _add_data(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="list, fetch and describe data sets")
    dsub = p.add_subparsers(dest="data_command", required=True, parser_class=_Parser)
    listing = dsub.add_parser("list", help="the data sets and where their files come from")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_run_data_list)
    fetch = dsub.add_parser("fetch", help="obtain and verify a data set's raw files")
    fetch.add_argument("name")
    fetch.set_defaults(handler=_run_data_fetch)
    describe = dsub.add_parser("describe", help="rows, features, group sizes and label rates")
    describe.add_argument("name")
    describe.add_argument("--group-by", default=None)
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(handler=_run_data_describe)


def _run_data_list(args: argparse.Namespace) -> None:
    from dpfair_analysis.data import list_datasets

    table = list_datasets()
    if args.json:
        _print_json(table.to_dict("records"))
        return
    print(table.to_string(index=False))


def _run_data_fetch(args: argparse.Namespace) -> None:
    from dpfair_analysis.data import fetch_dataset

    for path in fetch_dataset(args.name):
        print(path)


def _run_data_describe(args: argparse.Namespace) -> None:
    from dpfair_analysis.data import load

    options = {} if args.group_by is None else {"by": args.group_by}
    dataset = load(args.name, **options)
    table = dataset.describe()
    if args.json:
        _print_json({"name": args.name, "rows": len(dataset), "features": dataset.n_features,
                     "groups": table.to_dict("records")})
        return
    print(f"{args.name}: {len(dataset)} rows, {dataset.n_features} features, "
          f"{dataset.n_groups} groups, {dataset.n_classes} classes")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dpfair", description="How differential privacy hurts some groups more than others.")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch intra-op threads (default 1: on a shared 2-core machine more threads "
                             "made per-sample steps several times slower; see benchmarks/README.md)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_compare(sub)
    _add_privacy(sub)
    _add_data(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dpfair``; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        import torch

        torch.set_num_threads(args.threads)
        args.handler(args)
    except UsageError as error:
        print(f"dpfair: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"dpfair: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("dpfair: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a bug, not a usage problem: still one line unless asked
        if os.environ.get("DPFAIR_DEBUG"):
            raise
        print(f"dpfair: internal error: {type(error).__name__}: {_one_line(error)} "
              f"(set DPFAIR_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
    return 0


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return " ".join(text.split()) if text else type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
