"""Bias-variance bounds of clipped, noised group means (paper 000 §4.2, Eq. (1); Amin et al. 2019).

For group k with b^k samples and per-sample gradients g_i, the private estimate of the
group mean G^k = (1/b^k) sum_i g_i is

    G^_k = (1/b^k) (sum_i clip(g_i, C) + Z),   clip(g, C) = g min(1, C/||g||),

with noise Z. Paper 000 Eq. (1) (Laplace noise Lap(C/eps), scalars) states

    E|G^_k - G^k| <= V + B,   V = (1/b^k) C/eps,   B = (1/b^k) sum_i max(0, |g_i| - C)     (upper)
    E|G^_k - G^k| >= (V + B) / 2                                                          (lower, "tight")

and that V + B is minimised by C = the ceil(1/eps)-th largest |g_i|, "the (1 - 1/(b eps))
quantile".

What holds (checked in tests/theory/test_bounds.py and by ``dpfair verify``):

* the upper bound holds for vectors and any noise, with V = E||Z|| / b^k (triangle
  inequality: ||G^ - G|| <= ||Z||/b^k + (1/b^k) sum_i ||clip(g_i) - g_i||, and
  ||clip(g) - g|| = max(0, ||g|| - C)). For DP-SGD's Gaussian noise N(0, s^2 I_d),
  E||Z|| = s sqrt(2) Gamma((d+1)/2) / Gamma(d/2) (~ s sqrt(d)), not the scalar C/eps;
* the lower bound at half does NOT hold in general: clipping errors of samples with
  opposite signs (or directions) cancel in the mean, so B can be large while the true
  error is only the noise. E.g. scalars g = (+10, -10), C = 1, Laplace noise with
  small C/eps: G = G~ = 0, so E|G^ - G| = C/(2 eps) while (V + B)/2 = C/(4 eps) + 4.5.
  It holds for non-negative scalars (the setting of Amin et al.: user contributions).
* the minimiser: V + B is convex and piecewise linear in C with slope
  kappa/b - #{i : ||g_i|| > C}/b, where kappa = E||Z|| / C (kappa = 1/eps for scalar
  Laplace), so any C with #{||g_i|| > C} <= kappa <= #{||g_i|| >= C} minimises it: the
  ceil(kappa)-th largest norm. "The (1 - 1/(b eps))-quantile" is the same point up to
  the quantile's interpolation convention.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy.special import gammaln

from dpfair_analysis.validation import check_positive, check_positive_int


def expected_gaussian_norm(std: float, dim: int) -> float:
    """E||Z|| for Z ~ N(0, std^2 I_dim): std sqrt(2) Gamma((dim+1)/2) / Gamma(dim/2)."""
    check_positive_int(dim, "dim")
    if std == 0:
        return 0.0
    return check_positive(std, "std") * math.sqrt(2.0) * math.exp(gammaln((dim + 1) / 2) - gammaln(dim / 2))


def clipping_bias_term(norms: torch.Tensor, clip_bound: float) -> float:
    """B = (1/b) sum_i max(0, ||g_i|| - C) for one group's norms (0 for an empty group)."""
    if len(norms) == 0:
        return 0.0
    return float((norms.double() - clip_bound).clamp(min=0).mean())


def bias_variance_bound(norms: torch.Tensor, clip_bound: float, *, expected_noise_norm: float) -> dict[str, float]:
    """V, B, the upper bound V + B and the claimed lower bound (V + B)/2 for one group.

    ``expected_noise_norm`` is E||Z|| of the noise added to the group's clipped *sum*
    (Laplace: C/eps; Gaussian: :func:`expected_gaussian_norm`).
    """
    b = len(norms)
    if b == 0:
        return {"n": 0, "variance": math.nan, "bias": math.nan, "upper": math.nan, "lower_half": math.nan}
    variance = expected_noise_norm / b
    bias = clipping_bias_term(norms, clip_bound)
    return {"n": b, "variance": variance, "bias": bias, "upper": variance + bias,
            "lower_half": 0.5 * (variance + bias)}


def group_bias_variance_bounds(norms: torch.Tensor, group: torch.Tensor, group_names, clip_bound: float, *,
                               expected_noise_norm: float) -> pd.DataFrame:
    """:func:`bias_variance_bound` for every group: rows group, n, variance, bias, upper, lower_half."""
    rows = []
    for k, name in enumerate(group_names):
        rows.append({"group": name, **bias_variance_bound(norms[group == k], clip_bound,
                                                          expected_noise_norm=expected_noise_norm)})
    return pd.DataFrame(rows)


