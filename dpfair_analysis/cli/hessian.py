"""``dpfair hessian``: per-group Hessian traces Tr(H_a) (paper 001, Thm 1 Eq. (3), Thm 4).

Parses, calls :func:`dpfair_analysis.experiments.fairness_lens.hessian_traces_at` (where the
model is evaluated, ``--at``, is documented there) and prints.
"""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import UsageError, check_dataset_options, device, int_in, positive_float, \
    positive_int, print_json, seed_value
from dpfair_analysis.catalog import DATASETS

MODELS = ("logreg", "mlp")
METHODS = ("closed", "exact", "ggn", "hutchinson", "hutchpp")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hessian", help="per-group Hessian traces Tr(H_a) (paper 001)",
                       description="Per-group trace of the Hessian of each group's mean cross-entropy, Tr(H_a), "
                                   "for logistic regression at its regularised ERM minimiser or an MLP after a "
                                   "short non-private SGD run (paper 001, Theorem 1 Eq. (3) and Theorem 4): "
                                   "closed form, exact (Hessian-vector products), GGN, Hutchinson or Hutch++.")
    p.add_argument("--data", required=True, choices=list(DATASETS), metavar="NAME",
                   help="data set name (see `dpfair data list`)")
    p.add_argument("--group-by", default=None, help="group attribute, if the data set has several")
    p.add_argument("--model", choices=MODELS, default="logreg")
    p.add_argument("--method", choices=METHODS, default=None,
                   help="default: closed for logreg, ggn for mlp")
    p.add_argument("--probes", type=int_in(1, 100_000), default=60, help="matvecs per group (hutchinson, hutchpp)")
    p.add_argument("--seed", type=seed_value, default=0)
    p.add_argument("--at", choices=("trained", "init"), default="trained")
    p.add_argument("--train-epochs", type=int_in(1, 10_000), default=2, help="mlp: non-private SGD epochs")
    p.add_argument("--l2", type=positive_float, default=1e-3, help="logreg: ERM regulariser lambda (default 1e-3, as excess-risk's output perturbation, whose minimiser these traces are taken at; compare and diagnose train with --l2 0.01)")
    p.add_argument("--hidden", type=positive_int, default=32, help="mlp: hidden units (one layer)")
    p.add_argument("--device", type=device, default="cpu",
                   help="where the model is trained and the traces computed: cpu (default), cuda or cuda:N")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> None:
    check_dataset_options(args.data, args.group_by)
    method = args.method or ("closed" if args.model == "logreg" else "ggn")
    if method == "closed" and args.model != "logreg":
        raise UsageError(f"--method closed is the logistic-regression closed form; for --model {args.model} "
                         f"use exact, ggn, hutchinson or hutchpp")
    if method in ("hutchpp",) and args.probes < 4:
        raise UsageError(f"argument --probes: hutchpp needs at least 4 matvecs, got {args.probes}")
    if method == "hutchinson" and args.probes < 2:
        raise UsageError(f"argument --probes: hutchinson needs at least 2 probes, got {args.probes}")
    from dpfair_analysis.data import load
    from dpfair_analysis.experiments.fairness_lens import hessian_traces_at

    data = load(args.data, **({} if args.group_by is None else {"by": args.group_by}))
    table, where = hessian_traces_at(data, model=args.model, at=args.at, method=method, probes=args.probes,
                                     seed=args.seed, l2=args.l2, hidden=args.hidden, train_epochs=args.train_epochs,
                                     device=args.device)
    rows = table.to_dict("records")
    if args.json:
        print_json({"settings": {"data": args.data, "group_by": args.group_by, "model": args.model, "method": method,
                                 "at": where, "probes": args.probes, "seed": args.seed, "l2": args.l2,
                                 "hidden": args.hidden, "train_epochs": args.train_epochs, "device": args.device},
                    "rows": rows})
        return
    print(f"{args.data}: Tr(H_a) of each group's mean cross-entropy, model {args.model} at {where}, "
          f"method {method}")
    for r in rows:
        err = f" ± {r['stderr']:.4g}" if method in ("hutchinson", "hutchpp") else ""
        print(f"  {r['group']:>20}  n={r['n']:>6}  trace={r['trace']:.6g}{err}")
