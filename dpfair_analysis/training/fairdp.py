"""FairDP (paper 002): per-group clipping bounds that descend the bias-variance term tau, as a policy.

Paper 002 is a fragment (figure captions, Eqs. 3-4, the bilevel problem 6a/6b, §4.1), so its update and its
privatised statistics are reconstructed here: a single-loop bilevel step per DP-SGD step; each group's bound C_k
moves by Opt-Q's geometric update towards the clipped fraction at which d tau_k / d C_k = 0; the statistics it
reads (clipped counts, capped excess) are released with Gaussian noise on the step's Poisson-sampled batch and
accounted together with the clipped sum, whose noise is scaled to max_k C_k. The cap R (``excess_cap``) bounds one
record's excess; past sigma* (:func:`shrink_only_noise_multiplier`) every target is 1 and the bounds can only
shrink (:class:`ShrinkOnlyWarning`).

The derivation (Eq. 4 per group, the stationarity condition, the update, the sensitivities of the three releases,
the guards, the shrink-only regime): docs/methods/fairdp.md, the "FairDP" page of the documentation's Methods.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import torch

from dpfair_analysis.training.clipping import StepDecision
from dpfair_analysis.validation import check_positive, check_positive_int


def bias_coefficient(learning_rate: float, smoothness: float) -> float:
    """a = 2 (1 + 1/(mu L)) of Eq. (4)."""
    return 2.0 * (1.0 + 1.0 / (check_positive(learning_rate, "learning_rate") * check_positive(smoothness,
                                                                                               "smoothness")))


def noise_coefficient(noise_multiplier: float, dimension: int, batch_size: float) -> float:
    """V = 3 sigma^2 |1| / n^2 of Eq. (4) (per unit C^2)."""
    return 3.0 * noise_multiplier ** 2 * dimension / batch_size ** 2


def tau_eq4(grad_norm: float, eta: float, clip: float, *, noise_multiplier: float, dimension: int,
            batch_size: float, learning_rate: float, smoothness: float) -> dict[str, float]:
    """Eq. (4) as printed: {"bias": 2(1 + 1/(mu L)) ||grad f|| eta + eta^2, "variance": 3 sigma^2 C^2 |1| / n^2, "tau"}."""
    a = bias_coefficient(learning_rate, smoothness)
    bias = a * grad_norm * eta + eta ** 2
    variance = noise_coefficient(noise_multiplier, dimension, batch_size) * clip ** 2
    return {"bias": bias, "variance": variance, "tau": bias + variance}


def group_tau(norms: torch.Tensor, group: torch.Tensor, group_grad_norms: torch.Tensor, clip: float, *,
              n_groups: int, noise_multiplier: float, dimension: int, batch_size: float, learning_rate: float,
              smoothness: float) -> list[dict[str, float]]:
    """Eq. (4) per group k on exact (non-private) quantities: eta_k = mean_{i in k} (||g_i|| - C)^+ and the
    group's mean-gradient norm ``group_grad_norms[k]`` (Figure 1's analysis; nothing here is released)."""
    rows = []
    for k in range(n_groups):
        member = group == k
        eta = float((norms[member] - clip).clamp(min=0).mean()) if bool(member.any()) else math.nan
        rows.append({"group": k, "eta": eta, **tau_eq4(float(group_grad_norms[k]), eta, clip,
                                                          noise_multiplier=noise_multiplier, dimension=dimension,
                                                          batch_size=batch_size, learning_rate=learning_rate,
                                                          smoothness=smoothness)})
    return rows


def fairdp_statistics(norms: torch.Tensor, group: torch.Tensor, clips: torch.Tensor, *, n_groups: int,
                      excess_cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact statistics FairDP releases: counts (2, K) = ((m_k), (o_k)) and capped excess (K,) = (x_k).

    A sample whose norm is NaN counts as clipped with the full excess R (its ratio is taken as inf): it is left out
    of the sum (clip factor 0), and a NaN here would carry into every later bound."""
    bound = clips.double()[group]
    ratio = torch.nan_to_num(norms.double() / bound, nan=math.inf)
    clipped = ratio > 1
    counts = torch.stack([torch.bincount(group[clipped], minlength=n_groups),
                          torch.bincount(group[~clipped], minlength=n_groups)]).double()
    excess = (ratio - 1).clamp(min=0, max=excess_cap)
    totals = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group, excess)
    return counts, totals


