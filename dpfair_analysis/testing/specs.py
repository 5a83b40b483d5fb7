"""Audits as data: a spec names what runs on which pair, against which claim, scored how; :func:`audit_spec` runs it.

The kit's :func:`~dpfair_analysis.testing.auditing.audit` *searches* pairs and statistics for a mechanism it knows
nothing about. A mechanism whose worst-case pair and white-box statistic are known -- every audit the toolkit
ships (:mod:`dpfair_analysis.verify.audits`: one release of each mechanism, the trainers as they run, their
under-noised twins and the known-broken controls) -- needs no search: an :class:`AuditSpec` holds a function
``sample(trials, *, seed, noise_fraction, progress)`` that runs the mechanism ``trials`` times on each of D and
D' (the spec's canary pair, under its relation) and returns :class:`MechanismSamples` -- the statistic of every
output (larger = more like D') beside the claim the code under test reports for itself.

:func:`audit_spec` turns the scores into the kit's one :class:`~dpfair_analysis.testing.auditing.AuditResult`
with the held-out threshold test (:func:`~dpfair_analysis.testing.bounds.threshold_test`): the threshold is
chosen on the first ``selection_fraction`` of each side's runs, the error rates are counted on the rest, and
their one-sided Clopper-Pearson limits give

    epsilon_lower = max(log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u)),

valid with probability ``confidence`` (Kairouz, Oh & Viswanath 2015; Nasr et al. 2021, Eq. 1). The scores are
computed by the spec, never by the code under test, and the bound by the kit: the code under test cannot make
its own audit pass. The result states its power: the largest epsilon its evaluation runs could certify.

A spec is *expected* to be consistent with its claim as shipped (``noise_fraction`` = 1); an under-noised twin
(``noise_fraction`` < 1, the same claim) and a spec with ``expected_consistent=False`` (a published claim shown to
fail, a known-broken design) are *controls*: the audit must refute them, or it has no power
(:meth:`AuditSpec.as_expected`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfair_analysis.testing.auditing import AuditResult
from dpfair_analysis.testing.bounds import DEFAULT_CONFIDENCE, largest_certifiable_epsilon, threshold_test
from dpfair_analysis.validation import check_fraction, check_int_at_least, check_seed

#: The fewest runs per side a spec's audit takes: half choose the threshold, half bound epsilon.
MIN_TRIALS = 8


@dataclass(frozen=True)
class MechanismSamples:
    """What one audit run of a spec produced.

    ``scores_without`` / ``scores_with``: the test statistic of each of the ``trials`` outputs on D and on D'
    (larger = more like D'), in the order drawn. ``epsilon_claimed`` at ``delta`` is what the code under test
    claims for its *correctly* noised version under ``neighbouring``; ``setting`` describes what was run.
    """

    scores_without: np.ndarray
    scores_with: np.ndarray
    epsilon_claimed: float
    delta: float
    neighbouring: str
    setting: dict[str, Any] = field(default_factory=dict)


SampleFn = Callable[..., MechanismSamples]


@dataclass(frozen=True)
class AuditSpec:
    """One audit as data (module docstring).

    ``sample(trials, *, seed, noise_fraction, progress)`` runs the mechanism ``trials`` times on each of D and D'
    with every noise scale multiplied by ``noise_fraction`` (the claim unchanged) and returns
    :class:`MechanismSamples`. ``default_trials`` is the number that catches the 0.25 twin; ``description`` is one
    line for the CLI. ``noise_fraction`` is the one the audit runs at unless told otherwise (< 1: an under-noised
    twin of ``base``). ``expected_consistent`` is False for a control that must be refuted at full noise (a
    published claim shown to fail, a known-broken design).
    """

    name: str
    description: str
    sample: SampleFn
    default_trials: int
    expected_consistent: bool = True
    noise_fraction: float = 1.0
    base: str | None = None

    @property
    def control(self) -> bool:
        """A control: an under-noised twin or a spec expected to be refuted; the audit must refute it."""
        return self.noise_fraction < 1 or not self.expected_consistent

    def as_expected(self, result: AuditResult) -> bool:
        """Did the audit come out as it must? As shipped: consistent iff ``expected_consistent``; an under-noised
        twin (``result.noise_fraction`` < 1): refuted."""
        if result.noise_fraction < 1:
            return not result.consistent
        return result.consistent == self.expected_consistent


def audit_spec(spec: AuditSpec, *, trials: int | None = None, seed: int = 0, noise_fraction: float | None = None,
               confidence: float = DEFAULT_CONFIDENCE, selection_fraction: float = 0.5,
               progress: bool = False) -> AuditResult:
    """Audit a spec: the lower bound on epsilon from its scores beside its claim (module docstring).

    Parameters
    ----------
    spec : AuditSpec
        What runs and how it is scored.
    trials : int, optional
        Runs on each of D and D' (default: the spec's ``default_trials``); at least :data:`MIN_TRIALS`.
    seed : int
        Seeds every draw (same seed, same result).
    noise_fraction : float, optional
        In (0, 1]: 1 audits the mechanism as shipped, below 1 its under-noised twin (same claim), which a powerful
        audit must catch. Default: the spec's own.
    confidence : float
        Confidence of the lower bound, in (0, 1).
    selection_fraction : float
        Share of each side's runs that choose the threshold (:func:`~dpfair_analysis.testing.bounds.threshold_test`).
    progress : bool
        Show a tqdm bar over the runs.

    Returns
    -------
    AuditResult
        ``mechanism`` = the spec's name, ``trials`` = 2 x the runs per side, ``relation`` = the samples'
        neighbouring relation, ``witness`` = the threshold and the error counts of the held-out test,
        ``setting`` = what was run.
    """
    if not isinstance(spec, AuditSpec):
        raise TypeError(f"spec must be an AuditSpec, got {type(spec).__name__}")
    start = time.perf_counter()
    trials = check_int_at_least(spec.default_trials if trials is None else trials, "trials", MIN_TRIALS)
    seed = check_seed(seed)
    noise_fraction = check_fraction(spec.noise_fraction if noise_fraction is None else noise_fraction,
                                    "noise_fraction")
    confidence = check_fraction(confidence, "confidence", open_high=True)
    samples = spec.sample(trials, seed=seed, noise_fraction=noise_fraction, progress=progress)
    test = threshold_test(samples.scores_without, samples.scores_with, delta=samples.delta, confidence=confidence,
                          selection_fraction=selection_fraction)
    claim = float(samples.epsilon_claimed)
    certifiable = largest_certifiable_epsilon(test.negatives, delta=samples.delta, confidence=confidence)
    no_power = None if certifiable > claim else (
        f"the claim {claim:g} is at or above the largest epsilon {test.negatives} evaluation runs per side can "
        f"certify ({certifiable:.4g}): no result of this audit could refute it (raise the trials)")
    witness = {"statistic": "the spec's white-box score", "event": "score > threshold (guess D')",
               "threshold": test.threshold, "false_positives": test.false_positives,
               "false_negatives": test.false_negatives, "selection_epsilon": test.selection_epsilon}
    return AuditResult(
        epsilon_lower=test.epsilon_lower, confidence=confidence, consistent=bool(test.epsilon_lower <= claim),
        epsilon_claimed=claim, delta=samples.delta, relation=samples.neighbouring, witness=witness,
        trials=2 * trials, evaluation_trials=test.negatives, seconds=time.perf_counter() - start, candidates=1,
        budget=f"{trials} runs per side", seed=seed,
        power={"largest_certifiable_epsilon": certifiable, "can_refute_claim": bool(certifiable > claim)},
        certifiable_epsilon=certifiable, no_power=no_power, mechanism=spec.name, noise_fraction=noise_fraction,
        setting=dict(samples.setting))


__all__ = ["MIN_TRIALS", "AuditSpec", "MechanismSamples", "audit_spec"]
