"""audit_step: the white-box canary scores are the exact likelihood ratios, the claim is dp_accounting's, a
correct DP-SGD is consistent, its under-noised twin is caught, and the one-run mode bounds epsilon from one run."""

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from scipy.stats import norm

from dpfair_analysis.privacy.accounting import AccountingSpec, epsilon_from_event
from dpfair_analysis.testing import (
    audit_step,
    claimed_epsilon,
    gaussian_mixture_llr,
    poisson_gaussian_llr,
    shuffle_gaussian_llr,
)
from dpfair_analysis.testing.auditing import Budget
from dpfair_analysis.testing.steps import step_exponents

Q, STEPS, SIGMA, CLIP, LR = 0.2, 10, 2.0, 1.0, 0.1
SMALL = Budget("test", screen=300, select=1_000, evaluate=2_000, top=2, max_pairs=2, batch_factors=(1, 1, 1))


def dpsgd(data, rng, *, noise_scale=1.0, sigma=SIGMA, q=Q, steps=STEPS):
    """DP-SGD on the linear loss -<theta, x>: each record's gradient is x, clipped to CLIP; Poisson sampling."""
    X = np.asarray(data, dtype=float)
    norms = np.maximum(np.linalg.norm(X, axis=1) / CLIP, 1.0)
    clipped = X / norms[:, None]
    theta = np.zeros(X.shape[1])
    trajectory = [theta.copy()]
    for _ in range(steps):
        sampled = rng.random(len(X)) < q
        noisy = clipped[sampled].sum(axis=0) + rng.normal(scale=noise_scale * sigma * CLIP, size=X.shape[1])
        theta = theta - LR * noisy
        trajectory.append(theta.copy())
    return np.array(trajectory)


BASE = np.c_[np.zeros(20), np.random.default_rng(0).normal(size=(20, 2))]  # feature 0 is the canary's own
CANARY = np.array([10.0, 0.0, 0.0])


def observe(trajectory):
    """The canary coordinate's updates in units of the noisy sum, scored by the exact Poisson-mixture LLR."""
    z = -np.diff(trajectory[:, 0]) / LR
    return poisson_gaussian_llr(z, np.full(len(z), CLIP), np.full(len(z), SIGMA * CLIP), sampling_rate=Q)


def test_poisson_llr_is_the_log_ratio_of_the_two_densities():
    z, u, s, q = np.array([0.3, -1.2, 2.5]), np.array([1.0, 0.5, 1.0]), np.array([1.0, 2.0, 0.7]), 0.3
    with_canary = np.log((1 - q) * norm.pdf(z, 0, s) + q * norm.pdf(z, u, s)).sum()
    without = np.log(norm.pdf(z, 0, s)).sum()
    assert poisson_gaussian_llr(z, u, s, sampling_rate=q) == pytest.approx(with_canary - without, rel=1e-12)
    assert np.isnan(step_exponents([1.0], [1.0], [0.0])[0])  # no noise: skipped


def test_shuffle_llr_is_the_mixture_over_the_epoch():
    z, u, s = np.array([0.3, 1.1, -0.4, 0.9]), np.ones(4), np.ones(4)
    e = (z * u - u * u / 2) / s ** 2
    expected = np.log(np.exp(e[:2]).mean()) + np.log(np.exp(e[2:]).mean())
    assert shuffle_gaussian_llr(z, u, s, steps_per_epoch=2) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        shuffle_gaussian_llr(z, u, s, steps_per_epoch=3)


def test_mixture_llr_matches_the_densities():
    o, s, w = np.array([0.4, -0.2]), 0.8, np.log([0.25, 0.75])
    means_a, means_b = [np.zeros(2), np.ones(2)], [np.array([1.0, 0]), np.array([0, 2.0])]

    def density(means):
        return sum(math.exp(wi) * norm.pdf(o, m, s).prod() for wi, m in zip(w, means))
    assert gaussian_mixture_llr(o, means_a, means_b, w, s) == pytest.approx(math.log(density(means_b) /
                                                                                    density(means_a)), rel=1e-10)


