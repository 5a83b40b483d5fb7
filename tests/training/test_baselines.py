"""The Table 2 baselines of paper 003: CLF, Z (Zafar), A (reductions), M (Mozannar)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from sklearn.linear_model import LogisticRegression

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.constraints import make_constraint
from dpfair_analysis.training import baselines as B


def correlated(n: int = 1500, *, seed: int = 0, share: float = 0.35) -> GroupedDataset:
    """Group strongly tied to the label through feature 0 (so accuracy-only models are unfair)."""
    rng = np.random.default_rng(seed)
    group = (rng.random(n) < share).astype(np.int64)
    x0 = 1.5 * group + rng.normal(size=n)
    rest = rng.normal(size=(n, 3))
    logit = 1.5 * x0 + 2.0 * rest[:, 0] - 1.0
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    X = np.column_stack([x0, rest])
    return GroupedDataset(X=torch.tensor(X, dtype=torch.float32), y=torch.tensor(y), group=torch.tensor(group),
                          group_names=("g0", "g1"), label_names=("0", "1"), name="correlated")


@pytest.fixture(scope="module")
def data():
    return correlated()


@pytest.fixture(scope="module")
def unconstrained_dp(data):
    X = data.X.numpy().astype(np.float64)
    pred = LogisticRegression(max_iter=1000).fit(X, data.y.numpy()).predict(X)
    return B.evaluate_predictions(pred, data, make_constraint("dp", n_groups=2))


def test_evaluate_predictions_matches_hand_counts():
    data = GroupedDataset(X=torch.zeros(6, 1), y=torch.tensor([1, 0, 1, 0, 1, 1]), group=torch.tensor([0, 0, 0, 1, 1, 1]),
                          group_names=("a", "b"), label_names=("0", "1"))
    pred = np.array([1, 1, 0, 0, 0, 1])
    dp = B.evaluate_predictions(pred, data, make_constraint("dp", n_groups=2))
    assert dp["accuracy"] == pytest.approx(3 / 6)  # right at rows 0, 3, 5
    assert dp["violation"] == pytest.approx(abs(2 / 3 - 1 / 3))  # positive rates 2/3 vs 1/3
    ap = B.evaluate_predictions(pred, data, make_constraint("ap", n_groups=2))
    assert ap["violation"] == pytest.approx(2 / 3 - 1 / 3)  # errors: rows 1, 2 in a; row 4 in b
    eo = B.evaluate_predictions(pred, data, make_constraint("eo", n_groups=2))
    # y=1: group a {1,0} -> 1/2, group b {0,1} -> 1/2; y=0: group a {1} -> 1, group b {0} -> 0
    assert eo["violation"] == pytest.approx(1.0)


def test_unconstrained_logistic_regression_is_unfair_here(unconstrained_dp):
    assert unconstrained_dp["violation"] > 0.3


def test_reductions_cut_the_dp_violation(data, unconstrained_dp):
    result = B.fit_reductions(data, make_constraint("dp", n_groups=2), max_iter=30)
    assert result.metrics["train_violation"] < 0.5 * unconstrained_dp["violation"]
    assert result.metrics["train_violation"] < 0.08
    majority = max(float(data.y.double().mean()), 1 - float(data.y.double().mean()))
    assert result.metrics["train_accuracy"] > majority + 0.05  # not a constant classifier's trivial fairness


def test_zafar_cuts_the_dp_violation_and_meets_its_covariance_bound(data, unconstrained_dp):
    result = B.fit_zafar(data, make_constraint("dp", n_groups=2), covariance_fraction=0.1)
    assert result.info["success"]
    assert abs(result.info["covariance"][0]) <= result.info["threshold"][0] + 1e-6
    assert result.info["threshold"][0] == pytest.approx(0.1 * abs(result.info["covariance_unconstrained"][0]))
    assert result.metrics["train_violation"] < 0.5 * unconstrained_dp["violation"]


def test_zafar_without_constraint_slack_is_logistic_regression(data):
    """covariance_fraction large: the constraint is inactive, predictions equal sklearn's (almost) unpenalised LR."""
    result = B.fit_zafar(data, make_constraint("dp", n_groups=2), covariance_fraction=10.0, l2=0.0)
    X = data.X.numpy().astype(np.float64)
    sk = LogisticRegression(C=1e8, max_iter=5000).fit(X, data.y.numpy()).predict(X)
    assert (result.predict(data.X) == sk).mean() > 0.995


