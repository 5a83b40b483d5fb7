"""Paper 003 (PF-LD, AAAI'21), §4-7: the fairness constraints (Examples 1-3), the sensitivities of the primal
and dual releases (Theorems 1-2, Eq. 10 and 13), the missing-values rule (§7) and §4.2's Gaussian mechanism
(registered last, where the privacy claims begin).

The privacy accounting (§6.1: Theorems 3-5, Lemmas 1-2) is in
:mod:`.p003_pfld_privacy`, which reuses this file's public searches (:func:`theorem1_searches`,
:func:`theorem2_search`); the bias-variance bounds (§6.2: Theorems 6-7) in :mod:`.p003_pfld_bounds`.
Searches that several checks share are cached per budget *and* per parameter, so a mutant never
reuses the unmutated check's search.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import strategies as st

from dpfair_analysis.verify.claims.core import (
    FULL,
    Check,
    CheckBudget,
    Verdict,
    holds,
    misprint_check,
    register,
    search,
    violated,
)
from dpfair_analysis.verify.claims.fixtures import DWORK_ROTH, gaussian_delta_condition, printed_gaussian_checks

__all__ = ["RELEASE_FAMILIES", "case_record", "theorem1_searches", "theorem2_search"]

_CACHE: dict[tuple, Any] = {}


def _pfld_examples(kind: str, *, perturb: float = 0.0) -> Check:
    """Examples 1-3: demographic parity / equalized odds / accuracy parity as |A| / 2|A| / |A| constraints of
    Eq. (1). On random data sets (2-5 groups of skewed, tiny or missing sizes, logits at several scales):
    (i) make_constraint(kind) has that many terms; (ii) its h is the Example's (M_theta(z) = P(positive),
    or the per-sample loss for accuracy parity) and its term gaps mu(D_{P_i}) - mu(D_{G_i}) equal the
    Example's subsets computed here with numpy (P = D, G = {A = i}; eo: P = {Y = y}, G = {Y = y, A = i});
    (iii) its violation (hard predictions) equals fairlearn's demographic_parity_difference /
    equalized_odds_difference / accuracy difference. ``perturb`` is added to the references (the mutant)."""
    def check(budget: CheckBudget) -> Verdict:
        import torch
        from fairlearn.metrics import MetricFrame, demographic_parity_difference, equalized_odds_difference
        from sklearn.metrics import accuracy_score

        from dpfair_analysis.fairness.constraints import make_constraint

        rng = np.random.default_rng(0)
        worst, where, cases = 0.0, {}, 0
        for trial in range(20 if budget.name != FULL.name else 300):
            k = int(rng.integers(2, 6))
            n = int(rng.integers(8, 80))
            group_np = rng.choice(k, size=n, p=rng.dirichlet(np.full(k, 0.5)))
            y_np = rng.integers(0, 2, n)
            logits_np = rng.normal(size=(n, 2)) * rng.choice([0.1, 1.0, 10.0])
            group, y, logits = torch.from_numpy(group_np), torch.from_numpy(y_np), torch.from_numpy(logits_np)
            con = make_constraint(kind, n_groups=k)
            expected_terms = k if kind in ("dp", "ap") else 2 * k
            if con.n_terms != expected_terms:
                return violated(f"{con.n_terms} terms, expected {expected_terms}", counterexample={"k": k},
                                ratio=math.inf)
            # (ii) h and the term gaps from the Example's definitions
            z = logits_np - logits_np.max(1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(1, keepdims=True))
            h_def = -logp[np.arange(n), y_np] if kind == "ap" else np.exp(logp[:, 1])
            h_ours = con.h(logits, y).double().numpy()
            errors = [float(np.max(np.abs(h_ours - (h_def + perturb))))]
            gaps = con.term_gaps(torch.from_numpy(h_def), y, group).numpy()
            for i, term in enumerate(con.terms):
                pop = np.ones(n, bool) if kind in ("dp", "ap") else (y_np == term.label)
                grp = pop & (group_np == term.group)
                if not grp.any():
                    continue
                errors.append(abs(gaps[i] - (h_def[pop].mean() - h_def[grp].mean() + perturb)))
            # (iii) fairlearn on hard predictions
            pred = logits_np.argmax(1)
            present = np.unique(group_np)
            if kind == "dp":
                ref = demographic_parity_difference(y_np, pred, sensitive_features=group_np)
            elif kind == "eo":
                ref = None if any(len(np.unique(group_np[y_np == v])) < len(present) for v in (0, 1)) else \
                    equalized_odds_difference(y_np, pred, sensitive_features=group_np)
            else:
                ref = MetricFrame(metrics=accuracy_score, y_true=y_np, y_pred=pred,
                                  sensitive_features=group_np).difference()
            if ref is not None and len(present) > 1:
                errors.append(abs(con.violation(logits, y, group) - (float(ref) + perturb)))
            err = max(errors)
            if err > worst:
                worst, where = err, {"trial": trial, "k": k, "n": n, "group_sizes": np.bincount(group_np, minlength=k)}
            cases += 1
        effort = f"{cases} random data sets (2-5 groups, skewed/tiny/missing)" + \
            (f"; references + {perturb:g}" if perturb else "")
        if worst < 1e-9:
            return holds(f"h, term gaps and violation = definitions / fairlearn to {worst:.1e}", effort=effort,
                         worst_ratio=1.0)
        return violated(f"differs from the definition / fairlearn by {worst:.3g}", counterexample=where,
                        ratio=1 + worst, effort=effort)
    return check


_EX_METHOD = ("random data sets (2-5 groups of skewed, tiny or missing sizes, logits at several scales): the number of "
              "terms of fairness.constraints.make_constraint, its h and term gaps against the Example's subsets "
              "computed with numpy, and its violation against fairlearn's")
register("003.ex1", location="§4.1, Example 1",
         quote="Example 1 (Demographic parity). Demographic parity can be expressed as a set of |A| constraints, with "
               "h(z) = M_θ(z) and, for each i ∈ A, the subsets indicating population terms are defined as: D_{P_i} = "
               "{(X, Y) | (X, A, Y) ∈ D}, and the subsets indicating the group terms as: D_{G_i} = {(X, Y) | (X, A, Y) "
               "∈ D ∧ A = i}.",
         statement="demographic parity = |A| constraints E_{D_P}[h] = E_{D_{G_i}}[h], h = M_θ(z)",
         regime="h and gaps from the definitions; hard predictions compared with fairlearn", method=_EX_METHOD,
         check=_pfld_examples("dp"), mutant=_pfld_examples("dp", perturb=1e-3))
register("003.ex2", location="§4.1, Example 2",
         quote="Example 2 (Equalized odds). Equalized odds can be expressed as a set of 2|A| constraints, with h(z) = "
               "M_θ(z), and for each choice of y ∈ {0, 1}, and i ∈ A, the subsets indicating population terms are "
               "defined as: D_{P_i} = {(X, Y) | (X, A, Y) ∈ D ∧ Y = y}, and the subsets indicating the group terms as: "
               "D_{G_i} = {(X, Y) | (X, A, Y) ∈ D ∧ Y = y ∧ A = i}.",
         statement="equalized odds = 2|A| constraints within Y = y", regime="h and gaps from the definitions; "
         "compared with fairlearn", method=_EX_METHOD, check=_pfld_examples("eo"),
         mutant=_pfld_examples("eo", perturb=1e-3))
register("003.ex3", location="§4.1, Example 3",
         quote="Example 3 (Accuracy parity). Accuracy parity can be expressed as a set of |A| constraints, with h(z) = "
               "L_θ(M_θ(z)), where L is the loss function defined in problem (L), and, for each i ∈ A, the subsets "
               "indicating population terms are defined as: D_{P_i} = {(X, Y) | (X, A, Y) ∈ D}, and the subsets "
               "indicating the group terms as: D_{G_i} = {(X, Y) | (X, A, Y) ∈ D ∧ A = i}.",
         statement="accuracy parity = |A| constraints with h = loss", regime="h = cross-entropy; 0-1 loss compared "
         "with fairlearn's accuracy difference", method=_EX_METHOD, check=_pfld_examples("ap"),
         mutant=_pfld_examples("ap", perturb=1e-3))


# =============================================================================== §6 Theorem 1 (Eq. 7)
def _cached(key: tuple, compute: Callable[[], Any]) -> Any:
    """Memoise a search result under ``key`` (which names the budget and every parameter)."""
    if key not in _CACHE:
        _CACHE[key] = compute()
    return _CACHE[key]


def case_record(c) -> dict[str, Any]:
    """A neighbouring pair as JSON-ready evidence."""
    out = {"kind": c.constraint.kind, "y": c.y.tolist(), "group": c.group.tolist(),
           "neighbour_group": c.new_group.tolist(), "moving_person": int(c.index), "h": c.h.tolist(),
           "grads": c.grads.tolist(), "lambdas": c.lambdas.tolist(), "C": float(c.clip)}
    if c.reported is not None:
        out.update(reported=c.reported.tolist(), neighbour_reported=c.new_reported.tolist())
    return out


# ------------------------------------------------------------------ Theorem 1 (Eq. 7)
def _release_ratio(c) -> float | None:
    """||Eq. (10) release(D) - release(D')|| / (Eq. 7's Delta_p, the larger of the two sides)."""
    from dpfair_analysis.verify.claims.pfld_cases import primal_release_bound, primal_release_excess

    b = primal_release_bound(c)
    if not math.isfinite(b) or b <= 0:
        return None
    return (primal_release_excess(c) + b) / b


RELEASE_FAMILIES = ("sign-flip", "no-flip-bounded", "random")


def _thm1_ratio(family: str, proof_setting: bool) -> Callable[[Any], float | None]:
    """The quantity one family's search pushes above 1: the release's change / Delta_p
    (sign-flip: only pairs where a sign flips; no-flip-bounded and the proof setting: only pairs
    where none does), or step (8e)'s change / lambda_i C_p / (|B_{G_i}| - 1) for the term the
    person leaves (8e-leave) or joins (8e-join-smallest)."""
    from dpfair_analysis.verify.claims.pfld_cases import primal_group_part_term, sign_flips, term_of

    def ratio(c):
        flips = sign_flips(c)
        if family == "sign-flip":
            if proof_setting or not flips:
                return None
        elif flips and (proof_setting or family == "no-flip-bounded"):
            return None
        if family in RELEASE_FAMILIES:
            return _release_ratio(c)
        g = c.group[c.index] if family == "8e-leave" else c.new_group[c.index]
        change, bound = primal_group_part_term(c, term_of(c.constraint, int(g), int(c.y[c.index])))
        if not math.isfinite(bound) or bound <= 0:
            return None
        return change / bound
    return ratio


def theorem1_searches(budget: CheckBudget, proof_setting: bool) -> dict[str, tuple]:
    """{family: (shrunk case or None, its ratio / the worst seen, examples tried)} for the directed
    families of pfld_cases.theorem1_cases (+ the unstructured ``cases`` at FULL)."""
    from dpfair_analysis.verify.claims.pfld_cases import THEOREM1_FAMILIES, cases, theorem1_cases, to_proof_setting

    def compute():
        out = {}
        for family in THEOREM1_FAMILIES + (("random",) if budget.name == FULL.name else ()):
            strategy = theorem1_cases(family=family, proof_setting=proof_setting) if family != "random" else \
                (cases().map(to_proof_setting) if proof_setting else cases())
            out[family] = search(strategy, _thm1_ratio(family, proof_setting), examples=budget.examples)
        return out
    return _cached(("thm1", budget.name, proof_setting), compute)


def _stored_sign_flip():
    """tests/pfld's stored case: population gradients unclipped, sign(mu_P - mu_G0) flips."""
    import torch

    from dpfair_analysis.fairness.constraints import make_constraint
    from dpfair_analysis.verify.claims.pfld_cases import Case

    t = lambda v: torch.tensor(v, dtype=torch.float64)
    return Case(make_constraint("dp", n_groups=2), y=torch.zeros(6, dtype=torch.long),
                group=torch.tensor([0, 0, 0, 1, 1, 1]), new_group=torch.tensor([1, 0, 0, 1, 1, 1]),
                h=t([1.0, 0.4, 0.4, 0.3, 0.3, 0.3]), grads=t([[10.0]] * 6), lambdas=t([1.0, 0.0]), clip=1.0, index=0)


