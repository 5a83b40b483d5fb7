"""Paper 005 (Esipova, Ghomi, Luo & Cresswell, ICLR'23: DPSGD-Global-Adapt; later work, not a seed paper): the
direction/magnitude split of the clipping term, the noise term beside it, DPSGD-Global's scaling condition and
Global-Adapt's privacy accounting.

Only the abstract of the paper could be read here (arXiv 2206.07737; :data:`~.core.LATER_WORK`), so the claims
quote what the authors' code prints (``layer6ai-labs/fair-dp``: its comments, its docstrings and the formulas it
computes, transcribed symbol for symbol), each tested as printed with the abstract's words as context. Not
registered, for want of a cheap check in the paper's regime: the abstract's finding that misalignment is "the most
significant source" of disparate impact (training on MNIST, CelebA, Adult, Dutch).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from dpfair_analysis.verify.claims.core import (
    Check,
    CheckBudget,
    Verdict,
    holds,
    misprint_check,
    register,
    search,
    violated,
)
from dpfair_analysis.verify.claims.fixtures import shared_batch_epsilons, shared_batch_rdp

__all__ = ["ACCOUNTING_SETTINGS", "printed_split"]

_ABSTRACT = ("In this work we study the fine-grained causes of unfairness in DPSGD and identify gradient misalignment "
             "due to inequitable gradient clipping as the most significant source. This observation leads us to a new "
             "method for reducing unfairness by preventing gradient misalignment in DPSGD.")
_CODE = "the authors' code (layer6ai-labs/fair-dp)"


# =============================================================================== the direction/magnitude split
def printed_split(group_gradient, step, clipped_step, hessian, lr: float, *, magnitude_power: float = 2.0
                  ) -> dict[str, float]:
    """The code's terms (``Trainer.expected_loss``), with s = ||gbar_B|| / ||g_B|| and Q = g^T H_a g::

        R_clip     = lr (<g_a, g_B> - <g_a, gbar_B>) + lr^2/2 (Q(gbar_B) - Q(g_B))
        R_clip_dir = lr <g_a, s g_B - gbar_B>        + lr^2/2 (Q(gbar_B) - s^2 Q(g_B))
        R_clip_mag = lr <g_a, g_B - s g_B>           + lr^2/2 (s^2 - 1) Q(g_B)

    ``magnitude_power`` replaces the 2 of the magnitude's (s^2 - 1) (the mutant: 1)."""
    g_a, g, gbar, h = (np.asarray(v, float) for v in (group_gradient, step, clipped_step, hessian))
    s = np.linalg.norm(gbar) / np.linalg.norm(g)
    quad, quad_clipped = float(g @ h @ g), float(gbar @ h @ gbar)
    return {"clip": lr * float(g_a @ (g - gbar)) + lr ** 2 / 2 * (quad_clipped - quad),
            "direction": lr * float(g_a @ (s * g - gbar)) + lr ** 2 / 2 * (quad_clipped - s ** 2 * quad),
            "magnitude": lr * float(g_a @ (g - s * g)) + lr ** 2 / 2 * (s ** magnitude_power - 1) * quad, "s": s}


def _split_case(x):
    """(g_a, g_B, gbar_B, H symmetric, lr, aligned): gbar_B = scale g_B when aligned (a rescaling, no turn)."""
    d, vectors, matrix, lr, aligned, scale = x
    g_a, g, gbar = (np.array(v[:d], float) for v in vectors)
    h = np.array(matrix, float)[:d, :d]
    if aligned:
        gbar = scale * g
    return g_a, g, gbar, (h + h.T) / 2, lr, aligned


