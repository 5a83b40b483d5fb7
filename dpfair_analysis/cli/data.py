"""``dpfair data``: list, fetch and describe data sets."""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import Parser, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="list, fetch and describe data sets")
    dsub = p.add_subparsers(dest="data_command", required=True, parser_class=Parser)
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
        print_json(table.to_dict("records"))
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
        print_json({"name": args.name, "rows": len(dataset), "features": dataset.n_features,
                     "groups": table.to_dict("records")})
        return
    print(f"{args.name}: {len(dataset)} rows, {dataset.n_features} features, "
          f"{dataset.n_groups} groups, {dataset.n_classes} classes")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