def _pfld_theorem1(*, proof_setting: bool = False) -> Check:
    """Thm 1 (Eq. 7): ||release(B) - release(B')|| <= 2 C_p lambda_max / (min_i |B_{G_i}| - 1) for the
    gradient Eq. (10) releases (population gradients unclipped), one person's group changing.

    Directed hypothesis searches, one per way the printed Delta_p fails (pfld_cases
    .theorem1_cases): ``sign-flip`` (the gradient of lambda_i |mu_P - mu_G| carries
    sign(mu_P - mu_G), which one person can flip: the release jumps by 2 lambda_i ||grad mu_P -
    grad-bar mu_G||, unbounded in C_p since grad mu_P is not clipped), ``no-flip-bounded`` (every
    ||grad h|| <= C_p and no sign moves: the two group parts add to 4 C_p lambda / (m + 1) >
    2 C_p lambda / (m - 1)), and the proof's step (8e) per term (``8e-leave``: 2 C_p / n >
    C_p / (n - 2) for the group left, n > 4; ``8e-join-smallest``: 2 C_p / (m + 1) > C_p / (m - 1)
    for the smallest group joined, m > 3) -- vector, signed gradients. The bound is taken on the
    larger of the two sides; pairs with a term of <= 1 member are skipped (Eq. 7 is then infinite,
    or negative for an empty group: unusable rather than violated -- and a Poisson batch has such
    groups with positive probability, so Eq. (10)'s noise cannot always be calibrated). The
    verdict's ratio is the largest release-level (Eq. 7) ratio the searches found (shrunk cases);
    the stored sign-flip case of tests/pfld is extra evidence only.

    ``proof_setting=True`` (the mutant) quantifies over the setting Theorem 1's proof implicitly
    assumes -- every gradient a scalar in [0, C_p] and no sign flips -- where Eq. (7) holds."""
    def check(budget: CheckBudget) -> Verdict:
        results = theorem1_searches(budget, proof_setting)
        tried = sum(r[2] for r in results.values())
        families = {f: {"found": r[0] is not None, "ratio": r[1], "tried": r[2]} for f, r in results.items()}
        effort = (f"{tried} neighbouring pairs over {len(results)} directed families (dp/eo/ap, 2-3 groups, vector "
                  "signed gradients, unclipped population terms, tiny/unequal groups, moves into the smallest group)"
                  + ("; proof setting: scalar gradients in [0, C_p], no sign flips" if proof_setting else ""))
        release = {f: r for f, r in results.items() if f in RELEASE_FAMILIES and r[0] is not None}
        steps = {f: r for f, r in results.items() if f not in RELEASE_FAMILIES and r[0] is not None}
        if not release:
            worst = max(r[1] for r in results.values())
            return holds(f"max change/Δ_p = {worst:.4f}" + (f" (step 8e fails: {', '.join(steps)})" if steps else ""),
                         effort=effort, worst_ratio=worst, families=families)
        family, (case, ratio, _) = max(release.items(), key=lambda kv: kv[1][1])
        from dpfair_analysis.verify.claims.pfld_cases import primal_release_bound
        ce = {"family": family, **case_record(case), "claimed_delta_p": primal_release_bound(case),
              "change": ratio * primal_release_bound(case), "families": families}
        ce["cases"] = {f: {**case_record(c), "ratio": r} for f, (c, r, _) in {**release, **steps}.items()}
        stored = _thm1_ratio("sign-flip", proof_setting)(_stored_sign_flip())
        if stored is not None:
            ce["stored_sign_flip"] = {"h": [1.0, 0.4, 0.4, 0.3, 0.3, 0.3], "grads": [10.0] * 6,
                                      "group": [0, 0, 0, 1, 1, 1], "person_0_moves_to": 1, "C_p": 1.0,
                                      "lambdas": [1.0, 0.0], "change": 18.0, "claimed": 2.0, "ratio": stored}
        found = ", ".join(f"{f} ×{r[1]:.3g}" for f, r in {**release, **steps}.items())
        def families_word(k):
            return f"{k} famil{'y' if k == 1 else 'ies'}"
        return violated(f"Δ_p of Eq. (7) fails in {families_word(len(release))} of the release and "
                        f"{families_word(len(steps))} of step (8e): {found}",
                        counterexample=ce, ratio=ratio, effort=effort)
    return check


