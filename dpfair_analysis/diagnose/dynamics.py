"""The run's two moments integrated: the expected private and non-private trajectories, and the noise they
accumulate.

Paper 001's Theorem 2 (corrected noise term with 1/b^2) expands one step's expected group loss in the step's
first two moments; the diagnosis integrates them over the run: :func:`trajectory` the expected trajectories
(what clipping does to learning, including a stalled or collapsed model), :func:`covariance` /
:func:`accumulated_covariance` the noise accumulated around them (the Lyapunov sum of the linearised drift).

The derivation: docs/methods/diagnosis.md, the "How dpfair diagnose predicts" page of the documentation's Methods.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import torch
from torch.func import jacfwd

from dpfair_analysis.diagnose.mechanisms import Mechanism, per_sample_matrix
from dpfair_analysis.diagnose.problem import Problem, ggn_diagonal
from dpfair_analysis.fast_gradients import fast_per_sample_gradients
from dpfair_analysis.gradients import clip_factors
from dpfair_analysis.validation import check_positive, check_positive_int

#: Times the implicit integrator refreshes the drift's Jacobian along a trajectory.
JACOBIAN_REFRESHES = 4
#: Damping epsilon of the Runge-Kutta-Chebyshev steps (:func:`chebyshev_coefficients`): |P_s| <= 1 / T_s(1 +
#: epsilon / s^2) ~ 1 / cosh(sqrt(2 epsilon)) on the stable interval but its start, which shrinks to
#: ~2 s^2 tanh(sqrt(2 epsilon)) / sqrt(2 epsilon). 0.05 (the textbook's) left 0.95^K of a stiff direction's start after K steps: 9% off the
#: step-by-step run on a ten-class logistic regression at r lambda_max = 1; 0.5 (0.65 per step) was exact there.
CHEBYSHEV_DAMPING = 0.5
#: Euler's steps keep h lambda_max <= 0.5 (a quarter of their stable interval [0, 2]: monotone decay).
EULER_STIFFNESS = 0.5
#: Chebyshev steps keep h lambda_max <= this share of their stable interval (lambda_max is estimated at theta_0).
CHEBYSHEV_MARGIN = 0.5


def drift(problem: Problem, mechanism: Mechanism, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(E[step direction] = (1/m) sum_i c_i g_i + lambda w, per-sample norms, noise std) on the drift rows."""
    data = problem.drift_data
    X = data.X.to(torch.float64)
    if mechanism.name == "mitigation":
        G = per_sample_matrix(problem, theta, X, data.y, mechanism, data.group)
        norms = G.norm(dim=1)
        _, c, s = mechanism.coefficients(norms, data.group, problem)
        return (c / len(G)) @ G + problem.penalty(theta), norms, s
    lin = problem.linear
    if lin is not None:
        Xt = problem.augmented(data)
        residuals, _ = lin.residuals(lin.scores(theta, Xt), data.y, curvature=False)
        norms = residuals.norm(dim=1) * problem.augmented_norms(data)
        _, c, s = mechanism.coefficients(norms, data.group, problem)
        return lin.gradient_sum(residuals, Xt, c / len(norms)) + problem.penalty(theta), norms, s
    per_sample, _ = fast_per_sample_gradients(problem.model, X, data.y, params=problem.params(theta))
    norms = per_sample.norms.detach()
    _, c, s = mechanism.coefficients(norms, data.group, problem)
    total = per_sample.weighted_sum(c / len(norms))
    flat = torch.cat([total[name].reshape(-1).detach() for name in problem.names])
    return flat + problem.penalty(theta), norms, s


def held_jacobian(problem: Problem, theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor, weights: torch.Tensor,
                  bounds: torch.Tensor) -> torch.Tensor:
    """A = d/dtheta [(1/m) sum_i c_i(theta) g_i(theta) + lambda w] with each row's bound C_i and weight w_i held
    (c_i = w_i min(1, C_i / ||g_i||); DPSGD-F's bounds and Naive's weights are piecewise constant): closed form
    for logistic regression (:meth:`~.problem.LinearScores.drift_jacobian`), forward mode otherwise."""
    m = len(X)
    penalty = torch.diag(problem.l2 * problem.weight_mask)
    lin = problem.linear
    if lin is not None:
        Xt = lin.augmented(X)
        residuals, curvature = lin.residuals(lin.scores(theta, Xt), y)
        norms = residuals.norm(dim=1) * Xt.norm(dim=1)
        clipped = norms > bounds
        c = weights * clip_factors(norms, bounds)
        return lin.drift_jacobian(residuals, curvature, Xt, c, clipped) / m + penalty

    def held_drift(t: torch.Tensor) -> torch.Tensor:
        Gt = per_sample_matrix(problem, t, X, y)
        nt = Gt.norm(dim=1)
        ct = weights * torch.where(nt > bounds, bounds / nt.clamp(min=1e-300), torch.ones_like(nt))
        return (ct[:, None] * Gt).mean(0) + problem.penalty(t)

    return jacfwd(held_drift)(theta)


