"""Group Hessian traces Tr(H_a): the curvature term of paper 001 (Thm 1, Eq. (3); Thm 2, R_a^noise).

For group a with rows D_a and per-sample cross-entropy losses L_i(theta),

    H_a = grad^2_theta (1/|D_a|) sum_{i in D_a} L_i(theta),   Tr(H_a) = (1/|D_a|) sum_{i in D_a} Tr(H_i),

the Hessian of the group's MEAN loss (paper 001 writes H^a_l as the Hessian of the group
SUM, Thm 1; with the sum, Tr(H^a) grows with |D_a| and Eq. (3) would compare a group with
the (always larger) population sum, which contradicts Theorem 1's own derivation from the
excess risk R_a of the mean loss L(theta; D_a) -- so the mean is used here). The model's
data-free penalty (l2 / 2) ||w||^2 is not included: it adds the same l2 * (#weights) to
every group's trace and to the population's, so it cancels in the gap
|Tr(H_a) - Tr(H)| of Eq. (3).

Methods (every one returns the same quantity):

* ``"closed"`` -- logistic / softmax regression in closed form (paper 001, Example 3;
  Boehning 1992), O(n d), see :func:`closed_form_sample_traces`;
* ``"exact"`` -- for group traces, the diagonal of each group's Hessian from Hessian-vector
  products with the basis vectors, batched (:func:`exact_group_traces`: no per-sample Hessian
  is ever formed, P HVPs per group); per-sample traces (:func:`exact_sample_traces`) from the
  per-sample Hessian by ``torch.func.hessian`` (P x P per sample, chunked); both refused above
  ``max_params`` parameters;
* ``"ggn"`` -- Tr(J_i^T (diag p - p p^T) J_i), which equals Tr(H_i) for piecewise-linear
  networks (ReLU MLPs/CNNs, logistic regression), see :func:`ggn_sample_traces`;
* ``"hutchinson"`` / ``"hutchpp"`` -- stochastic estimates from Hessian-vector products
  (any model size), each with a standard error, see :func:`hutchinson_trace` and
  :func:`hutchpp_trace`.

All models of the toolkit are trained with the softmax cross-entropy on their logits,
so that is the loss here.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Mapping, NamedTuple

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, hessian, jvp, vjp, vmap

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.metrics import boundary_proxy_of_logits
from dpfair_analysis.gradients import hessian_vector_product, parameters_of
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.validation import check_choice, check_positive_int

Params = Mapping[str, torch.Tensor]
Template = int | torch.Tensor | Params

METHODS = ("closed", "exact", "ggn", "hutchinson", "hutchpp")
SAMPLE_METHODS = ("closed", "exact", "ggn")
STOCHASTIC_METHODS = ("hutchinson", "hutchpp")
DEFAULT_MAX_PARAMS = 5_000
# Elements (not bytes) a vmapped chunk may materialise: 2^24 doubles = 128 MiB.
_CHUNK_ELEMENTS = 2 ** 24

# Leaf modules through which the network stays piecewise linear in its parameters and input,
# so that the second derivatives of the logits vanish a.e. and Hessian = Gauss-Newton.
PIECEWISE_LINEAR_MODULES: tuple[type[nn.Module], ...] = (
    nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ReLU, nn.LeakyReLU, nn.MaxPool1d, nn.MaxPool2d,
    nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.Flatten, nn.Identity,
)


class NotPiecewiseLinearWarning(UserWarning):
    """method="ggn" on a network with smooth activations: the result is the Gauss-Newton
    trace, not the Hessian trace."""


class TraceEstimate(NamedTuple):
    """A stochastic trace estimate: ``estimate``, its ``stderr`` and the ``matvecs`` it used."""

    estimate: float
    stderr: float
    matvecs: int


# ---------------------------------------------------------------------------- helpers
def _resolve_params(model: nn.Module, params: Params | None) -> dict[str, torch.Tensor]:
    """``params`` (default: the model's trainable parameters), checked to name exactly those."""
    expected = parameters_of(model)
    if params is None:
        return expected
    params = {name: torch.as_tensor(p).detach() for name, p in params.items()}
    if set(params) != set(expected):
        raise ValueError(f"params must name exactly the model's trainable parameters {sorted(expected)}, "
                         f"got {sorted(params)}")
    for name, p in params.items():
        if p.shape != expected[name].shape:
            raise ValueError(f"params[{name!r}] has shape {tuple(p.shape)}, the model's has "
                             f"{tuple(expected[name].shape)}")
    return {name: params[name] for name in expected}  # the model's order


def _dtype_of(params: Params) -> torch.dtype:
    return next(iter(params.values())).dtype


def _check_samples(X: torch.Tensor, y: torch.Tensor) -> None:
    if not isinstance(X, torch.Tensor) or not X.is_floating_point():
        raise TypeError(f"X must be a floating-point torch.Tensor, got {type(X).__name__}")
    if not isinstance(y, torch.Tensor) or y.dtype != torch.int64 or y.shape != (X.shape[0],):
        raise ValueError(f"y must be an int64 tensor of shape ({X.shape[0]},), got "
                         f"{getattr(y, 'dtype', type(y).__name__)} {tuple(getattr(y, 'shape', ()))}")


def flat_parameterisation(params: Params) -> tuple[torch.Tensor, Callable[[torch.Tensor], dict[str, torch.Tensor]]]:
    """theta as one vector (parameters in order) and the map back to the named dict."""
    names = list(params)
    shapes = [params[n].shape for n in names]
    sizes = [params[n].numel() for n in names]
    flat = torch.cat([params[n].reshape(-1) for n in names])

    def unflatten(theta: torch.Tensor) -> dict[str, torch.Tensor]:
        return {n: t.view(s) for n, t, s in zip(names, torch.split(theta, sizes), shapes)}

    return flat, unflatten


def _chunk(per_sample_elements: int, chunk_size: int | None) -> int:
    if chunk_size is not None:
        return check_positive_int(chunk_size, "chunk_size")
    return max(1, _CHUNK_ELEMENTS // max(1, per_sample_elements))


# ------------------------------------------------------------- per-sample: closed form
def closed_form_sample_traces(model: LogisticRegression, X: torch.Tensor, *,
                              params: Params | None = None) -> torch.Tensor:
    """Tr(H_i) of the cross-entropy of (softmax) logistic regression, in closed form, O(n d).

    Paper 001, Example 3 (after Boehning 1992): for softmax regression with logits
    z = W x + b (W: K x d) and probabilities f = softmax(z), write x~ = [x; 1] and
    theta = vec([W, b]). Then grad_theta L = (f - e_y) kron x~ and

        H_i = (diag f - f f^T) kron x~ x~^T,
        Tr(H_i) = Tr(diag f - f f^T) Tr(x~ x~^T) = sum_k f_k (1 - f_k) (||x||^2 + 1)
                = (1 - sum_k f_k^2) (||x||^2 + 1)                            (K > 2)

    (Tr(A kron B) = Tr(A) Tr(B); sum_k f_k (1 - f_k) = 1 - sum_k f_k^2 since sum f_k = 1).
    Binary, one score z = w^T x + b (the toolkit's ``LogisticRegression`` with two
    classes, logits (0, z)), p = sigmoid(z): grad L = (p - y) x~, H_i = p (1 - p) x~ x~^T,

        Tr(H_i) = p (1 - p) (||x||^2 + 1)                                    (K = 2)

    -- half of the K = 2 softmax value 2 p (1 - p)(||x||^2 + 1), because the one-score
    model has one weight vector, not two. Example 3 omits the bias (its "+ 1") and states
    the two factors as separate proportionalities; the trace is their product. Either
    factor is dropped if its parameter (weight or bias) is not trainable.

    Parameters
    ----------
    model : LogisticRegression
        Binary (one score) or multiclass softmax regression.
    X : torch.Tensor
        Inputs, (n, ...) (flattened to (n, d)).
    params : mapping of str to Tensor, optional
        Parameters at which to evaluate (default: the model's). Their dtype is used.

    Returns
    -------
    torch.Tensor
        Tr(H_i) for each sample, shape (n,).
    """
    if not isinstance(model, LogisticRegression):
        raise ValueError(f"method='closed' needs a LogisticRegression model, got {type(model).__name__}; "
                         f"use method='exact', 'ggn' or 'hutchinson'")
    params = _resolve_params(model, params)
    X = X.to(_dtype_of(params)).flatten(1)
    f = torch.softmax(functional_call(model, params, (X,)), dim=1)
    # binary: f = (1 - p, p), so f_0 f_1 = p(1 - p); multiclass: sum_k f_k (1 - f_k)
    curvature = f[:, 0] * f[:, 1] if model.binary else (f * (1 - f)).sum(dim=1)
    feature_term = torch.zeros_like(curvature)
    if "linear.weight" in params:
        feature_term = feature_term + (X ** 2).sum(dim=1)
    if "linear.bias" in params:
        feature_term = feature_term + 1
    return curvature * feature_term


def boundary_proxy(model: nn.Module, X: torch.Tensor, *, params: Params | None = None) -> torch.Tensor:
    """The paper's distance-to-boundary proxy 1 - sum_k f_k(x)^2 per sample, shape (n,).

    Paper 001, Thm 5 and the mitigation after Eq. (6): the term is 0 when one class has
    probability 1 (far from the boundary) and maximal, 1 - 1/K, at f = (1/K, ..., 1/K).
    For softmax regression Tr(H_i) = proxy_i (||x_i||^2 + 1); for the one-score binary
    model Tr(H_i) = proxy_i (||x_i||^2 + 1) / 2 (proxy = 2 p (1 - p)); see
    :func:`closed_form_sample_traces`.
    """
    params = _resolve_params(model, params)
    return boundary_proxy_of_logits(functional_call(model, params, (X.to(_dtype_of(params)),)))


# ------------------------------------------------------------------ per-sample: exact
def exact_sample_traces(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                        params: Params | None = None, max_params: int = DEFAULT_MAX_PARAMS,
                        chunk_size: int | None = None) -> torch.Tensor:
    """Tr(H_i) = sum_j [grad^2_theta L_i]_jj from the full per-sample Hessian (torch.func.hessian).

    Exact (forward-over-reverse autodiff of the cross-entropy), for any twice
    differentiable model, at P^2 memory per sample: samples are processed ``chunk_size``
    at a time (default: as many as fit 2^24 Hessian entries). Refused when the model has
    more than ``max_params`` parameters P.
    """
    params = _resolve_params(model, params)
    n_params = sum(p.numel() for p in params.values())
    if n_params > check_positive_int(max_params, "max_params"):
        raise ValueError(f"method='exact' builds a {n_params} x {n_params} Hessian per sample: the model has "
                         f"{n_params} parameters, more than max_params={max_params}; use method='hutchinson' "
                         f"or 'hutchpp' (stochastic, with a standard error), 'ggn' for piecewise-linear "
                         f"networks, or raise max_params")
    _check_samples(X, y)
    X = X.to(_dtype_of(params))
    theta, unflatten = flat_parameterisation(params)

    def sample_loss(t: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, unflatten(t), (x.unsqueeze(0),)), target.unsqueeze(0))

    def sample_trace(t: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.diagonal(hessian(sample_loss)(t, x, target)).sum()

    if len(X) == 0:
        return torch.zeros(0, dtype=theta.dtype)
    return vmap(sample_trace, in_dims=(None, 0, 0), chunk_size=_chunk(n_params ** 2, chunk_size))(theta, X, y)


def _activation_elements(model: nn.Module, params: dict[str, torch.Tensor], x: torch.Tensor) -> int:
    """Elements of every module output for one input row (what a forward pass keeps per row)."""
    sizes: list[int] = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: sizes.append(out.numel()))
             for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            functional_call(model, params, (x,))
    finally:
        for hook in hooks:
            hook.remove()
    return max(1, sum(sizes) + x.numel())


def exact_group_traces(model: nn.Module, X: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *, n_groups: int,
                       params: Params | None = None, max_params: int = DEFAULT_MAX_PARAMS,
                       chunk_size: int | None = None, row_chunk: int = 4096) -> torch.Tensor:
    """Tr(H_a) of each group's mean cross-entropy, exactly, without per-sample Hessians.

    .. math:: \\mathrm{Tr}(H_a) = \\sum_{j=1}^{P} e_j^\\top H_a e_j,
              \\qquad H_a e_j = \\frac{d}{dt}\\Big|_{t=0} \\nabla_\\theta L_a(\\theta + t e_j)

    for L_a the group's mean loss: one Hessian-vector product (forward-over-reverse, ``jvp`` of
    ``grad``) per basis vector e_j, ``chunk_size`` of them at a time under ``vmap``, the group's
    rows ``row_chunk`` at a time (H_a is linear in the rows' losses); the j-th entry of H_a e_j is
    the diagonal element. P HVPs per group, where the per-sample route forms n Hessians of P x P.
    The default chunk keeps one vmapped pass under 2^24 stored elements. Returns a (n_groups,)
    tensor (NaN for an empty group). Refused above ``max_params`` parameters.
    """
    params = _resolve_params(model, params)
    n_params = sum(p.numel() for p in params.values())
    if n_params > check_positive_int(max_params, "max_params"):
        raise ValueError(f"method='exact' takes {n_params} Hessian-vector products per group: the model has "
                         f"{n_params} parameters, more than max_params={max_params}; use method='ggn' for "
                         f"piecewise-linear networks (exact there), 'hutchinson' or 'hutchpp', or raise max_params")
    _check_samples(X, y)
    X = X.to(_dtype_of(params))
    theta, unflatten = flat_parameterisation(params)
    out = torch.full((n_groups,), math.nan, dtype=theta.dtype)
    if len(X) == 0:
        return out
    per_row = _activation_elements(model, params, X[:1])
    rows_per_pass = min(check_positive_int(row_chunk, "row_chunk"), len(X))
    chunk = chunk_size or max(1, min(n_params, _CHUNK_ELEMENTS // (4 * per_row * rows_per_pass)))
    indices = torch.arange(n_params)
    for k in range(n_groups):
        rows = (group == k).nonzero().flatten()
        if len(rows) == 0:
            continue
        total = torch.zeros((), dtype=theta.dtype)
        for start in range(0, len(rows), rows_per_pass):
            part = rows[start:start + rows_per_pass]
            Xk, yk, weight = X[part], y[part], len(part) / len(rows)

            def part_loss(t: torch.Tensor, Xk=Xk, yk=yk, weight=weight) -> torch.Tensor:
                return weight * F.cross_entropy(functional_call(model, unflatten(t), (Xk,)), yk)

            gradient = grad(part_loss)

            def diagonal_entry(index: torch.Tensor, gradient=gradient) -> torch.Tensor:
                basis = torch.zeros_like(theta).index_fill(0, index.reshape(1), 1.0)
                return jvp(gradient, (theta,), (basis,))[1].index_select(0, index.reshape(1)).squeeze(0)

            for i in range(0, n_params, chunk):
                total = total + vmap(diagonal_entry)(indices[i:i + chunk]).sum()
        out[k] = total
    return out


# -------------------------------------------------------------------- per-sample: GGN
def is_piecewise_linear(model: nn.Module) -> bool:
    """True if every leaf module is in :data:`PIECEWISE_LINEAR_MODULES` (functional
    activations called inside ``forward`` cannot be seen; ``LogisticRegression`` is linear)."""
    leaves = [m for m in model.modules() if not list(m.children())]
    return all(isinstance(m, PIECEWISE_LINEAR_MODULES) for m in leaves)


def ggn_sample_traces(model: nn.Module, X: torch.Tensor, *, params: Params | None = None,
                      chunk_size: int | None = None) -> torch.Tensor:
    """Tr(G_i) = Tr(J_i^T (diag p - p p^T) J_i) per sample: the Hessian trace of piecewise-linear nets.

    With logits z(theta) and J_i = dz/dtheta (K x P), the cross-entropy Hessian is

        H_i = J_i^T (diag p - p p^T) J_i + sum_k (p_k - [y = k]) grad^2_theta z_k.

    For networks that are piecewise linear in theta at fixed input (ReLU/max-pool
    networks, logistic regression) the second term vanishes almost everywhere, so
    H_i = G_i (the generalised Gauss-Newton matrix). With the factorisation

        diag p - p p^T = A A^T,   A = diag(sqrt p) - p sqrt(p)^T,   a_j = sqrt(p_j) (e_j - p)

    (check: A A^T = diag p - 2 p p^T + p (sum_j p_j) p^T), Tr(G_i) = sum_j ||J_i^T a_j||^2:
    K vector-Jacobian products per sample (``torch.func.vjp`` under ``vmap``). Note that
    G_i does not depend on the label. For smooth activations (tanh, sigmoid, ELU) the
    second term does not vanish and the result is the Gauss-Newton trace, not the Hessian
    trace: a :class:`NotPiecewiseLinearWarning` is emitted.
    """
    params = _resolve_params(model, params)
    if not is_piecewise_linear(model):
        smooth = sorted({type(m).__name__ for m in model.modules()
                         if not list(m.children()) and not isinstance(m, PIECEWISE_LINEAR_MODULES)})
        warnings.warn(f"method='ggn' on a network with {smooth}: not piecewise linear, so the result is the "
                      f"Gauss-Newton trace, not the Hessian trace (use method='exact' or 'hutchinson')",
                      NotPiecewiseLinearWarning, stacklevel=3)
    X = X.to(_dtype_of(params))

    def sample_trace(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        logits, pullback = vjp(lambda q: functional_call(model, q, (x.unsqueeze(0),)).squeeze(0), p)
        prob = torch.softmax(logits, dim=0)
        root = prob.sqrt()
        cotangents = torch.diag(root) - root.unsqueeze(1) * prob.unsqueeze(0)  # row j = a_j^T
        (jta,) = vmap(pullback)(cotangents)  # {name: (K, *shape)}: J^T a_j for each j
        return sum((g ** 2).sum() for g in jta.values())

    if len(X) == 0:
        return torch.zeros(0, dtype=_dtype_of(params))
    n_params = sum(p.numel() for p in params.values())
    n_logits = int(functional_call(model, params, (X[:1],)).shape[1])
    return vmap(sample_trace, in_dims=(None, 0),
                chunk_size=_chunk(n_logits * n_params, chunk_size))(params, X)


def per_sample_hessian_traces(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                              method: str = "closed", params: Params | None = None,
                              max_params: int = DEFAULT_MAX_PARAMS,
                              chunk_size: int | None = None) -> torch.Tensor:
    """Tr(grad^2_theta L_i(theta)) for each sample i, shape (n,) (paper 001, Example 3).

    Parameters
    ----------
    model : nn.Module
        Maps inputs to logits; loss is the softmax cross-entropy.
    X, y : torch.Tensor
        Inputs (n, ...) and int64 labels (n,).
    method : {"closed", "exact", "ggn"}
        See :func:`closed_form_sample_traces` (logistic regression only),
        :func:`exact_sample_traces` and :func:`ggn_sample_traces`.
    params : mapping, optional
        Parameters at which to evaluate (default: the model's); their dtype is used.
    max_params : int
        ``"exact"`` is refused above this many parameters.
    chunk_size : int, optional
        Samples per vmapped chunk (default: from a 2^24-element memory budget).
    """
    check_choice(method, "method", SAMPLE_METHODS)
    _check_samples(X, y)
    if method == "closed":
        return closed_form_sample_traces(model, X, params=params)  # type: ignore[arg-type]
    if method == "exact":
        return exact_sample_traces(model, X, y, params=params, max_params=max_params, chunk_size=chunk_size)
    return ggn_sample_traces(model, X, params=params, chunk_size=chunk_size)


# ----------------------------------------------------------------- stochastic traces
class _VectorSpace:
    """Flat <-> native conversion for probes: an int dimension, a tensor or a dict of tensors."""

    def __init__(self, template: Template) -> None:
        if isinstance(template, bool):
            raise ValueError(f"template must be a dimension (int >= 1), a tensor or a dict of tensors, "
                             f"got {template!r}")
        self.device = torch.device("cpu")
        if isinstance(template, int):
            self.dim, self.dtype = check_positive_int(template, "dim"), torch.float64
            self.to_native: Callable = lambda v: v
        elif isinstance(template, torch.Tensor):
            if template.numel() == 0 or not template.is_floating_point():
                raise ValueError(f"template tensor must be non-empty floating point, got {template.dtype} "
                                 f"of shape {tuple(template.shape)}")
            shape = template.shape
            self.dim, self.dtype, self.device = template.numel(), template.dtype, template.device
            self.to_native = lambda v: v.view(shape)
        elif isinstance(template, Mapping) and template:
            _, unflatten = flat_parameterisation(template)
            self.dim = sum(t.numel() for t in template.values())
            self.dtype, self.device = _dtype_of(template), next(iter(template.values())).device
            self.to_native = unflatten
        else:
            raise ValueError(f"template must be a dimension (int >= 1), a tensor or a non-empty dict of "
                             f"tensors, got {type(template).__name__}")

    @staticmethod
    def to_flat(v: torch.Tensor | Params) -> torch.Tensor:
        if isinstance(v, Mapping):
            return torch.cat([t.reshape(-1) for t in v.values()])
        return v.reshape(-1)

    def rademacher(self, count: int, generator: torch.Generator) -> torch.Tensor:
        """``count`` independent Rademacher (+-1) vectors as the columns of a (dim, count) matrix, drawn on
        the CPU generator (the same probes on every device) and moved to the parameters' device."""
        signs = torch.randint(0, 2, (self.dim, count), generator=generator)
        return (2 * signs - 1).to(device=self.device, dtype=self.dtype)


def _apply(hvp: Callable, space: _VectorSpace, vectors: torch.Tensor) -> torch.Tensor:
    """H applied to each column of ``vectors`` (dim, m), one matvec per column."""
    columns = [space.to_flat(hvp(space.to_native(v.contiguous()))) for v in vectors.T]
    if not columns:
        return vectors.new_zeros(space.dim, 0)
    return torch.stack(columns, dim=1)


def _generator(generator: torch.Generator | int | None, arg: str = "generator") -> torch.Generator:
    if isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, int) and not isinstance(generator, bool) and generator >= 0:
        return torch.Generator().manual_seed(generator)
    raise ValueError(f"{arg} must be a torch.Generator or a non-negative int seed (stochastic estimates "
                     f"are reproducible only from an explicit seed), got {generator!r}")


def hutchinson_trace(hvp: Callable, template: Template, *, probes: int,
                     generator: torch.Generator | int) -> TraceEstimate:
    """Hutchinson's estimate of Tr(H) from Rademacher probes, with its standard error.

    For v_1, ..., v_m i.i.d. with independent +-1 entries, E[v^T H v] = Tr(H), so

        t^ = (1/m) sum_j v_j^T H v_j,   stderr = s / sqrt(m),

    with s the sample standard deviation of the m quadratic forms (Hutchinson 1989;
    Var[v^T H v] = 2 (||H||_F^2 - sum_i H_ii^2) for symmetric H). (t^ - Tr H) / stderr is
    approximately Student-t with m - 1 degrees of freedom.

    Parameters
    ----------
    hvp : callable
        v -> H v, for one vector shaped like ``template`` (a flat vector for an int).
    template : int, Tensor or dict of Tensors
        The dimension, or a tensor / parameter dict giving shapes and dtype of v.
    probes : int
        m >= 2 probe vectors (= Hessian-vector products).
    generator : torch.Generator or int
        Source of the probes (an int seeds a new generator).
    """
    m = check_positive_int(probes, "probes")
    if m < 2:
        raise ValueError(f"probes must be >= 2 for a standard error, got {probes!r}")
    space = _VectorSpace(template)
    probes_matrix = space.rademacher(m, _generator(generator))
    quadratic_forms = (probes_matrix * _apply(hvp, space, probes_matrix)).sum(dim=0)
    return TraceEstimate(float(quadratic_forms.mean()), float(quadratic_forms.std() / math.sqrt(m)), m)


def hutchpp_trace(hvp: Callable, template: Template, *, matvecs: int,
                  generator: torch.Generator | int) -> TraceEstimate:
    """Hutch++ (Meyer, Musco, Musco & Woodruff 2021, Alg. 1) with a conditional standard error.

    With m matvecs: k = floor(m/3) sketch probes S and l = m - 2k residual probes G
    (Rademacher, dim x k and dim x l); Q = orth(H S) (k matvecs), then

        t^ = Tr(Q^T H Q) + (1/l) sum_j g_j^T (I - QQ^T) H (I - QQ^T) g_j

    (k matvecs for H Q, l for the residual). The first term captures the top of the
    spectrum exactly; the Hutchinson term only sees the deflated matrix, whence the
    O(1/m) rather than O(1/sqrt m) error for matrices with decaying spectra.

    Standard error: since Tr(Q^T H Q) + Tr((I - QQ^T) H (I - QQ^T)) = Tr(H) for every
    orthonormal Q, t^ is unbiased *conditionally on S*, with conditional variance
    Var_g[g^T M g] / l, M = (I - QQ^T) H (I - QQ^T). The reported stderr is s_M / sqrt(l)
    (s_M: sample sd of the l residual quadratic forms) -- an estimate of the conditional
    sd; because the conditional mean is always Tr(H), the unconditional variance is the
    mean conditional variance, so (t^ - Tr H) / stderr is approximately t with l - 1
    degrees of freedom. Needs l >= 2, i.e. m >= 4.
    """
    m = check_positive_int(matvecs, "matvecs")
    if m < 4:
        raise ValueError(f"matvecs must be >= 4 for Hutch++ with a standard error (k = m//3 sketch, "
                         f"m - 2k >= 2 residual probes), got {matvecs!r}")
    space = _VectorSpace(template)
    gen = _generator(generator)
    k = m // 3
    l = m - 2 * k
    sketch, residual_probes = space.rademacher(k, gen), space.rademacher(l, gen)
    q, _ = torch.linalg.qr(_apply(hvp, space, sketch))  # (dim, k) orthonormal columns
    top = float((q * _apply(hvp, space, q)).sum())  # Tr(Q^T H Q)
    deflated = residual_probes - q @ (q.T @ residual_probes)
    forms = (deflated * _apply(hvp, space, deflated)).sum(dim=0)  # g^T (I-QQ^T) H (I-QQ^T) g
    return TraceEstimate(top + float(forms.mean()), float(forms.std() / math.sqrt(l)), m)


# ---------------------------------------------------------------------- group traces
def _stochastic_group_trace(model: nn.Module, X: torch.Tensor, y: torch.Tensor, params: dict[str, torch.Tensor], *,
                            method: str, probes: int, generator: torch.Generator) -> TraceEstimate:
    """Tr of the Hessian of the mean loss over (X, y), from Hessian-vector products."""

    def hvp(v: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return hessian_vector_product(model, X, y, v, params=params)

    if method == "hutchinson":
        return hutchinson_trace(hvp, params, probes=probes, generator=generator)
    return hutchpp_trace(hvp, params, matvecs=probes, generator=generator)


def group_hessian_traces(model: nn.Module, data: GroupedDataset, *, method: str = "closed",
                         params: Params | None = None, probes: int = 60,
                         generator: torch.Generator | int | None = None,
                         max_params: int = DEFAULT_MAX_PARAMS, chunk_size: int | None = None) -> pd.DataFrame:
    """Tr(H_a) of every group's mean cross-entropy loss, and of the population's (paper 001, Eq. (3)).

    H_a = grad^2_theta (1/|D_a|) sum_{i in D_a} L_i(theta) at ``params`` (mean, not the
    paper's sum; see the module docstring). Deterministic methods average per-sample
    traces, Tr(H_a) = (1/|D_a|) sum_{i in a} Tr(H_i). Stochastic methods estimate each
    group's trace from ``probes`` Hessian-vector products of the group loss. The
    population row uses Tr(H) = sum_a (|D_a| / n) Tr(H_a) (exact, because the population
    mean loss is the size-weighted mean of the group mean losses); for the stochastic
    methods its stderr is sqrt(sum_a (|D_a| / n)^2 stderr_a^2) (independent probes).

    Parameters
    ----------
    model : nn.Module
        The model (logits out; cross-entropy loss).
    data : GroupedDataset
        Rows and their groups.
    method : {"closed", "exact", "ggn", "hutchinson", "hutchpp"}
        Closed form (logistic regression), exact, Gauss-Newton, or a stochastic estimator.
    params : mapping, optional
        Where to evaluate (default: the model's parameters); their dtype is used.
    probes : int
        Hessian-vector products per group for the stochastic methods (Hutchinson: m
        probes, m >= 2; Hutch++: its whole budget of m >= 4 matvecs).
    generator : torch.Generator or int
        Required for the stochastic methods.
    max_params, chunk_size
        See :func:`per_sample_hessian_traces`.

    Returns
    -------
    pandas.DataFrame
        Columns group, n, trace, stderr, method, matvecs; the first row is group "all",
        then one row per group in ``data.group_names`` order. An empty group has n = 0 and
        NaN trace and stderr. Deterministic methods report stderr 0.
    """
    check_choice(method, "method", METHODS)
    if not isinstance(data, GroupedDataset):
        raise TypeError(f"data must be a GroupedDataset, got {type(data).__name__}")
    params = _resolve_params(model, params)
    X = data.X.to(_dtype_of(params))
    sizes = data.group_sizes().tolist()
    traces, errors, used = [], [], []
    if method == "exact":
        exact = exact_group_traces(model, X, data.y, data.group, n_groups=data.n_groups, params=params,
                                   max_params=max_params, chunk_size=chunk_size)
        for k, n_k in enumerate(sizes):
            traces.append(float(exact[k]) if n_k else math.nan)
            errors.append(0.0 if n_k else math.nan)
            used.append(sum(p.numel() for p in params.values()) if n_k else 0)
    elif method in SAMPLE_METHODS:
        sample = per_sample_hessian_traces(model, X, data.y, method=method, params=params,
                                           max_params=max_params, chunk_size=chunk_size)
        for k, n_k in enumerate(sizes):
            traces.append(float(sample[data.group == k].mean()) if n_k else math.nan)
            errors.append(0.0 if n_k else math.nan)
            used.append(0)
    else:
        gen = _generator(generator)
        for k, n_k in enumerate(sizes):
            if n_k == 0:
                traces.append(math.nan), errors.append(math.nan), used.append(0)
                continue
            rows = data.group == k
            est = _stochastic_group_trace(model, X[rows], data.y[rows], params, method=method,
                                          probes=probes, generator=gen)
            traces.append(est.estimate), errors.append(est.stderr), used.append(est.matvecs)
    n = len(data)
    present = [k for k, n_k in enumerate(sizes) if n_k]
    total = sum(sizes[k] / n * traces[k] for k in present) if n else math.nan
    total_err = math.sqrt(sum((sizes[k] / n * errors[k]) ** 2 for k in present)) if n else math.nan
    rows_out = [{"group": "all", "n": n, "trace": total, "stderr": total_err, "method": method,
                 "matvecs": sum(used)}]
    rows_out += [{"group": name, "n": sizes[k], "trace": traces[k], "stderr": errors[k], "method": method,
                  "matvecs": used[k]} for k, name in enumerate(data.group_names)]
    return pd.DataFrame(rows_out)
