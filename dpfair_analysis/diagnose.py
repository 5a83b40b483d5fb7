"""Which groups will DP-SGD hurt, by how much, and why -- predicted before any private training.

The question a practitioner asks before training privately: at these settings (sigma or a
target epsilon, C, batch size b, epochs, learning rate r), which groups lose accuracy,
how much, why, and what would help? :func:`diagnose` answers it from the data and the
model alone, at a small fraction of the cost of one private run.

The predictor (equations)
-------------------------
DP-SGD's step (as :mod:`dpfair_analysis.training.loop` runs it; Poisson sampling at rate
q = b/n) is theta' = theta - r (u + lambda w), u = (1/b)(sum_{i in B} c_i g_i + N(0, s^2 I)),
with c_i = min(1, C/||g_i||) for DP-SGD (DPSGD-F: C^k of the row's group; Naive: a group
weight times it), s = sigma C, and lambda w the gradient of the model's L2 penalty.
Paper 001's Theorem 2 (Eq. 4, corrected noise term with 1/b^2: see
:mod:`dpfair_analysis.theory.decomposition`) expands one step's expected group loss in
the step's first two moments,

    E[u] = gbar(theta) = (1/n) sum_i c_i g_i,
    Cov[u] = (1 - q)/(b n) sum_i (c_i g_i)(c_i g_i)^T + (s/b)^2 I,

against the non-private step's E[u_np] = g(theta) = (1/n) sum_i g_i. The diagnosis
integrates those moments over the whole run instead of one step:

1. **Expected trajectories** (the first moment, integrated). theta_bar_{t+1} =
   theta_bar_t - r (gbar(theta_bar_t) + lambda w_t) for the private run and the same with
   g for the non-private one, from the same initial weights, for the run's T steps
   (integrated in K <= T steps of size h = r T / K, K chosen so that h lambda_max <= 0.5;
   on a group-stratified subsample of the training rows). Their endpoints theta_bar_T
   and theta_T differ by what clipping does to the learning: the clipping term of Theorem
   2 summed along the way, including its non-linear effects (a stalled, under-trained
   model; a model that ends constant, "collapsed").
2. **Accumulated noise** (the second moment, integrated). Linearising the drift around
   the endpoint, A = d(gbar + lambda w)/d theta (symmetrised), the deviation
   zeta_t = theta_t - theta_bar_t follows zeta_{t+1} = (I - r A) zeta_t + r xi_t with
   Cov[xi_t] = Cov[u], so after T steps, in A's eigenbasis (A = U diag(a) U^T,
   m_j = 1 - r a_j),

       Sigma_T = U [ (U^T r^2 Cov[u] U)_{jk} (1 - (m_j m_k)^T) / (1 - m_j m_k) ] U^T

   (the sum_{t<T} M^t Q M^t of the Lyapunov recursion, exact for the linear system; T
   itself where m_j m_k = 1). Its Gaussian part (s/b)^2 is Theorem 2's R^noise
   accumulated: (1/2) Tr(H_a Sigma_T^noise) is the group's expected loss increase. The
   same for the non-private run with its centred sampling covariance. For models with
   more than ``max_exact_params`` parameters A and Cov[u] are replaced by their diagonals
   (A's by Hutchinson's estimator from Jacobian-vector products).
3. **Accuracy** instead of loss. Draw zeta ~ N(0, Sigma_T) (and zeta_np for the
   non-private run) and evaluate each group's accuracy on the evaluation rows:

       Delta^k = E[acc_k(theta_bar_T + zeta)] - E[acc_k(theta_T + zeta_np)]
               = [acc_k(theta_bar_T) - acc_k(theta_T)]                      (clipping part)
               + [E acc_k(theta_bar_T + zeta) - acc_k(theta_bar_T)] - [the same for SGD]   (noise part)

   A row flips when the noise moves its logit margin across 0: rows near the boundary
   (paper 001 Thm 5, 1 - sum f^2 large) and with large inputs (Example 3, Tr(H_i)
   proportional to ||x||^2) flip first -- Theorem 4's "larger Hessian trace, larger noise
   term" in accuracy units.
4. **Interval.** Delta^k +- 1.645 w sqrt(Var_zeta[Delta^k] + v_k / n_k): the spread over
   noise draws, plus the sampling variance of a mean over the group's n_k evaluation rows
   (v_k: the variance of a row's change of correctness), widened by w (1 unless
   calibrated). A :class:`Calibration` (fitted on *other* data sets only: leave one data
   set out) may also rescale the two parts, Delta^k = a clip_k + b noise_k.

The theory's per-group quantities are measured along the non-private trajectory (at
1/3, 2/3 and the end of it) and reported beside the prediction: the fraction clipped at
C and the clipping bias B of paper 000 Eq. (1) (per row, mean max(0, ||g_i|| - C)), the
corrected Theorem 2 clipping and noise terms per step, the group Hessian trace Tr(H_a)
and the boundary proxy 1 - sum_k f_k^2 (paper 001 Thm 5), and the group size.

Reasons per group (:func:`reasons_for`): "clipping" (the clipping part is at least a third
of its predicted loss), "noise" (the noise part is), "near the boundary" (hurt, and its
mean 1 - sum f^2 is at least 1.15 times the population's), "size" (hurt, and smaller than
half an even share of the rows).

What would help (:func:`recommendations`, all *predictions*, re-running the same
predictor with the change): C from paper 000's quantile rule (the (1 - kappa/b)-quantile
of the per-sample norms, kappa = E||N(0, sigma^2 I_P)||/sigma, :mod:`.theory.bounds`),
DPSGD-F, Naive and paper 002's FairDP at DP-SGD's epsilon, paper 001's mitigation (gamma =
(1, 1)) at the same epsilon, a 4x larger batch and a 2x larger epsilon (sigma recalibrated).
FairDP's per-group bounds move during training; the predictor takes each group's bound at
the fixed point of FairDP's update on the noise-free statistics (:func:`fairdp_stationary_bounds`).
"""

from __future__ import annotations

import base64
import copy
import html
import math
import warnings
from dataclasses import asdict, dataclass, field, replace
from typing import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from dp_accounting import dp_event
from torch import nn
from torch.func import functional_call, grad, jacfwd, jvp, vjp, vmap

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.metrics import boundary_proxy_of_logits
from dpfair_analysis.fast_gradients import fast_per_sample_gradients
from dpfair_analysis.gradients import parameters_of
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.privacy.accounting import (
    AccountingSpec,
    calibrate_noise_multiplier,
    epsilon_from_event,
    max_steps_within,
    poisson_gaussian_event,
    steps_for_epochs,
)
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.theory.bounds import expected_gaussian_norm
from dpfair_analysis.theory.decomposition import StepMoments, one_step_decomposition
from dpfair_analysis.theory.hessian import flat_parameterisation, group_hessian_traces, is_piecewise_linear
from dpfair_analysis.training.fairdp import (
    bias_coefficient,
    fairdp_statistics,
    noise_coefficient,
    target_clipped_fraction,
)
from dpfair_analysis.training.mitigation import FairnessLensMitigation
from dpfair_analysis.validation import (
    check_choice,
    check_delta,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_seed,
)

MECHANISMS = ("dpsgd", "dpsgdf", "naive", "mitigation", "fairdp")
REASONS = ("clipping", "noise", "size", "near the boundary")
#: Keys of each group in the JSON (the issue's schema, exactly).
GROUP_KEYS = ("group", "n", "predicted_cost", "predicted_cost_low", "predicted_cost_high", "rank", "reasons",
              "clip_fraction", "clip_bias", "noise_term", "trace", "boundary")
JSON_KEYS = ("groups", "most_hurt", "settings", "epsilon", "delta", "recommendations")
Z90 = 1.6448536269514722  # two-sided 90% normal quantile
#: A predicted cost smaller than this (in accuracy) is "not hurt"; a part smaller than this is no reason.
NEGLIGIBLE = 0.005
#: A group with fewer training or evaluation rows than this gets no point interval: the spread of its rows'
#: changes (and of its gradients) cannot be estimated from so few, so its interval is the whole feasible
#: range [-acc, 1 - acc] of a cost and its reasons say "size" (issue 34: 3 rows once got "+0.0000 [0, 0]").
MIN_GROUP_ROWS = 30
#: Fewest training rows a diagnosis accepts (and the smallest ``DiagnosisOptions.rows``).
MIN_TRAIN_ROWS = 100
#: Most per-sample gradient entries the diagnosis materialises at once (rows x parameters).
MATERIALISED_ELEMENTS = 2 ** 25
#: Relative tolerance of the noise multipliers the recommendations calibrate (sigma* <= sigma <= 1.01 sigma*:
#: each still meets its epsilon; a prediction does not need the planned run's 1e-4).
RECOMMENDATION_TOLERANCE = 1e-2


