"""Notebooks: one source each, an executed copy that matches it, and a quick run of each.

``notebooks/<name>.py`` (jupytext percent format) is the source of truth; the committed
``notebooks/<name>.ipynb`` is its executed copy (outputs kept). The copy's cells must be
the source's cells, so the two cannot drift: after editing a source, update the copy's
inputs with ``jupytext --update --to ipynb notebooks/<name>.py`` (keeps the outputs) or
re-execute it with ``notebooks/execute.py --in-place``.

Each notebook runs as ``notebooks/execute.py NAME --profile smoke --out TMP`` would run it: the
smoke profile (``DPFAIR_PROFILE``; the quick profile's settings on fewer runs), figures redirected
through ``DPFAIR_FIGS`` into TMP, the executed copy written there, and the repository's copy and
``paper_figs/`` left unchanged; where a smoke run's numbers are the full run's (a claim's verdict,
a mechanism's claimed privacy), they are checked against the committed copy's. The same at the
quick profile (execute.py's default) is a slow test.
"""

import datetime
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"


def _load_tool(name: str):
    """The script ``notebooks/<name>.py`` as a module (notebooks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"notebooks_{name}", NOTEBOOK_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


execute = _load_tool("execute")

SOURCES = execute.sources([])  # notebooks/*.py except execute.py's TOOLS
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def test_there_are_notebooks_to_run():
    assert SOURCES, "notebooks/ has no notebook sources"


def test_every_source_has_its_executed_copy_and_every_copy_its_source():
    assert {p.stem for p in SOURCES} == {p.stem for p in NOTEBOOKS}


def _cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_the_executed_copy_has_the_cells_of_its_source(source):
    expected = _cells(jupytext.read(source))
    committed = _cells(nbformat.read(source.with_suffix(".ipynb"), as_version=4))
    assert committed == expected, (
        f"{source.with_suffix('.ipynb').name} has drifted from {source.name}: run "
        f"`jupytext --update --to ipynb notebooks/{source.name}` (keeps the outputs)")


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_the_source_is_python_and_paired(source):
    compile(source.read_text(encoding="utf-8"), str(source), "exec")
    executed = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    assert executed.metadata.get("jupytext", {}).get("formats") == "ipynb,py:percent"


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in directory.rglob("*") if p.is_file()}


#: Executed at the quick profile by test_fairdp_mnist_figures_trains_nothing_once_its_runs_are_recorded, which
#: checks the same of its first execution (no error, the source's cells, a figure under --out only).
EXECUTED_ELSEWHERE = ("fairdp_mnist_figures",)
QUICK_SOURCES = [p for p in SOURCES if p.stem not in EXECUTED_ELSEWHERE]


def _errors(executed) -> list:
    return [out for cell in executed.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if out.get("output_type") == "error"]


def _executes_under_out_only(source: Path, profile: str, out: Path, monkeypatch, capsys) -> None:
    """``execute.py NAME --profile PROFILE --out OUT``: no error, the source's cells, a figure under OUT, and the
    repository's copy and paper_figs/ unchanged."""
    for name in ("DPFAIR_PROFILE", "DPFAIR_FIGS", "PYTHONPATH"):  # execute.py sets them for the kernel
        monkeypatch.setenv(name, os.environ.get(name, ""))
    repo = NOTEBOOK_DIR.parent
    before = _snapshot(repo / "paper_figs"), source.with_suffix(".ipynb").read_bytes()
    assert execute.main([source.stem, "--profile", profile, "--out", str(out)]) == 0
    assert f"{source.stem}" in capsys.readouterr().out.split("Estimated time:")[1]
    executed = nbformat.read(out / f"{source.stem}.ipynb", as_version=4)
    assert not _errors(executed)
    assert _cells(executed) == _cells(jupytext.read(source))
    assert any((out / "paper_figs").rglob("*.png")), "the notebook wrote no figure"
    assert (_snapshot(repo / "paper_figs"), source.with_suffix(".ipynb").read_bytes()) == before


