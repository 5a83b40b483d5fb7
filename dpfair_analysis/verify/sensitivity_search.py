"""Adversarial searches over neighbouring pairs for PF-LD's sensitivity claims.

Privacy model (paper 003 Sec. 4.2): two datasets are neighbours when **one person's
sensitive attribute changes** (person ``index`` moves from ``group[index]`` to
``new_group[index]``; with missing values, Sec. 7, their reporting status may change
too). Features, labels, h values and per-sample gradients are public and fixed.

A :class:`Case` is one such pair. The hypothesis strategies generate pairs, and the
*excess* functions return, for one pair, the exact change of a release
(:func:`~dpfair_analysis.privacy.sensitivity.exact_change`) minus the bound the paper
claims for it: > 0 means the claim is violated on that pair. The claims registry
(``verify/claims/``, ``dpfair verify``) and ``tests/pfld`` search with them.

What each search quantifies over, and why
-----------------------------------------
:func:`cases` -- everything Theorems 1-2 allow: 2-3 groups of any size 0-9 (tiny and
unequal, including empty groups and groups of one), each constraint kind (demographic
parity, equalized odds, accuracy parity), signed or unsigned h, vector gradients
(dimension 1-3) with signs, any multipliers lambda_i in [0, 2] and clip bound C in
[0.1, 3]. Theorem 1 (Eq. 7) assumes only ||grad h(z)|| <= C_p on the *group* terms: the
population gradients of Eq. (10) are not clipped, so they are drawn up to 50 (the
sign-flip violation needs them large). Theorem 2 (Eq. 11) assumes |h(z)| <= C_d, which
allows signed h; ``signed=False`` restricts h to [0, 4] (the paper's three h are
non-negative) where the bound on the change does hold. ``missing=True`` adds a reporting
mask that the neighbour may change (Sec. 7's rule Delta' = Delta / r).

:func:`structured_cases` -- demographic parity with 3 groups of 2-``max_size`` members,
each group's h at one extreme +-C_d except the moving person's. Theorem 2's signed
violations need groups of more than 4 members and h of opposite signs inside a group
(the change of a mean reaches 2 C / n > sqrt(2) C / (n - 1) only then), which the
unstructured :func:`cases` (sizes <= 9, continuous h) rarely reaches.

Excess functions
----------------
* :func:`primal_release_excess` -- Theorem 1 (Eq. 7) for the released gradient of
  Eq. (10): bound 2 C_p lambda_max / (min_i |B_{G_i}| - 1), the larger of the two sides.
* :func:`primal_group_part_excess` -- step (8e)-(8f) of Theorem 1's proof, per term:
  change of lambda_i grad-bar mu(B_{G_i}) against lambda_i C_p / (|B_{G_i}| - 1).
* :func:`dual_excess` -- Theorem 2 (Eq. 11) on D's group sizes:
  sqrt(2) C_d / (min_i |D_{G_i}| - 1).

The toolkit's own releases (sums over group members with public denominators) are
searched through :func:`primal_sum_changes` and :func:`dual_sum_changes`, which return the
exact changes to compare with ``primal_contribution_bound`` / ``dual_sum_distance`` /
``count_distance`` of :mod:`dpfair_analysis.privacy.sensitivity`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st

from dpfair_analysis.fairness.constraints import FairnessConstraint, make_constraint
from dpfair_analysis.privacy.sensitivity import (
    change_group, dual_group_sums, exact_change, group_counts, paper_dual_release, paper_dual_sensitivity,
    paper_primal_group_part, paper_primal_release, paper_primal_sensitivity, primal_group_sum)

__all__ = ["Case", "cases", "structured_cases", "group_sizes", "signed_coefficients", "primal_release_bound",
           "primal_release_excess", "primal_group_part_excess", "dual_release_bound", "dual_excess",
           "primal_sum_changes", "dual_sum_changes"]


@dataclass
class Case:
    """A dataset and a neighbour: person ``index`` moves from group[index] to ``new_group``.

    With missing values, ``reported`` / ``new_reported`` are the reporting masks of the two
    sides (None: everyone reports)."""

    constraint: FairnessConstraint
    y: torch.Tensor
    group: torch.Tensor
    new_group: torch.Tensor
    h: torch.Tensor
    grads: torch.Tensor
    lambdas: torch.Tensor
    clip: float
    index: int
    reported: torch.Tensor | None = None
    new_reported: torch.Tensor | None = None


@st.composite
def cases(draw, *, signed: bool = True, kinds=("dp", "eo", "ap"), max_n: int = 9, missing: bool = False,
          big_population_grads: bool = True) -> Case:
    """Adversarial neighbouring pairs: tiny and unequal groups (sizes 0-9), 2-3 groups,
    signed or unsigned h, vector gradients with signs, any multipliers; with
    ``missing``, reporting status may change too."""
    k = draw(st.integers(2, 3))
    n = draw(st.integers(2, max_n))
    d = draw(st.integers(1, 3))
    kind = draw(st.sampled_from(kinds))
    constraint = make_constraint(kind, n_groups=k)
    group = torch.tensor(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    y = torch.tensor(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    low = -4.0 if signed else 0.0
    h = torch.tensor(draw(st.lists(st.floats(low, 4.0), min_size=n, max_size=n)), dtype=torch.float64)
    bound = 50.0 if big_population_grads else 4.0
    grads = torch.tensor(draw(st.lists(st.lists(st.floats(-bound, bound), min_size=d, max_size=d),
                                       min_size=n, max_size=n)), dtype=torch.float64)
    lambdas = torch.tensor(draw(st.lists(st.floats(0.0, 2.0), min_size=constraint.n_terms,
                                         max_size=constraint.n_terms)), dtype=torch.float64)
    clip = draw(st.floats(0.1, 3.0))
    index = draw(st.integers(0, n - 1))
    new = draw(st.integers(0, k - 1).filter(lambda g: g != int(group[index]) or missing))
    new_group = group.clone()
    new_group[index] = new
    reported = new_reported = None
    if missing:
        reported = torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        new_reported = reported.clone()
        new_reported[index] = draw(st.booleans())
    return Case(constraint, y, group, new_group, h, grads, lambdas, clip, index, reported, new_reported)


@st.composite
def structured_cases(draw, *, max_size: int = 12) -> Case:
    """Demographic-parity pairs with larger groups (2-``max_size`` per group, 3 groups), each
    group's h at one extreme value +-C_d except the moving person's: the family where
    Thm 2's signed violations live (every group must have > 4 members, and h of opposite
    signs inside a group)."""
    k = 3
    sizes = draw(st.lists(st.integers(2, max_size), min_size=k, max_size=k))
    group = torch.tensor([g for g, s in enumerate(sizes) for _ in range(s)])
    n = len(group)
    clip = draw(st.sampled_from([0.5, 1.0, 2.0]))
    fills = torch.tensor(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=k, max_size=k)), dtype=torch.float64)
    h = fills[group] * clip
    index = draw(st.integers(0, n - 1))
    h[index] = draw(st.sampled_from([-1.0, 1.0])) * clip
    new = draw(st.integers(0, k - 1).filter(lambda g: g != int(group[index])))
    new_group = group.clone()
    new_group[index] = new
    constraint = make_constraint("dp", n_groups=k)
    return Case(constraint, torch.zeros(n, dtype=torch.long), group, new_group, h,
                torch.zeros((n, 1), dtype=torch.float64), torch.ones(k, dtype=torch.float64), clip, index)


def group_sizes(c: Case, group: torch.Tensor, reported: torch.Tensor | None = None) -> np.ndarray:
    """Members of each constraint term's group subset under the assignment ``group``."""
    return c.constraint.group_masks(c.y, group, reported).sum(0).numpy()