@pytest.mark.parametrize("kind", ["eo", "ap"])
def test_zafar_mistreatment_constraints_do_not_increase_the_violation(data, kind):
    constraint = make_constraint(kind, n_groups=2)
    free = B.fit_zafar(data, constraint, covariance_fraction=10.0)
    fair = B.fit_zafar(data, constraint, covariance_fraction=0.0)
    assert fair.metrics["train_violation"] <= free.metrics["train_violation"] + 0.01
    assert all(abs(v) <= 1e-4 for v in fair.info["covariance"]) or not fair.info["success"]


def test_clf_learns_the_task(data):
    result = B.fit_clf(data, make_constraint("dp", n_groups=2), epochs=3, batch_size=128, lr=0.1)
    assert result.metrics["train_accuracy"] > 0.75
    assert set(np.unique(result.predict(data.X))) <= {0, 1}


# ------------------------------------------------------------------ randomized response
def test_keep_probability_formula():
    assert B.keep_probability(1.0, 2) == pytest.approx(math.e / (math.e + 1))
    assert B.keep_probability(2.0, 5) == pytest.approx(math.exp(2) / (math.exp(2) + 4))
    assert B.keep_probability(math.inf, 3) == 1.0


@given(epsilon=st.floats(0.01, 10), k=st.integers(2, 8))
@settings(max_examples=50, deadline=None)
def test_randomized_response_likelihood_ratio_is_e_to_the_epsilon(epsilon, k):
    pi = B.keep_probability(epsilon, k)
    other = (1 - pi) / (k - 1)
    assert pi + (k - 1) * other == pytest.approx(1.0)
    assert math.log(pi / other) == pytest.approx(epsilon, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("k, epsilon", [(2, 1.0), (3, 0.5), (5, 2.0)])
def test_randomized_response_keeps_each_group_with_the_stated_probability(k, epsilon):
    n_per = 20_000
    group = np.repeat(np.arange(k), n_per)
    noisy = B.randomized_response(group, k, epsilon, seed=11)
    pi = B.keep_probability(epsilon, k)
    other = (1 - pi) / (k - 1)
    for a in range(k):
        reports = noisy[group == a]
        freq = np.bincount(reports, minlength=k) / n_per
        se_keep = math.sqrt(pi * (1 - pi) / n_per)
        assert abs(freq[a] - pi) < 5 * se_keep, (a, freq[a], pi)
        se_other = math.sqrt(other * (1 - other) / n_per)
        for b in range(k):
            if b != a:
                assert abs(freq[b] - other) < 5 * se_other, (a, b, freq[b], other)


def test_randomized_response_is_seeded():
    g = np.arange(100) % 2
    assert np.array_equal(B.randomized_response(g, 2, 1.0, seed=3), B.randomized_response(g, 2, 1.0, seed=3))
    assert not np.array_equal(B.randomized_response(g, 2, 1.0, seed=3), B.randomized_response(g, 2, 1.0, seed=4))


def test_estimated_group_rates_recover_the_truth():
    rng = np.random.default_rng(0)
    group = (rng.random(100_000) < 0.2).astype(np.int64)
    noisy = B.randomized_response(group, 2, 0.7, seed=1)
    p = B.estimate_group_rates(noisy, 2, 0.7)
    assert p[1] == pytest.approx(0.2, abs=0.01)  # raw noisy share is ~0.2*0.67+0.8*0.33 = 0.40


def test_noisy_gap_scale_matches_a_monte_carlo():
    """Z-group gap of a statistic = C x its A-group gap (the identity M's correction rests on)."""
    rng = np.random.default_rng(5)
    n, epsilon = 400_000, 0.8
    group = (rng.random(n) < 0.3).astype(np.int64)
    g = (rng.random(n) < np.where(group == 1, 0.7, 0.2)).astype(np.float64)
    noisy = B.randomized_response(group, 2, epsilon, seed=2)
    gap_true = g[group == 0].mean() - g[group == 1].mean()
    gap_noisy = g[noisy == 0].mean() - g[noisy == 1].mean()
    scale = B.noisy_gap_scale(np.array([0.7, 0.3]), epsilon)
    assert 0 < scale < 1
    assert gap_noisy == pytest.approx(scale * gap_true, abs=0.01)  # SE of the noisy gap ~ 0.0017


def test_corrected_bound_is_tighter_under_noise_and_exact_without():
    rng = np.random.default_rng(1)
    group = (rng.random(5000) < 0.3).astype(np.int64)
    y = rng.integers(0, 2, 5000)
    d_noise, _ = B.corrected_difference_bound(0.02, B.randomized_response(group, 2, 1.0, seed=0), y, "dp", 1.0)
    d_inf, detail = B.corrected_difference_bound(0.02, group, y, "eo", math.inf)
    assert d_noise < 0.02 * 0.6
    assert d_inf == pytest.approx(0.02)
    assert detail["scale[0]"] == pytest.approx(1.0) and detail["scale[1]"] == pytest.approx(1.0)


@pytest.mark.parametrize("kind", ["dp", "eo"])
def test_mozannar_reduces_to_reductions_as_epsilon_grows(data, kind):
    constraint = make_constraint(kind, n_groups=2)
    a = B.fit_reductions(data, constraint, max_iter=6, seed=2)
    for epsilon in (math.inf, 60.0):
        m = B.fit_mozannar(data, constraint, epsilon=epsilon, max_iter=6, seed=2)
        assert m.info["flipped_fraction"] == 0.0
        assert m.info["difference_bound"] == pytest.approx(a.info["difference_bound"])
        assert np.array_equal(m.predict(data.X), a.predict(data.X))
        assert m.metrics == pytest.approx(a.metrics)


def test_mozannar_at_small_epsilon_flips_and_tightens(data):
    m = B.fit_mozannar(data, make_constraint("dp", n_groups=2), epsilon=1.0, max_iter=10)
    assert abs(m.info["flipped_fraction"] - (1 - B.keep_probability(1.0, 2))) < 0.05
    assert m.info["difference_bound"] < m.info["requested_bound"]


# ------------------------------------------------------------------ errors
def test_bad_arguments_name_themselves(data):
    dp = make_constraint("dp", n_groups=2)
    with pytest.raises(ValueError, match="epsilon"):
        B.fit_mozannar(data, dp, epsilon=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        B.keep_probability(-1.0, 2)
    with pytest.raises(ValueError, match="n_groups"):
        B.keep_probability(1.0, 1)
    with pytest.raises(ValueError, match="method"):
        B.fit_baseline("zz", data, dp)
    with pytest.raises(TypeError, match="constraint"):
        B.fit_reductions(data, "dp")
    with pytest.raises(ValueError, match="groups"):
        B.fit_reductions(data, make_constraint("dp", n_groups=3))
    three = GroupedDataset(X=data.X, y=data.y, group=data.group, group_names=("a", "b", "c"), label_names=("0", "1"))
    with pytest.raises(ValueError, match="2 groups"):
        B.fit_zafar(three, make_constraint("dp", n_groups=3))
    with pytest.raises(ValueError, match="correction"):
        B.fit_mozannar(three, make_constraint("dp", n_groups=3), epsilon=1.0)
    with pytest.raises(ValueError, match="covariance_fraction"):
        B.fit_zafar(data, dp, covariance_fraction=-0.1)