def _verdicts_are_the_full_runs(figs: Path) -> None:
    """verify_claims: each claim the smoke run checks has the committed (full budget) verdict and standing, and
    a violated or misprinted one the same counterexample factor; each audited mechanism the same claimed epsilon,
    and as shipped, consistent with it as in the full run (its 100 trials are too few to catch the under-noised
    twins, which tests/verify/test_audit.py catches at its trial counts)."""
    import pandas as pd

    committed = NOTEBOOK_DIR.parent / "paper_figs" / "verify"
    claims = pd.read_csv(figs / "verify" / "verdicts.csv").merge(
        pd.read_csv(committed / "verdicts.csv"), on="id", how="left", suffixes=("", "_full"))
    assert len(claims) and claims["verdict_full"].notna().all()
    for column in ("verdict", "standing"):
        assert (claims[column] == claims[f"{column}_full"]).all(), claims[["id", column, f"{column}_full"]]
    refuted = claims[claims["verdict"] != "holds"]
    assert len(refuted) and (refuted["key_number"] == refuted["key_number_full"]).all()
    audits = pd.read_csv(figs / "verify" / "audit_epsilon.csv").merge(
        pd.read_csv(committed / "audit_epsilon.csv"), on=["mechanism", "noise_fraction"], suffixes=("", "_full"))
    shipped = audits[audits["noise_fraction"] == 1.0]
    assert len(shipped) and shipped["consistent"].all() and shipped["consistent_full"].all()
    assert audits["epsilon_claimed"].to_numpy() == pytest.approx(audits["epsilon_claimed_full"].to_numpy(), rel=1e-9)


#: Per notebook, what its smoke run must share with the committed full run (its paper_figs/ folder given).
SMOKE_MATCHES_FULL = {"verify_claims": _verdicts_are_the_full_runs}


@pytest.mark.parametrize("source", QUICK_SOURCES, ids=[p.stem for p in QUICK_SOURCES])
def test_notebook_runs_with_the_smoke_profile(source, tmp_path, monkeypatch, capsys):
    """The test suite's run of each notebook: executed copy and figures under --out only; where its numbers
    are the full run's, the committed ones."""
    _executes_under_out_only(source, "smoke", tmp_path, monkeypatch, capsys)
    SMOKE_MATCHES_FULL.get(source.stem, lambda figs: None)(tmp_path / "paper_figs")


@pytest.mark.slow
@pytest.mark.parametrize("source", QUICK_SOURCES, ids=[p.stem for p in QUICK_SOURCES])
def test_notebook_runs_with_the_quick_profile(source, tmp_path, monkeypatch, capsys):
    """execute.py's default: the quick profile, executed copy and figures under --out only."""
    _executes_under_out_only(source, "quick", tmp_path, monkeypatch, capsys)


def test_execute_refuses_to_write_quick_outputs_into_the_repository(capsys):
    with pytest.raises(SystemExit) as exit_:
        execute.main(["quickstart", "--in-place"])
    assert exit_.value.code == 2
    assert "--profile full" in capsys.readouterr().err


def test_execute_names_an_unknown_notebook(capsys):
    with pytest.raises(SystemExit) as exit_:
        execute.main(["no_such_notebook", "--estimate"])
    assert exit_.value.code == 2
    assert "no_such_notebook" in capsys.readouterr().err


