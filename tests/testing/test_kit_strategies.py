"""The canary families are neighbours under their relation and have the shape that makes them worst cases."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis.testing import strategies as kit
from dpfair_analysis.testing.relations import AddRemove, AttributeChange, ReplaceOne

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


@SETTINGS
@given(pair=kit.lone_member(relation="attribute-change"))
def test_lone_member_is_alone_and_moves(pair):
    a, b = pair
    change = AttributeChange().check(a, b)
    assert np.count_nonzero(a["group"] == a["group"][change.index]) == 1


@SETTINGS
@given(pair=kit.lone_member(relation="add-remove"))
def test_lone_member_leaves(pair):
    a, b = pair
    change = AddRemove().check(a, b)
    assert change.kind == "remove" and np.count_nonzero(a["group"] == a["group"][change.index]) == 1


@SETTINGS
@given(pair=kit.far_point(relation="replace-one"))
def test_far_point_is_far(pair):
    a, b = pair
    change = ReplaceOne().check(a, b)
    assert np.abs(change.after["X"]).min() >= 10 and np.abs(a["X"]).max() <= 1


@SETTINGS
@given(pair=kit.sign_flip())
def test_sign_flip_moves_the_group_mean_by_two_over_n(pair):
    a, b = pair
    ReplaceOne().check(a, b)
    n = len(a["X"])
    moved = np.linalg.norm(b["X"].mean(axis=0) - a["X"].mean(axis=0))
    assert np.isclose(moved, 2 * np.linalg.norm(a["X"][0]) / n)


@SETTINGS
@given(pair=kit.gradient_canary())
def test_gradient_canary_owns_its_feature(pair):
    a, b = pair
    change = AddRemove().check(a, b)
    assert not a["X"][:, 0].any() and b["X"][change.index, 0] != 0 and not b["X"][change.index, 1:].any()


@SETTINGS
@given(data=st.data(), relation=st.sampled_from(["add-remove", "replace-one", "attribute-change"]))
def test_canary_pairs_are_neighbours_under_their_relation(data, relation):
    a, b = data.draw(kit.canary_pairs(relation))
    kit_relation = {"add-remove": AddRemove(), "replace-one": ReplaceOne(), "attribute-change": AttributeChange()}
    kit_relation[relation].check(a, b)


@SETTINGS
@given(data=kit.datasets(rows=(0, 6), groups=3, min_group_size=2))
def test_datasets_respect_the_smallest_group(data):
    assert all(np.count_nonzero(data["group"] == g) >= 2 for g in range(3))
    assert data["X"].shape[0] == len(data["y"]) == len(data["group"])


@SETTINGS
@given(data=st.data())
def test_neighbour_of_a_list_differs_in_one_row_as_it_says(data):
    rows = data.draw(st.lists(st.integers(0, 9), max_size=5))
    neighbour, kind = data.draw(kit.neighbour_of(rows, st.integers(10, 19)))
    if kind == "add":
        assert len(neighbour) == len(rows) + 1 and sorted(neighbour[:-1]) == sorted(rows)
    elif kind == "remove":
        assert len(neighbour) == len(rows) - 1
    else:
        assert len(neighbour) == len(rows) and neighbour[-1] >= 10


@SETTINGS
@given(data=st.data(), k=st.integers(2, 5))
def test_other_value_is_another_value(data, k):
    current = data.draw(st.integers(0, k - 1))
    assert data.draw(kit.other_value(k, current)) != current
