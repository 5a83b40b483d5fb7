"""``dpfair compare``: per-group cost of privacy of SGD vs the private methods."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from dpfair_analysis.cli._common import (UsageError, accounting_from_args, add_accounting_flags, add_data_flags,
                                         add_private_run_flags, add_sweep_flags, backend_from_args, check_files_in,
                                         check_workload, comma_items, data_from_args, device,
                                         estimated_training_seconds, int_in,
                                         Outputs, positive_float, print_json, run_cache_from_args, sampling_caveat,
                                         seed_value, show_progress, train_fractions_from_args, unit_open,
                                         writable_directory, writable_file)
from dpfair_analysis.catalog import DATASETS
from dpfair_analysis.errors import ArgumentError
from dpfair_analysis.training import methods


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="per-group cost of privacy: SGD vs private methods (paper 000 Table 1)",
                       description="Train the non-private model and the private methods on the same split and "
                                   "seed; print per-group test accuracy and the cost of privacy.")
    add_data_flags(p)
    p.add_argument("--model", default="logreg", choices=("logreg", "mlp", "cnn"), help="default logreg")
    p.add_argument("--methods", default="sgd,dpsgd",
                   help=f"comma-separated, of: {', '.join(methods.names())}, dpsgd(C=2) (default sgd,dpsgd; "
                        "paper 002's comparison: sgd,dpsgd,dpfedavg,optq,dpsgdf,fairdp)")
    p.add_argument("--clips", default=None,
                   help="extra DPSGD runs with these uniform bounds, e.g. 1,2,3,4,5 (paper 000 Table 3)")
    add_method_flags(p)
    p.add_argument("--train-fraction", action="append", default=[], metavar="GROUP=FRACTION",
                   help="keep this fraction of a group's training rows, e.g. 8=0.08546 for paper 000's "
                        "unbalanced MNIST (500/5851); the test set is untouched; repeatable")
    p.add_argument("--no-equal-privacy", action="store_true",
                   help="let Naive/DPSGD-F run all steps instead of stopping at DPSGD's epsilon")
    p.add_argument("--epochs", type=int_in(1, 100_000), default=20, help="passes over the data (default 20)")
    add_private_run_flags(p)
    p.add_argument("--test-split", default="random", choices=("random", "official"),
                   help="random (default: a seeded split of 20%%, stratified by group) or official (the data "
                        "set's published test set, e.g. mnist-full's 10,000 images; --train-fraction then cuts "
                        "the training set only)")
    add_accounting_flags(p)
    p.add_argument("--device", type=device, default="cpu",
                   help="where to train: cpu (default) or cuda / cuda:N when torch sees CUDA")
    p.add_argument("--seeds", type=int_in(1, 1000), default=1, help="number of seeds (mean ± sd); default 1")
    p.add_argument("--seed", type=seed_value, default=0, help="first seed (default 0)")
    p.add_argument("--out", type=writable_file, default=None, help="CSV file for the per-epoch history")
    p.add_argument("--plots", type=writable_directory, default=None,
                   help="directory for per-group figures (created if missing)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--no-cache", action="store_true",
                   help="retrain even if this exact run is in the result cache ($DPFAIR_CACHE)")
    p.add_argument("--force", action="store_true", help="run even if the estimate is over a day")
    p.add_argument("--tune", action="store_true",
                   help="the reproduction protocol: train every method at each --tune-lr x --tune-sampling "
                        "without --validation-fraction of the training rows, choose each method's configuration "
                        "by its overall validation accuracy, report the printed (--lr, --sampling) and the chosen "
                        "configuration's test accuracy, costs and the papers' claims with three-valued verdicts "
                        "(one seed, --seed)")
    p.add_argument("--tune-lr", type=_rates, default=None,
                   help="with --tune: comma-separated learning rates (default 0.01,0.05,0.1; --lr, if given, "
                        "must be one of them)")
    p.add_argument("--tune-sampling", type=_samplings, default=None,
                   help="with --tune: comma-separated batch samplings from poisson,shuffle (default both)")
    p.add_argument("--validation-fraction", type=unit_open, default=None,
                   help="with --tune: share of the training rows held out for the choice, stratified by group "
                        "(default 0.1)")
    add_sweep_flags(p)
    p.set_defaults(handler=run)


#: --tune's grid and validation share when not given (the flags default to None, so that one given without --tune
#: is refused rather than ignored)
TUNE_DEFAULTS = {"tune_lr": (0.01, 0.05, 0.1), "tune_sampling": ("poisson", "shuffle"), "validation_fraction": 0.1}
SAMPLINGS = ("poisson", "shuffle")


def _rates(text: str) -> tuple[float, ...]:
    """``--tune-lr``: comma-separated positive learning rates (argparse type: refused while parsing)."""
    try:
        return tuple(dict.fromkeys(positive_float(v) for v in comma_items(text, "learning rates")))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive learning rates with no empty item, "
                                         f"got {text!r}") from None


def _samplings(text: str) -> tuple[str, ...]:
    """``--tune-sampling``: comma-separated samplings from poisson,shuffle (argparse type)."""
    values = tuple(dict.fromkeys(comma_items(text, "samplings from poisson,shuffle")))
    if any(v not in SAMPLINGS for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated values from {','.join(SAMPLINGS)}, got {text!r}")
    return values


def add_method_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per option the registered methods declare (:func:`~dpfair_analysis.training.methods.option_flags`);
    each defaults to None, which keeps the method's own default."""
    for flag in methods.option_flags():
        parser.add_argument(flag.flag, type=flag.type, default=None, choices=flag.choices, help=flag.help)


