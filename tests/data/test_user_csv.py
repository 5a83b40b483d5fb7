"""A user's CSV file: scikit-learn preprocessing said out loud, missing values counted, errors naming the flag."""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from dpfair_analysis import data
from dpfair_analysis.data.sources import DataWarning
from dpfair_analysis.data.user_csv import file_sha256, user_csv

FLAGS = {"path": "--csv", "label": "--label", "group": "--group", "drop": "--drop", "positive": "--positive"}


def write(tmp_path, frame: pd.DataFrame, name: str = "people.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def people(tmp_path):
    rng = np.random.default_rng(0)
    n = 60
    frame = pd.DataFrame({
        "age": rng.integers(18, 80, n).astype(float),
        "hours": rng.normal(40, 8, n).round(1),
        "job": rng.choice(["clerk", "manager", "nurse"], n),
        "sex": rng.choice(["F", "M"], n, p=[0.3, 0.7]),
        "income": rng.choice(["<=50K", ">50K"], n),
        "id": np.arange(n),
    })
    frame.loc[3, "age"] = np.nan        # an empty cell
    frame.loc[7, "job"] = "?"           # UCI's missing marker
    frame.loc[7, "hours"] = np.nan      # same row: counted once as a row, once per column
    frame.loc[11, "income"] = np.nan
    return write(tmp_path, frame), frame


def test_preprocessing_standardises_numerics_one_hot_encodes_the_rest_and_says_so(people):
    path, frame = people
    with pytest.warns(DataWarning, match="removed 3 of 60 rows"):
        ds = user_csv(path=path, label="income", group="sex", drop=["id"], positive=">50K")
    assert len(ds) == 57
    assert ds.feature_names == ("age", "hours", "job_clerk", "job_manager", "job_nurse")
    X = ds.X.double()
    assert torch.allclose(X[:, :2].mean(0), torch.zeros(2, dtype=torch.float64), atol=1e-6)
    assert torch.allclose(X[:, :2].std(0, unbiased=False), torch.ones(2, dtype=torch.float64), atol=1e-5)
    assert set(X[:, 2:].unique().tolist()) == {0.0, 1.0} and torch.all(X[:, 2:].sum(1) == 1)
    kept = frame.drop(index=[3, 7, 11]).reset_index(drop=True)
    assert ds.y.tolist() == (kept["income"] == ">50K").astype(int).tolist()
    assert ds.group_names == ("M", "F")  # largest group first
    assert ds.group.tolist() == [0 if s == "M" else 1 for s in kept["sex"]]
    info = ds.info
    assert info["raw_rows"] == 60 and info["rows_dropped_missing"] == 3
    assert info["missing_by_column"] == {"age": 1, "hours": 1, "job": 1, "income": 1}
    text = "\n".join(info["preprocessing"])
    assert "missing values: 3 of 60 raw rows removed" in text
    assert "StandardScaler): age, hours" in text and "OneHotEncoder): job (3 levels)" in text
    assert "left out (drop): id" in text and "group column 'sex'" in text
    assert info["sha256"] == file_sha256(path)


def test_the_registry_loads_a_csv_by_name(people):
    path, _ = people
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        ds = data.load("csv", path=path, label="income", group="sex", positive=">50K", drop=["id"])
    assert ds.name == "people" and ds.n_groups == 2
    assert data.list_datasets().set_index("name").loc["csv", "offline"]


def test_a_numeric_label_needs_no_positive_value(tmp_path):
    frame = pd.DataFrame({"x": [1.0, 2, 3, 4, 5, 6], "g": list("aabbab"), "y": [0, 1, 0, 1, 1, 0]})
    ds = user_csv(path=write(tmp_path, frame), label="y", group="g")
    assert ds.y.tolist() == [0, 1, 0, 1, 1, 0] and ds.label_names == ("0", "1")
    three = frame.assign(y=[3, 7, 5, 3, 7, 5])
    ds = user_csv(path=write(tmp_path, three, "three.csv"), label="y", group="g")
    assert ds.label_names == ("3", "5", "7") and ds.y.tolist() == [0, 2, 1, 0, 2, 1]


BAD = [
    (dict(label="incomee", group="sex"), "--label: column(s) ['incomee'] not in"),
    (dict(label="income", group="gender"), "--group: column(s) ['gender'] not in"),
    (dict(label="income", group="sex", drop=["nope"]), "--drop: column(s) ['nope'] not in"),
    (dict(label="income", group="sex"), "--label: column 'income' is not numeric"),
    (dict(label="income", group="sex", positive="rich"), "--positive: value 'rich' does not occur"),
    (dict(label="constant", group="sex"), "--label: column 'constant' has one class"),
    (dict(label="income", group="lonely", positive=">50K"), "--group: group(s) ['solo'] of column 'lonely' have 1"),
    (dict(label="income", group="id", positive=">50K"), "--group: column 'id' has 57 distinct values"),
    (dict(label="income", group="income", positive=">50K"), "--label and --group name the same column"),
]


@pytest.mark.parametrize("kwargs, message", BAD, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_columns_and_labels_raise_one_line_naming_the_flag(people, kwargs, message):
    path, frame = people
    frame = frame.assign(constant=1, lonely=["solo"] + ["crowd"] * (len(frame) - 1))
    path = write(path.parent, frame, "bad.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        with pytest.raises(ValueError) as error:
            user_csv(path=path, argument_names=FLAGS, **kwargs)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_positive_value_that_is_every_row_is_one_class(tmp_path):
    frame = pd.DataFrame({"x": [1.0, 2, 3, 4], "g": list("aabb"), "y": ["yes"] * 4})
    with pytest.raises(ValueError, match="--label: every row of column 'y' equals --positive 'yes'"):
        user_csv(path=write(tmp_path, frame), label="y", group="g", positive="yes", argument_names=FLAGS)


def test_an_edited_file_is_refused_by_its_hash(people):
    path, _ = people
    digest = file_sha256(path)
    path.write_text(path.read_text() + "\n")
    with pytest.raises(ValueError, match="has SHA-256"):
        user_csv(path=path, label="income", group="sex", positive=">50K", sha256=digest)


def test_a_missing_file_is_a_file_not_found_naming_the_flag(tmp_path):
    with pytest.raises(FileNotFoundError, match="--csv"):
        user_csv(path=tmp_path / "nope.csv", label="y", group="g", argument_names=FLAGS)
