"""The shipped audits' registry: every entry is a kit spec (:class:`~dpfair_analysis.testing.specs.AuditSpec`), run by
the kit's :func:`~dpfair_analysis.testing.specs.audit_spec` into its one
:class:`~dpfair_analysis.testing.auditing.AuditResult`.

An (epsilon, delta)-DP mechanism M bounds every test that tries to tell M(D) from M(D'):
FPR + e^epsilon FNR >= 1 - delta and FNR + e^epsilon FPR >= 1 - delta (Kairouz, Oh & Viswanath 2015; Nasr et al.
2021, Eq. 1). Each shipped audit scores every run with the white-box log-likelihood ratio on its worst-case pair;
the kit picks the threshold on the first half of the runs and bounds epsilon from the errors on the rest
(:func:`~dpfair_analysis.testing.bounds.threshold_test`), valid with probability ``confidence``. A correct mechanism
must give epsilon_lower <= epsilon_claimed; every mechanism is also audited with an under-noised twin (its noise
scales multiplied by ``noise_fraction``, the claim unchanged), which the audit must catch.

:data:`MECHANISMS` holds the one-release audits (:mod:`.mechanisms`); the trainers audited as they run are the specs
of :func:`~dpfair_analysis.verify.audits.trainers.sampled_audits`. :func:`mechanism_row` and :func:`sampled_row` are
the rows ``dpfair audit --json`` prints for each.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from dpfair_analysis.testing.auditing import AuditResult
from dpfair_analysis.testing.bounds import DEFAULT_CONFIDENCE
from dpfair_analysis.testing.specs import AuditSpec, MechanismSamples, audit_spec
from dpfair_analysis.training.loop import make_generators
from dpfair_analysis.validation import check_choice, check_name_free

#: The delta of every shipped audit's claim.
DEFAULT_DELTA = 1e-5

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


def audit(mechanism: str, *, trials: int | None = None, seed: int = 0, noise_fraction: float = 1.0,
          confidence: float = DEFAULT_CONFIDENCE, selection_fraction: float = 0.5,
          progress: bool = False) -> AuditResult:
    """Audit a registered mechanism: :func:`~dpfair_analysis.testing.specs.audit_spec` of its entry.

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
        Share of the trials used to choose the threshold (see :func:`~dpfair_analysis.testing.bounds.threshold_test`).
    progress : bool
        Show a tqdm bar over the trials.
    """
    check_choice(mechanism, "mechanism", MECHANISMS)
    return audit_spec(MECHANISMS[mechanism], trials=trials, seed=seed, noise_fraction=noise_fraction,
                      confidence=confidence, selection_fraction=selection_fraction, progress=progress)


def mechanism_row(result: AuditResult) -> dict[str, Any]:
    """A one-release audit as ``dpfair audit --mechanism ... --json`` prints it: ``trials`` runs per side, the
    held-out test's threshold and error counts, ``neighbouring`` the claim's relation."""
    witness = result.witness
    return {"mechanism": result.mechanism, "epsilon_claimed": result.epsilon_claimed, "delta": result.delta,
            "epsilon_lower": result.epsilon_lower, "confidence": result.confidence, "trials": result.trials // 2,
            "consistent": result.consistent, "noise_fraction": result.noise_fraction,
            "neighbouring": result.relation, "seed": result.seed, "threshold": witness["threshold"],
            "false_positives": witness["false_positives"], "false_negatives": witness["false_negatives"],
            "evaluation_trials": result.evaluation_trials, "setting": dict(result.setting)}


def sampled_row(result: AuditResult, spec: AuditSpec) -> dict[str, Any]:
    """A trainer's audit as it runs, as ``dpfair audit --sampled --json`` prints it: whether ``spec`` is a control
    and whether the verdict is the one it must be (``as_expected``), the run's sampling rate and steps."""
    witness = result.witness
    return {"mechanism": result.mechanism, "control": spec.control, "epsilon_claimed": result.epsilon_claimed,
            "epsilon_lower": float(result.epsilon_lower), "delta": result.delta, "confidence": result.confidence,
            "consistent": result.consistent, "as_expected": spec.as_expected(result),
            "sampling_rate": float(result.setting["sampling_rate"]), "steps": int(result.setting["steps"]),
            "trials": result.trials // 2, "evaluation_trials": result.evaluation_trials,
            "false_positives": witness["false_positives"], "false_negatives": witness["false_negatives"],
            "noise_fraction": result.noise_fraction, "neighbouring": result.relation, "seed": result.seed,
            "setting": result.setting}


def audit_table(results: list[AuditResult]) -> pd.DataFrame:
    """One row per audit: mechanism, noise_fraction, claimed and audited epsilon, trials, consistent."""
    columns = ["mechanism", "noise_fraction", "epsilon_claimed", "epsilon_lower", "delta", "confidence", "trials",
               "evaluation_trials", "false_positives", "false_negatives", "threshold", "neighbouring", "consistent"]
    return pd.DataFrame([{c: mechanism_row(r)[c] for c in columns} for r in results], columns=columns)


def _generators(seed: int, count: int) -> tuple[torch.Generator, ...]:
    """The trainers' own seeding (:func:`~dpfair_analysis.training.loop.make_generators`)."""
    return make_generators(seed, count)


__all__ = ["DEFAULT_DELTA", "MECHANISMS", "AuditResult", "AuditSpec", "MechanismSamples", "audit", "audit_table",
           "mechanism_row", "register", "sampled_row", "unregister"]
