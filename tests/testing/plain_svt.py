"""Sparse-vector mechanisms written the way a user writes them: plain, unbatched numpy functions, one output per
call (Lyu, Su & Li, VLDB 2017, "Understanding the sparse vector technique for differential privacy").

Each takes the query answers (sensitivity 1 each), a numpy Generator and returns a fixed-length vector: 1.0 for
an answer above the noisy threshold (⊤), 0.0 below (⊥), -1.0 for a query not answered after the cutoff; the
variants that release values put the noisy answer in place of 1.0. Claimed epsilon 0.1 throughout.
"""

from __future__ import annotations

import numpy as np

EPSILON = 0.1
#: The classic witness pair of the sparse vector (StatDP, DP-Sniper): each answer moves by 1, half up, half down.
WITNESS = (np.array([1.0] * 5 + [0.0] * 5), np.array([0.0] * 5 + [1.0] * 5))


def svt1(queries, rng, epsilon=EPSILON, c=1, threshold=0.5):
    """Alg. 1 (correct): rho ~ Lap(2/eps), nu ~ Lap(4c/eps), stop after c answers above."""
    rho = rng.laplace(scale=2 / epsilon)
    out = np.full(len(queries), -1.0)
    count = 0
    for i, q in enumerate(queries):
        if count >= c:
            break
        if q + rng.laplace(scale=4 * c / epsilon) >= threshold + rho:
            out[i] = 1.0
            count += 1
        else:
            out[i] = 0.0
    return out


def svt3(queries, rng, epsilon=EPSILON, c=1, threshold=1.0):
    """Alg. 3 (INCORRECT, not DP for any epsilon): releases the noisy answer when it is above the threshold."""
    rho = rng.laplace(scale=2 / epsilon)
    out = np.full(len(queries), -1.0)
    count = 0
    for i, q in enumerate(queries):
        if count >= c:
            break
        noisy = q + rng.laplace(scale=2 * c / epsilon)
        if noisy >= threshold + rho:
            out[i] = noisy
            count += 1
        else:
            out[i] = 0.0
    return out


def svt4(queries, rng, epsilon=EPSILON, c=1, threshold=1.0):
    """Alg. 4 (INCORRECT, true epsilon (1 + 6c)/4 eps = 0.175): rho ~ Lap(4/eps), nu ~ Lap(4/(3 eps))."""
    rho = rng.laplace(scale=4 / epsilon)
    out = np.full(len(queries), -1.0)
    count = 0
    for i, q in enumerate(queries):
        if count >= c:
            break
        if q + rng.laplace(scale=4 / (3 * epsilon)) >= threshold + rho:
            out[i] = 1.0
            count += 1
        else:
            out[i] = 0.0
    return out


def svt5(queries, rng, epsilon=EPSILON, threshold=1.0):
    """Alg. 5 (INCORRECT): no noise on the answers, no cutoff."""
    rho = rng.laplace(scale=2 / epsilon)
    return np.array([1.0 if q >= threshold + rho else 0.0 for q in queries])


def svt6(queries, rng, epsilon=EPSILON, threshold=1.0):
    """Alg. 6 (INCORRECT): noisy answers but no cutoff."""
    rho = rng.laplace(scale=2 / epsilon)
    return np.array([1.0 if q + rng.laplace(scale=2 / epsilon) >= threshold + rho else 0.0 for q in queries])

