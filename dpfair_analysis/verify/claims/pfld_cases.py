"""Paper 003's neighbouring pairs: the adversarial searches over them for PF-LD's sensitivity claims.

Privacy model (paper 003 Sec. 4.2): two data sets are neighbours when one person's sensitive attribute changes.
A :class:`Case` is one such pair (the public kit's :class:`~dpfair_analysis.testing.relations.AttributeChange`
under :data:`RELATION`); the strategies :func:`cases`, :func:`structured_cases`, :func:`theorem1_cases` and
:func:`missing_cases` generate pairs, and the *excess* functions (:func:`primal_release_excess`,
:func:`primal_group_part_excess`, :func:`dual_excess`) return a release's exact change minus the bound the paper
claims: > 0 means the claim is violated on that pair. :func:`primal_sum_changes` and :func:`dual_sum_changes`
search the toolkit's own releases. The claims registry (``dpfair verify``) and ``tests/pfld`` search with them.

What each search quantifies over, and why: docs/methods/pfld_sensitivity.md ("The adversarial searches").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st

from dpfair_analysis.fairness.constraints import FairnessConstraint, make_constraint
from dpfair_analysis.testing.relations import AttributeChange, Change
from dpfair_analysis.testing.strategies import other_value
from dpfair_analysis.privacy.sensitivity import (
    change_group, dual_group_sums, exact_change, group_counts, paper_dual_release, paper_dual_sensitivity,
    paper_primal_group_part, paper_primal_release, paper_primal_sensitivity, primal_group_sum)

__all__ = ["Case", "RELATION", "UNREPORTED", "cases", "structured_cases", "theorem1_cases", "missing_cases", "THEOREM1_FAMILIES",
           "group_sizes", "term_of", "to_proof_setting", "signed_coefficients", "sign_flips", "primal_release_bound",
           "primal_release_excess", "primal_group_part_term", "primal_group_part_excess", "dual_release_bound",
           "dual_excess", "primal_sum_changes", "dual_sum_changes"]

#: The directed families of :func:`theorem1_cases` (module docstring).
THEOREM1_FAMILIES = ("sign-flip", "8e-leave", "8e-join-smallest", "no-flip-bounded")


#: The code of "not reported" in :meth:`Case.pair` (the kit's attribute-change relation with missing values).
UNREPORTED = -1
#: Paper 003's relation in the public kit: one person's group changes, possibly to or from "not reported".
RELATION = AttributeChange(unreported=UNREPORTED)


@dataclass
class Case:
    """A dataset and a neighbour: person ``index`` moves from group[index] to ``new_group``.

    With missing values, ``reported`` / ``new_reported`` are the reporting masks of the two
    sides (None: everyone reports). :meth:`pair` is the pair in the public kit's terms
    (:mod:`dpfair_analysis.testing`), :meth:`change` checks it against paper 003's relation."""

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

    def pair(self) -> tuple[dict, dict]:
        """(D, D') as the kit's attribute-change data: dicts with the per-person ``group`` (:data:`UNREPORTED`
        for a person who does not report it) and the public columns ``y``, ``h`` and ``grads``."""
        def side(group: torch.Tensor, reported: torch.Tensor | None) -> dict:
            attribute = group.numpy().astype(np.int64)
            if reported is not None:
                attribute = np.where(reported.numpy(), attribute, UNREPORTED)
            return {"group": attribute, "y": self.y.numpy(), "h": self.h.numpy(), "grads": self.grads.numpy()}
        return side(self.group, self.reported), side(self.new_group, self.new_reported)

    def change(self) -> Change:
        """The change from D to D' under paper 003's relation (:data:`RELATION`); raises
        :class:`~dpfair_analysis.testing.relations.NotNeighbours` if the pair is not a neighbour."""
        return RELATION.check(*self.pair())


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
    new = draw(other_value(k, int(group[index]), allow_same=missing))
    new_group = group.clone()
    new_group[index] = new
    reported = new_reported = None
    if missing:
        reported = torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        new_reported = reported.clone()
        new_reported[index] = draw(st.booleans())
    return Case(constraint, y, group, new_group, h, grads, lambdas, clip, index, reported, new_reported)


