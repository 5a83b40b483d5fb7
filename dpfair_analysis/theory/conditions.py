"""Paper 001's ordering conditions (Theorems 3, 4, 5), as checks against measured terms.

Paper: ``paper 001_b43f969615163a73.txt`` (Tran, Dinh, Fioretto, NeurIPS'21). Its
appendix (the proofs) is missing from our copy; every setting it would have fixed is
chosen here and said where it is used.

* **Theorem 3** (Sec. 7, Eq. (5)): for groups a, b with fractions p_z = |D_z|/|D|,
  R_a^clip > R_b^clip whenever ||g_{D_a}|| p_a^2/2 >= (5/2) C + ||g_{D_b}|| (1 + p_b + p_b^2/2).
  :func:`theorem3_condition`, :func:`theorem3_agreement`; the clip term of Theorem 2 is
  computed exactly for quadratic losses by :func:`clip_terms_quadratic`, and
  :func:`search_theorem3` looks for instances where the condition holds and the order
  does not.

  Verdict (our derivation, checked by the search and by the tests): with TWO groups
  (p_a + p_b = 1), full batch (B = D, no variance), group Hessians 0 <= H_z <= (1/eta) I
  (convex, beta-smooth, eta <= 1/max beta), the condition IS sufficient. Proof sketch: write
  G = ||g_a||, g = ||g_b||, u = g_bar_D (||u|| <= C, a mean of clipped vectors) and
  M_z = eta H_z in [0, I]. Then

      R_a/eta >= <g_a, g_D> - G C - ||g_D||^2 / 2 >= p_a G^2 - p_b G g - G C - (p_a G + p_b g)^2 / 2,
      R_b/eta <= g (p_a G + p_b g + C) + C^2 / 2,

  so with p_a + p_b = 1 and p_a (1 - p_a/2) = p_a^2/2 + p_a p_b,

      (R_a - R_b)/eta >= (p_a^2/2) G^2 + p_a p_b G^2 - G (C + g (1 + p_a p_b)) - g C - C^2/2
                         - g^2 (p_b + p_b^2/2).

  Eq. (5) says (p_a^2/2) G >= 5C/2 + g (1 + p_b + p_b^2/2), hence G >= 5C and G >= 2g/p_a^2 >= 2g,
  and the right side is >= (3/2) G C + (3/2) p_b^2 G g + p_a p_b G^2 - g C - C^2/2 - g^2 p_b (1 + p_b/2),
  where (3/4) G C >= 15 C^2/4 > C^2/2, (3/4) G C >= (3/2) g C > g C and
  p_a p_b G^2 >= 4 p_b g^2 / p_a^3 >= g^2 p_b (1 + p_b/2): strictly positive (C > 0).
  It FAILS (a) with three or more groups -- the paper's "w.l.o.g. |A| = 2" is not without
  loss of generality, because a third group's clipping bias enters g_D - g_bar_D and can
  point against g_a (:data:`THREE_GROUP_COUNTEREXAMPLE`); and (b) with mini-batches whose
  gradient variance is large (the paper's "small variance" assumption is load-bearing:
  -eta^2/2 Tr(H_a Cov(g_B)) can dominate R_a; :data:`MINIBATCH_COUNTEREXAMPLE`).

* **Theorem 4** (Sec. 8): R_a^noise > R_b^noise whenever Tr(H_a) > Tr(H_b). With
  R_z^noise = (eta^2/2) Tr(H_z) C^2 sigma^2 (Thm 2) this is an identity of the formula;
  :func:`theorem4_agreement` checks it against *measured* noise terms.

* **Theorem 5** (Sec. 8): 1 - sum_k f_k^2 is maximal (1 - 1/K) at the uniform
  distribution and minimal (0) at one-hot vectors: :func:`~dpfair_analysis.fairness.metrics.boundary_proxy`,
  :func:`theorem5_extremes`; its relation to the distance to the decision boundary:
  :func:`margin_and_proxy` (binary logistic regression: 2p(1-p) is a strictly decreasing
  function of |z|, so its Spearman correlation with the margin |z|/||w|| is -1).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch import nn
from torch.func import functional_call, jacrev, vmap
from tqdm import tqdm

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.metrics import boundary_proxy, boundary_proxy_of_logits
from dpfair_analysis.gradients import mean_loss_gradient, parameters_of
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.validation import check_nonnegative, check_positive, check_positive_int, check_seed

VERDICTS = ("confirmed", "violated", "silent")


# ============================================================================ Theorem 3
def theorem3_sides(norm_a: float, norm_b: float, p_a: float, p_b: float, clip_bound: float, *,
                   clip_coefficient: float = 2.5) -> tuple[float, float]:
    """(lhs, rhs) of paper 001 Eq. (5): lhs = ||g_a|| p_a^2 / 2, rhs = 5C/2 + ||g_b|| (1 + p_b + p_b^2/2).

    ``clip_coefficient`` is the printed 5/2 in front of C; the claims registry lowers it to show
    that its searches find violations of a weakened condition (a check that can fail)."""
    norm_a, norm_b = check_nonnegative(norm_a, "norm_a"), check_nonnegative(norm_b, "norm_b")
    for value, name in ((p_a, "p_a"), (p_b, "p_b")):
        if not 0 <= value <= 1:
            raise ValueError(f"{name} must be a fraction in [0, 1], got {value!r}")
    clip_bound = check_positive(clip_bound, "clip_bound")
    return norm_a * p_a ** 2 / 2, clip_coefficient * clip_bound + norm_b * (1 + p_b + p_b ** 2 / 2)


def theorem3_condition(grad_norms: Mapping[str, float], fractions: Mapping[str, float], *,
                       clip_bound: float) -> pd.DataFrame:
    """Paper 001 Theorem 3, Eq. (5), for every ordered pair of groups (a, b), a != b.

    Parameters
    ----------
    grad_norms : mapping group -> ||g_{D_a}||
        Norm of each group's mean (non-private, unclipped) gradient at theta_t.
    fractions : mapping group -> p_a = |D_a| / |D|
        Same keys as ``grad_norms``.
    clip_bound : float
        C > 0.

    Returns
    -------
    pandas.DataFrame
        Columns a, b, norm_a, norm_b, p_a, p_b, lhs, rhs, predicts (lhs >= rhs: the
        theorem predicts R_a^clip > R_b^clip). The condition is only sufficient: when
        ``predicts`` is False the theorem says nothing.
    """
    if set(grad_norms) != set(fractions):
        raise ValueError(f"grad_norms and fractions must name the same groups, got {sorted(map(str, grad_norms))} "
                         f"and {sorted(map(str, fractions))}")
    if len(grad_norms) < 2:
        raise ValueError(f"need at least two groups, got {len(grad_norms)}")
    rows = []
    for a, b in itertools.permutations(grad_norms, 2):
        lhs, rhs = theorem3_sides(grad_norms[a], grad_norms[b], fractions[a], fractions[b], clip_bound)
        rows.append({"a": a, "b": b, "norm_a": float(grad_norms[a]), "norm_b": float(grad_norms[b]),
                     "p_a": float(fractions[a]), "p_b": float(fractions[b]), "lhs": lhs, "rhs": rhs,
                     "predicts": bool(lhs >= rhs)})
    return pd.DataFrame(rows)


def group_gradient_norms(model: nn.Module, data: GroupedDataset, *,
                         params: Mapping[str, torch.Tensor] | None = None) -> pd.DataFrame:
    """||g_{D_a}|| (norm of the mean cross-entropy gradient of each group) and p_a, at ``params``.

    Returns columns group, n, p, grad_norm (groups in ``data.group_names`` order; empty
    groups get NaN). Feed ``dict(zip(group, grad_norm))`` and ``dict(zip(group, p))`` to
    :func:`theorem3_condition`.
    """
    params = parameters_of(model) if params is None else dict(params)
    sizes = data.group_sizes().tolist()
    rows = []
    for k, name in enumerate(data.group_names):
        mask = data.group == k
        norm = math.nan
        if sizes[k]:
            g = mean_loss_gradient(model, data.X[mask], data.y[mask], params=params)
            norm = float(torch.linalg.vector_norm(torch.cat([t.reshape(-1) for t in g.values()])))
        rows.append({"group": name, "n": sizes[k], "p": sizes[k] / max(len(data), 1), "grad_norm": norm})
    return pd.DataFrame(rows)


def _measured_map(measured: pd.DataFrame | Mapping[str, float], column: str) -> dict[str, float]:
    if isinstance(measured, pd.DataFrame):
        if not {"group", column} <= set(measured.columns):
            raise ValueError(f"measured must have columns 'group' and {column!r}, got {list(measured.columns)}")
        frame = measured.groupby("group", sort=False)[column].mean()
        return {str(k): float(v) for k, v in frame.items()}
    if isinstance(measured, Mapping):
        return {str(k): float(v) for k, v in measured.items()}
    raise TypeError(f"measured must be a DataFrame (group, {column}) or a mapping group -> value, "
                    f"got {type(measured).__name__}")


def _order(x: float, y: float, tol: float) -> str:
    if abs(x - y) <= tol:
        return "a=b"
    return "a>b" if x > y else "a<b"


def theorem3_agreement(condition: pd.DataFrame, measured: pd.DataFrame | Mapping[str, float], *,
                       tol: float = 0.0) -> pd.DataFrame:
    """Theorem 3's predictions beside the measured order of the clip terms.

    Parameters
    ----------
    condition : DataFrame
        From :func:`theorem3_condition`.
    measured : DataFrame with columns group, clip -- or mapping group -> R^clip
        Measured per-group clip terms (e.g. Theorem 2's decomposition averaged over steps;
        several rows per group are averaged).
    tol : float
        |R_a - R_b| <= tol counts as a tie ("a=b").

    Returns
    -------
    pandas.DataFrame
        ``condition``'s columns plus clip_a, clip_b, measured ("a>b", "a<b", "a=b") and
        verdict: "confirmed" (predicted and measured a > b), "violated" (predicted but not
        measured a > b) or "silent" (the sufficient condition does not hold).
    """
    values = _measured_map(measured, "clip")
    tol = check_nonnegative(tol, "tol")
    missing = sorted(set(map(str, condition["a"])) - set(values))
    if missing:
        raise ValueError(f"measured clip terms lack groups {missing}")
    out = condition.copy()
    out["clip_a"] = [values[str(a)] for a in out["a"]]
    out["clip_b"] = [values[str(b)] for b in out["b"]]
    out["measured"] = [_order(x, y, tol) for x, y in zip(out["clip_a"], out["clip_b"])]
    out["verdict"] = ["silent" if not p else ("confirmed" if m == "a>b" else "violated")
                      for p, m in zip(out["predicts"], out["measured"])]
    return out


# ---------------------------------------------- exact clip term for quadratic losses
def clip_vectors(grads: np.ndarray, clip_bound: float) -> np.ndarray:
    """pi_C(g_i) = g_i min(1, C/||g_i||), row-wise (Algorithm 1 of paper 001)."""
    norms = np.linalg.norm(grads, axis=1, keepdims=True)
    return grads * np.minimum(1.0, clip_bound / np.where(norms > 0, norms, 1.0))


def clip_terms_quadratic(grads: np.ndarray, group: np.ndarray, hessians: np.ndarray, *, clip_bound: float,
                         lr: float, batch_size: int | None = None) -> np.ndarray:
    """R_z^clip of paper 001 Thm 2, Eq. (4), computed exactly from its definition.

        R_z^clip = eta (<g_z, g_D> - <g_z, g_bar_D>) + eta^2/2 (E[g_bar_B^T H_z g_bar_B] - E[g_B^T H_z g_B])

    with g_z, g_D the group and population mean per-sample gradients, g_bar_D the mean of
    the clipped per-sample gradients pi_C(g_i), g_B / g_bar_B the same means over a batch B.
    For quadratic group losses L_z(theta) = L_z(theta_t) + g_z^T (theta - theta_t) +
    (1/2)(theta - theta_t)^T H_z (theta - theta_t) the second-order expansion is exact.

    Parameters
    ----------
    grads : (n, d) array
        Per-sample gradients g_i at theta_t.
    group : (n,) int array
        Group id of each row, 0..G-1 (every group non-empty).
    hessians : (G, d, d) array
        Symmetric group Hessians H_z (of the group MEAN loss).
    clip_bound, lr : float
        C and eta.
    batch_size : int, optional
        None: B = D (full batch, the expectations are the values). An int b: B uniform
        over all size-b subsets of D (sampling without replacement), enumerated exactly
        (refused above 20,000 subsets).

    Returns
    -------
    numpy.ndarray
        R_z^clip per group, shape (G,).
    """
    grads = np.asarray(grads, dtype=np.float64)
    group = np.asarray(group)
    hessians = np.asarray(hessians, dtype=np.float64)
    clip_bound, lr = check_positive(clip_bound, "clip_bound"), check_positive(lr, "lr")
    if grads.ndim != 2 or group.shape != (len(grads),):
        raise ValueError(f"grads must be (n, d) and group (n,), got {grads.shape} and {group.shape}")
    n_groups = hessians.shape[0]
    if hessians.shape != (n_groups, grads.shape[1], grads.shape[1]):
        raise ValueError(f"hessians must be (G, d, d) with d = {grads.shape[1]}, got {hessians.shape}")
    if set(np.unique(group).tolist()) != set(range(n_groups)):
        raise ValueError(f"group must use every id 0..{n_groups - 1} (one Hessian per non-empty group)")
    clipped = clip_vectors(grads, clip_bound)
    g_d, gbar_d = grads.mean(axis=0), clipped.mean(axis=0)
    n = len(grads)
    if batch_size is None:
        second_clipped = np.einsum("i,zij,j->z", gbar_d, hessians, gbar_d)
        second_plain = np.einsum("i,zij,j->z", g_d, hessians, g_d)
    else:
        b = check_positive_int(batch_size, "batch_size")
        if b > n:
            raise ValueError(f"batch_size={b} exceeds n={n}")
        count = math.comb(n, b)
        if count > 20_000:
            raise ValueError(f"{count} batches of size {b} from {n} rows: too many to enumerate (max 20,000)")
        second_clipped = np.zeros(n_groups)
        second_plain = np.zeros(n_groups)
        for subset in itertools.combinations(range(n), b):
            idx = list(subset)
            gb, gbar = grads[idx].mean(axis=0), clipped[idx].mean(axis=0)
            second_clipped += np.einsum("i,zij,j->z", gbar, hessians, gbar) / count
            second_plain += np.einsum("i,zij,j->z", gb, hessians, gb) / count
    group_means = np.stack([grads[group == z].mean(axis=0) for z in range(n_groups)])
    first = lr * (group_means @ g_d - group_means @ gbar_d)
    return first + lr ** 2 / 2 * (second_clipped - second_plain)


@dataclass(frozen=True)
class QuadraticInstance:
    """Two or more groups with per-sample gradients, group Hessians, C and eta (see
    :func:`clip_terms_quadratic`). ``lr <= 1 / max_z lambda_max(H_z)`` and H_z >= 0."""

    grads: np.ndarray
    group: np.ndarray
    hessians: np.ndarray
    clip_bound: float
    lr: float
    batch_size: int | None = None

    def clip_terms(self) -> np.ndarray:
        return clip_terms_quadratic(self.grads, self.group, self.hessians, clip_bound=self.clip_bound,
                                    lr=self.lr, batch_size=self.batch_size)

    def group_norms(self) -> np.ndarray:
        return np.array([np.linalg.norm(self.grads[self.group == z].mean(axis=0))
                         for z in range(self.hessians.shape[0])])

    def fractions(self) -> np.ndarray:
        return np.bincount(self.group, minlength=self.hessians.shape[0]) / len(self.group)

    def assumptions_hold(self, tol: float = 1e-12) -> bool:
        """H_z symmetric PSD (convex) and eta * lambda_max(H_z) <= 1 (eta <= 1/beta) for every group."""
        eig = np.linalg.eigvalsh(self.hessians)
        symmetric = np.allclose(self.hessians, np.swapaxes(self.hessians, 1, 2))
        return bool(symmetric and eig.min() >= -tol and self.lr * eig.max() <= 1 + tol)

    def violations(self, *, clip_coefficient: float = 2.5) -> list[dict]:
        """Ordered pairs (a, b) where Eq. (5) holds but R_a^clip <= R_b^clip."""
        norms, p, r = self.group_norms(), self.fractions(), self.clip_terms()
        out = []
        for a, b in itertools.permutations(range(len(norms)), 2):
            lhs, rhs = theorem3_sides(norms[a], norms[b], p[a], p[b], self.clip_bound,
                                      clip_coefficient=clip_coefficient)
            if lhs >= rhs and r[a] <= r[b]:
                out.append({"a": a, "b": b, "lhs": lhs, "rhs": rhs, "clip_a": float(r[a]), "clip_b": float(r[b])})
        return out


THREE_GROUP_COUNTEREXAMPLE = QuadraticInstance(
    grads=np.array([[12.0], [12.0], [12.0], [12.0], [0.0], [-100.0]]),
    group=np.array([0, 0, 0, 0, 1, 2]),
    hessians=np.zeros((3, 1, 1)),
    clip_bound=1.0, lr=1.0)
"""Theorem 3 fails with three groups (shrunk by hand from :func:`search_theorem3` output).

