"""GroupedDataset: validation, and split / resample_groups under adversarial group sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpfair_analysis.data import GroupedDataset


def make(group_sizes, *, n_classes=2, seed=0):
    """Rows numbered by X[:, 0] (so identity survives subsetting), groups in order."""
    group = np.repeat(np.arange(len(group_sizes)), group_sizes)
    n = len(group)
    y = np.random.default_rng(seed).integers(n_classes, size=n)
    return GroupedDataset(X=torch.arange(n, dtype=torch.float32)[:, None], y=torch.as_tensor(y, dtype=torch.int64),
                          group=torch.as_tensor(group, dtype=torch.int64),
                          group_names=tuple(f"g{k}" for k in range(len(group_sizes))),
                          label_names=tuple(str(c) for c in range(n_classes)))


def ids(ds):
    return ds.X[:, 0].long().tolist()


# ----------------------------------------------------------------------------- validation
def test_nan_features_rejected():
    X = torch.zeros(3, 2)
    X[1, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        GroupedDataset(X=X, y=torch.zeros(3, dtype=torch.int64), group=torch.zeros(3, dtype=torch.int64),
                       group_names=("a",), label_names=("0", "1"))


@pytest.mark.parametrize("row", [0, 4095, 4096, 9999])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_entry_in_any_chunk_of_the_finiteness_check_is_rejected(row, bad):
    """The check runs FINITE_CHECK_ROWS rows at a time (bounded temporaries): an entry on either side of a chunk's
    edge, or in the last, short chunk, is found and counted."""
    from dpfair_analysis.data.dataset import FINITE_CHECK_ROWS

    assert FINITE_CHECK_ROWS == 4096
    X = torch.zeros(10_000, 3)
    X[row, 2] = bad
    with pytest.raises(ValueError, match="in 1 rows"):
        GroupedDataset(X=X, y=torch.zeros(10_000, dtype=torch.int64), group=torch.zeros(10_000, dtype=torch.int64),
                       group_names=("a",), label_names=("0", "1"))


def test_labels_out_of_range_rejected():
    with pytest.raises(ValueError, match=r"y has values in \[0, 2\]"):
        GroupedDataset(X=torch.zeros(3, 1), y=torch.tensor([0, 1, 2]), group=torch.zeros(3, dtype=torch.int64),
                       group_names=("a",), label_names=("0", "1"))


def test_integer_features_and_float_labels_rejected():
    with pytest.raises(TypeError, match="X must be"):
        GroupedDataset(X=torch.zeros(3, 1, dtype=torch.int64), y=torch.zeros(3, dtype=torch.int64),
                       group=torch.zeros(3, dtype=torch.int64), group_names=("a",), label_names=("0",))
    with pytest.raises(TypeError, match="y must be"):
        GroupedDataset(X=torch.zeros(3, 1), y=torch.zeros(3), group=torch.zeros(3, dtype=torch.int64),
                       group_names=("a",), label_names=("0",))


def test_split_stratified_and_empty_group_error():
    ds = make([50, 10])
    train, test = ds.split(0.2, seed=0)
    assert test.group_sizes().tolist() == [10, 2] and train.group_sizes().tolist() == [40, 8]
    tiny = make([50, 1])
    with pytest.raises(ValueError, match=r"group\(s\) \['g1'\] have no rows in the (train|test) set"):
        tiny.split(0.2, seed=0)


# ------------------------------------------------------------------------------ properties
group_sizes = st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=5).filter(lambda s: sum(s) > 0)
fractions = st.floats(min_value=0.01, max_value=0.99, allow_nan=False)
seeds = st.integers(min_value=0, max_value=2**31)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=group_sizes, fraction=fractions, seed=seeds)
def test_split_partitions_rows_with_exact_group_counts(sizes, fraction, seed):
    ds = make(sizes)
    expected_test = [int(round(fraction * n)) for n in sizes]
    must_fail = any(n > 0 and t in (0, n) for n, t in zip(sizes, expected_test))
    if must_fail:
        with pytest.raises(ValueError, match="have no rows"):
            ds.split(fraction, seed=seed)
        return
    train, test = ds.split(fraction, seed=seed)
    assert sorted(ids(train) + ids(test)) == list(range(len(ds)))
    assert test.group_sizes().tolist() == expected_test
    again_train, _ = ds.split(fraction, seed=seed)
    assert ids(again_train) == ids(train)


@settings(max_examples=100, deadline=None)
@given(sizes=group_sizes, fraction=fractions, seed=seeds, label_seed=seeds)
def test_split_group_label_strata(sizes, fraction, seed, label_seed):
    ds = make(sizes, n_classes=3, seed=label_seed)
    cells = {}
    for g, c in zip(ds.group.tolist(), ds.y.tolist()):
        cells[(g, c)] = cells.get((g, c), 0) + 1
    test_per_group = [sum(int(round(fraction * n)) for (g2, _), n in cells.items() if g2 == g)
                      for g in range(len(sizes))]
    if any(n > 0 and t in (0, n) for n, t in zip(sizes, test_per_group)):
        with pytest.raises(ValueError):
            ds.split(fraction, seed=seed, stratify="group_label")
        return
    train, test = ds.split(fraction, seed=seed, stratify="group_label")
    assert test.group_sizes().tolist() == test_per_group
    assert sorted(ids(train) + ids(test)) == list(range(len(ds)))


@settings(max_examples=150, deadline=None)
@given(data=st.data(), sizes=group_sizes, seed=seeds)
def test_resample_groups_exact_sizes(data, sizes, seed):
    ds = make(sizes)
    present = [g for g, n in enumerate(sizes) if n > 0]
    chosen = data.draw(st.lists(st.sampled_from(present), unique=True, max_size=len(present)))
    request = {}
    for g in chosen:
        key = data.draw(st.sampled_from([g, f"g{g}"]))  # by id or by name
        request[key] = data.draw(st.integers(min_value=1, max_value=sizes[g]))
    out = ds.resample_groups(request, seed=seed)
    wanted = list(sizes)
    for key, size in request.items():
        wanted[ds.group_id(key)] = size
    assert out.group_sizes().tolist() == wanted
    kept = ids(out)
    assert len(set(kept)) == len(kept) and set(kept) <= set(range(len(ds)))
    assert ids(ds.resample_groups(request, seed=seed)) == kept


@settings(max_examples=50, deadline=None)
@given(sizes=group_sizes, extra=st.integers(min_value=1, max_value=5))
def test_resample_groups_rejects_impossible_sizes(sizes, extra):
    ds = make(sizes)
    g = int(np.argmax(sizes))
    with pytest.raises(ValueError, match="exceeds"):
        ds.resample_groups({g: sizes[g] + extra})
    with pytest.raises(ValueError, match="positive integer"):
        ds.resample_groups({g: 0})


def test_resample_groups_refuses_a_group_named_twice():
    import torch
    from dpfair_analysis.data.dataset import GroupedDataset

    ds = GroupedDataset(torch.zeros(10, 1), torch.zeros(10, dtype=torch.long), torch.zeros(10, dtype=torch.long),
                        group_names=("a",), label_names=("0",))
    with pytest.raises(ValueError, match="twice"):
        ds.resample_groups({0: 5, "a": 5})
