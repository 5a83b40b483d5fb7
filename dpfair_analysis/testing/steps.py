"""Auditing DP-SGD-like training: the gradient-canary method made generic, and one-run audits.

:func:`audit_step` audits the user's training function ``train_fn(data, rng)`` -- which
returns the model's parameters after every step (a (T + 1, P) trajectory; everything the
training exposes) -- against its claimed accounting (an (epsilon, delta), a
``dp_accounting`` event, or the noise multiplier, sampling and steps it is computed from).
The adversary adds a *canary* record (add-remove) or swaps one in (replace-one) and
tells the two trajectories apart.

What the adversary scores (``repeated`` mode, many training runs per side):

* black box (default): the step-by-step updates projected on ``canary_direction`` -- the
  direction a canary's gradient pushes the parameters (for a canary with its own
  feature, the weight of that feature: no other record's gradient ever moves it). The
  audit's statistic search (:mod:`.auditing`) picks the best test on selection runs: the sum
  of the projections, their maximum (the step that sampled the canary), a learned one;
* white box (``observe``): any score of the trajectory -- typically the exact
  log-likelihood ratio of the canary's coordinate given everything public, from the
  functions below, which the toolkit's own trainer audits use
  (:mod:`dpfair_analysis.verify.audits.trainers`):

  :func:`poisson_gaussian_llr` -- Poisson sampling at rate q: step t's update of the
  canary coordinate is z_t = 1[canary sampled] u_t + N(0, s_t^2) (u_t the canary's clipped,
  weighted gradient coordinate, s_t the noise scale), so

      LLR = sum_t log((1 - q) + q exp((z_t u_t - u_t^2 / 2) / s_t^2));

  :func:`shuffle_gaussian_llr` -- shuffling: the canary is in exactly one of each epoch's K
  steps, LLR = sum_epochs log((1/K) sum_{t in epoch} exp((z_t u_t - u_t^2 / 2) / s_t^2));

  :func:`gaussian_mixture_llr` -- any finite mixture per step (e.g. PF-LD's independent
  public and private batches: four components).

``one-run`` mode (Steinke, Nasr & Jagielski 2023): m canaries, each included independently
with probability 1/2, ONE training run; the adversary ranks the canaries by their scores,
guesses "in" for the top k+ and "out" for the bottom k-, and the number right bounds epsilon
(:func:`~dpfair_analysis.testing.one_run.one_run_bounds`, which also gives the f-DP analysis of the
same guesses). (k+, k-) is chosen from a small grid after the run; the confidence holds over the
grid by a union bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpfair_analysis.testing.auditing import AuditResult, audit
from dpfair_analysis.testing.bounds import DEFAULT_CONFIDENCE, check_delta_or_zero
from dpfair_analysis.testing.one_run import guess_grid, one_run_bounds, one_run_no_power
from dpfair_analysis.testing.relations import as_dataset, insert_row, make_relation, n_rows, replace_row
from dpfair_analysis.testing.runner import Runner, is_complex, read_only
from dpfair_analysis.validation import check_fraction, check_seed

SAMPLINGS = ("poisson", "shuffle", "fixed-size")


# ============================================================================ white-box scores
def _arrays(z: Any, u: Any, s: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = np.asarray(z, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64).ravel()
    if z.ndim == 1:
        z, u = z[:, None], u.reshape(len(z), -1)
    if z.shape != u.shape or len(s) != len(z):
        raise ValueError(f"z and u need one row per step and s one value per step, got shapes {z.shape}, "
                         f"{u.shape} and {s.shape}")
    return z, u, s


def step_exponents(z: Any, u: Any, s: Any) -> np.ndarray:
    """Per step, (z_t . u_t - ||u_t||^2 / 2) / s_t^2: the log-likelihood ratio of "canary in this step"
    against "not in it" for an update z_t ~ N(1[in] u_t, s_t^2 I); NaN where s_t <= 0 (no noise).

    Parameters
    ----------
    z : (T,) or (T, k) array
        The canary coordinate(s) of each step's update, in units of the noisy sum.
    u : (T,) or (T, k) array
        The canary's contribution to them if it is in the step.
    s : (T,) array
        Each step's noise standard deviation.
    """
    z, u, s = _arrays(z, u, s)
    out = np.full(len(z), np.nan)
    for t in range(len(z)):  # one step at a time, in order: the trainers' audits are reproduced to the bit
        if s[t] > 0:
            out[t] = float((z[t] @ u[t] - 0.5 * u[t] @ u[t]) / s[t] ** 2)
    return out


def poisson_gaussian_llr(z: Any, u: Any, s: Any, *, sampling_rate: float) -> float:
    """LLR = sum_t log((1 - q) + q exp(e_t)), e_t from :func:`step_exponents` (steps without noise skipped).

    Parameters
    ----------
    z, u, s : arrays
        As in :func:`step_exponents`.
    sampling_rate : float
        q, the Poisson sampling rate, in (0, 1].
    """
    q = check_fraction(sampling_rate, "sampling_rate")
    total = 0.0
    for exponent in step_exponents(z, u, s):
        if math.isnan(exponent):
            continue
        if q == 1.0:
            total += exponent
        else:
            total += float(np.logaddexp(math.log1p(-q), math.log(q) + exponent))
    return total


def shuffle_gaussian_llr(z: Any, u: Any, s: Any, *, steps_per_epoch: int) -> float:
    """LLR = sum over epochs of log((1/K) sum_{t in epoch} exp(e_t)): the canary is in exactly one step of each
    epoch of K steps (shuffled batches), e_t from :func:`step_exponents`.

    Parameters
    ----------
    z, u, s : arrays
        As in :func:`step_exponents`, T a multiple of K.
    steps_per_epoch : int
        K.
    """
    from scipy.special import logsumexp

    exponents = step_exponents(z, u, s)
    if steps_per_epoch < 1 or len(exponents) % steps_per_epoch:
        raise ValueError(f"steps_per_epoch must divide the {len(exponents)} steps, got {steps_per_epoch}")
    epochs = np.nan_to_num(exponents, nan=0.0).reshape(-1, steps_per_epoch)
    return float(np.sum(logsumexp(epochs, axis=1) - math.log(steps_per_epoch)))


def mixture_log_likelihood(residuals: Sequence[Any], log_weights: Sequence[float], s: float) -> float:
    """log sum_c w_c exp(-||r_c||^2 / (2 s^2)): a Gaussian mixture's log-likelihood up to its normalising
    constant, from the residuals r_c = update - mean_c of its components.

    Parameters
    ----------
    residuals : sequence of arrays
        One residual per component.
    log_weights : sequence of float
        log w_c.
    s : float
        The noise standard deviation (> 0).
    """
    from scipy.special import logsumexp

    terms = [w - float((np.asarray(r, dtype=np.float64) ** 2).sum()) / (2 * s ** 2)
             for r, w in zip(residuals, log_weights)]
    return float(logsumexp(terms))


def gaussian_mixture_llr(update: Any, means_a: Sequence[Any], means_b: Sequence[Any], log_weights: Sequence[float],
                         s: float) -> float:
    """log sum_c w_c N(update; m^b_c, s^2 I) - log sum_c w_c N(update; m^a_c, s^2 I) for one step.

    Side a and side b have the same mixture weights w_c (the sampling of the step) and their
    own component means (what the step adds in each case); the common normalising constant
    cancels (:func:`mixture_log_likelihood`).

    Parameters
    ----------
    update : array
        The observed update.
    means_a, means_b : sequences of arrays
        Component means under each side.
    log_weights : sequence of float
        log w_c.
    s : float
        The noise standard deviation (> 0).
    """
    o = np.asarray(update, dtype=np.float64)
    side = [mixture_log_likelihood([o - np.asarray(m, dtype=np.float64) for m in means], log_weights, s)
            for means in (means_a, means_b)]
    return side[1] - side[0]


# ============================================================================ the claim
def claimed_epsilon(*, delta: float, epsilon: float | None = None, event: Any = None,
                    noise_multiplier: float | None = None, sampling: str = "poisson",
                    sampling_rate: float | None = None, steps: int | None = None, rows: int | None = None,
                    batch_size: int | None = None, neighboring: str = "add_remove") -> tuple[float, str]:
    """The epsilon a training run claims at ``delta``, and where it comes from.

    Exactly one of: ``epsilon``; a ``dp_accounting`` ``event``; or ``noise_multiplier`` with
    the sampling: ``poisson`` (rate q, ``steps`` T: T-fold Poisson-sampled Gaussian),
    ``fixed-size`` (``batch_size`` b of ``rows`` n without replacement, T steps) or ``shuffle``
    (no amplification is claimed for shuffling: one Gaussian per epoch, T / (n / b) epochs).
    Events are accounted with the PLD accountant
    (:func:`dpfair_analysis.privacy.accounting.epsilon_from_event`).

    Parameters
    ----------
    delta : float
        The delta of the claim, in (0, 1) for an event.
    epsilon : float, optional
        A claimed epsilon directly.
    event : dp_accounting.DpEvent, optional
        What the training released.
    noise_multiplier : float, optional
        sigma (noise std / clipping bound) of every step.
    sampling : str
        One of :data:`SAMPLINGS`.
    sampling_rate : float, optional
        q (Poisson).
    steps : int, optional
        T.
    rows, batch_size : int, optional
        n and b (fixed-size and shuffle).
    neighboring : str
        ``add_remove`` or ``replace_one`` (the accountant's relation).
    """
    given = [epsilon is not None, event is not None, noise_multiplier is not None]
    if sum(given) != 1:
        raise ValueError("give exactly one of epsilon=, event= (a dp_accounting DpEvent) or noise_multiplier= "
                         "(with the sampling and steps)")
    if epsilon is not None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= 0):
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        return float(epsilon), "given"
    from dp_accounting import dp_event

    from dpfair_analysis.privacy.accounting import AccountingSpec, epsilon_from_event

    if event is None:
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
        if steps is None or steps < 1:
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
        gaussian = dp_event.GaussianDpEvent(float(noise_multiplier))
        if sampling == "poisson":
            q = check_fraction(sampling_rate, "sampling_rate")
            event = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, gaussian), int(steps))
        elif sampling == "fixed-size":
            if not rows or not batch_size:
                raise ValueError("sampling='fixed-size' needs rows= and batch_size=")
            event = dp_event.SelfComposedDpEvent(
                dp_event.SampledWithoutReplacementDpEvent(int(rows), int(batch_size), gaussian), int(steps))
        else:
            if not rows or not batch_size:
                raise ValueError("sampling='shuffle' needs rows= and batch_size=")
            epochs = math.ceil(int(steps) / math.ceil(rows / batch_size))
            event = dp_event.SelfComposedDpEvent(gaussian, epochs)
    accounting = AccountingSpec(accountant="pld", neighboring=neighboring)
    return float(epsilon_from_event(event, delta, accounting=accounting)), f"pld ({neighboring}) of {event}"


# ============================================================================ the audits
def _projections(trajectory: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The per-step movements against the canary direction: -(theta_{t+1} - theta_t) . d."""
    theta = np.asarray(trajectory, dtype=np.float64)
    if theta.ndim == 1:
        theta = theta[None, :]
    if theta.shape[-1] != direction.shape[0]:
        raise ValueError(f"train_fn returned parameters of size {theta.shape[-1]}, canary_direction has "
                         f"{direction.shape[0]}")
    if len(theta) == 1:
        return -(theta[0] @ direction)[None]
    return -(np.diff(theta, axis=0) @ direction)


def audit_step(train_fn: Callable[..., Any], *, data: Any, canary: Any, delta: float, epsilon: float | None = None,
               event: Any = None, noise_multiplier: float | None = None, sampling: str = "poisson",
               sampling_rate: float | None = None, steps: int | None = None, batch_size: int | None = None,
               relation: str = "add-remove", replace_index: int = 0, canary_direction: Any = None,
               observe: Callable[[np.ndarray], float] | None = None, mode: str = "repeated",
               canaries: Sequence[Any] | None = None, canary_score: Callable[[np.ndarray, int], float] | None = None,
               budget: str = "quick", trials: int | None = None, confidence: float = DEFAULT_CONFIDENCE,
               seed: int = 0, twin: Any = None, time_budget: float | None = 600.0) -> AuditResult:
    """Audit a DP-SGD-like training function against its claimed accounting (module docstring).

    Parameters
    ----------
    train_fn : callable
        ``train_fn(data, rng)`` -> the parameters after every step, a (T + 1, P) array (or the final
        (P,) parameters); ``rng`` a numpy Generator to draw the sampling and noise from. With
        ``twin=f`` it must take ``noise_scale=f``.
    data : array or dict of arrays
        The training records (D).
    canary : record
        The record added (add-remove) or swapped in at ``replace_index`` (replace-one); in
        ``one-run`` mode ignored (give ``canaries``).
    delta : float
        The delta of the claim.
    epsilon, event, noise_multiplier : optional
        The claim: one of them (:func:`claimed_epsilon`).
    sampling, sampling_rate, steps, batch_size : optional
        How the training samples its batches (for a claim from ``noise_multiplier``):
        ``poisson`` (rate q), ``shuffle`` or ``fixed-size`` (``batch_size`` of len(data)).
    relation : str
        ``add-remove`` or ``replace-one``.
    replace_index : int
        The record the canary replaces (replace-one).
    canary_direction : array of P, optional
        Black-box score: step updates projected on it (the canary's own coordinate). Default:
        every coordinate's update (small models only).
    observe : callable, optional
        White box: ``observe(trajectory) -> float``, a score larger when the canary is in (e.g.
        :func:`poisson_gaussian_llr` of the canary's coordinate).
    mode : str
        ``repeated`` (many runs per side; the bound of :func:`~dpfair_analysis.testing.auditing`) or
        ``one-run`` (Steinke et al. 2023: one run, m canaries).
    canaries : sequence of records
        The m canaries of ``one-run`` mode (m >= 10).
    canary_score : callable
        ``canary_score(trajectory, i) -> float``, larger when canary i was in (``one-run``);
        default: the total movement against ``canary_direction[i]`` (an (m, P) array).
    budget, trials, confidence, seed, twin, time_budget :
        As in :func:`~dpfair_analysis.testing.auditing` (``twin`` a noise fraction or a twin train_fn).
    """
    if mode not in ("repeated", "one-run"):
        raise ValueError(f"mode must be 'repeated' or 'one-run', got {mode!r}")
    relation_obj = make_relation(relation)
    if relation_obj.name not in ("add-remove", "replace-one"):
        raise ValueError(f"relation must be 'add-remove' or 'replace-one' for a training audit, got {relation!r}")
    delta = check_delta_or_zero(delta)
    data = as_dataset(data)
    rows = n_rows(data)
    claim, source = claimed_epsilon(delta=delta, epsilon=epsilon, event=event, noise_multiplier=noise_multiplier,
                                    sampling=sampling, sampling_rate=sampling_rate, steps=steps, rows=rows + 1,
                                    batch_size=batch_size, neighboring=relation_obj.accountant_neighboring())
    if mode == "one-run":
        return _one_run(train_fn, data=data, canaries=canaries, canary_score=canary_score,
                        canary_direction=canary_direction, epsilon=claim, delta=delta, confidence=confidence,
                        seed=seed, time_budget=time_budget, source=source)
    if relation_obj.name == "add-remove":
        neighbour = insert_row(data, rows, canary)
    else:
        neighbour = replace_row(data, replace_index, canary)
    direction = None if canary_direction is None else np.asarray(canary_direction, dtype=np.float64).ravel()

    def view(fn: Callable[..., Any]) -> Callable[..., Any]:
        def mechanism(d: Any, rng: np.random.Generator) -> Any:
            trajectory = fn(d, rng)
            if is_complex(trajectory):  # refused by the runner (a cast to float would keep the real part only)
                return trajectory
            trajectory = np.asarray(trajectory, dtype=np.float64)
            if observe is not None:
                return float(observe(trajectory))
            if direction is not None:
                return _projections(trajectory, direction)
            return np.diff(trajectory, axis=0).ravel() if trajectory.ndim == 2 else trajectory
        mechanism.__qualname__ = getattr(fn, "__qualname__", "train_fn")
        return mechanism

    twin_fn = None
    if twin is not None:
        twin_fn = view(twin if callable(twin) else (lambda d, rng: train_fn(d, rng, noise_scale=twin)))
    result = audit(view(train_fn), claim, delta, relation=relation_obj, pairs=(data, neighbour), budget=budget,
                   trials=trials, confidence=confidence, seed=seed, time_budget=time_budget, twin=twin_fn,
                   name=getattr(train_fn, "__qualname__", "train_fn"))
    witness = dict(result.witness, claim=source, score="white box (observe)" if observe is not None else
                   "black box (updates against canary_direction)" if direction is not None else "black box")
    return AuditResult(**{**result.__dict__, "witness": witness})


def _one_run(train_fn: Callable[..., Any], *, data: Any, canaries: Sequence[Any] | None, canary_score: Callable | None,
             canary_direction: Any, epsilon: float, delta: float, confidence: float, seed: int,
             time_budget: float | None, source: str) -> AuditResult:
    start = time.perf_counter()
    seed = check_seed(seed)
    if canaries is None or len(canaries) < 10:
        raise ValueError("mode='one-run' needs canaries= with at least 10 records (Steinke et al. use hundreds)")
    m = len(canaries)
    if canary_score is None:
        if canary_direction is None:
            raise ValueError("mode='one-run' needs canary_score=(trajectory, i) -> score or canary_direction= "
                             "(one direction per canary, an (m, P) array)")
        directions = np.asarray(canary_direction, dtype=np.float64)
        if directions.ndim != 2 or len(directions) != m:
            raise ValueError(f"canary_direction must be an (m, P) array with m = {m} canaries, got shape "
                             f"{directions.shape}")

        def canary_score(trajectory: np.ndarray, i: int) -> float:
            theta = np.atleast_2d(trajectory)
            return float(-(theta[-1] - theta[0]) @ directions[i])
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    included = rng.random(m) < 0.5
    training = data
    for i in np.flatnonzero(included):
        training = insert_row(training, n_rows(training), canaries[i])
    runner = Runner(train_fn, name=getattr(train_fn, "__qualname__", "train_fn"), time_budget=time_budget)
    trajectory = runner.sample(training, 1, rng.integers(2 ** 63))[0]
    scores = [canary_score(read_only(trajectory), i) for i in range(m)]
    if any(is_complex(score) for score in scores):
        raise ValueError("canary_score returned a complex score: scores must be real numbers")
    scores = np.array(scores, dtype=np.float64)
    bound = one_run_bounds(scores, included, delta=delta, confidence=confidence)
    power = {"largest_certifiable_epsilon": bound.largest_certifiable_epsilon,
             "can_refute_claim": bool(bound.largest_certifiable_epsilon > epsilon)}
    witness = {"mode": "one-run", "canaries": m, "included": bound.included, "guesses": sum(bound.epsilon_guesses),
               "correct": bound.epsilon_correct, "k_plus_k_minus": list(bound.epsilon_guesses),
               "grid": guess_grid(m), "claim": source, "test_level": bound.test_level,
               "f_dp": {"mu_lower": bound.mu_lower, "epsilon_of_mu_lower": bound.mu_epsilon_lower,
                        "k_plus_k_minus": list(bound.mu_guesses), "correct": bound.mu_correct}}
    return AuditResult(epsilon_lower=bound.epsilon_lower, confidence=confidence,
                       consistent=bool(bound.epsilon_lower <= epsilon), epsilon_claimed=epsilon, delta=delta,
                       relation="add-remove (one run, m canaries)", witness=witness, trials=1, evaluation_trials=1,
                       seconds=time.perf_counter() - start, candidates=1, budget="one-run", seed=seed, power=power,
                       certifiable_epsilon=bound.largest_certifiable_epsilon,
                       no_power=one_run_no_power(bound, epsilon))


__all__ = ["SAMPLINGS", "audit_step", "claimed_epsilon", "gaussian_mixture_llr", "mixture_log_likelihood",
           "poisson_gaussian_llr", "shuffle_gaussian_llr", "step_exponents"]
