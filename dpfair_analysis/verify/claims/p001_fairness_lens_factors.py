"""Paper 001 (DP ERM under the fairness lens, NeurIPS'21), §7-8: why clipping and noise hurt groups unequally
-- Theorem 3 (the clipping condition), Examples 1-3 (gradient norms and Hessian traces against input norms),
Theorem 4 (noise and Hessian traces), Theorem 5 and the distance to the decision boundary.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from dpfair_analysis.verify.claims.core import (
    Check,
    CheckBudget,
    Reading,
    Verdict,
    cached,
    holds,
    inconclusive,
    misprint_check,
    register,
    search,
    violated,
)


# =============================================================================== §7 Theorem 3
def _theorem3(*, n_groups: int, batch_size: int | None, stored: str | None, clip_coefficient: float = 2.5) -> Check:
    """conditions.search_theorem3 (random quadratic instances under Thm 3's assumptions); a stored,
    hand-shrunk counterexample (conditions.THREE_GROUP_COUNTEREXAMPLE / MINIBATCH_COUNTEREXAMPLE) is
    recomputed when the search budget does not find one. ``clip_coefficient`` replaces Eq. (5)'s 5/2
    (the mutant of the two-group claim: −5/2, a condition weakened until the search breaks it)."""
    def check(budget: CheckBudget) -> Verdict:
        from dpfair_analysis.theory import conditions

        result = conditions.search_theorem3(n_groups=n_groups, dim=2, max_rows=4, batch_size=batch_size,
                                            trials=budget.trials if batch_size is None else max(50, budget.trials // 4),
                                            seed=0, clip_coefficient=clip_coefficient)
        effort = (f"{result.trials} random instances ({n_groups} groups, "
                  f"{'full batch' if batch_size is None else f'batches of {batch_size}'}), "
                  f"{result.pairs_with_condition} pairs met Eq. (5)")
        if result.counterexample is None and stored is None:
            return holds(f"min normalised margin {result.min_normalised_margin:.3g} > 0", effort=effort,
                         worst_ratio=None, min_normalised_margin=result.min_normalised_margin)
        inst = getattr(conditions, stored) if stored is not None else result.counterexample
        bad = inst.violations(clip_coefficient=clip_coefficient)
        if not bad:
            return inconclusive("stored counterexample no longer violates", reason="the stored instance satisfies "
                                "the theorem", effort=effort)
        v = bad[0]
        norms = inst.group_norms()
        # 1 + the normalised margin by which R_a^clip > R_b^clip fails (search_theorem3's normalisation)
        ratio = 1 + (v["clip_b"] - v["clip_a"]) / (inst.lr * (norms[v["a"]] + norms[v["b"]] + inst.clip_bound) ** 2)
        return violated(f"Eq. (5) holds ({v['lhs']:.3g} ≥ {v['rhs']:.3g}) but R_a^clip = {v['clip_a']:.4g} ≤ "
                        f"R_b^clip = {v['clip_b']:.4g}",
                        counterexample={"grads": inst.grads, "group": inst.group, "hessians": inst.hessians,
                                        "C": inst.clip_bound, "eta": inst.lr, "batch_size": inst.batch_size, **v,
                                        "found_by_search": result.counterexample is not None},
                        ratio=ratio, effort=effort)
    return check


_THM3_QUOTE = ("The next results assume that the empirical loss function L(θ; D_a), associated with each group a ∈ A, "
               "is convex and β_a-smooth. The analysis also consider learning rates η ≤ 1/max_a β_a and gradients "
               "g(B) and ḡ(B) with small variances. … Finally, for notational convenience, and w.l.o.g., the result "
               "focus on the case in which |A| = 2. … Theorem 3. Let p_z = |D_z|/|D| be the fraction of training "
               "samples in group z ∈ A. For groups a, b ∈ A, R_a^clip > R_b^clip whenever: ||g_{D_a}|| p_a²/2 ≥ "
               "(5/2)C + ||g_{D_b}|| (1 + p_b + p_b²/2). (5)")
_THM3_METHOD = ("random quadratic instances satisfying the assumptions (convex β-smooth group losses, η ≤ 1/max β; "
                "conditions.search_theorem3), R^clip from Theorem 2's definition, exact; every ordered pair meeting "
                "Eq. (5) must have R_a^clip > R_b^clip")
register("001.thm3", location="§7, Theorem 3, Eq. (5)", quote=_THM3_QUOTE,
         statement="R_a^clip > R_b^clip whenever ||g_{D_a}|| p_a²/2 ≥ (5/2)C + ||g_{D_b}||(1 + p_b + p_b²/2)",
         regime="|A| = 2 (as the paper states it); convex β-smooth quadratic group losses, η ≤ 1/max β; full batch "
                "(no gradient variance)", method=_THM3_METHOD,
         check=_theorem3(n_groups=2, batch_size=None, stored=None),
         mutant=_theorem3(n_groups=2, batch_size=None, stored=None, clip_coefficient=-2.5))  # −5/2 C
register("001.thm3.wlog", location="§7, before Theorem 3: 'w.l.o.g., the result focus on |A| = 2'",
         quote=_THM3_QUOTE,
         statement="restricting Theorem 3 to |A| = 2 loses no generality: Eq. (5) ⇒ R_a^clip > R_b^clip for any "
                   "number of groups",
         regime="three groups, otherwise Theorem 3's assumptions (convex, β-smooth, η ≤ 1/max β, full batch)",
         method=_THM3_METHOD + "; the stored, hand-shrunk three-group instance when the search budget finds none",
         check=_theorem3(n_groups=3, batch_size=None, stored="THREE_GROUP_COUNTEREXAMPLE"),
         mutant=_theorem3(n_groups=2, batch_size=None, stored=None),
         corrected="Theorem 3 holds with two groups (001.thm3); with more, the other groups' gradients enter g_D "
                   "and ḡ_D and can reverse the order")  # two groups: true
register("001.thm3.minibatch", kind="extension", extends="001.thm3",
         location="Theorem 3 beyond 'small variances' (the paper: 'the conclusions carry on even in cases when the "
                  "above assumptions may not hold', Appendix C)",
         quote="Note that this is not restrictive as the variance decreases as a function of the batch size B. … As "
               "shown in the empirical assessment (see Appendix C), however, the conclusions carry on even in cases "
               "when the above assumptions may not hold.",
         statement="Eq. (5) ⇒ R_a^clip > R_b^clip with mini-batches of one row (large gradient variance)",
         regime="two groups, batches of one row drawn uniformly (the expectations over batches exact)",
         method=_THM3_METHOD + "; batches of one; the stored two-group instance when the search finds none",
         check=_theorem3(n_groups=2, batch_size=1, stored="MINIBATCH_COUNTEREXAMPLE"),
         mutant=_theorem3(n_groups=2, batch_size=None, stored=None))  # full batch: no variance, true


# =============================================================================== §7 Examples 1-2
def _softmax_model(*, bias: bool, theta_scale: float = 1.0, n_features: int = 2, n_classes: int = 3, seed: int = 0):
    """K-class softmax regression (seeded), float64; without a bias (Example 1's f = softmax(theta^T X)) the
    bias is zeroed and frozen. ``theta_scale`` multiplies the seeded weights by 3 theta_scale (0: f uniform
    for every X)."""
    import torch

    from dpfair_analysis.models import build_model

    model = build_model("logreg", input_shape=(n_features,), n_classes=n_classes, seed=seed).double()
    with torch.no_grad():
        model.linear.weight.mul_(3.0 * theta_scale)
        if not bias:
            model.linear.bias.zero_()
    model.linear.bias.requires_grad_(bias)
    return model


def _seeded_inputs(budget: CheckBudget, *, n: int, d: int, scale: float):
    """(seed, X, y): ``n`` seeded Gaussian inputs in R^d times ``scale`` and labels in {0, 1, 2}, for 3 seeds
    (quick) or 20 -- the samples Examples 1-2's identities are checked on."""
    import torch

    for seed in range(3 if budget.name == "quick" else 20):
        g = torch.Generator().manual_seed(seed)
        X = torch.randn(n, d, generator=g, dtype=torch.float64) * scale
        yield seed, X, torch.randint(0, 3, (n,), generator=g)


def _example1(*, bias: bool, augmented: bool, sign: float = 1.0) -> Check:
    """Softmax regression (K = 3, d = 4): per_sample_gradients against g_X = sign (f − e_y) ⊗ x̃ entry by entry
    and ||g_X|| = ||f − e_y|| ||x̃||, x̃ = [x; 1] if ``augmented`` else x.

    Example 1's own setting is f = softmax(θᵀX), no bias; the paper prints (Y − f) ⊗ X, i.e. ``sign=-1``;
    the gradient of the cross-entropy is (f − Y) ⊗ X (``sign=+1``). The toolkit's models have a bias, for
    which x̃ = [x; 1] (``bias=True, augmented=True``)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.gradients import flatten, per_sample_gradients

        worst, cases = 0.0, 0
        for seed, X, y in _seeded_inputs(budget, n=50, d=4, scale=3.0):
            model = _softmax_model(bias=bias, n_features=4, seed=seed)
            grads = per_sample_gradients(model, X, y)
            f = torch.softmax(model(X), dim=1).detach()
            r = f - torch.nn.functional.one_hot(y, 3).double()
            X_aug = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], 1) if augmented else X
            predicted = sign * (r[:, :, None] * X_aug[:, None, :]).flatten(1)
            actual = grads["linear.weight"]
            if bias:
                actual = torch.cat([actual, grads["linear.bias"][:, :, None]], 2)
            actual = actual.flatten(1)
            if actual.shape == predicted.shape:
                worst = max(worst, float(((actual - predicted).abs() / actual.abs().max()).max()))
            norms = flatten(grads).norm(dim=1)
            worst = max(worst, float((norms / (r.norm(dim=1) * X_aug.norm(dim=1)) - 1).abs().max()))
            cases += 50
        setting = f"{cases} samples, K = 3, {'with' if bias else 'without'} a bias"
        formula = f"{'(Y − f)' if sign < 0 else '(f − Y)'} ⊗ {'[X; 1]' if augmented else 'X'}"
        if worst > 1e-10:
            return violated(f"the gradient differs from {formula} by {worst:.3g} of its largest entry",
                            counterexample={"bias": bias, "augmented": augmented, "formula": formula,
                                            "max_relative_deviation": worst}, ratio=1 + worst, effort=setting)
        return holds(f"g_X = {formula} exactly (to {worst:.1e}); ||g_X|| = ||f − Y|| ||x̃||", effort=setting,
                     worst_ratio=1 + worst)
    return check


_EX1_QUOTE = ("Example 1. Consider the ERM problem (L) for a linear classifier f_θ(X) ≝ softmax(θᵀX) and cross-entropy "
              "loss ℓ(f_θ(X), Y) = −Σ_{i=1}^K Y_i log f_θ^i(X) where K is the number of classes. The gradient of the "
              "loss function at a given data point (X, Y) is: g_X = ∇θ ℓ(f_θ(X), Y) = (Y − f) ⊗ X.")
_EX1_METHOD = "per-sample gradients (gradients.per_sample_gradients, torch.func) of seeded softmax regressions, entry by entry"
_EX1_FIXED = cached(_example1(bias=False, augmented=False))
register("001.ex1", location="§7, Example 1", quote=_EX1_QUOTE, statement="g_X = (Y − f) ⊗ X",
         regime="softmax regression f = softmax(θᵀX) (no bias), cross-entropy, K = 3", method=_EX1_METHOD,
         check=misprint_check(_example1(bias=False, augmented=False, sign=-1.0), _EX1_FIXED,
                              fix="(Y − f) ⊗ X → (f − Y) ⊗ X (the sign; ||g_X|| = ||Y − f|| ||X|| is unaffected)"),
         mutant=misprint_check(_example1(bias=False, augmented=False, sign=-1.0),
                               _example1(bias=True, augmented=False), fix="none"),
         fix="(Y − f) ⊗ X → (f − Y) ⊗ X")
register("001.ex1.with-bias", kind="extension", extends="001.ex1",
         location="Example 1 for the toolkit's models, which have a bias (gradients.py)", quote=_EX1_QUOTE,
         statement="with a bias: g_X = (f − e_y) ⊗ [X; 1], ||g_X|| = ||f − e_y|| √(||X||² + 1)",
         regime="softmax regression with a bias, K = 3", method=_EX1_METHOD, check=_example1(bias=True, augmented=True),
         mutant=_example1(bias=True, augmented=False))


def _pair_search(budget: CheckBudget, value, *, key, points, n_labels: int = 3, project=None):
    """Hypothesis search over pairs of inputs (same label) for one whose ``key`` is larger but whose ``value``
    is smaller; ``project`` maps each input before use (the mutants' restricted settings; None: skip the
    pair). Returns (pair
    or None, worst ratio value(smaller key) / value(larger key), tried)."""
    def ordered(x):
        a, b, label = x
        a, b = (np.asarray(v, float) for v in (a, b))
        if project is not None:
            a, b = project(a), project(b)
            if a is None or b is None:
                return None
        if key(a) < key(b):
            a, b = b, a
        if key(a) <= key(b) * (1 + 1e-6) + 1e-12:
            return None
        return a, b, label

    def ratio(x):
        pair = ordered(x)
        if pair is None:
            return None
        a, b, label = pair
        v = value([a.tolist(), b.tolist()], label)
        return float(v[1] / v[0]) if v[0] > 0 else math.inf

    found, worst, tried = search(st.tuples(points, points, st.integers(0, n_labels - 1)), ratio,
                                 examples=budget.examples // 2)
    return (ordered(found) if found is not None else None), worst, tried


def _grows_with_norm(quantity: str, *, theta_scale: float = 1.0) -> Check:
    """The statements Examples 1-3 draw -- "||g_X|| ∝ ||X||", "||∇_{θ₂} ℓ|| ∝ ||X||" and "Tr(H_X) ∝ ||X||²" --
    read as: of two samples with the same label, the one with the larger input norm has the larger gradient
    norm / first-layer gradient norm / Hessian trace, at one theta. ``quantity``: "gradient" and "trace" on
    Example 1's bias-free softmax regression (K = 3), "first-layer" on Example 2's one-hidden-layer network
    (8 tanh units). Searched over pairs of signed inputs.

    All are false as stated: the factors ||f − e_y||, ||δ(X)|| and 1 − Σf² fall as a sample moves away from
    the boundary, so a larger, well-classified input has the smaller value. ``theta_scale=0`` (the mutant)
    makes f the same for every X (a zero weight matrix; for the network the first layer, whose tanh'(0) = 1
    then leaves δ constant), where each value is exactly proportional to ||X|| (||X||²)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.gradients import flatten, per_sample_gradients
        from dpfair_analysis.models import build_model
        from dpfair_analysis.theory.hessian import exact_sample_traces

        if quantity == "first-layer":
            model = build_model("mlp", input_shape=(2,), n_classes=3, seed=0, hidden=(8,), activation="tanh").double()
            with torch.no_grad():
                model.net[0].weight.mul_(3.0 * theta_scale)
                model.net[0].bias.mul_(theta_scale)
        else:
            model = _softmax_model(bias=False, theta_scale=theta_scale)

        def values(rows, label):
            X = torch.tensor(rows, dtype=torch.float64)
            y = torch.full((len(rows),), label, dtype=torch.long)
            if quantity == "trace":
                return exact_sample_traces(model, X, y)
            grads = per_sample_gradients(model, X, y)
            if quantity == "first-layer":
                return grads["net.0.weight"].flatten(1).norm(dim=1)
            return flatten(grads).norm(dim=1)

        point = st.lists(st.floats(-20, 20), min_size=2, max_size=2)
        found, worst, tried = _pair_search(budget, values, key=np.linalg.norm, points=point)
        effort = f"{tried} pairs of inputs (|x| ≤ 20, same label), θ = {theta_scale:g} × the seeded weights"
        name = {"trace": "Tr(H_X)", "gradient": "||g_X||", "first-layer": "||∇_{θ₂} ℓ||"}[quantity]
        if found is None:
            return holds(f"larger ||X|| ⇒ larger {name} in every pair (max smaller/larger = {worst:.4g})",
                         effort=effort, worst_ratio=worst)
        big, small, label = found
        v = values([big.tolist(), small.tolist()], label)
        return violated(f"||X|| {np.linalg.norm(big):.3g} > {np.linalg.norm(small):.3g} but {name} "
                        f"{float(v[0]):.3g} < {float(v[1]):.3g}",
                        counterexample={"x_larger": big.tolist(), "x_smaller": small.tolist(), "label": label,
                                        "value_larger": float(v[0]), "value_smaller": float(v[1])},
                        ratio=float(v[1] / v[0]), effort=effort)
    return check


_NORM_METHOD = ("hypothesis search over pairs of signed inputs with one label, at one seeded θ, for a larger input "
                "with a smaller value (exact per-sample gradients / Hessian traces)")
register("001.ex1.norm", location="§7, after Example 1",
         quote="The result is by [7] and it suggests that the gradient norms are proportional to the input norms: "
               "||g_X|| ∝ ||X||.",
         statement="||g_X|| ∝ ||X||: of two samples (same label), the larger input has the larger gradient norm",
         regime="Example 1's bias-free softmax regression, K = 3, one θ", method=_NORM_METHOD,
         check=_grows_with_norm("gradient"), mutant=_grows_with_norm("gradient", theta_scale=0.0),
         corrected="||g_X|| = ||f − Y|| ||X|| (001.ex1): proportional to ||X|| only at a fixed prediction error")


def _example2_identity(*, augmented: bool = False) -> Check:
    """One hidden layer: the first-layer weight gradient is δ xᵀ, so ||∇W₁|| = ||∇b₁|| ||x|| exactly.
    ``augmented=True`` predicts ||∇b₁|| ||[x; 1]|| (the mutant)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.gradients import per_sample_gradients
        from dpfair_analysis.models import build_model

        worst, cases = 0.0, 0
        for seed, X, y in _seeded_inputs(budget, n=40, d=5, scale=2.0):
            for activation in ("relu", "tanh"):
                model = build_model("mlp", input_shape=(5,), n_classes=3, seed=seed, hidden=(8,),
                                    activation=activation).double()
                grads = per_sample_gradients(model, X, y)
                w, b = grads["net.0.weight"], grads["net.0.bias"]
                lhs = w.flatten(1).norm(dim=1)
                rhs = b.norm(dim=1) * torch.sqrt((X ** 2).sum(1) + (1.0 if augmented else 0.0))
                worst = max(worst, float(((lhs - rhs).abs() / rhs.clamp(min=1e-300)).max()))
                cases += 40
        if worst > 1e-9:
            return violated(f"max relative deviation {worst:.3g}", counterexample={"augmented": augmented},
                            ratio=1 + worst)
        return holds(f"||∇θ₂ℓ|| = ||δ|| ||X|| to {worst:.1e} (ReLU and tanh)", effort=f"{cases} samples",
                     worst_ratio=1 + worst)
    return check


def _example2_sum(*, zero_output: bool = False, within: float | None = None) -> Check:
    """Example 2's "||g_X|| ∝ ||∇_{θ₁} ℓ|| + ||∇_{θ₂} ℓ||" read literally: the ratio ||g_X|| / (a + b), a and b
    the two layers' gradient norms, is the same for every X. It is √(a² + b²)/(a + b) ∈ [1/√2, 1]: it
    varies with X (comparable, not proportional). On seeded one-hidden-layer networks (ReLU and tanh),
    random and searched inputs. ``zero_output`` (the mutant) zeroes the output layer, so b = 0 and the
    ratio is 1 for every X. ``within`` (the other reading, "∝" as "comparable"): the ratio stays in
    [within, 1] for every X (1/√2; its mutant falsifies the bound to 0.9)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.gradients import per_sample_gradients
        from dpfair_analysis.models import build_model

        lo, hi, cases = math.inf, 0.0, 0
        for seed in range(2 if budget.name == "quick" else 10):
            g = torch.Generator().manual_seed(seed)
            X = torch.randn(100, 5, generator=g, dtype=torch.float64) * torch.exp(torch.randn(100, 1, generator=g,
                                                                                         dtype=torch.float64))
            y = torch.randint(0, 3, (100,), generator=g)
            for activation in ("relu", "tanh"):
                model = build_model("mlp", input_shape=(5,), n_classes=3, seed=seed, hidden=(8,),
                                    activation=activation).double()
                if zero_output:
                    with torch.no_grad():
                        model.net[2].weight.zero_()
                grads = per_sample_gradients(model, X, y)
                first = torch.cat([grads["net.0.weight"].flatten(1), grads["net.0.bias"]], 1).norm(dim=1)
                second = torch.cat([grads["net.2.weight"].flatten(1), grads["net.2.bias"]], 1).norm(dim=1)
                ratio = torch.sqrt(first ** 2 + second ** 2) / (first + second)
                lo, hi = min(lo, float(ratio.min())), max(hi, float(ratio.max()))
                cases += 100
        effort = f"{cases} samples (inputs over decades of norm), ReLU and tanh"
        if within is not None:
            span = f"||g_X|| / (||∇θ₁ℓ|| + ||∇θ₂ℓ||) ∈ [{lo:.3f}, {hi:.3f}]"
            if lo >= within * (1 - 1e-12) and hi <= 1 + 1e-12:
                return holds(f"{span} ⊂ [{within:.3f}, 1]: comparable", effort=effort, worst_ratio=within / lo)
            return violated(f"{span} ⊄ [{within:.3f}, 1]", counterexample={"min_ratio": lo, "max_ratio": hi,
                            "within": within}, ratio=max(within / lo, hi), effort=effort)
        if hi / lo > 1 + 1e-9:
            return violated(f"||g_X|| / (||∇θ₁ℓ|| + ||∇θ₂ℓ||) ranges over [{lo:.3f}, {hi:.3f}]: comparable (within √2), "
                            "not proportional", counterexample={"min_ratio": lo, "max_ratio": hi}, ratio=hi / lo,
                            effort=effort)
        return holds(f"||g_X|| / (||∇θ₁ℓ|| + ||∇θ₂ℓ||) = {lo:.6f} for every X", effort=effort, worst_ratio=hi / lo)
    return check


_EX2_QUOTE = ("Example 2. Next, consider a neural network with single hidden layer, f_θ(X) ≝ softmax(θ_1ᵀ o(θ_2ᵀ X)), "
              "where o(·) is a proper activation function and θ_1, θ_2 are the model parameters. It can be seen that "
              "||g_X|| ∝ ||∇_{θ_1} ℓ(f_θ(X), Y)|| + ||∇_{θ_2} ℓ(f_θ(X), Y)||, where ||∇_{θ_2} ℓ(f_θ(X), Y)|| ∝ ||X||.")
register("001.ex2", location="§7, Example 2", quote=_EX2_QUOTE,
         statement="||∇_{θ₂} ℓ|| ∝ ||X||: of two samples (same label), the larger input has the larger first-layer "
                   "gradient", regime="one hidden layer (8 tanh units), K = 3, one θ", method=_NORM_METHOD,
         check=_grows_with_norm("first-layer"), mutant=_grows_with_norm("first-layer", theta_scale=0.0))
register("001.ex2.identity", kind="corrected", corrects="001.ex2",
         location="Example 2's first-layer gradient, exactly", quote=_EX2_QUOTE,
         statement="||∇_{θ₂} ℓ|| = ||δ(X)|| ||X||, δ the back-propagated signal at the hidden layer",
         regime="one hidden layer, ReLU and tanh, K = 3",
         method="per-sample gradients of seeded networks: ||∇W₁|| against ||∇b₁|| ||x||",
         check=_example2_identity(), mutant=_example2_identity(augmented=True))
register("001.ex2.sum", location="§7, Example 2", quote=_EX2_QUOTE,
         statement="||g_X|| ∝ ||∇_{θ₁} ℓ|| + ||∇_{θ₂} ℓ|| (the same ratio for every X)",
         regime="one hidden layer (8 units, ReLU and tanh), K = 3, one θ per seed",
         method="per-sample gradients of both layers on inputs over decades of norm; the ratio's range",
         check=_example2_sum(), mutant=_example2_sum(zero_output=True),
         corrected="||g_X|| = √(a² + b²) ∈ [(a + b)/√2, a + b]: comparable to the sum within √2, not proportional",
         reading="'∝' literally: ||g_X|| / (||∇_{θ₁} ℓ|| + ||∇_{θ₂} ℓ||) the same constant for every X",
         readings=(Reading("comparable", "'∝' as 'comparable to' (≍): (a + b)/√2 ≤ ||g_X|| ≤ a + b for every X, a, b "
                           "the layers' gradient norms", check=_example2_sum(within=1 / math.sqrt(2)),
                           mutant=_example2_sum(within=0.9)),))


# =============================================================================== §8 Theorem 4
_HERMITE = np.polynomial.hermite_e.hermegauss(96)  # nodes/weights for E f(Z), Z ~ N(0, 1): weights / sqrt(2 pi)


def _logistic_noise_terms(rows: np.ndarray, labels: np.ndarray, theta: np.ndarray, noise_std: float
                          ) -> tuple[float, float]:
    """(Tr(H_a), R_a^noise) of one group for the one-score logistic loss softplus(-(2y - 1) theta^T [x; 1]).

    Tr(H_a) = mean_i p_i (1 - p_i)(||x_i||^2 + 1) (the closed form of Example 3 with a bias), and
    R_a^noise = E_z[L(theta + z; D_a)] - L(theta; D_a), z ~ N(0, s^2 I): the noise's exact contribution
    to the group's expected loss after a DP-SGD step whose noise on theta has per-coordinate std
    s = eta C sigma / |B| (what Theorem 2's (eta^2/2) Tr(H_a) C^2 sigma^2 / |B|^2 approximates to second
    order). The margin m_i + s ||x~_i|| Z is one-dimensional, so the expectation is a 96-node
    Gauss-Hermite quadrature per sample (exact for polynomials of degree < 192; the softplus is
    smooth), in the symmetric form (f(m + u) + f(m - u))/2 - f(m), which keeps tiny noise terms precise."""
    nodes, weights = _HERMITE
    weights = weights / weights.sum()
    aug = np.hstack([rows, np.ones((len(rows), 1))])
    sign = 2.0 * labels - 1.0
    margin = sign * (aug @ theta)
    spread = noise_std * np.linalg.norm(aug, axis=1)
    p = 1.0 / (1.0 + np.exp(-(aug @ theta)))
    trace = float(np.mean(p * (1 - p) * (aug ** 2).sum(1)))
    u = spread[:, None] * nodes[None, :]
    base = np.logaddexp(0.0, -margin)[:, None]
    symmetric = (np.logaddexp(0.0, -(margin[:, None] + u)) + np.logaddexp(0.0, -(margin[:, None] - u))) / 2 - base
    return trace, float(np.mean(symmetric @ weights))


def _theorem4(*, noise: tuple[float, ...], relative: bool, min_gap: float = 1e-3) -> Check:
    """Theorem 4 on logistic regression with the noise term computed exactly (:func:`_logistic_noise_terms`):
    a hypothesis search over two groups (1-4 rows each, signed features up to |x| = 10 in 1-2 dimensions,
    any labels and theta) and the per-step noise, for Tr(H_a) > (1 + ``min_gap``) Tr(H_b) with R_a^noise <=
    R_b^noise, plus a directed pair (a large-norm group far from the boundary against a small-norm group
    on it). ``relative``: the noise std is s = n / max_i ||x~_i|| for n in ``noise`` (the spread s||x~|| it
    puts on the margins -- n = 0.01 is Theorem 2's second-order regime, where the expansion's next term is
    (s||x~||)²/4 of the noise term or less); otherwise s = n. The ratio reported is R_b / R_a."""
    def check(budget: CheckBudget) -> Verdict:
        def terms(x):
            rows_a, rows_b, labels, theta, n = x
            d = len(theta) - 1
            a, b = np.array(rows_a, float)[:, :d], np.array(rows_b, float)[:, :d]
            scale = 1.0
            if relative:
                scale = 1.0 / max(float(np.sqrt((np.vstack([a, b]) ** 2).sum(1) + 1).max()), 1e-12)
            lab = np.array(labels, float)
            return (_logistic_noise_terms(a, lab[:len(a)], np.array(theta), n * scale),
                    _logistic_noise_terms(b, lab[len(a):len(a) + len(b)], np.array(theta), n * scale), n * scale)

        def ratio(x):
            (tr_a, r_a), (tr_b, r_b), _ = terms(x)
            (tr_hi, r_hi), (tr_lo, r_lo) = ((tr_a, r_a), (tr_b, r_b)) if tr_a >= tr_b else ((tr_b, r_b), (tr_a, r_a))
            if tr_hi <= tr_lo * (1 + min_gap) + 1e-300 or r_hi <= 0:
                return None
            return r_lo / r_hi

        coord = st.floats(-10, 10)
        rows = st.lists(st.lists(coord, min_size=2, max_size=2), min_size=1, max_size=4)
        strategy = st.tuples(rows, rows, st.lists(st.integers(0, 1), min_size=8, max_size=8),
                             st.integers(1, 2).flatmap(lambda d: st.lists(st.floats(-3, 3), min_size=d + 1,
                                                                          max_size=d + 1)),
                             st.sampled_from(noise))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        # directed: group a = one row at x = 10, correctly classified with margin 10; group b = one row at
        # x = 0.1, 0.1 from the boundary. Tr(H_a) ~ 4.5e-3 << Tr(H_b) ~ 0.25
        directed = [([[0.1, 0.0]], [[10.0, 0.0]], [1] * 8, [1.0, 0.0], n) for n in noise]
        directed_ratios = [ratio(x) for x in directed]
        best_directed = max(range(len(directed)), key=lambda i: directed_ratios[i] or 0.0)
        spread = "s·max||x̃||" if relative else "s"
        effort = (f"{tried} hypothesis cases (two groups of 1-4 rows, d ≤ 2, |x| ≤ 10, {spread} ∈ {list(noise)}) + "
                  f"{len(directed)} directed; noise term by Gauss-Hermite quadrature")
        flip = _directed_flip_noise()
        if found is None and (directed_ratios[best_directed] or 0.0) > 1:
            found = directed[best_directed]
        if found is None:
            return holds(f"max R_lo/R_hi = {worst:.4g} over pairs with Tr(H) apart by > {min_gap:g}", effort=effort,
                         worst_ratio=worst, directed_flip_noise=flip)
        (tr_a, r_a), (tr_b, r_b), s = terms(found)
        rows_a, rows_b, labels, theta, _ = found
        return violated(f"Tr(H) {max(tr_a, tr_b):.3g} > {min(tr_a, tr_b):.3g} but the noise terms are "
                        f"{r_a if tr_a >= tr_b else r_b:.3g} ≤ {r_b if tr_a >= tr_b else r_a:.3g} (s = {s:.3g}); the "
                        f"directed pair's order flips from s = {flip:.3g}",
                        counterexample={"rows_a": rows_a, "rows_b": rows_b, "labels": labels, "theta": theta,
                                        "noise_std": s, "trace_a": tr_a, "trace_b": tr_b, "noise_term_a": r_a,
                                        "noise_term_b": r_b, "directed_flip_noise": flip,
                                        "regime": "the noise spreads the larger-norm group's margins by "
                                                  "s||x~|| ≳ its margin: the second-order term misses it"},
                        ratio=float(ratio(found)), effort=effort)
    return check


def _directed_flip_noise() -> float:
    """The per-step noise std s at which the directed pair's noise terms cross (bisection on log s): below
    it the near-boundary group (the larger trace) has the larger noise term, as Theorem 4 says."""
    def gap(s):
        (_, r_near), (_, r_far) = (_logistic_noise_terms(np.array([[0.1]]), np.array([1.0]), np.array([1.0, 0.0]), s),
                                   _logistic_noise_terms(np.array([[10.0]]), np.array([1.0]), np.array([1.0, 0.0]), s))
        return r_near - r_far

    lo, hi = 1e-4, 10.0
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
    return hi


_THM4_QUOTE = ("Theorem 4. For groups a, b ∈ A, R_a^noise > R_b^noise whenever Tr(H_ℓ^a) > Tr(H_ℓ^b).")
_THM4_METHOD = ("logistic regression; the noise's exact effect on each group's expected loss, E_z L(θ + z; D_a) − "
                "L(θ; D_a), by Gauss-Hermite quadrature; hypothesis search over pairs of groups (and a directed "
                "near/far pair) for a larger trace with a smaller noise term")
register("001.thm4", location="§8, Theorem 4", quote=_THM4_QUOTE,
         statement="R_a^noise > R_b^noise whenever Tr(H_ℓᵃ) > Tr(H_ℓᵇ)",
         regime="R^noise is Theorem 2's second-order noise term: tested where it is the noise's effect, per-step "
                "noise s with s·max||x̃|| = 0.01 (the paper's runs: ηCσ/|B| ~ 1e-5..1e-3); traces apart by > 0.1%",
         method=_THM4_METHOD, check=_theorem4(noise=(0.01,), relative=True),
         mutant=_theorem4(noise=(2.0,), relative=True))  # the spread far outside the expansion's regime
register("001.thm4.exact-noise-effect", kind="extension", extends="001.thm4",
         location="Theorem 4 beyond its second-order regime", quote=_THM4_QUOTE,
         statement="the noise's exact effect on the group loss orders as Tr(H) at per-step noise s up to 1",
         regime="per-step noise std s ∈ {0.01, 0.1, 0.5, 1} on θ, inputs up to |x| = 10 (s||x̃|| up to ~14)",
         method=_THM4_METHOD + "; the noise std at which the directed pair's order flips is reported",
         check=_theorem4(noise=(0.01, 0.1, 0.5, 1.0), relative=False),
         mutant=_theorem4(noise=(1e-4,), relative=False))


# =============================================================================== §8 Example 3, Theorem 5
def _example3(*, bias: bool, plus_one: bool) -> Check:
    """Tr(H_X) from the full per-sample Hessian (hessian.exact_sample_traces, autograd) against
    (1 - sum f_k^2)(||X||^2 + [plus_one]) on K = 3 softmax regression with or without a bias.

    Example 3's own setting is Example 1's bias-free model, where the printed (1 - sum f^2) ||X||^2 is exact;
    with a bias the Kronecker factor is x~ x~^T, x~ = [x; 1], hence the + 1. The search is adversarial over
    signed inputs from tiny to large norms (|x| ≤ 50), where any missing term shows."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.theory.hessian import boundary_proxy, exact_sample_traces

        model = _softmax_model(bias=bias)

        def deviation(rows) -> tuple[float, float, float]:
            X = torch.tensor(rows, dtype=torch.float64)
            exact = exact_sample_traces(model, X, torch.zeros(len(rows), dtype=torch.long))
            formula = boundary_proxy(model, X) * ((X ** 2).sum(1) + (1.0 if plus_one else 0.0))
            scale = (X ** 2).sum(1) + 1  # Tr(H_X) <= ||x~||^2: deviations relative to it, not to a trace near 0
            return float(((exact - formula).abs() / scale).max()), float(exact[0]), float(formula[0])

        found, worst, tried = search(st.lists(st.floats(-50, 50), min_size=2, max_size=2),
                                     lambda row: deviation([row])[0] / 1e-9, examples=budget.examples // 2)
        g = torch.Generator().manual_seed(0)
        rows = (torch.randn(200 if budget.name == "quick" else 2000, 2, generator=g, dtype=torch.float64) * 3).tolist()
        random_err = deviation(rows)[0]
        effort = f"{tried} searched + {len(rows)} random inputs, K = 3, {'with' if bias else 'without'} a bias"
        formula = "(1 − Σf²)(||X||² + 1)" if plus_one else "(1 − Σf²)||X||²"
        if found is None and random_err < 1e-9:
            return holds(f"Tr(H_X) = {formula} to {max(random_err, worst * 1e-9):.1e}", effort=effort,
                         worst_ratio=1 + random_err)
        row = found if found is not None else rows[0]
        err, exact, printed = deviation([row])
        return violated(f"exact Tr = {exact:.4g} vs {formula} = {printed:.4g}",
                        counterexample={"x": row, "exact": exact, "formula": printed, "bias": bias},
                        ratio=1 + max(err, random_err), effort=effort)
    return check


_EX3_QUOTE = ("Example 3. Consider the same setting of Example 1. The Hessian of the cross entropy loss of a sample "
              "X ∼ D is given by H_ℓ^X = [(diag(f) − ffᵀ) ⊗ XXᵀ], where ⊗ is the Kronecker product [7]. This result "
              "suggests that the trace of the Hessian for sample X is proportional to its input norm: Tr(H_ℓ^X) ∝ "
              "||X||². Additionally it also shows that: Tr(H_ℓ^X) ∝ (1 − Σ_{k=1}^K f_{θ,k}²(X))")
_EX3_METHOD = "the full per-sample Hessian's trace (autograd) against the formula, hypothesis-searched and on random inputs"
register("001.ex3", location="§8, Example 3", quote=_EX3_QUOTE,
         statement="H_X = (diag f − ffᵀ) ⊗ XXᵀ, so Tr(H_X) = (1 − Σf_k²) ||X||²",
         regime="Example 1's setting: softmax regression f = softmax(θᵀX), no bias, cross-entropy, K = 3",
         method=_EX3_METHOD, check=_example3(bias=False, plus_one=False), mutant=_example3(bias=True, plus_one=False))
register("001.ex3.with-bias", kind="extension", extends="001.ex3",
         location="Example 3 for the toolkit's models (theory/hessian.py)", quote=_EX3_QUOTE,
         statement="with a bias: Tr(H_X) = (1 − Σf_k²)(||X||² + 1)", regime="softmax regression with a bias, K = 3",
         method=_EX3_METHOD, check=_example3(bias=True, plus_one=True), mutant=_example3(bias=True, plus_one=False))
register("001.ex3.norm", location="§8, Example 3", quote=_EX3_QUOTE,
         statement="Tr(H_X) ∝ ||X||²: of two samples (same label), the larger input has the larger Hessian trace",
         regime="Example 1's bias-free softmax regression, K = 3, one θ", method=_NORM_METHOD,
         check=_grows_with_norm("trace"), mutant=_grows_with_norm("trace", theta_scale=0.0),
         corrected="Tr(H_X) = (1 − Σf²)||X||² (001.ex3): proportional to ||X||² only at fixed predictions")


def _theorem5(*, bound_scale: float = 1.0) -> Check:
    """1 - sum f_k^2 in [0, 1 - 1/K], extremes at one-hot / uniform (conditions.theorem5_extremes + search).
    ``bound_scale`` multiplies the maximum 1 - 1/K (the mutant: 0.99, which the uniform vector exceeds)."""
    def check(budget: CheckBudget) -> Verdict:
        from dpfair_analysis.fairness.metrics import boundary_proxy
        from dpfair_analysis.theory.conditions import theorem5_extremes

        ext = [theorem5_extremes(k) for k in range(2, 11)]
        exact = all(abs(e["uniform"] - bound_scale * e["max_theory"]) < 1e-12 and abs(e["one_hot"]) < 1e-12
                    for e in ext)

        def ratio(w):
            f = np.asarray(w) / np.sum(w)
            v = float(boundary_proxy(f))
            k = len(w)
            return max(v / (bound_scale * (1 - 1 / k)), 1 - v if v < 0 else 0.0)

        found, worst, tried = search(st.lists(st.floats(1e-6, 1.0), min_size=2, max_size=10), ratio,
                                     examples=budget.examples)
        if found is not None or not exact:
            return violated("proxy outside [0, 1 − 1/K]", counterexample={"weights": found, "bound_scale": bound_scale},
                            ratio=max(worst, 1.0 + 1e-12))
        return holds(f"max proxy/(1 − 1/K) = {worst:.4f}; extremes exact for K = 2..10",
                     effort=f"{tried} probability vectors", worst_ratio=worst)
    return check


register("001.thm5", location="§8, Theorem 5",
         quote="Theorem 5. Consider a K-class classifier f_{θ,k} (k ∈ [K]). For a given sample X ∼ D, the term "
               "(1 − Σ_{k=1}^K f_{θ,k}²(X)) is maximized when f_{θ,k}(X) = 1/K and minimized when ∃k ∈ [K] s.t. "
               "f_{θ,k}(X) = 1 and f_{θ,k'} = 0 ∀k' ∈ [K], k' ≠ k.",
         statement="1 − Σ_k f_k² is maximised at f_k = 1/K and minimised at a one-hot f", regime="f a probability "
         "vector, K ≥ 2", method="closed-form extremes for K = 2..10 and a hypothesis search over probability vectors "
                                 "for a value outside [0, 1 − 1/K]",
         check=_theorem5(), mutant=_theorem5(bound_scale=0.99))


def _closer_larger_trace(*, equal_norms: bool = False, margin: float = 1.0) -> Check:
    """'The closest (farther) is a sample X to the decision boundary the larger (smaller) is the associated
    Hessian trace value' on Example 1's bias-free softmax regression with K = 2 (the toolkit's one-score logistic
    model, the same classifier: the boundary is the line wᵀx = 0, distance |wᵀx| / ||w||): pairs of inputs (one
    label), the closer one must have the larger exact trace. Tr(H_X) = p(1 − p) ||X||²: false as soon as norms
    differ; a directed pair (distance 1/2 and norm 1/2 against distance 1 and norm 10) beside the search.
    ``equal_norms`` (the mutant, and the other reading) puts both inputs on the unit circle, where p(1 − p) alone
    decides and it holds; ``margin`` > 1 (that reading's mutant) asks the closer trace to exceed the farther ×margin."""
    def check(budget: CheckBudget) -> Verdict:
        import torch

        from dpfair_analysis.theory.hessian import exact_sample_traces

        model = _softmax_model(bias=False, n_classes=2)
        w = model.linear.weight.detach().numpy()
        normal = w[0] if len(w) == 1 else w[1] - w[0]  # the toolkit's K = 2 model has one score

        def closeness(x):  # larger = closer to the boundary
            return -abs(float(normal @ x)) / float(np.linalg.norm(normal))

        def values(rows, label):  # [closer, farther]; the farther's scaled by the falsified margin
            X = torch.tensor(rows, dtype=torch.float64)
            return exact_sample_traces(model, X, torch.full((len(rows),), label, dtype=torch.long)) * \
                torch.tensor([1.0, margin], dtype=torch.float64)[:len(rows)]

        def project(x):  # inputs of norm >= 1/2 (at the origin every trace is 0); the mutant: on the unit circle
            norm = np.linalg.norm(x)
            return None if norm < 0.5 else (x / norm if equal_norms else x)

        point = st.lists(st.floats(-20, 20), min_size=2, max_size=2)
        found, worst, tried = _pair_search(budget, values, key=lambda x: closeness(x) + 1e3, points=point,
                                           n_labels=2, project=project)
        # directed: a point at distance 1/2 on the normal (norm 1/2) against one at distance 1 and norm 10
        unit = normal / np.linalg.norm(normal)
        tangent = np.array([-unit[1], unit[0]])
        directed = [project(p) for p in (0.5 * unit, unit + math.sqrt(99.0) * tangent)]
        directed_ratio = None
        if all(p is not None for p in directed):
            close_d, far_d = sorted(directed, key=closeness, reverse=True)
            v_d = values([close_d.tolist(), far_d.tolist()], 1)
            directed_ratio = float(v_d[1] / v_d[0])
            if found is None and directed_ratio > 1 + 1e-9:
                found = (close_d, far_d, 1)
        effort = (f"{tried} pairs of inputs (|x| ≤ 20{', on the unit circle' if equal_norms else ''}, same label) + a "
                  f"directed pair, K = 2")
        if found is None:
            return holds(f"the closer input has the larger Tr(H_X) in every pair (max ratio "
                         f"{max(worst, directed_ratio or 0.0):.4g})", effort=effort,
                         worst_ratio=max(worst, directed_ratio or 0.0))
        close, far, label = found
        v = values([close.tolist(), far.tolist()], label)
        return violated(f"distance {-closeness(close):.3g} < {-closeness(far):.3g} but Tr(H_X) {float(v[0]):.3g} < "
                        f"{float(v[1]):.3g} (norms {np.linalg.norm(close):.3g}, {np.linalg.norm(far):.3g})",
                        counterexample={"x_closer": close.tolist(), "x_farther": far.tolist(), "label": label,
                                        "trace_closer": float(v[0]), "trace_farther": float(v[1])},
                        ratio=float(v[1] / v[0]) if float(v[0]) > 0 else math.inf, effort=effort)
    return check


register("001.sec8.boundary-trace", location="§8, after Theorem 5",
         quote="Since, as shown in Example 3 this term can be proportional to the Hessian trace, then the "
               "aforementioned relation also indicates a connection between the Hessian trace value for a sample "
               "and its distance to the decision boundary: The closest (farther) is a sample X to the decision "
               "boundary the larger (smaller) is the associated Hessian trace value Tr(H_ℓ^X).",
         statement="of two samples, the one closer to the decision boundary has the larger Tr(H_X)",
         regime="Example 1's bias-free softmax regression with K = 2, one θ; pairs with one label, ||x|| ≥ 1/2",
         method="hypothesis search over pairs of inputs for a closer one with the smaller exact trace (autograd)",
         check=_closer_larger_trace(), mutant=_closer_larger_trace(equal_norms=True),
         corrected="at equal input norms (K = 2) the closer sample has the larger trace; in general Tr(H_X) = "
                   "p(1 − p)||X||² weighs the distance against the norm",
         reading="literally, for any two samples (their input norms may differ)",
         readings=(Reading("equal norms", "the comparison 'the closest (farther) is a sample X to the decision "
                           "boundary the larger (smaller) is the associated Hessian trace' made between samples of "
                           "equal input norm", check=_closer_larger_trace(equal_norms=True),
                           mutant=_closer_larger_trace(equal_norms=True, margin=1.5)),))