def _preconditioner(problem: Problem, mechanism: Mechanism, theta: torch.Tensor, h: float) -> torch.Tensor:
    """Cholesky factor of I + h A, A the held drift Jacobian on the curvature rows at theta (symmetrised)."""
    data = problem.curvature_data
    X = data.X.to(torch.float64)
    lin = problem.linear
    Xt = lin.augmented(X)
    residuals, _ = lin.residuals(lin.scores(theta, Xt), data.y, curvature=False)
    norms = residuals.norm(dim=1) * Xt.norm(dim=1)
    bounds, c, _ = mechanism.coefficients(norms, data.group, problem)
    weights = c / clip_factors(norms, bounds).clamp(min=1e-300)
    A = held_jacobian(problem, theta, X, data.y, weights, bounds)
    A = 0.5 * (A + A.T)
    eye = torch.eye(problem.P, dtype=torch.float64)
    return torch.linalg.cholesky(eye + h * A + 1e-12 * eye)


@dataclass
class Trajectory:
    theta: torch.Tensor
    checkpoints: list[torch.Tensor]
    noise_var: float          # mean over the trajectory of s_t^2 (the Gaussian noise variance on the sum)
    steps: int
    integration_steps: int
    horizon: float = 0.0      # r T, the flow time the path covers
    sigma: float = 0.0        # the noise multiplier noise_var was computed at
    path: torch.Tensor | None = field(default=None, repr=False)   # (K + 1, P): theta at flow times k h
    stages: int = 1           # drift evaluations per explicit step (Chebyshev stages; 1: Euler)

    def at(self, horizon: float) -> torch.Tensor:
        """theta on the path at flow time ``horizon`` <= self.horizon (linear interpolation between steps)."""
        if self.path is None or horizon > self.horizon * (1 + 1e-9):
            raise ValueError(f"the path covers flow time {self.horizon:g}, asked for {horizon:g}")
        position = horizon / self.horizon * (len(self.path) - 1)
        low = min(int(np.floor(position)), len(self.path) - 2)
        frac = position - low
        return (1 - frac) * self.path[low] + frac * self.path[low + 1]


def chebyshev_coefficients(stages: int, damping: float = CHEBYSHEV_DAMPING) -> tuple[list[float], float]:
    """(b_j = 1 / T_j(w0) for j = 0..s, w1) of the damped first-order Runge-Kutta-Chebyshev method with s stages.

    w0 = 1 + damping / s^2 and w1 = T_s(w0) / T_s'(w0), so that P_s(z) = T_s(w0 + w1 z) / T_s(w0) = 1 + z + O(z^2)
    (first order) and |P_s(z)| <= 1 on z in [-beta_s, 0], beta_s = (1 + w0) / w1 (~ 2 s^2 tanh(sqrt(2 damping)) /
    sqrt(2 damping)), where <= 1 / T_s(w0) < 1 for z <= -(w0 - 1) / w1 (Hundsdorfer & Verwer 2003, V.1): the
    stable step grows with s^2 while its cost grows with s. One stage is Euler's step."""
    s = check_positive_int(stages, "stages")
    w0 = 1.0 + damping / s ** 2
    T = [1.0, w0]                     # T_j(w0)
    dT = [0.0, 1.0]                   # T_j'(w0)
    for _ in range(2, s + 1):
        T.append(2 * w0 * T[-1] - T[-2])
        dT.append(2 * T[-2] + 2 * w0 * dT[-1] - dT[-2])
    return [1.0 / t for t in T], T[s] / dT[s]


def chebyshev_stability(stages: int, damping: float = CHEBYSHEV_DAMPING) -> float:
    """beta_s: the damped s-stage Chebyshev step is stable for h lambda in [0, beta_s] (see
    :func:`chebyshev_coefficients`)."""
    _, w1 = chebyshev_coefficients(stages, damping)
    return (2.0 + damping / stages ** 2) / w1


