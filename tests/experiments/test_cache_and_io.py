"""The result cache and the atomic writer: damaged entries recomputed with a warning that names the file,
hits counted, keys that change with the code (no manual version bump), written files that respect the
umask and keep an existing file's mode."""

from __future__ import annotations

import os
import pickle
import stat

import pytest

from dpfair_analysis.experiments import cache as cache_module
from dpfair_analysis.experiments.cache import CacheWarning, RunCache, RunRecords, code_fingerprint, config_key
from dpfair_analysis.io import write_atomically


def test_hit_miss_and_summary(tmp_path):
    cache = RunCache(tmp_path)
    calls = []
    compute = lambda: calls.append(1) or {"value": 3}  # noqa: E731
    assert cache.get_or_compute("k", compute) == {"value": 3}
    assert cache.get_or_compute("k", compute) == {"value": 3}
    assert len(calls) == 1 and (cache.hits, cache.misses) == (1, 1)
    assert cache.summary() == f"1 of 2 runs from the cache at {tmp_path}"


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps({"a": 1})[:5], b"\x80\x04K"])
def test_a_damaged_entry_is_recomputed_with_a_warning_naming_the_file(tmp_path, damage):
    cache = RunCache(tmp_path)
    (tmp_path / "k.pkl").write_bytes(damage)
    with pytest.warns(CacheWarning, match=str(tmp_path / "k.pkl")):
        assert cache.get_or_compute("k", lambda: 7) == 7
    assert pickle.loads((tmp_path / "k.pkl").read_bytes())["value"] == 7  # replaced by the recomputed value
    assert cache.get_or_compute("k", lambda: 8) == 7


def test_an_entry_from_other_code_is_recomputed_unless_stale_entries_are_allowed(tmp_path, monkeypatch):
    cache = RunCache(tmp_path)
    assert cache.get_or_compute("k", lambda: "old code's result") == "old code's result"
    assert cache.get_or_compute("k2", lambda: "old code's second result") == "old code's second result"
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "another version of the code")
    stale = RunCache(tmp_path)
    monkeypatch.setenv("DPFAIR_CACHE_ALLOW_STALE", "1")
    with pytest.warns(CacheWarning, match="computed by other code") as caught:
        assert stale.get_or_compute("k", lambda: "new") == "old code's result"
        assert stale.get_or_compute("k2", lambda: "new") == "old code's second result"
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1  # once per cache, not per entry
    assert stale.stale == 2 and "2 of them from other code" in stale.summary()
    monkeypatch.delenv("DPFAIR_CACHE_ALLOW_STALE")
    fresh = RunCache(tmp_path)
    assert fresh.get_or_compute("k", lambda: "new code's result") == "new code's result"  # recomputed
    assert (fresh.hits, fresh.misses) == (0, 1)
    assert fresh.get_or_compute("k", lambda: "again") == "new code's result"  # and replaced
    assert config_key("run", {"epochs": 2}) == config_key("run", {"epochs": 2}) != config_key("run", {"epochs": 3})


def test_the_fingerprint_reads_the_result_code(tmp_path, monkeypatch):
    fake = tmp_path / "pkg"
    for part in cache_module.RESULT_CODE:
        target = fake / part
        if part.endswith(".py"):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x = 1\n")
        else:
            target.mkdir(parents=True, exist_ok=True)
            (target / "m.py").write_text("y = 1\n")
    monkeypatch.setattr(cache_module, "PACKAGE", fake)
    code_fingerprint.cache_clear()
    try:
        before = code_fingerprint()
        code_fingerprint.cache_clear()
        (fake / "training" / "m.py").write_text("y = 2\n")  # a change in training code
        assert code_fingerprint() != before
        code_fingerprint.cache_clear()
        (fake / "training" / "m.py").write_text("y = 1\n")
        assert code_fingerprint() == before
    finally:
        code_fingerprint.cache_clear()


def test_written_files_respect_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        path = write_atomically(tmp_path / "a.txt", lambda tmp: tmp.write_text("x"))
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
        os.umask(0o022)
        path = write_atomically(tmp_path / "b.txt", lambda tmp: tmp.write_text("x"))
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_overwriting_keeps_the_existing_mode_and_a_failure_leaves_it_untouched(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old")
    path.chmod(0o604)
    write_atomically(path, lambda tmp: tmp.write_text("new"))
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o604

    def fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_atomically(path, fail)
    assert path.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_run_records_keep_rows_with_the_code_that_computed_them(tmp_path, monkeypatch):
    """Rows round-trip through the JSON file (a second RunRecords on the same file reads them); rows from
    other code are not served unless stale entries are allowed; the file is sorted by key, so it diffs."""
    path = tmp_path / "figs" / "runs.json"
    records = RunRecords(path)
    rows = [{"group": "8", "accuracy": 0.25, "epsilon": float("nan")}, {"group": "all", "accuracy": 0.9}]
    calls = []
    assert records.rows_or_compute("b-key", lambda: calls.append(1) or rows, label="run b") == rows
    records.put("a-key", [{"group": "2", "accuracy": 1.0}])
    again = RunRecords(path)
    served = again.rows_or_compute("b-key", lambda: calls.append(1) or [])
    assert len(calls) == 1 and served[1] == rows[1] and served[0]["epsilon"] != served[0]["epsilon"]  # NaN kept
    assert (records.misses, again.hits) == (2, 1)
    text = path.read_text()
    assert text.index('"a-key"') < text.index('"b-key"') and '"label": "run b"' in text
    assert again.get("absent") is None
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "another version of the code")
    other_code = RunRecords(path)
    assert other_code.get("b-key") is None
    monkeypatch.setenv("DPFAIR_CACHE_ALLOW_STALE", "1")
    with pytest.warns(CacheWarning, match="computed by other code"):
        assert other_code.get("b-key")[1] == rows[1]
    assert other_code.stale == 1
    assert RunRecords(None).rows_or_compute("k", lambda: rows) == rows  # no file: computes, writes nothing


@pytest.mark.parametrize("damage", ["", "{not json", '{"format": 1}'])
def test_a_damaged_run_records_file_is_refused_not_overwritten(tmp_path, damage):
    path = tmp_path / "runs.json"
    path.write_text(damage)
    with pytest.raises(ValueError, match=f"run records file {path} is unreadable"):
        RunRecords(path).rows_or_compute("k", lambda: [])
    assert path.read_text() == damage
