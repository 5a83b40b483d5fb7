"""Hypothesis strategies for privacy tests: data sets, neighbours under a relation, worst-case canaries.

Random inputs rarely break a sensitivity claim; the counterexamples this project found
(papers 000 and 003) live in small families, so the strategies here search them on purpose:

:func:`datasets`
    records with features, labels and groups -- tiny and unequal groups (a group of one,
    an empty group), signed values, several features;
:func:`neighbours`, :func:`pairs`
    a neighbour of a data set under a relation (:mod:`.relations`), or a pair (D, D');
:func:`lone_member`
    a group with a single member, who is the one that moves (attribute-change) or leaves
    (add-remove): its group's statistics are the most sensitive;
:func:`far_point`
    a record far outside the others (beyond any clipping bound) added or swapped in;
:func:`sign_flip`
    a group whose members all sit at -v and one member at +v who flips (replace-one) or moves
    to another group (attribute-change): a group mean moves by 2 |v| / n, more than the
    |v| / (n - 1) a printed bound often allows;
:func:`gradient_canary`
    a record whose value sits in a feature no other record uses, so a linear model's
    gradient of it lies in its own coordinate (the toolkit's white-box audit canary);
:func:`canary_pairs`
    the families that apply to a relation, as (D, D') pairs;
:func:`neighbour_of`
    a list of rows and a row strategy: a neighbouring list by add, remove or replace.

Data sets are dicts ``{"X": (n, d) float array, "y": (n,) int array, "group": (n,) int array}``
(or just ``X`` when labels and groups are not asked for), the layout every relation accepts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from dpfair_analysis.testing.relations import (
    AddRemove,
    AttributeChange,
    QueryVector,
    Relation,
    ReplaceOne,
    as_dataset,
    make_relation,
)

#: Values features take by default: signed, with exact extremes (shrinking goes to 0).
VALUES = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False, width=32)
#: |v| of :func:`sign_flip` and the canary's value in :func:`gradient_canary`.
MAGNITUDES = st.sampled_from([1.0, 0.5, 2.0, 3.0])
CANARY_VALUES = st.sampled_from([100.0, 10.0, 1e3])


def _sizes(value: int | tuple[int, int], name: str) -> tuple[int, int]:
    low, high = (value, value) if isinstance(value, int) else value
    if not 0 <= low <= high:
        raise ValueError(f"{name} must be an integer >= 0 or a (low, high) range, got {value!r}")
    return low, high


@st.composite
def datasets(draw, *, rows: int | tuple[int, int] = (0, 12), features: int | tuple[int, int] = (1, 3),
             labels: int | None = 2, groups: int | None = 2, values: st.SearchStrategy = VALUES,
             min_group_size: int = 0) -> Any:
    """Data sets of records: features ``X``, labels ``y`` and group ``group`` (see the module docstring).

    Groups are assigned per row, so tiny, unequal and empty groups all occur; with
    ``groups=None`` and ``labels=None`` the data set is the bare ``X`` array.

    Parameters
    ----------
    draw : callable
        Hypothesis's draw, supplied by ``@st.composite`` (callers do not pass it).
    rows, features : int or (low, high)
        Number of records and of features.
    labels, groups : int or None
        Number of label / group values (None: no such entry).
    values : hypothesis strategy
        Feature values (default: floats in [-10, 10]).
    min_group_size : int
        Every group has at least this many members (rows are added as needed).
    """
    n = draw(st.integers(*_sizes(rows, "rows")))
    d = draw(st.integers(*_sizes(features, "features")))
    group = None
    if groups is not None:
        group = draw(st.lists(st.integers(0, groups - 1), min_size=n, max_size=n))
        for g in range(groups):
            group += [g] * max(0, min_group_size - group.count(g))
        n = len(group)
    X = np.asarray(draw(st.lists(st.lists(values, min_size=d, max_size=d), min_size=n, max_size=n)),
                   dtype=np.float64).reshape(n, d)
    if labels is None and groups is None:
        return X
    data: dict[str, np.ndarray] = {"X": X}
    if labels is not None:
        data["y"] = np.asarray(draw(st.lists(st.integers(0, labels - 1), min_size=n, max_size=n)), dtype=np.int64)
    if group is not None:
        data["group"] = np.asarray(group, dtype=np.int64)
    return data


def neighbours(data: Any, relation: Relation | str, **options: Any) -> st.SearchStrategy:
    """Neighbours of a fixed data set under ``relation`` (see :meth:`Relation.neighbours`).

    Parameters
    ----------
    data : array or dict of arrays
        The base data set.
    relation : Relation or str
        The relation (or its name; ``options`` configure it).
    **options
        Passed to :func:`~dpfair_analysis.testing.relations.make_relation`.
    """
    return make_relation(relation, **options).neighbours(as_dataset(data))


def pairs(relation: Relation | str, data: st.SearchStrategy | None = None, **options: Any) -> st.SearchStrategy:
    """Pairs (D, D') of neighbours: D from ``data`` (default :func:`datasets` fitting the relation), D'
    a neighbour of D.

    Parameters
    ----------
    relation : Relation or str
        The relation (or its name; ``options`` configure it).
    data : hypothesis strategy, optional
        Base data sets (default: :func:`datasets`; query vectors of length 1-6 under ``queries``).
    **options
        Passed to :func:`~dpfair_analysis.testing.relations.make_relation`.
    """
    relation = make_relation(relation, **options)
    if data is None:
        if isinstance(relation, QueryVector):
            data = st.lists(VALUES, min_size=1, max_size=6).map(lambda v: np.asarray(v, dtype=np.float64))
        elif isinstance(relation, AttributeChange):
            data = datasets(rows=(1, 12), groups=2, min_group_size=1)
        elif isinstance(relation, ReplaceOne):
            data = datasets(rows=(1, 12))
        else:
            data = datasets()
    return data.flatmap(lambda d: st.tuples(st.just(d), relation.neighbours(d)))


# ============================================================================= canary families
@st.composite
def lone_member(draw, *, relation: str = "attribute-change", others: tuple[int, int] = (2, 9),
                features: int = 2, values: st.SearchStrategy = VALUES) -> tuple[dict, dict]:
    """(D, D'): a group with one member, who moves to the other group (``attribute-change``) or
    leaves (``add-remove``); the other group has ``others`` members.

    Parameters
    ----------
    draw : callable
        Hypothesis's draw, supplied by ``@st.composite`` (callers do not pass it).
    relation : str
        ``"attribute-change"`` or ``"add-remove"``.
    others : (low, high)
        Size of the other group.
    features : int
        Number of features.
    values : hypothesis strategy
        Feature values.
    """
    if relation not in ("attribute-change", "add-remove"):
        raise ValueError(f"relation must be 'attribute-change' or 'add-remove', got {relation!r}")
    m = draw(st.integers(*others))
    X = np.asarray(draw(st.lists(st.lists(values, min_size=features, max_size=features), min_size=m + 1,
                                 max_size=m + 1)), dtype=np.float64)
    y = np.asarray(draw(st.lists(st.integers(0, 1), min_size=m + 1, max_size=m + 1)), dtype=np.int64)
    group = np.r_[np.ones(m, dtype=np.int64), 0]  # the last record is alone in group 0
    data = {"X": X, "y": y, "group": group}
    if relation == "add-remove":
        return data, {k: v[:-1] for k, v in data.items()}
    moved = dict(data, group=np.r_[np.ones(m, dtype=np.int64), 1])
    return data, moved


@st.composite
def far_point(draw, *, relation: str = "add-remove", rows: tuple[int, int] = (1, 8), features: int = 2,
              scale: tuple[float, float] = (10.0, 1e4)) -> tuple[dict, dict]:
    """(D, D'): records of magnitude <= 1, and the same with a record of magnitude ``scale`` added
    (``add-remove``) or swapped in for the first one (``replace-one``); labels and groups 0.

    Parameters
    ----------
    draw : callable
        Hypothesis's draw, supplied by ``@st.composite`` (callers do not pass it).
    relation : str
        ``"add-remove"`` or ``"replace-one"``.
    rows : (low, high)
        Records of D.
    features : int
        Number of features.
    scale : (low, high)
        Magnitude of the far record (beyond any clipping bound a mechanism is likely to use).
    """
    if relation not in ("add-remove", "replace-one"):
        raise ValueError(f"relation must be 'add-remove' or 'replace-one', got {relation!r}")
    n = draw(st.integers(*rows))
    unit = st.floats(-1.0, 1.0, allow_nan=False)
    X = np.asarray(draw(st.lists(st.lists(unit, min_size=features, max_size=features), min_size=n, max_size=n)),
                   dtype=np.float64).reshape(n, features)
    signs = np.asarray(draw(st.lists(st.sampled_from([1.0, -1.0]), min_size=features, max_size=features)))
    far = signs * draw(st.floats(*scale))
    base = {"X": X, "y": np.zeros(n, dtype=np.int64), "group": np.zeros(n, dtype=np.int64)}
    if relation == "add-remove":
        return base, {"X": np.vstack([X, far]), "y": np.zeros(n + 1, dtype=np.int64),
                      "group": np.zeros(n + 1, dtype=np.int64)}
    Y = X.copy()
    Y[0] = far
    return base, dict(base, X=Y)


@st.composite
def sign_flip(draw, *, relation: str = "replace-one", size: tuple[int, int] = (2, 12), features: int = 1,
              magnitude: st.SearchStrategy = MAGNITUDES) -> tuple[dict, dict]:
    """A group of records at -v and one record at +v: the worst case for a mean of clipped values.

    ``replace-one``: the group (n records, all at -v) has one record flipped to +v in D'; the
    group mean moves by 2 |v| / n. ``attribute-change``: two groups of n_a, n_b records at -v,
    except the mover at +v in group 0, who moves to group 1 in D'; the means move by 2 |v| / n_a
    and 2 |v| / (n_b + 1) -- more than the |v| / (n - 1) style bounds papers 000 and 003 print.

    Parameters
    ----------
    draw : callable
        Hypothesis's draw, supplied by ``@st.composite`` (callers do not pass it).
    relation : str
        ``"replace-one"`` or ``"attribute-change"``.
    size : (low, high)
        Group sizes.
    features : int
        Dimension of v.
    magnitude : hypothesis strategy
        |v|.
    """
    if relation not in ("replace-one", "attribute-change"):
        raise ValueError(f"relation must be 'replace-one' or 'attribute-change', got {relation!r}")
    n = draw(st.integers(*size))
    direction = np.asarray(draw(st.lists(st.sampled_from([1.0, -1.0, 0.5]), min_size=features,
                                         max_size=features)), dtype=np.float64)
    v = direction / np.linalg.norm(direction) * draw(magnitude)
    if relation == "replace-one":
        X = np.tile(-v, (n, 1))
        Y = X.copy()
        Y[0] = v
        base = {"X": X, "y": np.zeros(n, dtype=np.int64), "group": np.zeros(n, dtype=np.int64)}
        return base, dict(base, X=Y)
    m = draw(st.integers(*size))
    X = np.tile(-v, (n + m, 1))
    X[0] = v
    group = np.r_[np.zeros(n, dtype=np.int64), np.ones(m, dtype=np.int64)]
    base = {"X": X, "y": np.zeros(n + m, dtype=np.int64), "group": group}
    moved = group.copy()
    moved[0] = 1
    return base, dict(base, group=moved)


@st.composite
def gradient_canary(draw, *, rows: tuple[int, int] = (2, 12), features: int = 3,
                    value: st.SearchStrategy = CANARY_VALUES) -> tuple[dict, dict]:
    """(D, D') under add-remove: D's records are 0 in feature 0; D' adds the canary, ``value`` in
    feature 0 and 0 elsewhere, label 1, alone in group 1.

    For a linear model no other record's gradient moves the weight of feature 0, so every
    change of it is the canary's clipped gradient plus noise: the white-box canary of the
    toolkit's trainer audits (:mod:`dpfair_analysis.verify.audits.trainers`).

    Parameters
    ----------
    draw : callable
        Hypothesis's draw, supplied by ``@st.composite`` (callers do not pass it).
    rows : (low, high)
        Records of D.
    features : int
        Number of features (>= 2; feature 0 is the canary's own).
    value : hypothesis strategy
        The canary's value in its feature.
    """
    if features < 2:
        raise ValueError(f"features must be >= 2 (feature 0 is the canary's), got {features}")
    n = draw(st.integers(*rows))
    X = np.zeros((n, features))
    X[:, 1:] = np.asarray(draw(st.lists(st.lists(st.floats(-3, 3), min_size=features - 1, max_size=features - 1),
                                        min_size=n, max_size=n)), dtype=np.float64).reshape(n, features - 1)
    y = np.asarray(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=np.int64)
    canary = np.zeros(features)
    canary[0] = draw(value)
    base = {"X": X, "y": y, "group": np.zeros(n, dtype=np.int64)}
    return base, {"X": np.vstack([X, canary]), "y": np.r_[y, 1], "group": np.r_[base["group"], 1]}


def canary_pairs(relation: Relation | str, **options: Any) -> st.SearchStrategy:
    """The canary families that are neighbours under ``relation``, as one strategy of (D, D') pairs.

    Parameters
    ----------
    relation : Relation or str
        ``add-remove``: lone member, far point, gradient canary; ``replace-one``: far point,
        sign flip; ``attribute-change``: lone member, sign flip.
    **options
        Passed to :func:`~dpfair_analysis.testing.relations.make_relation`.
    """
    relation = make_relation(relation, **options)
    if isinstance(relation, AddRemove):
        return st.one_of(lone_member(relation="add-remove"), far_point(relation="add-remove"), gradient_canary())
    if isinstance(relation, ReplaceOne):
        return st.one_of(far_point(relation="replace-one"), sign_flip())
    if isinstance(relation, AttributeChange):
        return st.one_of(lone_member(relation="attribute-change"), sign_flip(relation="attribute-change"))
    raise ValueError(f"no canary families for {relation.describe()}: use relation.candidates(data) for query "
                     f"vectors (StatDP's patterns)")


def other_value(values: int, current: int, *, allow_same: bool = False) -> st.SearchStrategy:
    """A new value of a person's attribute among 0..values-1: any other than ``current`` (the
    attribute-change relation), or possibly ``current`` itself when ``allow_same`` (a neighbour that
    changes something else about the person, e.g. whether they report it).

    Parameters
    ----------
    values : int
        Number of attribute values.
    current : int
        The person's value now.
    allow_same : bool
        Whether ``current`` may be drawn.
    """
    return st.integers(0, values - 1).filter(lambda g: g != current or allow_same)


# ============================================================================= lists of rows
NEIGHBOUR_KINDS = ("add", "remove", "replace")


@st.composite
def neighbour_of(draw, rows: list, row: st.SearchStrategy) -> tuple[list, str]:
    """A batch that differs from ``rows`` in one row, and how: ``add`` a row drawn from ``row``,
    ``remove`` one of ``rows``, or ``replace`` one (remove it, then add a drawn row at the end).

    Returns ``(neighbour, kind)``; ``rows`` is not changed. Removing from an empty batch is
    rejected (``assume``), so an empty batch only has neighbours by addition.

    Parameters
    ----------
    draw : callable
        Hypothesis's draw, supplied by ``@st.composite`` (callers do not pass it).
    rows : list
        The batch.
    row : hypothesis strategy
        New rows.
    """
    kind = draw(st.sampled_from(NEIGHBOUR_KINDS))
    neighbour = list(rows)
    if kind in ("remove", "replace"):
        assume(rows)
        neighbour.pop(draw(st.integers(0, len(rows) - 1)))
    if kind in ("add", "replace"):
        neighbour.append(draw(row))
    return neighbour, kind


__all__ = ["CANARY_VALUES", "MAGNITUDES", "NEIGHBOUR_KINDS", "VALUES", "canary_pairs", "datasets", "far_point",
           "gradient_canary", "lone_member", "neighbour_of", "neighbours", "other_value", "pairs", "sign_flip"]
