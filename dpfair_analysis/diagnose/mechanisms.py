"""Each training method as the predictor sees it: per-sample coefficients c_i and the noise std s of its step.

DP-SGD's step (as :mod:`dpfair_analysis.training.loop` runs it; Poisson sampling at rate q = b/n) is
theta' = theta - r (u + lambda w), u = (1/b)(sum_{i in B} c_i g_i + N(0, s^2 I)), with c_i = min(1, C/||g_i||)
for DP-SGD, s = sigma C, and lambda w the gradient of the model's L2 penalty. The other methods change c_i
and s through their own training code, evaluated on a batch's expected, noise-free statistics: DPSGD-F's
group bounds (:func:`~dpfair_analysis.training.dpsgdf.dpsgdf_group_bounds`), Naive's group weights
(:func:`~dpfair_analysis.training.dpsgdf.naive_group_weights`), FairDP's bounds at the fixed point of its
update (:mod:`dpfair_analysis.training.fairdp`) and paper 001's mitigation objective
(:class:`~dpfair_analysis.training.mitigation.FairnessLensMitigation`). :func:`mechanism_for` sets a method
at a plan's privacy (DPSGD-F, Naive and FairDP stop at DP-SGD's epsilon, as ``dpfair compare`` runs them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from dp_accounting import dp_event
from torch.func import functional_call, grad, vmap

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.diagnose.equal_privacy import noise_for, order_window, steps_within
from dpfair_analysis.diagnose.plan import PrivacyPlan, ResolvedPlan
from dpfair_analysis.diagnose.problem import Problem
from dpfair_analysis.fairness.metrics import boundary_proxy_of_logits
from dpfair_analysis.gradients import clip_factors
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.dpsgdf import dpsgdf_group_bounds, naive_group_weights
from dpfair_analysis.training.fairdp import bias_coefficient, noise_coefficient, target_clipped_fraction
from dpfair_analysis.training.mitigation import FairnessLensMitigation

#: Relative tolerance of the noise multipliers the recommendations calibrate (sigma* <= sigma <= 1.01 sigma*:
#: each still meets its epsilon; a prediction does not need the planned run's 1e-4).
RECOMMENDATION_TOLERANCE = 1e-2


@dataclass(frozen=True)
class Mechanism:
    """One training method as the predictor sees it: per-sample coefficients c_i and the noise std s."""

    name: str                       # sgd | dpsgd | dpsgdf | naive | mitigation | fairdp
    clip_bound: float = math.inf
    sigma: float = 0.0
    steps: int = 1
    lr: float = 1.0
    batch_size: float = 1.0
    sampling_rate: float = 1.0
    max_ratio: float = 10.0
    gammas: tuple[float, float] = (0.0, 0.0)
    label: str = ""

    @property
    def private(self) -> bool:
        return self.name != "sgd"

    def coefficients(self, norms: torch.Tensor, group: torch.Tensor, problem: Problem
                     ) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(bounds C_i, coefficients c_i = w_i min(1, C_i/||g_i||), noise std s) for these rows."""
        ones = torch.ones_like(norms)
        if self.name == "sgd":
            return torch.full_like(norms, math.inf), ones, 0.0
        C = self.clip_bound
        if self.name in ("dpsgd", "mitigation"):
            bounds = torch.full_like(norms, C)
            return bounds, clip_factors(norms, bounds), self.sigma * C
        if self.name == "dpsgdf":  # paper 000 Alg. 2 (training/dpsgdf.py) on a batch's expected, noise-free counts
            clipped = (norms > C).to(torch.float64)
            sizes = torch.bincount(group, minlength=problem.n_groups).to(torch.float64)
            frac = torch.bincount(group, weights=clipped, minlength=problem.n_groups) / sizes.clamp(min=1)
            rows = self.batch_size * problem.train_sizes / problem.n      # b^k: the group's expected rows per batch
            group_bounds, _ = dpsgdf_group_bounds(rows * frac, rows * (1 - frac), base_clip=C,
                                                  expected_batch_size=self.batch_size, max_ratio=self.max_ratio)
            bounds = group_bounds[group]
            return bounds, clip_factors(norms, bounds), self.sigma * float(group_bounds.max())
        if self.name == "fairdp":  # paper 002 as training/fairdp.py runs it, at its update's fixed point
            group_bounds = fairdp_stationary_bounds(
                norms, group, n_groups=problem.n_groups, initial=C,
                bias_coef=bias_coefficient(self.lr, 1.0 / self.lr),
                noise_coef=noise_coefficient(self.sigma, problem.P, self.batch_size))
            bounds = group_bounds[group]
            return bounds, clip_factors(norms, bounds), self.sigma * float(group_bounds.max())
        # naive (paper 000 Alg. 3, training/dpsgdf.py) with the expected group sizes of a batch, q n_k
        theta = naive_group_weights(self.sampling_rate * problem.train_sizes, expected_batch_size=self.batch_size)
        bounds = torch.full_like(norms, C)
        return bounds, theta[group] * clip_factors(norms, bounds), self.sigma * C * float(theta.max())


