"""Figures from the tidy result frames (seaborn), and saving them with the CSV behind them.

Every figure is readable at a paper's page width: at most :data:`MAX_WIDTH` inches wide (panels
wrap into rows), at most :data:`MAX_LEGEND` legend entries (with many groups, the two extreme
groups and the population are drawn in colour, the others as thin grey lines), and its title or
axis label says what a band or whisker is.

One module per subject, re-exported here (``plotting.plot_costs``): :mod:`.common` (limits, saving),
:mod:`.groups` (a comparison's per-group curves and costs), :mod:`.group_privacy` (per-group epsilon_i),
and one per paper or command --
:mod:`.dpsgdf` (paper 000), :mod:`.fairness_lens` (paper 001), :mod:`.fairdp` (paper 002), :mod:`.pfld`
(paper 003), :mod:`.verify` (audits and verdicts), :mod:`.diagnose` (the diagnosis and its validation).
"""

from dpfair_analysis.plotting.common import (
    MAX_LEGEND,
    MAX_WIDTH,
    figure_png,
    focus_groups,
    plotting_width,
    save_figure,
    save_table,
    with_population,
)
from dpfair_analysis.plotting.diagnose import plot_diagnosis, plot_validation, plot_validation_metrics
from dpfair_analysis.plotting.dpsgdf import plot_bias_variance_bounds, plot_epsilon_sweep, plot_group_bounds
from dpfair_analysis.plotting.fairdp import (
    ATTACK_TITLES,
    fairdp_bounds_series,
    plot_fairdp_bounds,
    plot_group_sweep,
    plot_membership,
    plot_tau_grid,
    plot_tuning_grid,
    sweep_epsilon,
)
from dpfair_analysis.plotting.fairness_lens import (
    plot_clipping_and_risk,
    plot_decomposition,
    plot_factor_correlations,
    plot_gap_vs_epsilon,
    plot_input_norm_vs_risk,
    plot_trace_vs_risk,
)
from dpfair_analysis.plotting.group_privacy import plot_group_privacy
from dpfair_analysis.plotting.groups import plot_costs, plot_group_accuracy, plot_group_history
from dpfair_analysis.plotting.pfld import plot_fraction_above, plot_sweep, plot_table2, plot_theorem6_bound
from dpfair_analysis.plotting.verify import plot_audit_epsilon, plot_verdicts_by_paper

__all__ = [
    "MAX_LEGEND",
    "MAX_WIDTH",
    "figure_png",
    "focus_groups",
    "plotting_width",
    "save_figure",
    "save_table",
    "with_population",
    "plot_diagnosis",
    "plot_validation",
    "plot_validation_metrics",
    "plot_bias_variance_bounds",
    "plot_epsilon_sweep",
    "plot_group_bounds",
    "ATTACK_TITLES",
    "fairdp_bounds_series",
    "plot_fairdp_bounds",
    "plot_group_sweep",
    "plot_membership",
    "plot_tau_grid",
    "plot_tuning_grid",
    "sweep_epsilon",
    "plot_clipping_and_risk",
    "plot_decomposition",
    "plot_factor_correlations",
    "plot_gap_vs_epsilon",
    "plot_input_norm_vs_risk",
    "plot_trace_vs_risk",
    "plot_group_privacy",
    "plot_costs",
    "plot_group_accuracy",
    "plot_group_history",
    "plot_fraction_above",
    "plot_sweep",
    "plot_table2",
    "plot_theorem6_bound",
    "plot_audit_epsilon",
    "plot_verdicts_by_paper",
]