def test_execute_refuses_an_output_it_cannot_write_before_executing(tmp_path, capsys, monkeypatch):
    """A directory (or FIFO) where an executed notebook goes is refused before any notebook runs, in one line."""
    (tmp_path / "quickstart.ipynb").mkdir()
    monkeypatch.setattr(execute, "execute", lambda *a, **k: pytest.fail("executed before the check"))
    with pytest.raises(SystemExit) as exit_:
        execute.main(["quickstart", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "quickstart.ipynb" in err[0] and "directory" in err[0]


def test_execute_keeps_a_notebook_it_cannot_write_and_runs_the_next_ones(tmp_path, capsys, monkeypatch):
    """A write that fails after execution (a full disk, a FIFO planted meanwhile) keeps that notebook in the
    temporary directory and goes on with the next: before, the first failure lost it and every one after it."""
    from dpfair_analysis import io as dpfair_io

    ran = []
    monkeypatch.setattr(execute, "execute", lambda source, **k: ran.append(source.stem) or nbformat.v4.new_notebook())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "elsewhere"))
    real = dpfair_io.write_atomically

    def full_for_quickstart(path, write, **kwargs):
        if Path(path).name == "quickstart.ipynb":
            raise OSError(28, "No space left on device")
        return real(path, write, **kwargs)

    monkeypatch.setattr(dpfair_io, "write_atomically", full_for_quickstart)
    assert execute.main(["quickstart", "diagnose", "--out", str(tmp_path / "out")]) == 2
    assert ran == ["quickstart", "diagnose"] and (tmp_path / "out" / "diagnose.ipynb").exists()
    assert len(list((tmp_path / "elsewhere").glob("quickstart-executed-*.ipynb"))) == 1
    assert "No space left" in capsys.readouterr().err


def test_execute_prints_an_estimate_for_every_notebook_and_profile(capsys):
    for profile in ("smoke", "quick", "full"):
        assert execute.main(["--estimate", "--profile", profile]) == 0
        out = capsys.readouterr().out
        for source in SOURCES:
            line = next(line for line in out.splitlines() if line.strip().startswith(source.stem))
            assert f"{profile}: ~" in line, line