def stages_for(stiffness: float, *, margin: float = CHEBYSHEV_MARGIN) -> int:
    """Stages per explicit step for ``stiffness`` = h lambda_max: one (Euler's step) when h lambda_max <=
    :data:`EULER_STIFFNESS`, else the fewest Chebyshev stages s >= 2 with h lambda_max <= margin x beta_s."""
    if stiffness <= EULER_STIFFNESS:
        return 1
    s = 2
    while stiffness > margin * chebyshev_stability(s):
        s += 1
    return s


def chebyshev_step(drift_at: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, h: float, stages: int,
                   direction: torch.Tensor | None = None, *, damping: float = CHEBYSHEV_DAMPING) -> torch.Tensor:
    """One damped Runge-Kutta-Chebyshev step of size h of d theta / dt = -drift(theta) (``direction``:
    drift(theta) if already evaluated): Y_0 = theta, Y_1 = Y_0 - (w1 / w0) h drift(Y_0),
    Y_j = mu_j Y_{j-1} + nu_j Y_{j-2} - mu~_j h drift(Y_{j-1}) with mu_j = 2 w0 b_j / b_{j-1},
    nu_j = -b_j / b_{j-2}, mu~_j = 2 w1 b_j / b_{j-1} (mu_j + nu_j = 1); returns Y_s. For a linear drift
    A theta, Y_s = P_s(-h A) theta (:func:`chebyshev_coefficients`)."""
    b, w1 = chebyshev_coefficients(stages, damping)
    w0 = 1.0 + damping / stages ** 2
    direction = drift_at(theta) if direction is None else direction
    previous, current = theta, theta - (w1 / w0) * h * direction
    for j in range(2, stages + 1):
        mu, nu, mu_tilde = 2 * w0 * b[j] / b[j - 1], -b[j] / b[j - 2], 2 * w1 * b[j] / b[j - 1]
        previous, current = current, mu * current + nu * previous - mu_tilde * h * drift_at(current)
    return current


def trajectory(problem: Problem, mechanism: Mechanism, *, integration_steps: int,
               checkpoints: Sequence[float] = (), implicit: bool | None = None,
               curvature: float | None = None) -> Trajectory:
    """theta_bar after the run's T steps of the expected update (K steps of size h = r T / K: linearly implicit for
    logistic regression, explicit otherwise, unless ``implicit`` says; module docstring, step 1). An explicit
    step is Euler's, or, given the drift's largest curvature lambda_max (``curvature``) and h lambda_max > 0.5,
    a damped Runge-Kutta-Chebyshev step of :func:`stages_for` (h lambda_max) drift evaluations
    (:func:`chebyshev_step`), stable for h lambda_max up to ~1.9 stages^2 instead of 2: where r lambda_max would
    force Euler to take every one of the T steps, K x stages ~ sqrt(K r T lambda_max) evaluations do."""
    T = mechanism.steps
    K = max(1, min(integration_steps, T))
    h = mechanism.lr * T / K
    marks = {max(1, min(K, int(round(f * K)))) for f in checkpoints}
    if implicit is None:
        implicit = problem.linear is not None and mechanism.name != "mitigation"
    stages = 1 if implicit or curvature is None else stages_for(h * curvature)
    refresh = {int(round(j * K / JACOBIAN_REFRESHES)) for j in range(JACOBIAN_REFRESHES)}
    theta = problem.theta0.clone()
    path, kept, noise = [theta], [], []
    factor = None
    for k in range(1, K + 1):
        direction, _, s = drift(problem, mechanism, theta)
        noise.append(s ** 2)
        if implicit:
            if k - 1 in refresh or factor is None:
                factor = _preconditioner(problem, mechanism, theta, h)
            direction = torch.cholesky_solve(direction.unsqueeze(1), factor).squeeze(1)
            theta = theta - h * direction
        elif stages > 1:
            theta = chebyshev_step(lambda t: drift(problem, mechanism, t)[0], theta, h, stages, direction)
        else:
            theta = theta - h * direction
        if not torch.isfinite(theta).all():
            raise ValueError(f"the expected {mechanism.name} trajectory diverged (learning rate "
                             f"{mechanism.lr:g} x {T} steps is unstable for this model and data)")
        path.append(theta)
        if k in marks:
            kept.append(theta.clone())
    return Trajectory(theta=theta, checkpoints=kept, noise_var=float(np.mean(noise)), steps=T,
                      integration_steps=K, horizon=mechanism.lr * T, sigma=mechanism.sigma, path=torch.stack(path),
                      stages=stages)


