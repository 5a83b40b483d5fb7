"""The sweep runner: the same results serially, in joblib processes and on Ray, through one cache."""

from __future__ import annotations

import functools
from dataclasses import replace

import pandas as pd
import pytest
import torch

from dpfair_analysis.experiments import sweep
from dpfair_analysis.experiments.cache import RunCache
from dpfair_analysis.experiments.compare import CompareConfig, run_compare
from dpfair_analysis.experiments.sweep import Backend, ForeignCodeError, Run, run_sweep
from dpfair_analysis.training.loop import TrainConfig

# a real grid: three methods (one DPSGD-F, with its private counts) x two seeds, unequal groups
GRID = CompareConfig(dataset="synthetic", data_options={"sizes": (90, 25), "dim": 4, "seed": 3},
                     methods=("sgd", "dpsgd", "dpsgdf"), seeds=(0, 1),
                     train=TrainConfig(epochs=2, batch_size=16, lr=0.1, delta=1e-5))


def outputs(result) -> dict[str, pd.DataFrame]:
    """Everything a comparison reports, as frames to compare exactly."""
    return {"per_seed": result.per_seed, "histories": result.histories, "steps": result.steps,
            "runs": pd.DataFrame(result.runs), "epsilon": pd.Series(result.epsilon)}


def assert_identical(a, b) -> None:
    for name, frame in outputs(a).items():
        other = outputs(b)[name]
        if isinstance(frame, pd.Series):
            pd.testing.assert_series_equal(frame, other, check_exact=True)
        else:
            pd.testing.assert_frame_equal(frame, other, check_exact=True)


@pytest.fixture(scope="module")
def serial_result():
    return run_compare(GRID, progress=False, backend=Backend())


def test_joblib_processes_give_the_serial_results_and_resume_from_its_cache(serial_result, tmp_path):
    cache = RunCache(tmp_path)
    first = run_compare(GRID, progress=False, cache=cache, backend=Backend("joblib", jobs=2))
    assert_identical(first, serial_result)
    assert (cache.hits, cache.misses) == (0, 6) and len(list(tmp_path.glob("*.npz"))) == 6
    # one more seed: the six finished runs come from the cache, only the new seed's three are trained
    grown = run_compare(replace(GRID, seeds=(0, 1, 2)), progress=False, cache=cache,
                        backend=Backend("joblib", jobs=2))
    assert (cache.hits, cache.misses) == (6, 9)
    pd.testing.assert_frame_equal(grown.per_seed[grown.per_seed.seed < 2].reset_index(drop=True),
                                  serial_result.per_seed, check_exact=True)


class _FakeRay:
    """The part of Ray's API the sweep calls, run in this process: tasks run when their results are waited for, in
    reverse order of submission (so the sweep must not rely on Ray's completion order)."""

    def __init__(self) -> None:
        self.initialized, self.init_calls, self.resources = False, [], set()

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **kwargs) -> None:
        self.initialized = True
        self.init_calls.append(kwargs)

    def remote(self, **resources):
        self.resources.add(tuple(sorted(resources.items())))

        def wrap(fn):
            return type("Remote", (), {"remote": staticmethod(lambda *args: (fn, args))})
        return wrap

    def wait(self, pending, num_returns):
        assert num_returns == 1
        return [pending[-1]], pending[:-1]

    def get(self, ref):
        fn, args = ref
        return fn(*args)


def test_the_ray_backend_gives_the_serial_results_in_any_completion_order(serial_result, tmp_path, monkeypatch):
    """The default suite's check of the Ray backend (the slow test below starts a real local instance): each run is
    one task of one CPU, results come back as they finish -- here in reverse order -- and the comparison equals the
    serial one; with no instance, one is started with the backend's CPUs, else the connected one is used."""
    import sys

    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    cache = RunCache(tmp_path)
    on_ray = run_compare(GRID, progress=False, cache=cache, backend=Backend("ray", jobs=3))
    assert_identical(on_ray, serial_result)
    assert cache.misses == 6 and fake.resources == {(("num_cpus", 1),)}
    assert fake.init_calls == [{"num_cpus": 3, "include_dashboard": False, "log_to_driver": False}]
    run_compare(GRID, progress=False, cache=RunCache(tmp_path / "again"), backend=Backend("ray", jobs=3))
    assert len(fake.init_calls) == 1  # connected already: no second instance


