"""Experiments: the comparison, the sweep runner and its cache, and one module per paper's figures and tables.

* :mod:`.compare` -- :func:`~.compare.run_compare`, methods x seeds on one data set (``dpfair compare``);
* :mod:`.sweep` -- :func:`~.sweep.run_sweep`, every grid of runs serially, on joblib processes or on Ray;
  :mod:`.cache` -- results cached by a hash of their configuration, so an interrupted sweep resumes;
* one module per paper, called by the notebooks: :mod:`.dpsgdf` (papers 000/004), :mod:`.fairness_lens`
  (001), :mod:`.fairdp` (002), ``pfld`` (003), ``tuning`` (the tuned reproductions), :mod:`.diagnosis_validation`
  (the diagnosis against real runs), ``method_grid`` (every method at equal epsilon over a grid of its own
  hyperparameters); :mod:`.notebook` the notebooks' profiles.

The entry points below are imported on first use.
"""

from __future__ import annotations

from dpfair_analysis import lazy_exports

#: Each exported entry point and the module that defines it.
_HOMES = {
    "run_compare": ".compare",
    "CompareConfig": ".compare",
    "CompareResult": ".compare",
    "run_sweep": ".sweep",
    "Run": ".sweep",
    "Backend": ".sweep",
    "RunCache": ".cache",
}

__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
