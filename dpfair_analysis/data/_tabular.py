"""Shared steps of the tabular loaders: locate a file, check columns, encode, scale.

Scaling is always fitted on the whole data set the loader returns (as the papers do);
a train/test split made afterwards therefore sees test statistics in its scaling. This
is a deliberate reproduction choice, recorded in each data set's ``info``.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.sources import MissingValuesWarning, fetch
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


def drop_missing(frame: pd.DataFrame, columns: Sequence[str], *, what: str,
                 warn: bool = True) -> tuple[pd.DataFrame, dict[str, object]]:
    """Remove rows with a missing value in ``columns``; say how many and why.

    Returns the complete rows (index reset) and the record the loaders put into
    ``info``: ``raw_rows``, ``rows_dropped_missing`` and ``missing_by_column`` (rows
    missing each column, only columns with any). With ``warn`` a
    :class:`~dpfair_analysis.data.sources.DataWarning` names the counts whenever rows
    are removed (loaders pass ``warn=False`` only where the removal is the paper's
    documented protocol, e.g. Adult's 3,620 rows with ``?``).
    """
    columns = list(columns)
    missing = frame[columns].isna()
    by_column = {c: int(n) for c, n in missing.sum().items() if n}
    incomplete = missing.any(axis=1)
    dropped = int(incomplete.sum())
    record: dict[str, object] = {"raw_rows": len(frame), "rows_dropped_missing": dropped,
                                 "missing_by_column": by_column}
    if dropped and warn:
        detail = ", ".join(f"{c} {n:,}" for c, n in by_column.items())
        warnings.warn(f"{what}: removed {dropped:,} of {len(frame):,} rows with a missing value "
                      f"({detail}); {len(frame) - dropped:,} rows remain", MissingValuesWarning, stacklevel=3)
    return frame[~incomplete].reset_index(drop=True), record


def missing_summary(info: Mapping[str, object]) -> str | None:
    """One line on the rows a loader removed for missing values, from its ``info``; None if unknown."""
    if "rows_dropped_missing" not in info:
        return None
    dropped, raw = int(info["rows_dropped_missing"]), int(info.get("raw_rows", 0))
    if not dropped:
        return f"missing values: none ({raw:,} raw rows, all complete)"
    by_column = info.get("missing_by_column") or {}
    detail = f" (rows missing {', '.join(f'{c}: {n:,}' for c, n in by_column.items())})" if by_column else ""
    return f"missing values: {dropped:,} of {raw:,} raw rows removed{detail}"


def read_arff(path: str | os.PathLike, *, what: str) -> tuple[pd.DataFrame, dict[str, tuple[str, ...] | None]]:
    """A dense Weka ARFF file as strings (``?`` -> NaN), and each attribute's declared levels.

    Supports what the fairness benchmarks use: ``@relation``, ``@attribute NAME
    {level,...}`` (nominal; levels returned) or a numeric/string type (None), ``@data``
    with comma-separated rows, ``%`` comments, values optionally quoted with ``'``.
    A nominal value outside its declared levels, a row with the wrong number of fields,
    or a sparse ``{...}`` row raises ValueError naming the file and the attribute.
    """
    path = Path(path)
    attributes: dict[str, tuple[str, ...] | None] = {}
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        for line_no, line in enumerate(fh, 1):
            text = line.strip()
            if not text or text.startswith("%"):
                continue
            keyword = text.split(None, 1)[0].lower()
            if keyword == "@relation":
                continue
            if keyword == "@attribute":
                match = re.match(r"@attribute\s+('[^']*'|\"[^\"]*\"|\S+)\s+(.*)$", text, flags=re.I)
                if not match:
                    raise ValueError(f"{what} at {path}, line {line_no}: cannot read the @attribute line")
                name, kind = match.group(1).strip("'\""), match.group(2).strip()
                attributes[name] = (tuple(v.strip().strip("'\"") for v in kind[1:-1].split(","))
                                    if kind.startswith("{") and kind.endswith("}") else None)
                continue
            if keyword == "@data":
                break
            raise ValueError(f"{what} at {path}, line {line_no}: expected @relation, @attribute or @data, "
                             f"got {text[:40]!r} (is this an ARFF file?)")
        else:
            raise ValueError(f"{what} at {path} has no @data section (is this an ARFF file?)")
        if not attributes:
            raise ValueError(f"{what} at {path} declares no @attribute")
        try:
            frame = pd.read_csv(fh, header=None, names=list(attributes), dtype=str, comment="%",
                                quotechar="'", keep_default_na=False, na_values=[""],
                                skipinitialspace=True, skip_blank_lines=True, on_bad_lines="error")
        except pd.errors.ParserError as err:
            raise ValueError(f"{what} at {path}: a data row does not have {len(attributes)} fields "
                             f"({' '.join(str(err).split())})") from None
    if len(frame) and frame.iloc[:, 0].astype(str).str.startswith("{").any():
        raise ValueError(f"{what} at {path} is a sparse ARFF file; only dense rows are supported")
    short = frame.isna().any(axis=1)  # '?' is still a string here: NaN means a field is absent or empty
    if short.any():
        raise ValueError(f"{what} at {path}: {int(short.sum())} data row(s) have fewer than "
                         f"{len(attributes)} fields or an empty field (first: data row "
                         f"{int(short.to_numpy().argmax()) + 1}; ARFF writes a missing value as ?)")
    frame = frame.replace("?", np.nan)
    for name, levels in attributes.items():
        if levels is None:
            continue
        values = frame[name].dropna()
        bad = sorted(set(values.unique()) - set(levels))
        if bad:
            raise ValueError(f"{what} at {path}: attribute {name!r} has value(s) {bad[:10]} outside its "
                             f"declared levels {list(levels)}")
    return frame, attributes


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


def scale(X: np.ndarray, how: str, *, arg: str = "scaling", fitted_on: np.ndarray | None = None) -> np.ndarray:
    """Column-wise scaling of ``X`` fitted on ``fitted_on`` (default ``X`` itself).

    ``"minmax"``: :math:`(x - \\min) / (\\max - \\min)`, into [0, 1] on the fitted rows;
    ``"zscore"``: :math:`(x - \\bar x) / s` with the population standard deviation;
    ``"none"``: unchanged. Columns constant on the fitted rows become 0 (no division by zero). Rows other than
    the fitted ones (a test fold scaled with its training fold's statistics) may leave [0, 1] or the unit scale.
    """
    check_choice(how, arg, SCALINGS)
    X = np.asarray(X, dtype=np.float64)
    reference = X if fitted_on is None else np.asarray(fitted_on, dtype=np.float64)
    if how == "none" or X.size == 0 or reference.size == 0:
        return X
    if reference.ndim != 2 or X.ndim != 2 or reference.shape[1] != X.shape[1]:
        raise ValueError(f"fitted_on must have X's {X.shape[1:]} columns, got shape {reference.shape}")
    if how == "minmax":
        offset, divisor = reference.min(axis=0), np.ptp(reference, axis=0)
    else:
        offset, divisor = reference.mean(axis=0), reference.std(axis=0)
    return np.where(divisor > 0, (X - offset) / np.where(divisor > 0, divisor, 1.0), 0.0)


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
