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
    register_groups(psub)
    register_one_run(psub)


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


#: The methods ``privacy groups`` accounts per record (``experiments.group_privacy.GROUP_PRIVACY_METHODS``, kept
#: here as names so that a bad --method is refused before torch is imported; a test holds the two equal).
GROUP_METHODS = ("dpsgd", "dpsgdf", "fairdp")


def register_groups(psub: argparse._SubParsersAction) -> None:
    """``dpfair privacy groups``: each group's per-record ε_i beside its accuracy cost."""
    from dpfair_analysis.cli._common import add_data_flags, add_private_run_flags, figure_file, int_in, seed_value, \
        writable_file
    from dpfair_analysis.cli.compare import add_method_flags

    g = psub.add_parser("groups", help="who gets less privacy: each group's per-record ε_i beside its accuracy cost",
                        description="Train one private run of --method on the setting (as `dpfair compare` does, "
                                    "with the run cache) recording every training record's gradient norm, and "
                                    "print each group's per-record ε_i (mean, quantiles, max, share at the worst "
                                    "case) beside its test accuracy cost against SGD. ε_i is an ex-post estimate "
                                    "from the run's gradient norms, not a guarantee: the run's ε is.")
    add_data_flags(g)
    g.add_argument("--method", default="dpsgd", choices=GROUP_METHODS, help="the private method (default dpsgd)")
    g.add_argument("--model", default="logreg", choices=("logreg", "mlp", "cnn"), help="default logreg")
    add_method_flags(g)
    g.add_argument("--train-fraction", action="append", default=[], metavar="GROUP=FRACTION",
                   help="keep this fraction of a group's training rows (as `dpfair compare`); repeatable")
    g.add_argument("--no-equal-privacy", action="store_true",
                   help="let DPSGD-F/FairDP run all steps instead of stopping at DPSGD's epsilon")
    g.add_argument("--epochs", type=int_in(1, 100_000), default=20, help="passes over the data (default 20)")
    add_private_run_flags(g)
    g.add_argument("--test-split", default="random", choices=("random", "official"),
                   help="random (default) or official (as `dpfair compare`)")
    add_accounting_flags(g, accountants=("rdp",))
    g.add_argument("--seed", type=seed_value, default=0, help="split and run seed (default 0)")
    g.add_argument("--every", type=positive_int, default=None,
                   help="take every record's gradient norm every N steps (a pass over the data each; norms held "
                        "in between; 1 is exact and costs n/b steps of per-sample work per step). Default: no "
                        "passes but one -- each record's norm as the DP step computed it at its own batches, held "
                        "in between")
    g.add_argument("--resolution", type=int_in(1, 100_000), default=128,
                   help="sensitivity grid points K (default 128; each ε_i is rounded up by at most about one "
                        "grid step per step)")
    g.add_argument("--json", action="store_true", help="print JSON instead of the table")
    g.add_argument("--plot", type=figure_file, default=None, metavar="FILE.png",
                   help="write the figure (per-group ε_i beside per-group accuracy cost; its CSV beside it)")
    g.add_argument("--out", type=writable_file, default=None, metavar="FILE.csv", help="write the per-group table")
    g.add_argument("--quiet", action="store_true", help="no progress bars")
    g.add_argument("--no-cache", action="store_true", help="retrain even if this run is in the run cache")
    g.add_argument("--force", action="store_true", help="run even if the estimate is over a day")
    g.set_defaults(handler=_run_privacy_groups)


