"""Every registered check can fail: its mutant (the bound falsified, or the counterexample fed
in, or the setting where the statement is true) must flip its verdict at the quick budget.

Claims without a mutant yet are listed in MUTANT_BACKLOG (issue 10, part 4: work in progress):
the list may only shrink. A new claim without a mutant, or a listed claim that gained one,
fails the ratchet test.
"""

from __future__ import annotations

import pytest

from dpfair_analysis.verify.claims import CLAIMS, QUICK

MUTANT_BACKLOG = frozenset([
    "000.sec3.gaussian", "000.sec4.2.dpsgd-upper", "000.eq1.upper", "000.eq1.lower-half",
    "000.eq1.lower-half.nonnegative", "000.sec4.2.optimal-C.rank", "000.sec4.2.optimal-C.quantile",
    "000.sec5.2.count-sensitivity", "000.sec5.2.sum-sensitivity", "000.sec5.2.group-privacy",
    "000.sec5.3.naive-group-privacy", "000.sec6.1.3.count-budget", "000.tables.epsilon", "004.def3.gaussian",
    "004.thm1", "004.tables.epsilon",
    "001.thm1", "001.thm1.mean-hessian", "001.cor1",
    "001.cor2", "001.cor2.second-moment", "001.thm2",
    "001.thm2.noise-over-b2", "001.thm3", "001.thm3.two-groups", "001.thm3.minibatch", "001.thm4", "001.thm5",
    "001.ex1", "001.ex2", "001.ex3", "001.ex3.with-bias", "003.ex1", "003.ex2",
    "003.ex3", "003.thm1", "003.thm1.sum-release", "003.thm2", "003.thm2.unsigned", "003.thm2.sum-release",
    "003.sec7.missing", "003.thm3", "003.thm4", "003.lemma1", "003.lemma2",
    "003.thm5", "003.sec6.1.rdp-to-dp", "003.thm6", "003.thm6.optimal-Cp", "003.thm7",
   
])
WITH_MUTANT = [c for c in CLAIMS if c.mutant is not None]


def test_claims_without_a_mutant_are_exactly_the_backlog():
    missing = {c.id for c in CLAIMS if c.mutant is None}
    assert missing == MUTANT_BACKLOG, ("new claims need a mutant; claims that gained one leave the backlog",
                                       sorted(missing ^ MUTANT_BACKLOG))


@pytest.mark.parametrize("claim", WITH_MUTANT, ids=[c.id for c in WITH_MUTANT])
def test_check_flips_on_its_mutant(claim):
    verdict = claim.check(QUICK)
    mutated = claim.mutant(QUICK)
    assert verdict.status in ("holds", "violated"), (claim.id, verdict)
    assert mutated.status in ("holds", "violated") and mutated.status != verdict.status, (claim.id, verdict, mutated)
