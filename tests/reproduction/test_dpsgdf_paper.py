"""Paper 000's reproduction at its full settings (slow: run with `make test-slow`).

These runs take tens of minutes on 2 cores; results are cached by configuration in the
user's run cache (~/.cache/dpfair_analysis/runs, or $DPFAIR_RUN_CACHE), so re-running after
a finished sweep is quick. The assertions are the paper's claims that our measurements
support (see the issue notes for those that do not reproduce).
"""

import os
from pathlib import Path

import pytest

from dpfair_analysis.experiments import dpsgdf as paper
from dpfair_analysis.experiments.cache import RunCache

pytestmark = pytest.mark.slow
CACHE = RunCache(Path(os.environ.get("DPFAIR_RUN_CACHE", Path.home() / ".cache" / "dpfair_analysis" / "runs")))


@pytest.fixture(scope="module")
def adult():
    return paper.census_table("adult", profile="full", seeds=5, cache=CACHE)


def cost(result, method, group):
    return result.table.set_index(["method", "group"]).loc[(method, group), "cost"]


def test_adult_sgd_accuracy_is_the_papers(adult):
    sgd = adult.table.set_index(["method", "group"])
    assert sgd.loc[("sgd", "all"), "accuracy"] == pytest.approx(0.8099, abs=0.01)
    assert sgd.loc[("sgd", "Male"), "accuracy"] == pytest.approx(0.7610, abs=0.015)
    assert sgd.loc[("sgd", "Female"), "accuracy"] == pytest.approx(0.9117, abs=0.015)


def test_adult_dpsgd_costs_men_more_than_women(adult):
    assert cost(adult, "dpsgd", "Male") < cost(adult, "dpsgd", "Female") - 0.03
    assert cost(adult, "dpsgd", "all") == pytest.approx(-0.0592, abs=0.01)


def test_adult_dpsgdf_narrows_the_gap_and_the_total_cost(adult):
    gaps = paper.equal_cost_verdicts(adult).set_index("method")
    assert gaps.loc["dpsgdf", "max_gap"] < gaps.loc["dpsgd", "max_gap"]
    assert cost(adult, "dpsgdf", "all") > cost(adult, "dpsgd", "all")


def test_adult_naive_barely_differs_from_dpsgd(adult):
    for group in ("all", "Male", "Female"):
        assert cost(adult, "naive", group) == pytest.approx(cost(adult, "dpsgd", group), abs=0.01)


def test_adult_dpsgd_at_the_papers_settings_is_a_constant_classifier():
    """Why DPSGD's and Naive's costs coincide (here and in the paper's Table 1): after 20 epochs
    at r = 1/sqrt(T), C = 0.5, sigma = 1 the model predicts <=50K for every test row, so each
    group's accuracy is its negative rate and the cost is SGD's accuracy above that rate."""

    from dpfair_analysis import data
    from dpfair_analysis.models import build_model
    from dpfair_analysis.training.policies import make_policy
    from dpfair_analysis.training.loop import TrainConfig, predict_logits, train

    train_set, test_set = data.load("adult").split(0.2, seed=0)
    model = build_model("logreg", input_shape=(40,), n_classes=2, l2=0.01, seed=0)
    train(model, train_set, make_policy("dpsgd", clip_bound=0.5, noise_multiplier=1.0), TrainConfig(epochs=20, seed=0),
          progress=False)
    assert int(predict_logits(model, test_set.X).argmax(dim=1).sum()) == 0


@pytest.fixture(scope="module")
def balanced():
    return paper.census_table("adult-balanced", profile="full", seeds=5, cache=CACHE)


def test_balanced_adult_dpsgdf_narrows_the_gap(balanced):
    gaps = paper.equal_cost_verdicts(balanced).set_index("method")
    assert gaps.loc["dpsgdf", "max_gap"] < gaps.loc["dpsgd", "max_gap"]
    assert cost(balanced, "dpsgd", "Male") < cost(balanced, "dpsgd", "Female")