_THM1_QUOTE = ("Theorem 1. Let ||∇_θ h(z)|| ≤ C_p, for all z ∈ B_{G_i}, i ∈ I, and some C_p > 0. The global sensitivity "
               "Δ_p of the gradients of the constraints violation ∇_θ λᵀ|μ(B_P) − μ(B_G)| is Δ_p ≤ 2C_p λ^max / "
               "(min_{i∈I} |B_{G_i}| − 1). (7)")
_THM1_METHOD = ("directed hypothesis searches over neighbouring batches (one person's group changes; dp/eo/ap, 2-3 "
                "groups, vector signed gradients, unclipped population terms, tiny and unequal groups), one per way "
                "Eq. (7) can fail, the change of Eq. (10)'s release against Δ_p on the larger side "
                "(verify.claims.pfld_cases)")
register("003.thm1", location="§6, Theorem 1, Eq. (7)", quote=_THM1_QUOTE,
         statement="Δ_p ≤ 2 C_p λ_max / (min_i |B_{G_i}| − 1) for the released gradient of Eq. (10)",
         regime="||∇h(z)|| ≤ C_p on group terms (population terms unclipped, Eq. 10); one person's group changes",
         method=_THM1_METHOD, check=_pfld_theorem1(), mutant=_pfld_theorem1(proof_setting=True))


