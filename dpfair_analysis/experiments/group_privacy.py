"""Who gets less privacy: each group's per-record :math:`\\varepsilon_i` beside its cost of privacy (issue 52.3).

One private run of a method on a comparison setting (:class:`~dpfair_analysis.experiments.compare.CompareConfig`:
the same data, split, model, policy and equal-privacy cut as ``dpfair compare``), trained with a
:class:`~dpfair_analysis.training.norm_recorder.NormRecorder`, and the SGD run of the same split; per group, the
distribution of :math:`\\varepsilon_i` (:mod:`dpfair_analysis.privacy.individual`: an **ex-post estimate**, not a
guarantee) beside its test accuracy cost :math:`\\Delta^k = \\mathrm{acc}_k(\\text{private}) -
\\mathrm{acc}_k(\\text{SGD})` (``dpfair compare``'s).

**Group bounds.** DPSGD-F and FairDP clip group :math:`k` at :math:`C_{k,t}` and noise the sum with
:math:`\\sigma \\max_j C_{j,t}`, and release further statistics on the same batch (noisy counts, FairDP's capped
excess) with multipliers :math:`\\sigma_a`. The loop accounts a step as one sampled Gaussian of joint multiplier
:math:`\\sigma_J = (\\sigma^{-2} + \\sum_a \\sigma_a^{-2})^{-1/2}`. For record :math:`i` of group :math:`k`, the
sum's sensitivity relative to its noise is :math:`s_{i,t} = \\min(\\|g_i\\|, C_{k,t}) / \\max_j C_{j,t}` and
every other release is charged at its full sensitivity (a count moves by exactly 1 whatever the gradient;
FairDP's capped excess at most by its cap: conservative), so its step is a sampled Gaussian of multiplier
:math:`(s_{i,t}^2 \\sigma^{-2} + \\sum_a \\sigma_a^{-2})^{-1/2} = \\sigma_J / s'_{i,t}` with

.. math:: s'_{i,t} = \\sigma_J \\sqrt{\\sum_a \\sigma_a^{-2} + s_{i,t}^2 \\sigma^{-2}} \\in [0, 1],

which :func:`~dpfair_analysis.privacy.individual.individual_privacy` composes at noise multiplier
:math:`\\sigma_J` (``clip = 1``). :math:`s' = 1` exactly when the record is clipped at the step's largest bound;
then its step is the ledger's, and a record at it on every step has the run's :math:`\\varepsilon`. The bounds
:math:`C_{k,t}` are each step's released values (the run's step records). Plain DP-SGD is the case
:math:`C_{k,t} = C` with no other release.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from dpfair_analysis.experiments.cache import RunCache, config_key
from dpfair_analysis.experiments.compare import CompareConfig, _run_key, _run_spec, _summary, load_data, \
    run_compare, split_for_seed
from dpfair_analysis.experiments.dpsgdf import CENSUS, MNIST_UNBALANCED, with_profile
from dpfair_analysis.fairness.metrics import cost_of_privacy
from dpfair_analysis.privacy.individual import (DEFAULT_RESOLUTION, WHAT_EPSILON_I_IS, IndividualPrivacy, grid_curves,
                                                group_privacy, individual_privacy_from_histogram)
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.loop import schedule, train
from dpfair_analysis.training.norm_recorder import NormRecorder, SampledNorms
from dpfair_analysis.validation import check_positive_int

__all__ = ["GROUP_PRIVACY_METHODS", "PAPER_SETTINGS", "GroupPrivacyResult", "describe_group_privacy",
           "group_privacy_frames", "group_privacy_run", "paper_group_privacy", "record_sensitivities",
           "nearest_sample_steps", "sampled_sensitivity_histogram", "sensitivity_histogram"]

#: The methods whose per-record sensitivity the accounting models: clipping to per-group bounds (no weights)
#: with the sum's noise scaled to the largest bound. Naive (weights) and DP-FedAvg (users) are not covered.
GROUP_PRIVACY_METHODS = ("dpsgd", "dpsgdf", "fairdp")

#: The papers' settings (paper 000/004's census runs with logistic regression; unbalanced MNIST with the CNN, on
#: the offline 5,000-image subset with class 8 cut to the paper's ratio -- not full MNIST, whose 60-epoch CNN
#: runs take 24-33 minutes each here).
PAPER_SETTINGS: dict[str, CompareConfig] = {
    "adult by sex": CENSUS,
    "adult by race": replace(CENSUS, data_options={"by": "race"}),
    "dutch": replace(CENSUS, dataset="dutch", data_options={"sex_coding": "paper"}),
    "mnist-5k unbalanced (class 8)": MNIST_UNBALANCED,
}

#: The last sentence of every description.
NOT_GUARANTEES = "epsilon_i are ex-post estimates from the run's gradient norms, not guarantees"

#: Bumped when what a cached entry holds changes.
_FORMAT = 1

#: Below this many distinct step settings per grid point (S * share <= K) a checkpoint bins each record directly.
_DIRECT_SHARE = 4

#: :func:`sampled_sensitivity_histogram` bins every record at every step when more than 1/this of the steps change
#: the setting (searching at the changed steps costs 5-7x more per record and step than the arithmetic).
_DENSE_SHARE = 8

#: Records binned at once over all T steps by ``_bins_every_step`` (a (block, T) array: 64 x 2,827 on Adult).
_BLOCK = 64

#: The per-group quantities of the table, in its column order.
_EPSILON_COLUMNS = ("mean", "q10", "q50", "q90", "max", "worst_case_share")


@dataclass(frozen=True)
class GroupPrivacyResult:
    """One run's per-group :math:`\\varepsilon_i` beside the groups' accuracy cost.

    Attributes
    ----------
    config : CompareConfig
        The setting (its ``methods`` and ``seeds`` ignored: ``method`` and ``seed`` say which run).
    method, seed : str, int
        The private run.
    table : pandas.DataFrame
        One row per group (``all`` first): ``n_train``, the :math:`\\varepsilon_i` columns ``mean``, ``q10``,
        ``q50``, ``q90``, ``max``, ``worst_case_share``, and ``accuracy`` (private), ``accuracy_sgd``, ``cost``.
    epsilons : pandas.DataFrame
        One row per training record: ``group``, ``epsilon`` (for figures).
    run_epsilon : float
        The run's guarantee (the ledger's epsilon; every :math:`\\varepsilon_i` is at most it).
    delta : float
    steps : int
        The run's steps.
    every : int or None
        Steps between the recorder's checkpoints (norms held in between); None: each record's norm as the DP step
        computed it at its own batches (:class:`~dpfair_analysis.training.norm_recorder.SampledNorms`).
    cpu_seconds : dict
        Process CPU time when computed: ``run`` (training without the recorder's passes), ``recorder``,
        ``accounting``.
    what : str
        What :math:`\\varepsilon_i` is (:data:`~dpfair_analysis.privacy.individual.WHAT_EPSILON_I_IS`).
    """

    config: CompareConfig
    method: str
    seed: int
    table: pd.DataFrame
    epsilons: pd.DataFrame
    run_epsilon: float
    delta: float
    steps: int
    every: int | None
    cpu_seconds: dict
    what: str = WHAT_EPSILON_I_IS

    def to_json(self) -> dict:
        """The result as plain JSON types (NaN as None)."""
        rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                for row in self.table.reset_index().to_dict("records")]
        return {"dataset": self.config.dataset, "data_options": dict(self.config.data_options),
                "method": self.method, "seed": self.seed, "run_epsilon": self.run_epsilon, "delta": self.delta,
                "steps": self.steps, "recorded_every": self.every, "groups": rows,
                "cpu_seconds": self.cpu_seconds, "what": self.what, "summary": describe_group_privacy(self)}


def record_sensitivities(norms: np.ndarray, bounds: np.ndarray, *, reference: float, noise_multiplier: float,
                         other_multipliers: tuple[float, ...] = ()) -> np.ndarray:
    """Each record's step sensitivity relative to the joint noise (module docstring):

    .. math:: s_i = \\min(\\|g_i\\|, C_{k_i}) / R, \\qquad
              s'_i = \\sigma_J \\sqrt{\\textstyle\\sum_a \\sigma_a^{-2} + s_i^2 \\sigma^{-2}},

    with :math:`R` the bound the sum's noise is scaled to (:math:`\\max_k C_k`) and
    :math:`\\sigma_J = (\\sigma^{-2} + \\sum_a \\sigma_a^{-2})^{-1/2}`; exactly 1 where
    :math:`\\min(\\|g_i\\|, C_{k_i}) \\ge R`.

    Parameters
    ----------
    norms : numpy.ndarray
        :math:`\\|g_i\\|`, shape (n,) (or any shape: the arguments broadcast, e.g. (T, n) steps by records).
    bounds : numpy.ndarray
        Each record's clipping bound :math:`C_{k_i}`, shape (n,).
    reference : float or numpy.ndarray
        :math:`R > 0`: the sum's noise is :math:`\\sigma R` (an array: one per step, e.g. shape (T, 1)).
    noise_multiplier : float
        :math:`\\sigma`, the sum's multiplier.
    other_multipliers : tuple of float
        :math:`\\sigma_a` of the step's other releases, each charged at its full sensitivity.

    Returns
    -------
    numpy.ndarray
        :math:`s'_i \\in [0, 1]`, shape (n,).
    """
    s = np.minimum(np.asarray(norms, dtype=float), np.asarray(bounds, dtype=float)) / reference
    others = sum(m ** -2.0 for m in other_multipliers)
    joint = joint_noise_multiplier((noise_multiplier, *other_multipliers))
    scaled = joint * np.sqrt(others + np.minimum(s, 1.0) ** 2 / noise_multiplier ** 2)
    return np.where(s >= 1.0, 1.0, np.minimum(scaled, 1.0))


def group_privacy_run(config: CompareConfig, method: str = "dpsgd", *, seed: int = 0, every: int | None = None,
                      resolution: int = DEFAULT_RESOLUTION, cache: RunCache | None = None,
                      progress: bool = False) -> GroupPrivacyResult:
    """Train ``method`` on ``config``'s setting with every record's gradient norm recorded, and set each group's
    :math:`\\varepsilon_i` beside its accuracy cost against SGD on the same split.

    Parameters
    ----------
    config : CompareConfig
        The setting (data, split, model, noise, clip, training; its ``methods`` and ``seeds`` are ignored).
    method : str
        One of :data:`GROUP_PRIVACY_METHODS`.
    seed : int
        The split and run seed.
    every : int, optional
        Steps between norm checkpoints of a :class:`~dpfair_analysis.training.norm_recorder.NormRecorder` (a pass
        over every record each: 1 is exact and costs n/b steps of per-sample work per step). Default None: no
        checkpoints -- the norms the DP step computes for its batch, each record's held from its last batch
        (:class:`~dpfair_analysis.training.norm_recorder.SampledNorms`: one pass, at :math:`\\theta_0`).
    resolution : int
        The sensitivity grid's K (:func:`~dpfair_analysis.privacy.individual.individual_privacy`).
    cache : RunCache, optional
        Where the result (and the SGD run, under ``dpfair compare``'s key) is looked up and stored.
    progress : bool
        Progress bars.

    Returns
    -------
    GroupPrivacyResult
    """
    if method not in GROUP_PRIVACY_METHODS:
        raise ValueError(f"method must be one of {list(GROUP_PRIVACY_METHODS)} (per-group clipping bounds, no "
                         f"weights), got {method!r}")
    resolution = check_positive_int(resolution, "resolution")
    cache = cache if cache is not None else RunCache(None)
    config = replace(config, methods=("sgd", method), seeds=(seed,))
    full, official = load_data(config)
    train_data, test_data = split_for_seed(config, full, official, seed=seed)
    every = None if every is None else check_positive_int(every, "every")
    key = config_key("group_privacy", _FORMAT, _run_key(config, method, seed, train_data), every, resolution)
    record = cache.get_or_compute(key, lambda: _recorded_run(config, method, train_data, test_data, seed=seed,
                                                             every=every, resolution=resolution,
                                                             progress=progress, cache=cache))
    baseline = run_compare(replace(config, methods=("sgd",)), cache=cache, progress=progress)
    sgd = baseline.per_seed.query("method == 'sgd' and group != 'max_gap'").set_index("group")["accuracy"]
    return _result(config, method, seed, record, sgd, group_names=full.group_names, every=every)


def _recorded_run(config: CompareConfig, method: str, train_data, test_data, *, seed: int, every: int,
                  resolution: int, progress: bool, cache: RunCache | None = None) -> dict:
    """The private run with a norm recorder, its per-record :math:`\\varepsilon_i` and CPU times (what is
    cached)."""
    spec = _run_spec(config, method, train_data, test_data, seed=seed)
    steps, _ = schedule(len(train_data), spec.config)
    recorder = _TimedRecorder(train_data, every=every, total_steps=steps)
    start = time.process_time()
    result = train(spec.model, spec.train_data, spec.policy, spec.config, test_data=test_data, progress=progress,
                   callbacks=[recorder], batch_observers=[recorder.observe] if every is None else [])
    run_seconds = time.process_time() - start - recorder.seconds
    start = time.process_time()
    estimate = _account(recorder, result.steps, spec.policy, sampling_rate=spec.config.batch_size / len(train_data),
                        delta=spec.config.delta, accounting=spec.config.accounting, resolution=resolution,
                        cache=cache)
    accounting_seconds = time.process_time() - start
    return {"summary": _summary(method, result, test_data, batched=1), "epsilons": estimate.epsilons.astype(np.float32),
            "worst_case": estimate.worst_case, "groups": recorder.groups, "run_epsilon": float(result.epsilon),
            "estimate_worst_case": estimate.run_epsilon, "delta": estimate.delta, "steps": estimate.steps,
            "cpu_seconds": {"run": run_seconds, "recorder": recorder.seconds, "accounting": accounting_seconds}}


class _TimedRecorder:
    """A :class:`~dpfair_analysis.training.norm_recorder.NormRecorder` (checkpoints every ``every`` steps) or, for
    ``every=None``, a :class:`~dpfair_analysis.training.norm_recorder.SampledNorms`, adding up its own CPU time."""

    def __init__(self, data: Any, *, every: int | None, total_steps: int) -> None:
        self.recorder = SampledNorms(data) if every is None else NormRecorder(data, every=every,
                                                                                total_steps=total_steps)
        self.seconds = 0.0

    def __call__(self, t: int, model: Any, state: Any) -> None:
        start = time.process_time()
        self.recorder(t, model, state)
        self.seconds += time.process_time() - start

    def observe(self, t: int, index: Any, norms: Any) -> None:
        start = time.process_time()
        self.recorder.observe(t, index, norms)
        self.seconds += time.process_time() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self.recorder, name)


def _account(recorder: Any, steps: pd.DataFrame, policy: Any, *, sampling_rate: float, delta: float,
             accounting: Any, resolution: int, cache: RunCache | None = None):
    """Per-record :math:`\\varepsilon_i` of the recorded norms under each step's released group bounds (module
    docstring), from :func:`sensitivity_histogram`; the grid's RDP curves (the part every run at the same q and
    joint multiplier shares) looked up in ``cache``."""
    sigma = float(policy.noise_multiplier)
    planned = list(policy.planned_noise_multipliers())
    planned.remove(sigma)  # the sum's; the rest are the step's other releases
    others = tuple(planned)
    groups = recorder.groups
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    bound_columns = [f"C[{k}]" for k in range(n_groups)]
    if all(c in steps.columns for c in bound_columns):  # group bounds; the sum's noise is sigma x the largest
        bounds = steps[bound_columns].to_numpy(dtype=float)
        reference = bounds.max(axis=1)
    else:  # one bound for every group: the noise's
        reference = steps["noise_std"].to_numpy(dtype=float) / sigma
        bounds = np.repeat(reference[:, None], n_groups, axis=1)
    options = {"noise_multiplier": sigma, "other_multipliers": others, "resolution": resolution}
    source = getattr(recorder, "recorder", recorder)  # a _TimedRecorder's, or the recorder itself
    if isinstance(source, SampledNorms):  # the DP step's own norms
        counts, at_worst_case = sampled_sensitivity_histogram(source.initial, source.updates, groups, bounds,
                                                              reference, **options)
    else:
        counts, at_worst_case = sensitivity_histogram(recorder.norms, recorder.repeats, groups, bounds, reference,
                                                      **options)
    joint = joint_noise_multiplier((sigma, *others))
    key = config_key("group_privacy_curves", sampling_rate, joint, accounting, resolution)
    curves = (cache if cache is not None else RunCache(None)).get_or_compute(
        key, lambda: grid_curves(sampling_rate, joint, accounting, resolution))
    return individual_privacy_from_histogram(counts, at_worst_case=at_worst_case, noise_multiplier=joint,
                                             sampling_rate=sampling_rate, delta=delta, accounting=accounting,
                                             curves=curves)


def sensitivity_histogram(norms: np.ndarray, repeats: np.ndarray, groups: np.ndarray, bounds: np.ndarray,
                          reference: np.ndarray, *, noise_multiplier: float, other_multipliers: tuple[float, ...],
                          resolution: int) -> tuple[np.ndarray, np.ndarray]:
    """Each record's steps per grid bin of :func:`record_sensitivities` (rounded up to
    :math:`\\{\\sqrt{b/K}\\}`), and its steps at the worst case, without a pass over the records per step.

    Record i's bin at step t is :math:`\\lceil K s'^2_{i,t} \\rceil`, and :math:`s'` is non-decreasing in the
    norm :math:`v_i` (held between checkpoints): :math:`s'^2 > (b-1)/K` iff
    :math:`\\min(v_i, C_{k,t}) > R_t s_b`, :math:`s_b^2 = \\sigma^2((b-1)/(K\\sigma_J^2) - \\sum_a \\sigma_a^{-2})`
    (every record when negative). So within a checkpoint and group, with the records sorted by norm, each step's
    bins are K + 1 contiguous ranges found by binary search, added to a difference array: O(K log n) per step
    and group, and O(n K) per checkpoint and group (with few distinct steps in a checkpoint, as under one uniform
    bound, each record's bin is found directly instead: O(n log K) per distinct step). A record within a relative
    1e-9 of a threshold goes to the higher bin (conservative); the worst case is :math:`\\min(v_i, C_{k,t}) \\ge R_t`.

    Parameters
    ----------
    norms : numpy.ndarray
        (m, n): every record's gradient norm at each checkpoint.
    repeats : numpy.ndarray
        (m,): steps each checkpoint covers (T is their sum).
    groups : numpy.ndarray
        (n,) group codes 0..G-1.
    bounds : numpy.ndarray
        (T, G): each step's group bounds :math:`C_{k,t}`.
    reference : numpy.ndarray
        (T,): each step's :math:`R_t` (the sum's noise is :math:`\\sigma R_t`).
    noise_multiplier, other_multipliers
        As :func:`record_sensitivities`.
    resolution : int
        K.

    Returns
    -------
    tuple of numpy.ndarray
        Counts (n, K+1) and steps at the worst case (n,).
    """
    n, K = norms.shape[1], resolution
    unit = _bin_floors(noise_multiplier, other_multipliers, resolution)
    counts = np.zeros((n, K + 1), dtype=np.int64)
    at_worst = np.zeros(n, dtype=np.int64)
    ends = np.cumsum(repeats)
    for j, end in enumerate(ends):
        window = slice(end - repeats[j], end)
        for k in np.unique(groups):
            members = np.flatnonzero(groups == k)
            order = members[np.argsort(norms[j, members], kind="stable")]
            v = norms[j, order]
            settings, weights = np.unique(np.stack([bounds[window, k], reference[window]], axis=1), axis=0,
                                          return_counts=True)
            C, R = settings[:, 0], settings[:, 1]
            thresholds = R[:, None] * unit[None, :] * (1 - 1e-9)  # (S, K): min(v, C) > this for bin >= b
            thresholds[thresholds < 0] = -np.inf
            thresholds[~(C[:, None] * (1 + 1e-9) > thresholds)] = np.inf  # the bound itself is below it
            if len(settings) * _DIRECT_SHARE <= K:  # few distinct steps: each record's bin directly, O(n log K)
                for row, weight in zip(thresholds, weights):
                    np.add.at(counts, (order, np.searchsorted(row, v, side="left")), weight)
            else:  # many: ranges of the sorted records per step, summed in a difference array, O(n K)
                first = np.searchsorted(v, thresholds, side="right")
                edges = np.concatenate([np.zeros((len(C), 1), dtype=np.int64), first,
                                        np.full((len(C), 1), len(v), dtype=np.int64)], axis=1)
                columns = np.broadcast_to(np.arange(K + 1), (len(C), K + 1))
                step_weights = np.broadcast_to(weights[:, None], columns.shape)
                diff = np.zeros((len(v) + 1, K + 1), dtype=np.int64)
                np.add.at(diff, (edges[:, :-1], columns), step_weights)
                np.add.at(diff, (edges[:, 1:], columns), -step_weights)
                counts[order] += np.cumsum(diff, axis=0)[:-1]
            worst = np.where(C >= R, np.searchsorted(v, R, side="left"), len(v))
            worst_diff = np.bincount(worst, weights=weights, minlength=len(v) + 1).astype(np.int64)
            at_worst[order] += np.cumsum(worst_diff)[:-1]
    return counts, at_worst


def _bin_floors(noise_multiplier: float, other_multipliers: tuple[float, ...], resolution: int) -> np.ndarray:
    """:math:`s_b` for b = 1..K (:func:`sensitivity_histogram`): a record's bin at a step is at least b iff
    :math:`\\min(v, C_{k,t}) > R_t s_b`, where :math:`s_b^2 = \\sigma^2((b-1)/(K\\sigma_J^2) - \\sum_a \\sigma_a^{-2})`
    (:math:`-\\infty` where negative: every record is past it)."""
    others = sum(m ** -2.0 for m in other_multipliers)
    joint = joint_noise_multiplier((noise_multiplier, *other_multipliers))
    squared = noise_multiplier ** 2 * (np.arange(resolution) / resolution / joint ** 2 - others)
    return np.where(squared >= 0, np.sqrt(np.maximum(squared, 0.0)), -np.inf)


def sampled_sensitivity_histogram(initial: np.ndarray, updates: tuple[np.ndarray, np.ndarray, np.ndarray],
                                  groups: np.ndarray, bounds: np.ndarray, reference: np.ndarray, *,
                                  noise_multiplier: float, other_multipliers: tuple[float, ...],
                                  resolution: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sensitivity_histogram` of the norms a :class:`~dpfair_analysis.training.norm_recorder.SampledNorms`
    kept: record i's norm :math:`v_{i,t}` is its norm at the step nearest t among its own batches and step 1
    (:math:`\\theta_0`'s pass; ties to the later: :func:`nearest_sample_steps`), so it changes only midway between
    two of i's batches. Record i's bin at step t,
    :math:`\\#\\{b : R_t s_b (1 - 10^{-9}) < \\min(v_{i,t}, C_{k_i,t}(1 + 10^{-9}))\\}` (the same bins, ties and
    worst case, :math:`\\min(v, C_{k,t}) \\ge R_t`, as :func:`sensitivity_histogram`), changes only where
    :math:`v_{i,t}` or the step's setting :math:`(C_{\\cdot,t}, R_t)` does. So each record's current bin is held
    and charged for the steps it lasted when it changes: :math:`O(\\log K)` per sampled row, and :math:`O(n \\log K)`
    per step whose setting differs from the previous one's (every step of DPSGD-F's noisy bounds; none of
    DP-SGD's), instead of :math:`O(n \\log K)` per step. When the setting changes at more than
    1/``_DENSE_SHARE`` of the steps (DPSGD-F's and FairDP's released bounds: at every step) every record is
    binned at every step instead, by arithmetic rather than a search (``_bins_every_step``): the same counts.

    Parameters
    ----------
    initial : numpy.ndarray
        (n,): every record's norm at :math:`\\theta_0`.
    updates : tuple of numpy.ndarray
        (steps, records, norms) of every sampled row, steps 1-based (a record at most once a step).
    groups, bounds, reference, noise_multiplier, other_multipliers, resolution
        As :func:`sensitivity_histogram` (``bounds`` (T, G), ``reference`` (T,)).

    Returns
    -------
    tuple of numpy.ndarray
        Counts (n, K+1) and steps at the worst case (n,).
    """
    floors = _bin_floors(noise_multiplier, other_multipliers, resolution) * (1 - 1e-9)
    changed = np.zeros(len(reference), dtype=bool)
    changed[1:] = (np.diff(bounds, axis=0) != 0).any(axis=1) | (np.diff(reference) != 0)
    binning = _bins_every_step if changed.sum() * _DENSE_SHARE > len(reference) else _bins_at_changes
    return binning(initial, nearest_sample_steps(*updates), groups, bounds, reference, floors, changed,
                   noise_multiplier=noise_multiplier, other_multipliers=other_multipliers, resolution=resolution)


