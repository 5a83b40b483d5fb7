"""Which groups will DP-SGD hurt, by how much, and why -- predicted before any private training.

The question a practitioner asks before training privately: at these settings (sigma or a target epsilon,
C, batch size b, epochs, learning rate r), which groups lose accuracy, how much, why, and what would help?
:func:`diagnose` answers it from the data and the model alone, at a small fraction of the cost of one
private run, by integrating the first two moments of DP-SGD's step (paper 001's Theorem 2) over the run.

One job per module, in the order the diagnosis runs them:

* :mod:`.plan` -- the planned run (:class:`PrivacyPlan`), the diagnosis's work (:class:`DiagnosisOptions`),
  :class:`Calibration`;
* :mod:`.problem` -- the model as a function of a flat parameter vector and the rows each part uses;
* :mod:`.mechanisms` -- each method's per-sample coefficients and noise, through its own training code;
* :mod:`.equal_privacy` -- the recommendations' step counts and noise multipliers at the plan's epsilon;
* :mod:`.dynamics` -- the expected trajectories and the accumulated noise (the derivation is there);
* :mod:`.prediction` -- per-group accuracy under the noise: the predicted cost and its interval;
* :mod:`.explanation` -- the theory's per-group quantities, the reasons, the most-hurt group;
* :mod:`.recommendations` -- what would help, predicted the same way;
* :mod:`.report` -- the terminal table and the HTML page;
* :mod:`.diagnosis` -- the entry points :func:`diagnose` (one split) and :func:`diagnose_splits` (the
  expectation over splits; :class:`SplitRuns` shares splits between calls), and :class:`Diagnosis`.
"""

from dpfair_analysis.diagnose.diagnosis import (
    GROUP_KEYS,
    JSON_KEYS,
    SPLITS,
    Diagnosis,
    SplitRuns,
    diagnose,
    diagnose_splits,
)
from dpfair_analysis.diagnose.dynamics import accumulated_covariance, lyapunov_factor
from dpfair_analysis.diagnose.explanation import NAME_Z, NEGLIGIBLE, REASONS, most_hurt_call, reasons_for
from dpfair_analysis.training.fairdp import fairdp_stationary_bounds  # where FairDP lives; re-exported
from dpfair_analysis.diagnose.plan import (
           MECHANISMS,
           MIN_TRAIN_ROWS,
           Calibration,
           DiagnosisOptions,
           PrivacyPlan,
           ResolvedPlan,
           fit_calibration,
)
from dpfair_analysis.diagnose.prediction import MIN_GROUP_ROWS, Z90
from dpfair_analysis.diagnose.recommendations import quantile_rule_bound, recommendations
from dpfair_analysis.diagnose.report import format_diagnosis, report_html

__all__ = ["GROUP_KEYS", "JSON_KEYS", "MECHANISMS", "MIN_GROUP_ROWS", "MIN_TRAIN_ROWS",
           "NAME_Z", "NEGLIGIBLE", "REASONS", "SPLITS", "Z90", "Calibration", "Diagnosis", "DiagnosisOptions", "PrivacyPlan",
           "ResolvedPlan", "SplitRuns", "accumulated_covariance", "diagnose", "diagnose_splits",
           "fairdp_stationary_bounds",
           "fit_calibration", "format_diagnosis", "lyapunov_factor", "most_hurt_call", "quantile_rule_bound", "reasons_for",
           "recommendations", "report_html"]
