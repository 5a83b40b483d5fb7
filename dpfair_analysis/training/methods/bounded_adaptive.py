"""Bounded adaptive clipping (Zhao et al., NeurIPS 2025; later work, not one of the seed papers): Opt-Q's quantile
update of the bound kept above a lower bound C_LB, so that a shrinking majority quantile cannot starve the minority;
the policy, its equations and its privacy are :mod:`dpfair_analysis.training.bounded_adaptive`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dpfair_analysis.training.methods.registry import Method, register
from dpfair_analysis.validation import check_fraction, check_positive

#: C_LB / C_0 when ``min_clip`` is not given: the paper tunes C_LB and prints no default; this is the toolkit's.
DEFAULT_MIN_CLIP_RATIO = 0.5
#: sigma_b = b / COUNT_NOISE_DENOMINATOR by default: the authors' code's ``count_noise_denom`` default (10).
COUNT_NOISE_DENOMINATOR = 10.0


@dataclass(frozen=True)
class BoundedAdaptiveOptions:
    """The lower bound ``min_clip`` C_LB (None: C_0 / 2), the target quantile gamma, the bound's learning rate
    eta_C, the initial bound C_0 (None: the run's C), the count noise sigma_b (None: b / 10, at least sigma), the
    count threshold kappa and the clipping (``plain`` or ``normalized``); defaults and sources in the policy's
    module docstring."""

    min_clip: float | None = field(default=None, metadata={
        "flag": "--min-clip", "type": float,
        "help": "lower bound C_LB >= 0 on the adaptive bound (default C_0 / 2; 0: unbounded, as Opt-Q)"})
    target_quantile: float = field(default=0.5, metadata={
        "flag": "--target-quantile", "type": float,
        "help": "the fraction of per-sample norms the bound leaves unclipped, in (0, 1) (default 0.5)"})
    clip_lr: float = field(default=0.2, metadata={
        "flag": "--bounded-clip-lr", "type": float, "help": "the bound's geometric learning rate eta_C (default 0.2)"})
    initial_clip: float | None = field(default=None, metadata={
        "flag": "--initial-clip", "type": float, "help": "the initial bound C_0 (default the run's C)"})
    count_noise: float | None = field(default=None, metadata={
        "flag": "--bounded-count-noise", "type": float,
        "help": "std sigma_b of the noise on the unclipped count (default batch size / 10, at least --sigma); "
                "must exceed --sigma / 2"})
    count_threshold: float = field(default=1.0, metadata={
        "flag": "--count-threshold", "type": float,
        "help": "kappa: a norm <= kappa C counts as unclipped (default 1; the authors' scripts use 2.5)"})
    clipping: str = field(default="plain", metadata={
        "flag": "--bounded-clipping", "type": str, "choices": ("plain", "normalized"),
        "help": "plain: DP-SGD's clipped sum; normalized: each clipped gradient divided by C (the authors' "
                "scripts) (default plain)"})

    def __post_init__(self) -> None:
        if self.min_clip is not None and (isinstance(self.min_clip, bool) or not isinstance(self.min_clip, (int, float))
                                          or not math.isfinite(self.min_clip) or self.min_clip < 0):
            raise ValueError(f"min_clip must be a finite number >= 0, got {self.min_clip!r}")
        check_fraction(self.target_quantile, "target_quantile", open_high=True)
        check_positive(self.clip_lr, "clip_lr")
        if self.initial_clip is not None:
            check_positive(self.initial_clip, "initial_clip")
        if self.count_noise is not None:
            check_positive(self.count_noise, "count_noise")
        check_positive(self.count_threshold, "count_threshold")
        if self.clipping not in ("plain", "normalized"):
            raise ValueError(f"clipping must be 'plain' or 'normalized', got {self.clipping!r}")

    def start(self, run_clip: float) -> float:
        """C_0: ``initial_clip``, or the run's C."""
        return run_clip if self.initial_clip is None else self.initial_clip

    def lower_bound(self, run_clip: float) -> float:
        """C_LB: ``min_clip``, or C_0 x :data:`DEFAULT_MIN_CLIP_RATIO`."""
        return DEFAULT_MIN_CLIP_RATIO * self.start(run_clip) if self.min_clip is None else float(self.min_clip)

    def count_noise_std(self, *, batch_size: int, noise_multiplier: float) -> float:
        """sigma_b: ``count_noise``, or b / 10 (the authors' default) but at least sigma (2 sigma_b must exceed the
        joint sigma)."""
        if self.count_noise is not None:
            return self.count_noise
        return max(batch_size / COUNT_NOISE_DENOMINATOR, noise_multiplier)


def _policy(options: BoundedAdaptiveOptions, context):
    from dpfair_analysis.training.bounded_adaptive import BoundedAdaptive

    sigma = context.noise_multiplier
    return BoundedAdaptive(options.start(context.clip_bound), sigma,
                           options.count_noise_std(batch_size=context.batch_size, noise_multiplier=sigma),
                           lower_bound=options.lower_bound(context.clip_bound),
                           target_quantile=options.target_quantile, clip_lr=options.clip_lr,
                           count_threshold=options.count_threshold, normalize=options.clipping == "normalized")


def _diagnosis(options: BoundedAdaptiveOptions, norms, group, view):
    """The step on the batch's noise-free norms, with weight w = 1 (or 1 / C when normalized) and the gradient's
    noise multiplier sigma_z (:func:`~dpfair_analysis.training.optq.optq_gradient_multiplier`, at the run's sigma_b).
    Where the view knows the run's T steps, along the update's expected path from C_0
    (:func:`~dpfair_analysis.training.bounded_adaptive.bound_path`), each row's factor averaged over the steps,

        c_i = (1/T) sum_t w_t min(1, C_t / ||g_i||) = (1/T) sum_t min(w_t C_t, w_t ||g_i||) / ||g_i||,

    (:func:`~dpfair_analysis.gradients.mean_minimum`), noise std sigma_z sqrt((1/T) sum_t (w_t C_t)^2); else at the
    update's fixed point C* = max(C_LB, q_gamma / kappa) with q_gamma the gamma-quantile of the norms (where the
    expected b~ equals gamma): c_i = w min(1, C* / ||g_i||), noise std sigma_z w C*. The bounds returned are C* or
    the path's geometric mean."""
    import torch

    from dpfair_analysis.gradients import clip_factors, mean_minimum
    from dpfair_analysis.training.bounded_adaptive import bound_path
    from dpfair_analysis.training.optq import optq_gradient_multiplier

    normalized = options.clipping == "normalized"
    sigma_z = optq_gradient_multiplier(view.noise_multiplier, options.count_noise_std(
        batch_size=max(int(round(view.batch_size)), 1), noise_multiplier=view.noise_multiplier))
    lower = options.lower_bound(view.clip_bound)
    if view.steps is not None:
        path = bound_path(norms, initial=options.start(view.clip_bound), lower_bound=lower,
                          target_quantile=options.target_quantile, clip_lr=options.clip_lr,
                          count_threshold=options.count_threshold, steps=view.steps)
        values = norms.double()
        if normalized:  # min(1 / C_t, 1 / ||g_i||)
            factors = mean_minimum(1.0 / path, 1.0 / values)
            noise_std = sigma_z
        else:  # min(C_t, ||g_i||) / ||g_i||, 1 at g_i = 0
            factors = torch.where(values > 0, mean_minimum(path, values) / values.clamp(min=1e-300), 1.0)
            noise_std = sigma_z * float(path.pow(2).mean().sqrt())
        return torch.full_like(norms, float(path.log().mean().exp())), factors.to(norms.dtype), noise_std
    quantile = float(torch.quantile(norms.double(), options.target_quantile)) / options.count_threshold
    clip = max(lower, quantile, 1e-12)
    weight = 1.0 / clip if normalized else 1.0
    bounds = torch.full_like(norms, clip)
    return bounds, weight * clip_factors(norms, bounds), sigma_z * clip * weight


METHOD = register(Method(
    name="boundedadaptive", label="Bounded adaptive",
    summary="adaptive quantile clipping with a lower bound on C (Zhao et al. 2025; later work)",
    options=BoundedAdaptiveOptions, policy=_policy, equal_privacy=True, diagnosis=_diagnosis,
    canary=lambda record, clip, *, group: (record["C"], record["weight"])))
