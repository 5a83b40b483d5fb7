"""The result cache and the atomic writer: damaged entries recomputed with a warning that names the file,
hits counted, keys that change with the code (no manual version bump), written files that respect the
umask and keep an existing file's mode."""

from __future__ import annotations

import io
import json
import os
import pickle
import stat
import zipfile
from dataclasses import dataclass, field

import pytest

from dpfair_analysis.experiments import cache as cache_module
from dpfair_analysis.experiments.cache import CacheWarning, RunCache, RunRecords, code_fingerprint, config_key
from dpfair_analysis.io import write_atomically


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_hit_miss_and_summary(tmp_path):
    cache = RunCache(tmp_path)
    calls = []
    compute = lambda: calls.append(1) or {"value": 3}  # noqa: E731
    assert cache.get_or_compute("k", compute) == {"value": 3}
    assert cache.get_or_compute("k", compute) == {"value": 3}
    assert len(calls) == 1 and (cache.hits, cache.misses) == (1, 1)
    assert cache.summary() == f"1 of 2 runs from the cache at {tmp_path}"


@pytest.mark.parametrize("damage", [b"", b"not an entry", b"PK\x03\x04", _zip({"entry.json": b"{}"}),
                                    _zip({"entry.json": b"[1]"}), _zip({"other": b"x"})])
def test_a_damaged_entry_is_recomputed_with_a_warning_naming_the_file(tmp_path, damage):
    cache = RunCache(tmp_path)
    (tmp_path / "k.npz").write_bytes(damage)
    (tmp_path / "k.npz").chmod(0o600)
    with pytest.warns(CacheWarning, match=str(tmp_path / "k.npz")):
        assert cache.get_or_compute("k", lambda: 7) == 7
    assert cache.get_or_compute("k", lambda: 8) == 7  # replaced by the recomputed value


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


def test_a_new_option_marked_key_omits_default_keeps_every_recorded_key():
    """Adding a configuration field re-keys every run unless it is marked KEY_OMITS_DEFAULT: then a run that
    leaves it at its default keeps the key it had before the field existed (also inside a nested dataclass),
    and a run that sets it gets a key of its own."""
    from dpfair_analysis.experiments.cache import KEY_OMITS_DEFAULT

    @dataclass(frozen=True)
    class Spec:
        sigma: float = 1.0

    @dataclass(frozen=True)
    class Config:
        epochs: int = 2
        spec: Spec = Spec()

    before = config_key("run", Config(), 7)

    @dataclass(frozen=True)
    class Spec:  # noqa: F811 -- the same class a release later, with a new option
        sigma: float = 1.0
        rounds: tuple = field(default=(), metadata=KEY_OMITS_DEFAULT)

    @dataclass(frozen=True)
    class Config:  # noqa: F811
        epochs: int = 2
        spec: Spec = Spec()
        eval_every: int = field(default=1, metadata=KEY_OMITS_DEFAULT)

    assert config_key("run", Config(), 7) == before
    assert config_key("run", Config(eval_every=5), 7) != before
    assert config_key("run", Config(spec=Spec(rounds=(1,))), 7) != before

    @dataclass(frozen=True)
    class Config:  # noqa: F811 -- an unmarked new field re-keys every run
        epochs: int = 2
        spec: Spec = Spec()
        eval_every: int = 1

    assert config_key("run", Config(), 7) != before


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


# ----------------------------------------------------------------- only regular files or new paths are written
def _special(kind: str, path):
    """Make a ``kind`` of non-regular file at ``path`` (the socket is kept open by the caller)."""
    import socket

    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        return server
    return None


