"""Bank marketing (Kaggle ``bank.csv``): predict a term deposit; groups by age.

Raw data: the 11,162-row Kaggle "bank marketing" file (a balanced subset of the UCI
data of Moro et al. 2014), comma separated, header ``age,job,marital,education,
default,balance,housing,loan,contact,day,month,duration,campaign,pdays,previous,
poutcome,deposit``. There is no source on these machines: put it at
``$DPFAIR_DATA/bank.csv`` (default ``~/.cache/dpfair_analysis/bank.csv``), call
``sources.install("bank.csv", path)``, or pass ``path=``. A cached copy is checked by
its columns and its row count (11,162), not by a hash: no trusted copy was available
to pin one. A file given with ``path=`` is checked for its columns only.

PF-LD (paper 003 Table 1) uses three groupings of age:

* ``groups=2`` ("Bank"): majority aged 25..60, minority under 25 or over 60 (8% / 92%);
* ``groups=3`` ("M-Bank3"): 25-40, 41-60, the rest;
* ``groups=5`` ("M-Bank5"): 25-33, 34-40, 41-48, 49-60, the rest.

Group ids follow that order, with "the rest" (under 25 or over 60) last.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.sources import BANK_COLUMNS
from dpfair_analysis.validation import check_choice

FILE = "bank.csv"
NUMERIC = ("balance", "day", "duration", "campaign", "pdays", "previous")
CATEGORICAL = ("job", "marital", "education", "default", "housing", "loan", "contact", "month",
               "poutcome")
AGE_BINS = {
    2: ((25, 60),),
    3: ((25, 40), (41, 60)),
    5: ((25, 33), (34, 40), (41, 48), (49, 60)),
}
REST = "<25 or >60"
ENCODINGS = ("onehot", "label")
LABEL_NAMES = ("no deposit", "deposit")


def group_names(groups: int) -> tuple[str, ...]:
    """Names of the age groups for ``groups`` in (2, 3, 5)."""
    check_choice(groups, "groups", AGE_BINS)
    return tuple(f"{lo}-{hi}" for lo, hi in AGE_BINS[groups]) + (REST,)


def age_groups(age: np.ndarray, groups: int) -> np.ndarray:
    """Group id of each age: the index of its bin, or the last id for the rest."""
    check_choice(groups, "groups", AGE_BINS)
    age = np.asarray(age, dtype=np.float64)
    out = np.full(age.shape, len(AGE_BINS[groups]), dtype=np.int64)
    for k, (lo, hi) in enumerate(AGE_BINS[groups]):
        out[(age >= lo) & (age <= hi)] = k
    return out


def bank(*, groups: int = 2, path: str | os.PathLike | None = None, encoding: str = "onehot",
         scaling: str = "zscore") -> GroupedDataset:
    """Bank marketing with age groups.

    Parameters
    ----------
    groups : {2, 3, 5}
        The PF-LD grouping (see the module docstring).
    path : path, optional
        ``bank.csv``; default: the verified cached file.
    encoding : {"onehot", "label"}
        Categoricals as one-hot columns (default) or as one integer code each.
    scaling : {"zscore", "minmax", "none"}
        Applied to every column, fitted on the whole data set; PF-LD uses zero mean and
        unit variance (the default).

    Notes
    -----
    Age is the group attribute and not a feature. The remaining 15 columns are the 6
    numeric ones (balance, day, duration, campaign, pdays, previous) and 9
    categoricals (job 12 levels, marital 3, education 4, default 2, housing 2, loan 2,
    contact 3, month 12, poutcome 4 in the Kaggle file's documented levels).
    ``encoding="label"`` gives **15** features: PF-LD's count, which suggests PF-LD
    label-encoded the categoricals and left age out. ``encoding="onehot"`` gives 6 +
    the number of levels present (6 + 44 = 50 if every documented level occurs). We
    could not measure either on the real file (not available here). Rows with a
    missing value are dropped (``info["rows_dropped_missing"]``). Label 1 =
    ``deposit == "yes"``.
    """
    names = group_names(groups)
    check_choice(encoding, "encoding", ENCODINGS)
    path = tab.resolve_file(FILE, path)
    raw = pd.read_csv(path, dtype=str, skipinitialspace=True)
    raw.columns = [str(c).strip() for c in raw.columns]
    tab.require_columns(raw, BANK_COLUMNS, what=f"{FILE} at {path}")
    data = raw.dropna(subset=list(BANK_COLUMNS)).reset_index(drop=True)
    data = tab.to_numeric(data, ("age",) + NUMERIC, what=FILE)
    y = tab.encode(data["deposit"].str.strip().str.lower(), {"no": 0, "yes": 1},
                   what="bank.csv column 'deposit'")
    group = age_groups(data["age"].to_numpy(), groups)
    cats, cat_names = (tab.one_hot if encoding == "onehot" else tab.label_encode)(data, CATEGORICAL)
    X = tab.scale(np.concatenate([data[list(NUMERIC)].to_numpy(dtype=np.float64), cats], axis=1), scaling)
    info = {"source": "Kaggle bank marketing bank.csv", "raw_rows": len(raw),
            "rows_dropped_missing": len(raw) - len(data), "encoding": encoding, "scaling": scaling,
            "scaling_fitted_on": "whole data set", "groups": groups}
    return tab.make_dataset(X, y, group, feature_names=list(NUMERIC) + cat_names, group_names=names,
                            label_names=LABEL_NAMES, name="bank" if groups == 2 else f"m-bank{groups}",
                            info=info)
