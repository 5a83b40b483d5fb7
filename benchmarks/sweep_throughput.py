#!/usr/bin/env python
"""Throughput of many small DP runs: run-steps per second of train(), of a minimal loop, and of seeds batched.

Research with the toolkit is mostly many small runs (a table's seeds, a sweep's grid). On Adult (sex), at
``dpfair compare``'s defaults (b = 256, sigma = 1, C = 0.5, r = 1/sqrt(T), L2 0.01), for the logistic
regression and the MLP (64, 64), this measures, interleaved round by round in one process, one torch thread:

* ``train``    -- :func:`dpfair_analysis.training.loop.train`, one run (DP-SGD);
* ``minimal``  -- a minimal hand-written DP-SGD loop with the same semantics (the same O(b) Poisson sampler,
  clipping, noise draws in the same order, L2 step, per-epoch evaluation by bincount and epsilon): the floor.
  Its final parameters are compared with train()'s on the same seed (``agreement``: they must agree to
  float32 rounding, else it would not be the same algorithm);
* ``batched``  -- K seeds in one pass (:func:`dpfair_analysis.training.batched.train_many`), run-steps/s;
* ``baseline`` -- with ``--baseline DIR``, train() of another checkout of the package (e.g. the commit
  before the speed work), run in a subprocess on the same settings.

and, with ``--commands``, the wall and CPU time of ``dpfair compare --seeds 16 --methods sgd,dpsgd,dpsgdf`` and of
the diagnosis study's quick profile, here and (with ``--baseline``) in the other checkout, interleaved (compare: new
then old; study: old then new), each in a fresh process run from its own checkout with an empty run cache.

Every in-process time is reported as wall seconds and as this process's CPU seconds (``time.process_time``; one
torch thread), so a busy machine shows as wall > CPU; subprocesses report their children's CPU (``getrusage``).

Usage (from the repository root)::

    .venv/bin/python benchmarks/sweep_throughput.py                  # ~3 minutes
    .venv/bin/python benchmarks/sweep_throughput.py --baseline /path/to/old/checkout --commands
    .venv/bin/python benchmarks/sweep_throughput.py --quick          # smoke test (synthetic data, seconds)
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "sweep_throughput.json"


def parse_args(argv=None):
    """The command line, checked (before any heavy import)."""
    p = ScriptParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--epochs", type=int, default=2, help="epochs per run (default 2; throughput is per step)")
    p.add_argument("--seeds", type=int, default=16, help="K, the seeds trained together (default 16)")
    p.add_argument("--models", default="logreg,mlp", help="comma-separated from logreg, mlp")
    p.add_argument("--baseline", type=Path, default=None, help="another checkout whose train() is measured too")
    p.add_argument("--commands", action="store_true",
                   help="also time `dpfair compare --seeds 16 --methods sgd,dpsgd,dpsgdf` and the diagnosis "
                        "study's quick profile (here and in --baseline)")
    p.add_argument("--study-setting", default=None, metavar="NAME",
                   help="with --commands, also time the diagnosis study's full-profile cells of this setting at "
                        "sigma = 1 (e.g. adult-sex: its defaults and noisy regimes, 5 seeds, full epochs); 'all': "
                        "the whole full-profile study (every sigma) over the settings the baseline has too")
    p.add_argument("--commands-only", action="store_true", help="time the commands only (no throughput rounds)")
    p.add_argument("--quick", action="store_true", help="smoke test: synthetic data, 1 round, 1 epoch, K = 2")
    args = p.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models or any(m not in ("logreg", "mlp") for m in models):
        p.error(f"--models must name logreg and/or mlp, got {args.models!r}")
    args.models = models
    if args.rounds < 1 or args.seeds < 2 or args.epochs < 1:
        p.error("--rounds and --epochs must be >= 1 and --seeds >= 2")
    if args.baseline is not None and not (args.baseline / "dpfair_analysis" / "__init__.py").is_file():
        p.error(f"--baseline {args.baseline} is not a checkout of dpfair_analysis")
    if (args.commands_only or args.study_setting) and not args.commands:
        p.error("--commands-only and --study-setting need --commands")
    if args.study_setting is not None:
        from dpfair_analysis.experiments.diagnosis_validation import SETTINGS

        if args.study_setting not in [s.name for s in SETTINGS] + ["all"]:
            p.error(f"--study-setting must be one of {[s.name for s in SETTINGS]}, got {args.study_setting!r}")
    return args


if __name__ == "__main__":
    parse_args()  # a bad command line is refused before the imports below (seconds)

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from dpfair_analysis.io import write_atomically

# ----------------------------------------------------------------- settings
#: The diagnosis study's settings in the commit before issue 38 (b1675e0): ``--study-setting all`` times these.
BASELINE_STUDY_SETTINGS = ("adult-sex", "adult-race", "compas-race", "german-age", "bank-age", "bank-age3", "bank-age5",
                           "dutch-sex", "mnist-unbalanced", "synthetic")


def settings(quick: bool, epochs: int) -> dict:
    return {"dataset": "synthetic" if quick else "adult", "batch_size": 16 if quick else 256, "sigma": 1.0,
            "clip": 0.5, "l2": 0.01, "epochs": 1 if quick else epochs, "delta": 1e-6}


def load(setting: dict, seed: int):
    from dpfair_analysis import data
    from dpfair_analysis.data.dataset import comparison_split

    full = data.load(setting["dataset"], **({"sizes": (120, 40), "dim": 6, "seed": 0}
                                            if setting["dataset"] == "synthetic" else {}))
    return comparison_split(full, seed=seed)


def model_for(name: str, train_data, seed: int, setting: dict):
    from dpfair_analysis.models import build_model

    return build_model(name, input_shape=tuple(train_data.X.shape[1:]), n_classes=train_data.n_classes, seed=seed,
                       hidden=(64, 64), l2=setting["l2"])


def config_for(setting: dict, seed: int):
    from dpfair_analysis.training.loop import TrainConfig

    return TrainConfig(epochs=setting["epochs"], batch_size=setting["batch_size"], delta=setting["delta"], seed=seed)


# ----------------------------------------------------------------- (b) train(), (d) batched
def time_train(name: str, setting: dict, seed: int) -> tuple[float, float, int, torch.nn.Module]:
    from dpfair_analysis.training.clipping import UniformClipping
    from dpfair_analysis.training.loop import train

    train_data, test_data = load(setting, seed)
    model = model_for(name, train_data, seed, setting)
    start, cpu = time.perf_counter(), time.process_time()
    result = train(model, train_data, UniformClipping(setting["clip"], setting["sigma"]), config_for(setting, seed),
                   test_data=test_data, progress=False)
    return time.perf_counter() - start, time.process_time() - cpu, len(result.steps), model


def time_batched(name: str, setting: dict, seeds: range) -> tuple[float, float, int]:
    from dpfair_analysis.training.batched import RunSpec, train_many
    from dpfair_analysis.training.clipping import UniformClipping

    specs = []
    for seed in seeds:
        train_data, test_data = load(setting, seed)
        specs.append(RunSpec(model_for(name, train_data, seed, setting), train_data,
                             UniformClipping(setting["clip"], setting["sigma"]), config_for(setting, seed), test_data))
    start, cpu = time.perf_counter(), time.process_time()
    results = train_many(specs, progress=False)
    return time.perf_counter() - start, time.process_time() - cpu, sum(len(r.steps) for r in results)


# ----------------------------------------------------------------- (c) the minimal loop
def minimal_loop(name: str, setting: dict, seed: int) -> tuple[float, float, int, torch.nn.Module]:
    """DP-SGD written out by hand with train()'s semantics (see the module docstring)."""
    from dpfair_analysis.fairness.metrics import per_group_accuracy
    from dpfair_analysis.privacy.accounting import dpsgd_epsilon
    from dpfair_analysis.training.loop import make_generators, poisson_batch, schedule

    train_data, test_data = load(setting, seed)
    model = model_for(name, train_data, seed, setting)
    start, cpu = time.perf_counter(), time.process_time()
    n, b = len(train_data), setting["batch_size"]
    steps, ends = schedule(n, config_for(setting, seed))
    lr, q, C, sigma, l2 = 1 / math.sqrt(steps), b / n, setting["clip"], setting["sigma"], setting["l2"]
    sampler, noise = make_generators(seed, 2)
    params = {k: p.detach() for k, p in model.named_parameters()}
    X, y = train_data.X, train_data.y
    row_norms = (X * X).sum(1) + 1.0

    def per_sample(index):
        if name == "logreg":  # g_i = (sigmoid(s_i) - y_i) [x_i; 1]
            x = X[index]
            delta = torch.sigmoid(x @ params["linear.weight"][0] + params["linear.bias"][0]) - y[index]
            norms = delta.abs() * row_norms[index].sqrt()
            return norms, lambda c: {"linear.weight": ((c * delta) @ x).unsqueeze(0),
                                     "linear.bias": (c * delta).sum().reshape(1)}

        def loss(p, xi, yi):
            return F.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))
        grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, X[index], y[index])
        norms = torch.cat([g.flatten(1) for g in grads.values()], 1).norm(dim=1)
        return norms, lambda c: {k: torch.einsum("n,n...->...", c, g) for k, g in grads.items()}

    history = []
    for t in range(1, steps + 1):
        index = poisson_batch(n, q, sampler)
        norms, weighted = per_sample(index)
        sums = weighted(torch.where(norms > C, C / norms, 1.0))
        for k, p in params.items():
            update = (sums[k] + sigma * C * torch.randn(p.shape, generator=noise)) / b
            if not k.endswith("bias"):
                update = update + l2 * p
            p.sub_(lr * update)
        if t in ends:
            for data in (train_data, test_data):
                with torch.no_grad():
                    logits = model(data.X)
                correct = logits.argmax(1) == data.y
                history.append((F.cross_entropy(logits, data.y).item(),
                                per_group_accuracy(correct, data.group, n_groups=data.n_groups).tolist()))
            history.append(dpsgd_epsilon(n=n, batch_size=b, noise_multiplier=sigma, delta=setting["delta"], steps=t))
    return time.perf_counter() - start, time.process_time() - cpu, steps, model


