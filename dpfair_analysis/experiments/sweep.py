"""One runner for every grid of runs: serially, in local processes (joblib) or on Ray.

A sweep is a list of :class:`Run` -- a cache key and a picklable call that computes the run's
result. :func:`run_sweep` serves every run the :class:`~.cache.RunCache` already holds, computes
the rest on a :class:`Backend` and stores each result in the same cache the moment it arrives,
so a sweep interrupted under one backend resumes under any other. Runs sharing a key are
computed once.

Backends:

* ``serial``: in this process, in order (the default);
* ``joblib``: ``jobs`` local worker processes (``joblib``'s loky backend);
* ``ray``: Ray tasks: on the instance this process is already connected to, else on
  ``ray.init(address)`` -- a cluster's address (``"auto"``, ``"ray://head:10001"``) or,
  with none, a local instance of ``jobs`` CPUs. Ray is the optional extra
  ``pip install dpfair-analysis[ray]``.

Runs of one **group** are computed together: ``run_sweep(..., together=f)`` hands the missing runs of
each group to ``f(group, members)`` in one unit of work (e.g. K seeds of a small model trained in one
batched pass, :func:`~dpfair_analysis.training.batched.train_many`) on every backend, so the backends
still agree; each result is cached under its own run's key.

Same results whatever the backend: every run seeds its own generators from its
configuration, and a worker computes with the caller's number of torch threads (a different
thread count may change the order of floating-point sums). A worker also reports the
:func:`~.cache.code_fingerprint` of the code it ran; a result from other code (a cluster node
with another version of the toolkit) is refused rather than cached as this code's result.

``DPFAIR_BACKEND``, ``DPFAIR_JOBS`` and ``DPFAIR_RAY_ADDRESS`` set the default backend, so the
notebooks' full profiles (``notebooks/execute.py --jobs N --backend ray``) run on the same
runner as ``dpfair compare --jobs N``.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator, Sequence

from tqdm.auto import tqdm

from dpfair_analysis.experiments.cache import RunCache, RunRecords, code_fingerprint
from dpfair_analysis.validation import check_choice, check_positive_int

BACKENDS = ("serial", "joblib", "ray")


class ForeignCodeError(RuntimeError):
    """A worker computed a run with code other than the caller's."""


