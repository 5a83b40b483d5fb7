"""The one per-sample gradient engine (torch.func) and the clipping arithmetic on it.

Every trainer and every analysis gets per-sample gradients, their norms and their
clipped (noisy) sums from these functions. Gradients are kept as a dict
``{parameter name: tensor of shape (n, *parameter shape)}`` -- what
``torch.func.vmap(torch.func.grad(...))`` returns -- so nothing is copied to flatten them.

Notation: for a batch of n samples with per-sample gradients g_i and per-sample
clipping bounds C_i,

* norm:          ||g_i||_2 over all parameters jointly (flat-vector l2 norm);
* clip factor:   c_i = min(1, C_i / ||g_i||)   (1 when g_i = 0);
* clipped sum:   S = sum_i w_i c_i g_i          (w_i = 1 unless a policy reweights);
* noisy sum:     S + N(0, s^2 I), with s the absolute noise standard deviation
                 (DP-SGD: s = sigma * max_i C_i * max_i w_i).

A DP step needs of the per-sample gradients only their norms and weighted sums
sum_i a_i g_i. :class:`PerSampleGradients` is that interface: the reference
:class:`MaterialisedGradients` wraps the dict from ``vmap(grad)``, and the fast path
(:mod:`dpfair_analysis.fast_gradients`: norms from layer activations and output gradients,
sums by book-keeping) computes the same two things without forming the g_i.
:func:`clipped_sum` and the training loop's release accept either.
"""

from __future__ import annotations

from typing import Callable, Mapping, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, grad_and_value, jvp, vmap

Grads = dict[str, torch.Tensor]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def parameters_of(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's trainable parameters, detached, by name (the functional view)."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def per_sample_losses(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                      params: Mapping[str, torch.Tensor] | None = None,
                      loss_fn: LossFn = F.cross_entropy) -> torch.Tensor:
    """L_i = loss(f(x_i; theta), y_i) for each sample, shape (n,)."""
    params = parameters_of(model) if params is None else params
    logits = functional_call(model, dict(params), (X,))
    return loss_fn(logits, y, reduction="none")


def per_sample_gradients(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                         params: Mapping[str, torch.Tensor] | None = None,
                         loss_fn: LossFn = F.cross_entropy,
                         chunk_size: int | None = None) -> Grads:
    """g_i = grad_theta L_i(theta) for every sample, by ``vmap(grad(.))``.

    Returns ``{name: (n, *shape)}``. ``chunk_size`` bounds vmap's working memory for
    large batches (the result is the same). The model must not mix samples (no batch
    norm); each sample is run as a batch of one.
    """
    params = parameters_of(model) if params is None else dict(params)
    return vmap(grad(_sample_loss(model, loss_fn)), in_dims=(None, 0, 0), chunk_size=chunk_size)(params, X, y)


