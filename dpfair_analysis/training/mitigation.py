"""Paper 001's mitigation (§9): DP-SGD on the objective penalised by the group terms of Eq. (6), privately.

Paper 001 proposes to minimise, with the boundary proxy phi(x) = 1 - sum_k f_k(x)^2 in place
of the Hessian trace,

    L(theta) + sum_a ( gamma_1 |<g_a - g, g - gbar>| + gamma_2 |m_a - m| ),     m_a = E_{x ~ D_a} phi(x),

with g_a, g the (unclipped) group and population mean gradients and gbar the clipped
population mean. The paper does not say how the group terms are computed privately;
computed from the batch, they make every record's gradient depend on every other
record's, so DP-SGD's per-record sensitivity C no longer holds. Here:

**Per-sample form.** With signs s_a = sign(m_a - m), s'_a = sign<g_a - g, v>, v = g - gbar
held fixed within a step (the clipping-bias direction is treated as a constant, which
drops the term J_v^T (g_a - g) of the exact gradient), and group fractions p_a, the
penalty's gradient is an average over records, so each record i in group a gets the
per-sample objective

    psi_i(theta) = L_i(theta) + gamma_1 k'_a <grad L_i(theta), v> + gamma_2 k_a phi_i(theta),
    k_a = s_a / p_a - sum_b s_b,     k'_a = s'_a / p_a - sum_b s'_b,

whose batch mean is an unbiased estimate of the penalised objective's gradient under
Poisson sampling. DP-SGD clips grad psi_i to C and adds N(0, sigma^2 C^2) as usual.

**Where the coefficients come from (privacy).** s_a, s'_a, v and p_a are computed only
from quantities released earlier, so they are public at the step that uses them:

* once, before training: the group counts n_a + N(0, sigma_n^2) (count vector
  sensitivity 1 under add/remove) -- a Gaussian event with multiplier sigma_n;
* every step, on the same Poisson batch as the gradient: per group a, the noisy sums of
  [pi_C(g_i), pi_C(g_i - pi_C(g_i)), phi_i, 1] over the batch's records of group a
  (each record touches one group's block; its contribution has norm at most
  Delta_s = sqrt(2 C^2 + 2), as 0 <= phi_i < 1), with N(0, sigma_s^2 Delta_s^2) on every
  coordinate. The loop composes this release with the gradient release into one
  sampled Gaussian per step with multiplier (sigma^-2 + sigma_s^-2)^-1/2.

The statistics are smoothed by an exponential moving average (post-processing), and the
step after a release uses them; the first step has no statistics and no penalty.
g_a is estimated as the group's mean clipped gradient plus its mean clipped bias, so v
and g_a - g are biased when gradients exceed 2C; this is the price of a bounded
sensitivity and is stated, not hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.metrics import boundary_proxy_of_logits
from dpfair_analysis.gradients import Grads, clip_rows, flatten, per_sample_gradients
from dpfair_analysis.validation import check_nonnegative, check_positive


def statistics_sensitivity(clip_bound: float) -> float:
    """Delta_s = sqrt(2 C^2 + 2): l2 norm bound of one record's block [pi_C(g), pi_C(g - pi_C(g)), phi, 1]."""
    return math.sqrt(2 * check_positive(clip_bound, "clip_bound") ** 2 + 2)


def penalty_coefficients(signs: torch.Tensor, fractions: torch.Tensor) -> torch.Tensor:
    """k_a = s_a / p_a - sum_b s_b: weight of group a's records in the per-sample penalty gradient."""
    return signs / fractions - signs.sum()


