"""FairDP (paper 002, reconstructed): per-group clipping bounds moved to minimise Eq. (4)'s bias-variance term
from privately released statistics; the policy and the reconstruction are :mod:`dpfair_analysis.training.fairdp`."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpfair_analysis.training.methods.dpsgdf import group_bounds_step
from dpfair_analysis.training.methods.registry import Method, register
from dpfair_analysis.training.methods.naive import COUNT_NOISE_RATIO
from dpfair_analysis.validation import check_positive


@dataclass(frozen=True)
class FairDPOptions:
    """``clip_lr`` eta_C of the bounds' geometric update, ``excess_cap`` R on one record's released excess,
    ``count_noise_ratio`` sigma_1 / sigma of its released statistics (counts and capped excess)."""

    clip_lr: float = field(default=0.05, metadata={
        "flag": "--fairdp-clip-lr", "type": float, "help": "the bounds' geometric learning rate (default 0.05)"})
    excess_cap: float = field(default=5.0, metadata={
        "flag": "--excess-cap", "type": float,
        "help": "cap R on one record's released excess ||g||/C - 1 (default 5)"})
    count_noise_ratio: float = COUNT_NOISE_RATIO

    def __post_init__(self) -> None:
        check_positive(self.clip_lr, "clip_lr")
        check_positive(self.excess_cap, "excess_cap")
        check_positive(self.count_noise_ratio, "count_noise_ratio")


def _policy(options: FairDPOptions, context):
    from dpfair_analysis.training.fairdp import FairDP

    if context.dimension is None or context.learning_rate is None:
        raise ValueError("fairdp needs dimension (the model's parameter count, |1| of paper 002 Eq. 4) and "
                         "learning_rate (mu of Eq. 4)")
    sigma = context.noise_multiplier
    count = options.count_noise_ratio * sigma
    return FairDP(context.clip_bound, sigma, count, count, dimension=context.dimension,
                  learning_rate=context.learning_rate, excess_cap=options.excess_cap, clip_lr=options.clip_lr)


def _diagnosis(options, norms, group, view):
    """Each group's bound at the fixed point of FairDP's update on the noise-free statistics, and, where the view
    knows the run's steps, the bound the update moves to on average within them (at most eta_C a step in log C:
    :func:`~dpfair_analysis.training.fairdp.fairdp_run_bounds`; a short run stays near the plan's C)."""
    from dpfair_analysis.training.fairdp import (
        bias_coefficient,
        fairdp_run_bounds,
        fairdp_stationary_bounds,
        noise_coefficient,
    )

    group_bounds = fairdp_stationary_bounds(
        norms, group, n_groups=len(view.group_sizes), initial=view.clip_bound,
        bias_coef=bias_coefficient(view.learning_rate, 1.0 / view.learning_rate),
        noise_coef=noise_coefficient(view.noise_multiplier, view.dimension, view.batch_size),
        excess_cap=options.excess_cap)
    if view.steps is not None:
        group_bounds = fairdp_run_bounds(group_bounds, initial=view.clip_bound, clip_lr=options.clip_lr,
                                         steps=view.steps)
    return group_bounds_step(norms, group, group_bounds, view)


METHOD = register(Method(
    name="fairdp", label="FairDP", summary="paper 002's FairDP: per-group bounds from Eq. (4)'s bias-variance term",
    options=FairDPOptions, policy=_policy, equal_privacy=True, diagnosis=_diagnosis,
    canary=lambda record, clip, *, group: (record[f"C[{group}]"], 1.0)))
