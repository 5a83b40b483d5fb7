"""``dpfair data fetch --from`` and ``dpfair data describe`` on the fixtures (no network, no ../shared).

The fixtures are not the real files, so each test re-registers the raw file's hash as
the fixture's: the route (verify, copy, load, print) is the real one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from dpfair_analysis.data import _fixtures, sources

F = _fixtures.FIXTURES_DIR



@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv(sources.CACHE_ENV, str(path))

    def offline(self, dest):
        raise OSError("no network in tests")
    monkeypatch.setattr(sources.Url, "__call__", offline)
    return path


def pin_to(monkeypatch, name, path):
    """Register raw file ``name`` with the SHA-256 of ``path`` (a fixture)."""
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setitem(sources.RAW_FILES, name, replace(sources.RAW_FILES[name], sha256=sha))
    return sha


def test_fetch_from_then_describe_bank_with_age_groups(cli, cache, monkeypatch):
    pin_to(monkeypatch, "bank.csv", F / "bank.csv")
    code, out, err = cli("data", "fetch", "bank", "--from", str(F / "bank.csv"))
    assert code == 0, err
    assert out.strip() == str(cache / "bank.csv") and (cache / "bank.csv").read_bytes() == (F / "bank.csv").read_bytes()
    for by, sizes in (("age", [24, 6]), ("age3", [12, 12, 6]), ("age5", [6] * 5)):
        code, out, err = cli("data", "describe", "bank", "--group-by", by)
        assert code == 0, err
        assert out.splitlines()[0] == f"bank: 30 rows, 50 features, {len(sizes)} groups, 2 classes"
        assert out.splitlines()[1] == "missing values: none (30 raw rows, all complete)"
        code, out, err = cli("data", "describe", "bank", "--group-by", by, "--json")
        payload = json.loads(out)
        assert [g["n"] for g in payload["groups"]] == [30] + sizes
        assert payload["raw_rows"] == 30 and payload["rows_dropped_missing"] == 0


def test_describe_bank_unknown_grouping_is_one_line(cli, cache, monkeypatch):
    pin_to(monkeypatch, "bank.csv", F / "bank.csv")
    sources.install("bank.csv", F / "bank.csv")
    code, out, err = cli("data", "describe", "bank", "--group-by", "sex")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--group-by for bank must be one of ['age', 'age3', 'age5'], got 'sex'" in err


def test_describe_reports_rows_removed_for_missing_values(cli, cache, monkeypatch, tmp_path):
    lines = (F / "bank.csv").read_text().splitlines()
    lines[2] = lines[2].replace(",no,", ",,", 1)  # an empty categorical cell
    damaged = tmp_path / "bank.csv"
    damaged.write_text("\n".join(lines) + "\n")
    pin_to(monkeypatch, "bank.csv", damaged)
    sources.install("bank.csv", damaged)
    code, out, err = cli("data", "describe", "bank")
    assert code == 0, err
    assert err.startswith("dpfair: warning:") and "removed 1 of 30 rows with a missing value" in err
    assert out.splitlines()[0].startswith("bank: 29 rows")
    assert "missing values: 1 of 30 raw rows removed (rows missing" in out.splitlines()[1]


def test_fetch_from_a_wrong_file_names_from_and_the_hash_and_writes_nothing(cli, cache):
    code, out, err = cli("data", "fetch", "bank", "--from", str(F / "bank.csv"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"--from {F / 'bank.csv'}" in err and sources.RAW_FILES["bank.csv"].sha256 in err
    assert "nothing was written" in err
    assert not cache.exists() or not any(cache.iterdir())


def test_fetch_from_a_missing_path(cli, cache, tmp_path):
    code, _, err = cli("data", "fetch", "dutch", "--from", str(tmp_path / "nowhere.arff"))
    assert code == 2 and "--from" in err and "no such file" in err


def test_fetch_without_any_source_names_file_hash_and_command(cli, cache):
    for name, raw, upstream in (("bank", "bank.csv", "kaggle"),
                                ("dutch", "dutch_census_2001.arff", "tailequy/fairness_dataset")):
        code, out, err = cli("data", "fetch", name)
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert raw in err and sources.RAW_FILES[raw].sha256 in err
        assert f"dpfair data fetch {name} --from PATH" in err and upstream in err.lower()


def test_fetch_dutch_from_a_directory_then_describe(cli, cache, monkeypatch):
    pin_to(monkeypatch, "dutch_census_2001.arff", F / "dutch_census_2001.arff")
    code, out, err = cli("data", "fetch", "dutch", "--from", str(F))
    assert code == 0, err
    code, out, err = cli("data", "describe", "dutch")
    assert code == 0, err
    assert out.splitlines()[0] == "dutch: 40 rows, 48 features, 2 groups, 2 classes"
    code, out, err = cli("data", "describe", "dutch", "--json")
    groups = {g["group"]: g for g in json.loads(out)["groups"]}
    assert groups["Male"]["n"] == 24 and groups["Female"]["n"] == 16
    assert groups["all"]["n[high-level occupation]"] == 15


def test_describe_split_is_refused_where_it_does_not_apply(cli, cache, monkeypatch):
    pin_to(monkeypatch, "bank.csv", F / "bank.csv")
    sources.install("bank.csv", F / "bank.csv")
    code, _, err = cli("data", "describe", "bank", "--split", "test")
    assert code == 2 and "--split applies only to mnist-full" in err
