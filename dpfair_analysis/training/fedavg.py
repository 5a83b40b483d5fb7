"""DP-FedAvg (McMahan, Ramage, Talwar & Zhang, ICLR 2018): user-level DP federated averaging, simulated.

Paper 002 compares FairDP with DP-FedAvg. Nothing about its setting is in our copy (a fragment), so
this follows McMahan et al. 2018 (Algorithm 1, "DP-FedAvg" with the fixed-denominator estimator
f~_f and flat clipping) on clients simulated by partitioning the training set:

* **clients**: the n training rows split into K clients (:func:`partition_clients`): ``"iid"``
  (a random partition into K near-equal parts) or ``"group"`` (non-IID by group, McMahan et al.
  2017's shards: rows sorted by group, cut into 2K shards, two random shards per client, so most
  clients hold one or two groups);
* **round t**: every client joins independently with probability q = m/K (Poisson; m =
  ``clients_per_round``, the expected number); each joined client k runs ``local_epochs`` of
  minibatch SGD (batch ``local_batch_size``, step ``local_lr``, the model's L2 penalty included)
  from the global theta_t on its own rows and reports the pseudo-gradient
  Delta_k = theta_t - theta_k (the negated model update; Reddi et al. 2021's server-optimiser form);
* **server**: Delta_k clipped to l2 norm S (``update_clip``, flat clipping), summed, noised with
  N(0, sigma^2 S^2 I) and divided by the *expected* number of clients m (f~_f with weights w_k = 1,
  so the sum's sensitivity is S whatever the batch); theta_{t+1} = theta_t - eta_s (sum + noise)/m
  (``server_lr`` eta_s = 1: plain averaging of the clipped updates).

The server's release is the training loop's own :func:`~.loop.release_step` with
:class:`~.clipping.UniformClipping` (S, sigma) applied to the clients' pseudo-gradients (one "sample"
per client), so the audited release code is the one that trains. Per-client weights n_k / n^ of the
paper are not used (clients here have n/K +- 1 rows; uniform weights keep the sensitivity at S).

**User-level accounting.** Neighbouring data sets differ in one client's whole data (add/remove
one client). Each round is a Poisson-sampled Gaussian with q = m/K and multiplier sigma (one client
changes the clipped sum by at most S; noise sigma S), recorded in a
:class:`~dpfair_analysis.privacy.accounting.PrivacyLedger`, for a partition into clients that is fixed
(does not depend on the data). **It is not a record-level guarantee with the same (epsilon, delta):**
removing one record changes its client's data, which is a *replaced* client (two add/remove steps: on a
compare-like setting, n = 36,177, 1,000 clients, 2,858 rounds, the user-level epsilon 2.40 becomes 3.85 for a
record change inside a client, above DP-SGD's record-level 2.41 by PLD); and :func:`partition_clients` deals
the clients from the row count and groups, so one row more or less re-deals every client. A record-level
statement needs a partition that does not depend on the other rows and replace-one-client accounting.
The result's ``steps`` columns ``clients``, ``update_norm_mean`` and ``frac_clipped`` are exact statistics of the
round (no noise): for inspection, outside the guarantee, like the other trainers' batch statistics.

**Degenerate case.** With K = n (one row per client), one local step on the full local batch of
one row, local step r and S = r C, the pseudo-gradient is r g_i, its clip is r clip(g_i, C), and the
server step is theta - (sum_i clip(g_i, C) + N(0, sigma^2 C^2 I)) r / m: DP-SGD with Poisson
sampling at q = m/n, step r, clip C and multiplier sigma, with the same accounting (tested to the
same numbers, draw for draw, in tests/core/test_fedavg.py).

Why not Flower (``flwr``): it installs with torch pinned but downgrades ``packaging`` (26.3 -> 25.0)
and adds ~43 packages (a gRPC/FastAPI server stack) to the shared environment; its DP strategies
sample a fixed number of clients per round, divide the noise by the number sampled and leave the
accounting to the user, which is not the Poisson-sampled, fixed-denominator mechanism the
accountant models. Built on the toolkit's release and accounting instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from dp_accounting import dp_event
from torch import nn
from torch.func import functional_call, grad

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import MaterialisedGradients, parameters_of
from dpfair_analysis.privacy.accounting import AccountingSpec, PrivacyLedger
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import EVALUATE_TRAIN, TrainCallback, TrainingResult, apply_update, \
    batch_indices, check_finite, evaluate_groups, evaluation_splits, make_generators, release_step, run_steps, schedule
from dpfair_analysis.validation import check_choice, check_delta, check_positive, check_positive_int, check_seed

#: How the training rows are dealt to clients (:func:`partition_clients`): IID, or non-IID by group (McMahan et
#: al.'s shards).
PARTITIONS = ("iid", "group")


@dataclass(frozen=True)
class FedAvgConfig:
    """DP-FedAvg's settings (module docstring). ``epochs`` counts passes over the clients: the run has
    ceil(epochs K / m) rounds (each client joins ``epochs`` rounds in expectation), cut at
    ``max_rounds``; the history is evaluated after each such pass."""

    n_clients: int = 1000
    clients_per_round: int = 50
    partition: str = "iid"
    local_epochs: int = 1
    local_batch_size: int = 16
    local_lr: float = 0.1
    server_lr: float = 1.0
    update_clip: float = 0.1
    noise_multiplier: float = 1.0
    epochs: int = 20
    max_rounds: int | None = None
    delta: float = 1e-6
    seed: int = 0
    accounting: AccountingSpec = field(default_factory=AccountingSpec)
    evaluate_train: str = "every_epoch"

    def __post_init__(self) -> None:
        check_positive_int(self.n_clients, "n_clients")
        check_positive_int(self.clients_per_round, "clients_per_round")
        if self.clients_per_round > self.n_clients:
            raise ValueError(f"clients_per_round={self.clients_per_round} exceeds n_clients={self.n_clients}")
        check_choice(self.partition, "partition", PARTITIONS)
        check_positive_int(self.local_epochs, "local_epochs")
        check_positive_int(self.local_batch_size, "local_batch_size")
        for name in ("local_lr", "server_lr", "update_clip", "noise_multiplier"):
            check_positive(getattr(self, name), name)
        check_positive_int(self.epochs, "epochs")
        if self.max_rounds is not None:
            check_positive_int(self.max_rounds, "max_rounds")
        check_delta(self.delta)
        check_seed(self.seed)
        if not isinstance(self.accounting, AccountingSpec):
            raise TypeError(f"accounting must be an AccountingSpec, got {self.accounting!r}")
        check_choice(self.evaluate_train, "evaluate_train", EVALUATE_TRAIN)

    @property
    def sampling_rate(self) -> float:
        """q = m / K, the client sampling rate (what the ledger records)."""
        return self.clients_per_round / self.n_clients

    def rounds(self) -> int:
        """Planned rounds: ceil(epochs K / m), cut at ``max_rounds``."""
        return schedule(self.n_clients, self._schedule_view())[0]

    def _schedule_view(self) -> SimpleNamespace:
        return SimpleNamespace(batch_size=self.clients_per_round, epochs=self.epochs, sampling="poisson",
                               max_steps=self.max_rounds)


def partition_clients(data: GroupedDataset, n_clients: int, *, partition: str = "iid",
                      seed: int = 0) -> list[torch.Tensor]:
    """Row indices of each of ``n_clients`` clients (module docstring); every row in exactly one client.

    ``"iid"``: a seeded random permutation cut into n_clients near-equal parts. ``"group"``: rows sorted by
    group (random order within a group), cut into 2 n_clients shards (n_clients if there are fewer than
    2 n_clients rows), each client taking two (one) shards chosen at random.
    """
    n = len(data)
    n_clients = check_positive_int(n_clients, "n_clients")
    check_choice(partition, "partition", PARTITIONS)
    if n_clients > n:
        raise ValueError(f"n_clients={n_clients} exceeds the {n} training rows (every client needs a row)")
    generator = torch.Generator().manual_seed(check_seed(seed))
    if partition == "iid":
        order = torch.randperm(n, generator=generator)
        return [part.sort().values for part in torch.tensor_split(order, n_clients)]
    shuffled = torch.randperm(n, generator=generator)
    order = shuffled[torch.argsort(data.group.cpu()[shuffled], stable=True)]
    per_client = 2 if 2 * n_clients <= n else 1
    shards = torch.tensor_split(order, per_client * n_clients)
    assignment = torch.randperm(len(shards), generator=generator).reshape(n_clients, per_client)
    return [torch.cat([shards[int(s)] for s in row]).sort().values for row in assignment]


def local_update(model: nn.Module, params: dict[str, torch.Tensor], X: torch.Tensor, y: torch.Tensor, *,
                 epochs: int, batch_size: int, lr: float, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The pseudo-gradient theta - theta_local after ``epochs`` of minibatch SGD on (X, y) from ``params``
    (mean cross-entropy plus the model's L2 penalty on its weights; shuffled by ``generator``)."""
    l2 = float(getattr(model, "l2", 0.0))
    weights = {name for name in params if not name.endswith("bias")}

    def loss(p: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, p, (xb,)), yb)

    gradient = grad(loss)
    local = {name: p.clone() for name, p in params.items()}
    n = len(y)
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator) if n > 1 else torch.zeros(1, dtype=torch.long)
        for start in range(0, n, batch_size):
            index = order[start:start + batch_size].to(X.device)
            g = gradient(local, X[index], y[index])
            for name in local:
                step = g[name] + l2 * local[name] if (l2 and name in weights) else g[name]
                local[name] = local[name] - lr * step
    return {name: params[name] - local[name] for name in params}


