"""``dpfair pfld-table``: paper 003 Table 2 for one data set by stratified k-fold CV.

Human output: per constraint and method, the measured mean (sd) of test accuracy and
fairness violation beside the paper's Table 2 numbers. ``--json``: one JSON list of rows
{method, constraint, fold, accuracy, violation, epsilon}.

``--tune``: the reproduction protocol (:func:`dpfair_analysis.experiments.pfld_tuned.tuned_table2`): every method
tuned on validation rows carved from each training fold with the same budget (16 configurations each),
the chosen configuration refitted and tested on the test fold, printed beside the paper and beside the
printed configuration, with each cell's three-valued verdict; ``--json`` then adds ``protocol`` (budgets,
selection score, validation share, tolerance, how the selection is accounted), ``tuned_rows`` (the chosen
configuration per fold) and ``summary`` (one row per constraint and method with the verdict).

``--records PATH``: every run is served from a committed run records file and recorded in it the moment it
finishes (:class:`~dpfair_analysis.experiments.cache.RunRecords`), so the table is built from that file alone on a
machine whose run cache is empty; ``notebooks/record_runs.py --study pfld-tuned`` fills it run by run in the order
that answers first.
"""

from __future__ import annotations

import argparse

from dpfair_analysis import names
from dpfair_analysis.cli._common import (UsageError, add_sweep_flags, backend_from_args, comma_items, int_in,
                                         positive_float, print_json, show_progress)

#: Table 2's data sets -> the registered data set, its constraints and methods, and the methods --tune tunes: from
#: the static table (tests/test_names.py keeps it equal to experiments.pfld's), read without importing the experiment
_REGISTERED = names.PFLD_DATASETS
DATASETS = tuple(_REGISTERED)
CONSTRAINTS = names.CONSTRAINTS
METHODS = names.PFLD_METHODS


def _choices(allowed: tuple[str, ...], what: str):
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(v.lower() for v in comma_items(text, what))
        bad = [v for v in items if v not in allowed]
        if not items or bad:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what} from {','.join(allowed)}, got {text!r}")
        return tuple(dict.fromkeys(items))
    return parse


#: ``--folds``: 2 to 100 (more leave test folds of a few rows on the smaller data sets)
_folds = int_in(2, 100)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pfld-table", help="paper 003 Table 2: CLF, Z, A, M, PF-LD by k-fold CV",
                       description="Accuracy and fairness violation (mean and sd over stratified folds) of CLF, "
                                   "Z (Zafar), A (reductions), M (Mozannar, randomized response) and PF-LD, beside "
                                   "the paper's Table 2. Paper settings: epsilon 1, delta 1e-5, C_p 10, C_d 5.")
    p.add_argument("--data", required=True, choices=DATASETS, help="data set (income = adult with PF-LD's features)")
    p.add_argument("--group-by", default=None, help="grouping attribute passed to the loader (default: sex)")
    p.add_argument("--constraints", type=_choices(CONSTRAINTS, "constraints"), default=CONSTRAINTS,
                   help="comma-separated, from dp,eo,ap (default all)")
    p.add_argument("--methods", type=_choices(METHODS, "methods"), default=None,
                   help="comma-separated, from " + ",".join(METHODS) + " (default: the paper's, clf,z,a,m,pfld; "
                        "clf,a,m,pfld with --group-by age3 or age5, where the paper prints no Z)")
    p.add_argument("--folds", type=_folds, default=None, help="CV folds (default: 5, or 2 with --profile quick)")
    p.add_argument("--epsilon", type=positive_float, default=1.0, help="privacy budget of M and PF-LD")
    p.add_argument("--profile", default="full", choices=("quick", "full"),
                   help="full: all rows, 10 epochs; quick: 300 rows, 2 epochs (smoke test)")
    p.add_argument("--tune", action="store_true",
                   help="the reproduction protocol: tune every method (16 configurations each; quick: 2) on "
                        "validation rows of each training fold, refit the chosen one, verdict beside the paper "
                        "(methods clf, z, a, m, pfld only)")
    p.add_argument("--records", default=None, metavar="PATH",
                   help="a run records file (JSON, committed): each run is served from it, and recorded in it the "
                        "moment it finishes, so the table is built from the file alone on a machine without the run "
                        "cache (the recorder: notebooks/record_runs.py --study pfld-tuned)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the run cache")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true")
    add_sweep_flags(p)
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> None:
    import math

    from dpfair_analysis.cli._common import check_dataset_options, run_cache_from_args

    printed = names.PFLD_PAPER_METHODS.get(names.PFLD_GROUPED_TABLES.get(args.group_by, args.data),
                                           names.PFLD_TUNED_METHODS)
    if args.methods is None:
        args.methods = printed
    elif "z" in args.methods and "z" not in printed:
        raise UsageError(f"--methods: z (Zafar et al.'s covariance constraint) takes two groups; --group-by "
                         f"{args.group_by} makes more (the paper prints NA): drop z")
    if args.tune:
        untunable = [m for m in args.methods if m not in names.PFLD_TUNED_METHODS]
        if untunable:
            raise UsageError(f"--methods: --tune tunes {','.join(names.PFLD_TUNED_METHODS)} only, got "
                             f"{','.join(untunable)}")
    check_dataset_options(_REGISTERED[args.data], args.group_by)
    backend = backend_from_args(args)
    cache = run_cache_from_args(args)
    records = _records(args.records)
    if args.tune:
        return _run_tuned(args, cache, backend, records)

    from dpfair_analysis.experiments import pfld
    rows = _table(pfld.table2, args, cache, backend, records)
    if args.json:
        def clean(value):
            return None if isinstance(value, float) and math.isnan(value) else value
        print_json({"settings": {"data": args.data, "group_by": args.group_by, "constraints": list(args.constraints),
                                 "methods": list(args.methods), "folds": int(rows["fold"].max()) + 1,
                                 "epsilon": args.epsilon, "profile": args.profile},
                    "delta": pfld.PFLD_DELTA,
                    "rows": [{key: clean(row[key]) for key in pfld.ROW_KEYS} for row in rows.to_dict("records")]})
        return
    folds = int(rows["fold"].max()) + 1
    print(f"paper 003 Table 2, {pfld.table_name(args.data, args.group_by)}: {folds}-fold stratified CV, "
          f"profile {args.profile}, epsilon {args.epsilon:g} (M: local DP; PF-LD: delta 1e-5)")
    print(pfld.format_table(rows, args.data))
    _print_sources(cache, records)


