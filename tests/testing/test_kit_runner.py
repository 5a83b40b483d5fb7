"""The interface contract: what the kit refuses, and how it says so."""

import random
import time

import numpy as np
import pytest

from dpfair_analysis.testing import AuditTimeout, MechanismError, audit
from dpfair_analysis.testing.runner import Runner

DATA = np.ones(3)


def good(data, rng):
    return data[0] + rng.laplace()


def run_audit(fn, **kw):
    return audit(fn, 1.0, relation="queries", data=DATA, trials=100, **kw)


@pytest.mark.parametrize("fn,match", [
    (lambda data, rng: 1 / 0, "raised ZeroDivisionError"),
    (lambda data, rng: float("nan"), "returned NaN"),
    (lambda data, rng: np.array([1.0, np.inf]) + rng.normal(), "infinite"),
    (lambda data, rng: rng.normal(size=rng.integers(1, 3)), "fixed shape|shape"),
    (lambda data, rng: "high", "numeric"),
    (lambda data, rng: data[0] + np.random.default_rng().normal(), "ignores its seed"),
    (lambda data, rng: data[0] + np.random.normal(), "global random generator"),
    (lambda data, rng: data[0] + random.random(), "global random generator"),
], ids=["raises", "nan", "inf", "varying-shape", "string", "unseeded", "numpy-global", "python-global"])
def test_a_broken_mechanism_is_refused_with_the_problem_named(fn, match):
    with pytest.raises(MechanismError, match=match):
        run_audit(fn)


def test_the_exception_of_the_mechanism_is_chained_and_the_data_named():
    def broken(data, rng):
        raise KeyError("group")

    with pytest.raises(MechanismError, match=r"KeyError.*on data \[1\., 1\., 1\.\]") as info:
        run_audit(broken)
    assert isinstance(info.value.__cause__, KeyError)


def test_a_mechanism_that_runs_too_long_is_stopped_by_the_time_budget():
    def slow(data, rng):
        time.sleep(0.05)
        return data[0] + rng.laplace()

    start = time.perf_counter()
    with pytest.raises(AuditTimeout, match="time budget of 0.3 s"):
        run_audit(slow, time_budget=0.3)
    assert time.perf_counter() - start < 5


def test_a_call_that_hangs_is_interrupted():
    def hangs(data, rng):
        if rng.random() < 2:  # always: but only after the contract check's two calls
            hangs.calls = getattr(hangs, "calls", 0) + 1
            if hangs.calls > 4:
                time.sleep(30)
        return data[0] + rng.laplace()

    start = time.perf_counter()
    with pytest.raises(AuditTimeout):
        run_audit(hangs, time_budget=0.5)
    assert time.perf_counter() - start < 5


def test_a_batched_mechanism_must_return_n_outputs():
    with pytest.raises(MechanismError, match="n outputs"):
        run_audit(lambda data, rng, n: rng.laplace(size=n + 1), batched=True)


def test_the_same_seed_gives_the_same_outputs_and_different_seeds_differ():
    runner = Runner(good)
    a, b, c = runner.sample(DATA, 5, 7), runner.sample(DATA, 5, 7), runner.sample(DATA, 5, 8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert runner.check(DATA, 3) == ()


def test_runner_refuses_bad_arguments():
    with pytest.raises(TypeError, match="callable"):
        Runner(3)
    with pytest.raises(ValueError, match="time_budget"):
        Runner(good, time_budget=-1)


def _exits(data, rng):
    raise SystemExit(0)


def _out_of_memory(data, rng):
    raise MemoryError()


@pytest.mark.parametrize("fn,match", [
    (_exits, r"called sys.exit\(0\) instead of returning"),
    (lambda data, rng: (_ for _ in ()).throw(GeneratorExit()), "raised GeneratorExit"),
    (_out_of_memory, "raised MemoryError"),
], ids=["sys.exit", "base-exception", "memory-error"])
def test_code_that_ends_the_process_or_runs_out_of_memory_is_a_mechanism_error(fn, match):
    """Before: SystemExit went through the audit (the CLI exited 0, the verdict of a consistent claim)."""
    with pytest.raises(MechanismError, match=match):
        run_audit(fn)


def test_an_output_too_large_to_keep_is_refused_by_name_before_memory_runs_out():
    """Before: a 10**7-coordinate output ran the audit into MemoryError (an 'internal error', status 1)."""
    big = np.zeros(10 ** 6)
    with pytest.raises(MechanismError, match=r"outputs of 1,000,000 numbers.*GiB, over the audit's limit"):
        run_audit(lambda data, rng: big + rng.random())


def test_a_large_output_is_streamed_in_smaller_chunks_with_the_same_numbers():
    runner = Runner(lambda data, rng: rng.normal(size=20_000))
    runner.check(DATA, 0)
    chunks = list(runner.stream(DATA, 1000, 3))
    assert len(chunks) > 1 and max(len(c) for c in chunks) * 20_000 * 8 <= 64 * 2 ** 20
    assert np.array_equal(np.concatenate(chunks), np.concatenate(list(Runner(runner.fn).stream(DATA, 1000, 3))))
