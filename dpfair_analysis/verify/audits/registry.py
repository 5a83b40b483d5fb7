"""The audit registry: what a mechanism's audit returns, the entries, and :func:`audit`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from dpfair_analysis.training.loop import make_generators
from dpfair_analysis.validation import check_choice, check_fraction, check_int_at_least, check_name_free, check_seed

from dpfair_analysis.verify.audits.statistics import DEFAULT_CONFIDENCE, threshold_test


@dataclass(frozen=True)
class MechanismSamples:
    """What one audit run of a mechanism produced.

    ``scores_without`` / ``scores_with``: the test statistic of each of the ``trials``
    outputs on D and on D' (larger = more like D'), in the order drawn.
    ``epsilon_claimed`` at ``delta`` is what the toolkit claims for the *correctly*
    noised mechanism under ``neighbouring``; ``setting`` describes what was run.
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
    """A registered mechanism.

    ``sample(trials, *, seed, noise_fraction, progress)`` runs the mechanism ``trials``
    times on each of D and D' (every noise scale multiplied by ``noise_fraction``, the
    claim unchanged) and returns :class:`MechanismSamples`. ``default_trials`` is the
    number that catches the 0.25 twin; ``description`` is one line for the CLI.
    ``expected_consistent`` is False for a mechanism audited to show that a published
    claim fails (its correctly noised version is expected to exceed the claim).
    """

    name: str
    description: str
    sample: SampleFn
    default_trials: int
    expected_consistent: bool = True


MECHANISMS: dict[str, AuditSpec] = {}


def register(spec: AuditSpec) -> AuditSpec:
    """Add ``spec`` to :data:`MECHANISMS` (ValueError if its name is taken)."""
    if not isinstance(spec, AuditSpec):
        raise TypeError(f"spec must be an AuditSpec, got {type(spec).__name__}")
    MECHANISMS[check_name_free(spec.name, MECHANISMS, "mechanism audit")] = spec
    return spec


def unregister(name: str) -> None:
    """Remove an entry (for tests that register a toy one); an unknown name is ignored."""
    MECHANISMS.pop(name, None)


@dataclass(frozen=True)
class AuditResult:
    """One audit: the claim, the empirical lower bound and whether they agree.

    ``consistent`` = epsilon_lower <= epsilon_claimed. ``trials`` runs on each of D and
    D' (``evaluation_trials`` of them after the threshold was chosen).
    """

    mechanism: str
    epsilon_claimed: float
    delta: float
    epsilon_lower: float
    confidence: float
    trials: int
    consistent: bool
    noise_fraction: float
    neighbouring: str
    seed: int
    threshold: float
    false_positives: int
    false_negatives: int
    evaluation_trials: int
    setting: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit(mechanism: str, *, trials: int | None = None, seed: int = 0, noise_fraction: float = 1.0,
          confidence: float = DEFAULT_CONFIDENCE, selection_fraction: float = 0.5,
          progress: bool = False) -> AuditResult:
    """Audit a registered mechanism: epsilon lower bound vs the toolkit's claim.

    Parameters
    ----------
    mechanism : str
        A key of :data:`MECHANISMS`.
    trials : int, optional
        Runs on each of D and D' (default: the spec's ``default_trials``); at least 8.
    seed : int
        Seeds every draw (same seed, same result).
    noise_fraction : float
        In (0, 1]: 1 audits the mechanism as shipped; below 1 its under-noised twin
        (same claim), which a powerful audit must catch.
    confidence : float
        Confidence of the lower bound (default 0.95).
    selection_fraction : float
        Share of the trials used to choose the threshold (see :func:`threshold_test`).
    progress : bool
        Show a tqdm bar over the trials.
    """
    check_choice(mechanism, "mechanism", MECHANISMS)
    spec = MECHANISMS[mechanism]
    trials = spec.default_trials if trials is None else trials
    trials = check_int_at_least(trials, "trials", 8)
    seed = check_seed(seed)
    noise_fraction = check_fraction(noise_fraction, "noise_fraction")
    confidence = check_fraction(confidence, "confidence", open_high=True)
    samples = spec.sample(trials, seed=seed, noise_fraction=noise_fraction, progress=progress)
    test = threshold_test(samples.scores_without, samples.scores_with, delta=samples.delta, confidence=confidence,
                          selection_fraction=selection_fraction)
    return AuditResult(mechanism=mechanism, epsilon_claimed=float(samples.epsilon_claimed), delta=samples.delta,
                       epsilon_lower=test.epsilon_lower, confidence=confidence, trials=trials,
                       consistent=bool(test.epsilon_lower <= samples.epsilon_claimed),
                       noise_fraction=noise_fraction, neighbouring=samples.neighbouring, seed=seed,
                       threshold=test.threshold, false_positives=test.false_positives,
                       false_negatives=test.false_negatives, evaluation_trials=test.negatives,
                       setting=dict(samples.setting))


def audit_table(results: list[AuditResult]) -> pd.DataFrame:
    """One row per audit: mechanism, noise_fraction, claimed and audited epsilon, trials, consistent."""
    columns = ["mechanism", "noise_fraction", "epsilon_claimed", "epsilon_lower", "delta", "confidence", "trials",
               "evaluation_trials", "false_positives", "false_negatives", "threshold", "neighbouring", "consistent"]
    return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in results], columns=columns)


def _generators(seed: int, count: int) -> tuple[torch.Generator, ...]:
    """The trainers' own seeding (:func:`~dpfair_analysis.training.loop.make_generators`)."""
    return make_generators(seed, count)

