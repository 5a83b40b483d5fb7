"""Sensitivity claims as property tests: search neighbouring pairs for a change larger than the bound.

The sensitivity of a release f under a relation is max ||f(D) - f(D')|| over neighbours
(D, D'); a mechanism calibrated to a claimed bound Delta is private only if no pair moves
f by more. :func:`assert_sensitivity` searches pairs with hypothesis (the relation's
neighbours of generated data sets, plus the worst-case canary families of
:mod:`.strategies`) and raises :class:`SensitivityViolation` with a *shrunk*
counterexample: D, D', the change, the observed distance and its ratio to the bound.
:func:`find_sensitivity` returns the largest change found and its witness instead.

:func:`find_violation` is the search underneath (hypothesis ``find`` with a deterministic
budget), also used by the claims registry (``dpfair verify``).

The norm is part of the claim and has no default: ``norm=`` (1, 2, inf) or ``mechanism=``, the
mechanism the bound calibrates (:data:`MECHANISM_NORMS`). The Laplace mechanism
M(D) = f(D) + Lap(Delta_1 / epsilon)^d is epsilon-DP when Delta_1 = max ||f(D) - f(D')||_1 over
neighbours; the Gaussian mechanism f(D) + N(0, sigma^2 I) needs the l2 sensitivity Delta_2 and the
exponential mechanism the largest change of any one score, Delta_inf. A claim checked in a smaller
norm than its mechanism needs passes wrongly: per-group counts under attribute change move by
(1, -1), ||.||_2 = sqrt 2 but ||.||_1 = 2.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any

import numpy as np

from dpfair_analysis.testing.relations import Change, Relation, as_dataset, make_relation
from dpfair_analysis.testing.runner import describe_data, is_complex, read_only, writes_to_input


class NothingChecked(AssertionError):
    """A sensitivity check that checked no pair: the bound was infinite (or None) on every pair it tried, or no
    neighbouring pair could be generated. It proves nothing, so it does not pass (``report``: the
    :class:`SensitivityReport`, ``checked`` = 0)."""

    def __init__(self, message: str, report: SensitivityReport):
        super().__init__(message)
        self.report = report


class SensitivityViolation(AssertionError):
    """A neighbouring pair moves the release by more than the claimed bound.

    Attributes: ``data``, ``neighbour`` (the shrunk pair), ``change`` (:class:`Change`),
    ``observed`` (the distance), ``bound`` and ``ratio`` = observed / bound.
    """

    def __init__(self, message: str, *, data: Any, neighbour: Any, change: Change, observed: float, bound: float):
        super().__init__(message)
        self.data, self.neighbour, self.change = data, neighbour, change
        self.observed, self.bound = observed, bound
        self.ratio = observed / bound if bound > 0 else math.inf


# ============================================================================= the search
@contextlib.contextmanager
def seed_only() -> Any:
    """Within this context hypothesis draws depend on the seed alone.

    Hypothesis (>= 6.131) mixes constants found in the loaded local modules into what it
    generates, so the same seed draws different examples depending on what has been imported
    (a test run, a script and the CLI would disagree). The kit's own searches empty that pool
    while they run, and the cache of constants per choice type that earlier draws filled from it (else a
    search run after the process' own hypothesis tests still draws their constants). (Internals of
    hypothesis: where they are missing, draws are left as they are.)
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover
        yield
        return
    original = getattr(providers, "_get_local_constants", None)
    empty = getattr(providers, "Constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if original is None or empty is None or cache is None:  # pragma: no cover
        yield
        return
    providers._get_local_constants = empty
    providers.CONSTANTS_CACHE = type(cache)(cache.max_size)
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE = cache


def _settings(examples: int, *, shrink: bool = True, seed: int | None = None):
    from hypothesis import HealthCheck, Phase, settings

    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    return settings(max_examples=examples, derandomize=seed is None, database=None, deadline=None, phases=phases,
                    suppress_health_check=list(HealthCheck))


def find_violation(strategy, ratio: Callable[[Any], float | None], *, examples: int, tol: float = 1e-9,
                   shrink: bool = True, seed: int | None = None) -> tuple[Any | None, float, int]:
    """Hypothesis search for an example with ratio(x) > 1 + tol (shrunk if found).

    Returns (example or None, worst ratio seen -- the example's own if found --, examples
    tried). ``ratio`` returns None for examples outside the claim's assumptions; +inf
    counts as a violation, -inf and NaN as outside. Deterministic: derandomised with no
    example database unless ``seed`` is given (then hypothesis is seeded with it), and a function of
    that seed alone (:func:`seed_only`: the same draws in a test run, a script and the CLI).

    Parameters
    ----------
    strategy : hypothesis strategy
        What to search.
    ratio : callable
        observed / claimed for one example (> 1: the claim fails on it).
    examples : int
        Hypothesis's ``max_examples``.
    tol : float
        Relative slack for floating-point error.
    shrink : bool
        Whether to shrink a found example.
    seed : int, optional
        Seed of the search (default: derandomised).
    """
    from hypothesis import find
    from hypothesis.errors import NoSuchExample, Unsatisfiable

    state = {"worst": -math.inf, "tried": 0}

    def condition(x: Any) -> bool:
        r = ratio(x)
        state["tried"] += 1
        if r is None or not math.isfinite(r) and r < 0:
            return False
        if not math.isfinite(r):
            return True
        state["worst"] = max(state["worst"], r)
        return r > 1 + tol

    try:
        with seed_only():
            found = find(strategy, condition, settings=_settings(examples, shrink=shrink, seed=seed),
                         random=None if seed is None else Random(seed))
    except (NoSuchExample, Unsatisfiable):
        return None, state["worst"], state["tried"]
    return found, float(ratio(found)), state["tried"]


# ============================================================================= distances
#: The norm each mechanism is calibrated to: Laplace and the geometric (discrete Laplace) mechanism add noise
#: scaled to the l1 sensitivity, the Gaussian mechanism to the l2 sensitivity, the exponential mechanism (and
#: report-noisy-max) to the largest change of any one score, the l-infinity sensitivity.
MECHANISM_NORMS = {"laplace": 1.0, "geometric": 1.0, "gaussian": 2.0, "exponential": math.inf}


def claim_norm(norm: Any, mechanism: Any, *, caller: str) -> float:
    """The order p of a sensitivity claim's norm, from ``norm`` or from the ``mechanism`` it calibrates.

    Raises TypeError when neither is given (a claim states its norm) and ValueError for an unknown value or a
    norm that disagrees with the mechanism's.

    Parameters
    ----------
    norm : 1, 2, inf, 'l1', 'l2', 'linf' or None
        The norm of the claim.
    mechanism : str or None
        A key of :data:`MECHANISM_NORMS` (``laplace`` -> l1, ``gaussian`` -> l2, ...).
    caller : str
        The function named in the error.
    """
    if norm is None and mechanism is None:
        raise TypeError(f"{caller}() needs norm= (1, 2, math.inf, 'l1', 'l2' or 'linf') or mechanism= (one of "
                        f"{_mechanism_choices()}): a sensitivity claim states its norm (Laplace needs l1, "
                        f"Gaussian l2)")
    if mechanism is None:
        return _norm_order(norm)
    if not isinstance(mechanism, str) or mechanism.lower() not in MECHANISM_NORMS:
        raise ValueError(f"mechanism must be one of {_mechanism_choices()}, got {mechanism!r}")
    implied = MECHANISM_NORMS[mechanism.lower()]
    if norm is not None and _norm_order(norm) != implied:
        raise ValueError(f"norm={norm!r} disagrees with mechanism={mechanism!r}, which is calibrated to the "
                         f"l{_norm_name(implied)} sensitivity: give one of them")
    return implied


def _mechanism_choices() -> str:
    return ", ".join(f"{name!r} (l{_norm_name(order)})" for name, order in MECHANISM_NORMS.items())


def _norm_order(norm: Any) -> float:
    names = {"l1": 1.0, "l2": 2.0, "linf": math.inf, "inf": math.inf}
    if isinstance(norm, str):
        if norm not in names:
            raise ValueError(f"norm must be 1, 2, inf or one of {sorted(names)}, got {norm!r}")
        return names[norm]
    if isinstance(norm, bool) or not isinstance(norm, (int, float)) or not norm >= 1:
        raise ValueError(f"norm must be a number >= 1 (1, 2, math.inf) or one of {sorted(names)}, got {norm!r}")
    return float(norm)


def distance(a: Any, b: Any, norm: Any) -> float:
    """||a - b|| in the l_p norm ``norm`` (1, 2, inf or 'l1', 'l2', 'linf') of two releases of one shape.

    Parameters
    ----------
    a, b : number or array
        The two releases.
    norm : number or str
        The norm.
    """
    if is_complex(a) or is_complex(b):
        raise ValueError("distance: the releases are complex; give real coordinates (the real and imaginary parts "
                         "side by side, np.concatenate([z.real, z.imag]))")
    x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"the release has shape {np.shape(a)} on one data set and {np.shape(b)} on its neighbour; "
                         f"a release must have one shape")
    return float(np.linalg.norm(x - y, ord=_norm_order(norm))) if x.size else 0.0


