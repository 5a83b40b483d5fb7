"""Any tabular data set: a CSV file with a label column and a group column, preprocessed with scikit-learn.

``dpfair diagnose --csv PATH --label COL --group COL [--drop COL,...] [--positive VALUE]``
(and ``dpfair compare`` with the same flags) reads the file through :func:`user_csv`:

* **label** -- with ``positive``: 1 where the label equals that value, else 0 (any label
  type). Without it the label must already be numeric with integer values (0/1, or a few
  classes 0..K-1 or any K integers, mapped in sorted order); a text label is refused with
  a message that names ``--positive``.
* **group** -- the protected attribute: one group per distinct value (at most
  :data:`MAX_GROUPS`), sorted by size, largest first. The group column is *not* a
  feature (as in every built-in loader). Every group needs at least
  :data:`MIN_GROUP_ROWS` rows.
* **features** -- every other column except ``drop``: numeric columns standardised
  (``StandardScaler``), the others one-hot encoded (``OneHotEncoder``, one indicator per
  level present), by one ``ColumnTransformer`` fitted on the whole file (as the built-in
  loaders scale: recorded in ``info``).
* **missing values** -- empty cells, ``NA``/``NaN``/``null`` and ``?`` are missing. Rows
  with a missing value in the label, the group or a feature are removed, **counted per
  column and reported** (a :class:`~dpfair_analysis.data.sources.DataWarning` and
  ``info["rows_dropped_missing"]``, ``info["missing_by_column"]``: the same record as
  the built-in loaders, :func:`~dpfair_analysis.data._tabular.drop_missing`). Drop a
  mostly-empty column with ``drop`` to keep its rows.

What was done is returned in ``info["preprocessing"]`` (one line per step) so the CLI
can print it. Errors are one ValueError naming the offending argument; the CLI passes
its flag names (``argument_names``) so the message names ``--label``, ``--group``, ...
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.sources import sha256_of

#: Values read as missing, beside pandas' defaults ("", "NA", "NaN", "null", ...).
MISSING_MARKERS = ("?",)
#: More distinct group values than this is taken for a continuous column (bin it first).
MAX_GROUPS = 20
#: Fewest rows a group may have (a train/test split needs a row on each side).
MIN_GROUP_ROWS = 2
#: A numeric label with more distinct values than this is taken for a regression target.
MAX_CLASSES = 20
#: Most columns a file may have (read from its header line before the file is parsed) ...
MAX_COLUMNS = 10_000
#: ... and most features after one-hot encoding (an identifier column one-hot encoded is as wide as the file).
MAX_FEATURES = 20_000
#: Largest file read (bytes): beyond it a CSV is refused before it is parsed.
MAX_BYTES = 2 * 1024 ** 3
#: Argument names used in messages by default (the CLI passes its flags instead).
ARGUMENT_NAMES = {"path": "path", "label": "label", "group": "group", "drop": "drop", "positive": "positive"}


#: SHA-256 of a file's bytes (hex): what identifies a user file in a result cache key (the data layer's one
#: checksum, :func:`~dpfair_analysis.data.sources.sha256_of`).
file_sha256 = sha256_of


def user_csv(*, path: str | os.PathLike, label: str, group: str, drop: Sequence[str] = (),
             positive: str | None = None, sha256: str | None = None,
             argument_names: Mapping[str, str] | None = None) -> GroupedDataset:
    """A user's CSV file as a :class:`GroupedDataset` (see the module docstring for each step).

    Parameters
    ----------
    path : path
        The CSV file (comma-separated, header row).
    label : str
        The column to predict.
    group : str
        The protected attribute; one group per value.
    drop : sequence of str
        Columns to leave out of the features (identifiers, leaky or mostly-empty columns).
    positive : str, optional
        The label value that is class 1; every other value is class 0.
    sha256 : str, optional
        Expected SHA-256 of the file; a different file is refused (so a result cache keyed
        by it cannot serve results of an edited file).
    argument_names : mapping, optional
        How messages name the arguments (keys path, label, group, drop, positive).

    Returns
    -------
    GroupedDataset
        ``name`` is the file's stem; ``info`` has ``preprocessing`` (lines), ``raw_rows``,
        ``rows_dropped_missing``, ``missing_by_column``, ``numeric``, ``categorical``,
        ``positive``, ``sha256``.

    Raises
    ------
    ValueError
        A column that does not exist, a label with one class (or a non-numeric label
        without ``positive``, or a continuous one), a group with fewer than
        :data:`MIN_GROUP_ROWS` rows or more than :data:`MAX_GROUPS` values, no feature
        left, or a file whose SHA-256 is not ``sha256``.
    """
    names = {**ARGUMENT_NAMES, **dict(argument_names or {})}
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{names['path']} {str(path)!r} is not a file")
    digest = file_sha256(path)
    if sha256 is not None and sha256 != digest:
        raise ValueError(f"{names['path']} {str(path)!r} has SHA-256 {digest}, not the expected {sha256} "
                         f"(the file changed)")
    _check_shape_before_parsing(path, names=names)
    try:
        frame = pd.read_csv(path, na_values=list(MISSING_MARKERS), skipinitialspace=True, low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{names['path']} {str(path)!r} is not a readable CSV file: "
                         f"{' '.join(str(err).split())}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if not len(frame):
        raise ValueError(f"{names['path']} {str(path)!r} has a header row but no data rows")
    drop = [str(c).strip() for c in drop if str(c).strip()]
    for arg, columns in (("label", [label]), ("group", [group]), ("drop", drop)):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"{names[arg]}: column(s) {missing} not in {path.name}; its columns are "
                             f"{list(frame.columns)}")
    if label == group:
        raise ValueError(f"{names['label']} and {names['group']} name the same column {label!r}")
    if label in drop or group in drop:
        raise ValueError(f"{names['drop']} must not name the label or the group column")
    features = [c for c in frame.columns if c not in {label, group, *drop}]
    if not features:
        raise ValueError(f"no feature column left in {path.name} after removing the label {label!r}, the group "
                         f"{group!r} and {names['drop']} {drop}")
    for arg, column in (("label", label), ("group", group)):
        if frame[column].isna().all():
            raise ValueError(f"{names[arg]}: column {column!r} of {path.name} has no values (every row is missing)")
    _check_finite(frame[features], path=path, names=names)
    lines = [f"read {path.name}: {len(frame):,} rows, {len(frame.columns)} columns (SHA-256 {digest[:12]}…)"]
    complete, record = tab.drop_missing(frame, [label, group, *features], what=f"{path.name}")
    lines.append(tab.missing_summary(record))
    if not len(complete):
        raise ValueError(f"every row of {path.name} has a missing value in the label, the group or a feature; "
                         f"{names['drop']} the emptiest feature columns (rows missing per column: "
                         f"{record['missing_by_column']})")
    y, label_names, label_line = _encode_label(complete[label], label=label, positive=positive, names=names)
    lines.append(label_line)
    group_ids, group_names, group_line = _encode_group(complete[group].astype(str).str.strip(), column=group,
                                                       names=names)
    lines.append(group_line)
    X, feature_names, numeric, categorical, feature_lines = _features(complete[features], names=names)
    lines += feature_lines
    if drop:
        lines.append(f"left out ({names['drop']}): {', '.join(drop)}")
    lines.append(f"not a feature: the group column {group!r} (as in the built-in loaders)")
    info = {"source": str(path), "sha256": digest, "label": label, "group": group, "drop": list(drop),
            "positive": positive, "numeric": numeric, "categorical": categorical,
            "scaling": "standardised numerics, one-hot categoricals", "scaling_fitted_on": "whole data set",
            "preprocessing": lines, **record}
    return tab.make_dataset(X, y, group_ids, feature_names=feature_names, group_names=group_names,
                            label_names=label_names, name=path.stem, info=info)


def _encode_label(values: pd.Series, *, label: str, positive: str | None,
                  names: Mapping[str, str]) -> tuple[np.ndarray, list[str], str]:
    if positive is not None:
        text = values.astype(str).str.strip()
        hit = text == str(positive).strip()
        if not hit.any():
            numeric = pd.to_numeric(values, errors="coerce")
            try:
                hit = numeric == float(positive)
            except ValueError:
                pass
        if not hit.any():
            shown = sorted(text.unique())[:10]
            raise ValueError(f"{names['positive']}: value {positive!r} does not occur in column {label!r} "
                             f"(values: {shown})")
        if hit.all():
            raise ValueError(f"{names['label']}: every row of column {label!r} equals {names['positive']} "
                             f"{positive!r}: the label has one class")
        y = hit.to_numpy().astype(np.int64)
        return y, [f"not {positive}", str(positive)], \
            f"label: {label} == {positive!r} -> 1 ({int(y.sum()):,} rows), else 0 ({int((1 - y).sum()):,} rows)"
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.isna().any():
        shown = sorted(values[numeric.isna()].astype(str).unique())[:5]
        raise ValueError(f"{names['label']}: column {label!r} is not numeric (values such as {shown}); name the "
                         f"class to predict with {names['positive']} VALUE")
    levels = np.unique(numeric.to_numpy(dtype=np.float64))
    if len(levels) < 2:
        raise ValueError(f"{names['label']}: column {label!r} has one class ({levels[0]:g}); nothing to predict")
    if len(levels) > MAX_CLASSES or not np.all(levels == np.round(levels)):
        raise ValueError(f"{names['label']}: column {label!r} has {len(levels)} distinct values"
                         f"{'' if np.all(levels == np.round(levels)) else ', not all integers'}: a classification "
                         f"label needs at most {MAX_CLASSES} integer classes (or {names['positive']} VALUE)")
    y = np.searchsorted(levels, numeric.to_numpy(dtype=np.float64)).astype(np.int64)
    label_names = [f"{v:g}" for v in levels]
    counts = ", ".join(f"{name}: {int((y == k).sum()):,}" for k, name in enumerate(label_names))
    return y, label_names, f"label: {label}, {len(levels)} classes in sorted order ({counts})"


def _encode_group(values: pd.Series, *, column: str, names: Mapping[str, str]) -> tuple[np.ndarray, list[str], str]:
    counts = values.value_counts()
    if len(counts) > MAX_GROUPS:
        raise ValueError(f"{names['group']}: column {column!r} has {len(counts)} distinct values (at most "
                         f"{MAX_GROUPS} groups); group by a categorical column or bin this one first")
    small = counts[counts < MIN_GROUP_ROWS]
    if len(small):
        raise ValueError(f"{names['group']}: group(s) {list(small.index)} of column {column!r} have "
                         f"{', '.join(str(int(v)) for v in small.values)} row(s); every group needs at least "
                         f"{MIN_GROUP_ROWS} (merge them or drop their rows)")
    if len(counts) < 2:
        raise ValueError(f"{names['group']}: column {column!r} has one value ({counts.index[0]!r}): nothing to "
                         f"compare")
    order = sorted(counts.index, key=lambda v: (-int(counts[v]), v))  # largest group first, ties by name
    ids = values.map({v: k for k, v in enumerate(order)}).to_numpy(dtype=np.int64)
    sizes = ", ".join(f"{v} {int(counts[v]):,}" for v in order)
    return ids, list(order), f"groups: {column}, {len(order)} groups ({sizes})"


def _check_shape_before_parsing(path: Path, *, names: Mapping[str, str]) -> None:
    """Refuse a file over :data:`MAX_BYTES`, a header over :data:`MAX_COLUMNS` columns or with a repeated column
    name -- from the file's size and first line, before pandas reads the file (a 40-row CSV with a million
    columns once took 280 s and 4.4 GB; pandas renames a repeated column silently, so a repeated label name
    could pick the wrong one)."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ValueError(f"{names['path']} {str(path)!r} is {size / 1024 ** 3:.1f} GiB; at most "
                         f"{MAX_BYTES / 1024 ** 3:.0f} GiB is read (subsample it first)")
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            header_line = handle.readline(64 * MAX_COLUMNS)
    except UnicodeDecodeError as err:
        raise ValueError(f"{names['path']} {str(path)!r} is not a readable CSV file: {err}") from None
    header = next(csv.reader([header_line]), [])
    if len(header) > MAX_COLUMNS or (len(header_line) >= 64 * MAX_COLUMNS and not header_line.endswith("\n")):
        raise ValueError(f"{names['path']} {str(path)!r} has more than {MAX_COLUMNS:,} columns "
                         f"({len(header):,}+ in its header); at most {MAX_COLUMNS:,} are read")
    seen: dict[str, int] = {}
    for column in (c.strip() for c in header):
        seen[column] = seen.get(column, 0) + 1
    repeated = [c for c, count in seen.items() if count > 1]
    if repeated:
        raise ValueError(f"{names['path']} {str(path)!r} names column(s) {repeated} more than once; every column "
                         "needs its own name")


