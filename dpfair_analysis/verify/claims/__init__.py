"""The claims registry: every checkable statement of the five papers, each with a check that runs.

Papers (ids resolved in README's References): ``000`` DPSGD-F (Xu, Du & Wu, KDD'21), ``004``
its long version, ``001`` the fairness lens on DP (Tran, Dinh & Fioretto, NeurIPS'21),
``003`` PF-LD (Tran, Fioretto & Van Hentenryck, AAAI'21), ``002`` a fragment of FairDP.
One module per paper (:mod:`.p000` also holds 004), each check beside its statement; the
types and the search helper are in :mod:`.core`.

Checks run the toolkit's own code (``theory.*``, ``privacy.*``, ``training.*``) and
searches over the objects a claim quantifies over; they do not restate verdicts. When a
claim is violated and a corrected statement exists, the corrected claim is registered too
(its ``corrects`` names the original). Budgets: :data:`QUICK` (what the default tests run)
and :data:`FULL` (larger searches and Monte Carlo; ``dpfair verify --budget full``).
"""

from __future__ import annotations

import time
from typing import Iterable

import pandas as pd
from tqdm import tqdm

from dpfair_analysis.verify.claims import p000, p001, p002, p003
from dpfair_analysis.verify.claims.core import BUDGETS, FULL, PAPERS, QUICK, STATUSES, Budget, Claim, Verdict, \
    inconclusive

__all__ = ["Budget", "QUICK", "FULL", "BUDGETS", "STATUSES", "Verdict", "Claim", "CLAIMS", "PAPERS", "get_claim",
           "claims_for", "run_claims", "verdict_table"]

CLAIMS: list[Claim] = [*p000.CLAIMS, *p001.CLAIMS, *p003.CLAIMS, *p002.CLAIMS]

_BY_ID = {c.id: c for c in CLAIMS}
if len(_BY_ID) != len(CLAIMS):  # pragma: no cover
    raise RuntimeError("duplicate claim ids")


def get_claim(claim_id: str) -> Claim:
    """The claim with this id (ValueError naming the known ids otherwise)."""
    if claim_id not in _BY_ID:
        raise ValueError(f"unknown claim {claim_id!r}; known: {', '.join(_BY_ID)}")
    return _BY_ID[claim_id]


def claims_for(paper: str | None = None) -> list[Claim]:
    """All claims, or those of one paper ('000', '001', '002', '003', '004')."""
    if paper is None:
        return list(CLAIMS)
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; one of {', '.join(PAPERS)}")
    return [c for c in CLAIMS if c.paper == paper]


def run_claims(claims: Iterable[Claim], budget: Budget | str = QUICK, *,
               progress: bool = True) -> list[tuple[Claim, Verdict, float]]:
    """Run each claim's check; returns (claim, verdict, seconds). A check that raises is inconclusive."""
    budget = BUDGETS[budget] if isinstance(budget, str) else budget
    out = []
    claims = list(claims)
    for claim in tqdm(claims, desc=f"verify ({budget.name})", disable=not progress, leave=False):
        start = time.perf_counter()
        try:
            verdict = claim.check(budget)
        except Exception as error:  # a check must never take the registry down
            verdict = inconclusive("check raised", reason_detail=f"{type(error).__name__}: {error}")
        out.append((claim, verdict, time.perf_counter() - start))
    return out


def _key_number(v: Verdict) -> str:
    if v.status == "violated" and v.ratio is not None:
        return f"×{v.ratio:.3g}"
    if v.status == "holds" and v.worst_ratio is not None:
        return f"worst {v.worst_ratio:.3g}"
    return ""


def verdict_table(results: list[tuple[Claim, Verdict, float]]) -> pd.DataFrame:
    """Tidy table: id, paper, location, statement, verdict, key, ratio, seconds."""
    return pd.DataFrame([{"id": c.id, "paper": c.paper, "location": c.location, "statement": c.statement,
                          "verdict": v.status, "key_number": _key_number(v), "key": v.key,
                          "ratio": v.ratio if v.status == "violated" else v.worst_ratio, "corrects": c.corrects,
                          "seconds": s} for c, v, s in results])