@pytest.mark.slow
def test_ray_local_instance_gives_the_serial_results(serial_result, tmp_path):
    import ray  # the [ray] extra is part of the test setup (make test): missing Ray fails, it is not skipped

    # one worker: the claim is Ray's results = the serial ones; a second worker only doubles the start-up (CI time)
    try:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    except Exception as error:  # noqa: BLE001  Ray waits a fixed 30 s for its raylet: on a loaded machine, once more
        if "timed out during startup" not in str(error):
            raise
        ray.shutdown()
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        cache = RunCache(tmp_path)
        on_ray = run_compare(GRID, progress=False, cache=cache, backend=Backend("ray", jobs=1))
        assert ray.is_initialized()  # the sweep used the instance this process had started
    finally:
        ray.shutdown()
    assert_identical(on_ray, serial_result)
    assert cache.misses == 6


# ------------------------------------------------------------------ the runner itself
def _square(x: int) -> int:
    return x * x


def _threads() -> int:
    return torch.get_num_threads()


def _boom() -> int:
    raise RuntimeError("run failed")


def test_results_keep_the_runs_order_and_a_shared_key_is_computed_once(tmp_path):
    cache = RunCache(tmp_path)
    runs = [Run(f"k{x % 3}", functools.partial(_square, x % 3)) for x in range(7)]
    assert run_sweep(runs, cache=cache, backend=Backend("joblib", jobs=2), progress=False) == [0, 1, 4, 0, 1, 4, 0]
    assert (cache.hits, cache.misses) == (0, 3)
    assert run_sweep(runs, cache=cache, progress=False) == [0, 1, 4, 0, 1, 4, 0]
    assert (cache.hits, cache.misses) == (3, 3)


def test_workers_compute_with_the_callers_torch_threads():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert run_sweep([Run("t", _threads)], backend=Backend("joblib", jobs=2), progress=False) == [1]
    finally:
        torch.set_num_threads(before)


def test_a_result_from_other_code_is_refused_and_not_cached(tmp_path, monkeypatch):
    def other_code(unit, threads):
        return tuple(run.key for run in unit.runs), "0" * 64, unit.compute()

    monkeypatch.setattr(sweep, "_in_worker", other_code)
    cache = RunCache(tmp_path)
    with pytest.raises(ForeignCodeError, match="other code"):
        run_sweep([Run("a", functools.partial(_square, 2))], cache=cache, progress=False)
    assert not list(tmp_path.glob("*.npz"))


def test_a_failing_run_keeps_the_finished_ones(tmp_path):
    cache = RunCache(tmp_path)
    with pytest.raises(RuntimeError, match="run failed"):
        run_sweep([Run("ok", functools.partial(_square, 3)), Run("bad", _boom)], cache=cache, progress=False)
    assert run_sweep([Run("ok", _boom)], cache=cache, progress=False) == [9]  # served, not recomputed