def _population_unclipped(*, proof_setting: bool = False) -> Check:
    """§6: 'It is not necessary to perform gradient clipping for the functions h(z) associated with the population
    terms in B_P'. With the population gradients unclipped, one person's group change can flip sign(mu_P - mu_G)
    and move Eq. (10)'s release by 2 lambda_i ||grad mu_P - clip-mean grad mu_G||, unbounded in C_p: the
    sign-flip family of Theorem 1's search (shared, cached), and the stored sign-flip case with its population
    gradients scaled up (the change grows linearly with them, Delta_p does not). ``proof_setting`` (the mutant):
    every gradient a scalar in [0, C_p] and no sign flips, where the population terms need no clipping."""
    def check(budget: CheckBudget) -> Verdict:
        found, worst, tried = theorem1_searches(budget, proof_setting)["sign-flip"]
        effort = f"{tried} neighbouring pairs where a sign can flip (Theorem 1's sign-flip family)"
        if found is None:
            return holds(f"max change/Δ_p = {worst:.4f}", effort=effort, worst_ratio=worst)
        stored = _stored_sign_flip()  # population gradients of norm 10 against C_p = 1
        growth = {f"{10 * scale:g}": _thm1_ratio("sign-flip", False)(replace(stored, grads=stored.grads * scale))
                  for scale in (1.0, 10.0, 100.0)}
        return violated(f"one person's group change moves the release by ×{worst:.3g} Δ_p (searched); the stored case "
                        f"grows with the unclipped population gradients: " +
                        ", ".join(f"||∇h|| = {k}: ×{v:.3g}" for k, v in growth.items() if v is not None),
                        counterexample={**case_record(found), "ratio": worst, "stored_case_growth": growth},
                        ratio=worst, effort=effort)
    return check


register("003.sec6.population-unclipped", location="§6, after Theorem 1's proof (before Eq. 10)",
         quote="Using Theorem 1, the privacy-preserving primal update step for a mini-batch B ⊆ D can be executed by "
               "clipping exclusively the gradients of the functions h(z) associated with the group terms in B_G. It "
               "is not necessary to perform gradient clipping for the functions h(z) associated with the population "
               "terms in B_P.",
         statement="Eq. (10)'s release keeps Theorem 1's sensitivity with the population terms' gradients unclipped",
         regime="Theorem 1's setting; population gradients of any norm; one person's group changes",
         method=_THM1_METHOD + "; the sign-flip family, and the stored case with its population gradients scaled",
         check=_population_unclipped(), mutant=_population_unclipped(proof_setting=True),
         corrected="clip the population terms' gradients too (the toolkit's primal release: 003.thm1.sum-release)")


