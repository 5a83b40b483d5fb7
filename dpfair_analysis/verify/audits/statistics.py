"""Empirical privacy audits: one-sided lower bounds on epsilon from worst-case neighbours.

An (epsilon, delta)-DP mechanism M bounds every test that tries to tell M(D) from M(D')
for neighbouring D, D' (Kairouz, Oh & Viswanath 2015; Nasr et al. 2021, "Adversary
instantiation: lower bounds for differentially private machine learning", Eq. 1): for a
rejection region (guess "D'") with false-positive rate FPR (guessing D' on M(D)) and
false-negative rate FNR (guessing D on M(D')),

    FPR + e^epsilon FNR >= 1 - delta    and    FNR + e^epsilon FPR >= 1 - delta,

so  epsilon >= max( log((1 - delta - FNR) / FPR), log((1 - delta - FPR) / FNR) ).

An audit runs the mechanism ``trials`` times on each of D and D', scores every output
with a statistic (here always the Neyman-Pearson log-likelihood ratio of the two output
distributions, which the white-box auditor can compute because it knows the mechanism,
the data and everything but the noise), and

1. picks the threshold t (guess D' iff score > t) that maximises the bound on a first,
   *selection* part of the trials (``selection_fraction``, default one half);
2. counts false positives and false negatives at that t on the remaining, *evaluation*
   trials, which are independent of the choice of t;
3. replaces FPR and FNR by one-sided Clopper-Pearson upper confidence limits at level
   1 - alpha/2 each (alpha = 1 - confidence). By the union bound both limits hold
   together with probability >= 1 - alpha, and then both expressions above are valid
   lower bounds, so

       epsilon_lower = max(0, log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u))

   is a lower bound on the true epsilon of M at delta with confidence ``confidence``
   (:func:`epsilon_lower_bound`). The Clopper-Pearson limit for k events in n trials is
   the (1 - alpha/2) quantile of Beta(k + 1, n - k) (1 when k = n).

A correct mechanism must give epsilon_lower <= epsilon_claimed (``consistent``); a
result above the claim means the implementation (or its accounting) is broken, with
confidence 95%. A consistent result proves nothing on its own, so every mechanism is
also audited with a deliberately under-noised twin (all its noise scales multiplied by
``noise_fraction``, e.g. 0.25, while claiming the same epsilon), which the audit must
catch; the settings below were chosen so that it does with a few thousand trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import beta as _beta

from dpfair_analysis.validation import check_delta, check_fraction

DEFAULT_CONFIDENCE = 0.95
DEFAULT_DELTA = 1e-5


# =========================================================================== statistics
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
    level = check_fraction(level, "level", open_high=True)
    k = np.asarray(events, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n) or np.any(k != np.floor(k)) or np.any(n != np.floor(n)):
        raise ValueError(f"need integer counts 0 <= events <= trials with trials >= 1, got events={events!r}, "
                         f"trials={trials!r}")
    full = k >= n
    upper = _beta.ppf(level, k + 1, np.where(full, 1.0, n - k))
    return np.where(full, 1.0, upper)


def epsilon_lower_bound(false_positives: Any, negatives: Any, false_negatives: Any, positives: Any, *,
                        delta: float, confidence: float = DEFAULT_CONFIDENCE) -> np.ndarray | float:
    """epsilon_lower from counts at one threshold (see the module docstring).

    With FPR_u, FNR_u the one-sided Clopper-Pearson upper limits at level
    1 - (1 - confidence) / 2 each (union bound: both hold with probability >= confidence),

        epsilon_lower = max(0, log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u)),

    an expression whose numerator is <= 0 giving no bound (Nasr et al. 2021, Eq. 1 with
    Clopper-Pearson intervals).

    Parameters
    ----------
    false_positives, negatives : int or array
        Outputs of M(D) guessed as D', out of ``negatives`` runs on D.
    false_negatives, positives : int or array
        Outputs of M(D') guessed as D, out of ``positives`` runs on D'.
    delta : float
        The delta of the guarantee being audited.
    confidence : float
        Joint confidence of the bound, in (0, 1).
    """
    delta = check_delta(delta)
    confidence = check_fraction(confidence, "confidence", open_high=True)
    level = 1.0 - (1.0 - confidence) / 2.0
    fpr = clopper_pearson_upper(false_positives, negatives, level=level)
    fnr = clopper_pearson_upper(false_negatives, positives, level=level)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(1 - delta - fnr > 0, np.log(np.maximum(1 - delta - fnr, 1e-300)) - np.log(fpr), -np.inf)
        second = np.where(1 - delta - fpr > 0, np.log(np.maximum(1 - delta - fpr, 1e-300)) - np.log(fnr), -np.inf)
    bound = np.maximum(0.0, np.maximum(first, second))
    return float(bound) if bound.ndim == 0 else bound


def _candidate_ranks(n: int) -> np.ndarray:
    """Ranks 0..n-1 to try as tail counts: all of the first 200, then geometric."""
    head = np.arange(min(n, 200))
    tail = np.unique(np.geomspace(200, max(n - 1, 200), num=200).astype(int)) if n > 200 else np.zeros(0, int)
    return np.unique(np.concatenate([head, tail[tail < n]]))


def _bounds_at(thresholds: np.ndarray, sorted_without: np.ndarray, sorted_with: np.ndarray, *, delta: float,
               confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    fp = len(sorted_without) - np.searchsorted(sorted_without, thresholds, side="right")
    fn = np.searchsorted(sorted_with, thresholds, side="right")
    eps = epsilon_lower_bound(fp, len(sorted_without), fn, len(sorted_with), delta=delta, confidence=confidence)
    return np.atleast_1d(eps), fp, fn


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


def threshold_test(scores_without: Any, scores_with: Any, *, delta: float, confidence: float = DEFAULT_CONFIDENCE,
                   selection_fraction: float = 0.5) -> ThresholdTest:
    """Pick the threshold on the first part of the trials, bound epsilon on the rest.

    Parameters
    ----------
    scores_without, scores_with : 1-d arrays
        Test statistic of each run on D and on D' (larger = more like D'); both in the
        order drawn. The first ``ceil(selection_fraction * len)`` of each choose the
        threshold among the D-scores and D'-scores of the selection part (the bound
        log((1-delta-FNR)/FPR) is largest at a D-score for a given FP count, the other at
        a D'-score), trying every tail count up to 200 and geometric counts beyond.
    delta, confidence : float
        As in :func:`epsilon_lower_bound`.
    selection_fraction : float
        Share of the trials used to choose the threshold, in (0, 1).
    """
    delta = check_delta(delta)
    selection_fraction = check_fraction(selection_fraction, "selection_fraction", open_high=True)
    without = np.asarray(scores_without, dtype=np.float64).ravel()
    with_ = np.asarray(scores_with, dtype=np.float64).ravel()
    for name, values in (("scores_without", without), ("scores_with", with_)):
        if len(values) < 4:
            raise ValueError(f"{name} needs at least 4 trials (selection and evaluation), got {len(values)}")
        if np.isnan(values).any():
            raise ValueError(f"{name} has NaN scores")
    k0 = min(max(1, math.ceil(selection_fraction * len(without))), len(without) - 1)
    k1 = min(max(1, math.ceil(selection_fraction * len(with_))), len(with_) - 1)
    sel0, sel1 = np.sort(without[:k0]), np.sort(with_[:k1])
    candidates = np.unique(np.concatenate([
        sel0[::-1][_candidate_ranks(len(sel0))],            # t at a D-score: FP = rank
        np.nextafter(sel1[_candidate_ranks(len(sel1))], -np.inf),  # t just below a D'-score: FN = rank
    ]))
    eps, _, _ = _bounds_at(candidates, sel0, sel1, delta=delta, confidence=confidence)
    best = int(np.argmax(eps))
    threshold = float(candidates[best])
    ev0, ev1 = np.sort(without[k0:]), np.sort(with_[k1:])
    eval_eps, fp, fn = _bounds_at(np.array([threshold]), ev0, ev1, delta=delta, confidence=confidence)
    return ThresholdTest(threshold=threshold, false_positives=int(fp[0]), negatives=len(ev0),
                         false_negatives=int(fn[0]), positives=len(ev1), epsilon_lower=float(eval_eps[0]),
                         selection_epsilon=float(eps[best]))