def fairdp_stationary_bounds(norms: torch.Tensor, group: torch.Tensor, *, n_groups: int, initial: float,
                             bias_coef: float, noise_coef: float, excess_cap: float = 5.0,
                             grid: int = 512, levels: int = 3) -> torch.Tensor:
    """Each group's FairDP bound at the fixed point of its update on the exact statistics (shape (K,)).

    FairDP (:mod:`dpfair_analysis.training.fairdp`) moves C_k by exp(eta_C (p_k - gamma_k)) each
    step, p_k(C) the group's clipped fraction and gamma_k(C) = min(1, 2V / (a (1 + e_k) + 2 e_k)),
    e_k(C) = mean_{i in k} min(||g_i|| / C - 1, R)^+: it rests where p_k(C) = gamma_k(C), i.e. where
    d tau_k / d C_k = 0 (Eq. 4). p_k falls and e_k falls (so gamma_k rises) as C grows, so
    p_k - gamma_k is non-increasing and the root is unique: found on ``levels`` nested grids of
    ``grid`` points in log C (relative precision 9.2 / grid^levels, 7e-8) within FairDP's
    public range [initial / 100, initial * 100] (a root outside it is the range's end, as the
    update's clamp makes it). A group without rows keeps ``initial``. The statistics are those of
    :func:`~dpfair_analysis.training.fairdp.fairdp_statistics`, read off each group's sorted norms and their
    prefix sums (a bisection step costs two searches, not a pass over the rows).
    """
    low = torch.full((n_groups,), math.log(initial / 100), dtype=torch.float64)
    high = torch.full((n_groups,), math.log(initial * 100), dtype=torch.float64)
    sizes = torch.bincount(group, minlength=n_groups)
    present = sizes > 0
    # norms sorted within each group, padded with +inf: (K, L), and their prefix sums (K, L + 1)
    by_norm = torch.argsort(norms.double())
    order = by_norm[torch.argsort(group[by_norm], stable=True)]
    starts = torch.cumsum(sizes, 0) - sizes
    position = torch.arange(len(order)) - starts[group[order]]
    padded = torch.full((n_groups, max(int(sizes.max()), 1)), math.inf, dtype=torch.float64)
    padded[group[order], position] = norms.double()[order]
    prefix = torch.cat([torch.zeros(n_groups, 1, dtype=torch.float64),
                        torch.cumsum(torch.where(torch.isfinite(padded), padded, 0.0), 1)], 1)
    rows = sizes.to(torch.float64).clamp(min=1.0)

    def excess_of_target(log_clips: torch.Tensor) -> torch.Tensor:  # (K, G) candidate bounds -> p_k - gamma_k
        clips = log_clips.exp()
        within = torch.searchsorted(padded, clips, right=True)                  # rows with ||g|| <= C
        capped = torch.searchsorted(padded, clips * (1 + excess_cap), right=True)  # ... <= C (1 + R)
        clipped = sizes.unsqueeze(1) - within
        middle = (prefix.gather(1, capped) - prefix.gather(1, within)) / clips - (capped - within)
        excess = middle + excess_cap * (sizes.unsqueeze(1) - capped)
        gamma = target_clipped_fraction(excess / rows.unsqueeze(1), bias_coef=bias_coef, noise_coef=noise_coef)
        return clipped / rows.unsqueeze(1) - gamma

    at_low = excess_of_target(low.unsqueeze(1)).squeeze(1) <= 0
    at_high = excess_of_target(high.unsqueeze(1)).squeeze(1) >= 0
    for _ in range(levels):  # the crossing's bracket shrinks by `grid` per level
        points = low.unsqueeze(1) + (high - low).unsqueeze(1) * torch.linspace(0, 1, grid + 1, dtype=torch.float64)
        above = excess_of_target(points) > 0  # still clipping more than the target: the root is larger
        last = above.sum(1).clamp(min=1, max=grid) - 1   # non-increasing: the last point still above
        low, high = points.gather(1, last.unsqueeze(1)).squeeze(1), points.gather(1, (last + 1).unsqueeze(1)).squeeze(1)
    bounds = ((low + high) / 2).exp()
    bounds = torch.where(at_low, torch.full_like(bounds, initial / 100), bounds)
    bounds = torch.where(at_high & ~at_low, torch.full_like(bounds, initial * 100), bounds)
    return torch.where(present, bounds, torch.full_like(bounds, initial))


