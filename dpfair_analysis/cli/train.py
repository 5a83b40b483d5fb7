"""``dpfair train``: F-LD / PF-LD fair training (paper 003) on one data set.

Prints one line per epoch (accuracy, fairness violation, epsilon spent) and a final
line; ``--json`` prints one JSON object {method, constraint, accuracy, violation,
epsilon, ...} instead.
"""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import accounting_from_args, add_accounting_flags, check_workload, comma_items, \
    device, estimated_training_seconds, int_in, positive_float, positive_float_upto, print_json, seed_value, \
    show_progress, unit_open
from dpfair_analysis.names import CONSTRAINTS, LAGRANGIAN_METHODS, PFLD_DATASETS

#: Paper 003's data sets (the static table of names, which tests/test_names.py keeps equal to experiments.pfld's)
#: and the synthetic groups
DATASETS = (*PFLD_DATASETS, "synthetic")


def _missing_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    return value


def _hidden(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(v) for v in comma_items(text, "positive integers"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return sizes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="F-LD / PF-LD fair training (paper 003)",
                       description="Lagrangian-dual fair training, non-private (fld) or private with respect "
                                   "to the sensitive attribute (pfld). Paper settings by default: epsilon 1, "
                                   "delta 1e-5, C_p 10, C_d 5, ReLU MLP with two hidden layers.")
    p.add_argument("--data", default="adult", choices=DATASETS,
                   help="data set (groups by sex; adult means income: Adult with PF-LD's preprocessing); "
                        "default adult")
    p.add_argument("--method", default="pfld", choices=LAGRANGIAN_METHODS)
    p.add_argument("--constraint", default="dp", choices=CONSTRAINTS,
                   help="demographic parity, equalized odds or accuracy parity")
    p.add_argument("--epsilon", type=positive_float, default=1.0, help="target epsilon (pfld)")
    p.add_argument("--delta", type=unit_open, default=1e-5)
    p.add_argument("--cp", type=positive_float, default=10.0, help="primal clipping bound C_p")
    p.add_argument("--cd", type=positive_float, default=5.0, help="dual clipping bound C_d")
    p.add_argument("--sigma", type=positive_float_upto(1e6), default=None,
                   help="fix the primal noise multiplier instead of calibrating it to --epsilon")
    p.add_argument("--epochs", type=int_in(1, 100_000), default=10, help="epochs (default 10)")
    p.add_argument("--batch-size", type=int_in(1, 1_000_000), default=256, help="Poisson batch size (default 256)")
    p.add_argument("--lr", type=positive_float, default=0.05, help="primal learning rate alpha")
    p.add_argument("--dual-lr", type=positive_float, default=1.0, help="dual step size s")
    p.add_argument("--lambda-max", type=positive_float, default=2.0)
    p.add_argument("--hidden", type=_hidden, default=(64, 64), help="hidden layer sizes (default 64,64)")
    p.add_argument("--missing-rate", type=_missing_rate, default=0.0,
                   help="fraction of training rows that do not report their group (paper Sec. 7: r = 1 - this)")
    add_accounting_flags(p, accountant="pld", accountants=("pld", "rdp"), conversion=False)
    p.add_argument("--paper-exact", action="store_true",
                   help="the paper's sensitivities and bookkeeping (refuted; no privacy guarantee)")
    p.add_argument("--test-fraction", type=unit_open, default=0.2)
    p.add_argument("--seed", type=seed_value, default=0)
    p.add_argument("--device", type=device, default="cpu",
                   help="where to train: cpu (default) or cuda / cuda:N when torch sees CUDA")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--force", action="store_true", help="run even if the estimate is over a day")
    p.set_defaults(handler=_run_train)


def _run_train(args: argparse.Namespace) -> None:
    import warnings

    from dpfair_analysis.catalog import DATASETS as REGISTRY

    rows = REGISTRY[PFLD_DATASETS.get(args.data, args.data)].rows
    if rows is not None:  # before torch is imported: from the catalog and the static table of names
        check_workload(estimated_training_seconds("mlp", rows=rows, batch_size=args.batch_size, epochs=args.epochs),
                       what=f"{args.epochs} epochs", flags="--epochs", force=args.force,
                       quiet=args.json or args.quiet)

    from dpfair_analysis import data as data_module
    from dpfair_analysis.experiments.pfld import run_pfld
    from dpfair_analysis.privacy.sensitivity import PrivacyNotEstablishedWarning
    from dpfair_analysis.training.lagrangian import LagrangianConfig
    config = LagrangianConfig(method=args.method, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                              dual_lr=args.dual_lr, lambda_max=args.lambda_max, epsilon=args.epsilon,
                              delta=args.delta, clip_primal=args.cp, clip_dual=args.cd,
                              noise_multiplier=args.sigma, missing_rate=args.missing_rate,
                              paper_exact=args.paper_exact, seed=args.seed,
                              accounting=accounting_from_args(args, neighboring="replace_one",
                                                              value_discretization_interval=1e-3),
                              device=args.device)
    dataset = data_module.load(PFLD_DATASETS.get(args.data, args.data))
    train, test = dataset.split(args.test_fraction, seed=args.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyNotEstablishedWarning)
        result = run_pfld(train, args.constraint, config, test=test, hidden=args.hidden, progress=show_progress(args))
    summary = result.final("test")
    summary.update(data=args.data, n_train=len(train), n_test=len(test),
                   settings={"method": args.method, "constraint": args.constraint, "epsilon": args.epsilon,
                             "delta": args.delta, "clip_primal": args.cp, "clip_dual": args.cd, "sigma": args.sigma,
                             "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                             "dual_lr": args.dual_lr, "lambda_max": args.lambda_max, "hidden": list(args.hidden),
                             "missing_rate": args.missing_rate, "paper_exact": args.paper_exact,
                             "accounting": config.effective_accounting.as_dict(), "test_fraction": args.test_fraction,
                             "seed": args.seed})
    if args.json:
        print_json(summary)
        return
    for w in caught:
        print(f"warning: {w.message}")
    table = result.per_epoch()
    if args.method != "fld":  # the train columns are exact statistics of the private data
        print("(train acc and viol: computed on the private training data without noise, for your eyes -- not "
              "covered by ε; the test columns use the held-out split)")
    for _, row in table.iterrows():
        eps = row.get("epsilon", float("nan"))
        eps_text = "" if args.method == "fld" else f"  ε={eps:.3f}"
        print(f"epoch {int(row['epoch']):3d}  train acc {row['train_accuracy']:.4f} viol {row['train_violation']:.4f}"
              f"  test acc {row['test_accuracy']:.4f} viol {row['test_violation']:.4f}{eps_text}")
    eps_text = "" if summary["epsilon"] is None else (
        f", ε = {summary['epsilon']:.4f} at δ = {args.delta:g} ({summary['accountant']}"
        f"{'' if summary['privacy_established'] else '; NOT established'}), σ_p = {summary['noise_multipliers']['primal']:.3f}")
    print(f"{summary['method']} {args.constraint} on {args.data}: test accuracy {summary['accuracy']:.4f}, "
          f"violation {summary['violation']:.4f}{eps_text}")
