"""A result cache keyed by a hash of the run's configuration, so long sweeps resume.

Every training run is deterministic given its configuration and seed, so a cached result
is the result. The key covers everything that changes the numbers, plus
:data:`CACHE_VERSION`, bumped whenever training or metrics code changes what a run
produces. Entries are pickled pandas objects written atomically; the directory is
``$DPFAIR_CACHE`` or ``~/.cache/dpfair_analysis/runs``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, Callable

from dpfair_analysis.io import write_atomically

CACHE_VERSION = 1


def default_cache_dir() -> Path:
    """``$DPFAIR_CACHE`` if set, else ``~/.cache/dpfair_analysis/runs``."""
    return Path(os.environ.get("DPFAIR_CACHE", Path.home() / ".cache" / "dpfair_analysis" / "runs"))


def config_key(*parts: Any) -> str:
    """SHA-256 of a canonical JSON form of ``parts`` (dataclasses as dicts) and the cache version."""
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

    text = json.dumps([CACHE_VERSION, plain(list(parts))], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


class RunCache:
    """Pickled results by key in one directory (``None`` directory: no caching)."""

    def __init__(self, directory: str | os.PathLike | None) -> None:
        self.directory = None if directory is None else Path(directory)

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        """The cached value for ``key``, or ``compute()`` stored under it."""
        if self.directory is None:
            return compute()
        path = self.directory / f"{key}.pkl"
        if path.exists():
            try:
                with open(path, "rb") as handle:
                    return pickle.load(handle)
            except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
                path.unlink(missing_ok=True)  # a stale or damaged entry: recompute
        value = compute()
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomically(path, lambda tmp: tmp.write_bytes(pickle.dumps(value)))
        return value
