"""PF-LD bias-variance bounds (paper 003 Thms 6, 7), their minimiser and Figure 3.

Theorem 6 (primal). With G the group-dependent primal gradient and G~ its clipped and
noised version (noise N(0, s^2 I) in S = number of parameters dimensions),

.. math:: E\\|G - \\tilde G\\| \\le \\sqrt{S}\\, s
          + \\sum_i \\lambda_i \\hat E_{z \\in B_{G_i}}[\\max(0, \\|\\nabla h(z)\\| - C_p)],

and the paper substitutes :math:`s = \\sigma_p \\Delta_p` with its Eq. (7),
:math:`\\Delta_p = 2 C_p \\lambda^{\\max} / (\\min_i |B_{G_i}| - 1)`. The proof is valid
as an inequality (its step "||sum_i ...|| = sum_i lambda_i ||...||" is a triangle
inequality, written as an equality) for whatever noise s is used; with the toolkit's
default release s = sigma_p Delta_1 (:mod:`dpfair_analysis.privacy.sensitivity`).
:func:`primal_error_bound` takes the noise std, :func:`paper_primal_error_bound` uses
the paper's Delta_p.

"Unique minimiser" (paper, after Thm 6). The bound is b(C) = a C + sum_i lambda_i
mean_i max(0, ||g|| - C) with a = 2 sqrt(S) sigma_p lambda_max / (min|B_G| - 1): convex
and *piecewise linear* in C, so its minimisers form an interval (possibly a single
breakpoint, possibly {0}) where 0 lies in the subdifferential
[a - sum_i lambda_i P_i(||g|| >= C), a - sum_i lambda_i P_i(||g|| > C)]. The paper's
condition a = sum_i lambda_i P_i(||g|| >= C) generally has no solution (the right side
takes finitely many values). Since sqrt(S) is large for a network (thousands of
parameters), a usually exceeds sum_i lambda_i and the minimiser is C_p = 0: the bound
then recommends clipping every gradient to zero (:func:`primal_bound_minimiser`).

Theorem 7 (dual), per term i: E|V_i - V~_i| <= s_d + mean_{z in D_{G_i}} max(0, |h(z)| - C_d)
with the paper's s_d = sqrt(2) C_d sigma_d / (min |D_G| - 1).

Figure 3: :func:`fraction_above_clip`, the share of per-sample group gradients with
norm above C_p, per group.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.constraints import FairnessConstraint
from dpfair_analysis.gradients import flatten, per_sample_gradients
from dpfair_analysis.privacy.sensitivity import clip_rows, paper_dual_sensitivity, paper_primal_sensitivity
from dpfair_analysis.validation import check_nonnegative, check_positive, check_positive_int, check_seed

__all__ = ["h_gradients", "primal_error_bound", "paper_primal_error_bound", "primal_error_monte_carlo",
           "primal_bound_minimiser", "dual_error_bound", "paper_dual_error_bound", "dual_error_monte_carlo",
           "fraction_above_clip"]


def h_gradients(model: nn.Module, data: GroupedDataset, constraint: FairnessConstraint) -> torch.Tensor:
    """Per-sample gradients of h (the constraint's soft h) as an (n, S) matrix."""
    grads = per_sample_gradients(model, data.X, data.y, loss_fn=lambda logit, t: constraint.h(logit, t).sum())
    return flatten(grads).detach().double()


def _bias_primal(norms_by_term: Sequence[np.ndarray], lambdas: Sequence[float], clip: float) -> float:
    return float(sum(lam * (np.maximum(0.0, np.asarray(v) - clip).mean() if len(v) else 0.0)
                     for lam, v in zip(lambdas, norms_by_term)))


def primal_error_bound(norms_by_term: Sequence[np.ndarray], lambdas: Sequence[float], *, clip: float,
                       noise_std: float, n_params: int) -> float:
    """sqrt(S) s + sum_i lambda_i mean_{G_i} max(0, ||grad h|| - C_p) (Thm 6 with noise std s)."""
    clip, noise_std = check_positive(clip, "clip"), check_nonnegative(noise_std, "noise_std")
    return math.sqrt(check_positive_int(n_params, "n_params")) * noise_std + _bias_primal(norms_by_term, lambdas, clip)


def paper_primal_error_bound(norms_by_term: Sequence[np.ndarray], lambdas: Sequence[float], *, clip: float,
                             sigma: float, lambda_max: float, n_params: int) -> float:
    """paper 003 Thm 6 as printed: 2 sqrt(S) sigma_p lambda_max C_p / (min|B_G| - 1) + bias."""
    sizes = [len(v) for v in norms_by_term]
    delta = paper_primal_sensitivity(sizes, clip=clip, lambda_max=lambda_max)
    return primal_error_bound(norms_by_term, lambdas, clip=clip, noise_std=sigma * delta, n_params=n_params)


def primal_error_monte_carlo(grads: torch.Tensor, masks: torch.Tensor, lambdas: Sequence[float], *,
                             clip: float, noise_std: float, draws: int = 200, seed: int = 0) -> tuple[float, float]:
    """Monte-Carlo E||G - G~|| (mean, standard error) on real per-sample gradients.

    G - G~ = sum_i lambda_i s_i (mean_{G_i} clip(g) - mean_{G_i} g) - noise; the signs do
    not change the norm of the bias's contribution per term but do matter across terms,
    so s_i = +1 (the bias term of the bound is sign-free).
    """
    grads = grads.double()
    lam = torch.as_tensor(list(lambdas), dtype=torch.float64)
    w = masks.double()
    counts = w.sum(0).clamp(min=1)
    bias = ((w.T @ (clip_rows(grads, clip) - grads)) / counts.unsqueeze(1) * lam.unsqueeze(1)).sum(0)
    g = torch.Generator().manual_seed(check_seed(seed))
    noise = torch.randn((check_positive_int(draws, "draws"), grads.shape[1]), generator=g, dtype=torch.float64)
    errors = torch.linalg.vector_norm(bias.unsqueeze(0) - noise_std * noise, dim=1)
    return float(errors.mean()), float(errors.std() / math.sqrt(draws))


def primal_bound_minimiser(norms_by_term: Sequence[np.ndarray], lambdas: Sequence[float], *,
                           slope: float) -> dict[str, float]:
    """Minimisers of b(C) = slope C + sum_i lambda_i mean_i max(0, ||g|| - C) over C >= 0.

    b is convex piecewise linear with breakpoints at the norms; it is minimised at a
    breakpoint (or 0), and the minimisers form [c_low, c_high]. Also returns the
    paper's optimality residual ``slope - sum_i lambda_i P_i(||g|| >= C)`` at c_low.
    """
    slope = check_nonnegative(slope, "slope")
    candidates = np.unique(np.concatenate([[0.0]] + [np.asarray(v, dtype=float) for v in norms_by_term]))

    def b(c: float) -> float:
        return slope * c + _bias_primal(norms_by_term, lambdas, c)

    values = np.array([b(c) for c in candidates])
    best = values.min()
    tol = 1e-12 * max(1.0, abs(best))
    at = candidates[values <= best + tol]
    c_low = float(at.min())
    residual = slope - sum(lam * (np.asarray(v) >= c_low).mean() if len(v) else 0.0
                           for lam, v in zip(lambdas, norms_by_term))
    return {"c_low": c_low, "c_high": float(at.max()), "bound": float(best), "paper_condition_residual": float(residual),
            "slope": slope, "sum_lambda": float(sum(lambdas))}


def dual_error_bound(h_by_term: Sequence[np.ndarray], *, clip: float, noise_std: float) -> np.ndarray:
    """Per term: s_d + mean_{G_i} max(0, |h| - C_d) (Thm 7 with noise std s_d)."""
    clip, noise_std = check_positive(clip, "clip"), check_nonnegative(noise_std, "noise_std")
    return np.array([noise_std + (np.maximum(0.0, np.abs(np.asarray(v)) - clip).mean() if len(v) else 0.0)
                     for v in h_by_term])


def paper_dual_error_bound(h_by_term: Sequence[np.ndarray], *, clip: float, sigma: float) -> np.ndarray:
    """paper 003 Thm 7 as printed: sqrt(2) C_d sigma_d / (min|D_G| - 1) + bias, per term."""
    delta = paper_dual_sensitivity([len(v) for v in h_by_term], clip=clip)
    return dual_error_bound(h_by_term, clip=clip, noise_std=sigma * delta)


def dual_error_monte_carlo(h: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                           constraint: FairnessConstraint, clip: float, noise_std: float, draws: int = 2000,
                           seed: int = 0) -> np.ndarray:
    """Monte-Carlo E|V_i - V~_i| per term, V~_i = |mu_P - mu-bar_G| + N(0, s_d^2) (Eq. 13)."""
    h = h.double()
    true = constraint.term_gaps(h, y, group).abs()
    pop = constraint.population_masks(y).double()
    mu_p = (pop * h.unsqueeze(1)).sum(0) / pop.sum(0).clamp(min=1)  # population mean: not clipped
    grp = constraint.group_masks(y, group).double()
    mu_g_clip = (grp * h.clamp(-clip, clip).unsqueeze(1)).sum(0) / grp.sum(0).clamp(min=1)
    private_mean = (mu_p - mu_g_clip).abs()
    g = torch.Generator().manual_seed(check_seed(seed))
    noise = torch.randn((check_positive_int(draws, "draws"), len(true)), generator=g, dtype=torch.float64)
    return (true.unsqueeze(0) - private_mean.unsqueeze(0) - noise_std * noise).abs().mean(0).numpy()


def fraction_above_clip(norms: np.ndarray, group: np.ndarray, clips: Sequence[float], *,
                        group_names: Sequence[str] | None = None) -> pd.DataFrame:
    """Figure 3's right column: share of per-sample h-gradient norms above C_p, per group.

    Tidy: one row per (clip, group) with ``fraction_above``.
    """
    norms, group = np.asarray(norms, dtype=float), np.asarray(group)
    rows = []
    for c in clips:
        c = check_positive(c, "clip")
        for k in np.unique(group):
            sel = norms[group == k]
            name = group_names[int(k)] if group_names is not None else str(k)
            rows.append({"clip": c, "group": name, "n": int(len(sel)), "fraction_above": float((sel > c).mean())})
    return pd.DataFrame(rows)
