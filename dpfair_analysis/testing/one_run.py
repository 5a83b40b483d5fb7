"""The one-training-run audit, per group: Steinke et al.'s epsilon analysis and the f-DP (Gaussian DP) one.

**The game** (Steinke, Nasr & Jagielski, NeurIPS 2023, "Privacy auditing with one (1) training run"): m
canaries, each included in the training data independently with probability 1/2 (S_i = +1 in, -1 out), ONE
training run, a score per canary (larger: more likely in). The auditor guesses "in" for its k+ highest scores
and "out" for its k- lowest, abstains on the rest: r = k+ + k- guesses, W of them right.

**Steinke et al.'s analysis** (their Theorem 3.1, computed as their Appendix algorithm,
:func:`~dpfair_analysis.testing.bounds.one_run_p_value`): for an (epsilon, delta)-DP training, with
p = e^epsilon / (1 + e^epsilon) and beta(v) = P[Binomial(r, p) >= v],

    P[W >= v] <= beta(v) + 2 m delta max_{i = 1..v} (P[Binomial(r, p) >= v - i] - beta(v)) / i,

so v right guesses refute every epsilon whose right side is below 1 - confidence; the largest such epsilon is
the lower bound (:func:`~dpfair_analysis.testing.bounds.one_run_epsilon_lower`).

**The f-DP analysis** (Mahloujifar, Melis & Chaudhuri, ICML 2025, "Auditing f-differential privacy in one
run"), for a mechanism that is f-DP with respect to each canary (here Gaussian DP, f = G_mu,
G_mu(x) = Phi(Phi^{-1}(1 - x) - mu)). Derivation. Let I be a uniform canary index and g a guess of S_I made
from the output, I and the other canaries S_{-I}; per-canary f-DP (the test "g = +1" of S_I = -1 against +1
has errors (b, 1 - a), so a <= 1 - f(b), the same for "g = -1") and the convexity of f give

    P[g = S_I] <= 1 - f(P[g = -S_I]).                                                     (1)

Take g = T_I if the guesses on the OTHER canaries have at least j - 1 right, else abstain. Then
{g = S_I} = {I guessed right, W >= j} and {g = -S_I} = {I guessed wrong, W >= j - 1}, so with p_i = P[W = i],

    R_j = sum_{i >= j} p_i i / m,   H_j = sum_{i >= j} p_i (k - i) / m,
    H_{j-1} >= (1 - f)^{-1}(R_j)   for j = 1..k,   and   sum_i p_i = (R_0 + H_0) m / k <= 1.          (2)

For Gaussian DP (1 - G_mu)^{-1}(y) = Phi(Phi^{-1}(y) - mu). To test "P[W >= v] >= gamma" the least
probability mass that (2) allows is found downwards from p_v = gamma (all of it at v): R_v = gamma v / m,
H_v = gamma (k - v) / m, then for j = v..1

    H_{j-1} = max(H_j, Phi(Phi^{-1}(R_j) - mu)),   R_{j-1} = R_j + (j - 1) / (k - j + 1) (H_{j-1} - H_j)

(p_{j-1} as small as (2) lets it be: H_{j-1} - H_j = p_{j-1} (k - j + 1) / m). If that mass
(R_0 + H_0) m / k exceeds 1, no mu-GDP mechanism has P[W >= v] >= gamma: with gamma = 1 - confidence, v
right guesses refute mu (the paper's recursion; :func:`fdp_refutes`). The largest refuted mu is
:func:`one_run_mu_lower`; the epsilon it implies at the run's delta is the mu-GDP curve's,
:func:`gdp_epsilon` (Dong, Roth & Su 2022, Cor. 2.13):

    delta(epsilon) = Phi(-epsilon / mu + mu / 2) - e^epsilon Phi(-epsilon / mu - mu / 2).

What each says: the epsilon bound refutes every (epsilon', delta)-DP claim with epsilon' below it; the mu
bound refutes every mu'-GDP claim with mu' below it -- a claim about the whole trade-off curve, so its
epsilon is a lower bound on the run's epsilon only for a mechanism whose curve is Gaussian (DP-SGD's is
close to Gaussian when it composes many steps: Dong et al.'s CLT). Under that hypothesis the f-DP analysis of
the same guesses is tighter (it uses the whole curve, not one (epsilon, delta) point).

**The guesses and the family.** (k+, k-) runs over a fixed grid (:data:`GUESS_FRACTIONS`, k- = 0 or k+);
every group's canaries are guessed on their own; each bound holds at ``confidence`` jointly over the grid
AND the groups by a Bonferroni correction (every test at level 1 - (1 - confidence) / (grid size x groups)).
Each result carries its power: m, the guesses, the right ones, the largest bound the run could certify (every
guess right).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dpfair_analysis.testing.bounds import DEFAULT_CONFIDENCE, check_delta_or_zero, one_run_epsilon_lower
from dpfair_analysis.validation import check_fraction, check_positive

#: The grid of k+ / m; k- is 0 or k+ (both tried).
GUESS_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5)
#: The largest mu searched (mu-GDP with mu = 50 is no privacy at all).
MU_MAX = 50.0


# =========================================================================== Gaussian DP
def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(epsilon) = Phi(-epsilon / mu + mu / 2) - e^epsilon Phi(-epsilon / mu - mu / 2): the (epsilon, delta)
    pairs a mu-GDP mechanism satisfies (Dong, Roth & Su 2022, Cor. 2.13).

    Parameters
    ----------
    epsilon : float
        >= 0.
    mu : float
        >= 0 (0: no information, delta = 0).
    """
    from scipy.special import log_ndtr

    if mu <= 0:
        return 0.0
    first = log_ndtr(-epsilon / mu + mu / 2)
    second = epsilon + log_ndtr(-epsilon / mu - mu / 2)
    return float(max(0.0, math.exp(first) - math.exp(second)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon with gdp_delta(epsilon, mu) <= delta: what mu-GDP implies at ``delta``.

    Parameters
    ----------
    mu : float
        >= 0.
    delta : float
        In (0, 1).
    """
    from scipy.optimize import brentq

    delta = check_fraction(delta, "delta", open_high=True)
    if mu <= 0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    high = 1.0
    while gdp_delta(high, mu) > delta:
        high *= 2
    return float(brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, high, xtol=1e-10))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The mu whose GDP curve passes through (epsilon, delta): gdp_epsilon(mu, delta) = epsilon (the Gaussian
    hypothesis of an (epsilon, delta) claim).

    Parameters
    ----------
    epsilon : float
        > 0.
    delta : float
        In (0, 1).
    """
    from scipy.optimize import brentq

    epsilon = check_positive(epsilon, "epsilon")
    delta = check_fraction(delta, "delta", open_high=True)
    high = 1.0
    while gdp_delta(epsilon, high) < delta:
        high *= 2
    return float(brentq(lambda mu: gdp_delta(epsilon, mu) - delta, 1e-12, high, xtol=1e-12))


# =========================================================================== the f-DP analysis
def _check_counts(canaries: int, guesses: int, correct: int) -> None:
    if not (0 <= correct <= guesses <= canaries and canaries >= 1):
        raise ValueError(f"need 0 <= correct <= guesses <= canaries, canaries >= 1; got correct={correct}, "
                         f"guesses={guesses}, canaries={canaries}")


def fdp_least_mass(canaries: int, guesses: int, correct: int, *, mu: float, tail: float) -> float:
    """The least total probability (2) of the module docstring allows when P[W >= v] = ``tail``: above 1, no
    mu-GDP mechanism has that tail.

    Parameters
    ----------
    canaries, guesses, correct : int
        m, k and v (0 <= v <= k <= m).
    mu : float
        The hypothesised Gaussian DP parameter (>= 0).
    tail : float
        gamma, in (0, 1].
    """
    from scipy.special import ndtr, ndtri

    _check_counts(canaries, guesses, correct)
    m, k, v = canaries, guesses, correct
    r, h = tail * v / m, tail * (k - v) / m
    for j in range(v, 0, -1):
        h_next = max(h, float(ndtr(ndtri(min(r, 1.0)) - mu)))
        if h_next == h:  # p_{j-1} = 0 and nothing moves below
            break
        r = r + (j - 1) / (k - j + 1) * (h_next - h)
        h = h_next
    return (r + h) * m / k if k else 0.0


def fdp_refutes(canaries: int, guesses: int, correct: int, *, mu: float,
                confidence: float = DEFAULT_CONFIDENCE) -> bool:
    """Whether v right of k guesses refute mu-GDP at ``confidence``: fdp_least_mass at tail 1 - confidence > 1.

    Parameters
    ----------
    canaries, guesses, correct, mu :
        As in ``fdp_least_mass``.
    confidence : float
        In (0, 1).
    """
    confidence = check_fraction(confidence, "confidence", open_high=True)
    return fdp_least_mass(canaries, guesses, correct, mu=mu, tail=1.0 - confidence) > 1.0


def fdp_p_value(canaries: int, guesses: int, correct: int, *, mu: float) -> float:
    """The largest tail P[W >= v] that (2) allows a mu-GDP mechanism: sup {gamma : fdp_least_mass(gamma) <= 1}
    (by bisection; the least mass grows with gamma).

    Parameters
    ----------
    canaries, guesses, correct, mu :
        As in ``fdp_least_mass``.
    """
    if correct == 0 or fdp_least_mass(canaries, guesses, correct, mu=mu, tail=1.0) <= 1.0:
        return 1.0
    return _bracket(lambda gamma: fdp_least_mass(canaries, guesses, correct, mu=mu, tail=gamma) <= 1.0,
                    0.0, 1.0, tolerance=1e-15)[1]  # the upper end: a p-value never too small


def one_run_mu_lower(canaries: int, guesses: int, correct: int, *, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The largest mu that v right of k guesses refute (0 when none; ``MU_MAX`` when every mu searched is).

    Refutation is monotone in mu (a larger mu lowers Phi(Phi^{-1}(y) - mu), so less mass is needed):
    bisection.

    Parameters
    ----------
    canaries, guesses, correct : int
        m, k and v.
    confidence : float
        In (0, 1).
    """
    if not fdp_refutes(canaries, guesses, correct, mu=0.0, confidence=confidence):
        return 0.0
    if fdp_refutes(canaries, guesses, correct, mu=MU_MAX, confidence=confidence):
        return MU_MAX
    return _bracket(lambda mu: fdp_refutes(canaries, guesses, correct, mu=mu, confidence=confidence),
                    0.0, MU_MAX, tolerance=1e-6)[0]  # the lower end: a bound never too large


def _bracket(holds, low: float, high: float, *, tolerance: float) -> tuple[float, float]:
    """Bisection of a monotone predicate with holds(low) and not holds(high): (a, b), b - a <= tolerance, with
    holds(a) and not holds(b)."""
    while high - low > tolerance:
        middle = (low + high) / 2
        if holds(middle):
            low = middle
        else:
            high = middle
    return low, high


# =========================================================================== the guesses
def guess_grid(canaries: int) -> list[tuple[int, int]]:
    """The (k+, k-) pairs tried on m canaries: k+ = max(1, round(f m)) for f in :data:`GUESS_FRACTIONS`,
    k- in {0, k+}, with k+ + k- <= m."""
    pairs = set()
    for fraction in GUESS_FRACTIONS:
        k_plus = max(1, round(fraction * canaries))
        for k_minus in (0, k_plus):
            if k_plus + k_minus <= canaries:
                pairs.add((k_plus, k_minus))
    return sorted(pairs)


def count_correct(scores: Any, included: Any, k_plus: int, k_minus: int) -> int:
    """Right guesses when the k+ highest scores are guessed in and the k- lowest out (ties broken by index).

    Parameters
    ----------
    scores : (m,) array
        Larger: more likely in.
    included : (m,) bool array
        The truth.
    k_plus, k_minus : int
        k+ + k- <= m.
    """
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    truth = np.asarray(included, dtype=bool)
    right_in = int(truth[order[:k_plus]].sum())
    right_out = int((~truth[order[len(order) - k_minus:]]).sum()) if k_minus else 0
    return right_in + right_out


@dataclass(frozen=True)
class OneRunBound:
    """One set of canaries' bounds: Steinke et al.'s epsilon and the f-DP mu (and the epsilon mu-GDP implies at
    ``delta``), each at the best (k+, k-) of the grid, each valid at ``confidence`` over the family, with their
    power (the bound if every guess of the best-power pair were right)."""

    canaries: int
    included: int
    epsilon_lower: float
    epsilon_guesses: tuple[int, int]
    epsilon_correct: int
    mu_lower: float
    mu_epsilon_lower: float
    mu_guesses: tuple[int, int]
    mu_correct: int
    delta: float
    confidence: float
    test_level: float
    family_size: int
    largest_certifiable_epsilon: float
    largest_certifiable_mu: float


def one_run_bounds(scores: Any, included: Any, *, delta: float, confidence: float = DEFAULT_CONFIDENCE,
                   family: int = 1) -> OneRunBound:
    """Both analyses of one canary set's scores (module docstring).

    Every (k+, k-) of ``guess_grid`` is a test at level 1 - (1 - confidence) / (grid size x ``family``):
    the bounds hold jointly over the grid and ``family`` such sets (the groups) at ``confidence``.

    Parameters
    ----------
    scores : (m,) array
        One score per canary (larger: more likely in), m >= 10.
    included : (m,) bool array
        Which canaries were in the run.
    delta : float
        The run's delta, in [0, 1) (Steinke et al.'s bound) -- the f-DP epsilon needs delta > 0.
    confidence : float
        Joint confidence, in (0, 1).
    family : int
        The number of canary sets the confidence is shared with (>= 1).
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    truth = np.asarray(included, dtype=bool).ravel()
    if len(scores) != len(truth) or len(scores) < 10:
        raise ValueError(f"scores and included must have one entry per canary, at least 10; got {len(scores)} "
                         f"and {len(truth)}")
    if np.isnan(scores).any():
        raise ValueError("scores has NaN entries")
    delta = check_delta_or_zero(delta)
    confidence = check_fraction(confidence, "confidence", open_high=True)
    if isinstance(family, bool) or not isinstance(family, int) or family < 1:
        raise ValueError(f"family must be an integer >= 1, got {family!r}")
    m = len(scores)
    grid = guess_grid(m)
    level = 1.0 - (1.0 - confidence) / (len(grid) * family)
    rows = []
    for k_plus, k_minus in grid:
        correct = count_correct(scores, truth, k_plus, k_minus)
        rows.append(((k_plus, k_minus), correct,
                     one_run_epsilon_lower(m, k_plus + k_minus, correct, delta=delta, confidence=level),
                     one_run_mu_lower(m, k_plus + k_minus, correct, confidence=level)))
    best_eps = max(rows, key=lambda row: row[2])
    best_mu = max(rows, key=lambda row: row[3])
    largest_eps = max(one_run_epsilon_lower(m, sum(pair), sum(pair), delta=delta, confidence=level)
                      for pair in grid)
    largest_mu = max(one_run_mu_lower(m, sum(pair), sum(pair), confidence=level) for pair in grid)
    mu_epsilon = gdp_epsilon(best_mu[3], delta) if delta > 0 else math.inf if best_mu[3] > 0 else 0.0
    return OneRunBound(canaries=m, included=int(truth.sum()), epsilon_lower=float(best_eps[2]),
                       epsilon_guesses=best_eps[0], epsilon_correct=best_eps[1], mu_lower=float(best_mu[3]),
                       mu_epsilon_lower=float(mu_epsilon), mu_guesses=best_mu[0], mu_correct=best_mu[1],
                       delta=delta, confidence=confidence, test_level=level, family_size=len(grid) * family,
                       largest_certifiable_epsilon=float(largest_eps), largest_certifiable_mu=float(largest_mu))


def one_run_no_power(bound: OneRunBound, epsilon: float) -> str | None:
    """Why ``bound`` could not have refuted a claim of ``epsilon``, or None: the claim is at or above the largest
    epsilon its canaries can certify (every guess of the best-power pair right), or the bound is 0 -- true of every
    run, evidence of nothing. The one-run twin of :attr:`~dpfair_analysis.testing.auditing.AuditResult.no_power`:
    never a bare 0 or a pass that could not have failed."""
    if bound.largest_certifiable_epsilon <= epsilon:
        return (f"the claim {epsilon:g} is at or above the largest epsilon {bound.canaries} canaries can certify "
                f"({bound.largest_certifiable_epsilon:.4g} at confidence {bound.confidence:g} over "
                f"{bound.family_size} tests): no result of this run could refute it (more canaries)")
    if bound.epsilon_lower <= 0:
        return (f"epsilon_lower = 0: no guess count of the grid did better than chance on {bound.canaries} canaries "
                f"(best {bound.epsilon_correct} of {sum(bound.epsilon_guesses)} right); it says nothing about the run "
                f"(more canaries, or a score that separates them)")
    return None


# =========================================================================== per group
@dataclass(frozen=True)
class GroupAudit:
    """A group's one-run bounds beside its accounted epsilon.

    ``exceeds_accounted``: Steinke et al.'s epsilon_lower > epsilon_accounted -- the audit refutes the
    accounting, a bug in the trainer or in the accountant (or in the audit); ``exceeds_gaussian_hypothesis``:
    mu_lower > the mu of the accounted (epsilon, delta)'s Gaussian curve -- refutes "the run is that mu-GDP"
    (a stronger claim than the (epsilon, delta) one; see the module docstring); ``no_power``: why this set could not
    have refuted its accounted epsilon (:func:`one_run_no_power`), or None."""

    group: str
    bound: OneRunBound
    epsilon_accounted: float
    mu_accounted: float
    exceeds_accounted: bool
    exceeds_gaussian_hypothesis: bool
    no_power: str | None = None

    @property
    def verdict(self) -> str:
        """``refuted`` (the audited epsilon exceeds the accounted one), ``no power`` or ``consistent``."""
        return "refuted" if self.exceeds_accounted else "no power" if self.no_power else "consistent"

    def row(self) -> dict[str, Any]:
        """A flat, JSON-ready record."""
        flat = {key: value for key, value in asdict(self).items() if key != "bound"} | {"verdict": self.verdict}
        return {**flat, **{key: list(value) if isinstance(value, tuple) else value
                           for key, value in asdict(self.bound).items()}}


def audit_groups(scores: Any, included: Any, groups: Any, *, epsilon_accounted: float | Mapping[str, float],
                 delta: float, confidence: float = DEFAULT_CONFIDENCE) -> list[GroupAudit]:
    """The one-run audit of each group's canaries, Bonferroni over the groups (module docstring).

    Parameters
    ----------
    scores : (m,) array
        All canaries' scores from the ONE run.
    included : (m,) bool array
        Which were in.
    groups : (m,) array of str
        Each canary's group.
    epsilon_accounted : float or mapping group -> float
        The run's epsilon at ``delta`` (or each group's accounted epsilon).
    delta : float
        The run's delta, in (0, 1).
    confidence : float
        Joint confidence over every group and every guess count, in (0, 1).
    """
    labels = np.asarray(groups).astype(str).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    truth = np.asarray(included, dtype=bool).ravel()
    if not (len(labels) == len(scores) == len(truth)):
        raise ValueError(f"scores, included and groups need one entry per canary; got {len(scores)}, "
                         f"{len(truth)}, {len(labels)}")
    names = list(dict.fromkeys(labels))
    accounted = (dict(epsilon_accounted) if isinstance(epsilon_accounted, Mapping)
                 else dict.fromkeys(names, float(epsilon_accounted)))
    missing = [name for name in names if name not in accounted]
    if missing:
        raise ValueError(f"epsilon_accounted has no value for the groups {missing}")
    out = []
    for name in names:
        mask = labels == name
        bound = one_run_bounds(scores[mask], truth[mask], delta=delta, confidence=confidence, family=len(names))
        epsilon = float(accounted[name])
        mu = gdp_mu(epsilon, delta) if epsilon > 0 else 0.0
        out.append(GroupAudit(group=name, bound=bound, epsilon_accounted=epsilon, mu_accounted=mu,
                              exceeds_accounted=bool(bound.epsilon_lower > epsilon),
                              exceeds_gaussian_hypothesis=bool(bound.mu_lower > mu),
                              no_power=one_run_no_power(bound, epsilon)))
    return out


def summary(audits: Sequence[GroupAudit]) -> str:
    """One line per group: the bounds, the accounted values, the power, and a BUG line for a refuted one."""
    lines = []
    for a in audits:
        b = a.bound
        lines.append(f"{a.group}: m={b.canaries} ({b.included} in); Steinke eps >= {b.epsilon_lower:.3f} "
                     f"({b.epsilon_correct}/{sum(b.epsilon_guesses)} right, k+/k- {b.epsilon_guesses}); f-DP mu >= "
                     f"{b.mu_lower:.3f} (eps {b.mu_epsilon_lower:.3f} at delta {b.delta:g}); accounted eps "
                     f"{a.epsilon_accounted:.3f} (mu {a.mu_accounted:.3f}); could certify at most eps "
                     f"{b.largest_certifiable_epsilon:.3f} / mu {b.largest_certifiable_mu:.3f}; "
                     f"confidence {b.confidence} over {b.family_size} tests")
        if a.exceeds_accounted:
            lines.append(f"  BUG: {a.group}'s audited epsilon exceeds its accounted epsilon: the trainer or the "
                         f"accountant (or the audit) is wrong")
        elif a.no_power:
            lines.append(f"  NO POWER: {a.group}: {a.no_power}")
        if not a.exceeds_accounted and a.exceeds_gaussian_hypothesis:
            lines.append(f"  {a.group}: mu_lower exceeds the accounted (eps, delta)'s Gaussian mu: the run is not "
                         f"that mu-GDP (the (eps, delta) claim itself is not refuted)")
    return "\n".join(lines)


__all__ = ["GUESS_FRACTIONS", "GroupAudit", "OneRunBound", "audit_groups", "count_correct", "fdp_least_mass",
           "fdp_p_value", "fdp_refutes", "gdp_delta", "gdp_epsilon", "gdp_mu", "guess_grid", "one_run_bounds",
           "one_run_mu_lower", "one_run_no_power", "summary"]
