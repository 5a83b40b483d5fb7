"""Claims of paper 002 (the FairDP fragment), each check beside its statement."""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import strategies as st

from dpfair_analysis.verify.claims.core import Budget, Claim, Verdict, _c, holds, \
    search, violated
from dpfair_analysis.verify.claims.p003 import _pfld_data


# =========================================================================================
# Paper 002: FairDP fragment
# =========================================================================================
def _fairdp_bias_variance(budget: Budget, *, noise_factor: float = 1.0) -> Verdict:
    """E||(sum_i clip(g_i) + N(0, s^2 C^2 I))/n - mean g||^2 = ||clip mean - mean||^2 + d s^2 C^2 / n^2 on real
    per-sample gradients (gradients.per_sample_gradients, noisy_clipped_sum-style release), by Monte Carlo.
    ``noise_factor`` multiplies the predicted noise term (the mutant: 3, the paper's constant as an equality)."""
    from dpfair_analysis.gradients import add_gaussian_noise, clipped_sum, flatten, per_sample_gradients
    from dpfair_analysis.models import build_model

    data = _pfld_data(n=64)
    model = build_model("mlp", input_shape=(3,), n_classes=2, seed=0, hidden=(8,))
    grads = per_sample_gradients(model, data.X, data.y)
    flat = flatten(grads).double()
    n, d = flat.shape
    worst_z, cases = 0.0, 0
    for clip in (0.05, 0.3, 10.0):
        for sigma in (0.5, 2.0):
            summed = clipped_sum(grads, clip)
            g = torch.Generator().manual_seed(cases)
            draws = max(500, budget.draws)
            errors = []
            for _ in range(draws):
                noisy = add_gaussian_noise(summed, sigma * clip, generator=g)
                errors.append(float(((flatten({k: v.unsqueeze(0) for k, v in noisy.items()})[0].double() / n
                                      - flat.mean(0)) ** 2).sum()))
            errors = np.array(errors)
            bias = float(((flatten({k: v.unsqueeze(0) for k, v in summed.items()})[0].double() / n - flat.mean(0)) ** 2).sum())
            predicted = bias + noise_factor * d * (sigma * clip) ** 2 / n ** 2
            z = abs(errors.mean() - predicted) / (errors.std(ddof=1) / math.sqrt(draws))
            worst_z = max(worst_z, z)
            cases += 1
    if worst_z < 4.5:
        return holds(f"MC = bias² + variance within {worst_z:.2f} s.e.", effort=f"{cases} (C, σ), n = {n}, d = {d}",
                     worst_ratio=worst_z / 4.5)
    return violated(f"off by {worst_z:.1f} s.e.", counterexample={}, ratio=worst_z / 4.5)


def _fairdp_clipping_bias(budget: Budget, *, eta_factor: float = 1.0) -> Verdict:
    """Eq. (4)'s clipping bias: ||mean clip(g_i) - mean g_i|| <= eta = (1/n) sum_{||g||>C} (||g|| - C), searched over
    signed gradient sets (clip factors from gradients.clip_factors). ``eta_factor`` scales the bound (the
    mutant: 0.5; the bound is attained by one clipped gradient)."""
    from dpfair_analysis.gradients import clip_factors

    def ratio(x):
        rows, clip = x
        g = torch.tensor(rows, dtype=torch.float64)
        norms = g.norm(dim=1)
        eta = eta_factor * float((norms - clip).clamp(min=0).mean())
        if eta <= 0:
            return None
        bias = float((g * clip_factors(norms, clip)[:, None] - g).mean(0).norm())
        return bias / eta

    strategy = st.tuples(st.integers(1, 3).flatmap(lambda d: st.lists(st.lists(st.floats(-10, 10), min_size=d,
                                                                                 max_size=d), min_size=1, max_size=6)),
                         st.sampled_from([0.1, 1.0, 3.0]))
    found, worst, tried = search(strategy, ratio, examples=budget.examples)
    if found is None:
        return holds(f"max bias/η = {worst:.4f}", effort=f"{tried} gradient sets", worst_ratio=worst)
    return violated(f"×{worst:.3g}", counterexample={"grads": found[0], "C": found[1]}, ratio=worst)


