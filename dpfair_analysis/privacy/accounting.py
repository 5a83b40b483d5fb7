"""Privacy accounting from ``dp_accounting`` events.

A mechanism is described by what it released, as an immutable
:class:`dp_accounting.dp_event.DpEvent` (a Poisson-sampled Gaussian step, a
composition of steps, ...). An *accountant* turns events into an
:math:`(\\varepsilon, \\delta)` guarantee. Three are offered:

``accountant="rdp", conversion="improved"``
    dp_accounting's :class:`~dp_accounting.rdp.RdpAccountant` with its own (current)
    RDP-to-DP conversion (Balle et al. 2020, Prop. 12 of arXiv:2004.00010 v4, plus a
    KL bound for small RDP),

    .. math:: \\varepsilon = \\min_\\alpha \\; \\mathrm{RDP}(\\alpha)
              + \\log(1 - 1/\\alpha) - \\frac{\\log(\\delta\\alpha)}{\\alpha - 1}.

``accountant="rdp", conversion="classic"``
    the same RDP curve with Mironov's (2017, Prop. 3) conversion used by the DPSGD-F
    papers' tool (TensorFlow Privacy's ``compute_dp_sgd_privacy`` of 2019-2020),

    .. math:: \\varepsilon = \\min_\\alpha \\; \\mathrm{RDP}(\\alpha)
              + \\frac{\\log(1/\\delta)}{\\alpha - 1},

    by default over :data:`PAPER_RDP_ORDERS`. It is always looser than "improved" at
    the same orders; use it only to reproduce published numbers.

``accountant="pld"``
    dp_accounting's :class:`~dp_accounting.pld.PLDAccountant` (privacy loss
    distributions, pessimistic discretisation): the tightest of the three, up to a
    discretisation error of the order of ``value_discretization_interval``.

All RDP values come from dp_accounting; nothing here re-derives an RDP formula. Only
the classic conversion (one line, from the accountant's public ``.rdp`` and
``.orders``) is written here.

The choice of accountant, conversion, Renyi orders, neighbouring relation and PLD grid is
one frozen, validated, hashable :class:`AccountingSpec`; every function here, the
trainers' configs and the result caches carry that one object.

Neighbouring relations: add/remove one record (default; what DP-SGD's Poisson-sampling
analysis assumes) or replace one record. dp_accounting's PLD accountant models both; its
RDP accountant models only add/remove for Poisson sampling, so ``accountant="rdp"`` with
``neighboring="replace_one"`` accounts every release *without* subsampling amplification,
as a plain Gaussian of its replace distance (:func:`replace_one_as_add_remove`; valid by
the joint convexity of exp((alpha - 1) D_alpha), looser).

What is treated as public: the training-set size n (the sampling rate q = b/n, the number of steps, a default
learning rate 1/sqrt(T), FedAvg's clients per round), the group labels' *set* and the configuration. This is the
usual convention of DP-SGD analyses (Abadi et al. 2016, Opacus); under add/remove a neighbour changes n by one,
so a user for whom the size itself is secret must fix these from a public bound, not from the data.

What a training run actually released is recorded step by step in a
:class:`PrivacyLedger`, whose records can be saved and re-accounted later under any spec.

Why one module of about 1,000 lines: it is one cohesive accountant layer, as dp_accounting's own
``rdp_privacy_accountant.py`` is -- the spec, the conversions, calibration and the ledger all read and
write the same event and curve representations, and a reader checking a printed epsilon follows one
path through one file (:func:`epsilon_from_event` -> the spec's accountant -> the conversion).
"""

from __future__ import annotations

import copy
import logging
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
from dp_accounting import dp_event, mechanism_calibration, privacy_accountant
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from dpfair_analysis.errors import ArgumentError
from dpfair_analysis.validation import (
    check_choice,
    check_delta,
    check_fraction,
    check_positive,
    check_positive_int,
)

# dp_accounting logs (through absl) every fractional Renyi order it drops when its series
# does not converge (large sampling rates, small noise). Dropping an order only loosens the
# bound, so the result stays valid; the per-order messages would drown a training log.
logging.getLogger("absl").setLevel(logging.ERROR)

__all__ = [
    "ACCOUNTANTS",
    "AccountingSpec",
    "CONVERSIONS",
    "DEFAULT_RDP_ORDERS",
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "NEIGHBORING_RELATIONS",
    "PAPER_RDP_ORDERS",
    "ClassicConversionRdpAccountant",
    "PrivacyLedger",
    "calibrate_noise_multiplier",
    "classic_delta_from_rdp",
    "classic_epsilon_from_rdp",
    "epsilons_from_rdp_curves",
    "compose_events",
    "delta_from_event",
    "dpsgd_epsilon",
    "dpsgd_privacy_summary",
    "epsilon_from_event",
    "epsilons_of_repeats",
    "event_from_dict",
    "event_to_dict",
    "ledger_from_records",
    "max_steps_within",
    "poisson_gaussian_event",
    "replace_one_as_add_remove",
    "steps_for_epochs",
]

#: Orders of TensorFlow Privacy's ``compute_dp_sgd_privacy`` as used by the DPSGD-F
#: papers (and Opacus's ``RDPAccountant.DEFAULT_ALPHAS``): 1.1, 1.2, ..., 10.9, 12, ..., 63.
PAPER_RDP_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10.0 for x in range(1, 100)] + [float(a) for a in range(12, 64)]
)

#: dp_accounting's default orders (the paper list plus 11 and 128, 256, 512, 1024, which
#: matter for small epsilons). Kept identical to dp_accounting's so that the default
#: accountant here *is* dp_accounting's default ``RdpAccountant``.
DEFAULT_RDP_ORDERS: tuple[float, ...] = tuple(
    float(a) for a in rdp_privacy_accountant.DEFAULT_RDP_ORDERS
)

#: PLD discretisation of privacy-loss values (dp_accounting's default).
DEFAULT_VALUE_DISCRETIZATION_INTERVAL: float = 1e-4

ACCOUNTANTS: tuple[str, ...] = ("rdp", "pld")
CONVERSIONS: tuple[str, ...] = ("improved", "classic")
NEIGHBORING_RELATIONS: dict[str, privacy_accountant.NeighboringRelation] = {
    "add_remove": privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": privacy_accountant.NeighboringRelation.REPLACE_ONE,
}

