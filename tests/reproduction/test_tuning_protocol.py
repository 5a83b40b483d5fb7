"""Issue 36's reproduction protocol at the full settings (slow: `pytest -m slow tests/reproduction`).

PF-LD's Table 2 on COMPAS under the protocol (every method tuned with 16 configurations on validation rows of
each training fold, the choice refitted and tested on the test fold) takes about an hour of one core cold; its
runs are read from the committed records (``notebooks/record_runs.py --study pfld-tuned --data compas``,
``paper_figs/pfld/tuned_runs_compas.json``; ``DPFAIR_CACHE_ALLOW_STALE=1`` serves them to later code). The MNIST checks read the committed run records of
``notebooks/record_runs.py --study mnist-tuning`` and train nothing. The assertions are the measured verdicts
(issue 36's closing note), each with the numbers it rests on, so a change that moves a verdict fails here.
"""

import json
from pathlib import Path

import pandas as pd
import pytest

from dpfair_analysis.experiments import pfld_tuned as PT
from dpfair_analysis.verify import reproduction as R
from dpfair_analysis.experiments import mnist_tuning as M
from dpfair_analysis.experiments import tuning as T
from dpfair_analysis.experiments.cache import RunCache, RunRecords, default_cache_dir

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compas():
    records = RunRecords(REPO / "paper_figs" / "pfld" / "tuned_runs_compas.json")
    return R.tuned_side_by_side(PT.tuned_table2("compas", cache=RunCache(default_cache_dir()), records=records)
                                ).set_index(["constraint", "method"])


def test_tuned_compas_is_the_committed_table(compas):
    committed = pd.DataFrame(json.loads((REPO / "paper_figs" / "pfld" / "tuned_table2_compas.json").read_text())[
        "summary"]).set_index(["constraint", "method"])
    for column in ("tuned_accuracy", "tuned_violation", "default_accuracy", "default_violation"):
        assert compas[column].to_numpy() == pytest.approx(committed.loc[compas.index, column].to_numpy(), abs=1e-9)
    assert (compas["verdict"] == committed.loc[compas.index, "verdict"]).all()


def test_pfld_on_compas_reproduces_after_tuning_under_ap_only(compas):
    """With each run's features scaled on its own training rows: at the printed configuration PF-LD is 0.089-0.093
    below the paper's accuracy under every constraint (0.578 / 0.578 / 0.584); the validation choice reaches the
    paper's cells under ap (0.671 / 0.027 vs 0.671 / 0.031) and falls short of the accuracy under dp (0.615 vs
    0.667) and eo (0.637 vs 0.677). Scaled on all rows (test folds included), dp had reproduced after tuning
    (0.654)."""
    pfld = compas.xs("pfld", level="method")
    assert (pfld["paper_accuracy"] - pfld["default_accuracy"]).min() > 0.07
    assert pfld.loc["ap", "verdict"] == R.TUNED
    assert pfld.loc["dp", "verdict"] == R.NOT_REPRODUCED and pfld.loc["eo", "verdict"] == R.NOT_REPRODUCED
    for constraint in ("dp", "eo"):
        row = pfld.loc[constraint]
        assert row["paper_accuracy"] - row["tuned_accuracy"] > row["accuracy_margin"]


def test_mnist_tuning_records_choose_on_validation_only():
    """Every recorded MNIST tuning run has its validation and test rows; for each method whose budget is
    complete the choice is the best validation accuracy, and it stays the choice when the test rows change."""
    records = RunRecords(REPO / "paper_figs" / "fairdp" / "mnist_tuning_runs.json")
    base = M.mnist_tuning_base("full")
    rows = T.recorded_tuning_runs(base, methods=M.MNIST_TUNING_METHODS, grid=M.MNIST_GRID, records=records,
                                  compute_missing=False)
    if rows.empty:
        pytest.fail("no MNIST tuning run is recorded (notebooks/record_runs.py --study mnist-tuning)")
    assert set(rows["split"]) == {"validation", "test"}
    assert set(rows.query("split == 'validation'")["n"].groupby(rows["group"]).first().index) >= {"all", "2", "8"}
    status = T.budget_status(rows, M.MNIST_GRID, M.MNIST_TUNING_METHODS)
    complete = list(status.loc[status["complete"], "method"])
    part = rows[rows["method"].isin(complete)]
    if complete:
        chosen = T.printed_and_tuned(part, groups=M.MNIST_GROUPS).query("which == 'tuned'").set_index("method")
        best = part.query("split == 'validation' and group == 'all'").groupby("method")["accuracy"].max()
        assert (chosen.loc[complete, "val_all"] == best.loc[complete]).all()
        shuffled = part.assign(accuracy=part["accuracy"].where(part["split"] == "validation", 1 - part["accuracy"]))
        again = T.printed_and_tuned(shuffled, groups=M.MNIST_GROUPS).query("which == 'tuned'").set_index("method")
        assert (again.loc[complete, "configuration"] == chosen.loc[complete, "configuration"]).all()
