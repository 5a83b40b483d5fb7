"""Opt-Q: adaptive quantile clipping (Andrew, Thakkar, McMahan & Ramaswamy, NeurIPS 2021), a policy.

Paper 002 compares FairDP with "Opt-Q", the adaptive clipping of Andrew et al. (arXiv:1905.03871,
Algorithm 1 there written for DP-FedAvg; here its per-example form for DP-SGD, one record per
"client"). The clipping bound follows a target quantile gamma of the per-sample gradient norms.
Per step t with bound C_t, on the step's sampled batch B_t of expected size b (public):

    b_i = 1[||g_i|| <= C_t]                                   (unclipped indicator)
    b~  = clamp_[0,1]( (sum_{i in B_t} (b_i - 1/2) + N(0, sigma_b^2)) / b + 1/2 )   (clamp: TF Privacy's)
    S~  = sum_i clip(g_i, C_t) + N(0, sigma_z^2 C_t^2 I)      (the clipped gradient sum)
    C_{t+1} = C_t exp(-eta_C (b~ - gamma))                    (geometric update)

(optionally kept in public bounds [min_clip, max_clip], as Opacus does).

Sensitivities and accounting (Andrew et al. Theorem 1; TensorFlow Privacy's
``QuantileEstimatorQuery``, which shifts the indicator by -1/2 for this reason):

* the centred count sum_i (b_i - 1/2): one record adds or removes a term of absolute value
  exactly 1/2, so its contribution bound is 1/2 and the noise sigma_b makes it a Gaussian
  release with noise multiplier 2 sigma_b (tested in tests/core/test_optq.py by brute force
  over neighbouring batches). The uncentred count sum_i b_i has contribution bound 1:
  releasing it with the same sigma_b would be a multiplier of only sigma_b.
* the clipped sum: one record contributes at most C_t, noise sigma_z C_t: multiplier sigma_z.
  C_t is a function of the earlier steps' released b~ only (post-processing).
* jointly (:func:`~dpfair_analysis.privacy.mechanisms.joint_noise_multiplier`):
  (sigma_z^-2 + (2 sigma_b)^-2)^-1/2. Andrew et al. choose sigma_z so that this equals a
  target sigma: sigma_z = (sigma^-2 - (2 sigma_b)^-2)^-1/2, which needs sigma < 2 sigma_b.
  The run is then accounted exactly as DP-SGD with noise multiplier sigma (same q, same
  steps): at equal privacy Opt-Q runs all of DP-SGD's steps.

Defaults are the paper's (§3, "for all experiments"): gamma = 0.5, eta_C = 0.2, and (set by the
caller) sigma_b = b / 20. The initial bound is the caller's C0.

Not printed in paper 002 (a fragment): which variant of Andrew et al. it ran. The geometric
update with the per-example count is the paper's recommended setting; see
tests/core/test_optq.py for the step-by-step comparison with Opacus's ``AdaClipDPOptimizer``
(what differs: Opacus counts a sample as unclipped when ||g|| + 1e-6 <= C, divides the noisy
count by the batch's *actual* size, adds the noise to the uncentred count, and clamps C to
[min, max]; see :func:`opacus_style_fraction`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from dpfair_analysis.training.clipping import StepDecision
from dpfair_analysis.validation import check_fraction, check_positive


def optq_gradient_multiplier(noise_multiplier: float, count_noise: float) -> float:
    """sigma_z = (sigma^-2 - (2 sigma_b)^-2)^-1/2: the gradient's multiplier for a joint multiplier sigma
    (Andrew et al. Theorem 1). ValueError (naming ``count_noise``) unless sigma < 2 sigma_b."""
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    sigma_b = check_positive(count_noise, "count_noise")
    if sigma >= 2 * sigma_b:
        raise ValueError(f"count_noise must exceed noise_multiplier / 2 = {sigma / 2:g} (the count's multiplier "
                         f"2 count_noise must exceed the joint multiplier), got {count_noise!r}")
    return (sigma ** -2 - (2 * sigma_b) ** -2) ** -0.5


def geometric_update(clip: float, fraction: float, *, target_quantile: float, clip_lr: float) -> float:
    """C exp(-eta_C (b~ - gamma)) (Andrew et al. Algorithm 1, geometric update)."""
    return clip * math.exp(-clip_lr * (fraction - target_quantile))


def opacus_style_fraction(norms: torch.Tensor, clip: float, *, count_noise_draw: float) -> float:
    """The unclipped fraction as Opacus's ``AdaClipDPOptimizer`` computes it (opacus 1.6), for the
    comparison tests: unclipped iff C / (||g|| + 1e-6) >= 1, the noise N(0, sigma_b^2) added to the
    *uncentred* count, divided by the batch's actual size (no clamp to [0, 1])."""
    unclipped = float((clip / (norms.double() + 1e-6) >= 1).sum())
    return (unclipped + count_noise_draw) / max(len(norms), 1)


