"""The equal-epsilon method grid (experiments/method_grid.py, issue 51.3): every registered method, the same budget,
every configuration at DP-SGD's epsilon, batched runs equal to the protocol's single runs, the robustness and
selection tables on known rows, and verdicts (verify/reproduction.py) that flip across the printed gain."""

import math

import pandas as pd
import pytest

from dpfair_analysis.experiments import method_grid as G
from dpfair_analysis.experiments import tuning as T
from dpfair_analysis.experiments.compare import dpsgd_epsilon_target
from dpfair_analysis.experiments.dpsgdf import with_profile
from dpfair_analysis.training import methods
from dpfair_analysis.verify import reproduction as R


def test_every_registered_method_has_a_grid_of_the_same_budget():
    assert set(G.METHOD_GRIDS) == set(methods.names())
    assert {len(grid) for grid in G.METHOD_GRIDS.values()} == {G.GRID_SIZE}
    plan = G.study_plan(tuple(G.METHOD_GRIDS))
    assert len(plan) == G.GRID_SIZE * len(G.METHOD_GRIDS) and all(i == 0 for _, i, c in plan[::G.GRID_SIZE])
    with pytest.raises(ValueError, match="must have a grid"):
        G.study_plan(("dpsgd", "nonsense"))
    uneven = {"dpsgd": G.METHOD_GRIDS["dpsgd"], "sgd": G.METHOD_GRIDS["sgd"].head(2)}
    with pytest.raises(ValueError, match="same budget"):
        G.study_plan(("dpsgd", "sgd"), uneven)


def test_a_configuration_sets_the_loop_the_bound_and_the_methods_own_options():
    base = G.setting_configs()["adult-sex"]
    config = T.tuned_config(base, {"lr": 0.2, "min_clip": 1.0}, method="boundedadaptive")
    assert config.train.lr == 0.2 and config.options("boundedadaptive").min_clip == 1.0
    assert T.tuned_config(base, {"clip_bound": 2.0}).clip_bound == 2.0
    assert T.tuned_config(base, {"lr": 0.02}) == T.tuned_config(base, {"lr": 0.02}, method="dpsgd")
    with pytest.raises(ValueError, match="sets lr, sampling, clip_bound and optq's options"):
        T.tuned_config(base, {"min_clip": 1.0}, method="optq")


def test_batched_runs_are_the_protocols_single_runs_and_all_at_dpsgds_epsilon():
    """On a tiny Adult (the quick profile): every configuration of DP-SGD and Global-Adapt trained together
    gives what the protocol's single run gives, and no private run spends more than DP-SGD's full-run epsilon."""
    base = with_profile(G.setting_configs()["adult-sex"], "quick")
    rows = G.run_study(base, methods=("dpsgd", "globaladapt"), seeds=(0,))
    assert set(rows["configuration_index"]) == set(range(G.GRID_SIZE))
    configuration = G.METHOD_GRIDS["globaladapt"].configurations()[3]
    single = pd.DataFrame(T.tuning_run(T.tuned_config(base, configuration, method="globaladapt"), "globaladapt",
                                       seed=0)["rows"])
    batched = rows[(rows["method"] == "globaladapt") & (rows["configuration_index"] == 3)]
    assert batched["accuracy"].tolist() == pytest.approx(single["accuracy"].tolist(), abs=1e-9)
    train, _, _ = T.validation_split(base, seed=0)
    assert rows["epsilon"].max() <= dpsgd_epsilon_target(base, len(train)) + 1e-9


def _rows(worst: dict, *, seeds=(0, 1)) -> pd.DataFrame:
    """Rows of run_study: ``worst[(method, configuration index)] = (validation, test)`` accuracy of group B; group
    A is at 0.9 everywhere."""
    rows = []
    for (method, index), (val, test) in worst.items():
        for seed in seeds:
            for split, b in (("validation", val), ("test", test)):
                for group, accuracy in (("A", 0.9), ("B", b), ("all", (0.9 + b) / 2)):
                    rows.append({"method": method, "seed": seed, "split": split, "group": group,
                                 "accuracy": accuracy, "epsilon": 2.0, "configuration": f"c{index}",
                                 "configuration_index": index})
    return pd.DataFrame(rows)