def signed_coefficients(c: Case) -> torch.Tensor:
    """Public coefficients a_i = lambda_i s_i / (q m_i) of the sum release: signs alternate
    across terms (any signed values are allowed), 1 / 0.7 stands for 1 / (q m_i)."""
    signs = torch.where(torch.arange(c.constraint.n_terms) % 2 == 0, 1.0, -1.0).double()
    return c.lambdas * signs / 0.7


# ------------------------------------------------------------- paper Theorem 1
def primal_release_bound(c: Case) -> float:
    """Thm 1's claimed Delta_p = 2 C_p lambda_max / (min_i |B_{G_i}| - 1), the larger of the two
    sides (generous to the paper); inf when a group has <= 1 member."""
    lam_max = float(c.lambdas.max())
    return max(paper_primal_sensitivity(group_sizes(c, g), clip=c.clip, lambda_max=lam_max)
               for g in (c.group, c.new_group))


def primal_group_part_excess(c: Case) -> float:
    """Thm 1 step (8e)-(8f) per term: change of lambda_i grad-bar mu(B_G_i) vs lambda_i C/(|B_G_i|-1),
    the bound taken on the larger of the two sides (generous to the paper). > 0 = violated."""
    worst = -math.inf
    for i in range(c.constraint.n_terms):
        lam = torch.zeros_like(c.lambdas)
        lam[i] = c.lambdas[i]
        change = exact_change(paper_primal_group_part, group=c.group, neighbour_group=c.new_group,
                              grads=c.grads, y=c.y, constraint=c.constraint, lambdas=lam, clip=c.clip)
        sizes = [group_sizes(c, c.group)[i], group_sizes(c, c.new_group)[i]]
        if min(sizes) <= 1:
            continue  # the claimed bound is infinite (or the mean undefined)
        bound = max(float(lam[i]) * c.clip / (s - 1) for s in sizes)
        worst = max(worst, change - bound)
    return worst