def target_clipped_fraction(e: torch.Tensor, *, bias_coef: float, noise_coef: float) -> torch.Tensor:
    """gamma_k = min(1, 2 V / (a (1 + e_k) + 2 e_k)): the clipped fraction at which d tau_k / d C_k = 0."""
    return (2 * noise_coef / (bias_coef * (1 + e) + 2 * e)).clamp(max=1.0)


def shrink_only_noise_multiplier(*, dimension: int, batch_size: float, bias_coef: float, excess_cap: float) -> float:
    """sigma* above which the target is 1 whatever the statistics, so every bound C_k can only shrink.

    gamma_k = min(1, 2 V / (a (1 + e_k) + 2 e_k)) is smallest at the largest e_k the update can see,
    e_k = R, so gamma_k < 1 is possible iff 2 V < a (1 + R) + 2 R; with V = 3 sigma^2 |1| / b^2:

        sigma* = b sqrt((a (1 + R) + 2 R) / (6 |1|)).

    For sigma >= sigma* the step C_k exp(eta_C (p_k - 1)) is at most C_k at every step, and below C_k
    whenever the noisy clipped fraction p_k < 1: the bounds walk to the floor. The exact tau_k minimiser
    still exists (at an uncapped excess e* = (2 V - a) / (a + 2) > R, every sample clipped); the cap R
    hides it from the update."""
    width = bias_coef * (1 + check_positive(excess_cap, "excess_cap")) + 2 * excess_cap
    return check_positive(batch_size, "batch_size") * math.sqrt(width / (6 * check_positive_int(dimension,
                                                                                              "dimension")))


def tau_minimising_excess(*, bias_coef: float, noise_coef: float) -> float:
    """e* = (2 V - a) / (a + 2): the mean excess at which a fully clipped group's tau_k is stationary.

    With every sample clipped (p_k = 1) the stationarity condition p_k = gamma_k reads
    a (1 + e) + 2 e = 2 V. The update can reach it only if the cap R on the released excess exceeds it:
    R > e* is the same condition as sigma < sigma* (:func:`shrink_only_noise_multiplier`), since both say
    2 V < a (1 + R) + 2 R."""
    return (2 * noise_coef - bias_coef) / (bias_coef + 2)


def fairdp_stationary_bounds(norms: torch.Tensor, group: torch.Tensor, *, n_groups: int, initial: float,
                             bias_coef: float, noise_coef: float, excess_cap: float = 5.0,
                             grid: int = 512, levels: int = 3) -> torch.Tensor:
    """Each group's FairDP bound at the fixed point of its update on the exact statistics (shape (K,)).

    FairDP (this module) moves C_k by exp(eta_C (p_k - gamma_k)) each
    step, p_k(C) the group's clipped fraction and gamma_k(C) = min(1, 2V / (a (1 + e_k) + 2 e_k)),
    e_k(C) = mean_{i in k} min(||g_i|| / C - 1, R)^+: it rests where p_k(C) = gamma_k(C), i.e. where
    d tau_k / d C_k = 0 (Eq. 4). p_k falls and e_k falls (so gamma_k rises) as C grows, so
    p_k - gamma_k is non-increasing and the root is unique: found on ``levels`` nested grids of
    ``grid`` points in log C (relative precision 9.2 / grid^levels, 7e-8) within FairDP's
    public range [initial / 100, initial * 100] (a root outside it is the range's end, as the
    update's clamp makes it). A group without rows keeps ``initial``. The statistics are those of
    :func:`fairdp_statistics`, read off each group's sorted norms and their
    prefix sums (a bisection step costs two searches, not a pass over the rows).
    """
    low = torch.full((n_groups,), math.log(initial / 100), dtype=torch.float64)
    high = torch.full((n_groups,), math.log(initial * 100), dtype=torch.float64)
    sizes = torch.bincount(group, minlength=n_groups)
    present = sizes > 0
    # norms sorted within each group, padded with +inf: (K, L), and their prefix sums (K, L + 1)
    by_norm = torch.argsort(norms.double())
    order = by_norm[torch.argsort(group[by_norm], stable=True)]
    starts = torch.cumsum(sizes, 0) - sizes
    position = torch.arange(len(order)) - starts[group[order]]
    padded = torch.full((n_groups, max(int(sizes.max()), 1)), math.inf, dtype=torch.float64)
    padded[group[order], position] = norms.double()[order]
    prefix = torch.cat([torch.zeros(n_groups, 1, dtype=torch.float64),
                        torch.cumsum(torch.where(torch.isfinite(padded), padded, 0.0), 1)], 1)
    rows = sizes.to(torch.float64).clamp(min=1.0)

    def excess_of_target(log_clips: torch.Tensor) -> torch.Tensor:  # (K, G) candidate bounds -> p_k - gamma_k
        clips = log_clips.exp()
        within = torch.searchsorted(padded, clips, right=True)                  # rows with ||g|| <= C
        capped = torch.searchsorted(padded, clips * (1 + excess_cap), right=True)  # ... <= C (1 + R)
        clipped = sizes.unsqueeze(1) - within
        middle = (prefix.gather(1, capped) - prefix.gather(1, within)) / clips - (capped - within)
        excess = middle + excess_cap * (sizes.unsqueeze(1) - capped)
        gamma = target_clipped_fraction(excess / rows.unsqueeze(1), bias_coef=bias_coef, noise_coef=noise_coef)
        return clipped / rows.unsqueeze(1) - gamma

    at_low = excess_of_target(low.unsqueeze(1)).squeeze(1) <= 0
    at_high = excess_of_target(high.unsqueeze(1)).squeeze(1) >= 0
    for _ in range(levels):  # the crossing's bracket shrinks by `grid` per level
        points = low.unsqueeze(1) + (high - low).unsqueeze(1) * torch.linspace(0, 1, grid + 1, dtype=torch.float64)
        above = excess_of_target(points) > 0  # still clipping more than the target: the root is larger
        last = above.sum(1).clamp(min=1, max=grid) - 1   # non-increasing: the last point still above
        low, high = points.gather(1, last.unsqueeze(1)).squeeze(1), points.gather(1, (last + 1).unsqueeze(1)).squeeze(1)
    bounds = ((low + high) / 2).exp()
    bounds = torch.where(at_low, torch.full_like(bounds, initial / 100), bounds)
    bounds = torch.where(at_high & ~at_low, torch.full_like(bounds, initial * 100), bounds)
    return torch.where(present, bounds, torch.full_like(bounds, initial))


