"""Statistics of discrete pattern outputs: a sparse vector's above/below sequence, possibly with released values.

A sparse-vector mechanism (Lyu, Su & Li, VLDB 2017) answers a sequence of queries with a pattern -- above (⊤),
below (⊥), not answered after the cutoff -- and some variants release the noisy answer in place of ⊤. Its
privacy loss lives in the pattern's *shape*: where the first ⊤ falls, how many there are, which prefix the
answers take; the generic statistics (:mod:`.scores`) see coordinates and sums and miss these events when runs
are few (a user's unbatched function). This module gives such outputs statistics of their own.

Symbols
-------
An output o in R^d is read as a sequence of symbols: the *codes* -- exact values that cover at least
:data:`CODE_SHARE` of all entries (up to :data:`MAX_CODES`, found on the selection runs) -- and one symbol
*value* for every other entry (a released number). The encoding is the user's: 1/0/-1, True/False, any
finite codes; nothing says which code is ⊤, so every symbol gets its statistics.

Statistics (all fitted: each is a plug-in log-likelihood ratio over a small set of cells,
log((c1(k) + 1/2) / n1) - log((c0(k) + 1/2) / n0) for cell k with counts c0, c1 on the two sides; thresholding
it on other runs picks the set of cells whose ratio is largest -- the event "the output falls in one of these
cells"):

``first s`` / ``count s``
    the cell is the position of the first entry equal to symbol s (d when none) / the number of such entries:
    for an SVT with cutoff 1 the first ⊤'s position is the whole output, and the witness event of the
    published testers ("first ⊤ at query 6") is one cell.
``prefix k``
    the cell is the first k symbols (the largest k with at most :data:`~.scores.MAX_CATEGORIES` distinct
    prefixes on the fitting runs, and the whole sequence when it qualifies): the events "the first k answers
    equal a given pattern".
``per position``
    sum_j log r_j(symbol_j), r_j the ratio of symbol frequencies at position j (a naive-Bayes score): the
    answers of an SVT without cutoff are independent given the threshold noise, and this score orders the 2^d
    patterns that no histogram can hold.
``values given pattern``
    a logistic regression on (pattern, sum of the released values): per pattern a log-ratio quadratic in the
    value, for the variants that release noisy answers (applies when a *value* symbol occurs).
``first value``
    the cell is (position k of the first released value, its quantile bin among :data:`VALUE_BINS` at that
    position); the plug-in ratio of each position is made monotone in the value (a weighted isotonic fit,
    increasing or decreasing, whichever fits its bins better): the events "first ⊤ at query k with a released
    value below (above) t_k", unions over k -- the likelihood-ratio events of a sparse vector that releases
    its noisy answer (SVT3: first ⊤ at query 6 with a low value), found on a tenth of the runs the
    unconstrained histogram needs (:class:`FirstValue`).

``blocks' scores summed``
    an output whose coordinates change alphabet -- two sparse vectors released side by side, a noisy sum beside
    per-group counts -- is split into blocks (:func:`output_blocks`), each block scored alone by its best
    pattern or learned statistic, and the scores summed (:class:`BlockSum`): for independent blocks the
    likelihood ratio is the product of the blocks', and the strong events are products of each block's events,
    too rare for a classifier of the whole output to learn from a plain function's runs.

DP-Sniper's probability-threshold rule (Bichsel et al., S&P 2021: threshold the classifier's posterior so that
the event has probability >= c) is :class:`~dpfair_analysis.testing.auditing.Budget`'s ``min_event``, applied to
these scores like to every other one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfair_analysis.testing.scores import (
    LARGEST_UNSCALED,
    MAX_CATEGORIES,
    Fitted,
    Learned,
    Skipped,
    Statistic,
    _log_ratio_table,
    _row_keys,
)

#: Least share of all output entries an exact value must cover to be a code (a symbol of its own).
CODE_SHARE = 0.01
#: Most codes (the most frequent).
MAX_CODES = 8
#: Most patterns given parameters of their own by ``values given pattern`` (the rest share them).
MAX_PATTERNS = 16
#: Symbol index of an entry that is no code (a released value).
VALUE = -1
#: Most runs per side the logistic regression of ``values given pattern`` is fitted on (seconds, not tens).
MAX_FIT_ROWS = 50_000
#: Quantile bins of the released value at each position of :class:`FirstValue`.
VALUE_BINS = 16
#: Most blocks :class:`BlockSum` sums (an output that splits into more gets none).
MAX_BLOCKS = 4
#: Most runs per side on which :class:`BlockSum` fits, and as many on which it compares, each block's candidate
#: scores (the chosen one is then fitted on all the fitting runs): a plain function's selection fits on ~167,000.
CHOICE_ROWS = 50_000


def find_codes(outputs: np.ndarray, *, share: float = CODE_SHARE, most: int = MAX_CODES) -> tuple[float, ...]:
    """The exact values covering at least ``share`` of the entries of ``outputs`` (n, d), most frequent first.

    Parameters
    ----------
    outputs : (n, d) array
        Runs (both sides pooled).
    share : float
        Least share of the n d entries.
    most : int
        Most codes returned.
    """
    values, counts = np.unique(outputs, return_counts=True)
    keep = counts >= share * outputs.size
    order = np.argsort(-counts[keep], kind="stable")[:most]
    return tuple(float(v) for v in values[keep][order])


def symbols(outputs: np.ndarray, codes: tuple[float, ...]) -> np.ndarray:
    """Each entry's symbol: the index of its code in ``codes``, or :data:`VALUE` (-1) for any other value.

    Parameters
    ----------
    outputs : (n, d) array
        Outputs, one run a row.
    codes : tuple of float
        The special values (e.g. a sparse vector's below/above codes), in symbol order.
    """
    out = np.full(outputs.shape, VALUE, dtype=np.int64)
    for k, code in enumerate(codes):
        out[outputs == code] = k
    return out


def _pattern_keys(sym: np.ndarray, codes: tuple[float, ...]) -> np.ndarray:
    """One sortable key per row of symbols: an integer in base (codes + 1) when it fits 62 bits, else the raw bytes."""
    base = len(codes) + 1
    if sym.shape[1] * np.log2(base) <= 62:
        return (sym + 1).astype(np.int64) @ (base ** np.arange(sym.shape[1] - 1, -1, -1, dtype=np.int64))
    return _row_keys(sym)


def _describe_symbol(symbol: int, codes: tuple[float, ...]) -> str:
    if symbol == VALUE:
        return "a released value"
    return f"{codes[symbol]:g}" if 0 <= symbol < len(codes) else f"code {symbol}"


def _pattern_reason(outputs: np.ndarray, codes: tuple[float, ...]) -> str | None:
    """Why ``outputs`` are no pattern output, or None when they are one."""
    if outputs.ndim != 2 or outputs.shape[1] < 2:
        return "one output coordinate: no sequence of answers (the discrete histogram scores it)"
    if not codes:
        return (f"no exact value covers >= {CODE_SHARE:.0%} of the output entries: not a pattern of codes "
                f"(a continuous output)")
    if len(np.unique(symbols(outputs, codes))) < 2:
        return "every entry is the same symbol: a constant pattern"
    return None


@dataclass(frozen=True)
class PatternSummary(Statistic):
    """The plug-in log-likelihood ratio of one summary of symbol ``symbol``'s occurrences: ``which`` = "first"
    (position of its first occurrence, d when none) or "count" (number of occurrences). ``symbol`` indexes
    ``codes`` (:data:`VALUE`: the released values)."""

    which: str
    symbol: int
    codes: tuple[float, ...]
    kind = "pattern"
    needs_fit = True

    def describe(self) -> str:
        name = {"first": "position of the first", "count": "number of"}[self.which]
        return f"{name} {_describe_symbol(self.symbol, self.codes)} in the pattern"

    def _cells(self, outputs: np.ndarray) -> np.ndarray:
        hit = symbols(outputs, self.codes) == self.symbol
        if self.which == "count":
            return hit.sum(axis=1)
        return np.where(hit.any(axis=1), hit.argmax(axis=1), outputs.shape[1])

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        both = np.concatenate([out0, out1])
        reason = _pattern_reason(both, self.codes)
        if reason:
            return self._skip(reason)
        size = both.shape[1] + 1
        c0, c1 = self._cells(out0), self._cells(out1)
        pooled = np.concatenate([c0, c1])
        if np.all(pooled == pooled[0]):
            return self._skip(f"the {self.describe()} is the same on every fitting run")
        table = _log_ratio_table(c0, c1, size)
        return Fitted(self.describe(), lambda o: table[self._cells(o)], self.kind)


@dataclass(frozen=True)
class PatternPrefix(Statistic):
    """The plug-in log-likelihood ratio over the distinct first-``length`` symbol prefixes (``length`` None: the
    longest prefix with at most :data:`~.scores.MAX_CATEGORIES` distinct values on the fitting runs)."""

    codes: tuple[float, ...]
    length: int | None = None
    kind = "pattern"
    needs_fit = True

    def describe(self) -> str:
        return "pattern prefix" if self.length is None else f"first {self.length} answers' pattern"

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        both = np.concatenate([out0, out1])
        reason = _pattern_reason(both, self.codes)
        if reason:
            return self._skip(reason)
        sym = symbols(both, self.codes)
        length = self.length
        if length is None:  # the prefixes as integers in base (codes + 1), one digit per answer, grown one by one
            length, key, base = 0, np.zeros(len(sym), dtype=np.int64), len(self.codes) + 1
            for k in range(min(sym.shape[1], int(62 // np.log2(base + 1)))):
                key = key * base + (sym[:, k] + 1)
                if len(np.unique(key)) > MAX_CATEGORIES:
                    break
                length = k + 1
        length = min(length, sym.shape[1])
        if length < 1:
            return self._skip(f"more than {MAX_CATEGORIES} distinct first answers")
        values, cells = np.unique(_pattern_keys(sym[:, :length], self.codes), return_inverse=True)
        if len(values) > MAX_CATEGORIES:
            return self._skip(f"more than {MAX_CATEGORIES} distinct prefixes of length {length}")
        if len(values) < 2:
            return self._skip(f"one prefix of length {length} on every fitting run")
        table = _log_ratio_table(cells[:len(out0)], cells[len(out0):], len(values))
        codes = self.codes

        def score(o: np.ndarray) -> np.ndarray:
            keys = _pattern_keys(symbols(o, codes)[:, :length], codes)
            where = np.clip(np.searchsorted(values, keys), 0, len(values) - 1)
            return np.where(values[where] == keys, table[where], 0.0)

        return Fitted(f"pattern of the first {length} answers ({len(values)} prefixes)", score, self.kind)


@dataclass(frozen=True)
class PerPosition(Statistic):
    """sum_j log r_j(symbol_j): the ratio of each position's symbol frequencies on the two sides, summed (a
    naive-Bayes log-likelihood ratio over the whole pattern)."""

    codes: tuple[float, ...]
    kind = "pattern"
    needs_fit = True

    def describe(self) -> str:
        return "per-position symbol ratios, summed"

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        both = np.concatenate([out0, out1])
        reason = _pattern_reason(both, self.codes)
        if reason:
            return self._skip(reason)
        size = len(self.codes) + 1  # symbol + 1: VALUE (-1) -> 0
        d = both.shape[1]
        s0, s1 = symbols(out0, self.codes) + 1, symbols(out1, self.codes) + 1
        tables = np.stack([_log_ratio_table(s0[:, j], s1[:, j], size) for j in range(d)])
        codes = self.codes
        columns = np.arange(d)

        def score(o: np.ndarray) -> np.ndarray:
            return tables[columns, symbols(o, codes) + 1].sum(axis=1)

        return Fitted(self.describe(), score, self.kind)


@dataclass(frozen=True)
class ValuesGivenPattern(Statistic):
    """A logistic regression of the side on (pattern, released values): released numbers conditioned on the pattern.

    With p the symbol pattern (the :data:`MAX_PATTERNS` most frequent get an indicator each, the rest share one) and
    v the sum of the released values, standardised, the score is a_p + b_p v + c_p v^2: per pattern, a log-ratio
    quadratic in the value, so thresholding it gives events "pattern p and v in a range of its own" -- e.g. a
    sparse vector that releases its noisy answer, first above at query 6 with a low value (its threshold noise
    was low, and the answers below it say most). Fitted like :class:`~dpfair_analysis.testing.scores.Learned`
    (L2-regularised, C = 1)."""

    codes: tuple[float, ...]
    kind = "pattern"
    needs_fit = True

    def describe(self) -> str:
        return "released values given the pattern"

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        from sklearn.linear_model import LogisticRegression

        both = np.concatenate([out0, out1])
        reason = _pattern_reason(both, self.codes)
        if reason:
            return self._skip(reason)
        sym = symbols(both, self.codes)
        if not np.any(sym == VALUE):
            return self._skip("no released values (every entry is a code)")
        keys, counts = np.unique(_pattern_keys(sym, self.codes), return_counts=True)
        known = np.sort(keys[np.argsort(-counts, kind="stable")[:MAX_PATTERNS]])  # the most frequent patterns
        codes = self.codes
        sums = np.where(sym == VALUE, both, 0.0).sum(axis=1)
        # released values beyond LARGEST_UNSCALED in magnitude: standardised after an exact power-of-2 rescaling, as
        # their spread would overflow (1 otherwise: the values as they are)
        largest = float(np.max(np.abs(sums))) if len(sums) else 0.0
        unit = float(np.ldexp(1.0, -np.frexp(largest)[1])) if largest > LARGEST_UNSCALED else 1.0
        if not math.isfinite(largest):
            return self._skip("the released values sum to an infinity (values too large to standardise)")
        centre, spread = float(np.mean(sums * unit)), float(np.std(sums * unit)) + 1e-12

        def features(o: np.ndarray) -> np.ndarray:
            s = symbols(o, codes)
            k = _pattern_keys(s, codes)
            where = np.clip(np.searchsorted(known, k), 0, len(known) - 1)
            ids = np.where(known[where] == k, where, len(known))
            v = (np.where(s == VALUE, o, 0.0).sum(axis=1) * unit - centre) / spread
            onehot = np.zeros((len(o), len(known) + 1))
            onehot[np.arange(len(o)), ids] = 1.0
            return np.concatenate([onehot, onehot * v[:, None], onehot * (v * v)[:, None]], axis=1)

        fit0, fit1 = out0[:MAX_FIT_ROWS], out1[:MAX_FIT_ROWS]
        labels = np.r_[np.zeros(len(fit0)), np.ones(len(fit1))]
        model = LogisticRegression(C=1.0, max_iter=200)
        model.fit(features(np.concatenate([fit0, fit1])), labels)
        weights, intercept = model.coef_.ravel(), float(model.intercept_[0])
        return Fitted(f"released values given the pattern ({len(known)} patterns, logistic)",
                      lambda o: features(o) @ weights + intercept, self.kind)


def _increasing(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-decreasing fit of ``values`` (pool adjacent violators: a block's value is
    its weighted mean, and blocks merge while a later one is lower)."""
    blocks: list[list[float]] = []  # [weighted mean, weight, length]
    for value, weight in zip(values.tolist(), weights.tolist()):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, w1, n1), (m2, w2, n2) = blocks.pop(-2), blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.repeat([b[0] for b in blocks], [b[2] for b in blocks])