@st.composite
def structured_cases(draw, *, max_size: int = 12, signed: bool = True) -> Case:
    """Demographic-parity pairs with larger groups (2-``max_size`` per group, 3 groups), each
    group's h at one extreme value +-C_d (0 or C_d when not ``signed``) except the moving
    person's: the family where Thm 2's signed violations live (every group must have > 4
    members, and h of opposite signs inside a group)."""
    k = 3
    sizes = draw(st.lists(st.integers(2, max_size), min_size=k, max_size=k))
    group = torch.tensor([g for g, s in enumerate(sizes) for _ in range(s)])
    n = len(group)
    clip = draw(st.sampled_from([0.5, 1.0, 2.0]))
    extremes = [-1.0, 1.0] if signed else [0.0, 1.0]
    fills = torch.tensor(draw(st.lists(st.sampled_from(extremes), min_size=k, max_size=k)), dtype=torch.float64)
    h = fills[group] * clip
    index = draw(st.integers(0, n - 1))
    h[index] = draw(st.sampled_from(extremes)) * clip
    new = draw(other_value(k, int(group[index])))
    new_group = group.clone()
    new_group[index] = new
    constraint = make_constraint("dp", n_groups=k)
    return Case(constraint, torch.zeros(n, dtype=torch.long), group, new_group, h,
                torch.zeros((n, 1), dtype=torch.float64), torch.ones(k, dtype=torch.float64), clip, index)


def term_of(constraint: FairnessConstraint, group: int, label: int = 0) -> int:
    """Index of the term whose group subset is {A = group} (within Y = label for eo)."""
    for i, t in enumerate(constraint.terms):
        if t.group == group and (t.label is None or t.label == label):
            return i
    raise ValueError(f"no term for group {group}, label {label}")  # pragma: no cover


_COORDS = [1.0, -1.0, 0.5, -0.5, 0.0, 2.0, -2.0]


def _direction(draw, d: int) -> torch.Tensor:
    """A unit vector of dimension d (any signs; discrete coordinates, so shrinking is fast)."""
    v = torch.tensor(draw(st.lists(st.sampled_from(_COORDS), min_size=d, max_size=d)), dtype=torch.float64)
    if float(v.norm()) == 0:
        v[0] = 1.0
    return v / v.norm()


def _in_ball(draw, d: int, radius: float) -> torch.Tensor:
    """A vector of norm <= radius (signed coordinates)."""
    return _direction(draw, d) * radius * draw(st.sampled_from([1.0, 0.5, 0.0, 0.25, 0.75]))


_H_LEVELS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


