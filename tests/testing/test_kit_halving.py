"""Successive halving over the candidate pairs: runs go where a refutation is forecast (issue 48.1)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dpfair_analysis.testing import audit
from dpfair_analysis.testing.auditing import FULL, QUICK, Budget, _Choice, _kept_pairs, _successive_halving
from dpfair_analysis.testing.relations import AddRemove, QueryVector
from dpfair_analysis.testing.scores import Projection
from dpfair_analysis.testing.zoo import catalogue

#: Up to eight pairs, 400 runs each in the first round, doubled for the better half each round.
HALVING = Budget("halving", screen=400, select=1_000, evaluate=20_000, top=2, max_pairs=8, halving=400)


def _recorded(strength: dict[int, float]):
    """A ``sample`` that logs (pair, runs) and a ``score`` whose best test forecasts ``strength[pair]``."""
    calls: list[tuple[int, int]] = []

    def sample(i, n, seed):
        calls.append((i, n))
        return np.zeros((n, 1)), np.zeros((n, 1))

    def score(i, out0, out1):
        fitted = Projection(0, 1.0).fit(None, None, None)
        return [_Choice(i, Projection(0, 1.0), fitted, 0.0, strength.get(i, 0.0), held=(len(out0), 0, 0, 0))]

    return calls, sample, score


def test_halving_doubles_the_runs_of_the_better_half_each_round_and_ties_keep_the_order():
    calls, sample, score = _recorded({5: 0.3, 6: 0.2, 3: 0.1})
    tests = _successive_halving(sample, score, 8, first=100, seeds=np.random.SeedSequence(0))
    rounds = [[i for i, n in calls if n == 100 * 2**r] for r in range(4)]
    assert rounds == [list(range(8)), [5, 6, 3, 0], [5, 6], [5]]  # no forecast: candidates' order
    assert len(calls) == 8 + 4 + 2 + 1
    assert tests[0].index == 5 and tests[0].held[0] == 100 + 200 + 400 + 800  # scored on all its runs


def test_halving_over_one_pair_or_an_odd_number_ends_with_one_pair():
    for pairs, rounds in ((1, 1), (3, 3), (5, 4)):
        calls, sample, score = _recorded({pairs - 1: 1.0})
        tests = _successive_halving(sample, score, pairs, first=10, seeds=np.random.SeedSequence(1))
        assert tests[0].index == pairs - 1 and len({n for _, n in calls}) == rounds


def test_halving_is_for_plain_functions_and_off_in_the_full_budget():
    assert FULL.halving == 0  # measured: no refutation gained, SVT1 left with no power (docs/benchmarks.md)
    assert HALVING.scaled(batched=True).halving == 0 and HALVING.scaled(batched=False).halving == 400


def leaky_count(queries, rng):
    """A noisy count that releases the exact count on 4% of its runs: a rare event with no noise at all."""
    total = float(np.sum(queries))
    return np.array([total if rng.random() < 0.04 else total + rng.laplace(scale=10.0)])


def test_halving_catches_a_rare_leak_of_a_plain_function_at_a_small_budget():
    result = audit(leaky_count, 0.1, relation="queries", data=np.ones(3), budget=HALVING, seed=0)
    assert not result.consistent and result.no_power is None
    assert result.candidates == 7  # 7 x 400, 4 x 800, 2 x 1,600, 1 x 3,200 runs per side, then the evaluation
    assert result.trials == 2 * (2_800 + 3 * 3_200 + 20_000)


def test_halving_raises_no_false_alarm_on_the_correct_twin():
    def correct(queries, rng):
        return np.array([float(np.sum(queries)) + rng.laplace(scale=10.0)])

    result = audit(correct, 0.1, relation="queries", data=np.ones(3), budget=HALVING, seed=0)
    assert result.consistent


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="unfinished (issue 48.1): with halving, seed 0 measured 0.049 (SVT3) and 0.095 (SVT4)")
@pytest.mark.parametrize("name", ["svt3", "svt4"])
def test_full_budget_refutes_plain_svt3_and_svt4_by_searching_the_pairs(name):
    """Lyu et al.'s incorrect Alg. 3 and Alg. 4 as the benchmark's plain part audits them (one output per call,
    claimed 0.1, the pair search over 32 candidates, no witness given) at the full budget, seed 0.

    Before successive halving each candidate had 10,000 screening runs: both consistent (0.018 and 0.089). With
    it, still consistent: 0.049 (SVT3, the halving kept pair 5, [2]*10; its best test forecast a bound below
    the claim, so 250,000 evaluation runs) and 0.095 (SVT4, pair 11, a random one; 1,000,000 runs). The early
    rounds (5,000-35,000 runs per pair) rank nothing of a sparse vector above noise: random pairs whose noise
    gives a positive pessimistic forecast displace StatDP's patterns (pairs 4 and 7), where the published
    testers find 0.17-0.18. The full budget ships without the halving (the same misses before it: 0.018, 0.089
    with ``workers=1``); this test audits with it."""
    z = catalogue()[name]
    with_halving = replace(FULL, halving=5_000)
    result = audit(z.single(), z.epsilon, z.delta, relation=z.relation, data=z.data, budget=with_halving, seed=0,
                   time_budget=3_600, name=name)
    assert not result.consistent, result.witness


def test_the_full_budget_selects_the_relations_patterns_whatever_their_screen():
    """``keep_patterns``: StatDP's eight patterns are the first candidates of a 10-query vector, and a plain
    function's full audit selects them however weak their screen, beside the best top // 2 = 4 of the others
    (plain SVT3, seed 7, screened the two that refute it 14th and 18th of 32, kept neither and passed at 0.058);
    a pair with no test is not kept; without the knob, for a batched mechanism or a relation without patterns, the
    best ``top`` by the screen."""
    relation, base = QueryVector(), np.ones(10)
    assert relation.fixed_patterns(base) == 8 and QueryVector(mode="one").fixed_patterns(base) == 2
    assert AddRemove().fixed_patterns(np.linspace(-1, 1, 8)) == 0
    candidates = relation.candidates(base, rng=np.random.default_rng(7), limit=32)
    for (d, d_), (a, b) in zip(candidates, relation.patterns(10)):
        assert np.array_equal(d, base + a) and np.array_equal(d_, base + b)
    fitted = Projection(0, 1.0).fit(None, None, None)
    screened = {i: [_Choice(i, Projection(0, 1.0), fitted, 0.0, 0.01 if i < 8 else 0.02 + i / 1000)]
                for i in range(32)}
    screened[3] = []  # no non-degenerate test

    def kept(plan, patterns=8):
        return [tests[0].index for tests in _kept_pairs(screened, plan, patterns)]

    plain = FULL.scaled(False)
    assert plain.keep_patterns and not FULL.scaled(True).keep_patterns and not QUICK.scaled(False).keep_patterns
    assert kept(plain) == [0, 1, 2, 4, 5, 6, 7, 31, 30, 29, 28]
    assert kept(replace(plain, keep_patterns=False)) == kept(plain, patterns=0) == list(range(31, 23, -1))


def test_the_full_budget_gives_a_plain_function_ten_times_the_screen_and_the_selection_on_eight_pairs():
    """A plain function's full audit: 100,000 screening runs per side for each of 32 pairs, 500,000 selection runs
    for each of the 8 kept, 250,000 (4,000,000 escalated) evaluation runs of the winner and 3 more tests of its pair
    (Bonferroni); a batched mechanism keeps its own factors, its 4 pairs, one size and one test."""
    plain, batched = FULL.scaled(False), FULL.scaled(True)
    assert (plain.screen, plain.select, plain.top, plain.evaluate, plain.escalate) == (100_000, 500_000, 8, 250_000, 16)
    assert plain.sizes == (250_000, 4_000_000) and plain.evaluated_tests == 4
    assert (batched.screen, batched.select, batched.top, batched.evaluate) == (100_000, 1_000_000, 4, 10_000_000)
    assert batched.sizes == (10_000_000,) and batched.evaluated_tests == 1
    assert plain.min_event == 0.01 and batched.min_event == 0.0  # DP-Sniper's second threshold: plain functions only
    assert plain.scaled(False) == plain  # scaling is done once
    assert QUICK.scaled(False).screen == QUICK.screen  # the quick budget keeps a plain function under a minute


@pytest.mark.slow
@pytest.mark.parametrize(("name", "seed", "bound"), [("svt3", 7, 0.1653), ("svt4", 4, 0.1617)])
def test_full_budget_refutes_plain_svt3_and_svt4_searching_the_pairs_without_halving(name, seed, bound):
    """The shipped full budget on Lyu et al.'s incorrect Alg. 3 and Alg. 4 as plain functions (claimed 0.1; SVT4's
    true epsilon 0.175, SVT3's infinite; 32 candidate pairs searched, no witness given): refuted, with 4,000,000
    evaluation runs per side and a family of 4 tests. Before StatDP's patterns were always selected
    (``Budget.keep_patterns``, 12-07), SVT3 seed 7 was missed (0.0577: the screen ranked the two refuting patterns
    14th and 18th and kept neither) and SVT4 seed 4 caught by a hair (0.1165, on a random sign pair). Before the
    confirmation, the two sizes and the family (12-07), SVT4 seed 2 was missed (0.0988, one test for 1,000,000
    runs) and SVT3 seed 0 was caught by a hair (0.104, on 250,000 runs); with the escalation alone (16x) SVT3 seed 0 was missed (0.063: the winner's forecast
    of 0.126 was its luck among dozens, and the confirmation on fresh runs puts it at 0.031). Before the plain
    selection grew (10,000 screening and 50,000 selection runs): 0.018 and 0.089 on seed 0. ~4 CPU-min each."""
    z = catalogue()[name]
    result = audit(z.single(), z.epsilon, z.delta, relation=z.relation, data=z.data, budget="full", seed=seed,
                   workers=1, time_budget=3_600, name=name)
    assert not result.consistent and result.epsilon_lower == pytest.approx(bound, abs=1e-4), result.witness