def fairdp_run_bounds(stationary: torch.Tensor, *, initial: float, clip_lr: float, steps: int) -> torch.Tensor:
    r"""The bounds a run of ``steps`` steps clips to, on average, on its way from ``initial`` to the fixed point.

    Each step moves :math:`\log C_k` by :math:`\eta_C (p_k - \gamma_k)`, at most :math:`\eta_C` since
    :math:`|p_k - \gamma_k| \le 1`, so a run of T steps cannot reach a fixed point ``stationary`` =
    :math:`C^*_k` (:func:`fairdp_stationary_bounds`) further than :math:`\eta_C T` in log C. Moving at that speed
    towards it, step t + 1 clips at :math:`\log C_0 + \mathrm{sign}(L_k) \min(\eta_C t, |L_k|)` with
    :math:`L_k = \log(C^*_k / C_0)` (the first at :math:`C_0`); the bound returned is their geometric mean over
    the run,

    .. math:: C_0 \exp\Big(\mathrm{sign}(L_k) \frac{1}{T} \sum_{t=0}^{T-1} \min(\eta_C t, |L_k|)\Big)
              = C_0 \exp\Big(\mathrm{sign}(L_k) \frac{\eta_C m (m - 1) / 2 + |L_k| (T - m)}{T}\Big),

    :math:`m = \min(T, \lceil |L_k| / \eta_C \rceil)` the steps still on the way. It tends to :math:`C^*_k` as
    T grows and is :math:`C_0` for T = 1; slower moves (:math:`|p_k - \gamma_k| < 1`) stay nearer :math:`C_0`.
    """
    check_positive(initial, "initial")
    check_positive(clip_lr, "clip_lr")
    check_positive_int(steps, "steps")
    log_ratio = torch.log(stationary.double() / initial)
    distance = log_ratio.abs()
    on_the_way = torch.clamp(torch.ceil(distance / clip_lr), max=float(steps))
    moved = (clip_lr * on_the_way * (on_the_way - 1) / 2 + distance * (steps - on_the_way)) / steps
    return initial * torch.exp(torch.sign(log_ratio) * moved)


class ShrinkOnlyWarning(UserWarning):
    """FairDP's excess cap R is at or below e* (:func:`tau_minimising_excess`): every target clipped fraction
    is 1, so the bounds can only shrink and the upper problem (6a) is switched off."""


