"""DP-FedAvg (McMahan et al. 2018): user-level DP over simulated clients -- Poisson-sampled clients, each update
clipped, the average noised; the trainer is :mod:`dpfair_analysis.training.fedavg`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from dpfair_analysis.names import FEDAVG_PARTITIONS
from dpfair_analysis.training.methods.registry import Method, register
from dpfair_analysis.validation import check_choice, check_positive, check_positive_int


@dataclass(frozen=True)
class FedAvgOptions:
    """K ``clients``; m ``clients_per_round`` (None: round(b K / n), so that the client sampling rate m/K
    equals DP-SGD's q = b/n and, at the same sigma, a round costs what a DP-SGD step costs); ``partition``;
    local SGD (``local_epochs``, ``local_batch``, ``local_lr``); the update clip S (None: C x local_lr x local
    steps per client -- the largest update of a client whose every local gradient has norm C); the noise
    multiplier (None: the run's sigma)."""

    clients: int = field(default=1000, metadata={
        "flag": "--clients", "type": int, "help": "number of simulated clients K, at most the training rows "
                                                  "(default 1000)"})
    clients_per_round: int | None = field(default=None, metadata={
        "flag": "--clients-per-round", "type": int,
        "help": "expected clients per round m, at most --clients (default round(b K / n): the client sampling "
                "rate equals DP-SGD's)"})
    partition: str = field(default="iid", metadata={
        "flag": "--partition", "type": str, "choices": FEDAVG_PARTITIONS,
        "help": "clients IID or non-IID by group (McMahan et al.'s shards) (default iid)"})
    local_epochs: int = field(default=1, metadata={"flag": "--local-epochs", "type": int,
                                                   "help": "local epochs (default 1)"})
    local_batch: int = field(default=16, metadata={"flag": "--local-batch", "type": int,
                                                   "help": "local batch size (default 16)"})
    local_lr: float = field(default=0.1, metadata={"flag": "--local-lr", "type": float,
                                                   "help": "local step size (default 0.1)"})
    update_clip: float | None = field(default=None, metadata={
        "flag": "--update-clip", "type": float, "help": "clip S of a client's update (default C x local lr x local "
                                                        "steps)"})
    noise_multiplier: float | None = field(default=None, metadata={
        "flag": "--fedavg-sigma", "type": float, "help": "noise multiplier (default --sigma); its epsilon is "
                                                         "user-level"})

    def __post_init__(self) -> None:
        check_positive_int(self.clients, "clients")
        if self.clients_per_round is not None:
            check_positive_int(self.clients_per_round, "clients_per_round")
            if self.clients_per_round > self.clients:
                raise ValueError(f"clients_per_round={self.clients_per_round} exceeds clients={self.clients}")
        check_choice(self.partition, "partition", FEDAVG_PARTITIONS)
        check_positive_int(self.local_epochs, "local_epochs")
        check_positive_int(self.local_batch, "local_batch")
        check_positive(self.local_lr, "local_lr")
        for name in ("update_clip", "noise_multiplier"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)


def fedavg_config(options: FedAvgOptions, *, n_train: int, seed: int, clip_bound: float, noise_multiplier: float,
                  train, max_rounds: int | None = None):
    """The :class:`~dpfair_analysis.training.fedavg.FedAvgConfig` of a run on ``n_train`` rows at the
    comparison's C, sigma and training settings ``train`` (a TrainConfig); ValueError if there are fewer rows
    than clients."""
    from dpfair_analysis.training.fedavg import FedAvgConfig

    if options.clients > n_train:
        raise ValueError(f"clients={options.clients} exceeds the {n_train} training rows (every client needs a row)")
    per_round = options.clients_per_round if options.clients_per_round is not None else \
        max(1, round(train.batch_size * options.clients / n_train))
    rows = math.ceil(n_train / options.clients)
    local_steps = math.ceil(rows / options.local_batch) * options.local_epochs
    clip = options.update_clip if options.update_clip is not None else clip_bound * options.local_lr * local_steps
    return FedAvgConfig(n_clients=options.clients, clients_per_round=per_round, partition=options.partition,
                        local_epochs=options.local_epochs, local_batch_size=options.local_batch,
                        local_lr=options.local_lr, update_clip=clip,
                        noise_multiplier=options.noise_multiplier or noise_multiplier, epochs=train.epochs,
                        max_rounds=max_rounds, delta=train.delta, seed=seed, accounting=train.accounting,
                        evaluate_train=train.evaluate_train)


def equal_privacy_rounds(fed, target_epsilon: float) -> int:
    """Rounds DP-FedAvg may run before its user-level epsilon exceeds ``target_epsilon`` (DP-SGD's record-level
    epsilon for the full run); ValueError if even one round spends more."""
    from dpfair_analysis.privacy.accounting import max_steps_within

    rounds = max_steps_within(target_epsilon, fed.delta, sampling_rate=fed.sampling_rate,
                              noise_multiplier=fed.noise_multiplier, max_steps=fed.rounds(), accounting=fed.accounting)
    if rounds == 0:
        raise ValueError(f"dpfedavg: one round at client sampling rate {fed.sampling_rate:g} and noise multiplier "
                         f"{fed.noise_multiplier:g} already spends more than DPSGD's epsilon; raise the number of "
                         "clients or the noise")
    return rounds


def _run_config(options: FedAvgOptions, *, n_train: int, seed: int, context, train):
    return fedavg_config(options, n_train=n_train, seed=seed, clip_bound=context.clip_bound,
                         noise_multiplier=context.noise_multiplier, train=train)


def _trainer(fed, *, model, train_data, test_data, equal_privacy_epsilon: float | None,
             progress: bool):
    if equal_privacy_epsilon is not None:
        fed = replace(fed, max_rounds=equal_privacy_rounds(fed, equal_privacy_epsilon))
    from dpfair_analysis.training.fedavg import train_dpfedavg

    return train_dpfedavg(model, train_data, fed, test_data=test_data, progress=progress)


def _run_info(result) -> dict:
    return {"rounds": int(result.steps["step"].max()), "client_sampling_rate": result.config.sampling_rate,
            "update_clip": result.config.update_clip, "n_clients": result.config.n_clients}


METHOD = register(Method(
    name="dpfedavg", label="DP-FedAvg", summary="DP-FedAvg (McMahan et al. 2018): user-level DP over clients",
    options=FedAvgOptions, trainer=_trainer, run_config=_run_config, run_info=_run_info, equal_privacy=True,
    privacy_unit="client (user-level)"))
