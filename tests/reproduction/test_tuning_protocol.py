"""Issue 36's reproduction protocol at the full settings (slow: `pytest -m slow tests/reproduction`).

PF-LD's Table 2 on COMPAS under the protocol (every method tuned with 16 configurations on validation rows of
each training fold, the choice refitted and tested on the test fold) takes about an hour of one core cold;
its runs are cached by configuration in $DPFAIR_CACHE. The MNIST checks read the committed run records of
``notebooks/record_runs.py --study mnist-tuning`` and train nothing. The assertions are the measured verdicts
(issue 36's closing note), each with the numbers it rests on, so a change that moves a verdict fails here.
"""

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
    return R.tuned_side_by_side(PT.tuned_table2("compas", cache=RunCache(default_cache_dir()))).set_index(
        ["constraint", "method"])


def test_tuned_compas_is_the_committed_table(compas):
    committed = pd.read_csv(REPO / "paper_figs" / "pfld" / "tuned_table2_compas.csv").set_index(["constraint",
                                                                                                  "method"])
    for column in ("tuned_accuracy", "tuned_violation", "default_accuracy", "default_violation"):
        assert compas[column].to_numpy() == pytest.approx(committed.loc[compas.index, column].to_numpy(), abs=1e-9)
    assert (compas["verdict"] == committed.loc[compas.index, "verdict"]).all()


def test_pfld_on_compas_reproduces_after_tuning_under_dp_and_ap_not_eo(compas):
    """At the printed configuration PF-LD is 0.08-0.11 below the paper's accuracy under every constraint; the
    validation choice (lr 0.2, 5 epochs, C_p = 1 in most folds) reaches the paper's cells under dp (0.648 /
    0.125 vs 0.667 / 0.098, margins 0.02 / 0.037) and ap (0.675 / 0.036 vs 0.671 / 0.031), and falls 0.031 short
    of the accuracy under eo (0.646 vs 0.677)."""
    pfld = compas.xs("pfld", level="method")
    assert (pfld["paper_accuracy"] - pfld["default_accuracy"]).min() > 0.07
    assert pfld.loc["dp", "verdict"] == R.TUNED and pfld.loc["ap", "verdict"] == R.TUNED
    assert pfld.loc["eo", "verdict"] == R.NOT_REPRODUCED
    assert pfld.loc["eo", "paper_accuracy"] - pfld.loc["eo", "tuned_accuracy"] > pfld.loc["eo", "accuracy_margin"]
    assert all("clip_primal 1" in c for c in pfld["chosen_most_often"])


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
