"""Theory: the papers' quantities as functions, each with its equation, assumptions and printed errors.

* :mod:`.bounds` -- paper 000's per-group bias-variance bound (Eq. 1) and its optimal clipping bound;
* :mod:`.hessian` -- per-group Hessian traces Tr(H_a): closed form, exact, GGN, Hutchinson, Hutch++ (paper 001);
* :mod:`.excess_risk` -- excessive risk R_a and its gap by Monte Carlo, beside Theorem 1 (paper 001);
* :mod:`.decomposition` -- Theorem 2's non-private, clipping and noise terms of one DP-SGD step (paper 001), the
  clipping term's direction and magnitude errors (Esipova et al. 2023);
* :mod:`.conditions`, :mod:`.latent_factors` -- Theorems 3-5 as checks and Figures 3-6's correlations (paper 001);
* :mod:`.pfld_bounds` -- PF-LD's bias-variance bounds (Theorems 6-7, paper 003).

The entry points below are imported on first use.
"""

from __future__ import annotations

from dpfair_analysis import lazy_exports

#: Each exported entry point and the module that defines it.
_HOMES = {
    "bias_variance_bound": ".bounds",
    "group_bias_variance_bounds": ".bounds",
    "bound_minimising_clip": ".bounds",
    "quantile_rule_clip": ".bounds",
    "group_hessian_traces": ".hessian",
    "exact_group_traces": ".hessian",
    "output_perturbation_excess_risk": ".excess_risk",
    "dpsgd_excess_risk": ".excess_risk",
    "theorem1_prediction": ".excess_risk",
    "one_step_decomposition": ".decomposition",
    "DecompositionTracker": ".decomposition",
    "direction_magnitude": ".decomposition",
    "theorem3_condition": ".conditions",
    "search_theorem3": ".conditions",
    "per_sample_factors": ".latent_factors",
    "primal_error_bound": ".pfld_bounds",
    "dual_error_bound": ".pfld_bounds",
}

__all__ = list(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