def _monotone(ratios: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted least-squares monotone fit of ``ratios`` (increasing or decreasing, the better of the two)."""
    fits = [_increasing(ratios, weights), -_increasing(-ratios, weights)]
    return min(fits, key=lambda fit: float(np.sum(weights * (fit - ratios) ** 2)))


@dataclass(frozen=True)
class FirstValue(Statistic):
    """The released value at the first ⊤, by position, with a likelihood ratio monotone in the value.

    Cell (k, b): k the position of the first released value (d when none), b the quantile bin of that value
    among ``bins`` bins of position k (edges from the fitting runs of both sides). With c0, c1 the cells'
    counts on the two sides, the raw ratio r(k, b) = log((c1 + 1/2) / n1) - log((c0 + 1/2) / n0) is replaced,
    position by position, by its weighted (c0 + c1) isotonic fit in b, increasing or decreasing: a noisy
    value's density ratio is monotone in the value for log-concave noise (Laplace, Gaussian), and so are the
    ratios of the threshold's posterior that a released value carries. Thresholding the score gives the
    unions of events "first ⊤ at k and value < t_k" (or > t_k). The monotone fit pools a position's bins:
    the plug-in table alone needs ~10x the runs to rank the rare cells where SVT3's loss lives."""

    codes: tuple[float, ...]
    bins: int = VALUE_BINS
    kind = "pattern"
    needs_fit = True

    def describe(self) -> str:
        return "released value at the first ⊤, by position"

    def _first(self, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position of the first released value, d when none; that value, 0 when none) per row."""
        d = outputs.shape[1]
        hit = symbols(outputs, self.codes) == VALUE
        first = np.where(hit.any(axis=1), hit.argmax(axis=1), d)
        value = np.where(first < d, outputs[np.arange(len(outputs)), np.minimum(first, d - 1)], 0.0)
        return first, value

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        both = np.concatenate([out0, out1])
        reason = _pattern_reason(both, self.codes)
        if reason:
            return self._skip(reason)
        d, bins = both.shape[1], self.bins
        first, value = self._first(both)
        if np.all(first == d):
            return self._skip("no released values (every entry is a code)")
        inner = np.linspace(0, 1, bins + 1)[1:-1]
        edges = [np.unique(np.quantile(value[first == k], inner)) if np.any(first == k) else np.zeros(0)
                 for k in range(d)]

        def cells(o: np.ndarray) -> np.ndarray:
            k, v = self._first(o)
            b = np.zeros(len(o), dtype=np.int64)
            for position in range(d):
                at = k == position
                b[at] = np.searchsorted(edges[position], v[at])
            return k * bins + b

        c0 = np.bincount(cells(out0), minlength=(d + 1) * bins) + 0.5
        c1 = np.bincount(cells(out1), minlength=(d + 1) * bins) + 0.5
        table = np.log(c1 / c1.sum()) - np.log(c0 / c0.sum())
        for position in range(d):
            used = slice(position * bins, position * bins + len(edges[position]) + 1)
            table[used] = _monotone(table[used], c0[used] + c1[used])
        return Fitted(f"released value at the first ⊤, by position ({bins} bins, monotone ratio)",
                      lambda o: table[cells(o)], self.kind)


def output_blocks(outputs: np.ndarray) -> list[tuple[int, int]]:
    """The output's blocks: maximal runs of adjacent coordinates whose code sets overlap ([lo, hi) column ranges).

    Coordinate j's codes are the exact values covering at least :data:`CODE_SHARE` of its entries
    (:func:`find_codes` on the column). Coordinates j and j + 1 share a block when their codes intersect or neither
    has any (two continuous coordinates); a change of alphabet starts a block: a sparse vector's values and
    -1000/-2000 beside another's 1/0/-1, a noisy sum beside per-group counts.

    Parameters
    ----------
    outputs : (n, d) array
        Runs (both sides pooled).
    """
    codes = [set(find_codes(outputs[:, j:j + 1])) for j in range(outputs.shape[1])]
    starts = [0] + [j for j in range(1, len(codes)) if not (codes[j] & codes[j - 1] or not (codes[j] or codes[j - 1]))]
    return list(zip(starts, starts[1:] + [len(codes)]))


def _mean_log_likelihood(fitted: Fitted, out0: np.ndarray, out1: np.ndarray) -> float:
    """How well a score predicts the side, read as a log-likelihood ratio: the mean log-probability it gives the
    true side, (E_0[log(1 - s(o))] + E_1[log s(o)]) / 2 with s the logistic of the score (-log 2 for a score of 0)."""
    return float(np.mean(-np.logaddexp(0.0, fitted.score(out0))) + np.mean(-np.logaddexp(0.0, -fitted.score(out1)))) / 2


@dataclass(frozen=True)
class BlockSum(Statistic):
    """Independent blocks, their log-likelihood ratios summed: sum_b L_b(o_b) over the output's blocks
    (:func:`output_blocks`), L_b the best score of block b alone.

    When the blocks are independent given the data (two mechanisms released side by side, each with its own
    noise), the output's likelihood ratio is the product of the blocks' and the strongest events are products of
    each block's: SVT3 beside SVT4, "the first released value at query 6 is low *and* the first ⊤ of the other
    is at query 6" -- a log-ratio of ~0.13 + ~0.13 on ~1% of the runs, which a classifier of the whole output
    must learn from its rare co-occurrences (DP-Sniper trains on 10.7 M runs), while each block's own score is
    fitted on all runs. Any score gives a valid test; this one is strongest when the blocks are independent.

    Each block's candidates are the pattern statistics of the block (:func:`pattern_family`) and
    :class:`~dpfair_analysis.testing.scores.Learned`; each is fitted on the first half of the fitting runs (at most
    :data:`CHOICE_ROWS` a side), the one with the largest mean log-likelihood of the side on as many others
    (:func:`_mean_log_likelihood`: the scores are log-ratio estimates) is fitted again on all of them."""

    blocks: tuple[tuple[int, int], ...]
    kind = "pattern"
    needs_fit = True

    def describe(self) -> str:
        return f"blocks' scores summed ({len(self.blocks)} blocks)"

    def fit_or_skip(self, out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any]) -> Fitted | Skipped:
        if len(self.blocks) < 2:
            return self._skip("the output is one block (one alphabet of codes, or all continuous)")
        if len(self.blocks) > MAX_BLOCKS:
            return self._skip(f"more than {MAX_BLOCKS} blocks")
        half0, half1 = min(len(out0) // 2, CHOICE_ROWS), min(len(out1) // 2, CHOICE_ROWS)
        parts = []
        for lo, hi in self.blocks:
            b0, b1 = out0[:, lo:hi], out1[:, lo:hi]
            best, best_fit = None, -np.inf
            for member in _block_members(b0, b1):
                fitted = member.fit_or_skip(b0[:half0], b1[:half1], pair)
                if isinstance(fitted, Fitted):
                    fit = _mean_log_likelihood(fitted, b0[half0:2 * half0], b1[half1:2 * half1])
                    if fit > best_fit:
                        best, best_fit = member, fit
            fitted = best.fit_or_skip(b0, b1, pair) if best is not None else None
            if not isinstance(fitted, Fitted):
                return self._skip(f"no statistic applies to output[{lo}:{hi}]")
            parts.append((lo, hi, fitted))
        name = " + ".join(f"{f.name} of output[{lo}:{hi}]" for lo, hi, f in parts)
        return Fitted(f"blocks' scores summed: {name}",
                      lambda o: sum(f.score(o[:, lo:hi]) for lo, hi, f in parts), self.kind)


def _block_members(out0: np.ndarray, out1: np.ndarray) -> list[Statistic]:
    """The candidate scores of one block: its pattern statistics (a continuous block has none) and the learned one."""
    both = np.concatenate([out0, out1])
    codes = find_codes(both)
    return ([] if _pattern_reason(both, codes) else _pattern_members(both, codes)) + [Learned()]


def pattern_family(out0: np.ndarray, out1: np.ndarray) -> list[Statistic]:
    """The pattern statistics for outputs like these (codes found on both sides' runs pooled).

    For every symbol that occurs (each code and, if any, the released values): the position of its first
    occurrence and its count; the longest prefix histogram (the whole pattern's when it has at most
    :data:`~.scores.MAX_CATEGORIES` values), the per-position score and, with released values, the values given
    the pattern and the first released value by position; for an output of 2 to :data:`MAX_BLOCKS` blocks
    (:func:`output_blocks`), their scores summed (:class:`BlockSum`, a pattern or not). Outputs that are no
    pattern get one member, which is skipped with the reason (and the block sum where it applies).

    Parameters
    ----------
    out0, out1 : (n, d) arrays
        Runs on D and D'.
    """
    both = np.concatenate([out0, out1])
    codes = find_codes(both)
    blocks = output_blocks(both) if both.ndim == 2 and both.shape[1] > 1 else [(0, 1)]
    summed: list[Statistic] = [BlockSum(tuple(blocks))] if 1 < len(blocks) <= MAX_BLOCKS else []
    if _pattern_reason(both, codes):
        return [PatternSummary("first", 0, codes)] + summed
    return _pattern_members(both, codes) + summed


def _pattern_members(both: np.ndarray, codes: tuple[float, ...]) -> list[Statistic]:
    """The pattern statistics of an output that is a pattern (:func:`pattern_family`, without the block sum): runs
    of both sides pooled, and their codes."""
    present = np.unique(symbols(both, codes))
    members: list[Statistic] = []
    for s in present:
        members += [PatternSummary("first", int(s), codes), PatternSummary("count", int(s), codes)]
    members += [PatternPrefix(codes), PerPosition(codes)]
    if VALUE in present:
        members += [ValuesGivenPattern(codes), FirstValue(codes)]
    return members


__all__ = [
    "BlockSum",
    "FirstValue",
    "PatternPrefix",
    "PatternSummary",
    "PerPosition",
    "ValuesGivenPattern",
    "find_codes",
    "output_blocks",
    "pattern_family",
    "symbols",
]