# =============================================================================== §6 Theorem 2 (Eq. 11)
def _dual_ratio(factor: float) -> Callable[[Any], float | None]:
    """||Eq. (13) release(D) - release(D')|| / (factor x Eq. 11's Delta_d on D); pairs where either
    side's Delta_d is infinite (a group of <= 1) are skipped."""
    from dpfair_analysis.privacy.sensitivity import paper_dual_sensitivity
    from dpfair_analysis.verify.claims.pfld_cases import dual_excess, dual_release_bound, group_sizes

    def ratio(c):
        b = dual_release_bound(c)
        if not math.isfinite(b) or not math.isfinite(paper_dual_sensitivity(group_sizes(c, c.new_group),
                                                                            clip=c.clip)):
            return None
        return (dual_excess(c) + b) / (factor * b)
    return ratio


def theorem2_search(budget: CheckBudget, signed: bool, factor: float) -> tuple:
    from dpfair_analysis.verify.claims.pfld_cases import cases, structured_cases

    def compute():
        strategy = structured_cases() if signed else st.one_of(structured_cases(signed=False), cases(signed=False))
        return search(strategy, _dual_ratio(factor), examples=budget.examples * 2)
    return _cached(("thm2", budget.name, signed, factor), compute)


def _pfld_theorem2(*, signed: bool, factor: float = 1.0) -> Check:
    """Thm 2 (Eq. 11): ||Eq. (13)'s |mu(D_P) - mu-bar(D_G)| on D - on D'|| <= factor x sqrt(2) C_d /
    (min_i |D_{G_i}| - 1) on D's sizes. Signed h (allowed by |h| <= C_d): the directed
    pfld_cases.structured_cases (3 groups of 2-12, h at +-C_d: a mean moves by 2 C_d / n >
    sqrt(2) C_d / (n - 1)). Unsigned h in [0, C_d]: structured_cases(signed=False) (h at 0 or C_d,
    where the bound is nearly attained for large groups) and the unstructured cases(signed=False)."""
    def check(budget: CheckBudget) -> Verdict:
        from dpfair_analysis.verify.claims.pfld_cases import dual_excess, dual_release_bound, group_sizes

        found, worst, tried = theorem2_search(budget, signed, factor)
        domain = "signed h at ±C_d, 3 groups of 2-12" if signed else \
            "h at 0/C_d, 3 groups of 2-12, and h in [0, 4], sizes 2-9"
        effort = f"{tried} neighbouring pairs ({domain})" + (f"; bound ×{factor:g}" if factor != 1 else "")
        if found is None:
            return holds(f"max change/({factor:g} Δ_d) = {worst:.4f}", effort=effort, worst_ratio=worst)
        b = dual_release_bound(found)
        return violated(f"dual release moves ×{worst:.3g} the claimed {'' if factor == 1 else f'{factor:g} '}Δ_d",
                        counterexample={"group_sizes": group_sizes(found, found.group).tolist(),
                                        **case_record(found), "C_d": found.clip, "claimed_delta_d": factor * b,
                                        "change": dual_excess(found) + b},
                        ratio=worst, effort=effort)
    return check


_THM2_QUOTE = ("Theorem 2. Let |h(z)| ≤ C_d, for all samples z ∈ D_{G_i}, i ∈ I, and some C_d > 0. The global sensitivity "
               "Δ_d of the constraint violation |μ(D_P) − μ(D_G)| is Δ_d ≤ √2 C_d / (min_{i∈I} |D_{G_i}| − 1). (11)")
_THM2_METHOD = ("hypothesis search over neighbouring data sets (one person's group changes) for a change of Eq. (13)'s "
                "|μ(D_P) − μ̄^{C_d}(D_G)| beyond Δ_d (verify.claims.pfld_cases.structured_cases and cases)")
register("003.thm2", location="§6, Theorem 2, Eq. (11)", quote=_THM2_QUOTE,
         statement="Δ_d ≤ √2 C_d / (min_i |D_{G_i}| − 1)",
         regime="|h(z)| ≤ C_d (signed h allowed by the hypothesis); one person's group changes", method=_THM2_METHOD,
         check=_pfld_theorem2(signed=True), mutant=_pfld_theorem2(signed=False))
register("003.thm2.unsigned", kind="corrected", corrects="003.thm2",
         location="Theorem 2 for the h PF-LD uses (h ∈ [0, C_d]: predictions and losses)", quote=_THM2_QUOTE,
         statement="Δ_d ≤ √2 C_d / (min_i |D_{G_i}| − 1) as a bound on the change",
         regime="h ∈ [0, C_d] (the paper's three h); the noise scale still depends on the attribute (003.lemma2)",
         method=_THM2_METHOD, check=_pfld_theorem2(signed=False), mutant=_pfld_theorem2(signed=False, factor=0.5))