def _release(fn: Callable[[Any], Any], data: Any, name: str) -> np.ndarray:
    """``fn`` on read-only ``data`` (:func:`~dpfair_analysis.testing.runner.read_only`: a fresh dict of read-only
    views for a dict data set), so that no call changes the pair the next call and the report see; a complex or
    non-finite release is refused (numpy would keep a complex value's real part only: the check would test less
    than is released)."""
    try:
        value = fn(read_only(data))
        out = None if is_complex(value) else np.asarray(value, dtype=np.float64)
    except Exception as error:
        if writes_to_input(error):
            raise ValueError(f"release_fn writes to its input data ({type(error).__name__}: {error}) on {name} "
                             f"{describe_data(data)}: it gets the data set read-only, so that every call sees the "
                             f"pair the check reports; work on a copy (data = data.copy())") from error
        raise ValueError(f"release_fn raised {type(error).__name__}: {error} on {name} {describe_data(data)}") \
            from error
    if out is None:
        raise ValueError(f"release_fn returned a complex value on {name} {describe_data(data)}: a release must be "
                         f"real numbers; give the real and imaginary parts as coordinates of their own "
                         f"(np.concatenate([z.real, z.imag]))")
    if not np.isfinite(out).all():
        raise ValueError(f"release_fn returned a non-finite value on {name} {describe_data(data)}")
    return out


