"""Opt-Q (Andrew et al. 2021, adaptive quantile clipping): the bound follows a target quantile of the per-sample
norms from a noisy unclipped count; the policy is :class:`~dpfair_analysis.training.optq.OptQ`."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpfair_analysis.training.methods.registry import Method, register
from dpfair_analysis.validation import check_fraction, check_positive


@dataclass(frozen=True)
class OptQOptions:
    """``target_quantile`` gamma, the bound's learning rate ``clip_lr`` eta_C and the count noise ``count_noise``
    sigma_b (None: the expected batch size / 20, Andrew et al.'s recommendation, but at least sigma)."""

    target_quantile: float = field(default=0.5, metadata={
        "flag": "--target-quantile", "type": float,
        "help": "the fraction of per-sample norms the bound leaves unclipped, in (0, 1) (default 0.5)"})
    clip_lr: float = field(default=0.2, metadata={
        "flag": "--optq-clip-lr", "type": float, "help": "the bound's geometric learning rate eta_C (default 0.2)"})
    count_noise: float | None = field(default=None, metadata={
        "flag": "--optq-count-noise", "type": float,
        "help": "std sigma_b of the noise on the unclipped count (default batch size / 20, at least --sigma); "
                "must exceed --sigma / 2"})

    def __post_init__(self) -> None:
        check_fraction(self.target_quantile, "target_quantile", open_high=True)
        check_positive(self.clip_lr, "clip_lr")
        if self.count_noise is not None:
            check_positive(self.count_noise, "count_noise")

    def count_noise_std(self, *, batch_size: int, noise_multiplier: float) -> float:
        """sigma_b: ``count_noise``, or b / 20 (Andrew et al. §3) but at least sigma -- the count's multiplier
        2 sigma_b must exceed the joint sigma, which b/20 does not for b < 10 sigma."""
        if self.count_noise is not None:
            return self.count_noise
        return max(batch_size / 20, noise_multiplier)


def _policy(options: OptQOptions, context):
    from dpfair_analysis.training.optq import OptQ

    sigma = context.noise_multiplier
    return OptQ(context.clip_bound, sigma,
                options.count_noise_std(batch_size=context.batch_size, noise_multiplier=sigma),
                target_quantile=options.target_quantile, clip_lr=options.clip_lr)


METHOD = register(Method(
    name="optq", label="Opt-Q", summary="adaptive quantile clipping (Andrew et al. 2021)",
    options=OptQOptions, policy=_policy, equal_privacy=True,
    canary=lambda record, clip, *, group: (record["C"], 1.0)))