def mitigation_objective(problem: Problem, mechanism: Mechanism, theta: torch.Tensor,
                         data: GroupedDataset) -> FairnessLensMitigation:
    """Paper 001's mitigation objective with its coefficients from the exact (noise-free) statistics of ``data``
    (population and group means: the curvature rows estimate them as well as all rows)."""
    objective = FairnessLensMitigation(*mechanism.gammas, mechanism.clip_bound)
    sizes = problem.train_sizes.clamp(min=1.0)
    objective.fractions = sizes / sizes.sum()
    params = problem.params(theta)
    G = per_sample_matrix(problem, theta, data.X, data.y)
    clipped = G * clip_factors(G.norm(dim=1), torch.full((len(G),), mechanism.clip_bound, dtype=torch.float64))[:, None]
    bias = G - clipped
    bias = bias * clip_factors(bias.norm(dim=1),
                               torch.full((len(G),), mechanism.clip_bound, dtype=torch.float64))[:, None]
    with torch.no_grad():
        phi = boundary_proxy_of_logits(functional_call(problem.model, params, (data.X.to(torch.float64),)))
    rows = torch.cat([clipped, bias, phi.unsqueeze(1), torch.ones(len(G), 1, dtype=torch.float64)], 1)
    block = torch.zeros(problem.n_groups, rows.shape[1], dtype=torch.float64).index_add_(0, data.group, rows)
    objective.statistics = block
    objective.coefficients = objective._coefficients(params, problem.P)
    return objective


