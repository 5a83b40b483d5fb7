"""Records the kit adds or swaps in stay inside the data's domain unless the user opts out, and a broken
mechanism is told which record broke it (issue 48, item 4).

Before: ``AddRemove()`` without bounds added far points at 10x the data's magnitude -- a group label of 10
beside labels 0 and 1 -- and the ``MechanismError`` that followed described the data cut short, hiding the
record added at its end.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis.testing import AddRemove, MechanismError, ReplaceOne, audit

LABELS = np.array([0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1])  # group labels: more than the error shows


def per_group_counts(data, rng):
    """Laplace counts of groups 0 and 1 (l1 sensitivity 1 under add-remove): indexes by label."""
    counts = np.zeros(2)
    np.add.at(counts, data, 1.0)  # IndexError on a label outside {0, 1}
    return counts + rng.laplace(scale=1.0, size=2)


@pytest.mark.parametrize("relation", [AddRemove(), ReplaceOne()])
def test_generated_records_keep_to_the_observed_labels(relation):
    for data, neighbour in relation.candidates(LABELS, rng=np.random.default_rng(0), limit=32):
        assert set(np.unique(neighbour)) <= {0, 1}  # before: 10, -10, ... (far points)


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_hypothesis_neighbours_keep_to_the_observed_domain(data):
    table = {"group": np.array([0, 2, 2]), "x": np.array([-0.5, 0.25, 1.5])}
    for relation in (AddRemove(), ReplaceOne()):
        neighbour = data.draw(relation.neighbours(table))
        assert set(neighbour["group"].tolist()) <= {0, 2}  # before: any integer up to 3 (a new group)
        assert np.all((neighbour["x"] >= -0.5) & (neighbour["x"] <= 1.5))
    floats = np.linspace(-1.0, 1.0, 5)
    added = data.draw(AddRemove().neighbours(floats))
    assert np.all(np.abs(added) <= 1.0)


def test_a_correct_mechanism_on_labels_is_audited_by_search_and_consistent():
    result = audit(per_group_counts, 1.0, relation="add-remove", data=LABELS, budget="smoke", seed=0)  # raised
    assert result.consistent and result.candidates > 1


def test_opting_out_adds_any_record_and_the_error_names_it():
    relation = AddRemove(domain="any")
    assert "any record values" in relation.describe()
    records = [b[-1] for a, b in relation.candidates(LABELS, rng=np.random.default_rng(0)) if len(b) > len(a)]
    assert max(records) == 10  # the far point: 10x the largest label
    with pytest.raises(MechanismError, match=r"D' is D with record 10 added at index 14.*domain='any'"):
        audit(per_group_counts, 1.0, relation=relation, data=LABELS, budget="smoke", seed=0)


def test_an_error_on_a_given_pair_names_the_change():
    def fragile(data, rng):
        if len(data) > len(LABELS):
            raise RuntimeError("one record too many")
        return float(len(data)) + rng.laplace()
    pair = (LABELS, np.r_[LABELS, 1])
    with pytest.raises(MechanismError, match=r"one record too many.*record 1 added at index 14"):
        audit(fragile, 1.0, relation="add-remove", pairs=pair, budget="smoke")


def test_the_mixed_output_repro_is_consistent_under_plain_add_remove():
    """The issue's repro searched under plain add-remove: records stay in the data's range [-1, 1], where the
    sum's sensitivity is 1 and Laplace of scale 1 is 1-DP (before: a far point at 10 refuted it)."""
    def mixed(data, rng):
        return np.array([data.sum() + rng.laplace(), float(rng.random() < .5)])
    result = audit(mixed, 1.0, relation="add-remove", data=np.linspace(-1.0, 1.0, 8), budget="smoke", seed=0)
    assert result.consistent and abs(float(result.witness["change"]["after"] or 0.0)) <= 1.0


def test_a_bad_domain_names_the_choices():
    with pytest.raises(ValueError, match="domain must be one of"):
        AddRemove(domain="everything")
