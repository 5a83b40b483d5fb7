"""Sensitivities of PF-LD's private releases: the paper's claims and bounds that hold.

Privacy model (paper 003 Sec. 4.2): neighbours differ in **one person's sensitive attribute A** (features and
labels are public); with missing values (Sec. 7) "not reported" is one more value of A. The paper's Theorem 1
(primal, Eq. 7), Theorem 2 (dual, Eq. 11) and Sec. 7's rule Delta / r are refuted by counterexamples (tested in
``tests/pfld/test_pfld_sensitivity.py``); the default releases are sums with public denominators, bounded by
:func:`primal_contribution_bound` (replace-one under Poisson subsampling), :func:`dual_sum_distance` and
:func:`count_distance`, which hold for signed and unsigned h and any group sizes.

The claims, the counterexamples and the proofs of the bounds used: docs/methods/pfld_sensitivity.md, the
"PF-LD's sensitivities" page of the documentation's Methods.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import torch

from dpfair_analysis.fairness.constraints import FairnessConstraint
from dpfair_analysis.validation import check_fraction, check_nonnegative, check_positive

__all__ = [
    "PrivacyNotEstablishedWarning",
    "paper_primal_sensitivity", "paper_dual_sensitivity", "paper_missing_values_sensitivity",
    "paper_primal_release", "paper_primal_group_part", "paper_dual_release",
    "primal_group_sum", "dual_group_sums", "group_counts",
    "primal_contribution_bound", "primal_replace_distance", "dual_sum_distance", "count_distance",
    "change_group", "exact_change", "clip_rows", "clip_values",
]


class PrivacyNotEstablishedWarning(UserWarning):
    """The run uses a sensitivity claim that the tests refute (``paper_exact=True``)."""


# ---------------------------------------------------------------- the paper's claims
def paper_primal_sensitivity(group_sizes, *, clip: float, lambda_max: float) -> float:
    """paper 003 Thm 1, Eq. (7): 2 C_p lambda_max / (min_i |B_{G_i}| - 1) (inf if min <= 1).

    NOT a valid sensitivity (see the module docstring); kept to reproduce the paper.
    """
    clip, lambda_max = check_positive(clip, "clip"), check_nonnegative(lambda_max, "lambda_max")
    m = int(np.min(np.asarray(group_sizes)))
    return math.inf if m <= 1 else 2.0 * clip * lambda_max / (m - 1)


def paper_dual_sensitivity(group_sizes, *, clip: float) -> float:
    """paper 003 Thm 2, Eq. (11): sqrt(2) C_d / (min_i |D_{G_i}| - 1) (inf if min <= 1).

    Holds for unsigned h in [0, C_d] as a local bound, fails for signed h; its noise
    scale depends on the attribute (see the module docstring).
    """
    clip = check_positive(clip, "clip")
    m = int(np.min(np.asarray(group_sizes)))
    return math.inf if m <= 1 else math.sqrt(2.0) * clip / (m - 1)


def paper_missing_values_sensitivity(full_data_sensitivity: float, reported_fraction: float) -> float:
    """paper 003 Sec. 7: Delta' = Delta / r, Delta computed on the full group sizes.

    Refuted when reporting is uneven across groups (see the tests' stored case).
    """
    r = check_fraction(reported_fraction, "reported_fraction")
    return float(full_data_sensitivity) / r


# ------------------------------------------------------------ released quantities
def clip_rows(grads: torch.Tensor, clip: float) -> torch.Tensor:
    """g min(1, C/||g||) row by row, shape (n, d)."""
    norms = torch.linalg.vector_norm(grads, dim=1, keepdim=True)
    factor = torch.where(norms > clip, clip / torch.where(norms > 0, norms, torch.ones_like(norms)),
                         torch.ones_like(norms))
    return grads * factor


def clip_values(h: torch.Tensor, clip: float) -> torch.Tensor:
    """h / max(1, |h|/C_d) (paper 003, after Eq. 13)."""
    return h.clamp(min=-clip, max=clip)


def _means(values: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Per-term means of ``values`` (n,) or (n, d) over masks (n, I); 0 for empty subsets."""
    w = masks.to(values.dtype)
    counts = w.sum(0)
    safe = torch.where(counts > 0, counts, torch.ones_like(counts))
    if values.ndim == 1:
        return (w * values.unsqueeze(1)).sum(0) / safe
    return (w.T @ values) / safe.unsqueeze(1)


def paper_primal_release(h: torch.Tensor, grads: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                         constraint: FairnessConstraint, lambdas: torch.Tensor, clip: float,
                         reported: torch.Tensor | None = None) -> torch.Tensor:
    """The group-dependent gradient of paper 003 Eq. (10) (before noise), shape (d,).

    .. math:: \\sum_i \\lambda_i \\, \\mathrm{sign}(\\mu(B_{P_i}) - \\mu(B_{G_i}))
              \\big(\\nabla\\mu(B_{P_i}) - \\bar\\nabla^{C_p}\\mu(B_{G_i})\\big),

    the gradient of :math:`\\lambda^\\top|\\mu(B_P) - \\mu(B_G)|` with the group
    gradients clipped per sample and the population gradients not clipped, as the paper
    prescribes. ``h`` (n,) and ``grads`` (n, d) are per-sample h and grad h.
    """
    pop = constraint.population_masks(y)
    grp = constraint.group_masks(y, group, reported)
    gap = _means(h, pop) - _means(h, grp)
    sign = torch.sign(gap) * (grp.sum(0) > 0)
    direction = _means(grads, pop) - _means(clip_rows(grads, clip), grp)
    return ((lambdas * sign).unsqueeze(1) * direction).sum(0)


def paper_primal_group_part(grads: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                            constraint: FairnessConstraint, lambdas: torch.Tensor, clip: float,
                            reported: torch.Tensor | None = None) -> torch.Tensor:
    """sum_i lambda_i grad-bar mu(B_{G_i}) (the quantity of Thm 1's steps 8c-8f), (d,)."""
    grp = constraint.group_masks(y, group, reported)
    return (lambdas.unsqueeze(1) * _means(clip_rows(grads, clip), grp)).sum(0)


def paper_dual_release(h: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                       constraint: FairnessConstraint, clip: float,
                       reported: torch.Tensor | None = None) -> torch.Tensor:
    """|mu(D_P) - mu-bar^{C_d}(D_G)| of paper 003 Eq. (13) (before noise), shape (|I|,)."""
    pop = constraint.population_masks(y)
    grp = constraint.group_masks(y, group, reported)
    return (_means(h, pop) - _means(clip_values(h, clip), grp)).abs()


def primal_group_sum(grads: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                     constraint: FairnessConstraint, coefficients: torch.Tensor, clip: float,
                     reported: torch.Tensor | None = None) -> torch.Tensor:
    """The default PF-LD primal release (before noise): sum_z sum_{i: z in G_i} a_i clip(g_z), (d,)."""
    grp = constraint.group_masks(y, group, reported).to(grads.dtype)
    per_person = grp @ coefficients.to(grads.dtype)
    return (per_person.unsqueeze(1) * clip_rows(grads, clip)).sum(0)


def dual_group_sums(h: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                    constraint: FairnessConstraint, clip: float,
                    reported: torch.Tensor | None = None) -> torch.Tensor:
    """The default PF-LD dual release (before noise): S_i = sum_{z in G_i} clip_{C_d}(h(z)), (|I|,)."""
    grp = constraint.group_masks(y, group, reported).to(h.dtype)
    return grp.T @ clip_values(h, clip)


def group_counts(y: torch.Tensor, group: torch.Tensor, *, constraint: FairnessConstraint,
                 reported: torch.Tensor | None = None) -> torch.Tensor:
    """|G_i| per term, (|I|,) (released once with Gaussian noise by PF-LD)."""
    return constraint.group_masks(y, group, reported).sum(0).to(torch.float64)


# ------------------------------------------------------------------ valid bounds
def primal_contribution_bound(coefficients: torch.Tensor, *, clip: float, constraint: FairnessConstraint) -> float:
    """Delta_1 = t_max C_p max_i |a_i|: bound on one person's contribution to the primal sum."""
    clip = check_positive(clip, "clip")
    a = torch.as_tensor(coefficients, dtype=torch.float64).abs()
    return float(constraint.max_terms_per_person * clip * (a.max() if a.numel() else 0.0))


def primal_replace_distance(coefficients: torch.Tensor, *, clip: float, constraint: FairnessConstraint) -> float:
    """2 Delta_1: bound on ||V(B) - V(B')|| for one group change (no subsampling)."""
    return 2.0 * primal_contribution_bound(coefficients, clip=clip, constraint=constraint)


def dual_sum_distance(*, clip: float, constraint: FairnessConstraint) -> float:
    """sqrt(2 t_max) C_d: bound on ||S(D) - S(D')||_2 for one group change."""
    return math.sqrt(2.0 * constraint.max_terms_per_person) * check_positive(clip, "clip")


def count_distance(*, constraint: FairnessConstraint) -> float:
    """sqrt(2 t_max): bound on the l2 change of the per-term counts for one group change."""
    return math.sqrt(2.0 * constraint.max_terms_per_person)


# ---------------------------------------------------------------- brute force
def change_group(group: torch.Tensor, index: int, new_group: int, *,
                 reported: torch.Tensor | None = None, new_reported: bool = True
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The neighbour: person ``index`` now has ``new_group`` (and reporting status)."""
    g = group.clone()
    g[index] = int(new_group)
    if reported is None and new_reported:
        return g, None
    r = torch.ones_like(group, dtype=torch.bool) if reported is None else reported.clone()
    r[index] = bool(new_reported)
    return g, r


def exact_change(release: Callable[..., torch.Tensor], *, group: torch.Tensor, neighbour_group: torch.Tensor,
                 reported: torch.Tensor | None = None, neighbour_reported: torch.Tensor | None = None,
                 **kwargs) -> float:
    """||release(D) - release(D')||_2, the exact change on one neighbouring pair."""
    a = release(group=group, reported=reported, **kwargs)
    b = release(group=neighbour_group, reported=neighbour_reported, **kwargs)
    return float(torch.linalg.vector_norm((a - b).double()))


def warn_paper_exact() -> None:
    warnings.warn("paper_exact=True reproduces paper 003 Eqs. (7), (10), (11), (13): their sensitivity "
                  "bounds are refuted by counterexamples (dpfair_analysis.privacy.sensitivity) and the "
                  "noise scale depends on the sensitive attribute; the reported epsilon is the paper's "
                  "bookkeeping, and no privacy guarantee is established", PrivacyNotEstablishedWarning,
                  stacklevel=3)


def warn_shared_batch() -> None:
    warnings.warn("public_batch='shared' computes PF-LD's un-noised public part on the private Poisson batch: "
                  "the update reveals who was sampled, so the subsampled accounting does not hold (one step "
                  "with q = 0.01, sigma_p = 1 is reported as epsilon 0.209 but is no better than 7.58 at "
                  "delta 1e-5); this is the audits' negative control and no privacy guarantee is established",
                  PrivacyNotEstablishedWarning, stacklevel=3)
