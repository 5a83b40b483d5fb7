"""Running a user's mechanism many times, safely: seeding, output checks, a time budget.

The interface contract (what the kit calls): a mechanism is a plain function
``fn(data, rng)`` -- ``rng`` a :class:`numpy.random.Generator` that the kit seeds --
returning a number or a numpy array of a fixed shape. With ``batched=True`` it is
``fn(data, rng, n)`` returning ``n`` outputs stacked along axis 0 (DP-Auditorium's
interface; much faster for vectorised mechanisms).

What is refused, with an error naming the problem (:class:`MechanismError`):

* the mechanism raises (the exception is chained, and the call and data are named);
* it returns NaN or infinity, something that is not numeric, a complex number (an array or a number with any
  complex entry: numpy would keep its real part only, and the audit would test less than is released), or
  outputs of varying shape;
* it writes to its input data: every call gets the data set read-only (:func:`read_only`: a read-only view of a
  numpy array, a fresh dict of read-only views for a dict data set, a fresh copy of anything else mutable), so
  every call sees the data set the audit reports as its witness, unchanged by the calls before it; a write
  (``np.clip(data, -1, 1, out=data)``, ``data += noise``) raises in the mechanism and is refused naming the
  write;
* it ignores its seed: two runs from the same seed give different outputs (it draws from
  an unseeded or global generator), or it changes the state of numpy's, Python's or
  torch's *global* generator (``np.random.normal``, ``random.random``, ``torch.randn``
  without the given ``rng``);
* it runs longer than the time budget (:class:`AuditTimeout`, a subclass): the budget is
  checked between calls and, in the main thread on POSIX, also interrupts a call that
  hangs;
* it ends the process instead of returning: ``sys.exit`` (``SystemExit``) or any other
  ``BaseException`` but ``KeyboardInterrupt`` (left to the caller: it is how Ctrl-C arrives) is
  a :class:`MechanismError` naming it, so the code under test cannot end its own audit by accident
  (``os._exit`` and hangs that no signal interrupts need a process of their own: the CLI's
  ``--target`` runs the audit in a child process, :mod:`dpfair_analysis.testing.isolation`);
* its outputs would not fit in memory: one side of one phase (``n`` runs of ``d`` coordinates,
  8 bytes each) may take at most :data:`OUTPUT_MEMORY_LIMIT` bytes.

Nothing is written by the runner; an audit that fails leaves no partial result behind.

Worker processes
----------------
With ``workers`` = k (an int), the n outputs of :meth:`Runner.stream` are drawn in chunks, chunk i from its own
generator seeded by the i-th child of the call's seed (``SeedSequence(entropy, spawn_key + (i,))``: indexed by
the chunk, not by the worker), and the chunks are drawn by k forked processes and concatenated in chunk order.
The same seed therefore gives the same outputs for every k >= 1, and for ``workers=None`` (the default), which
draws the same chunks in this process as k = 1 does: same seed, same numbers, whatever the number of workers. The
chunk size is a function of the output's size alone (never of k). The workers are forked (POSIX), so the mechanism need not be picklable;
each applies the time budget left when it was forked to its own calls, and this process stops them when the
budget is spent. :meth:`Runner.elsewhere` hands the kit's own work on runs already drawn to as many processes
again, at a lower priority (an audit scores each pair's runs there while this process draws the next pair's),
cloudpickled both ways; a draw never waits behind that work, so the time budget counts the mechanism's runs only.
"""

from __future__ import annotations

import contextlib
import copy
import math
import multiprocessing
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

import cloudpickle
import numpy as np

from dpfair_analysis.validation import check_positive_int

Mechanism = Callable[..., Any]


class MechanismError(ValueError):
    """The mechanism under test broke the interface contract (see the module docstring)."""


class AuditTimeout(MechanismError):
    """The mechanism used up the audit's time budget."""


#: Bytes the outputs of one side of one audit phase may take (n runs x d coordinates x 8): 2 GiB. An output
#: with millions of coordinates is refused by name instead of ending the audit in a MemoryError.
OUTPUT_MEMORY_LIMIT = 2 * 2 ** 30
#: Bytes of outputs drawn at once while streaming (the evaluation phase keeps no outputs).
CHUNK_BYTES = 64 * 2 ** 20


