"""Hypothesis settings shared by the PF-LD tests (the strategies they run are library code:
:mod:`dpfair_analysis.verify.claims.pfld_cases`).

Budgets: by default every search is bounded (derandomised, a few hundred examples,
about a second each). ``DPFAIR_HYPOTHESIS_PROFILE=full`` runs 20x more examples with
fresh randomness (``DPFAIR_HYPOTHESIS_PROFILE=full pytest tests/pfld``).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE = os.environ.get("DPFAIR_HYPOTHESIS_PROFILE", "default")
if PROFILE not in ("default", "full"):
    raise ValueError(f"DPFAIR_HYPOTHESIS_PROFILE must be 'default' or 'full', got {PROFILE!r}")
FULL = PROFILE == "full"

#: settings for property tests (a bound must hold on every example)
PROPERTY = settings(max_examples=4000 if FULL else 200, deadline=None, derandomize=not FULL,
                    suppress_health_check=[HealthCheck.too_slow], database=None)
#: settings for counterexample searches (hypothesis.find)
#: (the default profile skips shrinking: the shrunk examples are stored as regression cases)
SEARCH = settings(max_examples=20000 if FULL else 1000, deadline=None, derandomize=not FULL,
                  suppress_health_check=[HealthCheck.too_slow], database=None,
                  phases=tuple(Phase) if FULL else (Phase.generate,))

