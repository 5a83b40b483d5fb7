"""Empirical privacy audits of what the toolkit ships: one-sided lower bounds on epsilon beside each claim.

Every audit is a spec of the public kit (:class:`~dpfair_analysis.testing.specs.AuditSpec`: the code that ships, its
worst-case pair, its claim and its white-box score) that the kit's
:func:`~dpfair_analysis.testing.specs.audit_spec` runs into its one
:class:`~dpfair_analysis.testing.auditing.AuditResult`; the bounds are the kit's (:mod:`dpfair_analysis.testing.bounds`).

* :mod:`.registry` -- the one-release entries (:data:`MECHANISMS`), :func:`audit` and the rows the CLI prints;
* :mod:`.canaries` -- worst-case neighbouring pairs and public starting points;
* :mod:`.mechanisms` -- one release of each shipped mechanism, run through the
  toolkit's own release code (the loop's :func:`~dpfair_analysis.training.loop.release_step`);
* :mod:`.trainers` -- the trainers audited as they run (Poisson sampling, every step), their twins and controls.
"""

from dpfair_analysis.testing.auditing import AuditResult
from dpfair_analysis.testing.bounds import DEFAULT_CONFIDENCE, ThresholdTest, clopper_pearson_upper, \
    epsilon_lower_bound, threshold_test
from dpfair_analysis.testing.specs import AuditSpec, MechanismSamples
from dpfair_analysis.verify.audits import mechanisms as _mechanisms  # noqa: F401  (registers the entries)
from dpfair_analysis.verify.audits.mechanisms import STEP_AUDITS, StepCanaryAudit
from dpfair_analysis.verify.audits.registry import DEFAULT_DELTA, MECHANISMS, audit, audit_table, mechanism_row, \
    register, sampled_row, unregister

__all__ = ["AuditResult", "AuditSpec", "DEFAULT_CONFIDENCE", "DEFAULT_DELTA", "MECHANISMS", "MechanismSamples",
           "STEP_AUDITS", "StepCanaryAudit", "ThresholdTest", "audit", "audit_table", "clopper_pearson_upper",
           "epsilon_lower_bound", "mechanism_row", "register", "sampled_row", "threshold_test", "unregister"]