def agreement(a: torch.nn.Module, b: torch.nn.Module) -> float:
    """max |a - b| / max |a| over the parameters (same seed, same algorithm: float32 rounding)."""
    diffs = [float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters())]
    scale = max(float(p.detach().abs().max()) for p in a.parameters())
    return max(diffs) / scale


# ----------------------------------------------------------------- (a) another checkout, in a subprocess
_CHILD = """
import json, sys, time, torch
torch.set_num_threads(1)
sys.path.insert(0, {root!r})
from dpfair_analysis import data
from dpfair_analysis.data.dataset import comparison_split
from dpfair_analysis.models import build_model
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import TrainConfig, train
s = {setting!r}
full = data.load(s["dataset"], **({{"sizes": (120, 40), "dim": 6, "seed": 0}} if s["dataset"] == "synthetic" else {{}}))
tr, te = comparison_split(full, seed={seed})
m = build_model({name!r}, input_shape=tuple(tr.X.shape[1:]), n_classes=tr.n_classes, seed={seed}, hidden=(64, 64),
                l2=s["l2"])
start, cpu = time.perf_counter(), time.process_time()
r = train(m, tr, UniformClipping(s["clip"], s["sigma"]), TrainConfig(epochs=s["epochs"], batch_size=s["batch_size"],
          delta=s["delta"], seed={seed}), test_data=te, progress=False)
print(json.dumps({{"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu, "steps": len(r.steps),
                  "package": __import__("dpfair_analysis").__file__}}))
"""


