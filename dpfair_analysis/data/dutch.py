"""Dutch census 2001 (fairness benchmark ``dutch.csv``): high-level occupation; groups by sex.

Raw data: 60,420 rows with columns sex, age, household_position, household_size,
prev_residence_place, citizenship, country_birth, edu_level, economic_status,
cur_eco_activity, Marital_status, occupation. DPSGD-F (paper 000 Table 1) reports
30,273 men and 30,147 women. There is no source on these machines: put the file at
``$DPFAIR_DATA/dutch.csv`` (default ``~/.cache/dpfair_analysis/dutch.csv``), call
``sources.install("dutch.csv", path)``, or pass ``path=``. A cached copy is checked by
its columns and its row count (60,420), not by a hash (no trusted copy was available
to pin one); a file given with ``path=`` is checked for its columns only.

Versions handled
----------------
* ``sex``: 1 = male, 2 = female (the census coding), or the words male/female.
* ``occupation`` (the label): either the ARFF-derived strings ``5_4_9`` (high-level
  occupation, label 1) and ``2_1`` (low-level, label 0), or a binary 0/1 column where
  1 = high-level occupation. Any other coding raises ValueError naming the values.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.sources import DUTCH_COLUMNS
from dpfair_analysis.validation import check_positive_int, check_seed

FILE = "dutch.csv"
NUMERIC = ("age",)
CATEGORICAL = ("household_position", "household_size", "prev_residence_place", "citizenship",
               "country_birth", "edu_level", "economic_status", "cur_eco_activity", "Marital_status")
GROUP_NAMES = ("Male", "Female")
LABEL_NAMES = ("low-level occupation", "high-level occupation")
_SEX = {"1": 0, "2": 1, "male": 0, "female": 1}


def _label(values: pd.Series) -> np.ndarray:
    codes = values.astype(str).str.strip()
    distinct = set(codes.unique())
    if distinct <= {"0", "1", "0.0", "1.0"}:
        return codes.map({"0": 0, "1": 1, "0.0": 0, "1.0": 1}).to_numpy(dtype=np.int64)
    if distinct <= {"5_4_9", "2_1"}:
        return (codes == "5_4_9").to_numpy(dtype=np.int64)
    raise ValueError(f"dutch.csv column 'occupation' has values {sorted(distinct)[:10]}; allowed "
                     f"are a binary 0/1 coding or the strings '5_4_9' (high level) and '2_1'")


def dutch(*, path: str | os.PathLike | None = None, scaling: str = "minmax") -> GroupedDataset:
    """Dutch census 2001 grouped by sex ("Male" id 0, "Female" id 1).

    Parameters
    ----------
    path : path, optional
        ``dutch.csv``; default: the verified cached file.
    scaling : {"minmax", "zscore", "none"}
        Applied to every column, fitted on the whole data set; DPSGD-F normalises to
        [0, 1] (the default).

    Notes
    -----
    Features: ``age`` (an ordinal code of age bands) as one numeric column, one-hot of
    the other 9 columns (all categorical census codes); sex (the group) and occupation
    (the label) are not features. The count is 1 + the number of levels present in
    those 9 columns. DPSGD-F reports 35 features without listing them; we could not
    measure our count on the real file (not available here), so it is reported in
    ``n_features`` rather than asserted.
    """
    path = tab.resolve_file(FILE, path)
    raw = pd.read_csv(path, dtype=str, skipinitialspace=True)
    raw.columns = [str(c).strip() for c in raw.columns]
    tab.require_columns(raw, DUTCH_COLUMNS, what=f"{FILE} at {path}")
    data = raw.dropna(subset=list(DUTCH_COLUMNS)).reset_index(drop=True)
    data = tab.to_numeric(data, NUMERIC, what=FILE)
    group = tab.encode(data["sex"].str.strip().str.lower(), _SEX, what="dutch.csv column 'sex'")
    y = _label(data["occupation"])
    cats, cat_names = tab.one_hot(data, CATEGORICAL)
    X = tab.scale(np.concatenate([data[list(NUMERIC)].to_numpy(dtype=np.float64), cats], axis=1), scaling)
    info = {"source": "Dutch census 2001 dutch.csv", "raw_rows": len(raw),
            "rows_dropped_missing": len(raw) - len(data), "scaling": scaling,
            "scaling_fitted_on": "whole data set"}
    return tab.make_dataset(X, y, group, feature_names=list(NUMERIC) + cat_names,
                            group_names=GROUP_NAMES, label_names=LABEL_NAMES, name="dutch", info=info)


def unbalanced_dutch(*, male: int = 30_000, female: int = 10_000, seed: int = 0,
                     **options) -> GroupedDataset:
    """Unbalanced Dutch (paper 004 Sec. 6.1): 30,000 men and 10,000 women, no replacement.

    Scaling is fitted on the full data set before sampling; ``options`` go to
    :func:`dutch`.
    """
    male, female = check_positive_int(male, "male"), check_positive_int(female, "female")
    seed = check_seed(seed)
    ds = dutch(**options).resample_groups({"Male": male, "Female": female}, seed=seed)
    return tab.renamed(ds, "dutch-unbalanced", male=male, female=female, seed=seed)