@pytest.mark.parametrize("kind", ["fifo", "directory", "socket"])
def test_the_writer_refuses_anything_but_a_regular_file_and_leaves_it_as_it_was(tmp_path, kind):
    target = tmp_path / "out"
    keep = _special(kind, target)
    before = target.lstat()
    called = []
    with pytest.raises(ValueError, match="refusing to write .* only a regular file or a new path"):
        write_atomically(target, lambda tmp: called.append(tmp) or tmp.write_text("x"))
    after = target.lstat()
    assert not called and (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary file left
    if keep is not None:
        keep.close()


def test_a_character_device_is_refused_before_anything_is_written():
    """Checked through output_target, which write_atomically calls before it writes: a test that called the
    writer on /dev/null would replace the machine's /dev/null whenever the check regressed."""
    from dpfair_analysis.io import output_target

    with pytest.raises(ValueError, match="refusing to write '/dev/null': it is a character device"):
        output_target("/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_symlink_is_followed_the_link_kept_and_its_target_replaced(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "report.html"
    target.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    written = write_atomically(link, lambda tmp: tmp.write_text("new"))
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert written == target and target.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["report.html"]
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "real" / "new.html")  # a link to a new path: the file is created there
    write_atomically(dangling, lambda tmp: tmp.write_text("created"))
    assert dangling.is_symlink() and (tmp_path / "real" / "new.html").read_text() == "created"


OTHER_USER = 65534  # nobody
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="planting another user's link needs root (lchown)")


@needs_root
@pytest.mark.parametrize("where", ["at the path", "at a directory above"])
def test_another_users_symlink_is_not_followed_and_its_target_is_untouched(tmp_path, where):
    """In a shared directory another user can plant a link where the toolkit will write (``--out /tmp/x.csv``):
    following it would replace a file of yours (the review's victim went from 16 bytes to 3,492 of CSV). A link
    owned by another user, at the path or on the way to it, is refused; yours are followed (test above)."""
    victim = tmp_path / "home" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("VICTIM ORIGINAL")
    shared = tmp_path / "shared"
    shared.mkdir()
    if where == "at the path":
        planted, path = shared / "hist.csv", shared / "hist.csv"
        planted.symlink_to(victim)
    else:
        planted, path = shared / "plots", shared / "plots" / "victim.txt"
        planted.symlink_to(victim.parent)
    os.lchown(planted, OTHER_USER, OTHER_USER)
    with pytest.raises(ValueError, match="symbolic link owned by another user"):
        write_atomically(path, lambda tmp: tmp.write_text("overwritten"))
    assert victim.read_text() == "VICTIM ORIGINAL" and sorted(p.name for p in victim.parent.iterdir()) == ["victim.txt"]


@needs_root
def test_a_file_another_user_planted_does_not_give_the_output_its_mode(tmp_path):
    """A planted 0o6777 file at the output path: the output is the writer's own file with a new file's mode, not a
    setuid, world-writable file (the review's result went -rwsrwsrwx)."""
    planted = tmp_path / "res.csv"
    planted.write_text("planted")
    os.chown(planted, OTHER_USER, OTHER_USER)
    os.chmod(planted, 0o6777)
    old_mask = os.umask(0o022)
    try:
        write_atomically(planted, lambda tmp: tmp.write_text("result"))
    finally:
        os.umask(old_mask)
    info = planted.stat()
    assert stat.S_IMODE(info.st_mode) == 0o644 and info.st_uid == os.getuid() and planted.read_text() == "result"


def test_your_own_files_mode_is_kept_less_its_special_bits(tmp_path):
    mine = tmp_path / "mine.csv"
    mine.write_text("old")
    os.chmod(mine, 0o4750)
    write_atomically(mine, lambda tmp: tmp.write_text("new"))
    assert stat.S_IMODE(mine.stat().st_mode) == 0o750


def test_swapping_the_temporary_name_for_a_link_while_it_is_written_writes_nothing_through_the_link(tmp_path):
    """The race the review won at once: between mkstemp and the write, someone who can write the directory
    replaces the temporary name by a link to a victim file; writing (and chmod-ing) by name then changed the
    victim (a 0o600 root file became 0o777 with the writer's content). The writer now writes and chmods its own
    descriptor, and refuses to publish a temporary name that no longer is its file."""
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM")
    os.chmod(victim, 0o600)
    out = tmp_path / "dir"
    out.mkdir()

    def swap_then_write(tmp):
        (name,) = [p for p in out.iterdir() if p.name.startswith(".accuracy.png.")]
        name.unlink()
        name.symlink_to(victim)  # the attacker's swap
        tmp.write_bytes(b"PNG")

    with pytest.raises(ValueError, match="was replaced by someone else"):
        write_atomically(out / "accuracy.png", swap_then_write, mode=0o777)
    assert victim.read_text() == "VICTIM" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert not (out / "accuracy.png").exists()


