"""Inequality indices over per-group (or per-class) outcomes: Atkinson, Gini, MLD, Theil.

Paper 002 (FairDP fragment, Sec. 4.1 and its Appendix D.4, citing the US Census Bureau's
income-inequality measures) reports these four indices over per-class accuracies. The
appendix is not in our copy, so the standard definitions are used (Cowell, *Measuring
Inequality*, 3rd ed., 2011). For values x_1..x_n > 0 with mean mu:

* Gini:      G = sum_i sum_j |x_i - x_j| / (2 n^2 mu)        (0 = equal, (n-1)/n = one holds all)
* Theil:     T = (1/n) sum_i (x_i/mu) log(x_i/mu)             (generalised entropy GE(1); log n max)
* MLD:       L = (1/n) sum_i log(mu / x_i)                    (GE(0), mean log deviation)
* Atkinson:  A_e = 1 - (mean_i (x_i/mu)^(1-e))^(1/(1-e)),  A_1 = 1 - geometric mean / mu

Identities used by ``dpfair verify`` (claim 002.appD4.indices): every index is 0 for equal
values and scale invariant; A_1 = 1 - exp(-L); for two values (a, b) the Gini is
|a - b| / (2 (a + b)); for one non-zero value among n, G = (n - 1)/n and T = log n.
"""

from __future__ import annotations

import numpy as np

from dpfair_analysis.validation import check_nonnegative

__all__ = ["gini", "theil", "mean_log_deviation", "atkinson", "inequality_indices", "INDICES",
           "DEFAULT_ATKINSON_EPSILON"]

#: The four indices of paper 002's Table 2, in its order.
INDICES = ("atkinson", "gini", "mld", "theil")
#: Atkinson's inequality aversion for Table 2. Paper 002 does not print it (its Appendix D.4 is not in
#: our copy); the Census Bureau's income-inequality reports (which the paper cites) tabulate 0.25, 0.5
#: and 0.75, and 0.5 is the middle one.
DEFAULT_ATKINSON_EPSILON = 0.5


def _values(x, *, positive: bool) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("x must hold at least one value")
    if not np.isfinite(v).all() or (v < 0).any():
        raise ValueError(f"x must be finite and non-negative, got {v.tolist()!r}")
    if positive and (v <= 0).any():
        raise ValueError(f"x must be strictly positive for this index (log of 0), got {v.tolist()!r}")
    if v.sum() <= 0:
        raise ValueError("x must have a positive mean")
    return v


def gini(x) -> float:
    """Gini coefficient sum_ij |x_i - x_j| / (2 n^2 mu) of non-negative values."""
    v = _values(x, positive=False)
    return float(np.abs(v[:, None] - v[None, :]).sum() / (2 * v.size ** 2 * v.mean()))


def theil(x) -> float:
    """Theil index (1/n) sum (x_i/mu) log(x_i/mu), with 0 log 0 = 0."""
    v = _values(x, positive=False)
    s = v / v.mean()
    return float(np.mean(np.where(s > 0, s * np.log(np.where(s > 0, s, 1.0)), 0.0)))


def mean_log_deviation(x) -> float:
    """Mean log deviation (1/n) sum log(mu / x_i) of positive values."""
    v = _values(x, positive=True)
    return float(np.mean(np.log(v.mean() / v)))


def atkinson(x, epsilon: float = 1.0) -> float:
    """Atkinson index with inequality aversion epsilon >= 0 (epsilon = 1: 1 - geometric mean / mean)."""
    epsilon = check_nonnegative(epsilon, "epsilon")
    v = _values(x, positive=epsilon >= 1)
    s = v / v.mean()
    if epsilon == 1:
        return float(1 - np.exp(np.mean(np.log(s))))
    return float(1 - np.mean(s ** (1 - epsilon)) ** (1 / (1 - epsilon)))


def inequality_indices(x, *, atkinson_epsilon: float = DEFAULT_ATKINSON_EPSILON) -> dict[str, float]:
    """Paper 002 Table 2's four indices of non-negative values (e.g. per-group accuracies), by name.

    Where a value is 0 and an index's formula is undefined, the index is its limit: the MLD's
    log(mu / 0) is ``inf``; Atkinson with epsilon >= 1 is 1 (the geometric or power mean is 0).
    """
    v = _values(x, positive=False)
    zero = bool((v == 0).any())
    return {"atkinson": 1.0 if zero and atkinson_epsilon >= 1 else atkinson(v, atkinson_epsilon),
            "gini": gini(v), "mld": float("inf") if zero else mean_log_deviation(v), "theil": theil(v)}
