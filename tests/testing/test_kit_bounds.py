"""The kit's sound statistics: Clopper-Pearson limits cover, the pure-DP bound is the hand formula, the
one-training-run bound is Steinke et al.'s, the projection only ranks."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, logit
from scipy.stats import beta, binom

from dpfair_analysis.testing.bounds import (
    bound_at_threshold,
    choose_threshold,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    largest_certifiable_epsilon,
    one_run_epsilon_lower,
    one_run_p_value,
    projected_epsilon,
    threshold_test,
)


def test_pure_dp_bound_is_the_event_ratio_with_clopper_pearson_limits():
    # 20 of 1000 runs on D in the rejection region, 700 of 1000 on D' (300 false negatives), delta = 0
    fpr_u = beta.ppf(0.975, 21, 980)
    fnr_u = beta.ppf(0.975, 301, 700)
    expected = max(math.log((1 - fnr_u) / fpr_u), math.log((1 - fpr_u) / fnr_u))
    assert epsilon_lower_bound(20, 1000, 300, 1000, delta=0.0) == pytest.approx(expected, rel=1e-12)
    assert 3.0 < expected < 3.6  # log(0.67 / 0.03)
    # a delta > 0 can only lower it
    assert epsilon_lower_bound(20, 1000, 300, 1000, delta=0.01) < expected


@pytest.mark.parametrize("p", [0.001, 0.05, 0.5, 0.97])
def test_clopper_pearson_limits_cover_at_their_level(p):
    n, level, draws = 400, 0.9, 20_000
    k = np.random.default_rng(1).binomial(n, p, size=draws)
    upper = clopper_pearson_upper(k, n, level=level)
    lower = clopper_pearson_lower(k, n, level=level)
    se = math.sqrt(level * (1 - level) / draws)
    assert np.mean(p <= upper) >= level - 4 * se
    assert np.mean(p >= lower) >= level - 4 * se
    assert np.all(lower <= upper)


def test_largest_certifiable_epsilon_is_the_bound_without_errors():
    n = 20_000
    p_u = 1 - 0.025 ** (1 / n)  # (1 - p)^n = 0.025 at the upper limit of 0 events
    assert largest_certifiable_epsilon(n, delta=0.0) == pytest.approx(math.log((1 - p_u) / p_u), rel=1e-9)
    assert largest_certifiable_epsilon(n, delta=0.0) > largest_certifiable_epsilon(n // 10, delta=0.0)


def test_threshold_test_accepts_pure_dp_and_counts_only_fresh_runs():
    rng = np.random.default_rng(0)
    without, with_ = rng.laplace(0, 1, 4000), rng.laplace(1, 1, 4000)  # Laplace mechanism with epsilon 1
    test = threshold_test(without, with_, delta=0.0)
    assert 0.5 < test.epsilon_lower <= 1.0
    again = bound_at_threshold(without[2000:], with_[2000:], threshold=test.threshold, delta=0.0)
    assert again.epsilon_lower == test.epsilon_lower
    assert (again.false_positives, again.false_negatives) == (test.false_positives, test.false_negatives)


def test_projection_ranks_a_rare_strong_event_above_a_common_weak_one_only_with_many_evaluation_runs():
    # rare event: 40 of 2000 on D', 10 of 2000 on D (ratio 4); common: 1100 vs 900 (ratio 1.22)
    rare = {"false_positives": 10, "negatives": 2000, "false_negatives": 1960, "positives": 2000}
    common = {"false_positives": 900, "negatives": 2000, "false_negatives": 900, "positives": 2000}
    few = [projected_epsilon(**c, evaluation_trials=2000, delta=0.0) for c in (rare, common)]
    many = [projected_epsilon(**c, evaluation_trials=2_000_000, delta=0.0) for c in (rare, common)]
    assert many[0] > many[1] and many[0] > few[0]
    assert few[0] < 1.386  # never above the observed log 4


def test_choose_threshold_returns_a_threshold_between_the_samples():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=500), rng.normal(3, 1, size=500)
    t, selection = choose_threshold(a, b, delta=1e-5)
    assert a.min() <= t <= b.max() and selection > 1.0


@settings(max_examples=60, deadline=None)
@given(n0=st.integers(20, 400), n1=st.integers(20, 400), shift=st.floats(-3, 3), scale=st.floats(0.1, 10),
       c=st.sampled_from([0.01, 0.05, 0.2]), seed=st.integers(0, 2**16), ties=st.booleans(),
       projected=st.booleans())
def test_min_event_keeps_both_error_rates_at_least_c_or_offers_no_threshold(n0, n1, shift, scale, c, seed,
                                                                       ties, projected):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n0), rng.normal(shift, scale, size=n1)
    if ties:  # discrete outputs: many equal scores, where few thresholds exist
        a, b = np.round(a), np.round(b)
    t, criterion = choose_threshold(a, b, delta=0.0, min_event=c, evaluation_trials=10**6 if projected else None)
    fpr, fnr = np.mean(a > t), np.mean(b <= t)
    grid = np.unique(np.concatenate([a, b, np.nextafter(b, -np.inf)]))
    feasible = [(np.mean(a > s) >= c) and (np.mean(b <= s) >= c) for s in grid]
    if math.isnan(t):  # no event of probability >= c among the candidates: the rule offers no test
        assert criterion == -math.inf
    else:
        assert fpr >= c - 1e-12 and fnr >= c - 1e-12
    if not any(feasible):  # the candidates are among the grid's thresholds
        assert math.isnan(t)


def test_min_event_trades_a_rare_extreme_tail_for_a_common_event():
    # D': 0.3% of runs at an extreme score that D never reaches, else like D: without c the best test is that
    # tail (infinite ratio on these runs); with c = 1% it must pick a threshold whose events have >= 1% of runs
    rng = np.random.default_rng(0)
    a = rng.normal(size=20_000)
    b = np.concatenate([rng.normal(0.2, 1, size=19_940), np.full(60, 50.0)])
    free, _ = choose_threshold(a, b, delta=0.0)
    kept, _ = choose_threshold(a, b, delta=0.0, min_event=0.01)
    assert np.mean(a > free) < 0.01 <= np.mean(a > kept)
    assert np.mean(b <= kept) >= 0.01


def test_min_event_offers_no_threshold_for_a_statistic_with_only_rare_events():
    # two values, the rarer in 0.1% of runs on both sides (RAPPOR's "all bits 0"): no event of probability >= 1%
    a, b = np.zeros(10_000), np.zeros(10_000)
    a[:10], b[:40] = 1.0, 1.0
    assert choose_threshold(a, b, delta=0.0)[0] == 0.0  # without c: the rare event, ratio 4
    t, criterion = choose_threshold(a, b, delta=0.0, min_event=0.01)
    assert math.isnan(t) and criterion == -math.inf


@pytest.mark.parametrize("bad", [-0.1, 0.5, 2, "1%", math.nan])
def test_min_event_outside_zero_half_is_refused(bad):
    with pytest.raises(ValueError, match="min_event"):
        choose_threshold(np.arange(5.0), np.arange(5.0) + 1, delta=0.0, min_event=bad)


def test_one_run_p_value_is_the_binomial_tail_without_delta():
    for eps in (0.0, 0.5, 2.0):
        assert one_run_p_value(1000, 100, 70, epsilon=eps) == pytest.approx(binom.sf(69, 100, expit(eps)), rel=1e-10)
    with_delta = one_run_p_value(1000, 100, 70, epsilon=0.5, delta=1e-5)
    assert with_delta >= one_run_p_value(1000, 100, 70, epsilon=0.5)
    assert one_run_p_value(1000, 100, 70, epsilon=1.0) > one_run_p_value(1000, 100, 70, epsilon=0.5)


def test_one_run_bound_by_hand():
    # every one of 100 guesses right: refuted while p^100 < 0.05, p = e^eps / (1 + e^eps)
    expected = logit(0.05 ** (1 / 100))
    assert one_run_epsilon_lower(1000, 100, 100, confidence=0.95) == pytest.approx(expected, abs=1e-6)
    assert one_run_epsilon_lower(1000, 100, 50) == 0.0  # chance level refutes nothing
    assert one_run_epsilon_lower(1000, 100, 100, delta=1e-5) <= expected + 1e-9


@pytest.mark.parametrize("bad", [{"canaries": 10, "guesses": 20, "correct": 5}, {"canaries": 10, "guesses": 5, "correct": 6}])
def test_one_run_refuses_impossible_counts(bad):
    with pytest.raises(ValueError, match="correct"):
        one_run_p_value(**bad, epsilon=1.0)


@pytest.mark.parametrize("delta", [-0.1, 1.0, float("nan")])
def test_delta_outside_zero_one_is_refused(delta):
    with pytest.raises(ValueError, match="delta"):
        epsilon_lower_bound(1, 10, 1, 10, delta=delta)
