"""Every registered check can fail: its mutant (the bound falsified, or the counterexample fed in,
or the setting where the statement is true) must flip its verdict at the quick budget.

A claim without a mutant is a defect: the first test fails for it.
"""

from __future__ import annotations

import pytest

from dpfair_analysis.verify.claims import CLAIMS, QUICK


def test_every_claim_has_a_mutant():
    missing = sorted(c.id for c in CLAIMS if c.mutant is None)
    assert not missing, f"claims without a mutant (a check that cannot be shown to fail): {missing}"


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_check_flips_on_its_mutant(claim):
    verdict = claim.check(QUICK)
    mutated = claim.mutant(QUICK)
    assert verdict.status in ("holds", "violated"), (claim.id, verdict)
    assert mutated.status in ("holds", "violated") and mutated.status != verdict.status, (claim.id, verdict, mutated)