def _bins_at_changes(initial, sampled, groups, bounds, reference, floors, changed, *, noise_multiplier,
                     other_multipliers, resolution) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sampled_sensitivity_histogram` by events: each record's bin is held and charged when its norm or the
    step's setting changes (``sampled``: :func:`nearest_sample_steps`' sorted norms; ``floors`` the thresholds
    :math:`s_b (1 - 10^{-9})`; ``changed`` the steps whose setting differs from the previous one's)."""
    steps_of, records, values = sampled
    n, T = len(initial), len(reference)
    counts = np.zeros((n, resolution + 1), dtype=np.int64)
    at_worst = np.zeros(n, dtype=np.int64)
    norm = np.asarray(initial, dtype=np.float64).copy()
    current = np.zeros(n, dtype=np.int64)
    worst = np.zeros(n, dtype=bool)
    since = np.zeros(n, dtype=np.int64)

    def settle(rows: np.ndarray, t: int) -> None:  # charge rows' held bins for steps since..t-1, rebin at step t
        held = t - since[rows]
        counts[rows, current[rows]] += held
        at_worst[rows] += held * worst[rows]
        since[rows] = t
        if t < T:
            C, R = bounds[t, groups[rows]], reference[t]
            current[rows] = np.searchsorted(R * floors, np.minimum(norm[rows], C * (1 + 1e-9)), side="left")
            worst[rows] = (C >= R) & (norm[rows] >= R)

    everyone = np.arange(n)
    settle(everyone, 0)
    first = np.searchsorted(steps_of, np.arange(1, T + 2), side="left")  # step t+1's rows: first[t]..first[t+1]
    for t in np.union1d(np.flatnonzero(changed), np.unique(steps_of - 1)):
        rows = records[first[t]:first[t + 1]]
        norm[rows] = values[first[t]:first[t + 1]]
        settle(everyone if changed[t] else rows, int(t))
    settle(everyone, T)
    return counts, at_worst


def _bins_every_step(initial, sampled, groups, bounds, reference, floors, changed, *, noise_multiplier,
                     other_multipliers, resolution) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sampled_sensitivity_histogram` binning every record at every step (arguments as
    ``_bins_at_changes``), ``_BLOCK`` records of a group at a time over all T steps. Record i's bin at step t
    is the number of thresholds :math:`R_t s_b (1 - 10^{-9})` below :math:`m = \\min(v_{i,t}, C_{k_i,t}(1 + 10^{-9}))`;
    with :math:`s_b^2 = \\sigma^2(b/(K\\sigma_J^2) - \\sum_a \\sigma_a^{-2})` that is

    .. math:: \\min(K, \\lceil x \\rceil), \\qquad
              x = K \\sigma_J^2 \\Big(\\sum_a \\sigma_a^{-2} + \\frac{m^2}{\\sigma^2 R_t^2 (1 - 10^{-9})^2}\\Big),

    computed in floating point (a few roundings: relative error ~1e-15), so it is taken where :math:`x` is farther
    than :math:`10^{-10}(K + 1)` from an integer and the thresholds are searched, as ``_bins_at_changes`` does,
    where it is not: the same bins exactly. :math:`O(nT)` vectorised work (no search), against
    ``_bins_at_changes``' :math:`O(n \\log K)` per changed step."""
    steps_of, records, values = sampled
    n, T, K = len(initial), len(reference), resolution
    joint = joint_noise_multiplier((noise_multiplier, *other_multipliers))
    slope = K * joint ** 2 / noise_multiplier ** 2 / (reference * (1 - 1e-9)) ** 2
    offset = K * joint ** 2 * sum(m ** -2.0 for m in other_multipliers)
    tolerance = 1e-10 * (K + 1)
    order = np.argsort(groups, kind="stable")  # positions: the records sorted by group
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    segment_position, segment_norm, lengths = _held_segments(
        position, np.asarray(initial, dtype=np.float64)[order], steps_of, records, values, T)
    edges = np.searchsorted(groups[order], np.arange(int(groups.max()) + 2 if n else 1))
    capped, at_largest = bounds * (1 + 1e-9), bounds >= reference[:, None]
    counts = np.zeros((n, K + 1), dtype=np.int64)
    at_worst = np.zeros(n, dtype=np.int64)
    for k in range(len(edges) - 1):
        for a in range(edges[k], edges[k + 1], _BLOCK):
            b = min(a + _BLOCK, edges[k + 1])
            first, stop = np.searchsorted(segment_position, [a, b])
            norms = np.repeat(segment_norm[first:stop], lengths[first:stop]).reshape(b - a, T)
            clipped = np.minimum(norms, capped[:, k])
            x = clipped * clipped
            x *= slope
            x += offset
            bins = np.ceil(x)
            x -= bins
            x += 0.5
            near = np.abs(x, out=x) > 0.5 - tolerance  # x within the tolerance of an integer: search
            np.minimum(bins, K, out=bins)
            bins += (np.arange(b - a) * (K + 1.0))[:, None]  # each record's own K+1 counts
            keys = bins.astype(np.int64)
            if near.any():
                for i, t in zip(*np.nonzero(near)):
                    keys[i, t] = i * (K + 1) + np.searchsorted(reference[t] * floors, clipped[i, t], side="left")
            counts[a:b] = np.bincount(keys.ravel(), minlength=(b - a) * (K + 1)).reshape(b - a, K + 1)
            worst = np.greater_equal(norms, reference, out=near)
            worst &= at_largest[:, k]
            at_worst[a:b] = np.count_nonzero(worst, axis=1)
    return counts[position], at_worst[position]


