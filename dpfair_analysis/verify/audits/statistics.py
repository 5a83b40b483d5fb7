"""The audits' sound statistics, from the public kit (:mod:`dpfair_analysis.testing.bounds`).

An (epsilon, delta)-DP mechanism M bounds every test that tries to tell M(D) from M(D'):
FPR + e^epsilon FNR >= 1 - delta and FNR + e^epsilon FPR >= 1 - delta (Kairouz, Oh &
Viswanath 2015; Nasr et al. 2021, Eq. 1). The audits here score each run with the
white-box log-likelihood ratio, pick the threshold on a first, *selection* part of the
trials and count errors on the rest (:func:`threshold_test`); the one-sided
Clopper-Pearson limits of the two error rates (each at 1 - alpha/2, union bound) give
epsilon_lower (:func:`epsilon_lower_bound`), valid with probability ``confidence``.

A correct mechanism must give epsilon_lower <= epsilon_claimed; every mechanism is also
audited with an under-noised twin (its noise scales multiplied by ``noise_fraction``, the
claim unchanged), which the audit must catch. The arithmetic lives once, in the kit; this
module names what the audits use.
"""

from __future__ import annotations

from dpfair_analysis.testing.bounds import DEFAULT_CONFIDENCE, ThresholdTest, clopper_pearson_upper, \
    epsilon_lower_bound, threshold_test

DEFAULT_DELTA = 1e-5

__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_DELTA", "ThresholdTest", "clopper_pearson_upper", "epsilon_lower_bound",
           "threshold_test"]
