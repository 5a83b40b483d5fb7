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

"Misprinted" is kept for fixes that do not change what is guaranteed: a fix that changes the guaranteed quantity
(:func:`misprint_check`'s ``guarantee_change`` measures it) makes the printed statement ``violated``, and its
fixed form a separate ``kind="corrected"`` claim.

Two things a verdict is read beside, both derived when the registry runs
(:func:`dpfair_analysis.verify.claims.run_claims`), never written by hand:

* ``rests_on`` -- the ids of the claims the paper's proof uses (its premises). A claim whose own check holds while
  a premise is ``violated`` (or itself rests on a violated premise) has the *standing*
  ``"holds-on-violated-premises"`` (:data:`STANDING_LABELS`: "holds, but rests on violated premises"), counted
  apart from a plain ``holds``;
* ``readings`` -- :class:`Reading` entries: where the paper's words admit another reading than the one the check
  takes (``reading``), each with its own check (and mutant), run beside the verdict so the number the other reading
  gives is computed, not typed.

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

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from dpfair_analysis.testing._json import jsonable
from dpfair_analysis.validation import check_name_free

#: Paper id -> (file under the project's papers/, "" for a later paper (:data:`LATER_WORK`), short citation).
PAPERS: dict[str, tuple[str, str]] = {
    "000": ("000_c5c1f9a3ea01bc79.txt", ("Xu, Du & Wu, Removing Disparate Impact on Model Accuracy in DP-SGD "
                                         "(KDD'21): DPSGD-F")),
    "001": ("001_b43f969615163a73.txt", ("Tran, Dinh & Fioretto, Differentially Private Empirical Risk "
                                         "Minimization under the Fairness Lens (NeurIPS'21)")),
    "002": ("002_b95dfc7e3fcccdb9.txt", "FairDP (fragment: figure captions and one section)"),
    "003": ("003_20423108024a63a0.txt", ("Tran, Fioretto & Van Hentenryck, Differentially Private and Fair Deep "
                                         "Learning: a Lagrangian Dual Approach (AAAI'21): PF-LD")),
    "004": ("004_0c6bcca12c3fda87.txt", "Xu, Du & Wu, long version of 000 (balanced/unbalanced Adult & Dutch)"),
    "005": ("", ("Esipova, Ghomi, Luo & Cresswell, Disparate Impact in Differential Privacy from Gradient "
                 "Misalignment (ICLR'23): DPSGD-Global-Adapt -- later work")),
    "006": ("", ("Zhao, Rehn, Heikkilä, Tajeddine & Honkela, Mitigating Disparate Impact of Differentially Private "
                 "Learning through Bounded Adaptive Clipping (NeurIPS'25) -- later work")),
}
#: The later papers (the field's mitigations after the seed papers 000-004; none is under papers/): id -> the text
#: their claims quote (what could be read here).
LATER_WORK: dict[str, str] = {
    "005": ("the abstract (arXiv 2206.07737, ICLR 2023) and the authors' code, layer6ai-labs/fair-dp (comments, "
            "docstrings and the formulas it computes); the paper's body could not be read here"),
    "006": ("the abstract, Figure 1's caption and the first lines of the introduction (arXiv 2506.01396 v1/v2) and "
            "the authors' code, TrustworthyMLHelsinki/adaptive-clipping-fairness; the body could not be read here"),
}
STATUSES = ("holds", "violated", "misprinted", "inconclusive")
KINDS = ("printed", "corrected", "extension")
#: A verdict's standing: its status, except that a ``holds`` resting on a violated premise is set apart.
HOLDS_ON_VIOLATED = "holds-on-violated-premises"
STANDINGS = ("holds", HOLDS_ON_VIOLATED, "violated", "misprinted", "inconclusive")
STANDING_LABELS = {**{s: s for s in STATUSES}, HOLDS_ON_VIOLATED: "holds, but rests on violated premises"}
#: Premise standings that make a claim resting on them ``HOLDS_ON_VIOLATED``.
FAILED_PREMISE = ("violated", HOLDS_ON_VIOLATED)


# =============================================================================== budgets and verdicts
@dataclass(frozen=True)
class CheckBudget:
    """How hard a claim's numerical check tries: hypothesis examples per search, Monte-Carlo draws, random trials.

    Not an audit's budget (:class:`dpfair_analysis.testing.Budget`, runs per phase of a privacy audit): a check
    tests a paper's theorem on its own quantities, an audit bounds a mechanism's epsilon from its outputs."""

    name: str
    examples: int
    draws: int
    trials: int


QUICK = CheckBudget("quick", examples=120, draws=400, trials=300)
FULL = CheckBudget("full", examples=2000, draws=6000, trials=20_000)
BUDGETS = {"quick": QUICK, "full": FULL}
#: The name :class:`CheckBudget` had before it was named for what it is (modules written before still import it).
Budget = CheckBudget


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check (see the module docstring). ``fix`` is the named typo fix of a
    ``misprinted`` verdict (or the fix that was tried and did not rescue a ``violated`` one, or that
    changes the guarantee).

    ``premises`` (premise id -> its standing) and ``alternatives`` (one dict per :class:`Reading`: reading,
    text, verdict, key, number) are empty as a check returns them; the registry's ``run_claims`` fills them
    in, and :attr:`standing` reads them."""

    status: str
    key: str
    effort: str = ""
    worst_ratio: float | None = None
    counterexample: dict[str, Any] | None = None
    ratio: float | None = None
    reason: str = ""
    fix: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    premises: dict[str, str] = field(default_factory=dict)
    alternatives: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def failed_premises(self) -> list[str]:
        """The premises (``rests_on``) whose standing is violated, directly or through their own premises."""
        return [k for k, v in self.premises.items() if v in FAILED_PREMISE]

    @property
    def standing(self) -> str:
        """The status, except ``"holds-on-violated-premises"`` for a ``holds`` whose premises include a violated one
        (derived from :attr:`premises`, which the registry fills from the premises' own verdicts)."""
        if self.status == "holds" and self.failed_premises:
            return HOLDS_ON_VIOLATED
        return self.status

    @property
    def standing_label(self) -> str:
        """:attr:`standing` in words ("holds, but rests on violated premises")."""
        return STANDING_LABELS[self.standing]

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
        out = {k: v for k, v in asdict(self).items() if k != "status" and v not in (None, "", {}, ())}
        return jsonable(out)


def holds(key: str, *, effort: str, worst_ratio: float | None, **details: Any) -> Verdict:
    return Verdict("holds", key, effort=effort, worst_ratio=_f(worst_ratio), details=details)


def violated(key: str, *, counterexample: dict[str, Any], ratio: float, effort: str = "", **details: Any) -> Verdict:
    return Verdict("violated", key, effort=effort, counterexample=counterexample, ratio=_f(ratio), details=details)


def inconclusive(key: str, *, reason: str, **details: Any) -> Verdict:
    return Verdict("inconclusive", key, reason=reason, details=details)


Check = Callable[[CheckBudget], Verdict]


def cached(check: Check) -> Check:
    """The check with its verdict remembered per budget (checks are deterministic), so a fixed form
    shared by a misprinted claim and its corrected twin, or a verdict read by several tests in one
    process, is computed once."""
    if getattr(check, "_cached", False):
        return check
    results: dict[CheckBudget, Verdict] = {}

    def run(budget: CheckBudget) -> Verdict:
        if budget not in results:
            results[budget] = check(budget)
        return results[budget]

    run._cached = True  # type: ignore[attr-defined]
    run.__doc__ = check.__doc__
    return run


GuaranteeChange = Callable[[Verdict, Verdict], tuple[float, str]]


def misprint_check(printed: Check, fixed: Check, *, fix: str, guarantee_change: GuaranteeChange | None = None
                   ) -> Check:
    """A printed statement with a typo: test the printed form and the form after ``fix``.

    * printed violated, fixed holds: ``misprinted`` (the printed counterexample and factor; the printed
      form's details under ``details["printed"]``, the fixed form's evidence under ``details["fixed"]``) --
      unless ``guarantee_change(printed verdict, fixed verdict)`` returns a factor > 1: the fix changes what
      the statement guarantees (e.g. the ε it promises), so the printed statement is ``violated`` (its fixed
      form belongs in a ``kind="corrected"`` claim); the factor and where it is reached go into the key and
      ``details["guarantee_change"]``;
    * both violated: ``violated`` -- the typo fix does not rescue it (both counterexamples);
    * printed holds: ``holds`` (the typo does not bite where it was tested);
    * anything inconclusive: ``inconclusive``.
    """
    def check(budget: CheckBudget) -> Verdict:
        p, f = printed(budget), fixed(budget)
        both = {"printed": {"status": p.status, **p.evidence()}, "fixed": {"status": f.status, **f.evidence()}}
        if "inconclusive" in (p.status, f.status):
            return replace(inconclusive("a form could not be decided", reason=p.reason or f.reason, **both), fix=fix)
        if p.status == "holds":
            return replace(p, fix=fix, details={**p.details, "fixed": both["fixed"]})
        change = guarantee_change(p, f) if (f.status == "holds" and guarantee_change is not None) else None
        if change is not None and change[0] > 1 + 1e-9:
            factor, where = change
            return Verdict("violated", f"as printed: {p.key}; the fix holds ({f.key}) but changes the guarantee "
                                       f"×{factor:.3g} ({where}): not a misprint", effort=p.effort,
                           counterexample=p.counterexample, ratio=p.ratio, fix=fix,
                           details={"printed": p.details, "fixed": both["fixed"],
                                    "guarantee_change": {"factor": factor, "where": where}})
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
class Reading:
    """Another reading of a claim's words than the one its check takes (the paper's loose wording: "∝", "about",
    a comparison stated without its conditions), run beside the verdict.

    ``name`` labels it, ``text`` says what the words mean under it (quoting them), ``check`` tests the statement
    so read (its verdict carries the number this reading gives) and ``mutant`` is that check on a falsified input,
    whose verdict must differ (tests/verify/test_claims_can_fail.py)."""

    name: str
    text: str
    check: Check
    mutant: Check


@dataclass(frozen=True)
class Claim:
    """One checkable statement (see the module docstring).

    ``quote`` is the statement as printed (prose verbatim, mathematics transcribed symbol for
    symbol, typos kept); a corrected or extension claim quotes the printed statement it refers to.
    ``fix`` names the typo fix a misprinted claim is tested with; ``corrected`` states the corrected
    form in words when no corrected claim is registered for it. ``context`` holds further sentences of the
    paper (verbatim) that the verdict reads -- a proof's words, the setting the paper runs it at.
    ``rests_on`` names the claims the paper's proof uses (their verdicts set this one's standing);
    ``reading`` says how the check reads loose wording and ``readings`` registers the other readings
    (:class:`Reading`), each run beside the verdict.
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
    context: tuple[str, ...] = ()
    rests_on: tuple[str, ...] = ()
    reading: str | None = None
    readings: tuple[Reading, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.paper not in PAPERS or not self.id.startswith(self.paper + "."):
            raise ValueError(f"claim id must start with a paper id and a dot, got {self.id!r}")
        if (self.kind == "corrected") != (self.corrects is not None) or \
                (self.kind == "extension") != (self.extends is not None):
            raise ValueError(f"{self.id}: a corrected claim names what it corrects, an extension what it extends")
        if self.id in self.rests_on:
            raise ValueError(f"{self.id} cannot rest on itself")
        if self.readings and not self.reading:
            raise ValueError(f"{self.id}: a claim with alternative readings names the reading its check takes")

    @property
    def paper(self) -> str:
        return self.id.split(".")[0]

    @property
    def paper_file(self) -> str | None:
        """The paper's file under the project's papers/ (None for a later paper: :data:`LATER_WORK`)."""
        return PAPERS[self.paper][0] or None

    @property
    def later_work(self) -> bool:
        """Whether the claim is a later paper's (:data:`LATER_WORK`), not one of the seed papers'."""
        return self.paper in LATER_WORK

    @property
    def citation(self) -> str:
        return PAPERS[self.paper][1]


#: The registered claims by id, in the order they were registered: the claims files register into it, and it imports
#: none of them.
REGISTRY: dict[str, Claim] = {}


def register(id: str, *, location: str, quote: str, statement: str, regime: str, method: str, check: Check,
             mutant: Check, **kw: Any) -> Claim:
    """Build a :class:`Claim` (its check and mutant remembered per budget) and add it to :data:`REGISTRY`
    (ValueError if its id is taken) -- called right after the check it registers, so each entry sits beside its
    check."""
    readings = tuple(replace(r, check=cached(r.check), mutant=cached(r.mutant)) for r in kw.pop("readings", ()))
    claim = Claim(id=id, location=location, quote=quote, statement=statement, regime=regime, method=method,
                  check=cached(check), mutant=cached(mutant), readings=readings, **kw)
    REGISTRY[check_name_free(id, REGISTRY, "claim")] = claim
    return claim


# =============================================================================== JSON
def _f(x: float | None) -> float | None:
    return None if x is None else float(x)


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