@dataclass(frozen=True)
class Backend:
    """Where the runs of a sweep are computed.

    ``name`` None picks ``"serial"`` for one job and ``"joblib"`` for more; ``jobs`` is the
    number of local worker processes (joblib) or the CPUs of a local Ray instance;
    ``address`` (Ray only) the cluster to connect to.
    """

    name: str | None = None
    jobs: int = 1
    address: str | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.jobs, "jobs")
        if self.name is None:
            object.__setattr__(self, "name", "serial" if self.jobs == 1 else "joblib")
        check_choice(self.name, "backend", BACKENDS)
        if self.address is not None and self.name != "ray":
            raise ValueError(f"address={self.address!r} is for backend='ray' (a Ray cluster); "
                             f"backend is {self.name!r}")
        if self.name == "serial" and self.jobs != 1:
            raise ValueError(f"backend='serial' runs one job at a time, got jobs={self.jobs}; "
                             "use backend='joblib' or 'ray' for more")

    @classmethod
    def from_environment(cls) -> "Backend":
        """The backend named by ``DPFAIR_BACKEND``, ``DPFAIR_JOBS`` and ``DPFAIR_RAY_ADDRESS``
        (serial when none is set)."""
        jobs = os.environ.get("DPFAIR_JOBS", "1")
        try:
            jobs_value = int(jobs)
        except ValueError:
            jobs_value = 0
        if jobs_value < 1:
            raise ValueError(f"DPFAIR_JOBS must be a positive integer, got {jobs!r}")
        name = os.environ.get("DPFAIR_BACKEND") or None
        if name is not None and name not in BACKENDS:
            raise ValueError(f"DPFAIR_BACKEND must be one of {list(BACKENDS)}, got {name!r}")
        try:
            return cls(name=name, jobs=jobs_value, address=os.environ.get("DPFAIR_RAY_ADDRESS") or None)
        except ValueError as error:
            raise ValueError(f"DPFAIR_BACKEND/DPFAIR_JOBS/DPFAIR_RAY_ADDRESS: {error}") from None

    def describe(self) -> str:
        """E.g. ``"joblib, 2 processes"``."""
        if self.name == "serial":
            return "serial"
        if self.name == "joblib":
            return f"joblib, {self.jobs} processes"
        return f"ray at {self.address}" if self.address else f"ray, local instance of {self.jobs} CPUs"


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its cache key and the call that computes it.

    ``compute`` must pickle (a module-level function or a ``functools.partial`` of one) for
    the joblib and Ray backends.
    """

    key: str
    compute: Callable[[], Any]
    group: Hashable | None = None
    member: Any = None
    #: what the run is, for a person reading a records file (:class:`~.cache.RunRecords`)
    label: str = ""


def run_sweep(runs: Sequence[Run], *, cache: RunCache | None = None, backend: Backend | None = None,
              progress: bool = True, desc: str = "runs",
              together: Callable[[Hashable, list[Any]], list[Any]] | None = None,
              records: RunRecords | None = None) -> list[Any]:
    """The result of every run, in order: served from ``records``, else from ``cache``, else computed on
    ``backend``.

    Progress shows finished/total runs (cache hits count as finished). Each computed result
    is stored as it arrives, so an interrupted sweep loses only the runs in flight. With
    ``together``, the missing runs that share a ``group`` (two or more) are one unit of work:
    ``together(group, [run.member, ...])`` returns their results in that order (it must pickle
    for joblib and Ray, as ``compute`` must). With ``records`` (a committed
    :class:`~.cache.RunRecords` file; the results must then be JSON-ready dicts), each result not
    recorded yet is recorded the moment it arrives (or is served from the cache) as the one row of
    its run, and every result is returned as recorded (a JSON round trip), so what a machine with
    only the records file computes from them equals what the machine that recorded them did.
    """
    cache = cache or RunCache(None)
    backend = backend or Backend.from_environment()
    labels = {run.key: run.label for run in runs}
    results: dict[str, Any] = {}
    missing: dict[str, Run] = {}
    for run in runs:
        if run.key in results or run.key in missing:
            continue
        recorded = records.get(run.key) if records is not None else None
        found, value = (True, recorded[0]) if recorded is not None else cache.lookup(run.key)
        if found:
            results[run.key] = value if recorded is not None else _record(records, run.key, value, labels,
                                                                          origin=cache.origin(run.key))
        else:
            missing[run.key] = run
    with tqdm(total=len(runs), desc=desc, disable=not progress, unit="run") as bar:
        bar.update(sum(1 for run in runs if run.key in results))
        for key, value in _execute(backend, _units(list(missing.values()), together), cache=cache):
            results[key] = _record(records, key, value, labels)
            bar.update(sum(1 for run in runs if run.key == key))
    return [results[run.key] for run in runs]


def _record(records: RunRecords | None, key: str, value: Any, labels: dict[str, str],
            origin: str | None = None) -> Any:
    """``value`` recorded in ``records`` under ``key`` as its run's one row (computed by the code of ``origin``
    where it came from the cache, else by this code), returned as recorded (a JSON round trip); ``value`` itself
    without records."""
    if records is None:
        return value
    recorded = json.loads(json.dumps(value))
    records.put(key, [recorded], label=labels[key], fingerprint=origin)
    return recorded


@dataclass(frozen=True)
class _Unit:
    """What one worker computes: one run, or a group of runs computed together."""

    runs: tuple[Run, ...]
    together: Callable[[Hashable, list[Any]], list[Any]] | None = None

    def compute(self) -> list[Any]:
        if self.together is None:
            return [self.runs[0].compute()]
        return list(self.together(self.runs[0].group, [run.member for run in self.runs]))


def _units(runs: list[Run], together: Callable[[Hashable, list[Any]], list[Any]] | None) -> list[_Unit]:
    """The runs as units of work, in order of their first run: a group of two or more runs is one unit when
    ``together`` is given, every other run a unit of its own."""
    groups: dict[Hashable, list[Run]] = {}
    units: list[_Unit | Hashable] = []
    for run in runs:
        if together is not None and run.group is not None:
            if run.group not in groups:
                groups[run.group] = []
                units.append(("group", run.group))
            groups[run.group].append(run)
        else:
            units.append(_Unit((run,)))
    out = []
    for unit in units:
        if isinstance(unit, _Unit):
            out.append(unit)
        else:
            members = groups[unit[1]]
            out.append(_Unit(tuple(members), together) if len(members) > 1 else _Unit((members[0],)))
    return out


def _execute(backend: Backend, units: Sequence[_Unit], *, cache: RunCache) -> Iterator[tuple[str, Any]]:
    """(key, result) of each run, in the order they finish, checked to come from this code and stored in
    ``cache``. Each run is claimed in the cache while it computes (:meth:`RunCache.claim`; on joblib and Ray this
    process holds the claims while the workers compute), so a second process running the same sweep waits for
    this one's result instead of computing it again (a unit whose runs another process holds is left to it and
    served from its entries afterwards, run by run, each waiting for its claim)."""
    if not units:
        return
    import torch

    threads = torch.get_num_threads()
    if backend.name == "serial":
        for unit in units:
            if len(unit.runs) == 1:
                run = unit.runs[0]
                yield run.key, cache.compute_and_store(run.key, lambda: _checked(*_in_worker(unit, threads))[0])
                continue
            with contextlib.ExitStack() as claims:
                free = all([claims.enter_context(cache.claim(run.key, wait=False)) for run in unit.runs])
                if free:
                    outcome = _in_worker(unit, threads)
                    for run, value in zip(unit.runs, _checked(*outcome)):
                        cache.store(run.key, value)
                        yield run.key, value
                    continue
            for run in unit.runs:
                yield run.key, cache.compute_and_store(run.key, lambda run=run: run.compute())
        return
    theirs: list[_Unit] = []
    with contextlib.ExitStack() as held:
        mine = []
        for unit in units:  # claim every run of a unit here, while the workers compute it; else leave it
            unit_claims = contextlib.ExitStack()
            if all([unit_claims.enter_context(cache.claim(run.key, wait=False)) for run in unit.runs]):
                held.callback(unit_claims.close)
                mine.append(unit)
            else:
                unit_claims.close()
                theirs.append(unit)
        if mine and backend.name == "joblib":
            outcomes: Iterator[tuple[tuple[str, ...], str, list[Any]]] = _on_joblib(mine, jobs=backend.jobs,
                                                                                      threads=threads)
        elif mine:
            outcomes = _on_ray(mine, backend=backend, threads=threads)
        else:
            outcomes = iter(())
        for keys, fingerprint, values in outcomes:
            for key, value in zip(keys, _checked(keys, fingerprint, values)):
                cache.store(key, value)
                yield key, value
    for unit in theirs:  # another process holds them: wait for its entries (computed here only if it stored none)
        for run in unit.runs:
            yield run.key, cache.compute_and_store(run.key, lambda run=run: run.compute())


def _checked(keys: Sequence[str], fingerprint: str, values: list[Any]) -> list[Any]:
    """``values``, unless the runs ``keys`` were computed by code other than this (a worker running another
    version of the package): :class:`ForeignCodeError`."""
    if fingerprint != code_fingerprint():
        raise ForeignCodeError(f"run {keys[0][:12]} was computed by other code (worker fingerprint "
                               f"{fingerprint[:12]}, here {code_fingerprint()[:12]}): install this version of "
                               "dpfair_analysis on every worker")
    return values


def _in_worker(unit: _Unit, threads: int) -> tuple[tuple[str, ...], str, list[Any]]:
    """Compute a unit with the caller's torch thread count; (its keys, the code fingerprint, its results)."""
    import torch

    torch.set_num_threads(threads)
    return tuple(run.key for run in unit.runs), code_fingerprint(), unit.compute()


def _on_joblib(units: Sequence[_Unit], *, jobs: int, threads: int) -> Iterator[tuple[tuple[str, ...], str, list]]:
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
    yield from parallel(delayed(_in_worker)(unit, threads) for unit in units)


def _on_ray(units: Sequence[_Unit], *, backend: Backend, threads: int) -> Iterator[tuple[tuple[str, ...], str, list]]:
    try:
        import ray
    except ImportError:
        raise ImportError("backend='ray' needs Ray: pip install 'dpfair-analysis[ray]'") from None
    if not ray.is_initialized():
        if backend.address:
            try:
                ray.init(address=backend.address, log_to_driver=False)
            except ConnectionError as error:  # e.g. a token-authenticated cluster reached without its token
                reason = " ".join(str(error).split())[:200]
                raise ConnectionError(
                    f"could not connect to the Ray cluster at {backend.address!r} ({reason}); "
                    "if the cluster uses token authentication, set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or "
                    "RAY_AUTH_TOKEN_PATH) to its token on this machine (docs/guide/compare.md)") from None
        else:
            ray.init(num_cpus=backend.jobs, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(num_cpus=1)(_in_worker)
    pending = [remote.remote(unit, threads) for unit in units]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])
