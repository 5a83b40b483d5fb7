"""The claims registry: the checkable statements of the five papers, and of two later ones, each with a check that
runs.

Papers (ids resolved in README's References): ``000`` DPSGD-F (Xu, Du & Wu, KDD'21), ``004`` its
long version, ``001`` the fairness lens on DP (Tran, Dinh & Fioretto, NeurIPS'21), ``003`` PF-LD
(Tran, Fioretto & Van Hentenryck, AAAI'21), ``002`` a fragment of FairDP. Later work (:data:`LATER_WORK`, each
claim's ``later_work``; counted apart by :func:`count_later_work`): ``005`` DPSGD-Global-Adapt (Esipova et al.,
ICLR'23), ``006`` bounded adaptive clipping (Zhao et al., NeurIPS'25) -- quoting what of them could be read (their
abstracts and their authors' code).

One or more files per paper, named for it (``p003_pfld.py``, ``p003_pfld_privacy.py``, ...), each
registry entry right after its check; the types, the search helper and the misprint combinator are in
:mod:`.core`, shared data and the Gaussian-mechanism checks in :mod:`.fixtures`, paper 003's neighbouring pairs
and the searches over them in :mod:`.pfld_cases`.

Verdicts (:mod:`.core`): ``holds``, ``violated`` (false as stated, in the stated regime), ``misprinted``
(false as printed, true after a named typo fix that does not change what is guaranteed -- both forms tested) and
``inconclusive``. A claim's *standing* sets apart a ``holds`` whose premises (``rests_on``, the claims its proof
uses) include a violated one: "holds, but rests on violated premises"; :func:`run_claims` derives it from the
premises' own verdicts, and runs each alternative reading (``readings``) beside the verdict. Each printed
statement is tested as printed (``kind="printed"``, its quote verbatim); corrected forms and
statements beyond the paper's regime are separate claims (``kind="corrected"`` / ``"extension"``).
Budgets: :data:`QUICK` (what the default tests run) and :data:`FULL` (``dpfair verify --budget full``).
:func:`explain` gathers what ``dpfair verify --explain`` prints.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

# the claims files register into core.REGISTRY, in the registry's order (000 and its long version 004, then 001, 003,
# 002; then the later papers 005, 006)
from dpfair_analysis.verify.claims import p000_dpsgdf  # noqa: I001
from dpfair_analysis.verify.claims import p000_dpsgdf_accounting
from dpfair_analysis.verify.claims import p004_dpsgdf_long
from dpfair_analysis.verify.claims import p001_fairness_lens
from dpfair_analysis.verify.claims import p001_fairness_lens_factors
from dpfair_analysis.verify.claims import p003_pfld
from dpfair_analysis.verify.claims import p003_pfld_privacy
from dpfair_analysis.verify.claims import p003_pfld_composition
from dpfair_analysis.verify.claims import p003_pfld_bounds
from dpfair_analysis.verify.claims import p002_fairdp
from dpfair_analysis.verify.claims import p005_global_adapt
from dpfair_analysis.verify.claims import p006_bounded_adaptive
from dpfair_analysis.verify.claims.core import (
    BUDGETS,
    FULL,
    HOLDS_ON_VIOLATED,
    KINDS,
    LATER_WORK,
    PAPERS,
    QUICK,
    REGISTRY,
    STANDING_LABELS,
    STANDINGS,
    STATUSES,
    CheckBudget,
    Claim,
    Reading,
    Verdict,
    inconclusive,
)
from dpfair_analysis.verify.claims.core import Budget  # noqa: F401  (CheckBudget's former name)

__all__ = [
    "BUDGETS",
    "CLAIMS",
    "FULL",
    "HOLDS_ON_VIOLATED",
    "KINDS",
    "LATER_WORK",
    "MODULES",
    "PAPERS",
    "QUICK",
    "REGISTRY",
    "STANDINGS",
    "STANDING_LABELS",
    "STATUSES",
    "CheckBudget",
    "Claim",
    "Reading",
    "Verdict",
    "claims_for",
    "corrections_of",
    "count_later_work",
    "count_verdicts",
    "explain",
    "format_alternatives",
    "format_counts",
    "format_explanation",
    "format_premises",
    "get_claim",
    "run_claims",
    "verdict_table",
]

#: The claims files, in the registry's order.
MODULES = (p000_dpsgdf, p000_dpsgdf_accounting, p004_dpsgdf_long, p001_fairness_lens, p001_fairness_lens_factors,
           p003_pfld, p003_pfld_privacy, p003_pfld_composition, p003_pfld_bounds, p002_fairdp, p005_global_adapt,
           p006_bounded_adaptive)
CLAIMS: list[Claim] = list(REGISTRY.values())

_BY_ID = {c.id: c for c in CLAIMS}
for _c in CLAIMS:  # every reference resolves to a printed claim of the same paper
    for _ref in (_c.corrects, _c.extends):
        if _ref is not None and (_ref not in _BY_ID or _BY_ID[_ref].kind != "printed" or _ref[:3] != _c.paper):
            raise RuntimeError(f"{_c.id} refers to {_ref!r}, not a printed claim of paper {_c.paper}")
    for _ref in _c.rests_on:  # premises resolve, and no chain of premises comes back to the claim
        if _ref not in _BY_ID:
            raise RuntimeError(f"{_c.id} rests on {_ref!r}, which is not a registered claim")


def _premise_chain(claim_id: str, seen: tuple[str, ...] = ()) -> None:
    if claim_id in seen:
        raise RuntimeError(f"claims rest on each other in a cycle: {' -> '.join((*seen, claim_id))}")
    for ref in _BY_ID[claim_id].rests_on:
        _premise_chain(ref, (*seen, claim_id))


for _c in CLAIMS:
    _premise_chain(_c.id)


def get_claim(claim_id: str) -> Claim:
    """The claim with this id (ValueError naming the known ids otherwise)."""
    if claim_id not in _BY_ID:
        raise ValueError(f"unknown claim {claim_id!r}; known: {', '.join(_BY_ID)}")
    return _BY_ID[claim_id]


def claims_for(paper: str | None = None) -> list[Claim]:
    """All claims, or those of one paper ('000' to '006'; 005 and 006 are later work)."""
    if paper is None:
        return list(CLAIMS)
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; one of {', '.join(PAPERS)}")
    return [c for c in CLAIMS if c.paper == paper]


def corrections_of(claim: Claim) -> list[Claim]:
    """The corrected forms and extensions registered for a printed claim."""
    return [c for c in CLAIMS if claim.id in (c.corrects, c.extends)]


def _run_check(check, budget: CheckBudget) -> Verdict:
    try:
        return check(budget)
    except Exception as error:  # noqa: BLE001 -- a check must never take the registry down
        return inconclusive("check raised", reason=f"{type(error).__name__}: {error}")


def _standing(claim: Claim, budget: CheckBudget, memo: dict[str, str]) -> str:
    """A claim's standing (:attr:`Verdict.standing`) from its own check and, when that holds, its premises'
    (recursively: a premise that holds on violated premises passes that on)."""
    if claim.id not in memo:
        verdict = _run_check(claim.check, budget)
        premises = {} if verdict.status != "holds" else \
            {ref: _standing(get_claim(ref), budget, memo) for ref in claim.rests_on}
        memo[claim.id] = Verdict(verdict.status, verdict.key, premises=premises).standing
    return memo[claim.id]


def _derived(claim: Claim, verdict: Verdict, budget: CheckBudget) -> Verdict:
    """The verdict with what the registry derives beside it: each premise's standing (``premises``) and each
    alternative reading's verdict and number (``alternatives``)."""
    memo: dict[str, str] = {}
    premises = {ref: _standing(get_claim(ref), budget, memo) for ref in claim.rests_on}
    alternatives = []
    for reading in claim.readings:
        v = _run_check(reading.check, budget)
        alternatives.append({"reading": reading.name, "text": reading.text, "verdict": v.status,
                             "key": v.key if v.status != "inconclusive" else v.reason, "number": v.key_number})
    return replace(verdict, premises=premises, alternatives=tuple(alternatives))


