"""Theorem 2 of paper 001: one DP-SGD step's expected group loss, split into non-private, clipping and noise terms.

The step (as :mod:`dpfair_analysis.training.loop` runs it, Poisson sampling at rate q,
expected batch size b = q n):

    theta' = theta - eta (u + r),   u = (1/b) (sum_{i in B} pi_C(g_i) + N(0, sigma^2 C^2 I)),

with g_i the per-sample gradients at theta, pi_C(g) = g min(1, C/||g||), and r the
gradient of the model's data-free penalty (0 in the paper). The non-private step uses
u_np = (1/b) sum_{i in B} g_i (the same normalisation, so E[u_np] = g_D exactly). For any
random direction u with mean m and covariance S, the second-order expansion of the
group's mean loss L_a = L(theta; D_a) around theta gives

    E[L(theta - eta (u + r); D_a)] = L_a - eta <g_a, m + r> + (eta^2 / 2) [(m + r)^T H_a (m + r) + Tr(H_a S)] + O(eta^3),

exact when L_a is quadratic. H_a is the Hessian of the group's MEAN loss (see
:mod:`.hessian`). Under Poisson sampling, with the sums over all n rows,

    E[u] = (1/n) sum_i pi_C(g_i) = gbar_D,    Cov[u] = (1 - q)/(b n) sum_i pi_C(g_i) pi_C(g_i)^T + (sigma C / b)^2 I,

(the same without pi_C for u_np). Splitting the private expectation into the
non-private one, the change made by clipping, and the change made by the noise gives
paper 001's Eq. (4):

    non-private  = L_a - eta <g_a, g_D> + (eta^2/2) E[g_B^T H_a g_B]
    R_a^clip     = eta (<g_a, g_D> - <g_a, gbar_D>) + (eta^2/2) (E[gbar_B^T H_a gbar_B] - E[g_B^T H_a g_B])
    R_a^noise    = (eta^2 / 2) Tr(H_a) C^2 sigma^2 / b^2

**Discrepancy with the printed theorem.** Eq. (4) prints R_a^noise = (eta^2/2) Tr(H_a)
C^2 sigma^2, without the 1/b^2: but the paper's own Algorithm 1 adds N(0, C^2 sigma^2 I)
to the *sum* and then divides by |B|, so the noise in the step has covariance
(C sigma / |B|)^2 I. The printed term is b^2 times too large (65,536 x at b = 256); the
Monte-Carlo check (:func:`simulate_one_step`) agrees with the corrected term, not the
printed one. (With the paper's sum-Hessian H_a of Theorem 1 it would be off by a further
factor |D_a|.) Both are reported: ``noise`` (corrected) and ``noise_printed``.

**Direction and magnitude** (Esipova, Ghomi, Luo & Cresswell, ICLR 2023, §4; later work). Clipping
changes the step in two ways: it shortens it, and it turns it (*gradient misalignment*: large
per-sample gradients are cut by their own factors, so the aggregate turns towards the groups with
small gradients). With g the unclipped step, gbar the clipped one and s = ||gbar|| / ||g||, the
step s g has the clipped step's length and the unclipped one's direction, and R_a^clip splits
exactly into (:func:`direction_magnitude`)

    R_a^dir = eta <g_a, s g - gbar> + (eta^2/2) (gbar^T H_a gbar - s^2 g^T H_a g)
    R_a^mag = eta (1 - s) <g_a, g>  + (eta^2/2) (s^2 - 1) g^T H_a g

(R_a^dir + R_a^mag = R_a^clip). The paper evaluates them on one sampled batch (g = g_B, gbar =
gbar_B, and g_a the group's gradient on its whole data); :func:`one_step_decomposition` takes
them in expectation over Poisson batches as it does R_a^clip: g, gbar the expected steps (the
model's penalty gradient r included: the step's own direction), the quadratic forms E[u^T H_a u]
with their covariance traces. A pure rescaling of the step (gbar = s g) has no direction error;
no clipping has neither.
"""

from __future__ import annotations

import math
from typing import Mapping

import pandas as pd
import torch
import torch.nn.functional as F
from scipy import stats
from torch import nn
from torch.func import functional_call, hessian

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import LossFn, clip_rows, flatten, parameters_of, per_sample_gradients
from dpfair_analysis.theory.hessian import flat_parameterisation
from dpfair_analysis.training.batch_terms import batch_direction_magnitude  # noqa: F401 -- the per-batch form, logged by the loop
from dpfair_analysis.validation import check_nonnegative, check_positive, check_positive_int

