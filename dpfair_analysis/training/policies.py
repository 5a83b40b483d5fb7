"""The clipping policies by method name: the one place a method name becomes a policy.

``sgd`` (non-private, :class:`~.clipping.NonPrivate`), ``dpsgd`` (uniform C and sigma,
:class:`~.clipping.UniformClipping`), paper 000's ``naive`` and ``dpsgdf`` (:mod:`.dpsgdf`),
adaptive-quantile clipping ``optq`` (Andrew et al. 2021, :mod:`.optq`) and paper 002's
``fairdp`` (:mod:`.fairdp`). A new policy registers here. (DP-FedAvg is a trainer of its own,
:mod:`.fedavg`, not a policy of the loop.)
"""

from __future__ import annotations

from dpfair_analysis.training.clipping import ClippingPolicy, NonPrivate, UniformClipping
from dpfair_analysis.training.dpsgdf import DPSGDF, NaiveReweighting
from dpfair_analysis.training.fairdp import FairDP
from dpfair_analysis.training.optq import OptQ
from dpfair_analysis.validation import check_choice

METHODS = ("sgd", "dpsgd", "naive", "dpsgdf", "optq", "fairdp")


def make_policy(method: str, *, clip_bound: float, noise_multiplier: float, count_noise: float | None = None,
                max_ratio: float = 10.0, optq_count_noise: float | None = None, target_quantile: float = 0.5,
                clip_lr: float | None = None, dimension: int | None = None, learning_rate: float | None = None,
                excess_cap: float = 5.0) -> ClippingPolicy:
    """The policy for a method name.

    ``sgd`` (non-private), ``dpsgd`` (uniform C, sigma), and paper 000's ``naive`` and
    ``dpsgdf`` with C0 = ``clip_bound``, sigma_2 = ``noise_multiplier`` and count noise
    sigma_1 = ``count_noise`` (default 10 sigma_2, the paper's setting).

    ``optq``: C_0 = ``clip_bound``, joint multiplier ``noise_multiplier``, sigma_b =
    ``optq_count_noise`` (the caller's b/20, Andrew et al.'s recommendation; default 10 sigma),
    ``target_quantile`` gamma and ``clip_lr`` eta_C (None: the policy's default, 0.2).

    ``fairdp``: C_k start at ``clip_bound``; sigma of the sum ``noise_multiplier``; sigma_1 and
    sigma_x both ``count_noise`` (default 10 sigma); ``dimension`` (the model's parameter count)
    and ``learning_rate`` (mu) of Eq. (4) are required; ``excess_cap`` R and ``clip_lr`` (None: 0.05).
    """
    check_choice(method, "method", METHODS)
    if method == "sgd":
        return NonPrivate()
    if method == "dpsgd":
        return UniformClipping(clip_bound, noise_multiplier)
    sigma_1 = 10.0 * noise_multiplier if count_noise is None else count_noise
    if method == "naive":
        return NaiveReweighting(clip_bound, noise_multiplier, sigma_1)
    if method == "dpsgdf":
        return DPSGDF(clip_bound, noise_multiplier, sigma_1, max_ratio=max_ratio)
    if method == "optq":
        sigma_b = 10.0 * noise_multiplier if optq_count_noise is None else optq_count_noise
        return OptQ(clip_bound, noise_multiplier, sigma_b, target_quantile=target_quantile,
                    **({} if clip_lr is None else {"clip_lr": clip_lr}))
    if dimension is None or learning_rate is None:
        raise ValueError("fairdp needs dimension (the model's parameter count, |1| of paper 002 Eq. 4) and "
                         "learning_rate (mu of Eq. 4)")
    return FairDP(clip_bound, noise_multiplier, sigma_1, sigma_1, dimension=dimension, learning_rate=learning_rate,
                  excess_cap=excess_cap, **({} if clip_lr is None else {"clip_lr": clip_lr}))
