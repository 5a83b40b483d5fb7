"""DPSGD-F (Algorithm 2) and the Naive reweighting baseline (Algorithm 3) of paper 000/004.

Both are clipping policies on the shared DP-SGD loop (:mod:`.loop`); each step they make
two Gaussian releases on the same sampled batch, and the loop records them as one
sampled Gaussian with the joint noise multiplier (:mod:`..privacy.mechanisms`).

DPSGD-F, per step with base bound C0, count noise sigma_1 and gradient noise sigma_2:

    m^k = #{i in B, group k : ||g_i|| > C0},   o^k = #{i in B, group k : ||g_i|| <= C0}
    (m~^k, o~^k)_k = (m^k, o^k)_k + N(0, sigma_1^2 I)                  (line 8)
    b~^k = m~^k + o~^k,   m~ = sum_k m~^k
    C^k = C0 (1 + (m~^k / b~^k) / (m~ / b))                           (line 12)
    clip each g_i of group k to C^k;   C = max_k C^k
    G = (sum_i clip(g_i, C^k) + N(0, sigma_2^2 C^2 I)) / b            (line 16)

b is the (expected) batch size, a public constant.

Naive, per step:

    b~^k = b^k + N(0, sigma_1^2),   theta^k = (b / K) / b~^k
    G = (sum_i theta^k clip(g_i, C0) + N(0, sigma_2^2 (C0 max_k theta^k)^2 I)) / b

Sensitivities (derived here; tested by brute force over neighbouring batches in
tests/core/test_dpsgdf.py). Noise multipliers are relative to one record's contribution
bound, as everywhere in the toolkit (see :mod:`.clipping`):

* the count vector (m^k, o^k)_k: one record adds 1 to exactly one entry, so its
  contribution bound is 1 (add/remove sensitivity 1; replace-one moves one unit between
  two entries, distance sqrt(2) <= 2 x 1). Count noise sigma_1 is therefore also the
  count release's noise multiplier. Same for Naive's (b^k)_k.
* the clipped sum: one record contributes at most max_k C^k (DPSGD-F) or
  C0 max_k theta^k (Naive), and the noise is sigma_2 times that, so the multiplier is
  sigma_2. The bounds C^k and weights theta^k are functions of the released noisy
  counts only (post-processing): they are fixed before the gradients are touched.

Guards. The noisy counts can be negative or zero, which makes the printed formulas
divide by zero or give negative, tiny or huge bounds. All guards act on the released
noisy counts only, so they cost no privacy, and every bound stays finite and positive;
each firing is counted in the step record:

* ``negative_count``: a noisy count below 0 is raised to 0 (m^, o^ >= 0);
* ``empty_group``: if b^k = m^k + o^k < 1 the group's clipped fraction is taken as 0
  (C^k = C0): there is no evidence the group is clipped more than others;
* ``no_clipped``: if the pooled noisy clipped count m^ < 1, every C^k = C0;
* ``ratio_cap``: the ratio (m^k/b^k)/(m^/b) is capped at ``max_ratio`` so that one
  noisy step cannot multiply the noise by an unbounded factor (C^k <= C0 (1 + max_ratio));
* Naive ``count_floor``: b~^k is raised to at least 1, so theta^k <= b / K.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dpfair_analysis.training.clipping import CountsThenSumPolicy, StepDecision
from dpfair_analysis.validation import check_positive


def dpsgdf_group_bounds(noisy_clipped: torch.Tensor, noisy_unclipped: torch.Tensor, *, base_clip: float,
                        expected_batch_size: float, max_ratio: float) -> tuple[torch.Tensor, dict[str, int]]:
    """C^k = C0 (1 + (m^k/b^k) / (m^/b)) from noisy counts, with the guards above.

    Returns the bounds (shape (K,)) and how many groups each guard touched.
    """
    m_hat = noisy_clipped.clamp(min=0.0)
    o_hat = noisy_unclipped.clamp(min=0.0)
    fires = {"negative_count": int((noisy_clipped < 0).sum() + (noisy_unclipped < 0).sum())}
    b_hat = m_hat + o_hat
    empty = b_hat < 1.0
    fires["empty_group"] = int(empty.sum())
    fraction = torch.where(empty, torch.zeros_like(m_hat), m_hat / b_hat.clamp(min=1.0))
    pooled = float(m_hat.sum())
    if pooled < 1.0:
        fires["no_clipped"] = 1
        fires["ratio_cap"] = 0
        return torch.full_like(m_hat, base_clip), fires
    fires["no_clipped"] = 0
    ratio = fraction / (pooled / expected_batch_size)
    fires["ratio_cap"] = int((ratio > max_ratio).sum())
    return base_clip * (1.0 + ratio.clamp(max=max_ratio)), fires


def naive_group_weights(noisy_sizes: torch.Tensor, *, expected_batch_size: float) -> torch.Tensor:
    """theta^k = (b / K) / max(b~^k, 1): Naive's group weights from its noisy group sizes (the count-floor
    guard above), shape (K,)."""
    return (expected_batch_size / len(noisy_sizes)) / noisy_sizes.clamp(min=1.0)


@dataclass(frozen=True)
class DPSGDF(CountsThenSumPolicy):
    """DPSGD-F: group bounds from privately counted clipping rates (Algorithm 2).

    C0, sigma_2 and sigma_1 as in :class:`~.clipping.CountsThenSumPolicy` (the paper sets sigma_1 = 10 sigma_2).

    Parameters
    ----------
    max_ratio : float
        The ratio cap guard (see the module docstring).
    """

    max_ratio: float = 10.0
    name: str = "dpsgdf"
    private: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self.max_ratio, "max_ratio")

    def decide(self, norms: torch.Tensor, group: torch.Tensor, *, n_groups: int,
               expected_batch_size: float, generator: torch.Generator) -> StepDecision:
        clipped = norms > self.base_clip
        counts = torch.stack([torch.bincount(group[clipped], minlength=n_groups),
                              torch.bincount(group[~clipped], minlength=n_groups)]).double()
        noisy = self.noisy_counts(counts, generator)
        bounds, fires = dpsgdf_group_bounds(noisy[0], noisy[1], base_clip=self.base_clip,
                                            expected_batch_size=expected_batch_size, max_ratio=self.max_ratio)
        largest = float(bounds.max())
        record: dict[str, float] = {"C": largest, **{f"guard_{k}": v for k, v in fires.items()}}
        for k in range(n_groups):
            record.update({f"m[{k}]": float(noisy[0, k]), f"o[{k}]": float(noisy[1, k]),
                           f"C[{k}]": float(bounds[k])})
        return StepDecision(bounds=bounds.to(norms.dtype)[group], noise_std=self.noise_multiplier * largest,
                            noise_multipliers=self.planned_noise_multipliers(), record=record)


@dataclass(frozen=True)
class NaiveReweighting(CountsThenSumPolicy):
    """Naive (Algorithm 3): weights theta^k = (b/K) / b~^k from privately counted group sizes
    (:class:`~.clipping.CountsThenSumPolicy`'s C0, sigma_2 and sigma_1, the noise on each size)."""

    name: str = "naive"
    private: bool = True

    def decide(self, norms: torch.Tensor, group: torch.Tensor, *, n_groups: int,
               expected_batch_size: float, generator: torch.Generator) -> StepDecision:
        sizes = torch.bincount(group, minlength=n_groups).double()
        noisy = self.noisy_counts(sizes, generator)
        theta = naive_group_weights(noisy, expected_batch_size=expected_batch_size)
        largest = float(theta.max())
        record: dict[str, float] = {"C": self.base_clip * largest, "guard_count_floor": int((noisy < 1).sum())}
        for k in range(n_groups):
            record.update({f"b[{k}]": float(noisy[k]), f"theta[{k}]": float(theta[k])})
        return StepDecision(bounds=torch.full_like(norms, self.base_clip), weights=theta.to(norms.dtype)[group],
                            noise_std=self.noise_multiplier * self.base_clip * largest,
                            noise_multipliers=self.planned_noise_multipliers(), record=record)
