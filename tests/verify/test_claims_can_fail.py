"""Every registered claim gets the verdict written here at the quick budget, and its mutant (the bound
falsified, the counterexample fed in, the setting where the statement is true, or a misprint's fixed
form falsified) flips it: a check that cannot be made to flip cannot fail. The same for every alternative
reading registered beside a verdict (its check and its mutant), and the standings derived from premises.

One test per claim runs its check and its mutant once (checks remember their verdict per budget, so the
by-hand tests in test_claims*.py reuse it in the same process). The expected verdicts were decided by
running each check and reading its evidence against the paper's text; the counterexamples are
recomputed from first principles in test_claims_p000.py, test_claims_p001_p002.py, test_claims_p003.py.
"""

from __future__ import annotations

import pytest

from dpfair_analysis.verify.claims import CLAIMS, QUICK

EXPECTED = {
    "000.sec3.gaussian": "holds", "000.sec4.2.dpsgd-upper": "holds", "000.eq1.upper": "holds",
    "000.eq1.lower-half": "violated", "000.eq1.lower-half.nonnegative": "holds",
    "000.sec4.2.optimal-C.rank": "holds", "000.sec4.2.optimal-C.quantile": "holds",
    "000.sec5.2.count-sensitivity": "holds", "000.sec5.2.sum-sensitivity": "violated",
    "000.sec5.2.sum-sensitivity.guarded": "holds", "000.sec5.3.naive-sum-sensitivity": "violated",
    "000.sec5.3.naive-sum-sensitivity.noisy-sizes": "holds", "000.sec5.2.group-privacy": "violated",
    "000.sec5.2.group-privacy.guarded": "violated", "000.sec5.2.two-groups": "violated",
    "000.sec5.3.naive-group-privacy": "violated", "000.sec6.1.3.count-budget": "violated",
    "000.sec6.1.3.fewer-iterations": "violated", "000.tables.epsilon": "holds", "004.def3.gaussian": "holds",
    "004.thm1": "holds", "004.sec5.3.naive-sum-sensitivity": "violated", "004.sec5.2.two-groups": "violated",
    "004.sec6.1.fewer-iterations": "violated", "004.tables.epsilon": "holds", "001.sec3.gaussian": "violated",
    "001.sec3.gaussian.dwork-roth": "holds", "001.sec3.gaussian.std": "misprinted", "001.sec5.sensitivity": "violated",
    "001.sec5.sensitivity.intercept": "holds", "001.sec5.sensitivity.no-intercept": "holds", "001.thm1": "misprinted", "001.thm1.mean-hessian": "holds",
    "001.cor1": "holds", "001.cor1.trace": "misprinted", "001.cor1.trace.factor2": "holds", "001.cor2": "violated",
    "001.cor2.second-moment": "holds", "001.thm2": "misprinted", "001.thm2.noise-over-b2": "holds",
    "001.eq6.simplification": "misprinted", "001.thm3": "holds", "001.thm3.wlog": "violated",
    "001.thm3.minibatch": "violated", "001.ex1": "misprinted", "001.ex1.with-bias": "holds",
    "001.ex1.norm": "violated", "001.ex2": "violated", "001.ex2.identity": "holds", "001.ex2.sum": "violated",
    "001.thm4": "holds", "001.thm4.exact-noise-effect": "violated", "001.ex3": "holds",
    "001.ex3.with-bias": "holds", "001.ex3.norm": "violated", "001.thm5": "holds",
    "001.sec8.boundary-trace": "violated", "003.ex1": "holds", "003.ex2": "holds", "003.ex3": "holds",
    "003.thm1": "violated", "003.sec6.population-unclipped": "violated", "003.thm2": "violated",
    "003.thm2.unsigned": "holds", "003.thm1.sum-release": "holds", "003.thm2.sum-release": "holds",
    "003.sec7.missing": "violated", "003.sec7.less-noise": "violated", "003.sec4.2.gaussian": "violated",
    "003.sec4.2.gaussian.dwork-roth": "holds",
    "003.sec4.2.gaussian.std": "holds", "003.thm3": "misprinted", "003.thm3.mironov": "holds", "003.thm4": "holds",
    "003.lemma1": "violated", "003.lemma1.given-sensitivity": "violated",
    "003.lemma1.given-sensitivity.multiplier": "holds", "003.lemma1.shared-batch": "violated",
    "003.lemma2": "violated", "003.lemma2.given-sensitivity": "violated",
    "003.lemma2.given-sensitivity.multiplier": "holds", "003.thm5": "violated", "003.thm5.corrected": "holds",
    "003.sec6.1.rdp-to-dp": "holds", "003.thm6": "misprinted", "003.thm6.signed": "holds",
    "003.thm6.optimal-Cp": "violated", "003.thm7": "holds", "002.eq3": "holds", "002.eq4": "violated",
    "002.eq4.scaled": "holds", "002.eq4.bias-variance": "holds", "002.eq4.clipping-bias": "holds",
    "002.appD4.indices": "holds", "005.code.direction-magnitude": "holds", "005.code.noise-term": "misprinted",
    "005.code.global-condition": "violated",
    "005.code.accounting": "violated", "006.abs.vanishing-bound": "holds", "006.fig1.lower-bound": "holds",
    "006.code.count-noise": "violated",
}


def test_every_claim_has_an_expected_verdict_and_vice_versa():
    assert set(EXPECTED) == {c.id for c in CLAIMS}


def test_every_claim_has_a_mutant():
    missing = sorted(c.id for c in CLAIMS if c.mutant is None)
    assert not missing, f"claims without a mutant (a check that cannot be shown to fail): {missing}"


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_verdict_and_its_mutant(claim):
    verdict = claim.check(QUICK)
    assert verdict.status == EXPECTED[claim.id], (verdict.key, verdict.reason, verdict.details)
    if verdict.status in ("violated", "misprinted"):
        assert verdict.counterexample is not None and verdict.ratio is not None and verdict.ratio > 1
    else:
        assert verdict.effort
    if verdict.status == "misprinted":  # both forms tested, the fix named
        assert verdict.fix and verdict.fix != "none" and verdict.details["fixed"]["status"] == "holds"
    mutated = claim.mutant(QUICK)
    assert mutated.status in ("holds", "violated") and mutated.status != verdict.status, (claim.id, verdict, mutated)


#: The verdict of each alternative reading (claim id, reading name) at the quick budget.
EXPECTED_READINGS = {
    ("000.sec6.1.3.count-budget", "separate"): "holds", ("001.thm2", "noise on the average"): "holds",
    ("001.ex2.sum", "comparable"): "holds", ("001.sec8.boundary-trace", "equal norms"): "holds",
}
READINGS = [(c, r) for c in CLAIMS for r in c.readings]


def test_every_reading_has_an_expected_verdict_and_vice_versa():
    assert set(EXPECTED_READINGS) == {(c.id, r.name) for c, r in READINGS}


@pytest.mark.parametrize("claim,reading", READINGS, ids=[f"{c.id}:{r.name}" for c, r in READINGS])
def test_each_alternative_reading_and_its_mutant(claim, reading):
    """The other reading's verdict differs from the claim's own (else it would not be worth naming), and its
    mutant (a falsified bound) flips it."""
    verdict = reading.check(QUICK)
    assert verdict.status == EXPECTED_READINGS[(claim.id, reading.name)] != claim.check(QUICK).status
    assert verdict.key_number  # the number the other reading gives, computed
    mutated = reading.mutant(QUICK)
    assert mutated.status in ("holds", "violated") and mutated.status != verdict.status, (claim.id, mutated)