def run_claims(claims: Iterable[Claim], budget: CheckBudget | str = QUICK, *,
               progress: bool = True) -> list[tuple[Claim, Verdict, float]]:
    """Run each claim's check; returns (claim, verdict, seconds). A check that raises is inconclusive.

    Each verdict comes back with what the registry derives beside it: the standing of every premise the claim
    rests on (``Verdict.premises``, the premises' checks run too -- checks remember their verdicts, so a premise
    in ``claims`` runs once) and the verdict of each alternative reading (``Verdict.alternatives``).

    Parameters
    ----------
    claims : iterable of Claim
        The claims to check (e.g. ``claims_for("003")`` or ``CLAIMS``).
    budget : CheckBudget or str
        How hard each check searches: ``"quick"`` (the default, the test suite's) or ``"full"``.
    progress : bool
        Show a progress bar.

    Returns
    -------
    list of (Claim, Verdict, float)
        Each claim with its verdict (holds / violated with a counterexample / misprinted / inconclusive; its
        ``standing`` sets apart "holds, but rests on violated premises") and the seconds its check took (with
        its premises and alternative readings).
    """
    from tqdm import tqdm

    budget = BUDGETS[budget] if isinstance(budget, str) else budget
    out = []
    claims = list(claims)
    for claim in tqdm(claims, desc=f"verify ({budget.name})", disable=not progress, leave=False):
        start = time.perf_counter()
        verdict = _derived(claim, _run_check(claim.check, budget), budget)
        out.append((claim, verdict, time.perf_counter() - start))
    return out


