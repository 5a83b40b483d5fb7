"""Property-based tests of privacy claims for *any* mechanism (``dpfair_analysis.testing``).

The interface contract: a mechanism is a plain function ``fn(data, rng)`` -- ``rng`` a
:class:`numpy.random.Generator` the kit seeds -- returning a number or a numpy array;
``data`` is a numpy array with records along axis 0 (under ``queries`` the 1-d vector of
query answers; under ``attribute-change`` the per-record sensitive attribute, or a dict of
equal-length arrays with a ``group`` entry), read-only: every call gets a read-only view (a fresh dict of them),
so no call can change the data the next one sees (a write is refused by name). Torch code is wrapped by
:mod:`dpfair_analysis.testing.torch`.

What the kit holds:

* :mod:`.relations` -- neighbouring relations that generate and check neighbours:
  :class:`AddRemove`, :class:`ReplaceOne`, :class:`AttributeChange` (one person's sensitive
  attribute, optionally "not reported"), :class:`QueryVector` (every entry or one entry
  moves by at most Delta);
* :mod:`.strategies` -- hypothesis strategies: data sets, neighbours, pairs, and the
  worst-case canary families (lone member, far point, sign flip, gradient canary);
* :mod:`.sensitivity` -- :func:`assert_sensitivity` (raises with a shrunk counterexample) and
  :func:`find_sensitivity`;
* :mod:`.auditing` -- :func:`audit` / :func:`assert_private`: an epsilon lower bound whose
  confidence holds over the whole search of pairs, statistics and thresholds (held-out
  split), pure or approximate DP, under-noised twins and a power report;
* :mod:`.specs` -- :func:`audit_spec`: an audit as data (:class:`AuditSpec`: the code, its pair, claim and white-box
  score) -- how the toolkit's own mechanisms and trainers are audited;
* :mod:`.steps` -- :func:`audit_step` for DP-SGD-like training (gradient canaries,
  Poisson / shuffled / fixed-size sampling, the one-training-run audit of Steinke et al.
  2023) and the white-box canary log-likelihood ratios;
* :mod:`.bounds` -- Clopper-Pearson bounds, the held-out threshold test, the one-run bound;
* :mod:`.one_run` -- the one-training-run audit per group: Steinke et al.'s epsilon and the f-DP (Gaussian
  DP) mu from the same canary scores, Bonferroni over the groups, beside each group's accounted epsilon;
* :mod:`.scores` -- the test statistics (threshold, histogram, learned, white box);
* :mod:`.runner` -- how a mechanism is called: seeding, output checks, a time budget;
* :mod:`.zoo` -- reference mechanisms with known privacy (StatDP's and DP-Sniper's
  benchmarks, correct and incorrect) to check that an audit has power;
* :mod:`.plugin` -- the pytest plugin (``@pytest.mark.dp``, ``--dp-budget``);
* :mod:`.torch` -- adapters for torch code (imports torch; nothing else here does).

Importing this package is cheap: its members load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AddRemove": "relations", "AttributeChange": "relations", "Change": "relations", "NotNeighbours": "relations",
    "QueryVector": "relations", "Relation": "relations", "ReplaceOne": "relations", "make_relation": "relations",
    "canary_pairs": "strategies", "datasets": "strategies", "far_point": "strategies",
    "gradient_canary": "strategies", "lone_member": "strategies", "neighbour_of": "strategies",
    "neighbours": "strategies", "pairs": "strategies", "sign_flip": "strategies",
    "NothingChecked": "sensitivity", "SensitivityReport": "sensitivity", "SensitivityViolation": "sensitivity",
    "assert_sensitivity": "sensitivity",
    "find_sensitivity": "sensitivity", "find_violation": "sensitivity",
    "AuditResult": "auditing", "BUDGETS": "auditing", "Budget": "auditing", "THOROUGH": "auditing", "InsufficientPower": "auditing",
    "NoPower": "auditing",
    "PrivacyViolation": "auditing", "assert_private": "auditing", "audit": "auditing",
    "AuditSpec": "specs", "MechanismSamples": "specs", "audit_spec": "specs",
    "audit_step": "steps", "claimed_epsilon": "steps", "gaussian_mixture_llr": "steps",
    "poisson_gaussian_llr": "steps", "shuffle_gaussian_llr": "steps",
    "DEFAULT_CONFIDENCE": "bounds", "ThresholdTest": "bounds", "clopper_pearson_lower": "bounds",
    "clopper_pearson_upper": "bounds", "epsilon_lower_bound": "bounds", "one_run_epsilon_lower": "bounds",
    "threshold_test": "bounds",
    "GroupAudit": "one_run", "OneRunBound": "one_run", "audit_groups": "one_run", "fdp_p_value": "one_run",
    "gdp_epsilon": "one_run", "gdp_mu": "one_run", "one_run_bounds": "one_run", "one_run_mu_lower": "one_run",
    "AuditTimeout": "runner", "MechanismError": "runner",
    "Statistic": "scores", "Fitted": "scores", "Skipped": "scores", "STATISTIC_KINDS": "scores",
}

__all__ = [
    "BUDGETS",
    "STATISTIC_KINDS",
    "Fitted",
    "Skipped",
    "Statistic",
    "DEFAULT_CONFIDENCE",
    "AddRemove",
    "AttributeChange",
    "AuditResult",
    "AuditSpec",
    "GroupAudit",
    "OneRunBound",
    "AuditTimeout",
    "Budget",
    "THOROUGH",
    "Change",
    "InsufficientPower",
    "NoPower",
    "NothingChecked",
    "MechanismSamples",
    "MechanismError",
    "NotNeighbours",
    "PrivacyViolation",
    "QueryVector",
    "Relation",
    "ReplaceOne",
    "SensitivityReport",
    "SensitivityViolation",
    "ThresholdTest",
    "assert_private",
    "assert_sensitivity",
    "audit",
    "audit_groups",
    "audit_spec",
    "audit_step",
    "canary_pairs",
    "claimed_epsilon",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "datasets",
    "epsilon_lower_bound",
    "far_point",
    "fdp_p_value",
    "find_sensitivity",
    "find_violation",
    "gaussian_mixture_llr",
    "gdp_epsilon",
    "gdp_mu",
    "gradient_canary",
    "lone_member",
    "make_relation",
    "neighbour_of",
    "neighbours",
    "one_run_bounds",
    "one_run_epsilon_lower",
    "one_run_mu_lower",
    "pairs",
    "poisson_gaussian_llr",
    "shuffle_gaussian_llr",
    "sign_flip",
    "threshold_test",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
