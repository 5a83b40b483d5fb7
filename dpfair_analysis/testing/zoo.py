"""Reference mechanisms with known privacy: the benchmarks of StatDP, DP-Sniper and DP-Auditorium.

Use them to check that an audit has power before trusting a pass on your own mechanism,
and to compare the kit with the published testers (``benchmarks/privacy_testing.py``).
Every entry is a :class:`ZooMechanism`: a vectorised function ``fn(data, rng, n, *,
noise_scale=1.0)`` (``n`` outputs stacked; every noise scale multiplied by ``noise_scale``
for the under-noised twin), the claim it is tested against, the relation, a base input,
whether the claim is true, and where the mechanism comes from. :meth:`ZooMechanism.single`
gives the one-output form ``fn(data, rng)`` of the interface contract.

The instances are DP-Sniper's evaluation settings (Bichsel et al., S&P 2021, Sec. VII and
its ``exp_default.py``): epsilon = 0.1, query vectors of length 1 (Laplace, geometric,
RAPPOR), 5 (histograms, noisy max) or 10 (SVT, prefix sum), values from StatDP's
patterns around a base of ones, c = 1 answer for SVT1-6 (threshold 0.5 for SVT1, 1 for
the others), c = 2 for NumericalSVT and SVT34Parallel. StatDP's SVT and iSVT1-4 (Ding et al.,
CCS 2018, Sec. 6) are Lyu, Su & Li's (VLDB 2017) Algorithms 1, 5, 6, 4 and 3 (``svt1``,
``svt5``, ``svt6``, ``svt4``, ``svt3``).

Known privacy (the claim is epsilon = 0.1 unless said):

* correct: ``laplace``, ``noisy_hist1``, ``noisy_max1`` (argmax with Laplace noise),
  ``noisy_max2`` (argmax with exponential noise), ``svt1``, ``svt2``, ``numerical_svt``,
  ``truncated_geometric`` (claim ln(1 + 2^-ceil(ln(2/epsilon))) = 0.118, Balcer & Vadhan 2018,
  Thm 4.7), ``laplace_parallel`` (20 x epsilon 0.005), ``prefix_sum`` (claim 10 x 0.1 = 1 under
  "every entry moves"), ``one_time_rappor`` (claim 2 h ln((1 - f/2) / (f/2)) = 0.80, Erlingsson
  et al. 2014), ``rappor`` (claim 4.09, the permanent response's bound), ``gaussian`` (analytic
  calibration, Balle & Wang 2018, epsilon 1, delta 1e-5), ``mean_replace_one``
  (DP-Auditorium's Laplace mean with fixed n);
* incorrect: ``noisy_hist2`` (noise scale epsilon instead of 1/epsilon: true epsilon 10),
  ``noisy_max3``/``noisy_max4`` (release the noisy maximum instead of its index), ``svt3``
  (releases noisy answers: not epsilon-DP for any finite epsilon), ``svt4`` (true epsilon
  (1 + 6c)/4 x 0.1 = 0.175), ``svt5`` (no query noise) and ``svt6`` (no cutoff), both
  infinite, ``svt34_parallel`` (SVT3 beside SVT4), ``gaussian_l2_mistake`` (calibrated to
  l2 sensitivity 1 while 10 entries may each move by 1: true l2 sensitivity sqrt(10)),
  ``mean_add_remove`` (DP-Auditorium's mean whose noise scale uses the data's own n).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfair_analysis.testing.relations import AddRemove, QueryVector, Relation, ReplaceOne

Batched = Callable[..., np.ndarray]


@dataclass(frozen=True)
class ZooMechanism:
    """A reference mechanism (module docstring)."""

    name: str
    fn: Batched
    epsilon: float
    delta: float
    relation: Relation
    data: Any
    correct: bool
    source: str
    true_epsilon: float | None = None
    note: str = ""
    #: The one-output form written as a user writes it, ``plain(data, rng, noise_scale=...)``, where the batched
    #: code run at n = 1 is much slower (a loop over queries in numpy); None: the batched code at n = 1.
    plain: Callable[..., np.ndarray] | None = None

    def single(self, noise_scale: float = 1.0) -> Callable[[Any, np.random.Generator], np.ndarray]:
        """The one-output form ``fn(data, rng)`` (the interface contract), noise scaled by ``noise_scale``: the
        entry's ``plain`` function, else the batched code at n = 1 (the same distribution either way)."""
        fn, plain = self.fn, self.plain

        def mechanism(data: Any, rng: np.random.Generator) -> np.ndarray:
            if plain is not None:
                return plain(data, rng, noise_scale=noise_scale)
            return fn(data, rng, 1, noise_scale=noise_scale)[0]

        mechanism.__qualname__ = f"{self.name}(single)"
        return mechanism

    def batched(self, noise_scale: float = 1.0) -> Batched:
        """The vectorised form ``fn(data, rng, n)`` with noise scaled by ``noise_scale``."""
        fn = self.fn

        def mechanism(data: Any, rng: np.random.Generator, n: int) -> np.ndarray:
            return fn(data, rng, n, noise_scale=noise_scale)

        mechanism.__qualname__ = self.name
        return mechanism


