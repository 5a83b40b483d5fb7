"""Writing files so that nothing is ever left half-written, and nothing but a file is ever replaced.

Every file the toolkit writes (``--out``, ``--report``, ``--plot``, ``--plots``, the run cache, run
records, figures) goes through :func:`write_atomically`: the content is written to a temporary file
beside the target and renamed over it, so a reader sees the old file or the new one, never a part.

What may be at the target path:

* nothing (a new file is created), or a **regular file** (it is replaced, keeping its mode if it is this
  user's, less any setuid, setgid or sticky bit; another user's file gets a new file's mode);
* a **symbolic link** of this user's (or root's): it is followed, as ``open(path, "w")`` would follow it --
  the file it points to is replaced (in that file's own directory) and the link itself is kept; a link to
  anything but a regular file or a new path is refused like that thing. A link **owned by another user**,
  at the path or at any directory on the way to it, is refused (``ValueError``): in a shared directory such
  as ``/tmp`` another user can plant one to have the toolkit overwrite a file of yours -- the rule the
  kernel's ``fs.protected_symlinks`` applies to ``open``, which a rename onto the link's target would skip;
* anything else -- a directory, a character or block device (``/dev/full``), a FIFO, a socket -- is
  **refused** with a ``ValueError`` before anything is written: renaming a file over it would destroy it.

The temporary file is written through its own descriptor (``/proc/self/fd/N`` where Linux offers it) and its
mode set with ``fchmod``: another user who can write the directory cannot swap the temporary name for a link
between its creation and the write. Elsewhere it is written by name.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterator

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a directory", "a FIFO (named pipe)", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: Where a descriptor can be reopened by a path that names it rather than a directory entry (Linux)
_FD_PATHS = os.path.isdir("/proc/self/fd")


def _trusted_link_owners() -> set[int]:
    """The users whose symbolic links are followed: this process's and root's (everyone's without ``getuid``)."""
    return {os.getuid(), 0} if hasattr(os, "getuid") else set()


def resolve_links(path: str | os.PathLike) -> Path:
    """``path`` made absolute with every symbolic link on it resolved, component by component, each link
    checked first: ``ValueError`` naming the link if another user owns it (:func:`_trusted_link_owners`), or
    if links nest more than 40 deep. Components that do not exist yet are kept as written."""
    given = Path(path)
    trusted = _trusted_link_owners()
    pending = list(Path(os.path.abspath(given)).parts)
    current = Path(pending.pop(0))
    hops, missing = 0, False
    while pending:
        part = pending.pop(0)
        if part == "." or (part == ".." and not missing):
            current = current if part == "." else current.parent
            continue
        candidate = current / part
        try:
            info = os.lstat(candidate) if not missing else None
        except (FileNotFoundError, NotADirectoryError):
            info, missing = None, True
        if info is not None and stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > 40:
                raise ValueError(f"cannot write {str(given)!r}: too many levels of symbolic links")
            if trusted and info.st_uid not in trusted:
                raise ValueError(f"refusing to write {str(given)!r}: {str(candidate)!r} is a symbolic link owned by "
                                 f"another user (uid {info.st_uid}), which could point anywhere; name the path it "
                                 "points to if you trust it")
            link = Path(os.readlink(candidate))
            pending = list(link.parts[1:] if link.is_absolute() else link.parts) + pending
            current = Path(link.anchor) if link.is_absolute() else current
            continue
        current = candidate
    return current


def output_target(path: str | os.PathLike) -> Path:
    """The file that writing ``path`` replaces or creates: ``path`` itself, or the end of its chain of
    symbolic links (each owned by this user or root: :func:`resolve_links`). ``ValueError`` (naming the path
    and what is there) if that is not a regular file or a new path whose directory exists."""
    given = Path(path)
    target = resolve_links(given) if given.is_symlink() or _has_link_above(given) else given
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise ValueError(f"cannot write {str(given)!r}: directory {str(target.parent)!r} does not exist") \
                from None
        return target
    if stat.S_ISREG(mode):
        return target
    what = _kind_of(mode)
    via = f" (the link {str(given)!r} points to {str(target)!r})" if target != given else ""
    raise ValueError(f"refusing to write {str(given)!r}: it is {what}{via}; only a regular file or a new path "
                     "is written")


def read_regular(path: str | os.PathLike) -> bytes:
    """The bytes of the regular file at ``path``, opened without blocking (a FIFO there would hang a plain read)
    and through this user's or root's links only (:func:`resolve_links`); ``ValueError`` naming what is there
    if it is not a regular file."""
    resolved = resolve_links(path)
    fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{str(path)!r} is {_kind_of(info.st_mode)}, not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


def _has_link_above(path: Path) -> bool:
    """Whether a directory on the way to ``path`` is a symbolic link (lexically, as written)."""
    return any(parent.is_symlink() for parent in Path(os.path.abspath(path)).parents)


def _kept_mode(target: Path) -> int:
    """The mode a rewritten ``target`` gets: its own permission bits if this user owns it (no setuid, setgid or
    sticky bit), else -- a new file, or one another user planted -- 0o666 less the umask."""
    try:
        info = target.stat()
    except FileNotFoundError:
        return 0o666 & ~_umask()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return 0o666 & ~_umask()
    return stat.S_IMODE(info.st_mode) & 0o777


def write_atomically(path: str | os.PathLike, write: Callable[[Path], None], *, mode: int | None = None,
                     follow_links: bool = True) -> Path:
    """Call ``write(tmp)`` on a temporary file beside the target, then rename it over the target.

    The target is :func:`output_target` of ``path`` (checked before ``write`` runs: only a regular file,
    a new path, or a symbolic link to one of those is written). With ``follow_links=False`` a symbolic
    link at ``path`` is refused too (``ValueError``): for files in a directory others may write, such as
    a shared run cache, where a link is planted rather than made by the user. If ``write`` fails the
    temporary file is removed and the target is untouched. The file gets ``mode`` if given, else the mode a
    plain ``open(path, "w")`` would give it (:func:`_kept_mode`: an existing file of this user's keeps its
    permission bits, a new one gets 0o666 minus the umask; the temporary file itself is 0o600). ``write`` is
    given a path that names the temporary file's descriptor where the system has one (module docstring).
    Returns the path written (the link's target for a link).
    """
    if not follow_links and Path(path).is_symlink():
        raise ValueError(f"refusing to write {str(path)!r}: it is a symbolic link (to {os.readlink(path)!r})")
    target = output_target(path)
    mode = _kept_mode(target) if mode is None else mode
    with private_temporary(target.parent, prefix=f".{target.name}.", suffix=".tmp") as temp:
        write(temp.through)
        if not temp.seal(mode):
            raise ValueError(f"refusing to write {str(path)!r}: its temporary file {str(temp.name)!r} was replaced by "
                             "someone else while it was written")
        os.replace(temp.name, target)
    return target


class PrivateTemporary:
    """A new file of :func:`private_temporary`: ``name`` in its directory, ``through`` the path of its own descriptor
    (``/proc/self/fd/N`` where the system has one, else ``name``)."""

    def __init__(self, fd: int, name: Path):
        self.fd, self.name = fd, name
        self.through = Path(f"/proc/self/fd/{fd}") if _FD_PATHS else name

    def ours(self) -> bool:
        """Whether ``name`` still names the file this descriptor holds (not one swapped in by someone else)."""
        try:
            return os.path.samestat(os.fstat(self.fd), os.lstat(self.name))
        except OSError:
            return False

    def seal(self, mode: int) -> bool:
        """Give the file ``mode`` through its descriptor; whether ``name`` is still this file (rename it only then)."""
        os.fchmod(self.fd, mode)
        return self.ours()


@contextlib.contextmanager
def private_temporary(directory: Path, *, prefix: str, suffix: str) -> Iterator[PrivateTemporary]:
    """A new file (mode 0o600, ``mkstemp``) in ``directory``, written through its descriptor: in a directory others may
    write, a name swapped for a link is neither written through nor published. The caller writes ``through``,
    :meth:`~PrivateTemporary.seal` s it and renames ``name`` into place inside the block; on an error the file is
    removed if ``name`` is still this file (never a file swapped in), and the descriptor is closed either way.
    The one pattern of :func:`write_atomically` and of the data cache's staging (``data/sources._stage``)."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=suffix)
    temp = PrivateTemporary(fd, Path(name))
    try:
        yield temp
    except BaseException:
        with contextlib.suppress(OSError):
            if temp.ours():
                os.unlink(temp.name)
        raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def directory_lock(directory: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``directory`` itself (no lock file is created): writers that read, change
    and rewrite a file in it take turns, so two processes recording into one file each keep the other's entry.
    Where ``flock`` is missing (Windows) or the file system refuses it, nothing is locked: each write is still
    atomic, and a lost entry is computed again."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock
        yield
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # e.g. a file system without locks
            pass
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


#: Metadata of a configuration field added after its dataclass was first keyed:
#: ``field(default=..., metadata=KEY_OMITS_DEFAULT)`` leaves the field out of the run records' and the cache's key
#: (:func:`~dpfair_analysis.experiments.cache.config_key`) while it holds its default, so a new option keeps every
#: recorded run's key (the runs that never set it are the same runs). Here, below every configuration that uses it.
KEY_OMITS_DEFAULT = {"key": "omit default"}
