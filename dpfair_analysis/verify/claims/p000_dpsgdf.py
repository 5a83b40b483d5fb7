"""Paper 000 (DPSGD-F, KDD'21), §3-5: the Gaussian mechanism, the per-group bias-variance bound (Eq. 1) and
its optimal clipping bound, and the sensitivities of Algorithms 2 (DPSGD-F) and 3 (Naive).

The privacy accounting statements of §5-6 are in :mod:`.p000_dpsgdf_accounting`; 004 (the long version)
in :mod:`.p004_dpsgdf_long`, which reuses this file's public check builders. Every check is built by a
function whose keyword parameters default to the paper's statement; the claim's mutant is the same
builder with one parameter falsified (tests/verify/test_claims_can_fail.py).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from hypothesis import strategies as st

from dpfair_analysis.verify.claims.core import Check, CheckBudget, Verdict, holds, register, search, violated
from dpfair_analysis.verify.claims.fixtures import gaussian_mechanism_classic

if TYPE_CHECKING:
    import torch

__all__ = [
    "QUOTE_EQ1",
    "QUOTE_EQ1_LOW",
    "eq1_lower_half",
    "eq1_upper",
    "naive_sum_sensitivity",
    "naive_weights",
]

# =============================================================================== §3.1 the Gaussian mechanism
register("000.sec3.gaussian", location="§3.1, 'Gaussian mechanism [11]'",
         quote="Gaussian mechanism [11]. Let ε ∈ [0, 1] be arbitrary. For c² > 2 log(1.25/δ), the Gaussian "
               "mechanism with parameter σ > cΔ_f/ε satisfies (ε, δ)-differential privacy.",
         statement="ε ∈ (0, 1], c² > 2 ln(1.25/δ), N(0, σ²) with σ > cΔ_f/ε ⇒ (ε, δ)-DP",
         regime="ℓ2 sensitivity Δ_f, one release; ε = 0 makes σ infinite (the search starts at ε = 1e-3)",
         method="the exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018) at the boundary σ = cΔ_f/ε, "
                "searched over (ε, δ) by hypothesis; the same calibration above ε = 1 is reported beside",
         check=gaussian_mechanism_classic(), mutant=gaussian_mechanism_classic(c_factor=0.5))


# =============================================================================== §4.2 bias and variance (Eq. 1)
def _laplace_abs_mean(shift: float, scale: float) -> float:
    """E|a + L| for L ~ Laplace(0, scale): |a| + scale exp(-|a|/scale) (first principles)."""
    a = abs(shift)
    return a + scale * math.exp(-a / scale) if scale > 0 else a


def eq1_upper(*, factor: float = 1.0) -> Check:
    """Eq. (1) upper bound factor x (V + B) (the statement: factor = 1) by Monte Carlo
    (bounds.monte_carlo_group_error) on signed vectors; the MC mean minus 4 standard errors
    must not exceed it."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.theory.bounds import bias_variance_bound, expected_gaussian_norm, monte_carlo_group_error

        def ratio(x):
            rows, clip, scale, noise = x
            grads = torch.tensor(rows, dtype=torch.float64)
            d = grads.shape[1]
            if noise == "laplace":
                grads = grads[:, :1]
                expected = scale  # E|Lap(scale)| (scalar)
            else:
                expected = expected_gaussian_norm(scale, d)
            mc = monte_carlo_group_error(grads, clip, noise=noise, noise_scale=scale, draws=budget.draws,
                                         generator=torch.Generator().manual_seed(0))
            bound = factor * bias_variance_bound(grads.norm(dim=1), clip, expected_noise_norm=expected)["upper"]
            return (mc["mean"] - 4 * mc["stderr"]) / bound if bound > 0 else None

        strategy = st.tuples(
            st.integers(1, 3).flatmap(lambda d: st.lists(st.lists(st.floats(-50, 50), min_size=d, max_size=d),
                                                          min_size=1, max_size=5)),
            st.sampled_from([0.1, 1.0, 5.0]), st.sampled_from([1e-3, 0.1, 1.0, 10.0]),
            st.sampled_from(["laplace", "gaussian"]))
        found, worst, tried = search(strategy, ratio, examples=budget.examples // 2, shrink=False)
        if found is not None:
            return violated(f"MC lower CI / ({factor:g}(V + B)) = {worst:.3g}",
                            counterexample={"grads": found[0], "C": found[1], "noise_scale": found[2],
                                            "noise": found[3], "bound_factor": factor},
                            ratio=worst, effort=f"{tried} batches")
        return holds(f"max (MC mean − 4se) / (V + B) = {worst:.3f}",
                     effort=f"{tried} signed batches (b ≤ 5, d ≤ 3), Laplace and Gaussian noise, "
                            f"{budget.draws} draws each", worst_ratio=worst)
    return check


_MC_UPPER = ("Monte Carlo of the released estimate's error (bounds.monte_carlo_group_error) on hypothesis-drawn "
             "signed batches (b ≤ 5, d ≤ 3), Laplace and Gaussian noise; the mean minus 4 s.e. against V + B")
register("000.sec4.2.dpsgd-upper", location="§4.2, the bound before Eq. (1)",
         quote="E|Ĝ_B − G_B| ≤ E|G̃_B − G̃_B| + |G̃_B − G_B| ≤ (1/b)(C/ε) + (1/b) Σ_{i=1}^{b} max(0, |g_i| − C).",
         statement="E|Ĝ_B − G_B| ≤ (1/b)(C/ε) + (1/b) Σᵢ max(0, |gᵢ| − C), Ĝ_B = (1/b)(Σᵢ ḡᵢ + Lap(C/ε))",
         regime="Laplace noise Lap(C/ε) on the clipped sum (as printed; our copy's extraction turns the hat of "
                "the middle term into a tilde, 004 prints E|G̃_B − Ḡ_B|); extended to vectors and Gaussian "
                "noise with V = E||Z||/b", method=_MC_UPPER, check=eq1_upper(), mutant=eq1_upper(factor=0.5))

#: Eq. (1) of 000 (= 004 §4.2), as printed in our copy (hats extracted as tildes).
QUOTE_EQ1 = ("E|G̃_B^k − G_B^k| ≤ E|G̃_B^k − G̃_B^k| + |G̃_B^k − G_B^k| ≤ (1/b^k)(C/ε) + (1/b^k) Σ_i^{b^k} "
             "max(0, |g_i^k| − C) = (1/b^k)(C/ε) + (1/b^k) Σ_i^{m^k} (|g_i^k| − C), (1)")
register("000.eq1.upper", location="§4.2, Eq. (1) (= 004 §4.2)", quote=QUOTE_EQ1,
         statement="E|G̃ᵏ − Gᵏ| ≤ (1/bᵏ)(C/ε) + (1/bᵏ) Σᵢ max(0, |gᵢᵏ| − C)",
         regime="group k's bᵏ gradients; Laplace noise Lap(C/ε) on the group's clipped sum (as printed), "
                "extended to Gaussian noise (V = E||Z||/bᵏ)", method=_MC_UPPER, check=eq1_upper(),
         mutant=eq1_upper(factor=0.5))


def eq1_lower_half(*, nonnegative: bool, factor: float = 0.5) -> Check:
    """E|G^ - G| >= factor (V + B) (the statement: factor = 1/2), exact E|error| for scalar
    batches under Laplace noise; signed contributions (the paper's gradients) or non-negative
    ones (Amin et al.'s setting, where it holds)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.theory.bounds import bias_variance_bound, monte_carlo_group_error

        def parts(x):
            values, clip, eps = x
            g = torch.tensor(values, dtype=torch.float64)
            clipped = g.clamp(-clip, clip)
            shift = float(clipped.mean() - g.mean())
            b = len(values)
            exact = _laplace_abs_mean(shift, clip / eps / b)
            claimed = factor * bias_variance_bound(g.abs(), clip, expected_noise_norm=clip / eps)["upper"]
            return exact, claimed

        def ratio(x):
            exact, claimed = parts(x)
            return claimed / exact if exact > 0 else None

        low = 0 if nonnegative else -20
        strategy = st.tuples(st.lists(st.integers(low, 20).map(float), min_size=1, max_size=4),
                             st.sampled_from([1.0, 2.0, 0.5]), st.sampled_from([1.0, 10.0, 100.0]))
        found, worst, tried = search(strategy, ratio, examples=budget.examples * 3)
        effort = (f"{tried} scalar batches ({'non-negative' if nonnegative else 'signed'} g, b ≤ 4), exact E|error|, "
                  f"claimed lower bound {factor:g}(V + B)")
        if found is None:
            return holds(f"max {factor:g}(V+B)/E|err| = {worst:.3f}", effort=effort, worst_ratio=worst)
        values, clip, eps = found
        mc = monte_carlo_group_error(torch.tensor(values, dtype=torch.float64)[:, None], clip, noise="laplace",
                                     noise_scale=clip / eps, draws=max(budget.draws, 2000),
                                     generator=torch.Generator().manual_seed(1))
        exact, claimed = parts(found)
        return violated(f"{factor:g}(V+B) = {claimed:.3g} > E|err| = {exact:.3g} (×{claimed / exact:.3g})",
                        counterexample={"g": values, "C": clip, "epsilon": eps, "laplace_scale": clip / eps,
                                        "exact_error": exact, "claimed_lower": claimed, "factor": factor,
                                        "monte_carlo_error": mc["mean"], "monte_carlo_stderr": mc["stderr"]},
                        ratio=claimed / exact, effort=effort)
    return check


#: The lower bound after the population bound and after Eq. (1), as printed in our copy.
QUOTE_EQ1_LOW = ("The expected error is tight as we have E|G̃_B − G_B| ≥ ½[(1/b)(C/ε) + (1/b) Σ_{i=1}^{b} "
                 "max(0, |g_i| − C)]. … Similarly, we can get the tight bound w.r.t. each group k is "
                 "E|G̃_B^k − G_B^k| ≥ ½[(1/b^k)(C/ε) + (1/b^k) Σ_i^{b^k} max(0, |g_i^k| − C)].")
_LOWER_METHOD = ("the exact E|error| of scalar batches under Laplace noise (E|a + L| = |a| + s e^{−|a|/s}) against "
                 "½(V + B), searched by hypothesis; the counterexample is confirmed by Monte Carlo")
register("000.eq1.lower-half", location="§4.2, after the population bound and after Eq. (1) (= 004 §4.2)",
         quote=QUOTE_EQ1_LOW,
         statement="E|Ĝ − G| ≥ ½[(1/b)(C/ε) + (1/b) Σᵢ max(0, |gᵢ| − C)] (population and each group k)",
         regime="scalar gradients of any sign (the paper's |gᵢ|), Laplace noise Lap(C/ε) on the clipped sum; the left "
                "side read as the noisy estimate's error (004 prints E|G̃_B − G_B| with G̃ the noisy estimate; our copy "
                "of 000 loses the hats)",
         method=_LOWER_METHOD, check=eq1_lower_half(nonnegative=False),
         mutant=eq1_lower_half(nonnegative=True))  # Amin et al.'s setting, where it holds
register("000.eq1.lower-half.nonnegative", kind="corrected", corrects="000.eq1.lower-half",
         location="§4.2's lower bound in the setting of its source (Amin et al. 2019: non-negative contributions)",
         quote=QUOTE_EQ1_LOW, statement="E|Ĝ − G| ≥ ½(V + B) for gᵢ ≥ 0",
         regime="non-negative scalar contributions, Laplace noise", method=_LOWER_METHOD,
         check=eq1_lower_half(nonnegative=True),
         mutant=eq1_lower_half(nonnegative=True, factor=1.0))  # E|err| < V + B as soon as anything is clipped


# =============================================================================== §4.2 the optimal clipping bound
def _optimal_clip(*, rule: str, level_factor: float = 1.0) -> Check:
    """§4.2's minimiser of V(C) + B(C) = C/(b eps) + (1/b) sum max(0, |g_i| - C).

    ``rule="rank"``: the ceil(level_factor/eps)-th largest norm; ``rule="quantile"``: the
    (1 - level_factor/(b eps))-quantile, empirical (inverse-CDF) convention
    (bounds.quantile_rule_clip). The statement: level_factor = 1. Compared with the exact
    minimum over C in {0} u {norms} (V + B is piecewise linear with kinks at the norms)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.theory.bounds import bound_curve, bound_minimising_clip, quantile_rule_clip

        def value(norms: torch.Tensor, clip: float, eps: float) -> float:
            return float(bound_curve(norms, np.array([clip]), noise_per_unit_clip=1 / eps)["upper"].iloc[0])

        def rule_clip(norms: torch.Tensor, eps: float) -> float:
            return (bound_minimising_clip(norms, noise_per_unit_clip=level_factor / eps) if rule == "rank"
                    else quantile_rule_clip(norms, epsilon=eps / level_factor))

        def ratio(x):
            values, eps = x
            norms = torch.tensor(values, dtype=torch.float64)
            best = min(value(norms, c, eps) for c in [0.0, *values])
            return value(norms, rule_clip(norms, eps), eps) / best if best > 0 else None

        norm = st.one_of(st.integers(1, 30).map(float), st.floats(1e-3, 1e3))
        strategy = st.tuples(st.lists(norm, min_size=1, max_size=8),
                             st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.7, 1.0, 2.0]))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        effort = f"{tried} (norms, ε) with b ≤ 8, ties and bε < 1 included (a batch or one group k with b^k rows)"
        if found is None:
            return holds(f"max bound(rule)/min bound = {worst:.4f}", effort=effort, worst_ratio=worst)
        values, eps = found
        norms = torch.tensor(values, dtype=torch.float64)
        return violated(f"{rule} rule's bound ×{worst:.3g} the minimum",
                        counterexample={"norms": values, "epsilon": eps, "b": len(values), "level_factor": level_factor,
                                        "rule_C": rule_clip(norms, eps),
                                        "minimiser_C": bound_minimising_clip(norms, noise_per_unit_clip=1 / eps)},
                        ratio=worst, effort=effort)
    return check


