"""The dpfair command: its outputs, and one-line errors with exit status 2 for bad data files and runs (the
table of bad invocations, every command's, is `tests/cli/test_bad_inputs.py`)."""

import json
import subprocess
import sys

import pytest




def test_privacy_epsilon_reproduces_the_papers_adult_epsilon_with_the_classic_conversion(cli):
    code, out, err = cli("privacy", "epsilon", "--n", "36177", "--batch-size", "256", "--sigma", "1",
                         "--epochs", "20", "--delta", "1e-6", "--conversion", "classic", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["steps"] == 2827
    assert summary["epsilon"] == pytest.approx(3.1, abs=0.05)
    assert set(summary) == {"epsilon", "delta", "accountant", "conversion", "neighboring", "steps",
                            "sampling_rate", "noise_multiplier", "optimal_order"}


def test_compare_json_has_the_documented_shape(cli, tmp_path):
    out_file = tmp_path / "history.csv"
    code, out, err = cli("compare", "--data", "synthetic", "--epochs", "2", "--batch-size", "64",
                         "--json", "--quiet", "--out", str(out_file))
    assert code == 0, err
    payload = json.loads(out)
    assert payload["dataset"] == "synthetic"
    assert set(payload["epsilon"]) == {"dpsgd"} and payload["epsilon"]["dpsgd"] > 0
    rows = payload["rows"]
    assert {r["method"] for r in rows} == {"sgd", "dpsgd"}
    for row in rows:
        assert {"method", "group", "n_test", "accuracy", "cost"} <= set(row)
    totals = {r["method"]: r for r in rows if r["group"] == "all"}
    assert totals["sgd"]["cost"] == 0
    assert totals["dpsgd"]["cost"] == pytest.approx(totals["dpsgd"]["accuracy"] - totals["sgd"]["accuracy"])
    assert payload["delta"] == payload["settings"]["delta"] and payload["settings"]["accounting"]["accountant"] == "rdp"
    for record in payload["runs"]:  # a constant classifier is named (its costs are only the groups' label mix)
        constant = record["constant_prediction"]
        assert constant is None or constant in ("0", "1")
    assert out_file.exists() and out_file.read_text().startswith("epoch")


def test_compare_prints_the_table(cli):
    code, out, err = cli("compare", "--data", "synthetic", "--epochs", "1", "--batch-size", "64", "--quiet")
    assert code == 0, err
    assert "SGD accuracy" in out and "DP-SGD vs SGD" in out and "ε(dpsgd)" in out
    assert "NOT a guarantee" not in out


def test_compare_says_an_epsilon_of_shuffled_batches_is_not_a_guarantee(cli):
    """--sampling shuffle: the ledger still accounts Poisson sampling at q = b/n, so every printed ε carries the
    note that it is not a guarantee for these runs (the JSON says so per run: sampling_matches_accounting)."""
    code, out, err = cli("compare", "--data", "synthetic", "--epochs", "1", "--batch-size", "64", "--quiet",
                         "--sampling", "shuffle", "--methods", "sgd,dpsgd,globaladapt")
    assert code == 0, err
    lines = out.splitlines()
    last_epsilon = max(i for i, line in enumerate(lines) if line.startswith("ε(") or ", ε = " in line)
    assert "ε(globaladapt)" in out and "sampling=shuffle" in lines[last_epsilon + 1]
    assert "NOT a guarantee for these runs" in lines[last_epsilon + 1]


def test_a_corrupted_data_file_without_a_source_is_refused_in_one_line(cli, tmp_path, monkeypatch):
    from dataclasses import replace

    from dpfair_analysis.data import sources

    monkeypatch.setenv("DPFAIR_DATA", str(tmp_path))
    monkeypatch.setitem(sources.RAW_FILES, "german.data", replace(sources.RAW_FILES["german.data"], sources=()))
    (tmp_path / "german.data").write_text("A11 6 A34\n")
    code, out, err = cli("data", "describe", "german")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "german.data" in err and "checksum" in err.lower()
    assert "dpfair data fetch german --from PATH" in err and "german.data.corrupt" in err


def test_a_corrupted_data_file_is_fetched_again_with_a_warning(cli, tmp_path, monkeypatch):
    from dataclasses import replace

    from dpfair_analysis.data import _fixtures, sources

    good = (_fixtures.FIXTURES_DIR / "german.data").read_bytes()
    import hashlib

    class Copy:
        label = "a test source"

        def __call__(self, dest):
            dest.write_bytes(good)

    monkeypatch.setenv("DPFAIR_DATA", str(tmp_path))
    monkeypatch.setitem(sources.RAW_FILES, "german.data",
                        replace(sources.RAW_FILES["german.data"], sha256=hashlib.sha256(good).hexdigest(),
                                sources=(Copy(),)))
    (tmp_path / "german.data").write_text("A11 6 A34\n")
    code, out, err = cli("data", "fetch", "german")
    assert code == 0, err
    assert err.startswith("dpfair: warning:") and len(err.strip().splitlines()) == 1
    assert "failed verification" in err and "a test source" in err
    assert (tmp_path / "german.data").read_bytes() == good


def test_an_unreadable_cache_entry_is_one_warning_line_and_recomputed(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path))
    argv = ("compare", "--data", "synthetic", "--epochs", "1", "--batch-size", "64", "--json", "--quiet")
    code, first, err = cli(*argv)
    assert code == 0 and err == "", err
    entries = sorted(tmp_path.glob("*.npz"))
    assert len(entries) == 2
    entries[0].write_text("garbage")
    code, again, err = cli(*argv)
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpfair: warning: result cache entry") and "unreadable" in lines[0]
    assert str(entries[0]) in lines[0]
    assert json.loads(again)["rows"] == json.loads(first)["rows"]
    assert json.loads(again)["cache"]["hits"] == 1


def test_nothing_is_written_when_the_run_fails(cli, tmp_path):
    target = tmp_path / "h.csv"
    code, _, _ = cli("compare", "--data", "synthetic", "--model", "cnn", "--out", str(target), "--quiet")
    assert code == 2
    assert list(tmp_path.iterdir()) == []


def test_console_script_exits_2_without_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "dpfair_analysis.cli", "privacy", "epsilon", "--n", "10"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_compare_tests_on_the_official_split_when_asked(cli, tmp_path, monkeypatch):
    from dpfair_analysis import data as datasets
    from dpfair_analysis.data.synthetic import synthetic_groups

    def published(*, split: str = "train"):  # a data set with a published test split of 77 rows
        return synthetic_groups(sizes=(300, 100) if split == "train" else (50, 27), dim=4,
                                seed=0 if split == "train" else 1)

    entry = datasets.DatasetEntry("published", published, "test data with an official split", "generated",
                                  official_split=True)
    monkeypatch.setitem(datasets.DATASETS, "published", entry)
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path))
    argv = ["compare", "--data", "published", "--epochs", "1", "--batch-size", "32", "--json", "--quiet"]
    code, out, err = cli(*argv, "--test-split", "official")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["settings"]["test_split"] == "official"
    assert {r["n_test"] for r in payload["rows"] if r["group"] == "all"} == {77}
    code, out, err = cli(*argv)  # the default: 20% of the 400 training rows
    assert code == 0, err
    assert {r["n_test"] for r in json.loads(out)["rows"] if r["group"] == "all"} == {80}
