"""A result cache keyed by a hash of everything that determines a run, so long sweeps resume.

Every training run is deterministic given its configuration and seed, so a cached result
is the result -- of the code that computed it. The key (:func:`config_key`) hashes the run's
configuration; each entry also records :func:`code_fingerprint`, a hash of the source of
every module that computes results (data, models, gradients, privacy, fairness, theory,
training, diagnose, experiments) and of the versions of the libraries that compute with them (torch,
numpy, pandas, scikit-learn, scipy, dp_accounting, fairlearn). An entry written by other
code is stale: it is recomputed (and replaced), so a code or library change invalidates the
cache by itself and nothing has to be bumped by hand. ``DPFAIR_CACHE_ALLOW_STALE=1`` serves
stale entries anyway, each with a warning -- for redrawing figures after a change that the
tests show changes no number (e.g. a refactor), never by default. Entries are pickles written
atomically; the directory is ``$DPFAIR_CACHE`` or ``~/.cache/dpfair_analysis/runs``.

A damaged or unreadable entry is reported (a warning naming the file) and recomputed; the
cache counts what it served (:attr:`RunCache.hits`) and what it computed
(:attr:`RunCache.misses`), so commands can say which results came from it.

A cache never costs a result: a directory that cannot be written is said once (a
:class:`CacheWarning`) and the runs go on uncached. An entry is unpickled only if the current
user owns it and nobody else may write it (a pickle runs code when it is read). Two processes
that need the same run do not both compute it: the first claims the key (an advisory lock
under ``.claims/``, released when its process ends, however it ends) and the second waits for
its entry.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pickle
import stat
import warnings
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

from dpfair_analysis.io import write_atomically

PACKAGE = Path(__file__).resolve().parents[1]
#: Package parts whose code determines a result (the CLI, plotting and verification do not).
RESULT_CODE = ("data", "models.py", "gradients.py", "fast_gradients.py", "validation.py", "privacy", "fairness",
               "theory", "training", "diagnose", "experiments")
RESULT_LIBRARIES = ("torch", "numpy", "pandas", "scikit-learn", "scipy", "dp-accounting", "fairlearn")


#: Version of the entry layout ({"fingerprint", "value"}); part of every key.
ENTRY_FORMAT = 2


class CacheWarning(UserWarning):
    """A cache entry could not be used and was recomputed."""


def default_cache_dir() -> Path:
    """``$DPFAIR_CACHE`` if set, else ``~/.cache/dpfair_analysis/runs``."""
    return Path(os.environ.get("DPFAIR_CACHE", Path.home() / ".cache" / "dpfair_analysis" / "runs"))


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 over the source of :data:`RESULT_CODE` (sorted paths and contents) and the installed
    versions of :data:`RESULT_LIBRARIES`: what, beside the configuration, determines a result."""
    digest = hashlib.sha256()
    for part in RESULT_CODE:
        root = PACKAGE / part
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            digest.update(str(path.relative_to(PACKAGE)).encode())
            digest.update(path.read_bytes())
    for name in RESULT_LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name}=={version}".encode())
    return digest.hexdigest()