@dataclass
class FairnessLensMitigation:
    """The per-sample objective psi_i of the mitigation, with its private statistics (see module docstring).

    Parameters
    ----------
    gamma1, gamma2 : float
        Weights of the clipping term and of the boundary-proxy term of Eq. (6) (>= 0).
    clip_bound : float
        C: the bound the statistics are clipped to (use the DP-SGD policy's C).
    stats_noise_multiplier : float
        sigma_s of the per-step statistics release.
    count_noise_multiplier : float
        sigma_n of the one-time group-count release.
    smoothing : float
        beta in [0, 1) of the moving average over released statistics.
    """

    gamma1: float
    gamma2: float
    clip_bound: float
    stats_noise_multiplier: float = 2.0
    count_noise_multiplier: float = 10.0
    smoothing: float = 0.9
    name: str = "fairness_lens"
    released_counts: torch.Tensor | None = field(default=None, init=False, repr=False)
    fractions: torch.Tensor | None = field(default=None, init=False, repr=False)
    statistics: torch.Tensor | None = field(default=None, init=False, repr=False)
    coefficients: tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]] | None = field(default=None, init=False,
                                                                                            repr=False)

    def __post_init__(self) -> None:
        check_nonnegative(self.gamma1, "gamma1")
        check_nonnegative(self.gamma2, "gamma2")
        check_positive(self.clip_bound, "clip_bound")
        check_positive(self.stats_noise_multiplier, "stats_noise_multiplier")
        check_positive(self.count_noise_multiplier, "count_noise_multiplier")
        if not 0 <= self.smoothing < 1:
            raise ValueError(f"smoothing must be in [0, 1), got {self.smoothing!r}")

    # ------------------------------------------------------------ the Objective protocol
    def prepare(self, data: GroupedDataset, *, generator: torch.Generator) -> tuple[float, ...]:
        """Release the group counts once (noise sigma_n); p_a = max(noisy n_a, 1) / sum."""
        counts = data.group_sizes().to(torch.float64)
        self.released_counts = counts + self.count_noise_multiplier * torch.randn(counts.shape, generator=generator,
                                                                                  dtype=torch.float64)
        floored = self.released_counts.clamp(min=1.0)
        self.fractions = floored / floored.sum()
        self.statistics, self.coefficients = None, None
        return (self.count_noise_multiplier,)

    def planned_noise_multipliers(self) -> tuple[float, ...]:
        return (self.stats_noise_multiplier,)

    def per_sample_gradients(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                             params: Mapping[str, torch.Tensor]) -> tuple[Grads, torch.Tensor]:
        """(grad psi_i, L_i): the penalised per-sample gradients and the plain losses."""
        params = dict(params)
        if self.coefficients is None or (self.gamma1 == 0 and self.gamma2 == 0):
            k1 = k2 = torch.zeros(len(group), dtype=X.dtype)
            v = None
        else:
            kappa1, kappa2, v = self.coefficients
            k1, k2 = kappa1[group].to(X.dtype), kappa2[group].to(X.dtype)
        gamma1 = self.gamma1 if v is not None else 0.0

        def sample_loss(p: dict[str, torch.Tensor], x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(functional_call(model, p, (x.unsqueeze(0),)), t.unsqueeze(0))

        def psi(p: dict[str, torch.Tensor], x: torch.Tensor, t: torch.Tensor, c1: torch.Tensor,
                c2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            logits = functional_call(model, p, (x.unsqueeze(0),))
            loss = F.cross_entropy(logits, t.unsqueeze(0))
            total = loss + self.gamma2 * c2 * boundary_proxy_of_logits(logits)[0]
            if gamma1:
                g = grad(sample_loss)(p, x, t)
                total = total + gamma1 * c1 * sum((g[k] * v[k]).sum() for k in g)
            return total, loss

        grads, losses = vmap(grad(psi, has_aux=True), in_dims=(None, 0, 0, 0, 0))(params, X, y, k1, k2)
        return grads, losses.detach()

    def release(self, model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                params: Mapping[str, torch.Tensor], bounds: torch.Tensor, expected_batch_size: float,
                generator: torch.Generator) -> dict[str, float]:
        """Release this batch's noisy per-group statistics and update next step's coefficients."""
        if self.fractions is None:
            raise RuntimeError("FairnessLensMitigation.prepare must run before training (train() calls it)")
        n_groups = len(self.fractions)
        C = self.clip_bound
        params = dict(params)
        size = sum(p.numel() for p in params.values())
        block = torch.zeros(n_groups, 2 * size + 2, dtype=torch.float64)
        if len(group):
            G = flatten(per_sample_gradients(model, X, y, params=params)).to(torch.float64)
            clipped = clip_rows(G, C)
            bias = clip_rows(G - clipped, C)
            with torch.no_grad():
                phi = boundary_proxy_of_logits(functional_call(model, params, (X,))).to(torch.float64)
            rows = torch.cat([clipped, bias, phi.unsqueeze(1), torch.ones(len(group), 1, dtype=torch.float64)], 1)
            # a record whose gradient or phi is not finite adds nothing (not even its count): its NaN would mark its
            # group's row of the released block
            finite = torch.isfinite(G.norm(dim=1)) & torch.isfinite(phi)
            block.index_add_(0, group, torch.where(finite.unsqueeze(1), rows, 0.0))
        noise_std = self.stats_noise_multiplier * statistics_sensitivity(C)
        block += noise_std * torch.randn(block.shape, generator=generator, dtype=torch.float64)
        beta = self.smoothing
        self.statistics = block if self.statistics is None else beta * self.statistics + (1 - beta) * block
        self.coefficients = self._coefficients(params, size)
        kappa1, kappa2, _ = self.coefficients
        record = {f"kappa1[{k}]": float(kappa1[k]) for k in range(n_groups)}
        record |= {f"kappa2[{k}]": float(kappa2[k]) for k in range(n_groups)}
        return record

    # ------------------------------------------------------------ post-processing
    def _coefficients(self, params: Mapping[str, torch.Tensor], size: int
                      ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(k'_a, k_a, v) from the smoothed released statistics (no data access)."""
        stats = self.statistics
        counts = stats[:, -1].clamp(min=1.0)
        clipped, bias, phi = stats[:, :size], stats[:, size:2 * size], stats[:, 2 * size]
        total = counts.sum()
        m_a, m = phi / counts, phi.sum() / total
        g_a = (clipped + bias) / counts.unsqueeze(1)
        g = (clipped + bias).sum(0) / total
        v = bias.sum(0) / total
        signs2 = torch.sign(m_a - m)
        signs1 = torch.sign((g_a - g) @ v)
        kappa1 = penalty_coefficients(signs1, self.fractions)
        kappa2 = penalty_coefficients(signs2, self.fractions)
        names = list(params)
        pieces = torch.split(v, [params[k].numel() for k in names])
        v_named = {k: piece.view(params[k].shape).to(params[k].dtype) for k, piece in zip(names, pieces)}
        return kappa1, kappa2, v_named