def test_claims_come_from_dp_accounting():
    poisson = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA)), STEPS)
    expected = epsilon_from_event(poisson, 1e-5, accounting=AccountingSpec(accountant="pld"))
    got, source = claimed_epsilon(delta=1e-5, noise_multiplier=SIGMA, sampling_rate=Q, steps=STEPS)
    assert got == pytest.approx(expected) and "pld" in source
    shuffled, _ = claimed_epsilon(delta=1e-5, noise_multiplier=SIGMA, sampling="shuffle", steps=20, rows=100,
                                  batch_size=10)  # 2 epochs, no amplification claimed
    two = epsilon_from_event(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(SIGMA), 2), 1e-5,
                             accounting=AccountingSpec(accountant="pld"))
    assert shuffled == pytest.approx(two)
    with pytest.raises(ValueError, match="exactly one"):
        claimed_epsilon(delta=1e-5, epsilon=1.0, noise_multiplier=1.0)


def test_correct_dpsgd_is_consistent_and_its_under_noised_twin_is_caught():
    result = audit_step(dpsgd, data=BASE, canary=CANARY, delta=1e-5, noise_multiplier=SIGMA, sampling_rate=Q,
                        steps=STEPS, observe=observe, budget=SMALL, twin=0.2, seed=1)
    assert result.consistent and result.epsilon_lower < result.epsilon_claimed
    assert result.power["twin_caught"] and result.power["twin_epsilon_lower"] > 2
    assert "white box" in result.witness["score"] and "pld" in result.witness["claim"]


def test_black_box_projection_on_the_canary_direction():
    result = audit_step(dpsgd, data=BASE, canary=CANARY, delta=1e-5, noise_multiplier=SIGMA, sampling_rate=Q,
                        steps=STEPS, canary_direction=[1.0, 0, 0], budget=SMALL, twin=0.1, seed=1)
    assert result.consistent and result.power["twin_caught"]


def test_one_run_audit_catches_a_training_without_noise_and_passes_a_noisy_one():
    m = 200
    canaries = [np.r_[np.zeros(3 + i), 10.0, np.zeros(m - 1 - i)] for i in range(m)]  # each its own feature
    data = np.zeros((20, 3 + m))
    directions = np.eye(3 + m)[3:]
    noiseless = audit_step(lambda d, rng: dpsgd(d, rng, sigma=1e-3, q=1.0, steps=1), data=data, canary=None,
                           delta=1e-5, epsilon=1.0, mode="one-run", canaries=canaries, canary_direction=directions,
                           seed=0)
    assert not noiseless.consistent and noiseless.trials == 1 and noiseless.epsilon_lower > 3
    assert noiseless.witness["correct"] >= noiseless.witness["guesses"] - 2
    noisy = audit_step(lambda d, rng: dpsgd(d, rng, sigma=5.0, q=1.0, steps=1), data=data, canary=None,
                       delta=1e-5, noise_multiplier=5.0, sampling_rate=1.0, steps=1, mode="one-run",
                       canaries=canaries, canary_direction=directions, seed=0)
    assert noisy.consistent
    # a consistent one-run result carries its power: the bound if every guess were right
    power = noisy.summary()["power"]
    assert power["largest_certifiable_epsilon"] >= noiseless.epsilon_lower
    assert power["can_refute_claim"] is (power["largest_certifiable_epsilon"] > noisy.epsilon_claimed)
    assert noisy.certifiable_epsilon == power["largest_certifiable_epsilon"]
    assert (noisy.verdict == "no power") is (not power["can_refute_claim"] or noisy.epsilon_lower == 0)
    # a claim no run of 200 canaries could refute: "no power", never a plain pass (fails before one_run_no_power)
    beyond = audit_step(lambda d, rng: dpsgd(d, rng, sigma=5.0, q=1.0, steps=1), data=data, canary=None,
                        delta=1e-5, epsilon=50.0, mode="one-run", canaries=canaries, canary_direction=directions,
                        seed=0)
    assert beyond.verdict == "no power" and "at or above the largest epsilon" in beyond.no_power


def test_audit_step_refuses_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        audit_step(dpsgd, data=BASE, canary=CANARY, delta=1e-5, epsilon=1.0, mode="twice")
    with pytest.raises(ValueError, match="relation"):
        audit_step(dpsgd, data=BASE, canary=CANARY, delta=1e-5, epsilon=1.0, relation="queries")
    with pytest.raises(ValueError, match="canaries"):
        audit_step(dpsgd, data=BASE, canary=CANARY, delta=1e-5, epsilon=1.0, mode="one-run", canaries=[CANARY])
