"""Cache entries as data: every value the toolkit caches comes back equal (types, dtypes and all), and reading
an entry never unpickles (an object array or a pickled member is refused, not run)."""

from __future__ import annotations

import io
import math
import zipfile

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dpfair_analysis.experiments import cache_format


def round_trip(value):
    buffer = io.BytesIO()
    cache_format.write_entry(buffer, key="k", fingerprint="f", value=value)
    buffer.seek(0)
    with zipfile.ZipFile(buffer) as archive:
        header = cache_format.read_header(archive)
        assert (header["key"], header["fingerprint"]) == ("k", "f")
        return cache_format.read_value(archive, header["value"])


def same(a, b) -> bool:
    """Equal values of equal types, NaN equal to NaN, frames and arrays with their dtypes."""
    if type(a) is not type(b):
        return False
    if a is pd.NA:
        return b is pd.NA
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        return True
    if isinstance(a, pd.Series):
        pd.testing.assert_series_equal(a, b, check_exact=True)
        return True
    if isinstance(a, pd.Index):
        pd.testing.assert_index_equal(a, b, exact=True)
        return True
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and (a == b or (a != a and b != b))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=5))
arrays = hnp.arrays(st.sampled_from([np.float64, np.float32, np.int64, np.int8, np.bool_, np.complex128]),
                    hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))


@st.composite
def frames(draw):
    n = draw(st.integers(0, 5))
    columns = {}
    for name in draw(st.lists(st.text(min_size=1, max_size=3), max_size=4, unique=True)):
        kind = draw(st.sampled_from(["float", "int", "bool", "str", "object", "category"]))
        if kind == "float":
            columns[name] = draw(hnp.arrays(np.float64, n))
        elif kind == "int":
            columns[name] = draw(hnp.arrays(np.int64, n))
        elif kind == "bool":
            columns[name] = draw(hnp.arrays(np.bool_, n))
        elif kind == "str":
            columns[name] = pd.Series(draw(st.lists(st.text(max_size=3), min_size=n, max_size=n)))
        elif kind == "object":
            columns[name] = pd.Series(draw(st.lists(st.lists(st.integers(), max_size=2), min_size=n, max_size=n)),
                                      dtype=object)
        else:
            columns[name] = pd.Categorical(draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n)))
    frame = pd.DataFrame({k: (v.to_numpy() if isinstance(v, pd.Series) and v.dtype != object else v)
                          for k, v in columns.items()}, index=pd.RangeIndex(n))
    if draw(st.booleans()) and n:
        frame.index = pd.Index(draw(st.lists(st.integers(), min_size=n, max_size=n)), name="i")
    return frame


values = st.recursive(scalars | arrays | frames() | arrays.map(np.asarray).map(lambda a: a.flat[0] if a.size else a),
                      lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                      | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3),
                      max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(values)
def test_every_encodable_value_comes_back_equal(value):
    assert same(value, round_trip(value))


def test_the_values_the_toolkit_caches_come_back_equal():
    """A comparison run's value (dicts of frames with str, float, int, bool, list cells), a tensor of logits, a
    calibrated float, a frame with a categorical and a MultiIndex, pandas.NA."""
    history = pd.DataFrame({"step": np.arange(3), "group": ["Male", "Female", "all"], "accuracy": [0.5, np.nan, 1.0],
                            "clipped": [True, False, True], "reasons": [["clipping"], [], ["noise", "clipping"]]})
    value = {"history": history, "epsilon": 2.66, "logits": torch.randn(4, 2, dtype=torch.float32),
             "mask": torch.tensor([True, False]), "rows": [{"split": "test", "group": "8", "accuracy": 0.1}],
             "by": history.set_index(["group", "step"]), "cat": pd.Series(pd.Categorical(["a", "b"], ordered=True)),
             "na": pd.NA, ("tuple", 1): np.float32(1.5), "nested": (None, [np.int64(3)])}
    back = round_trip(value)
    assert set(back) == set(value)
    for key in value:
        assert same(value[key], back[key]), key


def test_what_is_not_data_is_uncacheable_before_anything_is_written():
    for value in ({"f": print}, object(), [1, torch.zeros(2, dtype=torch.bfloat16)], {"d": pd.Timestamp(0)}):
        buffer = io.BytesIO()
        with pytest.raises(cache_format.Uncacheable):
            cache_format.write_entry(buffer, key="k", fingerprint="f", value=value)
        assert buffer.getvalue() == b""


def test_reading_never_unpickles():
    """A member holding an object-dtype (pickled) array, or a compressed member, is refused."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("entry.json", '{"format": 1, "key": "k", "fingerprint": "f", '
                                       '"value": {"$": "array", "array": 0}}')
        with archive.open("arrays/0.npy", "w") as member:
            np.lib.format.write_array(member, np.array([print], dtype=object), allow_pickle=True)
    buffer.seek(0)
    with zipfile.ZipFile(buffer) as archive:
        header = cache_format.read_header(archive)
        with pytest.raises(ValueError, match="allow_pickle"):
            cache_format.read_value(archive, header["value"])
    squeezed = io.BytesIO()
    with zipfile.ZipFile(squeezed, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("entry.json", "{}")
    with zipfile.ZipFile(squeezed) as archive, pytest.raises(ValueError, match="compressed"):
        cache_format.read_header(archive)
