"""Bank marketing (Kaggle ``bank.csv``): predict a term deposit; groups by age.

Raw data: the 11,162-row Kaggle "Bank Marketing" file (janiobachmann; a subset of the
UCI data of Moro, Cortez & Rita 2014), comma separated, header ``age,job,marital,
education,default,balance,housing,loan,contact,day,month,duration,campaign,pdays,
previous,poutcome,deposit``; deposit yes 5,289 / no 5,873; SHA-256 ``c25bf6ac...35d2fe``
(LF line endings; CRLF copies and copies with edited headers circulate and have other
hashes). Kaggle has no stable download URL: install the file with ``dpfair data fetch
bank --from PATH`` (verified by its hash) or pass ``path=`` (then only its columns
and values are checked, so such variants load too).

PF-LD (paper 003 Table 1) uses three groupings of age, selected with ``by`` (the
same option, ``--group-by`` on the command line, that chooses sex or race for Adult):

* ``by="age"`` ("Bank"): 25-60 against the rest (under 25 or over 60): 10,269 / 893;
* ``by="age3"`` ("M-Bank3"): 25-40, 41-60, the rest;
* ``by="age5"`` ("M-Bank5"): 25-33, 34-40, 41-48, 49-60, the rest.

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
    "age": ((25, 60),),
    "age3": ((25, 40), (41, 60)),
    "age5": ((25, 33), (34, 40), (41, 48), (49, 60)),
}
"""``by`` -> the age bins (inclusive) of PF-LD's Bank, M-Bank3 and M-Bank5; the rest is the last group."""
NAMES = {"age": "bank", "age3": "m-bank3", "age5": "m-bank5"}
REST = "<25 or >60"
ENCODINGS = ("onehot", "label")
LABEL_NAMES = ("no deposit", "deposit")


def group_names(by: str) -> tuple[str, ...]:
    """Names of the age groups for ``by`` in ("age", "age3", "age5")."""
    check_choice(by, "by", AGE_BINS)
    return tuple(f"{lo}-{hi}" for lo, hi in AGE_BINS[by]) + (REST,)


def age_groups(age: np.ndarray, by: str) -> np.ndarray:
    """Group id of each age: the index of its bin, or the last id for the rest."""
    check_choice(by, "by", AGE_BINS)
    age = np.asarray(age, dtype=np.float64)
    out = np.full(age.shape, len(AGE_BINS[by]), dtype=np.int64)
    for k, (lo, hi) in enumerate(AGE_BINS[by]):
        out[(age >= lo) & (age <= hi)] = k
    return out


def bank(*, by: str = "age", path: str | os.PathLike | None = None, encoding: str = "onehot",
         scaling: str = "zscore") -> GroupedDataset:
    """Bank marketing with age groups.

    Parameters
    ----------
    by : {"age", "age3", "age5"}
        The PF-LD grouping: 2, 3 or 5 age groups (see the module docstring).
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
    contact 3, month 12, poutcome 4 on the real file). ``encoding="label"`` gives
    **15** features: PF-LD's count, which suggests PF-LD label-encoded the
    categoricals and left age out. ``encoding="onehot"`` gives 6 + 44 = **50**.
    Rows with a missing value (none in the real file; some circulating copies have
    blanked ``balance`` cells) are removed with a :class:`~dpfair_analysis.data.sources.DataWarning` and counted in
    ``info`` (``rows_dropped_missing``, ``missing_by_column``). Label 1 =
    ``deposit == "yes"``.
    """
    names = group_names(by)
    check_choice(encoding, "encoding", ENCODINGS)
    path = tab.resolve_file(FILE, path)
    try:
        raw = pd.read_csv(path, dtype=str, skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ValueError(f"{FILE} at {path} is not a comma-separated table: {' '.join(str(err).split())}") from None
    raw.columns = [str(c).strip() for c in raw.columns]
    tab.require_columns(raw, BANK_COLUMNS, what=f"{FILE} at {path}")
    data, missing = tab.drop_missing(raw, BANK_COLUMNS, what=f"{FILE} at {path}")
    data = tab.to_numeric(data, ("age",) + NUMERIC, what=FILE)
    y = tab.encode(data["deposit"].str.strip().str.lower(), {"no": 0, "yes": 1},
                   what="bank.csv column 'deposit'")
    group = age_groups(data["age"].to_numpy(), by)
    cats, cat_names = (tab.one_hot if encoding == "onehot" else tab.label_encode)(data, CATEGORICAL)
    X = tab.scale(np.concatenate([data[list(NUMERIC)].to_numpy(dtype=np.float64), cats], axis=1), scaling)
    info = {"source": "Kaggle bank marketing bank.csv", **missing, "encoding": encoding, "scaling": scaling,
            "scaling_fitted_on": "whole data set", "by": by}
    return tab.make_dataset(X, y, group, feature_names=list(NUMERIC) + cat_names, group_names=names,
                            label_names=LABEL_NAMES, name=NAMES[by], info=info)