class TrajectoryCache:
    """Expected trajectories by their drift: one integration serves every mechanism whose drift is the same
    function of theta (DP-SGD at another sigma, or with a larger batch) and whose horizon r T it covers.

    The drift of DP-SGD depends on C alone (and the data, the model, the L2 weight), not on sigma, b or T; the
    other methods' drifts are keyed by all their settings but the step count.
    """

    def __init__(self, problem: Problem, *, integration_steps: int, implicit: bool | None = None,
                 curvature: float | None = None) -> None:
        self.problem, self.integration_steps, self.implicit = problem, integration_steps, implicit
        self.curvature = curvature
        self.paths: dict[tuple, Trajectory] = {}
        self.integrations = 0

    @staticmethod
    def drift_key(mechanism: Mechanism) -> tuple:
        if mechanism.name in ("sgd", "dpsgd"):
            return mechanism.name, mechanism.clip_bound
        return (mechanism.name, mechanism.clip_bound, mechanism.lr, mechanism.batch_size, mechanism.sampling_rate,
                mechanism.sigma, mechanism.max_ratio, mechanism.gammas)

    def get(self, mechanism: Mechanism, *, checkpoints: Sequence[float] = (), integration_steps: int | None = None
            ) -> Trajectory:
        """The mechanism's trajectory: read off a cached path when one covers its horizon, else integrated (in
        ``integration_steps`` steps if given, else the cache's)."""
        key, horizon = self.drift_key(mechanism), mechanism.lr * mechanism.steps
        cached = self.paths.get(key)
        if cached is not None and not checkpoints and horizon <= cached.horizon * (1 + 1e-9):
            scale = (mechanism.sigma / cached.sigma) ** 2 if cached.sigma > 0 else 1.0
            return replace(cached, theta=cached.at(horizon), checkpoints=[], steps=mechanism.steps,
                           noise_var=cached.noise_var * scale, horizon=horizon, sigma=mechanism.sigma, path=None)
        steps = self.integration_steps if integration_steps is None else min(integration_steps, self.integration_steps)
        path = trajectory(self.problem, mechanism, integration_steps=steps, checkpoints=checkpoints,
                          implicit=None if self.implicit is None else self.implicit and mechanism.name != "mitigation",
                          curvature=self.curvature)
        self.integrations += 1
        if cached is None or path.horizon > cached.horizon:
            self.paths[key] = path
        return path




@dataclass
class Covariance:
    """Sigma_T in the eigenbasis U of the symmetrised drift Jacobian (U None: diagonal, coordinates)."""

    basis: torch.Tensor | None
    sampling: torch.Tensor          # (P, P) in the basis, or (P,) diagonal
    noise: torch.Tensor
    unstable_directions: int
    factor: torch.Tensor | None = None

    @property
    def total(self) -> torch.Tensor:
        return self.sampling + self.noise

    def per_weight(self, part: str = "total") -> float:
        """sqrt of the mean variance per parameter."""
        matrix = {"total": self.total, "noise": self.noise, "sampling": self.sampling}[part]
        diag = matrix.diagonal() if matrix.ndim == 2 else matrix
        return float(diag.clamp(min=0).mean().sqrt())

    def score_variance(self, Xt: torch.Tensor) -> torch.Tensor:
        """Var[x~_i^T zeta] per row: the variance of a binary logistic regression's score under the noise
        (theta's layout [w, b] is x~'s), shape (n,)."""
        total = self.total
        if total.ndim == 1:
            return (Xt ** 2) @ total
        sigma = self.basis @ total @ self.basis.T     # Sigma_T in coordinates (P x P)
        return ((Xt @ sigma) * Xt).sum(1)

    def draw(self, count: int, generator: torch.Generator) -> torch.Tensor:
        """``count`` draws of zeta ~ N(0, Sigma_T), shape (count, P)."""
        total = self.total
        P = total.shape[0]
        z = torch.randn(count, P, generator=generator, dtype=torch.float64)
        if total.ndim == 1:
            return z * total.clamp(min=0).sqrt()
        if self.factor is None:
            values, vectors = torch.linalg.eigh(0.5 * (total + total.T))
            self.factor = self.basis @ (vectors * values.clamp(min=0).sqrt())
        return z @ self.factor.T


def lyapunov_factor(m: torch.Tensor, steps: int) -> torch.Tensor:
    """F_jk = sum_{t<T} (m_j m_k)^t = (1 - (m_j m_k)^T) / (1 - m_j m_k), and T where m_j m_k = 1."""
    check_positive_int(steps, "steps")
    prod = m[:, None] * m[None, :]
    close = (1 - prod).abs() < 1e-12
    safe = torch.where(close, torch.full_like(prod, 0.5), prod)
    factor = (1 - safe ** steps) / (1 - safe)
    return torch.where(close, torch.full_like(prod, float(steps)), factor)