@dataclass(frozen=True)
class OptQ:
    """Adaptive quantile clipping (module docstring).

    Parameters
    ----------
    initial_clip : float
        C_0.
    noise_multiplier : float
        The target joint multiplier sigma of a step's two releases (what the ledger records).
    count_noise : float
        sigma_b, the standard deviation of the noise on the centred unclipped count.
    target_quantile : float
        gamma in (0, 1): the fraction of per-sample norms the bound should leave unclipped.
    clip_lr : float
        eta_C > 0.
    min_clip, max_clip : float or None
        Optional public bounds on C (None: unbounded, as in the paper).
    clamp_fraction : bool
        Clamp b~ to [0, 1] before the update (TF Privacy's ``QuantileEstimatorQuery`` does, "to protect
        against out-of-range estimates"; Andrew et al.'s Algorithm 1 and Opacus do not). Default True.
    """

    initial_clip: float
    noise_multiplier: float
    count_noise: float
    target_quantile: float = 0.5
    clip_lr: float = 0.2
    min_clip: float | None = None
    max_clip: float | None = None
    clamp_fraction: bool = True
    name: str = "optq"
    private: bool = True

    def __post_init__(self) -> None:
        check_positive(self.initial_clip, "initial_clip")
        optq_gradient_multiplier(self.noise_multiplier, self.count_noise)
        check_fraction(self.target_quantile, "target_quantile", open_high=True)
        check_positive(self.clip_lr, "clip_lr")
        for name in ("min_clip", "max_clip"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)
        if self.min_clip is not None and self.max_clip is not None and self.min_clip >= self.max_clip:
            raise ValueError(f"min_clip must be below max_clip, got {self.min_clip!r} >= {self.max_clip!r}")
        object.__setattr__(self, "_clip", float(self.initial_clip))  # run state, not a field (not hashed)

    @property
    def gradient_multiplier(self) -> float:
        """sigma_z (:func:`optq_gradient_multiplier`)."""
        return optq_gradient_multiplier(self.noise_multiplier, self.count_noise)

    @property
    def current_clip(self) -> float:
        """The bound the next step clips to."""
        return self._clip

    def for_run(self) -> "OptQ":
        """A copy at C_0 (see :func:`~.clipping.fresh_policy`)."""
        return replace(self)

    def planned_noise_multipliers(self) -> tuple[float, float]:
        """(count release, gradient release): 2 sigma_b and sigma_z; jointly sigma."""
        return 2.0 * self.count_noise, self.gradient_multiplier

    def noisy_fraction(self, norms: torch.Tensor, clip: float, *, expected_batch_size: float,
                       generator: torch.Generator) -> tuple[float, float]:
        """(b~, the noisy centred count) at bound ``clip`` (module docstring)."""
        centred = float((norms <= clip).sum()) - 0.5 * len(norms)
        noisy = centred + float(torch.randn((), generator=generator, dtype=torch.float64)) * self.count_noise
        fraction = noisy / expected_batch_size + 0.5
        return (min(1.0, max(0.0, fraction)) if self.clamp_fraction else fraction), noisy

    def decide(self, norms: torch.Tensor, group: torch.Tensor, *, n_groups: int,
               expected_batch_size: float, generator: torch.Generator) -> StepDecision:
        clip = self._clip
        fraction, noisy = self.noisy_fraction(norms, clip, expected_batch_size=expected_batch_size,
                                              generator=generator)
        following = geometric_update(clip, fraction, target_quantile=self.target_quantile, clip_lr=self.clip_lr)
        if self.min_clip is not None:
            following = max(following, self.min_clip)
        if self.max_clip is not None:
            following = min(following, self.max_clip)
        object.__setattr__(self, "_clip", following)
        sigma_z = self.gradient_multiplier
        return StepDecision(bounds=torch.full_like(norms, clip), noise_std=sigma_z * clip,
                            noise_multipliers=self.planned_noise_multipliers(),
                            record={"C": clip, "unclipped_fraction": fraction, "centred_count": noisy,
                                    "C_next": following})
