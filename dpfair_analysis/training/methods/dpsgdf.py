"""DPSGD-F (paper 000, Algorithm 2): group clipping bounds C^k = C0 (1 + (m^k/b^k) / (m/b)) from privately counted
clipping rates; the policy is :class:`~dpfair_analysis.training.dpsgdf.DPSGDF` (its rule and guards are there)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpfair_analysis.training.methods.registry import DiagnosisView, Method, register
from dpfair_analysis.training.methods.naive import COUNT_NOISE_RATIO
from dpfair_analysis.validation import check_positive


@dataclass(frozen=True)
class DPSGDFOptions:
    """``count_noise_ratio``: sigma_1 / sigma of the noisy counts; ``max_ratio``: the ratio-cap guard."""

    count_noise_ratio: float = COUNT_NOISE_RATIO
    max_ratio: float = field(default=10.0, metadata={
        "flag": "--max-ratio", "type": float,
        "help": "guard: cap on (m^k/b^k)/(m/b), so C^k <= C0 (1 + cap) (default 10)"})

    def __post_init__(self) -> None:
        check_positive(self.count_noise_ratio, "count_noise_ratio")
        check_positive(self.max_ratio, "max_ratio")


def group_bounds_step(norms, group, group_bounds, view: DiagnosisView):
    """A per-group-bound method's step as the diagnosis sees it: each row's bound C_{k(i)}, its coefficient
    c_i = min(1, C_{k(i)} / ||g_i||), and the noise std sigma max_k C_k (the noise covers the largest bound)."""
    from dpfair_analysis.gradients import clip_factors  # torch: the registry is read without it

    bounds = group_bounds[group]
    return bounds, clip_factors(norms, bounds), view.noise_multiplier * float(group_bounds.max())


def _policy(options: DPSGDFOptions, context):
    from dpfair_analysis.training.dpsgdf import DPSGDF

    sigma = context.noise_multiplier
    return DPSGDF(context.clip_bound, sigma, options.count_noise_ratio * sigma, max_ratio=options.max_ratio)


def _diagnosis(options, norms, group, view):
    """Algorithm 2 (the policy's own bound rule and guards) on a batch's expected, noise-free counts."""
    import torch

    from dpfair_analysis.training.dpsgdf import dpsgdf_group_bounds

    clipped = (norms > view.clip_bound).to(torch.float64)
    n_groups = len(view.group_sizes)
    sizes = torch.bincount(group, minlength=n_groups).to(torch.float64)
    frac = torch.bincount(group, weights=clipped, minlength=n_groups) / sizes.clamp(min=1)
    rows = view.batch_size * view.group_sizes / view.n      # b^k: the group's expected rows per batch
    group_bounds, _ = dpsgdf_group_bounds(rows * frac, rows * (1 - frac), base_clip=view.clip_bound,
                                          expected_batch_size=view.batch_size, max_ratio=options.max_ratio)
    return group_bounds_step(norms, group, group_bounds, view)


METHOD = register(Method(
    name="dpsgdf", label="DPSGD-F", summary="paper 000's DPSGD-F: group bounds from privately counted clipping rates",
    options=DPSGDFOptions, policy=_policy, equal_privacy=True, diagnosis=_diagnosis,
    canary=lambda record, clip, *, group: (record[f"C[{group}]"], 1.0)))