# =============================================================================== the toolkit's sum releases
def _pfld_default_primal(*, factor: float = 1.0) -> Check:
    """The toolkit's primal release (sums with public denominators): each person's contribution <= factor x
    Delta_1 on both sides and the change <= 2 factor Delta_1 (sensitivity.primal_group_sum,
    primal_contribution_bound), over pairs with missing values, signed h and gradients, any coefficients."""
    def check(budget: CheckBudget) -> Verdict:
        from dpfair_analysis.privacy.sensitivity import primal_contribution_bound
        from dpfair_analysis.verify.claims.pfld_cases import cases, primal_sum_changes, signed_coefficients

        def ratio(c):
            a = signed_coefficients(c)
            d1 = factor * primal_contribution_bound(a, clip=c.clip, constraint=c.constraint)
            if d1 <= 0:
                return None
            contributions, change = primal_sum_changes(c, a)
            return max(0.0, *(u / d1 for u in contributions), change / (2 * d1))

        found, worst, tried = search(cases(missing=True), ratio, examples=budget.examples * 2)
        effort = (f"{tried} neighbouring pairs with missing values (sizes 0-9, signed h and gradients, any "
                  f"coefficients)" + (f"; bound ×{factor:g}" if factor != 1 else ""))
        if found is not None:
            return violated(f"contribution ×{worst:.3g} {'' if factor == 1 else f'{factor:g} '}Δ₁",
                            counterexample=case_record(found), ratio=worst, effort=effort)
        return holds(f"max contribution/Δ₁ = {worst:.4f}", effort=effort, worst_ratio=worst)
    return check


def _pfld_default_dual(*, factor: float = 1.0) -> Check:
    """The toolkit's dual sums and counts: change <= factor x sqrt(2 t_max) C_d and factor x sqrt(2 t_max)
    (dual_sum_distance, count_distance), over pairs with missing values."""
    def check(budget: CheckBudget) -> Verdict:
        from dpfair_analysis.privacy.sensitivity import count_distance, dual_sum_distance
        from dpfair_analysis.verify.claims.pfld_cases import cases, dual_sum_changes

        def ratio(c):
            change, counts = dual_sum_changes(c)
            return max(change / dual_sum_distance(clip=c.clip, constraint=c.constraint),
                       counts / count_distance(constraint=c.constraint)) / factor

        found, worst, tried = search(cases(missing=True), ratio, examples=budget.examples * 2)
        effort = f"{tried} neighbouring pairs with missing values" + (f"; bound ×{factor:g}" if factor != 1 else "")
        if found is not None:
            return violated(f"×{worst:.3g}", counterexample=case_record(found), ratio=worst, effort=effort)
        return holds(f"max change/bound = {worst:.4f} (attained: √2 C_d)", effort=effort, worst_ratio=worst)
    return check


register("003.thm1.sum-release", kind="corrected", corrects="003.thm1",
         location="the toolkit's primal release (privacy/sensitivity.py)", quote=_THM1_QUOTE,
         statement="each person's contribution ≤ Δ₁ = t_max C_p max_i |a_i|, change ≤ 2Δ₁",
         regime="group sums with public coefficients a_i (population terms clipped too); any group sizes, signed h, "
                "missing values", method="hypothesis search over neighbouring data sets with missing values "
                "(pfld_cases.cases), each contribution and the change against the bound",
         check=_pfld_default_primal(), mutant=_pfld_default_primal(factor=0.5))
register("003.thm2.sum-release", kind="corrected", corrects="003.thm2",
         location="the toolkit's dual release (privacy/sensitivity.py)", quote=_THM2_QUOTE,
         statement="||S(D) − S(D')|| ≤ √(2 t_max) C_d and counts ≤ √(2 t_max)",
         regime="per-term sums of clip(h), public denominators", method="hypothesis search over neighbouring data "
         "sets with missing values, the sums' and counts' changes against their bounds",
         check=_pfld_default_dual(), mutant=_pfld_default_dual(factor=0.5))


# =============================================================================== §7 missing values
def _stored_missing_case():
    """tests/pfld's stored case: full groups 10/10, group 0 reports 2 (the mover, h = 1, and one h = 0),
    group 1 reports 8 (h = 0); non-reporters h = 1, so r = 0.5 and mu_P = 0.55."""
    import torch

    from dpfair_analysis.fairness.constraints import make_constraint
    from dpfair_analysis.verify.claims.pfld_cases import Case

    group = torch.tensor([0] * 10 + [1] * 10)
    reported = torch.tensor([True, True] + [False] * 8 + [True] * 8 + [False] * 2)
    h = torch.tensor([1.0, 0.0] + [1.0] * 8 + [0.0] * 8 + [1.0] * 2, dtype=torch.float64)
    new_group = group.clone()
    new_group[0] = 1
    return Case(make_constraint("dp", n_groups=2), torch.zeros(20, dtype=torch.long), group, new_group, h,
                torch.zeros((20, 1), dtype=torch.float64), torch.ones(2, dtype=torch.float64), 1.0, 0, reported,
                reported.clone())


