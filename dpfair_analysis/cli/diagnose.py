"""``dpfair diagnose``: which groups DP-SGD will hurt, by how much and why -- before training privately."""

from __future__ import annotations

import argparse
import json
import re
import warnings
from pathlib import Path

from dpfair_analysis.cli._common import (
    Outputs,
    UsageError,
    accounting_from_args,
    add_accounting_flags,
    add_data_flags,
    check_distinct_outputs,
    comma_items,
    data_from_args,
    int_in,
    nonnegative_float,
    png_file,
    positive_float,
    positive_float_upto,
    print_json,
    seed_value,
    train_fractions_from_args,
    unit_open,
    writable_file,
)


def _planned_methods() -> tuple[str, ...]:
    """The registry's private loop methods with a diagnosis view (``Method.diagnosis``): what ``--method`` plans."""
    from dpfair_analysis.training import methods

    registered = (methods.get(name) for name in methods.names())
    return tuple(m.name for m in registered if m.private and m.policy is not None and m.diagnosis is not None)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="predict which groups DP-SGD will hurt, by how much and why (no private "
                                        "training)",
                       description="Predict each group's cost of privacy (accuracy of the private model minus the "
                                   "non-private one) at the planned DP settings, with a 90% interval, a ranking, "
                                   "the reasons (clipping, noise, size, near the boundary) and what would help -- "
                                   "from the expected DP-SGD and SGD trajectories and the accumulated noise, at a "
                                   "fraction of one private run's cost. Check it with `dpfair compare` at the same "
                                   "flags.")
    add_data_flags(p)
    p.add_argument("--model", default="logreg",
                   help="logreg, mlp or cnn (images) (default logreg); or, with --trust-model-file, a whole model "
                        "saved with torch.save(model)")
    p.add_argument("--weights", default=None, metavar="FILE",
                   help="starting weights for --model logreg/mlp/cnn: a state dict saved with "
                        "torch.save(model.state_dict(), FILE), read weights-only (nothing in it can run)")
    p.add_argument("--trust-model-file", action="store_true",
                   help="let --model FILE be a pickled torch.nn.Module: loading one RUNS CODE stored in the file "
                        "(torch.load with weights_only=False), so give it only a file you made or trust; without "
                        "this flag such a file is refused")
    p.add_argument("--hidden", default="64,64", help="MLP hidden sizes (default 64,64)")
    p.add_argument("--l2", type=nonnegative_float, default=0.01, help="L2 weight (default 0.01)")
    p.add_argument("--method", default="dpsgd", choices=_planned_methods(),
                   help="the planned private method: a registered loop method with a diagnosis view "
                        "(default dpsgd)")
    noise = p.add_mutually_exclusive_group()
    noise.add_argument("--sigma", type=positive_float_upto(1e6), default=None, help="noise multiplier (default 1)")
    noise.add_argument("--epsilon", type=positive_float, default=None,
                       help="target epsilon at --delta (sigma is calibrated to it)")
    p.add_argument("--clip", type=positive_float, default=0.5, help="clipping bound C (default 0.5)")
    p.add_argument("--batch-size", type=int_in(1, 1_000_000), default=256,
                   help="expected (Poisson) batch size (default 256)")
    p.add_argument("--epochs", type=int_in(1, 100_000), default=20, help="passes over the data (default 20)")
    p.add_argument("--lr", type=positive_float, default=None, help="learning rate (default 1/sqrt(T))")
    p.add_argument("--delta", type=unit_open, default=1e-6, help="delta at which epsilon is reported (default 1e-6)")
    add_accounting_flags(p)
    p.add_argument("--train-fraction", action="append", default=[], metavar="GROUP=FRACTION",
                   help="keep this fraction of a group's training rows (as `dpfair compare`); repeatable")
    p.add_argument("--seed", type=seed_value, default=0, help="split and initialisation seed (as `dpfair compare`)")
    p.add_argument("--split-mode", choices=("expectation", "per-split"), default="expectation",
                   help="predict the expectation over random train/test splits (default: what `dpfair compare "
                        "--seeds` shows on average, from --splits splits) or the run on --seed's own split")
    p.add_argument("--splits", type=int_in(2, 50), default=None,
                   help="splits the expectation averages (seeds --seed, --seed + 1, ...; each costs one more "
                        "prediction; default 3)")
    p.add_argument("--draws", type=int_in(1, 100_000), default=200, help="noise draws per prediction (default 200)")
    p.add_argument("--rows", type=int_in(100, 10_000_000), default=4000,
                   help="training rows the expected trajectories use (a stratified subsample; default 4000, at "
                        "least 100)")
    p.add_argument("--no-recommendations", action="store_true", help="skip the predicted effect of mitigations")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="JSON calibration from the validation study (clip_scale, noise_scale, widen, datasets); "
                        "refused for a data set it was fitted on")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--report", type=writable_file, default=None, metavar="FILE.html",
                   help="write a self-contained HTML report (table, figure, explanation)")
    p.add_argument("--plot", type=png_file, default=None, metavar="FILE.png", help="write the figure")
    p.set_defaults(handler=run)


