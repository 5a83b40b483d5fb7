"""Each training method as the predictor sees it: per-sample coefficients c_i and the noise std s of its step.

DP-SGD's step (as :mod:`dpfair_analysis.training.loop` runs it; Poisson sampling at rate q = b/n) is
theta' = theta - r (u + lambda w), u = (1/b)(sum_{i in B} c_i g_i + N(0, s^2 I)), with c_i = min(1, C/||g_i||)
for DP-SGD, s = sigma C, and lambda w the gradient of the model's L2 penalty. The other methods change c_i
and s through their own training code, evaluated on a batch's expected, noise-free statistics: DPSGD-F's
group bounds (:func:`~dpfair_analysis.training.dpsgdf.dpsgdf_group_bounds`), Naive's group weights
(:func:`~dpfair_analysis.training.dpsgdf.naive_group_weights`), FairDP's bounds on their way to the fixed point of
its update within the run's steps (:mod:`dpfair_analysis.training.fairdp`) and paper 001's mitigation objective
(:class:`~dpfair_analysis.training.mitigation.FairnessLensMitigation`). :func:`mechanism_for` sets a method
at a plan's privacy (DPSGD-F, Naive and FairDP stop at DP-SGD's epsilon, as ``dpfair compare`` runs them).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

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
from dpfair_analysis.training import methods
from dpfair_analysis.training.methods import DiagnosisView, RunContext
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
    options: Any = None             # the method's options (None: its defaults with the plan's max_ratio)

    @property
    def private(self) -> bool:
        return self.name != "sgd"

    def coefficients(self, norms: torch.Tensor, group: torch.Tensor, problem: Problem
                     ) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(bounds C_i, coefficients c_i = w_i min(1, C_i/||g_i||), noise std s) for these rows.

        Each method's own rule (``Method.diagnosis`` in :mod:`dpfair_analysis.training.methods`: DPSGD-F's bounds
        on a batch's expected, noise-free counts, FairDP's on their way to its update's fixed point, ...); the
        mitigation steps as DP-SGD does (its change is the objective, :func:`mitigation_objective`).
        """
        method = methods.get("dpsgd" if self.name == "mitigation" else self.name)
        options = self.options if self.options is not None else method.options()
        view = DiagnosisView(clip_bound=self.clip_bound, noise_multiplier=self.sigma, batch_size=self.batch_size,
                             sampling_rate=self.sampling_rate, learning_rate=self.lr,
                             group_sizes=problem.train_sizes, n=problem.n, dimension=problem.P, steps=self.steps)
        return method.diagnosis(options, norms, group, view)


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
        return lin.per_sample(lin.residuals(scores, y, curvature=False)[0], Xt)
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


def method_options(method: str, plan: PrivacyPlan) -> Any:
    """The options of ``method`` (``"mitigation"``: DP-SGD's) at the plan's settings: the method's defaults, with
    the plan's ``count_noise_ratio`` and ``max_ratio`` where its options have such fields."""
    entry = methods.get("dpsgd" if method == "mitigation" else method)
    fields = {f.name for f in dataclasses.fields(entry.options)}
    planned = {"count_noise_ratio": plan.count_noise_ratio, "max_ratio": plan.max_ratio}
    return entry.options(**{k: v for k, v in planned.items() if k in fields})


def mechanism_for(plan: PrivacyPlan, resolved: ResolvedPlan, method: str, *, dimension: int, **changes) -> Mechanism:
    """The predictor's view of ``method`` at the plan's settings on a model of ``dimension`` parameters.

    A method the registry runs at equal privacy (DPSGD-F, Naive, FairDP, ... : ``Method.equal_privacy``) stops at
    DP-SGD's epsilon, as ``dpfair compare`` runs it: its steps from :mod:`.equal_privacy` at the joint
    multiplier of the releases its own policy plans every step; the mitigation pays its counts once and its
    statistics every step within the same epsilon."""
    sigma, steps = resolved.sigma, resolved.steps
    q, b = resolved.sampling_rate, plan.batch_size
    options = method_options(method, plan)
    entry = methods.get("dpsgd" if method == "mitigation" else method)
    if entry.equal_privacy and method != "mitigation":  # stop at DP-SGD's epsilon (paper 000 §6.1.3)
        policy = entry.build_policy(options, RunContext(clip_bound=plan.clip_bound, noise_multiplier=sigma,
                                                        batch_size=b, dimension=dimension, learning_rate=resolved.lr))
        joint = joint_noise_multiplier(policy.planned_noise_multipliers())
        steps = steps_within(resolved.epsilon, plan.delta, sampling_rate=q, noise_multiplier=joint,
                             max_steps=steps, accounting=order_window(plan.accounting, resolved.optimal_order))
    if method == "mitigation":  # counts once (multiplier 10) + statistics at 2 sigma each step, same epsilon
        joint = noise_for(resolved.epsilon, plan.delta, sampling_rate=q, steps=steps, accounting=plan.accounting,
                          near=resolved.accounting_point, guess=sigma, tolerance=RECOMMENDATION_TOLERANCE,
                          once=[dp_event.GaussianDpEvent(10.0)])
        sigma = joint * math.sqrt(1 + 1 / 4)
    kwargs = dict(name=method, clip_bound=plan.clip_bound, sigma=sigma, steps=steps, lr=resolved.lr,
                  batch_size=b, sampling_rate=q, max_ratio=plan.max_ratio, gammas=plan.gammas,
                  label=method.upper(), options=options)
    kwargs.update(changes)
    return Mechanism(**kwargs)