def _records(path: str | None):
    """``--records``: the run records file (None without it); a damaged file is a usage error, left as it is."""
    if path is None:
        return None
    from dpfair_analysis.experiments.cache import RunRecords

    records = RunRecords(path)
    try:
        records.recorded("")  # reads the file: a damaged one is refused here, before any run
    except ValueError as error:
        raise UsageError(f"--records: {error}") from None
    return records


def _table(build, args: argparse.Namespace, cache, backend, records):
    """``build`` (:func:`~dpfair_analysis.experiments.pfld.table2` or ``tuned_table2``) with the command's
    arguments; a data set that is not installed is a usage error."""
    try:
        return build(args.data, constraints=args.constraints, methods=args.methods, folds=args.folds,
                     epsilon=args.epsilon, profile=args.profile, group_by=args.group_by, cache=cache,
                     progress=show_progress(args), backend=backend, records=records)
    except FileNotFoundError as error:
        raise UsageError(f"data set {args.data!r} is not available: {' '.join(str(error).split())}") from None


def _run_tuned(args: argparse.Namespace, cache, backend, records) -> None:
    """``--tune``: the tuned Table 2 with verdicts (human table or JSON)."""
    import math

    from dpfair_analysis.experiments import pfld, pfld_tuned
    from dpfair_analysis.experiments.tuning import SELECTION_PRIVACY
    from dpfair_analysis.verify import reproduction
    from dpfair_analysis.verify.reproduction import verdict_counts

    tuned = _table(pfld_tuned.tuned_table2, args, cache, backend, records)
    summary = reproduction.tuned_side_by_side(tuned)
    protocol = reproduction.tuning_protocol(tuned)
    if args.json:
        def clean(record: dict) -> dict:
            return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}

        print_json({"settings": {"data": args.data, "group_by": args.group_by, "table": tuned.dataset,
                                 "constraints": list(args.constraints), "methods": list(args.methods),
                                 "folds": int(tuned.chosen["fold"].max()) + 1, "epsilon": args.epsilon,
                                 "profile": args.profile},
                    "delta": pfld.PFLD_DELTA, "protocol": protocol,
                    "verdict_counts": verdict_counts(summary["verdict"]),
                    "summary": [clean(r) for r in summary.to_dict("records")],
                    "tuned_rows": [clean({k: r[k] for k in pfld_tuned.TUNED_ROW_KEYS if k in r})
                                   for r in tuned.chosen.to_dict("records")]})
        return
    print(f"paper 003 Table 2, {tuned.dataset}, under the reproduction protocol: "
          f"{int(tuned.chosen['fold'].max()) + 1}-fold CV, profile {args.profile}, epsilon {args.epsilon:g}")
    print(reproduction.format_tuned_table(summary))
    print("budgets: " + "; ".join(f"{m}: {g.budget()}" for m, g in tuned.grids.items()))
    print(f"selection: {protocol['selection_score']['fair']} (CLF: {protocol['selection_score']['clf']}), on "
          f"{tuned.validation_fraction:.0%} of each training fold; {SELECTION_PRIVACY}")
    print(f"tolerance: {protocol['tolerance']}")
    _print_sources(cache, records)


def _print_sources(cache, records) -> None:
    """Where the runs came from: the run records file's and the run cache's summaries."""
    if records is not None and records.summary():
        print(f"({records.summary()})")
    if cache.summary():
        print(f"({cache.summary()}; --no-cache recomputes)")