def _check_finite(frame: pd.DataFrame, *, path: Path, names: Mapping[str, str]) -> None:
    """Refuse numeric feature columns holding inf or -inf (not missing values: no imputation or scaling can use
    them), naming the columns and a row of each."""
    bad = []
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            infinite = np.isinf(values.to_numpy(dtype=np.float64))
            if infinite.any():
                bad.append(f"{column!r} ({int(infinite.sum())} row(s), first at data row "
                           f"{int(np.flatnonzero(infinite)[0]) + 1})")
    if bad:
        raise ValueError(f"{names['path']} {path.name}: column(s) {', '.join(bad)} hold infinite values (inf); "
                         f"replace them or {names['drop']} the column")


def _features(frame: pd.DataFrame, *, names: Mapping[str, str] = ARGUMENT_NAMES
              ) -> tuple[np.ndarray, list[str], list[str], list[str], list[str]]:
    """One ColumnTransformer: StandardScaler on numeric columns, OneHotEncoder on the rest (refused beyond
    :data:`MAX_FEATURES` encoded features, naming the widest columns)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])
               and not pd.api.types.is_bool_dtype(frame[c])]
    categorical = [c for c in frame.columns if c not in numeric]
    cats = frame[categorical].astype(str).apply(lambda s: s.str.strip()) if categorical else frame[categorical]
    levels = cats.nunique() if categorical else pd.Series(dtype=int)
    if len(numeric) + int(levels.sum()) > MAX_FEATURES:
        widest = ", ".join(f"{c} ({int(n):,} levels)" for c, n in levels.sort_values(ascending=False)[:3].items())
        raise ValueError(f"the features would be {len(numeric) + int(levels.sum()):,} columns after one-hot "
                         f"encoding (at most {MAX_FEATURES:,}); {names['drop']} the widest text columns: {widest}")
    data = pd.concat([frame[numeric].astype(np.float64), cats], axis=1)
    transformer = ColumnTransformer(
        [("numeric", StandardScaler(), numeric),
         ("categorical", OneHotEncoder(handle_unknown="ignore", sparse_output=False, dtype=np.float64), categorical)],
        remainder="drop", verbose_feature_names_out=False)
    X = transformer.fit_transform(data)
    feature_names = [str(name) for name in transformer.get_feature_names_out()]
    lines = []
    if numeric:
        lines.append(f"numeric, standardised (StandardScaler): {', '.join(numeric)}")
    if categorical:
        encoder = transformer.named_transformers_["categorical"]
        levels = [f"{c} ({len(cats_)} levels)" for c, cats_ in zip(categorical, encoder.categories_)]
        lines.append(f"categorical, one-hot (OneHotEncoder): {', '.join(levels)}")
        wide = [c for c, cats_ in zip(categorical, encoder.categories_) if len(cats_) > max(50, len(frame) // 10)]
        if wide:
            lines.append(f"warning: {', '.join(wide)} look like identifiers (many levels); consider --drop")
    lines.append(f"features: {X.shape[1]} ({len(numeric)} numeric + {X.shape[1] - len(numeric)} one-hot)")
    return np.asarray(X, dtype=np.float64), feature_names, numeric, categorical, lines