_OPTIMAL_METHOD = ("the rule's V + B against the exact minimum over C ∈ {0} ∪ {norms} (V + B is piecewise linear "
                   "with kinks at the norms), searched by hypothesis over norms (ties included) and ε")
register("000.sec4.2.optimal-C.rank", location="§4.2, after the population bound",
         quote="We can find the optimal C by noting that the bound is convex with sub-derivative 1/ε − "
               "|{i : g_i > C}|, thus the minimum is achieved when C is equal to the ⌈1/ε⌉th largest value "
               "in gradients.",
         statement="argmin_C [(C/ε) + Σ max(0, |gᵢ| − C)] = the ⌈1/ε⌉-th largest |gᵢ| (batch, or group k)",
         regime="the bound V + B as a function of C; a batch or one group of bᵏ norms", method=_OPTIMAL_METHOD,
         check=_optimal_clip(rule="rank"), mutant=_optimal_clip(rule="rank", level_factor=2.0))  # ⌈2/ε⌉-th largest
register("000.sec4.2.optimal-C.quantile", location="§4.2, after the lower bound and before §5",
         quote="In other words, the limit we should choose is just the (1 − 1/bε)-quantile of the gradients "
               "themselves. … For each group, the optimal choice of C^k is (1 − 1/(b^k ε))-quantile for group k.",
         statement="the (1 − 1/(bε))-quantile of the norms minimises V + B (per group: 1 − 1/(bᵏε))",
         regime="the empirical quantile Q(p) = x_(⌈bp⌉) (inverse empirical CDF, numpy 'inverted_cdf'; "
                "bounds.quantile_rule_clip); Q = 0 when bε < 1", method=_OPTIMAL_METHOD,
         check=_optimal_clip(rule="quantile"),
         mutant=_optimal_clip(rule="quantile", level_factor=2.0))  # the (1 − 2/(bε))-quantile