def monte_carlo_group_error(grads: torch.Tensor, clip_bound: float, *, noise: str, noise_scale: float,
                            draws: int, generator: torch.Generator) -> dict[str, float]:
    """E||G^ - G|| for one group's per-sample gradients (rows of ``grads``), by Monte Carlo.

    ``noise`` is "gaussian" (N(0, noise_scale^2 I) on the sum) or "laplace" (i.i.d.
    Lap(noise_scale) per coordinate on the sum). Returns the mean, its standard error
    and a 95% normal confidence interval over ``draws`` independent noise draws. The
    only randomness is the noise: the batch is fixed, as in Eq. (1).
    """
    draws = check_positive_int(draws, "draws")
    grads = grads.double().reshape(len(grads), -1)
    b, d = grads.shape
    if b == 0:
        raise ValueError("monte_carlo_group_error needs at least one gradient")
    norms = grads.norm(dim=1)
    factors = torch.where(norms > clip_bound, clip_bound / norms.clamp(min=1e-300), torch.ones_like(norms))
    clipped_mean = (grads * factors[:, None]).mean(dim=0)
    true_mean = grads.mean(dim=0)
    if noise == "gaussian":
        z = torch.randn(draws, d, generator=generator, dtype=torch.float64) * noise_scale
    elif noise == "laplace":
        u = torch.rand(draws, d, generator=generator, dtype=torch.float64) - 0.5
        z = -noise_scale * torch.sign(u) * torch.log1p(-2 * u.abs())
    else:
        raise ValueError(f"noise must be 'gaussian' or 'laplace', got {noise!r}")
    errors = (clipped_mean + z / b - true_mean).norm(dim=1)
    mean = float(errors.mean())
    stderr = float(errors.std(unbiased=True) / math.sqrt(draws)) if draws > 1 else math.nan
    return {"mean": mean, "stderr": stderr, "ci_low": mean - 1.96 * stderr, "ci_high": mean + 1.96 * stderr}


def bound_minimising_clip(norms: torch.Tensor, *, noise_per_unit_clip: float) -> float:
    """argmin_C of V(C) + B(C) with V = kappa C / b: the ceil(kappa)-th largest norm.

    ``noise_per_unit_clip`` is kappa = E||Z|| / C (scalar Laplace: 1/eps; Gaussian
    N(0, sigma^2 C^2 I_d): :func:`expected_gaussian_norm` (sigma, d)). If kappa >= b the
    bound only grows with C and the minimiser is C = 0 (returned as 0.0).
    """
    kappa = check_positive(noise_per_unit_clip, "noise_per_unit_clip")
    ordered = torch.sort(norms.double(), descending=True).values
    rank = math.ceil(kappa)
    if rank > len(ordered):
        return 0.0
    return float(ordered[rank - 1])


def quantile_rule_clip(norms: torch.Tensor, *, epsilon: float) -> float:
    """Paper 000 §4.2's rule: C = the (1 - 1/(b eps))-quantile of the b norms.

    Convention (the paper and its source, Amin et al. 2019, name none): the empirical
    quantile, the inverse of the empirical CDF, Q(p) = min{x : F_b(x) >= p} =
    x_(ceil(b p)) for p in (0, 1] (x_(1) <= ... <= x_(b) the sorted norms; numpy's
    ``method="inverted_cdf"``, Hyndman & Fan type 1). No interpolation: the rule
    returns one of the norms.

    What the statement then gives (V + B with V = C/(b eps), B = (1/b) sum_i
    max(0, ||g_i|| - C), slope (1/eps - #{i : ||g_i|| > C})/b): with p = 1 - 1/(b eps),
    b p = b - 1/eps and j = ceil(b - 1/eps) satisfies b - 1/eps <= j < b - 1/eps + 1, so

        #{g > x_(j)} <= b - j <= 1/eps   and   #{g >= x_(j)} >= b - j + 1 > 1/eps,

    i.e. 0 lies in the subdifferential at C = x_(j): the rule minimises V + B whenever
    b eps >= 1 (x_(j) is the ceil(1/eps)-th largest norm; when 1/eps is an integer it is
    the next one down, on the same flat piece). When b p is an integer the minimum is
    flat on [x_(j), x_(j+1)], so floating-point rounding of b p cannot move the rule
    off the minimum. For b eps < 1 the level is negative, the slope is positive for
    every C >= 0, and the minimiser is C = 0 (returned; at b eps = 1 both 0 and x_(1)
    minimise). Other conventions are not
    minimisers in general: numpy's default 'linear' interpolates between order
    statistics and 'higher' takes x_(ceil((b-1)p)+1), one order statistic too high
    (e.g. norms (1, 2), eps = 0.7, p = 2/7: 'higher' gives C = 2 with V + B = 1/0.7 =
    1.43, 'linear' C = 9/7 with 1.28, the empirical quantile C = 1 with 1/1.4 + 1/2 =
    1.21, the minimum).
    """
    epsilon = check_positive(epsilon, "epsilon")
    b = len(norms)
    level = 1.0 - 1.0 / (b * epsilon)
    if level <= 0:
        return 0.0
    return float(np.quantile(norms.double().numpy(), level, method="inverted_cdf"))


def bound_curve(norms: torch.Tensor, clip_bounds: np.ndarray, *, noise_per_unit_clip: float) -> pd.DataFrame:
    """V(C), B(C) and V + B over a grid of clipping bounds for one group."""
    b = len(norms)
    rows = [{"clip_bound": float(c), "variance": noise_per_unit_clip * c / b,
             "bias": clipping_bias_term(norms, float(c))} for c in clip_bounds]
    frame = pd.DataFrame(rows)
    frame["upper"] = frame["variance"] + frame["bias"]
    return frame
