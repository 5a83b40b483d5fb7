"""Output perturbation for L2-regularised ERM (Chaudhuri, Monteleoni & Sarwate 2011; paper 001 §5).

The mechanism (paper 001, §5, "Warm up: output perturbation"; Chaudhuri et al. 2011,
Alg. 1 with Gaussian instead of their Gamma-norm noise):

    theta* = argmin_theta J_D(theta),   J_D(theta) = (1/n) sum_i L_i(theta) + (lambda/2) ||theta||^2,
    release theta* + N(0, s^2 I),       s = sigma(epsilon, delta) calibrated to Delta,

with Delta the l2-sensitivity of theta* under *replace-one* neighbours (n fixed).

Sensitivity (Chaudhuri et al. 2011, Lemma 7 / Cor. 8). If every L_i is convex and
L-Lipschitz in theta (||grad_theta L_i|| <= L) and J_D is lambda-strongly convex, then
for D, D' differing in one row,

    ||theta*(D) - theta*(D')|| <= (1 / lambda) sup_theta ||grad g(theta)|| <= 2 L / (n lambda),

with g = J_D' - J_D = (1/n)(L_new - L_old). Paper 001 states Delta = 2/(n lambda): L = 1,
which for logistic regression needs ||x~|| <= 1 for the FULL parameterised input. The
logistic loss of the one-score model z = w^T x + b has gradient (sigmoid(z) - y) [x; 1],
so with an intercept it is sqrt(||x||^2 + 1)-Lipschitz in theta = (w, b), not
||x||-Lipschitz: for rows with ||x|| <= 1 the theorem gives 2 sqrt(2) / (n lambda). That is
the bound this module uses (:func:`logistic_lipschitz`). The paper's 2/(n lambda) is
*false* for models with an intercept (claim 001.sec5.sensitivity, violated): with the
toolkit's solver (gtol 1e-12), n = 101, lambda = 1/101, D = {z = (cos .7, sin .7), y = 1;
50 x (-cos .3, sin .3), y = 0; 50 x (-cos .3, -sin .3), y = 1} and D' replacing z by
(cos .7, -sin .7), y = 0, theta*(D) = (0.7746, -4.9712, 0.7477) and theta*(D') =
(-0.7746, -4.9712, -0.7477): ||theta* - theta*'|| = 2.153 > 2 (x1.077); at n = 1001,
n lambda = 1, angles .5 / .1, x1.324, and the family tends to sqrt(2). The two rows have
opposite labels and are both confidently misclassified by the nearly orthogonal bulk, so
the intercept components of their gradients add instead of cancelling. The bound this
module releases with, 2 sqrt(2) / (n lambda), stays valid on these pairs (0.761 and 0.936
of it), as Chaudhuri et al.'s proof says it must. Without an intercept (theta = w, L =
||x|| <= 1) the paper's 2/(n lambda) is proved (claim 001.sec5.sensitivity.no-intercept).
Privacy here rests only on the proved 2 L / (n lambda).

The intercept is penalised: lambda/2 ||theta||^2 includes b. With an unpenalised
intercept J_D is not strongly convex in b, the theorem does not apply, and a minimiser
need not exist (all labels equal: b* = +-infinity), so the sensitivity is unbounded.
(The toolkit's training penalty ``models.l2_penalty`` excludes biases; output
perturbation deliberately does not.)

Paper 001 also misquotes the classic calibration: it writes the Gaussian mechanism as
(epsilon, delta)-DP "for delta > 4/5 exp(-(sigma epsilon)^2 / 2)"; Dwork & Roth (2014,
Thm A.1) need sigma >= sqrt(2 ln(1.25/delta)) / epsilon, i.e. delta >= (5/4)
exp(-(sigma epsilon)^2 / 2) -- 5/4, not 4/5 -- and only for epsilon < 1.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import scipy.optimize
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, hessian

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import parameters_of
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.privacy.gaussian import CALIBRATIONS, gaussian_delta, gaussian_sigma, gaussian_sigma_analytic, \
    gaussian_sigma_classic  # noqa: F401  (the calibration this module's release uses, importable from here too)
from dpfair_analysis.validation import check_int_at_least, check_nonnegative, check_positive, check_positive_int

Params = dict[str, torch.Tensor]


# ------------------------------------------------------------------ sensitivity
def output_perturbation_sensitivity(n: int, l2: float, *, lipschitz: float = 1.0) -> float:
    """Delta = 2 L / (n lambda): l2-sensitivity of the regularised ERM minimiser.

    Chaudhuri et al. (2011), Cor. 8 (paper 001 §5 with L = 1): replace-one neighbours,
    each per-sample loss convex and L-Lipschitz in theta, objective
    (1/n) sum_i L_i + (lambda/2) ||theta||^2 (all parameters penalised).

    Parameters
    ----------
    n : int
        Number of rows (fixed under replace-one adjacency).
    l2 : float
        lambda > 0, the strong-convexity modulus of the penalty.
    lipschitz : float
        L, the Lipschitz constant of each L_i in theta (see :func:`logistic_lipschitz`).
    """
    n = check_positive_int(n, "n")
    return 2.0 * check_positive(lipschitz, "lipschitz") / (n * check_positive(l2, "l2"))


def logistic_lipschitz(bound: float, *, n_classes: int = 2, intercept: bool = True) -> float:
    """L = sup ||grad_theta L_i|| of the (softmax) logistic loss over rows with ||x|| <= bound.

    With x~ = [x; 1] (intercept) or x~ = x (no intercept):

    * binary, one score z = w^T x~: grad = (sigmoid(z) - y) x~, |sigmoid(z) - y| < 1, so
      L = ||x~|| <= sqrt(bound^2 + 1) (intercept) or bound;
    * softmax, K classes: grad = (f - e_y) kron x~ and ||f - e_y||^2 = (1 - f_y)^2 +
      sum_{k != y} f_k^2 <= 2 (1 - f_y)^2 < 2, so L = sqrt(2) ||x~||.

    The suprema are approached (|sigmoid(z) - y| -> 1 as the row is misclassified with
    growing margin), so these constants cannot be lowered for the Lipschitz argument.
    """
    bound = check_positive(bound, "bound")
    check_int_at_least(n_classes, "n_classes", 2)
    row_norm = math.sqrt(bound ** 2 + (1.0 if intercept else 0.0))
    return row_norm if n_classes == 2 else math.sqrt(2.0) * row_norm


def check_output_perturbation_assumptions(X: torch.Tensor, *, bound: float = 1.0) -> float:
    """Check ||x_i|| <= bound for every row (features only); return the largest row norm.

    The bound is on the features x, not on [x; 1]: the constant intercept feature is
    not data and is accounted for in the Lipschitz constant (:func:`logistic_lipschitz`,
    sqrt(bound^2 + 1)); putting it inside the norm would make bound = 1 unsatisfiable.
    Raises ValueError naming the first offending row, its norm and the fix
    (:func:`clip_rows_to_norm`). Images are flattened.
    """
    bound = check_positive(bound, "bound")
    if not isinstance(X, torch.Tensor) or not X.is_floating_point() or X.ndim < 2:
        raise ValueError(f"X must be a floating-point tensor of shape (n, ...), got "
                         f"{getattr(X, 'dtype', type(X).__name__)} {tuple(getattr(X, 'shape', ()))}")
    if not torch.isfinite(X).all():
        raise ValueError("X has NaN or infinite values; output perturbation needs bounded rows")
    norms = torch.linalg.vector_norm(X.flatten(1).double(), dim=1)
    over = (norms > bound).nonzero().flatten()
    if len(over):
        i = int(over[0])
        raise ValueError(f"row {i} of X has norm {float(norms[i]):.6g} > bound={bound} ({len(over)} of {len(X)} rows "
                         f"exceed it); the sensitivity 2L/(n lambda) needs ||x_i|| <= bound for every row: "
                         f"rescale the features or use clip_rows_to_norm(X, bound)")
    return float(norms.max()) if len(norms) else 0.0


def clip_rows_to_norm(X: torch.Tensor, bound: float) -> torch.Tensor:
    """x_i min(1, bound / ||x_i||): every row projected into the l2 ball of radius ``bound``.

    Rows already inside are unchanged; the others are scaled to norm <= bound exactly in
    floating point (a row whose rounded norm still exceeds ``bound`` is shrunk by one ulp
    more), so :func:`check_output_perturbation_assumptions` passes on the result.
    """
    bound = check_positive(bound, "bound")
    if not isinstance(X, torch.Tensor) or not X.is_floating_point() or X.ndim < 2:
        raise ValueError(f"X must be a floating-point tensor of shape (n, ...), got "
                         f"{getattr(X, 'dtype', type(X).__name__)} {tuple(getattr(X, 'shape', ()))}")
    flat = X.flatten(1)
    norms = torch.linalg.vector_norm(flat.double(), dim=1)
    scale = torch.where(norms > bound, bound / norms.clamp(min=torch.finfo(torch.float64).tiny), torch.ones_like(norms))
    clipped = flat * scale.to(X.dtype).unsqueeze(1)
    shrink = 1 - torch.finfo(X.dtype).eps
    for _ in range(64):
        over = torch.linalg.vector_norm(clipped.double(), dim=1) > bound
        if not over.any():
            break
        clipped[over] = clipped[over] * shrink
    return clipped.view_as(X)


# ----------------------------------------------------------------- the minimiser
@dataclass(frozen=True)
class ERMSolution:
    """The regularised ERM minimiser and how exactly it was found.

    ``distance_bound`` = ||grad J(theta)|| / lambda certifies ||theta - theta*|| <=
    distance_bound (lambda-strong convexity: ||grad J(theta)|| >= lambda ||theta - theta*||).
    """

    params: Params
    theta: torch.Tensor
    objective: float
    grad_norm: float
    iterations: int
    newton_steps: int
    converged: bool
    l2: float
    message: str = ""
    distance_bound: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "distance_bound", self.grad_norm / self.l2)


def regularised_objective(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, params: Mapping[str, torch.Tensor],
                          l2: float) -> torch.Tensor:
    """J(theta) = (1/n) sum_i CE(f(x_i; theta), y_i) + (lambda / 2) ||theta||^2, every parameter penalised."""
    loss = F.cross_entropy(functional_call(model, dict(params), (X,)), y)
    return loss + 0.5 * l2 * sum((p ** 2).sum() for p in params.values())


def train_regularised_erm(model: LogisticRegression, data: GroupedDataset, *, l2: float, gtol: float = 1e-10,
                          max_iter: int = 20_000, max_newton_params: int = 5_000) -> ERMSolution:
    """theta* = argmin (1/n) sum_i L_i(theta) + (lambda/2) ||theta||^2 for logistic regression, in float64.

    The non-private step of output perturbation (paper 001 §5; Chaudhuri et al. 2011).
    The objective is lambda-strongly convex and smooth, so L-BFGS (scipy's L-BFGS-B,
    unbounded, gradients by ``torch.func.grad_and_value``) converges to the unique
    minimiser; it runs from theta = 0 until ||grad J||_2 <= ``gtol`` or until J stops
    decreasing in float64 (``ftol = 0``; on Adult that happens at ||grad J|| ~ 1e-9). If the
    gradient is then above ``gtol`` and the model has at most ``max_newton_params``
    parameters, Newton steps with the exact Hessian (``torch.func.hessian``, P x P) finish
    the job (quadratic convergence; one step on Adult, to ~1e-16). The reached gradient
    norm is reported with the certified distance to the exact minimiser,
    ||grad J|| / lambda. The model is not modified: its parameters are replaced
    functionally by float64 ones.

    Parameters
    ----------
    model : LogisticRegression
        Binary (one score) or multiclass; its trainable parameters are optimised.
    data : GroupedDataset
        Training rows (X flattened to (n, d)).
    l2 : float
        lambda > 0; penalises all trainable parameters, the intercept included (see the
        module docstring for why).
    gtol : float
        Target l2 norm of the gradient.
    max_iter : int
        L-BFGS iteration limit; ``converged`` is False if it stops above ``gtol``.
    max_newton_params : int
        Newton polishing only for models with at most this many parameters.
    """
    if not isinstance(model, LogisticRegression):
        raise ValueError(f"model must be a LogisticRegression (convex ERM), got {type(model).__name__}")
    if not isinstance(data, GroupedDataset):
        raise TypeError(f"data must be a GroupedDataset, got {type(data).__name__}")
    if len(data) == 0:
        raise ValueError("data has no rows; regularised ERM needs n >= 1")
    l2 = check_positive(l2, "l2")
    gtol = check_positive(gtol, "gtol")
    max_iter = check_positive_int(max_iter, "max_iter")
    n_logits = 2 if model.binary else model.linear.out_features
    if int(data.y.max()) >= n_logits:
        raise ValueError(f"labels reach {int(data.y.max())} but the model has {n_logits} classes")
    template = {name: p.to(torch.float64) for name, p in parameters_of(model).items()}
    names = list(template)
    shapes = [template[k].shape for k in names]
    sizes = [template[k].numel() for k in names]
    X = data.X.flatten(1).to(torch.float64)
    y = data.y

    def unflatten(theta: torch.Tensor) -> Params:
        return {k: t.view(s) for k, t, s in zip(names, torch.split(theta, sizes), shapes)}

    def objective(theta: torch.Tensor) -> torch.Tensor:
        return regularised_objective(model, X, y, params=unflatten(theta), l2=l2)

    value_and_gradient = grad_and_value(objective)

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        g, v = value_and_gradient(torch.from_numpy(theta))
        return float(v), g.numpy().copy()

    x0 = np.zeros(sum(sizes))
    # pgtol is an infinity-norm test; gtol / sqrt(P) on it implies ||g||_2 <= gtol.
    result = scipy.optimize.minimize(fun, x0, jac=True, method="L-BFGS-B",
                                     options={"maxiter": max_iter, "maxfun": 4 * max_iter, "ftol": 0.0,
                                              "gtol": gtol / math.sqrt(len(x0)), "maxcor": 30})
    theta = torch.from_numpy(result.x.copy())
    g, v = value_and_gradient(theta)
    grad_norm = float(torch.linalg.vector_norm(g))
    newton_steps = 0
    if grad_norm > gtol and len(x0) <= max_newton_params:
        # L-BFGS stalls where J no longer decreases in float64 (||g|| ~ 1e-9 on Adult); Newton
        # steps on the gradient alone converge quadratically from there.
        objective_hessian = hessian(objective)
        while grad_norm > gtol and newton_steps < 20:
            step = torch.linalg.solve(objective_hessian(theta), g)
            candidate = theta - step
            g_new, v_new = value_and_gradient(candidate)
            newton_steps += 1
            if float(torch.linalg.vector_norm(g_new)) >= grad_norm:
                break  # at the float64 floor
            theta, g, v, grad_norm = candidate, g_new, v_new, float(torch.linalg.vector_norm(g_new))
    converged = grad_norm <= gtol
    if not converged:
        warnings.warn(f"L-BFGS stopped at ||grad J|| = {grad_norm:.3g} > gtol={gtol} ({result.message}); "
                      f"the minimiser is within {grad_norm / l2:.3g} of the exact one", RuntimeWarning, stacklevel=2)
    return ERMSolution(params=unflatten(theta.clone()), theta=theta, objective=float(v), grad_norm=grad_norm,
                       iterations=int(result.nit), newton_steps=newton_steps, converged=converged, l2=l2,
                       message=str(result.message))


# ------------------------------------------------------------------ the noise
def perturb(params: torch.Tensor | Mapping[str, torch.Tensor], sigma: float, *, draws: int,
            generator: torch.Generator) -> torch.Tensor | Params:
    """``draws`` independent releases theta + N(0, sigma^2 I), vectorised.

    Parameters
    ----------
    params : Tensor or dict of Tensors
        The minimiser theta* (flat vector or named parameters).
    sigma : float
        Absolute noise standard deviation s (e.g. :func:`gaussian_sigma_analytic`), >= 0.
    draws : int
        Number of independent releases.
    generator : torch.Generator
        Source of the noise.

    Returns
    -------
    Tensor or dict
        Shape (draws, *params.shape) -- or, for a dict, each entry with a leading
        ``draws`` dimension (ready for ``torch.func.vmap(functional_call)``).
    """
    sigma = check_nonnegative(sigma, "sigma")
    draws = check_positive_int(draws, "draws")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {generator!r}")
    if isinstance(params, Mapping):
        return {k: p.unsqueeze(0) + sigma * torch.randn((draws, *p.shape), generator=generator, dtype=p.dtype)
                for k, p in params.items()}
    if not isinstance(params, torch.Tensor) or not params.is_floating_point():
        raise ValueError(f"params must be a floating-point tensor or a dict of them, got {type(params).__name__}")
    return params.unsqueeze(0) + sigma * torch.randn((draws, *params.shape), generator=generator, dtype=params.dtype)


# ------------------------------------------------------------------ the mechanism
def certified_sensitivity(model: LogisticRegression, solution: ERMSolution, *, n: int, bound: float,
                          gtol: float) -> tuple[float, float]:
    """(Delta, L): the sensitivity output perturbation calibrates on, and its Lipschitz constant.

    Delta = 2 L / (n lambda) + 2 gtol / lambda with L = :func:`logistic_lipschitz` (bound,
    intercept if the model's bias is trainable): any run stops within gtol / lambda of
    its exact minimiser, so the released minimisers of two neighbours differ by at most
    the exact sensitivity plus twice that distance.
    """
    n_classes = 2 if model.binary else model.linear.out_features
    lipschitz = logistic_lipschitz(bound, n_classes=n_classes, intercept="linear.bias" in solution.params)
    sensitivity = output_perturbation_sensitivity(n, solution.l2, lipschitz=lipschitz) + 2 * gtol / solution.l2
    return sensitivity, lipschitz


@dataclass(frozen=True)
class OutputPerturbationRelease:
    """What output perturbation released and the numbers behind its guarantee."""

    solution: ERMSolution
    noisy: Params
    sensitivity: float
    lipschitz: float
    sigma: float
    epsilon: float
    delta: float
    calibration: str


def output_perturbation(model: LogisticRegression, data: GroupedDataset, *, epsilon: float, delta: float, l2: float,
                        bound: float = 1.0, draws: int = 1, generator: torch.Generator,
                        calibration: str = "analytic", gtol: float = 1e-10) -> OutputPerturbationRelease:
    """(epsilon, delta)-DP logistic regression by output perturbation (paper 001 §5, Thm 1 setting).

    Checks ||x_i|| <= ``bound`` (:func:`check_output_perturbation_assumptions`), solves the
    regularised ERM (:func:`train_regularised_erm`) to ||grad J|| <= ``gtol`` (refusing to
    release otherwise), sets

        Delta = 2 L / (n lambda) + 2 gtol / lambda

    with L = :func:`logistic_lipschitz` (bound, intercept if the model's bias is trainable)
    -- the second term covers the solver's certified distance gtol / lambda from the exact
    minimiser on each of the two neighbours -- and releases ``draws`` independent copies of
    theta* + N(0, s^2 I), s = :func:`gaussian_sigma` (epsilon, delta, Delta). Each draw
    alone is (epsilon, delta)-DP; releasing several composes (use one for a real release,
    many to estimate the expected excess risk of Thm 1).

    The two refusals (a row with ||x_i|| > ``bound``, a solver short of ``gtol``) depend on the data: the guarantee
    is for data sets on which neither happens, and a refusal is itself an output that says something about the
    data. For a release, scale the features to ``bound`` by a rule that does not look at the other rows (e.g.
    clip each row's norm) and choose ``l2`` and ``gtol`` so that the solver converges on every data set of the
    domain, rather than retrying after a refusal.
    """
    gaussian_sigma(epsilon, delta, 1.0, calibration=calibration)  # refuse bad privacy parameters before any work
    gtol = check_positive(gtol, "gtol")
    if not isinstance(data, GroupedDataset):
        raise TypeError(f"data must be a GroupedDataset, got {type(data).__name__}")
    check_output_perturbation_assumptions(data.X, bound=bound)
    solution = train_regularised_erm(model, data, l2=l2, gtol=gtol)
    if not solution.converged:
        raise RuntimeError(f"the ERM solver stopped at ||grad J|| = {solution.grad_norm:.3g} > gtol={gtol}; the "
                           f"sensitivity bound needs every run to reach gtol (raise gtol or l2)")
    sensitivity, lipschitz = certified_sensitivity(model, solution, n=len(data), bound=bound, gtol=gtol)
    sigma = gaussian_sigma(epsilon, delta, sensitivity, calibration=calibration)
    noisy = perturb(solution.params, sigma, draws=draws, generator=generator)
    return OutputPerturbationRelease(solution=solution, noisy=noisy, sensitivity=sensitivity, lipschitz=lipschitz,
                                     sigma=sigma, epsilon=float(epsilon), delta=float(delta), calibration=calibration)
