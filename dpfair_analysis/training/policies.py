"""The clipping policies by method name: the one place a method name becomes a policy.

``sgd`` (non-private, :class:`~.clipping.NonPrivate`), ``dpsgd`` (uniform C and sigma,
:class:`~.clipping.UniformClipping`), and paper 000's ``naive`` and ``dpsgdf``
(:mod:`.dpsgdf`). A new policy registers here.
"""

from __future__ import annotations

from dpfair_analysis.training.clipping import ClippingPolicy, NonPrivate, UniformClipping
from dpfair_analysis.training.dpsgdf import DPSGDF, NaiveReweighting
from dpfair_analysis.validation import check_choice

METHODS = ("sgd", "dpsgd", "naive", "dpsgdf")


def make_policy(method: str, *, clip_bound: float, noise_multiplier: float, count_noise: float | None = None,
                max_ratio: float = 10.0) -> ClippingPolicy:
    """The policy for a method name.

    ``sgd`` (non-private), ``dpsgd`` (uniform C, sigma), and paper 000's ``naive`` and
    ``dpsgdf`` with C0 = ``clip_bound``, sigma_2 = ``noise_multiplier`` and count noise
    sigma_1 = ``count_noise`` (default 10 sigma_2, the paper's setting).
    """
    check_choice(method, "method", METHODS)
    if method == "sgd":
        return NonPrivate()
    if method == "dpsgd":
        return UniformClipping(clip_bound, noise_multiplier)
    sigma_1 = 10.0 * noise_multiplier if count_noise is None else count_noise
    if method == "naive":
        return NaiveReweighting(clip_bound, noise_multiplier, sigma_1)
    return DPSGDF(clip_bound, noise_multiplier, sigma_1, max_ratio=max_ratio)