def fairdp_update(smoothed_counts: torch.Tensor, smoothed_excess: torch.Tensor, clips: torch.Tensor, *,
                  bias_coef: float, noise_coef: float, excess_cap: float, clip_lr: float, min_clip: float,
                  max_clip: float) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, int]]:
    """C^{t+1} from the (smoothed) noisy statistics at C^t (module docstring, 2.-4.); post-processing only.

    Returns the next bounds, the per-group estimates {"p", "e", "gamma", "tau" (per unit C_k^2)} and the
    guard counts."""
    m_hat, o_hat = smoothed_counts[0], smoothed_counts[1]
    b_hat = m_hat + o_hat
    empty = b_hat < 1.0
    safe = b_hat.clamp(min=1.0)
    p = (m_hat / safe).clamp(0.0, 1.0)
    e = (smoothed_excess / safe).clamp(0.0, excess_cap)
    gamma = target_clipped_fraction(e, bias_coef=bias_coef, noise_coef=noise_coef)
    tau = bias_coef * (1 + e) * e + e ** 2 + noise_coef
    step = torch.where(empty, torch.zeros_like(p), p - gamma)
    following = (clips.double() * torch.exp(clip_lr * step)).clamp(min_clip, max_clip)
    fires = {"empty_group": int(empty.sum()),
             "clip_floor": int((following <= min_clip).sum()), "clip_ceiling": int((following >= max_clip).sum())}
    return following, {"p": p, "e": e, "gamma": gamma, "tau": tau}, fires