def time_baseline(root: Path, name: str, setting: dict, seed: int) -> tuple[float, float, int]:
    code = _CHILD.format(root=str(root), setting=setting, seed=seed, name=name)
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         timeout=3600, cwd=root)
    payload = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(payload["package"]).resolve().parent.parent != root:
        raise RuntimeError(f"the baseline child imported {payload['package']}, not the package of {root}")
    return payload["seconds"], payload["cpu"], payload["steps"]


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(argv: list[str], root: Path) -> dict:
    """Wall and CPU seconds of ``python argv`` run from (so importing the package of) ``root``, an empty run cache.

    The working directory matters: ``python -c``/``-m`` put it first on ``sys.path``, ahead of ``PYTHONPATH``.
    """
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "DPFAIR_CACHE": cache, "PYTHONPATH": str(root)}
        start, cpu = time.perf_counter(), children_cpu()
        done = subprocess.run([sys.executable, *argv], check=False, capture_output=True, text=True, env=env,
                              timeout=6 * 3600, cwd=root)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
        return {"wall_seconds": time.perf_counter() - start, "cpu_seconds": children_cpu() - cpu}


def rate_ratios(rows: list[dict], name: str, seeds: int, key: str) -> dict:
    """Ratios of the variants' rates (``key``: per wall or per CPU second) for one model: the minimal loop and
    the K seeds batched over the new train(), the new train() and the minimal loop over the baseline's train()."""
    rate = {row["variant"]: row[key] for row in rows if row["model"] == name}
    return {"minimal_over_train": rate["minimal"] / rate["train"],
            "batched_over_train": rate[f"batched_{seeds}"] / rate["train"],
            **({"train_over_baseline": rate["train"] / rate["baseline"],
                "minimal_over_baseline": rate["minimal"] / rate["baseline"]} if "baseline" in rate else {})}


