"""``dpfair data``: list, fetch and describe data sets."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path
from typing import Iterator

from dpfair_analysis.cli._common import Parser, UsageError, check_dataset_options, print_json
from dpfair_analysis.catalog import DATASETS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="list, fetch and describe data sets")
    dsub = p.add_subparsers(dest="data_command", required=True, parser_class=Parser)
    listing = dsub.add_parser("list", help="the data sets and where their files come from")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_run_data_list)
    fetch = dsub.add_parser(
        "fetch", help="obtain and verify a data set's raw files",
        description="Obtain a data set's raw files into the cache ($DPFAIR_DATA, default "
                    "~/.cache/dpfair_analysis), each verified by its SHA-256. A cached file that fails "
                    "verification is moved aside and obtained again.")
    fetch.add_argument("name", choices=list(DATASETS), metavar="name", help="data set name (see `dpfair data list`)")
    fetch.add_argument("--from", dest="from_path", metavar="PATH", default=None,
                       help="install the file(s) from PATH (a file, or a directory holding them) instead of "
                            "downloading; refused, with nothing written, unless the SHA-256 matches")
    fetch.set_defaults(handler=_run_data_fetch)
    describe = dsub.add_parser("describe", help="rows, features, group sizes, label rates, missing values")
    describe.add_argument("name", choices=list(DATASETS), metavar="name", help="data set name (see `dpfair data list`)")
    describe.add_argument("--group-by", default=None,
                          help="grouping: sex|race (adult, compas), sex|age (german), age|age3|age5 (bank)")
    describe.add_argument("--split", default=None, choices=("train", "test"),
                          help="train|test (mnist-full only; default train)")
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(handler=_run_data_describe)


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Print the data layer's warnings as one ``dpfair: warning:`` line each on stderr."""
    from dpfair_analysis.data.sources import DataWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DataWarning)
        try:
            yield
        finally:
            for w in caught:
                if issubclass(w.category, DataWarning):
                    print(f"dpfair: warning: {' '.join(str(w.message).split())}", file=sys.stderr)
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _run_data_list(args: argparse.Namespace) -> None:
    from dpfair_analysis.data import list_datasets

    table = list_datasets()
    if args.json:
        print_json(table.to_dict("records"))
        return
    print(table.to_string(index=False))


def _run_data_fetch(args: argparse.Namespace) -> None:
    if args.from_path is not None and not Path(args.from_path).exists():
        raise UsageError(f"--from {args.from_path}: no such file or directory")
    from dpfair_analysis.data import fetch_dataset
    from dpfair_analysis.data.sources import ChecksumError

    try:
        with _warnings_as_lines():
            paths = fetch_dataset(args.name, from_path=args.from_path)
    except ChecksumError as err:
        if args.from_path is None:
            raise
        raise UsageError(f"--from {args.from_path}: {' '.join(str(err).split())}; nothing was written "
                         f"to the cache") from None
    except FileNotFoundError as err:
        if args.from_path is None:
            raise
        raise UsageError(f"--from {args.from_path}: {' '.join(str(err).split())}") from None
    except ValueError as err:  # e.g. a pickle or file of the wrong layout given with --from
        if args.from_path is None or str(err).startswith("name must be"):
            raise
        raise UsageError(f"--from {args.from_path}: {' '.join(str(err).split())}; nothing was written "
                         f"to the cache") from None
    for path in paths:
        print(path)


def _run_data_describe(args: argparse.Namespace) -> None:
    check_dataset_options(args.name, args.group_by)
    if args.split is not None and args.name != "mnist-full":
        raise UsageError(f"--split applies only to mnist-full (the others have no official split), not {args.name}")
    import torch

    from dpfair_analysis.data import _tabular, load

    options = {} if args.group_by is None else {"by": args.group_by}
    if args.split is not None:
        options["split"] = args.split
    with _warnings_as_lines():
        dataset = load(args.name, **options)
    table = dataset.describe()
    classes_are_groups = dataset.group_names == dataset.label_names and torch.equal(dataset.group, dataset.y)
    if classes_are_groups:  # MNIST: a group's label rates are 1 for its class, 0 elsewhere
        table = table[["group", "n", "share"]]
    else:
        masks = [torch.ones(len(dataset), dtype=torch.bool)] + [dataset.group == k for k in range(dataset.n_groups)]
        for k, label in enumerate(dataset.label_names):
            table[f"n[{label}]"] = [int(((dataset.y == k) & mask).sum()) for mask in masks]
    missing = _tabular.missing_summary(dataset.info)
    if args.json:
        print_json({"name": args.name, "rows": len(dataset), "features": dataset.n_features,
                    "groups": table.to_dict("records"), "raw_rows": dataset.info.get("raw_rows"),
                    "rows_dropped_missing": dataset.info.get("rows_dropped_missing"),
                    "missing_by_column": dataset.info.get("missing_by_column")})
        return
    print(f"{args.name}: {len(dataset):,} rows, {dataset.n_features} features, "
          f"{dataset.n_groups} groups, {dataset.n_classes} classes")
    if missing:
        print(missing)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
