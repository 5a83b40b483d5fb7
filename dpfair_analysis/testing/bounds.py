"""Sound statistics: one-sided lower bounds on epsilon from counts, for pure and approximate DP.

An (epsilon, delta)-DP mechanism M bounds every test that tries to tell M(D) from M(D')
for neighbouring D, D' (Kairouz, Oh & Viswanath 2015; Nasr et al. 2021, "Adversary
instantiation: lower bounds for differentially private machine learning", Eq. 1): for a
rejection region (guess "D'") with false-positive rate FPR (guessing D' on M(D)) and
false-negative rate FNR (guessing D on M(D')),

    FPR + e^epsilon FNR >= 1 - delta    and    FNR + e^epsilon FPR >= 1 - delta,

so  epsilon >= max( log((1 - delta - FNR) / FPR), log((1 - delta - FPR) / FNR) ).

With delta = 0 (pure DP) these are the two event ratios log(P[M(D') in S] / P[M(D) in S])
for S the rejection region and for its complement, the quantity StatDP and DP-Sniper bound.

From counts, FPR and FNR are replaced by one-sided Clopper-Pearson upper confidence limits
at level 1 - alpha/2 each (alpha = 1 - confidence). By the union bound both limits hold
together with probability >= 1 - alpha, and then both expressions are valid lower bounds:

    epsilon_lower = max(0, log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u))

(:func:`epsilon_lower_bound`). The Clopper-Pearson limit for k events in n trials is the
(1 - alpha/2) quantile of Beta(k + 1, n - k) (1 when k = n).

The bound is valid only for a rejection region fixed *before* the counted runs were
drawn. :func:`threshold_test` chooses a threshold on a first, selection part of the
scores and counts errors on the rest; :func:`choose_threshold` and :func:`bound_at_threshold`
are its two halves, used by :func:`dpfair_analysis.testing.auditing` to choose a pair, a
statistic and a threshold on selection runs and to bound epsilon on fresh ones.

:func:`one_run_epsilon_lower` is the bound of Steinke, Nasr & Jagielski (2023), "Privacy
auditing with one (1) training run", for m canaries each included with probability 1/2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfair_analysis.validation import check_fraction, check_int_at_least

DEFAULT_CONFIDENCE = 0.95


def check_delta_or_zero(value: object, name: str = "delta") -> float:
    """A delta in [0, 1): 0 for pure DP, a failure probability otherwise."""
    return check_fraction(value, name, open_low=False, open_high=True)


# =========================================================================== Clopper-Pearson
def _check_counts(events: Any, trials: Any) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(events, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n) or np.any(k != np.floor(k)) or np.any(n != np.floor(n)):
        raise ValueError(f"need integer counts 0 <= events <= trials with trials >= 1, got events={events!r}, "
                         f"trials={trials!r}")
    return k, n


def clopper_pearson_upper(events: Any, trials: Any, *, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper confidence limit for a binomial rate.

    For k events in n trials the limit p_u with P(p <= p_u) >= ``level`` is the
    ``level`` quantile of Beta(k + 1, n - k); it is 1 when k = n.

    Parameters
    ----------
    events, trials : int or array of int
        k and n, 0 <= k <= n, n >= 1 (broadcast together).
    level : float
        Confidence level in (0, 1).
    """
    from scipy.special import betaincinv  # the Beta quantile, without importing scipy.stats (slow)

    level = check_fraction(level, "level", open_high=True)
    k, n = _check_counts(events, trials)
    full = k >= n
    upper = betaincinv(k + 1, np.where(full, 1.0, n - k), level)
    return np.where(full, 1.0, upper)


