"""SGD: the non-private baseline every cost of privacy is measured against (no clipping, no noise)."""

from __future__ import annotations

from dpfair_analysis.training.methods.registry import Method, NoOptions, register


def _policy(options, context):
    from dpfair_analysis.training.clipping import NonPrivate

    return NonPrivate()


def _diagnosis(options, norms, group, view):
    import torch

    return torch.full_like(norms, float("inf")), torch.ones_like(norms), 0.0


METHOD = register(Method(
    name="sgd", label="SGD", summary="non-private SGD: the baseline of every cost of privacy",
    policy=_policy, private=False, diagnosis=_diagnosis,
    canary=None))

__all__ = ["METHOD", "NoOptions"]
