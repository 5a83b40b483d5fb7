"""Relations generate neighbours that their own check accepts, and their check refuses everything else."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis.testing import strategies as kit
from dpfair_analysis.testing.relations import (
    AddRemove,
    AttributeChange,
    NotNeighbours,
    QueryVector,
    ReplaceOne,
    as_dataset,
    make_relation,
)

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)
RECORD_RELATIONS = [AddRemove(), ReplaceOne(), AttributeChange()]


@SETTINGS
@given(data=st.data(), which=st.sampled_from(["add-remove", "replace-one", "attribute-change", "queries"]))
def test_generated_neighbours_are_accepted_and_the_change_is_where_it_is(data, which):
    relation = make_relation(which)
    base, neighbour = data.draw(kit.pairs(relation))
    change = relation.check(base, neighbour)
    if which == "attribute-change":
        assert base["group"][change.index] != neighbour["group"][change.index]
        assert np.array_equal(base["X"], neighbour["X"])
    elif which == "replace-one":
        assert not np.array_equal(base["X"][change.index], neighbour["X"][change.index]) or \
            base["y"][change.index] != neighbour["y"][change.index] or \
            base["group"][change.index] != neighbour["group"][change.index]
    elif which == "queries":
        assert np.max(np.abs(neighbour - base)) <= 1.0 + 1e-12


@SETTINGS
@given(data=st.data(), which=st.sampled_from(["add-remove", "replace-one", "attribute-change"]))
def test_two_changes_are_not_a_neighbour(data, which):
    relation = make_relation(which)
    base, neighbour = data.draw(kit.pairs(relation, kit.datasets(rows=(3, 8), groups=2, min_group_size=2)))
    again = data.draw(relation.neighbours(neighbour))
    if relation.is_neighbour(base, again):  # the second change may undo the first, or re-do it elsewhere
        return
    with pytest.raises(NotNeighbours):
        relation.check(base, again)


@SETTINGS
@given(base=st.lists(st.floats(-5, 5), min_size=1, max_size=8).map(np.asarray), mode=st.sampled_from(["every", "one"]),
       delta=st.sampled_from([0.5, 1.0, 3.0]))
def test_query_candidates_and_neighbours_stay_within_delta(base, mode, delta):
    relation = QueryVector(sensitivity=delta, mode=mode)
    for a, b in relation.candidates(base, rng=np.random.default_rng(0), limit=12):
        relation.check(a, b)
        assert np.max(np.abs(a - b)) <= delta + 1e-9
        assert mode == "every" or np.count_nonzero(a != b) == 1


def test_query_relation_refuses_too_far_and_too_many_moves():
    one = QueryVector(mode="one")
    with pytest.raises(NotNeighbours, match="moves by 1.5"):
        one.check(np.zeros(3), np.array([1.5, 0, 0]))
    with pytest.raises(NotNeighbours, match="one entry moves"):
        one.check(np.zeros(3), np.array([1.0, 1.0, 0]))
    assert QueryVector(mode="every").is_neighbour(np.zeros(3), np.array([1.0, -1.0, 0.5]))
    with pytest.raises(NotNeighbours, match="equal"):
        one.check(np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="mode"):
        QueryVector(mode="some")


def test_statdp_patterns_are_among_the_candidates():
    patterns = QueryVector().candidates(np.ones(4), rng=np.random.default_rng(0), limit=8)
    moved = [tuple(b - a) for a, b in patterns]
    assert (-1.0, 0.0, 0.0, 0.0) in moved and (1.0, -1.0, -1.0, -1.0) in moved and (1.0, 1.0, 1.0, 1.0) in moved
    x_shape = patterns[-1]
    assert x_shape[0].tolist() == [1, 1, 0, 0] and x_shape[1].tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("relation", RECORD_RELATIONS, ids=lambda r: r.name)
def test_record_candidates_are_neighbours(relation):
    data = {"X": np.array([[0.5, -1.0], [2.0, 0.0], [0.0, 0.1]]), "y": np.array([0, 1, 1]),
            "group": np.array([0, 1, 1])}
    pairs = relation.candidates(data, rng=np.random.default_rng(0), limit=10)
    assert pairs
    for a, b in pairs:
        relation.check(a, b)


def test_add_remove_finds_the_inserted_record_anywhere_and_names_it():
    X = np.arange(8.0).reshape(4, 2)
    bigger = np.insert(X, 2, [[9.0, 9.0]], axis=0)
    change = AddRemove().check(X, bigger)
    assert (change.kind, change.index) == ("add", 2) and change.after.tolist() == [9.0, 9.0]
    assert AddRemove().check(bigger, X).kind == "remove"
    with pytest.raises(NotNeighbours, match="exactly one record"):
        AddRemove().check(X, X)
    swapped = bigger.copy()
    swapped[0] = [-1.0, -1.0]
    with pytest.raises(NotNeighbours, match="does not give"):
        AddRemove().check(X, swapped)


def test_bounds_are_part_of_the_relation():
    bounded = AddRemove(bounds=(0.0, 1.0))
    assert bounded.is_neighbour(np.array([0.2, 0.4]), np.array([0.2, 0.4, 1.0]))
    with pytest.raises(NotNeighbours, match="outside the relation's bounds"):
        bounded.check(np.array([0.2, 0.4]), np.array([0.2, 0.4, 3.0]))
    far = bounded.candidates(np.array([0.2, 0.4]), rng=np.random.default_rng(0))
    assert all(np.all((b >= 0) & (b <= 1)) for _, b in far)


def test_attribute_change_with_unreported_and_fixed_columns():
    relation = AttributeChange(unreported=-1)
    data = {"group": np.array([0, 1, 1]), "X": np.zeros((3, 2))}
    moved = dict(data, group=np.array([-1, 1, 1]))
    assert relation.check(data, moved).after == -1
    assert "unreported" in relation.describe()
    assert any(b["group"][0] == -1 for _, b in relation.candidates(data, rng=np.random.default_rng(0)))
    with pytest.raises(NotNeighbours, match="'X' differs too"):
        relation.check(data, dict(moved, X=np.ones((3, 2))))
    with pytest.raises(NotNeighbours, match="values must be in"):
        AttributeChange(values=(0, 1)).check(data, dict(data, group=np.array([5, 1, 1])))
    with pytest.raises(ValueError, match="'group' entry"):
        AttributeChange().check({"X": np.zeros(2)}, {"X": np.zeros(2)})


def test_lone_member_moves_first():
    attribute = np.array([1, 1, 1, 0, 1])
    (a, b), *_ = AttributeChange().candidates(attribute, rng=np.random.default_rng(0))
    assert int(np.flatnonzero(a != b)[0]) == 3  # the only member of group 0


@pytest.mark.parametrize("bad,match", [({"a": np.zeros(2), "b": np.zeros(3)}, "one length"), ({}, "empty"),
                                       (np.float64(1.0), "axis 0"), ([[1, 2], [3]], "numpy array")])
def test_bad_data_is_refused_with_a_reason(bad, match):
    with pytest.raises(ValueError, match=match):
        as_dataset(bad)


def test_unknown_relation_names_the_choices():
    with pytest.raises(ValueError, match="add-remove"):
        make_relation("swap-two")