def method_options_from_args(args: argparse.Namespace) -> dict:
    """Each method's options from its flags (a bad combination is one line naming the flag)."""
    return methods.options_from_flags({flag.flag: getattr(args, flag.dest) for flag in methods.option_flags()})


def run(args: argparse.Namespace) -> None:
    method_options = method_options_from_args(args)
    try:
        methods = comma_items(args.methods, "methods (sgd, dpsgd, naive, dpsgdf, dpsgd(C=2), ...)")
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"--methods must name at least one method: {error}") from None
    _check_method_names(methods, clip=args.clip)
    try:
        clips = [] if args.clips is None else comma_items(args.clips, "positive numbers")
        for clip in clips:
            positive_float(clip)
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"argument --clips: {error}") from None
    methods += [f"dpsgd(C={c})" for c in clips]
    _check_tune_flags(args, methods)
    fractions = train_fractions_from_args(args)
    dataset, data_options, preprocessing = data_from_args(args)
    if args.test_split == "official" and not DATASETS[dataset].official_split:
        allowed = [name for name, entry in DATASETS.items() if entry.official_split]
        raise UsageError(f"--test-split official needs a data set with a published test split ({allowed}); "
                         f"{dataset!r} has none: use --test-split random")
    rows = DATASETS[dataset].rows
    if rows is not None:
        if args.batch_size > rows:
            raise UsageError(f"--batch-size {args.batch_size} is more than the {rows:,} rows of {dataset}")
        check_workload(estimated_training_seconds(args.model, rows=rows, batch_size=args.batch_size,
                                                  epochs=args.epochs, runs=len(methods) * args.seeds),
                       what=f"{len(methods)} method(s) x {args.seeds} seed(s) x {args.epochs} epochs",
                       flags="--epochs/--seeds", force=args.force, quiet=args.quiet or args.json)
    backend = backend_from_args(args)
    accounting = accounting_from_args(args)
    cache = run_cache_from_args(args)

    from dpfair_analysis.data.sources import MissingValuesWarning
    from dpfair_analysis.experiments.compare import COMPARE_FIGURE_FILES, CompareConfig, batched_note, \
        format_clip_parts, format_inequality, format_table, run_compare, save_compare_figures
    from dpfair_analysis.training.loop import TrainConfig

    if args.plots is not None:  # before the work: a file planted in the directory, or --out among its files
        check_files_in("--plots", args.plots, COMPARE_FIGURE_FILES, others={"--out": args.out})

    try:
        config = CompareConfig(
            dataset=dataset, data_options=data_options, model=args.model, methods=tuple(methods),
            train_group_fraction=fractions, test_split=args.test_split,
            noise_multiplier=args.sigma, clip_bound=args.clip, l2=args.l2, method_options=method_options,
            equal_privacy=not args.no_equal_privacy,
            train=TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, sampling=args.sampling,
                              delta=args.delta, accounting=accounting, device=args.device,
                              eval_every=args.eval_every),
            seeds=tuple(range(args.seed, args.seed + args.seeds)))
    except ArgumentError:
        raise
    except ValueError as error:
        raise UsageError(f"--methods: {' '.join(str(error).split())}") from None
    if args.tune:  # the reproduction protocol (experiments.tuning); its flags were checked by _check_tune_flags
        return _run_tuned(args, config, _tuning_grid(args), cache)
    note = batched_note(config)
    if note and not args.quiet:
        print(f"dpfair: note: {note}", file=sys.stderr)
    with warnings.catch_warnings():  # the CSV's missing values were reported once, by data_from_args
        warnings.simplefilter("ignore", MissingValuesWarning)
        result = run_compare(config, progress=show_progress(args), cache=cache, backend=backend)
    outputs = Outputs()  # a write that fails now keeps the result elsewhere and says so last (status 2)
    history = None if args.out is None else outputs.file(
        "--out", args.out, lambda tmp: result.histories.to_csv(tmp, index=False), what="history")
    figures = [] if args.plots is None else outputs.directory(
        "--plots", args.plots, lambda directory: save_compare_figures(result, directory), what="figures")
    kept = (f"the runs are in the run cache {cache.directory}: the same command writes them again without training"
            if cache.directory is not None and cache.writable else None)
    if args.json:
        print_json({**result.to_json(), "cache": {"hits": cache.hits, "misses": cache.misses},
                    **({"preprocessing": preprocessing} if preprocessing else {})})
        outputs.finish(kept=kept)
        return
    for line in preprocessing:
        print(line)
    name = config.dataset if config.dataset != "csv" else Path(data_options["path"]).name
    print(f"{name}: {config.model}, b={config.train.batch_size}, {config.train.epochs} epochs, "
          f"σ={config.noise_multiplier}, C={config.clip_bound}, δ={config.train.delta}, "
          f"seeds {list(config.seeds)}, sampling={config.train.sampling}")
    print(format_table(result))
    if result.inequality_per_seed is not None and not result.inequality_per_seed.empty:
        print()
        print(format_inequality(result))
    if format_clip_parts(result):
        print()
        print(format_clip_parts(result))
    for method, eps in result.epsilon.items():
        unit = " (user-level: one client = one neighbour)" if method == "dpfedavg" else ""
        print(f"ε({method}) = {eps:.3f} at δ={config.train.delta} ({config.train.accounting.describe()}){unit}")
    for run in result.runs:
        if run["method"] not in ("sgd",) and run["epsilon"] is not None and len(config.seeds) == 1:
            print(f"  {run['method']}: {run['steps']} steps, ε = {run['epsilon']:.3f}")
    if result.epsilon and sampling_caveat(config.train.sampling):
        print(sampling_caveat(config.train.sampling))
    constant = sorted({(r["method"], r["constant_prediction"]) for r in result.runs if r.get("constant_prediction")})
    for method, label in constant:
        print(f"note: {method} predicts {label!r} for every test row (a constant classifier): its group costs are "
              "each group's SGD accuracy above its share of that label, not a learned difference")
    if cache.summary():
        print(f"({cache.summary()}; --no-cache retrains)")
    if history is not None:
        print(f"history written to {history if '--out' in outputs.failed else args.out}")
    for path in figures:
        print(f"figure written to {path}")
    outputs.finish(kept=kept)