def _hidden_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(h) for h in comma_items(text, "positive integers"))
    except (ValueError, argparse.ArgumentTypeError):
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--hidden must be comma-separated positive integers, got {text!r}")
    return sizes


def _check_model_flags(args: argparse.Namespace) -> None:
    """--model names a model (or, with --trust-model-file, an existing file), --weights an existing file,
    --hidden parses: before any data is loaded."""
    from dpfair_analysis.catalog import MODEL_NAMES as MODELS

    _hidden_sizes(args.hidden)
    if args.model in MODELS:
        if args.trust_model_file:
            raise UsageError(f"--trust-model-file applies to --model FILE, not to the built-in --model {args.model}")
        if args.weights is not None and not Path(args.weights).is_file():
            raise UsageError(f"--weights {args.weights!r} is not a file")
        return
    if args.weights is not None:
        raise UsageError(f"--weights FILE goes with a built-in --model {'/'.join(MODELS)}, not with --model "
                         f"{args.model!r}")
    if not Path(args.model).is_file():
        raise UsageError(f"--model must be one of {list(MODELS)} or, with --trust-model-file, a file saved with "
                         f"torch.save(model), got {args.model!r}")
    if not args.trust_model_file:
        raise UsageError(f"--model {args.model!r} is a file: loading a pickled model runs code stored in it, so it "
                         "needs --trust-model-file; or save its weights (torch.save(model.state_dict(), FILE)) and "
                         "give --model logreg/mlp/cnn --weights FILE")


def _model(args: argparse.Namespace, train_data, seed: int):
    """The starting model: built-in (``--weights`` loaded weights-only) or, with ``--trust-model-file``, a
    pickled module; checked against the data's input shape and classes before any work."""
    import torch
    from torch import nn

    from dpfair_analysis.models import MODELS, build_model, check_model_fits, load_weights

    if args.model in MODELS:
        try:
            model = build_model(args.model, input_shape=tuple(train_data.X.shape[1:]),
                                n_classes=train_data.n_classes, seed=seed, hidden=_hidden_sizes(args.hidden),
                                l2=args.l2)
        except ValueError as error:
            raise UsageError(f"--model {args.model}: {error}") from None
        name = args.model
        if args.weights is not None:
            try:
                load_weights(model, args.weights)
            except ValueError as error:
                raise UsageError(f"--weights: {error}") from None
            name = f"{args.model} ({Path(args.weights).name})"
        return model, name
    path = Path(args.model)
    try:
        model = torch.load(path, map_location="cpu", weights_only=False)  # asked for by --trust-model-file
    except Exception as error:  # noqa: BLE001 -- any unreadable file is a usage error
        raise UsageError(f"--model {str(path)!r} could not be loaded with torch.load: {error}") from None
    if not isinstance(model, nn.Module):
        raise UsageError(f"--model {str(path)!r} holds a {type(model).__name__}, not a torch.nn.Module (save the "
                         f"model itself with torch.save(model, path), or its state_dict and use --weights)")
    try:
        check_model_fits(model, train_data.X[:2], n_classes=train_data.n_classes)
    except ValueError as error:
        raise UsageError(f"--model {str(path)!r}: {error}") from None
    if not hasattr(model, "l2"):
        model.l2 = args.l2
    return model, path.name


def _calibration_from_args(args: argparse.Namespace) -> dict:
    """``--calibration FILE``: the :class:`~dpfair_analysis.diagnose.Calibration` fields it holds ({} without it)."""
    if args.calibration is None:
        return {}
    try:
        raw = json.loads(Path(args.calibration).read_text())
        return {"clip_scale": float(raw["clip_scale"]), "noise_scale": float(raw["noise_scale"]),
                "widen": float(raw["widen"]), "datasets": tuple(raw.get("datasets", ()))}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"--calibration {args.calibration!r} is not a calibration JSON file "
                         f"(clip_scale, noise_scale, widen, datasets): {error}") from None


