"""Shared steps of the tabular loaders: locate a file, check columns, encode, scale.

Scaling is always fitted on the whole data set the loader returns (as the papers do);
a train/test split made afterwards therefore sees test statistics in its scaling. This
is a deliberate reproduction choice, recorded in each data set's ``info``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.sources import fetch
from dpfair_analysis.validation import check_choice

SCALINGS = ("minmax", "zscore", "none")


def resolve_file(name: str, path: str | os.PathLike | None, *, arg: str = "path") -> Path:
    """``path`` if given (it must exist), else the verified cached raw file ``name``.

    A file given explicitly is the caller's responsibility: it is not compared to the
    pinned hash (fixtures and user copies must load), only the loader's structural
    checks (columns, values) apply.
    """
    if path is None:
        return fetch(name)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{arg} must be a path (str or os.PathLike), got {type(path).__name__}")
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{arg}={str(path)!r} is not a file; expected the raw file {name}")
    return path


def resolve_in_root(name: str, root: str | os.PathLike | None) -> Path:
    """``root/name`` if ``root`` is given (it must contain the file), else ``fetch(name)``."""
    if root is None:
        return fetch(name)
    if not isinstance(root, (str, os.PathLike)):
        raise TypeError(f"root must be a directory path, got {type(root).__name__}")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"root={str(root)!r} is not a directory")
    path = root / name
    if not path.is_file():
        raise FileNotFoundError(f"root={str(root)!r} has no file {name!r}")
    return path


def require_columns(frame: pd.DataFrame, required: Iterable[str], *, what: str) -> None:
    """Raise ValueError naming the missing columns of ``frame``."""
    required = list(required)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}; it has {list(frame.columns)}, "
                         f"and the loader needs {required}")


def to_numeric(frame: pd.DataFrame, columns: Iterable[str], *, what: str) -> pd.DataFrame:
    """Convert ``columns`` to float, raising ValueError naming a column that is not numeric."""
    frame = frame.copy()
    for col in columns:
        try:
            frame[col] = pd.to_numeric(frame[col], errors="raise").astype(float)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{what}: column {col!r} must be numeric ({err})") from None
    return frame


def one_hot(frame: pd.DataFrame, columns: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """One indicator column per level present, levels in sorted order; names ``col=level``."""
    blocks, names = [], []
    for col in columns:
        values = frame[col].astype(str).to_numpy()
        levels = sorted(set(values))
        blocks.append((values[:, None] == np.asarray(levels)[None, :]).astype(np.float64))
        names += [f"{col}={level}" for level in levels]
    if not blocks:
        return np.zeros((len(frame), 0)), []
    return np.concatenate(blocks, axis=1), names


def label_encode(frame: pd.DataFrame, columns: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """One integer column per categorical, codes = rank of the level in sorted order."""
    blocks = []
    for col in columns:
        values = frame[col].astype(str).to_numpy()
        levels = np.asarray(sorted(set(values)))
        blocks.append(np.searchsorted(levels, values).astype(np.float64)[:, None])
    if not blocks:
        return np.zeros((len(frame), 0)), []
    return np.concatenate(blocks, axis=1), list(columns)


def scale(X: np.ndarray, how: str, *, arg: str = "scaling") -> np.ndarray:
    """Column-wise scaling fitted on ``X`` itself.

    ``"minmax"``: :math:`(x - \\min) / (\\max - \\min)` into [0, 1];
    ``"zscore"``: :math:`(x - \\bar x) / s` with the population standard deviation;
    ``"none"``: unchanged. Constant columns become 0 (no division by zero).
    """
    check_choice(how, arg, SCALINGS)
    X = np.asarray(X, dtype=np.float64)
    if how == "none" or X.size == 0:
        return X
    if how == "minmax":
        low, span = X.min(axis=0), np.ptp(X, axis=0)
        return np.where(span > 0, (X - low) / np.where(span > 0, span, 1.0), 0.0)
    mean, std = X.mean(axis=0), X.std(axis=0)
    return np.where(std > 0, (X - mean) / np.where(std > 0, std, 1.0), 0.0)


def encode(values: Sequence[object] | pd.Series, mapping: Mapping[object, int], *, what: str) -> np.ndarray:
    """Map raw values to integer ids, raising ValueError naming unknown values."""
    values = pd.Series(values)
    codes = values.map(dict(mapping))
    if codes.isna().any():
        unknown = sorted({str(v) for v in values[codes.isna()].unique()})[:10]
        raise ValueError(f"{what} has value(s) {unknown}; allowed are {sorted(map(str, mapping))}")
    return codes.to_numpy(dtype=np.int64)


def make_dataset(X: np.ndarray, y: np.ndarray, group: np.ndarray, *, feature_names: Sequence[str],
                 group_names: Sequence[str], label_names: Sequence[str], name: str,
                 info: Mapping[str, object]) -> GroupedDataset:
    """Pack numpy arrays into a :class:`GroupedDataset` (float32 X, int64 y and group)."""
    return GroupedDataset(
        X=torch.from_numpy(np.array(X, dtype=np.float32, order="C", copy=True)),
        y=torch.from_numpy(np.array(y, dtype=np.int64, copy=True)),
        group=torch.from_numpy(np.array(group, dtype=np.int64, copy=True)),
        group_names=tuple(group_names), label_names=tuple(label_names),
        feature_names=tuple(feature_names), name=name, info=dict(info))


def renamed(ds: GroupedDataset, name: str, **info: object) -> GroupedDataset:
    """``ds`` under a new name, with ``info`` entries added (for derived variants)."""
    return replace(ds, name=name, info={**ds.info, **info})
