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
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import warnings
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from dpfair_analysis.io import write_atomically

PACKAGE = Path(__file__).resolve().parents[1]
#: Package parts whose code determines a result (the CLI, plotting and verification do not).
RESULT_CODE = ("data", "models.py", "gradients.py", "fast_gradients.py", "validation.py", "privacy", "fairness",
               "theory", "training", "diagnose.py", "experiments")
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


class RunCache:
    """Pickled results by key in one directory (``None`` directory: no caching)."""

    def __init__(self, directory: str | os.PathLike | None) -> None:
        self.directory = None if directory is None else Path(directory)
        self.hits = 0
        self.misses = 0
        self.stale = 0

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        """The cached value for ``key``, or ``compute()`` stored under it (see :meth:`lookup`)."""
        found, value = self.lookup(key)
        if found:
            return value
        value = compute()
        self.store(key, value)
        return value

    def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` if ``key`` has a usable entry (counted as a hit), else ``(False, None)``.

        An entry that cannot be read back (truncated, from an incompatible version, not a
        pickle) is reported with a :class:`CacheWarning` naming its file and treated as missing;
        an entry written by other code (:func:`code_fingerprint`) is missing too, or served under
        ``DPFAIR_CACHE_ALLOW_STALE=1`` (the first with a warning; :meth:`summary` counts them all).
        """
        if self.directory is None:
            return False, None
        path = self.directory / f"{key}.pkl"
        if not path.exists():
            return False, None
        try:
            with open(path, "rb") as handle:
                entry = pickle.load(handle)
            fingerprint, value = entry["fingerprint"], entry["value"]
        except Exception as error:  # any unreadable entry: say so and recompute
            warnings.warn(f"result cache entry {path} is unreadable ({type(error).__name__}: {error}); "
                          "recomputing it", CacheWarning, stacklevel=3)
            return False, None
        if fingerprint == code_fingerprint():
            self.hits += 1
            return True, value
        if os.environ.get("DPFAIR_CACHE_ALLOW_STALE") == "1":
            if not self.stale:  # once per cache: a redraw can serve hundreds; summary() counts them
                warnings.warn(f"result cache entry {path} was computed by other code (fingerprint "
                              f"{fingerprint[:12]}, now {code_fingerprint()[:12]}); served because "
                              "DPFAIR_CACHE_ALLOW_STALE=1, as are any further such entries of this cache "
                              "(counted by its summary)", CacheWarning, stacklevel=3)
            self.hits += 1
            self.stale += 1
            return True, value
        return False, None

    def store(self, key: str, value: Any) -> None:
        """Record ``value`` (just computed by this code) under ``key``, atomically; counted as a miss."""
        self.misses += 1
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        entry = {"fingerprint": code_fingerprint(), "value": value}
        write_atomically(self.directory / f"{key}.pkl", lambda tmp: tmp.write_bytes(pickle.dumps(entry)))

    def summary(self) -> str:
        """E.g. ``"3 of 4 runs from the cache at /path"`` (empty when nothing was looked up)."""
        total = self.hits + self.misses
        if not total or self.directory is None:
            return ""
        stale = f", {self.stale} of them from other code (DPFAIR_CACHE_ALLOW_STALE)" if self.stale else ""
        return f"{self.hits} of {total} runs from the cache at {self.directory}{stale}"
