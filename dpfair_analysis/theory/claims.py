"""The claims registry: every checkable statement of the five papers, each with a check that runs.

Papers (``/work/shared/papers``): ``000`` DPSGD-F (Xu, Du & Wu, KDD'21), ``004`` its long
version, ``001`` the fairness lens on DP (Tran, Dinh & Fioretto, NeurIPS'21), ``003`` PF-LD
(Tran, Fioretto & Van Hentenryck, AAAI'21), ``002`` a fragment of FairDP.

Each :class:`Claim` has an id (``"001.thm1"``), the paper, where the statement is, the
statement in symbols, its assumptions, and ``check(budget)`` returning a :class:`Verdict`:

* ``holds`` -- a search / Monte-Carlo / exact comparison found nothing against it;
  ``effort`` says how much was tried and ``worst_ratio`` is the largest
  (observed / claimed bound) seen (<= 1 means within the claim);
* ``violated`` -- ``counterexample`` (shrunk where a search found it) and ``ratio``, the
  factor by which it breaks the claim;
* ``inconclusive`` -- ``reason``.

Checks run the toolkit's own code (``theory.*``, ``privacy.*``, ``training.*``) and
searches over the objects a claim quantifies over; they do not restate verdicts. When a
claim is violated and a corrected statement exists, the corrected claim is registered too
(its ``corrects`` names the original). Budgets: :data:`QUICK` (whole registry in about a
minute on one core; what the default tests run) and :data:`FULL` (larger searches and
Monte Carlo; ``dpfair verify --budget full``).

The PF-LD sensitivity checks search with the strategies and excess functions of
:mod:`dpfair_analysis.privacy.sensitivity_search` (shared with ``tests/pfld``).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd
import torch
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable
from tqdm import tqdm

__all__ = ["Budget", "QUICK", "FULL", "BUDGETS", "Verdict", "Claim", "CLAIMS", "PAPERS", "get_claim",
           "claims_for", "run_claims", "verdict_table"]

PAPERS = {"000": "000_c5c1f9a3ea01bc79.txt", "001": "001_b43f969615163a73.txt", "002": "002_b95dfc7e3fcccdb9.txt",
          "003": "003_20423108024a63a0.txt", "004": "004_0c6bcca12c3fda87.txt"}
STATUSES = ("holds", "violated", "inconclusive")


# =============================================================================== core types
@dataclass(frozen=True)
class Budget:
    """How hard the checks try: hypothesis examples per search, Monte-Carlo draws, random trials."""

    name: str
    examples: int
    draws: int
    trials: int


QUICK = Budget("quick", examples=120, draws=400, trials=300)
FULL = Budget("full", examples=2000, draws=6000, trials=20_000)
BUDGETS = {"quick": QUICK, "full": FULL}


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check (see the module docstring)."""

    status: str
    key: str
    effort: str = ""
    worst_ratio: float | None = None
    counterexample: dict[str, Any] | None = None
    ratio: float | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def evidence(self) -> dict[str, Any]:
        """JSON-ready evidence (no status)."""
        out = {k: v for k, v in asdict(self).items() if k != "status" and v not in (None, "", {})}
        return _jsonable(out)


def holds(key: str, *, effort: str, worst_ratio: float | None, **details: Any) -> Verdict:
    return Verdict("holds", key, effort=effort, worst_ratio=_f(worst_ratio), details=details)


def violated(key: str, *, counterexample: dict[str, Any], ratio: float, effort: str = "", **details: Any) -> Verdict:
    return Verdict("violated", key, effort=effort, counterexample=counterexample, ratio=_f(ratio), details=details)


