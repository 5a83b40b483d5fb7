"""``dpfair compare``: per-group cost of privacy of SGD vs the private methods."""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

from dpfair_analysis.cli._common import (UsageError, accounting_from_args, add_accounting_flags, add_data_flags,
                                         add_sweep_flags, backend_from_args, check_workload, data_from_args, device,
                                         estimated_training_seconds, int_in, nonnegative_float, positive_float,
                                         positive_float_upto, print_json, seed_value, train_fractions_from_args,
                                         unit_open, writable_directory, writable_file)
from dpfair_analysis.data import DATASETS
from dpfair_analysis.io import write_atomically


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="per-group cost of privacy: SGD vs private methods (paper 000 Table 1)",
                       description="Train the non-private model and the private methods on the same split and "
                                   "seed; print per-group test accuracy and the cost of privacy.")
    add_data_flags(p)
    p.add_argument("--model", default="logreg", choices=("logreg", "mlp", "cnn"), help="default logreg")
    p.add_argument("--methods", default="sgd,dpsgd",
                   help="comma-separated: sgd, dpsgd, naive, dpsgdf, optq, fairdp, dpfedavg, dpsgd(C=2) "
                        "(default sgd,dpsgd; paper 002's comparison: sgd,dpsgd,dpfedavg,optq,dpsgdf,fairdp)")
    p.add_argument("--clips", default=None,
                   help="extra DPSGD runs with these uniform bounds, e.g. 1,2,3,4,5 (paper 000 Table 3)")
    p.add_argument("--count-noise-ratio", type=positive_float, default=10.0,
                   help="DPSGD-F/Naive count noise sigma_1 as a multiple of --sigma (default 10)")
    p.add_argument("--max-ratio", type=positive_float, default=10.0,
                   help="DPSGD-F guard: cap on (m^k/b^k)/(m/b), so C^k <= C0 (1 + cap) (default 10)")
    p.add_argument("--target-quantile", type=unit_open, default=0.5,
                   help="Opt-Q: the fraction of per-sample norms the bound leaves unclipped, in (0, 1) (default 0.5)")
    p.add_argument("--optq-clip-lr", type=positive_float, default=0.2,
                   help="Opt-Q: the bound's geometric learning rate eta_C (default 0.2, Andrew et al.)")
    p.add_argument("--optq-count-noise", type=positive_float, default=None,
                   help="Opt-Q: std sigma_b of the noise on the unclipped count (default batch size / 20, at least "
                        "--sigma); must exceed --sigma / 2")
    p.add_argument("--fairdp-clip-lr", type=positive_float, default=0.05,
                   help="FairDP: the bounds' geometric learning rate (default 0.05)")
    p.add_argument("--excess-cap", type=positive_float, default=5.0,
                   help="FairDP: cap R on one record's released excess ||g||/C - 1 (default 5)")
    p.add_argument("--clients", type=int_in(1, 10_000_000), default=1000,
                   help="DP-FedAvg: number of simulated clients K, at most the training rows (default 1000)")
    p.add_argument("--clients-per-round", type=int_in(1, 10_000_000), default=None,
                   help="DP-FedAvg: expected clients per round m, at most --clients (default round(b K / n): "
                        "the client sampling rate equals DPSGD's)")
    p.add_argument("--partition", default="iid", choices=("iid", "group"),
                   help="DP-FedAvg: clients IID or non-IID by group (McMahan et al.'s shards) (default iid)")
    p.add_argument("--local-epochs", type=int_in(1, 10_000), default=1, help="DP-FedAvg: local epochs (default 1)")
    p.add_argument("--local-batch", type=int_in(1, 1_000_000), default=16, help="DP-FedAvg: local batch size (default 16)")
    p.add_argument("--local-lr", type=positive_float, default=0.1, help="DP-FedAvg: local step size (default 0.1)")
    p.add_argument("--update-clip", type=positive_float, default=None,
                   help="DP-FedAvg: clip S of a client's update (default C x local lr x local steps)")
    p.add_argument("--fedavg-sigma", type=positive_float, default=None,
                   help="DP-FedAvg: noise multiplier (default --sigma); its epsilon is user-level")
    p.add_argument("--train-fraction", action="append", default=[], metavar="GROUP=FRACTION",
                   help="keep this fraction of a group's training rows, e.g. 8=0.08546 for paper 000's "
                        "unbalanced MNIST (500/5851); the test set is untouched; repeatable")
    p.add_argument("--no-equal-privacy", action="store_true",
                   help="let Naive/DPSGD-F run all steps instead of stopping at DPSGD's epsilon")
    p.add_argument("--epochs", type=int_in(1, 100_000), default=20, help="passes over the data (default 20)")
    p.add_argument("--batch-size", type=int_in(1, 1_000_000), default=256,
                   help="expected (Poisson) batch size (default 256)")
    p.add_argument("--sigma", type=positive_float_upto(1e6), default=1.0, help="noise multiplier (default 1)")
    p.add_argument("--clip", type=positive_float, default=0.5, help="clipping bound C (default 0.5)")
    p.add_argument("--delta", type=unit_open, default=1e-6, help="delta at which epsilon is reported (default 1e-6)")
    p.add_argument("--lr", type=positive_float, default=None, help="learning rate (default 1/sqrt(T))")
    p.add_argument("--l2", type=nonnegative_float, default=0.01, help="L2 weight (default 0.01)")
    p.add_argument("--sampling", default="poisson", choices=("poisson", "shuffle"),
                   help="poisson (default; what the accountant assumes) or shuffle")
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
    p.add_argument("--tune-lr", default="0.01,0.05,0.1",
                   help="with --tune: comma-separated learning rates (default 0.01,0.05,0.1; --lr, if given, "
                        "must be one of them)")
    p.add_argument("--tune-sampling", default="poisson,shuffle",
                   help="with --tune: comma-separated batch samplings from poisson,shuffle (default both)")
    p.add_argument("--validation-fraction", type=unit_open, default=0.1,
                   help="with --tune: share of the training rows held out for the choice, stratified by group "
                        "(default 0.1)")
    add_sweep_flags(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> None:
    from dpfair_analysis.experiments.cache import RunCache, default_cache_dir
    from dpfair_analysis.data.sources import DataWarning
    from dpfair_analysis.experiments.compare import CompareConfig, format_inequality, format_table, run_compare, \
        save_compare_figures, training_rows
    from dpfair_analysis.training.loop import TrainConfig

    if args.clients_per_round is not None and args.clients_per_round > args.clients:
        raise UsageError(f"--clients-per-round {args.clients_per_round} exceeds --clients {args.clients}")
    if args.optq_count_noise is not None and args.optq_count_noise <= args.sigma / 2:
        raise UsageError(f"--optq-count-noise must exceed --sigma / 2 = {args.sigma / 2:g} (Andrew et al. Thm 1), "
                         f"got {args.optq_count_noise:g}")
    dataset, data_options, preprocessing = data_from_args(args)
    methods = [m.strip() for m in re.split(r",(?![^(]*\))", args.methods) if m.strip()]
    if not methods:
        raise UsageError("--methods must name at least one method (sgd, dpsgd, naive, dpsgdf, dpsgd(C=2), ...)")
    clips = [c.strip() for c in (args.clips or "").split(",") if c.strip()]
    for clip in clips:
        try:
            positive_float(clip)
        except argparse.ArgumentTypeError as error:
            raise UsageError(f"argument --clips: {error}") from None
    methods += [f"dpsgd(C={c})" for c in clips]
    fractions = train_fractions_from_args(args)
    if args.test_split == "official" and not DATASETS[dataset].official_split:
        allowed = [name for name, entry in DATASETS.items() if entry.official_split]
        raise UsageError(f"--test-split official needs a data set with a published test split ({allowed}); "
                         f"{dataset!r} has none: use --test-split random")
    try:
        config = CompareConfig(
            dataset=dataset, data_options=data_options, model=args.model, methods=tuple(methods),
            train_group_fraction=fractions, test_split=args.test_split,
            noise_multiplier=args.sigma, clip_bound=args.clip, l2=args.l2, count_noise_ratio=args.count_noise_ratio,
            max_ratio=args.max_ratio, equal_privacy=not args.no_equal_privacy,
            target_quantile=args.target_quantile, optq_clip_lr=args.optq_clip_lr,
            optq_count_noise=args.optq_count_noise, fairdp_clip_lr=args.fairdp_clip_lr,
            fairdp_excess_cap=args.excess_cap, fedavg_clients=args.clients,
            fedavg_clients_per_round=args.clients_per_round, fedavg_partition=args.partition,
            fedavg_local_epochs=args.local_epochs, fedavg_local_batch=args.local_batch, fedavg_local_lr=args.local_lr,
            fedavg_update_clip=args.update_clip, fedavg_noise_multiplier=args.fedavg_sigma,
            train=TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, sampling=args.sampling,
                              delta=args.delta, accounting=accounting_from_args(args), device=args.device),
            seeds=tuple(range(args.seed, args.seed + args.seeds)))
    except ValueError as error:
        raise UsageError(f"--methods: {' '.join(str(error).split())}") from None
    rows = DATASETS[dataset].rows
    if rows is not None:
        if args.batch_size > rows:
            raise UsageError(f"--batch-size {args.batch_size} is more than the {rows:,} rows of {dataset}")
        check_workload(estimated_training_seconds(args.model, rows=rows, batch_size=args.batch_size,
                                                  epochs=args.epochs, runs=len(methods) * args.seeds),
                       what=f"{len(methods)} method(s) x {args.seeds} seed(s) x {args.epochs} epochs",
                       flags="--epochs/--seeds", force=args.force, quiet=args.quiet or args.json)
    if args.tune:
        grid = _tuning_grid(args)
        if "dpfedavg" in config.methods:
            raise UsageError("--tune runs the loop's methods only (sgd, dpsgd, naive, dpsgdf, optq, fairdp, "
                             "dpsgd(C=...)); drop dpfedavg from --methods")
        if args.seeds != 1:
            raise UsageError("--tune runs one seed (--seed); drop --seeds")
    backend = backend_from_args(args)
    if "dpfedavg" in config.methods:
        rows = training_rows(config)
        if args.clients > rows:
            raise UsageError(f"--clients {args.clients} exceeds the {rows} training rows (every client needs a row)")
    cache = RunCache(None if args.no_cache else default_cache_dir())
    if args.tune:
        return _run_tuned(args, config, grid, cache)
    with warnings.catch_warnings():  # the CSV's missing values were reported once, by data_from_args
        warnings.simplefilter("ignore", DataWarning)
        result = run_compare(config, progress=not args.quiet and not args.json, cache=cache, backend=backend)
    if args.out is not None:
        write_atomically(args.out, lambda tmp: result.histories.to_csv(tmp, index=False))
    figures = [] if args.plots is None else save_compare_figures(result, args.plots)
    if args.json:
        print_json({**result.to_json(), "cache": {"hits": cache.hits, "misses": cache.misses},
                    **({"preprocessing": preprocessing} if preprocessing else {})})
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
    for method, eps in result.epsilon.items():
        unit = " (user-level: one client = one neighbour)" if method == "dpfedavg" else ""
        print(f"ε({method}) = {eps:.3f} at δ={config.train.delta} ({config.train.accounting.describe()}){unit}")
    for run in result.runs:
        if run["method"] not in ("sgd",) and run["epsilon"] is not None and len(config.seeds) == 1:
            print(f"  {run['method']}: {run['steps']} steps, ε = {run['epsilon']:.3f}")
    constant = sorted({(r["method"], r["constant_prediction"]) for r in result.runs if r.get("constant_prediction")})
    for method, label in constant:
        print(f"note: {method} predicts {label!r} for every test row (a constant classifier): its group costs are "
              "each group's SGD accuracy above its share of that label, not a learned difference")
    if cache.summary():
        print(f"({cache.summary()}; --no-cache retrains)")
    if args.out is not None:
        print(f"history written to {args.out}")
    for path in figures:
        print(f"figure written to {path}")


