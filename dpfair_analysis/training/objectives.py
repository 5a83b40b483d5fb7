"""What the training loop differentiates per sample, and what else each step releases.

The loop (:mod:`.loop`) clips and noises per-sample gradients g_i = grad psi_i(theta) of a
per-sample objective psi_i. The plain objective is the cross-entropy loss; paper 001's
mitigation (Eq. 6, :mod:`.mitigation`) adds group terms whose coefficients come from
statistics it releases privately on the same batch. An objective states the noise
multipliers of everything it releases, so the loop can account for it:

* ``prepare`` -- once, before training: releases that touch the whole data set
  (unsampled Gaussian events in the ledger);
* ``planned_noise_multipliers`` -- the releases each step makes on the sampled batch
  (composed with the gradient release into one sampled-Gaussian event per step);
* ``per_sample_gradients`` -- (g_i, L_i), the gradients the policy clips and the plain
  losses the history reports;
* ``release`` -- after the policy chose its bounds: the step's own private releases.

An objective's per-sample gradient may depend on the data only through sample i itself
and through *already released* (hence public) quantities; otherwise one record could
move every other record's clipped contribution and DP-SGD's sensitivity argument fails.
"""

from __future__ import annotations

from typing import Mapping, Protocol

import torch
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import Grads, per_sample_gradients_and_losses


class Objective(Protocol):
    """The per-sample objective of a training run; see the module docstring."""

    name: str

    def prepare(self, data: GroupedDataset, *, generator: torch.Generator) -> tuple[float, ...]:
        ...

    def planned_noise_multipliers(self) -> tuple[float, ...]:
        ...

    def per_sample_gradients(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                             params: Mapping[str, torch.Tensor]) -> tuple[Grads, torch.Tensor]:
        ...

    def release(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                params: Mapping[str, torch.Tensor], bounds: torch.Tensor, expected_batch_size: float,
                generator: torch.Generator) -> dict[str, float]:
        ...


class CrossEntropy:
    """psi_i = L_i = CE(f(x_i; theta), y_i): plain (DP-)SGD; releases nothing of its own."""

    name = "cross_entropy"

    def prepare(self, data: GroupedDataset, *, generator: torch.Generator) -> tuple[float, ...]:
        return ()

    def planned_noise_multipliers(self) -> tuple[float, ...]:
        return ()

    def per_sample_gradients(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                             params: Mapping[str, torch.Tensor]) -> tuple[Grads, torch.Tensor]:
        return per_sample_gradients_and_losses(model, X, y, params=params)

    def release(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                params: Mapping[str, torch.Tensor], bounds: torch.Tensor, expected_batch_size: float,
                generator: torch.Generator) -> dict[str, float]:
        return {}