def inconclusive(key: str, *, reason: str, **details: Any) -> Verdict:
    return Verdict("inconclusive", key, reason=reason, details=details)


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a paper."""

    id: str
    paper: str
    location: str
    statement: str
    assumptions: str
    check: Callable[[Budget], Verdict]
    corrects: str | None = None

    @property
    def paper_file(self) -> str:
        return PAPERS[self.paper]


def _f(x: float | None) -> float | None:
    return None if x is None else float(x)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return _jsonable(value.tolist())
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


# =============================================================================== search helpers
def _settings(examples: int, *, shrink: bool = True) -> settings:
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None, phases=phases,
                    suppress_health_check=list(HealthCheck))


def search(strategy: st.SearchStrategy, ratio: Callable[[Any], float | None], *, examples: int,
           tol: float = 1e-9, shrink: bool = True) -> tuple[Any | None, float, int]:
    """Hypothesis search for an example with ratio(x) > 1 + tol (shrunk if found).

    Returns (example or None, worst ratio seen -- the example's own if found --, examples tried).
    ``ratio`` returns None for examples outside the claim's assumptions.
    """
    state = {"worst": -math.inf, "tried": 0}

    def condition(x: Any) -> bool:
        r = ratio(x)
        state["tried"] += 1
        if r is None or not math.isfinite(r) and r < 0:
            return False
        if not math.isfinite(r):
            return True
        state["worst"] = max(state["worst"], r)
        return r > 1 + tol

    try:
        found = find(strategy, condition, settings=_settings(examples, shrink=shrink))
    except (NoSuchExample, Unsatisfiable):
        return None, state["worst"], state["tried"]
    return found, float(ratio(found)), state["tried"]


# =========================================================================================
# Papers 000 / 004: DPSGD-F
# =========================================================================================
def _gaussian_mechanism_classic(budget: Budget) -> Verdict:
    """Dwork-Roth: eps in (0, 1], c^2 > 2 log(1.25/delta), sigma > c Delta / eps => (eps, delta)-DP.

    Exact delta of the Gaussian mechanism (Balle & Wang, ``gaussian_delta``) at the boundary
    sigma = c Delta / eps, c = sqrt(2 log(1.25/delta)), searched over (eps, delta)."""
    from dpfair_analysis.privacy.output_perturbation import gaussian_delta

    def ratio(x):
        eps, log10_delta = x
        delta = 10.0 ** log10_delta
        sigma = math.sqrt(2 * math.log(1.25 / delta)) / eps
        return gaussian_delta(sigma, eps, 1.0) / delta

    strategy = st.tuples(st.floats(1e-3, 1.0), st.floats(-12.0, math.log10(0.5)))
    found, worst, tried = search(strategy, ratio, examples=budget.examples)
    # the hypothesis matters: just above eps = 1 the same calibration fails
    beyond = max(ratio((e, d)) for e in (2.0, 5.0, 10.0) for d in (-5.0, -2.0))
    if found is not None:
        return violated(f"exact δ / δ = {worst:.3g}", counterexample={"epsilon": found[0], "delta": 10 ** found[1]},
                        ratio=worst, effort=f"{tried} (ε, δ) pairs")
    return holds(f"max exact δ / δ = {worst:.3g}", effort=f"{tried} (ε, δ) pairs, ε ∈ (0, 1], δ ∈ [1e-12, 0.5]",
                 worst_ratio=worst, ratio_outside_hypothesis_eps_gt_1=beyond)


def _laplace_abs_mean(shift: float, scale: float) -> float:
    """E|a + L| for L ~ Laplace(0, scale): |a| + scale exp(-|a|/scale) (first principles)."""
    a = abs(shift)
    return a + scale * math.exp(-a / scale) if scale > 0 else a


def _eq1_upper(budget: Budget) -> Verdict:
    """Eq. (1) upper bound V + B by Monte Carlo (bounds.monte_carlo_group_error) on signed vectors."""
    from dpfair_analysis.theory.bounds import bias_variance_bound, expected_gaussian_norm, monte_carlo_group_error

    def ratio(x):
        rows, clip, scale, noise = x
        grads = torch.tensor(rows, dtype=torch.float64)
        b, d = grads.shape
        if noise == "laplace":
            grads = grads[:, :1]
            expected = scale  # E|Lap(scale)| (scalar)
        else:
            expected = expected_gaussian_norm(scale, d)
        mc = monte_carlo_group_error(grads, clip, noise=noise, noise_scale=scale, draws=budget.draws,
                                     generator=torch.Generator().manual_seed(0))
        bound = bias_variance_bound(grads.norm(dim=1), clip, expected_noise_norm=expected)["upper"]
        return (mc["mean"] - 4 * mc["stderr"]) / bound if bound > 0 else None

    strategy = st.tuples(
        st.integers(1, 3).flatmap(lambda d: st.lists(st.lists(st.floats(-50, 50), min_size=d, max_size=d),
                                                      min_size=1, max_size=5)),
        st.sampled_from([0.1, 1.0, 5.0]), st.sampled_from([1e-3, 0.1, 1.0, 10.0]),
        st.sampled_from(["laplace", "gaussian"]))
    found, worst, tried = search(strategy, ratio, examples=budget.examples // 2, shrink=False)
    if found is not None:
        return violated(f"MC lower CI / bound = {worst:.3g}", counterexample={"grads": found[0], "C": found[1]},
                        ratio=worst, effort=f"{tried} batches")
    return holds(f"max (MC mean − 4se) / (V + B) = {worst:.3f}",
                 effort=f"{tried} signed batches (b ≤ 5, d ≤ 3), Laplace and Gaussian noise, "
                        f"{budget.draws} draws each", worst_ratio=worst)


def _eq1_lower_half(*, nonnegative: bool) -> Callable[[Budget], Verdict]:
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.theory.bounds import bias_variance_bound, monte_carlo_group_error

        def parts(x):
            values, clip, eps = x
            g = torch.tensor(values, dtype=torch.float64)
            clipped = g.clamp(-clip, clip)
            shift = float(clipped.mean() - g.mean())
            b = len(values)
            exact = _laplace_abs_mean(shift, clip / eps / b)
            half = bias_variance_bound(g.abs(), clip, expected_noise_norm=clip / eps)["lower_half"]
            return exact, half

        def ratio(x):
            exact, half = parts(x)
            return half / exact if exact > 0 else None

        low = 0 if nonnegative else -20
        strategy = st.tuples(st.lists(st.integers(low, 20).map(float), min_size=1, max_size=4),
                             st.sampled_from([1.0, 2.0, 0.5]), st.sampled_from([1.0, 10.0, 100.0]))
        found, worst, tried = search(strategy, ratio, examples=budget.examples * 3)
        effort = f"{tried} scalar batches ({'non-negative' if nonnegative else 'signed'} g, b ≤ 4), exact E|error|"
        if found is None:
            return holds(f"max lower/E|err| = {worst:.3f}", effort=effort, worst_ratio=worst)
        values, clip, eps = found
        mc = monte_carlo_group_error(torch.tensor(values, dtype=torch.float64)[:, None], clip, noise="laplace",
                                     noise_scale=clip / eps, draws=max(budget.draws, 2000),
                                     generator=torch.Generator().manual_seed(1))
        exact, half = parts(found)
        return violated(f"(V+B)/2 = {half:.3g} > E|err| = {exact:.3g} (×{half / exact:.3g})",
                        counterexample={"g": values, "C": clip, "epsilon": eps, "laplace_scale": clip / eps,
                                        "exact_error": exact, "claimed_lower": half,
                                        "monte_carlo_error": mc["mean"], "monte_carlo_stderr": mc["stderr"]},
                        ratio=half / exact, effort=effort)
    return check


def _optimal_clip(*, rule: str) -> Callable[[Budget], Verdict]:
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.theory.bounds import bound_curve, bound_minimising_clip, quantile_rule_clip

        def value(norms: torch.Tensor, clip: float, eps: float) -> float:
            return float(bound_curve(norms, np.array([clip]), noise_per_unit_clip=1 / eps)["upper"].iloc[0])

        def ratio(x):
            values, eps = x
            norms = torch.tensor(values, dtype=torch.float64)
            candidates = [0.0, *values]
            best = min(value(norms, c, eps) for c in candidates)
            clip = (bound_minimising_clip(norms, noise_per_unit_clip=1 / eps) if rule == "rank"
                    else quantile_rule_clip(norms, epsilon=eps))
            return value(norms, clip, eps) / best if best > 0 else None

        strategy = st.tuples(st.lists(st.integers(1, 30).map(float), min_size=1, max_size=8),
                             st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.7, 1.0, 2.0]))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        effort = f"{tried} (norms, ε) with b ≤ 8 (a batch or one group k with b^k rows)"
        if found is None:
            return holds(f"max bound(rule)/min bound = {worst:.4f}", effort=effort, worst_ratio=worst)
        values, eps = found
        norms = torch.tensor(values, dtype=torch.float64)
        return violated(f"quantile rule's bound ×{worst:.3g} the minimum",
                        counterexample={"norms": values, "epsilon": eps, "b": len(values),
                                        "quantile_rule_C": quantile_rule_clip(norms, epsilon=eps),
                                        "minimiser_C": bound_minimising_clip(norms, noise_per_unit_clip=1 / eps)},
                        ratio=worst, effort=effort)
    return check


def _dpsgdf_count_sensitivity(budget: Budget) -> Verdict:
    """The released count vector (m^k, o^k)_k moves by <= 1 under add/remove (DPSGDF.decide)."""
    from dpfair_analysis.training.dpsgdf import DPSGDF

    def released(rows, k, clip):
        policy = DPSGDF(clip, 1.0, count_noise=1e-300)
        group = torch.tensor([g for g, _ in rows], dtype=torch.long)
        norms = torch.tensor([n for _, n in rows], dtype=torch.float64)
        rec = policy.decide(norms, group, n_groups=k, expected_batch_size=8, generator=torch.Generator()).record
        return torch.tensor([rec[f"m[{j}]"] for j in range(k)] + [rec[f"o[{j}]"] for j in range(k)])

    worst_replace = [0.0]

    def ratio(x):
        k, clip, rows, extra, replace_index = x
        rows = [(g % k, n) for g, n in rows]
        extra = (extra[0] % k, extra[1])
        added = float((released(rows + [extra], k, clip) - released(rows, k, clip)).norm())
        if rows:
            swapped = list(rows)
            swapped[replace_index % len(rows)] = extra
            worst_replace[0] = max(worst_replace[0], float((released(swapped, k, clip) - released(rows, k, clip)).norm()))
        return added / 1.0

    norm = st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-9, 3.0, 1e6])
    strategy = st.tuples(st.integers(1, 4), st.sampled_from([1.0]),
                         st.lists(st.tuples(st.integers(0, 3), norm), max_size=10),
                         st.tuples(st.integers(0, 3), norm), st.integers(0, 9))
    found, worst, tried = search(strategy, ratio, examples=budget.examples)
    if found is not None:
        return violated(f"count change {worst:.3g} > 1", counterexample={"case": found}, ratio=worst)
    return holds(f"max add/remove change = {worst:.3g} (replace-one: {worst_replace[0]:.3g} = √2)",
                 effort=f"{tried} batches (K ≤ 4, b ≤ 10) and added records, DPSGDF.decide's released counts",
                 worst_ratio=worst, replace_one_distance=worst_replace[0])


def _dpsgdf_sum_sensitivity(budget: Budget) -> Verdict:
    """Given the released counts, one record moves the clipped sum by <= max_k C^k (add/remove)."""
    from dpfair_analysis.gradients import clipped_sum
    from dpfair_analysis.training.dpsgdf import dpsgdf_group_bounds

    def ratio(x):
        k, d, scales, groups, m, o, base, seed = x
        n = min(len(scales), len(groups))
        if n < 1:
            return None
        g = torch.Generator().manual_seed(seed)
        grads = torch.randn(n, d, generator=g, dtype=torch.float64) * torch.tensor(scales[:n])[:, None]
        group = torch.tensor(groups[:n]) % k
        bounds, _ = dpsgdf_group_bounds(torch.tensor(m[:k], dtype=torch.float64),
                                        torch.tensor(o[:k], dtype=torch.float64), base_clip=base,
                                        expected_batch_size=16, max_ratio=10.0)
        full = clipped_sum({"w": grads}, bounds[group])["w"]
        without = clipped_sum({"w": grads[:-1]}, bounds[group[:-1]])["w"]
        return float((full - without).norm()) / float(bounds.max())

    counts = st.lists(st.floats(-5, 40), min_size=4, max_size=4)
    strategy = st.tuples(st.integers(1, 4), st.integers(1, 4),
                         st.lists(st.sampled_from([0.0, 1e-3, 1.0, 1e4]), min_size=1, max_size=10),
                         st.lists(st.integers(0, 3), min_size=1, max_size=10), counts, counts,
                         st.sampled_from([1e-3, 0.5, 10.0]), st.integers(0, 2 ** 16))
    found, worst, tried = search(strategy, ratio, examples=budget.examples)
    if found is not None:
        return violated(f"sum change / max C^k = {worst:.3g}", counterexample={"case": found}, ratio=worst)
    return holds(f"max change / max_k C^k = {worst:.4f}",
                 effort=f"{tried} batches with noisy counts (incl. negative), any group of the removed record",
                 worst_ratio=worst)


# The papers' settings (as tests/privacy/test_accounting.py): name, training n, sigma, epochs, printed eps, tol.
EPSILON_SETTINGS_000 = [("unbalanced MNIST", 54_649, 0.8, 60, 6.55, 0.01), ("Adult", int(0.8 * 45_222), 1.0, 20, 3.1, 0.05),
                        ("Dutch", int(0.8 * 60_420), 1.0, 20, 2.66, 0.01)]
EPSILON_SETTINGS_004 = [("balanced MNIST", 60_000, 0.8, 60, 6.23, 0.015),
                        ("balanced Adult", int(0.8 * 28_000), 1.0, 20, 3.99, 0.01),
                        ("unbalanced Dutch", int(0.8 * 40_000), 1.0, 20, 3.29, 0.01)]


def _published_epsilons(rows) -> Callable[[Budget], Verdict]:
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.privacy.accounting import dpsgd_epsilon

        table, worst = [], 0.0
        for name, n, sigma, epochs, printed, tol in rows:
            eps = dpsgd_epsilon(n=n, batch_size=256, noise_multiplier=sigma, delta=1e-6, epochs=epochs,
                                conversion="classic")
            improved = dpsgd_epsilon(n=n, batch_size=256, noise_multiplier=sigma, delta=1e-6, epochs=epochs)
            table.append({"setting": name, "printed": printed, "classic": eps, "improved": improved, "tol": tol})
            worst = max(worst, abs(eps - printed) / tol)
        if worst > 1:
            bad = max(table, key=lambda r: abs(r["classic"] - r["printed"]) / r["tol"])
            return violated(f"{bad['setting']}: {bad['classic']:.3f} vs {bad['printed']}", counterexample=bad,
                            ratio=worst, table=table)
        return holds("; ".join(f"{r['setting']} {r['classic']:.3f} ({r['printed']})" for r in table),
                     effort=f"{len(table)} settings, RDP with the classic conversion (b = 256, δ = 1e-6)",
                     worst_ratio=worst, table=table)
    return check


def _count_release_budget(budget: Budget) -> Verdict:
    """000 §6.1.3: with sigma_1 = 10 sigma_2 'only about 0.01 budget is from sigma_1'.

    Valid accounting (both releases on one Poisson batch = one sampled Gaussian with the
    joint multiplier, privacy.mechanisms.joint_noise_multiplier) vs the DP-SGD-only epsilon;
    the separate composition of two independently sampled mechanisms is shown beside."""
    from dpfair_analysis.privacy.accounting import (compose_events, dpsgd_epsilon, epsilon_from_event,
                                                    poisson_gaussian_event, steps_for_epochs)
    from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier

    table = []
    for name, n, sigma, epochs, printed, _ in EPSILON_SETTINGS_000:
        q, steps = 256 / n, steps_for_epochs(n, 256, epochs)
        base = dpsgd_epsilon(n=n, batch_size=256, noise_multiplier=sigma, delta=1e-6, epochs=epochs,
                             conversion="classic")
        joint = dpsgd_epsilon(n=n, batch_size=256, noise_multiplier=joint_noise_multiplier([10 * sigma, sigma]),
                              delta=1e-6, epochs=epochs, conversion="classic")
        separate = epsilon_from_event(compose_events([poisson_gaussian_event(q, sigma, steps=steps),
                                                      poisson_gaussian_event(q, 10 * sigma, steps=steps)]),
                                      1e-6, conversion="classic")
        table.append({"setting": name, "dpsgd": base, "joint": joint, "separate": separate,
                      "count_cost_joint": joint - base, "count_cost_separate": separate - base})
    worst = max(table, key=lambda r: r["count_cost_joint"])
    ratio = worst["count_cost_joint"] / 0.01
    if ratio > 2:
        return violated(f"{worst['setting']}: counts cost {worst['count_cost_joint']:.3f} "
                        f"(separate composition: {worst['count_cost_separate']:.3f})",
                        counterexample=worst, ratio=ratio, table=table)
    return holds(f"max count cost {worst['count_cost_joint']:.3f}", effort="3 settings", worst_ratio=ratio, table=table)


def _group_privacy(*, count_multiplier: float) -> Callable[[Budget], Verdict]:
    """000 §5.2/§5.3: group k gets (rho_k eps, delta)-DP, rho_k = C^k / max C^k (or theta^k / max theta).

    A record of group k contributes 1 to the count release (multiplier sigma_1, unchanged)
    and <= rho C to the sum (multiplier sigma_2 / rho): its epsilon is that of one sampled
    Gaussian with joint multiplier (sigma_1^-2 + (rho/sigma_2)^2)^(-1/2) per step (Adult
    schedule, classic conversion as the paper). Searched over rho in (0, 1]."""
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.privacy.accounting import dpsgd_epsilon
        from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier

        name, n, sigma, epochs, _, _ = EPSILON_SETTINGS_000[1]
        kw = dict(n=n, batch_size=256, delta=1e-6, epochs=epochs, conversion="classic")
        sigma_1 = count_multiplier * sigma
        eps = dpsgd_epsilon(noise_multiplier=joint_noise_multiplier([sigma_1, sigma]), **kw)

        def ratio(rho):
            eps_k = dpsgd_epsilon(noise_multiplier=joint_noise_multiplier([sigma_1, sigma / rho]), **kw)
            return eps_k / (rho * eps)

        grid = np.geomspace(1e-3, 1.0, 6 if budget.name == "quick" else 40)
        ratios = [(float(r), ratio(float(r))) for r in grid]
        worst_rho, worst = max(ratios, key=lambda t: t[1])
        if worst > 1:
            # shrink: the largest rho that still breaks the claim (bisection on the grid's bracket)
            lo = worst_rho
            hi = next((r for r, v in ratios if r > lo and v <= 1), 1.0)
            for _ in range(12 if budget.name == "quick" else 30):
                mid = math.sqrt(lo * hi)
                lo, hi = (mid, hi) if ratio(mid) > 1 else (lo, mid)
            return violated(f"ρ = {worst_rho:.3g}: ε_k = {worst * worst_rho * eps:.3g} > ρε = {worst_rho * eps:.3g}",
                            counterexample={"setting": name, "rho": worst_rho, "epsilon": eps,
                                            "epsilon_group": worst * worst_rho * eps,
                                            "claim_fails_below_rho": lo, "sigma_1": sigma_1, "sigma_2": sigma},
                            ratio=worst, effort=f"{len(grid)} values of ρ + bisection", grid=ratios)
        return holds(f"max ε_k/(ρε) = {worst:.3f}", effort=f"{len(grid)} values of ρ", worst_ratio=worst, grid=ratios)
    return check


def _moments_composition(budget: Budget) -> Verdict:
    """004 Thm 1: alpha_M(lambda) <= sum_i alpha_Mi(lambda). dp_accounting's RDP of a composed run
    against the sum of its parts, and the joint Gaussian (same batch) against the sum."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier

    orders = np.array([1.5, 2, 4, 8, 16, 32, 64])
    rng = np.random.default_rng(0)
    worst = 0.0
    n_cases = 20 if budget.name == "quick" else 300
    for _ in range(n_cases):
        q1, q2 = rng.uniform(0.001, 1, size=2)
        s1, s2 = rng.uniform(0.3, 5, size=2)
        parts = [dp_event.PoissonSampledDpEvent(q1, dp_event.GaussianDpEvent(s1)),
                 dp_event.PoissonSampledDpEvent(q2, dp_event.GaussianDpEvent(s2))]
        separate = []
        for e in parts:
            acct = rdp.RdpAccountant(orders)
            acct.compose(e)
            separate.append(np.array(acct._rdp))
        acct = rdp.RdpAccountant(orders)
        acct.compose(dp_event.ComposedDpEvent(parts))
        composed = np.array(acct._rdp)
        total = separate[0] + separate[1]
        with np.errstate(invalid="ignore", divide="ignore"):
            worst = max(worst, float(np.nanmax(np.where(total > 0, composed / np.where(total > 0, total, 1), 0))))
        joint = dp_event.GaussianDpEvent(joint_noise_multiplier([s1, s2]))  # both releases on one input
        acct = rdp.RdpAccountant(orders)
        acct.compose(joint)
        g1, g2 = (rdp.RdpAccountant(orders) for _ in range(2))
        g1.compose(dp_event.GaussianDpEvent(s1))
        g2.compose(dp_event.GaussianDpEvent(s2))
        worst = max(worst, float(np.max(np.array(acct._rdp) / (np.array(g1._rdp) + np.array(g2._rdp)))))
    return holds(f"max composed / Σ parts = {worst:.6f}", effort=f"{n_cases} random pairs × {len(orders)} orders",
                 worst_ratio=worst)


# =========================================================================================
# Paper 001: fairness lens (output perturbation, DP-SGD decomposition, conditions)
# =========================================================================================
def _gaussian_delta_condition(factor: float) -> Callable[[Budget], Verdict]:
    """'N(0, Delta^2 sigma^2) is (eps, delta)-DP for delta > factor exp(-(sigma eps)^2/2) and eps < 1'
    against the exact delta(eps) of the Gaussian mechanism (``gaussian_delta``)."""
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.privacy.output_perturbation import gaussian_delta

        def ratio(x):
            eps, sigma = x
            claim = factor * math.exp(-(sigma * eps) ** 2 / 2)
            if claim >= 1 or claim < 1e-300:
                return None
            return gaussian_delta(sigma, eps, 1.0) / claim

        strategy = st.tuples(st.floats(1e-3, 0.999), st.floats(0.05, 200.0))
        found, worst, tried = search(strategy, ratio, examples=budget.examples)
        grid = [ratio((e, s)) for e in np.linspace(0.01, 0.999, 25) for s in np.geomspace(0.05, 200, 40)]
        grid_worst = max(r for r in grid if r is not None)
        effort = f"{tried} hypothesis (ε, σ) + 1000-point grid, ε < 1"
        if found is not None or grid_worst > 1 + 1e-9:
            eps, sigma = found if found is not None else (None, None)
            return violated(f"exact δ ×{max(worst, grid_worst):.3g} the stated δ",
                            counterexample={"epsilon": eps, "sigma": sigma}, ratio=max(worst, grid_worst), effort=effort)
        return holds(f"max exact δ / stated δ = {max(worst, grid_worst):.3g}", effort=effort,
                     worst_ratio=max(worst, grid_worst))
    return check


def _tiny_dataset(rows, labels, group=None):
    from dpfair_analysis.data.dataset import GroupedDataset

    X = torch.tensor(rows, dtype=torch.float64)
    group = torch.zeros(len(rows), dtype=torch.long) if group is None else torch.as_tensor(group)
    return GroupedDataset(X, torch.tensor(labels, dtype=torch.long), group, group_names=("a", "b"),
                          label_names=("0", "1"))


def _output_perturbation_sensitivity(*, lipschitz_factor: float) -> Callable[[Budget], Verdict]:
    """||theta*(D) - theta*(D')|| over replace-one pairs vs 2 L / (n lambda) (L = 1: paper; sqrt 2: proved)."""
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.models import build_model
        from dpfair_analysis.privacy.output_perturbation import train_regularised_erm

        def unit(v):
            v = np.asarray(v, dtype=float)
            n = np.linalg.norm(v)
            return (v / n if n > 1 else v).tolist()

        def ratio(x):
            rows, labels, new_row, new_label, l2 = x
            k = min(len(rows), len(labels))
            if k < 1:
                return None
            rows = [unit(r) for r in rows[:k]]
            labels = labels[:k]
            model = build_model("logreg", input_shape=(len(rows[0]),), n_classes=2, seed=0).double()
            a = train_regularised_erm(model, _tiny_dataset(rows, labels), l2=l2, gtol=1e-10)
            rows2, labels2 = [unit(new_row[:len(rows[0])] + [0.0] * (len(rows[0]) - len(new_row)))] + rows[1:], \
                [new_label] + labels[1:]
            b = train_regularised_erm(model, _tiny_dataset(rows2, labels2), l2=l2, gtol=1e-10)
            moved = float((a.theta - b.theta).norm()) + (a.grad_norm + b.grad_norm) / l2
            return moved / (2 * lipschitz_factor / (k * l2))

        coord = st.floats(-1, 1)
        strategy = st.tuples(st.integers(1, 2).flatmap(lambda d: st.lists(st.lists(coord, min_size=d, max_size=d),
                                                                            min_size=1, max_size=5)),
                             st.lists(st.integers(0, 1), min_size=5, max_size=5), st.lists(coord, min_size=2, max_size=2),
                             st.integers(0, 1), st.sampled_from([0.01, 0.1, 1.0, 10.0, 100.0]))
        found, worst, tried = search(strategy, ratio, examples=max(6, budget.examples // 20), shrink=False)
        # directed: one unit row whose label flips, strong regularisation (theta* -> 0, |sigmoid - y| -> 1/2)
        directed = max(ratio(([[1.0, 0.0]] + [[0.0, 0.0]] * (n - 1), [1] + [0] * 4, [1.0, 0.0], 0, l2))
                       for n in (1, 2) for l2 in (1.0, 1e4))
        worst = max(worst, directed)
        effort = f"{tried} random replace-one pairs (n ≤ 5, d ≤ 2, ||x|| ≤ 1) + 4 directed label flips"
        if found is not None or worst > 1 + 1e-6:
            return violated(f"moved ×{worst:.3g} the bound", counterexample={"case": found}, ratio=worst, effort=effort)
        return holds(f"max ||Δθ*|| nλ/(2L) = {worst:.3f}", effort=effort, worst_ratio=worst,
                     note="a search, not a proof" if lipschitz_factor == 1 else "proved (Chaudhuri et al. Cor. 8, "
                          "L = sqrt(||x||^2 + 1)); the search agrees")
    return check


def _op_data(n: int = 3000, seed: int = 0):
    """Two groups, features in the unit ball; group b (30%) has larger norms and a noisier label."""
    from dpfair_analysis.data.dataset import GroupedDataset

    g = torch.Generator().manual_seed(seed)
    group = (torch.rand(n, generator=g) < 0.3).long()
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    X = X / X.norm(dim=1, keepdim=True) * torch.where(group == 1, 0.999, 0.4)[:, None]
    y = ((X @ torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64) + 0.3 * torch.randn(n, generator=g,
                                                                                      dtype=torch.float64)) > 0).long()
    return GroupedDataset(X, y, group, group_names=("a", "b"), label_names=("0", "1"))


def _theorem1(*, printed: bool) -> Callable[[Budget], Verdict]:
    """Excess risk of output perturbation (Monte Carlo, antithetic) vs (1/2) s^2 Tr(H_a), H_a of the group
    SUM (printed) or MEAN (corrected) -- theory.excess_risk.output_perturbation_excess_risk."""
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.models import build_model
        from dpfair_analysis.theory.excess_risk import output_perturbation_excess_risk

        data = _op_data()
        model = build_model("logreg", input_shape=(3,), n_classes=2, seed=0).double()
        table = output_perturbation_excess_risk(model, data, epsilons=[2.0], delta=1e-5, l2=0.02,
                                                draws=max(100, budget.draws // 2), seed=0, progress=False)
        rows = table[table.group != "all"]
        if printed:
            ratios = (rows.predicted_risk_sum_hessian / rows.ci_high).to_numpy()
            r = float(ratios.min())
            if r > 1:
                worst = rows.iloc[int(np.argmin(ratios))]
                return violated(f"printed/measured ≥ {r:.3g} (|D_a| = {int(worst.n)})",
                                counterexample={"group": worst.group, "n_a": int(worst.n),
                                                "measured_risk": float(worst.excess_risk),
                                                "ci_high": float(worst.ci_high),
                                                "predicted_sum_hessian": float(worst.predicted_risk_sum_hessian),
                                                "predicted_mean_hessian": float(worst.predicted_risk)},
                                ratio=r, effort=f"{max(100, budget.draws // 2)} antithetic draw pairs, n = {len(data)}")
            return holds(f"min printed/measured = {r:.3g}", effort="output perturbation MC", worst_ratio=r)
        z = ((rows.excess_risk - rows.predicted_risk).abs() / rows.stderr).to_numpy()
        rel = rows.relative_error.to_numpy()
        gap_rel = (rows.gap.abs() - rows.predicted_gap).abs() / rows.predicted_gap
        ok = bool(((z < 4) | (rel < 0.1)).all())
        key = f"max rel. error {rel.max():.3f} (z ≤ {z.max():.2g}); gap rel. error ≤ {gap_rel.max():.3f}"
        if ok:
            return holds(key, effort=f"{max(100, budget.draws // 2)} antithetic pairs, n = {len(data)}, ε = 2",
                         worst_ratio=float(1 + rel.max()), table=rows[["group", "n", "excess_risk", "stderr",
                                                                        "predicted_risk", "gap", "predicted_gap"]]
                         .to_dict("records"))
        return violated(key, counterexample={"rows": rows.to_dict("records")}, ratio=float(1 + rel.max()))
    return check


def _quadratic_step_data():
    from dpfair_analysis.data.dataset import GroupedDataset

    g = torch.Generator().manual_seed(0)
    n = 200
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    group = (torch.rand(n, generator=g) < 0.3).long()
    X[group == 1] *= 3.0
    y = (X @ torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64) + torch.randn(n, generator=g,
                                                                               dtype=torch.float64) > 0).long()
    return GroupedDataset(X, y, group, group_names=("a", "b"), label_names=("0", "1"))


def _theorem2(*, printed: bool) -> Callable[[Budget], Verdict]:
    """One DP-SGD step on a quadratic loss (exact expansion): decomposition.one_step_decomposition vs
    simulate_one_step (Monte Carlo over Poisson batches and noise), b = 20, C = 1, sigma = 1."""
    def check(budget: Budget) -> Verdict:
        from torch import nn

        from dpfair_analysis.theory.decomposition import (StepMoments, compare_with_simulation,
                                                          one_step_decomposition, simulate_one_step, squared_error)

        torch.manual_seed(0)
        model = nn.Linear(3, 1).double()
        data = _quadratic_step_data()
        kw = dict(lr=0.3, noise_multiplier=1.0, batch_size=20)
        draws = max(2000, budget.draws)
        predicted = one_step_decomposition(StepMoments(model, data, clip_bound=1.0, loss_fn=squared_error), **kw)
        measured = simulate_one_step(model, data, clip_bound=1.0, draws=draws,
                                     generator=torch.Generator().manual_seed(1), loss_fn=squared_error, **kw)
        table = compare_with_simulation(predicted, measured)
        effort = f"{draws} Monte-Carlo steps, n = 200, b = 20, quadratic loss"
        if printed:
            ratio = float((table.noise_printed / table.noise_meas).min())
            return violated(f"printed R^noise / measured = {ratio:.0f} (b² = 400); z ≥ {table.noise_printed_z.min():.0f}",
                            counterexample={"b": 20, "C": 1.0, "sigma": 1.0, "eta": 0.3,
                                            "noise_measured": table.noise_meas.tolist(),
                                            "noise_printed": table.noise_printed.tolist()},
                            ratio=ratio, effort=effort)
        z = max(float(table[f"{t}_z"].max()) for t in ("nonprivate", "clip", "noise", "expected_loss"))
        if z < 4.5:
            return holds(f"all terms within {z:.2f} s.e.", effort=effort, worst_ratio=z / 4.5)
        return violated(f"a term is {z:.1f} s.e. off", counterexample=table.to_dict("records"), ratio=z / 4.5)
    return check


def _theorem3(*, n_groups: int, batch_size: int | None, stored: str | None) -> Callable[[Budget], Verdict]:
    """conditions.search_theorem3 (random quadratic instances under Thm 3's assumptions); a stored,
    hand-shrunk counterexample (conditions.THREE_GROUP_COUNTEREXAMPLE / MINIBATCH_COUNTEREXAMPLE) is
    recomputed when the search budget does not find one."""
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.theory import conditions

        result = conditions.search_theorem3(n_groups=n_groups, dim=2, max_rows=4, batch_size=batch_size,
                                            trials=budget.trials if batch_size is None else max(50, budget.trials // 4),
                                            seed=0)
        effort = (f"{result.trials} random instances ({n_groups} groups, "
                  f"{'full batch' if batch_size is None else f'batches of {batch_size}'}), "
                  f"{result.pairs_with_condition} pairs met Eq. (5)")
        if result.counterexample is None and stored is None:
            return holds(f"min normalised margin {result.min_normalised_margin:.3g} > 0", effort=effort,
                         worst_ratio=None, min_normalised_margin=result.min_normalised_margin)
        inst = getattr(conditions, stored) if stored is not None else result.counterexample
        bad = inst.violations()
        if not bad:
            return inconclusive("stored counterexample no longer violates", effort=effort)
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


def _theorem4(budget: Budget) -> Verdict:
    """Measured noise terms (simulate_one_step) ordered as the group Hessian traces (theorem4_agreement)."""
    from dpfair_analysis.models import build_model
    from dpfair_analysis.theory.conditions import theorem4_agreement
    from dpfair_analysis.theory.decomposition import StepMoments, one_step_decomposition, simulate_one_step

    data = _quadratic_step_data()
    rows = []
    for seed in range(2 if budget.name == "quick" else 6):
        model = build_model("logreg", input_shape=(3,), n_classes=2, seed=seed).double()
        kw = dict(lr=1.0, noise_multiplier=2.0, batch_size=10)
        pred = one_step_decomposition(StepMoments(model, data, clip_bound=1.0), **kw)
        meas = simulate_one_step(model, data, clip_bound=1.0, draws=max(2000, budget.draws),
                                 generator=torch.Generator().manual_seed(seed), **kw)
        traces = pred[["group", "hessian_trace"]].rename(columns={"hessian_trace": "trace"})
        noise = meas[["group", "noise"]]
        table = theorem4_agreement(traces, noise)
        se = dict(zip(meas.group, meas.noise_stderr))
        table["z"] = (table.noise_a - table.noise_b).abs() / np.sqrt(table.a.map(se) ** 2 + table.b.map(se) ** 2)
        table["seed"] = seed
        rows.append(table)
    table = pd.concat(rows)
    bad = table[(table.verdict == "violated") & (table.z > 3)]
    effort = (f"{len(table)} ordered pairs at {len(rows)} logistic-regression iterates, measured noise terms "
              f"(a violation counts if the opposite order is > 3 s.e.)")
    if len(bad):
        return violated("measured order disagrees", counterexample=bad.iloc[0].to_dict(), ratio=1.0, effort=effort)
    return holds(f"{int((table.verdict == 'confirmed').sum())} confirmed, 0 violated", effort=effort, worst_ratio=None)


def _theorem5(budget: Budget) -> Verdict:
    """1 - sum f_k^2 in [0, 1 - 1/K], extremes at one-hot / uniform (conditions.theorem5_extremes + search)."""
    from dpfair_analysis.theory.conditions import boundary_proxy_value, theorem5_extremes

    ext = [theorem5_extremes(k) for k in range(2, 11)]
    exact = all(abs(e["uniform"] - e["max_theory"]) < 1e-12 and abs(e["one_hot"]) < 1e-12 for e in ext)

    def ratio(w):
        f = np.asarray(w) / np.sum(w)
        v = float(boundary_proxy_value(f))
        k = len(w)
        return max(v / (1 - 1 / k), 1 - v if v < 0 else 0.0)

    found, worst, tried = search(st.lists(st.floats(1e-6, 1.0), min_size=2, max_size=10), ratio,
                                 examples=budget.examples)
    if found is not None or not exact:
        return violated("proxy outside [0, 1 − 1/K]", counterexample={"weights": found}, ratio=worst)
    return holds(f"max proxy/(1 − 1/K) = {worst:.4f}; extremes exact for K = 2..10",
                 effort=f"{tried} probability vectors", worst_ratio=worst)


def _example1(budget: Budget) -> Verdict:
    """Softmax regression: per_sample_gradients == (f - e_y) ⊗ [x; 1] and ||g|| = ||f - e_y|| ||[x; 1]||."""
    from dpfair_analysis.gradients import flatten, per_sample_gradients
    from dpfair_analysis.models import build_model

    worst, cases = 0.0, 0
    for seed in range(3 if budget.name == "quick" else 20):
        g = torch.Generator().manual_seed(seed)
        X = torch.randn(50, 4, generator=g, dtype=torch.float64) * 3
        y = torch.randint(0, 3, (50,), generator=g)
        model = build_model("logreg", input_shape=(4,), n_classes=3, seed=seed).double()
        grads = per_sample_gradients(model, X, y)
        f = torch.softmax(model(X), dim=1).detach()
        r = f - torch.nn.functional.one_hot(y, 3).double()
        gw, gb = grads["linear.weight"], grads["linear.bias"]
        err = max(float((gw - r[:, :, None] * X[:, None, :]).abs().max()), float((gb - r).abs().max()))
        norms = flatten(grads).norm(dim=1)
        predicted = r.norm(dim=1) * torch.sqrt((X ** 2).sum(1) + 1)
        worst = max(worst, err, float((norms / predicted - 1).abs().max()))
        cases += 50
    if worst > 1e-10:
        return violated(f"max deviation {worst:.3g}", counterexample={}, ratio=1 + worst)
    return holds(f"exact to {worst:.1e} (gradient is (f − e_y) ⊗ x̃; the paper's (Y − f) has the opposite sign)",
                 effort=f"{cases} samples, K = 3, with bias", worst_ratio=1 + worst)


def _example2(budget: Budget) -> Verdict:
    """One hidden layer: the first-layer weight gradient is v x^T, so ||grad W1|| = ||grad b1|| ||x|| exactly."""
    from dpfair_analysis.gradients import per_sample_gradients
    from dpfair_analysis.models import build_model

    worst, cases = 0.0, 0
    for seed in range(3 if budget.name == "quick" else 20):
        g = torch.Generator().manual_seed(seed)
        X = torch.randn(40, 5, generator=g, dtype=torch.float64) * 2
        y = torch.randint(0, 3, (40,), generator=g)
        for activation in ("relu", "tanh"):
            model = build_model("mlp", input_shape=(5,), n_classes=3, seed=seed, hidden=(8,),
                                activation=activation).double()
            grads = per_sample_gradients(model, X, y)
            w, b = grads["net.0.weight"], grads["net.0.bias"]
            lhs = w.flatten(1).norm(dim=1)
            rhs = b.norm(dim=1) * X.norm(dim=1)
            worst = max(worst, float(((lhs - rhs).abs() / rhs.clamp(min=1e-300)).max()))
            cases += 40
    if worst > 1e-9:
        return violated(f"max relative deviation {worst:.3g}", counterexample={}, ratio=1 + worst)
    return holds(f"||∇θ₂ℓ|| = ||δ|| ||X|| to {worst:.1e} (ReLU and tanh)", effort=f"{cases} samples",
                 worst_ratio=1 + worst)


def _example3(*, printed: bool) -> Callable[[Budget], Verdict]:
    """Tr(H_X) of softmax regression with a bias: exact_sample_traces vs the closed form (1 - sum f^2)(||x||^2 + 1)
    (hessian.closed_form_sample_traces) and vs the printed (1 - sum f^2) ||x||^2 (no bias)."""
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.models import build_model
        from dpfair_analysis.theory.hessian import boundary_proxy, closed_form_sample_traces, exact_sample_traces

        model = build_model("logreg", input_shape=(2,), n_classes=3, seed=0).double()

        def traces(rows):
            X = torch.tensor(rows, dtype=torch.float64)
            y = torch.zeros(len(rows), dtype=torch.long)
            exact = exact_sample_traces(model, X, y)
            closed = closed_form_sample_traces(model, X)
            paper = boundary_proxy(model, X) * (X ** 2).sum(1)
            return exact, closed, paper

        if printed:
            def ratio(row):
                exact, _, paper = traces([row])
                return float(exact[0] / paper[0]) if paper[0] > 0 else math.inf

            found, worst, tried = search(st.lists(st.floats(-5, 5), min_size=2, max_size=2), ratio,
                                         examples=budget.examples // 2)
            if found is None:
                return holds(f"max exact/printed {worst:.3g}", effort=f"{tried} inputs", worst_ratio=worst)
            exact, closed, paper = traces([found])
            return violated(f"exact Tr = {float(exact[0]):.3g} vs printed {float(paper[0]):.3g}",
                            counterexample={"x": found, "exact": float(exact[0]), "printed": float(paper[0]),
                                            "closed_with_bias": float(closed[0])},
                            ratio=float(exact[0] / paper[0]) if paper[0] > 0 else math.inf,
                            effort=f"{tried} inputs; the toolkit's one-score binary model has half the K = 2 "
                                   "softmax value, p(1 − p)(||x||² + 1)")
        g = torch.Generator().manual_seed(0)
        rows = (torch.randn(200 if budget.name == "quick" else 2000, 2, generator=g, dtype=torch.float64) * 3).tolist()
        exact, closed, _ = traces(rows)
        err = float(((exact - closed).abs() / exact.abs().clamp(min=1e-300)).max())
        if err < 1e-9:
            return holds(f"closed form = exact to {err:.1e}", effort=f"{len(rows)} inputs, K = 3", worst_ratio=1 + err)
        return violated(f"relative error {err:.3g}", counterexample={}, ratio=1 + err)
    return check


def _l2_traces(values_a, values_b, *, loss_scale: float) -> tuple[float, float]:
    """Tr(H_a), Tr(H_b) of the group mean of loss_scale * (theta^T x - y)^2 / ... via decomposition.StepMoments."""
    from torch import nn

    from dpfair_analysis.theory.decomposition import StepMoments, squared_error

    rows = [list(v) for v in values_a] + [list(v) for v in values_b]
    data = _tiny_dataset(rows, [0] * len(rows), [0] * len(values_a) + [1] * len(values_b))
    model = nn.Linear(len(rows[0]), 1, bias=False).double()

    def loss(output, target, reduction="mean"):
        return 2 * loss_scale * squared_error(output, target, reduction)  # squared_error is (1/2)(f - y)^2

    moments = StepMoments(model, data, clip_bound=1.0, loss_fn=loss)
    traces = torch.einsum("app->a", moments.hessians)
    return float(traces[1]), float(traces[2])


def _corollary1_trace(*, factor: float) -> Callable[[Budget], Verdict]:
    """Tr(H_a) of the mean L2 loss (theta^T X - Y)^2 (StepMoments' exact Hessian) vs factor * E_a ||X||^2."""
    def check(budget: Budget) -> Verdict:
        rng = np.random.default_rng(0)
        worst_hi, worst_lo, cases = 0.0, math.inf, 0
        for _ in range(10 if budget.name == "quick" else 200):
            d = int(rng.integers(1, 4))
            a = rng.normal(size=(int(rng.integers(1, 5)), d)) * rng.uniform(0.1, 5)
            b = rng.normal(size=(int(rng.integers(1, 5)), d))
            ta, tb = _l2_traces(a.tolist(), b.tolist(), loss_scale=1.0)
            for t, v in ((ta, a), (tb, b)):
                r = t / (factor * float((v ** 2).sum(1).mean()))
                worst_hi, worst_lo = max(worst_hi, r), min(worst_lo, r)
                cases += 1
        if abs(worst_hi - 1) < 1e-9 and abs(worst_lo - 1) < 1e-9:
            return holds(f"Tr(H_a) = {factor:g}·E||X||² exactly", effort=f"{cases} groups", worst_ratio=worst_hi)
        return violated(f"Tr(H_a) / E||X||² = {worst_lo:.6g}..{worst_hi:.6g}",
                        counterexample={"X_a": [[1.0]], "trace": _l2_traces([[1.0]], [[1.0]], loss_scale=1.0)[0],
                                        "E_norm_sq": 1.0}, ratio=worst_hi, effort=f"{cases} groups")
    return check


def _corollary1(budget: Budget) -> Verdict:
    """'Output perturbation does not guarantee pure fairness' (L2 loss): a group pair with different input
    norms has different Tr(H) (StepMoments), so xi_a = (1/2) s^2 |Tr(H_a) - Tr(H)| > 0 (exact for a quadratic)."""
    ta, tb = _l2_traces([[1.0]], [[2.0]], loss_scale=1.0)
    if ta != tb:
        return holds(f"Tr(H_a) = {ta:g} ≠ Tr(H_b) = {tb:g} for x_a = 1, x_b = 2", effort="1 witness", worst_ratio=None)
    return violated("equal traces", counterexample={}, ratio=1.0)


def _corollary2(*, second_moment: bool) -> Callable[[Budget], Verdict]:
    """Equal E||X_a|| (printed) or equal E||X_a||^2 (corrected) => equal Tr(H_a) (hence pure fairness)."""
    def check(budget: Budget) -> Verdict:
        def ratio(x):
            a, b = x
            a, b = np.asarray(a, float), np.asarray(b, float)
            if second_moment:
                b = b * math.sqrt(np.mean(a ** 2) / np.mean(b ** 2))
            else:
                b = b * (np.mean(a) / np.mean(b))
            ta, tb = _l2_traces(a[:, None].tolist(), b[:, None].tolist(), loss_scale=1.0)
            return max(ta, tb) / min(ta, tb)

        strategy = st.tuples(st.lists(st.integers(1, 4).map(float), min_size=1, max_size=3),
                             st.lists(st.integers(1, 4).map(float), min_size=1, max_size=3))
        found, worst, tried = search(strategy, ratio, examples=budget.examples // 2, tol=1e-9)
        effort = f"{tried} pairs of 1-D groups (norms 1..4, rescaled to equal {'E x²' if second_moment else 'E|x|'})"
        if found is None:
            return holds(f"max Tr ratio {worst:.6g}", effort=effort, worst_ratio=worst)
        a, b = found
        b_scaled = (np.asarray(b) * (np.mean(a) / np.mean(b))).tolist() if not second_moment else b
        return violated(f"equal mean norms, traces differ ×{worst:.3g}",
                        counterexample={"norms_a": a, "norms_b": b_scaled}, ratio=worst, effort=effort)
    return check


# =========================================================================================
# Paper 003: PF-LD
# =========================================================================================
_MEMO: dict[tuple[str, str], Verdict] = {}


def _memo(name: str, check: Callable[[Budget], Verdict]) -> Callable[[Budget], Verdict]:
    """Cache a check's verdict per budget (Lemmas 1-2 reuse the Theorem 1-2 searches)."""
    def wrapped(budget: Budget) -> Verdict:
        key = (name, budget.name)
        if key not in _MEMO:
            _MEMO[key] = check(budget)
        return _MEMO[key]
    wrapped.__doc__ = check.__doc__
    return wrapped


def _pfld_theorem1(budget: Budget) -> Verdict:
    """Thm 1 (Eq. 7) on Eq. (10)'s released gradient and on step (8e) alone: hypothesis searches of
    privacy.sensitivity_search (``cases``, ``primal_release_excess``, ``primal_group_part_excess``), shrunk."""
    from dpfair_analysis.privacy.sensitivity_search import Case, cases, primal_group_part_excess, \
        primal_release_bound, primal_release_excess

    def ratio(c):
        b = primal_release_bound(c)
        if not math.isfinite(b) or b <= 0:
            return None
        return (primal_release_excess(c) + b) / b

    found, worst, tried = search(cases(), ratio, examples=budget.examples)
    part, _, tried2 = search(cases(), lambda c: 1 + max(primal_group_part_excess(c), -1.0),
                             examples=budget.examples)
    # the stored sign-flip case of tests/pfld (population gradients unclipped, sign(mu_P - mu_G) flips)
    from dpfair_analysis.fairness.constraints import make_constraint
    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    flip = Case(make_constraint("dp", n_groups=2), y=torch.zeros(6, dtype=torch.long),
                group=torch.tensor([0, 0, 0, 1, 1, 1]), new_group=torch.tensor([1, 0, 0, 1, 1, 1]),
                h=t([1.0, 0.4, 0.4, 0.3, 0.3, 0.3]), grads=t([[10.0]] * 6), lambdas=t([1.0, 0.0]), clip=1.0, index=0)
    flip_ratio = ratio(flip)
    effort = f"{tried} + {tried2} neighbouring pairs (2-3 groups, sizes 0-9, signed h and gradients)"
    if found is None:
        return holds(f"max change/Δ_p = {worst:.3g}", effort=effort, worst_ratio=worst)
    claimed = primal_release_bound(found)
    ce = {"y": found.y, "group": found.group, "neighbour_group": found.new_group, "h": found.h, "grads": found.grads,
          "lambdas": found.lambdas, "C_p": found.clip, "kind": found.constraint.kind, "claimed_delta_p": claimed,
          "change": primal_release_excess(found) + claimed}
    if part is not None:
        ce["step_8e_case"] = {"group": part.group, "neighbour_group": part.new_group, "grads": part.grads,
                              "lambdas": part.lambdas, "C_p": part.clip,
                              "excess": primal_group_part_excess(part)}
    ce["stored_sign_flip"] = {"h": [1.0, 0.4, 0.4, 0.3, 0.3, 0.3], "grads": [10.0] * 6, "group": [0, 0, 0, 1, 1, 1],
                              "person_0_moves_to": 1, "C_p": 1.0, "lambdas": [1.0, 0.0], "change": 18.0,
                              "claimed": 2.0, "ratio": flip_ratio}
    return violated(f"shrunk search case ×{worst:.3g}; stored sign flip ×{flip_ratio:.3g} the claimed Δ_p",
                    counterexample=ce, ratio=max(worst, flip_ratio), effort=effort)


def _pfld_default_primal(budget: Budget) -> Verdict:
    """The toolkit's primal release (sums with public denominators): each person's contribution <= Delta_1
    on both sides and the change <= 2 Delta_1 (sensitivity.primal_group_sum, primal_contribution_bound)."""
    from dpfair_analysis.privacy.sensitivity import primal_contribution_bound
    from dpfair_analysis.privacy.sensitivity_search import cases, primal_sum_changes, signed_coefficients

    def ratio(c):
        a = signed_coefficients(c)
        d1 = primal_contribution_bound(a, clip=c.clip, constraint=c.constraint)
        if d1 <= 0:
            return None
        contributions, change = primal_sum_changes(c, a)
        return max(0.0, *(u / d1 for u in contributions), change / (2 * d1))

    found, worst, tried = search(cases(missing=True), ratio, examples=budget.examples * 2)
    effort = f"{tried} neighbouring pairs with missing values (sizes 0-9, signed h and gradients, any coefficients)"
    if found is not None:
        return violated(f"contribution ×{worst:.3g} Δ₁", counterexample={"case": str(found)}, ratio=worst, effort=effort)
    return holds(f"max contribution/Δ₁ = {worst:.4f}", effort=effort, worst_ratio=worst)


def _pfld_theorem2(*, signed: bool) -> Callable[[Budget], Verdict]:
    """Thm 2 (Eq. 11) on the dual release: signed h (sensitivity_search.structured_cases) or h in [0, C_d]
    (cases)."""
    def check(budget: Budget) -> Verdict:
        from dpfair_analysis.privacy.sensitivity_search import cases, dual_excess, dual_release_bound, group_sizes, \
            structured_cases

        def ratio(c):
            b = dual_release_bound(c)
            if not math.isfinite(b):
                return None
            return (dual_excess(c) + b) / b

        strategy = structured_cases() if signed else cases(signed=False)
        found, worst, tried = search(strategy, ratio, examples=budget.examples * 2)
        effort = f"{tried} neighbouring pairs ({'signed h at ±C_d, 3 groups of 2-12' if signed else 'h in [0, 4]'})"
        if found is None:
            return holds(f"max change/Δ_d = {worst:.4f}", effort=effort, worst_ratio=worst)
        b = dual_release_bound(found)
        return violated(f"dual release moves ×{worst:.3g} the claimed Δ_d",
                        counterexample={"group_sizes": group_sizes(found, found.group), "group": found.group,
                                        "neighbour_group": found.new_group, "h": found.h, "C_d": found.clip,
                                        "claimed_delta_d": b, "change": dual_excess(found) + b},
                        ratio=worst, effort=effort)
    return check


def _pfld_default_dual(budget: Budget) -> Verdict:
    """The toolkit's dual sums and counts: change <= sqrt(2 t_max) C_d and sqrt(2 t_max) (dual_sum_distance)."""
    from dpfair_analysis.privacy.sensitivity import count_distance, dual_sum_distance
    from dpfair_analysis.privacy.sensitivity_search import cases, dual_sum_changes

    def ratio(c):
        change, counts = dual_sum_changes(c)
        return max(change / dual_sum_distance(clip=c.clip, constraint=c.constraint),
                   counts / count_distance(constraint=c.constraint))

    found, worst, tried = search(cases(missing=True), ratio, examples=budget.examples * 2)
    effort = f"{tried} neighbouring pairs with missing values"
    if found is not None:
        return violated(f"×{worst:.3g}", counterexample={"case": str(found)}, ratio=worst, effort=effort)
    return holds(f"max change/bound = {worst:.4f} (attained: √2 C_d)", effort=effort, worst_ratio=worst)


def _pfld_missing_rule(budget: Budget) -> Verdict:
    """Sec. 7: Delta'_d = Delta_d / r. Search over pairs with missing values (sensitivity_search
    cases(missing=True), unsigned h); a stored case (tests/pfld) is recomputed if the budget finds none."""
    from dpfair_analysis.fairness.constraints import make_constraint
    from dpfair_analysis.privacy.sensitivity import change_group, exact_change, paper_dual_release, \
        paper_dual_sensitivity, paper_missing_values_sensitivity
    from dpfair_analysis.privacy.sensitivity_search import cases, group_sizes

    def claimed(c, reported):
        r = float(reported.double().mean())
        if r <= 0:
            return math.inf
        return max(paper_missing_values_sensitivity(paper_dual_sensitivity(group_sizes(c, g), clip=c.clip), r)
                   for g in (c.group, c.new_group))

    def ratio(c):
        if c.reported is None or not bool(c.reported[c.index]) or not bool(c.new_reported[c.index]):
            return None
        if min(group_sizes(c, c.group, c.reported).min(), group_sizes(c, c.new_group, c.new_reported).min()) < 1:
            return None
        b = claimed(c, c.reported)
        if not math.isfinite(b):
            return None
        change = exact_change(paper_dual_release, group=c.group, neighbour_group=c.new_group, reported=c.reported,
                              neighbour_reported=c.new_reported, h=c.h, y=c.y, constraint=c.constraint, clip=c.clip)
        return change / b

    found, worst, tried = search(cases(signed=False, missing=True, max_n=9), ratio, examples=budget.examples * 2)
    effort = f"{tried} pairs with missing values"
    if found is not None:
        return violated(f"×{worst:.3g} Δ_d/r", counterexample={"group": found.group, "neighbour_group": found.new_group,
                                                              "reported": found.reported, "h": found.h,
                                                              "C_d": found.clip}, ratio=worst, effort=effort)
    # stored case (tests/pfld/test_pfld_sensitivity.py): group 0 reports 2 of 10, group 1 reports 8 of 10
    constraint = make_constraint("dp", n_groups=2)
    group = torch.tensor([0] * 10 + [1] * 10)
    reported = torch.tensor([True, True] + [False] * 8 + [True] * 8 + [False] * 2)
    h = torch.tensor([1.0, 0.0] + [1.0] * 8 + [0.0] * 8 + [1.0] * 2, dtype=torch.float64)
    y = torch.zeros(20, dtype=torch.long)
    new_group, new_reported = change_group(group, 0, 1, reported=reported, new_reported=True)
    change = exact_change(paper_dual_release, group=group, neighbour_group=new_group, reported=reported,
                          neighbour_reported=new_reported, h=h, y=y, constraint=constraint, clip=1.0)
    bound = max(paper_missing_values_sensitivity(paper_dual_sensitivity(s, clip=1.0), 0.5) for s in ([10, 10], [9, 11]))
    return violated(f"stored case: change {change:.3f} > Δ_d/r = {bound:.3f}",
                    counterexample={"full_group_sizes": [10, 10], "reporting": [2, 8], "r": 0.5, "C_d": 1.0,
                                    "change": change, "claimed": bound, "found_by_search": False},
                    ratio=change / bound, effort=effort + f" (worst {worst:.3g}); stored case recomputed")


def _renyi_gaussian_mixture(alpha: float, q: float, sigma: float, *, reverse: bool) -> float:
    """D_alpha(N(0,s^2) || (1-q)N(0,s^2)+qN(1,s^2)) (or reversed) by numerical quadrature (scipy)."""
    from scipy import integrate, stats

    def integrand(x):
        l0 = stats.norm.logpdf(x, 0, sigma)
        lmix = np.logaddexp(math.log1p(-q) + l0, math.log(q) + stats.norm.logpdf(x, 1, sigma)) if q < 1 else \
            stats.norm.logpdf(x, 1, sigma)
        lp, lq = (lmix, l0) if reverse else (l0, lmix)
        return math.exp(alpha * lp + (1 - alpha) * lq)

    lo, hi = -12 * sigma - 2, 12 * sigma + 3
    val, _ = integrate.quad(integrand, lo, hi, limit=400, points=[0.0, 0.5, 1.0], epsabs=0, epsrel=1e-11)
    return math.log(val) / (alpha - 1)


def _rdp_of(event, orders) -> np.ndarray:
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    acct = rdp.RdpAccountant(list(orders))
    acct.compose(event)
    return np.array(acct._rdp)


def _pfld_theorem3(budget: Budget) -> Verdict:
    """RDP (Thm 3's definition) of the Gaussian mechanism: quadrature D_alpha(N(0,s^2)||N(1,s^2)) vs dp_accounting."""
    from dp_accounting import dp_event

    orders = [1.5, 2.0, 3.0, 8.0]
    worst_closed, worst_quadrature, cases, where = 0.0, 0.0, 0, {}
    for sigma in ([0.7, 2.0] if budget.name == "quick" else [0.5, 0.7, 1.0, 2.0, 5.0]):
        acc = _rdp_of(dp_event.GaussianDpEvent(sigma), orders)
        for a, value in zip(orders, acc):
            closed = a / (2 * sigma ** 2)
            num = _renyi_gaussian_mixture(a, 1.0, sigma, reverse=False)
            if abs(value / closed - 1) > worst_closed:
                worst_closed, where = abs(value / closed - 1), {"alpha": a, "sigma": sigma, "accountant": value,
                                                                "closed_form": closed}
            worst_quadrature = max(worst_quadrature, abs(num / closed - 1))
            cases += 1
    # the claim is the closed form; the quadrature is an independent numerical check whose own error
    # (peaked integrands at small sigma, large alpha) is ~1e-4, so it only flags gross disagreement
    if worst_closed < 1e-9 and worst_quadrature < 1e-3:
        return holds(f"dp_accounting = α/(2σ²) to {worst_closed:.1e}; quadrature agrees to {worst_quadrature:.1e}",
                     effort=f"{cases} (σ, α)", worst_ratio=1 + worst_closed)
    return violated(f"accountant vs α/(2σ²): {worst_closed:.3g}; quadrature: {worst_quadrature:.3g}",
                    counterexample=where, ratio=1 + max(worst_closed, worst_quadrature))


def _pfld_theorem4(budget: Budget) -> Verdict:
    """SG mechanism RDP (Eq. 14): dp_accounting's PoissonSampled Gaussian RDP >= both quadratures (14a), (14b)."""
    from dp_accounting import dp_event

    orders = [2.0, 3.0, 5.0, 8.0]
    worst, cases = 0.0, 0
    grid = [(0.01, 1.0), (0.1, 0.8), (0.5, 2.0)] if budget.name == "quick" else \
        [(q, s) for q in (0.001, 0.01, 0.1, 0.3, 0.7) for s in (0.6, 0.8, 1.0, 2.0, 4.0)]
    for q, sigma in grid:
        acc = _rdp_of(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), orders)
        for a, value in zip(orders, acc):
            num = max(_renyi_gaussian_mixture(a, q, sigma, reverse=False),
                      _renyi_gaussian_mixture(a, q, sigma, reverse=True))
            worst = max(worst, num / value)
            cases += 1
    if worst <= 1 + 1e-6:
        return holds(f"max quadrature / accountant = {worst:.6f}", effort=f"{cases} (q, σ, α)", worst_ratio=worst)
    return violated(f"accountant below the divergence ×{worst:.3g}", counterexample={}, ratio=worst)


def _pfld_lemma(*, dual: bool) -> Callable[[Budget], Verdict]:
    """Lemma 1/2: the step is (alpha, eps(alpha))-RDP with the SG/Gaussian bound at multiplier sigma (noise
    sigma * Delta from Thm 1/2). On a neighbouring pair whose change exceeds Delta (found by the Thm 1/2
    searches), the Gaussian release's Renyi divergence is alpha ||change||^2 / (2 sigma^2 Delta^2) (q = 1, the
    noise of the side with the larger Delta): (change/Delta)^2 times the claimed alpha/(2 sigma^2)."""
    def check(budget: Budget) -> Verdict:
        v = (_memo("thm2", _pfld_theorem2(signed=True)) if dual else _memo("thm1", _pfld_theorem1))(budget)
        if v.status != "violated":
            return inconclusive("the sensitivity search found no pair beyond Δ", search=v.key)
        ratio = v.ratio ** 2
        return violated(f"Rényi divergence ×{ratio:.3g} the claimed ε(α) at every α (q = 1)",
                        counterexample={**(v.counterexample or {}), "sensitivity_ratio": v.ratio}, ratio=ratio,
                        effort=v.effort)
    return check


def _revealed_inclusion_rdp(alpha: float, q: float, sigma: float) -> float:
    """RDP of a Poisson-sampled Gaussian (sensitivity 1, noise sigma) whose *inclusion is revealed*:
    the outputs are (0, N(0, s^2)) w.p. 1 - q and (1, N(mu, s^2)) w.p. q on D, (1, N(0, s^2)) on D'.
    D_alpha = log(1 - q + q exp(alpha (alpha - 1) / (2 sigma^2))) / (alpha - 1)."""
    return float(np.logaddexp(math.log1p(-q), math.log(q) + alpha * (alpha - 1) / (2 * sigma ** 2))) / (alpha - 1)


def _pfld_lemma1_shared_batch(grid: tuple[tuple[float, float], ...] = ((0.01, 1.0), (256 / 36_000, 1.0),
                                                                         (0.05, 2.0), (0.2, 1.5))
                              ) -> Callable[[Budget], Verdict]:
    """Lemma 1 with Eq. (10) as printed: the public part grad J(B_P) + lambda grad mu(B_P) is added to theta
    *without noise* and computed on the same batch B. Features and labels are public and arbitrary, so a
    person whose public gradient no one else shares (a one-hot column only they hold; z-scored it is
    ~sqrt(n)) shows in theta_{t+1} whether they were in B. Even granting the sensitivity Delta_p, the step
    is then the sampled Gaussian with its inclusion revealed, whose Renyi divergence
    (:func:`_revealed_inclusion_rdp`) exceeds the claimed SG bound of Eq. (14) at every alpha when q < 1
    (at q = 1 they coincide: the check holds there)."""
    def check(budget: Budget) -> Verdict:
        from dp_accounting import dp_event
        from dp_accounting.pld import pld_privacy_accountant
        from dp_accounting.privacy_accountant import NeighboringRelation

        orders = [1.5, 2.0, 4.0, 8.0, 16.0, 32.0]
        worst, where = 0.0, None
        for q, sigma in grid:
            claimed = _rdp_of(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), orders)
            actual = np.array([_revealed_inclusion_rdp(a, q, sigma) if q < 1 else a / (2 * sigma ** 2)
                               for a in orders])
            ratio = float(np.max(actual / claimed))
            if ratio > worst:
                worst, where = ratio, (q, sigma, orders[int(np.argmax(actual / claimed))])
        if worst <= 1 + 1e-6:
            return holds(f"revealed-inclusion RDP / Eq. (14) ≤ {worst:.6f}", effort=f"{len(grid)} (q, σ_p) × "
                         f"{len(orders)} α", worst_ratio=worst)
        q, sigma, alpha = where
        delta = 1e-5
        # (epsilon, delta) view, replace-one (a group change): claimed = subsampled Gaussian; actual: only delta is
        # amplified, delta(eps) = q delta_Gauss(eps), i.e. the un-amplified Gaussian at delta / q
        reported = pld_privacy_accountant.PLDAccountant(NeighboringRelation.REPLACE_ONE)
        reported.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)))
        revealed = pld_privacy_accountant.PLDAccountant(NeighboringRelation.REPLACE_ONE)
        revealed.compose(dp_event.GaussianDpEvent(sigma))
        return violated(f"Rényi divergence ×{worst:.3g} the claimed ε_p(α) (q = {q:g}, σ_p = {sigma:g}, α = {alpha:g})",
                        counterexample={"q": q, "sigma_p": sigma, "alpha": alpha, "delta": delta,
                                        "epsilon_reported": float(reported.get_epsilon(delta)),
                                        "epsilon_with_inclusion_revealed": float(revealed.get_epsilon(delta / q)),
                                        "public_feature": "one-hot column held by one person (≈ √n z-scored)"},
                        ratio=worst, effort=f"{len(grid)} (q, σ_p) × {len(orders)} α")
    return check


def _pfld_theorem5(budget: Budget) -> Verdict:
    """Thm 5: PF-LD is (alpha, T n eps_p/|B| + T eps_d)-RDP: dp_accounting's RDP of pfld_schedule_event
    (paper_exact) against steps * eps_p(alpha) + T * eps_d(alpha)."""
    from dp_accounting import dp_event

    from dpfair_analysis.privacy.accounting import steps_for_epochs
    from dpfair_analysis.training.lagrangian import pfld_schedule_event

    orders = [1.5, 2.0, 4.0, 8.0, 16.0, 64.0]
    worst, cases = 0.0, 0
    for n, b, epochs, sp, sd in [(1000, 50, 3, 1.0, 4.0), (45_222, 256, 5, 2.0, 8.0), (500, 500, 2, 1.5, 1.5)]:
        event = pfld_schedule_event(n=n, batch_size=b, epochs=epochs, sigma_p=sp, sigma_d=sd, sigma_c=1.0,
                                    paper_exact=True)
        total = _rdp_of(event, orders)
        eps_p = _rdp_of(dp_event.PoissonSampledDpEvent(b / n, dp_event.GaussianDpEvent(sp)), orders)
        eps_d = _rdp_of(dp_event.GaussianDpEvent(sd), orders)
        formula = steps_for_epochs(n, b, epochs) * eps_p + epochs * eps_d
        worst = max(worst, float(np.max(np.abs(total / formula - 1))))
        cases += 1
    if worst < 1e-9:
        return holds(f"accountant = T n ε_p/|B| + T ε_d to {worst:.1e}", effort=f"{cases} schedules × {len(orders)} α",
                     worst_ratio=1 + worst, note="holds given Lemmas 1-2, which fail (003.lemma1, 003.lemma2)")
    return violated(f"relative difference {worst:.3g}", counterexample={}, ratio=1 + worst)


def _rdp_conversion(budget: Budget) -> Verdict:
    """(alpha, eps)-RDP => (eps + log(1/delta)/(alpha-1), delta)-DP, on the Gaussian mechanism with exact delta."""
    from dpfair_analysis.privacy.output_perturbation import gaussian_delta

    def ratio(x):
        sigma, alpha, log10_delta = x
        delta = 10 ** log10_delta
        eps = alpha / (2 * sigma ** 2) + math.log(1 / delta) / (alpha - 1)
        return gaussian_delta(sigma, eps, 1.0) / delta

    found, worst, tried = search(st.tuples(st.floats(0.3, 20), st.floats(1.01, 256), st.floats(-12, -1)), ratio,
                                 examples=budget.examples)
    if found is None:
        return holds(f"max exact δ / δ = {worst:.3g}", effort=f"{tried} (σ, α, δ)", worst_ratio=worst)
    return violated(f"exact δ ×{worst:.3g}", counterexample={"sigma": found[0], "alpha": found[1],
                                                             "delta": 10 ** found[2]}, ratio=worst)


def _pfld_data(n: int = 240, seed: int = 3):
    from dpfair_analysis.data.dataset import GroupedDataset

    rng = np.random.default_rng(seed)
    group = (rng.random(n) < 1 / 3).astype(np.int64)
    x1 = rng.normal(size=n)
    proxy = group + 0.3 * rng.normal(size=n)
    y = (x1 + 2.0 * group + 0.3 * rng.normal(size=n) > 0.8).astype(np.int64)
    X = np.stack([x1, proxy, rng.normal(size=n)], axis=1)
    return GroupedDataset(torch.from_numpy(X).float(), torch.from_numpy(y), torch.from_numpy(group),
                          group_names=("a", "b"), label_names=("0", "1"))


def _pfld_theorem6(budget: Budget) -> Verdict:
    """Thm 6: Monte-Carlo E||G - G~|| (primal_error_monte_carlo, real per-sample h-gradients of an MLP) <= the
    paper's bound (paper_primal_error_bound, noise sigma_p Delta_p), over C_p and sigma_p."""
    from dpfair_analysis.fairness.constraints import make_constraint
    from dpfair_analysis.models import build_model
    from dpfair_analysis.privacy.sensitivity import paper_primal_sensitivity
    from dpfair_analysis.theory.pfld_bounds import h_gradients, paper_primal_error_bound, primal_error_monte_carlo

    dp = make_constraint("dp", n_groups=2)
    data = _pfld_data()
    model = build_model("mlp", input_shape=(3,), n_classes=2, seed=1, hidden=(16, 16))
    grads = h_gradients(model, data, dp)
    masks = dp.group_masks(data.y, data.group)
    norms = torch.linalg.vector_norm(grads, dim=1).numpy()
    by_term = [norms[masks[:, i].numpy()] for i in range(2)]
    lambdas = [1.0, 0.5]
    worst, cases = 0.0, 0
    for clip in np.quantile(norms, [0.1, 0.5, 0.9]):
        for sigma in (0.0, 0.01, 0.5):
            s = sigma * paper_primal_sensitivity([len(v) for v in by_term], clip=float(clip), lambda_max=1.0)
            mc, se = primal_error_monte_carlo(grads, masks, lambdas, clip=float(clip), noise_std=s,
                                              draws=max(200, budget.draws // 2))
            bound = paper_primal_error_bound(by_term, lambdas, clip=float(clip), sigma=sigma, lambda_max=1.0,
                                             n_params=grads.shape[1])
            worst = max(worst, (mc - 3 * se) / bound)
            cases += 1
    if worst <= 1:
        return holds(f"max (MC − 3se)/bound = {worst:.3f}", effort=f"{cases} (C_p, σ_p), n = {len(data)}, MLP 16x16",
                     worst_ratio=worst)
    return violated(f"×{worst:.3g}", counterexample={}, ratio=worst)


def _pfld_optimal_clip(budget: Budget) -> Verdict:
    """After Thm 6: 'the bound is convex in C_p; its unique minimiser satisfies a = sum_i lambda_i P_i(||g|| >= C_p)'.
    pfld_bounds.primal_bound_minimiser (exact minimisers of the piecewise-linear bound) searched for a minimiser
    that is not unique or where the condition has no solution."""
    from dpfair_analysis.theory.pfld_bounds import primal_bound_minimiser

    def ratio(x):
        norms, slope = x
        res = primal_bound_minimiser([np.array(norms)], [1.0], slope=slope)
        bad_unique = res["c_high"] > res["c_low"] + 1e-12
        return 1 + abs(res["paper_condition_residual"]) / slope + (1.0 if bad_unique else 0.0)

    found, worst, tried = search(st.tuples(st.lists(st.integers(1, 5).map(float), min_size=1, max_size=4),
                                           st.sampled_from([0.1, 0.3, 0.5, 1.0, 2.0])), ratio,
                                 examples=budget.examples)
    if found is None:
        return holds("condition exact", effort=f"{tried} cases", worst_ratio=worst)
    norms, slope = found
    res = primal_bound_minimiser([np.array(norms)], [1.0], slope=slope)
    return violated(f"minimisers [{res['c_low']:g}, {res['c_high']:g}], condition residual "
                    f"{res['paper_condition_residual']:.3g}",
                    counterexample={"norms": norms, "lambda": 1.0, "slope_a": slope, **res}, ratio=worst,
                    effort=f"{tried} cases; for a network a = 2√S σ_p λmax/(min|B_G|−1) usually exceeds Σλ, "
                           "so the minimiser is C_p = 0")


def _pfld_theorem7(budget: Budget) -> Verdict:
    """Thm 7: Monte-Carlo E|V_i - V~_i| (dual_error_monte_carlo, real h of an MLP) <= paper_dual_error_bound."""
    from dpfair_analysis.fairness.constraints import make_constraint
    from dpfair_analysis.models import build_model
    from dpfair_analysis.theory.pfld_bounds import dual_error_monte_carlo, paper_dual_error_bound

    data = _pfld_data()
    worst, cases = 0.0, 0
    for kind in ("dp", "ap"):
        con = make_constraint(kind, n_groups=2)
        model = build_model("mlp", input_shape=(3,), n_classes=2, seed=1, hidden=(16, 16))
        with torch.no_grad():
            h = con.h(model(data.X), data.y).double()
        masks = con.group_masks(data.y, data.group)
        h_by = [h[masks[:, i]].numpy() for i in range(con.n_terms)]
        for clip in np.quantile(h.abs().numpy(), [0.2, 0.8]):
            for sigma in (0.0, 1.0, 5.0):
                bound = paper_dual_error_bound(h_by, clip=float(clip), sigma=sigma)
                from dpfair_analysis.privacy.sensitivity import paper_dual_sensitivity
                s = sigma * paper_dual_sensitivity([len(v) for v in h_by], clip=float(clip))
                mc = dual_error_monte_carlo(h, data.y, data.group, constraint=con, clip=float(clip), noise_std=s,
                                            draws=max(1000, budget.draws))
                se = s / math.sqrt(max(1000, budget.draws)) + 1e-12
                worst = max(worst, float(np.max(np.where(bound > 0, (mc - 3 * se) / np.where(bound > 0, bound, 1), 0))))
                cases += 1
    if worst <= 1:
        return holds(f"max (MC − 3se)/bound = {worst:.3f}", effort=f"{cases} (constraint, C_d, σ_d)", worst_ratio=worst)
    return violated(f"×{worst:.3g}", counterexample={}, ratio=worst)


def _pfld_examples(kind: str) -> Callable[[Budget], Verdict]:
    """Examples 1-3: the constraint sets of fairness.constraints.make_constraint; the violation (max pairwise gap
    of hard h) equals fairlearn's demographic_parity_difference / equalized_odds_difference / accuracy difference."""
    def check(budget: Budget) -> Verdict:
        from fairlearn.metrics import MetricFrame, demographic_parity_difference, equalized_odds_difference
        from sklearn.metrics import accuracy_score

        from dpfair_analysis.fairness.constraints import make_constraint

        rng = np.random.default_rng(0)
        worst, cases = 0.0, 0
        for _ in range(20 if budget.name == "quick" else 300):
            k = int(rng.integers(2, 4))
            n = int(rng.integers(20, 80))
            group = torch.from_numpy(rng.integers(0, k, n))
            if len(torch.unique(group)) < k:
                continue
            y = torch.from_numpy(rng.integers(0, 2, n))
            if kind == "eo" and any(len(torch.unique(group[y == v])) < k for v in (0, 1)):
                continue
            logits = torch.from_numpy(rng.normal(size=(n, 2)))
            con = make_constraint(kind, n_groups=k)
            ours = con.violation(logits, y, group)
            pred = logits.argmax(1).numpy()
            if kind == "dp":
                ref = demographic_parity_difference(y.numpy(), pred, sensitive_features=group.numpy())
            elif kind == "eo":
                ref = equalized_odds_difference(y.numpy(), pred, sensitive_features=group.numpy())
            else:
                ref = MetricFrame(metrics=accuracy_score, y_true=y.numpy(), y_pred=pred,
                                  sensitive_features=group.numpy()).difference()
            expected_terms = k if kind in ("dp", "ap") else 2 * k
            if con.n_terms != expected_terms:
                return violated(f"{con.n_terms} terms, expected {expected_terms}", counterexample={"k": k}, ratio=math.inf)
            worst = max(worst, abs(ours - float(ref)))
            cases += 1
        if worst < 1e-12:
            return holds(f"= fairlearn to {worst:.1e}", effort=f"{cases} random data sets (2-3 groups)",
                         worst_ratio=1.0)
        return violated(f"differs from fairlearn by {worst:.3g}", counterexample={}, ratio=1 + worst)
    return check


# =========================================================================================
# Paper 002: FairDP fragment
# =========================================================================================
def _fairdp_bias_variance(budget: Budget) -> Verdict:
    """E||(sum_i clip(g_i) + N(0, s^2 C^2 I))/n - mean g||^2 = ||clip mean - mean||^2 + d s^2 C^2 / n^2 on real
    per-sample gradients (gradients.per_sample_gradients, noisy_clipped_sum-style release), by Monte Carlo."""
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
            predicted = bias + d * (sigma * clip) ** 2 / n ** 2
            z = abs(errors.mean() - predicted) / (errors.std(ddof=1) / math.sqrt(draws))
            worst_z = max(worst_z, z)
            cases += 1
    if worst_z < 4.5:
        return holds(f"MC = bias² + variance within {worst_z:.2f} s.e.", effort=f"{cases} (C, σ), n = {n}, d = {d}",
                     worst_ratio=worst_z / 4.5)
    return violated(f"off by {worst_z:.1f} s.e.", counterexample={}, ratio=worst_z / 4.5)


def _fairdp_clipping_bias(budget: Budget) -> Verdict:
    """Eq. (4)'s clipping bias: ||mean clip(g_i) - mean g_i|| <= eta = (1/n) sum_{||g||>C} (||g|| - C), searched over
    signed gradient sets (clip factors from gradients.clip_factors)."""
    from dpfair_analysis.gradients import clip_factors

    def ratio(x):
        rows, clip = x
        g = torch.tensor(rows, dtype=torch.float64)
        norms = g.norm(dim=1)
        eta = float((norms - clip).clamp(min=0).mean())
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


def _inequality_indices(budget: Budget) -> Verdict:
    """Atkinson, Gini, MLD, Theil (fairness.inequality) against closed-form values and identities."""
    from dpfair_analysis.fairness.inequality import atkinson, gini, mean_log_deviation, theil

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


# =========================================================================================
# The registry
# =========================================================================================
_GAUSS_DR = ("Gaussian mechanism: for ε ∈ (0, 1] and c² > 2 ln(1.25/δ), adding N(0, σ²) with σ > c Δ_f / ε is "
             "(ε, δ)-DP")
_EQ1 = "E|G̃ᵏ − Gᵏ| ≤ (1/bᵏ)(C/ε) + (1/bᵏ) Σᵢ max(0, |gᵢᵏ| − C)"
_EQ1_LOW = "E|G̃ᵏ − Gᵏ| ≥ ½ [(1/bᵏ)(C/ε) + (1/bᵏ) Σᵢ max(0, |gᵢᵏ| − C)]  ('the expected error is tight')"
_GAUSS_45 = ("M(D) = f(D) + N(0, Δ²σ²) is (ε, δ)-DP for δ > (4/5) exp(−(σε)²/2) and ε < 1")


def _c(id: str, location: str, statement: str, assumptions: str, check: Callable[[Budget], Verdict],
       corrects: str | None = None) -> Claim:
    return Claim(id=id, paper=id.split(".")[0], location=location, statement=statement, assumptions=assumptions,
                 check=check, corrects=corrects)


CLAIMS: list[Claim] = [
    # ------------------------------------------------------------------ 000 (DPSGD-F, KDD)
    _c("000.sec3.gaussian", "§3.1 'Gaussian mechanism [11]'", _GAUSS_DR, "ℓ2 sensitivity Δ_f; one release",
       _gaussian_mechanism_classic),
    _c("000.sec4.2.dpsgd-upper", "§4.2, bound before Eq. (1)", "E|Ĝ_B − G_B| ≤ (1/b)(C/ε) + (1/b) Σᵢ max(0, |gᵢ| − C)",
       "Laplace noise Lap(C/ε) on the clipped sum; extended to vectors/Gaussian with V = E||Z||/b",
       _eq1_upper),
    _c("000.eq1.upper", "§4.2 Eq. (1) (= 004 §4.2)", _EQ1, "group k's bᵏ gradients; Laplace or Gaussian noise on the "
       "group's clipped sum (V = E||Z||/bᵏ)", _eq1_upper),
    _c("000.eq1.lower-half", "§4.2 after Eq. (1) (and the population version before it; = 004 §4.2)", _EQ1_LOW,
       "scalar gradients of any sign, Laplace noise Lap(C/ε)", _eq1_lower_half(nonnegative=False)),
    _c("000.eq1.lower-half.nonnegative", "corrected §4.2 lower bound (Amin et al.'s setting)",
       _EQ1_LOW.split("  (")[0] + " for gᵢ ≥ 0", "non-negative scalar contributions, Laplace noise",
       _eq1_lower_half(nonnegative=True), corrects="000.eq1.lower-half"),
    _c("000.sec4.2.optimal-C.rank", "§4.2: 'the minimum is achieved when C is the ⌈1/ε⌉th largest value'",
       "argmin_C [(C/ε) + Σ max(0, |gᵢ| − C)] = the ⌈1/ε⌉-th largest |gᵢ| (batch, or group k)",
       "the bound V + B as a function of C", _optimal_clip(rule="rank")),
    _c("000.sec4.2.optimal-C.quantile", "§4.2: 'the (1 − 1/bε)-quantile'; 'Cᵏ is the (1 − 1/(bᵏε))-quantile for "
       "group k'", "the (1 − 1/(bε))-quantile of the norms minimises V + B (per group: 1 − 1/(bᵏε))",
       "numpy's 'higher' quantile convention (bounds.quantile_rule_clip)", _optimal_clip(rule="quantile")),
    _c("000.sec5.2.count-sensitivity", "§5.2: 'the collection {mᵏ, oᵏ} has sensitivity of 1'",
       "||(mᵏ, oᵏ)ₖ(B) − (mᵏ, oᵏ)ₖ(B')||₂ ≤ 1", "add/remove neighbouring batches (the accountant's relation)",
       _dpsgdf_count_sensitivity),
    _c("000.sec5.2.sum-sensitivity", "§5.2: 'sensitivity of the clipped gradient of the total population would be "
       "max_k Cᵏ'", "||Σᵢ clip(gᵢ, C^{k(i)}) − Σ_{i≠j} clip(gᵢ, C^{k(i)})|| ≤ max_k Cᵏ",
       "Cᵏ from the released noisy counts (with the toolkit's guards); add/remove", _dpsgdf_sum_sensitivity),
    _c("000.sec5.2.group-privacy", "§5.2: 'Algorithm 2 achieves (Cᵏ/max Cᵏ' · ε, δ)-DP w.r.t. group k'",
       "a record of group k enjoys (ρ_k ε, δ)-DP, ρ_k = Cᵏ / max_k' Cᵏ'",
       "σ₁ = 10σ₂ count release on the same batch; Adult schedule (b = 256, 20 epochs, σ₂ = 1, δ = 1e-6)",
       _group_privacy(count_multiplier=10.0)),
    _c("000.sec5.3.naive-group-privacy", "§5.3: 'Algorithm 3 satisfies (θᵏ/max θᵏ' · ε)-DP w.r.t. group k'",
       "a record of group k enjoys (ρ_k ε, δ)-DP, ρ_k = θᵏ / max_k' θᵏ'",
       "σ₁ = 10σ₂ noisy group sizes on the same batch; Adult schedule", _group_privacy(count_multiplier=10.0)),
    _c("000.sec6.1.3.count-budget", "§6.1.3: 'Because we set σ₁ = 10σ₂ … Only about 0.01 budget is from σ₁'",
       "ε(DPSGD-F) − ε(DPSGD) ≈ 0.01", "σ₁ = 10σ₂, paper schedules, RDP with the classic conversion",
       _count_release_budget),
    _c("000.tables.epsilon", "Tables 1-3 captions", "ε = 6.55 (MNIST), 3.1 (Adult), 2.66 (Dutch) at δ = 1e-6",
       "b = 256, σ = 0.8 / 1.0, 60 / 20 epochs, n = training size (80% for census), moments accountant",
       _published_epsilons(EPSILON_SETTINGS_000)),
    # ------------------------------------------------------------------ 004 (long version)
    _c("004.def3.gaussian", "§3.1 Definition 3", _GAUSS_DR, "as 000.sec3.gaussian", _gaussian_mechanism_classic),
    _c("004.thm1", "§3.2 Theorem 1 (Abadi et al. 2016)", "α_M(λ) ≤ Σᵢ α_{Mᵢ}(λ) for an adaptive sequence M₁..M_p",
       "log moments (RDP) of Poisson-sampled Gaussians; dp_accounting's RDP accountant", _moments_composition),
    _c("004.tables.epsilon", "Tables 1-5 captions", "ε = 6.23 (balanced MNIST), 3.99 (balanced Adult), 3.29 "
       "(unbalanced Dutch) at δ = 1e-6", "as 000.tables.epsilon; balanced MNIST n = 60,000 (not stated)",
       _published_epsilons(EPSILON_SETTINGS_004)),
    # ------------------------------------------------------------------ 001 (fairness lens)
    _c("001.sec3.gaussian", "§3 Preliminaries (after Definition 1)", _GAUSS_45, "ℓ2 sensitivity Δ; one release",
       _gaussian_delta_condition(0.8)),
    _c("001.sec3.gaussian.dwork-roth", "corrected §3: Dwork & Roth Thm A.1", _GAUSS_45.replace("(4/5)", "(5/4)"),
       "as 001.sec3.gaussian", _gaussian_delta_condition(1.25), corrects="001.sec3.gaussian"),
    _c("001.sec5.sensitivity", "§5: 'Δ_ℓ = 2/(nλ)'", "||θ*(D) − θ*(D')|| ≤ 2/(nλ) for L2-regularised logistic "
       "regression", "replace-one; ||x|| ≤ 1; penalised intercept; the toolkit's one-score binary model",
       _output_perturbation_sensitivity(lipschitz_factor=1.0)),
    _c("001.sec5.sensitivity.intercept", "§5, the bound proved for a model with an intercept (Chaudhuri et al. Cor. 8, L = √(||x||² + 1))",
       "||θ*(D) − θ*(D')|| ≤ 2√2/(nλ)", "as 001.sec5.sensitivity",
       _output_perturbation_sensitivity(lipschitz_factor=math.sqrt(2))),
    _c("001.thm1", "§5 Theorem 1, Eq. (3)", "ξ_a ≈ ½ Δ²σ² |Tr(H_ℓᵃ) − Tr(H_ℓ)|, H_ℓᵃ = ∇² Σ_{D_a} ℓ (group SUM)",
       "convex twice-differentiable loss; output perturbation θ* + N(0, Δ²σ² I); second-order expansion",
       _theorem1(printed=True)),
    _c("001.thm1.mean-hessian", "corrected Theorem 1", "R_a ≈ ½ s² Tr(H_a), ξ_a ≈ ½ s² |Tr(H_a) − Tr(H)|, H_a = "
       "Hessian of the group MEAN loss", "as 001.thm1; s small against the curvature scale",
       _theorem1(printed=False), corrects="001.thm1"),
    _c("001.cor1", "§5 Corollary 1", "linear model, L2 loss: output perturbation does not guarantee pure fairness",
       "ℓ = (θᵀX − Y)²", _corollary1),
    _c("001.cor1.trace", "§5 after Corollary 1", "Tr(H_ℓᵃ) = E_{X∼D_a} ||X||² for ℓ = (θᵀX − Y)²",
       "mean loss over the group", _corollary1_trace(factor=1.0)),
    _c("001.cor1.trace.factor2", "corrected remark after Corollary 1", "Tr(H_ℓᵃ) = 2 E_{X∼D_a} ||X||² for ℓ = "
       "(θᵀX − Y)² (= E||X||² for ½(θᵀX − Y)²)", "mean loss", _corollary1_trace(factor=2.0), corrects="001.cor1.trace"),
    _c("001.cor2", "§5 Corollary 2", "E||X_a|| = E||X_b|| for all groups ⇒ output perturbation with L2 loss is "
       "purely fair (equal Tr(H_a))", "linear model, L2 loss", _corollary2(second_moment=False)),
    _c("001.cor2.second-moment", "corrected Corollary 2", "E||X_a||² = E||X_b||² for all groups ⇒ equal Tr(H_a) ⇒ "
       "pure fairness", "linear model, L2 loss (quadratic: R_a = ½ s² Tr(H_a) exactly)",
       _corollary2(second_moment=True), corrects="001.cor2"),
    _c("001.thm2", "§6 Theorem 2, Eq. (4)", "E[L(θ_{t+1}; D_a)] = non-private + R_a^clip + R_a^noise, "
       "R_a^noise = (η²/2) Tr(H_ℓᵃ) C²σ²", "twice-differentiable loss, second-order expansion; Algorithm 1 "
       "(noise N(0, C²σ²I) on the sum, then /|B|)", _theorem2(printed=True)),
    _c("001.thm2.noise-over-b2", "corrected Theorem 2", "same decomposition with R_a^noise = (η²/2) Tr(H_a) C²σ²/b² "
       "(H_a of the mean loss)", "as 001.thm2; exact for a quadratic loss", _theorem2(printed=False),
       corrects="001.thm2"),
    _c("001.thm3", "§7 Theorem 3, Eq. (5)", "R_a^clip > R_b^clip whenever ||g_{D_a}|| p_a²/2 ≥ (5/2)C + ||g_{D_b}||"
       "(1 + p_b + p_b²/2), for groups a, b ∈ A", "convex β-smooth group losses, η ≤ 1/max β, small gradient "
       "variance; stated for any A ('w.l.o.g. |A| = 2')",
       _theorem3(n_groups=3, batch_size=None, stored="THREE_GROUP_COUNTEREXAMPLE")),
    _c("001.thm3.two-groups", "corrected Theorem 3 (proved in theory/conditions.py)", "Eq. (5) ⇒ R_a^clip > "
       "R_b^clip", "exactly two groups, full batch, convex β-smooth, η ≤ 1/max β",
       _theorem3(n_groups=2, batch_size=None, stored=None), corrects="001.thm3"),
    _c("001.thm3.minibatch", "Theorem 3 without 'small variance'", "Eq. (5) ⇒ R_a^clip > R_b^clip with mini-batches",
       "two groups, batches of one row (large gradient variance)",
       _theorem3(n_groups=2, batch_size=1, stored="MINIBATCH_COUNTEREXAMPLE")),
    _c("001.thm4", "§8 Theorem 4", "R_a^noise > R_b^noise whenever Tr(H_ℓᵃ) > Tr(H_ℓᵇ)",
       "one DP-SGD step on logistic regression; noise term measured by Monte Carlo", _theorem4),
    _c("001.thm5", "§8 Theorem 5", "1 − Σ_k f_k² is maximised at f_k = 1/K and minimised at a one-hot f",
       "f a probability vector, K ≥ 2", _theorem5),
    _c("001.ex1", "§7 Example 1", "g_X = (Y − f) ⊗ X, so ||g_X|| ∝ ||X||", "softmax regression, cross-entropy",
       _example1),
    _c("001.ex2", "§7 Example 2", "one hidden layer: ||∇_{θ₂} ℓ|| ∝ ||X||", "f = softmax(θ₁ᵀ o(θ₂ᵀX))", _example2),
    _c("001.ex3", "§8 Example 3", "H_X = (diag f − ffᵀ) ⊗ XXᵀ, so Tr(H_X) = (1 − Σf_k²) ||X||²",
       "softmax regression as in Example 1, for the toolkit's models (with a bias)", _example3(printed=True)),
    _c("001.ex3.with-bias", "corrected Example 3 (theory/hessian.py)", "Tr(H_X) = (1 − Σf_k²)(||X||² + 1) with a "
       "bias; one-score binary model: p(1 − p)(||X||² + 1)", "softmax regression with a bias",
       _example3(printed=False), corrects="001.ex3"),
    # ------------------------------------------------------------------ 003 (PF-LD)
    _c("003.sec4.2.gaussian", "§4.2 (after Definition 1)", _GAUSS_45, "as 001.sec3.gaussian",
       _gaussian_delta_condition(0.8)),
    _c("003.ex1", "§4.1 Example 1", "demographic parity = |A| constraints E_{D_P}[h] = E_{D_{G_i}}[h], h = M_θ(z)",
       "hard predictions; compared with fairlearn", _pfld_examples("dp")),
    _c("003.ex2", "§4.1 Example 2", "equalized odds = 2|A| constraints within Y = y", "compared with fairlearn",
       _pfld_examples("eo")),
    _c("003.ex3", "§4.1 Example 3", "accuracy parity = |A| constraints with h = loss", "0-1 loss; compared with "
       "fairlearn's accuracy difference", _pfld_examples("ap")),
    _c("003.thm1", "§6 Theorem 1, Eq. (7)", "Δ_p ≤ 2 C_p λ_max / (min_i |B_{G_i}| − 1) for the released gradient "
       "of Eq. (10)", "||∇h(z)|| ≤ C_p on group terms (population terms unclipped, Eq. 10); one person's group "
       "changes", _memo("thm1", _pfld_theorem1)),
    _c("003.thm1.sum-release", "corrected primal release (privacy/sensitivity.py)", "each person's contribution "
       "≤ Δ₁ = t_max C_p max_i |a_i|, change ≤ 2Δ₁", "group sums with public coefficients a_i; any group sizes, "
       "signed h, missing values", _pfld_default_primal, corrects="003.thm1"),
    _c("003.thm2", "§6 Theorem 2, Eq. (11)", "Δ_d ≤ √2 C_d / (min_i |D_{G_i}| − 1)", "|h(z)| ≤ C_d (signed h "
       "allowed); one person's group changes", _memo("thm2", _pfld_theorem2(signed=True))),
    _c("003.thm2.unsigned", "Theorem 2 restricted to h ∈ [0, C_d]", "Δ_d ≤ √2 C_d / (min_i |D_{G_i}| − 1) as a bound "
       "on the change", "h ∈ [0, C_d] (the paper's three h); the noise scale still depends on the attribute",
       _pfld_theorem2(signed=False), corrects="003.thm2"),
    _c("003.thm2.sum-release", "corrected dual release (privacy/sensitivity.py)", "||S(D) − S(D')|| ≤ √(2 t_max) C_d "
       "and counts ≤ √(2 t_max)", "per-term sums of clip(h), public denominators", _pfld_default_dual,
       corrects="003.thm2"),
    _c("003.sec7.missing", "§7", "with a fraction r reporting A: Δ'_p = Δ_p/r, Δ'_d = Δ_d/r", "Δ from the full "
       "group sizes; reporting may differ across groups", _pfld_missing_rule),
    _c("003.thm3", "§6.1 Theorem 3 (RDP definition)", "D_α(N(0,σ²) || N(1,σ²)) = α/(2σ²) (the Gaussian's RDP as the "
       "accountant computes it)", "unit sensitivity", _pfld_theorem3),
    _c("003.thm4", "§6.1 Theorem 4, Eq. (14)", "SG_{q,σ} is (α, ε)-RDP with ε ≤ max of (14a), (14b)",
       "unit ℓ2 sensitivity, Poisson sampling at rate q", _pfld_theorem4),
    _c("003.lemma1", "§6.1 Lemma 1", "the primal step is (α, ε_p)-RDP, ε_p from Eq. (14) with q = |B|/n and "
       "multiplier σ_p", "noise σ_p Δ_p with Δ_p of Theorem 1", _pfld_lemma(dual=False)),
    _c("003.lemma1.shared-batch", "§6.1 Lemma 1 with Eq. (10) (public part un-noised, same batch B)",
       "the primal step of Eq. (10) is (α, ε_p)-RDP with ε_p the SG bound of Eq. (14) at q = |B|/n and σ_p",
       "granting Δ_p (Theorem 1); features and labels public and arbitrary (Sec. 4.2)", _pfld_lemma1_shared_batch()),
    _c("003.lemma2", "§6.1 Lemma 2", "the dual step is (α, ε_d)-RDP, ε_d from Eq. (14) with q = 1", "noise σ_d Δ_d "
       "with Δ_d of Theorem 2", _pfld_lemma(dual=True)),
    _c("003.thm5", "§6.1 Theorem 5", "PF-LD is (α, T n ε_p/|B| + T ε_d)-RDP", "Lemmas 1-2; RDP composition",
       _pfld_theorem5),
    _c("003.sec6.1.rdp-to-dp", "§6.1 after Theorem 5", "(α, ε)-RDP ⇒ (ε + log(1/δ)/(α − 1), δ)-DP",
       "0 < δ < 1; checked on the Gaussian mechanism with its exact δ", _rdp_conversion),
    _c("003.thm6", "§6.2 Theorem 6", "E||G − G̃|| ≤ 2√S σ_p λ_max C_p/(min|B_{G_i}| − 1) + Σᵢ λᵢ Ê_{B_{G_i}}"
       "[max(0, ||∇h|| − C_p)]", "noise σ_p Δ_p; real per-sample h-gradients of an MLP", _pfld_theorem6),
    _c("003.thm6.optimal-Cp", "§6.2 after Theorem 6", "the bound is convex in C_p with a unique minimiser satisfying "
       "2√S σ_p λ_max/(min|B_G| − 1) = Σᵢ λᵢ Ê[1(||∇h|| ≥ C_p)]", "the Theorem 6 bound as a function of C_p",
       _pfld_optimal_clip),
    _c("003.thm7", "§6.2 Theorem 7", "E|Vᵢ − Ṽᵢ| ≤ √2 C_d σ_d/(min|D_{G_i}| − 1) + Ê_{D_{G_i}}[max(0, |h| − C_d)]",
       "noise σ_d Δ_d; real h of an MLP (dp and ap)", _pfld_theorem7),
    # ------------------------------------------------------------------ 002 (FairDP fragment)
    _c("002.eq4.bias-variance", "Sec. 3, Eq. (4) (τ(C, σ; θ): clipping bias + noise variance)",
       "E||(Σᵢ clip(gᵢ, C) + N(0, σ²C²I))/n − ḡ||² = ||clip mean − ḡ||² + |1| σ²C²/n² (≤ the paper's 3σ²C²|1|/n² "
       "noise term)", "real per-sample gradients of a small MLP", _fairdp_bias_variance),
    _c("002.eq4.clipping-bias", "Sec. 3, definition of η after Eq. (4)", "||(1/n) Σᵢ clip(gᵢ, C) − ḡ|| ≤ η = "
       "(1/n) Σ_{||gᵢ|| > C} (||gᵢ|| − C)", "any signed gradients", _fairdp_clipping_bias),
    _c("002.appD4.indices", "Sec. 4.1 / Appendix D.4 (not in our copy)", "Atkinson, Gini, MLD, Theil indices as "
       "defined by the US Census Bureau", "standard definitions (fairness/inequality.py)", _inequality_indices),
]

_BY_ID = {c.id: c for c in CLAIMS}
if len(_BY_ID) != len(CLAIMS):  # pragma: no cover
    raise RuntimeError("duplicate claim ids")


def get_claim(claim_id: str) -> Claim:
    """The claim with this id (ValueError naming the known ids otherwise)."""
    if claim_id not in _BY_ID:
        raise ValueError(f"unknown claim {claim_id!r}; known: {', '.join(_BY_ID)}")
    return _BY_ID[claim_id]


def claims_for(paper: str | None = None) -> list[Claim]:
    """All claims, or those of one paper ('000', '001', '002', '003', '004')."""
    if paper is None:
        return list(CLAIMS)
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; one of {', '.join(PAPERS)}")
    return [c for c in CLAIMS if c.paper == paper]


def run_claims(claims: Iterable[Claim], budget: Budget | str = QUICK, *,
               progress: bool = True) -> list[tuple[Claim, Verdict, float]]:
    """Run each claim's check; returns (claim, verdict, seconds). A check that raises is inconclusive."""
    budget = BUDGETS[budget] if isinstance(budget, str) else budget
    out = []
    claims = list(claims)
    for claim in tqdm(claims, desc=f"verify ({budget.name})", disable=not progress, leave=False):
        start = time.perf_counter()
        torch.manual_seed(0)
        try:
            verdict = claim.check(budget)
        except Exception as error:  # a check must never take the registry down
            verdict = inconclusive("check raised", reason_detail=f"{type(error).__name__}: {error}")
        out.append((claim, verdict, time.perf_counter() - start))
    return out


def _key_number(v: Verdict) -> str:
    if v.status == "violated" and v.ratio is not None:
        return f"×{v.ratio:.3g}"
    if v.status == "holds" and v.worst_ratio is not None:
        return f"worst {v.worst_ratio:.3g}"
    return ""


def verdict_table(results: list[tuple[Claim, Verdict, float]]) -> pd.DataFrame:
    """Tidy table: id, paper, location, statement, verdict, key, ratio, seconds."""
    return pd.DataFrame([{"id": c.id, "paper": c.paper, "location": c.location, "statement": c.statement,
                          "verdict": v.status, "key_number": _key_number(v), "key": v.key,
                          "ratio": v.ratio if v.status == "violated" else v.worst_ratio, "corrects": c.corrects,
                          "seconds": s} for c, v, s in results])