def _tuning_grid(args: argparse.Namespace):
    """The --tune budget: --tune-lr x --tune-sampling, printed (--lr or the first rate, --sampling) first."""
    from dpfair_analysis.experiments.tuning import TuningGrid

    try:
        rates = tuple(dict.fromkeys(positive_float(v.strip()) for v in args.tune_lr.split(",") if v.strip()))
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"argument --tune-lr: {error}") from None
    samplings = tuple(dict.fromkeys(v.strip() for v in args.tune_sampling.split(",") if v.strip()))
    if not rates:
        raise UsageError("argument --tune-lr: expected comma-separated positive learning rates")
    if not samplings or any(v not in ("poisson", "shuffle") for v in samplings):
        raise UsageError(f"argument --tune-sampling: expected comma-separated values from poisson,shuffle, got "
                         f"{args.tune_sampling!r}")
    lr = args.lr if args.lr is not None else rates[0]
    if lr not in rates:
        raise UsageError(f"--lr {lr:g} must be one of --tune-lr {','.join(f'{r:g}' for r in rates)} (the printed "
                         "configuration is part of the budget)")
    if args.sampling not in samplings:
        raise UsageError(f"--sampling {args.sampling} must be one of --tune-sampling {','.join(samplings)}")
    return TuningGrid({"lr": rates, "sampling": samplings}, printed={"lr": lr, "sampling": args.sampling},
                      note="--tune-lr x --tune-sampling")