def config_key(*parts: Any) -> str:
    """SHA-256 of a canonical JSON form of ``parts`` (dataclasses as dicts)."""
    def plain(value: Any) -> Any:
        if is_dataclass(value) and not isinstance(value, type):
            return {"__type__": type(value).__name__, **{k: plain(v) for k, v in asdict(value).items()}}
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, float) and value != value:
            return "nan"
        return value

    text = json.dumps([ENTRY_FORMAT, plain(list(parts))], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _served(fingerprint: str, where: Path, *, warn: bool) -> str | None:
    """Whether an entry computed by the code of ``fingerprint`` may be served: ``"current"`` (this code's),
    ``"stale"`` (other code's, served because ``DPFAIR_CACHE_ALLOW_STALE=1``; a :class:`CacheWarning`
    naming ``where`` if ``warn``) or ``None`` (other code's: recompute it)."""
    if fingerprint == code_fingerprint():
        return "current"
    if os.environ.get("DPFAIR_CACHE_ALLOW_STALE") != "1":
        return None
    if warn:  # once per store: a redraw can serve hundreds; the store's summary counts them
        warnings.warn(f"result cache entry {where} was computed by other code (fingerprint "
                      f"{fingerprint[:12]}, now {code_fingerprint()[:12]}); served because "
                      "DPFAIR_CACHE_ALLOW_STALE=1, as are any further such entries of this cache "
                      "(counted by its summary)", CacheWarning, stacklevel=4)
    return "stale"


def unwritable_reason(directory: str | os.PathLike) -> str | None:
    """Why ``directory`` cannot hold cache entries (it, or the nearest existing parent, is not a writable
    directory), or ``None`` if it can. Nothing is created."""
    path = Path(directory)
    while not path.exists():
        if path.parent == path:
            return "no part of the path exists"
        path = path.parent
    if not path.is_dir():
        return f"{path} is not a directory"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    return None


def _safe_to_unpickle(path: Path) -> str | None:
    """Why the entry at ``path`` must not be unpickled (another user owns it, or others may write it), or
    ``None``. Unpickling runs code, so an entry is read only if it can only have been written by this user."""
    info = path.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"it is owned by uid {info.st_uid}, not by this user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "other users may write it"
    return None


class RunCache:
    """Pickled results by key in one directory (``None`` directory: no caching).

    A directory that cannot be written is not an error: the first failed write says so (a
    :class:`CacheWarning`) and later results are not stored; results are never lost to it.
    """

    def __init__(self, directory: str | os.PathLike | None) -> None:
        self.directory = None if directory is None else Path(directory)
        self.hits = 0
        self.misses = 0
        self.stale = 0
        self.writable = self.directory is not None

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        """The cached value for ``key``, or ``compute()`` stored under it (see :meth:`lookup`). While it
        computes, ``key`` is claimed (:meth:`claim`): another process asking for it waits for this entry."""
        found, value = self.lookup(key)
        if found:
            return value
        return self.compute_and_store(key, compute)

    def compute_and_store(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` stored under ``key`` -- unless another process holds the claim on ``key``: then wait
        for it and serve what it stored (computing only if it stored nothing, e.g. it was killed)."""
        with self.claim(key, wait=False) as free:
            if free:
                value = compute()
                self.store(key, value)
                return value
        with self.claim(key, wait=True):
            found, value = self.lookup(key)
            if found:
                return value
            value = compute()
            self.store(key, value)
            return value

    @contextlib.contextmanager
    def claim(self, key: str, *, wait: bool) -> Iterator[bool]:
        """Hold the claim on ``key`` (an exclusive ``flock`` on ``.claims/<key>``) for the ``with`` block;
        yields whether it is held. ``wait=True`` blocks until another holder is done; ``wait=False`` yields
        ``False`` at once if another process holds it. Where no lock can be taken (no directory, not
        writable, no ``fcntl``) it yields ``True``: the claim is an economy, never a condition."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover -- not POSIX
            fcntl = None
        if self.directory is None or not self.writable or fcntl is None:
            yield True
            return
        try:
            (self.directory / ".claims").mkdir(parents=True, exist_ok=True)
            handle = open(self.directory / ".claims" / key, "a")
        except OSError:
            yield True
            return
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            except OSError:
                yield True
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` if ``key`` has a usable entry (counted as a hit), else ``(False, None)``.

        An entry that cannot be read back (truncated, from an incompatible version, not a
        pickle) is reported with a :class:`CacheWarning` naming its file and treated as missing, as
        is one that another user could have written (it is not unpickled); an entry written by other
        code (:func:`code_fingerprint`) is missing too, or served under ``DPFAIR_CACHE_ALLOW_STALE=1``
        (the first with a warning; :meth:`summary` counts them all).
        """
        if self.directory is None:
            return False, None
        path = self.directory / f"{key}.pkl"
        if not path.is_file():
            return False, None
        try:
            unsafe = _safe_to_unpickle(path)
            if unsafe is not None:
                warnings.warn(f"result cache entry {path} is not read: {unsafe} (unpickling runs code); "
                              "recomputing it", CacheWarning, stacklevel=3)
                return False, None
            with open(path, "rb") as handle:
                entry = pickle.load(handle)
            fingerprint, value = entry["fingerprint"], entry["value"]
        except Exception as error:  # any unreadable entry: say so and recompute
            warnings.warn(f"result cache entry {path} is unreadable ({type(error).__name__}: {error}); "
                          "recomputing it", CacheWarning, stacklevel=3)
            return False, None
        verdict = _served(fingerprint, path, warn=not self.stale)
        if verdict is None:
            return False, None
        self.hits += 1
        self.stale += verdict == "stale"
        return True, value

    def store(self, key: str, value: Any) -> None:
        """Record ``value`` (just computed by this code) under ``key``, atomically; counted as a miss.

        If the directory cannot be written, a :class:`CacheWarning` says so once and nothing more is
        stored: the caller keeps ``value`` either way."""
        self.misses += 1
        if self.directory is None or not self.writable:
            return
        entry = {"fingerprint": code_fingerprint(), "value": value}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomically(self.directory / f"{key}.pkl", lambda tmp: tmp.write_bytes(pickle.dumps(entry)),
                             mode=0o600)  # private: lookup() unpickles only entries no other user can write
        except OSError as error:
            self.writable = False
            warnings.warn(f"the result cache {self.directory} cannot be written ({error.strerror or error}); "
                          "results are not cached from now on (set DPFAIR_CACHE to a writable directory)",
                          CacheWarning, stacklevel=2)

    def summary(self) -> str:
        """E.g. ``"3 of 4 runs from the cache at /path"`` (empty when nothing was looked up)."""
        total = self.hits + self.misses
        if not total or self.directory is None:
            return ""
        stale = f", {self.stale} of them from other code (DPFAIR_CACHE_ALLOW_STALE)" if self.stale else ""
        return f"{self.hits} of {total} runs from the cache at {self.directory}{stale}"


class RunRecords:
    """What figures draw from long runs, kept in one JSON file that is committed beside them, so a
    reproduction that outlives the machine computing it resumes on any other.

    A :class:`RunCache` holds each run's whole result (per-step records and all: megabytes for a
    60-epoch MNIST run) on the machine that computed it. A figure needs a few rows of each run (its
    per-group accuracy and epsilon, a summary of its clipping bounds): this file keeps those rows under
    a key naming the run and the summary, with the :func:`code_fingerprint` of the code that computed
    both. Rows from other code are not served (the caller recomputes them) unless
    ``DPFAIR_CACHE_ALLOW_STALE=1``, exactly as for :class:`RunCache`. Every :meth:`put` rewrites the
    file atomically, entries sorted by key (rows keep their fields' order) and one field per line, so a
    diff shows which runs arrived.
    """

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = None if path is None else Path(path)
        self.hits = 0
        self.misses = 0
        self.stale = 0
        self.other_sampler = 0

    def summary(self) -> str:
        """E.g. ``"64 of 64 runs from run records at /path, 64 of them with Poisson sampler 1"``."""
        total = self.hits + self.misses
        if not total or self.path is None:
            return ""
        notes = [f"{self.stale} of them from other code (DPFAIR_CACHE_ALLOW_STALE)"] if self.stale else []
        notes += [f"{self.other_sampler} of them trained with an earlier Poisson sampler"] if self.other_sampler else []
        return f"{self.hits} of {total} runs from run records at {self.path}" + "".join(f", {n}" for n in notes)

    def _entries(self) -> dict[str, dict]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            return json.loads(self.path.read_text())["records"]
        except Exception as error:  # a damaged file is a real loss: refuse to overwrite it silently
            raise ValueError(f"run records file {self.path} is unreadable ({type(error).__name__}: {error}); "
                             "repair or remove it") from None

    def get(self, key: str) -> list[dict] | None:
        """The rows recorded under ``key`` (counted as a hit), or ``None`` if absent or from other code.

        A served entry whose runs drew their batches with another Poisson sampler than today's
        (:data:`~dpfair_analysis.training.loop.POISSON_SAMPLER_VERSION`; entries that name none used the first)
        is counted (:attr:`other_sampler`, in :meth:`summary`) and said once: the same distribution, but other
        batches for the same seed."""
        from dpfair_analysis.training.loop import POISSON_SAMPLER_VERSION

        entry = self._entries().get(key)
        if entry is None:
            return None
        verdict = _served(entry["fingerprint"], self.path, warn=not self.stale)
        if verdict is None:
            return None
        self.hits += 1
        self.stale += verdict == "stale"
        sampler = entry.get("poisson_sampler", 1)
        if sampler != POISSON_SAMPLER_VERSION:
            if not self.other_sampler:
                warnings.warn(f"run records in {self.path} were trained with Poisson sampler {sampler}, today's is "
                              f"{POISSON_SAMPLER_VERSION}: exactly the same sampling distribution, but other batches "
                              "for the same seed (counted in the records' summary)", CacheWarning, stacklevel=2)
            self.other_sampler += 1
        return entry["rows"]

    def put(self, key: str, rows: list[dict], *, label: str = "") -> None:
        """Record ``rows`` (just computed by this code) under ``key``; ``label`` says what run they
        summarise (for a person reading the file). Counted as a miss."""
        self.misses += 1
        if self.path is None:
            return
        entries = self._entries()
        from dpfair_analysis.training.loop import POISSON_SAMPLER_VERSION

        entries[key] = {"label": label, "fingerprint": code_fingerprint(), "poisson_sampler": POISSON_SAMPLER_VERSION,
                        "rows": rows}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"format": 1, "records": dict(sorted(entries.items()))}, indent=1)
        write_atomically(self.path, lambda tmp: tmp.write_text(text + "\n"))

    def rows_or_compute(self, key: str, compute: Callable[[], list[dict]], *, label: str = "") -> list[dict]:
        """The recorded rows of ``key``, or ``compute()`` recorded under it."""
        rows = self.get(key)
        if rows is None:
            rows = compute()
            self.put(key, rows, label=label)
        return rows