def _direction_magnitude(*, magnitude_power: float = 2.0) -> Check:
    """R_clip_dir + R_clip_mag = R_clip, and R_clip_dir = 0 when clipping only rescales the step (gbar_B = s g_B),
    searched over g_a, g_B, gbar_B, symmetric H_a (indefinite included) and lr; the toolkit's
    :func:`~dpfair_analysis.theory.decomposition.direction_magnitude` must give the printed terms. The ratio is
    1 + (largest gap) / (1 + |R_clip| + |R_clip_dir| + |R_clip_mag|)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.theory.decomposition import direction_magnitude

        def ratio(x):
            g_a, g, gbar, h, lr, aligned = _split_case(x)
            if np.linalg.norm(g) < 1e-3:
                return None
            r = printed_split(g_a, g, gbar, h, lr, magnitude_power=magnitude_power)
            t = [torch.tensor(v, dtype=torch.float64) for v in (g_a[None], g, gbar)]
            quad = torch.tensor([float(g @ h @ g)], dtype=torch.float64)
            quad_clipped = torch.tensor([float(gbar @ h @ gbar)], dtype=torch.float64)
            direction, magnitude = direction_magnitude(*t, lr=lr, quadratic=quad, clipped_quadratic=quad_clipped)
            gaps = [abs(r["direction"] + r["magnitude"] - r["clip"]), abs(float(direction[0]) - r["direction"]),
                    abs(float(magnitude[0]) - r["magnitude"])] + ([abs(r["direction"])] if aligned else [])
            return 1 + max(gaps) / (1 + abs(r["clip"]) + abs(r["direction"]) + abs(r["magnitude"]))

        vector = st.lists(st.floats(-5, 5), min_size=4, max_size=4)
        strategy = st.tuples(st.integers(1, 4), st.tuples(vector, vector, vector),
                             st.lists(st.lists(st.floats(-3, 3), min_size=4, max_size=4), min_size=4, max_size=4),
                             st.floats(0.01, 1.0), st.booleans(), st.floats(0.05, 2.0))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        effort = f"{tried} cases (d ≤ 4, H symmetric, half of them rescalings gbar_B = s g_B), closed form"
        if found is None:
            return holds(f"max 1 + gap/scale = {worst:.3g}", effort=effort, worst_ratio=worst)
        g_a, g, gbar, h, lr, _ = _split_case(found)
        return violated(f"the split misses R_clip by ×{worst:.3g}", counterexample={
            "g_a": g_a.tolist(), "g_B": g.tolist(), "gbar_B": gbar.tolist(), "H_a": h.tolist(), "lr": lr,
            **printed_split(g_a, g, gbar, h, lr, magnitude_power=magnitude_power)}, ratio=worst, effort=effort)
    return check


register("005.code.direction-magnitude", location=f"{_CODE}, trainers/trainer.py, Trainer.expected_loss (the terms "
         "R_clip_dir_* and R_clip_mag_*, logged per group)",
         quote="R_clip = lr (⟨g_D_a, g_B⟩ − ⟨g_D_a, bar_g_B⟩) + lr²/2 (clip_grad_hess_clip_grad − grad_hess_grad); "
               "R_clip_dir = lr ⟨g_D_a, norm_bar_g_B / norm_g_B · g_B − bar_g_B⟩ + lr²/2 (clip_grad_hess_clip_grad − "
               "(norm_bar_g_B / norm_g_B)² grad_hess_grad); R_clip_mag = lr ⟨g_D_a, g_B − norm_bar_g_B / norm_g_B · "
               "g_B⟩ + lr²/2 ((norm_bar_g_B / norm_g_B)² − 1) grad_hess_grad",
         context=(_ABSTRACT,),
         statement="R_clip = R_clip_dir + R_clip_mag (the clipping term splits into a direction error and a magnitude "
                   "error), and R_clip_dir = 0 when clipping only rescales the step (bar_g_B = s g_B); the toolkit's "
                   "theory.decomposition.direction_magnitude gives the printed terms",
         regime="any group gradient g_D_a, steps g_B ≠ 0 and bar_g_B, symmetric H_a, lr > 0 (an algebraic identity)",
         method="hypothesis search over (g_D_a, g_B, bar_g_B, H_a, lr), half of them rescalings; the printed terms in "
                "numpy against their sum, against R_clip and against the toolkit's split (torch, float64)",
         check=_direction_magnitude(), mutant=_direction_magnitude(magnitude_power=1.0))


#: The authors' batch size (every script's train_batch_size) and two others; b = 1 is where the printed term is right.
NOISE_TERM_BATCHES = (1, 16, 256)


def _noise_term(*, over_b2: bool, scale: float = 1.0) -> Check:
    """The code's R_noise against Monte Carlo on a quadratic group loss, the code's conventions: the group's batch-sum
    loss L_a(theta) = (1/2) sum_{i<m} (theta - a_i)^T H (theta - a_i) (its Hessian trace m Tr(H): the code's
    Hutchinson trace times slct_counts) and Opacus's step theta - lr (u + N(0, sigma^2 C^2 I) / b) (noise on the sum,
    divided by the expected batch size b). Per antithetic pair of draws, L_a(step) - L_a(theta - lr u) exactly; the
    mean against
    ``scale`` x lr^2/2 Tr(H_a) C^2 sigma^2 (/ b^2 when ``over_b2``), within 4.5 standard errors, at each b of
    :data:`NOISE_TERM_BATCHES`; the ratio is predicted / measured at the worst b."""
    def check(budget: CheckBudget) -> Verdict:
        rng = np.random.default_rng(0)
        d, m, lr, clip, sigma = 4, 8, 0.5, 1.0, 1.2
        root = rng.normal(size=(d, d))
        h, rows = root @ root.T / d, rng.normal(size=(m, d))
        theta = rng.normal(size=d) - lr * rng.normal(size=d)  # theta - lr u
        gradient = (m * theta - rows.sum(0)) @ h
        draws = max(2000, budget.draws * 10)
        worst, where = 0.0, None
        for b in NOISE_TERM_BATCHES:
            noise = rng.normal(scale=sigma * clip, size=(draws, d)) / b
            linear, quadratic = -lr * noise @ gradient, m * lr ** 2 / 2 * np.einsum("ij,jk,ik->i", noise, h, noise)
            change = ((linear + quadratic) + (-linear + quadratic)) / 2  # antithetic pairs: the draws n and -n
            predicted = scale * lr ** 2 / 2 * m * np.trace(h) * (clip * sigma) ** 2 / (b ** 2 if over_b2 else 1)
            z = abs(change.mean() - predicted) / (change.std(ddof=1) / np.sqrt(draws))
            if z > worst:
                worst, where = z, (b, predicted / change.mean(), change.mean(), predicted)
        effort = f"{len(NOISE_TERM_BATCHES)} batch sizes × {draws} draws, d = {d}, m = {m}"
        if worst < 4.5:
            return holds(f"Monte Carlo within {worst:.2f} s.e. of the term", effort=effort, worst_ratio=worst / 4.5)
        b, ratio, measured, predicted = where
        return violated(f"×{ratio:.3g} at b = {b}: {predicted:.4g} predicted, {measured:.4g} measured", counterexample={
            "b": b, "predicted": predicted, "measured": measured, "z": worst}, ratio=ratio, effort=effort)
    return check


_NOISE_FIXED = _noise_term(over_b2=True)
register("005.code.noise-term", location=f"{_CODE}, trainers/trainer.py, Trainer.expected_loss_batch_terms",
         quote="hessian_trace = result * slct_counts[group_idx] / self.num_hutchinson_estimates ... "
               "R_noise[group_idx] = self.lr ** 2 / 2 * hessian_trace * C ** 2 * self.optimizer.noise_multiplier ** 2",
         context=(_ABSTRACT,),
         statement="the noise raises group a's batch-sum loss by R_noise = lr²/2 Tr(H_a) C² σ² in expectation (the "
                   "noise term of 001's Theorem 2, which 001.thm2 finds misprinted the same way)",
         regime="the code's step: Opacus adds N(0, σ²C²I) to the clipped sum and divides by the expected batch size b "
                "(b = 256 in every script); H_a the Hessian of the group's batch-sum loss (exact for a quadratic loss)",
         method="Monte Carlo of the exact loss change on a quadratic group loss at b ∈ {1, 16, 256}, against the "
                "printed term and against it over b² (4.5 s.e.)",
         check=misprint_check(_noise_term(over_b2=False), _NOISE_FIXED,
                              fix="R_noise: C²σ² → C²σ²/b² (the noise on the sum is divided by the batch size)"),
         mutant=misprint_check(_noise_term(over_b2=False), _noise_term(over_b2=True, scale=5.0), fix="none"),
         fix="R_noise: C²σ² → C²σ²/b²")


# =============================================================================== DPSGD-Global's condition
def _code_factor(norm: float, clip: float, bound: float) -> float:
    """The factor the code applies (``DPSGD_Global_Adaptive_Optimizer.clip_and_accumulate``): C/Z where
    min(1, C / (||g|| + 1e-6)) >= C/Z, else min(1, C / (||g|| + 1e-6)) -- i.e. the smaller of the two."""
    return min(clip / bound, 1.0, clip / (norm + 1e-6))


def _stated_factor(norm: float, clip: float, bound: float) -> float:
    """The factor the comment says: C/Z where ||g|| <= Z, else the code's clip factor."""
    return clip / bound if norm <= bound else min(1.0, clip / (norm + 1e-6))