def _held_segments(position, initial, steps_of, records, values, steps):
    """Each record's held norms as runs (position, norm, length), sorted by position then first step: its
    norm at :math:`\\theta_0` from step 0, each sampled norm from its step (0-based; :func:`nearest_sample_steps`)
    to the next one's or T. A sampled norm from step 0 leaves the initial one a run of length 0."""
    n = len(initial)
    segment_position = np.concatenate([np.arange(n), position[records]])
    segment_start = np.concatenate([np.zeros(n, dtype=np.int64), np.asarray(steps_of, dtype=np.int64) - 1])
    segment_norm = np.concatenate([initial, np.asarray(values, dtype=np.float64)])
    by = np.lexsort((segment_start, segment_position))
    segment_position, segment_start, segment_norm = segment_position[by], segment_start[by], segment_norm[by]
    end = np.append(segment_start[1:], steps)
    end[np.append(segment_position[1:] != segment_position[:-1], True)] = steps
    return segment_position, segment_norm, end - segment_start


def nearest_sample_steps(steps: np.ndarray, records: np.ndarray, norms: np.ndarray) -> tuple[np.ndarray, ...]:
    """The sampled norms of :func:`sampled_sensitivity_histogram` with the step each takes effect from, sorted by it:
    a record's norm at step :math:`s_j` (its j-th batch) is the nearest one for steps
    :math:`\\lceil (s_{j-1} + s_j) / 2 \\rceil, \\dots` up to the next one's, with :math:`s_0 = 1` (the pass at
    :math:`\\theta_0`, step 1's parameters). Nearest, not last: a norm held only forward is on average 1/q steps old
    (memoryless sampling), held both ways half that, and on a trajectory whose norms drift it errs less.

    Parameters
    ----------
    steps, records, norms : numpy.ndarray
        Every sampled row: its 1-based step, its record and its norm.

    Returns
    -------
    tuple of numpy.ndarray
        (first steps, records, norms), sorted by first step (a record at most once a step).
    """
    steps, records = np.asarray(steps, dtype=np.int64), np.asarray(records, dtype=np.int64)
    order = np.lexsort((steps, records))
    by_record, at = records[order], steps[order]
    first_of_record = np.ones(len(at), dtype=bool)
    first_of_record[1:] = by_record[1:] != by_record[:-1]
    previous = np.where(first_of_record, 1, np.concatenate([[1], at[:-1]]))
    starts = (previous + at + 1) // 2
    resorted = np.argsort(starts, kind="stable")
    return starts[resorted], by_record[resorted], np.asarray(norms)[order][resorted]


