"""ISLR's Wage: 3,000 male workers of the US Mid-Atlantic region (March CPS supplement, 2003-2009);
predict whether the wage is above the median; groups by race.

Raw data: ``Wage.csv`` as the PyPI wheel ``ISLP==0.6.0`` ships it (``ISLP/data/Wage.csv``; the R package
ISLR's ``Wage``, James, Witten, Hastie & Tibshirani, *An Introduction to Statistical Learning*): 3,000 rows,
columns year, age, maritl, race, education, region (one level), jobclass, health, health_ins, logwage,
wage (thousands of dollars). Race: 2,480 White, 293 Black, 190 Asian, 37 Other -- two small groups and a
tiny one, the case the diagnosis's small-group rule exists for.

Label: wage above the data set's median (104.92, 1,483 of 3,000 rows) -- the book's ``wage > 250`` has
79 positives and a constant classifier would be 97% right. Features: year, age (numeric) and one-hot
maritl, education, jobclass, health, health_ins (region has one level; logwage is the label).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.validation import check_choice

FILE = "Wage.csv"
NUMERIC = ("year", "age")
CATEGORICAL = ("maritl", "education", "jobclass", "health", "health_ins")
RACES = ("White", "Black", "Asian", "Other")
GROUPINGS = {"race": RACES}
LABEL_NAMES = ("wage <= median", "wage > median")


def read_wage_raw(*, path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The 3,000 raw rows with ISLR's level labels stripped of their numeric prefixes ("1. White" -> "White")."""
    path = tab.resolve_file(FILE, path)
    try:
        raw = pd.read_csv(path, dtype=str)
    except pd.errors.ParserError as err:
        raise ValueError(f"{FILE} at {path} is not a CSV file: {err}") from None
    tab.require_columns(raw, NUMERIC + CATEGORICAL + ("race", "wage"), what=FILE)
    for column in CATEGORICAL + ("race",):
        raw[column] = raw[column].str.replace(r"^\d+\.\s*", "", regex=True)
    return tab.to_numeric(raw, NUMERIC + ("wage",), what=FILE)


def wage(*, by: str = "race", path: str | os.PathLike | None = None, scaling: str = "zscore") -> GroupedDataset:
    """ISLR's Wage, 3,000 rows, grouped by race.

    Parameters
    ----------
    by : {"race"}
        The grouping: ("White", "Black", "Asian", "Other").
    path : path, optional
        ``Wage.csv``; default: the verified cached raw file.
    scaling : {"zscore", "minmax", "none"}
        Applied to every column after one-hot encoding, fitted on the whole data set.

    Notes
    -----
    Label 1 = wage above the median of the file; race is the group, not a feature: 2 numeric + 16 one-hot
    = **18** features on the real file.
    """
    check_choice(by, "by", GROUPINGS)
    data = read_wage_raw(path=path)
    group = tab.encode(data["race"], {name: k for k, name in enumerate(RACES)}, what="Wage column 'race'")
    y = (data["wage"].to_numpy() > float(np.median(data["wage"]))).astype(np.int64)
    cats, cat_names = tab.one_hot(data, CATEGORICAL)
    X = tab.scale(np.concatenate([data[list(NUMERIC)].to_numpy(dtype=np.float64), cats], axis=1), scaling)
    info = {"source": "ISLR Wage (ISLP wheel's Wage.csv)", "scaling": scaling, "scaling_fitted_on": "whole data set",
            "by": by, "label": "wage above the median"}
    return tab.make_dataset(X, y, group, feature_names=list(NUMERIC) + cat_names, group_names=RACES,
                            label_names=LABEL_NAMES, name="wage", info=info)
