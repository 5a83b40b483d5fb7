"""One training loop for SGD and DP-SGD (and every clipping policy).

Each step:

1. sample a batch B_t -- Poisson sampling (each row with probability q = b/n, what the
   accountant assumes; the default) or a shuffled fixed-size batch (the papers'
   practice; results are flagged ``sampling_matches_accounting = False``);
2. per-sample gradients g_i of the objective (cross-entropy unless an
   :class:`~.objectives.Objective` says otherwise) and norms ||g_i||, as a
   :class:`~dpfair_analysis.gradients.PerSampleGradients` (norms and weighted sums: the
   cross-entropy's fast path never forms the g_i; :mod:`dpfair_analysis.fast_gradients`);
3. the policy picks bounds C_i, weights w_i and noise s (:mod:`.clipping`);
4. G = (sum_i w_i min(1, C_i/||g_i||) g_i + N(0, s^2 I)) / b  with b the expected
   batch size for private policies (the non-private mean uses the actual size);
5. theta <- theta - r (G + grad of the model's data-free L2 penalty);
6. the step's Gaussian releases (all on the same sampled batch) are recorded as one
   Poisson-sampled Gaussian event with their joint noise multiplier
   (:func:`~dpfair_analysis.privacy.mechanisms.joint_noise_multiplier`) in a
   :class:`~dpfair_analysis.privacy.accounting.PrivacyLedger` (an objective's own
   per-step releases join that event; its one-time releases are recorded before step 1).

``callbacks`` are called as ``callback(t, model, state)`` at theta_t, for t = 0 (before
the first step) to T (after the last), so analyses (e.g. paper 001's decomposition, tracked
per step) see every iterate; they must not touch the loop's generators. The steps, the
evaluations and the callbacks are run by :func:`run_steps`, the one driver of every trainer
(this loop, DP-FedAvg and PF-LD).

The run has T = ceil(epochs * n / b) steps (the count the papers' accountant uses);
epoch e ends after step ceil(e * n / b). After each epoch the loop evaluates loss and
accuracy per group on the training (and test) set and reports, from the epoch's
batches, each group's mean per-sample gradient norm, loss and fraction clipped, and the
epsilon spent so far. Everything random draws from generators seeded by ``seed``.
"""

from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from dp_accounting import dp_event
from torch import nn
from tqdm import tqdm

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.errors import TrainingDiverged  # noqa: F401  (raised here, re-exported)
from dpfair_analysis.fairness.metrics import per_group_accuracy
from dpfair_analysis.gradients import Grads, MaterialisedGradients, PerSampleGradients, add_gaussian_noise, \
    clip_factors, clipped_sum, parameters_of
from dpfair_analysis.io import KEY_OMITS_DEFAULT
from dpfair_analysis.privacy.accounting import AccountingSpec, PrivacyLedger, steps_for_epochs
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.batch_terms import batch_direction_magnitude
from dpfair_analysis.training.clipping import ClippingPolicy, StepDecision, fresh_policy
from dpfair_analysis.training.objectives import CrossEntropy, Objective, batch_gradients
from dpfair_analysis.validation import check_choice, check_delta, check_device, check_positive, \
    check_positive_int, check_seed

SAMPLING = ("poisson", "shuffle")
#: When the training set is evaluated: after every epoch, or only after the last (the test set always is;
#: on full MNIST the training set's evaluation is most of a run's evaluation time).
EVALUATE_TRAIN = ("every_epoch", "last_epoch")
#: ``callback(t, model, state)`` at theta_t, for t = 0 (before the first step) to T (after the last), in every
#: trainer; ``state`` is the trainer's public state step t+1 will use (PF-LD's multipliers and signs; None for
#: the DP-SGD loop and DP-FedAvg). Callbacks must not change the model, the state or the trainer's generators.
TrainCallback = Callable[[int, nn.Module, Any], None]
#: ``observer(t, index, norms)`` after step t's per-sample gradients: the rows of B_t (CPU) and their norms
#: ||g_i(theta_{t-1})||, the very numbers the step clips (e.g. a per-record privacy accountant's, with no pass of its
#: own: :class:`~dpfair_analysis.training.norm_recorder.SampledNorms`). Observers must not change either tensor.
BatchObserver = Callable[[int, torch.Tensor, torch.Tensor], None]