# Bracket of the noise-multiplier search in `calibrate_noise_multiplier`. Below 0.1 a
# PLD evaluation needs a grid of 10^7+ points and no DP-SGD run uses such noise.
_MIN_SEARCH_NOISE = 0.1
_MAX_SEARCH_NOISE = 1e4


# --------------------------------------------------------------------------- events


def steps_for_epochs(n: int, batch_size: int, epochs: float) -> int:
    """Number of DP-SGD steps in ``epochs`` passes over ``n`` examples.

    .. math:: T = \\lceil \\text{epochs} \\cdot n / B \\rceil,

    as in TensorFlow Privacy's ``compute_dp_sgd_privacy`` (the papers' tool). Opacus's
    ``get_noise_multiplier`` uses ``int(epochs / (B / n))`` instead, which can be one less.

    Parameters
    ----------
    n : int
        Training-set size (>= 1).
    batch_size : int
        Expected (Poisson) batch size :math:`B`, ``1 <= B <= n``.
    epochs : float
        Number of passes, > 0 (may be fractional).

    Returns
    -------
    int
        :math:`T \\ge 1`.
    """
    n, batch_size = _check_n_and_batch_size(n, batch_size)
    if isinstance(epochs, Integral) and not isinstance(epochs, bool):
        epochs = check_positive_int(epochs, "epochs")
        return -(-epochs * n // batch_size)  # exact integer ceiling
    epochs = check_positive(epochs, "epochs")
    return max(1, int(math.ceil(epochs * n / batch_size)))


def poisson_gaussian_event(
    sampling_rate: float, noise_multiplier: float, *, steps: int = 1
) -> dp_event.DpEvent:
    """``steps`` compositions of a Poisson-sampled Gaussian mechanism (a DP-SGD run).

    Each step includes every example independently with probability :math:`q`, sums
    a function of L2 sensitivity 1 over the sample (e.g. gradients clipped to
    :math:`C`, divided by :math:`C`) and adds :math:`\\mathcal N(0, \\sigma^2 I)`.

    Parameters
    ----------
    sampling_rate : float
        :math:`q \\in (0, 1]`.
    noise_multiplier : float
        :math:`\\sigma > 0` (noise standard deviation / L2 sensitivity). ``0`` is
        rejected: without noise epsilon is infinite.
    steps : int
        Number of steps :math:`T \\ge 1`.

    Returns
    -------
    dp_event.DpEvent
        ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), T)``;
        for ``T == 1`` the bare ``PoissonSampledDpEvent`` (equivalent, and what a
        :class:`PrivacyLedger` records per step).
    """
    q = check_fraction(sampling_rate, "sampling_rate")
    sigma = _check_noise_multiplier(noise_multiplier)
    steps = check_positive_int(steps, "steps")
    step = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
    return step if steps == 1 else dp_event.SelfComposedDpEvent(step, steps)


def compose_events(events: Iterable[dp_event.DpEvent]) -> dp_event.ComposedDpEvent:
    """The (adaptive) composition of ``events``, in order.

    Parameters
    ----------
    events : iterable of dp_event.DpEvent
        The released mechanisms; an empty iterable is the empty composition.

    Returns
    -------
    dp_event.ComposedDpEvent
    """
    if isinstance(events, dp_event.DpEvent) or not isinstance(events, Iterable):
        raise TypeError(f"events must be an iterable of DpEvent, got {events!r}")
    events = list(events)
    for i, event in enumerate(events):
        _check_event(event, f"events[{i}]")
    return dp_event.ComposedDpEvent(events)


# ------------------------------------------------------------------ conversions


def classic_epsilon_from_rdp(
    orders: Sequence[float], rdp: Sequence[float], delta: float
) -> tuple[float, float]:
    """Classic RDP-to-DP conversion (Mironov 2017, Prop. 3), minimised over orders.

    .. math:: \\varepsilon(\\delta) = \\min_{\\alpha} \\Big[\\mathrm{RDP}(\\alpha)
              + \\frac{\\log(1/\\delta)}{\\alpha - 1}\\Big].

    If the RDP curve is identically 0 (nothing released) the two output distributions
    coincide and epsilon is 0, although the formula would give
    :math:`\\log(1/\\delta)/(\\alpha_{\\max}-1)`. Negative RDP values (numerical noise
    in extreme settings) are clamped to 0, which is conservative.

    Parameters
    ----------
    orders : sequence of float
        Renyi orders :math:`\\alpha > 1`.
    rdp : sequence of float
        :math:`\\mathrm{RDP}(\\alpha)` at each order (may be ``inf``).
    delta : float
        :math:`\\delta \\in (0, 1)`.

    Returns
    -------
    (float, float)
        Epsilon and the minimising order.
    """
    delta = check_delta(delta)
    orders_arr, rdp_arr = _check_rdp_curve(orders, rdp)
    if np.all(rdp_arr == 0):
        return 0.0, float(orders_arr[-1])
    eps = rdp_arr + math.log(1 / delta) / (orders_arr - 1)
    i = int(np.argmin(eps))
    return float(eps[i]), float(orders_arr[i])


def epsilons_from_rdp_curves(orders: Sequence[float], curves: np.ndarray, delta: float, *,
                             conversion: str = "improved") -> np.ndarray:
    """Epsilon at ``delta`` of each row of ``curves`` (RDP values at ``orders``), at once: the conversion of
    :func:`classic_epsilon_from_rdp` (``"classic"``) or dp_accounting's ``compute_epsilon`` (``"improved"``:
    Canonne, Kamath & Steinke 2020, Prop. 12; Asoodeh et al. 2020, Eq. 20),

    .. math:: \\varepsilon = \\max\\Big(0, \\min_{\\alpha > 1.01} \\mathrm{RDP}(\\alpha)
              + \\log(1 - 1/\\alpha) - \\frac{\\log(\\delta \\alpha)}{\\alpha - 1}\\Big),

    with its edge cases (epsilon 0 where delta^2 + expm1(-RDP) > 0 or RDP < 0; no bound for alpha <= 1.01),
    row by row -- a privacy ledger's epsilon after every step in one pass instead of T conversions.

    Parameters
    ----------
    orders : sequence of float
        Renyi orders alpha >= 1.
    curves : numpy.ndarray
        Shape (m, len(orders)): RDP(alpha) of m mechanisms.
    delta : float
        delta in (0, 1).
    conversion : {"improved", "classic"}
        Which RDP-to-DP conversion.
    """
    delta = check_delta(delta)
    check_choice(conversion, "conversion", CONVERSIONS)
    a = np.asarray(orders, dtype=float)
    r = np.atleast_2d(np.asarray(curves, dtype=float))
    if r.shape[1] != len(a) or np.isnan(r).any():
        raise ValueError(f"curves must have shape (m, {len(a)}) and no NaN, got shape {r.shape}")
    if conversion == "classic":
        clamped = np.maximum(r, 0.0)
        eps = (clamped + math.log(1 / delta) / (a - 1)).min(axis=1)
        return np.where((clamped == 0).all(axis=1), 0.0, eps)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bound = r + np.log1p(-1 / a) - np.log(delta * a) / (a - 1)
    bound = np.where(a > 1.01, bound, np.inf)
    bound = np.where(delta ** 2 + np.expm1(-r) > 0, 0.0, bound)
    bound = np.where(r < 0, 0.0, bound)
    return np.maximum(0.0, bound.min(axis=1))


def classic_delta_from_rdp(
    orders: Sequence[float], rdp: Sequence[float], epsilon: float
) -> tuple[float, float]:
    """Inverse of :func:`classic_epsilon_from_rdp`: delta at a given epsilon.

    .. math:: \\delta(\\varepsilon) = \\min\\Big(1, \\min_{\\alpha}
              \\exp\\big((\\alpha - 1)(\\mathrm{RDP}(\\alpha) - \\varepsilon)\\big)\\Big).

    Parameters
    ----------
    orders, rdp : sequence of float
        As in :func:`classic_epsilon_from_rdp`.
    epsilon : float
        :math:`\\varepsilon > 0`.

    Returns
    -------
    (float, float)
        Delta and the minimising order.
    """
    epsilon = check_positive(epsilon, "epsilon")
    orders_arr, rdp_arr = _check_rdp_curve(orders, rdp)
    if np.all(rdp_arr == 0):
        return 0.0, float(orders_arr[-1])
    log_delta = (orders_arr - 1) * (rdp_arr - epsilon)
    i = int(np.argmin(log_delta))
    return float(min(1.0, math.exp(log_delta[i]))), float(orders_arr[i])


class ClassicConversionRdpAccountant(rdp_privacy_accountant.RdpAccountant):
    """dp_accounting's ``RdpAccountant`` reporting with the classic conversion.

    Composition (the RDP curve) is dp_accounting's, unchanged; only
    ``get_epsilon``/``get_delta`` (and their ``_and_optimal_order`` forms) use
    :func:`classic_epsilon_from_rdp` / :func:`classic_delta_from_rdp` on the public
    ``.orders`` and ``.rdp``. Being a ``PrivacyAccountant``, it plugs into
    ``dp_accounting.mechanism_calibration`` like any other accountant.
    """

    def get_epsilon_and_optimal_order(self, target_delta: float) -> tuple[float, float]:
        return classic_epsilon_from_rdp(self.orders, self.rdp, target_delta)

    def get_epsilon(self, target_delta: float) -> float:
        return self.get_epsilon_and_optimal_order(target_delta)[0]

    def get_delta_and_optimal_order(self, target_epsilon: float) -> tuple[float, float]:
        return classic_delta_from_rdp(self.orders, self.rdp, target_epsilon)

    def get_delta(self, target_epsilon: float) -> float:
        return self.get_delta_and_optimal_order(target_epsilon)[0]


# ------------------------------------------------------------------ accountants


@dataclass(frozen=True)
class AccountingSpec:
    """How an (epsilon, delta) guarantee is computed from dp_accounting events.

    Frozen, validated and hashable: trainers' configs carry it, result caches key on it,
    and every accounting function takes it as ``accounting=`` (default: ``AccountingSpec()``,
    RDP with dp_accounting's conversion, add/remove).

    Parameters
    ----------
    accountant : {"rdp", "pld"}
        Renyi-DP or privacy-loss-distribution accounting.
    conversion : {"improved", "classic"}
        RDP-to-DP conversion (``"rdp"`` only; ``"pld"`` takes only the default).
    orders : sequence of float, optional
        Renyi orders (``"rdp"`` only). Default :data:`DEFAULT_RDP_ORDERS` for "improved",
        :data:`PAPER_RDP_ORDERS` for "classic". Stored as a tuple.
    neighboring : {"add_remove", "replace_one"}
        Neighbouring relation (see the module docstring for RDP under replace-one).
    value_discretization_interval : float
        PLD grid step (``"pld"`` only; smaller is tighter and slower). Normalised to the
        default for ``"rdp"``, where it plays no part, so equal guarantees compare equal.
    """

    accountant: str = "rdp"
    conversion: str = "improved"
    orders: tuple[float, ...] | None = None
    neighboring: str = "add_remove"
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL

    def __post_init__(self) -> None:
        accountant, conversion = _check_method(self.accountant, self.conversion)
        check_choice(self.neighboring, "neighboring", NEIGHBORING_RELATIONS)
        interval = check_positive(self.value_discretization_interval, "value_discretization_interval")
        if self.orders is not None:
            if accountant != "rdp":
                raise ValueError(f"orders apply only to accountant='rdp', got orders with accountant={accountant!r}")
            object.__setattr__(self, "orders", _resolve_orders(self.orders, conversion))
        if accountant == "rdp":
            interval = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
        object.__setattr__(self, "value_discretization_interval", float(interval))

    @property
    def resolved_orders(self) -> tuple[float, ...] | None:
        """The Renyi orders in use (``None`` for PLD)."""
        return _resolve_orders(self.orders, self.conversion) if self.accountant == "rdp" else None

    def make_accountant(self) -> privacy_accountant.PrivacyAccountant:
        """A fresh, empty dp_accounting accountant: ``RdpAccountant``,
        :class:`ClassicConversionRdpAccountant` or ``PLDAccountant``. Under RDP with
        ``replace_one`` the accountant is an add/remove one; compose events through
        :meth:`compose` (which translates them), not on it directly."""
        if self.accountant == "pld":
            return pld_privacy_accountant.PLDAccountant(
                neighboring_relation=NEIGHBORING_RELATIONS[self.neighboring],
                value_discretization_interval=self.value_discretization_interval,
            )
        cls = ClassicConversionRdpAccountant if self.conversion == "classic" else rdp_privacy_accountant.RdpAccountant
        return cls(orders=list(self.resolved_orders), neighboring_relation=NEIGHBORING_RELATIONS["add_remove"])

    def accountable(self, event: dp_event.DpEvent) -> dp_event.DpEvent:
        """The event as this spec's accountant composes it (RDP + replace-one: without
        amplification, :func:`replace_one_as_add_remove`; otherwise unchanged)."""
        if self.accountant == "rdp" and self.neighboring == "replace_one":
            return replace_one_as_add_remove(event)
        return event

    def compose(self, acct: privacy_accountant.PrivacyAccountant, event: dp_event.DpEvent, count: int = 1) -> None:
        """``acct.compose`` of this spec's version of ``event``; unsupported events raise ValueError."""
        try:
            acct.compose(self.accountable(event), count)
        except privacy_accountant.UnsupportedEventError as err:
            raise ValueError(f"accountant={self.accountant!r} with neighboring={self.neighboring!r} cannot "
                             f"account for this event: {err}") from err

    def describe(self) -> str:
        """One line for reports, e.g. ``rdp, improved conversion`` or ``pld, replace_one``."""
        what = f"rdp, {self.conversion} conversion" if self.accountant == "rdp" else "pld"
        return what if self.neighboring == "add_remove" else f"{what}, {self.neighboring}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (orders as a list or None)."""
        out = asdict(self)
        out["orders"] = None if self.orders is None else list(self.orders)
        return out


def replace_one_as_add_remove(event: dp_event.DpEvent) -> dp_event.DpEvent:
    """A replace-one event as add/remove Gaussians of its replace distance, without subsampling amplification.

    The toolkit states a Gaussian's noise multiplier relative to one record's contribution
    bound; under replace-one two neighbours differ by up to twice it (dp_accounting's PLD
    ``REPLACE_ONE`` convention), so ``GaussianDpEvent(m)`` is an add/remove Gaussian of
    multiplier m/2, and ``PoissonSampledDpEvent(q, GaussianDpEvent(m))`` is bounded by the
    same Gaussian: conditioned on the batch, the release is that Gaussian or less, and
    averaging over the common batch distribution keeps the RDP bound (joint convexity of
    exp((alpha - 1) D_alpha)). Compositions map part by part.
    """
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return replace_one_as_add_remove(event.event)
    if isinstance(event, dp_event.GaussianDpEvent):
        return dp_event.GaussianDpEvent(event.noise_multiplier / 2.0)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return dp_event.SelfComposedDpEvent(replace_one_as_add_remove(event.event), event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        return dp_event.ComposedDpEvent([replace_one_as_add_remove(e) for e in event.events])
    if isinstance(event, dp_event.NoOpDpEvent):
        return event
    raise ValueError(f"accountant='rdp' with neighboring='replace_one' accounts only (sampled) Gaussian releases, "
                     f"got {event!r}")


def _spec(accounting: AccountingSpec | None) -> AccountingSpec:
    if accounting is None:
        return AccountingSpec()
    if not isinstance(accounting, AccountingSpec):
        raise TypeError(f"accounting must be an AccountingSpec, got {accounting!r}")
    return accounting


#: Epsilons already computed for a ledger's exact runs (repeated runs of one schedule --
#: seeds, audit trials -- account the same events); bounded, cleared when full.
_EPSILON_MEMO: dict[Any, float] = {}
_EPSILON_MEMO_SIZE = 4096


def _hashable_or_none(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _remember(key: Any, epsilon: float) -> None:
    if len(_EPSILON_MEMO) >= _EPSILON_MEMO_SIZE:
        _EPSILON_MEMO.clear()
    _EPSILON_MEMO[key] = epsilon


def _rdp_curve(event: dp_event.DpEvent, orders: tuple[float, ...]) -> np.ndarray:
    """dp_accounting's RDP curve of one event over ``orders`` (memoised for hashable events)."""
    key = _hashable_or_none((event, orders))
    if key is not None and key in _RDP_CURVES:
        return _RDP_CURVES[key]
    single = rdp_privacy_accountant.RdpAccountant(list(orders))
    single.compose(event)
    curve = np.asarray(single.rdp, dtype=float)
    if key is not None:
        if len(_RDP_CURVES) >= _EPSILON_MEMO_SIZE:
            _RDP_CURVES.clear()
        _RDP_CURVES[key] = curve
    return curve


_RDP_CURVES: dict[Any, np.ndarray] = {}


def epsilon_from_event(event: dp_event.DpEvent, delta: float, *,
                       accounting: AccountingSpec | None = None) -> float:
    """Smallest epsilon the accountant certifies for ``event`` at ``delta``.

    Parameters
    ----------
    event : dp_event.DpEvent
        What was released.
    delta : float
        :math:`\\delta \\in (0, 1)`.
    accounting : AccountingSpec, optional
        How (default ``AccountingSpec()``).

    Returns
    -------
    float
        :math:`\\varepsilon \\ge 0` (``inf`` if the event is not private).

    Raises
    ------
    ValueError
        On a bad argument, or if the accountant cannot account for the event.

    Notes
    -----
    Remembered per (spec, event, delta) for hashable events (every method of an equal-privacy comparison
    asks for DPSGD's epsilon of the same run): a repeated question gets the first computation's float.
    """
    spec = _spec(accounting)
    memo_key = _hashable_or_none(("event", spec, event, delta))
    if memo_key is not None and memo_key in _EPSILON_MEMO:
        return _EPSILON_MEMO[memo_key]
    epsilon = _epsilon_and_order(event, delta, spec)[0]
    if memo_key is not None:
        _remember(memo_key, epsilon)
    return epsilon


def epsilons_of_repeats(event: dp_event.DpEvent, counts: Sequence[int], delta: float, *,
                        accounting: AccountingSpec | None = None,
                        once: Sequence[dp_event.DpEvent] = ()) -> np.ndarray:
    """Epsilon of ``count`` repeats of ``event`` (composed with each of ``once``) for every count.

    Equals ``epsilon_from_event(compose_events([*once, SelfComposedDpEvent(event, count)]), delta)``
    for each count, but under RDP from one memoised dp_accounting curve per event: RDP
    composes additively, :math:`\\mathrm{RDP}_T(\\alpha) = T\\,\\mathrm{RDP}_1(\\alpha) +
    \\sum_{e \\in \\text{once}} \\mathrm{RDP}_e(\\alpha)`, then the spec's conversion per
    count. So a search over step counts (equal-privacy stopping) or over many calibrations
    of one event pays for one curve, not one per probe. Under PLD each count is composed
    afresh (no shortcut exists).

    Parameters
    ----------
    event : dp_event.DpEvent
        One repeated release (e.g. a Poisson-sampled Gaussian step).
    counts : sequence of int
        Repeat counts :math:`T \\ge 0` (0: only ``once``).
    delta : float
        :math:`\\delta \\in (0, 1)`.
    accounting : AccountingSpec, optional
        How (default ``AccountingSpec()``).
    once : sequence of DpEvent
        Releases made once whatever the count (e.g. a one-time noisy count).

    Returns
    -------
    numpy.ndarray
        Epsilon per count, shape ``(len(counts),)``.
    """
    _check_event(event, "event")
    delta = check_delta(delta)
    spec = _spec(accounting)
    once = list(once)
    for other in once:
        _check_event(other, "once[]")
    counts = [int(c) for c in counts]
    if any(c < 0 for c in counts):
        raise ValueError(f"counts must be >= 0, got {counts!r}")
    if spec.accountant != "rdp":  # a count of 0 composes only ``once`` (dp_accounting refuses 0 repeats)
        parts = [[*once, *([dp_event.SelfComposedDpEvent(event, c)] if c else [])] for c in counts]
        return np.array([epsilon_from_event(compose_events(p), delta, accounting=spec) if p else 0.0 for p in parts],
                        dtype=float)
    orders = tuple(spec.resolved_orders)
    order_array = np.asarray(orders, dtype=float)
    convert = classic_epsilon_from_rdp if spec.conversion == "classic" else rdp_privacy_accountant.compute_epsilon
    step = _rdp_curve(spec.accountable(event), orders)
    fixed = sum((_rdp_curve(spec.accountable(other), orders) for other in once), np.zeros(len(orders)))
    # c = 0 adds nothing -- not 0 x the step's curve, which is infinite at high orders (0 x inf is NaN)
    return np.array([convert(order_array, fixed + c * step if c else fixed, delta)[0] if (c or once) else 0.0
                     for c in counts], dtype=float)


def delta_from_event(event: dp_event.DpEvent, epsilon: float, *,
                     accounting: AccountingSpec | None = None) -> float:
    """Smallest delta the accountant certifies for ``event`` at ``epsilon``.

    For RDP, "improved" is dp_accounting's ``compute_delta`` and "classic" is
    :func:`classic_delta_from_rdp`; both invert their epsilon conversion exactly
    (``delta_from_event(e, epsilon_from_event(e, d)) == d`` up to rounding).

    Parameters
    ----------
    event : dp_event.DpEvent
        What was released.
    epsilon : float
        :math:`\\varepsilon > 0`.
    accounting : AccountingSpec, optional
        How (default ``AccountingSpec()``).

    Returns
    -------
    float
        :math:`\\delta \\in [0, 1]`.
    """
    _check_event(event, "event")
    epsilon = check_positive(epsilon, "epsilon")
    spec = _spec(accounting)
    acct = spec.make_accountant()
    spec.compose(acct, event)
    return float(acct.get_delta(epsilon))


# ------------------------------------------------------------------ DP-SGD


def dpsgd_epsilon(*, n: int, batch_size: int, noise_multiplier: float, delta: float, epochs: float | None = None,
                  steps: int | None = None, accounting: AccountingSpec | None = None) -> float:
    """Epsilon of DP-SGD with Poisson sampling at rate :math:`q = B/n`.

    The run is :func:`poisson_gaussian_event` with :math:`T` steps, where :math:`T` is
    ``steps`` or :func:`steps_for_epochs` of ``epochs`` (give exactly one).

    Parameters
    ----------
    n : int
        Training-set size.
    batch_size : int
        Expected batch size :math:`B \\le n`.
    noise_multiplier : float
        :math:`\\sigma > 0`.
    delta : float
        :math:`\\delta \\in (0, 1)`.
    epochs : float, optional
        Passes over the data (> 0).
    steps : int, optional
        Number of steps (>= 1).
    accounting : AccountingSpec, optional
        How (default ``AccountingSpec()``).

    Returns
    -------
    float
        Epsilon.
    """
    return dpsgd_privacy_summary(n=n, batch_size=batch_size, noise_multiplier=noise_multiplier, delta=delta,
                                 epochs=epochs, steps=steps, accounting=accounting)["epsilon"]


def dpsgd_privacy_summary(*, n: int, batch_size: int, noise_multiplier: float, delta: float,
                          epochs: float | None = None, steps: int | None = None,
                          accounting: AccountingSpec | None = None) -> dict[str, Any]:
    """:func:`dpsgd_epsilon` with the settings behind it, as a JSON-ready dict.

    Returns
    -------
    dict
        ``{"epsilon", "delta", "accountant", "conversion", "neighboring", "steps",
        "sampling_rate", "noise_multiplier", "optimal_order"}``; ``conversion`` and
        ``optimal_order`` are ``None`` for ``accountant="pld"``.
    """
    spec = _spec(accounting)
    n, batch_size = _check_n_and_batch_size(n, batch_size)
    if (epochs is None) == (steps is None):
        raise ValueError(
            f"give exactly one of epochs and steps, got epochs={epochs!r}, steps={steps!r}"
        )
    steps = (
        steps_for_epochs(n, batch_size, epochs)
        if steps is None
        else check_positive_int(steps, "steps")
    )
    sampling_rate = batch_size / n
    event = poisson_gaussian_event(sampling_rate, noise_multiplier, steps=steps)
    epsilon, order = _epsilon_and_order(event, delta, spec)
    is_rdp = spec.accountant == "rdp"
    return {
        "epsilon": epsilon,
        "delta": float(delta),
        "accountant": spec.accountant,
        "conversion": spec.conversion if is_rdp else None,
        "neighboring": spec.neighboring,
        "steps": steps,
        "sampling_rate": sampling_rate,
        "noise_multiplier": float(noise_multiplier),
        "optimal_order": order if is_rdp else None,
    }


def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    *,
    sampling_rate: float,
    steps: int,
    accounting: AccountingSpec | None = None,
    tolerance: float = 1e-4,
    other_events: Sequence[dp_event.DpEvent] = (),
) -> float:
    """Smallest noise multiplier whose DP-SGD run meets ``target_epsilon`` at ``delta``.

    Finds :math:`\\sigma^* = \\min\\{\\sigma : \\varepsilon(\\sigma) \\le
    \\varepsilon_{\\text{target}}\\}` for ``poisson_gaussian_event(q, sigma, steps=T)``
    (epsilon decreases in :math:`\\sigma`): a doubling/halving search from
    :math:`\\sigma = 1` brackets :math:`\\sigma^*` inside [0.1, 1e4], then
    ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` (Brent's method,
    result on the private side) narrows it.

    Parameters
    ----------
    target_epsilon : float
        :math:`\\varepsilon_{\\text{target}} > 0`.
    delta : float
        :math:`\\delta \\in (0, 1)`.
    sampling_rate : float
        :math:`q \\in (0, 1]`.
    steps : int
        :math:`T \\ge 1`.
    accounting : AccountingSpec, optional
        How (default ``AccountingSpec()``).
    tolerance : float
        Relative tolerance in :math:`\\sigma`, in (0, 0.1]: the result
        :math:`\\hat\\sigma` satisfies :math:`\\sigma^* \\le \\hat\\sigma \\le
        \\sigma^*(1 + \\text{tolerance})`.
    other_events : sequence of DpEvent
        Releases of the same run that do not depend on sigma (e.g. a one-time noisy
        count); they are composed with the T steps, so the whole run meets the target.

    Returns
    -------
    float
        :math:`\\hat\\sigma`, checked to give :math:`\\varepsilon \\le
        \\varepsilon_{\\text{target}}`.

    Raises
    ------
    ValueError
        On a bad argument, or if no noise multiplier in [0.1, 1e4] brackets the target
        (e.g. the classic conversion cannot go below
        :math:`\\log(1/\\delta)/(\\alpha_{\\max} - 1)` whatever the noise).
    """
    target_epsilon = check_positive(target_epsilon, "target_epsilon")
    delta = check_delta(delta)
    sampling_rate = check_fraction(sampling_rate, "sampling_rate")
    steps = check_positive_int(steps, "steps")
    tolerance = check_positive(tolerance, "tolerance")
    if tolerance > 0.1:
        raise ValueError(f"tolerance must be in (0, 0.1], got {tolerance!r}")
    spec = _spec(accounting)
    other_events = list(other_events)
    for event in other_events:
        _check_event(event, "other_events[]")

    def event_at(sigma: float) -> dp_event.DpEvent:
        steps_event = poisson_gaussian_event(sampling_rate, sigma, steps=steps)
        return compose_events([*other_events, steps_event]) if other_events else steps_event

    def meets(sigma: float) -> bool:
        return epsilon_from_event(event_at(sigma), delta, accounting=spec) <= target_epsilon

    with warnings.catch_warnings():  # probes far from the answer; the final check below warns where it matters
        warnings.simplefilter("ignore")
        low, high = _bracket_noise(meets, target_epsilon=target_epsilon)
    sigma = mechanism_calibration.calibrate_dp_mechanism(
        spec.make_accountant,
        lambda sigma: spec.accountable(event_at(sigma)),
        target_epsilon,
        delta,
        bracket_interval=mechanism_calibration.ExplicitBracketInterval(low, high),
        tol=tolerance * low / 2,  # the result may be up to 2 tol above the root
    )
    sigma = float(sigma)
    if not meets(sigma):  # calibrate_dp_mechanism promises this; check anyway
        raise RuntimeError(
            f"calibration returned noise_multiplier={sigma!r} whose epsilon exceeds "
            f"target_epsilon={target_epsilon!r}"
        )
    return sigma


# ------------------------------------------------------------------ ledger


def max_steps_within(target_epsilon: float, delta: float, *, sampling_rate: float, noise_multiplier: float,
                     max_steps: int, accounting: AccountingSpec | None = None) -> int:
    r"""Largest T <= ``max_steps`` whose T Poisson-sampled Gaussian steps spend <= target epsilon.

    Used to run a method "at equal privacy" with another (paper 000 §6.1.3: DPSGD-F and
    Naive stop when their epsilon reaches DPSGD's). Epsilon is increasing in T, so this
    is a bisection; 0 if even one step exceeds the target. Under RDP every probe reads one
    memoised curve of the step (:func:`epsilons_of_repeats`: :math:`\mathrm{RDP}_T = T\,\mathrm{RDP}_1`),
    not a fresh composition per probe.
    """
    check_positive(target_epsilon, "target_epsilon")
    max_steps = check_positive_int(max_steps, "max_steps")
    spec = _spec(accounting)
    step = poisson_gaussian_event(sampling_rate, noise_multiplier)

    def spent(steps: int) -> float:
        return float(epsilons_of_repeats(step, [steps], delta, accounting=spec)[0])

    if spent(max_steps) <= target_epsilon:
        return max_steps
    low, high = 0, max_steps  # spent(low) <= target < spent(high), with spent(0) = 0
    while high - low > 1:
        middle = (low + high) // 2
        if spent(middle) <= target_epsilon:
            low = middle
        else:
            high = middle
    return low


class PrivacyLedger:
    """What a training run actually released, step by step, and what it cost.

    Events are stored as runs ``(event, count)``: recording an event equal to the last
    one extends the last run, so a 20-epoch DP-SGD run is one run, not thousands of
    events. Merging needs *consecutive* equal records, so a step that releases several
    things (DPSGD-F: noisy group counts, then noisy gradients) should be recorded as
    one composed event per step; recording its parts one after the other alternates
    and never merges. :meth:`epsilon` is incremental: each accounting configuration keeps one
    dp_accounting accountant and composes only what was recorded since it was last
    asked (RDP composition is additive, so this equals a fresh computation; for PLD
    it is a valid but possibly slightly different discretisation).

    Examples
    --------
    >>> ledger = PrivacyLedger()
    >>> counts = poisson_gaussian_event(0.01, 10.0)
    >>> grads = poisson_gaussian_event(0.01, 1.0)
    >>> step = compose_events([counts, grads])
    >>> for _ in range(1000):
    ...     ledger.record(step)
    >>> len(ledger.runs), len(ledger)
    (1, 1000)
    >>> round(ledger.epsilon(1e-5), 3) == round(
    ...     epsilon_from_event(ledger.event, 1e-5), 3)
    True
    """

    def __init__(self) -> None:
        self._runs: list[list[Any]] = []  # [event, count]
        # spec -> [accountant with the first `closed` runs composed, closed]
        self._accountants: dict[AccountingSpec, list[Any]] = {}

    def record(self, event: dp_event.DpEvent, count: int = 1) -> None:
        """Record that ``event`` was released ``count`` more times."""
        _check_event(event, "event")
        count = check_positive_int(count, "count")
        if self._runs and self._runs[-1][0] == event:
            self._runs[-1][1] += count
        else:
            self._runs.append([event, count])

    @property
    def runs(self) -> tuple[tuple[dp_event.DpEvent, int], ...]:
        """The recorded runs ``(event, count)``, in order."""
        return tuple((event, count) for event, count in self._runs)

    @property
    def event(self) -> dp_event.DpEvent:
        """Everything recorded, as one DpEvent (``NoOpDpEvent`` when empty)."""
        parts = [
            event if count == 1 else dp_event.SelfComposedDpEvent(event, count)
            for event, count in self._runs
        ]
        if not parts:
            return dp_event.NoOpDpEvent()
        return parts[0] if len(parts) == 1 else dp_event.ComposedDpEvent(parts)

    def epsilon(self, delta: float, *, accounting: AccountingSpec | None = None) -> float:
        """Epsilon spent so far at ``delta`` (see :func:`epsilon_from_event`).

        Incremental and exact: every run but the last is final, so each spec keeps one
        accountant with the final runs composed (each with its whole count, as a fresh
        computation would) and composes the last, still growing run on a copy. The result
        equals ``epsilon_from_event(self.event, delta, accounting=...)``; repeated ledgers
        (seeds, audit trials) hit a memo.
        """
        delta = check_delta(delta)
        spec = _spec(accounting)
        memo_key = _hashable_or_none((spec, tuple((event, count) for event, count in self._runs), delta))
        if memo_key is not None and memo_key in _EPSILON_MEMO:
            return _EPSILON_MEMO[memo_key]
        state = self._accountants.setdefault(spec, [spec.make_accountant(), 0])
        acct, closed = state
        for event, count in self._runs[closed:-1]:
            spec.compose(acct, event, count)
        state[1] = max(closed, len(self._runs) - 1)
        if self._runs:
            acct = copy.deepcopy(acct)
            spec.compose(acct, *self._runs[-1])
        epsilon = _report_epsilon(acct, delta)[0]
        if memo_key is not None:
            _remember(memo_key, epsilon)
        return epsilon

    def epsilon_trajectory(self, delta: float, *, accounting: AccountingSpec | None = None) -> np.ndarray:
        """RDP epsilon after each recorded release, shape (len(self),).

        RDP composes additively, so the curve after release t is the sum of the first t
        releases' curves; one dp_accounting curve per run's event, then the conversion
        at every prefix. Equals :meth:`epsilon` at the last entry. Needs an RDP spec.
        """
        delta = check_delta(delta)
        spec = _spec(accounting)
        if spec.accountant != "rdp":
            raise ValueError(f"epsilon_trajectory needs accountant='rdp', got {spec.accountant!r}")
        resolved = spec.resolved_orders
        order_array = np.asarray(resolved, dtype=float)
        total = np.zeros(len(order_array))
        prefixes = []
        for event, count in self._runs:
            step_curve = _rdp_curve(spec.accountable(event), tuple(resolved))
            prefixes.append(total + np.arange(1, count + 1)[:, None] * step_curve)
            total = total + count * step_curve
        if not prefixes:
            return np.zeros(0)
        return epsilons_from_rdp_curves(order_array, np.concatenate(prefixes), delta, conversion=spec.conversion)

    def to_records(self) -> list[dict[str, Any]]:
        """JSON-ready records ``[{"event": event_to_dict(e), "count": k}, ...]``."""
        return [{"event": event_to_dict(event), "count": count} for event, count in self._runs]

    def __len__(self) -> int:
        """Number of recorded releases (the sum of the run counts)."""
        return sum(count for _, count in self._runs)

    def __repr__(self) -> str:
        return f"PrivacyLedger(runs={len(self._runs)}, releases={len(self)})"


def ledger_from_records(records: Iterable[Mapping[str, Any]]) -> PrivacyLedger:
    """Rebuild a :class:`PrivacyLedger` from :meth:`PrivacyLedger.to_records` output.

    Each record is a mapping with ``"event"`` (a dict from :func:`event_to_dict`, or a
    ``DpEvent``) and ``"count"`` (a positive integer).
    """
    ledger = PrivacyLedger()
    for i, record in enumerate(records):
        if not isinstance(record, Mapping) or set(record) != {"event", "count"}:
            raise ValueError(
                f"records[{i}] must be a mapping with keys 'event' and 'count', got {record!r}"
            )
        event = record["event"]
        if not isinstance(event, dp_event.DpEvent):
            event = event_from_dict(event)
        ledger.record(event, record["count"])
    return ledger


def event_to_dict(event: dp_event.DpEvent) -> dict[str, Any]:
    """A JSON-ready nested dict ``{"class_name": ..., <fields>}`` for a DpEvent.

    Built from dp_accounting's ``DpEvent.to_named_tuple``; nested events become
    nested dicts and sequences become lists.
    """
    _check_event(event, "event")

    def plain(value: Any) -> Any:
        if isinstance(value, tuple) and hasattr(value, "_asdict"):
            fields = value._asdict()
            if fields.get("module_name") != dp_event.__name__:
                raise ValueError(
                    f"event must be built from {dp_event.__name__} classes, got "
                    f"{fields.get('module_name')}.{fields.get('class_name')}"
                )
            fields.pop("module_name")
            return {key: plain(v) for key, v in fields.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    return plain(event.to_named_tuple())


def event_from_dict(data: Mapping[str, Any]) -> dp_event.DpEvent:
    """Inverse of :func:`event_to_dict`.

    Only classes of ``dp_accounting.dp_event`` are rebuilt (nothing else is imported
    or called, so records from an untrusted file cannot run code).
    """

    def build(value: Any, where: str) -> Any:
        if isinstance(value, Mapping):
            fields = dict(value)
            name = fields.pop("class_name", None)
            cls = getattr(dp_event, name, None) if isinstance(name, str) else None
            if not (isinstance(cls, type) and issubclass(cls, dp_event.DpEvent)):
                raise ValueError(
                    f"{where}['class_name'] must name a dp_accounting.dp_event class, got {name!r}"
                )
            kwargs = {key: build(v, f"{where}[{key!r}]") for key, v in fields.items()}
            try:
                return cls(**kwargs)
            except TypeError as err:
                raise ValueError(f"{where} has fields that do not fit {name}: {err}") from err
        if isinstance(value, list):
            return [build(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    if not isinstance(data, Mapping):
        raise ValueError(f"event must be a dict from event_to_dict, got {data!r}")
    return build(data, "event")


# ------------------------------------------------------------------ helpers


def _epsilon_and_order(event: dp_event.DpEvent, delta: float, spec: AccountingSpec) -> tuple[float, float | None]:
    """Epsilon and (RDP only) the optimal order for ``event`` at ``delta``."""
    _check_event(event, "event")
    delta = check_delta(delta)
    acct = spec.make_accountant()
    spec.compose(acct, event)
    return _report_epsilon(acct, delta)


def _report_epsilon(
    acct: privacy_accountant.PrivacyAccountant, delta: float
) -> tuple[float, float | None]:
    """Epsilon (and optimal order for RDP) of a composed accountant.

    Warns when the optimal order is the largest available, where extending the order
    list could tighten the bound.
    """
    if isinstance(acct, rdp_privacy_accountant.RdpAccountant):
        epsilon, order = acct.get_epsilon_and_optimal_order(delta)
        orders = acct.orders
        if math.isfinite(epsilon) and epsilon > 0 and order == orders.max() and len(orders) > 1:
            warnings.warn(
                f"the optimal RDP order is the largest one given ({order}); larger orders "
                "may give a smaller epsilon",
                stacklevel=3,
            )
        return float(epsilon), float(order)
    return float(acct.get_epsilon(delta)), None


def _bracket_noise(meets, *, target_epsilon: float) -> tuple[float, float]:
    """(low, high) with ``meets(high)`` and not ``meets(low)``, by doubling/halving."""
    high = 1.0
    if meets(high):
        low = high / 2
        while meets(low):
            if low <= _MIN_SEARCH_NOISE:
                raise ArgumentError(
                    "target_epsilon", f"{target_epsilon!r} is met even at noise_multiplier="
                    f"{low!r}; calibration searches noise multipliers >= {_MIN_SEARCH_NOISE}"
                )
            high, low = low, max(low / 2, _MIN_SEARCH_NOISE)
        return low, high
    low = high
    while True:
        high = low * 2
        if high > _MAX_SEARCH_NOISE:
            raise ArgumentError(
                "target_epsilon", f"{target_epsilon!r} is not met even at noise_multiplier="
                f"{low!r} (the classic conversion, for one, cannot go below "
                "log(1/delta)/(max order - 1))"
            )
        if meets(high):
            return low, high
        low = high


def _check_method(accountant: object, conversion: object) -> tuple[str, str]:
    accountant = check_choice(accountant, "accountant", ACCOUNTANTS)
    conversion = check_choice(conversion, "conversion", CONVERSIONS)
    if accountant == "pld" and conversion != "improved":
        raise ValueError(
            f"conversion={conversion!r} applies only to accountant='rdp'; "
            "with accountant='pld' leave conversion at its default"
        )
    return accountant, conversion


def _resolve_orders(orders: Sequence[float] | None, conversion: str) -> tuple[float, ...]:
    if orders is None:
        return PAPER_RDP_ORDERS if conversion == "classic" else DEFAULT_RDP_ORDERS
    if isinstance(orders, (str, bytes)) or not isinstance(orders, Iterable):
        raise ValueError(f"orders must be a non-empty sequence of numbers > 1, got {orders!r}")
    values = list(orders)
    if not values or not all(
        isinstance(a, Real) and not isinstance(a, bool) and math.isfinite(a) and a > 1
        for a in values
    ):
        raise ValueError(f"orders must be a non-empty sequence of finite numbers > 1, got {orders!r}")
    return tuple(float(a) for a in values)


def _check_rdp_curve(orders: Sequence[float], rdp: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    if orders is None:
        raise ValueError("orders must be a non-empty sequence of finite numbers > 1, got None")
    orders_arr = np.asarray(_resolve_orders(orders, "classic"), dtype=float)
    rdp_arr = np.asarray(rdp, dtype=float).reshape(-1)
    if rdp_arr.shape != orders_arr.shape:
        raise ValueError(
            f"rdp must have one value per order ({orders_arr.size}), got {rdp_arr.size}"
        )
    if np.isnan(rdp_arr).any():
        raise ValueError(f"rdp must not contain NaN, got {rdp_arr!r}")
    return orders_arr, np.maximum(rdp_arr, 0.0)


def _check_noise_multiplier(value: object) -> float:
    if isinstance(value, Real) and not isinstance(value, bool) and value == 0:
        raise ValueError(
            "noise_multiplier must be a positive finite number, got 0: without noise "
            "the release is not differentially private (epsilon is infinite)"
        )
    return check_positive(value, "noise_multiplier")


def _check_n_and_batch_size(n: object, batch_size: object) -> tuple[int, int]:
    n = check_positive_int(n, "n")
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > n:
        raise ValueError(f"batch_size must be <= n={n}, got {batch_size!r}")
    return n, batch_size


def _check_event(event: object, name: str) -> None:
    if not isinstance(event, dp_event.DpEvent):
        raise TypeError(f"{name} must be a dp_accounting DpEvent, got {event!r}")

