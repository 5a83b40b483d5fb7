"""Every registered check can fail: its mutant (the bound falsified, or the counterexample fed
in, or the setting where the statement is true) must flip its verdict at the quick budget."""

from __future__ import annotations

import pytest

from dpfair_analysis.verify.claims import CLAIMS, QUICK


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_check_flips_on_its_mutant(claim):
    assert claim.mutant is not None, f"{claim.id} has no mutant: nothing shows its check can fail"
    verdict = claim.check(QUICK)
    mutated = claim.mutant(QUICK)
    assert verdict.status in ("holds", "violated"), (claim.id, verdict)
    assert mutated.status in ("holds", "violated") and mutated.status != verdict.status, (claim.id, verdict, mutated)
