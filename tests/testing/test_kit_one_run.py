"""The one-run audit: both analyses cover a Monte Carlo of the guessing game at a known privacy level, a correct
mechanism is never refuted over 20 seeds, an under-noised group is, and the results carry their power."""

import math

import numpy as np
import pytest
from scipy.special import expit

from dpfair_analysis.testing.bounds import one_run_p_value
from dpfair_analysis.testing.one_run import (
    audit_groups,
    count_correct,
    fdp_p_value,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    guess_grid,
    one_run_bounds,
    one_run_mu_lower,
    summary,
)

DELTA = 1e-5


def guessing_game(draws: int, canaries: int, k_plus: int, k_minus: int, *, seed: int, output) -> np.ndarray:
    """W, the right guesses, in ``draws`` plays: canaries in with probability 1/2, ``output(S, rng)`` the
    mechanism's per-canary scores, the top k+ guessed in and the bottom k- out."""
    rng = np.random.default_rng(seed)
    S = rng.random((draws, canaries)) < 0.5
    order = np.argsort(-output(S, rng), axis=1, kind="stable")
    right = np.take_along_axis(S, order[:, :k_plus], axis=1).sum(axis=1)
    if k_minus:
        right += (~np.take_along_axis(S, order[:, canaries - k_minus:], axis=1)).sum(axis=1)
    return right


def gaussian(mu: float):
    """Each canary's score ~ N(mu 1[in], 1): exactly mu-GDP with respect to each canary."""
    return lambda S, rng: S * mu + rng.normal(size=S.shape)


def randomized_response(epsilon: float, delta: float = 0.0):
    """Each canary's score is its membership, flipped with probability 1 / (1 + e^epsilon), and told outright
    with probability delta: (epsilon, delta)-DP with respect to each canary (ties broken at random)."""
    def output(S, rng):
        honest = rng.random(S.shape) < expit(epsilon)
        told = rng.random(S.shape) < delta
        reported = np.where(told | honest, S, ~S)
        return reported + 1e-3 * rng.random(S.shape) + 2.0 * (told & S)
    return output


def _tail(right: np.ndarray, v: int) -> float:
    return float((right >= v).mean())


@pytest.mark.parametrize("mu, canaries, k_plus, k_minus", [(1.5, 200, 10, 10), (0.5, 300, 30, 30),
                                                            (3.0, 100, 10, 0)])
def test_fdp_p_value_covers_the_gaussian_guessing_game(mu, canaries, k_plus, k_minus):
    right = guessing_game(4000, canaries, k_plus, k_minus, seed=1, output=gaussian(mu))
    k = k_plus + k_minus
    for v in range(int(np.median(right)), k + 1):
        tail = _tail(right, v)
        slack = 3 * math.sqrt(max(tail * (1 - tail), 1e-4) / len(right))
        assert tail <= fdp_p_value(canaries, k, v, mu=mu) + slack, v
    # not vacuous: where the game's tail is about 2%, the bound is within a factor of ten of it
    v = int(np.quantile(right, 0.98))
    if v < k:
        assert fdp_p_value(canaries, k, v + 1, mu=mu) < 0.2


@pytest.mark.parametrize("epsilon, delta", [(1.0, 0.0), (2.0, 0.0), (1.0, 0.01)])
def test_steinke_p_value_covers_the_randomized_response_game(epsilon, delta):
    m, k = 200, 20
    right = guessing_game(4000, m, k, 0, seed=2, output=randomized_response(epsilon, delta))
    for v in range(int(np.median(right)), k + 1):
        tail = _tail(right, v)
        slack = 3 * math.sqrt(max(tail * (1 - tail), 1e-4) / len(right))
        assert tail <= one_run_p_value(m, k, v, epsilon=epsilon, delta=delta) + slack, v
    if delta == 0:  # randomized response is the worst case: the bound is the game's binomial tail
        v = int(np.quantile(right, 0.9))
        assert one_run_p_value(m, k, v, epsilon=epsilon) == pytest.approx(_tail(right, v), abs=0.03)


def test_gaussian_dp_conversions_agree_with_dp_accounting():
    from dp_accounting import get_sigma_gaussian

    for epsilon in (1.0, 2.0, 4.0):
        mu = gdp_mu(epsilon, DELTA)
        assert mu == pytest.approx(1 / get_sigma_gaussian(epsilon, DELTA), rel=1e-3)
        assert gdp_epsilon(mu, DELTA) == pytest.approx(epsilon, rel=1e-8)
        assert gdp_delta(epsilon, mu) == pytest.approx(DELTA, rel=1e-6)
    assert gdp_epsilon(0.0, DELTA) == 0.0


def test_mu_lower_is_monotone_and_zero_at_chance():
    assert one_run_mu_lower(1000, 100, 50) == 0.0
    bounds = [one_run_mu_lower(1000, 100, v) for v in (70, 80, 90, 100)]
    assert bounds == sorted(bounds) and bounds[0] > 0