#: (Z/C, ||g||/Z) where Z < C: the condition never holds, so a norm within Z is not scaled by C/Z (ratio C/Z).
BELOW_C_FAMILY = ((0.5, 0.5), (0.1, 0.5), (0.01, 0.5))


def _factor_ratio(norm: float, clip: float, bound: float) -> float:
    """code factor / stated factor, or its inverse: the larger (1 where they agree)."""
    code, stated = _code_factor(norm, clip, bound), _stated_factor(norm, clip, bound)
    return max(code / stated, stated / code)


def _global_condition(*, min_log_ratio: float = -2.0, margin: float = 0.0) -> Check:
    """The comment's equivalence, searched over C, Z = C 10^r (r >= ``min_log_ratio``) and ||g|| = u Z, u in (0, 3]
    (``margin``: |u - 1| at least that), plus :data:`BELOW_C_FAMILY` where it reaches Z < C; the ratio is
    :func:`_factor_ratio`. Z < C is reachable: Global-Adapt moves Z to where a fraction eta_Z of the norms lies above
    tau Z. The shrunk search example sits within 1e-6 of Z (the code's + 1e-6), the family below C."""
    def check(budget: CheckBudget) -> Verdict:
        def ratio(x):
            log_clip, log_ratio, u = x
            if u <= 0 or abs(u - 1) < margin:
                return None
            clip = 10.0 ** log_clip
            return _factor_ratio(u * clip * 10.0 ** log_ratio, clip, clip * 10.0 ** log_ratio)

        strategy = st.tuples(st.floats(-2, 1), st.floats(min_log_ratio, 2), st.floats(0, 3))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        family = [(z, u, _factor_ratio(u * z, 1.0, z)) for z, u in BELOW_C_FAMILY if np.log10(z) >= min_log_ratio]
        effort = (f"{tried} (C, Z, ||g||): C ∈ [0.01, 10], Z/C ∈ [10^{min_log_ratio:g}, 100], ||g||/Z ∈ (0, 3]; "
                  f"{len(family)} cases Z < C")
        if found is None and all(r <= 1 + 1e-9 for *_, r in family):
            return holds(f"code factor = stated factor (worst ratio {worst:.4g})", effort=effort, worst_ratio=worst)
        sliver = None if found is None else {"C": 10.0 ** found[0], "Z": 10.0 ** sum(found[:2]),
                                             "norm": found[2] * 10.0 ** sum(found[:2]), "ratio": worst}
        if not family:
            return violated(f"×{worst:.9g}: a norm within 1e-6 of Z is clipped, not scaled by C/Z",
                            counterexample=sliver, ratio=worst, effort=effort)
        z, u, factor = max(family, key=lambda t: t[2])
        law = ", ".join(f"Z = {zz:g} C: ×{r:.3g}" for zz, _, r in family)
        return violated(f"×{factor:.3g}: at Z < C the condition never holds, so a norm ≤ Z gets the factor "
                        f"min(1, C/(||g|| + 1e-6)) = 1 (clipped as in DP-SGD), not C/Z ({law}); also off within 1e-6 "
                        f"of Z", counterexample={"C": 1.0, "Z": z, "norm": u * z, "sliver": sliver,
                                                 "code_factor": _code_factor(u * z, 1.0, z),
                                                 "stated_factor": _stated_factor(u * z, 1.0, z)},
                        ratio=factor, effort=effort)
    return check


