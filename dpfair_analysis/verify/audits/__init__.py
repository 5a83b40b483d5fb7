"""Empirical privacy audits: one-sided lower bounds on epsilon beside each mechanism's claim.

* :mod:`.statistics` -- the Clopper-Pearson bounds and the held-out threshold test;
* :mod:`.registry` -- what an audit returns, the registered entries, :func:`audit`;
* :mod:`.canaries` -- worst-case neighbouring pairs and public starting points;
* :mod:`.mechanisms` -- one release of each shipped mechanism, run through the
  toolkit's own release code (the loop's :func:`~dpfair_analysis.training.loop.release_step`);
* :mod:`.trainers` -- the trainers audited as they run (Poisson sampling, every step).
"""

from dpfair_analysis.verify.audits import mechanisms as _mechanisms  # noqa: F401  (registers the entries)
from dpfair_analysis.verify.audits.mechanisms import STEP_AUDITS, StepCanaryAudit
from dpfair_analysis.verify.audits.registry import MECHANISMS, AuditResult, AuditSpec, MechanismSamples, audit, \
    audit_table, register, unregister
from dpfair_analysis.verify.audits.statistics import DEFAULT_CONFIDENCE, DEFAULT_DELTA, ThresholdTest, \
    clopper_pearson_upper, epsilon_lower_bound, threshold_test

__all__ = ["AuditResult", "AuditSpec", "DEFAULT_CONFIDENCE", "DEFAULT_DELTA", "MECHANISMS", "MechanismSamples",
           "STEP_AUDITS", "StepCanaryAudit", "ThresholdTest", "audit", "audit_table", "clopper_pearson_upper",
           "epsilon_lower_bound", "register", "threshold_test", "unregister"]
