"""Writing files so that nothing is ever left half-written, and nothing but a file is ever replaced.

Every file the toolkit writes (``--out``, ``--report``, ``--plot``, ``--plots``, the run cache, run
records, figures) goes through :func:`write_atomically`: the content is written to a temporary file
beside the target and renamed over it, so a reader sees the old file or the new one, never a part.

What may be at the target path:

* nothing (a new file is created), or a **regular file** (it is replaced, keeping its mode);
* a **symbolic link**: it is followed, as ``open(path, "w")`` would follow it -- the file it points to
  is replaced (in that file's own directory) and the link itself is kept; a link to anything but a
  regular file or a new path is refused like that thing;
* anything else -- a directory, a character or block device (``/dev/full``), a FIFO, a socket -- is
  **refused** with a ``ValueError`` before anything is written: renaming a file over it would destroy it.
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


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def output_target(path: str | os.PathLike) -> Path:
    """The file that writing ``path`` replaces or creates: ``path`` itself, or the end of its chain of
    symbolic links. ``ValueError`` (naming the path and what is there) if that is not a regular file or a
    new path whose directory exists."""
    given = Path(path)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise ValueError(f"cannot write {str(given)!r}: directory {str(target.parent)!r} does not exist") \
                from None
        return target
    if stat.S_ISREG(mode):
        return target
    what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    via = f" (the link {str(given)!r} points to {str(target)!r})" if target != given else ""
    raise ValueError(f"refusing to write {str(given)!r}: it is {what}{via}; only a regular file or a new path "
                     "is written")


def write_atomically(path: str | os.PathLike, write: Callable[[Path], None], *, mode: int | None = None,
                     follow_links: bool = True) -> Path:
    """Call ``write(tmp)`` on a temporary file beside the target, then rename it over the target.

    The target is :func:`output_target` of ``path`` (checked before ``write`` runs: only a regular file,
    a new path, or a symbolic link to one of those is written). With ``follow_links=False`` a symbolic
    link at ``path`` is refused too (``ValueError``): for files in a directory others may write, such as
    a shared run cache, where a link is planted rather than made by the user. If ``write`` fails the
    temporary file is removed and the target is untouched. The file gets ``mode`` if given, else the mode a
    plain ``open(path, "w")`` would give it: an existing file's mode is kept, a new file gets 0o666 minus the
    umask (the temporary file itself is 0o600). Returns the path written (the link's target for a link).
    """
    if not follow_links and Path(path).is_symlink():
        raise ValueError(f"refusing to write {str(path)!r}: it is a symbolic link (to {os.readlink(path)!r})")
    target = output_target(path)
    if mode is None:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


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
