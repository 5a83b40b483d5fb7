"""Paper 003's Lemma 1 with Eq. (10) as printed: the un-noised public part on the private
batch reveals who was sampled, so the subsampled accounting is false (issue 10)."""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.stats import norm

from dpfair_analysis.verify.claims import QUICK, get_claim
from dpfair_analysis.verify.claims.p003_pfld_privacy import lemma1_shared_batch


def _gaussian_delta(eps: float, mu: float) -> float:
    """Hockey-stick divergence of N(0,1) vs N(mu,1) (Balle & Wang 2018)."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_registered_claim_is_violated_with_the_revealed_inclusion_counterexample():
    verdict = get_claim("003.lemma1.shared-batch").check(QUICK)
    assert verdict.status == "violated" and verdict.ratio > 100
    case = verdict.counterexample
    q, sigma = case["q"], case["sigma_p"]
    # with inclusion revealed only delta is amplified: q * delta_Gauss(eps) = delta; replace-one moves the
    # group part by 2 Delta_p against noise sigma Delta_p, a Gaussian with mu = 2 / sigma
    revealed = brentq(lambda e: q * _gaussian_delta(e, 2 / sigma) - case["delta"], 0, 60)
    assert abs(case["epsilon_with_inclusion_revealed"] - revealed) < 1e-3
    assert case["epsilon_reported"] < 0.25 and revealed > 7


def test_issue_numbers_one_step_q001():
    """The review's one-step case: q = 0.01, sigma_p = 1 reports 0.209 but is no better than 7.58."""
    revealed = brentq(lambda e: 0.01 * _gaussian_delta(e, 2.0) - 1e-5, 0, 60)
    assert abs(revealed - 7.581) < 1e-3


def test_the_check_holds_without_subsampling():
    """Mutation: at q = 1 nothing is hidden by sampling, the revealed and claimed RDP coincide."""
    assert lemma1_shared_batch(grid=((1.0, 1.0), (1.0, 2.0)))(QUICK).status == "holds"