Params = Mapping[str, torch.Tensor]
DEFAULT_MAX_PARAMS = 5_000
TERMS = ("nonprivate", "clip", "noise")
#: R_a^clip's two parts (Esipova et al. 2023): :func:`direction_magnitude`.
CLIP_PARTS = ("clip_direction", "clip_magnitude")


class StepMoments:
    """Everything Theorem 2 needs at theta: group losses, gradients, Hessians, and the step's moments.

    Attributes (all float64; index 0 is the population, k + 1 group k)
    ----------
    losses : (K+1,) mean losses L_a.
    gradients : (K+1, P) mean-loss gradients g_a.
    hessians : (K+1, P, P) mean-loss Hessians H_a.
    mean_plain, mean_clipped : (P,) E[u_np] = g_D and E[u_clip] = gbar_D.
    second_plain, second_clipped : (P, P) sum_i g_i g_i^T and sum_i pi_C(g_i) pi_C(g_i)^T.
    penalty : (P,) r, the gradient of the model's data-free penalty.
    """

    def __init__(self, model: nn.Module, data: GroupedDataset, *, clip_bound: float, params: Params | None = None,
                 loss_fn: LossFn = F.cross_entropy, max_params: int = DEFAULT_MAX_PARAMS) -> None:
        if not isinstance(data, GroupedDataset):
            raise TypeError(f"data must be a GroupedDataset, got {type(data).__name__}")
        if len(data) == 0:
            raise ValueError("data has no rows")
        self.clip_bound = check_positive(clip_bound, "clip_bound")
        params = _float64_params(model, params)
        size = sum(p.numel() for p in params.values())
        if size > check_positive_int(max_params, "max_params"):
            raise ValueError(f"the model has {size} parameters > max_params={max_params}: Theorem 2's terms need "
                             f"explicit P x P Hessians here; use a smaller model or raise max_params")
        X, y = data.X.to(torch.float64), data.y
        self.n, self.group_names = len(data), tuple(data.group_names)
        self.group_sizes = data.group_sizes().tolist()
        G, Gc = _gradient_matrices(model, X, y, params, clip_bound=self.clip_bound, loss_fn=loss_fn)
        self.mean_plain, self.mean_clipped = G.mean(0), Gc.mean(0)
        self.second_plain, self.second_clipped = G.T @ G, Gc.T @ Gc
        theta, unflatten = flat_parameterisation(params)

        def mean_loss(t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
            return loss_fn(functional_call(model, unflatten(t), (X[rows],)), y[rows])

        member = [torch.ones(self.n, dtype=torch.bool)] + [data.group == k for k in range(data.n_groups)]
        losses, grads, hessians = [], [], []
        for rows in member:
            if not rows.any():
                losses.append(torch.tensor(math.nan, dtype=torch.float64))
                grads.append(torch.full_like(theta, math.nan))
                hessians.append(torch.full((size, size), math.nan, dtype=torch.float64))
                continue
            losses.append(mean_loss(theta, rows).detach())
            grads.append(G[rows].mean(0))
            hessians.append(hessian(mean_loss)(theta, rows).detach())
        self.losses, self.gradients, self.hessians = torch.stack(losses), torch.stack(grads), torch.stack(hessians)
        self.penalty = _penalty_vector(model, params)


def _float64_params(model: nn.Module, params: Params | None) -> dict[str, torch.Tensor]:
    return {k: v.detach().to(torch.float64) for k, v in (parameters_of(model) if params is None else params).items()}


def _gradient_matrices(model: nn.Module, X: torch.Tensor, y: torch.Tensor, params: dict[str, torch.Tensor], *,
                       clip_bound: float, loss_fn: LossFn) -> tuple[torch.Tensor, torch.Tensor]:
    """(G, G_clipped): per-sample gradients as rows of an (n, P) matrix, and pi_C of each row."""
    G = flatten(per_sample_gradients(model, X, y, params=params, loss_fn=loss_fn))
    return G, clip_rows(G, clip_bound)


def _penalty_vector(model: nn.Module, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """r = grad of (l2/2) sum of squared weights (biases excluded, as :func:`~dpfair_analysis.models.l2_penalty`)."""
    l2 = float(getattr(model, "l2", 0.0) or 0.0)
    return torch.cat([(torch.zeros_like(v) if k.endswith("bias") else l2 * v).reshape(-1) for k, v in params.items()])


def _expected_quadratic(H: torch.Tensor, mean: torch.Tensor, covariance_trace: torch.Tensor) -> torch.Tensor:
    """E[v^T H v] = m^T H m + Tr(H S) for every H in the stack (covariance_trace = Tr(H S) per H)."""
    return torch.einsum("p,apq,q->a", mean, H, mean) + covariance_trace


def direction_magnitude(group_gradients: torch.Tensor, step: torch.Tensor, clipped_step: torch.Tensor, *,
                        lr: float, quadratic: torch.Tensor | None = None,
                        clipped_quadratic: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """R_a^clip split into its direction and magnitude errors (Esipova et al. 2023 §4; module docstring).

    With s = ||gbar|| / ||g|| (1 when g = 0)::

        R_a^dir = eta <g_a, s g - gbar> + (eta^2/2) (Q~_a - s^2 Q_a)
        R_a^mag = eta (1 - s) <g_a, g>  + (eta^2/2) (s^2 - 1) Q_a

    with Q_a = g^T H_a g and Q~_a = gbar^T H_a gbar (or their expectations over batches); without them, the
    first-order terms (the authors' ``R_clip_dir_inner_prod_term`` and ``R_clip_mag_inner_prod_term``).

    Parameters
    ----------
    group_gradients : torch.Tensor
        (K, P): g_a, each group's gradient of its mean loss.
    step, clipped_step : torch.Tensor
        (P,): the unclipped step g and the clipped step gbar (the same normalisation).
    lr : float
        eta.
    quadratic, clipped_quadratic : torch.Tensor, optional
        (K,): Q_a and Q~_a (both or neither).

    Returns
    -------
    (direction, magnitude) : tuple of torch.Tensor
        (K,) each; they sum to R_a^clip.
    """
    eta = check_positive(lr, "lr")
    if (quadratic is None) != (clipped_quadratic is None):
        raise ValueError("quadratic and clipped_quadratic must be given together")
    length = step.norm()
    s = clipped_step.norm() / length if float(length) > 0 else torch.ones((), dtype=step.dtype)
    direction = eta * group_gradients @ (s * step - clipped_step)
    magnitude = eta * (1.0 - s) * (group_gradients @ step)
    if quadratic is not None:
        direction = direction + 0.5 * eta ** 2 * (clipped_quadratic - s ** 2 * quadratic)
        magnitude = magnitude + 0.5 * eta ** 2 * (s ** 2 - 1.0) * quadratic
    return direction, magnitude


def misalignment(step: torch.Tensor, clipped_step: torch.Tensor) -> float:
    """1 - cos(g, gbar): how far clipping turned the step (0: not at all; the paper's Fig. 2 plots the cosine)."""
    lengths = float(step.norm()) * float(clipped_step.norm())
    return 1.0 - float(step @ clipped_step) / lengths if lengths > 0 else 0.0


def one_step_decomposition(moments: StepMoments, *, lr: float, noise_multiplier: float,
                           batch_size: float) -> pd.DataFrame:
    """Theorem 2's terms per group at theta, corrected noise term beside the printed one (Eq. 4).

    Parameters
    ----------
    moments : StepMoments
        Losses, gradients, Hessians and per-sample gradient sums at theta.
    lr : float
        eta.
    noise_multiplier : float
        sigma (noise std sigma C on the clipped sum); 0 gives clipping only.
    batch_size : float
        Expected batch size b = q n of Poisson sampling (the step divides by b).

    Returns
    -------
    pandas.DataFrame
        One row per group (``all`` first): group, n, loss (L_a at theta), nonprivate,
        clip, its parts clip_direction + clip_magnitude (:func:`direction_magnitude`) and the
        step's misalignment 1 - cos(E[u_np], E[u_clip]), noise, noise_printed,
        expected_loss = nonprivate + clip + noise (the
        prediction of E[L(theta'; D_a)]), and the per-group mean gradient norm ||g_a||.
    """
    eta = check_positive(lr, "lr")
    sigma = check_nonnegative(noise_multiplier, "noise_multiplier")
    b = check_positive(batch_size, "batch_size")
    n = moments.n
    if b > n:
        raise ValueError(f"batch_size={b} exceeds the {n} rows")
    q = b / n
    C, H, g, r = moments.clip_bound, moments.hessians, moments.gradients, moments.penalty
    scale = (1 - q) / (b * n)
    trace_plain = scale * torch.einsum("apq,pq->a", H, moments.second_plain)
    trace_clipped = scale * torch.einsum("apq,pq->a", H, moments.second_clipped)
    mean_plain, mean_clipped = moments.mean_plain + r, moments.mean_clipped + r
    quad_plain = _expected_quadratic(H, mean_plain, trace_plain)
    quad_clipped = _expected_quadratic(H, mean_clipped, trace_clipped)
    traces = torch.einsum("app->a", H)
    nonprivate = moments.losses - eta * g @ mean_plain + 0.5 * eta ** 2 * quad_plain
    clip = eta * g @ (mean_plain - mean_clipped) + 0.5 * eta ** 2 * (quad_clipped - quad_plain)
    noise = 0.5 * eta ** 2 * traces * (sigma * C / b) ** 2
    noise_printed = 0.5 * eta ** 2 * traces * (sigma * C) ** 2
    direction, magnitude = direction_magnitude(g, mean_plain, mean_clipped, lr=eta, quadratic=quad_plain,
                                               clipped_quadratic=quad_clipped)
    return pd.DataFrame({
        "group": ["all", *moments.group_names], "n": [n, *moments.group_sizes],
        "loss": moments.losses.numpy(), "nonprivate": nonprivate.numpy(), "clip": clip.numpy(),
        "clip_direction": direction.numpy(), "clip_magnitude": magnitude.numpy(),
        "misalignment": misalignment(mean_plain, mean_clipped),
        "noise": noise.numpy(), "noise_printed": noise_printed.numpy(),
        "expected_loss": (nonprivate + clip + noise).numpy(), "grad_norm": g.norm(dim=1).numpy(),
        "hessian_trace": traces.numpy()})


def simulate_one_step(model: nn.Module, data: GroupedDataset, *, lr: float, clip_bound: float,
                      noise_multiplier: float, batch_size: float, draws: int, generator: torch.Generator,
                      params: Params | None = None, loss_fn: LossFn = F.cross_entropy,
                      confidence: float = 0.95, chunk_size: int = 256) -> pd.DataFrame:
    """Monte-Carlo measurement of the three terms of one DP-SGD step, per group.

    Draws ``draws`` Poisson batches (rate q = b/n) and noise vectors and, with the same
    batch for all three, evaluates the exact group mean losses after the non-private
    step, the clipped-only step and the clipped-and-noised step (the loop's update, with
    the model's penalty gradient). The measured terms are E[L(np)], E[L(clip)] - E[L(np)]
    and E[L(private)] - E[L(clip)] with standard errors from the per-draw paired
    differences. Columns: group, nonprivate, clip, noise, expected_loss and each with
    ``_stderr`` and ``_ci`` (half-width at ``confidence``).
    """
    draws = check_positive_int(draws, "draws")
    if draws < 2:
        raise ValueError(f"draws must be >= 2 for a standard error, got {draws}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {generator!r}")
    eta = check_positive(lr, "lr")
    sigma = check_nonnegative(noise_multiplier, "noise_multiplier")
    C = check_positive(clip_bound, "clip_bound")
    b = check_positive(batch_size, "batch_size")
    params = _float64_params(model, params)
    theta, unflatten = flat_parameterisation(params)
    X, y = data.X.to(torch.float64), data.y
    n = len(data)
    G, Gc = _gradient_matrices(model, X, y, params, clip_bound=C, loss_fn=loss_fn)
    r = _penalty_vector(model, params)
    member = torch.zeros(n, data.n_groups + 1, dtype=torch.float64)
    member[:, 0] = 1.0 / n
    sizes_k = data.group_sizes().to(torch.float64)
    member[torch.arange(n), data.group + 1] = 1.0 / sizes_k[data.group]

    def group_losses_at(thetas: torch.Tensor) -> torch.Tensor:
        out = []
        for t in thetas:
            per_sample = loss_fn(functional_call(model, unflatten(t), (X,)), y, reduction="none")
            out.append(per_sample @ member)
        return torch.stack(out)

    results = {name: [] for name in ("np", "clip", "private")}
    done = 0
    while done < draws:
        m = min(chunk_size, draws - done)
        mask = (torch.rand(m, n, generator=generator, dtype=torch.float64) < b / n).to(torch.float64)
        noise = torch.randn(m, theta.numel(), generator=generator, dtype=torch.float64) * sigma * C
        step_np, step_clip = mask @ G / b, mask @ Gc / b
        results["np"].append(group_losses_at(theta - eta * (step_np + r)))
        results["clip"].append(group_losses_at(theta - eta * (step_clip + r)))
        results["private"].append(group_losses_at(theta - eta * (step_clip + noise / b + r)))
        done += m
    np_, clip_, private = (torch.cat(results[k]).detach().numpy() for k in ("np", "clip", "private"))
    samples = {"nonprivate": np_, "clip": clip_ - np_, "noise": private - clip_, "expected_loss": private}
    z = stats.norm.ppf(0.5 + confidence / 2)
    frame = {"group": ["all", *data.group_names], "draws": draws}
    for name, values in samples.items():
        frame[name] = values.mean(0)
        frame[f"{name}_stderr"] = values.std(0, ddof=1) / math.sqrt(draws)
        frame[f"{name}_ci"] = z * frame[f"{name}_stderr"]
    return pd.DataFrame(frame)


def compare_with_simulation(predicted: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Predicted and measured terms side by side, with |difference| in standard errors.

    For each term t: ``t_pred``, ``t_meas``, ``t_z`` = |pred - meas| / stderr, and
    ``t_within_ci`` (|pred - meas| <= the CI half-width). For the noise term the printed
    formula is compared too (``noise_printed_z``).
    """
    merged = predicted.merge(measured, on="group", suffixes=("_pred", "_meas"))
    out = merged[["group"]].copy()
    for term in (*TERMS, "expected_loss"):
        diff = (merged[f"{term}_pred"] - merged[f"{term}_meas"]).abs()
        out[f"{term}_pred"] = merged[f"{term}_pred"]
        out[f"{term}_meas"] = merged[f"{term}_meas"]
        out[f"{term}_stderr"] = merged[f"{term}_stderr"]
        out[f"{term}_z"] = diff / merged[f"{term}_stderr"]
        out[f"{term}_within_ci"] = diff <= merged[f"{term}_ci"]
    out["noise_printed"] = merged["noise_printed"]
    out["noise_printed_z"] = (merged["noise_printed"] - merged["noise_meas"]).abs() / merged["noise_stderr"]
    return out


class DecompositionTracker:
    """A training callback: Theorem 2's terms per group every ``every`` steps (paper 001 Eq. 4 over training).

    Pass it in ``train(..., callbacks=[tracker])``; after training, ``tracker.table()`` has
    one row per (step, group) with the columns of :func:`one_step_decomposition`. The
    terms are evaluated on ``data`` (e.g. a fixed subset of the training set: the Hessians
    cost O(P^2) per row) with the run's lr, C, sigma and expected batch size -- the
    batch size is rescaled to the subset, b_eval = b n_eval / n_train, so q is the run's.
    """

    def __init__(self, data: GroupedDataset, *, lr: float, clip_bound: float, noise_multiplier: float,
                 sampling_rate: float, every: int = 1, loss_fn: LossFn = F.cross_entropy) -> None:
        self.data = data
        self.lr = check_positive(lr, "lr")
        self.clip_bound = check_positive(clip_bound, "clip_bound")
        self.noise_multiplier = check_nonnegative(noise_multiplier, "noise_multiplier")
        self.sampling_rate = check_positive(sampling_rate, "sampling_rate")
        self.every = check_positive_int(every, "every")
        self.loss_fn = loss_fn
        self.rows: list[pd.DataFrame] = []

    def __call__(self, step: int, model: nn.Module, state: object = None) -> None:
        if step % self.every:
            return
        moments = StepMoments(model, self.data, clip_bound=self.clip_bound, loss_fn=self.loss_fn)
        table = one_step_decomposition(moments, lr=self.lr, noise_multiplier=self.noise_multiplier,
                                       batch_size=self.sampling_rate * len(self.data))
        table.insert(0, "step", step)
        self.rows.append(table)

    def table(self) -> pd.DataFrame:
        return pd.concat(self.rows, ignore_index=True) if self.rows else pd.DataFrame()


def squared_error(output: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """(1/2)(f(x) - y)^2 of a one-output model: the loss for which Theorem 2's expansion is exact."""
    losses = 0.5 * (output.squeeze(-1) - target.to(output.dtype)) ** 2
    return losses.mean() if reduction == "mean" else losses.sum() if reduction == "sum" else losses

