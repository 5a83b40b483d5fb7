"""Test statistics: functions of a mechanism's output that separate runs on D from runs on D'.

Any statistic gives a valid lower bound on epsilon (the bound is over the rejection region
"score > t", whatever the score); a better statistic gives a larger one. The audit tries a
family (:func:`dpfair_analysis.testing.families.statistic_family`) and keeps the best on selection
runs (:func:`dpfair_analysis.testing.auditing`):

``threshold`` (black box, nothing fitted)
    each output coordinate and the sum, maximum, minimum and norm of the output, each with
    both signs: the events "coordinate > t" / "coordinate < t" of StatDP's threshold tests;
    optionally (``Budget.increments``) the largest and smallest increment o_j - o_(j-1), where
    a running total such as a prefix sum keeps its strongest events.
``histogram`` (black box, fitted)
    the plug-in log-likelihood ratio log(p'(o) / p(o)) of a histogram: over the distinct
    outputs when the mechanism's outputs are discrete (up to 256 distinct values, e.g. a
    noisy argmax or SVT's answer vector), else over quantile bins of the coordinates that
    differ most and of the mean-difference direction (events that need not be tails).
``learned`` (black box, fitted)
    a logistic-regression classifier of "D or D'" on the output, its squares and indicators
    of frequent exact values -- DP-Sniper's learned statistic (Bichsel et al., S&P 2021)
    with a linear model.
``likelihood`` (white box)
    log p_D'(o) - log p_D(o) from the output densities the user gives
    (``log_density(outputs, data)``): the Neyman-Pearson statistic, the strongest there is.
``pattern`` (black box, fitted)
    for discrete pattern outputs such as a sparse vector's above/below sequence: the position of a
    symbol's first occurrence, its count, prefix patterns, per-position ratios and released values given
    the pattern; and, for an output made of blocks of different alphabets, the blocks' scores summed
    (:mod:`dpfair_analysis.testing.patterns`).

A :class:`Statistic` is fitted on runs of the two sides and returns a :class:`Fitted` score
function; fitted and unfitted statistics alike are then thresholded on runs they were not
fitted on.

Layouts: any fixed-shape numeric output -- continuous, discrete, mixed, constant or rare-valued
coordinates -- is scored by every statistic that applies; the others are *skipped with a
reason* (:meth:`Statistic.fit_or_skip` returns a :class:`Skipped`), which the audit reports
(``AuditResult.skipped``). A coordinate is *continuous* when no exact value covers >= 1% of the
runs, *discrete* (it has codes) when some do; a *constant* coordinate (one value on every fitting
run of both sides) gives no event that separates D from D', and its threshold tests are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Most distinct outputs treated as a discrete output space by the histogram statistic.
MAX_CATEGORIES = 256
#: Most coordinates given a statistic of their own (beyond: the most different ones).
MAX_COORDINATES = 32
STATISTIC_KINDS = ("threshold", "histogram", "learned", "likelihood", "pattern")


@dataclass(frozen=True)
class Fitted:
    """A score function ``score(outputs (n, d)) -> (n,)`` (larger = more like D') and its name."""

    name: str
    score: Callable[[np.ndarray], np.ndarray]
    kind: str


@dataclass(frozen=True)
class Skipped:
    """A statistic that does not apply to these outputs: its ``name``, ``kind`` and the ``reason``."""

    name: str
    reason: str
    kind: str


class Statistic:
    """A family member: fitted on runs of the two sides, it gives a :class:`Fitted` score or is skipped.

    Implement :meth:`fit_or_skip` (returning a :class:`Fitted`, or a :class:`Skipped` with the reason the
    statistic does not apply to these outputs) or, more simply, :meth:`fit` (returning a :class:`Fitted` or
    None: skipped, no reason given). The audit calls :meth:`fit_or_skip`.
    """

    kind = "statistic"
    needs_fit = False

    def describe(self) -> str:
        """The statistic's name before it is fitted (in the audit's report of skipped statistics)."""
        return type(self).__name__

    def fit(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | None:
        """The fitted score, or None when the statistic does not apply to these outputs.

        Parameters
        ----------
        out0, out1 : (n, d) arrays
            Runs on D and on D'.
        pair : (D, D')
            The two data sets.
        """
        if type(self).fit_or_skip is Statistic.fit_or_skip:
            raise NotImplementedError(f"{type(self).__name__} must implement fit or fit_or_skip")
        result = self.fit_or_skip(out0, out1, pair)
        return result if isinstance(result, Fitted) else None

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        """The fitted score, or a :class:`Skipped` saying why the statistic does not apply to these outputs.

        Parameters
        ----------
        out0, out1 : (n, d) arrays
            Runs on D and on D'.
        pair : (D, D')
            The two data sets.
        """
        if type(self).fit is Statistic.fit:
            raise NotImplementedError(f"{type(self).__name__} must implement fit or fit_or_skip")
        fitted = self.fit(out0, out1, pair)
        if fitted is None:
            return Skipped(self.describe(), "not applicable to these outputs (the statistic gave no reason)",
                           self.kind)
        return fitted

    def _skip(self, reason: str) -> Skipped:
        return Skipped(self.describe(), reason, self.kind)




# ============================================================================ threshold
_PROJECTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sum": lambda o: o.sum(axis=1),
    "max": lambda o: o.max(axis=1),
    "min": lambda o: o.min(axis=1),
    "norm": lambda o: _norm(o),
}


def _norm(o: np.ndarray) -> np.ndarray:
    """Per row, the l2 norm; a row whose squares overflow (outputs beyond ~1e154) is computed again in units of its
    largest entry, a power of 2 (the other rows -- every row of any well-scaled output -- as they were)."""
    with np.errstate(over="ignore"):
        norms = np.sqrt((o * o).sum(axis=1))
    over = np.isinf(norms) & np.isfinite(o).all(axis=1)
    if over.any():
        rows = o[over]
        unit = np.ldexp(1.0, np.frexp(np.max(np.abs(rows), axis=1))[1])[:, None]
        norms[over] = unit[:, 0] * np.sqrt(((rows / unit) ** 2).sum(axis=1))
    return norms
#: Projections of the increments o_j - o_(j-1) (o_0 = 0) of a vector output: events such as "every increment is
#: below t", where a running total's privacy loss lives (a prefix sum's or a continual counter's loss is a sum
#: over its increments, and its strongest events bound all of them at once).
_INCREMENT_PROJECTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "max increment": lambda o: np.diff(o, axis=1, prepend=0.0).max(axis=1),
    "min increment": lambda o: np.diff(o, axis=1, prepend=0.0).min(axis=1),
}
_ALL_PROJECTIONS = {**_PROJECTIONS, **_INCREMENT_PROJECTIONS}


