"""Hypothesis settings and strategies shared by the PF-LD tests.

Budgets: by default every search is bounded (derandomised, a few hundred examples,
about a second each). ``DPFAIR_HYPOTHESIS_PROFILE=full`` runs 20x more examples with
fresh randomness (``DPFAIR_HYPOTHESIS_PROFILE=full pytest tests/pfld``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from dpfair_analysis.fairness.constraints import FairnessConstraint, make_constraint

PROFILE = os.environ.get("DPFAIR_HYPOTHESIS_PROFILE", "default")
if PROFILE not in ("default", "full"):
    raise ValueError(f"DPFAIR_HYPOTHESIS_PROFILE must be 'default' or 'full', got {PROFILE!r}")
FULL = PROFILE == "full"

#: settings for property tests (a bound must hold on every example)
PROPERTY = settings(max_examples=4000 if FULL else 200, deadline=None, derandomize=not FULL,
                    suppress_health_check=[HealthCheck.too_slow], database=None)
#: settings for counterexample searches (hypothesis.find)
#: (the default profile skips shrinking: the shrunk examples are stored as regression cases)
SEARCH = settings(max_examples=20000 if FULL else 1000, deadline=None, derandomize=not FULL,
                  suppress_health_check=[HealthCheck.too_slow], database=None,
                  phases=tuple(Phase) if FULL else (Phase.generate,))


@dataclass
class Case:
    """A dataset and a neighbour: person ``index`` moves from group[index] to ``new_group``."""

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
