"""Per-record and per-group privacy accounting of a DP-SGD run from its gradient norms.

DP-SGD's :math:`(\\varepsilon, \\delta)` is a worst case over records: it charges every record as if its
gradient were clipped at :math:`C` on every step. What a record *spends* depends on its gradients. At step
:math:`t` (parameters :math:`\\theta_{t-1}`, Poisson sampling rate :math:`q`, noise :math:`\\sigma C`), the
release with record :math:`i` added to or removed from the data differs by its clipped gradient, of norm
:math:`\\min(\\|g_i(\\theta_{t-1})\\|, C)`, so the step is, for record :math:`i`, a Poisson-sampled Gaussian of
sensitivity

.. math:: s_{i,t} = \\min(\\|g_i(\\theta_{t-1})\\|, C) / C \\in [0, 1],

i.e. of effective noise multiplier :math:`\\sigma / s_{i,t}`. Its Renyi DP at order :math:`\\alpha` is
:math:`\\rho(\\alpha; q, \\sigma / s_{i,t})` (dp_accounting's sampled-Gaussian curve; 0 when
:math:`s_{i,t} = 0`); the steps compose additively and convert to :math:`(\\varepsilon_i, \\delta)` with the
toolkit's RDP conversion (:mod:`dpfair_analysis.privacy.accounting`):

.. math:: \\mathrm{RDP}_i(\\alpha) = \\sum_{t=1}^{T} \\rho(\\alpha; q, \\sigma / s_{i,t}), \\qquad
          \\varepsilon_i(\\delta) = \\mathrm{conv}_\\delta\\big(\\mathrm{RDP}_i\\big).

**What** :math:`\\varepsilon_i` **is and is not.** Feldman & Zrnic (NeurIPS 2021, "Individual privacy
accounting via a Renyi filter") show that individual RDP composes *adaptively* only under a filter: a run
that drops record :math:`i` once its running :math:`\\mathrm{RDP}_i` would pass a budget :math:`B` fixed in
advance gives record :math:`i` the guarantee :math:`B`. DP-SGD as the toolkit trains it has no filter, so
:math:`\\varepsilon_i` here is an **ex-post estimate**, not a guarantee: the norms :math:`s_{i,t}` are
functions of the trajectory :math:`\\theta_0, \\dots, \\theta_{T-1}`, which depends on every record (the
others' and record :math:`i`'s own) and on the noise, so :math:`\\varepsilon_i` is itself data-dependent and
publishing it leaks. It is the estimate of Yu, Kamath, Kulkarni et al. (TMLR 2023), for add/remove of record
:math:`i`. **The run's guarantee is the worst case** :math:`\\varepsilon` (every step at :math:`C`), which
bounds every :math:`\\varepsilon_i` and which this module reports beside them (``run_epsilon``).

**The norms.** Under Poisson sampling a record absent from a step's batch could have been in it, so the
estimate charges it for every step: it needs the norm of *every* record at every step's parameters, not only
the sampled ones the loop computes. :class:`~dpfair_analysis.training.norm_recorder.NormRecorder` is a callback of
:func:`~dpfair_analysis.training.loop.train` that computes them at :math:`\\theta_t`, with the
loop's own per-sample engine and objective, every ``every`` steps; between checkpoints each record's norm is
*held* (steps :math:`t+1, \\dots, t+k` use the norms at :math:`\\theta_t`), which is an approximation (not
a bound) when ``every > 1``. :class:`~dpfair_analysis.training.norm_recorder.SampledNorms` needs no pass but one:
it keeps the norms the DP step computes for its batch (exact on the steps whose batch holds the record) and holds
each record's from its last batch (``dpfair privacy groups``' default; its histogram is
:func:`~dpfair_analysis.experiments.group_privacy.sampled_sensitivity_histogram`). :func:`individual_privacy` turns
the norms into :math:`\\varepsilon_i`; :func:`group_privacy` into each group's distribution.

**Cost.** A checkpoint is one per-sample-norm pass over the recorded rows: ``every=1`` does the per-sample
work of :math:`n / b` steps per step. Measured on Adult at ``dpfair compare``'s defaults (logistic regression,
T = 2,827, one thread; benchmarks/individual_privacy.py): the run 1.9 s of CPU; with the recorder at every
step +18 s, every 10 steps +3.9 s, once an epoch (every 142 steps) +0.5 s, whose held norms move
:math:`\\varepsilon_i` by 1.8% on average (5.4% at most; every 10 steps: 0.13%, 0.33%). The accounting
computes the grid's RDP curves once (memoised per :math:`(q, \\sigma, \\text{orders}, K)`; dp_accounting's
formulas evaluated for every grid point at once, 0.1-0.4 s at the default orders and K = 128, where one
dp_accounting call per grid point took 2.5-7 s: ``_sampled_gaussian_rdp``), then a per-record histogram of the
grid bins (1.1 ms per checkpoint at n = 36,178) and one matrix product.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
from dp_accounting import dp_event
from scipy.special import gammaln, log_ndtr, logsumexp

from dpfair_analysis.privacy.accounting import AccountingSpec, _rdp_curve, epsilons_from_rdp_curves
from dpfair_analysis.validation import check_delta, check_fraction, check_positive, check_positive_int

__all__ = [
    "DEFAULT_RESOLUTION",
    "MAX_MULTIPLIER",
    "WHAT_EPSILON_I_IS",
    "IndividualPrivacy",
    "grid_curves",
    "group_privacy",
    "individual_privacy",
    "individual_privacy_from_histogram",
]

#: Grid points K of the sensitivity grid s_k = sqrt(k / K) (uniform in s^2, where the sampled Gaussian's RDP
#: is nearly linear): each per-step sensitivity is rounded *up* to the grid, so the estimate is conservative by
#: at most about RDP(1) / K per step (measured: tests/privacy/test_individual.py).
DEFAULT_RESOLUTION = 128

#: One sentence, carried by every result, saying what epsilon_i is (module docstring).
WHAT_EPSILON_I_IS = (
    "epsilon_i: an ex-post, data-dependent estimate of record i's privacy loss (add/remove of record i) from the "
    "run's actual gradient norms; a guarantee only under an individual Renyi filter (Feldman & Zrnic 2021), which "
    "this run did not use. The run's guarantee is run_epsilon (every step at C), which bounds every epsilon_i.")

#: Largest effective noise multiplier sigma / s given to dp_accounting: a smaller positive sensitivity is rounded up
#: to sigma / MAX_MULTIPLIER (conservative; its RDP, about q^2 alpha / (2 m^2) <= 1e-12 q^2 alpha, is negligible),
#: since dp_accounting overflows for multipliers past about 1e154.
MAX_MULTIPLIER = 1e6

#: dp_accounting's cap on the terms of a fractional order's series (``_MAX_STEPS_LOG_A_FRAC``).
_FRACTIONAL_TERMS = 1000

_CURVES: dict[Any, np.ndarray] = {}
_CURVES_SIZE = 64


@dataclass(frozen=True)
class IndividualPrivacy:
    """Per-record privacy estimates of one run (see the module docstring for what they are).

    Attributes
    ----------
    epsilons : numpy.ndarray
        :math:`\\varepsilon_i` at ``delta``, shape (n,).
    worst_case : numpy.ndarray
        Boolean (n,): record i's gradient norm was at least C on every step (its :math:`\\varepsilon_i` is
        then ``run_epsilon``).
    mean_sensitivity : numpy.ndarray
        :math:`\\frac1T \\sum_t s_{i,t}`, shape (n,).
    run_epsilon : float
        The worst case (every step at C) under the same accountant: the run's guarantee for plain DP-SGD.
    delta : float
        The delta of every epsilon here.
    steps : int
        T, the steps composed.
    sampling_rate, noise_multiplier, clip : float
        The run's q, sigma and C.
    resolution : int or None
        The sensitivity grid's K (None: each distinct sensitivity's own curve).
    accounting : AccountingSpec
        The RDP orders and conversion used (the run's).
    what : str
        :data:`WHAT_EPSILON_I_IS`.
    """

    epsilons: np.ndarray
    worst_case: np.ndarray
    mean_sensitivity: np.ndarray
    run_epsilon: float
    delta: float
    steps: int
    sampling_rate: float
    noise_multiplier: float
    clip: float
    resolution: int | None
    accounting: AccountingSpec = field(default_factory=AccountingSpec)
    what: str = WHAT_EPSILON_I_IS

    def __len__(self) -> int:
        return len(self.epsilons)


def individual_privacy(norms_per_step: np.ndarray | Iterable[Any], *, clip: float, noise_multiplier: float,
                       sampling_rate: float, delta: float, repeats: Sequence[int] | None = None,
                       accounting: AccountingSpec | None = None,
                       resolution: int | None = DEFAULT_RESOLUTION) -> IndividualPrivacy:
    """Each record's :math:`(\\varepsilon_i, \\delta)` from its per-step gradient norms (an ex-post estimate).

    With :math:`s_{i,t} = \\min(\\|g_i(\\theta_{t-1})\\|, C)/C` and :math:`\\rho(\\alpha; q, m)` the RDP of a
    Poisson-sampled Gaussian of rate :math:`q` and noise multiplier :math:`m` (dp_accounting),

    .. math:: \\mathrm{RDP}_i(\\alpha) = \\sum_{t=1}^{T} \\rho(\\alpha; q, \\sigma / \\hat s_{i,t}), \\qquad
              \\varepsilon_i = \\mathrm{conv}_\\delta(\\mathrm{RDP}_i),

    where :math:`\\hat s = s` (``resolution=None``) or :math:`s` rounded up to the grid
    :math:`\\{\\sqrt{k/K}\\}_{k=0}^{K}` (``resolution=K``; conservative, :math:`\\hat s \\ge s`), and
    :math:`\\rho(\\cdot; q, \\sigma/0) = 0` (and a positive :math:`\\hat s` is at least
    :math:`\\min(1, \\sigma / 10^6)`: :data:`MAX_MULTIPLIER`). The curves are computed once per grid point
    (or distinct value); each record's sum is its histogram of grid bins times the curves. Guaranteed by
    construction: :math:`0 \\le \\varepsilon_i \\le` ``run_epsilon`` (up to the rounding of a sum of T
    terms), which is the ledger's epsilon of T steps of the same sampled Gaussian (to rounding);
    :math:`\\varepsilon_i = 0` for a record whose gradient is 0 on every step; :math:`\\varepsilon_i`
    non-decreasing in each :math:`\\|g_{i,t}\\|`.

    The model is the one the run's accountant assumes: Poisson sampling at rate q (a run with shuffled
    batches, ``sampling_matches_accounting=False``, is accounted as if Poisson-sampled, like its ledger), uniform
    clipping at C and noise :math:`\\sigma C` (DP-SGD's :class:`~dpfair_analysis.training.clipping.UniformClipping`;
    policies with group bounds or weights change each record's sensitivity and are not covered).

    It is **not** the run's guarantee (``run_epsilon`` is): without an individual Renyi filter (Feldman &
    Zrnic 2021) adaptive composition of individual RDP does not hold, and the norms depend on the trajectory,
    hence on the other records. See the module docstring.

    Parameters
    ----------
    norms_per_step : array_like or iterable of array_like
        Shape (T, n): row t is every record's :math:`\\|g_i\\|` at the parameters step t+1 used; or an
        iterable of (n,) rows (streamed on the grid: never held at once). With ``repeats``, row j stands for
        ``repeats[j]`` consecutive steps (a :class:`~dpfair_analysis.training.norm_recorder.NormRecorder`'s held checkpoints).
    clip : float
        The clipping bound C > 0.
    noise_multiplier : float
        :math:`\\sigma > 0` (the noise std is :math:`\\sigma C`).
    sampling_rate : float
        Poisson rate :math:`q \\in (0, 1]` (b / n).
    delta : float
        :math:`\\delta \\in (0, 1)`.
    repeats : sequence of int, optional
        Steps each row covers (>= 1 each; default 1 each). T is their sum.
    accounting : AccountingSpec, optional
        The run's accounting: must be RDP with add/remove neighbours (its orders and conversion are used).
    resolution : int or None
        Grid points K >= 1 (default :data:`DEFAULT_RESOLUTION`), or None for the exact curve of every distinct
        sensitivity (about 30 ms of dp_accounting per distinct value at the default orders: small inputs only).

    Returns
    -------
    IndividualPrivacy
        ``epsilons``, ``worst_case``, ``mean_sensitivity``, ``run_epsilon`` and the settings.
    """
    clip = check_positive(clip, "clip")
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    q = check_fraction(sampling_rate, "sampling_rate")
    delta = check_delta(delta)
    spec = _check_spec(accounting)
    if resolution is not None:
        resolution = check_positive_int(resolution, "resolution")
    orders = tuple(spec.resolved_orders)
    rows = _rows(norms_per_step, repeats)

    if resolution is None:
        counts, values, at_clip, total_s, steps = _exact_histogram(rows, clip)
        curves = _curves(q, sigma, orders, values)
    else:
        counts, at_clip, total_s, steps = _grid_histogram(rows, clip, resolution)
        curves = _grid_curves(q, sigma, orders, resolution)
    return _from_histogram(counts, curves, at_clip=at_clip, total_s=total_s, steps=steps, q=q, sigma=sigma,
                           delta=delta, spec=spec, clip=clip, resolution=resolution)


def individual_privacy_from_histogram(counts: np.ndarray, *, at_worst_case: np.ndarray, noise_multiplier: float,
                                      sampling_rate: float, delta: float, accounting: AccountingSpec | None = None,
                                      curves: np.ndarray | None = None) -> IndividualPrivacy:
    """:func:`individual_privacy` from each record's histogram of grid sensitivities, for callers that bin the
    steps themselves (e.g. many steps at once):

    .. math:: \\mathrm{RDP}_i(\\alpha) = \\sum_{k=0}^{K} n_{ik}\\, \\rho(\\alpha; q, \\sigma / \\sqrt{k/K}),

    :math:`n_{ik}` the steps at which record i's sensitivity rounded up to the grid :math:`\\{\\sqrt{k/K}\\}` is
    :math:`\\sqrt{k/K}` (a sensitivity :math:`s` goes to bin :math:`\\lceil K s^2 \\rceil`, a positive one to at least
    bin 1). T is each row's sum (the same for every record).

    Parameters
    ----------
    counts : numpy.ndarray
        Integers :math:`n_{ik} \\ge 0`, shape (n, K+1), K >= 1; every row sums to T >= 1.
    at_worst_case : numpy.ndarray
        Steps at which record i's sensitivity was 1 (shape (n,)): ``worst_case`` is ``at_worst_case == T``.
    noise_multiplier, sampling_rate, delta, accounting
        As :func:`individual_privacy`.
    curves : numpy.ndarray, optional
        :func:`grid_curves` of these settings, if kept from an earlier call (e.g. in a run cache): the part of
        the work that does not depend on the run (default: computed, memoised in the process).

    Returns
    -------
    IndividualPrivacy
        With ``mean_sensitivity`` NaN (the histogram does not keep it) and ``clip`` 1.
    """
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    q = check_fraction(sampling_rate, "sampling_rate")
    delta = check_delta(delta)
    spec = _check_spec(accounting)
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[1] < 2 or not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any():
        raise ValueError(f"counts must be non-negative integers of shape (n, K+1) with K >= 1, got {counts.shape}")
    totals = counts.sum(axis=1)
    steps = int(totals[0]) if len(totals) else 0
    if steps < 1 or (totals != steps).any():
        raise ValueError("every row of counts must sum to the same number of steps T >= 1")
    at_clip = np.asarray(at_worst_case, dtype=np.int64)
    if at_clip.shape != totals.shape or (at_clip < 0).any() or (at_clip > steps).any():
        raise ValueError(f"at_worst_case must be (n,) step counts in 0..{steps}")
    resolution = counts.shape[1] - 1
    expected = grid_curves(q, sigma, spec, resolution) if curves is None else np.asarray(curves, dtype=float)
    if expected.shape != (resolution + 1, len(spec.resolved_orders)):
        raise ValueError(f"curves must have shape {(resolution + 1, len(spec.resolved_orders))} (grid points x "
                         f"orders), got {expected.shape}")
    curves = expected
    return _from_histogram(counts, curves, at_clip=at_clip, total_s=np.full(len(counts), np.nan), steps=steps, q=q,
                           sigma=sigma, delta=delta, spec=spec, clip=1.0, resolution=resolution)


def grid_curves(sampling_rate: float, noise_multiplier: float, accounting: AccountingSpec | None = None,
                resolution: int = DEFAULT_RESOLUTION) -> np.ndarray:
    """dp_accounting's RDP of the Poisson-sampled Gaussian at each grid sensitivity :math:`\\sqrt{k/K}`,
    :math:`\\rho(\\alpha; q, \\sigma / \\sqrt{k/K})` (0 at k = 0), shape (K+1, orders): what every run at these
    settings shares (dp_accounting's formulas at every grid point at once: ``_sampled_gaussian_rdp``; memoised
    in the process).

    Parameters
    ----------
    sampling_rate, noise_multiplier : float
        q and :math:`\\sigma`.
    accounting : AccountingSpec, optional
        Its orders (RDP with add/remove neighbours).
    resolution : int
        K.

    Returns
    -------
    numpy.ndarray
        Shape (K+1, len(orders)).
    """
    spec = _check_spec(accounting)
    return _grid_curves(check_fraction(sampling_rate, "sampling_rate"),
                        check_positive(noise_multiplier, "noise_multiplier"), tuple(spec.resolved_orders),
                        check_positive_int(resolution, "resolution"))


def _from_histogram(counts, curves, *, at_clip, total_s, steps, q, sigma, delta, spec, clip, resolution
                    ) -> IndividualPrivacy:
    """Compose each record's histogram of curves and convert (the end of :func:`individual_privacy`)."""
    orders = tuple(spec.resolved_orders)
    worst_curve = _curves(q, sigma, orders, np.array([1.0]))[0]
    # numerical guard: the true curve is non-decreasing in s and at most its value at s = 1
    curves = np.minimum(np.maximum.accumulate(curves, axis=0), worst_curve)
    rdp = _compose(counts, curves)
    order_array = np.asarray(orders, dtype=float)
    epsilons = epsilons_from_rdp_curves(order_array, rdp, delta, conversion=spec.conversion) if len(rdp) \
        else np.zeros(0)
    run_epsilon = float(epsilons_from_rdp_curves(order_array, (steps * worst_curve)[None, :], delta,
                                                 conversion=spec.conversion)[0])
    return IndividualPrivacy(epsilons=epsilons, worst_case=at_clip == steps,
                             mean_sensitivity=total_s / steps, run_epsilon=run_epsilon, delta=delta, steps=steps,
                             sampling_rate=q, noise_multiplier=sigma, clip=clip, resolution=resolution,
                             accounting=spec)


def group_privacy(result: IndividualPrivacy | np.ndarray, groups: Any, *, group_names: Sequence[str] | None = None,
                  quantiles: Sequence[float] = (0.1, 0.25, 0.5, 0.75, 0.9)) -> pd.DataFrame:
    """Each group's distribution of :math:`\\varepsilon_i` (tidy: one row per group x metric).

    For group :math:`k` with records :math:`I_k`: ``n`` :math:`= |I_k|`, ``mean``
    :math:`= \\frac{1}{|I_k|}\\sum_{i \\in I_k} \\varepsilon_i`, ``min``, the ``quantiles`` (metric names
    ``q10``, ``q50``, ...; numpy's linear interpolation), ``max``, ``worst_case_share`` (the share of
    :math:`I_k` at the worst case: gradient norm :math:`\\ge C` on every step; needs an
    :class:`IndividualPrivacy`) and ``mean_over_run`` :math:`= \\text{mean} / \\varepsilon_{\\text{run}}`.
    Group ``all`` is every record. ``attrs`` carries ``run_epsilon``, ``delta`` and ``what``
    (:data:`WHAT_EPSILON_I_IS`): these are estimates, not guarantees.

    Parameters
    ----------
    result : IndividualPrivacy or array_like
        From :func:`individual_privacy`, or bare :math:`\\varepsilon_i` (then no worst-case share).
    groups : array_like or GroupedDataset
        Each record's group: integer codes (named by ``group_names``), labels, or a dataset (its ``group`` and
        ``group_names``), aligned with the epsilons.
    group_names : sequence of str, optional
        Names of the integer codes 0..K-1.
    quantiles : sequence of float
        Quantile levels in [0, 1].

    Returns
    -------
    pandas.DataFrame
        Columns ``group``, ``metric``, ``value``.
    """
    if hasattr(groups, "group") and hasattr(groups, "group_names"):
        group_names = tuple(groups.group_names) if group_names is None else group_names
        groups = groups.group
    codes = np.asarray(groups.cpu() if hasattr(groups, "cpu") else groups)
    full = result if isinstance(result, IndividualPrivacy) else None
    eps = np.asarray(full.epsilons if full is not None else result, dtype=float)
    if eps.ndim != 1 or codes.shape != eps.shape:
        raise ValueError(f"groups must give one group per record: got {codes.shape} groups for epsilons of shape "
                         f"{eps.shape}")
    levels = [check_fraction(level, "quantiles", open_low=False) for level in quantiles]
    if group_names is not None:
        names = list(group_names)
        if not np.issubdtype(codes.dtype, np.integer) or (len(codes) and (codes.min() < 0
                                                                             or codes.max() >= len(names))):
            raise ValueError(f"groups must be integer codes 0..{len(names) - 1} when group_names is given")
        labels = np.asarray(names, dtype=object)[codes] if len(codes) else np.zeros(0, dtype=object)
        order = names
    else:
        labels = codes.astype(object)
        order = list(dict.fromkeys(sorted(set(labels.tolist()), key=str)))
    rows = []
    for name, mask in [("all", np.ones(len(eps), dtype=bool)), *((g, labels == g) for g in order)]:
        values = eps[mask]
        stats = {"n": float(mask.sum())}
        if len(values):
            stats |= {"mean": float(values.mean()), "min": float(values.min())}
            stats |= {f"q{100 * level:g}": float(np.quantile(values, level)) for level in levels}
            stats["max"] = float(values.max())
            if full is not None:
                stats["worst_case_share"] = float(full.worst_case[mask].mean())
                stats["mean_over_run"] = float(values.mean() / full.run_epsilon) if full.run_epsilon > 0 else math.nan
        rows += [{"group": str(name), "metric": metric, "value": value} for metric, value in stats.items()]
    frame = pd.DataFrame(rows, columns=["group", "metric", "value"])
    if full is not None:
        frame.attrs.update(run_epsilon=full.run_epsilon, delta=full.delta, what=full.what)
    return frame


# ------------------------------------------------------------------------------------------- internals


def _check_spec(accounting: AccountingSpec | None) -> AccountingSpec:
    spec = AccountingSpec() if accounting is None else accounting
    if not isinstance(spec, AccountingSpec):
        raise TypeError(f"accounting must be an AccountingSpec, got {accounting!r}")
    if spec.accountant != "rdp" or spec.neighboring != "add_remove":
        raise ValueError(f"individual accounting needs accountant='rdp' with neighboring='add_remove' (RDP composes "
                         f"per record by addition; a record's own sensitivity is an add/remove notion), got "
                         f"accountant={spec.accountant!r}, neighboring={spec.neighboring!r}")
    return spec


def _rows(norms_per_step: Any, repeats: Sequence[int] | None):
    """(row of norms, steps it covers) pairs, validated lazily."""
    if isinstance(norms_per_step, (str, bytes)) or not isinstance(norms_per_step, (np.ndarray, Iterable)):
        raise TypeError(f"norms_per_step must be an array (T, n) or an iterable of (n,) arrays, got "
                        f"{type(norms_per_step).__name__}")
    if isinstance(norms_per_step, np.ndarray) and norms_per_step.ndim != 2:
        raise ValueError(f"norms_per_step must have shape (T, n), got {norms_per_step.shape}")
    if repeats is not None:
        repeats = [int(r) for r in repeats]
        if any(not isinstance(r, Integral) or r < 1 for r in repeats):
            raise ValueError(f"repeats must be integers >= 1, got {repeats!r}")

    def generate():
        n = None
        count = 0
        for j, row in enumerate(norms_per_step):
            row = np.asarray(row.detach().cpu() if hasattr(row, "detach") else row, dtype=float)
            if row.ndim != 1 or (n is not None and len(row) != n):
                raise ValueError(f"norms_per_step[{j}] must have shape ({n if n is not None else 'n'},), got "
                                 f"{row.shape}")
            if not np.all(np.isfinite(row)) or np.any(row < 0):
                raise ValueError(f"norms_per_step[{j}] must hold finite norms >= 0")
            n = len(row)
            if repeats is not None and j >= len(repeats):
                raise ValueError(f"repeats has {len(repeats)} entries but norms_per_step has more rows")
            count += 1
            yield row, 1 if repeats is None else repeats[j]
        if count == 0:
            raise ValueError("norms_per_step must have at least one step")
        if repeats is not None and count != len(repeats):
            raise ValueError(f"repeats has {len(repeats)} entries for {count} rows of norms_per_step")

    return generate()


def _grid_histogram(rows, clip: float, resolution: int):
    """Per record: steps in each grid bin k = ceil(K s^2) (shape (n, K+1)), steps at C, sum of s, T."""
    counts = at_clip = total_s = None
    steps = 0
    for row, repeat in rows:
        s = np.minimum(row, clip) / clip
        bins = np.minimum(np.ceil(s * s * resolution), resolution).astype(np.int64)
        bins[(s > 0) & (bins == 0)] = 1  # s^2 underflows to 0 below 1e-162: still a positive sensitivity
        if counts is None:
            counts = np.zeros((len(row), resolution + 1), dtype=np.int64)
            at_clip, total_s = np.zeros(len(row), dtype=np.int64), np.zeros(len(row))
        counts[np.arange(len(row)), bins] += repeat
        at_clip += repeat * (row >= clip)
        total_s += repeat * s
        steps += repeat
    return counts, at_clip, total_s, steps


def _exact_histogram(rows, clip: float):
    """As :func:`_grid_histogram` with one bin per distinct sensitivity (the sorted distinct values)."""
    rows = list(rows)
    s = np.stack([np.minimum(row, clip) / clip for row, _ in rows])
    repeat = np.asarray([r for _, r in rows], dtype=np.int64)
    values, inverse = np.unique(s, return_inverse=True)
    inverse = inverse.reshape(s.shape)
    n = s.shape[1]
    counts = np.zeros((n, len(values)), dtype=np.int64)
    for j in range(len(rows)):
        counts[np.arange(n), inverse[j]] += repeat[j]
    at_clip = (repeat[:, None] * (s >= 1.0)).sum(axis=0)
    return counts, values, at_clip, (repeat[:, None] * s).sum(axis=0), int(repeat.sum())


def _grid_curves(q: float, sigma: float, orders: tuple[float, ...], resolution: int) -> np.ndarray:
    """(K+1, len(orders)): the sampled Gaussian's RDP at the sensitivities sqrt(k/K), memoised."""
    key = (q, sigma, orders, resolution)
    if key not in _CURVES:
        if len(_CURVES) >= _CURVES_SIZE:
            _CURVES.clear()
        grid = np.sqrt(np.arange(resolution + 1) / resolution)
        grid[-1] = 1.0
        curves = np.zeros((resolution + 1, len(orders)))
        curves[1:] = _sampled_gaussian_rdp(q, sigma / np.maximum(grid[1:], min(1.0, sigma / MAX_MULTIPLIER)), orders)
        _CURVES[key] = curves
    return _CURVES[key]


def _sampled_gaussian_rdp(q: float, multipliers: np.ndarray, orders: tuple[float, ...]) -> np.ndarray:
    """(len(multipliers), len(orders)): dp_accounting's RDP of PoissonSampled(q, Gaussian(m)) at each multiplier m,
    :math:`\\rho(\\alpha; q, m) = \\log A_\\alpha / (\\alpha - 1)`, every multiplier at once: its formulas
    (Mironov, Talwar & Zhang 2019, Sec. 3.2 and 3.3) as arrays instead of a Python loop per order and multiplier
    (``_log_a_integer``, ``_log_a_fractional``), dp_accounting itself where q = 1 or an order is at most 1.
    Equal to dp_accounting's curves to rounding (relative 1e-10 or absolute 1e-13:
    tests/privacy/test_individual.py)."""
    multipliers = np.asarray(multipliers, dtype=float)[:, None]
    out = np.zeros((len(multipliers), len(orders)))
    for j, alpha in enumerate(orders):
        if 0 < q < 1 and alpha > 1:
            log_a = _log_a_integer if float(alpha).is_integer() else _log_a_fractional
            out[:, j] = log_a(q, multipliers, float(alpha)) / (alpha - 1)
        else:
            out[:, j] = [_rdp_curve(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(float(m))),
                                    (alpha,))[0] for m in multipliers[:, 0]]
    return out