def _run_privacy_groups(args: argparse.Namespace) -> None:
    from dpfair_analysis.catalog import DATASETS
    from dpfair_analysis.cli._common import Outputs, check_distinct_outputs, check_workload, data_from_args, \
        estimated_training_seconds, run_cache_from_args, sampling_caveat, show_progress, train_fractions_from_args
    from dpfair_analysis.cli.compare import method_options_from_args

    check_distinct_outputs(args, {"plot": "--plot", "out": "--out"})
    method_options = method_options_from_args(args)
    fractions = train_fractions_from_args(args)
    dataset, data_options, preprocessing = data_from_args(args)
    rows = DATASETS[dataset].rows
    if rows is not None:
        if args.batch_size > rows:
            raise UsageError(f"--batch-size {args.batch_size} is more than the {rows:,} rows of {dataset}")
        check_workload(2 * estimated_training_seconds(args.model, rows=rows, batch_size=args.batch_size,
                                                      epochs=args.epochs, runs=2),
                       what=f"{args.method} and SGD x {args.epochs} epochs with the norms recorded",
                       flags="--epochs", force=args.force, quiet=args.quiet or args.json)
    accounting = accounting_from_args(args)
    cache = run_cache_from_args(args)

    from dpfair_analysis.experiments.compare import CompareConfig
    from dpfair_analysis.experiments.group_privacy import describe_group_privacy, group_privacy_frames, \
        group_privacy_run
    from dpfair_analysis.training.loop import TrainConfig

    config = CompareConfig(
        dataset=dataset, data_options=data_options, model=args.model, methods=("sgd", args.method),
        train_group_fraction=fractions, test_split=args.test_split, noise_multiplier=args.sigma,
        clip_bound=args.clip, l2=args.l2, method_options=method_options, equal_privacy=not args.no_equal_privacy,
        train=TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, sampling=args.sampling,
                          delta=args.delta, accounting=accounting, eval_every=args.eval_every),
        seeds=(args.seed,))
    result = group_privacy_run(config, args.method, seed=args.seed, every=args.every, resolution=args.resolution,
                               cache=cache, progress=show_progress(args))
    outputs = Outputs()
    table = result.table.reset_index()
    if args.out is not None:
        outputs.file("--out", args.out, lambda tmp: table.to_csv(tmp, index=False), what="table")
    if args.plot is not None:
        outputs.file("--plot", args.plot, lambda tmp: _save_group_plot(result, group_privacy_frames, tmp,
                                                                       suffix=args.plot.suffix),
                     what="figure")
    if args.json:
        print_json({**result.to_json(), "cache": {"hits": cache.hits, "misses": cache.misses}})
        outputs.finish()
        return
    for line in preprocessing:
        print(line)
    print(f"{dataset}: {args.method}, {args.model}, b={args.batch_size}, {args.epochs} epochs, σ={args.sigma}, "
          f"C={args.clip}, seed {args.seed}: {result.steps} steps, run ε = {result.run_epsilon:.3f} at "
          f"δ={args.delta:g} ({accounting.describe()})")
    if sampling_caveat(args.sampling):
        print(sampling_caveat(args.sampling, what="the run ε and every ε_i below are"))
    recorded = "at each record's own batches" if result.every is None else f"every {result.every} steps"
    print(f"per-record ε_i (norms recorded {recorded}) beside the test accuracy cost vs SGD:")
    print(table.to_string(index=False, float_format="{:.4f}".format))
    for line in describe_group_privacy(result):
        print(f"- {line}")
    seconds = result.cpu_seconds
    print(f"CPU time when computed: the run in {seconds['run']:.1f} s, the norm recorder in {seconds['recorder']:.1f} "
          f"s, the accounting in {seconds['accounting']:.1f} s")
    if cache.summary():
        print(f"({cache.summary()}; --no-cache retrains)")
    for flag, path in (("--out", args.out), ("--plot", args.plot)):
        if path is not None and flag not in outputs.failed:
            print(f"{'table' if flag == '--out' else 'figure'} written to {path}")
    outputs.finish()