@st.composite
def theorem1_cases(draw, *, family: str, proof_setting: bool = False, kinds=("dp", "eo", "ap")) -> Case:
    """Directed neighbouring pairs for one of :data:`THEOREM1_FAMILIES` (module docstring).

    The person at ``index`` moves from group ``src`` to ``dst`` within label 0; for eo every
    label-1 cell has 2-6 bystanders (so no term is empty). h and gradients are drawn per cell
    (the mover's separately). ``proof_setting`` maps the pair through :func:`to_proof_setting`."""
    if family not in THEOREM1_FAMILIES:
        raise ValueError(f"family must be one of {THEOREM1_FAMILIES}, got {family!r}")
    kind = draw(st.sampled_from(kinds))
    k = draw(st.integers(2, 3))
    constraint = make_constraint(kind, n_groups=k)
    clip = draw(st.sampled_from([1.0, 0.1, 0.5, 2.0, 3.0]))
    d = draw(st.integers(1, 3))
    v = _direction(draw, d)
    src = draw(st.integers(0, k - 1))
    dst = draw(other_value(k, src))
    if family == "sign-flip":
        sizes = [draw(st.integers(2, 6)) for _ in range(k)]
    elif family == "8e-leave":
        sizes = [draw(st.integers(2, 9)) for _ in range(k)]
        sizes[src] = draw(st.integers(5, 9))
    elif family == "8e-join-smallest":
        m = draw(st.integers(4, 8))
        sizes = [m + draw(st.integers(1, 4)) for _ in range(k)]
        sizes[dst] = m
    else:  # no-flip-bounded
        m = draw(st.integers(3, 8))
        sizes = [m + draw(st.integers(0, 2)) for _ in range(k)]
        sizes[dst] = m
    cells = [(g, 0) for g in range(k) for _ in range(sizes[g])]
    if kind == "eo":
        cells += [(g, 1) for g in range(k) for _ in range(draw(st.integers(2, 6)))]
    n = len(cells)
    group = torch.tensor([g for g, _ in cells])
    y = torch.tensor([label for _, label in cells])
    index = sum(sizes[:src])  # the first member of src (label 0)

    # h and gradients are drawn per cell (group, label) -- few choices, so shrinking is fast
    fills = {(g, label): draw(st.sampled_from(_H_LEVELS)) for g in range(k) for label in (0, 1)}
    if family == "no-flip-bounded":
        fills[(src, 0)] = draw(st.sampled_from(_H_LEVELS[3:]))
        fills[(dst, 0)] = draw(st.sampled_from(_H_LEVELS[:3]))
    h = torch.tensor([fills[cell] for cell in cells], dtype=torch.float64)
    h[index] = fills[(src, 0)] if family == "no-flip-bounded" else draw(st.sampled_from(_H_LEVELS))

    if family == "sign-flip":
        grads = v.repeat(n, 1) * draw(st.sampled_from([10.0, 5.0, 20.0, 50.0]))  # population grads unclipped
    else:
        opposed = (src, dst) if family == "no-flip-bounded" else (src,) if family == "8e-leave" else (dst,)
        radius = clip if family == "no-flip-bounded" else 3.0 * clip
        scales = [1.0, 0.75, 0.5] if family == "no-flip-bounded" else [1.0, 1.5, 2.0, 3.0]
        per_cell = {}
        for cell in sorted(set(cells)):
            if cell[1] == 0 and cell[0] in opposed:
                per_cell[cell] = -v * clip * draw(st.sampled_from(scales))
            else:
                per_cell[cell] = _in_ball(draw, d, radius)
        grads = torch.stack([per_cell[cell] for cell in cells])
        grads[index] = v * clip * draw(st.sampled_from(scales))

    lam_max = draw(st.sampled_from([1.0, 0.5, 2.0]))
    lambdas = lam_max * torch.tensor(draw(st.lists(st.sampled_from([1.0, 0.0, 0.5, 0.25]), min_size=constraint.n_terms,
                                                   max_size=constraint.n_terms)), dtype=torch.float64)
    focus = {"sign-flip": [src], "8e-leave": [src], "8e-join-smallest": [dst],
             "no-flip-bounded": [src, dst]}[family]
    for g in focus:
        lambdas[term_of(constraint, g)] = lam_max
    new_group = group.clone()
    new_group[index] = dst
    c = Case(constraint, y, group, new_group, h, grads, lambdas, clip, index)
    return to_proof_setting(c) if proof_setting else c


def to_proof_setting(c: Case) -> Case:
    """The same pair with every gradient replaced by a scalar in [0, C_p] -- the positive part of
    its first coordinate, clipped to C_p (opposed gradients land at 0 and C_p): with no sign
    flips, the setting in which Theorem 1's proof is valid."""
    grads = c.grads[:, :1].clamp(min=0.0, max=c.clip)
    return Case(c.constraint, c.y, c.group, c.new_group, c.h, grads, c.lambdas, c.clip, c.index, c.reported,
                c.new_reported)