def local_updates(model: nn.Module, params: dict[str, torch.Tensor], clients: list[tuple[torch.Tensor, torch.Tensor]],
                  *, epochs: int, batch_size: int, lr: float, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """:func:`local_update` for several clients at once (``vmap`` over clients), stacked: ``{name: (C, *shape)}``.

    The same arithmetic and the same shuffles, drawn from ``generator`` client by client in the order given
    (as :func:`local_update` called in a loop would): clients' batches are padded to the largest client and
    masked, a padded-only batch makes no step (no loss, no penalty). Tested against the loop."""
    if not clients:
        return {name: torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device) for name, p in params.items()}
    l2 = float(getattr(model, "l2", 0.0))
    weights = {name for name in params if not name.endswith("bias")}
    sizes = [len(y) for _, y in clients]
    longest = max(sizes)
    count = len(clients)
    device = clients[0][0].device
    X = torch.zeros((count, longest, *clients[0][0].shape[1:]), dtype=clients[0][0].dtype, device=device)
    y = torch.zeros((count, longest), dtype=torch.long, device=device)
    for c, (xc, yc) in enumerate(clients):
        X[c, :len(yc)], y[c, :len(yc)] = xc, yc

    def loss(p: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        losses = F.cross_entropy(functional_call(model, p, (xb,)), yb, reduction="none")
        return (losses * mask).sum() / mask.sum().clamp(min=1.0)

    gradient = torch.func.vmap(grad(loss))
    local = {name: p.unsqueeze(0).repeat(count, *([1] * p.dim())) for name, p in params.items()}
    steps = math.ceil(longest / batch_size)
    # the shuffles client by client, each client's epochs in turn: local_update's order of draws
    orders = torch.zeros((epochs, count, steps * batch_size), dtype=torch.long)
    valid = torch.zeros((count, steps * batch_size), dtype=torch.bool)
    for c, n in enumerate(sizes):
        valid[c, :n] = True
        for e in range(epochs):
            orders[e, c, :n] = torch.randperm(n, generator=generator) if n > 1 else torch.zeros(1, dtype=torch.long)
    for epoch in range(epochs):
        for step in range(steps):
            window = slice(step * batch_size, (step + 1) * batch_size)
            index = orders[epoch, :, window].to(device)
            mask = valid[:, window].to(device=device, dtype=X.dtype)
            xb = torch.gather(X, 1, index.view(count, -1, *([1] * (X.dim() - 2))).expand(-1, -1, *X.shape[2:]))
            yb = torch.gather(y, 1, index)
            g = gradient(local, xb, yb, mask)
            active = (mask.sum(1) > 0).to(X.dtype)
            for name in local:
                update = g[name] + l2 * local[name] if (l2 and name in weights) else g[name]
                shape = (count, *([1] * (update.dim() - 1)))
                local[name] = local[name] - lr * update * active.view(shape)
    return {name: params[name].unsqueeze(0) - local[name] for name in params}


def train_dpfedavg(model: nn.Module, data: GroupedDataset, config: FedAvgConfig, *,
                   test_data: GroupedDataset | None = None, progress: bool = True,
                   clients: list[torch.Tensor] | None = None,
                   callbacks: Sequence[TrainCallback] = ()) -> TrainingResult:
    """Train ``model`` in place with DP-FedAvg (module docstring); a :class:`~.loop.TrainingResult` whose
    ``config`` is the :class:`FedAvgConfig`, ``steps`` one row per round and ``epsilon`` the user-level
    epsilon at ``config.delta``. ``clients`` overrides the partition (row indices per client).
    ``callbacks`` are called as ``callback(t, model, None)`` at theta_t for t = 0 .. T, by the loop's driver
    (:func:`~.loop.run_steps`)."""
    if clients is None:
        clients = partition_clients(data, config.n_clients, partition=config.partition, seed=config.seed)
    elif len(clients) != config.n_clients:
        raise ValueError(f"clients has {len(clients)} entries but n_clients={config.n_clients}")
    total_rounds, epoch_ends = schedule(config.n_clients, config._schedule_view())
    sampler_gen, noise_gen, local_gen = make_generators(config.seed, 3)
    policy = UniformClipping(config.update_clip, config.noise_multiplier, name="dpfedavg")
    ledger = PrivacyLedger()
    q = config.sampling_rate
    selections = batch_indices(config.n_clients, config.clients_per_round, sampler_gen, sampling="poisson")
    params = parameters_of(model)
    splits = evaluation_splits(data, test_data, evaluate_train=config.evaluate_train,
                               final_epoch=max(epoch_ends.values()))

    def step(round_: int) -> dict:
        chosen = next(selections)
        stacked = local_updates(model, params, [(data.X[clients[int(c)]], data.y[clients[int(c)]]) for c in chosen],
                                epochs=config.local_epochs, batch_size=config.local_batch_size, lr=config.local_lr,
                                generator=local_gen)
        grads = MaterialisedGradients(stacked)
        norms = grads.norms if len(chosen) else torch.zeros(0)
        decision, _, total = release_step(grads, norms, torch.zeros(len(chosen), dtype=torch.long), policy,
                                          n_groups=1, expected_batch_size=config.clients_per_round,
                                          generator=noise_gen)
        apply_update(params, total, lr=config.server_lr, denominator=config.clients_per_round)
        check_finite(model, step=round_, total_steps=total_rounds, lr=config.server_lr)  # of the released model only
        ledger.record(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(config.noise_multiplier)))
        return {"clients": len(chosen), "noise_std": decision.noise_std,
                "update_norm_mean": float(norms.mean()) if len(norms) else math.nan,
                "frac_clipped": float((norms > config.update_clip).double().mean()) if len(norms) else math.nan}

    history_frame, steps_frame = run_steps(
        model, total_steps=total_rounds, epoch_ends=epoch_ends, step=step,
        evaluate=lambda epoch: evaluate_groups(model, splits(epoch), epoch=epoch),
        epsilon=lambda: ledger.epsilon(config.delta, accounting=config.accounting), callbacks=callbacks,
        desc="dpfedavg", progress=progress)
    epsilon = float(history_frame.query("metric == 'epsilon'")["value"].iloc[-1])
    return TrainingResult(model=model, history=history_frame, steps=steps_frame, ledger=ledger, config=config,
                          policy="dpfedavg", learning_rate=config.local_lr, sampling_matches_accounting=True,
                          epsilon=epsilon)


def client_group_mix(data: GroupedDataset, clients: list[torch.Tensor]) -> pd.DataFrame:
    """Per client, the share of each group among its rows (to show how non-IID a partition is)."""
    rows = []
    for c, index in enumerate(clients):
        counts = np.bincount(data.group[index].cpu().numpy(), minlength=data.n_groups)
        rows.append({"client": c, "rows": int(counts.sum()),
                     **{name: counts[k] / max(counts.sum(), 1) for k, name in enumerate(data.group_names)}})
    return pd.DataFrame(rows)