EPSILON = 0.1


def _vector(data: Any) -> np.ndarray:
    return np.asarray(data, dtype=np.float64).ravel()


# ============================================================================ Laplace family
def laplace(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
            noise_scale: float = 1.0) -> np.ndarray:
    """x[0] + Lap(1 / epsilon): epsilon-DP for a query of sensitivity 1."""
    return _vector(data)[0] + rng.laplace(scale=noise_scale / epsilon, size=n)


def laplace_parallel(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = 0.005, copies: int = 20,
                     noise_scale: float = 1.0) -> np.ndarray:
    """``copies`` independent x[0] + Lap(1 / epsilon) (DP-Sniper's LaplaceParallel): (copies x epsilon)-DP."""
    return _vector(data)[0] + rng.laplace(scale=noise_scale / epsilon, size=(n, copies))


def noisy_hist1(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
                noise_scale: float = 1.0) -> np.ndarray:
    """x + Lap(1 / epsilon) per entry (StatDP Alg. 9): epsilon-DP when one entry moves by 1."""
    x = _vector(data)
    return x + rng.laplace(scale=noise_scale / epsilon, size=(n, len(x)))


def noisy_hist2(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
                noise_scale: float = 1.0) -> np.ndarray:
    """x + Lap(epsilon) per entry (StatDP Alg. 10, INCORRECT: scale epsilon, not 1 / epsilon; true epsilon 1/epsilon)."""
    x = _vector(data)
    return x + rng.laplace(scale=noise_scale * epsilon, size=(n, len(x)))


def prefix_sum(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
               noise_scale: float = 1.0) -> np.ndarray:
    """Prefix sums of x + Lap(1 / epsilon) (Wang et al. PLDI 2019): d epsilon-DP when every entry moves by 1."""
    x = _vector(data)
    return np.cumsum(x + rng.laplace(scale=noise_scale / epsilon, size=(n, len(x))), axis=1)


# ============================================================================ noisy max
def noisy_max1(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
               noise_scale: float = 1.0) -> np.ndarray:
    """argmax(x + Lap(2 / epsilon)) (StatDP Alg. 5): epsilon-DP."""
    x = _vector(data)
    return np.argmax(x + rng.laplace(scale=2 * noise_scale / epsilon, size=(n, len(x))), axis=1).astype(float)


def noisy_max2(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
               noise_scale: float = 1.0) -> np.ndarray:
    """argmax(x + Exp(2 / epsilon)) (StatDP Alg. 6): epsilon-DP."""
    x = _vector(data)
    return np.argmax(x + rng.exponential(scale=2 * noise_scale / epsilon, size=(n, len(x))), axis=1).astype(float)