def _check_method_names(methods: list[str], *, clip: float) -> None:
    """Every --methods item names a registered method (or ``dpsgd(C=<positive bound>)``): read from the registry,
    which imports nothing heavy, so an unknown name is refused before torch is imported."""
    import math

    from dpfair_analysis.training.methods import parse_method

    for method in methods:
        try:
            _, bound = parse_method(method, default_clip=clip)
        except ValueError as error:
            raise UsageError(f"--methods: {' '.join(str(error).split())}") from None
        if not (math.isfinite(bound) and bound > 0):
            raise UsageError(f"--methods: {method!r}: the clipping bound C must be a positive finite number")


def _check_tune_flags(args: argparse.Namespace, methods: list[str]) -> None:
    """The --tune flags, right after parsing: without --tune they are refused (they would be ignored); with it,
    the printed (--lr, --sampling) must lie in the grid, DP-FedAvg and --seeds are refused. The defaults of the
    grid are filled in here."""
    given = [flag for flag, dest in (("--tune-lr", "tune_lr"), ("--tune-sampling", "tune_sampling"),
                                     ("--validation-fraction", "validation_fraction"))
             if getattr(args, dest) is not None]
    if not args.tune:
        if given:
            raise UsageError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} only with --tune (the "
                             "reproduction protocol); add --tune or drop "
                             f"{'it' if len(given) == 1 else 'them'}")
        return
    for dest, default in TUNE_DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
    rates, samplings = args.tune_lr, args.tune_sampling
    lr = args.lr if args.lr is not None else rates[0]
    if lr not in rates:
        raise UsageError(f"--lr {lr:g} must be one of --tune-lr {','.join(f'{r:g}' for r in rates)} (the printed "
                         "configuration is part of the budget)")
    if args.sampling not in samplings:
        raise UsageError(f"--sampling {args.sampling} must be one of --tune-sampling {','.join(samplings)}")
    if any(m.split("(")[0].strip() == "dpfedavg" for m in methods):
        raise UsageError("--tune runs the loop's methods only (sgd, dpsgd, naive, dpsgdf, optq, fairdp, "
                         "dpsgd(C=...)); drop dpfedavg from --methods")
    if args.seeds != 1:
        raise UsageError("--tune runs one seed (--seed); drop --seeds")
    for flag, value in (("--out", args.out), ("--plots", args.plots)):
        if value is not None:
            raise UsageError(f"{flag} is not written with --tune (the protocol prints its selection table; --json "
                             f"gives its rows); drop {flag}")