# ============================================================================ settings
@dataclass(frozen=True)
class PrivacyPlan:
    """The planned private run: DP-SGD (or DPSGD-F, Naive, paper 001's mitigation, paper 002's FairDP) at
    these settings.

    Give ``noise_multiplier`` sigma, or ``target_epsilon`` (sigma is then the smallest that
    meets it at ``delta``, :func:`~dpfair_analysis.privacy.accounting.calibrate_noise_multiplier`).
    ``lr`` None is paper 000's r = 1/sqrt(T), T = ceil(epochs n / b), as in ``dpfair compare``.
    """

    noise_multiplier: float | None = 1.0
    target_epsilon: float | None = None
    clip_bound: float = 0.5
    batch_size: int = 256
    epochs: int = 20
    lr: float | None = None
    delta: float = 1e-6
    accounting: AccountingSpec = AccountingSpec()
    method: str = "dpsgd"
    count_noise_ratio: float = 10.0
    max_ratio: float = 10.0
    gammas: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        if (self.noise_multiplier is None) == (self.target_epsilon is None):
            raise ValueError("give exactly one of noise_multiplier (sigma) and target_epsilon")
        if self.noise_multiplier is not None:
            check_positive(self.noise_multiplier, "noise_multiplier")
        if self.target_epsilon is not None:
            check_positive(self.target_epsilon, "target_epsilon")
        check_positive(self.clip_bound, "clip_bound")
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.epochs, "epochs")
        if self.lr is not None:
            check_positive(self.lr, "lr")
        check_delta(self.delta)
        check_choice(self.method, "method", MECHANISMS)
        check_positive(self.count_noise_ratio, "count_noise_ratio")
        check_positive(self.max_ratio, "max_ratio")

    def resolve(self, n: int) -> "ResolvedPlan":
        """Steps, learning rate, sampling rate, sigma and epsilon of the run on ``n`` training rows."""
        n = check_positive_int(n, "n")
        if self.batch_size > n:
            raise ValueError(f"batch_size={self.batch_size} exceeds the {n} training rows")
        steps = steps_for_epochs(n, self.batch_size, self.epochs)
        q = self.batch_size / n
        lr = self.lr if self.lr is not None else 1.0 / math.sqrt(steps)
        if self.target_epsilon is not None:
            sigma = calibrate_noise_multiplier(self.target_epsilon, self.delta, sampling_rate=q, steps=steps,
                                               accounting=self.accounting)
        else:
            sigma = float(self.noise_multiplier)
        epsilon = epsilon_from_event(poisson_gaussian_event(q, sigma, steps=steps), self.delta,
                                     accounting=self.accounting)
        return ResolvedPlan(plan=self, n=n, steps=steps, lr=lr, sampling_rate=q, sigma=sigma, epsilon=epsilon)


@dataclass(frozen=True)
class ResolvedPlan:
    """A :class:`PrivacyPlan` on a training set of ``n`` rows (what the run will do)."""

    plan: PrivacyPlan
    n: int
    steps: int
    lr: float
    sampling_rate: float
    sigma: float
    epsilon: float

    def as_dict(self) -> dict:
        p = self.plan
        return {"method": p.method, "noise_multiplier": self.sigma, "target_epsilon": p.target_epsilon,
                "clip_bound": p.clip_bound, "batch_size": p.batch_size, "epochs": p.epochs, "steps": self.steps,
                "learning_rate": self.lr, "learning_rate_rule": "1/sqrt(T)" if p.lr is None else "given",
                "sampling_rate": self.sampling_rate, "n_train": self.n, "delta": p.delta,
                "accounting": p.accounting.as_dict()}


@dataclass(frozen=True)
class DiagnosisOptions:
    """How much work the diagnosis does (its cost, not what it predicts).

    ``rows``: training rows (group-stratified subsample) for the trajectories;
    ``curvature_rows``: rows for the drift's Jacobian and the sampling covariance;
    ``theory_rows``: rows for Theorem 2's terms and the traces; ``max_steps``: integration
    steps K beyond which the trajectories use proportionally fewer rows (K itself is what
    a stable integrator needs, h lambda_max <= 0.5, at most T); ``draws``: noise draws per prediction; ``max_exact_params``: the
    largest model whose Jacobian is formed exactly (else its diagonal);
    ``recommendations``: predict the mitigations too.
    """

    rows: int = 4000
    curvature_rows: int = 1000
    theory_rows: int = 1500
    max_steps: int = 200
    min_steps: int = 40
    draws: int = 200
    recommendation_draws: int = 100
    max_exact_params: int = 600
    recommendations: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rows", "curvature_rows", "theory_rows", "max_steps", "min_steps", "draws",
                     "recommendation_draws", "max_exact_params"):
            check_positive_int(getattr(self, name), name)
        if self.rows < MIN_TRAIN_ROWS:
            raise ValueError(f"rows must be at least {MIN_TRAIN_ROWS} (the trajectories' training rows: fewer cannot "
                             f"tell groups apart), got {self.rows}")
        if self.draws < 10 or self.recommendation_draws < 10:
            raise ValueError(f"draws and recommendation_draws must be >= 10, got {self.draws}, "
                             f"{self.recommendation_draws}")
        check_seed(self.seed)


@dataclass(frozen=True)
class Calibration:
    """Rescaling of the two parts of the prediction and a widening of its interval.

    Delta^k = ``clip_scale`` clip_k + ``noise_scale`` noise_k, half-width x ``widen``.
    ``datasets`` names the data sets it was fitted on: it refuses to be applied to any of
    them (:meth:`check_applicable`), so an evaluation with it is leave-one-data-set-out.
    """

    clip_scale: float = 1.0
    noise_scale: float = 1.0
    widen: float = 1.0
    datasets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_nonnegative(self.clip_scale, "clip_scale")
        check_nonnegative(self.noise_scale, "noise_scale")
        check_positive(self.widen, "widen")

    def check_applicable(self, dataset: str) -> None:
        """ValueError if ``dataset`` is one this calibration was fitted on."""
        if dataset in self.datasets:
            raise ValueError(f"the calibration was fitted on {dataset!r} (datasets {list(self.datasets)}): "
                             f"evaluating it there is not out of sample; fit it without {dataset!r}")


def fit_calibration(records: pd.DataFrame, *, coverage: float = 0.9) -> Calibration:
    """Least-squares scales of the clipping and noise parts, and the interval widening for ``coverage``.

    ``records`` has one row per (data set, setting, seed, group) with columns dataset,
    clip_part, noise_part, half_width (the uncalibrated 90% half-width) and actual (the
    measured cost). The scales minimise sum (actual - a clip - b noise)^2 over a, b >= 0;
    the widening is the smallest w >= 1 such that ``coverage`` of the rows have
    |actual - prediction| <= w half_width. The result remembers its data sets.
    """
    needed = {"dataset", "clip_part", "noise_part", "half_width", "actual"}
    if not needed <= set(records.columns):
        raise ValueError(f"records needs columns {sorted(needed)}, got {sorted(records.columns)}")
    if records.empty:
        raise ValueError("records is empty: nothing to calibrate on")
    check_positive(coverage, "coverage")
    design = records[["clip_part", "noise_part"]].to_numpy(dtype=float)
    target = records["actual"].to_numpy(dtype=float)
    from scipy.optimize import nnls

    (a, b), _ = nnls(design, target)
    pred = design @ np.array([a, b])
    ratio = np.abs(target - pred) / np.maximum(records["half_width"].to_numpy(dtype=float), 1e-9)
    widen = max(1.0, float(np.quantile(ratio, coverage)))
    return Calibration(clip_scale=float(a), noise_scale=float(b), widen=widen,
                       datasets=tuple(sorted(set(map(str, records["dataset"])))))


