"""Naive reweighting (paper 000, Algorithm 3): group weights theta^k = (b/K) / b~^k from privately counted group
sizes, uniform clipping bound C; the policy is :class:`~dpfair_analysis.training.dpsgdf.NaiveReweighting`."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpfair_analysis.training.methods.registry import Method, register
from dpfair_analysis.validation import check_positive

#: The count noise as a multiple of sigma (paper 000: sigma_1 = 10 sigma_2); a flag shared with DPSGD-F and FairDP.
COUNT_NOISE_RATIO = field(default=10.0, metadata={
    "flag": "--count-noise-ratio", "type": float,
    "help": "count noise sigma_1 as a multiple of --sigma (default 10, paper 000's)"})


@dataclass(frozen=True)
class NaiveOptions:
    """``count_noise_ratio``: sigma_1 / sigma of the noisy group sizes."""

    count_noise_ratio: float = COUNT_NOISE_RATIO

    def __post_init__(self) -> None:
        check_positive(self.count_noise_ratio, "count_noise_ratio")


def _policy(options: NaiveOptions, context):
    from dpfair_analysis.training.dpsgdf import NaiveReweighting

    sigma = context.noise_multiplier
    return NaiveReweighting(context.clip_bound, sigma, options.count_noise_ratio * sigma)


def _diagnosis(options, norms, group, view):
    """Algorithm 3 on the expected group sizes of a batch, q n_k."""
    import torch

    from dpfair_analysis.gradients import clip_factors
    from dpfair_analysis.training.dpsgdf import naive_group_weights

    theta = naive_group_weights(view.sampling_rate * view.group_sizes, expected_batch_size=view.batch_size)
    bounds = torch.full_like(norms, view.clip_bound)
    return bounds, theta[group] * clip_factors(norms, bounds), view.noise_multiplier * view.clip_bound * \
        float(theta.max())


METHOD = register(Method(
    name="naive", label="Naive", summary="paper 000's Naive reweighting: group weights from private counts",
    options=NaiveOptions, policy=_policy, equal_privacy=True, diagnosis=_diagnosis,
    canary=lambda record, clip, *, group: (clip, record[f"theta[{group}]"])))