# =============================================================================== §5.2 the released counts
def _dpsgdf_count_sensitivity(*, relation: str = "add/remove") -> Check:
    """The released count vector (m^k, o^k)_k (DPSGDF.decide with negligible count noise) moves
    by <= 1 between neighbouring batches: ``relation`` "add/remove" (the accountant's relation,
    where the statement holds) or "replace-one" (one record moved between two cells: sqrt 2)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.training.dpsgdf import DPSGDF

        def released(rows, k, clip):
            policy = DPSGDF(clip, 1.0, count_noise=1e-300)
            group = torch.tensor([g for g, _ in rows], dtype=torch.long)
            norms = torch.tensor([n for _, n in rows], dtype=torch.float64)
            rec = policy.decide(norms, group, n_groups=k, expected_batch_size=8, generator=torch.Generator()).record
            return torch.tensor([rec[f"m[{j}]"] for j in range(k)] + [rec[f"o[{j}]"] for j in range(k)])

        def ratio(x):
            k, clip, rows, extra, replace_index = x
            rows = [(g % k, n) for g, n in rows]
            extra = (extra[0] % k, extra[1])
            if relation == "add/remove":
                return float((released(rows + [extra], k, clip) - released(rows, k, clip)).norm())
            if not rows:
                return None
            swapped = list(rows)
            swapped[replace_index % len(rows)] = extra
            return float((released(swapped, k, clip) - released(rows, k, clip)).norm())

        norm = st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-9, 3.0, 1e6])
        strategy = st.tuples(st.integers(1, 4), st.sampled_from([1.0]),
                             st.lists(st.tuples(st.integers(0, 3), norm), max_size=10),
                             st.tuples(st.integers(0, 3), norm), st.integers(0, 9))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        effort = f"{tried} batches (K ≤ 4, b ≤ 10) and {relation} neighbours, DPSGDF.decide's released counts"
        if found is not None:
            return violated(f"{relation}: count change {worst:.3g} > 1",
                            counterexample={"case": found, "relation": relation}, ratio=worst, effort=effort)
        return holds(f"max {relation} change = {worst:.3g}", effort=effort, worst_ratio=worst)
    return check


register("000.sec5.2.count-sensitivity", location="§5.2, on Algorithm 2 lines 5-11",
         quote="The collection {m^k, o^k}_{k∈[K]} has sensitivity of 1, which is much smaller than the "
               "sensitivity of the actual gradients when we estimate the relative size of the average gradient.",
         statement="||(mᵏ, oᵏ)ₖ(B) − (mᵏ, oᵏ)ₖ(B')||₂ ≤ 1",
         regime="add/remove neighbouring batches (§3.1's 'differ in exactly one record', the accountant's relation)",
         method="the counts the shipped policy releases (training.dpsgdf.DPSGDF.decide), hypothesis search over "
                "batches (K ≤ 4, b ≤ 10, norms at and around C0) and the added record",
         check=_dpsgdf_count_sensitivity(), mutant=_dpsgdf_count_sensitivity(relation="replace-one"))


# =============================================================================== §5.2-5.3 the sums' sensitivities
def dpsgdf_bounds_as_printed(noisy_clipped: np.ndarray, noisy_unclipped: np.ndarray, *, base_clip: float,
                             batch_size: float) -> np.ndarray:
    """Paper 000 Algorithm 2, lines 9-12 as printed (no guards):

        m~ = sum_k m~^k,   b~^k = m~^k + o~^k,   C^k = C0 (1 + (m~^k / b~^k) / (m~ / b)),

    on the released noisy counts (m~^k, o~^k) = (m^k, o^k) + N(0, sigma_1^2) of line 8, b the
    (public) batch size. Nothing keeps the noisy counts positive, so C^k can be negative (a
    negative m~^k, or m~ < 0), huge (b~^k or m~ near 0) or non-finite (exactly 0): returned as
    computed (IEEE inf / nan). The shipped policy (training.dpsgdf.dpsgdf_group_bounds) differs:
    it raises negative counts to 0, sets C^k = C0 for a group with b~^k < 1 or when m~ < 1, and
    caps the ratio (m~^k/b~^k)/(m~/b) at ``max_ratio``, so its bounds lie in [C0, C0 (1 + max_ratio)].
    """
    m = np.asarray(noisy_clipped, dtype=np.float64)
    o = np.asarray(noisy_unclipped, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return base_clip * (1.0 + (m / (m + o)) / (m.sum() / batch_size))


def naive_weights(group_sizes: np.ndarray, *, batch_size: float) -> np.ndarray:
    """Algorithm 3's weights theta^k = 1 x (b/K) / s^k, as printed, for the sizes s^k given: 000's line 7
    uses the TRUE group sizes b^k of the batch (its noisy b~^k of line 5 is then never used), 004's line 8
    the released noisy sizes b~^k; b is the public batch size. Nothing keeps s^k positive: an empty
    group gets theta^k = inf (so C = C0 max_k theta^k of line 10 is infinite) and a negative noisy size a
    negative weight. The shipped policy (training.dpsgdf.NaiveReweighting) uses the noisy sizes raised to
    at least 1: theta^k = (b/K) / max(b~^k, 1)."""
    sizes = np.asarray(group_sizes, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return (batch_size / len(sizes)) / sizes


def _vector_rows(d: int, max_size: int):
    """(group, signed gradient vector) rows: tiny, moderate and extreme components."""
    comp = st.one_of(st.floats(-50, 50), st.sampled_from([0.0, 1e-3, -1e-3, 3.0, -3.0, 1e4, -1e4]))
    return st.lists(st.tuples(st.integers(0, 3), st.lists(comp, min_size=d, max_size=d)), max_size=max_size)


def _added_record(d: int):
    return st.tuples(st.integers(0, 3), st.lists(st.one_of(st.floats(-50, 50), st.sampled_from([1e-3, 3.0, -3.0, 1e4])),
                                                 min_size=d, max_size=d))


def clipped_sum_as_printed(grads: np.ndarray, bounds: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Algorithm 2 line 14 / Algorithm 3 line 9 as printed: sum_i w_i g_i min(1, C_i / ||g_i||) (a zero
    gradient contributes 0). Nothing keeps C_i >= 0: a negative C_i gives the factor C_i/||g_i|| < 0,
    a contribution of norm |C_i| pointing against g_i."""
    norms = np.linalg.norm(grads, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.where(norms > 0, np.minimum(1.0, bounds / np.where(norms > 0, norms, 1.0)), 0.0)
    if weights is not None:
        factors = factors * weights
    return factors @ grads


def _sum_change(grads: torch.Tensor, keep: int, bounds: torch.Tensor, weights: torch.Tensor | None = None) -> float:
    """||S(D') - S(D)|| for the shipped release's sum S = sum_i w_i min(1, C_i/||g_i||) g_i
    (gradients.clipped_sum, as training.loop.release_step), D the first ``keep`` rows of D'."""
    from dpfair_analysis.gradients import clipped_sum

    full = clipped_sum({"w": grads}, bounds, weights=weights)["w"]
    part = clipped_sum({"w": grads[:keep]}, bounds[:keep], weights=None if weights is None else weights[:keep])["w"]
    return float((full - part).norm())


#: Batches the paper's runs reach late in training (b = 256, sigma_1 = 10 sigma_2, C0 as in §6.1.3), as true
#: counts (m^k, o^k) per group: Adult (male, female; C0 = 0.5, sigma_1 = 10; Table 2's DPSGD-F gradient
#: norms ~0.1 mean few clipped records) and unbalanced MNIST (ten classes, class 8 with its 500 of 54,649
#: rows: 2.3 records a batch, clipped -- Table 2's norm 2.53 -- and about half of every other class clipped
#: at C0 = 1, Table 2's 1.45 for class 2; sigma_1 = 8).
REACHABLE_BATCHES = {
    "Adult": {"m": (2.0, 0.0), "o": (170.0, 84.0), "b": 256.0, "sigma_1": 10.0, "C0": 0.5, "small_group": 1},
    "unbalanced MNIST": {"m": (14.0,) * 8 + (2.0, 14.0), "o": (14.0,) * 8 + (0.0, 14.0), "b": 256.0,
                         "sigma_1": 8.0, "C0": 1.0, "small_group": 8},
}


def _dpsgdf_sum_sensitivity(*, algorithm: str, noise_floor: float | None = None,
                            bound_factor: float = 1.0) -> Check:
    """§5.2: 'the sensitivity of the clipped gradient of the total population would be max_k C^k'.

    Given the released noisy counts (line 8), the C^k are fixed (post-processing), so adding or
    removing record x of group k changes the clipped sum by ||clip(g_x, C^k)||; the statement
    is that this is <= bound_factor x max_k C^k (the statement: bound_factor = 1). ``algorithm``:
    "printed" (:func:`dpsgdf_bounds_as_printed`, lines 9-12 with no guards, and line 14's clip
    :func:`clipped_sum_as_printed`) or "guarded" (training.dpsgdf.dpsgdf_group_bounds, the shipped
    policy, max_ratio = 10, and the shipped release's gradients.clipped_sum).

    Headline: a Monte Carlo over the count noise of the batches the paper's runs reach
    (:data:`REACHABLE_BATCHES`, b = 256, sigma_1 = 10 sigma_2): how often a step's bounds are
    non-finite, have max_k C^k <= 0, or let one record move the sum by more than max_k C^k (a
    negative C^k with |C^k| > max C), and the first such draw (seeded) as the counterexample.
    Beside it a hypothesis search over small batches (signed vectors, K <= 4, tiny / empty /
    unequal groups, the added record, the count noise sigma_1 u); ``noise_floor`` (None: none)
    raises every u to at least that value (the setting in which the printed formula is a valid
    bound: noisy counts stay positive)."""
    def bounds_for(m_noisy, o_noisy, c0, b) -> np.ndarray:
        if algorithm == "printed":
            return dpsgdf_bounds_as_printed(m_noisy, o_noisy, base_clip=c0, batch_size=b)
        import torch

        from dpfair_analysis.training.dpsgdf import dpsgdf_group_bounds

        bounds, _ = dpsgdf_group_bounds(torch.as_tensor(m_noisy, dtype=torch.float64),
                                        torch.as_tensor(o_noisy, dtype=torch.float64), base_clip=c0,
                                        expected_batch_size=b, max_ratio=10.0)
        return bounds.numpy()

    def noise_of(u):
        return np.asarray(u, dtype=np.float64) if noise_floor is None else np.maximum(u, noise_floor)

    def check(budget: CheckBudget) -> Verdict:
        import torch

        degenerate = {"non_finite": 0, "max_not_positive": 0}

        def evaluate(x):
            k, d, rows, extra, u, sigma_1, b, c0 = x
            rows = [(g % k, v) for g, v in rows] + [(extra[0] % k, extra[1])]  # D' = D + {x}, x last
            group = np.array([g for g, _ in rows])
            grads = np.array([v for _, v in rows], dtype=np.float64).reshape(len(rows), d)
            clipped = np.linalg.norm(grads, axis=1) > c0
            m = np.bincount(group[clipped], minlength=k).astype(float)
            o = np.bincount(group[~clipped], minlength=k).astype(float)
            z = sigma_1 * noise_of(u)
            noisy = (m + z[:k], o + z[4:4 + k])
            return bounds_for(*noisy, c0, b), group, grads, noisy

        def ratio(x):
            bounds, group, grads, _ = evaluate(x)
            if not np.all(np.isfinite(bounds)):
                degenerate["non_finite"] += 1
                return None
            if bounds.max() <= 0:
                degenerate["max_not_positive"] += 1
                return None
            if algorithm == "printed":
                change = float(np.linalg.norm(clipped_sum_as_printed(grads, bounds[group])
                                              - clipped_sum_as_printed(grads[:-1], bounds[group[:-1]])))
            else:
                change = _sum_change(torch.as_tensor(grads), len(group) - 1, torch.as_tensor(bounds[group]))
            return change / (bound_factor * float(bounds.max()))

        u = st.one_of(st.floats(-4, 4), st.sampled_from([0.0, -1.0, 1.0, -2.0, 2.0, -0.5, 0.5]))
        strategy = st.integers(1, 3).flatmap(lambda d: st.tuples(
            st.integers(1, 4), st.just(d), _vector_rows(d, 10), _added_record(d),
            st.lists(u, min_size=8, max_size=8), st.sampled_from([1.0, 10.0]), st.sampled_from([4.0, 16.0, 256.0]),
            st.sampled_from([0.1, 1.0, 5.0])))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        reachable = {name: _reachable_failures(budget, setting, bounds_for, noise_of, bound_factor)
                     for name, setting in REACHABLE_BATCHES.items()}
        effort = (f"{budget.draws} count-noise draws on each of {len(reachable)} batches the paper's runs reach "
                  f"(b = 256, σ₁ = 10σ₂) + {tried} searched batches (K ≤ 4, d ≤ 3, b ≤ 11 rows, signed vectors), "
                  f"{algorithm} bounds; searched: {degenerate['non_finite']} with a non-finite C^k, "
                  f"{degenerate['max_not_positive']} with max_k C^k ≤ 0")
        headline = next(((name, r) for name, r in reachable.items() if r["first_failure"] is not None), None)
        stats = {name: {k: v for k, v in r.items() if k != "first_failure"} for name, r in reachable.items()}
        if headline is not None:
            name, r = headline
            ce = r["first_failure"]
            return violated(f"{name} (b = 256, σ₁ = {REACHABLE_BATCHES[name]['sigma_1']:g}): one record moves the "
                            f"clipped sum by {ce['ratio']:.3g} × max_k C^k (C^{ce['group']} = {ce['C_group']:.3g}); "
                            f"this happens at {r['P_sensitivity_exceeded']:.0%} of the steps",
                            counterexample={"setting": name, **ce}, ratio=ce["ratio"], effort=effort,
                            reachable=stats, search_found=found is not None, **degenerate)
        if found is not None:
            bounds, group, _, (m_noisy, o_noisy) = evaluate(found)
            k, _, rows, extra, _, sigma_1, b, c0 = found
            return violated(
                f"one record moves the clipped sum by {worst:.3g} × max_k C^k ({algorithm} Algorithm 2)",
                counterexample={"K": k, "rows": [(g % k, v) for g, v in rows], "added": (extra[0] % k, extra[1]),
                                "noisy_clipped": m_noisy.tolist(), "noisy_unclipped": o_noisy.tolist(),
                                "sigma_1": sigma_1, "b": b, "C0": c0, "C": bounds.tolist(),
                                "C_of_added": float(bounds[group[-1]]), "bound_factor": bound_factor,
                                "change": worst * bound_factor * float(bounds.max()), "found_by": "search"},
                ratio=worst, effort=effort, reachable=stats, **degenerate)
        worst_reachable = max(r["worst_ratio"] for r in reachable.values())
        return holds(f"max change / max_k C^k = {max(worst, worst_reachable):.4f}", effort=effort,
                     worst_ratio=max(worst, worst_reachable), reachable=stats, **degenerate)
    return check


def _reachable_failures(budget: CheckBudget, setting: dict, bounds_for, noise_of, bound_factor: float) -> dict:
    """Monte Carlo over the count noise of one reachable batch: the fraction of steps whose bounds are
    non-finite, have max_k C^k <= 0, let a record of some group move the sum by more than bound_factor x
    max_k C^k (|C^k| > max C, a record of any non-zero gradient then moves it by |C^k|), or exceed 11 C0
    (the noise scale of line 16 blown up); the first violating draw (seeded) with its bounds."""
    rng = np.random.default_rng(0)
    m, o = np.array(setting["m"]), np.array(setting["o"])
    k = len(m)
    counts = {"non_finite": 0, "max_not_positive": 0, "sensitivity_exceeded": 0, "max_above_11_C0": 0}
    first, worst = None, 0.0
    for draw in range(budget.draws):
        z = setting["sigma_1"] * noise_of(rng.standard_normal(2 * k))
        m_noisy, o_noisy = m + z[:k], o + z[k:]
        c = bounds_for(m_noisy, o_noisy, setting["C0"], setting["b"])
        if not np.all(np.isfinite(c)):
            counts["non_finite"] += 1
            continue
        big = float(c.max())
        counts["max_not_positive"] += int(big <= 0)
        counts["max_above_11_C0"] += int(big > 11 * setting["C0"])
        if big <= 0:
            continue
        ratios = np.abs(c) / (bound_factor * big)
        worst = max(worst, float(ratios.max()))
        if ratios.max() > 1 + 1e-12:
            counts["sensitivity_exceeded"] += 1
            if first is None:
                j = int(np.argmax(ratios))
                first = {"draw": draw, "true_clipped": m.tolist(), "true_unclipped": o.tolist(),
                         "noisy_clipped": m_noisy.tolist(), "noisy_unclipped": o_noisy.tolist(), "C": c.tolist(),
                         "group": j, "C_group": float(c[j]), "max_C": big, "ratio": float(ratios[j]),
                         "added_record": f"any non-zero gradient of group {j}: its clipped contribution has norm "
                                         f"|C^{j}| = {abs(c[j]):.3g}"}
    return {"draws": budget.draws, **{f"P_{name}": v / budget.draws for name, v in counts.items()},
            "worst_ratio": worst, "first_failure": first}


_SUM_QUOTE = ("After the adaptive clipping, the sensitivity of the clipped gradient of group k is C^k = C_0 × "
              "(1 + (m̃^k/b̃^k)/(m̃/b)). The sensitivity of the clipped gradient of the total population would be "
              "max_k C^k as the worst case in the total population needs to be considered.")
_SUM_STATEMENT = "||Σᵢ clip(gᵢ, C^{k(i)}) − Σ_{i≠x} clip(gᵢ, C^{k(i)})|| ≤ max_k Cᵏ, Cᵏ = C0 (1 + (m̃ᵏ/b̃ᵏ)/(m̃/b))"
_SUM_METHOD = ("Monte Carlo over the count noise of line 8 on batches the paper's runs reach (Adult and unbalanced "
               "MNIST, b = 256, σ₁ = 10σ₂): per step, is some |Cᵏ| above max_k Cᵏ (a record of that group then "
               "moves the sum by |Cᵏ|)? Beside it a hypothesis search over small batches and added records")
register("000.sec5.2.sum-sensitivity", location="§5.2, on Algorithm 2 lines 8-16", quote=_SUM_QUOTE,
         statement=_SUM_STATEMENT,
         regime="Algorithm 2 as printed: Cᵏ from the noisy counts of line 8 with no guards (noisy counts may be "
                "≤ 0); Cᵏ fixed by the release (post-processing); add/remove", method=_SUM_METHOD,
         check=_dpsgdf_sum_sensitivity(algorithm="printed"),
         mutant=_dpsgdf_sum_sensitivity(algorithm="printed", noise_floor=0.01))  # noisy counts kept positive
register("000.sec5.2.sum-sensitivity.guarded", kind="corrected", corrects="000.sec5.2.sum-sensitivity",
         location="§5.2 with the toolkit's guards (training.dpsgdf.dpsgdf_group_bounds)", quote=_SUM_QUOTE,
         statement=_SUM_STATEMENT.split(", Cᵏ =")[0] + " with guarded Cᵏ ∈ [C0, 11 C0]",
         regime="noisy counts raised to 0, C0 for an empty group or when no record is clipped, ratio capped at 10; "
                "add/remove", method=_SUM_METHOD, check=_dpsgdf_sum_sensitivity(algorithm="guarded"),
         mutant=_dpsgdf_sum_sensitivity(algorithm="guarded", bound_factor=0.5))


def naive_sum_sensitivity(*, algorithm: str, bound_factor: float = 1.0) -> Check:
    """'The sensitivity for the total population would be C0 max_k theta^k' (Algorithm 3).

    The released sum is S(D) = sum_i theta^{k(i)} clip(g_i, C0). ``algorithm``:

    * ``"printed"`` (000's line 7): theta^k from the TRUE group sizes (:func:`naive_weights`), so adding a
      record x to group k also reweights every record of group k; the claimed sensitivity is C0 max_k
      theta^k, taken as the larger of its values on D and D' (the most favourable reading). Analytically,
      with c = b/K and n = b^k on D, the change is at most 2 c C0/(n+1) against C0 max theta >= c C0/n,
      ratio < 2 (the mutant, bound_factor = 2, holds), attained by a group of n clipped gradients u and
      x = -u (K = 1, n = 2, b = 4: 8/3 against 2, ratio 4/3).
    * ``"noisy-sizes"`` (004's line 8, and 000's text): theta^k from the released noisy sizes b~^k = b^k +
      N(0, sigma_1^2), fixed by the release, so a record of group k moves the sum by |theta^k| ||clip g||;
      nothing keeps b~^k positive, and a negative b~^k makes theta^k < 0 with |theta^k| possibly above
      max_k theta^k. Headline: a Monte Carlo over the size noise of unbalanced MNIST's batch (b = 256,
      K = 10, class 8 with 2.3 records a batch, sigma_1 = 8), the first violating draw as counterexample.
    * ``"shipped"``: training.dpsgdf.NaiveReweighting.decide (noisy sizes raised to 1), its release
      (gradients.clipped_sum) and its own noise scale / sigma_2 as the claimed sensitivity.

    Add/remove, b the public batch size; the statement is change <= bound_factor x C0 max theta."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.training.dpsgdf import NaiveReweighting

        vacuous = {"empty_group": 0}

        def evaluate(x):
            k, d, rows, extra, b, c0, count_noise, seed = x
            rows = [(g % k, v) for g, v in rows] + [(extra[0] % k, extra[1])]  # D' = D + {x}, x last
            group = np.array([g for g, _ in rows])
            grads = np.array([v for _, v in rows], dtype=np.float64).reshape(len(rows), d)
            if algorithm == "printed":
                with_x = naive_weights(np.bincount(group, minlength=k), batch_size=b)
                without = naive_weights(np.bincount(group[:-1], minlength=k), batch_size=b)
                if not (np.all(np.isfinite(with_x)) and np.all(np.isfinite(without))):
                    return None
                c = np.full(len(rows), c0)
                change = float(np.linalg.norm(clipped_sum_as_printed(grads, c, with_x[group])
                                              - clipped_sum_as_printed(grads[:-1], c[:-1], without[group[:-1]])))
                claimed = c0 * max(with_x.max(), without.max())
                return change, claimed, {"theta_D": without.tolist(), "theta_D_prime": with_x.tolist()}
            if algorithm == "noisy-sizes":
                noisy = np.bincount(group, minlength=k) + count_noise * np.random.default_rng(seed).standard_normal(k)
                theta = naive_weights(noisy, batch_size=b)
                if not np.all(np.isfinite(theta)) or theta.max() <= 0:
                    return None
                c = np.full(len(rows), c0)
                change = float(np.linalg.norm(clipped_sum_as_printed(grads, c, theta[group])
                                              - clipped_sum_as_printed(grads[:-1], c[:-1], theta[group[:-1]])))
                return change, c0 * float(theta.max()), {"theta": theta.tolist(), "noisy_sizes": noisy.tolist()}
            group, grads = torch.as_tensor(group), torch.as_tensor(grads)
            policy = NaiveReweighting(c0, 1.0, count_noise=count_noise)
            decision = policy.decide(grads.norm(dim=1), group, n_groups=k, expected_batch_size=b,
                                     generator=torch.Generator().manual_seed(seed))
            change = _sum_change(grads, len(rows) - 1, decision.bounds, decision.weights)
            claimed = decision.noise_std / policy.noise_multiplier
            return change, claimed, {"theta": [decision.record[f"theta[{j}]"] for j in range(k)],
                                     "noisy_sizes": [decision.record[f"b[{j}]"] for j in range(k)]}

        def ratio(x):
            out = evaluate(x)
            if out is None:
                vacuous["empty_group"] += 1
                return None
            change, claimed, _ = out
            return change / (bound_factor * claimed)

        strategy = st.integers(1, 3).flatmap(lambda d: st.tuples(
            st.integers(1, 3), st.just(d), _vector_rows(d, 6), _added_record(d),
            st.sampled_from([2.0, 4.0, 16.0, 256.0]), st.sampled_from([0.5, 1.0, 5.0]),
            st.sampled_from([0.5, 10.0, 100.0]), st.integers(0, 2 ** 16)))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        reachable = _naive_reachable(budget, bound_factor) if algorithm == "noisy-sizes" else None
        # directed, at a batch the paper's Adult runs reach (b = 256, C0 = 0.5): 171 male and 84 female records,
        # every female gradient u = 3 (clipped), the added female record -u: change 2 (b/K) C0/85 against
        # C0 max θ = C0 (b/K)/84, ratio 168/85 (a group of n: 2n/(n+1), below 2 -- the mutant's bound)
        directed = (2, 1, [(0, [3.0])] * 171 + [(1, [3.0])] * 84, (1, [-3.0]), 256.0, 0.5, 10.0, 0)
        directed_ratio = ratio(directed) if algorithm == "printed" else None
        found_by = "search"
        if directed_ratio is not None and directed_ratio > 1 + 1e-9:
            found, worst, found_by = directed, directed_ratio, "a batch the paper's Adult runs reach"
        effort = (f"{tried} batches (K ≤ 3, d ≤ 3, ≤ 7 rows, signed vectors) + added record, {algorithm} weights; "
                  f"{vacuous['empty_group']} with an empty group or no positive weight (the claim vacuous)"
                  + (f"; {budget.draws} size-noise draws on unbalanced MNIST's batch" if reachable else ""))
        if reachable is not None and reachable["first_failure"] is not None:
            ce = reachable.pop("first_failure")
            return violated(f"unbalanced MNIST (b = 256, σ₁ = 8): a record of class 8 moves the weighted sum by "
                            f"{ce['ratio']:.3g} × C0 max θᵏ (θ⁸ = {ce['theta'][8]:.3g}); at "
                            f"{reachable['P_sensitivity_exceeded']:.0%} of the steps",
                            counterexample=ce, ratio=ce["ratio"], effort=effort, reachable=reachable,
                            search_found=found is not None)
        if found is not None:
            k, _, rows, extra, b, c0, count_noise, seed = found
            change, claimed, weights = evaluate(found)
            ce = {"K": k, "rows": [(g % k, v) for g, v in rows],
                  "added": (extra[0] % k, extra[1]), "b": b, "C0": c0,
                  "change": change, "claimed_sensitivity": claimed, "found_by": found_by, **weights}
            if algorithm != "printed":
                ce.update(count_noise=count_noise, seed=seed)
            where = "Adult batch (b = 256; 171 + 84 records): " if found_by != "search" else ""
            return violated(f"{where}one record moves the weighted sum by {worst:.3g} × C0 max θᵏ ({algorithm} "
                            f"Algorithm 3)",
                            counterexample=ce, ratio=worst, effort=effort, directed_ratio=directed_ratio)
        return holds(f"max change / (C0 max θᵏ) = {worst:.4f}", effort=effort, worst_ratio=worst,
                     directed_ratio=directed_ratio, **({"reachable": reachable} if reachable else {}))
    return check


def _naive_reachable(budget: CheckBudget, bound_factor: float) -> dict:
    """Monte Carlo of 004's Algorithm 3 (theta^k = (b/K)/b~^k) on unbalanced MNIST's batch: b = 256, ten
    classes of 28.1 expected records and class 8 with 2.34, sigma_1 = 10 sigma_2 = 8. A step fails when some
    |theta^k| > bound_factor x max_k theta^k (then a record of group k moves the sum by |theta^k| C0)."""
    rng = np.random.default_rng(0)
    sizes = np.array([28.0] * 8 + [2.0, 28.0])
    fails, first = 0, None
    for draw in range(budget.draws):
        noisy = sizes + 8.0 * rng.standard_normal(len(sizes))
        theta = naive_weights(noisy, batch_size=256.0)
        big = float(theta.max())
        if big <= 0 or not np.all(np.isfinite(theta)):
            continue
        ratios = np.abs(theta) / (bound_factor * big)
        if ratios.max() > 1 + 1e-12:
            fails += 1
            if first is None:
                j = int(np.argmax(ratios))
                first = {"setting": "unbalanced MNIST", "draw": draw, "true_sizes": sizes.tolist(),
                         "noisy_sizes": noisy.tolist(), "theta": theta.tolist(), "group": j, "C0": 1.0,
                         "ratio": float(ratios[j]),
                         "added_record": f"any clipped gradient of class {j}: it moves the sum by |θ^{j}| C0 = "
                                         f"{abs(theta[j]):.3g} against C0 max θ = {big:.3g}"}
    return {"draws": budget.draws, "P_sensitivity_exceeded": fails / budget.draws, "first_failure": first}


#: Algorithm 3's total-population sensitivity, as printed in 000 §5.3 (004 §5.3 has C_0 for C^0).
QUOTE_NAIVE_SUM = ("The sensitivity for group k is C^k = C_0 × θ^k. The sensitivity for the total population would "
                   "be C^0 × max_k θ^k.")
NAIVE_STATEMENT = "||Σᵢ θ^{k(i)} clip(gᵢ, C0) (D') − Σᵢ θ^{k(i)} clip(gᵢ, C0) (D)|| ≤ C0 max_k θᵏ"
_NAIVE_METHOD = ("hypothesis search over small batches (K ≤ 3, signed vectors) and an added record, the weighted "
                 "clipped sum of line 9 computed on both sides; a directed two-record group beside it")
register("000.sec5.3.naive-sum-sensitivity", location="§5.3, on Algorithm 3 lines 5-11",
         quote=QUOTE_NAIVE_SUM + " [Algorithm 3, line 7: θ^k = 1 × (b/K)/b^k]",
         statement=NAIVE_STATEMENT + ", θᵏ = (b/K)/bᵏ (line 7: the true group sizes)",
         regime="Algorithm 3 as 000 prints it: line 7 uses the true bᵏ (the noisy b̃ᵏ of line 5 is never used; 004's "
                "line 8 and 000's text use b̃ᵏ: 004.sec5.3.naive-sum-sensitivity); b public; add/remove",
         method=_NAIVE_METHOD, check=naive_sum_sensitivity(algorithm="printed"),
         mutant=naive_sum_sensitivity(algorithm="printed", bound_factor=2.0))  # the change is < 2 C0 max θ
register("000.sec5.3.naive-sum-sensitivity.noisy-sizes", kind="corrected",
         corrects="000.sec5.3.naive-sum-sensitivity",
         location="§5.3 with θᵏ from the released noisy sizes raised to 1 (training.dpsgdf.NaiveReweighting)",
         quote=QUOTE_NAIVE_SUM, statement=NAIVE_STATEMENT + ", θᵏ = (b/K)/max(b̃ᵏ, 1)",
         regime="θ fixed by the release of line 5 (raised to 1); add/remove", method=_NAIVE_METHOD,
         check=naive_sum_sensitivity(algorithm="shipped"),
         mutant=naive_sum_sensitivity(algorithm="shipped", bound_factor=0.5))