def clopper_pearson_lower(events: Any, trials: Any, *, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower confidence limit: 1 - the upper limit of the non-events.

    Parameters
    ----------
    events, trials : int or array of int
        k and n, 0 <= k <= n, n >= 1 (broadcast together).
    level : float
        Confidence level in (0, 1).
    """
    k, n = _check_counts(events, trials)
    return 1.0 - clopper_pearson_upper(n - k, n, level=level)


def epsilon_lower_bound(false_positives: Any, negatives: Any, false_negatives: Any, positives: Any, *,
                        delta: float, confidence: float = DEFAULT_CONFIDENCE) -> np.ndarray | float:
    """epsilon_lower from counts at one threshold (see the module docstring).

    With FPR_u, FNR_u the one-sided Clopper-Pearson upper limits at level
    1 - (1 - confidence) / 2 each (union bound: both hold with probability >= confidence),

        epsilon_lower = max(0, log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u)),

    an expression whose numerator is <= 0 giving no bound (Nasr et al. 2021, Eq. 1 with
    Clopper-Pearson intervals). ``delta = 0`` bounds pure DP.

    Parameters
    ----------
    false_positives, negatives : int or array
        Outputs of M(D) guessed as D', out of ``negatives`` runs on D.
    false_negatives, positives : int or array
        Outputs of M(D') guessed as D, out of ``positives`` runs on D'.
    delta : float
        The delta of the guarantee being audited, in [0, 1).
    confidence : float
        Joint confidence of the bound, in (0, 1).
    """
    delta = check_delta_or_zero(delta)
    confidence = check_fraction(confidence, "confidence", open_high=True)
    level = 1.0 - (1.0 - confidence) / 2.0
    fpr = clopper_pearson_upper(false_positives, negatives, level=level)
    fnr = clopper_pearson_upper(false_negatives, positives, level=level)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(1 - delta - fnr > 0, np.log(np.maximum(1 - delta - fnr, 1e-300)) - np.log(fpr), -np.inf)
        second = np.where(1 - delta - fpr > 0, np.log(np.maximum(1 - delta - fpr, 1e-300)) - np.log(fnr), -np.inf)
    bound = np.maximum(0.0, np.maximum(first, second))
    return float(bound) if bound.ndim == 0 else bound


def largest_certifiable_epsilon(trials: int, *, delta: float, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The largest epsilon_lower that ``trials`` evaluation runs per side can give: no error on one side,
    none missed on the other. A claim at or above it cannot be refuted by the audit, however broken.

    Parameters
    ----------
    trials : int
        Evaluation runs on each of D and D'.
    delta, confidence : float
        As in :func:`epsilon_lower_bound`.
    """
    return float(epsilon_lower_bound(0, trials, 0, trials, delta=delta, confidence=confidence))


# =========================================================================== the threshold test
def _candidate_ranks(n: int, head: int = 200, tail: int = 200) -> np.ndarray:
    """Ranks 0..n-1 to try as tail counts: all of the first ``head``, then ``tail`` geometric ones."""
    first = np.arange(min(n, head))
    rest = np.unique(np.geomspace(head, max(n - 1, head), num=tail).astype(int)) if n > head else np.zeros(0, int)
    return np.unique(np.concatenate([first, rest[rest < n]]))


def _bounds_at(thresholds: np.ndarray, sorted_without: np.ndarray, sorted_with: np.ndarray, *, delta: float,
               confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    fp = len(sorted_without) - np.searchsorted(sorted_without, thresholds, side="right")
    fn = np.searchsorted(sorted_with, thresholds, side="right")
    eps = epsilon_lower_bound(fp, len(sorted_without), fn, len(sorted_with), delta=delta, confidence=confidence)
    return np.atleast_1d(eps), fp, fn


def _scores(values: Any, name: str, minimum: int) -> np.ndarray:
    out = np.asarray(values, dtype=np.float64).ravel()
    if len(out) < minimum:
        raise ValueError(f"{name} needs at least {minimum} scores, got {len(out)}")
    if np.isnan(out).any():
        raise ValueError(f"{name} has NaN scores")
    return out


def choose_threshold(scores_without: Any, scores_with: Any, *, delta: float,
                     confidence: float = DEFAULT_CONFIDENCE, evaluation_trials: int | None = None,
                     ranking_level: float = 0.8, min_event: float = 0.0,
                     min_count: int = 0) -> tuple[float, float]:
    """The threshold t (guess D' iff score > t) that maximises a bound on these scores.

    The candidates are the scores themselves (the bound log((1-delta-FNR)/FPR) is largest at a
    D-score for a given FP count, the other at a D'-score), every tail count up to 200 and
    geometric counts beyond. The criterion is :func:`epsilon_lower_bound` of these counts, or,
    with ``evaluation_trials`` = N, the bound *projected* to N fresh runs per side: the error
    rates at their ``ranking_level`` Clopper-Pearson upper limits on these scores, scaled to N
    runs. The projection lets rare events (a tail with few runs here) compete with common ones
    when the evaluation will have many more runs. Returns (t, the criterion at t) -- optimistic,
    not a valid bound: count errors at t on fresh scores (:func:`bound_at_threshold`).

    Parameters
    ----------
    scores_without, scores_with : 1-d arrays
        Statistic of runs on D and on D' (larger = more like D'), at least 2 each.
    delta, confidence : float
        As in :func:`epsilon_lower_bound`.
    evaluation_trials : int, optional
        N, the evaluation runs per side the choice is for.
    ranking_level : float
        Level of the pessimistic error rates of the projection, in (0, 1).
    min_event : float
        c in [0, 0.5): only thresholds whose two error rates on these scores are both at least c
        (every event bounded, "score > t" or its complement, has probability >= c on the side
        in the bound's denominator: DP-Sniper's c, Bichsel et al. 2021, Sec. V); when none
        qualifies (a statistic with only rare events), (nan, -inf). Rare events have noisy rates,
        and a search over them mostly finds luck.
    min_count : int
        m >= 0: only *non-degenerate* thresholds, whose event "score > t" and its complement each hold on at
        least m of the pooled runs of both sides (k0 + k1 >= m and (n0 - k0) + (n1 - k1) >= m, k the runs
        above t). An event that (almost) every run of both sides satisfies, or none does -- a threshold
        below the smallest score -- separates nothing: its bound is 0 whatever the mechanism, and choosing
        it only hides that no test has power. When no candidate qualifies, (nan, -inf): a score that is
        constant on these runs, or one whose every D' score lies at or below every D score (the candidates
        are D's scores and points just below D''s, and there the only separating cut guesses D' on the
        smaller scores: "score > t" has no positive bound, the reversed statistic does).
    """
    delta = check_delta_or_zero(delta)
    if not (isinstance(min_event, (int, float)) and 0.0 <= min_event < 0.5):
        raise ValueError(f"min_event must be a number in [0, 0.5), got {min_event!r}")
    check_int_at_least(min_count, "min_count", 0)
    return _choose_on_sorted(np.sort(_scores(scores_without, "scores_without", 2)),
                             np.sort(_scores(scores_with, "scores_with", 2)), delta=delta, confidence=confidence,
                             evaluation_trials=evaluation_trials, ranking_level=ranking_level, min_event=min_event,
                             min_count=int(min_count))


@dataclass(frozen=True)
class ThresholdTest:
    """The test chosen on the selection trials and its counts on the evaluation trials.

    Guess D' iff score > ``threshold``. ``epsilon_lower`` is :func:`epsilon_lower_bound`
    of the evaluation counts; ``selection_epsilon`` the (optimistic, not a valid bound)
    value at the chosen threshold on the selection trials.
    """

    threshold: float
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int
    epsilon_lower: float
    selection_epsilon: float


def bound_at_threshold(scores_without: Any, scores_with: Any, *, threshold: float, delta: float,
                       confidence: float = DEFAULT_CONFIDENCE, selection_epsilon: float = math.nan) -> ThresholdTest:
    """Count errors at a threshold fixed beforehand and bound epsilon (a valid bound at ``confidence``).

    Parameters
    ----------
    scores_without, scores_with : 1-d arrays
        Statistic of fresh runs on D and on D' (none of them used to choose the threshold).
    threshold : float
        Guess D' iff score > threshold.
    delta, confidence : float
        As in :func:`epsilon_lower_bound`.
    selection_epsilon : float
        Carried into the result (the optimistic value where the threshold was chosen).
    """
    ev0 = np.sort(_scores(scores_without, "scores_without", 1))
    ev1 = np.sort(_scores(scores_with, "scores_with", 1))
    eps, fp, fn = _bounds_at(np.array([float(threshold)]), ev0, ev1, delta=check_delta_or_zero(delta),
                             confidence=confidence)
    return ThresholdTest(threshold=float(threshold), false_positives=int(fp[0]), negatives=len(ev0),
                         false_negatives=int(fn[0]), positives=len(ev1), epsilon_lower=float(eps[0]),
                         selection_epsilon=float(selection_epsilon))


def threshold_test(scores_without: Any, scores_with: Any, *, delta: float, confidence: float = DEFAULT_CONFIDENCE,
                   selection_fraction: float = 0.5) -> ThresholdTest:
    """Pick the threshold on the first part of the trials, bound epsilon on the rest.

    Parameters
    ----------
    scores_without, scores_with : 1-d arrays
        Test statistic of each run on D and on D' (larger = more like D'); both in the
        order drawn, at least 4 each. The first ``ceil(selection_fraction * len)`` of each
        choose the threshold (:func:`choose_threshold`); the others are counted
        (:func:`bound_at_threshold`).
    delta, confidence : float
        As in :func:`epsilon_lower_bound` (``delta = 0``: pure DP).
    selection_fraction : float
        Share of the trials used to choose the threshold, in (0, 1).
    """
    delta = check_delta_or_zero(delta)
    selection_fraction = check_fraction(selection_fraction, "selection_fraction", open_high=True)
    without = _scores(scores_without, "scores_without", 4)
    with_ = _scores(scores_with, "scores_with", 4)
    k0 = min(max(1, math.ceil(selection_fraction * len(without))), len(without) - 1)
    k1 = min(max(1, math.ceil(selection_fraction * len(with_))), len(with_) - 1)
    threshold, selection = _choose_on_sorted(np.sort(without[:k0]), np.sort(with_[:k1]), delta=delta,
                                             confidence=confidence)
    return bound_at_threshold(without[k0:], with_[k1:], threshold=threshold, delta=delta, confidence=confidence,
                              selection_epsilon=selection)


def _choose_on_sorted(sel0: np.ndarray, sel1: np.ndarray, *, delta: float, confidence: float,
                      evaluation_trials: int | None = None, ranking_level: float = 0.8,
                      min_event: float = 0.0, min_count: int = 0) -> tuple[float, float]:
    # the projected criterion (an audit's search) tries fewer tail counts: it runs for many statistics
    head, tail = (200, 200) if evaluation_trials is None else (50, 120)
    candidates = np.unique(np.concatenate([
        sel0[::-1][_candidate_ranks(len(sel0), head, tail)],
        np.nextafter(sel1[_candidate_ranks(len(sel1), head, tail)], -np.inf),
    ]))
    if min_event > 0:
        fp = len(sel0) - np.searchsorted(sel0, candidates, side="right")
        fn = np.searchsorted(sel1, candidates, side="right")
        common = (fp >= min_event * len(sel0)) & (fn >= min_event * len(sel1))
        if not common.any():
            return math.nan, -math.inf
        candidates = candidates[common]
    if min_count > 0:
        above = (len(sel0) - np.searchsorted(sel0, candidates, side="right")
                 + len(sel1) - np.searchsorted(sel1, candidates, side="right"))
        separating = (above >= min_count) & (len(sel0) + len(sel1) - above >= min_count)
        if not separating.any():
            return math.nan, -math.inf
        candidates = candidates[separating]
    if evaluation_trials is None:
        eps, _, _ = _bounds_at(candidates, sel0, sel1, delta=delta, confidence=confidence)
    else:
        fp = len(sel0) - np.searchsorted(sel0, candidates, side="right")
        fn = np.searchsorted(sel1, candidates, side="right")
        eps = np.atleast_1d(projected_epsilon(fp, len(sel0), fn, len(sel1), evaluation_trials=evaluation_trials,
                                              delta=delta, confidence=confidence, level=ranking_level))
    best = int(np.argmax(eps))
    return float(candidates[best]), float(eps[best])


def projected_epsilon(false_positives: Any, negatives: Any, false_negatives: Any, positives: Any, *,
                      evaluation_trials: int, delta: float, confidence: float = DEFAULT_CONFIDENCE,
                      level: float = 0.8) -> np.ndarray | float:
    """The bound N evaluation runs per side would give if the error rates were their ``level`` Clopper-Pearson
    upper limits from these counts: a pessimistic forecast used to rank tests (not a valid bound).

    Parameters
    ----------
    false_positives, negatives, false_negatives, positives : int or array
        Counts on selection runs, as in :func:`epsilon_lower_bound`.
    evaluation_trials : int
        N.
    delta, confidence : float
        Of the forecast bound.
    level : float
        Pessimism of the rates, in (0, 1).
    """
    n = int(evaluation_trials)
    fpr = clopper_pearson_upper(false_positives, negatives, level=level)
    fnr = clopper_pearson_upper(false_negatives, positives, level=level)
    return epsilon_lower_bound(np.minimum(np.round(fpr * n), n), n, np.minimum(np.round(fnr * n), n), n,
                               delta=delta, confidence=confidence)


# =========================================================================== one training run
def one_run_p_value(canaries: int, guesses: int, correct: int, *, epsilon: float, delta: float = 0.0) -> float:
    """P-value of ``correct`` right guesses out of ``guesses`` under an (epsilon, delta)-DP claim.

    Steinke, Nasr & Jagielski (2023), Theorem 3.1 and Proposition 5.2: each of m canaries is
    included independently with probability 1/2; an adversary who guesses inclusion for
    r of them gets W right. Under (epsilon, 0)-DP W is stochastically dominated by
    Binomial(r, p) with p = e^epsilon / (1 + e^epsilon), so P[W >= v] <= beta(v) :=
    P[Binomial(r, p) >= v]. With delta > 0,

        P[W >= v] <= beta(v) + alpha(v) 2 m delta,
        alpha(v) = max_{i = 1..v} (P[Binomial(r, p) >= v - i] - beta(v)) / i.

    Parameters
    ----------
    canaries : int
        m, the number of canaries (each included with probability 1/2).
    guesses : int
        r <= m, the canaries the adversary guessed about.
    correct : int
        v <= r, the right guesses.
    epsilon : float
        The claimed epsilon (>= 0).
    delta : float
        The claimed delta, in [0, 1).
    """
    from scipy.special import bdtrc, expit

    if not 0 <= correct <= guesses <= canaries or canaries < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= canaries, canaries >= 1; got correct={correct}, "
                         f"guesses={guesses}, canaries={canaries}")
    delta = check_delta_or_zero(delta)
    p = float(expit(epsilon))

    def at_least(v: np.ndarray | int) -> np.ndarray:  # P[Binomial(r, p) >= v]
        v = np.asarray(v)
        return np.where(v <= 0, 1.0, bdtrc(np.maximum(v - 1, 0), guesses, p))

    beta = float(at_least(correct))
    if delta == 0 or correct == 0:
        return beta
    i = np.arange(1, correct + 1)
    alpha = float(np.max((at_least(correct - i) - beta) / i, initial=0.0))
    return min(1.0, beta + alpha * 2 * canaries * delta)


def one_run_epsilon_lower(canaries: int, guesses: int, correct: int, *, delta: float = 0.0,
                          confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The largest epsilon that ``correct`` of ``guesses`` right guesses refute at ``confidence``.

    The root of one_run_p_value(epsilon) = 1 - confidence (:func:`one_run_p_value` is
    increasing in epsilon); 0 when even epsilon = 0 is not refuted. One training run, m
    canaries (Steinke, Nasr & Jagielski 2023, Algorithm 1 and Theorem 3.1).

    Parameters
    ----------
    canaries, guesses, correct : int
        As in :func:`one_run_p_value`.
    delta : float
        The claimed delta, in [0, 1).
    confidence : float
        In (0, 1).
    """
    from scipy.optimize import brentq

    confidence = check_fraction(confidence, "confidence", open_high=True)
    alpha = 1.0 - confidence

    def excess(eps: float) -> float:
        return alpha - one_run_p_value(canaries, guesses, correct, epsilon=eps, delta=delta)

    if excess(0.0) <= 0:
        return 0.0
    high = 1.0
    while excess(high) > 0:
        high *= 2
        if high > 1e4:  # every guess right with a p-value below alpha at any epsilon: cannot happen for r >= 1
            return math.inf
    return float(brentq(excess, 0.0, high, xtol=1e-9))
