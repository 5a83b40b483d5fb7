"""Clipping policies: how each step of the shared loop bounds and noises the gradient sum.

DP-SGD's step is "clip each per-sample gradient to its bound, sum, add Gaussian noise
scaled to the largest contribution". A policy decides, from the batch's per-sample
gradient norms and group ids, the per-sample bounds C_i, optional weights w_i and the
noise; it also says what it released and with which noise multiplier, so the run's
accounting is derived from what actually happened (see ``privacy.accounting``).

The released sum is S = sum_i w_i min(1, C_i/||g_i||) g_i + N(0, s^2 I). One record
contributes at most max_i w_i C_i (its clipped, weighted gradient), so noise
s = sigma * max_i w_i C_i makes the release a Gaussian mechanism with noise multiplier
sigma *relative to the per-record contribution bound*. Noise multipliers are always
stated that way; the neighbouring relation is the accountant's business: under
add/remove-one the contribution bound is the sensitivity, under replace-one the
sensitivity is twice it, which is how dp_accounting's PLD accountant models
``REPLACE_ONE`` for a Gaussian with that multiplier.

Policies here: :class:`NonPrivate` (plain SGD) and :class:`UniformClipping` (DP-SGD,
Abadi et al. 2016). Paper 000's DPSGD-F and Naive reweighting are further policies behind
the same interface (:mod:`.dpsgdf`), as are adaptive-quantile clipping (Opt-Q, Andrew et al.
2021, :mod:`.optq`) and paper 002's FairDP (:mod:`.fairdp`); :mod:`.policies` maps method
names to policies.

Stateful policies. Opt-Q and FairDP carry their clipping bounds from step to step (each
step's bounds are post-processing of the earlier steps' noisy releases). Such a policy has a
``for_run()`` method returning a fresh copy with its bounds back at their start, and every
trainer calls :func:`fresh_policy` before its first step, so two runs with the same policy
object never share state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import torch

from dpfair_analysis.validation import check_positive

@dataclass(frozen=True)
class StepDecision:
    """What a policy decided for one step.

    Attributes
    ----------
    bounds : per-sample clipping bounds C_i, shape (n,) (``inf`` = no clipping).
    noise_std : absolute standard deviation s of the Gaussian noise on the sum.
    noise_multipliers : noise multipliers (std / l2-sensitivity) of every Gaussian
        release made on this step's sampled batch; each becomes a sampled-Gaussian
        event in the run's privacy ledger. Empty for a non-private step.
    weights : per-sample weights w_i, or None for all ones.
    record : scalars to log for this step (bounds per group, released counts, ...).
    """

    bounds: torch.Tensor
    noise_std: float
    noise_multipliers: tuple[float, ...] = ()
    weights: torch.Tensor | None = None
    record: dict[str, float] = field(default_factory=dict)


class ClippingPolicy(Protocol):
    """Decides the bounds and noise of each step; see :class:`StepDecision`.

    ``planned_noise_multipliers()`` gives the multipliers of the releases every step
    makes (the same at every step for the policies here), so a run's privacy can be
    planned before it starts (e.g. to stop at a target epsilon).
    """

    name: str
    private: bool

    def planned_noise_multipliers(self) -> tuple[float, ...]:
        ...

    def decide(self, norms: torch.Tensor, group: torch.Tensor, *, n_groups: int,
               expected_batch_size: float, generator: torch.Generator) -> StepDecision:
        ...


def fresh_policy(policy: ClippingPolicy) -> ClippingPolicy:
    """The policy a run starts with: a stateful policy's ``for_run()`` copy, any other policy as given."""
    start = getattr(policy, "for_run", None)
    return policy if start is None else start()


@dataclass(frozen=True)
class NonPrivate:
    """Plain SGD: no clipping, no noise, nothing released privately."""

    name: str = "sgd"
    private: bool = False

    def planned_noise_multipliers(self) -> tuple[float, ...]:
        return ()

    def decide(self, norms: torch.Tensor, group: torch.Tensor, *, n_groups: int,
               expected_batch_size: float, generator: torch.Generator) -> StepDecision:
        return StepDecision(bounds=torch.full_like(norms, math.inf), noise_std=0.0)


@dataclass(frozen=True)
class UniformClipping:
    """DP-SGD (Abadi et al. 2016; Algorithm 1 of paper 000): C_i = C, s = sigma * C.

    Each record contributes at most C to the clipped sum, so the noise multiplier is sigma.
    """

    clip_bound: float
    noise_multiplier: float
    name: str = "dpsgd"
    private: bool = True

    def __post_init__(self) -> None:
        check_positive(self.clip_bound, "clip_bound")
        check_positive(self.noise_multiplier, "noise_multiplier")

    def planned_noise_multipliers(self) -> tuple[float, ...]:
        return (self.noise_multiplier,)

    def decide(self, norms: torch.Tensor, group: torch.Tensor, *, n_groups: int,
               expected_batch_size: float, generator: torch.Generator) -> StepDecision:
        return StepDecision(bounds=torch.full_like(norms, self.clip_bound),
                            noise_std=self.noise_multiplier * self.clip_bound,
                            noise_multipliers=self.planned_noise_multipliers())


@dataclass(frozen=True)
class CountsThenSumPolicy:
    """Base of the policies that release noisy per-group counts and then the clipped sum, both on the
    step's sampled batch (paper 000's DPSGD-F and Naive; counts tell the policy how to set its bounds
    or weights, so those are post-processing of a release).

    One record adds 1 to one count, so the count vector's contribution bound is 1 and ``count_noise``
    sigma_1 (the standard deviation on each count) is also its noise multiplier; the sum's is
    ``noise_multiplier`` sigma_2 relative to the step's largest contribution. The loop records the two
    as one sampled Gaussian with the joint multiplier.

    Parameters
    ----------
    base_clip : float
        C0.
    noise_multiplier : float
        sigma_2, of the gradient release.
    count_noise : float
        sigma_1, of the count release.
    """

    base_clip: float
    noise_multiplier: float
    count_noise: float

    def __post_init__(self) -> None:
        check_positive(self.base_clip, "base_clip")
        check_positive(self.noise_multiplier, "noise_multiplier")
        check_positive(self.count_noise, "count_noise")

    def planned_noise_multipliers(self) -> tuple[float, float]:
        """(count release, gradient release) multipliers: sigma_1 and sigma_2 at every step."""
        return self.count_noise, self.noise_multiplier

    def noisy_counts(self, counts: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """counts + N(0, sigma_1^2) on each entry (float64)."""
        return counts + torch.randn(counts.shape, generator=generator, dtype=torch.float64) * self.count_noise