def noisy_max3(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
               noise_scale: float = 1.0) -> np.ndarray:
    """max(x + Lap(2 / epsilon)) (StatDP Alg. 7, INCORRECT: releases the noisy maximum, not its index)."""
    x = _vector(data)
    return np.max(x + rng.laplace(scale=2 * noise_scale / epsilon, size=(n, len(x))), axis=1)


def noisy_max4(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
               noise_scale: float = 1.0) -> np.ndarray:
    """max(x + Exp(2 / epsilon)) (StatDP Alg. 8, INCORRECT: releases the noisy maximum)."""
    x = _vector(data)
    return np.max(x + rng.exponential(scale=2 * noise_scale / epsilon, size=(n, len(x))), axis=1)


# ============================================================================ sparse vector
def _cutoff(answers: np.ndarray, above: np.ndarray, c: int, aborted_code: float) -> np.ndarray:
    """After the c-th positive answer, every later answer is ``aborted_code`` (the c-th is still output)."""
    count = np.cumsum(above, axis=1)
    aborted = np.zeros_like(above)
    aborted[:, 1:] = count[:, :-1] >= c
    return np.where(aborted, aborted_code, answers)


def _svt(data: Any, rng: np.random.Generator, n: int | None, *, threshold_scale: float, query_scale: float | None,
         threshold: float, c: int | None, output_values: bool, noise_scale: float) -> np.ndarray:
    """The sparse vectors of Lyu et al.: rho ~ Lap(threshold_scale), answer j above when x_j + Lap(query_scale)
    (no noise if None) >= threshold + rho; released as 1/0, or the noisy answer / -1000 (``output_values``); after
    the c-th answer above (no cutoff if None) every answer is -1 (-2000 with values). n outputs, or one (``n`` None)
    computed as a user writes it: :func:`_svt_one`."""
    if n is None:
        return _svt_one(data, rng, threshold_scale=threshold_scale, query_scale=query_scale, threshold=threshold,
                        c=c, output_values=output_values, noise_scale=noise_scale)
    x = _vector(data)
    rho = rng.laplace(scale=noise_scale * threshold_scale, size=(n, 1))
    noisy = x + (rng.laplace(scale=noise_scale * query_scale, size=(n, len(x))) if query_scale else 0.0)
    above = noisy >= threshold + rho
    if output_values:
        answers = np.where(above, noisy, -1000.0)
        return _cutoff(answers, above, c, -2000.0) if c else answers
    answers = above.astype(float)
    return _cutoff(answers, above, c, -1.0) if c else answers


def _svt_one(data: Any, rng: np.random.Generator, *, threshold_scale: float, query_scale: float | None,
             threshold: float, c: int | None, output_values: bool, noise_scale: float) -> np.ndarray:
    """One output of :func:`_svt` by a loop over the answers that stops at the cutoff (2-3x faster than the
    batched code at n = 1). The noise is drawn in the batched code's order, so the same generator gives the same
    output (``tests/testing/test_kit_zoo.py``)."""
    x = _vector(data)
    out = np.full(len(x), -2000.0 if output_values else -1.0)
    rho = rng.laplace(scale=noise_scale * threshold_scale)
    noise = rng.laplace(scale=noise_scale * query_scale, size=len(x)) if query_scale else np.zeros(len(x))
    count = 0
    for j, noisy in enumerate((x + noise).tolist()):
        above = noisy >= threshold + rho
        out[j] = (noisy if above else -1000.0) if output_values else float(above)
        count += above
        if c is not None and count >= c:
            break
    return out