def _result(config: CompareConfig, method: str, seed: int, record: dict, sgd: pd.Series, *,
            group_names: tuple[str, ...], every: int) -> GroupPrivacyResult:
    """The per-group table from a cached record and the SGD accuracies."""
    estimate = IndividualPrivacy(epsilons=np.asarray(record["epsilons"], dtype=float),
                                 worst_case=np.asarray(record["worst_case"]), mean_sensitivity=np.zeros(0),
                                 run_epsilon=record["estimate_worst_case"], delta=record["delta"],
                                 steps=record["steps"], sampling_rate=math.nan, noise_multiplier=math.nan,
                                 clip=math.nan, resolution=None)
    frame = group_privacy(estimate, record["groups"], group_names=group_names, quantiles=(0.1, 0.5, 0.9))
    table = frame.pivot(index="group", columns="metric", values="value")
    order = ["all", *[g for g in group_names if g in table.index]]
    table = table.loc[order, ["n", *_EPSILON_COLUMNS]].rename(columns={"n": "n_train"})
    table["n_train"] = table["n_train"].astype(int)
    accuracy = record["summary"]["accuracy"]["accuracy"].reindex(order)
    table["accuracy"] = accuracy
    table["accuracy_sgd"] = sgd.reindex(order)
    table["cost"] = cost_of_privacy(accuracy, table["accuracy_sgd"])
    table.index.name = "group"
    table.columns.name = None
    labels = np.asarray(group_names, dtype=object)[np.asarray(record["groups"])]
    epsilons = pd.DataFrame({"group": labels, "epsilon": np.asarray(record["epsilons"], dtype=float)})
    return GroupPrivacyResult(config=config, method=method, seed=seed, table=table, epsilons=epsilons,
                              run_epsilon=record["run_epsilon"], delta=record["delta"], steps=record["steps"],
                              every=every, cpu_seconds=dict(record["cpu_seconds"]))


