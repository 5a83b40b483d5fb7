"""Dutch census 2001 (fairness benchmark): high-level occupation; groups by sex.

Raw data: ``dutch_census_2001.arff`` (Weka ARFF, 12 nominal attributes, 60,420 rows,
SHA-256 ``0e7e3f32...16ef``) from ``tailequy/fairness_dataset`` (Le Quy et al. 2022,
"A survey on datasets for fairness-aware machine learning"), a recode of the Dutch
Virtual Census 2001 (IPUMS-Europe). Obtained from that repository's raw URL at a
pinned commit where there is internet, or ``dpfair data fetch dutch --from PATH``, or
``path=`` (the ARFF, or the same table as a CSV with a header; see below).

Coding (what the loader does, and the evidence)
-----------------------------------------------
* **sex**: code 1 = male, 2 = female, the census (IPUMS) coding and the benchmark's
  own: the same repository's ``experiments/data/dutch.csv`` holds the same 60,420 rows
  in the same order (every other attribute equal) with sex written out, and maps
  every code 1 to ``male`` and every code 2 to ``female``. The data
  agree: code 1 dominates the activity codes 111, 122 and 124 (71-79 % code 1) and
  code 2 the code 138 (78 % code 2). So the file has **30,147 men** (code 1) and
  **30,273 women** (code 2). Papers 000 (Table 1) and 004 (Sec. 6.1, Table 5) print
  "30,273 males and 30,147 females": their M column has the size of code **2**, i.e.
  they labelled the codes the other way round (or swapped the two numbers in print);
  the paper gives no coding to decide which. ``sex_coding="paper"`` reproduces the
  paper's grouping (group "M" = code 2, "F" = code 1) for side-by-side tables.
* **occupation** (the label): ``2_1`` = ISCO-88 major groups 2 and 1
  (professionals; legislators, senior officials and managers) is the positive class
  **1 = high-level occupation** (28,763 rows); ``5_4_9`` = major groups 5, 4 and 9
  (service and sales; clerks; elementary occupations) is 0 (31,657). The benchmark's
  CSV codes it the same way (every ``2_1`` row is 1, every ``5_4_9`` row 0). Papers 000/004 call the Dutch decision
  "Income" and give no coding; an earlier version of this loader had it inverted.
  A CSV given with ``path=`` may use ``2_1``/``5_4_9`` or 0/1 with 1 = high level.

Features, and why 48 where the papers say 35
--------------------------------------------
The 10 non-protected attributes have 59 levels present in the data (age 12,
household_position 8, household_size 6, prev_residence_place 2, citizenship 3,
country_birth 3, edu_level 6, economic_status 3, cur_eco_activity 12,
Marital_status 4; the ARFF header declares 72, several unused). We keep ``age`` (an
ordered code of age bands) as one numeric column and one-hot the other 9:
1 + 47 = **48** features, min-max scaled to [0, 1]. One-hot of all 10 would give 59.
Papers 000/004 report 35 "unprotected attributes" without listing them; 39 different
choices of which attributes to keep as numeric codes give exactly 35 (e.g. age,
household_size, edu_level and Marital_status numeric: 4 + 31), so their encoding
cannot be recovered from the paper and we do not guess.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.sources import DUTCH_COLUMNS
from dpfair_analysis.validation import check_choice, check_positive_int, check_seed

FILE = "dutch_census_2001.arff"
NUMERIC = ("age",)
CATEGORICAL = ("household_position", "household_size", "prev_residence_place", "citizenship",
               "country_birth", "edu_level", "economic_status", "cur_eco_activity", "Marital_status")
SEX_CODINGS = {
    # coding -> (group names, raw sex code of each group)
    "census": (("Male", "Female"), ("1", "2")),
    "paper": (("M", "F"), ("2", "1")),
}
LABEL_NAMES = ("low-level occupation", "high-level occupation")
HIGH_LEVEL = "2_1"
LOW_LEVEL = "5_4_9"
_SEX_WORDS = {"male": "1", "female": "2"}
_LABEL = {HIGH_LEVEL: 1, LOW_LEVEL: 0, "1": 1, "0": 0, "1.0": 1, "0.0": 0}


def read_dutch_raw(*, path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The raw table as strings (missing values NaN): the ARFF, or a CSV with the same columns.

    ``sex`` is normalised to the census codes ``"1"``/``"2"`` (a CSV may write
    ``male``/``female``); other values are kept as in the file.
    """
    path = tab.resolve_file(FILE, path)
    if _is_arff(path):
        raw, _ = tab.read_arff(path, what=FILE)
    else:
        try:
            raw = pd.read_csv(path, dtype=str, skipinitialspace=True, na_values=["?"])
        except (pd.errors.ParserError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} is neither an ARFF file nor a comma-separated table: "
                             f"{' '.join(str(err).split())}") from None
        raw.columns = [str(c).strip() for c in raw.columns]
        raw = raw.rename(columns={c: "Marital_status" for c in raw.columns if c.lower() == "marital_status"})
    tab.require_columns(raw, DUTCH_COLUMNS, what=f"the Dutch census file at {path}")
    raw = raw[list(DUTCH_COLUMNS)].apply(lambda col: col.str.strip())
    raw["sex"] = raw["sex"].str.lower().replace(_SEX_WORDS)
    return raw