@dataclass(frozen=True)
class TrainConfig:
    """Settings shared by SGD and every private policy.

    ``lr`` is the learning rate r; ``None`` means the census setting of paper 000
    (r = 1/sqrt(T)). ``delta`` is the delta at which epsilon is reported, ``accounting``
    how (:class:`~dpfair_analysis.privacy.accounting.AccountingSpec`; under replace-one
    with RDP the steps are accounted without subsampling amplification). ``device``
    (``"cpu"``, or ``"cuda"``/``"cuda:N"`` where CUDA is available) is where the model
    and the data live during training; the random draws (batches, noise) are made on
    the CPU generators and moved, so they are the same on every device, and the model
    is moved back to its own device when training ends. ``eval_every`` = k evaluates the
    splits (loss and accuracy per group) after every k-th epoch only, and always before the
    first step and after the last epoch (the batch statistics and epsilon are reported every
    epoch): on full MNIST the test set's evaluation after each of 60 epochs is a cost a run
    that reports only its end need not pay. Left at 1 it is not part of a run's key.
    """

    epochs: int = 20
    batch_size: int = 256
    lr: float | None = None
    sampling: str = "poisson"
    delta: float = 1e-6
    seed: int = 0
    accounting: AccountingSpec = AccountingSpec()
    max_steps: int | None = None
    device: str = "cpu"
    evaluate_train: str = "every_epoch"
    eval_every: int = field(default=1, metadata=KEY_OMITS_DEFAULT)

    def __post_init__(self) -> None:
        check_positive_int(self.epochs, "epochs")
        check_positive_int(self.batch_size, "batch_size")
        if self.lr is not None:
            check_positive(self.lr, "lr")
        check_choice(self.sampling, "sampling", SAMPLING)
        check_delta(self.delta)
        check_seed(self.seed)
        if not isinstance(self.accounting, AccountingSpec):
            raise TypeError(f"accounting must be an AccountingSpec, got {self.accounting!r}")
        if self.max_steps is not None:
            check_positive_int(self.max_steps, "max_steps")
        check_device(self.device)
        check_choice(self.evaluate_train, "evaluate_train", EVALUATE_TRAIN)
        check_positive_int(self.eval_every, "eval_every")

    def learning_rate(self, n: int) -> float:
        return self.lr if self.lr is not None else 1.0 / math.sqrt(steps_for_epochs(n, self.batch_size, self.epochs))


@dataclass
class TrainingResult:
    """A trained model with its tidy history.

    ``history`` has one row per (epoch, split, group, metric): splits ``train`` and
    ``test`` (evaluated after the epoch) and ``batches`` (averaged over the epoch's
    sampled batches); group ``all`` is the whole population. ``steps`` has one row per
    step with the policy's record. ``ledger`` holds what was released.

    What ``epsilon`` covers: the model after every step and the released step columns
    (``noise_std`` and the policy's and objective's records, which are functions of noisy
    releases). The ``train`` and ``batches`` rows of ``history`` and the ``batch_size``
    column of ``steps`` are computed from the private training data **without noise**:
    they are diagnostics for whoever holds the data, not covered by the guarantee, and
    must not be published with the model (the audits of
    :mod:`dpfair_analysis.verify.audits.trainers` do not show them to the adversary).
    """

    model: nn.Module
    history: pd.DataFrame
    steps: pd.DataFrame
    ledger: PrivacyLedger
    config: TrainConfig
    policy: str
    learning_rate: float
    sampling_matches_accounting: bool
    epsilon: float | None = None


def train(model: nn.Module, train_data: GroupedDataset, policy: ClippingPolicy, config: TrainConfig, *,
          test_data: GroupedDataset | None = None, progress: bool = True, objective: Objective | None = None,
          callbacks: Sequence[TrainCallback] = (), batch_observers: Sequence[BatchObserver] = ()) -> TrainingResult:
    """Train ``model`` in place with ``policy`` and return the result with its history.

    On ``config.device`` (see :class:`TrainConfig`); the model is back on its own device
    when this returns (also after an error).

    Parameters
    ----------
    model : torch.nn.Module
        The model, trained in place.
    train_data : GroupedDataset
        The (private) training rows.
    policy : ClippingPolicy
        Decides each step's per-sample clipping bounds and noise (e.g. ``UniformClipping`` for DP-SGD); what it
        releases is recorded in the privacy ledger, from which epsilon is computed.
    config : TrainConfig
        Epochs, batch size, learning rate, sampling, delta, seed, accounting and device.
    test_data : GroupedDataset, optional
        Evaluated per group after every epoch (rows ``split == "test"`` of the history).
    progress : bool
        Show a progress bar.
    objective : Objective, optional
        The per-sample loss (default cross-entropy with the model's L2 weight).
    callbacks : sequence of TrainCallback
        Called after each step and epoch (e.g. the decomposition terms of paper 001's Theorem 2).
    batch_observers : sequence of BatchObserver
        Called with each step's batch rows and the per-sample norms it clips (:data:`BatchObserver`).

    Returns
    -------
    TrainingResult
        The model, the tidy per-group history, the ledger, epsilon and the step records.
    """
    objective = CrossEntropy() if objective is None else objective
    _check_labels_fit(model, train_data, "train_data")
    if test_data is not None:
        _check_labels_fit(model, test_data, "test_data")
    device = torch.device(config.device)
    if device.type != "cpu" and not isinstance(objective, CrossEntropy):
        raise ValueError(f"device={config.device!r} supports the CrossEntropy objective only; "
                         f"{type(objective).__name__} runs on device='cpu'")
    home = next((p.device for p in model.parameters()), torch.device("cpu"))
    model.to(device)
    layout = _memory_format(model, device)
    try:
        model.to(memory_format=layout)
        return _train(model, _in_layout(train_data.to(device), layout), policy, config, device=device,
                      test_data=None if test_data is None else _in_layout(test_data.to(device), layout),
                      progress=progress, objective=objective, callbacks=callbacks,
                      batch_observers=batch_observers)
    finally:
        model.to(home)
        model.to(memory_format=torch.contiguous_format)