def _pair_strategy(relation: Relation, data: Any):
    """Pairs to search: neighbours of a fixed data set, of data sets drawn from a strategy, or (default)
    the relation's generated pairs together with its canary families."""
    from hypothesis import strategies as st

    from dpfair_analysis.testing import strategies as kit

    if data is None:
        try:
            return st.one_of(kit.canary_pairs(relation), kit.pairs(relation))
        except ValueError:  # no canary families (query vectors)
            return kit.pairs(relation)
    if isinstance(data, st.SearchStrategy):
        return kit.pairs(relation, data)
    base = as_dataset(data)
    return st.tuples(st.just(base), relation.neighbours(base))


@dataclass(frozen=True)
class SensitivityReport:
    """The largest change a search found: ``sensitivity`` = ||f(D) - f(D')||, its witness pair and
    :class:`Change`, the number of pairs ``tried`` and of those ``checked`` against a finite bound (a pair whose
    bound is infinite or None is tried, not checked)."""

    sensitivity: float
    data: Any
    neighbour: Any
    change: Change | None
    tried: int
    checked: int = 0


def check_bound(bound: Any) -> None:
    """A constant sensitivity bound: a real number > 0 -- a Python or numpy integer or float (``np.int64(100)``) --
    or a callable ``bound(D, D')``. Raises ValueError naming ``bound`` and what is allowed: NaN, an infinity (a
    constant claim of nothing checks nothing), 0 or less, a bool or a non-number.

    Parameters
    ----------
    bound : number or callable
        The claimed sensitivity.
    """
    if callable(bound):
        return
    if isinstance(bound, (bool, np.bool_)) or not isinstance(bound, numbers.Real) or not math.isfinite(bound) \
            or not bound > 0:
        raise ValueError(f"bound must be a finite number > 0 (int, float or a numpy scalar) or a callable "
                         f"bound(D, D'), got {bound!r}")