def describe_group_privacy(result: GroupPrivacyResult) -> list[str]:
    """Sentences about ``result``, generated from its numbers: which group spends the most privacy on average,
    which loses the most accuracy, and whether they are the same group."""
    groups = result.table.drop(index="all")
    if len(groups) < 2:
        return [f"one group: mean epsilon_i {result.table['mean'].iloc[0]:.3f} of the run's {result.run_epsilon:.3f}"]
    spends = groups["mean"].idxmax()
    least = groups["mean"].idxmin()
    if math.isclose(groups.loc[spends, "mean"], groups.loc[least, "mean"], rel_tol=1e-6):
        same = (f"every group spends the same: mean epsilon_i {groups.loc[spends, 'mean']:.3f} (the run's "
                f"guarantee is epsilon = {result.run_epsilon:.3f}); no group gets less privacy than another")
        return [same, NOT_GUARANTEES]
    lines = [(f"{spends} spends the most privacy: mean epsilon_i {groups.loc[spends, 'mean']:.3f} "
              f"({groups.loc[spends, 'worst_case_share']:.1%} of its records at the worst case) against "
              f"{groups.loc[least, 'mean']:.3f} for {least} "
              f"({groups.loc[least, 'worst_case_share']:.1%}); the run's guarantee is epsilon = "
              f"{result.run_epsilon:.3f} for every record")]
    costs = groups["cost"].dropna()
    if len(costs) >= 2:
        hurt = costs.idxmin()
        if hurt == spends:
            relation = "the group that loses the most accuracy also spends the most privacy"
        elif hurt == least:
            relation = "the group that loses the most accuracy spends the least privacy"
        else:
            relation = "the group that loses the most accuracy is neither the one that spends the most privacy " \
                       "nor the least"
        lines.append(f"{hurt} loses the most accuracy (cost {costs[hurt]:+.4f} against SGD): {relation}")
    lines.append(NOT_GUARANTEES)
    return lines