def dutch(*, path: str | os.PathLike | None = None, scaling: str = "minmax",
          sex_coding: str = "census") -> GroupedDataset:
    """Dutch census 2001 grouped by sex; label 1 = high-level occupation (``2_1``).

    Parameters
    ----------
    path : path, optional
        ``dutch_census_2001.arff`` (or the same table as CSV); default: the verified
        cached file.
    scaling : {"minmax", "zscore", "none"}
        Applied to every column, fitted on the whole data set; DPSGD-F normalises to
        [0, 1] (the default).
    sex_coding : {"census", "paper"}
        ``"census"`` (default): groups ("Male", "Female") = sex codes (1, 2):
        30,147 / 30,273 rows. ``"paper"``: groups ("M", "F") = codes (2, 1), the
        sizes papers 000/004 print (30,273 / 30,147); see the module docstring.

    Notes
    -----
    48 features on the real file (``age`` numeric + one-hot of 9 attributes; the
    module docstring says why the papers' count is 35). Rows with a missing value
    (``?``; none in the real file) are removed with a warning and counted in
    ``info``.
    """
    check_choice(sex_coding, "sex_coding", SEX_CODINGS)
    group_names, codes = SEX_CODINGS[sex_coding]
    raw = read_dutch_raw(path=path)
    data, missing = tab.drop_missing(raw, DUTCH_COLUMNS, what="Dutch census")
    data = tab.to_numeric(data, NUMERIC, what=FILE)
    group = tab.encode(data["sex"], {c: i for i, c in enumerate(codes)},
                       what="Dutch census column 'sex' (1 = male, 2 = female)")
    y = tab.encode(data["occupation"], _LABEL,
                   what=f"Dutch census column 'occupation' ({HIGH_LEVEL!r} or 1 = high level, "
                        f"{LOW_LEVEL!r} or 0 = low level)")
    cats, cat_names = tab.one_hot(data, CATEGORICAL)
    X = tab.scale(np.concatenate([data[list(NUMERIC)].to_numpy(dtype=np.float64), cats], axis=1), scaling)
    info = {"source": "Dutch census 2001 (tailequy/fairness_dataset dutch_census_2001.arff)", **missing,
            "scaling": scaling, "scaling_fitted_on": "whole data set", "sex_coding": sex_coding,
            "label": f"1 = occupation {HIGH_LEVEL} (ISCO-88 major groups 1-2)"}
    return tab.make_dataset(X, y, group, feature_names=list(NUMERIC) + cat_names,
                            group_names=group_names, label_names=LABEL_NAMES, name="dutch", info=info)


def unbalanced_dutch(*, male: int = 30_000, female: int = 10_000, seed: int = 0,
                     **options) -> GroupedDataset:
    """Unbalanced Dutch (paper 004 Sec. 6.1): 30,000 "males" and 10,000 "females", no replacement.

    ``male`` / ``female`` are the sizes kept of group 0 / group 1 of :func:`dutch`
    (``"Male"``/``"Female"`` = codes 1/2 with the census coding; ``"M"``/``"F"`` =
    codes 2/1 with ``sex_coding="paper"``, the paper's own grouping, under which its
    30,000 "males" are drawn from the 30,273 rows of code 2). Scaling is fitted on the
    full data set before sampling; ``options`` go to :func:`dutch`.
    """
    male, female = check_positive_int(male, "male"), check_positive_int(female, "female")
    seed = check_seed(seed)
    ds = dutch(**options).resample_groups({0: male, 1: female}, seed=seed)
    return tab.renamed(ds, "dutch-unbalanced", male=male, female=female, seed=seed)


def _is_arff(path: Path) -> bool:
    with open(path, "rb") as fh:
        for line in fh:
            text = line.strip()
            if text and not text.startswith(b"%"):
                return text.lower().startswith(b"@relation")
    return False
