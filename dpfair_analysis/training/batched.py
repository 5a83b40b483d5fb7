"""K independent runs of the DP-SGD loop trained together: seeds (and small grids) in one batched pass.

Research with the toolkit is mostly many small runs -- a table's seeds, a sweep's grid. For a small model
the time of one step is per-operation overhead, not arithmetic, so K runs that take the same number of
steps are trained here as one: their parameters are stacked (K, ...), each step gathers every run's own
Poisson batch into one padded (K, m) block, computes all per-sample norms and clipped sums with batched
algebra, and updates all K parameter sets at once. Everything that makes a run *that* run stays its own:
its data split, its generators (:func:`~.loop.make_generators` of its seed: its batches and every noise
draw, in the serial order), its clipping policy and its decisions (:meth:`ClippingPolicy.decide` on its
own batch's norms), its noise, its privacy ledger, its per-epoch evaluation and history. (Policies that decide every step
alike -- DP-SGD's uniform bound, plain SGD -- are applied to all runs in one operation; the others decide
run by run on their own batches.) So each run's
:class:`~.loop.TrainingResult` is what :func:`~.loop.train` gives for it alone, to floating-point
rounding (tests/training/test_batched.py compares them run by run).

What can be batched (:func:`batchable` says why not otherwise): models of one architecture whose
per-sample norms and clipped sums the batched engine computes -- the toolkit's logistic regression (closed
form) and MLPs (one batched forward and backward: the book-keeping of :mod:`dpfair_analysis.fast_gradients`)
-- trained with the cross-entropy objective, on the CPU, without callbacks, with the same number of steps and
epochs. Anything else is trained one run at a time by the caller (``experiments.sweep`` does, and says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F
from dp_accounting import dp_event
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from tqdm import tqdm

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.errors import TrainingDiverged
from dpfair_analysis.gradients import clip_factors
from dpfair_analysis.models import MLP, LogisticRegression
from dpfair_analysis.privacy.accounting import PrivacyLedger
from dpfair_analysis.training.clipping import ClippingPolicy, NonPrivate, StepDecision, UniformClipping, fresh_policy
from dpfair_analysis.training.loop import ClipParts, TrainConfig, TrainingResult, _check_labels_fit, all_finite, \
    batch_indices, batch_rows, clip_parts_inputs, epsilon_row, evaluate_groups, evaluation_splits, flat_sum, \
    make_generators, schedule, step_event


@dataclass(frozen=True)
class RunSpec:
    """One run of :func:`train_many`: what :func:`~.loop.train` would be called with."""

    model: nn.Module
    train_data: GroupedDataset
    policy: ClippingPolicy
    config: TrainConfig
    test_data: GroupedDataset | None = None


def batchable(runs: Sequence[RunSpec]) -> str | None:
    """Why ``runs`` cannot be trained together (one sentence), or ``None`` if they can."""
    if not runs:
        return "there are no runs"
    first = runs[0]
    if len({type(r.model) for r in runs}) != 1 or type(first.model) not in (LogisticRegression, MLP):
        return "only the toolkit's logistic regression and MLP are batched (the CNN's per-step work is arithmetic)"
    shapes = {tuple((name, tuple(p.shape)) for name, p in r.model.named_parameters()) for r in runs}
    if len(shapes) != 1:
        return "the runs' models differ in shape"
    if len({str(r.model) for r in runs}) != 1:
        return "the runs' models differ in architecture"
    if any(r.config.device != "cpu" for r in runs):
        return "batched runs train on the CPU"
    if len({(len(r.train_data), r.config.batch_size, r.config.epochs, r.config.max_steps, r.config.sampling)
            for r in runs}) != 1:
        return "the runs take different numbers of steps (rows, batch size, epochs, max_steps or sampling differ)"
    if len({(r.train_data.n_groups, r.train_data.n_features, r.train_data.n_classes) for r in runs}) != 1:
        return "the runs' data differ in groups, features or classes"
    return None


def train_many(runs: Sequence[RunSpec], *, progress: bool = True) -> list[TrainingResult]:
    """Train every run of ``runs`` (each model in place) together; each run's result as :func:`~.loop.train`
    gives it alone (module docstring). ``ValueError`` naming why if they cannot be batched (:func:`batchable`).

    Parameters
    ----------
    runs : sequence of RunSpec
        The runs: a model (at its initial weights), its training and test data, its policy and config.
    progress : bool
        One tqdm bar over the steps.
    """
    reason = batchable(runs)
    if reason is not None:
        raise ValueError(f"runs cannot be trained together: {reason}")
    for r in runs:
        _check_labels_fit(r.model, r.train_data, "train_data")
        if r.test_data is not None:
            _check_labels_fit(r.model, r.test_data, "test_data")
        if r.config.batch_size > len(r.train_data):
            raise ValueError(f"batch_size={r.config.batch_size} exceeds the {len(r.train_data)} training rows")
    K, n = len(runs), len(runs[0].train_data)
    config0 = runs[0].config
    total_steps, epoch_ends = schedule(n, config0)
    policies = [fresh_policy(r.policy) for r in runs]
    lrs = [r.config.learning_rate(n) for r in runs]
    q = config0.batch_size / n
    generators = [make_generators(r.config.seed, 2) for r in runs]
    samplers = [batch_indices(n, r.config.batch_size, g[0], sampling=r.config.sampling)
                for r, g in zip(runs, generators)]
    ledgers = [PrivacyLedger() for _ in runs]
    stacked = _stack_parameters([r.model for r in runs])
    X = torch.cat([r.train_data.X.flatten(1) for r in runs]).to(next(iter(stacked.values())).dtype)  # (K n, d)
    Y = torch.cat([r.train_data.y for r in runs])
    G = torch.cat([r.train_data.group for r in runs])
    row_norms = torch.einsum("nd,nd->n", X, X)   # ||x_i||^2, once: every step's per-sample norms need it
    stats = _RunStats(K, runs[0].train_data.n_groups)
    n_groups = runs[0].train_data.n_groups
    parts = [ClipParts(n_groups, lr=lrs[k], expected_batch_size=r.config.batch_size) if policies[k].private else None
             for k, r in enumerate(runs)]
    splits = [evaluation_splits(r.train_data, r.test_data, evaluate_train=r.config.evaluate_train,
                                final_epoch=max(epoch_ends.values()), eval_every=r.config.eval_every) for r in runs]
    engine = _engine(runs[0].model)
    fixed = _fixed_decisions(policies)
    events = _step_events(policies, fixed, q)
    lr_tensor = torch.tensor(lrs, dtype=torch.float64)
    private = torch.tensor([p.private for p in policies])
    planned = torch.tensor([float(r.config.batch_size) for r in runs], dtype=torch.float64)
    offsets = torch.arange(K).unsqueeze(1) * n    # run k's rows start at k n in X, Y, G

    def _epsilon_of(k: int) -> float | None:
        return ledgers[k].epsilon(runs[k].config.delta, accounting=runs[k].config.accounting) \
            if policies[k].private else None

    histories = [[*evaluate_groups(r.model, splits[k](0), epoch=0), epsilon_row(0, _epsilon_of(k))]
                 for k, r in enumerate(runs)]
    for rows in histories:
        for row in rows:
            row["step"] = 0
    records: list[list[dict]] = [[] for _ in runs]

    for t in tqdm(range(1, total_steps + 1), desc=f"{K} runs", disable=not progress, leave=False):
        indices = [next(s) for s in samplers]
        sizes = torch.tensor([len(i) for i in indices])
        padded = pad_sequence(indices, batch_first=True) if int(sizes.max()) else torch.zeros(K, 1, dtype=torch.long)
        m = padded.shape[1]
        mask = torch.arange(m) < sizes.unsqueeze(1)
        rows = (offsets + padded).flatten()
        groups = G.index_select(0, rows).view(K, m)
        norms, losses, weighted_sum = engine(runs[0].model, stacked, X.index_select(0, rows).view(K, m, -1),
                                             Y.index_select(0, rows).view(K, m),
                                             row_norms.index_select(0, rows).view(K, m))
        if fixed is not None:
            decisions, bounds = fixed, _fixed_bounds(fixed, norms.dtype)
            coefficients = torch.where(mask, clip_factors(norms, bounds), 0.0)
        else:
            decisions, bounds, coefficients = _decide_each(runs, policies, generators, norms, groups, sizes)
        stats.add(groups, losses, norms, norms > bounds, mask)
        totals = weighted_sum(coefficients)
        _measure_clip_parts(parts, weighted_sum, totals, norms, coefficients, groups, sizes, n_groups=n_groups)
        noise = _noise(totals, decisions, generators)   # each run's own generator, in the serial order
        denominators = torch.where(private, planned, sizes.clamp(min=1).to(torch.float64))
        _update(stacked, totals, noise, lrs=lr_tensor, denominators=denominators,
                l2=getattr(runs[0].model, "l2", 0.0))
        diverged = _first_diverged(stacked)
        if diverged is not None:
            raise TrainingDiverged(step=t, total_steps=total_steps, lr=lrs[diverged])
        for k, decision in enumerate(decisions):
            event = events[k] if events is not None else step_event(policies[k], decision, q)
            if event is not None:
                ledgers[k].record(event)
            records[k].append({"step": t, "batch_size": int(sizes[k]), "noise_std": decision.noise_std,
                               **decision.record})
        if t in epoch_ends:
            epoch = epoch_ends[t]
            sums = stats.take_totals()
            for k, r in enumerate(runs):
                rows_k = [*evaluate_groups(r.model, splits[k](epoch), epoch=epoch),
                          *batch_rows(sums[k], epoch, r.train_data),
                          *([] if parts[k] is None else parts[k].take_rows(epoch, r.train_data)),
                          epsilon_row(epoch, _epsilon_of(k))]
                for row in rows_k:
                    row["step"] = t
                histories[k] += rows_k
    return [_result(r, policies[k], lrs[k], ledgers[k], histories[k], records[k]) for k, r in enumerate(runs)]


def _measure_clip_parts(parts: Sequence[ClipParts | None], weighted_sum, totals: dict[str, torch.Tensor],
                        norms: torch.Tensor, coefficients: torch.Tensor, groups: torch.Tensor, sizes: torch.Tensor, *,
                        n_groups: int) -> None:
    """Each private run's clipping direction and magnitude errors on its own batch, at the steps the serial loop
    measures (:class:`~.loop.ClipParts`; every run's counter moves together): one batched weighted sum per group
    (``totals``, the step's clipped sums, are the clipped ones)."""
    due = [p is not None and p.due() for p in parts]
    if not any(due):
        return
    real = torch.arange(norms.shape[1]) < sizes.unsqueeze(1)
    by_group = [weighted_sum(((groups == k) & real).to(norms.dtype)) for k in range(n_groups)]
    for k, part in enumerate(parts):
        b_k = int(sizes[k])
        if due[k] and b_k:
            group_sums = torch.stack([flat_sum({name: t[k] for name, t in s.items()}) for s in by_group])
            part.add(*clip_parts_inputs(group_sums, flat_sum({name: t[k] for name, t in totals.items()}),
                                        norms[k, :b_k], coefficients[k, :b_k], groups[k, :b_k], n_groups=n_groups))


class _RunStats:
    """Per-run, per-group sums over an epoch's batches (the loop's ``_BatchStats`` for K runs): each step keeps
    its (K, m) tensors and the mask of real rows; one index_add per epoch sums them into (K, n_groups, 4)."""

    def __init__(self, runs: int, n_groups: int) -> None:
        self.runs, self.n_groups = runs, n_groups
        self.offsets = torch.arange(runs).unsqueeze(1) * n_groups
        self.parts: list[tuple[torch.Tensor, ...]] = []

    def add(self, groups: torch.Tensor, losses: torch.Tensor, norms: torch.Tensor, clipped: torch.Tensor,
            mask: torch.Tensor) -> None:
        cells = self.offsets + groups          # (run, group) as one index
        self.parts.append((cells.flatten(), losses.detach().flatten(), norms.detach().flatten(), clipped.flatten(),
                           mask.flatten()))

    def take_totals(self) -> torch.Tensor:
        """(K, n_groups, 4): count, loss, norm and clipped summed per run and group since the last take."""
        totals = torch.zeros(self.runs * self.n_groups, 4, dtype=torch.float64)
        if self.parts:
            cells, losses, norms, clipped, mask = (torch.cat(column) for column in zip(*self.parts))
            values = torch.stack([torch.ones(int(mask.sum()), dtype=torch.float64), losses[mask].to(torch.float64),
                                  norms[mask].to(torch.float64), clipped[mask].to(torch.float64)], dim=1)
            totals.index_add_(0, cells[mask], values)
        self.parts = []
        return totals.view(self.runs, self.n_groups, 4)


def _fixed_decisions(policies: Sequence[ClippingPolicy]) -> list[StepDecision] | None:
    """Every run's step decision when no policy reads its batch -- :class:`~.clipping.UniformClipping` and
    :class:`~.clipping.NonPrivate` decide the same bounds and noise on every step and draw nothing -- so the
    step clips all runs in one operation; else None (each run's policy decides on its own batch)."""
    if not all(type(p) in (UniformClipping, NonPrivate) for p in policies):
        return None
    one, group = torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.long)  # the bound exactly
    return [p.decide(one, group, n_groups=1, expected_batch_size=1.0, generator=torch.Generator())
            for p in policies]


def _fixed_bounds(decisions: Sequence[StepDecision], dtype: torch.dtype) -> torch.Tensor:
    """(K, 1): each run's clipping bound (inf: none)."""
    return torch.tensor([[float(d.bounds[0])] for d in decisions], dtype=dtype)


def _decide_each(runs: Sequence[RunSpec], policies: Sequence[ClippingPolicy], generators, norms: torch.Tensor,
                 groups: torch.Tensor, sizes: torch.Tensor) -> tuple[list[StepDecision], torch.Tensor, torch.Tensor]:
    """Each run's policy decides on its own batch's norms and groups, with its own generator (in the serial
    order): the decisions, the bounds (K, m) (inf on padding) and the clipping coefficients (K, m) (0 on
    padding), weights included."""
    bounds = torch.full_like(norms, math.inf)
    coefficients = torch.zeros_like(norms)
    decisions = []
    for k, policy in enumerate(policies):
        b_k = int(sizes[k])
        decision = policy.decide(norms[k, :b_k], groups[k, :b_k], n_groups=runs[k].train_data.n_groups,
                                 expected_batch_size=runs[k].config.batch_size, generator=generators[k][1])
        c = clip_factors(norms[k, :b_k], decision.bounds)
        coefficients[k, :b_k] = c if decision.weights is None else c * decision.weights
        bounds[k, :b_k] = decision.bounds
        decisions.append(decision)
    return decisions, bounds, coefficients


def _noise(totals: dict[str, torch.Tensor], decisions: Sequence[StepDecision],
           generators) -> dict[str, torch.Tensor] | None:
    """N(0, s_k^2) shaped like each run's sum, drawn from run k's noise generator parameter by parameter, as
    :func:`~dpfair_analysis.gradients.gaussian_noise_like` draws it in a serial run (0 for a run without noise);
    None if no run is noised."""
    if not any(d.noise_std for d in decisions):
        return None
    noise = {name: torch.zeros_like(total) for name, total in totals.items()}
    for k, decision in enumerate(decisions):
        if decision.noise_std:
            for draws in noise.values():
                draws[k].normal_(generator=generators[k][1])
    std = torch.tensor([d.noise_std for d in decisions])
    for draws in noise.values():   # run k's N(0, 1) draws times s_k, as the serial run scales them
        draws.mul_(std.to(draws.dtype).view((len(std),) + (1,) * (draws.dim() - 1)))
    return noise


def _step_events(policies: Sequence[ClippingPolicy], fixed: Sequence[StepDecision] | None,
                 q: float) -> list[dp_event.DpEvent | None] | None:
    """Each run's step event, made once when the decisions are fixed; else None (made per step)."""
    return None if fixed is None else [step_event(p, d, q) for p, d in zip(policies, fixed)]


def _result(run: RunSpec, policy: ClippingPolicy, lr: float, ledger: PrivacyLedger, history: list[dict],
            records: list[dict]) -> TrainingResult:
    config = run.config
    history_frame = pd.DataFrame(history)
    steps_frame = pd.DataFrame(records)
    if policy.private and config.accounting.accountant == "rdp" and len(ledger) == len(steps_frame):
        steps_frame["epsilon"] = ledger.epsilon_trajectory(config.delta, accounting=config.accounting)
    final = history_frame.query("metric == 'epsilon'")["value"].iloc[-1] if policy.private else None
    return TrainingResult(model=run.model, history=history_frame, steps=steps_frame, ledger=ledger, config=config,
                          policy=policy.name, learning_rate=lr,
                          sampling_matches_accounting=config.sampling == "poisson" or not policy.private,
                          epsilon=None if final is None else float(final))


def _update(stacked: dict[str, torch.Tensor], totals: dict[str, torch.Tensor], noise: dict[str, torch.Tensor] | None,
            *, lrs: torch.Tensor, denominators: torch.Tensor, l2: float) -> None:
    """theta_k <- theta_k - r_k ((S_k + noise_k) / d_k + l2 w_k) for every run k at once, in place (the loop's
    :func:`~.loop.apply_update` with :func:`~.loop._penalty_gradient`, the weights penalised, biases not)."""
    with torch.no_grad():
        for name, theta in stacked.items():
            shape = (len(theta),) + (1,) * (theta.dim() - 1)
            total = totals[name] if noise is None else totals[name] + noise[name]
            update = total / denominators.to(theta.dtype).view(shape)
            if l2 and not name.endswith("bias"):
                update = update + l2 * theta
            theta.sub_(lrs.to(theta.dtype).view(shape) * update)


def _first_diverged(stacked: dict[str, torch.Tensor]) -> int | None:
    """The first run whose parameters are not all finite (NaN or inf), or None: :func:`~.loop.all_finite` of all of
    them (one sum per tensor) answers "none"; only otherwise run by run."""
    if all_finite(list(stacked.values())):
        return None
    finite = torch.stack([torch.isfinite(theta.flatten(1)).all(1) for theta in stacked.values()]).all(0)
    bad = (~finite).nonzero()
    return None if len(bad) == 0 else int(bad[0])


def _stack_parameters(models: Sequence[nn.Module]) -> dict[str, torch.Tensor]:
    """The models' trainable parameters stacked, (K, *shape) by name -- and each model's parameters made views
    of its slice, so an update of the stack is an update of every model (and each model evaluates as itself)."""
    names = [name for name, p in models[0].named_parameters() if p.requires_grad]
    stacked = {name: torch.stack([dict(m.named_parameters())[name].detach() for m in models]) for name in names}
    for k, model in enumerate(models):
        own = dict(model.named_parameters())
        for name in names:
            own[name].data = stacked[name][k]
    return stacked


def _engine(model: nn.Module):
    """The batched per-sample engine for ``model``'s architecture: ``(model, stacked, X (K, m, d), y (K, m),
    ||x||^2 (K, m))`` -> (norms (K, m), losses (K, m), weighted_sum(c (K, m)) -> {name: (K, *shape)})."""
    if type(model) is LogisticRegression:
        return _logistic_regression
    return _mlp


def _logistic_regression(model: LogisticRegression, stacked: dict[str, torch.Tensor], X: torch.Tensor,
                         y: torch.Tensor, row_norms: torch.Tensor):
    """The closed form of :func:`dpfair_analysis.fast_gradients._logistic_regression`, K runs at once:
    delta = dL/d scores, ||g_i|| = ||delta_i|| sqrt(||x_i||^2 + 1), S = (c * delta)^T X per run."""
    W, beta = stacked["linear.weight"], stacked["linear.bias"]     # (K, out, d), (K, out)
    A = X                                                          # (K, m, d)
    scores = torch.einsum("kmd,kod->kmo", A, W) + beta.unsqueeze(1)
    if model.binary:
        logits = torch.cat([torch.zeros_like(scores), scores], dim=2)
        delta = torch.sigmoid(scores) - y.unsqueeze(2).to(scores.dtype)
    else:
        logits = scores
        delta = torch.softmax(scores, dim=2) - F.one_hot(y, scores.shape[2]).to(scores.dtype)
    losses = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
    norms = ((delta * delta).sum(2) * (row_norms + 1.0)).sqrt()
    delta, A = _finite_rows_only(norms, delta, A)

    def weighted_sum(c: torch.Tensor) -> dict[str, torch.Tensor]:
        weighted = delta * c.unsqueeze(2).to(delta.dtype)
        return {"linear.weight": torch.einsum("kmo,kmd->kod", weighted, A), "linear.bias": weighted.sum(1)}

    return norms, losses, weighted_sum


def _finite_rows_only(norms: torch.Tensor, *parts):
    """``parts`` (tensors (K, m, ...) or sequences of them) with the rows of non-finite ``norms`` (K, m) set to 0, so
    that those samples (given c = 0 by clip_factors) add exactly nothing to the sums: 0 * inf or 0 * NaN would
    turn a run's whole sum into NaN (gradients.finite_rows_sum). Unchanged, without a copy, when every norm is
    finite."""
    finite = torch.isfinite(norms)
    if bool(finite.all()):
        return parts
    keep = finite.unsqueeze(2)

    def zeroed(t: torch.Tensor) -> torch.Tensor:
        return torch.where(keep, t, torch.zeros((), dtype=t.dtype))

    return tuple([zeroed(t) for t in part] if isinstance(part, (list, tuple)) else zeroed(part) for part in parts)


def _mlp(model: MLP, stacked: dict[str, torch.Tensor], X: torch.Tensor, y: torch.Tensor, row_norms: torch.Tensor):
    """The MLP's per-sample norms and clipped sums for K runs without forming a per-sample gradient (the
    book-keeping of :mod:`dpfair_analysis.fast_gradients`, batched over runs): one forward records each Linear
    layer's input a (K, m, d_in) and output z; one backward of the summed loss gives b = dL/dz (K, m, d_out),
    row i's own (rows do not mix). Then ||g_i||^2 = sum over layers of (||a_i||^2 + 1) ||b_i||^2, and
    sum_i c_i g_i is (c * b)^T a for each weight and sum_i c_i b_i for each bias."""
    a = X
    inputs, outputs, names = [], [], []
    with torch.enable_grad():
        for i, module in enumerate(model.net):
            if isinstance(module, nn.Linear):
                W, beta = stacked[f"net.{i}.weight"], stacked[f"net.{i}.bias"]
                z = torch.baddbmm(beta.unsqueeze(1), a, W.transpose(1, 2))
                if not outputs:
                    z.requires_grad_(True)
                inputs.append(a.detach())
                outputs.append(z)
                names.append(f"net.{i}")
                a = z
            else:
                a = module(a)
        losses = F.cross_entropy(a.flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
        grads = torch.autograd.grad(losses.sum(), outputs)
    squared = sum((((x * x).sum(2) if i else row_norms) + 1.0) * (b * b).sum(2)   # layer 0's input: x itself
                  for i, (x, b) in enumerate(zip(inputs, grads)))
    inputs, grads = _finite_rows_only(squared, inputs, grads)

    def weighted_sum(c: torch.Tensor) -> dict[str, torch.Tensor]:
        c = c.to(squared.dtype).unsqueeze(2)
        out = {}
        for name, x, b in zip(names, inputs, grads):
            weighted = c * b
            out[f"{name}.weight"] = torch.bmm(weighted.transpose(1, 2), x)
            out[f"{name}.bias"] = weighted.sum(1)
        return out

    return squared.sqrt(), losses.detach(), weighted_sum
