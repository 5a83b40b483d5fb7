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
tests show changes no number (e.g. a refactor), never by default. The directory is
``$DPFAIR_CACHE`` or ``~/.cache/dpfair_analysis/runs``.

Entries store data, never code (:mod:`~dpfair_analysis.experiments.cache_format`: JSON and ``.npy``
arrays in one ``KEY.npz`` zip file, read without pickles), written atomically. Reading one runs nothing,
and its header (key, fingerprint) is checked before anything else in it is read. A cache directory may be
shared (a lab's scratch space, a cluster's), so nothing in it is trusted to be what its name says: every
entry and claim is opened with ``O_NOFOLLOW`` and checked to be a regular file (a planted symbolic link,
FIFO or device is refused with one :class:`CacheWarning` and the run goes on uncached -- the file a link
points to is never read or written), and an entry another user owns, or others may write, is not served.
Entries of earlier versions (``KEY.pkl`` pickles) are never read: they are said once and recomputed.

A damaged or unreadable entry is reported (a warning naming the file) and recomputed; the
cache counts what it served (:attr:`RunCache.hits`) and what it computed
(:attr:`RunCache.misses`), so commands can say which results came from it.

A cache never costs a result: a directory that cannot be written, or a value this format cannot
store, is said once (a :class:`CacheWarning`) and the runs go on uncached. Two processes that need the
same run do not both compute it: the first claims the key (an advisory lock under ``.claims/``,
released when its process ends, however it ends) and the second waits for its entry -- at most
``$DPFAIR_CACHE_CLAIM_TIMEOUT`` seconds (default :data:`CLAIM_TIMEOUT`, for a holder that hangs), then it
computes the run itself.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import stat
import time
import warnings
import zipfile
from dataclasses import MISSING, Field, fields, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from dpfair_analysis.experiments import cache_format
from dpfair_analysis.io import KEY_OMITS_DEFAULT, directory_lock, read_regular, write_atomically  # noqa: F401  (re-exported)

PACKAGE = Path(__file__).resolve().parents[1]
#: Package parts whose code determines a result (the CLI, plotting and verification do not).
RESULT_CODE = ("data", "models.py", "gradients.py", "fast_gradients.py", "validation.py", "privacy", "fairness",
               "theory", "training", "diagnose", "experiments")
#: Files under :data:`RESULT_CODE` that store results and compute none: a change to them keeps every entry.
STORAGE_CODE = ("experiments/cache.py", "experiments/cache_format.py")
RESULT_LIBRARIES = ("torch", "numpy", "pandas", "scikit-learn", "scipy", "dp-accounting", "fairlearn")


#: Version of the entry layout (3: data files, :mod:`~dpfair_analysis.experiments.cache_format`; 2: pickles of
#: {"fingerprint", "value"}): an entry's file carries it (old layouts are never read, :data:`SUFFIX`).
ENTRY_FORMAT = 3
#: Version of the keys' canonical form (:func:`config_key`), independent of :data:`ENTRY_FORMAT`: a new file
#: layout must not re-key the committed run records (it did once, from 2 to 3, and the 68 recorded MNIST runs
#: would have been retrained); bump it only when the same run would otherwise get another key's text.
KEY_FORMAT = 2
#: Entries' file suffix (a zip file of ``.npy`` arrays and a JSON header, as numpy's ``.npz`` is).
SUFFIX = ".npz"
#: Seconds a process waits for another's claim on a run before computing it itself (``$DPFAIR_CACHE_CLAIM_TIMEOUT``).
CLAIM_TIMEOUT = 12 * 3600.0
#: Seconds of waiting on a claim after which the wait is said (once)
CLAIM_NOTICE = 10.0


class CacheWarning(UserWarning):
    """A cache entry could not be used and was recomputed."""


def default_cache_dir() -> Path:
    """``$DPFAIR_CACHE`` if set, else ``~/.cache/dpfair_analysis/runs``."""
    return Path(os.environ.get("DPFAIR_CACHE", Path.home() / ".cache" / "dpfair_analysis" / "runs"))


