"""A clipping policy from a method name and its options: the registry's (:mod:`.methods`) shortcut.

``make_policy("dpsgdf", clip_bound=0.5, noise_multiplier=1.0, max_ratio=5)`` is
``methods.get("dpsgdf").build_policy(DPSGDFOptions(max_ratio=5), RunContext(0.5, 1.0))``: each method's options
and how its policy is built live in its own module of :mod:`dpfair_analysis.training.methods`.
"""

from __future__ import annotations

from typing import Any

from dpfair_analysis.training import methods
from dpfair_analysis.training.clipping import ClippingPolicy

#: The registered methods that are clipping policies of the loop (DP-FedAvg is a trainer of its own).
METHODS = tuple(name for name, method in methods.REGISTRY.items() if method.policy is not None)


def make_policy(method: str, *, clip_bound: float, noise_multiplier: float, dimension: int | None = None,
                learning_rate: float | None = None, batch_size: int = 256, **options: Any) -> ClippingPolicy:
    """The clipping policy of a registered method.

    Parameters
    ----------
    method : str
        A registered method with a policy (``sgd``, ``dpsgd``, ``naive``, ``dpsgdf``, ``optq``, ``fairdp``, ...).
    clip_bound, noise_multiplier : float
        The run's uniform (or initial) clipping bound C and noise multiplier sigma.
    dimension, learning_rate : int, float, optional
        The model's parameter count and the step size (FairDP's Eq. 4 needs them).
    batch_size : int
        The expected batch size (Opt-Q's default count noise is b / 20).
    **options
        Fields of the method's options (e.g. ``count_noise_ratio``, ``max_ratio``, ``target_quantile``,
        ``clip_lr``, ``count_noise``, ``excess_cap``); ValueError/TypeError naming a bad one.
    """
    entry = methods.get(method)
    return entry.build_policy(entry.options(**options),
                              methods.RunContext(clip_bound=clip_bound, noise_multiplier=noise_multiplier,
                                                 batch_size=batch_size, dimension=dimension,
                                                 learning_rate=learning_rate))