def test_a_symlink_to_a_fifo_is_refused_like_the_fifo(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(tmp_path / "pipe")
    with pytest.raises(ValueError, match="FIFO .*the link .* points to"):
        write_atomically(tmp_path / "link", lambda tmp: tmp.write_text("x"))
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode) and (tmp_path / "link").is_symlink()


# ----------------------------------------------------------------- a cache never costs a finished result
def test_an_unwritable_cache_warns_once_and_still_returns_every_result(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    cache = RunCache(tmp_path / "file" / "runs")  # a path under a regular file can never be created
    with pytest.warns(CacheWarning, match="cannot be written") as caught:
        assert cache.get_or_compute("a", lambda: 1) == 1
        assert cache.get_or_compute("b", lambda: 2) == 2
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert not cache.writable and cache.misses == 2
    assert cache_module.unwritable_reason(tmp_path / "file" / "runs") == f"{tmp_path / 'file'} is not a directory"
    assert cache_module.unwritable_reason(tmp_path / "new" / "deeper") is None


def test_an_entry_others_could_have_written_is_not_served(tmp_path):
    cache = RunCache(tmp_path)
    cache.store("k", "mine")
    assert stat.S_IMODE((tmp_path / "k.npz").stat().st_mode) == 0o600  # entries are private
    (tmp_path / "k.npz").chmod(0o666)
    with pytest.warns(CacheWarning, match="other users may write it"):
        assert RunCache(tmp_path).get_or_compute("k", lambda: "recomputed") == "recomputed"
    if os.getuid() == 0:  # a file owned by another user is refused too
        cache.store("k2", "x")
        os.chown(tmp_path / "k2.npz", 1, 1)
        with pytest.warns(CacheWarning, match="owned by uid 1"):
            assert RunCache(tmp_path).lookup("k2") == (False, None)


def test_an_old_pickle_entry_is_never_unpickled_and_is_said_once(tmp_path):
    marker = tmp_path / "ran"
    for key in ("k", "k2"):  # well-formed pickles of the earlier format, private, of this user
        entry = {"fingerprint": code_fingerprint(), "value": _Touch(marker)}
        (tmp_path / f"{key}.pkl").write_bytes(pickle.dumps(entry))
        (tmp_path / f"{key}.pkl").chmod(0o600)
    cache = RunCache(tmp_path)
    with pytest.warns(CacheWarning, match=r"earlier version \(\*\.pkl") as caught:
        assert cache.get_or_compute("k", lambda: "recomputed") == "recomputed"
        assert cache.get_or_compute("k2", lambda: "recomputed") == "recomputed"
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert not marker.exists() and (tmp_path / "k.npz").is_file()


class _Touch:
    """Unpickling this creates a file: what a crafted pickle entry could do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


# ----------------------------------------------------------------- planted links, FIFOs and devices (issue 47)
def test_a_planted_symlink_at_an_entry_is_neither_read_nor_written_through(tmp_path):
    cache_dir, outside = tmp_path / "cache", tmp_path / "victim.npz"
    cache_dir.mkdir()
    RunCache(tmp_path / "elsewhere").store("k", "a valid entry the attacker points at")
    os.replace(tmp_path / "elsewhere" / "k.npz", outside)
    before = outside.read_bytes()
    (cache_dir / "k.npz").symlink_to(outside)
    cache = RunCache(cache_dir)
    with pytest.warns(CacheWarning, match="symbolic link") as caught:
        assert cache.get_or_compute("k", lambda: "computed here") == "computed here"  # not the link's target
    assert next(str(w.message) for w in caught if issubclass(w.category, CacheWarning)).count("k.npz") == 1
    assert outside.read_bytes() == before  # byte-identical: the store did not write through the link
    assert (cache_dir / "k.npz").is_symlink()  # and left it: running uncached


def test_a_planted_fifo_at_an_entry_or_a_claim_does_not_hang(tmp_path):
    (tmp_path / ".claims").mkdir()
    os.mkfifo(tmp_path / ".claims" / "k")
    os.mkfifo(tmp_path / "k.npz")
    cache = RunCache(tmp_path)
    with pytest.warns(CacheWarning) as caught:
        assert cache.get_or_compute("k", lambda: 5) == 5  # neither open blocks
    messages = " ".join(str(w.message) for w in caught)
    assert "FIFO" in messages and "claim" in messages
    assert stat.S_ISFIFO(os.lstat(tmp_path / "k.npz").st_mode)


def test_a_planted_symlink_at_a_claim_or_the_claims_directory_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "k").write_text("a user's file")
    cache_dir = tmp_path / "cache"
    (cache_dir / ".claims").mkdir(parents=True)
    (cache_dir / ".claims" / "k").symlink_to(outside / "k")
    with pytest.warns(CacheWarning, match="symbolic link"):
        assert RunCache(cache_dir).get_or_compute("k", lambda: 1) == 1
    assert (outside / "k").read_text() == "a user's file"
    other = tmp_path / "cache2"
    other.mkdir()
    (other / ".claims").symlink_to(outside)
    with pytest.warns(CacheWarning, match="symbolic link"):
        assert RunCache(other).get_or_compute("j", lambda: 2) == 2
    assert sorted(p.name for p in outside.iterdir()) == ["k"]  # no claim file created through the link


def test_a_device_at_an_entry_is_refused(tmp_path):
    (tmp_path / "k.npz").symlink_to("/dev/zero")
    with pytest.warns(CacheWarning, match="symbolic link"):
        assert RunCache(tmp_path).lookup("k") == (False, None)


def test_an_entry_under_another_key_is_not_served(tmp_path):
    cache = RunCache(tmp_path)
    cache.store("a", "a's result")
    os.replace(tmp_path / "a.npz", tmp_path / "b.npz")  # copied or renamed onto another key
    with pytest.warns(CacheWarning, match="entry of key a"):
        assert cache.lookup("b") == (False, None)


def test_a_value_the_format_cannot_store_is_returned_uncached_and_said_once(tmp_path):
    cache = RunCache(tmp_path)
    with pytest.warns(CacheWarning, match="not cached") as caught:
        assert cache.get_or_compute("a", lambda: {"f": print}) == {"f": print}
        assert cache.get_or_compute("b", lambda: object).__name__ == "object"
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert not list(tmp_path.glob("*.npz"))


def test_a_waiter_computes_after_the_claim_timeout(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setenv("DPFAIR_CACHE_CLAIM_TIMEOUT", "0.3")
    cache = RunCache(tmp_path)
    (tmp_path / ".claims").mkdir()
    with open(tmp_path / ".claims" / "k", "w") as held:  # a holder that never finishes (a hung process)
        fcntl.flock(held, fcntl.LOCK_EX)
        other = os.open(tmp_path / ".claims" / "k", os.O_RDONLY)  # flock is per open file: a second one waits
        os.close(other)
        with pytest.warns(CacheWarning, match="waited 0.3 s"), cache.claim("k", wait=True) as held_here:
            assert held_here


def test_two_callers_of_one_key_compute_it_once(tmp_path):
    import threading

    started, release = threading.Event(), threading.Event()
    calls, results = [], {}

    def slow():
        calls.append("first")
        started.set()
        assert release.wait(10)
        return "first's result"

    first = threading.Thread(target=lambda: results.update(first=RunCache(tmp_path).get_or_compute("k", slow)))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: results.update(
        second=RunCache(tmp_path).get_or_compute("k", lambda: calls.append("second") or "second's result")))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting on the first's claim, not computing
    release.set()
    first.join(10)
    second.join(10)
    assert calls == ["first"] and results == {"first": "first's result", "second": "first's result"}
    with RunCache(tmp_path).claim("k", wait=False) as held:
        assert held  # released when the computing caller finished


def test_records_of_runs_with_the_earlier_poisson_sampler_are_said_and_counted(tmp_path):
    """Run records name the Poisson sampler their runs drew batches with; records from the first sampler (which
    named none) are served -- the same distribution -- but never silently mixed with new runs."""
    import json

    from dpfair_analysis.training.loop import POISSON_SAMPLER_VERSION

    path = tmp_path / "runs.json"
    records = RunRecords(path)
    records.put("new", [{"accuracy": 0.5}], label="a run with today's sampler")
    entry = json.loads(path.read_text())["records"]["new"]
    assert entry["poisson_sampler"] == POISSON_SAMPLER_VERSION == 2
    data = json.loads(path.read_text())
    data["records"]["old"] = {"label": "from before", "fingerprint": code_fingerprint(), "rows": [{"accuracy": 0.4}]}
    path.write_text(json.dumps(data))
    again = RunRecords(path)
    assert again.get("new") == [{"accuracy": 0.5}] and again.other_sampler == 0
    with pytest.warns(CacheWarning, match="Poisson sampler 1, today's is 2"):
        assert again.get("old") == [{"accuracy": 0.4}]
    assert again.other_sampler == 1 and "1 of them trained with an earlier Poisson sampler" in again.summary()


def test_a_record_of_a_stale_cache_entry_names_the_code_that_computed_it(tmp_path, monkeypatch):
    """A run served from the cache by other code's entry (DPFAIR_CACHE_ALLOW_STALE=1) keeps that code's fingerprint
    when it is recorded: the records never say today's code computed what it did not (they did before)."""
    cache, records = RunCache(tmp_path / "cache"), RunRecords(tmp_path / "runs.json")
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "yesterday's code")
    cache.store("k", {"rows": [{"accuracy": 0.5}]})
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "today's code")
    assert cache.lookup("k") == (False, None) and cache.origin("k") is None
    monkeypatch.setenv("DPFAIR_CACHE_ALLOW_STALE", "1")
    with pytest.warns(CacheWarning, match="computed by other code"):
        found, value = cache.lookup("k")
    assert found and cache.origin("k") == "yesterday's code"
    records.put("k", value["rows"], fingerprint=cache.origin("k"))
    records.put("fresh", [{"accuracy": 0.9}], fingerprint=cache.origin("fresh"))
    entries = json.loads((tmp_path / "runs.json").read_text())["records"]
    assert entries["k"]["fingerprint"] == "yesterday's code" and entries["fresh"]["fingerprint"] == "today's code"