def test_record_runs_records_each_run_once_in_priority_order(tmp_path, monkeypatch, capsys):
    """notebooks/record_runs.py at the quick profile: the first three runs of its priority list (SGD, DPSGD and
    DP-FedAvg at the preset's lr) are computed and recorded; a second invocation skips them and records the next
    ones; --summary lists what is recorded, marking records of other code; a non-positive --jobs or --max-runs or
    a damaged records file is a one-line error (exit 2), and the file is left as it was."""
    record_runs = _load_tool("record_runs")
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "runs.json"
    before = record_runs.pending("quick", record_runs.RunRecords(path))
    assert [run[2] for run in before[:3]] == ["sgd", "dpsgd", "dpfedavg"] and before[0][:2] == ("lr", 0.01)
    # each run once: lr 4 x 6; b = 64, 128, 512 x 6 and b = 256's DP-FedAvg (the others are lr 0.01's, whose
    # DP-FedAvg takes the swept step); sigma = 0.8 is b = 256's point, the other four add 5 runs each (SGD has
    # no sigma); FairDP at R = 50
    assert len(before) == 24 + 19 + 20 + 1 and before[-1] == ("noise_multiplier", 2.0, "fairdp", 50.0)
    # as at the full profile, a comparison without a seed count has 3 seeds: the figures draw seed 0 only
    three_seeds = record_runs.paper.preset
    monkeypatch.setattr(record_runs.paper, "preset", lambda dataset, profile, *, seeds=None, **kwargs: three_seeds(
        dataset, profile, seeds=3 if seeds is None else seeds, **kwargs))
    assert record_runs.main(["--profile", "quick", "--records", str(path), "--jobs", "1", "--max-runs", "3"]) == 0
    entries = json.loads(path.read_text())["records"].values()
    assert sorted(entry["label"].split()[3] for entry in entries) == ["dpfedavg", "dpsgd", "sgd"]
    assert {row["seed"] for entry in entries for row in entry["rows"]} == {0}
    assert record_runs.pending("quick", record_runs.RunRecords(path)) == before[3:]
    table = record_runs.summary(record_runs.RunRecords(path))
    overall = sorted(row["accuracy"] for entry in entries for row in entry["rows"] if row["group"] == "all")
    assert sorted(table["acc all"]) == overall and table["current"].all() and set(table["kind"]) == {"sweep rows"}
    stale = json.loads(path.read_text())
    next(iter(stale["records"].values()))["fingerprint"] = "other code"
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    assert record_runs.summary(record_runs.RunRecords(tmp_path / "stale.json"))["current"].sum() == 2
    capsys.readouterr()
    assert record_runs.main(["--summary", "--records", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"3 records in {path}")
    assert all(f"mnist {method} seed 0" in out for method in ("sgd", "dpsgd", "dpfedavg"))
    assert record_runs.main(["--summary", "--records", str(tmp_path / "none.json")]) == 0
    assert capsys.readouterr().out.startswith("0 records in")
    damaged = tmp_path / "damaged.json"
    damaged.write_text(path.read_text()[:-50])
    for summarise in ([], ["--summary"]):
        assert record_runs.main(["--profile", "quick", "--records", str(damaged), *summarise]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"run records file {damaged} is unreadable" in err
    assert damaged.read_text() == path.read_text()[:-50]
    for flag in ("--jobs", "--max-runs"):
        assert record_runs.main(["--profile", "quick", "--records", str(path), flag, "0"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"{flag} must be a positive integer, got 0" in err


def test_record_runs_deadline_is_the_next_occurrence_of_the_clock_time():
    """--stop-by HH:MM is today's if it is still ahead, else tomorrow's; a run starts only if it would end by it."""
    record_runs = _load_tool("record_runs")
    now = datetime.datetime(2026, 12, 6, 19, 30)
    assert record_runs.deadline("22:15", now) == datetime.datetime(2026, 12, 6, 22, 15).timestamp()
    assert record_runs.deadline("19:30", now) == datetime.datetime(2026, 12, 7, 19, 30).timestamp()
    assert record_runs.deadline("0:05", now) == datetime.datetime(2026, 12, 7, 0, 5).timestamp()
    assert record_runs.starts_in_time(None, 1e9)
    assert record_runs.starts_in_time(time.time() + 120, 60) and not record_runs.starts_in_time(time.time() + 60, 120)


def test_record_runs_tuning_study_records_the_plan_in_order_and_resumes(tmp_path, monkeypatch, capsys):
    """notebooks/record_runs.py --study mnist-tuning at the quick profile: the plan is the tuning plan (DPSGD and
    DPSGD-F interleaved through their six configurations first, the printed one first); two runs are recorded with
    their validation and test rows, a second invocation resumes after them, --summary lists them."""
    record_runs = _load_tool("record_runs")
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tuning.json"
    before = record_runs.pending_tuning("quick", record_runs.RunRecords(path))
    assert len(before) == 48 and [run[0] for run in before[:4]] == ["dpsgd", "dpsgdf"] * 2
    assert [run[0] for run in before[36:40]] == ["globaladapt", "boundedadaptive"] * 2
    assert {run[0] for run in before[:12]} == {"dpsgd", "dpsgdf"} and before[12][0] == "sgd"
    assert before[0][1] == before[1][1] == {"lr": 0.01, "sampling": "poisson"}
    assert before[2][1] == {"lr": 0.01, "sampling": "shuffle"}
    argv = ["--study", "mnist-tuning", "--profile", "quick", "--records", str(path), "--jobs", "1"]
    assert record_runs.main([*argv, "--max-runs", "2"]) == 0
    entries = list(json.loads(path.read_text())["records"].values())
    assert len(entries) == 2 and all({row["split"] for row in e["rows"]} == {"validation", "test"} for e in entries)
    assert record_runs.pending_tuning("quick", record_runs.RunRecords(path)) == before[2:]
    assert record_runs.main([*argv, "--max-runs", "1", "--from-end"]) == 0  # a second recorder takes the plan's end
    assert record_runs.pending_tuning("quick", record_runs.RunRecords(path)) == before[2:-1]
    # --stop-by: a run that would end after then is not started (a minute from now, runs of 2 minutes: none)
    capsys.readouterr()
    soon = (datetime.datetime.now() + datetime.timedelta(minutes=1)).strftime("%H:%M")
    assert record_runs.main([*argv, "--max-runs", "2", "--stop-by", soon, "--run-minutes", "2"]) == 0
    assert "2 runs left pending" in capsys.readouterr().out
    assert record_runs.pending_tuning("quick", record_runs.RunRecords(path)) == before[2:-1]
    for flags, wrong in ((["--stop-by", "25:00"], "--stop-by is a time HH:MM"),
                         (["--stop-by", "12:00", "--study", "figures"], "for --study mnist-tuning"),
                         (["--run-minutes", "0"], "--run-minutes must be a positive number")):
        assert record_runs.main([*argv, *flags]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and wrong in err, err
    capsys.readouterr()
    assert record_runs.main(["--summary", "--study", "mnist-tuning", "--records", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"3 records in {path}") and "mnist dpsgdf seed 0, lr 0.01, sampling poisson" in out
    assert "val 8" in out and "tes all" in out


def _pfld_argv(path: Path) -> list[str]:
    return ["--study", "pfld-tuned", "--data", "compas", "--profile", "quick", "--records", str(path)]


def _planned(runs) -> list[tuple]:
    return [(p.method, p.constraint, p.fold, p.role, p.configuration_index) for p in runs]



def test_record_runs_plans_the_methods_the_paper_prints_for_each_table():
    """M-Bank3 and M-Bank5 have three and five age groups, where the paper prints no Z (Zafar et al.'s covariance
    constraint takes two): their recorder plans CLF, A, M and PF-LD only (it stopped at the first Z run before)."""
    record_runs = _load_tool("record_runs")
    for data, methods in (("m-bank3", ("clf", "a", "m", "pfld")), ("m-bank5", ("clf", "a", "m", "pfld")),
                          ("bank", ("clf", "z", "a", "m", "pfld"))):
        runs = record_runs.pfld_runs(data, "quick")
        assert runs.methods == methods
        assert {cell[1] for cell in runs.cells()} == set(methods)

def test_record_runs_pfld_tuned_study_records_in_plan_order_and_resumes(tmp_path, monkeypatch, capsys):
    """notebooks/record_runs.py --study pfld-tuned at the quick profile: the plan is every run of the tuned Table 2
    (104 of COMPAS's: 2 folds, 2 configurations), PF-LD and CLF first -- of each, the printed configuration's folds,
    then fold by fold its validation runs and the refit of their choice, planned only once they are recorded; each run
    is recorded as it ends, a second invocation resumes after them and leaves them as they were, --summary counts
    them and projects the CPU time left; a missing or misplaced --data or --jobs > 1 is one line, exit 2."""
    record_runs = _load_tool("record_runs")
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "pfld.json"
    runs = record_runs.pfld_runs("compas", "quick")
    before = record_runs.pending_pfld(runs, record_runs.RunRecords(path))
    assert len(before) == 104 and _planned(before[:6]) == [
        ("pfld", "dp", 0, "printed", 0), ("pfld", "dp", 1, "printed", 0), ("pfld", "dp", 0, "validation", 0),
        ("pfld", "dp", 0, "validation", 1), ("pfld", "dp", 0, "refit", None), ("pfld", "dp", 1, "validation", 0)]
    assert before[4].key is None  # PF-LD and CLF under dp (CLF's runs serve every constraint), then PF-LD's others
    assert [(p.method, p.constraint) for p in before[7:9]] == [("pfld", "dp"), ("clf", "dp")]
    assert {(p.method, p.constraint) for p in before[16:32]} == {("pfld", "eo"), ("pfld", "ap")}
    assert before[32].method == "m"
    assert record_runs.main([*_pfld_argv(path), "--max-runs", "5"]) == 0
    entries = json.loads(path.read_text())["records"]
    assert len(entries) == 5 and sum("fold 0, refit" in e["label"] for e in entries.values()) == 1
    assert record_runs.main([*_pfld_argv(path), "--max-runs", "1"]) == 0
    resumed = json.loads(path.read_text())["records"]
    assert len(resumed) == 6 and {key: resumed[key] for key in entries} == entries
    after = record_runs.pending_pfld(runs, record_runs.RunRecords(path))
    assert _planned(after) == _planned(before[6:])
    capsys.readouterr()
    assert record_runs.main([*_pfld_argv(path), "--summary"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"6 of 104 runs of the tuned Table 2 of compas recorded in {path}; projected CPU time left")
    assert "plus the runs of clf, m, a, z (none recorded yet)" in out
    for argv, fragment in ((["--study", "pfld-tuned"], "--data is required"), (["--data", "income"], "--data is for"),
                           ([*_pfld_argv(path), "--jobs", "2"], "one run at a time")):
        assert record_runs.main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and fragment in err


@pytest.mark.slow
def test_record_runs_pfld_tuned_study_resumes_after_being_killed(tmp_path):
    """The pfld-tuned recorder killed (SIGKILL) while it records: the file holds every run that ended, intact,
    and the next invocation goes on from there."""
    import signal
    import subprocess
    import sys
    import time

    record_runs = _load_tool("record_runs")
    path = tmp_path / "pfld.json"
    env = {**os.environ, "DPFAIR_CACHE": str(tmp_path / "cache")}
    recorder = subprocess.Popen([sys.executable, str(NOTEBOOK_DIR / "record_runs.py"), *_pfld_argv(path)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (path.exists() and len(json.loads(path.read_text())["records"]) >= 3):
            assert recorder.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        recorder.send_signal(signal.SIGKILL)
        recorder.wait()
    killed = json.loads(path.read_text())["records"]
    assert 3 <= len(killed) < 104
    resumed = subprocess.run([sys.executable, str(NOTEBOOK_DIR / "record_runs.py"), *_pfld_argv(path),
                              "--max-runs", "2"], env=env, capture_output=True, text=True, check=False)
    assert resumed.returncode == 0 and resumed.stdout.startswith("2 runs to compute")
    records = json.loads(path.read_text())["records"]
    assert len(records) == len(killed) + 2 and {key: records[key] for key in killed} == killed
    pending = record_runs.pending_pfld(record_runs.pfld_runs("compas", "quick"), record_runs.RunRecords(path))
    assert len(pending) == 104 - len(records)


def _execute_fairdp_mnist_figures(tmp_path: Path, execution: str, records: bytes | None) -> tuple[list, bool]:
    """Execute fairdp_mnist_figures at the quick profile under ``tmp_path/execution`` with an empty run cache,
    its records file given (``records``) or empty; its tables and whether it trained anything. Checks it ran
    without errors, as committed, and drew a figure."""
    cache = tmp_path / f"cache-{execution}"
    cache.mkdir()
    os.environ["DPFAIR_CACHE"] = str(cache)
    path = tmp_path / execution / "paper_figs" / "fairdp" / "mnist_runs.json"
    if records is not None:
        path.parent.mkdir(parents=True)
        path.write_bytes(records)
    assert execute.main(["fairdp_mnist_figures", "--out", str(tmp_path / execution)]) == 0
    executed = nbformat.read(tmp_path / execution / "fairdp_mnist_figures.ipynb", as_version=4)
    assert not _errors(executed)
    assert _cells(executed) == _cells(jupytext.read(NOTEBOOK_DIR / "fairdp_mnist_figures.py"))
    assert any((tmp_path / execution / "paper_figs").rglob("*.png")), "the notebook wrote no figure"
    tables = [out.get("data", {}).get("text/plain") for cell in executed.cells if cell.cell_type == "code"
              for out in cell.get("outputs", []) if out.get("output_type") == "execute_result"]
    return tables, bool(list(cache.iterdir()))


@pytest.fixture
def _figures_env(monkeypatch):
    for name in ("DPFAIR_PROFILE", "DPFAIR_FIGS", "PYTHONPATH", "DPFAIR_CACHE"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    repo = NOTEBOOK_DIR.parent
    before = _snapshot(repo / "paper_figs"), (NOTEBOOK_DIR / "fairdp_mnist_figures.ipynb").read_bytes()
    yield
    assert (_snapshot(repo / "paper_figs"), (NOTEBOOK_DIR / "fairdp_mnist_figures.ipynb").read_bytes()) == before


def test_fairdp_mnist_figures_records_every_run_it_reads(tmp_path, _figures_env):
    """The notebook's one run in the default suite (it also passes the other notebooks' smoke-run checks):
    executed at the quick profile with an empty cache, it records each run it reads under the keys
    record_runs.py looks for, so none of its runs is pending (the slow test below executes it again from
    those records alone and checks it trains nothing)."""
    record_runs = _load_tool("record_runs")
    tables, trained = _execute_fairdp_mnist_figures(tmp_path, "first", None)
    assert trained and len(tables) >= 4
    records = tmp_path / "first" / "paper_figs" / "fairdp" / "mnist_runs.json"
    # the runs the quick notebook reads beyond the preset's (lr 0.01 = b 256 = sigma 0.8): lr 0.05, b 64 and
    # sigma 2 (SGD has no sigma) of SGD, DPSGD and FairDP, and FairDP at sigma 2 with R = 50; FairDP at lr 0.05
    # stays pending for its bound summary, which record_runs.py records of every FairDP run and no figure draws
    read = ({("lr", 0.05, "sgd"), ("lr", 0.05, "dpsgd")}
            | {(parameter, value, method) for parameter, value in (("batch_size", 64), ("noise_multiplier", 2.0))
               for method in ("sgd", "dpsgd", "fairdp")} - {("noise_multiplier", 2.0, "sgd")})
    pending = record_runs.pending("quick", record_runs.RunRecords(records))
    assert {run[:3] for run in pending if run[3] is None} & read == set()
    assert ("noise_multiplier", 2.0, "fairdp", 50.0) not in pending
    # 12 runs read (the 11 above and the preset's SGD, DPSGD and FairDP), all but FairDP at lr 0.05 complete
    assert ("lr", 0.05, "fairdp", None) in pending and len(pending) == 64 - 11


@pytest.mark.slow
def test_fairdp_mnist_figures_trains_nothing_once_its_runs_are_recorded(tmp_path, _figures_env):
    """The route to the full profile's MNIST figures (README): record_runs.py records every run, then the notebook,
    executed with a run cache that has none of them, trains nothing. At the quick profile: executed once, the
    notebook records each run it reads; executed again from those records alone with an empty cache, it trains
    nothing and shows the same tables."""
    first, trained = _execute_fairdp_mnist_figures(tmp_path, "first", None)
    assert trained
    records = (tmp_path / "first" / "paper_figs" / "fairdp" / "mnist_runs.json").read_bytes()
    second, trained = _execute_fairdp_mnist_figures(tmp_path, "second", records)
    assert not trained, "the second execution trained runs"
    assert second == first and len(first) >= 4


def test_committed_run_records_are_reached_by_todays_keys():
    """The full-MNIST tuning runs committed in paper_figs/fairdp are found under the keys today's code computes:
    every record is a run of the tuning plan. A change to the keys' canonical form (once: the cache's file-layout
    version inside every key) would silently retrain ~30 CPU-hours of recorded runs; this fails first (the
    figures' records share :func:`config_key`; the slow twin checks they leave nothing to train)."""
    record_runs = _load_tool("record_runs")
    tuning, study = record_runs.tuning, record_runs.mnist_tuning
    base = study.mnist_tuning_base("full")
    plan_keys = {tuning.tuning_key(tuning.tuned_config(base, configuration), method, seed, tuning.VALIDATION_FRACTION)
                 for method, configuration, seed in study.mnist_tuning_plan(base)}
    recorded = json.loads((NOTEBOOK_DIR.parent / "paper_figs/fairdp/mnist_tuning_runs.json").read_text())["records"]
    assert recorded and set(recorded) <= plan_keys


@pytest.mark.slow
def test_committed_figure_records_leave_nothing_to_train(monkeypatch):
    """All 64 runs of the MNIST figures are recorded under today's keys (loads full MNIST for its fingerprint)."""
    record_runs = _load_tool("record_runs")
    monkeypatch.setenv("DPFAIR_CACHE_ALLOW_STALE", "1")
    figures = record_runs.RunRecords(NOTEBOOK_DIR.parent / "paper_figs/fairdp/mnist_runs.json")
    assert record_runs.pending("full", figures) == []
