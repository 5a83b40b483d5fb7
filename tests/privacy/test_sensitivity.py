"""PF-LD sensitivities: the paper's claims (Thms 1, 2, Sec. 7) against brute force, and
the bounds the toolkit uses instead.

Every check computes the exact change of the released quantity on one neighbouring
pair (one person's group changes) and compares it with a bound. Claims that fail carry
stored counterexamples (found by the searches below, then written down so the verdict
does not depend on search luck); the searches themselves also run, bounded. The strategies
and excess functions are library code (``dpfair_analysis.verify.claims.pfld_cases``),
shared with the claims registry.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import find, given, settings
from scipy import stats

from dpfair_analysis.fairness.constraints import make_constraint
from dpfair_analysis.privacy.sensitivity import (
    change_group, count_distance, dual_group_sums, dual_sum_distance, exact_change, paper_dual_release,
    paper_dual_sensitivity, paper_missing_values_sensitivity, paper_primal_group_part, paper_primal_release,
    paper_primal_sensitivity, primal_contribution_bound)
from dpfair_analysis.verify.claims.pfld_cases import (
    Case, cases, dual_excess, dual_sum_changes, primal_group_part_excess, primal_release_excess, primal_sum_changes,
    signed_coefficients, structured_cases)

from pfld_hypothesis import PROPERTY, SEARCH

T = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731


# ------------------------------------------------------------- paper Theorem 1
def test_theorem1_step_8e_stored_counterexample():
    # group 0 = {z: +v, five others: -v}, ||v|| = C = 1; z moves to group 1.
    # mean of group 0: -2/3 -> -1, change 1/3; claimed lambda C / (|B_G| - 1) = 1/5 (1/4 on the other side).
    c = Case(make_constraint("dp", n_groups=2), y=torch.zeros(9, dtype=torch.long),
             group=torch.tensor([0, 0, 0, 0, 0, 0, 1, 1, 1]), new_group=torch.tensor([1, 0, 0, 0, 0, 0, 1, 1, 1]),
             h=T([0.5] * 9), grads=T([[1.0]] + [[-1.0]] * 5 + [[1.0]] * 3), lambdas=T([1.0, 0.0]), clip=1.0,
             index=0)
    change = exact_change(paper_primal_group_part, group=c.group, neighbour_group=c.new_group, grads=c.grads,
                          y=c.y, constraint=c.constraint, lambdas=c.lambdas, clip=c.clip)
    assert change == pytest.approx(1 / 3, abs=1e-12)
    assert change > 1 / 4 > 1 / 5
    assert primal_group_part_excess(c) == pytest.approx(1 / 3 - 1 / 4, abs=1e-12)


def test_theorem1_sign_flip_stored_counterexample():
    # all gradients 10 (population gradients are not clipped, group ones clip to 1);
    # z (h = 1) leaves group 0 = {1, .4, .4} for group 1 = {.3, .3, .3}: mu_P = .45 and
    # sign(mu_P - mu_G0) flips from - to +. Released gradient -9 -> +9 (lambda = (1, 0)).
    c = Case(make_constraint("dp", n_groups=2), y=torch.zeros(6, dtype=torch.long),
             group=torch.tensor([0, 0, 0, 1, 1, 1]), new_group=torch.tensor([1, 0, 0, 1, 1, 1]),
             h=T([1.0, 0.4, 0.4, 0.3, 0.3, 0.3]), grads=T([[10.0]] * 6), lambdas=T([1.0, 0.0]), clip=1.0, index=0)
    change = exact_change(paper_primal_release, group=c.group, neighbour_group=c.new_group, h=c.h,
                          grads=c.grads, y=c.y, constraint=c.constraint, lambdas=c.lambdas, clip=c.clip)
    assert change == pytest.approx(18.0, abs=1e-12)
    # claimed: 2 * 1 * 1 / (3 - 1) = 1 on D, 2 / (2 - 1) = 2 on D'
    assert paper_primal_sensitivity([3, 3], clip=1.0, lambda_max=1.0) == 1.0
    assert primal_release_excess(c) == pytest.approx(16.0, abs=1e-12)


#: Step (8e)'s violations are rarer under ``cases()`` than the others: in 20 seeded searches the first one
#: came after 2-761 draws (median ~200), so the default 1,000 draws missed now and then. ``derandomize``
#: does not pin the draws across runs (hypothesis also draws constants mined from the loaded modules, which
#: differ between a lone run and the whole suite); 6,000 draws miss with probability ~e^-20 at that rate.
GROUP_PART_SEARCH = settings(SEARCH, max_examples=max(SEARCH.max_examples, 6000))


def test_theorem1_searches_find_violations():
    found = find(cases(), lambda c: primal_group_part_excess(c) > 1e-9, settings=GROUP_PART_SEARCH)
    assert primal_group_part_excess(found) > 0
    found = find(cases(), lambda c: primal_release_excess(c) > 1e-9, settings=SEARCH)
    assert primal_release_excess(found) > 0


# ------------------------------------------------------------- paper Theorem 2
def test_theorem2_signed_h_stored_counterexample():
    # groups 0 = {z: -1, 1 x5}, 1 = {1 x6}, 2 = {-1 x20}; C_d = 1; z moves to group 1.
    # group means change by 2/6 and 2/7 (mu_P = -10/32 stays below both): ||.|| = 0.439
    # > sqrt(2)/(6-1) = 0.283 on D and sqrt(2)/(5-1) = 0.354 on D'.
    group = torch.tensor([0] * 6 + [1] * 6 + [2] * 20)
    new_group = group.clone()
    new_group[0] = 1
    h = T([-1.0] + [1.0] * 5 + [1.0] * 6 + [-1.0] * 20)
    c = Case(make_constraint("dp", n_groups=3), torch.zeros(32, dtype=torch.long), group, new_group, h,
             T([[0.0]] * 32), T([1.0, 1.0, 1.0]), 1.0, 0)
    change = exact_change(paper_dual_release, group=group, neighbour_group=new_group, h=h, y=c.y,
                          constraint=c.constraint, clip=1.0)
    assert change == pytest.approx(math.hypot(2 / 6, 2 / 7), abs=1e-12)
    assert change > paper_dual_sensitivity([5, 7, 20], clip=1.0) > paper_dual_sensitivity([6, 6, 20], clip=1.0)


def test_theorem2_search_finds_signed_violation():
    found = find(structured_cases(), lambda c: dual_excess(c) > 1e-9, settings=SEARCH)
    assert dual_excess(found) > 0
    assert bool((found.h < 0).any())  # signed h is needed (see the unsigned property below)


@given(cases(signed=False))
@PROPERTY
def test_theorem2_holds_for_unsigned_h(c):
    """For h in [0, C_d] (the paper's three h) the changes are C/n1 and C/(n2+1): Eq. (11) holds
    as a bound on the change (the noise scale still depends on the attribute)."""
    assert dual_excess(c) <= 1e-9


# -------------------------------------------------------------- paper Sec. 7
def test_missing_values_rule_stored_counterexample():
    # full groups of 10 and 10; group 0 reports 2 (z: h=1, other: h=0), group 1 reports 8 (h=0);
    # non-reporters h=1, so r = 0.5 and mu_P = 0.55 stays above every group mean.
    constraint = make_constraint("dp", n_groups=2)
    group = torch.tensor([0] * 10 + [1] * 10)
    reported = torch.tensor([True, True] + [False] * 8 + [True] * 8 + [False] * 2)
    h = T([1.0, 0.0] + [1.0] * 8 + [0.0] * 8 + [1.0] * 2)
    y = torch.zeros(20, dtype=torch.long)
    new_group, new_reported = change_group(group, 0, 1, reported=reported, new_reported=True)
    change = exact_change(paper_dual_release, group=group, neighbour_group=new_group, reported=reported,
                          neighbour_reported=new_reported, h=h, y=y, constraint=constraint, clip=1.0)
    assert change == pytest.approx(math.hypot(0.5, 1 / 9), abs=1e-12)
    r = float(reported.double().mean())
    claimed = max(paper_missing_values_sensitivity(paper_dual_sensitivity(sizes, clip=1.0), r)
                  for sizes in ([10, 10], [9, 11]))
    assert r == 0.5 and claimed == pytest.approx(math.sqrt(2) / 8 / 0.5)
    assert change > claimed


# --------------------------------------------------- the bounds used by default
@given(cases(missing=True))
@PROPERTY
def test_default_primal_release_contribution_bound(c):
    """Each person's contribution (vs. not being in any group subset) has norm <= Delta_1, on both
    sides, so ||V(D) - V(D')|| <= 2 Delta_1: the replace-one pair the PLD accountant models."""
    a = signed_coefficients(c)
    delta1 = primal_contribution_bound(a, clip=c.clip, constraint=c.constraint)
    contributions, change = primal_sum_changes(c, a)
    for u in contributions:
        assert u <= delta1 * (1 + 1e-9) + 1e-12
    assert change <= 2 * delta1 * (1 + 1e-9) + 1e-12


@given(cases(missing=True))
@PROPERTY
def test_default_dual_and_count_release_bounds(c):
    change, counts = dual_sum_changes(c)
    assert change <= dual_sum_distance(clip=c.clip, constraint=c.constraint) * (1 + 1e-9) + 1e-12
    assert counts <= count_distance(constraint=c.constraint) + 1e-12


def test_default_bounds_are_attained():
    """The bounds are tight: a signed h at +-C_d moving between groups attains sqrt(2) C_d."""
    constraint = make_constraint("ap", n_groups=2)
    group, y = torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1])
    change = exact_change(dual_group_sums, group=group, neighbour_group=torch.tensor([1, 0, 1]),
                          h=T([7.0, 0.0, 0.0]), y=y, constraint=constraint, clip=2.0)
    assert change == pytest.approx(2.0 * math.sqrt(2))