def _memory_format(model: nn.Module, device: torch.device) -> torch.memory_format:
    """channels_last for a convolutional model on the CPU, where it pays (the MNIST CNN's DP step 0.84x, its
    plain step 0.73x the time; benchmarks/README.md); the default layout otherwise."""
    convolutional = any(isinstance(m, nn.Conv2d) for m in model.modules())
    return torch.channels_last if convolutional and device.type == "cpu" else torch.contiguous_format


def _in_layout(data: GroupedDataset, layout: torch.memory_format) -> GroupedDataset:
    """``data`` with its images (4-D X) stored in ``layout``: the same numbers, another order in memory."""
    if layout == torch.contiguous_format or data.X.dim() != 4:
        return data
    return replace(data, X=data.X.contiguous(memory_format=layout))


def _train(model: nn.Module, train_data: GroupedDataset, policy: ClippingPolicy, config: TrainConfig, *,
           device: torch.device, test_data: GroupedDataset | None, progress: bool, objective: Objective,
           callbacks: Sequence[TrainCallback], batch_observers: Sequence[BatchObserver] = ()) -> TrainingResult:
    n = len(train_data)
    if config.batch_size > n:
        raise ValueError(f"batch_size={config.batch_size} exceeds the {n} training rows")
    policy = fresh_policy(policy)  # a stateful policy (Opt-Q, FairDP) starts from its initial bounds
    lr = config.learning_rate(n)
    q = config.batch_size / n
    total_steps, epoch_ends = schedule(n, config)
    sampler_gen, noise_gen = make_generators(config.seed, 2)
    ledger = PrivacyLedger()
    for multiplier in objective.prepare(train_data, generator=noise_gen):
        ledger.record(dp_event.GaussianDpEvent(multiplier))
    batches = batch_indices(n, config.batch_size, sampler_gen, sampling=config.sampling)

    splits = evaluation_splits(train_data, test_data, evaluate_train=config.evaluate_train,
                               final_epoch=max(epoch_ends.values()), eval_every=config.eval_every)
    accumulator = _BatchStats(train_data.n_groups)
    parts = ClipParts(train_data.n_groups, lr=lr, expected_batch_size=config.batch_size) if policy.private else None
    params = parameters_of(model)  # detached views: an update of them is an update of the model

    def step(t: int) -> dict:
        rows = next(batches)
        index = rows if device.type == "cpu" else rows.to(device)
        decision, released = _step(model, train_data, index, policy, objective, lr=lr, generator=noise_gen,
                                   expected_batch_size=config.batch_size, accumulator=accumulator, params=params,
                                   parts=parts, observe=[lambda norms, o=o: o(t, rows, norms)
                                                        for o in batch_observers])
        check_finite(model, step=t, total_steps=total_steps, lr=lr)
        event = step_event(policy, decision, q, also=objective.planned_noise_multipliers())
        if event is not None:
            ledger.record(event)
        return {"batch_size": len(index), "noise_std": decision.noise_std, **decision.record, **released}

    def evaluate(epoch: int) -> list[dict]:
        rows = evaluate_groups(model, splits(epoch), epoch=epoch)
        if epoch == 0:
            return rows
        return rows + accumulator.take_rows(epoch, train_data) + ([] if parts is None else
                                                                   parts.take_rows(epoch, train_data))

    def epsilon() -> float | None:
        return ledger.epsilon(config.delta, accounting=config.accounting) if policy.private else None

    history_frame, steps_frame = run_steps(model, total_steps=total_steps, epoch_ends=epoch_ends, step=step,
                                           evaluate=evaluate, epsilon=epsilon, callbacks=callbacks,
                                           desc=policy.name, progress=progress)
    if policy.private and config.accounting.accountant == "rdp" and len(ledger) == len(steps_frame):
        steps_frame["epsilon"] = ledger.epsilon_trajectory(config.delta, accounting=config.accounting)
    final_eps = history_frame.query("metric == 'epsilon'")["value"].iloc[-1] if policy.private else None
    return TrainingResult(model=model, history=history_frame, steps=steps_frame, ledger=ledger,
                          config=config, policy=policy.name, learning_rate=lr,
                          sampling_matches_accounting=config.sampling == "poisson" or not policy.private,
                          epsilon=None if final_eps is None else float(final_eps))