def pair_bound(bound: Callable[[Any, Any], Any], a: Any, b: Any) -> float | None:
    """``bound(D, D')`` for one pair: a number >= 0, or None where the claim says nothing (None or +inf: the pair
    is not checked). NaN, a negative number or a non-number is bad input: ValueError naming the pair.

    Parameters
    ----------
    bound : callable
        The claim's ``bound(D, D')``.
    a, b : data sets
        The pair.
    """
    value = bound(read_only(a), read_only(b))
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or math.isnan(value) or value < 0:
        raise ValueError(f"bound(D, D') returned {value!r} on D = {describe_data(a, 120)}, D' = "
                         f"{describe_data(b, 120)}: a bound must be a number >= 0, or inf / None where the claim "
                         f"says nothing about the pair")
    return None if math.isinf(value) else float(value)


def assert_sensitivity(release_fn: Callable[[Any], Any], bound: float | Callable[[Any, Any], float], *,
                       relation: Relation | str, norm: Any = None, mechanism: str | None = None, data: Any = None,
                       examples: int = 300, seed: int | None = None, tol: float = 1e-9) -> SensitivityReport:
    """Assert ||f(D) - f(D')||_p <= bound for every pair of neighbours the search finds.

    The norm is part of the claim and must be stated: ``norm=p`` or ``mechanism=`` (the mechanism the bound
    calibrates: ``"laplace"`` -> p = 1, ``"gaussian"`` -> p = 2, :data:`MECHANISM_NORMS`). Without either,
    TypeError.

    Raises :class:`SensitivityViolation` (an AssertionError) with a shrunk counterexample:
    the pair, the :class:`Change`, the observed distance and its ratio to the bound.
    Returns the worst pair seen (:class:`SensitivityReport`, with the pairs ``checked``) when none breaks the
    bound and at least one pair was checked; a check that checked none -- the bound infinite or None on every
    pair tried, or no pair generated -- proves nothing and raises :class:`NothingChecked` (an AssertionError).
    A NaN, negative or non-numeric bound (constant, or returned for a pair) is bad input: ValueError naming it.

    Parameters
    ----------
    release_fn : callable
        f(data) -> number or array: the release *before* noise (deterministic).
    bound : number or callable
        The claimed sensitivity, a finite number > 0 (int, float or a numpy scalar), or bound(D, D') for a
        data-dependent claim (e.g. 2 C / (n - 1)): a number >= 0 per pair, None or inf where the claim says
        nothing (the pair is not checked), never NaN.
    relation : Relation or str
        The neighbouring relation the claim is stated in.
    norm : 1, 2, inf, 'l1', 'l2' or 'linf'
        The norm of the claim: l1 for the Laplace mechanism, l2 for the Gaussian, inf for the exponential
        mechanism. Required unless ``mechanism`` names it.
    mechanism : str, optional
        The mechanism the bound calibrates, naming the norm: ``laplace`` or ``geometric`` (l1), ``gaussian``
        (l2), ``exponential`` (l-inf). Given with ``norm``, the two must agree.
    data : array, dict, hypothesis strategy or None
        A fixed data set (its neighbours are searched), a strategy of data sets, or None:
        :func:`~dpfair_analysis.testing.strategies.pairs` and the relation's canary families
        (dict data sets with ``X``, ``y``, ``group``). Data sets come in two formats, the
        release takes the same one: a numpy array with one record per row (axis 0), or a dict
        of equal-length arrays, one row per record (e.g. ``{"X": (n, k), "y": (n,), "group": (n,)}``;
        under ``attribute-change`` the ``group`` entry is the attribute that changes).
    examples : int
        Pairs to try (hypothesis ``max_examples``).
    seed : int, optional
        Seed of the search (default: derandomised, the same pairs every run).
    tol : float
        Relative slack for floating-point error.
    """
    __tracebackhide__ = True  # a failing pytest shows the test's line and the message, not the kit's source
    order = claim_norm(norm, mechanism, caller="assert_sensitivity")
    relation = make_relation(relation)
    check_bound(bound)
    fixed = (lambda a, b: float(bound)) if not callable(bound) else bound
    worst: dict[str, Any] = {"ratio": -math.inf, "pair": None, "checked": 0}

    def ratio(pair: tuple[Any, Any]) -> float | None:
        a, b = pair
        claimed = pair_bound(fixed, a, b)
        if claimed is None:
            return None
        worst["checked"] += 1
        observed = distance(_release(release_fn, a, "D"), _release(release_fn, b, "D'"), order)
        r = observed / claimed if claimed > 0 else (math.inf if observed > 0 else 0.0)
        if r > worst["ratio"]:
            worst.update(ratio=r, pair=pair)
        return r

    found, _, tried = find_violation(_pair_strategy(relation, data), ratio, examples=examples, tol=tol, seed=seed)
    if found is not None:
        a, b = found
        claimed = float(pair_bound(fixed, a, b))  # type: ignore[arg-type]  (found: a checked pair)
        observed = distance(_release(release_fn, a, "D"), _release(release_fn, b, "D'"), order)
        change = relation.check(a, b)
        raise SensitivityViolation(
            f"sensitivity claim violated under {relation.describe()}: ||f(D) - f(D')||_{_norm_name(order)} = "
            f"{observed:.6g} > bound {claimed:.6g} (ratio {observed / claimed if claimed else math.inf:.4g}); "
            f"change: {change.as_dict()}; D = {describe_data(a, 200)}; D' = {describe_data(b, 200)}",
            data=a, neighbour=b, change=change, observed=observed, bound=claimed)
    pair = worst["pair"]
    if pair is None:
        report = SensitivityReport(0.0, None, None, None, tried, 0)
        why = (f"the bound was infinite (or None) on every one of the {tried} pairs tried" if tried else
               "no neighbouring pair could be generated from the data")
        raise NothingChecked(f"sensitivity claim not checked under {relation.describe()}: {why}, so no pair was "
                             f"checked and the check proves nothing; give a finite bound where the claim holds, or "
                             f"data whose pairs it covers", report)
    a, b = pair
    return SensitivityReport(distance(_release(release_fn, a, "D"), _release(release_fn, b, "D'"), order), a, b,
                             relation.check(a, b), tried, worst["checked"])


