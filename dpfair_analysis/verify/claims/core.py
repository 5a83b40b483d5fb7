"""Core of the claims registry: budgets, verdicts, claims and the hypothesis search helper.

Each :class:`Claim` has an id (``"001.thm1"``), the paper, where the statement is, the
statement in symbols, its assumptions, and ``check(budget)`` returning a :class:`Verdict`:

* ``holds`` -- a search / Monte-Carlo / exact comparison found nothing against it;
  ``effort`` says how much was tried and ``worst_ratio`` is the largest
  (observed / claimed bound) seen (<= 1 means within the claim);
* ``violated`` -- ``counterexample`` (shrunk where a search found it) and ``ratio``, the
  factor by which it breaks the claim;
* ``inconclusive`` -- ``reason``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

PAPERS = {"000": "000_c5c1f9a3ea01bc79.txt", "001": "001_b43f969615163a73.txt", "002": "002_b95dfc7e3fcccdb9.txt",
          "003": "003_20423108024a63a0.txt", "004": "004_0c6bcca12c3fda87.txt"}
STATUSES = ("holds", "violated", "inconclusive")


# =============================================================================== core types
@dataclass(frozen=True)
class Budget:
    """How hard the checks try: hypothesis examples per search, Monte-Carlo draws, random trials."""

    name: str
    examples: int
    draws: int
    trials: int


QUICK = Budget("quick", examples=120, draws=400, trials=300)
FULL = Budget("full", examples=2000, draws=6000, trials=20_000)
BUDGETS = {"quick": QUICK, "full": FULL}


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check (see the module docstring)."""

    status: str
    key: str
    effort: str = ""
    worst_ratio: float | None = None
    counterexample: dict[str, Any] | None = None
    ratio: float | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def evidence(self) -> dict[str, Any]:
        """JSON-ready evidence (no status)."""
        out = {k: v for k, v in asdict(self).items() if k != "status" and v not in (None, "", {})}
        return _jsonable(out)


def holds(key: str, *, effort: str, worst_ratio: float | None, **details: Any) -> Verdict:
    return Verdict("holds", key, effort=effort, worst_ratio=_f(worst_ratio), details=details)


def violated(key: str, *, counterexample: dict[str, Any], ratio: float, effort: str = "", **details: Any) -> Verdict:
    return Verdict("violated", key, effort=effort, counterexample=counterexample, ratio=_f(ratio), details=details)


def inconclusive(key: str, *, reason: str, **details: Any) -> Verdict:
    return Verdict("inconclusive", key, reason=reason, details=details)


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a paper."""

    id: str
    paper: str
    location: str
    statement: str
    assumptions: str
    check: Callable[[Budget], Verdict]
    corrects: str | None = None
    #: The same check on a falsified input -- the bound scaled by a factor that makes it false,
    #: or the known counterexample fed in (for a violated claim: the setting, or a bound scaled
    #: up, under which the statement is true). Its verdict must differ from ``check``'s: a
    #: check that cannot be made to flip cannot fail (tests/verify/test_claims_can_fail.py).
    mutant: Callable[[Budget], Verdict] | None = None

    @property
    def paper_file(self) -> str:
        return PAPERS[self.paper]


def _f(x: float | None) -> float | None:
    return None if x is None else float(x)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return _jsonable(value.tolist())
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


# =============================================================================== search helpers
def _settings(examples: int, *, shrink: bool = True) -> settings:
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None, phases=phases,
                    suppress_health_check=list(HealthCheck))


def search(strategy: st.SearchStrategy, ratio: Callable[[Any], float | None], *, examples: int,
           tol: float = 1e-9, shrink: bool = True) -> tuple[Any | None, float, int]:
    """Hypothesis search for an example with ratio(x) > 1 + tol (shrunk if found).

    Returns (example or None, worst ratio seen -- the example's own if found --, examples tried).
    ``ratio`` returns None for examples outside the claim's assumptions.
    """
    from dpfair_analysis.testing.sensitivity import find_violation

    return find_violation(strategy, ratio, examples=examples, tol=tol, shrink=shrink)


# =========================================================================================
# Statements shared by several papers, and the Claim constructor
# =========================================================================================
_GAUSS_DR = ("Gaussian mechanism: for ε ∈ (0, 1] and c² > 2 ln(1.25/δ), adding N(0, σ²) with σ > c Δ_f / ε is "
             "(ε, δ)-DP")
_EQ1 = "E|G̃ᵏ − Gᵏ| ≤ (1/bᵏ)(C/ε) + (1/bᵏ) Σᵢ max(0, |gᵢᵏ| − C)"
_EQ1_LOW = "E|G̃ᵏ − Gᵏ| ≥ ½ [(1/bᵏ)(C/ε) + (1/bᵏ) Σᵢ max(0, |gᵢᵏ| − C)]  ('the expected error is tight')"
_GAUSS_45 = ("M(D) = f(D) + N(0, Δ²σ²) is (ε, δ)-DP for δ > (4/5) exp(−(σε)²/2) and ε < 1")


def _c(id: str, location: str, statement: str, assumptions: str, check: Callable[[Budget], Verdict],
       corrects: str | None = None, mutant: Callable[[Budget], Verdict] | None = None) -> Claim:
    return Claim(id=id, paper=id.split(".")[0], location=location, statement=statement, assumptions=assumptions,
                 check=check, corrects=corrects, mutant=mutant)