def _pfld_missing_rule(*, uneven: bool = True) -> Check:
    """Sec. 7: with a fraction r of the rows reporting A, Delta'_d = Delta_d / r (Delta_d of Eq. 11 on the full
    group sizes), checked on the dual release of Eq. (13) over the reporters, h in [0, C_d] (where Theorem 2
    itself holds: 003.thm2.unsigned), the moving person reporting on both sides; the bound is the larger
    of the two sides. Directed search (pfld_cases.missing_cases): the mover is one of 2-3
    reporters of a group of 4-16 while the other groups report half or more, h at 0 or C_d with
    opposite values across groups. The rule scales by the *overall* rate r, but the smallest reporting
    group can be far below r min|D_G|: the group the mover leaves changes by up to C_d / 2.
    The stored case of tests/pfld is recomputed as extra evidence.

    ``uneven=False`` (the mutant): every group reports at the same rate r (r n_i reporters), where
    C_d / (r n_i) <= C_d / (r (min n - 1)) and the rule holds."""
    def check(budget: CheckBudget) -> Verdict:
        from dpfair_analysis.privacy.sensitivity import (
            exact_change,
            paper_dual_release,
            paper_dual_sensitivity,
            paper_missing_values_sensitivity,
        )
        from dpfair_analysis.verify.claims.pfld_cases import group_sizes, missing_cases

        def ratio(c):
            if c.reported is None or not bool(c.reported[c.index]) or not bool(c.new_reported[c.index]):
                return None
            rep = [group_sizes(c, g, r) for g, r in ((c.group, c.reported), (c.new_group, c.new_reported))]
            if min(rep[0].min(), rep[1].min()) < 1:
                return None
            if not uneven:  # the setting of the mutant: every group reports at the overall rate on D
                rates = rep[0] / np.maximum(group_sizes(c, c.group), 1)
                if np.ptp(rates) > 1e-12:
                    return None
            r = float(c.reported.double().mean())
            claimed = max(paper_missing_values_sensitivity(paper_dual_sensitivity(group_sizes(c, g), clip=c.clip), r)
                          for g in (c.group, c.new_group))
            if not math.isfinite(claimed):
                return None
            change = exact_change(paper_dual_release, group=c.group, neighbour_group=c.new_group,
                                  reported=c.reported, neighbour_reported=c.new_reported, h=c.h, y=c.y,
                                  constraint=c.constraint, clip=c.clip)
            return change / claimed

        found, worst, tried = search(missing_cases(uneven=uneven), ratio, examples=budget.examples)
        domain = "reporting rates uneven across groups, the mover one of 2-3 reporters" if uneven else \
            "every group reporting at the same rate r"
        effort = f"{tried} pairs with missing values ({domain})"
        stored = ratio(_stored_missing_case())
        if found is None:
            return holds(f"max change/(Δ_d/r) = {worst:.4f}", effort=effort, worst_ratio=worst,
                         stored_case_ratio=stored)
        rep = group_sizes(found, found.group, found.reported)
        ce = {**case_record(found), "full_group_sizes": group_sizes(found, found.group).tolist(),
              "reporting": rep.tolist(), "r": float(found.reported.double().mean()), "found_by_search": True}
        if stored is not None:
            ce["stored_case"] = {"full_group_sizes": [10, 10], "reporting": [2, 8], "r": 0.5, "C_d": 1.0,
                                 "change": math.hypot(0.5, 1 / 9), "claimed": math.sqrt(2) / 8 / 0.5, "ratio": stored}
        return violated(f"dual release moves ×{worst:.3g} Δ_d/r (search, shrunk)"
                        + (f"; stored case ×{stored:.3g}" if stored is not None else ""),
                        counterexample=ce, ratio=worst, effort=effort)
    return check


_MISSING_QUOTE = ("The paper considers the case where only a fraction r ≤ 1 of the training samples presents the "
                  "sensitive attribute A. To operate under this scenario, it is sufficient to modify the sensitivity Δ_p "
                  "of the gradients of the constraint violations (Equation (7)) and the sensitivity Δ_d of the "
                  "constraint violations (Equation (11)) to, respectively, Δ'_p = Δ_p/r and Δ'_d = Δ_d/r. The argument "
                  "follows from the observation that reducing the number of training samples having sensitive data "
                  "also reduces the components min_{i∈I} |B_{G_i}| (Equation (7)) and min_{i∈I} |D_{G_i}| (Equation "
                  "(11)) by a factor of r.")
register("003.sec7.missing", location="§7", quote=_MISSING_QUOTE,
         statement="with a fraction r reporting A: Δ'_d = Δ_d/r bounds the dual release's change",
         regime="Δ from the full group sizes; reporting may differ across groups (the paper's 'a practical scenario "
                "may involve ... a choice'); h ∈ [0, C_d], where Theorem 2 itself holds", method="directed "
                "hypothesis search (pfld_cases.missing_cases): the mover one of 2-3 reporters of a group of "
                "4-16 while the other groups report half or more; the stored case of tests/pfld beside it",
         check=_pfld_missing_rule(), mutant=_pfld_missing_rule(uneven=False),
         corrected="a sensitivity from the reporters' own group sizes on both sides (the smallest reporting group, "
                   "not r × the smallest group), or the toolkit's sum release with public denominators "
                   "(003.thm2.sum-release), which handles missing values")