def test_the_robustness_table_reports_the_grids_range_and_the_validation_choice():
    rows = _rows({("dpsgd", 0): (0.6, 0.62), ("dpsgd", 1): (0.7, 0.65), ("dpsgd", 2): (0.5, 0.8),
                  ("optq", 0): (0.6, 0.6), ("optq", 1): (0.6, 0.7)})
    table = G.robustness_table(rows).set_index("method")
    assert table.loc["dpsgd", "range"] == pytest.approx(0.18) and table.loc["dpsgd", "grid_max_worst"] == 0.8
    # chosen on the validation score (c1), never on the test rows' best (c2)
    assert table.loc["dpsgd", "chosen"] == "c1" and table.loc["dpsgd", "chosen_worst"] == pytest.approx(0.65)
    assert table.loc["dpsgd", "chosen_gap"] == pytest.approx(0.25)
    assert table.loc["optq", "chosen"] == "c0"  # a tie goes to the defaults
    assert table.loc["dpsgd", "default_worst"] == pytest.approx(0.62)


@pytest.mark.parametrize("gain, verdict", [(0.06, "reproduces at the printed settings"),
                                           (0.031, "reproduces at the printed settings"),
                                           (0.02, "does not reproduce within the budget")])
def test_a_claims_verdict_flips_across_the_printed_gain_minus_the_margin(gain, verdict):
    rows = _rows({("dpsgd", 0): (0.6, 0.6), ("boundedadaptive", 0): (0.6, 0.6 + gain),
                  ("optq", 0): (0.6, 0.6)})
    robustness = {"skewed": G.robustness_table(rows)}
    table = R.later_claim_verdicts(robustness, judged={"skewed": "nearest"}).set_index("claim")
    assert table.loc["zhao-vs-constant", "verdict"] == verdict
    assert table.loc["zhao-vs-unbounded", "verdict"] == "does not reproduce within the budget"
    elsewhere = R.later_claim_verdicts(robustness).set_index("claim")
    assert (elsewhere["verdict"] == R.NO_MATCHING_SETTING).all()
    assert elsewhere.loc["zhao-vs-constant", "gain_at_defaults"] == pytest.approx(gain)


def test_the_study_json_is_plain_json_with_its_grids_and_selection_privacy():
    import json

    rows = _rows({("dpsgd", 0): (0.6, 0.62), ("dpsgd", 1): (0.7, math.nan)})
    payload = G.study_json({"adult-sex": rows}, seeds=(0, 1), methods=("dpsgd",))
    text = json.dumps(payload, allow_nan=False)
    assert "selection not private" in text and payload["grids"]["dpsgd"]["configurations"] == G.GRID_SIZE
    assert payload["settings"]["adult-sex"]["seeds"] == [0, 1]
    assert payload["settings"]["adult-sex"]["methods_missing"] == []
    assert G.study_json({"adult-sex": rows}, seeds=(0,), methods=("dpsgd", "optq"))["settings"]["adult-sex"][
        "methods_missing"] == ["optq"]


def _recorder():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "notebooks" / "record_issue51.py"
    spec = importlib.util.spec_from_file_location("record_issue51", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_the_recorder_refuses_bad_arguments_in_one_line(capsys):
    tool = _recorder()
    for argv, flag in ((["--study", "nonsense"], "--study"), (["--study", "method-grid", "--seeds", "0"], "--seeds"),
                       (["--study", "method-grid", "--settings", "mnist"], "--settings")):
        with pytest.raises(SystemExit) as stop:
            tool.parse(argv)
        err = capsys.readouterr().err.strip()
        assert stop.value.code == 2 and len(err.splitlines()) == 1 and flag in err
    assert tool.main(["--study", "method-grid", "--methods", "dpsgd,nonsense", "--out", "/nonexistent/x.json"]) == 2


def test_the_recording_order_is_every_method_once():
    assert sorted(G.RECORDING_ORDER) == sorted(G.METHOD_GRIDS)


def test_the_recorder_merges_the_rows_other_processes_recorded(tmp_path):
    """Two method-grid files, one method each, merged into --out: nothing is trained (every (seed, method) is
    there), both methods' tables are written, a row recorded twice is kept once."""
    import json

    tool = _recorder()
    parts = []
    for method in ("dpsgd", "optq"):
        rows = _rows({(method, 0): (0.6, 0.62), (method, 1): (0.7, 0.65)}, seeds=(0,))
        path = tmp_path / f"{method}.json"
        tool.write_json(path, G.study_json({"adult-sex": rows}, seeds=(0,), methods=(method,)))
        parts.append(str(path))
    out = tmp_path / "out.json"
    argv = ["--study", "method-grid", "--settings", "adult-sex", "--seeds", "1", "--methods", "dpsgd,optq",
            "--out", str(out), "--merge", ",".join(parts + parts[:1])]
    assert tool.main(argv) == 0
    merged = json.loads(out.read_text())["settings"]["adult-sex"]
    assert {r["method"] for r in merged["robustness"]} == {"dpsgd", "optq"}
    assert len(merged["rows"]) == 2 * 2 * 2 * 3  # methods x configurations x splits x groups, no duplicate