def source_fingerprint(root: Path, parts: Sequence[str], libraries: Sequence[str], *,
                       skip: Sequence[str] = ()) -> str:
    """SHA-256 over the Python source of ``parts`` (files or folders under ``root``; sorted paths relative to it and
    their contents, less ``skip``) and the installed versions of ``libraries``."""
    digest = hashlib.sha256()
    for part in parts:
        base = root / part
        for path in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            name = path.relative_to(root).as_posix()
            if name in skip:
                continue
            digest.update(name.encode())
            digest.update(path.read_bytes())
    for name in libraries:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name}=={version}".encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """:func:`source_fingerprint` of :data:`RESULT_CODE` (less :data:`STORAGE_CODE`) and :data:`RESULT_LIBRARIES`:
    what, beside the configuration, determines a result."""
    return source_fingerprint(PACKAGE, RESULT_CODE, RESULT_LIBRARIES, skip=STORAGE_CODE)




def config_key(*parts: Any) -> str:
    """SHA-256 of a canonical JSON form of ``parts`` (dataclasses as dicts, less the fields marked
    :data:`~dpfair_analysis.io.KEY_OMITS_DEFAULT` that hold their default)."""
    def plain(value: Any, within: bool = False) -> Any:  # within a dataclass: nested ones carry no __type__
        if is_dataclass(value) and not isinstance(value, type):
            named = {} if within else {"__type__": type(value).__name__}
            return {**named, **{f.name: plain(getattr(value, f.name), True) for f in fields(value)
                                if not _keeps_default(value, f)}}
        if isinstance(value, dict):
            return {str(k): plain(v, within) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
        if isinstance(value, (list, tuple)):
            return [plain(v, within) for v in value]
        if isinstance(value, float) and value != value:
            return "nan"
        return value

    text = json.dumps([KEY_FORMAT, plain(list(parts))], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _keeps_default(instance: Any, spec: Field) -> bool:
    """Whether ``spec`` is a :data:`~dpfair_analysis.io.KEY_OMITS_DEFAULT` field of ``instance`` holding its declared
    default."""
    if spec.metadata.get("key") != KEY_OMITS_DEFAULT["key"]:
        return False
    default = spec.default_factory() if spec.default is MISSING else spec.default
    return getattr(instance, spec.name) == default


def _served(fingerprint: str, where: Path, *, warn: bool, current: str | None = None) -> str | None:
    """Whether an entry computed by the code of ``fingerprint`` may be served: ``"current"`` (this code's:
    ``current``, default :func:`code_fingerprint`), ``"stale"`` (other code's, served because
    ``DPFAIR_CACHE_ALLOW_STALE=1``; a :class:`CacheWarning` naming ``where`` if ``warn``) or ``None`` (other
    code's: recompute it)."""
    current = current or code_fingerprint()
    if fingerprint == current:
        return "current"
    if os.environ.get("DPFAIR_CACHE_ALLOW_STALE") != "1":
        return None
    if warn:  # once per store: a redraw can serve hundreds; the store's summary counts them
        warnings.warn(f"result cache entry {where} was computed by other code (fingerprint "
                      f"{fingerprint[:12]}, now {current[:12]}); served because "
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


def _not_servable(info: os.stat_result) -> str | None:
    """Why a file with this ``lstat``/``fstat`` must not be used as a cache entry (not a regular file, another
    user owns it, or others may write it), or ``None``."""
    if not stat.S_ISREG(info.st_mode):
        return f"it is {_kind(info.st_mode)}, not a regular file"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"it is owned by uid {info.st_uid}, not by this user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "other users may write it"
    return None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """A descriptor of ``path`` opened with ``flags`` without following a link and without blocking on a FIFO;
    ``OSError`` (``ELOOP`` for a link) or ``ValueError`` if what is there is not a regular file."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ValueError(f"it is {_kind(info.st_mode)}, not a regular file")
    return fd


class RunCache:
    """Results by key in one directory, stored as data (``None`` directory: no caching).

    A directory that cannot be written is not an error: the first failed write says so (a
    :class:`CacheWarning`) and later results are not stored; results are never lost to it.
    """

    def __init__(self, directory: str | os.PathLike | None) -> None:
        self.directory = None if directory is None else Path(directory)
        self.hits = 0
        self.misses = 0
        self.stale = 0
        self.writable = self.directory is not None
        self._said: set[str] = set()
        self._origins: dict[str, str] = {}
        #: the entry file's stamp (:meth:`_entry_stamp`) when a lookup of the key found nothing servable
        self._missed: dict[str, tuple | None] = {}

    def origin(self, key: str) -> str | None:
        """The fingerprint of the code that computed the entry :meth:`lookup` served for ``key`` (another code's
        where ``DPFAIR_CACHE_ALLOW_STALE=1`` served it), or None if none was served: what a record of it names."""
        return self._origins.get(key)

    def path_of(self, key: str) -> Path:
        """The file of ``key``'s entry."""
        return self.directory / f"{key}{SUFFIX}"

    def _warn_once(self, topic: str, message: str) -> None:
        """One :class:`CacheWarning` per ``topic`` and cache (a sweep may meet hundreds of the same problem)."""
        if topic not in self._said:
            self._said.add(topic)
            warnings.warn(message, CacheWarning, stacklevel=4)

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        """The cached value for ``key``, or ``compute()`` stored under it (see :meth:`lookup`). While it
        computes, ``key`` is claimed (:meth:`claim`): another process asking for it waits for this entry."""
        found, value = self.lookup(key)
        if found:
            return value
        return self.compute_and_store(key, compute)

    def compute_and_store(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` stored under ``key`` -- unless another process holds the claim on ``key``: then wait
        for it and serve what it stored (computing only if it stored nothing, e.g. it was killed). A claim found
        free is checked for an entry first: another process may have stored the run and let go of it since the
        caller last looked."""
        with self.claim(key, wait=False) as free:
            if free:
                entry = self._entry_stamp(key)  # looked up again only if an entry appeared or changed since
                found, value = self.lookup(key) if entry is not None and entry != self._missed.get(key, ()) \
                    else (False, None)
                if found:
                    return value
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
        yields whether it is held. ``wait=True`` waits until another holder is done, at most
        ``$DPFAIR_CACHE_CLAIM_TIMEOUT`` seconds (then a :class:`CacheWarning`, and ``True``: compute it);
        ``wait=False`` yields ``False`` at once if another process holds it. Where no lock can be taken (no
        directory, not writable, no ``fcntl``, or something other than a directory or regular file planted
        at the claim's path: said once) it yields ``True``: the claim is an economy, never a condition."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover -- not POSIX
            fcntl = None
        if self.directory is None or not self.writable or fcntl is None:
            yield True
            return
        claims = self.directory / ".claims"
        try:
            claims.mkdir(parents=True, exist_ok=True)
            if not stat.S_ISDIR(os.lstat(claims).st_mode):
                raise ValueError(f"{claims} is {_kind(os.lstat(claims).st_mode)}")
            fd = _open_regular(claims / key, os.O_RDWR | os.O_CREAT)
        except ValueError as error:
            self._warn_once("claim", f"run cache claim {claims / key} not taken: {error}; runs are not claimed "
                                     "(two processes may compute the same run)")
            yield True
            return
        except OSError as error:
            if error.errno == errno.ELOOP:  # a symbolic link at the claim's path
                self._warn_once("claim", f"run cache claim {claims / key} not taken: it is a symbolic link; runs "
                                         "are not claimed (two processes may compute the same run)")
            yield True
            return
        info = os.fstat(fd)
        if (hasattr(os, "getuid") and info.st_uid != os.getuid()) or info.st_mode & 0o022:
            os.close(fd)  # another user's claim file, or one others can lock: it could hold this run for 12 h
            self._warn_once("claim", f"run cache claim {claims / key} not honoured: it belongs to another user or "
                                     "others can write it; runs are computed without claims")
            yield True
            return
        with os.fdopen(fd, "r+b") as handle:
            held = self._lock(fcntl, handle, wait=wait, where=claims / key)
            if held is None:
                yield True
                return
            try:
                yield held
            finally:
                if held:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    def _lock(self, fcntl, handle, *, wait: bool, where: Path) -> bool | None:
        """Take the ``flock``: ``True`` held, ``False`` held by another (``wait=False``), ``None`` no lock
        (locking unsupported, or the wait timed out: the caller computes)."""
        timeout = float(os.environ.get("DPFAIR_CACHE_CLAIM_TIMEOUT", CLAIM_TIMEOUT))
        start = time.monotonic()
        deadline, pause, said = start + timeout, 0.05, False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if not wait:
                    return False
            except OSError:
                return None
            if time.monotonic() >= deadline:
                warnings.warn(f"waited {timeout:g} s for another process's claim {where} "
                              "($DPFAIR_CACHE_CLAIM_TIMEOUT); computing the run here", CacheWarning, stacklevel=5)
                return None
            if not said and time.monotonic() - start >= CLAIM_NOTICE:
                said = True  # a silent wait reads as a hang
                warnings.warn(f"waiting for another process computing this run (claim {where}); it is served "
                              f"when that one stores it, or computed here after {timeout:g} s "
                              "($DPFAIR_CACHE_CLAIM_TIMEOUT)", CacheWarning, stacklevel=5)
            time.sleep(pause)
            pause = min(2 * pause, 2.0)

    def _entry_stamp(self, key: str) -> tuple | None:
        """(inode, modification time, size) of ``key``'s entry file, None if there is none."""
        if self.directory is None:
            return None
        try:
            info = os.lstat(self.path_of(key))
        except OSError:
            return None
        return info.st_ino, info.st_mtime_ns, info.st_size

    def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` if ``key`` has a usable entry (counted as a hit), else ``(False, None)`` (the entry
        file's stamp is kept: :meth:`compute_and_store` looks again only at an entry that appeared since);
        :meth:`_lookup` says the rest."""
        found, value = self._lookup(key)
        if not found:
            self._missed[key] = self._entry_stamp(key)
        return found, value

    def _lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` if ``key`` has a usable entry (counted as a hit), else ``(False, None)``.

        The entry is opened without following a link and read only if it is a regular file that this user
        owns and nobody else may write (else a :class:`CacheWarning`, and it is missing). Its header is
        read first: an entry for another key, or written by other code (:func:`code_fingerprint`), is
        missing -- the latter served under ``DPFAIR_CACHE_ALLOW_STALE=1`` (the first with a warning;
        :meth:`summary` counts them all) -- before any of its arrays is read. One that cannot be read back
        (truncated, not an entry) is reported with a :class:`CacheWarning` naming its file and is missing.
        """
        if self.directory is None:
            return False, None
        path = self.path_of(key)
        try:
            info = os.lstat(path)
        except OSError:
            self._say_old_pickles(key)
            return False, None
        refusal = _not_servable(info)
        if refusal is not None:
            warnings.warn(f"result cache entry {path} is not read: {refusal}; running uncached", CacheWarning,
                          stacklevel=3)
            return False, None
        try:
            fd = _open_regular(path, os.O_RDONLY)
            with os.fdopen(fd, "rb") as handle:
                refusal = _not_servable(os.fstat(handle.fileno()))  # the file opened, not the name looked at
                if refusal is not None:
                    raise ValueError(refusal)
                with zipfile.ZipFile(handle) as archive:
                    header = cache_format.read_header(archive)
                    if header["key"] != key:
                        raise ValueError(f"it holds the entry of key {str(header['key'])[:12]}")
                    verdict = _served(header["fingerprint"], path, warn=not self.stale)
                    if verdict is None:
                        return False, None
                    value = cache_format.read_value(archive, header["value"])
        except Exception as error:  # any unreadable entry: say so and recompute
            warnings.warn(f"result cache entry {path} is unreadable ({type(error).__name__}: {error}); "
                          "recomputing it", CacheWarning, stacklevel=3)
            return False, None
        self.hits += 1
        self.stale += verdict == "stale"
        self._origins[key] = header["fingerprint"]
        return True, value

    def _say_old_pickles(self, key: str) -> None:
        """Once per cache: entries of the pickle format (``KEY.pkl``) are here and are never read."""
        if "pickles" not in self._said and (self.directory / f"{key}.pkl").exists():
            self._warn_once("pickles", f"the result cache {self.directory} holds entries of an earlier version "
                                       "(*.pkl, pickles: reading one can run code); they are never read, their "
                                       "runs are recomputed and stored as data -- delete the *.pkl files to "
                                       "reclaim the space")

    def store(self, key: str, value: Any) -> None:
        """Record ``value`` (just computed by this code) under ``key``, atomically; counted as a miss.

        If the directory cannot be written, a :class:`CacheWarning` says so once and nothing more is
        stored; a value the format cannot store, or something other than a regular file at the entry's
        path, is said and not stored. The caller keeps ``value`` either way."""
        self.misses += 1
        if self.directory is None or not self.writable:
            return
        path = self.path_of(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                refusal = None if stat.S_ISREG(os.lstat(path).st_mode) else _kind(os.lstat(path).st_mode)
            except FileNotFoundError:
                refusal = None
            if refusal is not None:
                warnings.warn(f"result cache entry {path} is not written: it is {refusal}; running uncached",
                              CacheWarning, stacklevel=2)
                return

            def write(tmp: Path) -> None:
                with open(tmp, "wb") as handle:
                    cache_format.write_entry(handle, key=key, fingerprint=code_fingerprint(), value=value)

            # private: lookup() serves only entries no other user can write; a link at the path is refused
            write_atomically(path, write, mode=0o600, follow_links=False)
        except cache_format.Uncacheable as error:
            self._warn_once("uncacheable", f"a result is not cached ({error}); it is computed again each time")
        except ValueError as error:  # something was planted at the path between the check and the write
            warnings.warn(f"result cache entry {path} is not written: {error}", CacheWarning, stacklevel=2)
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
    diff shows which runs arrived. ``fingerprint`` names other code than training's as what determines the
    rows (e.g. the privacy-testing kit's, for recorded audits).
    """

    def __init__(self, path: str | os.PathLike | None, *, fingerprint: Callable[[], str] | None = None) -> None:
        self.path = None if path is None else Path(path)
        self._fingerprint = fingerprint
        self.hits = 0
        self.misses = 0
        self.stale = 0
        self.other_sampler = 0
        self._read: tuple[tuple[int, int], dict[str, dict]] | None = None  # (file stamp, its entries)

    def fingerprint(self) -> str:
        """The fingerprint of the code these rows come from today (default :func:`code_fingerprint`)."""
        return (self._fingerprint or code_fingerprint)()

    def summary(self) -> str:
        """E.g. ``"64 of 64 runs from run records at /path, 64 of them with Poisson sampler 1"``."""
        total = self.hits + self.misses
        if not total or self.path is None:
            return ""
        notes = [f"{self.stale} of them from other code (DPFAIR_CACHE_ALLOW_STALE)"] if self.stale else []
        notes += [f"{self.other_sampler} of them trained with an earlier Poisson sampler"] if self.other_sampler else []
        return f"{self.hits} of {total} runs from run records at {self.path}" + "".join(f", {n}" for n in notes)

    def _entries(self) -> dict[str, dict]:
        """The file's entries, parsed again only when its size or modification time changed (a recorder
        planning a thousand runs reads a megabyte once, not once per run)."""
        if self.path is None or not self.path.exists():
            return {}
        stat = self.path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._read is not None and self._read[0] == stamp:
            return self._read[1]
        try:  # a FIFO or another user's link at the path is refused, not waited on or followed
            entries = json.loads(read_regular(self.path).decode())["records"]
        except Exception as error:  # a damaged file is a real loss: refuse to overwrite it silently
            raise ValueError(f"run records file {self.path} is unreadable ({type(error).__name__}: {error}); "
                             "repair or remove it") from None
        self._read = (stamp, entries)
        return entries

    def recorded(self, key: str) -> bool:
        """Whether :meth:`get` would serve ``key`` (counted nowhere, said nowhere): what a recorder plans by."""
        entry = self._entries().get(key)
        return entry is not None and _served(entry["fingerprint"], self.path, warn=False,
                                             current=self.fingerprint()) is not None

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
        verdict = _served(entry["fingerprint"], self.path, warn=not self.stale, current=self.fingerprint())
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

    def put(self, key: str, rows: list[dict], *, label: str = "", fingerprint: str | None = None) -> None:
        """Record ``rows`` under ``key``: computed by this code, or by the code of ``fingerprint`` (a run cache
        entry served from other code: :meth:`RunCache.origin`); ``label`` says what run they summarise (for a
        person reading the file). Counted as a miss."""
        self.misses += 1
        if self.path is None:
            return
        from dpfair_analysis.training.loop import POISSON_SAMPLER_VERSION

        entry = {"label": label, "fingerprint": fingerprint or self.fingerprint(),
                 "poisson_sampler": POISSON_SAMPLER_VERSION, "rows": rows}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # read, add and rewrite under the directory's lock: two recorders putting into one file at once (a second
        # recorder taking the plan from its end) each keep the other's entry
        with directory_lock(self.path.parent):
            self._read = None
            entries = dict(self._entries()) | {key: entry}
            text = json.dumps({"format": 1, "records": dict(sorted(entries.items()))}, indent=1)
            write_atomically(self.path, lambda tmp: tmp.write_text(text + "\n"))
            self._read = None

    def rows_or_compute(self, key: str, compute: Callable[[], list[dict]], *, label: str = "") -> list[dict]:
        """The recorded rows of ``key``, or ``compute()`` recorded under it."""
        rows = self.get(key)
        if rows is None:
            rows = compute()
            self.put(key, rows, label=label)
        return rows