@dataclass(frozen=True)
class Projection(Statistic):
    """``sign * coordinate j`` (``which`` an int) or ``sign * projection`` (``which`` a name of sum/max/min/norm or
    max/min increment)."""

    which: int | str
    sign: float
    kind = "threshold"

    def describe(self) -> str:
        prefix = "" if self.sign > 0 else "-"
        return f"{prefix}{self.which}(output)" if isinstance(self.which, str) else f"{prefix}output[{self.which}]"

    def fit(self, out0: np.ndarray | None, out1: np.ndarray | None, pair: tuple[Any, Any] | None) -> Fitted:
        """The projection (nothing is fitted: any outputs, or None, give the same score function)."""
        return self._projection()

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        """Skipped when the projection takes one value on every run of both sides (no event separates them)."""
        fitted = self._projection()
        if out0 is not None and out1 is not None and len(out0) + len(out1):
            values = np.concatenate([fitted.score(out0), fitted.score(out1)])
            if np.all(values == values[0]):
                what = f"output[{self.which}]" if isinstance(self.which, int) else f"{self.which}(output)"
                return self._skip(f"{what} is constant ({abs(values[0]):.6g} on every run of both sides): no "
                                  f"event of it separates D from D'")
        return fitted

    def _projection(self) -> Fitted:
        sign, which = self.sign, self.which
        prefix = "" if sign > 0 else "-"
        if isinstance(which, str):
            project = _ALL_PROJECTIONS[which]
            return Fitted(f"{prefix}{which}(output)", lambda o: sign * project(o), self.kind)
        return Fitted(f"{prefix}output[{which}]", lambda o: sign * o[:, which], self.kind)