def _step(model: nn.Module, data: GroupedDataset, index: torch.Tensor, policy: ClippingPolicy,
          objective: Objective, *, lr: float, generator: torch.Generator, expected_batch_size: int,
          accumulator: "_BatchStats", params: dict[str, torch.Tensor] | None = None,
          parts: ClipParts | None = None, observe: Sequence[Callable[[torch.Tensor], None]] = ()):
    """One update of ``model``'s parameters in place; returns the policy's decision and the objective's record.
    ``params``: the model's :func:`~dpfair_analysis.gradients.parameters_of` (taken here if not given);
    ``parts``: where the clipping's direction and magnitude errors are measured (None: not measured);
    ``observe``: each called with the batch's per-sample norms, before the release."""
    X, y, group = data.X[index], data.y[index], data.group[index]
    params = parameters_of(model) if params is None else params
    if len(index) == 0:
        batch: PerSampleGradients = MaterialisedGradients(
            {name: torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device) for name, p in params.items()},
            norms=torch.zeros(0))
        losses = torch.zeros(0)
    else:
        batch, losses = batch_gradients(objective, model, X, y, group, params=params)
    norms = batch.norms
    for observer in observe:
        observer(norms.detach())

    def objective_release(bounds: torch.Tensor) -> dict[str, float]:
        return objective.release(model, X, y, group, params=params, bounds=bounds,
                                 expected_batch_size=expected_batch_size, generator=generator)

    decision, released, total = release_step(batch, norms, group, policy, n_groups=data.n_groups,
                                             expected_batch_size=expected_batch_size, generator=generator,
                                             objective_release=objective_release)
    denominator = expected_batch_size if policy.private else max(len(index), 1)
    apply_update(params, total, lr=lr, denominator=denominator, penalty=_penalty_gradient(model, params))
    accumulator.add(group, losses, norms, norms > _on(decision.bounds, norms.device))
    if parts is not None and parts.due() and len(index):
        coefficients = clip_factors(norms, _on(decision.bounds, norms.device))
        if decision.weights is not None:
            coefficients = coefficients * _on(decision.weights, norms.device)
        group_sums = torch.stack([flat_sum(batch.weighted_sum((group == k).to(norms.dtype)))
                                  for k in range(data.n_groups)])
        parts.add(*clip_parts_inputs(group_sums, flat_sum(batch.weighted_sum(coefficients)), norms, coefficients,
                                     group, n_groups=data.n_groups))
    return decision, released


def check_finite(model: nn.Module, *, step: int, total_steps: int, lr: float) -> None:
    """Raise :class:`TrainingDiverged` if any parameter of ``model`` is NaN or infinite (every trainer, every
    step: a diverged run stops at once instead of reporting the accuracy of a NaN model)."""
    with torch.no_grad():
        if not all_finite(list(model.parameters())):
            raise TrainingDiverged(step=step, total_steps=total_steps, lr=lr)


def all_finite(tensors: Sequence[torch.Tensor]) -> bool:
    """Whether every entry of every tensor is finite, at the cost of one sum per tensor when they are: the sum of
    all entries is finite whenever they all are, unless it overflows (NaN and inf propagate), so only a non-finite
    sum -- a divergence, or finite values summing past the float range -- asks each entry. (A fused max-|x| was 20x
    slower on the CPU.)

    Parameters
    ----------
    tensors : sequence of torch.Tensor
        Floating-point tensors (an empty sequence is all finite).
    """
    if not tensors or math.isfinite(float(torch.stack([t.sum(dtype=torch.float64) for t in tensors]).sum())):
        return True
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def apply_update(params: dict[str, torch.Tensor], total: dict[str, torch.Tensor], *, lr: float,
                 denominator: float = 1.0, penalty: dict[str, torch.Tensor] | None = None) -> None:
    """theta <- theta - lr (total / denominator [+ penalty]), in place, fused over the parameters.

    ``params`` are the (detached) views of the model's parameters (:func:`parameters_of`): updating them
    updates the model. Parameters absent from ``total`` are left alone. Every trainer's update.
    """
    penalty = penalty or {}
    with torch.no_grad():
        names = [name for name in params if name in total]
        updates = list(torch._foreach_div([total[name] for name in names], denominator))
        for i, name in enumerate(names):
            if name in penalty:
                updates[i] = updates[i] + penalty[name]
        torch._foreach_sub_([params[name] for name in names], torch._foreach_mul(updates, lr))


def step_event(policy: ClippingPolicy, decision: StepDecision, q: float, *,
               also: tuple[float, ...] = ()) -> dp_event.DpEvent | None:
    """A step's privacy event: its Gaussian releases on the Poisson-sampled batch (the policy's multipliers and
    ``also``, e.g. an objective's) as one sampled Gaussian with their joint multiplier
    sigma = (sum_i sigma_i^-2)^(-1/2), or None for a step that releases nothing. A private policy that states no
    multiplier is refused (its step could not be accounted). Every loop trainer's ledger entry.

    Parameters
    ----------
    policy : ClippingPolicy
        The step's policy (``private`` says whether it must state multipliers).
    decision : StepDecision
        What it decided for the step (its ``noise_multipliers``).
    q : float
        The Poisson sampling rate b / n.
    also : tuple of float
        Further noise multipliers of releases on the same batch.
    """
    if policy.private and not decision.noise_multipliers:
        raise RuntimeError(f"private policy {policy.name!r} released a step without stating its noise multipliers; "
                           "its privacy cannot be accounted")
    multipliers = decision.noise_multipliers + tuple(also)
    if not multipliers:
        return None
    return dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(joint_noise_multiplier(multipliers)))