def _tuning_grid(args: argparse.Namespace):
    """The --tune budget: --tune-lr x --tune-sampling (checked by :func:`_check_tune_flags`), printed (--lr or the
    first rate, --sampling) first."""
    from dpfair_analysis.experiments.tuning import TuningGrid

    rates, samplings = args.tune_lr, args.tune_sampling
    lr = args.lr if args.lr is not None else rates[0]
    return TuningGrid({"lr": rates, "sampling": samplings}, printed={"lr": lr, "sampling": args.sampling},
                      note="--tune-lr x --tune-sampling")


def _run_tuned(args: argparse.Namespace, config, grid, cache) -> None:
    """``--tune``: every method on every configuration, chosen on validation rows; printed vs tuned."""
    import math
    from dataclasses import replace

    from dpfair_analysis.experiments import tuning
    from dpfair_analysis.verify import reproduction

    base = replace(config, seeds=(args.seed,))
    rows = tuning.recorded_tuning_runs(base, methods=config.methods, grid=grid, seeds=(args.seed,),
                                       fraction=args.validation_fraction, cache=cache,
                                       progress=show_progress(args))
    groups = [g for g in dict.fromkeys(rows["group"]) if g != "all"]
    focus = ("2", "8") if {"2", "8"} <= set(groups) else tuple(groups[:2])
    selection = tuning.printed_and_tuned(rows, groups=("all", *groups))
    costs = tuning.costs_of_privacy(selection, groups=("all", *groups))
    effect = tuning.sampling_effect(rows, groups=("all", *focus)) if len(grid.values["sampling"]) > 1 else None
    claims = reproduction.mnist_claims(rows, focus=focus) if len(focus) == 2 and "sgd" in config.methods else None
    protocol = {**grid.as_dict(), "validation": f"{args.validation_fraction:g} of the training rows, stratified by "
                                                "group, carved before any group cut; the test rows are never read "
                                                "for the choice",
                "selection_score": "overall validation accuracy (ties: the printed configuration)",
                "selection_privacy": tuning.SELECTION_PRIVACY, "seed": args.seed,
                "verdicts": list(reproduction.VERDICTS), "claims_tau": reproduction.EQUAL_COST_TAU}

    def records(frame) -> list[dict]:
        if frame is None:
            return []
        return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                for r in frame.to_dict("records")]

    if args.json:
        print_json({"dataset": config.dataset, "settings": config.settings(), "protocol": protocol,
                    "selection": records(selection), "costs": records(costs), "sampling_effect": records(effect),
                    "claims": records(claims),
                    "verdict_counts": reproduction.verdict_counts(claims["verdict"]) if claims is not None else {},
                    "cache": {"hits": cache.hits, "misses": cache.misses}})
        return
    print(f"{config.dataset}: the reproduction protocol, {grid.budget()}")
    print(f"choice: {protocol['selection_score']} on {protocol['validation']}; {tuning.SELECTION_PRIVACY}")
    shown = ["method", "which", "configuration", "val_all", "all", *focus, "epsilon", "sampling_matches_accounting"]
    print(selection[[c for c in shown if c in selection.columns]].to_string(index=False, float_format="{:.4f}".format))
    if claims is not None and len(claims):
        print()
        print(claims[["claim", "holds_printed", "holds_tuned", "verdict"]].to_string(index=False))
    if cache.summary():
        print(f"({cache.summary()}; --no-cache retrains)")