def _inequality_indices(budget: Budget, *, gini_factor: float = 1.0) -> Verdict:
    """Atkinson, Gini, MLD, Theil (fairness.inequality) against closed-form values and identities.
    ``gini_factor`` scales the Gini index under test (the mutant: 1.001)."""
    from dpfair_analysis.fairness import inequality
    from dpfair_analysis.fairness.inequality import atkinson, mean_log_deviation, theil

    def gini(values):
        return gini_factor * inequality.gini(values)

    checks: list[tuple[str, float, float]] = []
    for n in (2, 3, 5, 10):
        one = [0.0] * (n - 1) + [1.0]
        checks += [(f"gini one-holds-all n={n}", gini(one), (n - 1) / n), (f"theil one-holds-all n={n}", theil(one), math.log(n))]
        checks += [(f"{f.__name__} equal n={n}", f([2.0] * n), 0.0) for f in (gini, theil, mean_log_deviation, atkinson)]
    rng = np.random.default_rng(0)
    for _ in range(20 if budget.name == "quick" else 500):
        a, b = rng.uniform(0.05, 1.0, size=2)
        x = rng.uniform(0.05, 1.0, size=int(rng.integers(2, 9)))
        checks += [("gini two values", gini([a, b]), abs(a - b) / (2 * (a + b))),
                   ("atkinson(1) = 1 − exp(−MLD)", atkinson(x, 1.0), 1 - math.exp(-mean_log_deviation(x))),
                   ("atkinson(2) = 1 − harmonic/arithmetic", atkinson(x, 2.0), 1 - len(x) / np.sum(1 / x) / np.mean(x)),
                   ("theil scale invariant", theil(3.7 * x), theil(x)),
                   ("mld two values", mean_log_deviation([a, b]), math.log((a + b) / 2) - (math.log(a) + math.log(b)) / 2)]
    worst = max(abs(v - e) for _, v, e in checks)
    if worst < 1e-12:
        return holds(f"{len(checks)} values exact to {worst:.1e}", effort=f"{len(checks)} identities", worst_ratio=1.0)
    bad = max(checks, key=lambda t: abs(t[1] - t[2]))
    return violated(f"{bad[0]}: {bad[1]:.6g} vs {bad[2]:.6g}", counterexample={"check": bad[0]}, ratio=1 + worst)


CLAIMS: list[Claim] = [
    _c("002.eq4.bias-variance", "Sec. 3, Eq. (4) (τ(C, σ; θ): clipping bias + noise variance)",
       "E||(Σᵢ clip(gᵢ, C) + N(0, σ²C²I))/n − ḡ||² = ||clip mean − ḡ||² + |1| σ²C²/n² (≤ the paper's 3σ²C²|1|/n² "
       "noise term)", "real per-sample gradients of a small MLP", _fairdp_bias_variance,
       mutant=lambda budget: _fairdp_bias_variance(budget, noise_factor=3.0)),
    _c("002.eq4.clipping-bias", "Sec. 3, definition of η after Eq. (4)", "||(1/n) Σᵢ clip(gᵢ, C) − ḡ|| ≤ η = "
       "(1/n) Σ_{||gᵢ|| > C} (||gᵢ|| − C)", "any signed gradients", _fairdp_clipping_bias,
       mutant=lambda budget: _fairdp_clipping_bias(budget, eta_factor=0.5)),
    _c("002.appD4.indices", "Sec. 4.1 / Appendix D.4 (not in our copy)", "Atkinson, Gini, MLD, Theil indices as "
       "defined by the US Census Bureau", "standard definitions (fairness/inequality.py)", _inequality_indices,
       mutant=lambda budget: _inequality_indices(budget, gini_factor=1.001)),
]
