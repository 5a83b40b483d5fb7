"""UCI Statlog German credit: predict good (1) or bad (0) credit; groups by sex or age.

Raw data: ``german.data``, 1,000 space-separated rows of 20 attributes and the class
(1 = good, 2 = bad; 700 good). Sex is not a column: it is folded into attribute 9,
"personal status and sex" (A91 male divorced/separated, A92 female
divorced/separated/married, A93 male single, A94 male married/widowed, A95 female
single; A95 never occurs). On the real file: 690 men, 310 women; 810 people older
than 25, 190 aged 25 or less.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.validation import check_choice

FILE = "german.data"
COLUMNS = ("status", "duration", "credit_history", "purpose", "credit_amount", "savings",
           "employment_since", "installment_rate", "personal_status", "other_debtors",
           "residence_since", "property", "age", "other_installment_plans", "housing",
           "existing_credits", "job", "people_liable", "telephone", "foreign_worker", "credit")
NUMERIC = ("duration", "credit_amount", "installment_rate", "residence_since", "age",
           "existing_credits", "people_liable")
CATEGORICAL = ("status", "credit_history", "purpose", "savings", "employment_since",
               "personal_status", "other_debtors", "property", "other_installment_plans",
               "housing", "job", "telephone", "foreign_worker")
SEX = {"A91": "Male", "A92": "Female", "A93": "Male", "A94": "Male", "A95": "Female"}
GROUPINGS = {"sex": ("Male", "Female"), "age": ("older than 25", "25 or younger")}
LABEL_NAMES = ("bad credit", "good credit")


def read_german_raw(*, path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The 1,000 raw rows with named columns (codes as in the UCI documentation)."""
    path = tab.resolve_file(FILE, path)
    try:
        raw = pd.read_csv(path, sep=r"\s+", header=None, dtype=str)
    except pd.errors.ParserError as err:
        raise ValueError(f"{FILE} at {path} is not a space-separated German credit file: {err}") from None
    if raw.shape[1] != len(COLUMNS):
        raise ValueError(f"{FILE} at {path} has {raw.shape[1]} columns, expected {len(COLUMNS)}: "
                         f"{list(COLUMNS)}")
    raw.columns = list(COLUMNS)
    if raw.isna().any().any():
        raise ValueError(f"{FILE} at {path} has rows with too few fields")
    return tab.to_numeric(raw, NUMERIC + ("credit",), what=FILE)


def german(*, by: str = "sex", path: str | os.PathLike | None = None,
           scaling: str = "zscore") -> GroupedDataset:
    """German credit, 1,000 rows.

    Parameters
    ----------
    by : {"sex", "age"}
        ``"sex"``: ("Male", "Female") from personal_status. ``"age"``:
        ("older than 25", "25 or younger"), the usual age > 25 split.
    path : path, optional
        ``german.data``; default: the verified cached raw file.
    scaling : {"zscore", "minmax", "none"}
        Applied to every column after one-hot encoding, fitted on the whole data set.

    Notes
    -----
    Features: the 7 numeric attributes and one-hot of the 13 categorical ones (levels
    present). The grouping attribute is not a feature: grouping by sex drops
    personal_status (which encodes sex; its marital-status part goes with it),
    giving 7 + 50 = **57** features on the real file; grouping by age drops age,
    giving 6 + 54 = **60**. Label 1 = good credit (class code 1).
    """
    check_choice(by, "by", GROUPINGS)
    data = read_german_raw(path=path)
    if by == "sex":
        group = tab.encode(data["personal_status"].map(SEX).fillna(data["personal_status"]),
                           {"Male": 0, "Female": 1}, what="German column 'personal_status' (as sex)")
        numeric_cols = NUMERIC
        cat_cols = tuple(c for c in CATEGORICAL if c != "personal_status")
    else:
        group = (data["age"].to_numpy() <= 25).astype(np.int64)
        numeric_cols = tuple(c for c in NUMERIC if c != "age")
        cat_cols = CATEGORICAL
    y = tab.encode(data["credit"].astype(int), {1: 1, 2: 0}, what="German column 'credit'")
    cats, cat_names = tab.one_hot(data, cat_cols)
    X = tab.scale(np.concatenate([data[list(numeric_cols)].to_numpy(dtype=np.float64), cats], axis=1),
                  scaling)
    info = {"source": "UCI Statlog German credit (german.data)", "scaling": scaling,
            "scaling_fitted_on": "whole data set", "by": by}
    return tab.make_dataset(X, y, group, feature_names=list(numeric_cols) + cat_names,
                            group_names=GROUPINGS[by], label_names=LABEL_NAMES, name="german",
                            info=info)