def _sample_loss(model: nn.Module, loss_fn: LossFn) -> Callable:
    """(params, x, y) -> loss of one sample, run as a batch of one."""

    def sample_loss(p: dict[str, torch.Tensor], x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return loss_fn(functional_call(model, p, (x.unsqueeze(0),)), target.unsqueeze(0))

    return sample_loss


def per_sample_gradients_and_losses(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                                    params: Mapping[str, torch.Tensor] | None = None,
                                    loss_fn: LossFn = F.cross_entropy,
                                    chunk_size: int | None = None) -> tuple[Grads, torch.Tensor]:
    """(g_i, L_i) for every sample in one pass, by ``vmap(grad_and_value(.))``."""
    params = parameters_of(model) if params is None else dict(params)
    return vmap(grad_and_value(_sample_loss(model, loss_fn)), in_dims=(None, 0, 0),
                chunk_size=chunk_size)(params, X, y)


@runtime_checkable
class PerSampleGradients(Protocol):
    """What a DP step uses of a batch's per-sample gradients g_i (i = 1..n).

    ``norms``: ||g_i||_2 over all parameters jointly, shape (n,).
    ``weighted_sum(a)``: sum_i a_i g_i for per-sample coefficients a (shape (n,)), as
    ``{parameter name: tensor of the parameter's shape}`` in the model's parameter order, over the samples whose
    norm is finite only (a non-finite one is left out: :func:`finite_rows_sum`).
    """

    @property
    def norms(self) -> torch.Tensor:
        ...

    def weighted_sum(self, coefficients: torch.Tensor) -> Grads:
        ...


def finite_rows_sum(grads: Mapping[str, torch.Tensor], coefficients: torch.Tensor, norms: torch.Tensor) -> Grads:
    """sum_i a_i g_i over the samples whose norm ||g_i|| is finite; the others are left out.

    A sample whose norm is NaN or inf may hold inf or NaN entries, which a coefficient 0 does not cancel
    (0 * inf = NaN): its row would turn the whole released sum into NaN, so whether a run fails would depend on
    that one record. :func:`clip_factors` gives such a sample c_i = 0; this leaves its row out of the sum as well.
    (A finite norm bounds every entry, so the finite rows hold finite values.)"""
    finite = torch.isfinite(norms)
    if bool(finite.all()):
        return weighted_sum(grads, coefficients)
    return weighted_sum({name: g[finite] for name, g in grads.items()}, coefficients[finite])


class MaterialisedGradients:
    """The reference :class:`PerSampleGradients`: the per-sample gradients themselves.

    ``grads`` is ``{name: (n, *shape)}`` (what :func:`per_sample_gradients` returns);
    ``norms`` are computed on first use unless given.
    """

    def __init__(self, grads: Mapping[str, torch.Tensor], norms: torch.Tensor | None = None) -> None:
        self.grads = dict(grads)
        self._norms = norms

    def __len__(self) -> int:
        return len(self.norms)

    @property
    def norms(self) -> torch.Tensor:
        if self._norms is None:
            self._norms = per_sample_norms(self.grads)
        return self._norms

    def weighted_sum(self, coefficients: torch.Tensor) -> Grads:
        """sum_i a_i g_i over the samples whose norm is finite (:func:`finite_rows_sum`)."""
        return finite_rows_sum(self.grads, coefficients, self.norms)


def per_sample_norms(grads: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """||g_i||_2 over all parameters jointly, shape (n,)."""
    # vector_norm over the parameter dimensions reads the gradients in place (no squared copy)
    # (a 0-dim parameter's per-sample gradients have shape (n,): their norm is |g_i|; dim=() would reduce all)
    norms = [torch.linalg.vector_norm(g, dim=tuple(range(1, g.ndim))) if g.ndim > 1 else g.abs()
             for g in grads.values()]
    return torch.linalg.vector_norm(torch.stack(norms), dim=0)


def clip_factors(norms: torch.Tensor, bounds: torch.Tensor | float) -> torch.Tensor:
    """c_i = min(1, C_i / ||g_i||), so that ||c_i g_i|| <= C_i (and c_i = 1 for g_i = 0); c_i = 0 where the norm
    or the bound is not a number.

    A NaN norm compares as "not above the bound", so without the last rule its sample would enter the sum unclipped:
    the fast engines compute a layer's ||g_i||^2 as (||a_i||^2 + 1) ||b_i||^2, which is inf * 0 = NaN for a record
    whose features are finite but whose ||a_i||^2 overflows while that layer's output gradient is 0 (all its ReLUs
    dead), and the record's gradient from the other layers is finite, so nothing else stops it. Leaving such a
    sample out (c_i = 0) keeps its contribution within C_i whatever its gradient; an infinite norm gives
    C_i / inf = 0 already. A NaN bound (a policy's statistic gone wrong) would pass every sample whole the same
    way; it leaves them out instead. The sums leave such samples' rows out too (:func:`finite_rows_sum`)."""
    if not (isinstance(bounds, torch.Tensor) and bounds.dtype == norms.dtype and bounds.device == norms.device):
        bounds = torch.as_tensor(bounds, dtype=norms.dtype, device=norms.device)
    # where norms > bounds >= 0 the norm is positive, so the division there is safe; elsewhere 1, or 0 for NaN
    factors = torch.where(norms > bounds, bounds / norms, 1.0)
    return torch.where(norms.isnan() | bounds.isnan(), 0.0, factors).expand_as(norms)


def clip_rows(G: torch.Tensor, bounds: torch.Tensor | float) -> torch.Tensor:
    """The rows g_i of a per-sample gradient matrix G (n, d) clipped to norm C_i: c_i g_i, and 0 for a row whose
    norm is not finite (:func:`clip_factors`, :func:`finite_rows_sum`)."""
    norms = G.norm(dim=1)
    clipped = G * clip_factors(norms, bounds).unsqueeze(1)
    return torch.where(torch.isfinite(norms).unsqueeze(1), clipped, 0.0)


def mean_minimum(levels: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """m_i = (1/T) sum_t min(a_t, x_i) for levels a (shape (T,)) and values x (shape (n,)), in O((n + T) log T).

    With the levels sorted, a_(1) <= ... <= a_(T), and k_i = #{t : a_t < x_i}:
    m_i = (a_(1) + ... + a_(k_i) + (T - k_i) x_i) / T. A run whose bound moves, C_t, clips g_i by
    min(1, C_t / ||g_i||) = min(C_t, ||g_i||) / ||g_i||: its factor averaged over the steps is this mean over
    ||g_i||."""
    levels = levels.to(values.dtype).sort().values
    below = torch.cat([torch.zeros(1, dtype=values.dtype, device=values.device), levels.cumsum(0)])
    k = torch.searchsorted(levels, values)
    above = torch.where(k < len(levels), (len(levels) - k).to(values.dtype) * values, 0.0)  # x_i = inf: every a_t
    return (below[k] + above) / len(levels)


def weighted_sum(grads: Mapping[str, torch.Tensor], coefficients: torch.Tensor) -> Grads:
    """sum_i a_i g_i for per-sample coefficients a (shape (n,))."""
    return {name: torch.einsum("n,n...->...", coefficients.to(g.dtype), g) for name, g in grads.items()}


def clipped_sum(grads: Mapping[str, torch.Tensor] | PerSampleGradients, bounds: torch.Tensor | float, *,
                weights: torch.Tensor | None = None,
                norms: torch.Tensor | None = None) -> Grads:
    """S = sum_i w_i min(1, C_i/||g_i||) g_i: each sample's contribution has norm <= w_i C_i.

    ``grads`` is the dict of per-sample gradients or any :class:`PerSampleGradients`
    (whose own ``norms`` are used unless ``norms`` is given).
    """
    if isinstance(grads, Mapping):
        norms = per_sample_norms(grads) if norms is None else norms
    else:
        norms = grads.norms if norms is None else norms
    coefficients = clip_factors(norms, bounds)
    if weights is not None:
        coefficients = coefficients * (weights if weights.device == coefficients.device else
                                       weights.to(coefficients.device))
    if isinstance(grads, Mapping):
        return finite_rows_sum(grads, coefficients, norms)
    return grads.weighted_sum(coefficients)


def gaussian_noise_like(tensors: Mapping[str, torch.Tensor], std: float, *,
                        generator: torch.Generator) -> Grads:
    """Independent N(0, std^2) draws shaped like each tensor, from ``generator``.

    The draws are made on the generator's device (the CPU for the toolkit's generators)
    and moved to each tensor's device, so a run draws the same noise on any device.
    """
    noise = {name: torch.randn(t.shape, generator=generator, dtype=t.dtype).mul_(std) for name, t in tensors.items()}
    return {name: n if n.device == tensors[name].device else n.to(tensors[name].device) for name, n in noise.items()}


def add_gaussian_noise(tensors: Mapping[str, torch.Tensor], std: float, *,
                       generator: torch.Generator) -> Grads:
    """tensors + N(0, std^2 I); ``std`` = 0 returns a copy unchanged."""
    if std == 0:
        return {name: t.clone() for name, t in tensors.items()}
    noise = gaussian_noise_like(tensors, std, generator=generator)
    # one fused call for every tensor: the same elementwise t + noise as a loop, less dispatch
    return dict(zip(tensors, torch._foreach_add(list(tensors.values()), list(noise.values()))))


def noisy_clipped_sum(grads: Mapping[str, torch.Tensor], bounds: torch.Tensor | float, *,
                      noise_std: float, generator: torch.Generator,
                      weights: torch.Tensor | None = None,
                      norms: torch.Tensor | None = None) -> Grads:
    """sum_i w_i min(1, C_i/||g_i||) g_i + N(0, noise_std^2 I)  (DP-SGD's released sum)."""
    return add_gaussian_noise(clipped_sum(grads, bounds, weights=weights, norms=norms),
                              noise_std, generator=generator)


def flatten(grads: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Per-sample gradients as one (n, P) matrix, parameters in insertion order."""
    return torch.cat([g.flatten(1) for g in grads.values()], dim=1)


def mean_loss_gradient(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                       params: Mapping[str, torch.Tensor] | None = None,
                       loss_fn: LossFn = F.cross_entropy) -> Grads:
    """grad_theta (1/n) sum_i L_i(theta): the non-private full-batch gradient."""
    params = parameters_of(model) if params is None else dict(params)

    def mean_loss(p: dict[str, torch.Tensor]) -> torch.Tensor:
        return loss_fn(functional_call(model, p, (X,)), y)

    return grad(mean_loss)(params)


def hessian_vector_product(model: nn.Module, X: torch.Tensor, y: torch.Tensor,
                           vector: Mapping[str, torch.Tensor], *,
                           params: Mapping[str, torch.Tensor] | None = None,
                           loss_fn: LossFn = F.cross_entropy) -> Grads:
    """H v with H the Hessian of the mean loss (1/n) sum_i L_i at ``params`` (forward-over-reverse)."""
    params = parameters_of(model) if params is None else dict(params)

    def loss_gradient(p: dict[str, torch.Tensor]) -> Grads:
        return mean_loss_gradient(model, X, y, params=p, loss_fn=loss_fn)

    return jvp(loss_gradient, (params,), (dict(vector),))[1]
