"""``dpfair hessian``: per-group Hessian traces Tr(H_a) (paper 001, Thm 1 Eq. (3), Thm 4).

Where the model is evaluated (``--at``):

* ``trained`` (default): logreg -- the regularised ERM minimiser
  (``privacy.output_perturbation.train_regularised_erm``, lambda = ``--l2``, default 1e-3,
  every parameter penalised; the point at which Theorem 1 expands the loss); mlp -- a
  short non-private SGD run (``training.loop.train`` with ``NonPrivate``, ``--train-epochs``
  epochs, default 2, batch 256, lr 0.1, Poisson sampling, seeded by ``--seed``; hidden
  layer ``--hidden``, default 32 ReLU units: the paper's one-hidden-layer network);
* ``init``: the seeded initialisation.

The traces are those of each group's mean cross-entropy (no penalty term), see
``theory.hessian.group_hessian_traces``.
"""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import UsageError, positive_float, positive_int, print_json

MODELS = ("logreg", "mlp")
METHODS = ("closed", "exact", "ggn", "hutchinson", "hutchpp")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hessian", help="per-group Hessian traces Tr(H_a) (paper 001)")
    p.add_argument("--data", required=True, help="data set name (see `dpfair data list`)")
    p.add_argument("--group-by", default=None, help="group attribute, if the data set has several")
    p.add_argument("--model", choices=MODELS, default="logreg")
    p.add_argument("--method", choices=METHODS, default=None,
                   help="default: closed for logreg, ggn for mlp")
    p.add_argument("--probes", type=positive_int, default=60, help="matvecs per group (hutchinson, hutchpp)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--at", choices=("trained", "init"), default="trained")
    p.add_argument("--train-epochs", type=positive_int, default=2, help="mlp: non-private SGD epochs")
    p.add_argument("--l2", type=positive_float, default=1e-3, help="logreg: ERM regulariser lambda")
    p.add_argument("--hidden", type=positive_int, default=32, help="mlp: hidden units (one layer)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> None:
    if args.seed < 0:
        raise UsageError(f"argument --seed: expected an integer >= 0, got {args.seed}")
    method = args.method or ("closed" if args.model == "logreg" else "ggn")
    if method == "closed" and args.model != "logreg":
        raise UsageError(f"--method closed is the logistic-regression closed form; for --model {args.model} "
                         f"use exact, ggn, hutchinson or hutchpp")
    if method in ("hutchpp",) and args.probes < 4:
        raise UsageError(f"argument --probes: hutchpp needs at least 4 matvecs, got {args.probes}")
    if method == "hutchinson" and args.probes < 2:
        raise UsageError(f"argument --probes: hutchinson needs at least 2 probes, got {args.probes}")
    import torch

    from dpfair_analysis.data import load
    from dpfair_analysis.models import build_model
    from dpfair_analysis.theory.hessian import group_hessian_traces

    data = load(args.data, **({} if args.group_by is None else {"by": args.group_by}))
    model = build_model(args.model, input_shape=data.X.shape[1:], n_classes=data.n_classes, seed=args.seed,
                        hidden=(args.hidden,))
    params = None
    where = "init"
    if args.at == "trained" and args.model == "logreg":
        from dpfair_analysis.privacy.output_perturbation import train_regularised_erm

        params = train_regularised_erm(model, data, l2=args.l2).params
        where = f"regularised ERM minimiser, l2={args.l2}"
    elif args.at == "trained":
        from dpfair_analysis.training.clipping import NonPrivate
        from dpfair_analysis.training.loop import TrainConfig, train

        batch = min(256, len(data))
        train(model, data, NonPrivate(), TrainConfig(epochs=args.train_epochs, batch_size=batch, lr=0.1,
                                                     seed=args.seed), progress=False)
        where = f"non-private SGD ({args.train_epochs} epoch(s), batch {batch}, lr 0.1)"
    if params is None:
        params = {k: v.detach().to(torch.float64) for k, v in model.named_parameters()}
    table = group_hessian_traces(model, data, method=method, params=params, probes=args.probes,
                                 generator=args.seed)
    rows = [{"group": str(r.group), "n": int(r.n), "trace": float(r.trace), "stderr": float(r.stderr),
             "method": method} for r in table.itertuples()]
    if args.json:
        print_json(rows)
        return
    print(f"{args.data}: Tr(H_a) of each group's mean cross-entropy, model {args.model} at {where}, "
          f"method {method}")
    for r in rows:
        err = f" ± {r['stderr']:.4g}" if method in ("hutchinson", "hutchpp") else ""
        print(f"  {r['group']:>20}  n={r['n']:>6}  trace={r['trace']:.6g}{err}")