def count_verdicts(results: list[tuple[Claim, Verdict, float]]) -> dict[str, int]:
    """How many claims have each standing (every one, zeros included): a plain ``holds`` apart from
    ``"holds-on-violated-premises"`` ("holds, but rests on violated premises"), then violated, misprinted,
    inconclusive."""
    return {s: sum(v.standing == s for _, v, _ in results) for s in STANDINGS}


def count_later_work(results: list[tuple[Claim, Verdict, float]]) -> dict[str, int]:
    """:func:`count_verdicts` of the later papers' claims alone (:data:`LATER_WORK`)."""
    return count_verdicts([r for r in results if r[0].later_work])


def format_counts(counts: dict[str, int]) -> str:
    """The totals in words: "47 holds, 1 holds but rests on violated premises, 29 violated, ..."."""
    return ", ".join(f"{counts[s]} {STANDING_LABELS[s].replace(',', '')}" for s in STANDINGS)


def format_premises(verdict: Verdict) -> str:
    """The premises a verdict rests on, with their standings ("" when none)."""
    return ", ".join(f"{k} ({STANDING_LABELS[v]})" for k, v in verdict.premises.items())


def format_alternatives(verdict: Verdict) -> str:
    """Each alternative reading with its verdict and number, generated from the readings' verdicts ("" when none)."""
    return "; ".join(f"{a['reading']}: {a['verdict']}" + (f" {a['number']}" if a["number"] else "") +
                     f" — {a['key']}" for a in verdict.alternatives)


def verdict_table(results: list[tuple[Claim, Verdict, float]]):
    """Tidy table (pandas): id, paper, later_work (a later paper's claim: :data:`LATER_WORK`), kind, location, statement, verdict, standing (the verdict, with "holds, but
    rests on violated premises" apart), key number, key, ratio, fix, corrects, extends, rests_on (premise ids and
    their standings), reading (the one the verdict takes), alternative_readings (each with its verdict and
    number), seconds."""
    import pandas as pd

    return pd.DataFrame([{"id": c.id, "paper": c.paper, "later_work": c.later_work, "kind": c.kind,
                          "location": c.location,
                          "statement": c.statement, "verdict": v.status, "standing": v.standing_label,
                          "key_number": v.key_number, "key": v.key,
                          "ratio": v.ratio if v.status in ("violated", "misprinted") else v.worst_ratio,
                          "fix": v.fix or c.fix, "corrects": c.corrects, "extends": c.extends,
                          "rests_on": format_premises(v), "reading": c.reading or "",
                          "alternative_readings": format_alternatives(v), "seconds": s}
                         for c, v, s in results])


def explain(claim_id: str, budget: CheckBudget | str = QUICK) -> dict[str, Any]:
    """Everything about one claim: the statement as printed (quote) and the paper's further words the verdict
    reads (context), where it is (paper, section, equation), what is tested and how, the verdict with its
    counterexample or worst ratio and its standing (the premises it rests on, with theirs), the reading it takes
    and the other readings with their verdicts, the named fix, and the corrected form (the registered
    corrections and extensions, run at the same budget)."""
    claim = get_claim(claim_id)
    [(_, verdict, seconds)] = run_claims([claim], budget, progress=False)
    related = [(c, v) for c, v, _ in run_claims(corrections_of(claim), budget, progress=False)]
    refers = get_claim(claim.corrects or claim.extends) if claim.kind != "printed" else None
    evidence = verdict.evidence()
    return {
        "id": claim.id, "paper": claim.paper, "citation": claim.citation, "later_work": claim.later_work,
        "kind": claim.kind,
        "location": claim.location, "quote": claim.quote, "context": list(claim.context),
        "statement": claim.statement, "regime": claim.regime,
        "method": claim.method, "verdict": verdict.status, "standing": verdict.standing,
        "standing_label": verdict.standing_label, "key": verdict.key,
        "rests_on": dict(verdict.premises), "reading": claim.reading,
        "alternative_readings": [dict(a) for a in verdict.alternatives],
        "fix": verdict.fix if verdict.fix and verdict.fix != "none" else claim.fix,
        "counterexample": evidence.get("counterexample"),
        "ratio": evidence.get("ratio"), "worst_ratio": evidence.get("worst_ratio"),
        "effort": verdict.effort, "reason": verdict.reason,
        "corrects": claim.corrects, "extends": claim.extends,
        "refers_to": None if refers is None else {"id": refers.id, "statement": refers.statement},
        "corrected_form": {"text": claim.corrected,
                           "claims": [{"id": c.id, "kind": c.kind, "statement": c.statement, "verdict": v.status,
                                       "key": v.key} for c, v in related]},
        "evidence": evidence, "seconds": round(seconds, 3),
    }