def group_privacy_frames(results: list[GroupPrivacyResult]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tidy frames of several runs (e.g. one setting's methods) for ``plotting.plot_group_privacy`` and
    tables: (one row per record and run: ``method``, ``group``, ``epsilon``; one row per run and group: the
    table's columns with ``method``, ``dataset``, ``run_epsilon``)."""
    epsilons = pd.concat([r.epsilons.assign(method=r.method) for r in results], ignore_index=True)
    table = pd.concat([r.table.reset_index().assign(method=r.method, dataset=r.config.dataset,
                                                    run_epsilon=r.run_epsilon) for r in results], ignore_index=True)
    return epsilons, table


def paper_group_privacy(*, profile: str = "full", settings: tuple[str, ...] | None = None,
                        methods: tuple[str, ...] = GROUP_PRIVACY_METHODS, seed: int = 0,
                        cache: RunCache | None = None, progress: bool = False) -> list[GroupPrivacyResult]:
    """Every method on every setting of :data:`PAPER_SETTINGS` (``settings``: a subset of its names), one seed.

    ``profile="quick"`` is ``experiments.dpsgdf.with_profile``'s smoke run (1 epoch on a
    tenth of the training rows) with an 8-point sensitivity grid (a cheap, coarser, still conservative estimate).
    """
    names = tuple(PAPER_SETTINGS) if settings is None else settings
    unknown = [name for name in names if name not in PAPER_SETTINGS]
    if unknown:
        raise ValueError(f"settings must be names from {list(PAPER_SETTINGS)}, got {unknown}")
    resolution = 8 if profile == "quick" else DEFAULT_RESOLUTION
    results = []
    for name in names:
        config = with_profile(PAPER_SETTINGS[name], profile, seeds=1)
        results += [group_privacy_run(config, method, seed=seed, resolution=resolution, cache=cache,
                                      progress=progress) for method in methods]
    return results