register("005.code.global-condition", location=f"{_CODE}, optimizers/dpsgd_global_adaptive_optimizer.py (and "
         "dpsgd_global_optimizer.py), clip_and_accumulate's comments",
         quote="per_sample_clip_factor = (max_grad_norm / (per_sample_norms + 1e-6)).clamp(max=1.0) ... # C = "
               "max_grad_norm # Z = strict_max_grad_norm # condition is equivalent to norm[i] <= Z # when condition "
               "holds, scale gradient by C/Z # otherwise, clip to norm C ... torch.where(per_sample_clip_factor >= "
               "max_grad_norm / strict_max_grad_norm, ...)",
         context=(_ABSTRACT,),
         statement="min(1, C/(||g_i|| + 1e-6)) ≥ C/Z ⇔ ||g_i|| ≤ Z: every gradient within the bound Z is scaled by C/Z",
         regime="C, Z > 0 as Global-Adapt moves them (Z follows the (1 − η_Z)-quantile of the norms over τ, so Z < C "
                "whenever most norms are below τC)",
         method="hypothesis search over (C, Z/C, ||g||/Z); the code's factor (transcribed) against the stated one",
         check=_global_condition(), mutant=_global_condition(min_log_ratio=0.0, margin=1e-3),
         corrected="the code's factor is min(C/Z, 1, C/(||g_i|| + 1e-6)) = C / max(Z, C, ||g_i|| + 1e-6): Z "
                   "floored at C, so for Z < C a norm within Z is left as it is (DP-SGD's clipping), not scaled by "
                   "C/Z > 1; for Z ≥ C the comment holds but for norms within 1e-6 of Z (the toolkit's Global-Adapt "
                   "scales by C/Z, as the comment says)")