def release_step(grads: Grads | PerSampleGradients, norms: torch.Tensor, group: torch.Tensor,
                 policy: ClippingPolicy, *, n_groups: int, expected_batch_size: float, generator: torch.Generator,
                 objective_release: Callable[[torch.Tensor], dict[str, float]] | None = None,
                 ) -> tuple[StepDecision, dict[str, float], dict[str, torch.Tensor]]:
    """The private release of one step, given the batch's per-sample gradients and norms.

    ``grads`` is the dict ``{name: (n, *shape)}`` of per-sample gradients or any
    :class:`~dpfair_analysis.gradients.PerSampleGradients` (the fast path's norms and
    book-kept sums); the policy sees only ``norms``, and the sum is taken by
    :func:`~dpfair_analysis.gradients.clipped_sum` either way.

    In this order (so in the order of the random draws from ``generator``): the policy's
    decision (bounds C_i, weights w_i, noise s; it draws its own count noise), the
    objective's own release for those bounds (``objective_release(bounds)``, e.g. the
    fairness-lens mitigation's statistics), then the noisy sum

    .. math:: \\tilde S = \\sum_i w_i \\min(1, C_i / \\|g_i\\|) \\, g_i + \\mathcal N(0, s^2 I).

    Returns (decision, the objective's record, the noisy sum). The update
    theta - r (S~ / b + penalty) is post-processing. The training loop and the audits
    call this one function, so what is audited is what trains.
    """
    # policies draw from CPU generators: they see the norms and groups on the CPU (no copy if there already)
    decision = policy.decide(_on(norms, _CPU), _on(group, _CPU), n_groups=n_groups,
                             expected_batch_size=expected_batch_size, generator=generator)
    released = objective_release(decision.bounds) if objective_release is not None else {}
    total = clipped_sum(grads, decision.bounds, weights=decision.weights, norms=norms)
    return decision, released, add_gaussian_noise(total, decision.noise_std, generator=generator)


_CPU = torch.device("cpu")