def run(args: argparse.Namespace) -> None:
    if args.splits is not None and args.split_mode != "expectation":
        raise UsageError(f"--splits {args.splits} is the number of splits the expectation averages: it needs "
                         f"--split-mode expectation, not {args.split_mode} (drop --splits)")
    _check_model_flags(args)
    check_distinct_outputs(args, {"report": "--report", "plot": "--plot"})
    fractions = train_fractions_from_args(args)
    calibration_values = _calibration_from_args(args)
    dataset, data_options, preprocessing = data_from_args(args)

    import matplotlib

    matplotlib.use("Agg")
    from dpfair_analysis import data as datasets
    from dpfair_analysis.data.dataset import comparison_split
    from dpfair_analysis.data.sources import MissingValuesWarning
    from dpfair_analysis.diagnose import (
        SPLITS,
        Calibration,
        DiagnosisOptions,
        PrivacyPlan,
        diagnose,
        diagnose_splits,
        format_diagnosis,
        report_html,
    )

    calibration = Calibration(**calibration_values)
    with warnings.catch_warnings():  # a CSV's missing values were reported once, by data_from_args
        warnings.simplefilter("ignore", MissingValuesWarning)
        full = datasets.load(dataset, **data_options)
    train_data, test_data = comparison_split(full, seed=args.seed, train_group_fraction=fractions)
    model, model_name = _model(args, train_data, args.seed)
    sigma = args.sigma if args.sigma is not None or args.epsilon is not None else 1.0
    plan = PrivacyPlan(noise_multiplier=sigma, target_epsilon=args.epsilon, clip_bound=args.clip,
                       batch_size=args.batch_size, epochs=args.epochs, lr=args.lr, delta=args.delta,
                       accounting=accounting_from_args(args), method=args.method)
    # each split is predicted with its own seed (--seed, --seed + 1, ...: diagnose_splits)
    options = DiagnosisOptions(rows=args.rows, draws=max(args.draws, 10), recommendations=not args.no_recommendations)
    name = dataset if dataset != "csv" else Path(data_options["path"]).name
    if dataset != "csv" and data_options.get("by"):
        name = f"{dataset} ({data_options['by']})"
    label = dataset if dataset != "csv" else name
    if args.split_mode == "expectation":
        def split_model(seed: int):
            return model if seed == args.seed else _model(args, train_data, seed)[0]

        diagnosis = diagnose_splits(full, split_model,
                                    plan, splits=args.splits or SPLITS, seed=args.seed, train_group_fraction=fractions,
                                    options=options, calibration=calibration, dataset=label, model_name=model_name)
    else:
        diagnosis = diagnose(train_data, test_data, model, plan, options=options, calibration=calibration,
                             dataset=label, model_name=model_name, split_seeds=(args.seed,))
    diagnosis.data_info = {"name": name, "rows": len(full), "n_train": len(train_data), "n_test": len(test_data),
                           "preprocessing": preprocessing}
    figure = None
    outputs = Outputs()  # a write that fails now keeps the result elsewhere and says so last (status 2)
    written = {}
    if args.report is not None or args.plot is not None:
        import matplotlib.pyplot as plt

        from dpfair_analysis.plotting import figure_png, plot_diagnosis

        fig = plot_diagnosis(diagnosis)
        figure = figure_png(fig)
        plt.close(fig)
        if args.plot is not None:
            written["figure"] = outputs.file("--plot", args.plot, lambda tmp: tmp.write_bytes(figure), what="figure")
    if args.report is not None:
        page = report_html(diagnosis, figure_png=figure, title=f"dpfair diagnose: {name}")
        written["report"] = outputs.file("--report", args.report,
                                         lambda tmp: tmp.write_text(page, encoding="utf-8"), what="report")
    kept = "the diagnosis itself is printed above"
    if args.json:
        print_json(diagnosis.to_json())
        outputs.finish(kept=kept)
        return
    for line in preprocessing:
        print(line)
    print(format_diagnosis(diagnosis))
    flags = _compare_flags(args)
    print(f"\nCheck it with real runs: dpfair compare {flags}")
    for what, path in written.items():
        if path is not None:
            print(f"{what} written to {path}")
    outputs.finish(kept=kept)


def _compare_flags(args: argparse.Namespace) -> str:
    """The `dpfair compare` flags that run what this diagnosis predicts."""
    parts = []
    if args.csv:
        parts += [f"--csv {args.csv}", f"--label {args.label}", f"--group {args.group}"]
        if args.drop:
            parts.append(f"--drop {args.drop}")
        if args.positive is not None:
            parts.append(f"--positive {args.positive!r}" if re.search(r"[\s<>|&;]", args.positive)
                         else f"--positive {args.positive}")
    else:
        parts.append(f"--data {args.data or 'adult'}")
        if args.group_by:
            parts.append(f"--group-by {args.group_by}")
    if args.model != "logreg":
        parts.append(f"--model {args.model}")
    if args.sigma is not None:
        parts.append(f"--sigma {args.sigma:g}")
    if args.epsilon is not None:
        parts.append("--sigma <the σ printed above>")
    for flag, value, default in (("--clip", args.clip, 0.5), ("--batch-size", args.batch_size, 256),
                                 ("--epochs", args.epochs, 20), ("--lr", args.lr, None), ("--l2", args.l2, 0.01),
                                 ("--seed", args.seed, 0)):
        if value != default:
            parts.append(f"{flag} {value:g}")
    if args.split_mode == "expectation":  # the expectation over splits is what several seeds show on average
        parts.append(f"--seeds {max(args.splits or 3, 5)}")
    for item in args.train_fraction:
        parts.append(f"--train-fraction {item}")
    if args.method != "dpsgd":
        parts.append(f"--methods sgd,{args.method}")
    return " ".join(parts)
