"""DP-SGD (Abadi et al. 2016): every per-sample gradient clipped to C, Gaussian noise sigma C on the sum."""

from __future__ import annotations

from dpfair_analysis.training.methods.registry import Method, register


def _policy(options, context):
    from dpfair_analysis.training.clipping import UniformClipping

    return UniformClipping(context.clip_bound, context.noise_multiplier)


def _diagnosis(options, norms, group, view):
    import torch

    from dpfair_analysis.gradients import clip_factors

    bounds = torch.full_like(norms, view.clip_bound)
    return bounds, clip_factors(norms, bounds), view.noise_multiplier * view.clip_bound


METHOD = register(Method(
    name="dpsgd", label="DP-SGD", summary="DP-SGD: uniform clipping bound C, Gaussian noise sigma C",
    policy=_policy,
    diagnosis=_diagnosis, canary=lambda record, clip, *, group: (clip, 1.0)))