def per_sample_matrix(problem: Problem, theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
                       mechanism: Mechanism | None = None, group: torch.Tensor | None = None) -> torch.Tensor:
    """(n, P) per-sample gradients of the training objective at theta (the mitigation's psi_i if asked)."""
    X = X.to(torch.float64)
    lin = problem.linear
    mitigation = mechanism is not None and mechanism.name == "mitigation"
    if mitigation:
        objective = mitigation_objective(problem, mechanism, theta, problem.curvature_data)
    if lin is not None and (not mitigation or lin.binary):
        Xt = lin.augmented(X)
        scores = lin.scores(theta, Xt)
        if mitigation:  # psi_i's gradient is a multiple of x~_i (binary score)
            return lin.per_sample(binary_mitigation_residuals(objective, scores, y, Xt, group), Xt)
        return lin.per_sample(lin.residuals(scores, y)[0], Xt)
    if mitigation:
        grads, _ = objective.per_sample_gradients(problem.model, X, y, group, params=problem.params(theta))
        return torch.cat([g.reshape(len(X), -1) for g in grads.values()], 1)

    def sample_loss(t: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(problem.model, problem.unflatten(t), (x.unsqueeze(0),)),
                               target.unsqueeze(0))

    chunk = max(1, 2 ** 22 // max(problem.P, 1))
    return vmap(grad(sample_loss), in_dims=(None, 0, 0), chunk_size=chunk)(theta, X, y)


def binary_mitigation_residuals(objective: FairnessLensMitigation, scores: torch.Tensor, y: torch.Tensor,
                                Xt: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """dpsi_i/dz for binary logistic regression, whose grad psi_i = (dpsi_i/dz) x~_i:

        psi_i = L_i + gamma_1 k'_a <grad L_i, v> + gamma_2 k_a phi_i,
        dpsi_i/dz = r_i + gamma_1 k'_a p (1 - p) <x~_i, v> + gamma_2 k_a 2 (1 - 2p) p (1 - p)

    (p = sigma(z), r_i = p - y_i, phi = 2 p (1 - p), <grad L_i, v> = r_i <x~_i, v>; paper 001's mitigation as
    :class:`~dpfair_analysis.training.mitigation.FairnessLensMitigation` defines it), shape (n, 1)."""
    p = torch.sigmoid(scores[:, 0])
    residual = p - y.to(torch.float64)
    if objective.coefficients is None:
        return residual.unsqueeze(1)
    kappa1, kappa2, v = objective.coefficients
    v_flat = torch.cat([v[name].reshape(-1).to(torch.float64) for name in ("linear.weight", "linear.bias")])
    slope = p * (1 - p)
    total = (residual + objective.gamma1 * kappa1[group].to(torch.float64) * slope * (Xt @ v_flat)
             + objective.gamma2 * kappa2[group].to(torch.float64) * 2 * (1 - 2 * p) * slope)
    return total.unsqueeze(1)


def mechanism_for(plan: PrivacyPlan, resolved: ResolvedPlan, method: str, **changes) -> Mechanism:
    """The predictor's view of ``method`` at the plan's settings (equal privacy for DPSGD-F, Naive, FairDP,
    mitigation; their step counts and noise from :mod:`.equal_privacy`)."""
    sigma, steps = resolved.sigma, resolved.steps
    q, b = resolved.sampling_rate, plan.batch_size
    window = order_window(plan.accounting, resolved.optimal_order)
    if method in ("dpsgdf", "naive", "fairdp"):  # stop at DP-SGD's epsilon (paper 000 §6.1.3), as `compare` does
        releases = 2 if method == "fairdp" else 1   # FairDP: counts and capped excess, each at the count noise
        joint = joint_noise_multiplier((plan.count_noise_ratio * sigma,) * releases + (sigma,))
        steps = steps_within(resolved.epsilon, plan.delta, sampling_rate=q, noise_multiplier=joint,
                             max_steps=steps, accounting=window)
    if method == "mitigation":  # counts once (multiplier 10) + statistics at 2 sigma each step, same epsilon
        joint = noise_for(resolved.epsilon, plan.delta, sampling_rate=q, steps=steps, accounting=plan.accounting,
                          near=resolved.accounting_point, guess=sigma, tolerance=RECOMMENDATION_TOLERANCE,
                          once=[dp_event.GaussianDpEvent(10.0)])
        sigma = joint * math.sqrt(1 + 1 / 4)
    kwargs = dict(name=method, clip_bound=plan.clip_bound, sigma=sigma, steps=steps, lr=resolved.lr,
                  batch_size=b, sampling_rate=q, max_ratio=plan.max_ratio, gammas=plan.gammas,
                  label=method.upper())
    kwargs.update(changes)
    return Mechanism(**kwargs)