def _spread(out0: np.ndarray, out1: np.ndarray) -> np.ndarray:
    """Per coordinate, |mean difference| in units of the pooled standard deviation."""
    with np.errstate(over="ignore", invalid="ignore"):  # outputs beyond ~1e154: an infinite spread ranks last
        scale = np.sqrt(0.5 * (out0.var(axis=0) + out1.var(axis=0))) + 1e-12
        return np.nan_to_num(np.abs(out1.mean(axis=0) - out0.mean(axis=0)) / scale)


def threshold_family(dimension: int, *, increments: bool = False) -> list[Statistic]:
    """Every coordinate (up to :data:`MAX_COORDINATES`) and the four projections, with both signs.

    Parameters
    ----------
    dimension : int
        Number of output coordinates.
    increments : bool
        Also the largest and smallest increment o_j - o_(j-1) of a vector output, with both signs.
    """
    members: list[Statistic] = []
    for j in range(min(dimension, MAX_COORDINATES)):
        members += [Projection(j, 1.0), Projection(j, -1.0)]
    if dimension > 1:
        names = [*_PROJECTIONS, *(_INCREMENT_PROJECTIONS if increments else ())]
        for name in names:
            members += [Projection(name, 1.0), Projection(name, -1.0)]
    return members


# ============================================================================ histogram
def _row_keys(outputs: np.ndarray) -> np.ndarray:
    """One hashable key per output row (exact values)."""
    contiguous = np.ascontiguousarray(outputs)
    return contiguous.view(np.dtype((np.void, contiguous.dtype.itemsize * contiguous.shape[1]))).ravel()


def _log_ratio_table(codes0: np.ndarray, codes1: np.ndarray, size: int) -> np.ndarray:
    """log((c1 + 1/2) / n1) - log((c0 + 1/2) / n0) per cell (add-half smoothing)."""
    c0 = np.bincount(codes0, minlength=size) + 0.5
    c1 = np.bincount(codes1, minlength=size) + 0.5
    return np.log(c1 / c1.sum()) - np.log(c0 / c0.sum())


@dataclass(frozen=True)
class DiscreteHistogram(Statistic):
    """Plug-in log-likelihood ratio over the distinct outputs (applies when there are at most
    :data:`MAX_CATEGORIES` of them in the fitting runs); unseen outputs score 0."""

    kind = "histogram"
    needs_fit = True

    def describe(self) -> str:
        return "histogram over the distinct outputs"

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        keys0, keys1 = _row_keys(out0), _row_keys(out1)
        values, codes = np.unique(np.concatenate([keys0, keys1]), return_inverse=True)
        if len(values) > MAX_CATEGORIES:
            return self._skip(f"more than {MAX_CATEGORIES} distinct outputs in the fitting runs (continuous values)")
        if len(values) < 2:
            return self._skip("one distinct output in the fitting runs (a constant output)")
        table = _log_ratio_table(codes[:len(keys0)], codes[len(keys0):], len(values))

        def score(outputs: np.ndarray) -> np.ndarray:
            keys = _row_keys(outputs)
            where = np.clip(np.searchsorted(values, keys), 0, len(values) - 1)
            return np.where(values[where] == keys, table[where], 0.0)

        return Fitted(f"histogram over {len(values)} distinct outputs", score, self.kind)


