"""Bounded adaptive clipping (Zhao, Rehn, Heikkilä, Tajeddine & Honkela, NeurIPS 2025, arXiv:2506.01396), a policy.

Adaptive quantile clipping (Opt-Q, :mod:`.optq`; Andrew et al. 2021) moves the bound C towards a target quantile
gamma of the per-sample gradient norms. When the majority fits well its norms shrink, the quantile shrinks with them
and C decays geometrically, clipping the minority's (larger) gradients ever harder. Zhao et al. put a tunable lower
bound C_LB under the update. Per step t with bound C_t, on the step's Poisson-sampled batch B_t of expected size b::

    b_i  = 1[ ||g_i|| <= kappa C_t ]                                     (kappa = 1: Andrew et al.'s indicator)
    b~_t = clamp_[0,1]( (sum_{i in B_t} (b_i - 1/2) + N(0, sigma_b^2)) / b + 1/2 )
    S~_t = sum_{i in B_t} w_t clip(g_i, C_t) + N(0, sigma_z^2 (w_t C_t)^2 I)
    C_{t+1} = max( C_LB, C_t exp(-eta_C (b~_t - gamma)) )                (the bounded geometric update)

with w_t = 1 (clipping as in DP-SGD, the toolkit's default) or w_t = 1 / C_t (``normalize``: the "normalized
clipping" every script of the authors' code runs, ``--normalize-clipping``; the step is then (1/b) sum clip(g_i,
C_t) / C_t + N(0, sigma_z^2) / b, so shrinking C does not shrink the step). The first bound is max(C_0, C_LB).
With C_LB = 0 (and kappa = 1, w_t = 1, the same sigma_b) this is Opt-Q step for step, draw for draw
(``tests/training/test_bounded_adaptive.py``).

Privacy (as Opt-Q's, Andrew et al. Theorem 1). The lower bound is a public constant applied to a function of the
earlier steps' releases, so it is post-processing and costs nothing. Each step releases

* the centred count sum_i (b_i - 1/2): contribution bound 1/2 whatever the threshold kappa C_t, noise sigma_b --
  a Gaussian release with noise multiplier 2 sigma_b;
* the clipped sum: contribution bound w_t C_t, noise sigma_z w_t C_t -- multiplier sigma_z;

jointly (sigma_z^-2 + (2 sigma_b)^-2)^-1/2, which :func:`~.optq.optq_gradient_multiplier` sets to the run's sigma.
Both are recorded in the ledger at every step (:attr:`~.clipping.StepDecision.noise_multipliers`), so the run is
accounted exactly as DP-SGD at sigma, with the same sampling rate and number of steps. The count's share of the
step's privacy (its share of the joint precision sigma^-2) is (sigma / (2 sigma_b))^2 (:attr:`BoundedAdaptive.count_share`).

Defaults (``methods/bounded_adaptive.py``): gamma = 0.5 and eta_C = 0.2 (the authors' scripts ``0_image.sh`` and
``1_tabular.sh``, Andrew et al.'s values); sigma_b = b / 10 (their ``count_noise_denom`` default 10; Andrew et al.
recommend b / 20); kappa = 1 (their command line's default; both scripts pass ``--count-threshold 2.5``, which counts
a norm up to 2.5 C as unclipped and so drives C towards the gamma-quantile / 2.5); C_0 = the run's C (their default
``clip_bound_init`` is 1.0 -- and their trainer passes it under the key ``init_clipbound``, which their optimizer
never reads, so every run of theirs starts at 1.0). The paper tunes C_LB (scripts: a log grid from 1e-3 to 50 and
0); it prints no default -- ours is C_0 / 2 (a choice, stated as one).

Where the authors' optimizer (their modified Opacus ``AdaClipDPOptimizer``) differs from the equations above, which
follow Andrew et al. and TensorFlow Privacy as :mod:`.optq` does: it counts ||g|| < kappa C (strict), adds the count
noise to the uncentred count sum_i b_i (contribution bound 1: a multiplier of sigma_b, not the 2 sigma_b that
Theorem 1's sigma_z assumes, so its joint multiplier is (sigma_z^-2 + sigma_b^-2)^-1/2, a little below sigma --
negligibly at its sigma_b = b / 10 >= 100), divides by the batch's actual size (data-dependent), and does not clamp b~.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace

import torch

from dpfair_analysis.training.clipping import StepDecision
from dpfair_analysis.training.optq import geometric_update, optq_gradient_multiplier
from dpfair_analysis.validation import check_fraction, check_positive, check_positive_int


def bounded_update(clip: float, fraction: float, *, target_quantile: float, clip_lr: float,
                   lower_bound: float) -> float:
    """C_{t+1} = max(C_LB, C_t exp(-eta_C (b~_t - gamma))) (Zhao et al. 2025, the bounded geometric update).

    Parameters
    ----------
    clip : float
        C_t.
    fraction : float
        b~_t, the released unclipped fraction.
    target_quantile, clip_lr : float
        gamma and eta_C.
    lower_bound : float
        C_LB >= 0 (0: Andrew et al.'s unbounded update).
    """
    return max(lower_bound, geometric_update(clip, fraction, target_quantile=target_quantile, clip_lr=clip_lr))


def bound_path(norms: torch.Tensor, *, initial: float, lower_bound: float, target_quantile: float, clip_lr: float,
               count_threshold: float, steps: int) -> torch.Tensor:
    """C_0, ..., C_{T-1}: the bounds a T-step run clips to under the update's expectation at these norms,

        C_0 = max(C_0, C_LB),   C_{t+1} = max(C_LB, C_t exp(-eta_C (f(C_t) - gamma))),
        f(C) = (1/n) sum_i 1[ ||g_i|| <= kappa C ],

    f the unclipped fraction b~_t without its noise (centred) and clamp. log C moves by at most
    eta_C max(gamma, 1 - gamma) a step, so a short run stays near C_0.
    """
    check_positive(initial, "initial")
    check_positive_int(steps, "steps")
    ordered, n = sorted(norms.double().tolist()), len(norms)  # f(C) by bisection: O(T log n), not O(T n)
    exp, right = math.exp, bisect.bisect_right
    bounds, clip = [0.0] * steps, max(float(initial), lower_bound)
    for t in range(steps):  # bounded_update inlined: the diagnosis runs this loop at every drift evaluation
        bounds[t] = clip
        unclipped = right(ordered, count_threshold * clip) / n if n else 1.0
        clip = max(lower_bound, clip * exp(-clip_lr * (unclipped - target_quantile)))
    return torch.tensor(bounds, dtype=torch.float64)


@dataclass(frozen=True)
class BoundedAdaptive:
    """Bounded adaptive clipping (module docstring).

    Parameters
    ----------
    initial_clip : float
        C_0 > 0.
    noise_multiplier : float
        The joint multiplier sigma of a step's two releases (what the ledger records).
    count_noise : float
        sigma_b, the standard deviation of the noise on the centred unclipped count; 2 sigma_b must exceed sigma.
    lower_bound : float
        C_LB >= 0, the lower bound on C (0: unbounded, Opt-Q).
    target_quantile : float
        gamma in (0, 1).
    clip_lr : float
        eta_C > 0.
    count_threshold : float
        kappa > 0: a norm counts as unclipped when ||g|| <= kappa C (1 in the paper's equations).
    normalize : bool
        Weight every clipped gradient by 1 / C_t (normalized clipping, as the authors' scripts run).
    """

    initial_clip: float
    noise_multiplier: float
    count_noise: float
    lower_bound: float = 0.0
    target_quantile: float = 0.5
    clip_lr: float = 0.2
    count_threshold: float = 1.0
    normalize: bool = False
    name: str = "boundedadaptive"
    private: bool = True

    def __post_init__(self) -> None:
        check_positive(self.initial_clip, "initial_clip")
        optq_gradient_multiplier(self.noise_multiplier, self.count_noise)
        if isinstance(self.lower_bound, bool) or not isinstance(self.lower_bound, (int, float)) \
                or not math.isfinite(self.lower_bound) or self.lower_bound < 0:
            raise ValueError(f"lower_bound must be a finite number >= 0, got {self.lower_bound!r}")
        check_fraction(self.target_quantile, "target_quantile", open_high=True)
        check_positive(self.clip_lr, "clip_lr")
        check_positive(self.count_threshold, "count_threshold")
        if not isinstance(self.normalize, bool):
            raise TypeError(f"normalize must be a bool, got {self.normalize!r}")
        object.__setattr__(self, "_clip", max(float(self.initial_clip), float(self.lower_bound)))

    @property
    def gradient_multiplier(self) -> float:
        """sigma_z = (sigma^-2 - (2 sigma_b)^-2)^-1/2 (:func:`~.optq.optq_gradient_multiplier`)."""
        return optq_gradient_multiplier(self.noise_multiplier, self.count_noise)

    @property
    def count_share(self) -> float:
        """The count release's share of a step's privacy, (sigma / (2 sigma_b))^2 of the joint precision."""
        return (self.noise_multiplier / (2.0 * self.count_noise)) ** 2

    @property
    def current_clip(self) -> float:
        """The bound the next step clips to."""
        return self._clip

    def for_run(self) -> BoundedAdaptive:
        """A copy at C_0 (see :func:`~.clipping.fresh_policy`)."""
        return replace(self)

    def planned_noise_multipliers(self) -> tuple[float, float]:
        """(count release, gradient release): 2 sigma_b and sigma_z; jointly sigma."""
        return 2.0 * self.count_noise, self.gradient_multiplier

    def noisy_fraction(self, norms: torch.Tensor, clip: float, *, expected_batch_size: float,
                       generator: torch.Generator) -> tuple[float, float]:
        """(b~, the noisy centred count) at bound ``clip``: the count of ||g_i|| <= kappa C, centred, plus
        N(0, sigma_b^2), over b, plus 1/2, clamped to [0, 1] (one standard normal drawn from ``generator``)."""
        centred = float((norms <= self.count_threshold * clip).sum()) - 0.5 * len(norms)
        noisy = centred + float(torch.randn((), generator=generator, dtype=torch.float64)) * self.count_noise
        return min(1.0, max(0.0, noisy / expected_batch_size + 0.5)), noisy

    def decide(self, norms: torch.Tensor, group: torch.Tensor, *, n_groups: int,
               expected_batch_size: float, generator: torch.Generator) -> StepDecision:
        clip = self._clip
        fraction, noisy = self.noisy_fraction(norms, clip, expected_batch_size=expected_batch_size,
                                              generator=generator)
        following = bounded_update(clip, fraction, target_quantile=self.target_quantile, clip_lr=self.clip_lr,
                                   lower_bound=self.lower_bound)
        object.__setattr__(self, "_clip", following)
        weight = 1.0 / clip if self.normalize else 1.0
        return StepDecision(bounds=torch.full_like(norms, clip), noise_std=self.gradient_multiplier * clip * weight,
                            noise_multipliers=self.planned_noise_multipliers(),
                            weights=torch.full_like(norms, weight) if self.normalize else None,
                            record={"C": clip, "weight": weight, "unclipped_fraction": fraction,
                                    "centred_count": noisy, "C_next": following})