def primal_release_excess(c: Case) -> float:
    """Thm 1 (Eq. 7) for the released gradient of Eq. (10): change minus :func:`primal_release_bound`
    (-inf where that bound is infinite). > 0 = violated."""
    bound = primal_release_bound(c)
    if not math.isfinite(bound):
        return -math.inf
    change = exact_change(paper_primal_release, group=c.group, neighbour_group=c.new_group, h=c.h,
                          grads=c.grads, y=c.y, constraint=c.constraint, lambdas=c.lambdas, clip=c.clip)
    return change - bound


# ------------------------------------------------------------- paper Theorem 2
def dual_release_bound(c: Case) -> float:
    """Thm 2's claimed Delta_d = sqrt(2) C_d / (min_i |D_{G_i}| - 1) on D's group sizes (the claim
    must hold for every D); inf when a group has <= 1 member."""
    return paper_dual_sensitivity(group_sizes(c, c.group), clip=c.clip)


def dual_excess(c: Case) -> float:
    """Thm 2 (Eq. 11): change of the dual release minus :func:`dual_release_bound` (-inf where that
    bound is infinite). > 0 = violated."""
    bound = dual_release_bound(c)
    if not math.isfinite(bound):
        return -math.inf
    change = exact_change(paper_dual_release, group=c.group, neighbour_group=c.new_group, h=c.h, y=c.y,
                          constraint=c.constraint, clip=c.clip)
    return change - bound


# --------------------------------------------------- the toolkit's sum releases
def primal_sum_changes(c: Case, coefficients: torch.Tensor) -> tuple[list[float], float]:
    """The toolkit's primal release (``primal_group_sum``) on one pair: each side's contribution of
    person ``index`` (the change when they stop reporting, i.e. leave every group subset) and the
    change between the two sides. The bounds are Delta_1 and 2 Delta_1 (``primal_contribution_bound``)."""
    kwargs = dict(grads=c.grads, y=c.y, constraint=c.constraint, coefficients=coefficients, clip=c.clip)
    contributions = []
    for group, reported in ((c.group, c.reported), (c.new_group, c.new_reported)):
        _, absent = change_group(group, c.index, int(group[c.index]), reported=reported, new_reported=False)
        contributions.append(exact_change(primal_group_sum, group=group, neighbour_group=group, reported=reported,
                                          neighbour_reported=absent, **kwargs))
    change = exact_change(primal_group_sum, group=c.group, neighbour_group=c.new_group, reported=c.reported,
                          neighbour_reported=c.new_reported, **kwargs)
    return contributions, change


def dual_sum_changes(c: Case) -> tuple[float, float]:
    """The toolkit's dual sums (``dual_group_sums``) and group counts (``group_counts``) on one pair:
    their exact changes, bounded by ``dual_sum_distance`` and ``count_distance``."""
    sums = exact_change(dual_group_sums, group=c.group, neighbour_group=c.new_group, reported=c.reported,
                        neighbour_reported=c.new_reported, h=c.h, y=c.y, constraint=c.constraint, clip=c.clip)
    counts = exact_change(group_counts, group=c.group, neighbour_group=c.new_group, reported=c.reported,
                          neighbour_reported=c.new_reported, y=c.y, constraint=c.constraint)
    return sums, counts