@st.composite
def missing_cases(draw, *, uneven: bool = True, kinds=("dp", "ap")) -> Case:
    """Sec. 7 pairs (module docstring): the moving person (index, a reporter of group ``src``
    who keeps reporting in ``dst``) is one of 2-3 reporters of a group of 4-16 while the
    other groups report half or more (``uneven``), or every group reports at one rate
    r in {1/3, 1/2, 2/3, 3/4, 1} (r n_i reporters). h in {0, C_d} per group and role."""
    kind = draw(st.sampled_from(kinds))
    k = draw(st.integers(2, 3))
    constraint = make_constraint(kind, n_groups=k)
    clip = draw(st.sampled_from([0.5, 1.0, 2.0]))
    src = draw(st.integers(0, k - 1))
    dst = draw(other_value(k, src))
    if uneven:
        full = [draw(st.integers(4, 16)) for _ in range(k)]
        rep = [draw(st.integers((f + 1) // 2, f)) for f in full]
        rep[src] = draw(st.integers(2, 3))
    else:
        num, den = draw(st.sampled_from([(1, 3), (1, 2), (2, 3), (3, 4), (1, 1)]))
        mult = [draw(st.integers(2, 5)) for _ in range(k)]
        full, rep = [den * m for m in mult], [num * m for m in mult]
    group = torch.tensor([g for g in range(k) for _ in range(full[g])])
    reported = torch.tensor([j < rep[g] for g in range(k) for j in range(full[g])])
    levels = [0.0, clip]
    rep_fill = [draw(st.sampled_from(levels)) for _ in range(k)]
    absent_fill = [draw(st.sampled_from(levels)) for _ in range(k)]
    h = torch.tensor([rep_fill[g] if j < rep[g] else absent_fill[g] for g in range(k) for j in range(full[g])],
                     dtype=torch.float64)
    index = sum(full[:src])
    h[index] = draw(st.sampled_from(levels))
    n = len(group)
    new_group = group.clone()
    new_group[index] = dst
    return Case(constraint, torch.zeros(n, dtype=torch.long), group, new_group, h,
                torch.zeros((n, 1), dtype=torch.float64), torch.ones(constraint.n_terms, dtype=torch.float64),
                clip, index, reported, reported.clone())


def group_sizes(c: Case, group: torch.Tensor, reported: torch.Tensor | None = None) -> np.ndarray:
    """Members of each constraint term's group subset under the assignment ``group``."""
    return c.constraint.group_masks(c.y, group, reported).sum(0).numpy()


def signed_coefficients(c: Case) -> torch.Tensor:
    """Public coefficients a_i = lambda_i s_i / (q m_i) of the sum release: signs alternate
    across terms (any signed values are allowed), 1 / 0.7 stands for 1 / (q m_i)."""
    signs = torch.where(torch.arange(c.constraint.n_terms) % 2 == 0, 1.0, -1.0).double()
    return c.lambdas * signs / 0.7


def sign_flips(c: Case) -> bool:
    """Whether sign(mu(B_{P_i}) - mu(B_{G_i})) differs between the two sides for some term
    with lambda_i > 0 (Theorem 1's step (8b) takes the sign as fixed)."""
    signs = []
    for group, reported in ((c.group, c.reported), (c.new_group, c.new_reported)):
        gaps = c.constraint.term_gaps(c.h, c.y, group, reported)
        signs.append(torch.sign(gaps))
    return bool(((signs[0] != signs[1]) & (c.lambdas > 0)).any())


# ------------------------------------------------------------- paper Theorem 1
def primal_release_bound(c: Case) -> float:
    """Thm 1's claimed Delta_p = 2 C_p lambda_max / (min_i |B_{G_i}| - 1), the larger of the two
    sides (generous to the paper); inf when a group has <= 1 member."""
    lam_max = float(c.lambdas.max())
    return max(paper_primal_sensitivity(group_sizes(c, g), clip=c.clip, lambda_max=lam_max)
               for g in (c.group, c.new_group))


def primal_group_part_term(c: Case, i: int) -> tuple[float, float]:
    """Thm 1 step (8e)-(8f) for term i: (change of lambda_i grad-bar mu(B_{G_i}), the claimed
    lambda_i C / (|B_{G_i}| - 1)), the bound taken on the larger of the two sides (generous to
    the paper); the bound is inf when the term has <= 1 member on a side."""
    lam = torch.zeros_like(c.lambdas)
    lam[i] = c.lambdas[i]
    change = exact_change(paper_primal_group_part, group=c.group, neighbour_group=c.new_group,
                          grads=c.grads, y=c.y, constraint=c.constraint, lambdas=lam, clip=c.clip)
    sizes = [group_sizes(c, c.group)[i], group_sizes(c, c.new_group)[i]]
    if min(sizes) <= 1:
        return change, math.inf  # the claimed bound is infinite (or the mean undefined)
    return change, max(float(lam[i]) * c.clip / (s - 1) for s in sizes)


def primal_group_part_excess(c: Case) -> float:
    """Thm 1 step (8e)-(8f) per term: change of lambda_i grad-bar mu(B_G_i) vs lambda_i C/(|B_G_i|-1),
    the bound taken on the larger of the two sides (generous to the paper). > 0 = violated."""
    worst = -math.inf
    for i in range(c.constraint.n_terms):
        change, bound = primal_group_part_term(c, i)
        if math.isfinite(bound):
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