@dataclass(frozen=True)
class FairDP:
    """FairDP as reconstructed in the module docstring.

    Parameters
    ----------
    initial_clip : float
        C_k at the first step, for every group.
    noise_multiplier : float
        sigma of the clipped sum, relative to max_k C_k.
    count_noise : float
        sigma_1: standard deviation (= noise multiplier) of each released count.
    excess_noise : float
        sigma_x: noise multiplier of the capped-excess release (its standard deviation is sigma_x R).
    dimension : int
        |1| of Eq. (4): the number of model parameters.
    learning_rate : float
        mu of Eq. (4) (the run's step size).
    smoothness : float or None
        L of Eq. (4); None: 1/mu.
    excess_cap : float
        R.
    clip_lr : float
        eta_C.
    smoothing : float
        beta in [0, 1) of the moving averages of the released statistics (0: each step's own).
    min_clip, max_clip : float or None
        Public bounds on every C_k (None: initial_clip / 100 and initial_clip * 100).
    """

    initial_clip: float
    noise_multiplier: float
    count_noise: float
    excess_noise: float
    dimension: int
    learning_rate: float
    smoothness: float | None = None
    excess_cap: float = 5.0
    clip_lr: float = 0.05
    smoothing: float = 0.9
    min_clip: float | None = None
    max_clip: float | None = None
    name: str = "fairdp"
    private: bool = True

    def __post_init__(self) -> None:
        for name in ("initial_clip", "noise_multiplier", "count_noise", "excess_noise", "learning_rate",
                     "excess_cap", "clip_lr"):
            check_positive(getattr(self, name), name)
        check_positive_int(self.dimension, "dimension")
        if self.smoothness is not None:
            check_positive(self.smoothness, "smoothness")
        for name in ("min_clip", "max_clip"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)
        low, high = self.clip_range
        if not low <= self.initial_clip <= high or low >= high:
            raise ValueError(f"min_clip < max_clip must bracket initial_clip={self.initial_clip!r}, "
                             f"got [{low!r}, {high!r}]")
        if not 0 <= self.smoothing < 1:
            raise ValueError(f"smoothing must be in [0, 1), got {self.smoothing!r}")
        # run state, not fields (not hashed): the current C_k, the moving sums and the step count
        object.__setattr__(self, "_clips", None)
        object.__setattr__(self, "_averages", None)

    @property
    def clip_range(self) -> tuple[float, float]:
        low = self.initial_clip / 100 if self.min_clip is None else self.min_clip
        high = self.initial_clip * 100 if self.max_clip is None else self.max_clip
        return low, high

    @property
    def bias_coef(self) -> float:
        smoothness = 1.0 / self.learning_rate if self.smoothness is None else self.smoothness
        return bias_coefficient(self.learning_rate, smoothness)

    def for_run(self) -> "FairDP":
        """A copy with every C_k back at ``initial_clip`` (see :func:`~.clipping.fresh_policy`)."""
        return replace(self)

    def current_clips(self, n_groups: int) -> torch.Tensor:
        """The bounds the next step clips to (float64, shape (K,))."""
        if self._clips is None or len(self._clips) != n_groups:
            return torch.full((n_groups,), float(self.initial_clip), dtype=torch.float64)
        return self._clips.clone()

    def _smooth(self, counts: torch.Tensor, excess: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Bias-corrected exponential moving averages of the released values (Adam's correction)."""
        beta = self.smoothing
        if self._averages is None or self._averages[0].shape != counts.shape:
            averages = [torch.zeros_like(counts), torch.zeros_like(excess), 0]
        else:
            averages = list(self._averages)
        averages[0] = beta * averages[0] + (1 - beta) * counts
        averages[1] = beta * averages[1] + (1 - beta) * excess
        averages[2] += 1
        object.__setattr__(self, "_averages", tuple(averages))
        correction = 1 - beta ** averages[2]
        return averages[0] / correction, averages[1] / correction

    def planned_noise_multipliers(self) -> tuple[float, float, float]:
        """(counts, capped excess, clipped sum): sigma_1, sigma_x and sigma at every step."""
        return self.count_noise, self.excess_noise, self.noise_multiplier

    def warn_if_shrink_only(self, expected_batch_size: float) -> None:
        """A :class:`ShrinkOnlyWarning` naming e*, sigma* and the cap that would reach e*, if R <= e*."""
        noise_coef = noise_coefficient(self.noise_multiplier, self.dimension, expected_batch_size)
        uncapped = tau_minimising_excess(bias_coef=self.bias_coef, noise_coef=noise_coef)
        if self.excess_cap <= uncapped:
            sigma_star = shrink_only_noise_multiplier(dimension=self.dimension, batch_size=expected_batch_size,
                                                      bias_coef=self.bias_coef, excess_cap=self.excess_cap)
            warnings.warn(ShrinkOnlyWarning(
                f"FairDP: excess_cap {self.excess_cap:g} <= {uncapped:.3g}, the excess where Eq. (4)'s tau_k is "
                f"stationary (sigma {self.noise_multiplier:g}, {self.dimension:,} parameters, batch "
                f"{expected_batch_size:g}), so every bound can only shrink (sigma >= sigma* = {sigma_star:.3g}); "
                f"an excess_cap above {uncapped:.3g} lets the bounds adapt"), stacklevel=3)

    def decide(self, norms: torch.Tensor, group: torch.Tensor, *, n_groups: int,
               expected_batch_size: float, generator: torch.Generator) -> StepDecision:
        if self._averages is None:  # the run's first step
            self.warn_if_shrink_only(expected_batch_size)
        clips = self.current_clips(n_groups)
        counts, excess = fairdp_statistics(norms, group, clips, n_groups=n_groups, excess_cap=self.excess_cap)
        noisy_counts = counts + torch.randn(counts.shape, generator=generator, dtype=torch.float64) * self.count_noise
        noisy_excess = excess + torch.randn(excess.shape, generator=generator,
                                            dtype=torch.float64) * (self.excess_noise * self.excess_cap)
        smoothed_counts, smoothed_excess = self._smooth(noisy_counts, noisy_excess)
        low, high = self.clip_range
        following, estimates, fires = fairdp_update(
            smoothed_counts, smoothed_excess, clips, bias_coef=self.bias_coef,
            noise_coef=noise_coefficient(self.noise_multiplier, self.dimension, expected_batch_size),
            excess_cap=self.excess_cap, clip_lr=self.clip_lr, min_clip=low, max_clip=high)
        object.__setattr__(self, "_clips", following)
        largest = float(clips.max())
        record: dict[str, float] = {"C": largest, **{f"guard_{k}": v for k, v in fires.items()}}
        for k in range(n_groups):
            record.update({f"C[{k}]": float(clips[k]), f"m[{k}]": float(noisy_counts[0, k]),
                           f"o[{k}]": float(noisy_counts[1, k]), f"x[{k}]": float(noisy_excess[k]),
                           f"tau[{k}]": float(estimates["tau"][k] * clips[k] ** 2),
                           f"p[{k}]": float(estimates["p"][k]), f"gamma[{k}]": float(estimates["gamma"][k])})
        return StepDecision(bounds=clips.to(norms.dtype)[group], noise_std=self.noise_multiplier * largest,
                            noise_multipliers=self.planned_noise_multipliers(), record=record)