def _missing_noise(*, rates: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)) -> Check:
    """§7: 'on the other, it also require smaller amounts of noise to guarantee the same level of privacy' --
    the noise the rule prescribes, sigma Delta' with Delta' = Delta / r (privacy.sensitivity
    .paper_missing_values_sensitivity), against sigma Delta at full reporting, for the reported fractions
    ``rates`` (the paper's experiments: 60%, 40%, 20% and no missing values). The rule's own Delta' is
    1/r times larger: more noise, not less. ``rates=(1.0,)`` (the mutant): nothing missing, equal noise."""
    def check(budget: CheckBudget) -> Verdict:
        from dpfair_analysis.privacy.sensitivity import paper_dual_sensitivity, paper_missing_values_sensitivity

        delta = paper_dual_sensitivity([500, 4000], clip=5.0)  # Bank-like groups, the paper's C_d = 5
        table = {f"{r:g}": paper_missing_values_sensitivity(delta, r) / delta for r in rates}
        worst = max(table.values())
        effort = f"{len(rates)} reported fractions r; noise σ Δ'(r) / σ Δ"
        if worst > 1 + 1e-12:
            r = min(rates)
            return violated(f"with r = {r:g} the rule's noise is ×{worst:.3g} the full-data noise (Δ' = Δ/r ≥ Δ): "
                            "more noise, not less", counterexample={"r": r, "noise_ratio": worst, "table": table},
                            ratio=worst, effort=effort)
        return holds(f"noise ratio ≤ {worst:.3g} for every r", effort=effort, worst_ratio=worst, table=table)
    return check


register("003.sec7.less-noise", location="§7", quote=_MISSING_QUOTE + " Consequentially, while on one side, "
         "using less information may affect the model ability to satisfy the fairness constraint, on the other, it "
         "also require smaller amounts of noise to guarantee the same level of privacy.",
         statement="with a fraction r < 1 reporting A, the same privacy needs less noise (σΔ' ≤ σΔ)",
         regime="the section's own rule Δ' = Δ/r; r ∈ {0.2, 0.4, 0.6, 0.8, 1} (§8.5's experiments)",
         method="the noise std the rule prescribes, σΔ/r, against σΔ at full reporting",
         check=_missing_noise(), mutant=_missing_noise(rates=(1.0,)),
         corrected="the rule needs 1/r times more noise (Δ' = Δ/r); fewer reporters can still mean less noise in "
                   "absolute terms only if Δ is recomputed on the reporters' sizes, which 003.sec7.missing shows unsafe")


# =============================================================================== §4.2 the Gaussian mechanism
_GAUSS_QUOTE = ("In particular, the Gaussian mechanism, defined by M(D) = f(D) + N(0, Δ_f²σ²), where N(0, Δ_f σ²) is the "
                "Gaussian distribution with 0 mean and standard deviation Δ_f σ², satisfies (ε, δ)-DP for δ > (4/5) "
                "exp(−(σε)²/2) and ε < 1 [14].")
_GAUSS_METHOD = ("the exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018) against the stated δ, searched by "
                 "hypothesis over ε < 1, σ (and Δ) plus a 1000-point grid; the printed and the fixed form")
_PRINTED_CHECK, _PRINTED_MUTANT = printed_gaussian_checks(
    fix="4/5 → 5/4 (Dwork & Roth 2014, Thm A.1, the cited [14]: c² > 2 ln(1.25/δ))")
register("003.sec4.2.gaussian", location="§4.2, after Definition 1", quote=_GAUSS_QUOTE,
         statement="f(D) + N(0, Δ²σ²) is (ε, δ)-DP for δ > (4/5) exp(−(σε)²/2) and ε < 1",
         regime="ℓ2 sensitivity Δ_f, one release; the noise's variance Δ_f²σ² (its printed 'standard deviation' is "
                "003.sec4.2.gaussian.std)", method=_GAUSS_METHOD,
         check=_PRINTED_CHECK, mutant=_PRINTED_MUTANT,
         fix="4/5 → 5/4 (Dwork & Roth 2014, Thm A.1)")
register("003.sec4.2.gaussian.dwork-roth", kind="corrected", corrects="003.sec4.2.gaussian",
         location="§4.2 with the constant of the cited source (Dwork & Roth 2014, Thm A.1)", quote=_GAUSS_QUOTE,
         statement="f(D) + N(0, Δ²σ²) is (ε, δ)-DP for δ > (5/4) exp(−(σε)²/2) and ε < 1",
         regime="as 003.sec4.2.gaussian", method=_GAUSS_METHOD, check=DWORK_ROTH,
         mutant=gaussian_delta_condition(0.8))
register("003.sec4.2.gaussian.std", location="§4.2, after Definition 1", quote=_GAUSS_QUOTE,
         statement="noise of standard deviation Δ_f σ² gives (ε, δ)-DP for δ > (5/4) exp(−(σε)²/2), ε < 1",
         regime="the δ condition corrected (5/4) to isolate the printed 'N(0, Δ_f σ²) ... standard deviation Δ_f σ²'",
         method=_GAUSS_METHOD,
         check=misprint_check(gaussian_delta_condition(1.25, std="delta*sigma^2"), DWORK_ROTH,
                              fix="'standard deviation Δ_f σ²' → Δ_f σ (variance Δ_f²σ², as M(D) = f(D) + N(0, Δ_f²σ²) "
                                  "says)"),
         mutant=misprint_check(gaussian_delta_condition(0.8, std="delta*sigma^2"), gaussian_delta_condition(0.8),
                               fix="none"),
         fix="'standard deviation Δ_f σ²' → Δ_f σ (harmless: the condition forces σ > 0.67, where σ² noise still "
             "suffices)")
