"""Neighbouring relations as objects: each one both *generates* and *checks* neighbours.

A differential-privacy claim is a claim about a relation: "for every pair (D, D') of
neighbours, M(D) and M(D') are (epsilon, delta)-close". The relation is part of the claim,
so the kit makes it explicit:

:class:`AddRemove` (``"add-remove"``)
    D' is D with one record added (anywhere) or removed.
:class:`ReplaceOne` (``"replace-one"``)
    D' is D with one record replaced by another.
:class:`AttributeChange` (``"attribute-change"``)
    one person's sensitive attribute changes and nothing else does -- the relation PF-LD's
    guarantee is stated in (paper 003, Sec. 4.2), optionally with "not reported" as a value
    (Sec. 7, missing values). Data is the per-record attribute vector, or a dict of
    equal-length arrays with a ``group`` entry (features, labels, ...: all unchanged).
:class:`QueryVector` (``"queries"``)
    data is the 1-d vector of query answers; ``mode="every"``: every entry moves by at most
    Delta (the relation of StatDP and DP-Sniper's "component-wise" neighbourhood);
    ``mode="one"``: one entry moves by at most Delta.

Data sets are numpy arrays with records along axis 0, or dicts of equal-length arrays
(records are the rows of every entry). Every relation offers

* :meth:`Relation.check` -- raises :class:`NotNeighbours` with the reason, or returns the
  change (:class:`Change`: what moved, where);
* :meth:`Relation.candidates` -- the adversarial neighbours of a data set that the kit's
  searches try first: the worst-case families this project's searches found (a lone member
  of a group moving, a far point, a sign-flipping row, the StatDP query patterns);
* :meth:`Relation.neighbours` -- a hypothesis strategy of neighbours of a data set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfair_analysis.testing._json import jsonable

Data = Any


class NotNeighbours(ValueError):
    """Two data sets are not neighbours under a relation (the message says why)."""


@dataclass(frozen=True)
class Change:
    """What differs between two neighbours: ``kind`` (add, remove, replace, attribute, queries),
    the record ``index`` (None for query vectors) and the values before and after."""

    kind: str
    index: int | None
    before: Any = None
    after: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "before": jsonable(self.before),
                "after": jsonable(self.after)}


# ===================================================================== row operations on data sets
def as_dataset(data: Data, name: str = "data") -> Data:
    """``data`` as the kit holds it: a numpy array (records along axis 0) or a dict of equal-length
    numpy arrays. Raises ValueError naming ``name`` otherwise."""
    if isinstance(data, dict):
        if not data:
            raise ValueError(f"{name} is an empty dict: give equal-length arrays, one row per record")
        out = {str(k): np.asarray(v) for k, v in data.items()}
        lengths = {k: (v.shape[0] if v.ndim else None) for k, v in out.items()}
        if None in lengths.values() or len(set(lengths.values())) != 1:
            raise ValueError(f"{name}'s entries must be arrays of one length (one row per record), got lengths "
                             f"{lengths}")
        return out
    try:
        array = np.asarray(data)
    except (TypeError, ValueError) as error:  # ragged lists and the like
        raise ValueError(f"{name} must be a numpy array (records along axis 0) or a dict of equal-length arrays, "
                         f"got {type(data).__name__} ({error})") from None
    if array.dtype == object:
        raise ValueError(f"{name} must be a numeric numpy array or a dict of equal-length arrays, got an object "
                         f"array (ragged rows?)")
    if array.ndim == 0:
        raise ValueError(f"{name} must have records along axis 0, got a scalar {array!r}")
    return array


def n_rows(data: Data) -> int:
    if isinstance(data, dict):
        return len(next(iter(data.values())))
    return len(data)


def row(data: Data, i: int) -> Any:
    if isinstance(data, dict):
        return {k: v[i] for k, v in data.items()}
    return data[i]


def _apply(data: Data, fn) -> Data:
    if isinstance(data, dict):
        return {k: fn(v, k) for k, v in data.items()}
    return fn(data, None)


def delete_row(data: Data, i: int) -> Data:
    return _apply(data, lambda v, k: np.delete(v, i, axis=0))


def insert_row(data: Data, i: int, record: Any) -> Data:
    def put(v: np.ndarray, key: str | None) -> np.ndarray:
        value = record[key] if key is not None else record
        return np.insert(v, i, np.asarray(value, dtype=v.dtype if v.dtype != bool else bool), axis=0)
    return _apply(data, put)


def replace_row(data: Data, i: int, record: Any) -> Data:
    def put(v: np.ndarray, key: str | None) -> np.ndarray:
        out = v.copy()
        out[i] = record[key] if key is not None else record
        return out
    return _apply(data, put)


def _rows_equal(a: Data, b: Data) -> np.ndarray:
    """Per-row equality of two data sets with the same number of rows."""
    if isinstance(a, dict) != isinstance(b, dict):
        raise NotNeighbours("one data set is a dict and the other an array")
    if isinstance(a, dict):
        if set(a) != set(b):
            raise NotNeighbours(f"the data sets have different entries: {sorted(a)} vs {sorted(b)}")
        equal = np.ones(n_rows(a), dtype=bool)
        for k in a:
            equal &= _rows_equal(a[k], b[k])
        return equal
    if a.shape[1:] != b.shape[1:]:
        raise NotNeighbours(f"records have different shapes: {a.shape[1:]} vs {b.shape[1:]}")
    return (a == b).reshape(len(a), -1).all(axis=1) if len(a) else np.zeros(0, bool)


def _same_rows(a: Data, b: Data) -> bool:
    return n_rows(a) == n_rows(b) and bool(_rows_equal(a, b).all())


# ===================================================================== the relations
class Relation:
    """A neighbouring relation; see the module docstring. Subclasses set ``name``."""

    name = "relation"

    def check(self, data: Data, neighbour: Data) -> Change:
        """The :class:`Change` from ``data`` to ``neighbour``; raises :class:`NotNeighbours` if they are not
        neighbours under this relation.

        Parameters
        ----------
        data, neighbour : array or dict of arrays
            The two data sets (records along axis 0).
        """
        raise NotImplementedError

    def is_neighbour(self, data: Data, neighbour: Data) -> bool:
        """Whether ``neighbour`` is a neighbour of ``data`` (never raises on a non-neighbour).

        Parameters
        ----------
        data, neighbour : array or dict of arrays
            The two data sets.
        """
        try:
            self.check(data, neighbour)
        except NotNeighbours:
            return False
        return True

    def candidates(self, data: Data, *, rng: np.random.Generator, limit: int = 16) -> list[tuple[Data, Data]]:
        """Adversarial pairs (data, neighbour) to try first, at most ``limit``, the strongest families first.

        Parameters
        ----------
        data : array or dict of arrays
            The base data set.
        rng : numpy.random.Generator
            Draws the random extra candidates (after the fixed families).
        limit : int
            Largest number of pairs returned.
        """
        raise NotImplementedError

    def fixed_patterns(self, data: Data) -> int:
        """How many of :meth:`candidates`' first pairs are the relation's published worst-case patterns, which a
        full audit of a plain function selects whatever their screen (``Budget.keep_patterns``); 0: none.

        Parameters
        ----------
        data : array or dict of arrays
            The base data set.
        """
        return 0

    def neighbours(self, data: Data):
        """A hypothesis strategy of neighbours of ``data`` (shrinking towards small changes).

        Parameters
        ----------
        data : array or dict of arrays
            The base data set.
        """
        raise NotImplementedError

    def accountant_neighboring(self) -> str:
        """The ``dp_accounting`` neighbouring relation that matches (``add_remove`` / ``replace_one``)."""
        return "replace_one"

    def describe(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()!r})"


#: What records an :class:`AddRemove` or :class:`ReplaceOne` without ``bounds`` generates.
DOMAINS = ("observed", "any")


def _observed_values(values: np.ndarray) -> tuple[str, Any]:
    """The observed domain of one column of records (rows along axis 0): ("values", sorted distinct values per
    position) for integer and boolean columns, ("range", (min, max) per position) for the others."""
    if np.issubdtype(values.dtype, np.bool_) or np.issubdtype(values.dtype, np.integer):
        flat = values.reshape(len(values), -1)
        return "values", [np.unique(flat[:, j]) for j in range(flat.shape[1])]
    numbers = np.asarray(values, dtype=np.float64)
    return "range", (numbers.min(axis=0), numbers.max(axis=0))


def _within(values: np.ndarray, record: Any) -> bool:
    """Whether ``record`` lies in the observed domain of ``values`` (:func:`_observed_values`)."""
    kind, domain = _observed_values(values)
    value = np.asarray(record)
    if kind == "values":
        flat = value.reshape(-1)
        return len(flat) == len(domain) and all(np.isin(v, allowed) for v, allowed in zip(flat, domain))
    low, high = domain
    value = np.asarray(value, dtype=np.float64)
    return bool(np.all(value >= low) and np.all(value <= high))


@dataclass(frozen=True, repr=False)
class _RecordRelation(Relation):
    """Shared by :class:`AddRemove` and :class:`ReplaceOne`: records and how to make adversarial ones.

    ``bounds``: (low, high) every record value must lie in (scalars or per-column arrays): the
    declared domain, checked by :meth:`check` too. Without it, ``domain`` says what records the
    relation generates (its candidates and hypothesis neighbours):

    ``"observed"`` (default)
        the observed domain of the data set the neighbours are made from: per column, the values
        seen in it for integer and boolean columns (group labels, classes: no new group appears) and
        the range [min, max] seen for the others (far points are the range's corners); a dict entry
        is one column. An empty data set has no observed domain: its records are as under ``"any"``.
    ``"any"``
        any values (opt-out): far points at +-10x the data's largest magnitude, integers up to one past
        the largest seen (a new group). Use it when the claim holds for every record, e.g. a clipped
        release, to test the clipping.

    ``records``: a hypothesis strategy of records (for the hypothesis neighbours and extra
    candidates), used as given. :meth:`check` accepts any record within ``bounds``: the domain
    rule is about which records the kit makes, not about the pairs a user gives.
    """

    bounds: tuple[Any, Any] | None = None
    records: Any = None
    domain: str = "observed"

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"domain must be one of {list(DOMAINS)} ('observed': records within the data's "
                             f"observed values and ranges; 'any': any values), got {self.domain!r}")

    def _observed(self, data: Data) -> bool:
        """Whether generated records keep to the observed domain of ``data``."""
        return self.bounds is None and self.domain == "observed" and n_rows(data) > 0

    def _in_domain(self, record: Any, data: Data) -> bool:
        """Within ``bounds`` and, under the observed domain, within the observed values and ranges of ``data``."""
        if not isinstance(record, dict) and not self._in_bounds(record):
            return False
        if not self._observed(data):
            return True
        if isinstance(data, dict):
            return all(_within(values, record[k]) for k, values in data.items())
        return _within(np.asarray(data), record)

    def describe(self) -> str:
        return self.name + (" (any record values)" if self.bounds is None and self.domain == "any" else "")

    def _far_points(self, data: Data) -> list[Any]:
        """Records at the corners of the domain: the bounds, the observed ranges, or +-10x the data's largest
        magnitude (``domain="any"``)."""
        if isinstance(data, dict):
            return []  # a dict record has typed fields (group, label): only rows of the data are reused
        values = np.asarray(data, dtype=np.float64)
        shape = values.shape[1:]
        if self.bounds is not None:
            low = np.broadcast_to(np.asarray(self.bounds[0], dtype=np.float64), shape)
            high = np.broadcast_to(np.asarray(self.bounds[1], dtype=np.float64), shape)
        elif self._observed(data):
            low, high = values.min(axis=0), values.max(axis=0)
        else:
            scale = 10.0 * max(1.0, float(np.max(np.abs(values))) if values.size else 1.0)
            low, high = np.full(shape, -scale), np.full(shape, scale)
        return [high.copy(), low.copy(), np.where(np.arange(int(np.prod(shape))).reshape(shape) % 2 == 0, high, low)]

    def _extreme_rows(self, data: Data) -> list[int]:
        """Indices of the rows most likely to matter: largest and smallest, first and last, a lone group member."""
        n = n_rows(data)
        if n == 0:
            return []
        picks = [0, n - 1]
        if isinstance(data, dict):
            if "group" in data:
                values, counts = np.unique(data["group"], return_counts=True)
                picks.insert(0, int(np.flatnonzero(data["group"] == values[np.argmin(counts)])[0]))
            numeric = [v for v in data.values() if np.issubdtype(v.dtype, np.number)]
            flat = np.concatenate([np.asarray(v, np.float64).reshape(n, -1) for v in numeric], axis=1) \
                if numeric else np.zeros((n, 1))
        else:
            flat = np.asarray(data, dtype=np.float64).reshape(n, -1)
        norms = np.abs(flat).sum(axis=1)
        sums = flat.sum(axis=1)
        picks += [int(np.argmax(norms)), int(np.argmax(sums)), int(np.argmin(sums))]
        return list(dict.fromkeys(picks))

    def _in_bounds(self, record: Any) -> bool:
        if self.bounds is None:
            return True
        value = np.asarray(record, dtype=np.float64)
        return bool(np.all(value >= np.asarray(self.bounds[0]) - 1e-12) and
                    np.all(value <= np.asarray(self.bounds[1]) + 1e-12))

    def _check_record(self, record: Any, what: str) -> None:
        if not isinstance(record, dict) and not self._in_bounds(record):
            raise NotNeighbours(f"the {what} record {jsonable(np.asarray(record))} lies outside the relation's "
                                f"bounds {self.bounds}")

    def _record_strategy(self, data: Data):
        from hypothesis import strategies as st

        if self.records is not None:
            return self.records
        observed = self._observed(data)
        if isinstance(data, dict):
            return st.fixed_dictionaries({k: _field_strategy(v, observed=observed) for k, v in data.items()})
        if observed and not np.issubdtype(np.asarray(data).dtype, np.floating):
            return _field_strategy(np.asarray(data), observed=True)
        values = np.asarray(data, dtype=np.float64)
        shape = values.shape[1:]
        if observed:
            low, high = values.min(axis=0).ravel(), values.max(axis=0).ravel()
        elif self.bounds is not None:
            low = np.broadcast_to(np.asarray(self.bounds[0], dtype=np.float64), shape).ravel()
            high = np.broadcast_to(np.asarray(self.bounds[1], dtype=np.float64), shape).ravel()
        else:
            scale = 10.0 * max(1.0, float(np.max(np.abs(values))) if values.size else 1.0)
            low, high = np.full(int(np.prod(shape)), -scale), np.full(int(np.prod(shape)), scale)
        elements = [st.floats(float(lo), float(hi), allow_nan=False) for lo, hi in zip(low, high)]
        return st.tuples(*elements).map(lambda t: np.asarray(t, dtype=np.float64).reshape(shape))

    def _adversarial_records(self, data: Data, rng: np.random.Generator) -> list[Any]:
        records = self._far_points(data)
        if n_rows(data) and not isinstance(data, dict):
            flat = np.asarray(data, dtype=np.float64).reshape(n_rows(data), -1)
            extreme = np.asarray(row(data, int(np.argmax(np.abs(flat).sum(axis=1)))), dtype=np.float64)
            records += [-extreme, np.zeros_like(extreme), extreme.copy()]  # sign flip, zero row, duplicate
        elif isinstance(data, dict) and n_rows(data):
            records += [row(data, i) for i in self._extreme_rows(data)]
        return [r for r in records if self._in_domain(r, data)]


@dataclass(frozen=True, repr=False)
class AddRemove(_RecordRelation):
    """D' is D with one record added (at any position) or removed.

    Parameters
    ----------
    bounds : (low, high), optional
        Every record lies in [low, high] (scalars or per-column); the claim's domain.
    records : hypothesis strategy, optional
        Records to add (default: records within ``bounds``, else within the data's observed domain).
    domain : "observed" or "any"
        Without ``bounds``: the records added keep to the observed values and ranges of the data
        (``"observed"``, default) or take any values (``"any"``: far points, new groups); see
        :class:`_RecordRelation`.
    """

    name = "add-remove"

    def accountant_neighboring(self) -> str:
        return "add_remove"

    def check(self, data: Data, neighbour: Data) -> Change:
        data, neighbour = as_dataset(data), as_dataset(neighbour, "neighbour")
        n, m = n_rows(data), n_rows(neighbour)
        if abs(n - m) != 1:
            raise NotNeighbours(f"add-remove neighbours differ by exactly one record, got {n} and {m} records")
        small, big, kind = (data, neighbour, "add") if m == n + 1 else (neighbour, data, "remove")
        equal = _rows_equal(small, delete_row(big, n_rows(big) - 1)) if n_rows(small) else np.ones(0, bool)
        first = int(np.argmin(equal)) if not equal.all() else n_rows(small)
        if not _same_rows(small, delete_row(big, first)):
            raise NotNeighbours(f"removing one record from the larger data set does not give the smaller one "
                                f"(they first differ at record {first})")
        self._check_record(row(big, first), "added" if kind == "add" else "removed")
        return Change(kind, first, None if kind == "add" else row(big, first), row(big, first) if kind == "add"
                      else None)

    def candidates(self, data: Data, *, rng: np.random.Generator, limit: int = 16) -> list[tuple[Data, Data]]:
        data = as_dataset(data)
        pairs = [(data, insert_row(data, n_rows(data), r)) for r in self._adversarial_records(data, rng)]
        pairs += [(data, delete_row(data, i)) for i in self._extreme_rows(data)]
        return _dedupe(pairs)[:limit]

    def neighbours(self, data: Data):
        from hypothesis import strategies as st

        data = as_dataset(data)
        n = n_rows(data)
        add = st.tuples(st.integers(0, n), self._record_strategy(data)).map(
            lambda t: insert_row(data, t[0], t[1]))
        if n == 0:
            return add
        remove = st.integers(0, n - 1).map(lambda i: delete_row(data, i))
        return st.one_of(remove, add)


@dataclass(frozen=True, repr=False)
class ReplaceOne(_RecordRelation):
    """D' is D with one record replaced by another (same size).

    Parameters
    ----------
    bounds : (low, high), optional
        Every record lies in [low, high] (scalars or per-column); the claim's domain.
    records : hypothesis strategy, optional
        Replacement records (default: records within ``bounds``, else within the data's observed domain).
    domain : "observed" or "any"
        Without ``bounds``: replacement records keep to the observed values and ranges of the data
        (``"observed"``, default) or take any values (``"any"``); see :class:`_RecordRelation`.
    """

    name = "replace-one"

    def check(self, data: Data, neighbour: Data) -> Change:
        data, neighbour = as_dataset(data), as_dataset(neighbour, "neighbour")
        if n_rows(data) != n_rows(neighbour):
            raise NotNeighbours(f"replace-one neighbours have the same number of records, got {n_rows(data)} and "
                                f"{n_rows(neighbour)}")
        differ = np.flatnonzero(~_rows_equal(data, neighbour))
        if len(differ) != 1:
            raise NotNeighbours(f"replace-one neighbours differ in exactly one record, these differ in "
                                f"{len(differ)} (records {differ[:5].tolist()}{'...' if len(differ) > 5 else ''})")
        i = int(differ[0])
        self._check_record(row(neighbour, i), "new")
        self._check_record(row(data, i), "old")
        return Change("replace", i, row(data, i), row(neighbour, i))

    def candidates(self, data: Data, *, rng: np.random.Generator, limit: int = 16) -> list[tuple[Data, Data]]:
        data = as_dataset(data)
        if n_rows(data) == 0:
            raise ValueError("replace-one needs a data set with at least one record")
        pairs = []
        for i in self._extreme_rows(data)[:3]:
            for record in self._adversarial_records(data, rng):
                if not _same_rows(replace_row(data, i, record), data):
                    pairs.append((data, replace_row(data, i, record)))
        return _dedupe(pairs)[:limit]

    def neighbours(self, data: Data):
        from hypothesis import strategies as st

        data = as_dataset(data)
        if n_rows(data) == 0:
            raise ValueError("replace-one needs a data set with at least one record")
        return st.tuples(st.integers(0, n_rows(data) - 1), self._record_strategy(data)).map(
            lambda t: replace_row(data, t[0], t[1])).filter(lambda d: not _same_rows(d, data))


@dataclass(frozen=True, repr=False)
class AttributeChange(Relation):
    """One person's sensitive attribute changes; every other value stays (paper 003's relation).

    Data: the per-record attribute (1-d array), or a dict of equal-length arrays whose
    ``column`` entry is the attribute (features, labels and the rest must not change).

    Parameters
    ----------
    values : sequence, optional
        The attribute's values (default: those present in the data).
    unreported : scalar, optional
        The code for "not reported" (e.g. -1): a person may move to or from it (paper 003,
        Sec. 7). None: every person reports.
    column : str
        The dict entry holding the attribute (default ``"group"``).
    """

    values: tuple | None = None
    unreported: Any = None
    column: str = "group"
    name = "attribute-change"

    def _attribute(self, data: Data) -> np.ndarray:
        if isinstance(data, dict):
            if self.column not in data:
                raise ValueError(f"attribute-change data must have a {self.column!r} entry (the sensitive "
                                 f"attribute), got entries {sorted(data)}")
            return np.asarray(data[self.column])
        attribute = np.asarray(data)
        if attribute.ndim != 1:
            raise ValueError(f"attribute-change data must be the 1-d vector of each record's attribute or a dict "
                             f"with a {self.column!r} entry, got an array of shape {attribute.shape}")
        return attribute

    def _allowed(self, data: Data) -> list[Any]:
        present = np.unique(self._attribute(data)).tolist()
        values = list(self.values) if self.values is not None else [v for v in present if v != self.unreported]
        if self.unreported is not None:
            values.append(self.unreported)
        return values

    def _with(self, data: Data, i: int, value: Any) -> Data:
        if isinstance(data, dict):
            out = dict(data)
            out[self.column] = data[self.column].copy()
            out[self.column][i] = value
            return out
        out = np.asarray(data).copy()
        out[i] = value
        return out

    def check(self, data: Data, neighbour: Data) -> Change:
        data, neighbour = as_dataset(data), as_dataset(neighbour, "neighbour")
        a, b = self._attribute(data), self._attribute(neighbour)
        if len(a) != len(b):
            raise NotNeighbours(f"attribute-change neighbours have the same records, got {len(a)} and {len(b)}")
        if isinstance(data, dict):
            rest = {k: v for k, v in data.items() if k != self.column}
            other = {k: v for k, v in neighbour.items() if k != self.column}
            if set(rest) != set(other):
                raise NotNeighbours(f"the data sets have different entries: {sorted(data)} vs {sorted(neighbour)}")
            for k, values in rest.items():
                if values.shape != other[k].shape or not np.array_equal(values, other[k]):
                    raise NotNeighbours(f"only the sensitive attribute {self.column!r} may change, but "
                                        f"{k!r} differs too")
        differ = np.flatnonzero(a != b)
        if len(differ) != 1:
            raise NotNeighbours(f"attribute-change neighbours differ in exactly one person's attribute, these "
                                f"differ in {len(differ)}")
        i = int(differ[0])
        allowed = self._allowed(data) if self.values is not None or self.unreported is not None else None
        if allowed is not None and (a[i] not in allowed or b[i] not in allowed):
            raise NotNeighbours(f"attribute values must be in {allowed}, got {a[i]!r} -> {b[i]!r}")
        return Change("attribute", i, a[i].item(), b[i].item())

    def candidates(self, data: Data, *, rng: np.random.Generator, limit: int = 16) -> list[tuple[Data, Data]]:
        data = as_dataset(data)
        attribute = self._attribute(data)
        if len(attribute) == 0:
            raise ValueError("attribute-change needs a data set with at least one person")
        values = self._allowed(data)
        present, counts = np.unique(attribute, return_counts=True)
        order = present[np.argsort(counts, kind="stable")]  # smallest group first: a lone member moving
        movers = [int(np.flatnonzero(attribute == g)[0]) for g in order]
        if isinstance(data, dict):
            numeric = [np.asarray(v, np.float64).reshape(len(attribute), -1) for k, v in data.items()
                       if k != self.column and np.issubdtype(v.dtype, np.number)]
            if numeric:
                movers.append(int(np.argmax(np.abs(np.concatenate(numeric, axis=1)).sum(axis=1))))  # a far point
        movers += rng.permutation(len(attribute))[:4].tolist()
        pairs = []
        for i in dict.fromkeys(movers):
            for value in values:
                if value != attribute[i]:
                    pairs.append((data, self._with(data, i, value)))
        return _dedupe(pairs)[:limit]

    def neighbours(self, data: Data):
        from hypothesis import strategies as st

        data = as_dataset(data)
        attribute = self._attribute(data)
        values = self._allowed(data)
        if len(attribute) == 0 or len(values) < 2:
            raise ValueError(f"attribute-change needs at least one person and two attribute values, got "
                             f"{len(attribute)} people and values {values}")
        return st.tuples(st.integers(0, len(attribute) - 1), st.sampled_from(values)).filter(
            lambda t: t[1] != attribute[t[0]]).map(lambda t: self._with(data, t[0], t[1]))

    def describe(self) -> str:
        return self.name + ("" if self.unreported is None else f" (or unreported = {self.unreported!r})")


@dataclass(frozen=True, repr=False)
class QueryVector(Relation):
    """Data is the 1-d vector of query answers; neighbours move entries by at most ``sensitivity``.

    Parameters
    ----------
    sensitivity : float
        Delta, the largest move of an entry (default 1).
    mode : str
        ``"every"``: every entry may move by <= Delta (l-infinity ball); ``"one"``: one
        entry moves by <= Delta, the others stay.
    """

    sensitivity: float = 1.0
    mode: str = "every"
    name = "queries"

    def __post_init__(self) -> None:
        if self.mode not in ("every", "one"):
            raise ValueError(f"mode must be 'every' or 'one', got {self.mode!r}")
        if not (isinstance(self.sensitivity, (int, float)) and math.isfinite(self.sensitivity)
                and self.sensitivity > 0):
            raise ValueError(f"sensitivity must be a positive finite number, got {self.sensitivity!r}")

    def _vector(self, data: Data, name: str) -> np.ndarray:
        vector = np.asarray(data, dtype=np.float64)
        if vector.ndim != 1 or len(vector) == 0:
            raise ValueError(f"under the queries relation {name} is the 1-d vector of query answers, got shape "
                             f"{vector.shape}")
        return vector

    def check(self, data: Data, neighbour: Data) -> Change:
        a, b = self._vector(data, "data"), self._vector(neighbour, "neighbour")
        if a.shape != b.shape:
            raise NotNeighbours(f"query vectors have different lengths: {len(a)} and {len(b)}")
        moves = np.abs(b - a)
        tolerance = 1e-9 * self.sensitivity
        if moves.max() > self.sensitivity + tolerance:
            j = int(np.argmax(moves))
            raise NotNeighbours(f"entry {j} moves by {moves[j]:g} > Delta = {self.sensitivity:g}")
        moved = np.flatnonzero(moves > 0)
        if self.mode == "one" and len(moved) > 1:
            raise NotNeighbours(f"under mode='one' one entry moves, here {len(moved)} do (entries "
                                f"{moved[:5].tolist()})")
        if len(moved) == 0:
            raise NotNeighbours("the two query vectors are equal")
        return Change("queries", int(moved[0]) if len(moved) == 1 else None, a[moved], b[moved])

    def patterns(self, dimension: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """StatDP's input patterns (Ding et al. 2018, Sec. 5.1) as offsets (from, to) in units of Delta:
        one above, one below; with ``mode="every"`` also one above and the rest below, one below and the
        rest above, half above and half below, all above, all below, and the "X shape"."""
        e0 = np.zeros(dimension)
        e0[0] = 1.0
        half = dimension // 2
        out = [(np.zeros(dimension), -e0), (np.zeros(dimension), e0)]
        if self.mode == "every" and dimension > 1:
            rest = np.ones(dimension)
            out += [(np.zeros(dimension), np.where(e0 > 0, 1.0, -rest)),
                    (np.zeros(dimension), np.where(e0 > 0, -1.0, rest)),
                    (np.zeros(dimension), np.r_[np.ones(half), -np.ones(dimension - half)]),
                    (np.zeros(dimension), rest), (np.zeros(dimension), -rest),
                    (np.r_[np.zeros(half), -np.ones(dimension - half)], np.r_[-np.ones(half), np.zeros(dimension - half)])]
        return out

    def _pattern_pairs(self, base: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        step = self.sensitivity
        return _dedupe([(base + step * a, base + step * b) for a, b in self.patterns(len(base))])

    def fixed_patterns(self, data: Data) -> int:
        """StatDP's patterns (:meth:`patterns`, duplicates dropped): the first pairs of :meth:`candidates`."""
        return len(self._pattern_pairs(self._vector(data, "data")))

    def candidates(self, data: Data, *, rng: np.random.Generator, limit: int = 16) -> list[tuple[Data, Data]]:
        base = self._vector(data, "data")
        d = len(base)
        pairs = self._pattern_pairs(base)
        while len(pairs) < limit:  # random sign patterns (one random entry under mode="one")
            if self.mode == "one":
                step = np.zeros(d)
                step[rng.integers(d)] = rng.choice([-1.0, 1.0])
            else:
                step = rng.choice([-1.0, 0.0, 1.0], size=d)
                if not step.any():
                    step[0] = 1.0
            pairs.append((base, base + self.sensitivity * step))
        return _dedupe(pairs)[:limit]

    def neighbours(self, data: Data):
        from hypothesis import strategies as st

        base = self._vector(data, "data")
        d = len(base)
        unit = st.floats(-1.0, 1.0, allow_nan=False)
        if self.mode == "one":
            moves = st.tuples(st.integers(0, d - 1), unit.filter(lambda v: v != 0)).map(
                lambda t: np.where(np.arange(d) == t[0], t[1], 0.0))
        else:
            moves = st.lists(unit, min_size=d, max_size=d).map(np.asarray).filter(lambda v: np.any(v != 0))
        return moves.map(lambda v: base + self.sensitivity * v).filter(lambda b: np.any(b != base))

    def describe(self) -> str:
        return f"queries ({self.mode} entr{'y' if self.mode == 'one' else 'ies'} move by <= {self.sensitivity:g})"


def _field_strategy(values: np.ndarray, *, observed: bool = False):
    """One record's value of a dict entry (or an array's record). ``observed``: per position, a value seen in the
    entry (integers and booleans) or a float within the range seen. Otherwise integers from the entry's smallest
    value to one past its largest (a new group or label), floats within +-10x its largest magnitude (0 and 1 when
    it is empty)."""
    from hypothesis import strategies as st

    shape = values.shape[1:]
    size = int(np.prod(shape))
    if observed and len(values):
        kind, domain = _observed_values(values)
        if kind == "values":
            elements = [st.sampled_from(allowed.tolist()) for allowed in domain]
        else:
            low, high = (np.ravel(x) for x in domain)
            elements = [st.floats(float(lo), float(hi), allow_nan=False) for lo, hi in zip(low, high)]
        return st.tuples(*elements).map(lambda v: np.asarray(v, dtype=values.dtype).reshape(shape))
    if np.issubdtype(values.dtype, np.bool_):
        element = st.booleans()
    elif np.issubdtype(values.dtype, np.integer):
        low, high = (int(values.min()), int(values.max()) + 1) if values.size else (0, 1)
        element = st.integers(low, high)
    else:
        scale = 10.0 * max(1.0, float(np.max(np.abs(values))) if values.size else 1.0)
        element = st.floats(-scale, scale, allow_nan=False)
    return st.lists(element, min_size=size, max_size=size).map(
        lambda v: np.asarray(v, dtype=values.dtype).reshape(shape))


def _dedupe(pairs: list[tuple[Data, Data]]) -> list[tuple[Data, Data]]:
    seen, out = set(), []
    for a, b in pairs:
        key = (_fingerprint(a), _fingerprint(b))
        if key not in seen:
            seen.add(key)
            out.append((a, b))
    return out


def _fingerprint(data: Data) -> bytes:
    if isinstance(data, dict):
        return b"|".join(k.encode() + b":" + np.ascontiguousarray(v).tobytes() + str(v.shape).encode()
                         for k, v in sorted(data.items()))
    array = np.ascontiguousarray(data)
    return array.tobytes() + str(array.shape).encode()


RELATIONS = {"add-remove": AddRemove, "replace-one": ReplaceOne, "attribute-change": AttributeChange,
             "queries": QueryVector}


def make_relation(relation: Relation | str, **options: Any) -> Relation:
    """A :class:`Relation` from itself or its name (``add-remove``, ``replace-one``, ``attribute-change``,
    ``queries``), with ``options`` passed to the class.

    Parameters
    ----------
    relation : Relation or str
        The relation or its name.
    **options
        Constructor arguments (e.g. ``sensitivity=2.0`` for queries, ``unreported=-1``).
    """
    if isinstance(relation, Relation):
        if options:
            raise ValueError(f"options {sorted(options)} apply only to a relation given by name")
        return relation
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {sorted(RELATIONS)} or a Relation, got {relation!r}")
    return RELATIONS[relation](**options)


__all__ = [
    "DOMAINS",
    "RELATIONS",
    "AddRemove",
    "AttributeChange",
    "Change",
    "NotNeighbours",
    "QueryVector",
    "Relation",
    "ReplaceOne",
    "as_dataset",
    "make_relation",
]