def read_only(data: Any) -> Any:
    """``data`` as the code under test gets it, so that no call can change what the next call (or the audit's
    report) sees: a numpy array as a read-only view (a write raises ``ValueError: ... read-only``; a fresh view,
    so reshaping it in place changes nothing either), a dict or list as a fresh one of read-only entries, an
    immutable value as it is, anything else as a deep copy. Cheap on data that is already read-only (one view,
    ~0.1 us), which is what :func:`~dpfair_analysis.testing.auditing.candidate_pairs` makes of every pair.

    Parameters
    ----------
    data : array, dict or any value
        A data set (or anything passed to the code under test).
    """
    if isinstance(data, np.ndarray):
        view = data.view()
        if view.flags.writeable:
            view.flags.writeable = False
        return view
    if isinstance(data, dict):
        return {k: read_only(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(read_only(v) for v in data) if type(data) in (list, tuple) else copy.deepcopy(data)
    if data is None or isinstance(data, (bool, int, float, complex, str, bytes, np.generic)):
        return data
    return copy.deepcopy(data)


def is_complex(value: Any) -> bool:
    """Whether a returned value holds complex numbers: a Python or numpy complex number, an array (numpy, or
    anything with a complex ``dtype``: torch, pandas) of a complex type, or a list or tuple with such an entry.
    Cheap for a float or a real array (no conversion).

    Parameters
    ----------
    value : any
        An output of the code under test.
    """
    kind = type(value)
    if kind is float or kind is np.float64:  # the common outputs first: a number, a real array
        return False
    if kind is np.ndarray:
        return value.dtype.kind == "c"
    if isinstance(value, (complex, np.complexfloating)):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return getattr(dtype, "kind", None) == "c" or getattr(dtype, "is_complex", False) is True
    if isinstance(value, (list, tuple)):
        return any(is_complex(v) for v in value)
    return False


def writes_to_input(error: BaseException) -> bool:
    """Whether ``error`` is numpy's refusal to write to a read-only array (what a write to :func:`read_only`
    data raises)."""
    return isinstance(error, ValueError) and "read-only" in str(error)


def describe_data(data: Any, limit: int = 80) -> str:
    """A short, one-line description of a data set for error messages and reports."""
    if isinstance(data, dict):
        inner = ", ".join(f"{k}: {describe_data(v, 30)}" for k, v in data.items())
        text = "{" + inner + "}"
    else:
        array = np.asarray(data)
        if array.dtype == object:
            text = repr(data)
        elif array.size <= 12:
            text = np.array2string(array, separator=", ", threshold=12).replace("\n", "")
        else:
            text = f"array of shape {array.shape} (first {np.array2string(array.ravel()[:4], separator=', ')})"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _global_states() -> tuple[Any, ...]:
    """States of the global generators a mechanism must not draw from (torch only if already imported)."""
    states: list[Any] = [np.random.get_state(legacy=False)["state"], random.getstate()]
    torch = sys.modules.get("torch")
    if torch is not None:
        states.append(torch.random.get_rng_state())
    return tuple(states)


def _same_states(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    if len(a) != len(b):
        return True  # torch imported by the mechanism itself: nothing to compare
    for x, y in zip(a, b):
        if hasattr(x, "equal"):  # a torch tensor
            if not bool(x.equal(y)):
                return False
        elif isinstance(x, dict):
            if any(not np.array_equal(np.asarray(x[k]), np.asarray(y[k])) for k in x):
                return False
        elif x != y:
            return False
    return True


#: The runner a forked worker process draws with (set in this process just before the workers are forked).
_WORKER_RUNNER: Runner | None = None


def _worker_draw(task: tuple[Any, int, np.random.SeedSequence]) -> np.ndarray:
    """In a worker process: one chunk of ``n`` outputs on ``data`` from its own seed (the shape is checked by the
    parent, which knows the pair)."""
    data, n, seed = task
    runner = _WORKER_RUNNER
    assert runner is not None
    runner.shape = None
    return runner._draw(data, n, np.random.default_rng(seed))


def _scoring_process() -> None:
    """A scoring process's start: below the processes drawing the mechanism's runs in priority, so that the draws,
    whose waits count against the time budget, are not slowed by the kit's own work beside them."""
    os.nice(10)


def _call_pickled(job: bytes) -> bytes | None:
    """In a worker process: the cloudpickled call ``job``'s result, cloudpickled; None if the call fails or its
    result cannot be pickled (a user's statistic that raises an exception of a local class): the caller then makes
    the call itself, and raises what it raises, as without workers."""
    try:
        return cloudpickle.dumps(cloudpickle.loads(job)())
    except Exception:  # noqa: BLE001
        return None


def chunk_seeds(seed: int | np.random.SeedSequence, chunks: int) -> list[np.random.SeedSequence]:
    """The seed of each chunk: the i-th child of ``seed``, by index (``spawn_key + (i,)``), the same however many
    times it is asked for (unlike :meth:`numpy.random.SeedSequence.spawn`, which counts its calls).

    Parameters
    ----------
    seed : int or SeedSequence
        The call's seed.
    chunks : int
        How many chunk seeds.
    """
    base = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return [np.random.SeedSequence(base.entropy, spawn_key=(*base.spawn_key, i), pool_size=base.pool_size)
            for i in range(chunks)]


def _interrupt(signum: int, frame: Any) -> None:
    raise _Expired()


class _Expired(Exception):
    pass


class TimeBudget:
    """Seconds the code under test may run in total, shared by everything that runs it: the import of its
    file, its pair function, every audit phase and the under-noised twin.

    Parameters
    ----------
    seconds : float
        The budget, > 0.
    observer : callable, optional
        ``observer(running, spent)``, told each time the code under test starts (``running=True``) and stops
        running, with the seconds spent before: a watchdog in another process
        (:mod:`dpfair_analysis.testing.isolation`) stops a hang that no signal interrupts.

    Notes
    -----
    A span :meth:`running` is interrupted by ``SIGALRM`` when the budget runs out, in the main thread on POSIX
    only; elsewhere the budget is checked when a span starts and ends.
    """

    def __init__(self, seconds: float, *, observer: Callable[[bool, float], None] | None = None) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0 \
                or not math.isfinite(seconds):
            raise ValueError(f"time_budget must be a positive number of seconds or None, got {seconds!r}")
        self.seconds = float(seconds)
        self.spent = 0.0
        self.observer = observer

    @contextmanager
    def running(self, expired: Callable[[], Exception]) -> Iterator[None]:
        """Count the time spent inside as the code under test's; raise ``expired()`` when the budget runs out
        (before the span, or by interrupting it)."""
        remaining = self.seconds - self.spent
        if remaining <= 0:
            raise expired()
        armed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        previous = None
        if armed:
            previous = signal.signal(signal.SIGALRM, _interrupt)
            signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-3))
        if self.observer is not None:
            self.observer(True, self.spent)
        start = time.perf_counter()
        try:
            yield
        except _Expired:
            raise expired() from None
        finally:
            self.spent += time.perf_counter() - start
            if armed:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            if self.observer is not None:
                self.observer(False, self.spent)


class Runner:
    """Calls one mechanism under the interface contract; see the module docstring.

    Parameters
    ----------
    fn : callable
        ``fn(data, rng)`` (or ``fn(data, rng, n)`` with ``batched``).
    name : str
        How errors name the mechanism.
    batched : bool
        Whether ``fn`` returns ``n`` outputs at once.
    time_budget : float, TimeBudget or None
        Seconds the mechanism may run in total (None: no limit); a :class:`TimeBudget` is shared with whatever
        else holds it.
    workers : int or None
        Worker processes for :meth:`stream` (see the module docstring); None: one generator, this process.
    """

    def __init__(self, fn: Mechanism, *, name: str | None = None, batched: bool = False,
                 time_budget: float | TimeBudget | None = None, workers: int | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"mechanism must be callable as fn(data, rng), got {fn!r}")
        if workers is not None:
            check_positive_int(workers, "workers")
        self.fn = fn
        self.workers = workers
        self._pool: Any = None
        self._scorers: Any = None  # the processes of :meth:`elsewhere`
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self.batched = bool(batched)
        self.budget = (time_budget if isinstance(time_budget, TimeBudget) or time_budget is None
                       else TimeBudget(time_budget))
        self.time_budget = None if self.budget is None else self.budget.seconds
        self.calls = 0
        self.seconds = 0.0
        self.shape: tuple[int, ...] | None = None
        #: Numbers in the last output seen (kept across pairs: what the memory check and the chunks go by).
        self.size: int | None = None

    # ------------------------------------------------------------------ one call, checked
    def _convert(self, out: Any, data: Any) -> np.ndarray:
        if is_complex(out):  # numpy would cast it to its real part (a ComplexWarning): refused instead
            raise MechanismError(self._complex_text(out, data))
        try:
            array = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise MechanismError(f"mechanism {self.name} returned {type(out).__name__} {_short(out)!r} on data "
                                 f"{describe_data(data)}: it must return a number or a numeric numpy array "
                                 f"of fixed shape ({error})") from None
        return array

    def _complex_text(self, out: Any, data: Any) -> str:
        return (f"mechanism {self.name} returned complex output ({_short(out)} on data {describe_data(data)}): "
                f"outputs must be real numbers, and the kit does not audit a complex release by its real part "
                f"alone; release the real and imaginary parts as coordinates of their own "
                f"(np.concatenate([z.real, z.imag]))")

    def _check_output(self, array: np.ndarray, data: Any, expected: tuple[int, ...]) -> None:
        if array.shape != expected:
            raise MechanismError(f"mechanism {self.name} returned an output of shape {array.shape} on data "
                                 f"{describe_data(data)}, but shape {expected} before (on this data set or its "
                                 f"neighbour): the outputs on two neighbours must have one fixed shape (pad or "
                                 f"encode variable-length outputs)")
        if not np.isfinite(array).all():
            bad = "NaN" if np.isnan(array).any() else "an infinite value"
            raise MechanismError(f"mechanism {self.name} returned {bad} on data {describe_data(data)}: outputs "
                                 f"must be finite numbers (encode special outcomes as finite codes)")

    @contextmanager
    def _clock(self) -> Iterator[None]:
        """Count the time spent in the mechanism; stop it when the budget is spent."""
        start = time.perf_counter()
        try:
            if self.budget is None:
                yield
            else:
                with self.budget.running(self._timeout):
                    yield
        finally:
            self.seconds += time.perf_counter() - start

    def _timeout(self) -> AuditTimeout:
        return AuditTimeout(f"mechanism {self.name} used up the time budget of {self.time_budget:g} s after "
                            f"{self.calls} calls: raise time_budget, draw in worker processes (workers=), lower "
                            f"the budget or trials, or make the mechanism faster (batched=True for a vectorised one)")

    def _call(self, data: Any, rng: np.random.Generator, n: int | None = None) -> Any:
        try:
            # data is read-only already (_draw): a fresh view of it is read-only too
            view = data.view() if type(data) is np.ndarray else read_only(data)
            return self.fn(view, rng) if n is None else self.fn(view, rng, n)
        except (_Expired, KeyboardInterrupt):
            raise
        except SystemExit as error:  # sys.exit() in the code under test must not end (or pass) its own audit
            raise MechanismError(f"mechanism {self.name} called sys.exit({error.code!r}) instead of returning an "
                                 f"output (call {self._call_text(n)} on data {describe_data(data)})") from None
        except BaseException as error:  # (the user's code: MemoryError and GeneratorExit included)
            if writes_to_input(error):
                raise MechanismError(
                    f"mechanism {self.name} writes to its input data ({type(error).__name__}: {error}; call "
                    f"{self._call_text(n)} on data {describe_data(data)}): every call gets the data set read-only, "
                    f"so that each call sees the data the audit reports; work on a copy (data = data.copy(), or "
                    f"np.clip(data, low, high) without out=)") from error
            detail = f": {error}" if str(error) else ""
            raise MechanismError(f"mechanism {self.name} raised {type(error).__name__}{detail} (call "
                                 f"{self._call_text(n)} on data {describe_data(data)})") from error

    @staticmethod
    def _call_text(n: int | None) -> str:
        return f"fn(data, rng{', n' if n is not None else ''})"

    def _check_memory(self, n: int) -> None:
        """Refuse ``n`` outputs of the known shape that would take more than :data:`OUTPUT_MEMORY_LIMIT`."""
        if self.size is None:
            return
        needed = n * max(1, self.size) * 8
        if needed > OUTPUT_MEMORY_LIMIT:
            raise MechanismError(
                f"mechanism {self.name} returns outputs of {self.size:,} numbers: "
                f"{n:,} runs of it take {needed / 2 ** 30:.1f} GiB, over the audit's limit of "
                f"{OUTPUT_MEMORY_LIMIT / 2 ** 30:g} GiB per side; release (or audit) fewer coordinates, or lower "
                f"trials or the budget")

    # ------------------------------------------------------------------ the contract
    def check(self, data: Any, seed: int) -> tuple[int, ...]:
        """Two runs from the same seed: same outputs, finite, one shape, no global generator touched.

        Returns the output shape. Raises :class:`MechanismError` naming what is wrong.
        """
        outputs = []
        for _ in range(2):
            before = _global_states()
            outputs.append(self._draw(data, 2, np.random.default_rng(seed)))
            if not _same_states(before, _global_states()):
                raise MechanismError(
                    f"mechanism {self.name} draws from a global random generator (numpy's np.random.*, Python's "
                    f"random, or torch's): draw every random number from the rng argument the kit passes, so "
                    f"that the same seed gives the same output")
        if not np.array_equal(outputs[0], outputs[1]):
            raise MechanismError(
                f"mechanism {self.name} ignores its seed: two runs with the same rng seed gave different outputs "
                f"on data {describe_data(data)} (it draws from an unseeded generator); draw every random number "
                f"from the rng argument")
        return self.shape  # type: ignore[return-value]

    def _draw(self, data: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        data = read_only(data)  # once per chunk (a worker's data arrives writeable); each call gets its own view
        if self.batched:
            with self._clock():
                out = self._call(data, rng, n)
            self.calls += 1
            array = self._convert(out, data)
            if array.ndim == 0 or array.shape[0] != n:
                raise MechanismError(f"batched mechanism {self.name} returned shape {array.shape} for n={n}: "
                                     f"it must return n outputs stacked along axis 0")
            if self.shape is None:
                self.shape = array.shape[1:]
                self.size = math.prod(self.shape)
            for row in (array[0], array[-1]):
                self._check_output(row, data, self.shape)
            if not np.isfinite(array).all():
                self._check_output(array[~np.isfinite(array).reshape(n, -1).all(1)][0], data, self.shape)
            return array
        rows = []
        with self._clock():
            for _ in range(n):
                out = self._call(data, rng)
                self.calls += 1
                array = self._convert(out, data)
                if self.shape is None:
                    self.shape = array.shape
                    self.size = math.prod(self.shape)
                if array.shape != self.shape:
                    self._check_output(array, data, self.shape)
                rows.append(array)
        stacked = np.stack(rows) if rows else np.zeros((0, *(self.shape or ())))
        if not np.isfinite(stacked).all():
            bad = stacked[~np.isfinite(stacked).reshape(n, -1).all(1)][0]
            self._check_output(bad, data, self.shape)  # raises
        return stacked

    def stream(self, data: Any, n: int, seed: int | np.random.SeedSequence, chunk: int | None = None
               ) -> Iterator[np.ndarray]:
        """``n`` outputs on ``data`` in chunks of (at most) ``chunk`` outputs (default 100,000 batched, 20,000 one at
        a time), chunk i from the generator of ``chunk_seeds(seed)[i]`` (module docstring: the same numbers whatever
        ``workers``): memory stays bounded however large n is.

        One output at a time, a large output gets fewer runs a chunk, so that a chunk stays within
        :data:`CHUNK_BYTES`: the first run of chunk 0 (drawn here) measures the output, and the chunk size follows
        from that measure alone -- never from what this runner saw before -- so the same seed draws the same
        numbers."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if self.batched:
            yield from self._stream_chunks(data, n, seed, chunk or 100_000)
            return
        rng = np.random.default_rng(chunk_seeds(seed, 1)[0])
        first = self._draw(data, 1, rng)
        size = max(1, min(chunk or 20_000, CHUNK_BYTES // (8 * max(1, first[0].size))))
        head = min(size, n)
        yield first if head == 1 else np.concatenate([first, self._draw(data, head - 1, rng)])
        if n > head:
            yield from self._stream_chunks(data, n, seed, size, first_chunk=1)

    def _stream_chunks(self, data: Any, n: int, seed: int | np.random.SeedSequence, size: int, *,
                       first_chunk: int = 0) -> Iterator[np.ndarray]:
        """Chunks ``first_chunk``, ... of ``size`` outputs, chunk i from ``chunk_seeds(seed)[i]``, drawn here (no
        workers or one) or by the pool."""
        sizes = [min(size, n - start) for start in range(0, n, size)][first_chunk:]
        seeds = chunk_seeds(seed, first_chunk + len(sizes))[first_chunk:]
        if self.workers is None or self.workers == 1:
            for k, s in zip(sizes, seeds):
                yield self._draw(data, k, np.random.default_rng(s))
            return
        pool = self._workers_pool()
        futures = [pool.submit(_worker_draw, (data, k, s)) for k, s in zip(sizes, seeds)]
        try:
            for k, future in zip(sizes, futures):
                with self._clock():
                    chunk = future.result()
                self.calls += 1 if self.batched else k
                if self.shape is None:
                    self.shape = chunk.shape[1:]
                if chunk.shape[1:] != self.shape:
                    self._check_output(chunk[0], data, self.shape)  # raises
                yield chunk
        except BaseException:
            for future in futures:
                future.cancel()
            if isinstance(sys.exc_info()[1], AuditTimeout):
                self.close()  # a worker may hang in the mechanism: stop them
            raise

    def elsewhere(self, job: Callable[[], Any]) -> Callable[[], Any] | None:
        """``job()`` (the kit's work on runs already drawn, never the mechanism: no time budget) begun in a worker
        process (``workers`` of them beside the drawing ones, at a lower priority); the returned callable gives its result, or calls ``job`` itself where the worker could not (the
        job raised, or its result cannot be pickled), so that it returns or raises exactly what ``job()`` does here.
        None without workers, or where ``job`` cannot be pickled (cloudpickle: closures by value): the caller
        computes it itself."""
        if self.workers is None or self.workers == 1:
            return None
        try:
            blob = cloudpickle.dumps(job)
        except Exception:  # noqa: BLE001 -- unpicklable: computed by the caller
            return None
        if self._scorers is None:  # a pool of its own: the draws never queue behind (and wait on) the scoring
            self._scorers = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("fork"),
                                                initializer=_scoring_process)
        future = self._scorers.submit(_call_pickled, blob)

        def result() -> Any:
            found = future.result()
            if found is not None:
                with contextlib.suppress(Exception):
                    return cloudpickle.loads(found)
            return job()
        return result

    def _workers_pool(self) -> Any:
        if self._pool is None:
            global _WORKER_RUNNER
            _WORKER_RUNNER = self
            self._pool = ProcessPoolExecutor(max_workers=self.workers,
                                             mp_context=multiprocessing.get_context("fork"))
            for _ in range(self.workers):  # fork them now, while _WORKER_RUNNER is this runner
                self._pool.submit(int, 0).result()
        return self._pool

    def close(self) -> None:
        """Stop the worker processes, if any (a later :meth:`stream` forks new ones)."""
        pools, self._pool, self._scorers = (self._pool, self._scorers), None, None
        processes = [p for pool in pools if pool is not None for p in getattr(pool, "_processes", {}).values()]
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=5)

    def sample(self, data: Any, n: int, seed: int | np.random.SeedSequence) -> np.ndarray:
        """``n`` outputs on ``data`` from one generator seeded with ``seed``, as an (n, ...) float64 array."""
        self._check_memory(n)
        chunks = list(self.stream(data, n, seed))
        return np.concatenate(chunks) if len(chunks) > 1 else chunks[0]

    def new_pair(self) -> None:
        """Forget the output shape: a new pair of neighbours may have outputs of another shape (both of its
        data sets must give the same one)."""
        self.shape = None

    def flat(self, outputs: np.ndarray) -> np.ndarray:
        """Outputs as an (n, d) matrix (a scalar output is d = 1)."""
        return outputs.reshape(len(outputs), -1) if outputs.ndim > 1 else outputs.reshape(-1, 1)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


def seconds_left(start: float, budget: float | None) -> float:
    """Seconds left of ``budget`` since ``start`` (inf without a budget)."""
    return math.inf if budget is None else budget - (time.perf_counter() - start)