def one_output(batched: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``plain(data, rng, noise_scale=...)`` of a zoo function whose ``n = None`` computes one output as a user
    writes it (a loop, not the batched code at n = 1)."""
    def plain(data: Any, rng: np.random.Generator, *, noise_scale: float = 1.0) -> np.ndarray:
        return batched(data, rng, None, noise_scale=noise_scale)

    plain.__qualname__ = f"{batched.__name__}(one output)"
    return plain


def svt1(data: Any, rng: np.random.Generator, n: int | None, *, epsilon: float = EPSILON, c: int = 1,
         threshold: float = 0.5, noise_scale: float = 1.0) -> np.ndarray:
    """Lyu et al. Alg. 1 (StatDP's SVT): rho ~ Lap(2 / epsilon), nu ~ Lap(4c / epsilon), cutoff c: epsilon-DP."""
    return _svt(data, rng, n, threshold_scale=2 / epsilon, query_scale=4 * c / epsilon, threshold=threshold, c=c,
                output_values=False, noise_scale=noise_scale)


def svt2(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON, c: int = 1,
         threshold: float = 1.0, noise_scale: float = 1.0) -> np.ndarray:
    """Lyu et al. Alg. 2: rho ~ Lap(2c / epsilon) redrawn after every positive answer, nu ~ Lap(4c / epsilon),
    cutoff c: epsilon-DP."""
    x = _vector(data)
    rho = rng.laplace(scale=noise_scale * 2 * c / epsilon, size=n)
    noisy = x + rng.laplace(scale=noise_scale * 4 * c / epsilon, size=(n, len(x)))
    out = np.empty((n, len(x)))
    count = np.zeros(n)
    aborted = np.zeros(n, dtype=bool)
    for j in range(len(x)):
        above = noisy[:, j] >= threshold + rho
        out[:, j] = np.where(aborted, -1.0, above.astype(float))
        count += above
        fresh = rng.laplace(scale=noise_scale * 2 * c / epsilon, size=n)
        rho = np.where(above, fresh, rho)
        aborted |= count >= c
    return out


def svt2_plain(data: Any, rng: np.random.Generator, *, epsilon: float = EPSILON, c: int = 1, threshold: float = 1.0,
               noise_scale: float = 1.0) -> np.ndarray:
    """:func:`svt2` for one output, as a user writes it (a loop that stops at the cutoff; ~20x faster than the
    batched code at n = 1): rho ~ Lap(2c / epsilon), redrawn after each positive answer; answer j positive when
    x_j + Lap(4c / epsilon) >= threshold + rho; -1 after the c-th positive answer."""
    x = _vector(data)
    out = np.full(len(x), -1.0)
    rho = rng.laplace(scale=noise_scale * 2 * c / epsilon)
    count = 0
    for j, value in enumerate(x):
        above = value + rng.laplace(scale=noise_scale * 4 * c / epsilon) >= threshold + rho
        out[j] = float(above)
        if above:
            count += 1
            if count >= c:
                break
            rho = rng.laplace(scale=noise_scale * 2 * c / epsilon)
    return out


def svt3(data: Any, rng: np.random.Generator, n: int | None, *, epsilon: float = EPSILON, c: int = 1,
         threshold: float = 1.0, noise_scale: float = 1.0) -> np.ndarray:
    """Lyu et al. Alg. 3 (StatDP's iSVT4, INCORRECT): releases the noisy answer above the threshold."""
    return _svt(data, rng, n, threshold_scale=2 / epsilon, query_scale=2 * c / epsilon, threshold=threshold, c=c,
                output_values=True, noise_scale=noise_scale)


def svt4(data: Any, rng: np.random.Generator, n: int | None, *, epsilon: float = EPSILON, c: int = 1,
         threshold: float = 1.0, noise_scale: float = 1.0) -> np.ndarray:
    """Lyu et al. Alg. 4 (StatDP's iSVT3, INCORRECT): rho ~ Lap(4 / epsilon), nu ~ Lap(4 / (3 epsilon)):
    ((1 + 6c) / 4) epsilon-DP, not epsilon-DP."""
    return _svt(data, rng, n, threshold_scale=4 / epsilon, query_scale=4 / (3 * epsilon), threshold=threshold, c=c,
                output_values=False, noise_scale=noise_scale)


def svt5(data: Any, rng: np.random.Generator, n: int | None, *, epsilon: float = EPSILON, threshold: float = 1.0,
         noise_scale: float = 1.0) -> np.ndarray:
    """Lyu et al. Alg. 5 (StatDP's iSVT1, INCORRECT): no noise on the answers, no cutoff."""
    return _svt(data, rng, n, threshold_scale=2 / epsilon, query_scale=None, threshold=threshold, c=None,
                output_values=False, noise_scale=noise_scale)


def svt6(data: Any, rng: np.random.Generator, n: int | None, *, epsilon: float = EPSILON, threshold: float = 1.0,
         noise_scale: float = 1.0) -> np.ndarray:
    """Lyu et al. Alg. 6 (StatDP's iSVT2, INCORRECT): noisy answers but no cutoff."""
    return _svt(data, rng, n, threshold_scale=2 / epsilon, query_scale=2 / epsilon, threshold=threshold, c=None,
                output_values=False, noise_scale=noise_scale)


def numerical_svt(data: Any, rng: np.random.Generator, n: int | None, *, epsilon: float = EPSILON, c: int = 2,
                  threshold: float = 1.0, noise_scale: float = 1.0) -> np.ndarray:
    """Numerical SVT (Wang et al. PLDI 2019): above x + Lap(6c/eps) >= t + Lap(3/eps), release x + Lap(3c/eps),
    else 0; cutoff c (-1000 after it): epsilon-DP. ``n`` None: one output, by a loop."""
    x = _vector(data)
    if n is None:  # one output, as a user writes it: a loop that stops at the cutoff (noise drawn as below)
        out = np.full(len(x), -1000.0)
        rho1 = rng.laplace(scale=noise_scale * 3 / epsilon)
        tests = (x + rng.laplace(scale=noise_scale * 6 * c / epsilon, size=len(x))).tolist()
        values = (x + rng.laplace(scale=noise_scale * 3 * c / epsilon, size=len(x))).tolist()
        count = 0
        for j, (test, value) in enumerate(zip(tests, values)):
            above = test >= threshold + rho1
            out[j] = value if above else 0.0
            count += above
            if count >= c:
                break
        return out
    rho1 = rng.laplace(scale=noise_scale * 3 / epsilon, size=(n, 1))
    above = x + rng.laplace(scale=noise_scale * 6 * c / epsilon, size=(n, len(x))) >= threshold + rho1
    values = x + rng.laplace(scale=noise_scale * 3 * c / epsilon, size=(n, len(x)))
    return _cutoff(np.where(above, values, 0.0), above, c, -1000.0)


def svt34_parallel(data: Any, rng: np.random.Generator, n: int | None, *, epsilon: float = EPSILON, c: int = 2,
                   threshold: float = 1.0, noise_scale: float = 1.0) -> np.ndarray:
    """SVT3 and SVT4 on the same input, both released (DP-Sniper's SVT34Parallel; INCORRECT for 2 epsilon)."""
    return np.concatenate([svt3(data, rng, n, epsilon=epsilon, c=c, threshold=threshold, noise_scale=noise_scale),
                           svt4(data, rng, n, epsilon=epsilon, c=c, threshold=threshold, noise_scale=noise_scale)],
                          axis=-1)


# ============================================================================ geometric, RAPPOR
def geometric_epsilon(epsilon: float) -> float:
    """The privacy GeoSample(epsilon, n) actually has: ln(1 + 2^-k), k = ceil(ln(2 / epsilon))
    (Balcer & Vadhan 2018, Thm 4.7)."""
    return math.log1p(2.0 ** -math.ceil(math.log(2.0 / epsilon)))


def truncated_geometric(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = EPSILON,
                        people: int = 5, noise_scale: float = 1.0) -> np.ndarray:
    """GeoSample (Balcer & Vadhan 2018, Alg. 4.8): a count c in {0..n} released through integer arithmetic.

    With k = ceil(ln(2 / epsilon)) and d = (2^(k+1) + 1)(2^k + 1)^(n-1), F(z) = 2^(k(c-z)) (2^k + 1)^(n-(c-z))
    for z < c and d - 2^(k(z-c+1)) (2^k + 1)^(n-1-(z-c)) for c <= z < n, F(n) = d; output the least z
    with F(z) >= U, U uniform on {1..d}. ``noise_scale`` != 1 is not supported (no continuous scale).
    """
    if noise_scale != 1.0:
        raise ValueError("truncated_geometric has no continuous noise scale to reduce")
    count = round(float(_vector(data)[0]))
    if not 0 <= count <= people:
        raise ValueError(f"the count must be in [0, {people}], got {count}")
    k = math.ceil(math.log(2.0 / epsilon))
    d = (2 ** (k + 1) + 1) * (2 ** k + 1) ** (people - 1)
    cdf = []
    for z in range(people + 1):
        if z < count:
            cdf.append(2 ** (k * (count - z)) * (2 ** k + 1) ** (people - (count - z)))
        elif z < people:
            cdf.append(d - 2 ** (k * (z - count + 1)) * (2 ** k + 1) ** (people - 1 - (z - count)))
        else:
            cdf.append(d)
    u = rng.integers(1, d + 1, size=n)  # d < 2^63 for the default instance
    return np.searchsorted(np.asarray(cdf, dtype=np.int64), u, side="left").astype(float)


def _bloom(value: float, hashes: int, size: int) -> np.ndarray:
    bits = np.zeros(size)
    for i in range(hashes):
        digest = hashlib.sha256(f"{i}:{value:g}".encode()).digest()
        bits[int.from_bytes(digest[:8], "little") % size] = 1.0
    return bits


def one_time_rappor(data: Any, rng: np.random.Generator, n: int, *, hashes: int = 4, size: int = 20,
                    f: float = 0.95, noise_scale: float = 1.0) -> np.ndarray:
    """RAPPOR's permanent randomised response (Erlingsson et al. 2014, steps 1-2): each Bloom bit is set to 1
    w.p. f/2, to 0 w.p. f/2, kept otherwise; (2 h ln((1 - f/2) / (f/2)))-DP. ``noise_scale`` scales f."""
    bits = _bloom(_vector(data)[0], hashes, size)
    f = min(1.0, f * noise_scale)
    choice = rng.random((n, size))
    return np.where(choice < f / 2, 1.0, np.where(choice < f, 0.0, bits))


def rappor(data: Any, rng: np.random.Generator, n: int, *, hashes: int = 4, size: int = 20, f: float = 0.75,
           p: float = 0.45, q: float = 0.55, noise_scale: float = 1.0) -> np.ndarray:
    """RAPPOR (steps 1-3): permanent response with f, then report 1 w.p. q on a 1 bit and p on a 0 bit."""
    permanent = one_time_rappor(data, rng, n, hashes=hashes, size=size, f=f, noise_scale=noise_scale)
    return (rng.random((n, size)) < np.where(permanent == 1.0, q, p)).astype(float)


def rappor_epsilon(hashes: int, f: float) -> float:
    """2 h ln((1 - f/2) / (f/2)): the permanent response's epsilon (Erlingsson et al. 2014, Thm 1)."""
    return 2 * hashes * math.log((1 - f / 2) / (f / 2))


# ============================================================================ Gaussian
def gaussian(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = 1.0, delta: float = 1e-5,
             noise_scale: float = 1.0) -> np.ndarray:
    """x + N(0, sigma^2) per entry, sigma the analytic calibration for l2 sensitivity 1 (one entry moves by 1;
    :func:`~dpfair_analysis.privacy.gaussian.gaussian_sigma_analytic`)."""
    from dpfair_analysis.privacy.gaussian import gaussian_sigma_analytic  # dp_accounting: loaded when drawn

    x = _vector(data)
    return x + rng.normal(scale=noise_scale * gaussian_sigma_analytic(epsilon, delta, 1.0), size=(n, len(x)))


def gaussian_l2_mistake(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = 1.0, delta: float = 1e-5,
                        noise_scale: float = 1.0) -> np.ndarray:
    """The same noise applied where EVERY entry may move by 1 (INCORRECT: the l2 sensitivity is sqrt(d), not 1)."""
    return gaussian(data, rng, n, epsilon=epsilon, delta=delta, noise_scale=noise_scale)


# ============================================================================ DP-Auditorium's mean
def mean_laplace(data: Any, rng: np.random.Generator, n: int, *, epsilon: float = 1.0, low: float = 0.0,
                 high: float = 1.0, noise_scale: float = 1.0) -> np.ndarray:
    """clip(x).mean() + Lap((high - low) / (epsilon len(x))) (DP-Auditorium's MeanMechanism, Laplace, exact counts):
    epsilon-DP under replace-one, NOT under add-remove (the noise scale depends on the data's own size)."""
    x = np.clip(_vector(data), low, high)
    return x.mean() + rng.laplace(scale=noise_scale * (high - low) / (epsilon * len(x)), size=n)


# ============================================================================ the catalogue
def _queries(mode: str) -> QueryVector:
    return QueryVector(sensitivity=1.0, mode=mode)


def catalogue() -> dict[str, ZooMechanism]:
    """Every reference mechanism by name (module docstring)."""
    ones5, ones10, one = np.ones(5), np.ones(10), np.ones(1)
    sniper = "DP-Sniper (Bichsel et al. S&P 2021) evaluation"
    statdp = "StatDP (Ding et al. CCS 2018)"
    lyu = "Lyu, Su & Li (VLDB 2017)"
    entries = [
        ZooMechanism("laplace", laplace, EPSILON, 0.0, _queries("one"), one, True, f"{sniper}: LaplaceMechanism",
                     EPSILON),
        ZooMechanism("truncated_geometric", truncated_geometric, geometric_epsilon(EPSILON), 0.0, _queries("one"),
                     one, True, f"{sniper}: TruncatedGeometricMechanism (Balcer & Vadhan 2018, Alg. 4.8)",
                     geometric_epsilon(EPSILON), "claim = the proved ln(1 + 2^-k), not the nominal 0.1"),
        ZooMechanism("noisy_hist1", noisy_hist1, EPSILON, 0.0, _queries("one"), ones5, True, f"{statdp} Alg. 9",
                     EPSILON),
        ZooMechanism("noisy_hist2", noisy_hist2, EPSILON, 0.0, _queries("one"), ones5, False, f"{statdp} Alg. 10",
                     1 / EPSILON),
        ZooMechanism("noisy_max1", noisy_max1, EPSILON, 0.0, _queries("every"), ones5, True, f"{statdp} Alg. 5",
                     EPSILON),
        ZooMechanism("noisy_max2", noisy_max2, EPSILON, 0.0, _queries("every"), ones5, True, f"{statdp} Alg. 6",
                     EPSILON),
        ZooMechanism("noisy_max3", noisy_max3, EPSILON, 0.0, _queries("every"), ones5, False, f"{statdp} Alg. 7",
                     None),
        ZooMechanism("noisy_max4", noisy_max4, EPSILON, 0.0, _queries("every"), ones5, False, f"{statdp} Alg. 8",
                     None),
        ZooMechanism("svt1", svt1, EPSILON, 0.0, _queries("every"), ones10, True, f"{lyu} Alg. 1 = {statdp} SVT",
                     EPSILON, "c = 1, threshold 0.5", plain=one_output(svt1)),
        ZooMechanism("svt2", svt2, EPSILON, 0.0, _queries("every"), ones10, True, f"{lyu} Alg. 2", EPSILON,
                     "c = 1, threshold 1", plain=svt2_plain),
        ZooMechanism("svt3", svt3, EPSILON, 0.0, _queries("every"), ones10, False, f"{lyu} Alg. 3 = {statdp} iSVT4",
                     math.inf, "c = 1", plain=one_output(svt3)),
        ZooMechanism("svt4", svt4, EPSILON, 0.0, _queries("every"), ones10, False, f"{lyu} Alg. 4 = {statdp} iSVT3",
                     (1 + 6) / 4 * EPSILON, "c = 1: (1 + 6c)/4 epsilon", plain=one_output(svt4)),
        ZooMechanism("svt5", svt5, EPSILON, 0.0, _queries("every"), ones10, False, f"{lyu} Alg. 5 = {statdp} iSVT1",
                     math.inf, plain=one_output(svt5)),
        ZooMechanism("svt6", svt6, EPSILON, 0.0, _queries("every"), ones10, False, f"{lyu} Alg. 6 = {statdp} iSVT2",
                     math.inf, plain=one_output(svt6)),
        ZooMechanism("numerical_svt", numerical_svt, EPSILON, 0.0, _queries("every"), ones10, True,
                     f"{sniper}: NumericalSVT (Wang et al. PLDI 2019)", EPSILON, "c = 2",
                     plain=one_output(numerical_svt)),
        ZooMechanism("prefix_sum", prefix_sum, 10 * EPSILON, 0.0, _queries("every"), ones10, True,
                     f"{sniper}: PrefixSum (Wang et al. PLDI 2019)", 10 * EPSILON,
                     "claim = 10 x 0.1 (every one of 10 entries moves)"),
        ZooMechanism("laplace_parallel", laplace_parallel, 20 * 0.005, 0.0, _queries("one"), one, True,
                     f"{sniper}: LaplaceParallel (20 x epsilon 0.005)", 0.1),
        ZooMechanism("svt34_parallel", svt34_parallel, 2 * EPSILON, 0.0, _queries("every"), ones10, False,
                     f"{sniper}: SVT34Parallel", math.inf, "claim = 0.1 + 0.1 by composition, c = 2",
                     plain=one_output(svt34_parallel)),
        ZooMechanism("one_time_rappor", one_time_rappor, rappor_epsilon(4, 0.95), 0.0, _queries("one"), one, True,
                     f"{sniper}: OneTimeRappor (h = 4, 20 bits, f = 0.95)", rappor_epsilon(4, 0.95),
                     "Bloom hash: SHA-256 (DP-Sniper: MurmurHash3), so the two inputs' bits differ"),
        ZooMechanism("rappor", rappor, rappor_epsilon(4, 0.75), 0.0, _queries("one"), one, True,
                     f"{sniper}: Rappor (h = 4, 20 bits, f = 0.75, p = 0.45, q = 0.55)", None,
                     "claim = the permanent response's bound 4.09 (the instantaneous one only helps)"),
        ZooMechanism("gaussian", gaussian, 1.0, 1e-5, _queries("one"), ones5, True,
                     "Gaussian mechanism, analytic calibration (Balle & Wang 2018)", 1.0),
        ZooMechanism("gaussian_l2_mistake", gaussian_l2_mistake, 1.0, 1e-5, _queries("every"), ones10, False,
                     "Gaussian calibrated to l2 sensitivity 1 where every entry moves (sqrt(10))", None),
        ZooMechanism("mean_replace_one", mean_laplace, 1.0, 0.0, ReplaceOne(bounds=(0.0, 1.0)),
                     np.array([0.2, 0.8]), True, "DP-Auditorium (Kong et al. 2024) MeanMechanism, Laplace", 1.0),
        ZooMechanism("mean_add_remove", mean_laplace, 1.0, 0.0, AddRemove(bounds=(0.0, 1.0)),
                     np.array([0.2, 0.8]), False, "DP-Auditorium (Kong et al. 2024) MeanMechanism, Laplace, "
                     "add-remove", math.inf, "the noise scale uses the data's own size"),
    ]
    return {e.name: e for e in entries}


__all__ = ["ZooMechanism", "catalogue", "geometric_epsilon", "rappor_epsilon"]