@dataclass(frozen=True)
class BinnedHistogram(Statistic):
    """Plug-in log-likelihood ratio over quantile bins of one coordinate (``which`` an int) or of the
    mean-difference direction (``which="direction"``), for continuous outputs."""

    which: int | str
    bins: int = 40
    kind = "histogram"
    needs_fit = True

    def describe(self) -> str:
        name = "mean-difference direction" if isinstance(self.which, str) else f"output[{self.which}]"
        return f"histogram of {name}"

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        if isinstance(self.which, str):
            w = out1.mean(axis=0) - out0.mean(axis=0)
            if not np.any(w):
                return self._skip("the two sides' mean outputs are equal on the fitting runs: no direction")
            scales = _overflow_scales(np.concatenate([out0, out1]))
            if scales is not None:  # huge outputs: o @ w would overflow; an exact power of 2 keeps the order
                w = w * float(np.ldexp(1.0, -np.frexp(np.max(np.abs(w)))[1]))
            project, name = (lambda o: o @ w), "mean-difference direction"
        else:
            j = self.which
            project, name = (lambda o: o[:, j]), f"output[{j}]"
        x0, x1 = project(out0), project(out1)
        both = np.concatenate([x0, x1])
        if len(both) == 0 or np.all(both == both[0]):
            return self._skip(f"{name} takes one value on the fitting runs: no bins to compare")
        edges = np.unique(np.quantile(both, np.linspace(0, 1, self.bins + 1)[1:-1]))
        if len(edges) == 0:
            return self._skip(f"{name} takes one value on the fitting runs: no bins to compare")
        table = _log_ratio_table(np.searchsorted(edges, x0), np.searchsorted(edges, x1), len(edges) + 1)
        return Fitted(f"histogram of {name} ({len(edges) + 1} bins)",
                      lambda o: table[np.searchsorted(edges, project(o))], self.kind)


def _frequent_codes(outputs: np.ndarray, share: float = 0.01, most: int = 10) -> list[np.ndarray]:
    """Per coordinate, the exact values taken by at least ``share`` of the rows (at most ``most``)."""
    codes = []
    for j in range(outputs.shape[1]):
        values, counts = np.unique(outputs[:, j], return_counts=True)
        codes.append(values[counts >= share * len(outputs)][:most])
    return codes


