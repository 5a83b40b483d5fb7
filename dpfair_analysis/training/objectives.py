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
  losses the history reports, as the dict ``{name: (n, *shape)}`` (the reference);
* ``per_sample`` -- the same as a :class:`~dpfair_analysis.gradients.PerSampleGradients`
  (norms and weighted sums, which is all a step uses); the loop calls this one, so an
  objective may answer it without forming the g_i (:class:`CrossEntropy` does, through
  :mod:`dpfair_analysis.fast_gradients`). Objectives without it get
  ``per_sample_gradients`` wrapped (:func:`batch_gradients`);
* ``release`` -- after the policy chose its bounds: the step's own private releases.

An objective's per-sample gradient may depend on the data only through sample i itself
and through *already released* (hence public) quantities; otherwise one record could
move every other record's clipped contribution and DP-SGD's sensitivity argument fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol

import torch
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fast_gradients import CLIPPED_SUMS, fast_per_sample_gradients
from dpfair_analysis.gradients import Grads, MaterialisedGradients, PerSampleGradients, \
    per_sample_gradients_and_losses
from dpfair_analysis.validation import check_choice

#: Per-sample gradient engines of :class:`CrossEntropy`: the fast path (default) and the reference.
ENGINES = ("fast", "vmap")


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


def batch_gradients(objective: Objective, model: nn.Module, X: torch.Tensor, y: torch.Tensor,
                    group: torch.Tensor, *, params: Mapping[str, torch.Tensor]
                    ) -> tuple[PerSampleGradients, torch.Tensor]:
    """(per-sample gradients of ``objective`` as a PerSampleGradients, plain losses L_i).

    ``objective.per_sample`` if it has one, else its ``per_sample_gradients`` wrapped in
    :class:`~dpfair_analysis.gradients.MaterialisedGradients`.
    """
    per_sample = getattr(objective, "per_sample", None)
    if per_sample is not None:
        return per_sample(model, X, y, group, params=params)
    grads, losses = objective.per_sample_gradients(model, X, y, group, params=params)
    return MaterialisedGradients(grads), losses


@dataclass(frozen=True)
class CrossEntropy:
    """psi_i = L_i = CE(f(x_i; theta), y_i): plain (DP-)SGD; releases nothing of its own.

    ``engine`` picks how the loop gets the per-sample norms and clipped sums:
    ``"fast"`` (default; :mod:`dpfair_analysis.fast_gradients`, no per-sample gradients
    formed, clipped sum by ``clipped_sum`` = ``"bookkeeping"`` or ``"backward"``) or
    ``"vmap"`` (the reference, ``vmap(grad)``). Both give the same numbers up to
    floating-point rounding (tested to 1e-10 relative in float64).
    ``per_sample_gradients`` always returns the materialised reference gradients.
    """

    engine: str = "fast"
    clipped_sum: str = "bookkeeping"
    name = "cross_entropy"

    def __post_init__(self) -> None:
        check_choice(self.engine, "engine", ENGINES)
        check_choice(self.clipped_sum, "clipped_sum", CLIPPED_SUMS)

    def prepare(self, data: GroupedDataset, *, generator: torch.Generator) -> tuple[float, ...]:
        return ()

    def planned_noise_multipliers(self) -> tuple[float, ...]:
        return ()

    def per_sample_gradients(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                             params: Mapping[str, torch.Tensor]) -> tuple[Grads, torch.Tensor]:
        return per_sample_gradients_and_losses(model, X, y, params=params)

    def per_sample(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                   params: Mapping[str, torch.Tensor]) -> tuple[PerSampleGradients, torch.Tensor]:
        if self.engine == "vmap":
            grads, losses = per_sample_gradients_and_losses(model, X, y, params=params)
            return MaterialisedGradients(grads), losses
        return fast_per_sample_gradients(model, X, y, params=params, clipped_sum=self.clipped_sum)

    def release(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                params: Mapping[str, torch.Tensor], bounds: torch.Tensor, expected_batch_size: float,
                generator: torch.Generator) -> dict[str, float]:
        return {}
