"""benchmarks/per_sample_step.py runs (so it cannot rot): --quick on the smallest model, JSON schema checked.

No timing is asserted: only that every method ran and wrote a well-formed row.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "per_sample_step.py"
METHODS = ("plain", "dpfair", "dpfair_backward", "dpfair_vmap", "opacus", "opacus_ghost", "microbatch")


def run(*args: str, tmp_path: Path, script: Path = SCRIPT) -> subprocess.CompletedProcess:
    """``python benchmarks/SCRIPT ARGS`` in a fresh process from ``tmp_path``, importing this checkout's package."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(script), *args], check=False, capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)


def test_quick_benchmark_writes_a_row_for_every_method(tmp_path):
    out = tmp_path / "bench.json"
    res = run("--quick", "--models", "logreg", "--out", str(out), tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    payload = json.loads(out.read_text())
    assert {"rows", "settings", "ratios"} <= payload.keys()
    assert payload["settings"]["quick"] is True and payload["settings"]["threads"] == 1
    rows = payload["rows"]
    assert sorted(r["method"] for r in rows) == sorted(METHODS)
    for row in rows:
        assert row["model"] == "logreg"
        assert {"model", "method", "median_ms", "peak_mb"} <= row.keys()
        assert math.isfinite(row["median_ms"]) and row["median_ms"] > 0
        assert row["peak_mb"] is None  # --quick skips the memory subprocesses
    ratios = payload["ratios"]["logreg"]
    assert ratios["best_opacus"] in ("opacus", "opacus_ghost")
    for key in ("dpfair_ratio_to_plain", "dpfair_paired_ratio_to_plain", "dpfair_ratio_to_best_opacus"):
        assert math.isfinite(ratios[key]) and ratios[key] > 0
    # the correctness check rides along: the engines' sigma = 0 clipped sums agree (float32)
    agreement = payload["models"]["logreg"]["agreement"]
    for key in ("dpfair_vs_vmap", "dpfair_backward_vs_vmap", "microbatch_vs_vmap"):
        assert agreement[key]["max_abs_diff_relative_to_max_abs_sum"] < 1e-5
    assert "logreg" in res.stdout and "wrote" in res.stdout
    assert {row["layout"] for row in rows} == {"contiguous"} and ratios["layout"] == "contiguous"


def test_the_cnn_is_timed_in_the_layout_train_uses_with_its_ratio_and_full_run_time(tmp_path, capsys):
    """Issue 49.2: the CNN's rows say their layout (channels_last, as train() stores it on the CPU), the DP / plain
    ratio is taken in it, and a full-MNIST run's step time is projected from the median step."""
    out = tmp_path / "cnn.json"
    module = benchmark("per_sample_step")  # in-process: no second interpreter to start
    assert module.main(["--quick", "--models", "cnn", "--methods", "plain,dpfair", "--no-agreement",
                        "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert {row["layout"] for row in payload["rows"]} == {"channels_last"}
    ratios = payload["ratios"]["cnn"]
    assert ratios["layout"] == "channels_last" and ratios["dpfair_ratio_to_plain"] > 0
    assert ratios["dpfair_full_run_step_minutes"] > 0 and ratios["plain_full_run_step_minutes"] > 0
    printed = capsys.readouterr().out
    assert "cnn     channels_last" in printed and "12,809 steps" in printed


def test_quick_and_project_are_refused_together(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:  # in-process: no second interpreter to start
        benchmark("per_sample_step").main(["--quick", "--project", "--out", str(tmp_path / "x.json")])
    assert exit_.value.code == 2 and "--project" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def benchmark(name: str):
    """benchmarks/<name>.py imported as a module (to call its main() in-process)."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_exact_traces_benchmark_quick_writes_agreeing_routes(tmp_path):
    """benchmarks/exact_traces.py --quick, in-process: both exact routes ran and agree to 1e-10."""
    module = benchmark("exact_traces")
    out = tmp_path / "traces.json"
    assert module.main(["--quick", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["settings"]["rows"] == 200 and payload["settings"]["params"] == 1378
    assert payload["reference"]["max_relative_difference"] <= 1e-10
    assert all(math.isfinite(t) and t > 0 for t in payload["traces"])  # cross-entropy Hessians are PSD
    assert payload["speed_ratio"] > 0 and payload["basis_hvp_seconds"] > 0


def test_sweep_backends_benchmark_quick_times_identical_backends(tmp_path):
    """benchmarks/sweep_backends.py --quick, in-process: serial and joblib ran the grid, identical results."""
    out = tmp_path / "sweep.json"
    assert benchmark("sweep_backends").main(["--quick", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert [r["backend"] for r in payload["rows"]] == ["serial", "joblib"]
    assert all(r["identical_to_serial"] and r["seconds"] > 0 for r in payload["rows"])
    assert payload["settings"]["runs"] == 4


def test_sweep_throughput_benchmark_quick_writes_every_variant(tmp_path):
    """benchmarks/sweep_throughput.py --quick: train(), the minimal loop and seeds batched each measured, the
    minimal loop agreeing with train() to float32 rounding (the floor is the same algorithm)."""
    out = tmp_path / "throughput.json"
    assert benchmark("sweep_throughput").main(["--quick", "--models", "logreg", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    variants = {row["variant"] for row in payload["rows"]}
    assert variants == {"train", "minimal", "batched_2"}
    assert all(row["run_steps_per_second"] > 0 for row in payload["rows"])
    assert payload["ratios"]["logreg"]["minimal_vs_train_parameter_agreement"] < 1e-5
    assert all(row["run_steps_per_cpu_second"] > 0 for row in payload["rows"])


def test_sweep_throughput_times_a_command_with_the_package_of_its_checkout(tmp_path):
    """The before/after commands import the checkout they are given, not the one the benchmark runs from
    (``python -c``/``-m`` put the working directory ahead of PYTHONPATH: it must be the checkout)."""
    fake = tmp_path / "old"
    (fake / "dpfair_analysis").mkdir(parents=True)
    (fake / "dpfair_analysis" / "__init__.py").write_text("")
    marker = tmp_path / "imported.txt"
    code = f"import pathlib, dpfair_analysis; pathlib.Path({str(marker)!r}).write_text(dpfair_analysis.__file__)"
    timed = benchmark("sweep_throughput").time_command(["-c", code], fake)
    assert Path(marker.read_text()).resolve() == (fake / "dpfair_analysis" / "__init__.py").resolve()
    assert timed["wall_seconds"] > 0 and timed["cpu_seconds"] >= 0


def test_sweep_throughput_refuses_study_options_without_commands(tmp_path, capsys):
    module = benchmark("sweep_throughput")
    for argv in (["--commands-only"], ["--study-setting", "adult-sex"], ["--commands", "--study-setting", "nope"]):
        with pytest.raises(SystemExit) as exit_:
            module.main([*argv, "--out", str(tmp_path / "x.json")])
        assert exit_.value.code == 2
    assert "--study-setting must be one of" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_startup_benchmark_quick_times_every_command_in_a_fresh_process(tmp_path):
    """benchmarks/startup_time.py --quick: each command timed once (exit status and error line checked by the
    script; epsilon's seconds of dp_accounting left to the full run), and the heavy modules each leaves imported
    listed -- --help and a refusal none of torch/scipy."""
    out = tmp_path / "startup.json"
    assert benchmark("startup_time").main(["--quick", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert {(r["code"], r["command"]) for r in payload["rows"]} == {
        ("after", c) for c in ("import_cli", "help", "bad_input")}
    assert all(r["wall_seconds"] > 0 for r in payload["rows"])
    modules = payload["heavy_modules"]["after"]
    assert not {"torch", "scipy"} & set(modules["help"] + modules["bad_input"])


def test_privacy_testing_benchmark_smoke(tmp_path):
    """benchmarks/privacy_testing.py --smoke: every part runs and writes a row per mechanism (no number asserted
    beyond the verdicts the smoke budget is sure of: the incorrect NoisyHist2, true epsilon 10, is caught, batched
    and as a plain function)."""
    script = ROOT / "benchmarks" / "privacy_testing.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "privacy.json"
    res = subprocess.run([sys.executable, str(script), "--smoke", "--spread", "--out", str(out),
                          "--parts", "quick,bound,matched,consistency,plain"], check=False,
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    payload = json.loads(out.read_text())
    rows = {r["mechanism"]: r for r in payload["rows"]}
    assert set(rows) == {"laplace", "noisy_hist2", "noisy_max1"} and payload["settings"]["smoke"] is True
    for row in rows.values():
        assert {"quick", "bound", "matched", "anchors", "best_anchor"} <= row.keys()
        assert math.isfinite(row["quick"]["epsilon_lower"]) and row["quick"]["seconds"] > 0
        assert row["matched"]["at_least_best_anchor"] == (row["matched"]["epsilon_lower"] >= row["best_anchor"])
    assert payload["settings"]["matched_confidence"] == 0.9 and payload["settings"]["matched_budget"]["min_event"] > 0
    assert rows["noisy_hist2"]["quick"]["caught"] and rows["laplace"]["consistency"]["seeds"] == 2
    plain = {name: row["plain"] for name, row in rows.items()}  # one output per call, one seed at the smoke budget
    assert all(p["seeds"] == 1 and p["budget"] == "smoke" and len(p["events"]) == 1 and p["cpu_seconds"][0] > 0
               for p in plain.values())
    assert plain["noisy_hist2"]["caught"] == 1 and plain["noisy_hist2"]["target_met"]
    assert "plain functions (one output per call), smoke budget" in res.stdout
    spread = payload["anchor_spread"]
    assert {e["mechanism"] for e in spread.values()} == {"laplace", "noisy_hist2", "noisy_max2", "svt1", "svt4"}
    assert all(e["p5"] <= e["median"] <= e["p95"] and 0 <= e["published_quantile"] <= 1 for e in spread.values())
    assert all(e["trials"] == 20_000 and e["confidence"] == 0.9 and e["delta"] == 0.0 for e in spread.values())
    assert "wrote" in res.stdout and "own events, the best ones and the kit's replayed" in res.stdout


def test_privacy_testing_plain_part_records_each_audit_and_resumes(tmp_path, monkeypatch):
    """--plain-records: every plain audit is recorded as it ends (keyed by mechanism, seed, budget, confidence;
    fingerprinted by the kit's source) and a second run reads them back instead of auditing again."""
    bench = benchmark("privacy_testing")
    records, outs = tmp_path / "plain_runs.json", [tmp_path / "first.json", tmp_path / "second.json"]
    args = ["--smoke", "--parts", "plain", "--mechanisms", "laplace,noisy_hist2", "--plain-records", str(records)]
    assert bench.main([*args, "--out", str(outs[0])]) == 0
    entries = json.loads(records.read_text())["records"]
    assert sorted(e["label"] for e in entries.values()) == ["plain audit: laplace seed 0, smoke budget",
                                                              "plain audit: noisy_hist2 seed 0, smoke budget"]
    assert {e["fingerprint"] for e in entries.values()} == {bench.kit_fingerprint()}

    def no_audit(*a, **k):
        raise AssertionError("a recorded audit was run again")

    monkeypatch.setattr(bench, "run_audit", no_audit)
    assert bench.main([*args, "--out", str(outs[1])]) == 0
    first, second = ([r["plain"] for r in json.loads(out.read_text())["rows"]] for out in outs)
    assert first == second and second[1]["caught"] == 1 and second[1]["seed_list"] == [0]
    # --plain-recorded-only reports what is recorded and computes nothing: an empty file gives no plain row
    empty = ["--smoke", "--parts", "plain", "--mechanisms", "laplace", "--plain-records", str(tmp_path / "none.json"),
             "--plain-recorded-only", "--out", str(tmp_path / "third.json")]
    assert bench.main(empty) == 0 and "plain" not in json.loads((tmp_path / "third.json").read_text())["rows"][0]


def test_privacy_testing_wall_part_times_full_plain_audits_against_ten_minutes(tmp_path, capsys):
    """--parts wall: the issue's time target (a plain function's full audit <= 10 minutes) as one command -- the
    plain part's audit on each seed with --workers, its wall and CPU seconds (smoke budget here: one seed)."""
    bench = benchmark("privacy_testing")
    out = tmp_path / "wall.json"
    assert bench.main(["--smoke", "--parts", "wall", "--mechanisms", "noisy_hist2", "--workers", "2",
                       "--out", str(out)]) == 0
    wall = json.loads(out.read_text())["rows"][0]["wall"]
    assert wall["workers"] == 2 and wall["seeds"] == [0] and wall["budget"] == "smoke" and wall["caught"] == [True]
    assert 0 < wall["seconds"][0] <= wall["target_seconds"] == 600 and wall["target_met"] and wall["cpu_seconds"][0] > 0
    assert "with 2 workers (seeds 0; met 600 s)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--parts", "wall", "--wall-seeds", "4,x"])
    assert exit_.value.code == 2 and "--wall-seeds must be comma-separated integers" in capsys.readouterr().err


def test_a_plain_audit_that_runs_out_of_time_is_not_recorded_and_the_recorder_goes_on(tmp_path, monkeypatch,
                                                                                       capsys):
    """An audit that exceeds its wall-time budget (a loaded machine, or one stopped for a while) is said, left
    unrecorded for the next run to retry, and the recorder continues with the next audit instead of ending."""
    from dpfair_analysis.experiments.cache import RunRecords
    from dpfair_analysis.testing.auditing import SMOKE
    from dpfair_analysis.testing.runner import AuditTimeout
    from dpfair_analysis.testing.zoo import catalogue

    bench = benchmark("privacy_testing")
    zoo = catalogue()
    real = bench.run_audit

    def audit(z, **kwargs):
        if z.name == "laplace":
            raise AuditTimeout("mechanism laplace used up the time budget of 3600 s after 12 calls")
        return real(z, **kwargs)

    monkeypatch.setattr(bench, "run_audit", audit)
    records = RunRecords(tmp_path / "plain.json", fingerprint=bench.kit_fingerprint)
    bench.record_plain_audits([zoo["laplace"], zoo["noisy_hist2"]], budget=SMOKE, seeds=1, confidence=0.9,
                              workers=None, records=records)
    assert [e["label"] for e in json.loads((tmp_path / "plain.json").read_text())["records"].values()] == [
        "plain audit: noisy_hist2 seed 0, smoke budget"]
    assert "not recorded: laplace seed 0 ran out of time" in capsys.readouterr().err


def test_committed_plain_audit_records_are_reached_by_todays_keys():
    """Every audit recorded in benchmarks/results/privacy_testing_plain_runs.json (the 20-seed plain part, recorded
    across sessions) is found under a key today's benchmark computes: a change to the keys would silently rerun
    hours of audits."""
    from dpfair_analysis.testing.auditing import FULL
    from dpfair_analysis.testing.zoo import catalogue

    bench = benchmark("privacy_testing")
    keys = {bench.plain_key(z, budget=FULL, seed=seed, confidence=0.95) for z in catalogue().values()
            for seed in range(20)}
    recorded = json.loads((ROOT / "benchmarks" / "results" / "privacy_testing_plain_runs.json").read_text())["records"]
    assert recorded and set(recorded) <= keys


def test_the_anchor_events_exact_probabilities_match_the_reference_mechanisms_runs():
    """The closed forms the anchors' replay uses, against 2 M runs of the zoo's own mechanisms (4.5 standard
    errors): StatDP's Laplace event, ReportNoisyMax2's "argmax = 0" on [2, 0, 0, 0, 0] and SVT4's first "above"
    at query 6 on [1] * 10."""
    from dpfair_analysis.testing.zoo import catalogue

    events, zoo, n = benchmark("privacy_testing").ANCHOR_EVENTS, catalogue(), 2_000_000
    rng = np.random.default_rng(0)
    laplace = zoo["laplace"].batched()(np.array([1.0]), rng, n).reshape(n, -1)[:, 0] < -0.8341652871980578
    argmax = zoo["noisy_max2"].batched()(np.array([2.0, 0, 0, 0, 0]), rng, n).reshape(n, -1)[:, 0] == 0
    svt4 = zoo["svt4"].batched()(np.ones(10), rng, n)[:, 5] == 1
    for hits, p in ((laplace, events["laplace, StatDP's event"][2]), (argmax, events["noisy_max2, StatDP's event"][3]),
                    (svt4, events["svt4, StatDP's event"][3])):
        assert abs(hits.mean() - p) < 4.5 * math.sqrt(p * (1 - p) / n)


def test_diagnose_cost_benchmark_quick_times_the_diagnosis_against_a_run(tmp_path):
    """benchmarks/diagnose_cost.py --quick, in-process: one synthetic cell, all three timings and the ratios."""
    out = tmp_path / "cost.json"
    assert benchmark("diagnose_cost").main(["--quick", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    (row,) = payload["rows"]
    assert row["setting"] == "synthetic" and row["repeats"] == 1
    assert all(row[k] > 0 for k in ("diagnosis", "diagnosis_with_recommendations", "dp_training"))
    assert row["ratio_with_recommendations"] == row["diagnosis_with_recommendations"] / row["dp_training"]
    assert payload["summary"]["defaults"]["max_ratio_with_recommendations"] == row["ratio_with_recommendations"]
    assert row["cpu_ratio_with_recommendations"] == (row["diagnosis_with_recommendations_cpu"]
                                                     / row["dp_training_cpu"]) > 0


def test_individual_privacy_benchmark_runs_quick(tmp_path):
    """benchmarks/individual_privacy.py --quick: synthetic data, every group's row and the timings written."""
    out = tmp_path / "individual.json"
    res = run("--quick", "--out", str(out), tmp_path=tmp_path, script=ROOT / "benchmarks" / "individual_privacy.py")
    assert res.returncode == 0, res.stderr[-3000:]
    payload = json.loads(out.read_text())
    assert {row["group"] for row in payload["groups"]} == {"all", "a", "b"}
    assert payload["estimate_worst_case"] == pytest.approx(payload["run_epsilon"], rel=1e-12)
    assert all(row["value"] <= payload["run_epsilon"] * (1 + 1e-12) for row in payload["groups"]
               if row["metric"] in ("mean", "max"))
    assert "not guarantees" in res.stdout


def test_group_privacy_cost_benchmark_runs_quick(tmp_path):
    """benchmarks/group_privacy_cost.py --quick: the run alone, each recorder's and the accounting's CPU time, the
    recorders' epsilon_i compared (synthetic data)."""
    out = tmp_path / "cost.json"
    res = run("--quick", "--out", str(out), tmp_path=tmp_path, script=ROOT / "benchmarks" / "group_privacy_cost.py")
    assert res.returncode == 0, res.stderr[-3000:]
    row = json.loads(out.read_text())["results"]["synthetic"]
    assert set(row["recorders"]) == {"per_epoch", "sampled", "every_step"}
    assert all(r["same_run"] and r["recorder"] >= 0 and r["accounting"] >= 0 for r in row["recorders"].values())
    assert row["sampled_vs_every_step"]["max_relative"] >= 0


def test_group_privacy_accounting_benchmark_runs_quick(tmp_path):
    """benchmarks/group_privacy_cost.py --accounting --quick: a DPSGD-F run's accounting now and as computed before
    (the same epsilon_i), synthetic data."""
    out = tmp_path / "accounting.json"
    res = run("--accounting", "--quick", "--out", str(out), tmp_path=tmp_path,
              script=ROOT / "benchmarks" / "group_privacy_cost.py")
    assert res.returncode == 0, res.stderr[-3000:]
    row = json.loads(out.read_text())["results"]["synthetic / dpsgdf"]
    assert row["accounting_cpu"] >= 0 and row["accounting_before_cpu"] >= 0
    assert row["max_relative_difference"] < 1e-9