def _put_many(path: str, prefix: str, count: int, locked: bool, barrier) -> None:
    """In a child process: ``count`` puts of distinct keys into one records file, starting with the other child;
    each write waits 5 ms first (a slow disk: the window between a put's read and its write)."""
    import contextlib
    import time

    from dpfair_analysis.experiments import cache as child_cache

    write = child_cache.write_atomically
    child_cache.write_atomically = lambda *args, **kwargs: (time.sleep(0.005), write(*args, **kwargs))[1]
    if not locked:  # the put as it was before the lock: read, add, rewrite
        child_cache.directory_lock = lambda directory: contextlib.nullcontext()
    records = child_cache.RunRecords(path, fingerprint=lambda: "code")
    barrier.wait(60)
    for i in range(count):
        records.put(f"{prefix}{i}", [{"i": i, "pad": "x" * 200}], label=f"{prefix} {i}")


@pytest.mark.parametrize("locked", [True, False])
def test_two_recorders_putting_into_one_records_file_keep_each_others_entries(tmp_path, locked):
    """Two processes recording into one file at once (record_runs.py in plan order and --from-end) each keep the
    other's entries: put reads, adds and rewrites under the directory's lock. Without the lock (the put before
    it) entries are lost -- the twin that shows the test can fail."""
    import multiprocessing

    path, count = str(tmp_path / "runs.json"), 40
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    barrier = context.Barrier(2)
    children = [context.Process(target=_put_many, args=(path, prefix, count, locked, barrier)) for prefix in "ab"]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    kept = len(json.loads((tmp_path / "runs.json").read_text())["records"])
    if locked:
        assert kept == 2 * count
    else:
        assert kept < 2 * count, "no entry was lost without the lock: this run did not exercise the race"


