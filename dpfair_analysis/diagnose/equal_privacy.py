"""The privacy side of a diagnosis: each recommendation's step count or noise multiplier at the plan's epsilon.

A diagnosis with its recommendations asks the accountant the same few questions many times -- how many
steps of DPSGD-F, Naive or FairDP fit in DP-SGD's epsilon; which sigma meets epsilon with a 4x larger batch,
at twice the epsilon, or beside the mitigation's one-time count -- and dp_accounting answered each probe of
each search with a fresh RDP curve (38% of a diagnosis). Here:

* **Steps within epsilon** (:func:`steps_within`): epsilon(T) is increasing in T and, under RDP, the conversion
  of T RDP_1 (:func:`~dpfair_analysis.privacy.accounting.epsilons_of_repeats`): one curve per noise
  multiplier, then a bisection on T costs conversions only. Equal to
  :func:`~dpfair_analysis.privacy.accounting.max_steps_within`.
* **Noise for epsilon** (:func:`noise_for`): epsilon(sigma) needs a curve per probe, but restricting the
  conversion's minimum over Renyi orders to a subset W of them can only raise it,
  eps_W(sigma) = min_{alpha in W} eps_alpha(sigma) >= eps(sigma), so a sigma with eps_W(sigma) <= target meets
  the target under the full accountant too. W is the window of :data:`WINDOW` orders around the order
  that is optimal for the planned run; probes are bisection steps in log sigma from a bracket around a
  guess, each a curve at |W| orders (about 1/10 of the full list). The result is within ``tolerance`` of
  the smallest sigma meeting the target over W; that is sigma* itself unless the optimal order of sigma*
  lies outside W (then it is a little larger: still private, slightly pessimistic). Under PLD there is no
  such shortcut and :func:`~dpfair_analysis.privacy.accounting.calibrate_noise_multiplier` runs.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np
from dp_accounting import dp_event

from dpfair_analysis.privacy.accounting import AccountingSpec, calibrate_noise_multiplier, epsilons_of_repeats
from dpfair_analysis.validation import check_positive, check_positive_int

#: Renyi orders in the window a noise search minimises over (around the planned run's optimal order).
WINDOW = 12


def _step(sampling_rate: float, sigma: float) -> dp_event.DpEvent:
    return dp_event.PoissonSampledDpEvent(sampling_rate, dp_event.GaussianDpEvent(sigma))


def steps_within(epsilon: float, delta: float, *, sampling_rate: float, noise_multiplier: float, max_steps: int,
                 accounting: AccountingSpec, once: Sequence[dp_event.DpEvent] = ()) -> int:
    """Largest T <= ``max_steps`` whose T Poisson-sampled Gaussian steps (and ``once``) spend <= ``epsilon``
    (0 if one step already exceeds it); bisection on T over one RDP curve."""
    check_positive(epsilon, "epsilon")
    max_steps = check_positive_int(max_steps, "max_steps")
    event = _step(sampling_rate, noise_multiplier)

    def spent(steps: int) -> float:
        return float(epsilons_of_repeats(event, [steps], delta, accounting=accounting, once=once)[0])

    if spent(max_steps) <= epsilon:
        return max_steps
    low, high = 0, max_steps
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if spent(middle) <= epsilon else (low, middle)
    return low


def order_window(accounting: AccountingSpec, optimal_order: float | None, *, width: int = WINDOW) -> AccountingSpec:
    """The spec restricted to the ``width`` Renyi orders around ``optimal_order`` (the spec itself under PLD or
    without an order)."""
    if accounting.accountant != "rdp" or optimal_order is None:
        return accounting
    orders = np.asarray(accounting.resolved_orders, dtype=float)
    if len(orders) <= width:
        return accounting
    best = int(np.argmin(np.abs(orders - optimal_order)))
    start = min(max(best - width // 2, 0), len(orders) - width)
    return replace(accounting, orders=tuple(float(a) for a in orders[start:start + width]))


def centred_window(accounting: AccountingSpec, near: tuple[float, float, int, float | None], *, sampling_rate: float,
                   sigma: float, steps: int, width: int = WINDOW) -> AccountingSpec:
    """:func:`order_window` around the order likely optimal at (``sampling_rate``, ``sigma``, ``steps``), from
    the optimal order alpha_0 at a known point ``near`` = (q_0, sigma_0, T_0, alpha_0): the subsampled
    Gaussian's RDP grows about as T q^2 alpha / sigma^2, and alpha* - 1 ~ sqrt(log(1/delta) / rho) for
    RDP(alpha) ~ rho alpha, so alpha* - 1 scales as sqrt(T_0 q_0^2 / sigma_0^2 / (T q^2 / sigma^2))."""
    q0, sigma0, steps0, order0 = near
    if order0 is None:
        return accounting
    scale = (steps0 * q0 ** 2 / sigma0 ** 2) / (steps * sampling_rate ** 2 / sigma ** 2)
    return order_window(accounting, 1 + (order0 - 1) * math.sqrt(scale), width=width)


def noise_for(epsilon: float, delta: float, *, sampling_rate: float, steps: int, accounting: AccountingSpec,
              near: tuple[float, float, int, float | None] | None = None, guess: float = 1.0,
              tolerance: float = 1e-2, once: Sequence[dp_event.DpEvent] = ()) -> float:
    """A noise multiplier whose ``steps`` Poisson-sampled Gaussian steps (and ``once``) meet ``epsilon`` at
    ``delta`` under ``accounting``, within ``tolerance`` (relative) of the smallest over a window of orders
    (module docstring; centred from ``near`` = (q_0, sigma_0, T_0, optimal order), the plan's, by
    :func:`centred_window`, then slid while a neighbouring window does better). ValueError if no sigma in
    [0.1, 1e4] meets it."""
    check_positive(epsilon, "epsilon")
    steps = check_positive_int(steps, "steps")
    if accounting.accountant != "rdp":
        return calibrate_noise_multiplier(epsilon, delta, sampling_rate=sampling_rate, steps=steps,
                                          accounting=accounting, tolerance=tolerance, other_events=once)
    spec = (centred_window(accounting, near, sampling_rate=sampling_rate, sigma=guess, steps=steps)
            if near is not None else accounting)
    all_orders = tuple(accounting.resolved_orders)

    def spent(sigma: float, orders: tuple[float, ...]) -> float:
        return float(epsilons_of_repeats(_step(sampling_rate, sigma), [steps], delta,
                                         accounting=replace(accounting, orders=orders), once=once)[0])

    sigma = guess
    for _ in range(len(all_orders)):  # slide the window towards the optimal order at the answer
        orders = tuple(spec.resolved_orders)
        sigma = _smallest_meeting(lambda s, orders=orders: _log_ratio(spent(s, orders), epsilon), guess=sigma,
                                  tolerance=tolerance)
        start, width = all_orders.index(orders[0]), len(orders)
        here = spent(sigma, orders)
        shifted = [tuple(all_orders[i:i + width]) for i in (max(start - width // 2, 0),
                                                            min(start + width // 2, len(all_orders) - width))]
        better = min(shifted, key=lambda o: spent(sigma, o))
        if better == orders or spent(sigma, better) >= here * (1 - 1e-9):
            return sigma
        spec = replace(accounting, orders=better)
    return sigma


def _log_ratio(spent: float, epsilon: float) -> float:
    """log(spent / target): <= 0 meets the target."""
    return math.log(spent / epsilon) if spent > 0 else -math.inf


def _smallest_meeting(f, *, guess: float, tolerance: float, low_end: float = 0.1, high_end: float = 1e4) -> float:
    """The smallest sigma (within ``tolerance``, on the meeting side) with ``f(sigma) <= 0``, f = log(eps /
    target) decreasing in sigma: a bracket grown from ``guess`` (eps ~ 1/sigma suggests the step), then
    regula falsi in (log sigma, f) with Illinois halving."""
    x0 = math.log(min(max(guess, low_end), high_end))
    f0 = f(math.exp(x0))
    # eps ~ 1/sigma: log sigma moves by about log(eps / target); overshoot a little so one step brackets
    step = min(max(abs(f0) * 1.2, 0.05), 2.0) * (1 if f0 > 0 else -1)
    x1 = min(max(x0 + step, math.log(low_end)), math.log(high_end))
    f1 = f(math.exp(x1))
    while (f0 > 0) == (f1 > 0):
        if x1 in (math.log(low_end), math.log(high_end)):
            if f1 <= 0:
                return math.exp(x1)
            raise ValueError(f"no noise multiplier in [{low_end}, {high_end}] meets the target")
        x0, f0 = x1, f1
        x1 = min(max(x1 + 2 * step, math.log(low_end)), math.log(high_end))
        step *= 2
        f1 = f(math.exp(x1))
    (lo, flo), (hi, fhi) = ((x0, f0), (x1, f1)) if f0 > 0 else ((x1, f1), (x0, f0))  # f(lo) > 0 >= f(hi)
    side = 0
    while hi - lo > math.log1p(tolerance):
        x = hi - fhi * (hi - lo) / (fhi - flo)
        x = min(max(x, lo + 0.05 * (hi - lo)), hi - 0.05 * (hi - lo))
        fx = f(math.exp(x))
        if fx > 0:
            lo, flo = x, fx
            fhi, side = (fhi / 2, side) if side == -1 else (fhi, -1)
        else:
            hi, fhi = x, fx
            flo, side = (flo / 2, side) if side == 1 else (flo, 1)
    return math.exp(hi)
