"""A run cache entry as data, never code: a JSON tree and numeric arrays in one uncompressed zip file.

A pickle runs code when it is read, so a cache that stores pickles trusts every writer of its directory. This
format stores only what a result is made of -- ``None``, booleans, numbers, strings, lists, tuples, dicts
(any encodable keys), numpy arrays and scalars, torch tensors, pandas DataFrames, Series and indexes -- and
reading it runs nothing: ``entry.json`` is parsed by :func:`json.loads` and every array by
:func:`numpy.lib.format.read_array` with ``allow_pickle=False``. A value with anything else in it is
:class:`Uncacheable` (the cache then runs uncached, and says so).

Layout of a file::

    entry.json        {"format": 1, "key": KEY, "fingerprint": SHA, "value": TREE}
    arrays/0.npy ...  the arrays TREE refers to by number, in .npy format

A TREE node is a JSON scalar, a JSON list (a Python list), or an object tagged by ``"$"``: ``tuple``,
``dict`` (items as ``[key, value]`` pairs), ``array`` / ``scalar`` / ``tensor`` (an array number),
``objects`` (an object-dtype array as nested items), ``frame``, ``series``, ``range`` / ``index`` /
``multiindex``, ``na`` (``pandas.NA``). :func:`read_header` gives the header without touching the arrays, so
the fingerprint is checked before anything in an entry is used.
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from typing import IO, Any

import numpy as np

#: Version of the file layout above.
FORMAT = 1
HEADER = "entry.json"


class Uncacheable(TypeError):
    """A value holds something this format does not store as data."""


# ------------------------------------------------------------------------------------------------ encode
def write_entry(handle: IO[bytes], *, key: str, fingerprint: str, value: Any) -> None:
    """Write ``value`` (with the header ``key``, ``fingerprint``) to the binary file ``handle``.
    :class:`Uncacheable` before anything is written if ``value`` holds a type this format does not store."""
    arrays: list[np.ndarray] = []
    tree = _encode(value, arrays)
    header = json.dumps({"format": FORMAT, "key": key, "fingerprint": fingerprint, "value": tree})
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(HEADER, header)
        for number, array in enumerate(arrays):
            with archive.open(f"arrays/{number}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def _encode(value: Any, arrays: list[np.ndarray]) -> Any:
    """The TREE node of ``value``; its arrays appended to ``arrays``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):  # before int/float: np.float64 is a float, and must stay a np.float64
        return {"$": "scalar", "array": _add(np.asarray(value), arrays)}
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, list):
        return [_encode(item, arrays) for item in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "items": [_encode(item, arrays) for item in value]}
    if isinstance(value, dict):
        return {"$": "dict", "items": [[_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return {"$": "objects", "shape": list(value.shape),
                    "items": [_encode(item, arrays) for item in value.ravel().tolist()]}
        return {"$": "array", "array": _add(value, arrays)}
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if tensor.dtype not in _torch_dtypes() or tensor.layout != torch.strided:
            raise Uncacheable(f"a torch tensor of dtype {tensor.dtype} is not stored as data")
        return {"$": "tensor", "array": _add(tensor.contiguous().numpy(), arrays)}
    pd = sys.modules.get("pandas")
    if pd is not None:
        if value is pd.NA:
            return {"$": "na"}
        if isinstance(value, pd.DataFrame):
            return {"$": "frame", "columns": _encode_index(value.columns, arrays),
                    "index": _encode_index(value.index, arrays),
                    "data": [_encode_column(value.iloc[:, j], arrays) for j in range(value.shape[1])]}
        if isinstance(value, pd.Series):
            return {"$": "series", "name": _encode(value.name, arrays), "index": _encode_index(value.index, arrays),
                    "values": _encode_column(value, arrays)}
        if isinstance(value, pd.Index):
            return _encode_index(value, arrays)
    kind = type(value)
    raise Uncacheable(f"a {kind.__module__}.{kind.__qualname__} is not stored as data")


def _torch_dtypes() -> set:
    """The tensor dtypes numpy holds exactly (not bfloat16, nor the quantised ones)."""
    torch = sys.modules["torch"]
    return {torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8,
            torch.uint8, torch.bool, torch.complex64, torch.complex128}


def _add(array: np.ndarray, arrays: list[np.ndarray]) -> int:
    arrays.append(np.ascontiguousarray(array) if array.ndim else array)
    return len(arrays) - 1


def _encode_column(series, arrays: list[np.ndarray]) -> dict:
    """One column's values: a numeric/boolean/datetime numpy dtype as an array, a categorical as its codes
    and categories, anything else (strings, objects, nullable extension dtypes) as items with its dtype."""
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, np.dtype) and not dtype.hasobject:
        return {"array": _add(series.to_numpy(copy=False), arrays)}
    if isinstance(dtype, pd.CategoricalDtype):
        return {"categorical": _encode_index(dtype.categories, arrays), "ordered": bool(dtype.ordered),
                "codes": _add(np.asarray(series.cat.codes), arrays)}
    return {"dtype": str(dtype), "items": [_encode(item, arrays) for item in series.tolist()]}


def _encode_index(index, arrays: list[np.ndarray]) -> dict:
    import pandas as pd

    if isinstance(index, pd.RangeIndex):
        return {"$": "range", "start": index.start, "stop": index.stop, "step": index.step,
                "name": _encode(index.name, arrays)}
    if isinstance(index, pd.MultiIndex):
        return {"$": "multiindex", "tuples": [_encode(item, arrays) for item in index.tolist()],
                "names": [_encode(name, arrays) for name in index.names]}
    return {"$": "index", "name": _encode(index.name, arrays), "values": _encode_column(index.to_series(), arrays)}


# ------------------------------------------------------------------------------------------------ decode
def read_header(archive: zipfile.ZipFile) -> dict:
    """The header of an entry (``format``, ``key``, ``fingerprint``, ``value`` as a TREE): JSON only, no array
    read. ``ValueError`` if the file is not an entry of this format (a member compressed or outside the
    layout, a header that is not the layout's)."""
    names = archive.namelist()
    for info in archive.infolist():  # stored members only: a compressed member could be a decompression bomb
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(f"member {info.filename} is compressed; entries are stored uncompressed")
        if info.filename != HEADER and not (info.filename.startswith("arrays/") and info.filename.endswith(".npy")):
            raise ValueError(f"member {info.filename!r} is not part of an entry")
    if HEADER not in names:
        raise ValueError(f"no {HEADER}")
    header = json.loads(archive.read(HEADER))
    if (not isinstance(header, dict) or header.get("format") != FORMAT
            or not {"key", "fingerprint", "value"} <= set(header)):
        raise ValueError(f"{HEADER} is not a format-{FORMAT} entry header")
    return header


def read_value(archive: zipfile.ZipFile, tree: Any) -> Any:
    """The value of ``tree`` (from :func:`read_header`), its arrays read from ``archive`` without pickles."""
    def array(number: int) -> np.ndarray:
        if not isinstance(number, int) or isinstance(number, bool):
            raise ValueError(f"array reference {number!r} is not a number")
        data = archive.read(f"arrays/{number}.npy")
        return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)

    return _decode(tree, array)


def _decode(node: Any, array) -> Any:
    if node is None or isinstance(node, (bool, str, int, float)):
        return node
    if isinstance(node, list):
        return [_decode(item, array) for item in node]
    if not isinstance(node, dict) or "$" not in node:
        raise ValueError(f"unknown node {str(node)[:60]!r}")
    tag = node["$"]
    if tag == "tuple":
        return tuple(_decode(item, array) for item in node["items"])
    if tag == "dict":
        return {_decode(k, array): _decode(v, array) for k, v in node["items"]}
    if tag == "array":
        return array(node["array"])
    if tag == "scalar":
        return array(node["array"])[()]
    if tag == "objects":
        out = np.empty(len(node["items"]), dtype=object)
        out[:] = [_decode(item, array) for item in node["items"]]
        return out.reshape(node["shape"])
    if tag == "tensor":
        import torch

        return torch.from_numpy(array(node["array"]))
    import pandas as pd

    if tag == "na":
        return pd.NA
    if tag == "frame":
        columns = _decode_index(node["columns"], array)
        index = _decode_index(node["index"], array)
        data = {j: _decode_column(column, array, index) for j, column in enumerate(node["data"])}
        frame = pd.DataFrame(data, index=index) if data else pd.DataFrame(index=index)
        frame.columns = columns
        return frame
    if tag == "series":
        index = _decode_index(node["index"], array)
        series = _decode_column(node["values"], array, index)
        series.name = _decode(node["name"], array)
        return series
    if tag in ("range", "index", "multiindex"):
        return _decode_index(node, array)
    raise ValueError(f"unknown node tag {tag!r}")


def _decode_column(node: dict, array, index):
    import pandas as pd

    if "array" in node:
        return pd.Series(array(node["array"]), index=index, copy=False)
    if "categorical" in node:
        categories = _decode_index(node["categorical"], array)
        values = pd.Categorical.from_codes(array(node["codes"]), categories=categories, ordered=node["ordered"])
        return pd.Series(values, index=index)
    items = [_decode(item, array) for item in node["items"]]
    dtype = node["dtype"]
    if dtype == "object":
        values = np.empty(len(items), dtype=object)
        values[:] = items
        return pd.Series(values, index=index, dtype=object)
    return pd.Series(items, index=index, dtype=pd.api.types.pandas_dtype(dtype))


def _decode_index(node: dict, array):
    import pandas as pd

    tag = node.get("$") if isinstance(node, dict) else None
    if tag == "range":
        return pd.RangeIndex(node["start"], node["stop"], node["step"], name=_decode(node["name"], array))
    if tag == "multiindex":
        return pd.MultiIndex.from_tuples([_decode(item, array) for item in node["tuples"]],
                                         names=[_decode(name, array) for name in node["names"]])
    if tag == "index":
        return pd.Index(_decode_column(node["values"], array, None), name=_decode(node["name"], array))
    raise ValueError(f"unknown index node {str(node)[:60]!r}")
