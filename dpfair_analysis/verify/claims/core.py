"""Core of the claims registry: budgets, verdicts, claims, the search helper and the misprint combinator.

A :class:`Claim` is one statement: its id (``"001.thm1"``), where the paper prints it, the
statement *as printed* (``quote``, verbatim prose with the mathematics transcribed symbol for
symbol), what is tested (``statement``) and in which regime, what the check does (``method``),
and ``check(budget)`` returning a :class:`Verdict`:

* ``holds`` -- a search / Monte-Carlo / exact comparison found nothing against it; ``effort``
  says how much was tried and ``worst_ratio`` is the largest (observed / claimed bound) seen;
* ``violated`` -- false as stated, in the regime the paper states it: ``counterexample``
  (shrunk where a search found it, at parameters the algorithm can reach) and ``ratio``, the
  factor by which it breaks the claim;
* ``misprinted`` -- false as printed, true after a named typo fix (``fix``): both forms are
  tested (:func:`misprint_check`), the printed form's counterexample is kept;
* ``inconclusive`` -- the check could not decide (``reason``).

"Outside the stated regime" is not a verdict: a claim is tested where the paper states it,
and a statement beyond that regime is registered separately with ``kind="extension"``
(``extends`` names the printed claim); a corrected form is ``kind="corrected"`` (``corrects``).

Every claim has a ``mutant``: the same check on a falsified input (a bound scaled, the
counterexample fed in, the setting where the statement is true, the fixed form falsified),
whose verdict must differ (tests/verify/test_claims_can_fail.py).

Nothing here imports torch, scipy or dp_accounting at import time (hypothesis only): the registry (ids,
quotes, locations) loads in a fraction of a second; the checks import what they use.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

#: Paper id -> (file under the project's papers/, short citation).
PAPERS: dict[str, tuple[str, str]] = {
    "000": ("000_c5c1f9a3ea01bc79.txt", ("Xu, Du & Wu, Removing Disparate Impact on Model Accuracy in DP-SGD "
                                         "(KDD'21): DPSGD-F")),
    "001": ("001_b43f969615163a73.txt", ("Tran, Dinh & Fioretto, Differentially Private Empirical Risk "
                                         "Minimization under the Fairness Lens (NeurIPS'21)")),
    "002": ("002_b95dfc7e3fcccdb9.txt", "FairDP (fragment: figure captions and one section)"),
    "003": ("003_20423108024a63a0.txt", ("Tran, Fioretto & Van Hentenryck, Differentially Private and Fair Deep "
                                         "Learning: a Lagrangian Dual Approach (AAAI'21): PF-LD")),
    "004": ("004_0c6bcca12c3fda87.txt", "Xu, Du & Wu, long version of 000 (balanced/unbalanced Adult & Dutch)"),
}
STATUSES = ("holds", "violated", "misprinted", "inconclusive")
KINDS = ("printed", "corrected", "extension")


# =============================================================================== budgets and verdicts
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
    """The outcome of one check (see the module docstring). ``fix`` is the named typo fix of a
    ``misprinted`` verdict (or the fix that was tried and did not rescue a ``violated`` one)."""

    status: str
    key: str
    effort: str = ""
    worst_ratio: float | None = None
    counterexample: dict[str, Any] | None = None
    ratio: float | None = None
    reason: str = ""
    fix: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def key_number(self) -> str:
        """The one number of a table row: the factor of a counterexample, or the worst ratio seen."""
        if self.status in ("violated", "misprinted") and self.ratio is not None:
            return f"×{self.ratio:.3g}"
        if self.status == "holds" and self.worst_ratio is not None:
            return f"worst {self.worst_ratio:.3g}"
        return ""

    def evidence(self) -> dict[str, Any]:
        """JSON-ready evidence (no status)."""
        out = {k: v for k, v in asdict(self).items() if k != "status" and v not in (None, "", {})}
        return jsonable(out)


def holds(key: str, *, effort: str, worst_ratio: float | None, **details: Any) -> Verdict:
    return Verdict("holds", key, effort=effort, worst_ratio=_f(worst_ratio), details=details)


def violated(key: str, *, counterexample: dict[str, Any], ratio: float, effort: str = "", **details: Any) -> Verdict:
    return Verdict("violated", key, effort=effort, counterexample=counterexample, ratio=_f(ratio), details=details)


def inconclusive(key: str, *, reason: str, **details: Any) -> Verdict:
    return Verdict("inconclusive", key, reason=reason, details=details)


Check = Callable[[Budget], Verdict]


def cached(check: Check) -> Check:
    """The check with its verdict remembered per budget (checks are deterministic), so a fixed form
    shared by a misprinted claim and its corrected twin, or a verdict read by several tests in one
    process, is computed once."""
    if getattr(check, "_cached", False):
        return check
    results: dict[Budget, Verdict] = {}

    def run(budget: Budget) -> Verdict:
        if budget not in results:
            results[budget] = check(budget)
        return results[budget]

    run._cached = True  # type: ignore[attr-defined]
    run.__doc__ = check.__doc__
    return run


def misprint_check(printed: Check, fixed: Check, *, fix: str) -> Check:
    """A printed statement with a typo: test the printed form and the form after ``fix``.

    * printed violated, fixed holds: ``misprinted`` (the printed counterexample and factor; the printed
      form's details under ``details["printed"]``, the fixed form's evidence under ``details["fixed"]``);
    * both violated: ``violated`` -- the typo fix does not rescue it (both counterexamples);
    * printed holds: ``holds`` (the typo does not bite where it was tested);
    * anything inconclusive: ``inconclusive``.
    """
    def check(budget: Budget) -> Verdict:
        p, f = printed(budget), fixed(budget)
        both = {"printed": {"status": p.status, **p.evidence()}, "fixed": {"status": f.status, **f.evidence()}}
        if "inconclusive" in (p.status, f.status):
            return replace(inconclusive("a form could not be decided", reason=p.reason or f.reason, **both), fix=fix)
        if p.status == "holds":
            return replace(p, fix=fix, details={**p.details, "fixed": both["fixed"]})
        if f.status == "holds":
            return Verdict("misprinted", f"as printed: {p.key}; fixed: {f.key}", effort=p.effort,
                           counterexample=p.counterexample, ratio=p.ratio, worst_ratio=f.worst_ratio, fix=fix,
                           details={"printed": p.details, "fixed": both["fixed"]})
        return Verdict("violated", f"as printed: {p.key}; fixed, still: {f.key}",
                       effort=p.effort, counterexample=p.counterexample, ratio=p.ratio, fix=fix,
                       details={"printed": p.details, "fixed": both["fixed"]})
    return check


# =============================================================================== claims
@dataclass(frozen=True)
class Claim:
    """One checkable statement (see the module docstring).

    ``quote`` is the statement as printed (prose verbatim, mathematics transcribed symbol for
    symbol, typos kept); a corrected or extension claim quotes the printed statement it refers to.
    ``fix`` names the typo fix a misprinted claim is tested with; ``corrected`` states the corrected
    form in words when no corrected claim is registered for it.
    """

    id: str
    location: str
    quote: str
    statement: str
    regime: str
    method: str
    check: Check
    mutant: Check
    kind: str = "printed"
    corrects: str | None = None
    extends: str | None = None
    fix: str | None = None
    corrected: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.paper not in PAPERS or not self.id.startswith(self.paper + "."):
            raise ValueError(f"claim id must start with a paper id and a dot, got {self.id!r}")
        if (self.kind == "corrected") != (self.corrects is not None) or \
                (self.kind == "extension") != (self.extends is not None):
            raise ValueError(f"{self.id}: a corrected claim names what it corrects, an extension what it extends")

    @property
    def paper(self) -> str:
        return self.id.split(".")[0]

    @property
    def paper_file(self) -> str:
        return PAPERS[self.paper][0]

    @property
    def citation(self) -> str:
        return PAPERS[self.paper][1]


def register(claims: list[Claim], id: str, *, location: str, quote: str, statement: str, regime: str,
             method: str, check: Check, mutant: Check, **kw: Any) -> Claim:
    """Build a :class:`Claim` (its check and mutant remembered per budget) and append it to ``claims``
    -- called right after the check it registers, so each entry sits beside its check."""
    claim = Claim(id=id, location=location, quote=quote, statement=statement, regime=regime, method=method,
                  check=cached(check), mutant=cached(mutant), **kw)
    claims.append(claim)
    return claim


# =============================================================================== JSON
def _f(x: float | None) -> float | None:
    return None if x is None else float(x)


def jsonable(value: Any) -> Any:
    """Plain JSON values: tensors and arrays as lists, non-finite floats as strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "detach") and hasattr(value, "tolist"):  # a torch tensor, without importing torch
        return jsonable(value.detach().tolist())
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
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
