"""K independent runs of the DP-SGD loop trained together: seeds (and small grids) in one batched pass.

Research with the toolkit is mostly many small runs -- a table's seeds, a sweep's grid. For a small model
the time of one step is per-operation overhead, not arithmetic, so K runs that take the same number of
steps are trained here as one: their parameters are stacked (K, ...), each step gathers every run's own
Poisson batch into one padded (K, m) block, computes all per-sample norms and clipped sums with batched
algebra, and updates all K parameter sets at once. Everything that makes a run *that* run stays its own:
its data split, its generators (:func:`~.loop.make_generators` of its seed: its batches and every noise
draw, in the serial order), its clipping policy and its decisions (:meth:`ClippingPolicy.decide` on its
own batch's norms), its noise, its privacy ledger, its per-epoch evaluation and history. So each run's
:class:`~.loop.TrainingResult` is what :func:`~.loop.train` gives for it alone, to floating-point
rounding (tests/training/test_batched.py compares them run by run).

What can be batched (:func:`batchable` says why not otherwise): models of one architecture whose
per-sample norms and clipped sums the batched engine computes -- the toolkit's logistic regression (closed
form) and MLPs (one batched forward and backward: the book-keeping of :mod:`dpfair_analysis.fast_gradients`)
-- trained with the cross-entropy objective, on the CPU, without callbacks, with the same number of steps and
epochs. Anything else is trained one run at a time by the caller (``experiments.sweep`` does, and says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from dp_accounting import dp_event
from torch import nn
from tqdm import tqdm

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.errors import TrainingDiverged
from dpfair_analysis.gradients import clip_factors, gaussian_noise_like
from dpfair_analysis.models import MLP, LogisticRegression
from dpfair_analysis.privacy.accounting import PrivacyLedger
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.clipping import ClippingPolicy, fresh_policy
from dpfair_analysis.training.loop import TrainConfig, TrainingResult, _BatchStats, _check_labels_fit, \
    batch_indices, epsilon_row, evaluate_groups, evaluation_splits, make_generators, schedule

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
    X = torch.stack([r.train_data.X for r in runs])
    Y = torch.stack([r.train_data.y for r in runs])
    G = torch.stack([r.train_data.group for r in runs])
    accumulators = [_BatchStats(r.train_data.n_groups) for r in runs]
    splits = [evaluation_splits(r.train_data, r.test_data, evaluate_train=r.config.evaluate_train,
                                final_epoch=max(epoch_ends.values())) for r in runs]
    engine = _engine(runs[0].model)

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
        sizes = [len(i) for i in indices]
        m = max(max(sizes), 1)
        padded = torch.zeros(K, m, dtype=torch.long)
        mask = torch.zeros(K, m, dtype=torch.bool)
        for k, index in enumerate(indices):
            padded[k, :len(index)] = index
            mask[k, :len(index)] = True
        rows = torch.arange(K).unsqueeze(1)
        norms, losses, weighted_sum = engine(runs[0].model, stacked, X[rows, padded], Y[rows, padded])
        coefficients = torch.zeros(K, m, dtype=norms.dtype)
        decisions = []
        for k, (policy, index) in enumerate(zip(policies, indices)):
            b_k = sizes[k]
            group_k = G[k, index]
            decision = policy.decide(norms[k, :b_k], group_k, n_groups=runs[k].train_data.n_groups,
                                     expected_batch_size=runs[k].config.batch_size, generator=generators[k][1])
            c = clip_factors(norms[k, :b_k], decision.bounds)
            if decision.weights is not None:
                c = c * decision.weights
            coefficients[k, :b_k] = c
            decisions.append(decision)
            accumulators[k].add(group_k, losses[k, :b_k], norms[k, :b_k], norms[k, :b_k] > decision.bounds)
        totals = weighted_sum(coefficients)
        noise = [gaussian_noise_like({name: s[k] for name, s in totals.items()}, decision.noise_std,
                                     generator=generators[k][1]) if decision.noise_std else None
                 for k, decision in enumerate(decisions)]   # each run's own generator, in the serial order
        denominators = torch.tensor([r.config.batch_size if policies[k].private else max(sizes[k], 1)
                                     for k, r in enumerate(runs)], dtype=torch.float64)
        _update(stacked, totals, noise, lrs=torch.tensor(lrs, dtype=torch.float64), denominators=denominators,
                l2=getattr(runs[0].model, "l2", 0.0))
        diverged = _first_diverged(stacked)
        if diverged is not None:
            raise TrainingDiverged(step=t, total_steps=total_steps, lr=lrs[diverged])
        for k, decision in enumerate(decisions):
            if policies[k].private and not decision.noise_multipliers:
                raise RuntimeError(f"private policy {policies[k].name!r} released a step without stating its "
                                   "noise multipliers; its privacy cannot be accounted")
            if decision.noise_multipliers:
                sigma = joint_noise_multiplier(decision.noise_multipliers)
                ledgers[k].record(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)))
            records[k].append({"step": t, "batch_size": sizes[k], "noise_std": decision.noise_std,
                               **decision.record})
        if t in epoch_ends:
            epoch = epoch_ends[t]
            for k, r in enumerate(runs):
                rows_k = [*evaluate_groups(r.model, splits[k](epoch), epoch=epoch),
                          *accumulators[k].take_rows(epoch, r.train_data), epsilon_row(epoch, _epsilon_of(k))]
                for row in rows_k:
                    row["step"] = t
                histories[k] += rows_k
    return [_result(r, policies[k], lrs[k], ledgers[k], histories[k], records[k]) for k, r in enumerate(runs)]


def _result(run: RunSpec, policy: ClippingPolicy, lr: float, ledger: PrivacyLedger, history: list[dict],
            records: list[dict]) -> TrainingResult:
    import pandas as pd

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


def _update(stacked: dict[str, torch.Tensor], totals: dict[str, torch.Tensor], noise: list[dict | None], *,
            lrs: torch.Tensor, denominators: torch.Tensor, l2: float) -> None:
    """theta_k <- theta_k - r_k ((S_k + noise_k) / d_k + l2 w_k) for every run k at once, in place (the loop's
    :func:`~.loop.apply_update` with :func:`~.loop._penalty_gradient`, the weights penalised, biases not)."""
    with torch.no_grad():
        for name, theta in stacked.items():
            shape = (len(theta),) + (1,) * (theta.dim() - 1)
            total = totals[name]
            if any(n is not None for n in noise):
                total = total + torch.stack([torch.zeros_like(total[k]) if n is None else n[name]
                                             for k, n in enumerate(noise)])
            update = total / denominators.to(theta.dtype).view(shape)
            if l2 and not name.endswith("bias"):
                update = update + l2 * theta
            theta.sub_(lrs.to(theta.dtype).view(shape) * update)


def _first_diverged(stacked: dict[str, torch.Tensor]) -> int | None:
    """The first run whose parameters are not all finite (NaN or inf), or None."""
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
    """The batched per-sample engine for ``model``'s architecture: ``(model, stacked, X (K, m, ...), y (K, m))``
    -> (norms (K, m), losses (K, m), weighted_sum(c (K, m)) -> {name: (K, *shape)})."""
    if type(model) is LogisticRegression:
        return _logistic_regression
    return _mlp


def _logistic_regression(model: LogisticRegression, stacked: dict[str, torch.Tensor], X: torch.Tensor,
                         y: torch.Tensor):
    """The closed form of :func:`dpfair_analysis.fast_gradients._logistic_regression`, K runs at once:
    delta = dL/d scores, ||g_i|| = ||delta_i|| sqrt(||x_i||^2 + 1), S = (c * delta)^T X per run."""
    W, beta = stacked["linear.weight"], stacked["linear.bias"]     # (K, out, d), (K, out)
    A = X.flatten(2).to(W.dtype)                                   # (K, m, d)
    scores = torch.einsum("kmd,kod->kmo", A, W) + beta.unsqueeze(1)
    if model.binary:
        logits = torch.cat([torch.zeros_like(scores), scores], dim=2)
        delta = torch.sigmoid(scores) - y.unsqueeze(2).to(scores.dtype)
    else:
        logits = scores
        delta = torch.softmax(scores, dim=2) - F.one_hot(y, scores.shape[2]).to(scores.dtype)
    losses = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
    norms = ((delta * delta).sum(2) * ((A * A).sum(2) + 1.0)).sqrt()

    def weighted_sum(c: torch.Tensor) -> dict[str, torch.Tensor]:
        weighted = delta * c.unsqueeze(2).to(delta.dtype)
        return {"linear.weight": torch.einsum("kmo,kmd->kod", weighted, A), "linear.bias": weighted.sum(1)}

    return norms, losses, weighted_sum


def _mlp(model: MLP, stacked: dict[str, torch.Tensor], X: torch.Tensor, y: torch.Tensor):
    """The MLP's per-sample norms and clipped sums for K runs without forming a per-sample gradient (the
    book-keeping of :mod:`dpfair_analysis.fast_gradients`, batched over runs): one forward records each Linear
    layer's input a (K, m, d_in) and output z; one backward of the summed loss gives b = dL/dz (K, m, d_out),
    row i's own (rows do not mix). Then ||g_i||^2 = sum over layers of (||a_i||^2 + 1) ||b_i||^2, and
    sum_i c_i g_i is (c * b)^T a for each weight and sum_i c_i b_i for each bias."""
    a = X.flatten(2).to(next(iter(stacked.values())).dtype)
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
    squared = sum(((x * x).sum(2) + 1.0) * (b * b).sum(2) for x, b in zip(inputs, grads))

    def weighted_sum(c: torch.Tensor) -> dict[str, torch.Tensor]:
        c = c.to(squared.dtype).unsqueeze(2)
        out = {}
        for name, x, b in zip(names, inputs, grads):
            weighted = c * b
            out[f"{name}.weight"] = torch.bmm(weighted.transpose(1, 2), x)
            out[f"{name}.bias"] = weighted.sum(1)
        return out

    return squared.sqrt(), losses.detach(), weighted_sum
