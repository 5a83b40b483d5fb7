"""Writing files so that nothing is ever left half-written."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Callable


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it to ``path``.

    If ``write`` fails the temporary file is removed and ``path`` is untouched. The file
    gets the mode a plain ``open(path, "w")`` would give it: an existing file's mode is
    kept, a new file gets 0o666 minus the umask (the temporary file itself is 0o600).
    """
    path = Path(path)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