def _on(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device``, without a dispatch when it is there already (the step's hot path)."""
    return tensor if tensor.device == device else tensor.to(device)


def _penalty_gradient(model: nn.Module, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Gradient of the model's data-free L2 penalty (l2 / 2) sum ||w||^2 over the weights (biases excluded;
    :func:`~dpfair_analysis.models.l2_penalty`): l2 w for each weight, no autograd. No privacy cost."""
    l2 = getattr(model, "l2", 0.0)
    if l2 == 0.0:
        return {}
    return {name: l2 * p for name, p in params.items() if not name.endswith("bias")}


class _BatchStats:
    """Per-group sums over an epoch's batches: loss, gradient norm, clipped count. Each step only keeps its
    tensors (:meth:`add`); they are summed once per epoch (one index_add over the epoch's rows)."""

    def __init__(self, n_groups: int) -> None:
        self.n_groups = n_groups
        self.parts: list[tuple[torch.Tensor, ...]] = []

    def add(self, group: torch.Tensor, losses: torch.Tensor, norms: torch.Tensor, clipped: torch.Tensor) -> None:
        self.parts.append((group, losses.detach(), norms.detach(), clipped))

    def totals(self) -> torch.Tensor:
        """(n_groups, 4): count, loss, norm and clipped summed per group over the batches since the last take."""
        totals = torch.zeros(self.n_groups, 4, dtype=torch.float64)
        if self.parts:
            group, losses, norms, clipped = (torch.cat(column).cpu() for column in zip(*self.parts))
            values = torch.stack([torch.ones_like(norms, dtype=torch.float64), losses.to(torch.float64),
                                  norms.to(torch.float64), clipped.to(torch.float64)], dim=1)
            totals.index_add_(0, group, values)
        return totals

    def take_rows(self, epoch: int, data: GroupedDataset) -> list[dict]:
        """The epoch's tidy rows (split ``batches``), and the sums start again for the next epoch."""
        rows = self.rows(epoch, data)
        self.parts = []
        return rows

    def rows(self, epoch: int, data: GroupedDataset) -> list[dict]:
        return batch_rows(self.totals(), epoch, data)


def clip_parts_inputs(group_sums: torch.Tensor, clipped_sum: torch.Tensor, norms: torch.Tensor,
                      coefficients: torch.Tensor, group: torch.Tensor, *, n_groups: int) -> tuple[torch.Tensor, ...]:
    """What :func:`~dpfair_analysis.training.batch_terms.batch_direction_magnitude` needs of one batch, on the CPU
    in float64: the groups' unclipped sums S_a (K, P) and the clipped sum Sbar (P,) as given (flattened), and
    sum_{i in a} ||g_i||^2, sum_{i in a} c_i ||g_i||^2 and n_a from the norms, coefficients c_i and groups."""
    squares = norms.to(torch.float64).cpu() ** 2
    group, c = group.cpu(), coefficients.to(torch.float64).cpu()
    return (group_sums.to(torch.float64).cpu(), clipped_sum.to(torch.float64).cpu(),
            torch.bincount(group, weights=squares, minlength=n_groups),
            torch.bincount(group, weights=c * squares, minlength=n_groups),
            torch.bincount(group, minlength=n_groups).to(torch.float64))


def flat_sum(total: Grads) -> torch.Tensor:
    """A weighted sum ``{name: tensor}`` as one vector (parameters in order)."""
    return torch.cat([t.reshape(-1) for t in total.values()])


class ClipParts:
    """The clipping's first-order direction and magnitude errors per group, averaged over an epoch's measured
    steps (:func:`~dpfair_analysis.training.batch_terms.batch_direction_magnitude`; the history's ``batches`` rows
    ``clip_direction`` and ``clip_magnitude``). A measurement costs K + 1 weighted sums of the batch's per-sample
    gradients, so one step in K + 1 is measured (the first, then every (K + 1)-th): about one weighted sum per
    step. Like the other ``batches`` rows, a diagnostic of the private data, not covered by the guarantee."""

    def __init__(self, n_groups: int, *, lr: float, expected_batch_size: float) -> None:
        self.n_groups, self.lr, self.expected_batch_size = n_groups, lr, expected_batch_size
        self.stride, self.calls = n_groups + 1, 0
        self._reset()

    def _reset(self) -> None:
        self.sums = torch.zeros(self.n_groups + 1, 2, dtype=torch.float64)
        self.counts = torch.zeros(self.n_groups + 1, dtype=torch.float64)

    def due(self) -> bool:
        """Whether this step is measured (call once per step)."""
        self.calls += 1
        return (self.calls - 1) % self.stride == 0

    def add(self, *inputs: torch.Tensor) -> None:
        """One measured batch, from :func:`clip_parts_inputs`'s tuple."""
        direction, magnitude = batch_direction_magnitude(*inputs, lr=self.lr,
                                                         expected_batch_size=self.expected_batch_size)
        present = torch.isfinite(direction) & torch.isfinite(magnitude)
        self.sums[present] += torch.stack([direction, magnitude], dim=1)[present]
        self.counts += present.to(torch.float64)

    def take_rows(self, epoch: int, data: GroupedDataset) -> list[dict]:
        """The epoch's means (split ``batches``; NaN where no measured batch had the group); then start again."""
        rows = []
        means = self.sums / self.counts.unsqueeze(1)   # 0 / 0 is NaN: never measured
        for name, (direction, magnitude) in zip([*data.group_names, "all"], means.tolist()):
            for metric, value in (("clip_direction", direction), ("clip_magnitude", magnitude)):
                rows.append({"epoch": epoch, "split": "batches", "group": name, "metric": metric, "value": value})
        self._reset()
        return rows


def batch_rows(totals: torch.Tensor, epoch: int, data: GroupedDataset) -> list[dict]:
    """The tidy rows (split ``batches``) of per-group sums (n_groups, 4) -- count, loss, norm, clipped: the
    means per sampled row for each group and for all, and the rows seen.

    Parameters
    ----------
    totals : torch.Tensor
        (n_groups, 4) float64 sums: rows seen, loss, gradient norm, clipped rows.
    epoch : int
        The epoch the rows report.
    data : GroupedDataset
        The training data (its group names).
    """
    per_group = totals.tolist()
    everyone = totals.sum(0).tolist()
    rows = []
    for name, (n, *sums) in [("all", everyone), *zip(data.group_names, per_group)]:
        for metric, total in zip(("loss", "grad_norm", "frac_clipped"), sums):
            rows.append({"epoch": epoch, "split": "batches", "group": name, "metric": metric,
                         "value": total / n if n > 0 else math.nan})
        rows.append({"epoch": epoch, "split": "batches", "group": name, "metric": "n_seen", "value": float(n)})
    return rows


@torch.no_grad()
def predict_logits(model: nn.Module, X: torch.Tensor, *, batch_size: int | None = None) -> torch.Tensor:
    """Model logits for all rows, in chunks of ``batch_size`` rows (default :func:`evaluation_chunk`), under
    :func:`torch.inference_mode` (no autograd graph is kept for any chunk; without it one full-MNIST evaluation
    took +1.1 GB of resident memory) into one preallocated output (no second copy from concatenating
    chunks). The logits are an ordinary tensor, usable with autograd later."""
    batch_size = evaluation_chunk(model) if batch_size is None else batch_size
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            first = model(X[:batch_size])
        out = torch.empty((len(X), *first.shape[1:]), dtype=first.dtype, device=first.device)
        out[:len(first)] = first
        with torch.inference_mode():
            for i in range(batch_size, len(X), batch_size):
                out[i:i + batch_size] = model(X[i:i + batch_size])
    finally:
        model.train(was_training)
    return out


def evaluation_chunk(model: nn.Module) -> int:
    """Rows per forward pass when evaluating: 512 for a convolutional model (on the CPU the MNIST CNN evaluates
    ~35% faster than in chunks of 4096, whose activations fall out of cache), 8192 for the others (a
    logistic regression or MLP is per-call overhead at 512 rows: over Adult's 45,222 rows 3.4x and 1.3x faster).

    Parameters
    ----------
    model : torch.nn.Module
        The model evaluated.
    """
    return 512 if any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules()) else 8192


def evaluate_groups(model: nn.Module, splits: dict[str, GroupedDataset | None], *, epoch: int,
                    extra: Callable[[torch.Tensor, GroupedDataset], dict[str, float]] | None = None) -> list[dict]:
    """Tidy rows {epoch, split, group, metric, value}: loss and accuracy of each split (``None`` skipped),
    for the whole population (group ``all``) and each group (accuracy from
    :func:`~dpfair_analysis.fairness.metrics.per_group_accuracy`, one bincount); ``extra(logits, data)`` adds
    population-level metrics (e.g. a fairness violation) as group ``all`` rows. Every trainer's evaluation."""
    rows = []
    for split, data in splits.items():
        if data is None:
            continue
        logits = predict_logits(model, data.X)
        losses = F.cross_entropy(logits, data.y, reduction="none").double().cpu()
        group = data.group.cpu()
        correct = (logits.argmax(dim=1) == data.y).cpu()
        accuracy = {"all": float(correct.double().mean()) if len(correct) else math.nan,
                    **dict(zip(data.group_names, per_group_accuracy(correct, group, n_groups=data.n_groups).tolist()))}
        for k, name in [(None, "all"), *enumerate(data.group_names)]:
            mask = torch.ones_like(group, dtype=torch.bool) if k is None else group == k
            loss = float(losses[mask].mean()) if bool(mask.any()) else math.nan
            rows.append({"epoch": epoch, "split": split, "group": name, "metric": "loss", "value": loss})
            rows.append({"epoch": epoch, "split": split, "group": name, "metric": "accuracy",
                         "value": accuracy[name]})
        for metric, value in (extra(logits, data) if extra is not None else {}).items():
            rows.append({"epoch": epoch, "split": split, "group": "all", "metric": metric, "value": float(value)})
    return rows


def evaluation_splits(train_data: GroupedDataset, test_data: GroupedDataset | None, *, evaluate_train: str,
                      final_epoch: int, eval_every: int = 1) -> Callable[[int], dict[str, GroupedDataset | None]]:
    """The splits evaluated after epoch e: none unless e is 0, a multiple of ``eval_every`` or ``final_epoch``; then
    the test set, and the training set too (``evaluate_train`` ``"every_epoch"``) or only at e = 0 and the final
    epoch (``"last_epoch"``)."""
    def splits(epoch: int) -> dict[str, GroupedDataset | None]:
        ends = epoch in (0, final_epoch)
        if not (ends or epoch % eval_every == 0):
            return {}
        train_now = evaluate_train == "every_epoch" or ends
        return {"train": train_data if train_now else None, "test": test_data}
    return splits


def epsilon_row(epoch: int, epsilon: float | None) -> dict:
    """The history's row for the epsilon spent after ``epoch`` (NaN for a non-private run)."""
    return {"epoch": epoch, "split": "privacy", "group": "all", "metric": "epsilon",
            "value": math.nan if epsilon is None else float(epsilon)}


def run_steps(model: nn.Module, *, total_steps: int, epoch_ends: Mapping[int, int], step: Callable[[int], dict],
              evaluate: Callable[[int], list[dict]], epsilon: Callable[[], float | None],
              callbacks: Sequence[TrainCallback] = (), state: Any = None, desc: str = "train",
              progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The one driver of every trainer (the DP-SGD loop, DP-FedAvg, PF-LD): T steps with a progress bar, the
    callbacks at every iterate, an evaluation and the epsilon spent before the first step and after each epoch.

    For t = 1..T: every ``callback(t - 1, model, state)``, then ``step(t)`` (the trainer's update and
    releases; returns the step's record). After step t = the last of epoch e (``epoch_ends[t] == e``):
    ``evaluate(e)`` (the trainer's tidy rows: its evaluation and whatever else it does between epochs, e.g.
    PF-LD's dual update) and the epsilon row. After every :data:`HEAP_TRIM_STEPS`-th step and every
    evaluation, :func:`release_free_heap`. Finally every ``callback(T, model, state)``.

    Returns the history (rows of ``evaluate`` and the epsilon rows, each with the ``step`` it was taken at,
    0 before training) and the steps (one row per step: ``step`` and the record).
    """
    history = [*evaluate(0), epsilon_row(0, epsilon())]
    for row in history:
        row["step"] = 0
    records = []
    for t in tqdm(range(1, total_steps + 1), desc=desc, disable=not progress, leave=False):
        for callback in callbacks:
            callback(t - 1, model, state)
        records.append({"step": t, **step(t)})
        if t in epoch_ends:
            rows = [*evaluate(epoch_ends[t]), epsilon_row(epoch_ends[t], epsilon())]
            for row in rows:
                row["step"] = t
            history += rows
        if t % HEAP_TRIM_STEPS == 0 or t in epoch_ends:
            release_free_heap()
    for callback in callbacks:
        callback(total_steps, model, state)
    return pd.DataFrame(history), pd.DataFrame(records)


#: Steps between two :func:`release_free_heap` calls of :func:`run_steps` (and after every evaluation)
HEAP_TRIM_STEPS = 32


def release_free_heap() -> bool:
    """Give the C heap's free pages back to the operating system (glibc's ``malloc_trim(0)``); False where there is
    no such call (another C library or system), and nothing is done.

    A step allocates tensors of a few hundred kB to 25 MB whose sizes move with the Poisson batch size; glibc
    serves them from its heap once they are below its (adaptive) mmap threshold, and the holes they leave are not
    returned: a full-MNIST CNN run's resident set grew by ~2 MB a step (from 653 MB to 865 MB over 80 steps, 338
    MB of it free heap; 1.1 GB after 250 steps). Trimming changes no number; it costs page faults when the pages
    are used again, which every :data:`HEAP_TRIM_STEPS` steps is a small share of the steps' time.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def schedule(n: int, config) -> tuple[int, dict[int, int]]:
    """Total steps and {last step of epoch e: e} for a config with ``batch_size``, ``epochs`` and
    optionally ``sampling`` (default Poisson) and ``max_steps``.

    Poisson sampling: T = ceil(epochs * n / b) steps (the papers' accountant's count) and
    epoch e ends at step ceil(e * n / b). Shuffled batches: ceil(n / b) batches per epoch
    (the last one smaller). ``max_steps`` cuts the run; its last step then closes the
    epoch it falls in. Every trainer's schedule.
    """
    b, sampling = config.batch_size, getattr(config, "sampling", "poisson")
    if sampling == "poisson":
        ends = {math.ceil(e * n / b): e for e in range(1, config.epochs + 1)}
    else:
        ends = {e * math.ceil(n / b): e for e in range(1, config.epochs + 1)}
    total = max(ends)
    max_steps = getattr(config, "max_steps", None)
    if max_steps is not None and max_steps < total:
        total = max_steps
        ends = {step: e for step, e in ends.items() if step < total}
        per_epoch = n / b if sampling == "poisson" else math.ceil(n / b)
        ends[total] = max(1, math.ceil(total / per_epoch - 1e-9))
    return total, ends


#: The Poisson sampler's version: 1 drew n uniforms per step (rows with u_i < q); 2 (:func:`poisson_batch`) draws
#: |B| ~ Binomial(n, q) and a uniform subset of that size. Both are exactly Poisson sampling, but the same seed
#: gives other batches, so runs of the two are not mixed silently: every run record names its sampler
#: (:class:`~dpfair_analysis.experiments.cache.RunRecords`).
POISSON_SAMPLER_VERSION = 2


def batch_indices(n: int, batch_size: int, generator: torch.Generator, *, sampling: str = "poisson"):
    """Row indices of each step's batch, without end: Poisson (each row with probability b/n, what the
    accountant assumes; :func:`poisson_batch`) or shuffled fixed-size batches. Every trainer's sampler."""
    q = batch_size / n
    binomial = _binomial_parameters(n, q)  # made once: a tensor per step is a measurable share of a small step
    while True:
        if sampling == "poisson":
            yield uniform_subset(n, int(torch.binomial(*binomial, generator=generator)), generator)
        else:
            order = torch.randperm(n, generator=generator)
            yield from (order[start:start + batch_size] for start in range(0, n, batch_size))


def poisson_batch(n: int, q: float, generator: torch.Generator) -> torch.Tensor:
    """A Poisson-sampled batch -- every row of range(n) in it independently with probability q -- in O(b) work
    instead of n uniforms: its size |B| ~ Binomial(n, q), then a uniformly random subset of that size (sorted).

    It is exactly Poisson sampling, the distribution the accountant assumes: for any S of size k,
    P(B = S) = P(|B| = k) / C(n, k) = C(n, k) q^k (1 - q)^(n - k) / C(n, k) = q^k (1 - q)^(n - k), the product of
    the rows' independent inclusions (tests/core/test_training.py compares the two distributions).
    """
    return uniform_subset(n, int(torch.binomial(*_binomial_parameters(n, q), generator=generator)), generator)


def _binomial_parameters(n: int, q: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(float(n), dtype=torch.float64), torch.tensor(float(q), dtype=torch.float64)


def uniform_subset(n: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """A uniformly random k-subset of range(n), sorted, in O(k log k) for k << n.

    Draw m >= k iid uniform values from range(n) and keep the distinct ones, D of them: given D = d their set is
    a uniformly random d-subset (the draws' law is invariant under relabelling range(n)), so a uniformly random
    k of them (a permutation of the d) is a uniform k-subset. When D < k the attempt is discarded and m doubled
    (each attempt is independent, so the accepted one keeps that symmetry).
    """
    if k == 0:
        return torch.zeros(0, dtype=torch.long)
    if 2 * k > n:  # most rows: a permutation is as cheap
        return torch.randperm(n, generator=generator)[:k].sort().values
    draws = k + k // 4 + 8
    while True:
        values = torch.unique(torch.randint(n, (draws,), generator=generator))
        if len(values) >= k:
            return values[torch.randperm(len(values), generator=generator)[:k]].sort().values
        draws *= 2


def make_generators(seed: int, count: int) -> tuple[torch.Generator, ...]:
    """``count`` independent generators derived from ``seed`` (numpy's SeedSequence); the first k of
    ``count`` are the same for every count >= k. Every trainer's randomness."""
    states = np.random.SeedSequence(check_seed(seed)).generate_state(count, dtype=np.uint64)
    return tuple(torch.Generator().manual_seed(int(s) & 0x7FFF_FFFF_FFFF_FFFF) for s in states)


def _check_labels_fit(model: nn.Module, data: GroupedDataset, name: str) -> None:
    with torch.no_grad():
        n_out = model(data.X[:1]).shape[1]
    if data.n_classes > n_out:
        raise ValueError(f"{name} has {data.n_classes} label classes but the model outputs {n_out} logits; "
                         f"labels must be in 0..{n_out - 1}")
