"""Fairness: group metrics, inequality indices and fairness constraints as data.

* :mod:`.metrics` -- per-group accuracy, the cost of privacy (paper 000), parity violations, the boundary proxy;
* :mod:`.inequality` -- Atkinson, Gini, mean log deviation and Theil over per-group accuracies (paper 002);
* :mod:`.constraints` -- demographic parity, equalized odds and accuracy parity as (population, group, h)
  terms (paper 003 Eq. 1), read by the Lagrangian trainers, the metrics and the sensitivity code.

The entry points below are imported on first use.
"""

from __future__ import annotations

from dpfair_analysis import lazy_exports

#: Each exported entry point and the module that defines it.
_HOMES = {
    "group_accuracy": ".metrics",
    "per_group_accuracy": ".metrics",
    "cost_of_privacy": ".metrics",
    "max_cost_gap": ".metrics",
    "parity_violations": ".metrics",
    "inequality_indices": ".inequality",
    "atkinson": ".inequality",
    "gini": ".inequality",
    "mean_log_deviation": ".inequality",
    "theil": ".inequality",
    "make_constraint": ".constraints",
    "FairnessConstraint": ".constraints",
}

__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