@dataclass(frozen=True)
class MixedHistogram(Statistic):
    """Plug-in log-likelihood ratio over cells (which special code each coordinate shows, quantile bin of the sum of
    the coordinates that show none) -- for outputs mixing codes and numbers, like SVT releasing a noisy answer
    at the position where it stops. Applies when the fitting runs fall in at most :data:`MAX_CATEGORIES` x 4
    cells."""

    bins: int = 16
    kind = "histogram"
    needs_fit = True

    def describe(self) -> str:
        return "histogram over codes x value bins"

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        """Coordinates without a frequent exact value (continuous ones) add to the binned sum; coordinates with
        codes (discrete or mixed ones) give the cell's signature."""
        both = np.concatenate([out0, out1])
        codes = _frequent_codes(both)
        if not any(len(c) for c in codes):
            return self._skip("no coordinate has an exact value in >= 1% of the fitting runs (no codes: a "
                              "continuous output)")

        def split(o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            signature = np.zeros((len(o), len(codes)))
            rest = np.zeros(len(o))
            for j, special in enumerate(codes):
                if not len(special):  # a continuous coordinate: no code, its value goes to the sum
                    signature[:, j] = -1
                    rest += o[:, j]
                    continue
                hits = o[:, j, None] == special[None, :]
                found = hits.any(axis=1)
                signature[:, j] = np.where(found, hits.argmax(axis=1), -1)
                rest += np.where(found, 0.0, o[:, j])
            return signature, rest

        signature, rest = split(both)
        edges = np.unique(np.quantile(rest, np.linspace(0, 1, self.bins + 1)[1:-1]))
        keys = np.concatenate([signature, np.searchsorted(edges, rest)[:, None]], axis=1)
        cells, codes_all = np.unique(_row_keys(keys), return_inverse=True)
        if len(cells) > 4 * MAX_CATEGORIES:
            return self._skip(f"the fitting runs fall in {len(cells)} cells, more than {4 * MAX_CATEGORIES}")
        if len(cells) < 2:
            return self._skip("the fitting runs fall in one cell (a constant output)")
        table = _log_ratio_table(codes_all[:len(out0)], codes_all[len(out0):], len(cells))

        def score(o: np.ndarray) -> np.ndarray:
            sig, r = split(o)
            k = _row_keys(np.concatenate([sig, np.searchsorted(edges, r)[:, None]], axis=1))
            where = np.clip(np.searchsorted(cells, k), 0, len(cells) - 1)
            return np.where(cells[where] == k, table[where], 0.0)

        return Fitted(f"histogram over {len(cells)} cells (codes x value bins)", score, self.kind)


def histogram_family(out0: np.ndarray, out1: np.ndarray) -> list[Statistic]:
    """A discrete histogram, binned histograms of the (up to 8) coordinates whose means differ most, and of
    the mean-difference direction.

    Parameters
    ----------
    out0, out1 : (n, d) arrays
        Runs on D and D' (to pick the coordinates).
    """
    members: list[Statistic] = [DiscreteHistogram(), MixedHistogram()]
    order = np.argsort(-_spread(out0, out1), kind="stable")[:8]
    members += [BinnedHistogram(int(j)) for j in order]
    if out0.shape[1] > 1:
        members.append(BinnedHistogram("direction"))
    return members


# ============================================================================ learned
#: Largest number of runs per side a learned statistic is fitted on: rare events need many (SVT34Parallel's
#: witness event, ~1% of runs, separates beyond its claim only from ~200,000; 50,000 fell short), and a fit
#: stays at a few seconds.
MAX_FIT_ROWS = 200_000


def _features(outputs: np.ndarray, codes: list[np.ndarray]) -> np.ndarray:
    """Per coordinate j: an indicator of each of its frequent exact values ``codes[j]`` (special outcomes such as
    SVT's "below" or "aborted", or the values of a discrete output), the value with those replaced by 0, and
    its square (DP-Sniper's flag features, plus squares for changes of spread). Column-major: each feature is
    written in one contiguous pass."""
    features = np.empty((len(outputs), sum(len(special) + 2 for special in codes)), order="F")
    k = 0
    for j, special in enumerate(codes):
        column = outputs[:, j]
        value = features[:, k + len(special)]
        value[:] = column
        for code in special:
            hit = column == code
            features[:, k] = hit
            value[hit] = 0.0
            k += 1
        with np.errstate(over="ignore"):  # a value beyond ~1e154 that the fit did not rescale: an infinite square
            np.multiply(value, value, out=features[:, k + 1])
        k += 2
    return features


#: Largest magnitude a coordinate may reach before :class:`Learned` rescales it: the fit standardises the squares
#: of the values, whose spread takes their fourth powers, which overflow from ~1e77; below 1e50 nothing changes.
LARGEST_UNSCALED = 1e50


def _overflow_scales(outputs: np.ndarray) -> np.ndarray | None:
    """Per coordinate, the power of 2 that brings its largest magnitude into [0.5, 1) if that magnitude exceeds
    :data:`LARGEST_UNSCALED` (1 for the others), or None when no coordinate does (the features are computed on
    the values as they are). Powers of 2 are exact: equal values stay equal (the frequent codes) and the order of
    the values is kept."""
    largest = np.max(np.abs(outputs), axis=0) if len(outputs) else np.zeros(outputs.shape[1])
    huge = largest > LARGEST_UNSCALED
    if not huge.any():
        return None
    return np.where(huge, np.ldexp(1.0, -np.frexp(largest)[1]), 1.0)


@dataclass(frozen=True)
class Learned(Statistic):
    """Logistic regression of the side (D = 0, D' = 1) on features of the output (:func:`_features`): DP-Sniper's
    learned statistic with a linear model; the frequent values are those in at least 1% of the fitting runs
    (at most 10 per coordinate). A coordinate larger than :data:`LARGEST_UNSCALED` in magnitude is first divided
    by a power of 2 (:func:`_overflow_scales`), so that its square and the square's spread stay finite (a correct
    mechanism reporting in units of 1e-160 crashed the fit); coordinates below it are used as they are."""

    regularisation: float = 1.0
    kind = "learned"
    needs_fit = True

    def describe(self) -> str:
        return "logistic regression on the output"

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        from sklearn.linear_model import LogisticRegression

        out0, out1 = out0[:MAX_FIT_ROWS], out1[:MAX_FIT_ROWS]
        both = np.concatenate([out0, out1])[:, :4 * MAX_COORDINATES]
        scales = _overflow_scales(both)
        if scales is not None:
            both = both * scales
        codes = _frequent_codes(both)
        X = _features(both, codes)
        if not np.any(X != X[:1]):
            return self._skip("every feature of the output is constant on the fitting runs")
        if not np.isfinite(X).all():  # (not reached after the rescaling: a last guard, never a crash of the audit)
            return self._skip("the output's features are not finite numbers (values too large to square)")
        mean, scale = X.mean(axis=0), X.std(axis=0) + 1e-12
        labels = np.r_[np.zeros(len(out0)), np.ones(len(out1))]
        model = LogisticRegression(C=self.regularisation, max_iter=200)
        model.fit((X - mean) / scale, labels)
        weights = model.coef_.ravel() / scale
        intercept = float(model.intercept_[0] - weights @ mean)
        width = both.shape[1]
        if scales is None:
            return Fitted("logistic regression on the output",
                          lambda o: _features(o[:, :width], codes) @ weights + intercept, self.kind)
        return Fitted("logistic regression on the output",
                      lambda o: _features(o[:, :width] * scales, codes) @ weights + intercept, self.kind)


# ============================================================================ white box
@dataclass(frozen=True)
class Likelihood(Statistic):
    """log p_D'(o) - log p_D(o) with the user's ``log_density(outputs, data) -> (n,)`` (white box)."""

    log_density: Callable[[np.ndarray, Any], Any]
    shape: tuple[int, ...] = ()
    kind = "likelihood"

    def describe(self) -> str:
        return "log-likelihood ratio (white box)"

    def fit(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted:
        data, neighbour = pair
        shape = self.shape

        def score(outputs: np.ndarray) -> np.ndarray:
            shaped = outputs.reshape((len(outputs), *shape))
            values = (np.asarray(self.log_density(shaped, neighbour), dtype=np.float64)
                      - np.asarray(self.log_density(shaped, data), dtype=np.float64))
            if values.shape != (len(outputs),):
                raise ValueError(f"log_density(outputs, data) must return one log-density per output, shape "
                                 f"({len(outputs)},), got {values.shape}")
            return np.nan_to_num(values, nan=0.0, posinf=1e300, neginf=-1e300)

        return Fitted("log-likelihood ratio (white box)", score, self.kind)


def check_kinds(statistics: Any, *, log_density: Callable | None) -> tuple[str, ...]:
    """``statistics`` as a tuple of kinds ("auto": all that apply). Raises ValueError naming what is allowed.

    Parameters
    ----------
    statistics : str, Statistic or sequence of them
        "auto", or kinds among :data:`STATISTIC_KINDS` and :class:`Statistic` instances (a user's own statistic,
        searched beside the kit's: the selection pays for it as for any other).
    log_density : callable or None
        Whether the white-box statistic is possible.
    """
    if statistics == "auto":
        kinds = ("threshold", "histogram", "learned", "pattern") + (("likelihood",) if log_density is not None
                                                                    else ())
        return kinds
    kinds = (statistics,) if isinstance(statistics, (str, Statistic)) else tuple(statistics)
    unknown = [k for k in kinds if not isinstance(k, Statistic) and k not in STATISTIC_KINDS]
    if unknown or not kinds:
        raise ValueError(f"statistics must be 'auto', or some of {list(STATISTIC_KINDS)} and Statistic instances "
                         f"(a user's own statistic), got {statistics!r}")
    if "likelihood" in kinds and log_density is None:
        raise ValueError("statistics='likelihood' needs log_density=(outputs, data) -> log-densities")
    return kinds


__all__ = [
    "STATISTIC_KINDS",
    "BinnedHistogram",
    "DiscreteHistogram",
    "Fitted",
    "Learned",
    "Likelihood",
    "MixedHistogram",
    "Projection",
    "Skipped",
    "Statistic",
    "check_kinds",
]