def accumulated_covariance(curvature: torch.Tensor, step_covariance: torch.Tensor, *, lr: float, steps: int
                           ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Sigma_T = sum_{t<T} M^t (r^2 S) M^t, M = I - r A, for symmetric A: in A's eigenbasis.

    zeta_{t+1} = (I - r A) zeta_t + r xi_t with Cov[xi_t] = S and zeta_0 = 0 has
    Cov[zeta_T] = Sigma_T. With A = U diag(a) U^T and m = 1 - r a (eigenvalues a clamped
    at 0: a flat or concave direction accumulates like a random walk; m clamped at
    -0.999 where r a > 2, an unstable direction, whose count is returned),

        Sigma_T = U [ (U^T r^2 S U) o F ] U^T,   F = :func:`lyapunov_factor` (m, T).

    Returns (U, the bracket -- Sigma_T in the basis --, the number of unstable directions).
    A 1-D ``curvature`` and ``step_covariance`` are diagonals (U = I; returns the diagonal of Sigma_T).
    """
    lr = check_positive(lr, "lr")
    if curvature.ndim == 1:
        eigenvalues, basis = curvature, None
    else:
        eigenvalues, basis = torch.linalg.eigh(0.5 * (curvature + curvature.T))
    eigenvalues = eigenvalues.clamp(min=0.0)
    m = 1 - lr * eigenvalues
    unstable = m < -1
    m = torch.where(unstable, torch.full_like(m, -0.999), m)  # only unstable directions are capped
    unstable = int(unstable.sum())
    if basis is None:  # only the diagonal of F: sum_t m_j^(2t)
        diag = step_covariance if step_covariance.ndim == 1 else step_covariance.diagonal()
        square = m ** 2
        close = (1 - square).abs() < 1e-12
        series = torch.where(close, torch.full_like(m, float(steps)),
                             (1 - square ** steps) / torch.where(close, torch.ones_like(m), 1 - square))
        return None, lr ** 2 * diag * series, unstable
    return basis, lr ** 2 * (basis.T @ step_covariance @ basis) * lyapunov_factor(m, steps), unstable


def covariance(problem: Problem, mechanism: Mechanism, trajectory: Trajectory, *, exact: bool) -> Covariance:
    """Sigma_T of the linearised run around the trajectory's endpoint (module docstring, step 2)."""
    theta, r, T = trajectory.theta, mechanism.lr, trajectory.steps
    b, q = mechanism.batch_size, mechanism.sampling_rate
    data = problem.curvature_data
    X = data.X.to(torch.float64)
    G = per_sample_matrix(problem, theta, X, data.y, mechanism, data.group)
    norms = G.norm(dim=1)
    bounds, c, _ = mechanism.coefficients(norms, data.group, problem)
    contributions = G * c[:, None]
    if not mechanism.private:  # the non-private step divides by the actual batch size: centred moments
        contributions = contributions - contributions.mean(0)
    m_rows = len(G)
    # the drift's Jacobian with each row's bound and weight held at their endpoint values (DPSGD-F's bounds and
    # Naive's weights are piecewise constant); the mitigation's curvature is taken as its cross-entropy's
    weights = c / clip_factors(norms, bounds)
    scale = (1 - q) / (b * m_rows)
    noise_var = trajectory.noise_var / b ** 2        # per-step covariance (s/b)^2 I of the Gaussian noise
    if exact:
        A = held_jacobian(problem, theta, X, data.y, weights, bounds)
        sampling_step = scale * contributions.T @ contributions
        noise_step = noise_var * torch.eye(problem.P, dtype=torch.float64)
    else:  # diag(A) ~ (1/m) sum_i c_i diag(G_i) + lambda w: the Gauss-Newton diagonal of each row, weighted
        A = ggn_diagonal(problem, theta, X, c) / m_rows + problem.l2 * problem.weight_mask
        sampling_step = scale * (contributions ** 2).sum(0)
        noise_step = torch.full((problem.P,), noise_var, dtype=torch.float64)
    basis, sampling, unstable = accumulated_covariance(A, sampling_step, lr=r, steps=T)
    _, noise, _ = accumulated_covariance(A, noise_step, lr=r, steps=T)
    return Covariance(basis, sampling, noise, unstable)