def _gaussian_groups(mus: dict[str, float], per_group: int, seed: int):
    rng = np.random.default_rng(seed)
    scores, included, groups = [], [], []
    for name, mu in mus.items():
        truth = rng.random(per_group) < 0.5
        scores.append(truth * mu + rng.normal(size=per_group))
        included.append(truth)
        groups += [name] * per_group
    return np.concatenate(scores), np.concatenate(included), np.array(groups)


def _never_refuted(mu: float, seeds: int, per_group: int) -> list[str]:
    epsilon = gdp_epsilon(mu, DELTA)
    refuted = []
    for seed in range(seeds):
        scores, included, groups = _gaussian_groups({"a": mu, "b": mu}, per_group, seed)
        for audit in audit_groups(scores, included, groups, epsilon_accounted=epsilon, delta=DELTA):
            if audit.exceeds_accounted or audit.exceeds_gaussian_hypothesis:
                refuted.append(f"seed {seed} group {audit.group}: {audit.row()}")
    return refuted


def test_a_correct_mechanism_is_never_refuted_on_20_seeds():
    # mu = 1 claims (4.38, 1e-5) and mu-GDP; the f-DP bound is the tight one here (Gaussian curve)
    assert _never_refuted(1.0, seeds=20, per_group=500) == []


@pytest.mark.slow
@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_a_correct_mechanism_is_never_refuted_on_20_seeds_with_1000_canaries_per_group(mu):
    assert _never_refuted(mu, seeds=20, per_group=1000) == []


def test_an_under_noised_group_is_refuted_and_the_other_is_not():
    claimed = 0.5
    scores, included, groups = _gaussian_groups({"correct": claimed, "twin": 4 * claimed}, 500, seed=3)
    audits = {a.group: a for a in audit_groups(scores, included, groups,
                                               epsilon_accounted=gdp_epsilon(claimed, DELTA), delta=DELTA)}
    assert audits["twin"].exceeds_accounted and audits["twin"].exceeds_gaussian_hypothesis
    assert not audits["correct"].exceeds_accounted and not audits["correct"].exceeds_gaussian_hypothesis
    assert "BUG: twin" in summary(list(audits.values()))
    # the power is reported: the claim was within what the run could refute
    bound = audits["twin"].bound
    assert bound.largest_certifiable_epsilon > audits["twin"].epsilon_accounted
    assert bound.family_size == 2 * len(guess_grid(500)) and bound.test_level == 1 - 0.05 / bound.family_size


def test_the_f_dp_analysis_is_at_least_as_tight_on_a_gaussian_mechanism():
    scores, included, _ = _gaussian_groups({"a": 1.0}, 1000, seed=4)
    bound = one_run_bounds(scores, included, delta=DELTA)
    assert bound.mu_epsilon_lower >= bound.epsilon_lower > 0


def test_guesses_count_both_ends():
    scores = np.arange(10.0)
    included = np.array([0, 0, 1, 0, 0, 0, 1, 1, 1, 1], bool)
    assert count_correct(scores, included, 4, 0) == 4
    assert count_correct(scores, included, 2, 3) == 2 + 2


@pytest.mark.parametrize("bad, match", [
    ({"scores": np.zeros(5), "included": np.zeros(5, bool)}, "at least 10"),
    ({"scores": np.zeros(20), "included": np.zeros(19, bool)}, "one entry per canary"),
    ({"scores": np.zeros(20), "included": np.zeros(20, bool), "family": 0}, "family"),
])
def test_bad_input_names_the_argument(bad, match):
    with pytest.raises(ValueError, match=match):
        one_run_bounds(delta=DELTA, **bad)


def test_a_claim_beyond_what_the_canaries_can_certify_has_no_power():
    """Fails before one_run_no_power: 20 canaries per group can certify at most 1.09 at 95%, so a claim of 5 could
    not be refuted by any run, and the result said only 'consistent'."""
    scores, included, groups = _gaussian_groups({"a": 1.0, "b": 1.0}, 20, seed=0)
    for audit in audit_groups(scores, included, groups, epsilon_accounted=5.0, delta=DELTA):
        assert audit.bound.largest_certifiable_epsilon < 5.0
        assert audit.verdict == "no power" and "at or above the largest epsilon" in audit.no_power
        assert audit.row()["verdict"] == "no power"
    assert "NO POWER: a:" in summary(audit_groups(scores, included, groups, epsilon_accounted=5.0, delta=DELTA))
    # within reach and separated: a verdict with power
    scores, included, groups = _gaussian_groups({"a": 1.0}, 500, seed=0)
    (audit,) = audit_groups(scores, included, groups, epsilon_accounted=gdp_epsilon(1.0, DELTA), delta=DELTA)
    assert audit.verdict == "consistent" and audit.no_power is None