def _compact(value: Any, *, items: int = 8) -> Any:
    """Long lists shortened for the terminal: the first ``items`` and a count."""
    if isinstance(value, dict):
        return {k: _compact(v, items=items) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > items:
            return [_compact(v, items=items) for v in value[:items]] + [f"... {len(value) - items} more"]
        return [_compact(v, items=items) for v in value]
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return value


def format_explanation(info: dict[str, Any], *, width: int = 110) -> str:
    """The terminal rendering of :func:`explain`'s dict (``dpfair verify --explain``)."""
    def field(label: str, text: str) -> list[str]:
        return textwrap.wrap(text, width=width, initial_indent=f"{label:<16}", subsequent_indent=" " * 16) or [label]

    head = f"{info['id']}  [{info['kind']}]  verdict: {info['verdict'].upper()}"
    if info["standing"] != info["verdict"]:
        head += f" ({info['standing_label']})"
    lines = [head, ""]
    lines += field("Where", f"paper {info['paper']} ({info['citation']}), {info['location']}")
    if info["later_work"]:
        lines += field("Later work", f"not a seed paper; quoted from {LATER_WORK[info['paper']]}")
    if info["refers_to"]:
        relation = "corrects" if info["kind"] == "corrected" else "extends"
        lines += field(relation.capitalize(), f"{info['refers_to']['id']}: {info['refers_to']['statement']}")
    lines += field("As printed", f"“{info['quote']}”")
    for quote in info["context"]:
        lines += field("Paper also", f"“{quote}”")
    lines += field("Tested", info["statement"])
    lines += field("Regime", info["regime"])
    lines += field("Check", info["method"])
    lines += field("Verdict", f"{info['verdict']} — {info['key']}")
    if info["rests_on"]:
        failed = [k for k, v in info["rests_on"].items() if v in ("violated", HOLDS_ON_VIOLATED)]
        lines += field("Rests on", ", ".join(f"{k} ({STANDING_LABELS[v]})" for k, v in info["rests_on"].items()) +
                       (f": {info['standing_label']} ({', '.join(failed)})" if failed else ""))
    if info["reading"]:
        lines += field("Reading", info["reading"])
    for alt in info["alternative_readings"]:
        lines += field("Other reading", f"{alt['reading']} — {alt['text']}: {alt['verdict']}" +
                       (f" ({alt['number']})" if alt["number"] else "") + f" — {alt['key']}")
    if info["fix"]:
        lines += field("Fix", info["fix"])
    if info["verdict"] in ("violated", "misprinted") and info["counterexample"] is not None:
        lines += field("Counterexample", json.dumps(_compact(info["counterexample"]), ensure_ascii=False))
        ratio = info["ratio"]
        lines += field("Factor", f"×{ratio:.4g} (by which the counterexample breaks the statement as printed)"
                       if isinstance(ratio, (int, float)) else f"{ratio} (δ = 0 claimed)")
    elif info["worst_ratio"] is not None:
        lines += field("Worst ratio", f"{info['worst_ratio']:.6g} (observed / claimed; ≤ 1 within the claim)")
    if info["reason"]:
        lines += field("Reason", info["reason"])
    lines += field("Effort", info["effort"] or "-")
    corrected = info["corrected_form"]
    if corrected["text"]:
        lines += field("Corrected form", corrected["text"])
    for c in corrected["claims"]:
        lines += field("Registered" if c["kind"] == "corrected" else "Extension",
                       f"{c['id']} ({c['verdict']}): {c['statement']} — {c['key']}")
    return "\n".join(lines)