# =============================================================================== the privacy accounting
#: (setting, sampling rate q, gradient multiplier sigma, count multiplier sigma_b, steps T, delta): the toolkit's
#: test (tests/training/test_global_adapt.py) and the authors' Adult and unbalanced-MNIST scripts (q = 1 / batches
#: per epoch at batch 256; 20 and 60 epochs; sigma_b = 10, their default; delta = 1e-6), and sigma_b = 1 (a config
#: value, ``bits_noise_multiplier``).
ACCOUNTING_SETTINGS = (("toolkit test", 0.05, 1.1, 3.0, 40, 1e-5), ("Adult script", 1 / 142, 1.0, 10.0, 2840, 1e-6),
                       ("MNIST script", 1 / 214, 0.8, 10.0, 12_840, 1e-6), ("σ_b = 1", 0.01, 1.0, 1.0, 1000, 1e-5))


def _canary_contribution() -> tuple[float, float]:
    """What one record adds to a Global-Adapt step's two releases, read off the toolkit's policy: (count, scaled
    gradient norm / C) for a norm above max(1, tau) Z -- the same noise drawn with and without it."""
    import torch

    from dpfair_analysis.training.global_adapt import GlobalAdapt

    out = []
    for norms in ([0.2, 3.0], [0.2, 3.0, 1e6]):
        policy = GlobalAdapt(0.5, 1.0, 2.0, initial_bound=5.0)
        decision = policy.decide(torch.tensor(norms, dtype=torch.float64), torch.zeros(len(norms), dtype=torch.long),
                                 n_groups=1, expected_batch_size=2.0, generator=torch.Generator().manual_seed(0))
        out.append(decision)
    count = out[1].record["count_above"] - out[0].record["count_above"]
    scaled = float(out[1].weights[-1]) * min(1.0, float(out[1].bounds[-1]) / 1e6) * 1e6
    return count, scaled / 0.5


