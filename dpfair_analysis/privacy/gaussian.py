"""The Gaussian mechanism's calibration: the noise standard deviation for (epsilon, delta)-DP of an l2-sensitivity
Delta query -- exact (Balle & Wang 2018, the analytic Gaussian mechanism) or classic (Dwork & Roth 2014, Thm A.1,
epsilon < 1) -- and the exact delta of a given noise. Imports no torch: the privacy-testing kit's Gaussian
benchmark (:mod:`dpfair_analysis.testing.zoo`) and output perturbation (:mod:`.output_perturbation`) share it."""

from __future__ import annotations

import functools
import math

from dp_accounting import gaussian_mechanism
from scipy.stats import norm as _normal

from dpfair_analysis.validation import check_choice, check_delta, check_nonnegative, check_positive

#: The calibrations :func:`gaussian_sigma` offers.
CALIBRATIONS = ("analytic", "classic")


def gaussian_sigma_classic(epsilon: float, delta: float, sensitivity: float) -> float:
    """s = Delta sqrt(2 ln(1.25 / delta)) / epsilon (Dwork & Roth 2014, Thm A.1).

    Valid only for 0 < epsilon < 1 (the theorem's hypothesis; for larger epsilon the
    formula can under-noise): epsilon >= 1 is refused -- use
    :func:`gaussian_sigma_analytic`, which is exact for every epsilon.
    """
    epsilon = check_positive(epsilon, "epsilon")
    if epsilon >= 1:
        raise ValueError(f"epsilon must be < 1 for the classic Gaussian calibration (Dwork & Roth Thm A.1), "
                         f"got epsilon={epsilon}; use gaussian_sigma_analytic")
    delta = check_delta(delta)
    return check_positive(sensitivity, "sensitivity") * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Exact delta(epsilon) of the Gaussian mechanism N(0, sigma^2) on an l2-sensitivity Delta query.

    Balle & Wang (2018), Thm 8:

        delta = Phi(Delta / (2 sigma) - epsilon sigma / Delta)
                - e^epsilon Phi(-Delta / (2 sigma) - epsilon sigma / Delta),

    evaluated in log space (log Phi by ``scipy.stats.norm.logcdf``) so it stays accurate
    when both terms are tiny.
    """
    sigma = check_positive(sigma, "sigma")
    epsilon = check_nonnegative(epsilon, "epsilon")
    ratio = sigma / check_positive(sensitivity, "sensitivity")  # only sigma / Delta matters
    first = _normal.logcdf(0.5 / ratio - epsilon * ratio)
    second = epsilon + _normal.logcdf(-0.5 / ratio - epsilon * ratio)
    if second >= first:
        return 0.0
    return float(math.exp(first) * -math.expm1(second - first))


def gaussian_sigma_analytic(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest s with :func:`gaussian_delta` (s, epsilon, Delta) <= delta (Balle & Wang 2018).

    The analytic Gaussian mechanism, from ``dp_accounting.gaussian_mechanism.get_sigma_gaussian``
    (root of log delta(s) = log delta by Brent's method, unit sensitivity, then scaled by
    Delta -- delta depends on s / Delta only). The root is then moved up by relative steps
    of 1e-13 until delta(s) <= delta holds when re-evaluated (Brent may land on either side
    of the root), so the returned s is never below the exact calibration. Valid for every
    epsilon > 0 and never larger than :func:`gaussian_sigma_classic` where that is valid.
    """
    return _sigma_analytic(check_positive(epsilon, "epsilon"), check_delta(delta),
                           check_positive(sensitivity, "sensitivity"))


@functools.lru_cache(maxsize=4096)
def _sigma_analytic(epsilon: float, delta: float, sensitivity: float) -> float:
    """:func:`gaussian_sigma_analytic` of checked arguments, kept per (epsilon, delta, Delta): a root search of
    ~1 ms that a mechanism written one output per call would otherwise repeat at every call."""
    sigma = float(gaussian_mechanism.get_sigma_gaussian(epsilon, delta)) * sensitivity
    for _ in range(1000):
        if gaussian_delta(sigma, epsilon, sensitivity) <= delta:
            return sigma
        sigma *= 1 + 1e-13
    raise RuntimeError(f"analytic calibration did not reach delta={delta} at epsilon={epsilon}")  # pragma: no cover


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float, *, calibration: str = "analytic") -> float:
    """Noise standard deviation s by ``calibration``: "analytic" (exact) or "classic" (epsilon < 1)."""
    check_choice(calibration, "calibration", CALIBRATIONS)
    if calibration == "classic":
        return gaussian_sigma_classic(epsilon, delta, sensitivity)
    return gaussian_sigma_analytic(epsilon, delta, sensitivity)