# ============================================================================ the problem
class _Problem:
    """The model as a function of one flat float64 parameter vector, and the rows the diagnosis uses."""

    def __init__(self, model: nn.Module, train: GroupedDataset, *, rows: int, curvature_rows: int,
                 theory_rows: int, seed: int) -> None:
        self.model = copy.deepcopy(model).to(torch.float64)
        self.model.eval()
        params = {k: v.detach().to(torch.float64) for k, v in parameters_of(self.model).items()}
        self.theta0, self.unflatten = flat_parameterisation(params)
        self.theta0 = self.theta0.clone()
        self.names = list(params)
        self.P = self.theta0.numel()
        self.weight_mask = torch.cat([torch.zeros(v.numel(), dtype=torch.float64) if k.endswith("bias")
                                      else torch.ones(v.numel(), dtype=torch.float64) for k, v in params.items()])
        self.l2 = float(getattr(model, "l2", 0.0) or 0.0)
        self.n_groups = train.n_groups
        self.group_names = train.group_names
        self.label_names = train.label_names
        self.train_sizes = train.group_sizes().to(torch.float64)
        self.n = len(train)
        self.drift_data = _stratified(train, rows, seed)
        # the curvature rows' per-sample gradients are materialised (rows x P numbers): at most 2^25 of them
        # (256 MiB), so a large model (the MNIST CNN's 431,080 parameters: 77 rows) uses fewer rows
        cap = max(32, MATERIALISED_ELEMENTS // max(self.P, 1))
        self.curvature_data = _stratified(self.drift_data, min(curvature_rows, cap), seed + 1)
        self.theory_data = _stratified(self.drift_data, min(theory_rows, 4 * cap), seed + 2)

    def params(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.unflatten(theta)

    def penalty(self, theta: torch.Tensor) -> torch.Tensor:
        return self.l2 * self.weight_mask * theta


def _stratified(data: GroupedDataset, rows: int, seed: int) -> GroupedDataset:
    """At most ``rows`` rows, a group-stratified random subset (every group keeps a row)."""
    if len(data) <= rows:
        return data
    rng = np.random.default_rng(seed)
    group = data.group.numpy()
    keep = []
    for k in range(data.n_groups):
        idx = np.flatnonzero(group == k)
        if len(idx):
            take = max(1, int(round(rows * len(idx) / len(data))))
            keep.append(rng.choice(idx, size=min(take, len(idx)), replace=False))
    return data.subset(np.sort(np.concatenate(keep)))


# ============================================================================ mechanisms
@dataclass(frozen=True)
class _Mechanism:
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

    def coefficients(self, norms: torch.Tensor, group: torch.Tensor, problem: _Problem
                     ) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(bounds C_i, coefficients c_i = w_i min(1, C_i/||g_i||), noise std s) for these rows."""
        ones = torch.ones_like(norms)
        if self.name == "sgd":
            return torch.full_like(norms, math.inf), ones, 0.0
        C = self.clip_bound
        if self.name in ("dpsgd", "mitigation"):
            bounds = torch.full_like(norms, C)
            return bounds, _clip(norms, bounds), self.sigma * C
        if self.name == "dpsgdf":  # paper 000 Alg. 2 with the expected (noise-free) counts of a batch
            b = self.batch_size
            clipped = (norms > C).to(torch.float64)
            sizes = torch.bincount(group, minlength=problem.n_groups).to(torch.float64)
            frac = torch.bincount(group, weights=clipped, minlength=problem.n_groups) / sizes.clamp(min=1)
            share = problem.train_sizes / problem.n
            pooled = float((frac * share).sum())
            if pooled * b < 1:
                group_bounds = torch.full((problem.n_groups,), C, dtype=torch.float64)
            else:
                group_bounds = C * (1 + (frac / pooled).clamp(max=self.max_ratio))
            bounds = group_bounds[group]
            return bounds, _clip(norms, bounds), self.sigma * float(group_bounds.max())
        if self.name == "fairdp":  # paper 002 as training/fairdp.py runs it, at its update's fixed point
            group_bounds = fairdp_stationary_bounds(
                norms, group, n_groups=problem.n_groups, initial=C,
                bias_coef=bias_coefficient(self.lr, 1.0 / self.lr),
                noise_coef=noise_coefficient(self.sigma, problem.P, self.batch_size))
            bounds = group_bounds[group]
            return bounds, _clip(norms, bounds), self.sigma * float(group_bounds.max())
        # naive (paper 000 Alg. 3): theta^k = (b/K) / max(q n_k, 1)
        expected = (self.sampling_rate * problem.train_sizes).clamp(min=1.0)
        theta = (self.batch_size / problem.n_groups) / expected
        bounds = torch.full_like(norms, C)
        return bounds, theta[group] * _clip(norms, bounds), self.sigma * C * float(theta.max())


def fairdp_stationary_bounds(norms: torch.Tensor, group: torch.Tensor, *, n_groups: int, initial: float,
                             bias_coef: float, noise_coef: float, excess_cap: float = 5.0,
                             iterations: int = 40) -> torch.Tensor:
    """Each group's FairDP bound at the fixed point of its update on the exact statistics (shape (K,)).

    FairDP (:mod:`dpfair_analysis.training.fairdp`) moves C_k by exp(eta_C (p_k - gamma_k)) each
    step, p_k(C) the group's clipped fraction and gamma_k(C) = min(1, 2V / (a (1 + e_k) + 2 e_k)),
    e_k(C) = mean_{i in k} min(||g_i|| / C - 1, R)^+: it rests where p_k(C) = gamma_k(C), i.e. where
    d tau_k / d C_k = 0 (Eq. 4). p_k falls and e_k falls (so gamma_k rises) as C grows, so
    p_k - gamma_k is non-increasing and the root is unique: bisection on log C within FairDP's
    public range [initial / 100, initial * 100] (a root outside it is the range's end, as the
    update's clamp makes it). A group without rows keeps ``initial``.
    """
    low = torch.full((n_groups,), math.log(initial / 100), dtype=torch.float64)
    high = torch.full((n_groups,), math.log(initial * 100), dtype=torch.float64)
    present = torch.bincount(group, minlength=n_groups) > 0

    def excess_of_target(log_clips: torch.Tensor) -> torch.Tensor:
        counts, excess = fairdp_statistics(norms, group, log_clips.exp(), n_groups=n_groups, excess_cap=excess_cap)
        rows = counts.sum(0).clamp(min=1.0)
        gamma = target_clipped_fraction(excess / rows, bias_coef=bias_coef, noise_coef=noise_coef)
        return counts[0] / rows - gamma

    at_low, at_high = excess_of_target(low) <= 0, excess_of_target(high) >= 0
    for _ in range(iterations):
        middle = (low + high) / 2
        above = excess_of_target(middle) > 0  # still clipping more than the target: the root is larger
        low, high = torch.where(above, middle, low), torch.where(above, high, middle)
    bounds = ((low + high) / 2).exp()
    bounds = torch.where(at_low, torch.full_like(bounds, initial / 100), bounds)
    bounds = torch.where(at_high & ~at_low, torch.full_like(bounds, initial * 100), bounds)
    return torch.where(present, bounds, torch.full_like(bounds, initial))


def _clip(norms: torch.Tensor, bounds: torch.Tensor) -> torch.Tensor:
    return torch.where(norms > bounds, bounds / norms.clamp(min=1e-300), torch.ones_like(norms))


def _mitigation_objective(problem: _Problem, mechanism: _Mechanism, theta: torch.Tensor,
                          data: GroupedDataset) -> FairnessLensMitigation:
    """Paper 001's mitigation objective with its coefficients from the exact (noise-free) statistics."""
    objective = FairnessLensMitigation(*mechanism.gammas, mechanism.clip_bound)
    sizes = problem.train_sizes.clamp(min=1.0)
    objective.fractions = sizes / sizes.sum()
    params = problem.params(theta)
    G = _per_sample_matrix(problem, theta, data.X, data.y)
    clipped = G * _clip(G.norm(dim=1), torch.full((len(G),), mechanism.clip_bound, dtype=torch.float64))[:, None]
    bias = G - clipped
    bias = bias * _clip(bias.norm(dim=1), torch.full((len(G),), mechanism.clip_bound, dtype=torch.float64))[:, None]
    with torch.no_grad():
        phi = boundary_proxy_of_logits(functional_call(problem.model, params, (data.X.to(torch.float64),)))
    rows = torch.cat([clipped, bias, phi.unsqueeze(1), torch.ones(len(G), 1, dtype=torch.float64)], 1)
    block = torch.zeros(problem.n_groups, rows.shape[1], dtype=torch.float64).index_add_(0, data.group, rows)
    objective.statistics = block
    objective.coefficients = objective._coefficients(params, problem.P)
    return objective


def _per_sample_matrix(problem: _Problem, theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
                       mechanism: _Mechanism | None = None, group: torch.Tensor | None = None) -> torch.Tensor:
    """(n, P) per-sample gradients of the training objective at theta (the mitigation's psi_i if asked)."""
    X = X.to(torch.float64)
    if mechanism is not None and mechanism.name == "mitigation":
        objective = _mitigation_objective(problem, mechanism, theta, GroupedDataset(
            X=X, y=y, group=group, group_names=problem.group_names, label_names=("0",) * (int(y.max()) + 1)))
        grads, _ = objective.per_sample_gradients(problem.model, X, y, group, params=problem.params(theta))
        return torch.cat([g.reshape(len(X), -1) for g in grads.values()], 1)

    def sample_loss(t: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(problem.model, problem.unflatten(t), (x.unsqueeze(0),)),
                               target.unsqueeze(0))

    chunk = max(1, 2 ** 22 // max(problem.P, 1))
    return vmap(grad(sample_loss), in_dims=(None, 0, 0), chunk_size=chunk)(theta, X, y)


def _drift(problem: _Problem, mechanism: _Mechanism, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(E[step direction] = (1/m) sum_i c_i g_i + lambda w, per-sample norms, noise std) on the drift rows."""
    data = problem.drift_data
    X = data.X.to(torch.float64)
    if mechanism.name == "mitigation":
        G = _per_sample_matrix(problem, theta, X, data.y, mechanism, data.group)
        norms = G.norm(dim=1)
        _, c, s = mechanism.coefficients(norms, data.group, problem)
        return (c / len(G)) @ G + problem.penalty(theta), norms, s
    per_sample, _ = fast_per_sample_gradients(problem.model, X, data.y, params=problem.params(theta))
    norms = per_sample.norms.detach()
    _, c, s = mechanism.coefficients(norms, data.group, problem)
    total = per_sample.weighted_sum(c / len(norms))
    flat = torch.cat([total[name].reshape(-1).detach() for name in problem.names])
    return flat + problem.penalty(theta), norms, s


def _ggn_diagonal(problem: _Problem, theta: torch.Tensor, X: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_i w_i diag(J_i^T (diag p_i - p_i p_i^T) J_i): per-row Gauss-Newton diagonals (the Hessian's for
    piecewise-linear models), from K vector-Jacobian products per row (see
    :func:`~dpfair_analysis.theory.hessian.ggn_sample_traces`, whose trace this is the diagonal of)."""

    def row_diagonal(x: torch.Tensor) -> torch.Tensor:
        logits, pullback = vjp(lambda t: functional_call(problem.model, problem.unflatten(t),
                                                          (x.unsqueeze(0),)).squeeze(0), theta)
        prob = torch.softmax(logits, dim=0)
        root = prob.sqrt()
        cotangents = torch.diag(root) - root.unsqueeze(1) * prob.unsqueeze(0)  # row k = a_k
        (rows,) = vmap(pullback)(cotangents)
        return (rows ** 2).sum(0)

    model = problem.model
    if isinstance(model, LogisticRegression) and set(problem.names) == {"linear.weight", "linear.bias"}:
        # closed form (paper 001 Example 3): H_i = (diag f - f f^T) kron x~ x~^T, so the diagonal entry of
        # weight (k, j) is f_k (1 - f_k) x_j^2 (binary, one score: p (1 - p) x_j^2) and of bias k f_k (1 - f_k)
        params = problem.params(theta)
        with torch.no_grad():
            f = torch.softmax(functional_call(model, params, (X,)), dim=1)
        curvature = (f[:, 1] * f[:, 0]).unsqueeze(1) if model.binary else f * (1 - f)   # (n, outputs)
        weighted = curvature * weights.unsqueeze(1)
        parts = {"linear.weight": weighted.T @ X.flatten(1) ** 2, "linear.bias": weighted.sum(0)}
        return torch.cat([parts[name].reshape(-1) for name in problem.names])
    n_out = int(functional_call(model, problem.unflatten(theta), (X[:1],)).shape[1])
    chunk = max(1, 2 ** 22 // max(problem.P * n_out, 1))
    total = torch.zeros(problem.P, dtype=torch.float64)
    for start in range(0, len(X), chunk):
        part = vmap(row_diagonal)(X[start:start + chunk])
        total += weights[start:start + chunk] @ part
    return total


def _largest_curvature(problem: _Problem, theta: torch.Tensor, iterations: int = 12) -> float:
    """lambda_max of the non-private drift's Jacobian at theta (power iteration on Jacobian-vector products)."""
    data = problem.curvature_data
    X = data.X.to(torch.float64)

    def mean_loss(t: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(problem.model, problem.unflatten(t), (X,)), data.y)

    def hvp(v: torch.Tensor) -> torch.Tensor:
        return jvp(grad(mean_loss), (theta,), (v,))[1] + problem.l2 * problem.weight_mask * v

    gen = torch.Generator().manual_seed(12345)
    v = torch.randn(problem.P, generator=gen, dtype=torch.float64)
    v /= v.norm()
    value = 0.0
    for _ in range(iterations):
        w = hvp(v)
        value = float(v @ w)
        norm = w.norm()
        if norm == 0:
            break
        v = w / norm
    return max(value, 0.0)


# ============================================================================ trajectories
@dataclass
class _Trajectory:
    theta: torch.Tensor
    checkpoints: list[torch.Tensor]
    noise_var: float          # mean over the trajectory of s_t^2 (the Gaussian noise variance on the sum)
    steps: int
    integration_steps: int


def _trajectory(problem: _Problem, mechanism: _Mechanism, *, integration_steps: int,
                checkpoints: Sequence[float] = ()) -> _Trajectory:
    """theta_bar after the run's T steps of the expected update (K steps of size r T / K)."""
    T = mechanism.steps
    K = max(1, min(integration_steps, T))
    h = mechanism.lr * T / K
    marks = {max(1, min(K, int(round(f * K)))) for f in checkpoints}
    theta = problem.theta0.clone()
    kept, noise = [], []
    for k in range(1, K + 1):
        direction, _, s = _drift(problem, mechanism, theta)
        noise.append(s ** 2)
        theta = theta - h * direction
        if not torch.isfinite(theta).all():
            raise ValueError(f"the expected {mechanism.name} trajectory diverged (learning rate "
                             f"{mechanism.lr:g} x {T} steps is unstable for this model and data)")
        if k in marks:
            kept.append(theta.clone())
    return _Trajectory(theta=theta, checkpoints=kept, noise_var=float(np.mean(noise)), steps=T,
                       integration_steps=K)


# ============================================================================ accumulated covariance
@dataclass
class _Covariance:
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


def _covariance(problem: _Problem, mechanism: _Mechanism, trajectory: _Trajectory, *, exact: bool) -> _Covariance:
    """Sigma_T of the linearised run around the trajectory's endpoint (module docstring, step 2)."""
    theta, r, T = trajectory.theta, mechanism.lr, trajectory.steps
    b, q = mechanism.batch_size, mechanism.sampling_rate
    data = problem.curvature_data
    X = data.X.to(torch.float64)
    G = _per_sample_matrix(problem, theta, X, data.y, mechanism, data.group)
    norms = G.norm(dim=1)
    bounds, c, _ = mechanism.coefficients(norms, data.group, problem)
    contributions = G * c[:, None]
    if not mechanism.private:  # the non-private step divides by the actual batch size: centred moments
        contributions = contributions - contributions.mean(0)
    m_rows = len(G)
    # the drift's Jacobian with each row's bound and weight held at their endpoint values (DPSGD-F's bounds and
    # Naive's weights are piecewise constant); the mitigation's curvature is taken as its cross-entropy's
    weights = c / _clip(norms, bounds)

    def drift(t: torch.Tensor) -> torch.Tensor:
        Gt = _per_sample_matrix(problem, t, X, data.y)
        nt = Gt.norm(dim=1)
        ct = weights * torch.where(nt > bounds, bounds / nt.clamp(min=1e-300), torch.ones_like(nt))
        return (ct[:, None] * Gt).mean(0) + problem.penalty(t)

    scale = (1 - q) / (b * m_rows)
    noise_var = trajectory.noise_var / b ** 2        # per-step covariance (s/b)^2 I of the Gaussian noise
    if exact:
        A = jacfwd(drift)(theta)
        sampling_step = scale * contributions.T @ contributions
        noise_step = noise_var * torch.eye(problem.P, dtype=torch.float64)
    else:  # diag(A) ~ (1/m) sum_i c_i diag(G_i) + lambda w: the Gauss-Newton diagonal of each row, weighted
        A = _ggn_diagonal(problem, theta, X, c) / m_rows + problem.l2 * problem.weight_mask
        sampling_step = scale * (contributions ** 2).sum(0)
        noise_step = torch.full((problem.P,), noise_var, dtype=torch.float64)
    basis, sampling, unstable = accumulated_covariance(A, sampling_step, lr=r, steps=T)
    _, noise, _ = accumulated_covariance(A, noise_step, lr=r, steps=T)
    return _Covariance(basis, sampling, noise, unstable)


# ============================================================================ accuracy under noise
def _correctness(problem: _Problem, theta: torch.Tensor, covariance: _Covariance | None, data: GroupedDataset, *,
                 draws: int, generator: torch.Generator, chunk: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct at theta (n,), correct at theta + zeta for each draw (draws, n)) on ``data``, as booleans."""
    X = data.X.to(torch.float64)

    def logits_at(t: torch.Tensor) -> torch.Tensor:
        return functional_call(problem.model, problem.unflatten(t), (X,))

    with torch.no_grad():
        point = logits_at(theta).argmax(1) == data.y
        if covariance is None:
            return point, point.unsqueeze(0).expand(draws, -1)
        out = []
        for start in range(0, draws, chunk):
            zeta = covariance.draw(min(chunk, draws - start), generator)
            logits = vmap(logits_at)(theta + zeta)
            out.append(logits.argmax(-1) == data.y)
    return point, torch.cat(out)


def _group_means(values: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Per-group means along the last axis (rows), shape (..., K)."""
    values = values.to(torch.float64)
    one_hot = F.one_hot(group, n_groups).to(torch.float64)
    return values @ one_hot / one_hot.sum(0).clamp(min=1)


@dataclass
class Prediction:
    """The predictor's output for one mechanism: per-group frame and run-level facts."""

    table: pd.DataFrame              # group, n_eval, cost, half_width, clip_part, noise_part, acc_nonprivate, ...
    collapsed: bool
    collapse_label: str | None
    noise_per_weight: float          # std of the accumulated Gaussian noise per parameter
    sampling_per_weight: float
    weight_scale: float              # RMS of the private endpoint's parameters
    unstable_directions: int
    steps: int
    integration_steps: int
    mechanism: str


def _predict(problem: _Problem, mechanism: _Mechanism, reference: tuple[_Trajectory, torch.Tensor, torch.Tensor],
             evaluation: GroupedDataset, *, draws: int, integration_steps: int, exact: bool,
             generator: torch.Generator, calibration: Calibration) -> Prediction:
    """Delta^k for one mechanism against the non-private reference (module docstring, steps 1-4)."""
    _, np_point, np_draws = reference
    trajectory = _trajectory(problem, mechanism, integration_steps=integration_steps)
    covariance = _covariance(problem, mechanism, trajectory, exact=exact)
    point, noisy = _correctness(problem, trajectory.theta, covariance, evaluation, draws=draws, generator=generator)
    K, group = problem.n_groups, evaluation.group
    np_draws = np_draws[:draws]
    acc_np_point = _group_means(np_point, group, K)
    acc_point = _group_means(point, group, K)
    acc_draws = _group_means(noisy, group, K)
    acc_np_draws = _group_means(np_draws, group, K)
    clip_part = acc_point - acc_np_point
    cost_draws = acc_draws - acc_np_draws
    noise_part = cost_draws.mean(0) - clip_part
    change = noisy.to(torch.float64) - np_draws.to(torch.float64)      # per row and draw: -1, 0, +1
    row_var = _group_means(change ** 2, group, K).mean(0) - cost_draws.mean(0) ** 2
    n_eval = torch.bincount(group, minlength=K).to(torch.float64)
    base_sd = (cost_draws.var(0) + row_var.clamp(min=0) / n_eval.clamp(min=1)).sqrt()
    cost = calibration.clip_scale * clip_part + calibration.noise_scale * noise_part
    half = Z90 * calibration.widen * base_sd
    with torch.no_grad():
        predicted = functional_call(problem.model, problem.unflatten(trajectory.theta),
                                    (evaluation.X.to(torch.float64),)).argmax(1)
    labels = torch.unique(predicted)
    collapsed = len(labels) == 1 and len(torch.unique(evaluation.y)) > 1
    table = pd.DataFrame({
        "group": list(problem.group_names), "n_eval": n_eval.numpy().astype(int),
        "cost": cost.numpy(), "half_width": half.numpy(), "uncalibrated_half_width": (Z90 * base_sd).numpy(),
        "clip_part": clip_part.numpy(), "noise_part": noise_part.numpy(),
        "acc_nonprivate": acc_np_draws.mean(0).numpy(), "acc_private": acc_draws.mean(0).numpy(),
        "acc_private_noiseless": acc_point.numpy(), "acc_nonprivate_noiseless": acc_np_point.numpy()})
    table["low"], table["high"] = table["cost"] - table["half_width"], table["cost"] + table["half_width"]
    _widen_small_groups(table, train_sizes=problem.train_sizes.numpy())
    return Prediction(table=table, collapsed=collapsed,
                      collapse_label=str(problem.label_names[int(labels[0])]) if collapsed else None,
                      noise_per_weight=covariance.per_weight("noise"),
                      sampling_per_weight=covariance.per_weight("sampling"),
                      weight_scale=float(trajectory.theta.pow(2).mean().sqrt()),
                      unstable_directions=covariance.unstable_directions, steps=trajectory.steps,
                      integration_steps=trajectory.integration_steps, mechanism=mechanism.name)


def _widen_small_groups(table: pd.DataFrame, *, train_sizes: np.ndarray) -> None:
    """Give every group below :data:`MIN_GROUP_ROWS` training or evaluation rows the whole feasible range
    of a cost, [-acc_k(non-private), 1 - acc_k(non-private)], as its interval (in place; column
    ``too_small``): its point prediction is kept, but nothing narrower can be claimed from so few rows."""
    small = (table["n_eval"].to_numpy() < MIN_GROUP_ROWS) | (train_sizes < MIN_GROUP_ROWS)
    table["too_small"] = small
    low, high = -table["acc_nonprivate"], 1.0 - table["acc_nonprivate"]
    table.loc[small, "low"] = low[small]
    table.loc[small, "high"] = high[small]
    table.loc[small, "half_width"] = ((high - low) / 2)[small]


# ============================================================================ theory quantities
def _theory_quantities(problem: _Problem, checkpoints: Sequence[torch.Tensor], plan: ResolvedPlan,
                       generator: torch.Generator) -> pd.DataFrame:
    """Per-group quantities of the theory, averaged over points of the non-private trajectory.

    clip_fraction (||g_i|| > C), clip_bias (paper 000 Eq. 1's B: mean max(0, ||g_i|| - C)),
    grad_norm (mean ||g_i||), clip_term and noise_term (paper 001 Thm 2, Eq. 4 per step,
    corrected noise term (eta^2/2) Tr(H_a) (sigma C / b)^2), trace (Tr(H_a) of the group's
    mean loss), boundary (mean 1 - sum_k f_k^2).
    """
    data = problem.theory_data
    C, b, r = plan.plan.clip_bound, plan.plan.batch_size, plan.lr
    K = problem.n_groups
    exact_terms = problem.P <= 500
    trace_method = ("closed" if isinstance(problem.model, LogisticRegression)
                    else "ggn" if is_piecewise_linear(problem.model) else "hutchinson")
    frames = []
    for theta in checkpoints:
        params = problem.params(theta)
        X = data.X.to(torch.float64)
        per_sample, _ = fast_per_sample_gradients(problem.model, X, data.y, params=params)
        norms = per_sample.norms.detach()
        clipped = (norms > C).to(torch.float64)
        excess = (norms - C).clamp(min=0)
        with torch.no_grad():
            phi = boundary_proxy_of_logits(functional_call(problem.model, params, (X,)))
        frame = pd.DataFrame({
            "group": list(problem.group_names),
            "clip_fraction": _group_means(clipped, data.group, K).numpy(),
            "clip_bias": _group_means(excess, data.group, K).numpy(),
            "grad_norm": _group_means(norms, data.group, K).numpy(),
            "boundary": _group_means(phi, data.group, K).numpy()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traces = group_hessian_traces(problem.model, data, method=trace_method, params=params, probes=8,
                                          generator=generator)
        frame["trace"] = traces["trace"].to_numpy()[1:]
        frame["noise_term"] = 0.5 * r ** 2 * frame["trace"] * (plan.sigma * C / b) ** 2
        if exact_terms:
            moments = StepMoments(problem.model, data, clip_bound=C, params=params, max_params=500)
            terms = one_step_decomposition(moments, lr=r, noise_multiplier=plan.sigma,
                                           batch_size=max(plan.sampling_rate * len(data), 1e-9))
            frame["clip_term"] = terms["clip"].to_numpy()[1:]
        else:  # first-order part of R^clip: eta <g_a, g_D - gbar_D>
            c = _clip(norms, torch.full_like(norms, C))
            mean_plain = per_sample.weighted_sum(torch.full_like(norms, 1.0 / len(norms)))
            mean_clipped = per_sample.weighted_sum(c / len(norms))
            diff = torch.cat([(mean_plain[k] - mean_clipped[k]).reshape(-1) for k in problem.names])
            terms = []
            for k in range(K):
                rows = (data.group == k).to(torch.float64)
                g_k = per_sample.weighted_sum(rows / rows.sum().clamp(min=1))
                g_k = torch.cat([g_k[name].reshape(-1) for name in problem.names])
                terms.append(float(r * g_k @ diff))
            frame["clip_term"] = terms
        frames.append(frame)
    table = pd.concat(frames).groupby("group", sort=False).mean().reset_index()
    table["n"] = problem.train_sizes.numpy().astype(int)
    return table


# ============================================================================ reasons and the verdict
def reasons_for(row: pd.Series, *, population_boundary: float, n_total: int, n_groups: int) -> list[str]:
    """Why a group is predicted to be hurt (subset of :data:`REASONS`, in that order; empty if not hurt).

    ``row`` has cost, clip_part, noise_part, boundary, n and too_small (see the module docstring for the
    rules); a group below :data:`MIN_GROUP_ROWS` always has "size", hurt or not: its prediction is not reliable.
    """
    hurt = -float(row["cost"])
    too_small = bool(row.get("too_small", False))
    if hurt < NEGLIGIBLE:
        return ["size"] if too_small else []
    clip_harm, noise_harm = max(0.0, -float(row["clip_part"])), max(0.0, -float(row["noise_part"]))
    total = clip_harm + noise_harm
    reasons = []
    if clip_harm >= NEGLIGIBLE and clip_harm >= total / 3:
        reasons.append("clipping")
    if noise_harm >= NEGLIGIBLE and noise_harm >= total / 3:
        reasons.append("noise")
    if too_small or float(row["n"]) < 0.5 * n_total / n_groups:
        reasons.append("size")
    if population_boundary > 0 and float(row["boundary"]) >= 1.15 * population_boundary:
        reasons.append("near the boundary")
    return reasons


def _dominant_mechanism(prediction: Prediction) -> str:
    """"clipping", "noise", "both" or "neither" from the size-weighted parts over the groups."""
    t = prediction.table
    weights = t["n_eval"] / t["n_eval"].sum()
    clip = float(np.sqrt((weights * t["clip_part"] ** 2).sum()))
    noise = float(np.sqrt((weights * t["noise_part"] ** 2).sum()))
    if max(clip, noise) < NEGLIGIBLE:
        return "neither"
    if clip >= 3 * noise:
        return "clipping"
    if noise >= 3 * clip:
        return "noise"
    return "both"


# ============================================================================ the diagnosis
@dataclass
class Diagnosis:
    """What :func:`diagnose` found; :meth:`to_json`, :func:`format_diagnosis`, :func:`report_html` show it."""

    dataset: str
    plan: ResolvedPlan
    groups: pd.DataFrame             # one row per group: prediction + theory quantities + rank + reasons
    prediction: Prediction
    mechanism: str                   # which mechanism dominates: clipping | noise | both | neither
    most_hurt: dict
    recommendations: list[dict]
    model: str
    seconds: float = 0.0
    calibration: Calibration = field(default_factory=Calibration)
    notes: list[str] = field(default_factory=list)
    data_info: dict = field(default_factory=dict)

    def settings(self) -> dict:
        p = self.prediction
        return {**self.plan.as_dict(), "dataset": self.dataset, "model": self.model,
                "mechanism": self.mechanism, "collapse_predicted": p.collapsed,
                "collapse_label": p.collapse_label,
                "noise_per_weight": p.noise_per_weight, "sampling_noise_per_weight": p.sampling_per_weight,
                "weight_scale": p.weight_scale, "integration_steps": p.integration_steps,
                "calibration": asdict(self.calibration), "seconds": self.seconds, "data": dict(self.data_info)}

    def to_json(self) -> dict:
        """The issue's schema: groups (exactly :data:`GROUP_KEYS` each), most_hurt, settings, epsilon, delta,
        recommendations."""
        groups = []
        for row in self.groups.to_dict("records"):
            groups.append({"group": str(row["group"]), "n": int(row["n"]),
                           "predicted_cost": _num(row["cost"]), "predicted_cost_low": _num(row["low"]),
                           "predicted_cost_high": _num(row["high"]), "rank": int(row["rank"]),
                           "reasons": list(row["reasons"]), "clip_fraction": _num(row["clip_fraction"]),
                           "clip_bias": _num(row["clip_bias"]), "noise_term": _num(row["noise_term"]),
                           "trace": _num(row["trace"]), "boundary": _num(row["boundary"])})
        return {"groups": groups, "most_hurt": self.most_hurt, "settings": self.settings(),
                "epsilon": _num(self.plan.epsilon), "delta": self.plan.plan.delta,
                "recommendations": self.recommendations}

    def explanation(self) -> list[str]:
        """Plain sentences: the regime, the verdict, and why per group."""
        p, plan = self.prediction, self.plan
        lines = []
        mech = {"clipping": "clipping dominates: the cost is what clipping does to learning, not noise",
                "noise": "noise dominates: the cost is the accumulated Gaussian noise flipping rows near the boundary",
                "both": "clipping and noise both matter",
                "neither": "neither clipping nor noise changes any group's accuracy by more than 0.005"}[self.mechanism]
        lines.append(f"At these settings {mech}. Over the run the Gaussian noise moves each weight by about "
                     f"{p.noise_per_weight:.3g} ({p.noise_per_weight / max(plan.sigma, 1e-12):.3g} sigma; the "
                     f"weights' RMS is {p.weight_scale:.3g}).")
        if p.collapsed:
            lines.append(f"DP-SGD is predicted to end as a constant classifier (it predicts {p.collapse_label!r} "
                         f"for every row): each group's cost is then its non-private accuracy above its share of "
                         f"that label.")
        mh = self.most_hurt
        if mh.get("group") is None:
            lines.append("No group is predicted to lose more than 0.005 accuracy.")
        elif mh["callable"]:
            lines.append(f"Most hurt: {mh['group']} (predicted {mh['cost']:+.4f}; next {mh['runner_up']} "
                         f"{mh['runner_up_cost']:+.4f}).")
        else:
            lines.append(f"The most-hurt group cannot be called: {mh['group']} ({mh['cost']:+.4f}) and "
                         f"{mh['runner_up']} ({mh['runner_up_cost']:+.4f}) are within the prediction's uncertainty.")
        for row in self.groups.itertuples():
            if row.reasons:
                lines.append(f"{row.group}: {', '.join(row.reasons)} -- clipping part {row.clip_part:+.4f}, noise "
                             f"part {row.noise_part:+.4f}; {row.clip_fraction:.0%} of its rows clipped at C, "
                             f"Tr(H) {row.trace:.3g}, 1 - sum f^2 = {row.boundary:.3f}, n = {row.n:,}.")
        lines += self.notes
        return lines


def _num(value) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def diagnose(train: GroupedDataset, evaluation: GroupedDataset, model: nn.Module, plan: PrivacyPlan, *,
             options: DiagnosisOptions = DiagnosisOptions(), calibration: Calibration = Calibration(),
             dataset: str | None = None, model_name: str | None = None) -> Diagnosis:
    """Predict each group's cost of privacy Delta^k under ``plan``, with an interval, a ranking and reasons.

    Parameters
    ----------
    train : GroupedDataset
        The rows the private run would train on.
    evaluation : GroupedDataset
        The rows the costs are measured on (e.g. the test split of ``dpfair compare``).
    model : nn.Module
        The model at its initial weights (both runs start there; a trained model gives a
        fine-tuning diagnosis). Its ``l2`` attribute is the L2 weight. Not modified.
    plan : PrivacyPlan
        The planned private run.
    options : DiagnosisOptions
        How much work to do.
    calibration : Calibration
        Default: none. One fitted on other data sets (refused if fitted on ``dataset``).
    dataset, model_name : str, optional
        Names for the report (``dataset`` defaults to ``train.name``).

    Returns
    -------
    Diagnosis
    """
    import time

    start = time.perf_counter()
    for value, name in ((train, "train"), (evaluation, "evaluation")):
        if not isinstance(value, GroupedDataset):
            raise TypeError(f"{name} must be a GroupedDataset, got {type(value).__name__}")
    if train.group_names != evaluation.group_names:
        raise ValueError(f"train and evaluation have different groups: {train.group_names} vs "
                         f"{evaluation.group_names}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dataset = dataset or train.name
    calibration.check_applicable(dataset)
    if len(train) < MIN_TRAIN_ROWS:
        raise ValueError(f"train has {len(train)} rows; a diagnosis needs at least {MIN_TRAIN_ROWS}")
    resolved = plan.resolve(len(train))
    problem = _Problem(model, train, rows=options.rows, curvature_rows=options.curvature_rows,
                       theory_rows=options.theory_rows, seed=options.seed)
    with torch.no_grad():
        n_out = problem.model(train.X[:1].to(torch.float64)).shape[1]
    if train.n_classes != n_out:
        raise ValueError(f"the data have {train.n_classes} label classes but the model outputs {n_out} logits "
                         f"(it must output one per class)")
    generator = torch.Generator().manual_seed(options.seed)
    exact = problem.P <= options.max_exact_params
    lam = _largest_curvature(problem, problem.theta0)
    horizon = resolved.lr * resolved.steps
    # a stable, non-oscillating integrator needs h lambda_max <= 0.5 (h = r T / K); past max_steps the drift is
    # estimated on fewer rows so that the work K x rows stays max_steps x rows (never fewer than 500 rows)
    integration_steps = int(min(resolved.steps, max(options.min_steps, math.ceil(horizon * lam / 0.5))))
    if integration_steps > options.max_steps:
        fewer = max(500, options.rows * options.max_steps // integration_steps)
        if fewer < len(problem.drift_data):
            problem.drift_data = _stratified(problem.drift_data, fewer, options.seed + 3)
    sgd = _Mechanism("sgd", steps=resolved.steps, lr=resolved.lr, batch_size=plan.batch_size,
                     sampling_rate=resolved.sampling_rate, label="SGD")
    np_trajectory = _trajectory(problem, sgd, integration_steps=integration_steps, checkpoints=(1 / 3, 2 / 3, 1.0))
    np_covariance = _covariance(problem, sgd, np_trajectory, exact=exact)
    np_point, np_draws = _correctness(problem, np_trajectory.theta, np_covariance, evaluation,
                                      draws=max(options.draws, options.recommendation_draws), generator=generator)
    reference = (np_trajectory, np_point, np_draws)
    predict_kwargs = dict(integration_steps=integration_steps, exact=exact, generator=generator)
    planned = _mechanism_for(plan, resolved, plan.method)
    prediction = _predict(problem, planned, reference, evaluation, draws=options.draws, calibration=calibration,
                          **predict_kwargs)
    theory = _theory_quantities(problem, np_trajectory.checkpoints, resolved, generator)
    groups = prediction.table.merge(theory, on="group")
    population_boundary = float((groups["boundary"] * groups["n"]).sum() / groups["n"].sum())
    groups["reasons"] = [reasons_for(row, population_boundary=population_boundary, n_total=len(train),
                                     n_groups=train.n_groups) for _, row in groups.iterrows()]
    groups["rank"] = groups["cost"].rank(method="first").astype(int)  # 1 = most hurt (most negative)
    groups = groups.sort_values("rank").reset_index(drop=True)
    most_hurt = _most_hurt(groups)
    notes = []
    if prediction.unstable_directions:
        notes.append(f"Warning: the learning rate is unstable along {prediction.unstable_directions} curvature "
                     f"direction(s) (r a_j > 2): the noise there is capped in the prediction and the run may diverge.")
    small = groups[groups["too_small"]]
    if len(small):
        listed = ", ".join(f"{g} ({n:,} training / {e:,} evaluation rows)" for g, n, e in
                           zip(small["group"], small["n"].astype(int), small["n_eval"].astype(int)))
        notes.append(f"Too few rows to predict: {listed}, below the minimum of {MIN_GROUP_ROWS}; the interval "
                     f"given is the whole range a cost can take.")
    if not exact:
        notes.append(f"The model has {problem.P:,} parameters (> {options.max_exact_params}): the accumulated "
                     f"noise uses diagonal curvature and step covariances (the rows' Gauss-Newton diagonals).")
    diagnosis = Diagnosis(dataset=dataset, plan=resolved, groups=groups, prediction=prediction,
                          mechanism=_dominant_mechanism(prediction), most_hurt=most_hurt, recommendations=[],
                          model=model_name or type(model).__name__, calibration=calibration, notes=notes)
    if options.recommendations:
        diagnosis.recommendations = recommendations(problem, plan, resolved, reference, evaluation, groups,
                                                    draws=options.recommendation_draws, calibration=calibration,
                                                    **predict_kwargs)
    diagnosis.seconds = time.perf_counter() - start
    return diagnosis


def _most_hurt(groups: pd.DataFrame) -> dict:
    """The group with the most negative predicted cost, and whether it can be called (z >= 1 over the next)."""
    first = groups.iloc[0]
    if -float(first["cost"]) < NEGLIGIBLE:
        return {"group": None, "callable": False, "cost": _num(first["cost"]), "runner_up": None,
                "runner_up_cost": None, "margin": None}
    if len(groups) < 2:
        return {"group": str(first["group"]), "callable": True, "cost": _num(first["cost"]), "runner_up": None,
                "runner_up_cost": None, "margin": None}
    second = groups.iloc[1]
    gap = float(second["cost"] - first["cost"])
    spread = math.hypot(float(first["half_width"]), float(second["half_width"])) / Z90
    return {"group": str(first["group"]), "callable": bool(gap > spread), "cost": _num(first["cost"]),
            "runner_up": str(second["group"]), "runner_up_cost": _num(second["cost"]), "margin": gap}


def _mechanism_for(plan: PrivacyPlan, resolved: ResolvedPlan, method: str, **changes) -> _Mechanism:
    """The predictor's view of ``method`` at the plan's settings (equal privacy for DPSGD-F, Naive, FairDP,
    mitigation)."""
    sigma, steps = resolved.sigma, resolved.steps
    q, b = resolved.sampling_rate, plan.batch_size
    if method in ("dpsgdf", "naive", "fairdp"):  # stop at DP-SGD's epsilon (paper 000 §6.1.3), as `compare` does
        releases = 2 if method == "fairdp" else 1   # FairDP: counts and capped excess, each at the count noise
        joint = joint_noise_multiplier((plan.count_noise_ratio * sigma,) * releases + (sigma,))
        steps = max_steps_within(resolved.epsilon, plan.delta, sampling_rate=q, noise_multiplier=joint,
                                 max_steps=steps, accounting=plan.accounting)
    if method == "mitigation":  # counts once (multiplier 10) + statistics at 2 sigma each step, same epsilon
        joint = calibrate_noise_multiplier(resolved.epsilon, plan.delta, sampling_rate=q, steps=steps,
                                           accounting=plan.accounting, tolerance=RECOMMENDATION_TOLERANCE,
                                           other_events=[dp_event.GaussianDpEvent(10.0)])
        sigma = joint * math.sqrt(1 + 1 / 4)
    kwargs = dict(name=method, clip_bound=plan.clip_bound, sigma=sigma, steps=steps, lr=resolved.lr,
                  batch_size=b, sampling_rate=q, max_ratio=plan.max_ratio, gammas=plan.gammas,
                  label=method.upper())
    kwargs.update(changes)
    return _Mechanism(**kwargs)


# ============================================================================ what would help
def quantile_rule_bound(norms: torch.Tensor, *, noise_multiplier: float, batch_size: int, n_params: int) -> float:
    """Paper 000 §4.2's C for Gaussian noise: the (1 - kappa/b)-quantile of the per-sample norms.

    V + B of Eq. (1) with Gaussian noise N(0, sigma^2 C^2 I_P) on the sum has slope
    (kappa - #{||g_i|| > C}) / b in C, kappa = E||N(0, sigma^2 I_P)|| (:mod:`.theory.bounds`),
    so the minimiser clips ceil(kappa) of b rows: the (1 - kappa/b)-quantile (empirical,
    inverted CDF). Returns 0 when kappa >= b.
    """
    kappa = expected_gaussian_norm(noise_multiplier, n_params)
    level = 1.0 - kappa / batch_size
    if level <= 0:
        return 0.0
    return float(np.quantile(norms.double().numpy(), level, method="inverted_cdf"))


def recommendations(problem: _Problem, plan: PrivacyPlan, resolved: ResolvedPlan, reference, evaluation, groups,
                    *, draws: int, calibration: Calibration, **predict_kwargs) -> list[dict]:
    """Predicted per-group costs under each mitigation (flagged as predictions), best first by worst group."""
    at_risk = [str(g) for g, c in zip(groups["group"], groups["cost"]) if -c >= NEGLIGIBLE]
    planned_cost = dict(zip(groups["group"].astype(str), groups["cost"]))
    options: list[tuple[str, str, _Mechanism, float, dict]] = []
    # C from the quantile rule, on the norms along the non-private trajectory
    norms = torch.cat([_drift(problem, replace(_mechanism_for(plan, resolved, "dpsgd"), name="sgd"), theta)[1]
                       for theta in reference[0].checkpoints])
    c_rule = quantile_rule_bound(norms, noise_multiplier=resolved.sigma, batch_size=plan.batch_size,
                                 n_params=problem.P)
    if c_rule > 0:
        options.append(("quantile clip bound", f"C = {c_rule:.3g} from paper 000's quantile rule "
                        f"(the (1 - kappa/b)-quantile of the per-sample gradient norms; planned C = "
                        f"{plan.clip_bound:g})", _mechanism_for(plan, resolved, "dpsgd", clip_bound=c_rule),
                        resolved.epsilon, {"clip_bound": c_rule}))
    for method, text in (("dpsgdf", "DPSGD-F (paper 000 Alg. 2): group bounds from privately counted clipping "
                                    "rates, stopped at DP-SGD's epsilon"),
                         ("naive", "Naive reweighting (paper 000 Alg. 3): group weights from private counts, "
                                   "stopped at DP-SGD's epsilon"),
                         ("fairdp", "FairDP (paper 002, as reconstructed in training/fairdp.py): per-group bounds "
                                    "at the fixed point of its tau-descent, stopped at DP-SGD's epsilon"),
                         ("mitigation", "paper 001's mitigation (Eq. 6 with the boundary proxy, gamma = (1, 1)) at "
                                        "DP-SGD's epsilon")):
        if method == plan.method:
            continue
        if method == "mitigation" and problem.P > 2000:
            continue  # its per-sample objective needs materialised per-sample gradients
        options.append((method, text, _mechanism_for(plan, resolved, method), resolved.epsilon, {"method": method}))
    bigger = min(plan.batch_size * 4, resolved.n // 2)
    if bigger > plan.batch_size:
        steps = steps_for_epochs(resolved.n, bigger, plan.epochs)
        q = bigger / resolved.n
        sigma = calibrate_noise_multiplier(resolved.epsilon, plan.delta, sampling_rate=q, steps=steps,
                                           accounting=plan.accounting, tolerance=RECOMMENDATION_TOLERANCE)
        lr = plan.lr if plan.lr is not None else 1.0 / math.sqrt(steps)
        options.append(("larger batch", f"batch size {bigger} (sigma {sigma:.3g} for the same epsilon; "
                        f"{steps} steps, learning rate {lr:.3g})",
                        _mechanism_for(plan, resolved, plan.method, batch_size=bigger, sampling_rate=q, steps=steps,
                                       sigma=sigma, lr=lr), resolved.epsilon,
                        {"batch_size": bigger, "noise_multiplier": sigma}))
    target = 2 * resolved.epsilon
    try:
        sigma = calibrate_noise_multiplier(target, plan.delta, sampling_rate=resolved.sampling_rate,
                                           steps=resolved.steps, accounting=plan.accounting,
                                           tolerance=RECOMMENDATION_TOLERANCE)
        options.append(("larger epsilon", f"epsilon {target:.3g} (twice the plan; sigma {sigma:.3g})",
                        _mechanism_for(plan, resolved, plan.method, sigma=sigma), target, {"noise_multiplier": sigma}))
    except ValueError:
        pass
    out = []
    for action, text, mechanism, epsilon, changes in options:
        prediction = _predict(problem, mechanism, reference, evaluation, draws=draws, calibration=calibration,
                              **predict_kwargs)
        costs = dict(zip(prediction.table["group"].astype(str), prediction.table["cost"]))
        worst = min(costs, key=costs.get)
        out.append({"action": action, "description": text, "prediction": True, "changes": changes,
                    "epsilon": float(epsilon), "steps": mechanism.steps,
                    "predicted_costs": {g: float(c) for g, c in costs.items()},
                    "change_vs_plan": {g: float(costs[g] - planned_cost[g]) for g in costs},
                    "at_risk_change": {g: float(costs[g] - planned_cost[g]) for g in at_risk},
                    "worst_group": worst, "worst_cost": float(costs[worst]),
                    "max_gap": float(max(costs.values()) - min(costs.values())),
                    "collapse_predicted": prediction.collapsed})
    out.sort(key=lambda r: -r["worst_cost"])
    return out


# ============================================================================ output
def format_diagnosis(diagnosis: Diagnosis) -> str:
    """The terminal table: one row per group (most hurt first), then the explanation and the recommendations."""
    plan = diagnosis.plan
    p = plan.plan
    head = (f"{diagnosis.dataset}: {diagnosis.model}, {p.method}, b={p.batch_size}, {p.epochs} epochs "
            f"({plan.steps} steps, r={plan.lr:.3g}), σ={plan.sigma:.3g}, C={p.clip_bound:g}, "
            f"ε={plan.epsilon:.3g} at δ={p.delta:g}  [diagnosis in {diagnosis.seconds:.1f} s]")
    header = ["rank", "group", "n", "predicted Δ", "90% interval", "clip part", "noise part", "clipped", "clip bias",
              "R^clip/step", "R^noise/step", "Tr(H)", "1-Σf²", "reasons"]
    body = [header]
    for row in diagnosis.groups.itertuples():
        body.append([str(row.rank), str(row.group), f"{row.n:,}", f"{row.cost:+.4f}",
                     f"[{row.low:+.3f}, {row.high:+.3f}]", f"{row.clip_part:+.4f}", f"{row.noise_part:+.4f}",
                     f"{row.clip_fraction:.0%}", f"{row.clip_bias:.3g}", f"{row.clip_term:.2e}",
                     f"{row.noise_term:.2e}", f"{row.trace:.3g}", f"{row.boundary:.3f}",
                     ", ".join(row.reasons) or "-"])
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    lines = [head, ""]
    for r in body:
        lines.append("  ".join(v.ljust(w) if i in (1, 13) else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    lines.append("")
    lines += diagnosis.explanation()
    if diagnosis.recommendations:
        lines += ["", "What would help (predictions, not measurements; cost vs the planned non-private model):"]
        for rec in diagnosis.recommendations:
            costs = ", ".join(f"{g} {c:+.4f}" for g, c in rec["predicted_costs"].items())
            lines.append(f"  - {rec['description']}: worst {rec['worst_group']} {rec['worst_cost']:+.4f}, "
                         f"gap {rec['max_gap']:.4f} ({costs})")
    return "\n".join(lines)


def report_html(diagnosis: Diagnosis, *, figure_png: bytes | None = None, title: str | None = None) -> str:
    """A self-contained HTML page: the settings, the table, the figure (inlined base64 PNG) and the explanation."""
    esc = html.escape
    title = title or f"dpfair diagnose: {diagnosis.dataset}"
    settings = diagnosis.settings()
    rows = []
    for row in diagnosis.groups.itertuples():
        css = ' class="hurt"' if row.rank == 1 and diagnosis.most_hurt.get("group") else ""
        rows.append(
            f"<tr{css}><td>{row.rank}</td><td>{esc(str(row.group))}</td><td>{row.n:,}</td>"
            f"<td>{row.cost:+.4f}</td><td>[{row.low:+.3f}, {row.high:+.3f}]</td><td>{row.clip_part:+.4f}</td>"
            f"<td>{row.noise_part:+.4f}</td><td>{row.clip_fraction:.1%}</td><td>{row.clip_bias:.3g}</td>"
            f"<td>{row.clip_term:.2e}</td><td>{row.noise_term:.2e}</td><td>{row.trace:.3g}</td>"
            f"<td>{row.boundary:.3f}</td><td>{esc(', '.join(row.reasons) or '-')}</td></tr>")
    recs = []
    for rec in diagnosis.recommendations:
        costs = ", ".join(f"{esc(g)} {c:+.4f}" for g, c in rec["predicted_costs"].items())
        recs.append(f"<tr><td class=\"text\">{esc(rec['description'])}</td><td>{esc(rec['worst_group'])}</td>"
                    f"<td>{rec['worst_cost']:+.4f}</td><td>{rec['max_gap']:.4f}</td><td>{costs}</td></tr>")
    figure = ("" if figure_png is None else
              f'<figure><img alt="predicted cost of privacy per group" src="data:image/png;base64,'
              f'{base64.b64encode(figure_png).decode("ascii")}"/><figcaption>Predicted cost of privacy per group '
              f'(bars: clipping and noise parts; whiskers: 90% interval).</figcaption></figure>')
    settings_rows = "".join(f"<tr><th>{esc(label)}</th><td>{esc(_fmt(settings[key]))}</td></tr>"
                            for key, label in SETTING_LABELS.items())
    explanation = "".join(f"<li>{esc(line)}</li>" for line in diagnosis.explanation())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 72em; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; }} td:nth-child(2), td:last-child {{ text-align: left; }}
tr.hurt td {{ background: #fde8e8; }} img {{ max-width: 100%; }} td.text {{ text-align: left; }}
.note {{ color: #555; font-size: 0.9em; }}
</style></head>
<body>
<h1>{esc(title)}</h1>
<p>Predicted cost of privacy Δᵏ = acc<sub>k</sub>(private) − acc<sub>k</sub>(non-private) of each group, before any
private training, at ε = {diagnosis.plan.epsilon:.3g}, δ = {diagnosis.plan.plan.delta:g}.</p>
<h2>Settings</h2>
<table id="settings">{settings_rows}</table>
<h2>Groups</h2>
<table id="groups"><thead><tr><th>rank</th><th>group</th><th>n</th><th>predicted Δ</th><th>90% interval</th>
<th>clipping part</th><th>noise part</th><th>clipped at C</th><th>clip bias</th><th>R<sup>clip</sup>/step</th>
<th>R<sup>noise</sup>/step</th><th>Tr(H)</th><th>1−Σf²</th><th>reasons</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table>
{figure}
<h2>Why</h2>
<ul id="explanation">{explanation}</ul>
<h2>What would help</h2>
<p class="note">Predictions of the same model with the change made, not measurements; costs are against the planned
non-private model. Check one with <code>dpfair compare</code> at those settings.</p>
<table id="recommendations"><thead><tr><th>change</th><th>worst group</th><th>its predicted Δ</th><th>max gap</th>
<th>predicted Δ per group</th></tr></thead><tbody>{''.join(recs)}</tbody></table>
<p class="note">Method: expected DP-SGD and SGD trajectories (the first moment of paper 001's Theorem 2 integrated
over the run), the accumulated clipped-sampling and Gaussian noise (its second moment, a Lyapunov sum), and accuracy
under noise draws; per-group quantities of paper 000 Eq. (1) and paper 001 Theorems 2-5 along the non-private
trajectory. dpfair_analysis, dpfair diagnose.</p>
</body></html>
"""


#: The report's settings table: key of :meth:`Diagnosis.settings` -> what a reader is told it is.
SETTING_LABELS = {"method": "method", "noise_multiplier": "noise multiplier σ", "clip_bound": "clipping bound C",
                  "batch_size": "expected batch size b", "epochs": "epochs", "steps": "steps T",
                  "learning_rate": "learning rate r", "n_train": "training rows n", "delta": "δ",
                  "mechanism": "dominant mechanism", "collapse_predicted": "ends as a constant classifier (predicted)",
                  "noise_per_weight": "accumulated noise per weight (std)"}


def _fmt(value) -> str:
    """A setting as a person reads it: yes/no, integers with thousands separators, 4 significant digits."""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer() and abs(value) >= 1e3):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