# ------------------------------------- replace-one PLD for collinear contributions
def _mixtures(means: np.ndarray, *, q: float, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Densities of (1-q)N(0, s^2) + qN(a, s^2) for each a, on a fine grid."""
    x = np.linspace(-10 * sigma - 2, 10 * sigma + 2, 40_001)
    dens = (1 - q) * stats.norm.pdf(x, 0, sigma)[None, :] + q * stats.norm.pdf(x[None, :], means[:, None], sigma)
    return x, dens


@pytest.mark.parametrize("q,sigma", [(0.05, 0.7), (0.3, 1.0), (0.9, 2.0)])
def test_replace_one_pair_dominates_collinear_contributions(q, sigma):
    """A person's primal contribution is a_A * g_bar (one direction), so a group change is the pair
    (1-q)N(0)+qN(a) vs (1-q)N(0)+qN(a') with |a|, |a'| <= 1 (units of Delta_1). The accountant uses
    the pair with a = 1, a' = -1; check numerically that it dominates every such pair."""
    grid = np.linspace(-1, 1, 9)  # contains -1 and 1
    x, dens = _mixtures(grid, q=q, sigma=sigma)
    for eps in (0.2, 1.0, 2.0):
        # hockey-stick divergence H_{e^eps}(P_a || P_b) for all pairs at once
        h = np.trapezoid(np.maximum(0.0, dens[:, None, :] - math.exp(eps) * dens[None, :, :]), x, axis=2)
        worst = h[-1, 0]  # a = 1, b = -1
        assert worst > 0
        assert (h <= worst + 1e-9).all()