Group a (id 0): four rows with gradient 12, p_a = 2/3, ||g_a|| = 12; group b (id 1): one
row with gradient 0; group c (id 2): one row with gradient -100. C = 1, eta = 1, all group
losses linear (H = 0: convex, 0-smooth, so any eta respects eta <= 1/beta). Eq. (5):
12 (2/3)^2 / 2 = 8/3 >= 5/2 + 0 -- holds. But g_D = (48 - 100)/6 = -26/3 and
g_bar_D = (4 - 1)/6 = 1/2, so R_a^clip = 12 (-26/3 - 1/2) = -110 < 0 = R_b^clip."""

MINIBATCH_COUNTEREXAMPLE = QuadraticInstance(
    grads=np.array([[12.0, 40.0], [12.0, -40.0], [0.0, 0.0]]),
    group=np.array([0, 0, 1]),
    hessians=np.array([[[0.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]]),
    clip_bound=1.0, lr=1.0, batch_size=1)
"""Theorem 3 fails for two groups when the batch gradient has large variance.

Two rows of group a with gradients (12, +-40) (mean g_a = (12, 0), p_a = 2/3), one row of
group b with gradient 0; C = 1, eta = 1, H_a = diag(0, 1) (eta * beta_a = 1), H_b = 0;
batches of one row drawn uniformly (so E over 3 batches). Eq. (5): 12 (2/3)^2 / 2 = 8/3
>= 5/2 -- holds. R_b^clip = 0 (g_b = 0, H_b = 0). R_a^clip = <g_a, g_D - g_bar_D> +
(1/2)(E[g_bar_B2^2] - E[g_B2^2]) with g_D = (8, 0), g_bar_D = (8/sqrt(1744), 0),
E[g_B2^2] = 2 * 1600 / 3 and E[g_bar_B2^2] = 2 * 1600 / (3 * 1744):
R_a^clip = 96 (1 - 1/sqrt(1744)) - (1600/3)(1 - 1/1744) = -439.4 < 0. Full batch, the same
rows give R_a^clip = +93.7 > 0: the violation is the variance term that the paper's
"small variance" assumption excludes."""


def _random_instance(rng: np.random.Generator, *, n_groups: int, dim: int, max_rows: int,
                     batch_size: int | None) -> QuadraticInstance:
    sizes = rng.integers(1, max_rows + 1, size=n_groups)
    group = np.repeat(np.arange(n_groups), sizes)
    n = len(group)
    clip_bound = float(10 ** rng.uniform(-2, 1))
    # signed per-sample gradients on log scales from C/10 to 1000 C, so that Eq. (5) (which
    # needs ||g_a|| >= 5C/p_a^2) holds often and clipping is both active and inactive
    scales = clip_bound * 10 ** rng.uniform(-1, 3, size=(n, 1))
    directions = rng.standard_normal((n, dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    grads = scales * directions
    if rng.random() < 0.5:  # shared directions with signs: the cancellations clipping breaks
        base = rng.standard_normal(dim)
        grads = scales * np.sign(rng.standard_normal((n, 1))) * (base / np.linalg.norm(base))
    factors = rng.standard_normal((n_groups, dim, dim)) * (rng.random((n_groups, 1, 1)) < 0.8)
    hessians = factors @ np.swapaxes(factors, 1, 2)
    beta = max(float(np.linalg.eigvalsh(hessians).max()), 1e-12)
    lr = float(rng.uniform(0.05, 1.0) / beta) if beta > 1e-9 else float(10 ** rng.uniform(-2, 0))
    if rng.random() < 0.3:
        lr = 1.0 / beta if beta > 1e-9 else lr
    b = None if batch_size is None else min(batch_size, n)
    return QuadraticInstance(grads, group, hessians, clip_bound, lr, b)


@dataclass
class SearchResult:
    """What :func:`search_theorem3` tried and found."""

    trials: int
    instances_with_condition: int
    pairs_with_condition: int
    min_normalised_margin: float
    counterexample: QuadraticInstance | None
    violations: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        return {"trials": self.trials, "instances_with_condition": self.instances_with_condition,
                "pairs_with_condition": self.pairs_with_condition,
                "min_normalised_margin": self.min_normalised_margin,
                "counterexample_found": self.counterexample is not None}


def search_theorem3(*, n_groups: int = 2, dim: int = 2, max_rows: int = 4, batch_size: int | None = None,
                    trials: int = 20_000, seed: int = 0, progress: bool = False,
                    clip_coefficient: float = 2.5) -> SearchResult:
    """Random search for instances where Eq. (5) holds but R_a^clip <= R_b^clip.

    Instances (seeded): ``n_groups`` groups of 1..``max_rows`` rows, per-sample gradients
    in R^``dim`` with norms log-uniform in [C/10, 1000 C] and random directions or one
    shared direction with random signs, C log-uniform in [0.01, 10], group Hessians
    H_z = F F^T (PSD; 20% are 0), eta = u / max_z lambda_max(H_z) with u ~ U(0.05, 1] (30%:
    eta = 1/beta exactly). These are Theorem 3's assumptions: convex (H_z >= 0), beta-smooth
    quadratic group losses, eta <= 1/max beta; full batch (``batch_size=None``, no
    variance) unless a batch size is given. The margin of a pair with the condition is
    (R_a - R_b) / (eta (||g_a|| + ||g_b|| + C)^2); the first instance with a violation is
    returned (not shrunk: see the module's stored counterexamples). ``clip_coefficient``:
    Eq. (5)'s 5/2 (see :func:`theorem3_sides`).
    """
    check_positive_int(trials, "trials")
    rng = np.random.default_rng(check_seed(seed))
    with_condition = pairs = 0
    worst = math.inf
    for _ in tqdm(range(trials), disable=not progress, desc="theorem 3 search"):
        inst = _random_instance(rng, n_groups=n_groups, dim=dim, max_rows=max_rows, batch_size=batch_size)
        norms, p, r = inst.group_norms(), inst.fractions(), inst.clip_terms()
        seen = False
        for a, b in itertools.permutations(range(n_groups), 2):
            lhs, rhs = theorem3_sides(norms[a], norms[b], p[a], p[b], inst.clip_bound,
                                      clip_coefficient=clip_coefficient)
            if lhs < rhs:
                continue
            seen = True
            pairs += 1
            margin = (r[a] - r[b]) / (inst.lr * (norms[a] + norms[b] + inst.clip_bound) ** 2)
            worst = min(worst, float(margin))
        with_condition += seen
        violations = inst.violations(clip_coefficient=clip_coefficient) if seen else []
        if violations:
            return SearchResult(_ + 1, with_condition, pairs, worst, inst, violations)
    return SearchResult(trials, with_condition, pairs, worst, None, [])


# ============================================================================ Theorem 4
def theorem4_agreement(traces: pd.DataFrame | Mapping[str, float],
                       noise_terms: pd.DataFrame | Mapping[str, float], *, tol: float = 0.0) -> pd.DataFrame:
    """Paper 001 Theorem 4: Tr(H_a) > Tr(H_b) => R_a^noise > R_b^noise, per ordered pair.

    Parameters
    ----------
    traces : DataFrame (group, trace) or mapping group -> Tr(H_a)
        E.g. :func:`~dpfair_analysis.theory.hessian.group_hessian_traces`, whose "all" row is ignored.
    noise_terms : DataFrame (group, noise) or mapping group -> R_a^noise
        The measured noise terms.
    tol : float
        Differences within ``tol`` are ties (in both traces and noise terms).

    Returns
    -------
    pandas.DataFrame
        a, b, trace_a, trace_b, noise_a, noise_b, predicts (trace_a > trace_b + tol),
        measured ("a>b"/"a<b"/"a=b") and verdict ("confirmed", "violated", "silent").
    """
    tr = {k: v for k, v in _measured_map(traces, "trace").items() if k != "all"}
    noise = {k: v for k, v in _measured_map(noise_terms, "noise").items() if k != "all"}
    tol = check_nonnegative(tol, "tol")
    if set(tr) != set(noise):
        raise ValueError(f"traces and noise terms must name the same groups, got {sorted(tr)} and {sorted(noise)}")
    rows = []
    for a, b in itertools.permutations(tr, 2):
        predicts = tr[a] > tr[b] + tol
        measured = _order(noise[a], noise[b], tol)
        rows.append({"a": a, "b": b, "trace_a": tr[a], "trace_b": tr[b], "noise_a": noise[a],
                     "noise_b": noise[b], "predicts": predicts, "measured": measured,
                     "verdict": "silent" if not predicts else ("confirmed" if measured == "a>b" else "violated")})
    return pd.DataFrame(rows)


# ============================================================================ Theorem 5
def theorem5_extremes(n_classes: int) -> dict[str, float]:
    """The proxy at the uniform vector (1 - 1/K, the maximum) and at a one-hot vector (0, the minimum).

    Maximum: sum_k f_k^2 >= (sum_k f_k)^2 / K = 1/K by Cauchy-Schwarz, equality iff all
    f_k are equal. Minimum: sum_k f_k^2 <= sum_k f_k = 1 since 0 <= f_k <= 1, equality iff
    every f_k is 0 or 1, i.e. one-hot.
    """
    k = check_positive_int(n_classes, "n_classes")
    if k < 2:
        raise ValueError(f"n_classes must be at least 2, got {n_classes}")
    uniform = np.full(k, 1.0 / k)
    one_hot = np.eye(k)[0]
    return {"uniform": float(boundary_proxy(uniform)), "one_hot": float(boundary_proxy(one_hot)),
            "max_theory": 1 - 1 / k, "min_theory": 0.0}


def margin_and_proxy(model: nn.Module, X: torch.Tensor, *,
                     params: Mapping[str, torch.Tensor] | None = None) -> pd.DataFrame:
    """Per-sample distance to the decision boundary beside the proxy 1 - sum_k f_k^2.

    Binary :class:`~dpfair_analysis.models.LogisticRegression` (score z = w^T x + b): the
    exact Euclidean distance |z| / ||w|| and proxy 2 p (1 - p), p = sigmoid(z), a strictly
    decreasing function of |z| (d/d|z| of 2 sigma(|z|) sigma(-|z|) < 0 for |z| > 0).
    Any other model (e.g. an MLP): the first-order (linearised) distance to the boundary
    between the top two classes, (z_top - z_second) / ||grad_x (z_top - z_second)||
    (exact for linear models, an approximation otherwise -- say so when reporting).

    Returns columns margin, proxy, margin_kind ("exact" or "linearised").
    """
    params = parameters_of(model) if params is None else dict(params)
    X = X.flatten(1).to(next(iter(params.values())).dtype)
    if isinstance(model, LogisticRegression) and model.binary:
        w, b = params["linear.weight"].reshape(-1), params.get("linear.bias", torch.zeros(1)).reshape(())
        z = X @ w + b
        p = torch.sigmoid(z)
        return pd.DataFrame({"margin": (z.abs() / torch.linalg.vector_norm(w)).detach().numpy(),
                             "proxy": (2 * p * (1 - p)).detach().numpy(), "margin_kind": "exact"})

    def gap(x: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model, params, (x.unsqueeze(0),)).squeeze(0)
        top2 = torch.topk(logits, 2).values
        return top2[0] - top2[1]

    gaps = vmap(gap)(X)
    grads = vmap(jacrev(gap))(X)
    margin = gaps / torch.linalg.vector_norm(grads, dim=1).clamp_min(1e-12)
    proxy = boundary_proxy_of_logits(functional_call(model, params, (X,)))
    return pd.DataFrame({"margin": margin.detach().numpy(), "proxy": proxy.detach().numpy(),
                         "margin_kind": "linearised"})


def margin_proxy_correlation(model: nn.Module, X: torch.Tensor, *,
                             params: Mapping[str, torch.Tensor] | None = None) -> dict[str, float]:
    """Spearman and Pearson correlation between distance to the boundary and 1 - sum f^2.

    Theorem 5's reading ("closer to the boundary, larger proxy") predicts a negative
    correlation; for binary logistic regression the Spearman coefficient is exactly -1
    (up to ties), since the proxy is a strictly decreasing function of the margin.
    """
    frame = margin_and_proxy(model, X, params=params)
    return {"spearman": float(stats.spearmanr(frame["margin"], frame["proxy"]).statistic),
            "pearson": float(stats.pearsonr(frame["margin"], frame["proxy"]).statistic),
            "n": len(frame), "margin_kind": str(frame["margin_kind"].iloc[0])}