def test_a_claim_file_others_can_lock_is_not_waited_on(tmp_path):
    """The review held a world-writable .claims/<key> (keys follow from the configuration and the public code) with
    flock, and a 3-second command waited silently for its 12-hour timeout. A claim file another user owns or can
    write is not honoured: the run is computed at once, said once."""
    import fcntl

    cache = RunCache(tmp_path)
    claims = tmp_path / ".claims"
    claims.mkdir()
    planted = claims / "k"
    planted.write_bytes(b"")
    planted.chmod(0o666)
    with open(planted, "r+b") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # the other process's hold
        with pytest.warns(CacheWarning, match="not honoured"):
            with cache.claim("k", wait=True) as held:
                assert held


def test_a_wait_on_anothers_claim_is_said_after_a_few_seconds(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setattr(cache_module, "CLAIM_NOTICE", 0.05)
    monkeypatch.setenv("DPFAIR_CACHE_CLAIM_TIMEOUT", "0.3")
    cache = RunCache(tmp_path)
    with cache.claim("k", wait=True):
        pass  # the claim file exists now, private
    with open(tmp_path / ".claims" / "k", "r+b") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        with pytest.warns(CacheWarning) as caught:
            with cache.claim("k", wait=True) as held:
                assert held
    said = [str(w.message) for w in caught]
    assert any("waiting for another process" in m for m in said) and any("waited 0.3 s" in m for m in said)


def test_a_fifo_at_the_records_path_is_refused_not_waited_on(tmp_path):
    """RunRecords read its file with read_text: a FIFO there (dpfair pfld-table --records FIFO) blocked forever."""
    import threading

    fifo = tmp_path / "runs.json"
    os.mkfifo(fifo)
    outcome = []

    def read():
        try:
            RunRecords(fifo).get("k")
        except ValueError as error:
            outcome.append(str(error))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive() and outcome and "FIFO" in outcome[0]


def test_the_data_caches_staging_refuses_a_swapped_temporary_name_like_write_atomically(tmp_path, monkeypatch):
    """data/sources._stage shares io.private_temporary with write_atomically: a temporary name swapped for a link
    while the file is downloaded is neither written through nor published, and the victim keeps its bytes and
    mode."""
    from types import SimpleNamespace

    from dpfair_analysis.data import sources

    monkeypatch.setattr(sources, "verify", lambda name, path, origin=None: path)
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"VICTIM")
    os.chmod(victim, 0o600)
    cache = tmp_path / "cache"
    cache.mkdir()

    def swap_then_write(through):
        (name,) = [p for p in cache.iterdir() if p.name.startswith(".raw.bin.")]
        name.unlink()
        name.symlink_to(victim)
        through.write_bytes(b"DOWNLOADED")

    with pytest.raises(OSError, match="replaced by someone else"):
        sources._stage(SimpleNamespace(name="raw.bin"), swap_then_write, cache / "raw.bin", origin="test")
    assert victim.read_bytes() == b"VICTIM" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert [p.name for p in cache.iterdir()] == [next(cache.iterdir()).name]  # the planted link only: nothing staged
    assert next(cache.iterdir()).is_symlink()
    staged = sources._stage(SimpleNamespace(name="raw.bin"), lambda through: through.write_bytes(b"OK"),
                            cache / "raw.bin", origin="test")
    assert staged.read_bytes() == b"OK" and stat.S_IMODE(staged.stat().st_mode) == 0o644 and not staged.is_symlink()