def _global_adapt_accounting(settings=ACCOUNTING_SETTINGS) -> Check:
    """A record whose gradient norm stays above max(1, tau) Z enters the count (+1, noise sigma_b) and the sum (+C,
    noise sigma C) of the same sampled batch (:func:`_canary_contribution`), so each step's worst pair is one sampled
    Gaussian at (sigma^-2 + sigma_b^-2)^-1/2; the code's accountant composes a sampled Gaussian at sigma and another
    at sigma_b (:func:`~.fixtures.shared_batch_rdp`). At q = 1 the two agree exactly (the mutant)."""
    def check(budget: CheckBudget) -> Verdict:
        count, scaled = _canary_contribution()
        rows = []
        for name, q, sigma, sigma_b, steps, delta in settings:
            joint = (sigma ** -2 + sigma_b ** -2) ** -0.5
            ratio, alpha, actual, accounted = shared_batch_rdp(q, joint, (sigma, sigma_b))
            rows.append({"setting": name, "q": q, "sigma": sigma, "sigma_b": sigma_b, "ratio": ratio, "alpha": alpha,
                         "rdp_worst_pair": actual, "rdp_accounted": accounted, "steps": steps, "delta": delta})
        effort = (f"{len(rows)} settings × integer α ≤ 64 (dp_accounting's sampled-Gaussian RDP); the record's "
                  f"contribution read off training.global_adapt: count +{count:g}, scaled gradient {scaled:.6g} C")
        worst = max(rows, key=lambda r: r["ratio"])
        if worst["ratio"] <= 1 + 1e-6:
            return holds(f"worst-pair RDP / accounted RDP ≤ {worst['ratio']:.6f}", effort=effort,
                         worst_ratio=worst["ratio"], settings=rows)
        for row in rows:  # the (epsilon, delta) view
            joint = (row["sigma"] ** -2 + row["sigma_b"] ** -2) ** -0.5
            row.update(shared_batch_epsilons(row["q"], joint, (row["sigma"], row["sigma_b"]), steps=row["steps"],
                                             delta=row["delta"]))
        law = "; ".join(f"{r['setting']}: RDP ×{r['ratio']:.3g} at α = {r['alpha']}, reported ε "
                        f"{r['epsilon_reported']:.3g} " + (f"false (δ ≥ {r['delta_worst_pair_at_reported']:.2g} there)"
                                                         if r["overstated"] else
                                                         f"still holds (PLD ε {r['epsilon_worst_pair']:.3g})") +
                        f" at δ = {r['delta']:g}" for r in rows)
        false = [r["setting"] for r in rows if r["overstated"]]
        return violated(f"the worst pair's RDP is ×{worst['ratio']:.3g} the accounted one; the reported (ε, δ) is "
                        f"false at {', '.join(false) or 'none of them'} ({law})",
                        counterexample={**worst, "record": "a gradient norm above max(1, τ) Z at every step: count +1 "
                                                          "and scaled gradient of norm C on the same batch"},
                        ratio=worst["ratio"], effort=effort, settings=rows)
    return check


register("005.code.accounting", location=f"{_CODE}, trainers/trainer.py, DpsgdGlobalAdaptiveTrainer."
         "_update_privacy_accountant (docstring) and _update_Z (each step's count logged as its own sampled event)",
         quote="The Opacus RDP accountant minimizes computation when many SGM steps are taken in a row with the same "
               "parameters. We alternate between privatizing counts, and gradients with different parameters. "
               "Accounting is sped up by tracking steps in groups rather than alternating. The order of accounting "
               "does not affect the privacy guarantee. [_update_Z:] self.privacy_step_history.append("
               "[self.bits_noise_multiplier, self.sample_rate])",
         context=(_ABSTRACT,),
         statement="a Global-Adapt step (the count of ||g_i|| > τZ plus N(0, σ_b²) and the scaled sum plus "
                   "N(0, σ²C²I), on one Poisson batch at rate q) is (α, RDP_SG(q, σ)(α) + RDP_SG(q, σ_b)(α))-RDP: "
                   "two sampled Gaussians composed",
         regime="add/remove neighbours, Poisson sampling at q = sample_rate < 1; any σ, σ_b (their scripts: σ_b = 10)",
         method="the worst pair's Rényi divergence (a record in both releases: the sampled Gaussian at the joint "
                "multiplier) against the composed accounting, integer α, four settings; beside, the reported ε "
                "(RDP) against the worst pair's PLD (δ at the reported ε, optimistic: a lower bound)",
         check=_global_adapt_accounting(),
         mutant=_global_adapt_accounting(tuple((n, 1.0, *rest) for n, _, *rest in ACCOUNTING_SETTINGS)),
         corrected="account each step as one sampled Gaussian at (σ⁻² + σ_b⁻²)^(-1/2) (the toolkit's ledger does)")