# ----------------------------------------------------------------- main
def main(argv=None) -> int:
    args = parse_args(argv)
    models = args.models
    if args.commands_only:
        models = []
    torch.set_num_threads(1)
    setting = settings(args.quick, args.epochs)
    rounds, seeds = (1, 2) if args.quick else (args.rounds, args.seeds)
    samples: dict[tuple[str, str], list[float]] = {}
    cpu_samples: dict[tuple[str, str], list[float]] = {}

    def record(name: str, variant: str, seconds: float, cpu: float, steps: int) -> None:
        samples.setdefault((name, variant), []).append(steps / seconds)
        cpu_samples.setdefault((name, variant), []).append(steps / cpu)

    agreements = {}
    warm = settings(True, 1)   # first calls pay one-time costs (imports, allocator, vmap tracing): not measured
    for name in models:
        time_train(name, warm, seed=0), minimal_loop(name, warm, seed=0), time_batched(name, warm, range(2))
    for r in range(rounds):
        for name in models:
            seconds, cpu, steps, trained = time_train(name, setting, seed=r)
            record(name, "train", seconds, cpu, steps)
            seconds, cpu, steps, minimal = minimal_loop(name, setting, seed=r)
            record(name, "minimal", seconds, cpu, steps)
            agreements[name] = max(agreements.get(name, 0.0), agreement(trained, minimal))
            seconds, cpu, steps = time_batched(name, setting, range(100 * r, 100 * r + seeds))
            record(name, f"batched_{seeds}", seconds, cpu, steps)
            if args.baseline is not None:
                seconds, cpu, steps = time_baseline(args.baseline.resolve(), name, setting, seed=r)
                record(name, "baseline", seconds, cpu, steps)
            print(f"round {r + 1}/{rounds} {name}: " + ", ".join(
                f"{v} {samples[(name, v)][-1]:.0f}" for (m, v) in samples if m == name), flush=True)
    rows = [{"model": m, "variant": v, "run_steps_per_second": statistics.median(x),
             "run_steps_per_cpu_second": statistics.median(cpu_samples[(m, v)]), "rounds": len(x),
             "run_steps_per_second_each_round": x} for (m, v), x in samples.items()]
    ratios = {name: {**rate_ratios(rows, name, seeds, "run_steps_per_second"),
                     "cpu": rate_ratios(rows, name, seeds, "run_steps_per_cpu_second"),
                     "minimal_vs_train_parameter_agreement": agreements[name]} for name in models}
    commands = {}
    if args.commands and not args.quick:
        here = Path(__file__).resolve().parents[1]
        compare = ["-m", "dpfair_analysis.cli", "compare", "--seeds", "16", "--methods", "sgd,dpsgd,dpsgdf",
                   "--no-cache", "--quiet", "--json"]
        study = ["-c", ("from dpfair_analysis.experiments import diagnosis_validation as v; "
                        "v.run_validation('quick', progress=False)")]
        old_study = ["-c", ("from dpfair_analysis.experiments import diagnose as v; "
                            "v.run_validation('quick', progress=False)")]
        old = None if args.baseline is None else args.baseline.resolve()
        # interleaved: compare new then old, the study old then new (a load that drifts hits both sides)
        plan = [("compare_16_seeds", compare, here), ("baseline_compare_16_seeds", compare, old),
                ("baseline_diagnosis_study_quick", old_study, old), ("diagnosis_study_quick", study, here)]
        if args.study_setting == "all":
            # the whole full profile over the settings both checkouts have (the baseline's ten)
            names = tuple(BASELINE_STUDY_SETTINGS)
            run = f"v.run_validation('full', settings=[s for s in v.SETTINGS if s.name in {names!r}], progress=False)"
            key = "diagnosis_study_full_common_settings"
        elif args.study_setting is not None:
            # the same cells, the same API in both (the module was renamed diagnose -> diagnosis_validation)
            cells = (f"v.cells('full', [s for s in v.SETTINGS if s.name == {args.study_setting!r}])")
            run = f"[v.run_cell(c, profile='full') for c in {cells} if c.sigma == 1.0]"
            key = f"diagnosis_study_full_{args.study_setting}_sigma_1"
        if args.study_setting is not None:
            plan += [(key, ["-c", f"from dpfair_analysis.experiments import diagnosis_validation as v; {run}"], here),
                     (f"baseline_{key}", ["-c", f"from dpfair_analysis.experiments import diagnose as v; {run}"],
                      old)]
        for key, command, root in plan:
            if root is not None:
                commands[key] = time_command(command, root)
                print(f"{key}: {commands[key]['wall_seconds']:.1f} s wall, {commands[key]['cpu_seconds']:.1f} s CPU",
                      flush=True)
    payload = {"settings": {**setting, "models": models, "rounds": rounds, "seeds_batched": seeds,
                            "baseline": None if args.baseline is None else str(args.baseline), "threads": 1,
                            "cpus": os.cpu_count(), "torch": torch.__version__,
                            "python": platform.python_version(), "quick": args.quick},
               "rows": rows, "ratios": ratios, "commands": commands}
    write_atomically(args.out, lambda tmp: tmp.write_text(json.dumps(payload, indent=1)))
    for name, r in ratios.items():
        print(f"{name}: " + ", ".join(f"{k} {v:.3g}" for k, v in r.items() if k != "cpu")
              + "; per CPU second: " + ", ".join(f"{k} {v:.3g}" for k, v in r["cpu"].items()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