def _norm_name(order: float) -> str:
    return "inf" if math.isinf(order) else f"{order:g}"


def find_sensitivity(release_fn: Callable[[Any], Any], *, relation: Relation | str, norm: Any = None,
                     mechanism: str | None = None, data: Any = None, examples: int = 300,
                     seed: int | None = None) -> SensitivityReport:
    """The largest ||f(D) - f(D')|| a targeted hypothesis search finds, and its witness pair.

    A lower bound on the true sensitivity (the search may miss the worst pair): use it to see
    what a bound must be at least, :func:`assert_sensitivity` to test a claimed one.

    Parameters
    ----------
    release_fn : callable
        f(data) -> number or array (deterministic).
    relation : Relation or str
        The neighbouring relation.
    norm : 1, 2, inf, 'l1', 'l2' or 'linf'
        The norm (required unless ``mechanism`` names it).
    mechanism : str, optional
        As in :func:`assert_sensitivity`: the mechanism whose norm to use.
    data : array, dict, hypothesis strategy or None
        As in :func:`assert_sensitivity`.
    examples : int
        Pairs to try.
    seed : int, optional
        Seed of the search (default: derandomised).
    """
    from hypothesis import Phase, given, settings, target
    from hypothesis import seed as hypothesis_seed

    order = claim_norm(norm, mechanism, caller="find_sensitivity")
    relation = make_relation(relation)
    best: dict[str, Any] = {"value": -math.inf, "pair": None, "tried": 0}

    def probe(pair: tuple[Any, Any]) -> None:
        a, b = pair
        value = distance(_release(release_fn, a, "D"), _release(release_fn, b, "D'"), order)
        best["tried"] += 1
        target(value)
        if value > best["value"]:
            best.update(value=value, pair=pair)

    test = given(_pair_strategy(relation, data))(probe)
    test = settings(_settings(examples, shrink=False, seed=seed), phases=(Phase.generate, Phase.target))(test)
    if seed is not None:
        test = hypothesis_seed(seed)(test)
    with seed_only():
        test()
    if best["pair"] is None:
        raise ValueError(f"find_sensitivity found no neighbouring pair under {relation.describe()}: the data "
                         f"has no neighbour whose records keep to its domain (e.g. replace-one on one record "
                         f"under domain='observed'); give more data, bounds=, or domain='any'")
    a, b = best["pair"]
    return SensitivityReport(float(best["value"]), a, b, relation.check(a, b), best["tried"], best["tried"])


__all__ = ["MECHANISM_NORMS", "NothingChecked", "SensitivityReport", "SensitivityViolation", "assert_sensitivity",
           "check_bound", "claim_norm",
           "distance", "find_sensitivity", "find_violation", "seed_only"]