def _log_a_integer(q: float, m: np.ndarray, alpha: float) -> np.ndarray:
    """:math:`\\log A_\\alpha = \\log \\sum_{k=0}^{\\alpha} \\binom{\\alpha}{k} (1 - q)^{\\alpha - k} q^k
    e^{(k^2 - k)/(2 m^2)}` for an integer order, each row of ``m`` (shape (M, 1)) at once."""
    k = np.arange(alpha + 1)
    log_coefficients = (gammaln(alpha + 1) - gammaln(k + 1) - gammaln(alpha - k + 1) + k * math.log(q)
                        + (alpha - k) * math.log1p(-q))
    return logsumexp(log_coefficients + (k * k - k) / (2 * m ** 2), axis=1)


def _log_a_fractional(q: float, m: np.ndarray, alpha: float) -> np.ndarray:
    """:math:`\\log A_\\alpha` for a fractional order as dp_accounting's ``_compute_log_a_frac`` sums it: the two
    series :math:`\\sum_i s_{0,i}`, :math:`\\sum_i s_{1,i}` (with :math:`z_0 = m^2 \\log(1/q - 1) + 1/2`),

    .. math:: s_{0,i} = \\tbinom{\\alpha}{i} q^i (1 - q)^{\\alpha - i} e^{(i^2 - i)/(2m^2)}
              \\tfrac12 \\mathrm{erfc}\\big(\\tfrac{i - z_0}{\\sqrt2 m}\\big), \\quad
              s_{1,i} = \\tbinom{\\alpha}{i} q^{\\alpha - i} (1 - q)^i e^{(j^2 - j)/(2m^2)}
              \\tfrac12 \\mathrm{erfc}\\big(\\tfrac{z_0 - j}{\\sqrt2 m}\\big), \\; j = \\alpha - i,

    accumulated term by term and stopped, as there, at the first i where both terms decrease and are below the
    total by :math:`e^{30}`; each row of ``m`` (shape (M, 1)) at once, on 64, 128, ... terms until every row has
    stopped (infinite where none has within dp_accounting's cap, as there)."""
    z0 = m ** 2 * math.log(1 / q - 1) + 0.5
    terms = 64
    while True:
        i = np.arange(terms, dtype=float)
        j = alpha - i
        log_coefficients = gammaln(alpha + 1) - gammaln(i + 1) - gammaln(alpha - i + 1)
        log_e0 = math.log(0.5) + math.log(2) + log_ndtr(-(i - z0) / (math.sqrt(2) * m) * 2 ** 0.5)
        log_e1 = math.log(0.5) + math.log(2) + log_ndtr(-(z0 - j) / (math.sqrt(2) * m) * 2 ** 0.5)
        log_s0 = log_coefficients + i * math.log(q) + j * math.log1p(-q) + (i * i - i) / (2 * m ** 2) + log_e0
        log_s1 = log_coefficients + j * math.log(q) + i * math.log1p(-q) + (j * j - j) / (2 * m ** 2) + log_e1
        total = np.logaddexp(np.logaddexp.accumulate(log_s0, axis=1), np.logaddexp.accumulate(log_s1, axis=1))
        stop = np.zeros(log_s0.shape, dtype=bool)
        stop[:, 1:] = ((log_s0[:, 1:] < log_s0[:, :-1]) & (log_s1[:, 1:] < log_s1[:, :-1])
                       & (np.maximum(log_s0, log_s1)[:, 1:] < total[:, 1:] - 30))
        if stop.any(axis=1).all() or terms >= _FRACTIONAL_TERMS:
            first = stop.argmax(axis=1)
            return np.where(stop.any(axis=1), total[np.arange(len(m)), first], np.inf)
        terms = min(2 * terms, _FRACTIONAL_TERMS)


def _curves(q: float, sigma: float, orders: tuple[float, ...], sensitivities: np.ndarray) -> np.ndarray:
    """(len(sensitivities), len(orders)): dp_accounting's RDP of PoissonSampled(q, Gaussian(sigma / s)); 0 at
    s = 0 (the release does not depend on the record); s > 0 at least min(1, sigma / MAX_MULTIPLIER)."""
    out = np.zeros((len(sensitivities), len(orders)))
    floor = min(1.0, sigma / MAX_MULTIPLIER)
    for k, s in enumerate(sensitivities):
        if s > 0:
            event = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma / max(float(s), floor)))
            out[k] = _rdp_curve(event, orders)
    return out


def _compose(counts: np.ndarray, curves: np.ndarray) -> np.ndarray:
    """RDP_i = sum_k counts[i, k] curves[k] (an infinite order stays infinite where its count is positive,
    instead of 0 x inf = NaN)."""
    infinite = np.isinf(curves)
    rdp = counts.astype(float) @ np.where(infinite, 0.0, curves)
    if infinite.any():
        rdp[(counts @ infinite.astype(np.int64)) > 0] = np.inf
    return rdp
