"""Group metrics against direct numpy computations of their definitions."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from dpfair_analysis.fairness.metrics import (cost_of_privacy, equal_costs, group_accuracy, max_cost_gap,
                                              parity_violations)


def test_group_accuracy_by_hand():
    y_true = [1, 0, 1, 1, 0, 0]
    y_pred = [1, 1, 1, 0, 0, 0]
    group = [0, 0, 0, 1, 1, 1]
    table = group_accuracy(y_true, y_pred, group, group_names=("a", "b", "empty")).set_index("group")
    assert table.loc["a", "accuracy"] == pytest.approx(2 / 3)
    assert table.loc["b", "accuracy"] == pytest.approx(2 / 3)
    assert table.loc["all", "accuracy"] == pytest.approx(4 / 6)
    assert table.loc["empty", "n"] == 0 and np.isnan(table.loc["empty", "accuracy"])
    assert list(table.index) == ["a", "b", "empty", "all"]


def test_cost_and_gap_follow_the_papers_sign_convention():
    nonprivate = pd.Series({"M": 0.7610, "F": 0.9117, "all": 0.8099})
    private = pd.Series({"M": 0.6870, "F": 0.8836, "all": 0.7507})
    costs = cost_of_privacy(private, nonprivate)
    assert costs["M"] == pytest.approx(-0.0740) and costs["F"] == pytest.approx(-0.0281)
    assert max_cost_gap(costs) == pytest.approx(0.0459)
    assert equal_costs(costs, tau=0.05) and not equal_costs(costs, tau=0.04)
    with pytest.raises(ValueError, match="different groups"):
        cost_of_privacy(private.drop("F"), nonprivate)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 3)), min_size=2, max_size=60))
def test_parity_violations_equal_the_max_pairwise_gaps(rows):
    y_true, y_pred, group = map(np.array, zip(*rows))
    groups = np.unique(group)
    result = parity_violations(y_true, y_pred, group)

    def max_gap(values):
        values = [v for v in values if not np.isnan(v)]
        return max((abs(a - b) for a, b in itertools.combinations(values, 2)), default=0.0)

    selection = [y_pred[group == g].mean() for g in groups]
    accuracy = [(y_pred[group == g] == y_true[group == g]).mean() for g in groups]
    assert result["demographic_parity"] == pytest.approx(max_gap(selection))
    assert result["accuracy_parity"] == pytest.approx(max_gap(accuracy))
    # Equalized odds: the larger of the TPR gap and the FPR gap (fairlearn's definition).
    rates = []
    for label in (1, 0):
        per_group = []
        for g in groups:
            mask = (group == g) & (y_true == label)
            per_group.append(y_pred[mask].mean() if mask.any() else np.nan)
        rates.append(per_group)
    if all(not np.isnan(v) for r in rates for v in r):
        assert result["equalized_odds"] == pytest.approx(max(max_gap(r) for r in rates))


def test_non_binary_predictions_have_no_parity_violation():
    result = parity_violations([0, 1, 2, 2], [0, 2, 2, 1], [0, 0, 1, 1])
    assert np.isnan(result["demographic_parity"]) and np.isnan(result["equalized_odds"])
    assert result["accuracy_parity"] == pytest.approx(0.0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6).flatmap(lambda k: st.tuples(
    st.just(k), st.lists(st.tuples(st.integers(0, k - 1), st.booleans()), min_size=1, max_size=300))))
def test_the_loops_bincount_accuracy_is_metricframes_to_the_bit(case):
    """per_group_accuracy (the training loop's, one bincount) equals group_accuracy (fairlearn's MetricFrame)
    exactly -- tiny, absent and single-row groups included."""
    import torch

    from dpfair_analysis.fairness.metrics import per_group_accuracy

    k, rows = case
    group = np.array([g for g, _ in rows])
    correct = np.array([c for _, c in rows])
    y_true = np.zeros(len(rows), dtype=int)
    y_pred = (~correct).astype(int)
    names = [f"g{i}" for i in range(k)]
    expected = group_accuracy(y_true, y_pred, group, group_names=names).set_index("group")["accuracy"]
    fast = per_group_accuracy(torch.from_numpy(correct), torch.from_numpy(group), n_groups=k).tolist()
    for name, value in zip(names, fast):
        assert (math.isnan(value) and math.isnan(expected[name])) or value == expected[name]