@pytest.mark.parametrize("kwargs, message", [
    ({"jobs": 0}, "jobs"),
    ({"name": "dask"}, "backend"),
    ({"name": "serial", "jobs": 2}, "one job at a time"),
    ({"name": "joblib", "jobs": 2, "address": "auto"}, "address"),
])
def test_backend_refuses_what_it_cannot_do(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Backend(**kwargs)


def test_backend_defaults_follow_jobs_and_the_environment(monkeypatch):
    assert Backend().name == "serial" and Backend(jobs=3).name == "joblib"
    for name in ("DPFAIR_BACKEND", "DPFAIR_JOBS", "DPFAIR_RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    assert Backend.from_environment() == Backend()
    monkeypatch.setenv("DPFAIR_BACKEND", "ray")
    monkeypatch.setenv("DPFAIR_JOBS", "4")
    monkeypatch.setenv("DPFAIR_RAY_ADDRESS", "ray://head:10001")
    assert Backend.from_environment() == Backend("ray", jobs=4, address="ray://head:10001")
    monkeypatch.setenv("DPFAIR_JOBS", "many")
    with pytest.raises(ValueError, match="DPFAIR_JOBS"):
        Backend.from_environment()


def _square_all(group, members):
    return [m * m for m in members]


@pytest.mark.parametrize("backend", [Backend("serial"), Backend("joblib", jobs=2)], ids=["serial", "joblib"])
def test_runs_of_a_group_are_computed_together_and_cached_one_by_one(tmp_path, backend):
    """together(group, members) computes a group's missing runs in one unit on every backend; each result is
    cached under its own key; a lone member of a group is computed by itself."""
    runs = [Run("a", _boom, group="g", member=2), Run("b", _boom, group="g", member=3),
            Run("c", functools.partial(_square, 4)), Run("d", functools.partial(_square, 5), group="lone", member=5)]
    cache = RunCache(tmp_path)
    assert run_sweep(runs, cache=cache, backend=backend, progress=False, together=_square_all) == [4, 9, 16, 25]
    assert sorted(p.stem for p in tmp_path.glob("*.npz")) == ["a", "b", "c", "d"]
    assert run_sweep([Run("b", _boom, group="g", member=3)], cache=cache, progress=False, together=_square_all) == [9]


def test_a_ray_cluster_that_refuses_the_connection_is_one_line_naming_the_token_settings(cli, monkeypatch):
    """A token-authenticated cluster reached without its token (Ray raises ConnectionError): one line that says
    what to set, exit 1 -- not 'internal error'."""
    ray = pytest.importorskip("ray", reason="the ray extra is installed by make setup")

    def refuse(*args, **kwargs):
        raise ConnectionError("Authentication failed: InvalidAuthToken: missing or incorrect token")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    code, out, err = cli("compare", "--data", "synthetic", "--epochs", "1", "--backend", "ray", "--address",
                         "ray://head:10001", "--no-cache", "--quiet")
    assert code == 1 and out == ""
    assert err.startswith("dpfair: error: could not connect to the Ray cluster at 'ray://head:10001'")
    assert "RAY_AUTH_MODE=token" in err and "RAY_AUTH_TOKEN" in err and len(err.splitlines()) == 1


def test_a_parallel_sweep_leaves_a_run_another_process_holds_and_serves_its_entry(tmp_path):
    """On joblib the sweep claims each run it sends to a worker; a run another process has claimed is not computed
    again: the sweep waits for that process's entry and serves it (issue 47: two identical sweeps computed all)."""
    import fcntl
    import threading

    cache = RunCache(tmp_path)
    (tmp_path / ".claims").mkdir()
    other = open(tmp_path / ".claims" / "b", "w")  # another process's claim on run "b" (flock is per open file)
    fcntl.flock(other, fcntl.LOCK_EX)

    def the_other_process_finishes():
        RunCache(tmp_path).store("b", "the other process's result")
        fcntl.flock(other, fcntl.LOCK_UN)
        other.close()

    timer = threading.Timer(1.0, the_other_process_finishes)
    timer.start()
    runs = [Run("a", functools.partial(_square, 3)), Run("b", functools.partial(_square, 4))]
    try:
        assert run_sweep(runs, cache=cache, backend=Backend("joblib", jobs=2), progress=False) == [
            9, "the other process's result"]
    finally:
        timer.join()
    assert cache.misses == 1 and cache.hits == 1