def _run_tuned(args: argparse.Namespace, config, grid, cache) -> None:
    """``--tune``: every method on every configuration, chosen on validation rows; printed vs tuned."""
    import math
    from dataclasses import replace

    from dpfair_analysis.experiments import tuning

    base = replace(config, seeds=(args.seed,))
    rows = tuning.recorded_tuning_runs(base, methods=config.methods, grid=grid, seeds=(args.seed,),
                                       fraction=args.validation_fraction, cache=cache,
                                       progress=not (args.quiet or args.json))
    groups = [g for g in dict.fromkeys(rows["group"]) if g != "all"]
    focus = ("2", "8") if {"2", "8"} <= set(groups) else tuple(groups[:2])
    selection = tuning.mnist_selection(rows, groups=("all", *groups))
    costs = tuning.mnist_costs(selection, groups=("all", *groups))
    effect = tuning.sampling_effect(rows, groups=("all", *focus)) if len(grid.values["sampling"]) > 1 else None
    claims = tuning.mnist_claims(rows, focus=focus) if len(focus) == 2 and "sgd" in config.methods else None
    protocol = {**grid.as_dict(), "validation": f"{args.validation_fraction:g} of the training rows, stratified by "
                                                "group, carved before any group cut; the test rows are never read "
                                                "for the choice",
                "selection_score": "overall validation accuracy (ties: the printed configuration)",
                "selection_privacy": tuning.SELECTION_PRIVACY, "seed": args.seed,
                "verdicts": list(tuning.VERDICTS), "claims_tau": tuning.EQUAL_COST_TAU}

    def records(frame) -> list[dict]:
        if frame is None:
            return []
        return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                for r in frame.to_dict("records")]

    if args.json:
        print_json({"dataset": config.dataset, "settings": config.settings(), "protocol": protocol,
                    "selection": records(selection), "costs": records(costs), "sampling_effect": records(effect),
                    "claims": records(claims),
                    "verdict_counts": tuning.verdict_counts(claims["verdict"]) if claims is not None else {},
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
