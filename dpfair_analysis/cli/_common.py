"""Shared pieces of the ``dpfair`` command: the one-line error, argument types, JSON output."""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Callable

EXIT_USAGE = 2


class UsageError(Exception):
    """A problem with the command line or its inputs, reported as one line."""


class Parser(argparse.ArgumentParser):
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


def device(text: str) -> str:
    """``--device``: cpu, or cuda / cuda:N where torch sees CUDA (one-line error otherwise)."""
    import torch

    if text not in ("cpu", "cuda") and not (text.startswith("cuda:") and text[5:].isdigit()):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text!r}")
    if text.startswith("cuda") and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text!r} needs CUDA, but torch.cuda.is_available() is False on this "
                                         f"machine; use --device cpu")
    return text


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


def print_json(payload: object) -> None:
    print(json.dumps(payload, indent=2, default=_json_default))


def _json_default(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")




# ----------------------------------------------------------------- accounting flags
def add_accounting_flags(parser: argparse.ArgumentParser, *, accountant: str = "rdp",
                         accountants: tuple[str, ...] = ("rdp", "pld"), conversion: bool = True) -> None:
    """``--accountant`` (and ``--conversion``), turned into one AccountingSpec by :func:`accounting_from_args`."""
    parser.add_argument("--accountant", default=accountant, choices=accountants,
                        help=f"privacy accountant (default {accountant})")
    if conversion:
        parser.add_argument("--conversion", default="improved", choices=("improved", "classic"),
                            help="RDP to (ε, δ): improved (default) or classic (the papers' tool)")


def accounting_from_args(args: argparse.Namespace, *, neighboring: str = "add_remove", **fixed: object):
    """The :class:`~dpfair_analysis.privacy.accounting.AccountingSpec` the flags ask for (one-line errors)."""
    from dpfair_analysis.privacy.accounting import AccountingSpec

    conversion = getattr(args, "conversion", "improved")
    if args.accountant == "pld" and conversion != "improved":
        raise UsageError(f"--conversion {conversion} applies only to --accountant rdp")
    return AccountingSpec(accountant=args.accountant, conversion=conversion, neighboring=neighboring, **fixed)


# ----------------------------------------------------------------- data: a built-in data set or a CSV file
CSV_FLAGS = {"path": "--csv", "label": "--label", "group": "--group", "drop": "--drop", "positive": "--positive"}


def add_data_flags(parser: argparse.ArgumentParser) -> None:
    """``--data NAME [--group-by G]`` or ``--csv PATH --label COL --group COL [--drop A,B] [--positive V]``."""
    parser.add_argument("--data", default=None, help="built-in data set (see `dpfair data list`; default adult)")
    parser.add_argument("--group-by", default=None, help="group column of a built-in data set (e.g. sex, race)")
    parser.add_argument("--csv", default=None, metavar="PATH",
                        help="your own data: a CSV file with a header row (numerics are standardised, "
                             "other columns one-hot encoded; rows with missing values are counted and removed)")
    parser.add_argument("--label", default=None, metavar="COL", help="with --csv: the column to predict")
    parser.add_argument("--group", default=None, metavar="COL", help="with --csv: the protected attribute")
    parser.add_argument("--drop", default=None, metavar="COL,...", help="with --csv: columns that are not features")
    parser.add_argument("--positive", default=None, metavar="VALUE",
                        help="with --csv: the label value that is class 1 (needed for a text label)")


def data_from_args(args: argparse.Namespace) -> tuple[str, dict, list[str]]:
    """(registry name, loader options, what was done to a CSV file) from the data flags; one-line errors.

    A CSV file is read once here (so a bad column, a one-row group, a one-class or text label is
    reported naming its flag before any work) and named by its SHA-256 in the options, so cached
    results of an edited file are never served.
    """
    from dpfair_analysis.data.sources import DataWarning
    from dpfair_analysis.data.user_csv import user_csv

    csv_only = [flag for flag, value in (("--label", args.label), ("--group", args.group), ("--drop", args.drop),
                                         ("--positive", args.positive)) if value is not None]
    if args.csv is None:
        if csv_only:
            raise UsageError(f"{', '.join(csv_only)} need(s) --csv PATH (for a built-in data set use --data and "
                             f"--group-by)")
        options = {} if args.group_by is None else {"by": args.group_by}
        return args.data or "adult", options, []
    if args.data is not None or args.group_by is not None:
        raise UsageError("give either --data [--group-by] or --csv --label --group, not both")
    for flag, value in (("--label", args.label), ("--group", args.group)):
        if value is None:
            raise UsageError(f"--csv needs {flag} COL")
    drop = [c.strip() for c in (args.drop or "").split(",") if c.strip()]
    path = Path(args.csv).expanduser().resolve()
    with warnings.catch_warnings(record=True) as caught:  # said once, as a note on stderr, not a Python warning
        warnings.simplefilter("always", DataWarning)
        dataset = user_csv(path=path, label=args.label, group=args.group, drop=drop, positive=args.positive,
                           argument_names=CSV_FLAGS)
    for warning in caught:
        print(f"dpfair: note: {warning.message}", file=sys.stderr)
    options = {"path": str(path), "label": args.label, "group": args.group, "drop": drop, "positive": args.positive,
               "sha256": dataset.info["sha256"]}
    return "csv", options, list(dataset.info["preprocessing"])
