"""Power on plain functions: no degenerate test, and a result that says when it has no power (issue 48.1)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpfair_analysis.testing import audit
from dpfair_analysis.testing.auditing import Budget
from dpfair_analysis.testing.bounds import choose_threshold, largest_certifiable_epsilon

TINY = Budget("tiny", screen=300, select=1_500, evaluate=2_000, top=2, max_pairs=4)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(20, 300), p0=st.floats(0, 1), p1=st.floats(0, 1), m=st.integers(1, 8),
       seed=st.integers(0, 2**16), projected=st.booleans())
# found by CI's random search: every D score 1 and every D' score 0 (only the reversed event separates)
@example(n=20, p0=1.0, p1=0.0, m=1, seed=0, projected=False)
def test_choose_threshold_with_min_count_never_returns_a_degenerate_event(n, p0, p1, m, seed, projected):
    # two-valued scores (an SVT answer): the only events are "all", "the ones" and "none"
    rng = np.random.default_rng(seed)
    a, b = (rng.random(n) < p0).astype(float), (rng.random(n) < p1).astype(float)
    t, criterion = choose_threshold(a, b, delta=0.0, min_count=m, evaluation_trials=10**5 if projected else None)
    if np.isnan(t):
        assert criterion == -np.inf
        ones = int(a.sum() + b.sum())
        reversed_only = b.max() <= a.min()  # "score > t" bounds nothing; the reversed statistic's event would
        assert ones < m or 2 * n - ones < m or reversed_only  # no cut leaves m runs on both of its sides
    else:
        above = int(np.count_nonzero(a > t) + np.count_nonzero(b > t))
        assert m <= above <= 2 * n - m


def test_min_count_is_checked():
    with pytest.raises(ValueError, match="min_count"):
        choose_threshold(np.arange(5.0), np.arange(5.0), delta=0.0, min_count=-1)


def coin(data, rng):
    """Ignores its data: every test has ratio 1, so no test has power and the audit must say so."""
    return np.array([float(rng.random() < 0.5), float(rng.random() < 0.5)])


def test_an_audit_without_power_says_so_instead_of_choosing_an_event_every_run_satisfies():
    result = audit(coin, 0.1, relation="queries", pairs=(np.zeros(2), np.ones(2)), budget=TINY, seed=1)
    w = result.witness
    assert 0 < w["false_positives"] < result.evaluation_trials  # not "output[0] > -4.9e-324"
    assert 0 < w["false_negatives"] < result.evaluation_trials
    assert result.consistent and result.no_power and "no test has power" in result.no_power
    assert result.certifiable_epsilon == pytest.approx(largest_certifiable_epsilon(2_000, delta=0.0))
    assert {"certifiable_epsilon", "no_power"} <= set(result.summary())


def test_a_constant_output_has_no_test_and_no_power():
    result = audit(lambda data, rng: np.zeros(3) + 0 * rng.random(), 0.1, relation="queries",
                   pairs=(np.zeros(2), np.ones(2)), budget=TINY)
    assert result.evaluation_trials == 0 and result.certifiable_epsilon == 0.0
    assert result.no_power.startswith("no test")


def test_a_claim_above_what_the_runs_can_certify_has_no_power():
    result = audit(coin, 50.0, relation="queries", pairs=(np.zeros(2), np.ones(2)), budget=TINY)
    assert result.certifiable_epsilon < 50
    assert "at or above the largest epsilon" in result.no_power


def test_worker_processes_give_the_same_numbers_whatever_their_number():
    from dpfair_analysis.testing.runner import Runner

    offset = 3.0  # a closure: the workers are forked, nothing is pickled

    def noisy(data, rng):
        return np.asarray(data, dtype=float) + offset + rng.laplace(size=2)

    draws = []
    for workers in (None, 1, 2, 3):  # None (no worker processes): the same chunks, drawn here
        runner = Runner(noisy, workers=workers)
        try:
            draws.append(np.concatenate(list(runner.stream(np.zeros(2), 2_500, np.random.SeedSequence(7), chunk=600))))
        finally:
            runner.close()
    assert draws[0].shape == (2_500, 2)
    assert all(np.array_equal(draws[0], d) for d in draws[1:])


def test_the_kits_work_on_drawn_runs_goes_to_a_worker_with_closures_by_value_or_stays_here():
    """``Runner.elsewhere``: a pair's scoring runs in a worker process (a plain function's full audit spent most of
    its wall time scoring one pair while the workers waited); a closure travels by value (cloudpickle), and a job or
    result that cannot be pickled is computed by the caller, never lost."""
    import threading

    from dpfair_analysis.testing.runner import Runner

    table = np.arange(5.0)
    runner = Runner(coin, workers=2)
    try:
        assert runner.elsewhere(lambda: table * 2)().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
        lock = threading.Lock()
        assert runner.elsewhere(lambda: lock.locked()) is None  # the job cannot be pickled: the caller runs it
        result = runner.elsewhere(lambda: (threading.Lock(), 7))  # its result cannot: computed here instead
        assert result()[1] == 7
        # in processes of their own, below the drawing ones: a draw, whose wait the time budget counts, never
        # queues behind the scoring (in one pool, a full plain audit's waits had grown to most of its wall time)
        here = os.getpriority(os.PRIO_PROCESS, 0)
        assert runner.elsewhere(lambda: os.getpriority(os.PRIO_PROCESS, 0))() == min(19, here + 10)
        assert runner.elsewhere(os.getpid)() != runner._workers_pool().submit(os.getpid).result()
    finally:
        runner.close()
    assert Runner(coin).elsewhere(lambda: 1) is None  # no workers: nothing elsewhere


def test_a_user_statistic_that_raises_raises_the_same_with_its_scoring_in_the_workers():
    """Before: with workers=2 a user statistic raising an exception of a local class ended the audit in
    "AttributeError: Can't pickle local object" instead of its own error."""
    from dpfair_analysis.testing import Statistic

    class Broke(Exception):
        pass

    class Breaks(Statistic):
        def fit(self, out0, out1, pair):
            raise Broke("the user's statistic broke")

    for workers in (None, 2):
        with pytest.raises(Broke, match="the user's statistic broke"):
            audit(coin, 0.1, relation="queries", data=np.ones(3), statistics=("threshold", Breaks()), budget=TINY,
                  workers=workers)


def test_a_searching_audit_gives_the_same_result_with_its_scoring_in_the_workers():
    def noisy_count(queries, rng):
        return np.array([float(np.sum(queries)) + rng.laplace(scale=5.0), float(rng.random() < 0.5)])

    here, there = (audit(noisy_count, 0.1, relation="queries", data=np.ones(3), budget=TINY, seed=2, workers=w)
                   for w in (None, 2))
    assert here.candidates > TINY.top  # screened, then selected: both stages scored in the workers
    assert here.as_dict() | {"seconds": 0} == there.as_dict() | {"seconds": 0}


def test_an_audit_in_workers_is_reproducible_and_a_worker_error_names_the_mechanism():
    from dpfair_analysis.testing.runner import MechanismError

    pair = (np.zeros(2), np.ones(2))
    none, one, two = (audit(coin, 0.1, relation="queries", pairs=pair, budget=TINY, seed=4, workers=workers)
                      for workers in (None, 1, 2))
    assert none.as_dict() | {"seconds": 0} == one.as_dict() | {"seconds": 0} == two.as_dict() | {"seconds": 0}

    def breaks(data, rng):
        if rng.random() < 0.01:
            raise RuntimeError("boom")
        return np.array([rng.random()])

    with pytest.raises(MechanismError, match="boom"):
        audit(breaks, 0.1, relation="queries", pairs=pair, budget=TINY, workers=2)