def _save_group_plot(result, frames, path, *, suffix: str) -> None:
    """The figure of ``result`` written to ``path`` (format from the target's ``suffix``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpfair_analysis.plotting import plot_group_privacy

    epsilons, table = frames([result])
    fig = plot_group_privacy(epsilons, table, title=f"{result.config.dataset}: who gets less privacy")
    fig.savefig(path, dpi=150, format=suffix.lstrip(".") or "png")
    plt.close(fig)


#: The trainers the one-run audit runs (``verify.audits.one_run.METHODS``: those with a per-record accountant, as
#: ``privacy groups``; a test holds the two equal).
ONE_RUN_METHODS = GROUP_METHODS


def register_one_run(psub: argparse._SubParsersAction) -> None:
    """``dpfair privacy one-run``: the per-group one-run audit (Steinke et al.'s epsilon, the f-DP mu) on Adult."""
    from dpfair_analysis.cli._common import int_in, positive_numbers, writable_file

    o = psub.add_parser("one-run", help="audit what each group's canaries got: the one-run audit per group on Adult",
                        description="Train DP-SGD (or DPSGD-F, FairDP) once on Adult by sex with canaries drawn "
                                    "from each group's held-out rows (gradient canaries, white box; input "
                                    "canaries, black box), each included with probability 1/2, and bound each "
                                    "group's epsilon from the guesses (Steinke, Nasr & Jagielski 2023) and the "
                                    "Gaussian-DP mu from the same guesses (Mahloujifar, Melis & Chaudhuri 2025), "
                                    "family-wise over the canary sets, beside the run's accounted epsilon. One run "
                                    "per --epsilons value and seed; about a minute each at 1000 canaries per group.",
                        epilog="exit status: 0 every set consistent with its run's epsilon; 1 a set's audited "
                               "epsilon exceeds the accounted one (a bug in the trainer or its accounting); 2 bad "
                               "input")
    o.add_argument("--epsilons", type=positive_numbers, default=[1.0, 2.0, 4.0],
                   help="comma-separated target epsilons at delta = 1e-5 (default 1,2,4): the noise multiplier is "
                        "calibrated to each")
    o.add_argument("--per-group", type=int_in(10, 100_000), default=1000,
                   help="canaries per group and family (default 1000; at most half a group's held-out rows)")
    o.add_argument("--seeds", type=int_in(1, 1000), default=1, help="seeds 0..N-1 (default 1)")
    o.add_argument("--method", default="dpsgd", choices=ONE_RUN_METHODS, help="the trainer (default dpsgd)")
    o.add_argument("--batch-size", type=positive_int, default=256,
                   help="b (default 256; larger: fewer steps at a larger q, a privacy curve closer to Gaussian)")
    o.add_argument("--json", action="store_true", help="print JSON instead of the lines")
    o.add_argument("--out", type=writable_file, default=None, metavar="FILE.json", help="also write the JSON")
    o.set_defaults(handler=_run_privacy_one_run)


def _run_privacy_one_run(args: argparse.Namespace) -> int:
    from dpfair_analysis.cli._common import Outputs, json_text
    from dpfair_analysis.verify.audits.one_run import adult_by_sex_grid

    def said(run: dict) -> None:
        if not args.json:
            print(f"target ε {run['target_epsilon']:g}, seed {run['seed']}: {run['method']}, {run['steps']} steps, "
                  f"q = {run['sampling_rate']:.5f}, σ = {run['noise_multiplier']:.4f}, run ε = {run['epsilon']:.3f} "
                  f"at δ = {run['delta']:g}; {run['canaries']} canaries", flush=True)
            print(run["summary"], flush=True)

    payload = adult_by_sex_grid(tuple(args.epsilons), seeds=args.seeds, per_group=args.per_group,
                                method=args.method, batch_size=args.batch_size, done=said)
    outputs = Outputs()
    if args.out is not None:
        outputs.file("--out", args.out, lambda tmp: tmp.write_text(json_text(payload) + "\n"), what="JSON")
    if args.json:
        print_json(payload)
    elif payload["refuted"]:
        print("BUG: a canary set's audited epsilon exceeds its run's accounted epsilon")
    outputs.finish()
    return 1 if payload["refuted"] else 0
