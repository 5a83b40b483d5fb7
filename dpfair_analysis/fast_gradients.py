"""Per-sample gradient norms and clipped sums without materialising per-sample gradients.

The fast path behind the :class:`~dpfair_analysis.gradients.PerSampleGradients` interface
(the reference is :class:`~dpfair_analysis.gradients.MaterialisedGradients` on
``vmap(grad)``). One forward pass records, for every layer with trainable parameters,
its input a and output z; one backward pass of the *summed* loss sum_i L_i gives the
output gradients b = dL/dz. Samples do not mix (no batch norm), so the rows of b that
belong to sample i are exactly dL_i/dz_i: the summed loss needs no rescaling (Opacus
multiplies by n because it differentiates the mean). The backward pass asks autograd for
dL/dz only, so it skips every weight-gradient product of an ordinary backward.

**Linear layers** z_t = W a_t + beta at T positions t of sample i (T = 1 for (n, d_in)
inputs; a_i is T x d_in, b_i is T x d_out). The per-sample weight gradient is
G_i = b_i^T a_i (d_out x d_in) and the bias gradient sum_t b_{i,t}, so

* T = 1:        ||G_i||_F^2 = ||a_i||^2 ||b_i||^2                          (Goodfellow 2015);
* Gram (ghost): ||G_i||_F^2 = sum_{t,s} (a_i a_i^T)_{ts} (b_i b_i^T)_{ts}  (Li et al. 2022,
                Opacus's ghost clipping): n T^2 (d_in + d_out) flops, n T^2 memory;
* explicit:     G_i = b_i^T a_i by one batched matmul: n T d_in d_out flops, n d_in d_out memory.

The choice is made per layer: Gram when T (d_in + d_out) < d_in d_out (it is then the
cheaper of the two) or when the explicit G would exceed ``max_explicit_elements``
numbers; explicit otherwise.

**Conv2d** (groups 1, zero padding) is the Linear case after ``unfold``: a_i is the
(C_in k_h k_w) x L matrix of input patches and b_i the C_out x L output gradient, T = L
output positions.

**Any other layer with parameters** (LayerNorm, Embedding, a user's module) gets its
per-sample parameter gradients from ``vmap`` over samples of the vector-Jacobian product
of that module alone at its recorded input with cotangent b_i (``torch.func``): exact,
and only that layer's gradients are materialised.

**Logistic (softmax) regression** (the toolkit's :class:`~dpfair_analysis.models.LogisticRegression`, cross-entropy)
needs no autograd at all: with delta_i = dL_i/d(scores) -- sigma(s_i) - y_i for the binary model's single score,
softmax(s_i) - e_{y_i} with K classes -- the gradients are G_i = delta_i x_i^T and beta_i = delta_i, so
||g_i||^2 = ||delta_i||^2 (||x_i||^2 + 1) and S = (c * delta)^T X, sum_i c_i delta_i: a matmul each, the lean
step of the many small runs a study makes.

**The clipped, weighted sum** S = sum_i c_i g_i with c_i = w_i min(1, C_i/||g_i||) from
the policy, two ways (``clipped_sum``):

* ``"bookkeeping"`` (Bu et al. 2023, awslabs/fast-differential-privacy): from the stored
  a and b, one matmul per layer: S_W = sum_i c_i b_i^T a_i = (c * b)^T a over all (i, t)
  rows, S_beta = sum_i c_i sum_t b_{i,t}; layers whose G was formed explicitly (or by the
  vmap fallback) contract it with c directly. No second backward.
* ``"backward"`` (Opacus's ghost clipping, Lee & Kifer 2021): a second backward pass of
  sum_i c_i L_i through the retained graph.

Both give the same S; ``benchmarks/per_sample_step.py`` measures them (bookkeeping is
faster on every model here and is the default).

The whole model falls back to the reference ``vmap(grad)`` engine (silently, same
results) when the layer structure cannot be read from hooks: a parameter shared between
modules, a module with trainable parameters that is called other than exactly once per
forward, a module that owns parameters and also has children with parameters, a
parameterised non-Linear/Conv2d module that takes more than one tensor, an output
modified in place after it was recorded, or inputs and outputs without the batch in
their first dimension.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vjp, vmap

from dpfair_analysis.gradients import Grads, LossFn, MaterialisedGradients, per_sample_gradients_and_losses
from dpfair_analysis.models import LogisticRegression

CLIPPED_SUMS = ("bookkeeping", "backward")
#: Largest explicit per-sample weight gradient (n x d_out x d_in numbers) a layer may form
#: before the Gram (ghost) norm is used instead (2^25 floats = 128 MiB in float32).
MAX_EXPLICIT_ELEMENTS = 2 ** 25


class _Unsupported(Exception):
    """The model's structure is outside what the hooks can read: use the reference engine."""


@dataclass
class _Layer:
    """A module with trainable parameters of its own, and what one forward recorded of it."""

    module: nn.Module
    names: dict[str, str]                 # the module's parameter name -> the model's full name
    calls: int = 0
    inputs: tuple = ()
    output: torch.Tensor | None = None
    version: int = 0


@dataclass
class _LayerResult:
    """One layer's squared per-sample norms and its share of sum_i c_i g_i."""

    squared_norms: torch.Tensor
    weighted_sum: Callable[[torch.Tensor], dict[str, torch.Tensor]]


@dataclass
class FastPerSampleGradients:
    """Per-sample gradient norms and clipped sums of one batch, without the per-sample gradients.

    ``norms`` is ||g_i|| over all trainable parameters (shape (n,)); ``weighted_sum(c)``
    returns sum_i c_i g_i by parameter name, in the model's parameter order (the order
    of :func:`~dpfair_analysis.gradients.parameters_of`, which fixes the order of the
    noise draws). See the module docstring for the arithmetic.
    """

    norms: torch.Tensor
    names: tuple[str, ...]
    shapes: dict[str, torch.Size]
    layers: list[_LayerResult] = field(repr=False)
    method: str = "bookkeeping"
    # for method "backward": the per-sample losses with their graph and the leaves to differentiate
    graph_losses: torch.Tensor | None = field(default=None, repr=False)
    leaves: dict[str, torch.Tensor] | None = field(default=None, repr=False)
    # the same batch's per-sample gradients of a subset of its rows (a boolean mask): the sum of a batch with
    # non-finite norms is taken over its finite rows only (gradients.finite_rows_sum)
    rows: Callable[[torch.Tensor], "FastPerSampleGradients | MaterialisedGradients"] | None = field(
        default=None, repr=False)

    def __len__(self) -> int:
        return len(self.norms)

    def weighted_sum(self, coefficients: torch.Tensor) -> Grads:
        """sum_i a_i g_i for per-sample coefficients a (shape (n,))."""
        if coefficients.shape != self.norms.shape:
            raise ValueError(f"coefficients must have shape {tuple(self.norms.shape)}, "
                             f"got {tuple(coefficients.shape)}")
        dtype = self.norms.dtype
        c = coefficients.to(dtype=dtype, device=self.norms.device)
        finite = torch.isfinite(self.norms)
        if self.rows is not None and not bool(finite.all()):
            # a row with a non-finite norm may hold inf or NaN, which c_i = 0 does not cancel: the finite rows' sum,
            # recomputed without it (rare: a record whose features overflow, or a diverging model)
            return self.rows(finite).weighted_sum(c[finite])
        if self.method == "backward" and len(c):
            leaves = self.leaves
            with torch.enable_grad():
                grads = torch.autograd.grad((self.graph_losses * c).sum(), list(leaves.values()), retain_graph=True,
                                            allow_unused=True)
            parts = {name: g for name, g in zip(leaves, grads) if g is not None}
        else:
            parts = {}
            if len(c):
                for layer in self.layers:
                    parts.update(layer.weighted_sum(c))
        return {name: parts[name].reshape(self.shapes[name]) if name in parts else
                torch.zeros(self.shapes[name], dtype=dtype, device=self.norms.device) for name in self.names}


def fast_per_sample_gradients(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                              params: Mapping[str, torch.Tensor] | None = None,
                              loss_fn: LossFn = F.cross_entropy, clipped_sum: str = "bookkeeping",
                              max_explicit_elements: int = MAX_EXPLICIT_ELEMENTS,
                              ) -> tuple[FastPerSampleGradients | MaterialisedGradients, torch.Tensor]:
    """(per-sample gradients as norms + weighted sums, per-sample losses L_i) of one batch.

    ``params`` (by name, as :func:`~dpfair_analysis.gradients.parameters_of` gives them)
    are the values to differentiate at (``None``: the model's own parameters);
    ``loss_fn(logits, y, reduction="none")`` gives L_i. ``clipped_sum`` is
    ``"bookkeeping"`` or ``"backward"`` (module docstring). Returns a
    :class:`FastPerSampleGradients`, or the reference
    :class:`~dpfair_analysis.gradients.MaterialisedGradients` when the model's structure
    needs the fallback. Its weighted sums leave out the rows whose norm is not finite (recomputed on the others).
    """
    found, losses = _fast_per_sample_gradients(model, X, y, params=params, loss_fn=loss_fn, clipped_sum=clipped_sum,
                                               max_explicit_elements=max_explicit_elements)
    if isinstance(found, FastPerSampleGradients):
        def rows(keep: torch.Tensor) -> FastPerSampleGradients | MaterialisedGradients:
            subset = _fast_per_sample_gradients(model, X[keep], y[keep], params=params, loss_fn=loss_fn,
                                                clipped_sum=clipped_sum, max_explicit_elements=max_explicit_elements)[0]
            return subset  # no rows of its own: its norms are the finite ones

        found.rows = rows
    return found, losses


def _fast_per_sample_gradients(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *,
                               params: Mapping[str, torch.Tensor] | None, loss_fn: LossFn, clipped_sum: str,
                               max_explicit_elements: int,
                               ) -> tuple[FastPerSampleGradients | MaterialisedGradients, torch.Tensor]:
    """:func:`fast_per_sample_gradients` without the finite-rows recomputation."""
    if clipped_sum not in CLIPPED_SUMS:
        raise ValueError(f"clipped_sum must be one of {list(CLIPPED_SUMS)}, got {clipped_sum!r}")
    own = {name: p for name, p in model.named_parameters() if p.requires_grad}
    if params is None or _same_tensors(own, params):
        params = None  # differentiate the model's own parameters: no functional_call needed
        values = leaves = own
    else:
        values = {name: p.detach() for name, p in params.items()}
        leaves = {name: v.requires_grad_(True) for name, v in values.items()}
    shapes = {name: v.shape for name, v in values.items()}
    n = len(X)
    if n == 0:
        dtype = next(iter(values.values())).dtype if values else X.dtype
        empty = FastPerSampleGradients(norms=torch.zeros(0, dtype=dtype, device=X.device), names=tuple(values),
                                       shapes=shapes, layers=[], method=clipped_sum)
        return empty, torch.zeros(0, dtype=dtype, device=X.device)
    if loss_fn is F.cross_entropy and type(model) is LogisticRegression and set(values) == {"linear.weight",
                                                                                              "linear.bias"}:
        return _logistic_regression(model, X, y, {name: v.detach() if v.requires_grad else v
                                                  for name, v in values.items()}, shapes, method=clipped_sum)
    try:
        layers = _cached_layers(model, values, cache=params is None)
        with torch.enable_grad():  # like torch.func.grad, work under an outer no_grad too
            return _run(model, X, y, layers, leaves, values, shapes, params is not None, loss_fn, clipped_sum,
                        max_explicit_elements)
    except _Unsupported:
        detached = {name: v.detach() for name, v in values.items()}
        grads, losses = per_sample_gradients_and_losses(model, X, y, params=detached, loss_fn=loss_fn)
        return MaterialisedGradients(grads), losses.detach()


def _logistic_regression(model: LogisticRegression, X: torch.Tensor, y: torch.Tensor,
                         values: Mapping[str, torch.Tensor], shapes: dict[str, torch.Size], *, method: str
                         ) -> tuple[FastPerSampleGradients, torch.Tensor]:
    """Closed-form norms and weighted sums of logistic (softmax) regression under cross-entropy (module
    docstring): delta_i = dL_i/d scores, ||g_i|| = ||delta_i|| sqrt(||x_i||^2 + 1), S = (c * delta)^T X."""
    W = values["linear.weight"]
    A = X.flatten(1) if X.dtype == W.dtype else X.flatten(1).to(W.dtype)
    scores = torch.addmm(values["linear.bias"], A, W.t())
    if model.binary:  # logits (0, s): L = log(1 + e^s) - y s, dL/ds = sigmoid(s) - y
        target = y.to(scores.dtype)
        losses = F.binary_cross_entropy_with_logits(scores[:, 0], target, reduction="none")
        delta = torch.sigmoid(scores) - target.unsqueeze(1)
    else:
        losses = F.cross_entropy(scores, y, reduction="none")
        delta = torch.softmax(scores, dim=1) - F.one_hot(y, scores.shape[1]).to(scores.dtype)
    squared = (delta * delta).sum(1) * ((A * A).sum(1) + 1.0)

    def weighted_sum(c: torch.Tensor) -> dict[str, torch.Tensor]:
        weighted = delta * c.unsqueeze(1)
        return {"linear.weight": weighted.T @ A, "linear.bias": weighted.sum(0)}

    return FastPerSampleGradients(norms=squared.sqrt(), names=tuple(values), shapes=shapes,
                                  layers=[_LayerResult(squared, weighted_sum)], method="bookkeeping"), losses


def _same_tensors(own: Mapping[str, torch.Tensor], params: Mapping[str, torch.Tensor]) -> bool:
    """Whether ``params`` are exactly the model's trainable parameters ``own`` (e.g. their detached views)."""
    if own.keys() != params.keys():
        return False
    for name, p in own.items():
        v = params[name]
        if v.data_ptr() != p.data_ptr() or v.shape != p.shape or v.stride() != p.stride() or v.dtype != p.dtype \
                or v.device != p.device:
            return False
    return True


_LAYER_CACHE: "weakref.WeakKeyDictionary[nn.Module, tuple]" = weakref.WeakKeyDictionary()


def _cached_layers(model: nn.Module, values: Mapping[str, torch.Tensor], *, cache: bool) -> list[_Layer]:
    """:func:`_layers_of`, remembered per model while its trainable parameters (names and tensors) are unchanged.

    A stale entry cannot give wrong numbers: a remembered module that is no longer called
    fails the once-per-forward check in :func:`_run`, which falls back to the reference.
    """
    if not cache:
        return _layers_of(model, values)
    key = tuple((name, id(v)) for name, v in values.items())
    hit = _LAYER_CACHE.get(model)
    if hit is None or hit[0] != key:
        try:
            hit = (key, [(layer.module, layer.names) for layer in _layers_of(model, values)])
        except _Unsupported as err:
            hit = (key, err)
        _LAYER_CACHE[model] = hit
    if isinstance(hit[1], _Unsupported):
        raise hit[1]
    return [_Layer(module=module, names=names) for module, names in hit[1]]


def _layers_of(model: nn.Module, values: Mapping[str, torch.Tensor]) -> list[_Layer]:
    """The modules that own the trainable parameters ``values``, each once (else :class:`_Unsupported`)."""
    layers, owner, prefixes = [], {}, []
    for prefix, module in model.named_modules():
        if not module._parameters:
            continue
        own = {local: (f"{prefix}.{local}" if prefix else local) for local, p in module._parameters.items()
               if p is not None}
        if not own:
            continue
        prefixes.append(prefix)
        for local, full in own.items():
            key = id(module._parameters[local])
            if key in owner:
                raise _Unsupported(f"parameter {full} is shared with {owner[key]}")
            owner[key] = full
        trainable = {local: full for local, full in own.items() if full in values}
        if trainable:
            layers.append((prefix, _Layer(module=module, names=trainable)))
    for prefix, _ in layers:
        start = f"{prefix}." if prefix else ""
        if any(other != prefix and other.startswith(start) for other in prefixes):
            raise _Unsupported(f"module {prefix!r} owns parameters and has children with parameters")
    if sum(len(layer.names) for _, layer in layers) != len(values):
        raise _Unsupported("some parameters are not owned by any module")
    return [layer for _, layer in layers]


def _run(model, X, y, layers, leaves, values, shapes, functional, loss_fn, method, max_explicit):
    n = len(X)

    def hook_for(layer: _Layer):
        def hook(module, inputs, output):
            layer.calls += 1
            layer.inputs, layer.output = inputs, output
            layer.version = output._version if isinstance(output, torch.Tensor) else -1
        return hook

    handles = [layer.module.register_forward_hook(hook_for(layer)) for layer in layers]
    try:
        logits = functional_call(model, leaves, (X,)) if functional else model(X)
    finally:
        for handle in handles:
            handle.remove()
    losses = loss_fn(logits, y, reduction="none")
    for layer in layers:
        out = layer.output
        if layer.calls != 1 or not isinstance(out, torch.Tensor) or out._version != layer.version:
            raise _Unsupported("a layer was called other than once, or its output is not a tensor or was "
                               "modified in place")
        if out.shape[:1] != (n,) or not layer.inputs or not isinstance(layer.inputs[0], torch.Tensor) \
                or layer.inputs[0].shape[:1] != (n,):
            raise _Unsupported("a layer's input or output does not have the batch in its first dimension")
    outputs = [layer.output for layer in layers]
    wanted = [i for i, out in enumerate(outputs) if out.requires_grad]
    found = torch.autograd.grad(losses.sum(), [outputs[i] for i in wanted], retain_graph=method == "backward",
                                allow_unused=True)
    backprops: list[torch.Tensor | None] = [None] * len(layers)
    for i, g in zip(wanted, found):
        backprops[i] = g
    del found, outputs
    results = []
    for i, layer in enumerate(layers):
        b, backprops[i] = backprops[i], None
        if b is not None:  # (None: the loss does not depend on this layer; its gradients are zero)
            results.append(_layer_result(layer, b.detach(), values, max_explicit, keep_sum=method == "bookkeeping"))
        layer.inputs, layer.output = (), None  # let go of what the layer no longer needs, as we go
        del b
    squared = results[0].squared_norms if results else torch.zeros(n, dtype=losses.dtype, device=X.device)
    for result in results[1:]:
        squared = squared + result.squared_norms
    norms = squared.sqrt()  # every layer's term is >= 0 (the Gram one is clamped)
    out = FastPerSampleGradients(norms=norms.detach(), names=tuple(values), shapes=shapes, layers=results,
                                 method=method)
    if method == "backward":
        out.graph_losses, out.leaves = losses, leaves
    return out, losses.detach()


def _layer_result(layer: _Layer, b: torch.Tensor, values, max_explicit: int, keep_sum: bool) -> _LayerResult:
    module = layer.module
    a = layer.inputs[0].detach()
    if isinstance(module, nn.Linear) and set(layer.names) <= {"weight", "bias"}:
        return _linear(a, b, layer.names, max_explicit, keep_sum)
    if isinstance(module, nn.Conv2d) and set(layer.names) <= {"weight", "bias"} and module.groups == 1 \
            and module.padding_mode == "zeros" and module.padding != "same" and a.ndim == 4:
        return _conv2d(module, a, b, layer.names, max_explicit, keep_sum)
    if len(layer.inputs) != 1:
        raise _Unsupported(f"{type(module).__name__} takes {len(layer.inputs)} inputs")
    return _other(module, a, b, {local: values[full].detach() for local, full in layer.names.items()},
                  layer.names, keep_sum)


#: Input patches (numbers) formed at a time when a Conv2d's per-sample weight gradients are formed
#: explicitly (samples are taken in chunks of at most this many patch numbers: 2^21 = 8 MiB in float32).
PATCH_CHUNK_ELEMENTS = 2 ** 21


def _use_gram(n: int, T: int, d_in: int, d_out: int, max_explicit: int) -> bool:
    """Gram (ghost) norm when it is cheaper, T (d_in + d_out) < d_in d_out, or the explicit one too big."""
    return T * (d_in + d_out) < d_in * d_out or n * d_in * d_out > max_explicit


def _conv2d(conv: nn.Conv2d, x: torch.Tensor, gy: torch.Tensor, names: dict[str, str], max_explicit: int,
            keep_sum: bool) -> _LayerResult:
    """A Conv2d as the Linear case: (n, D, L) input patches, (n, C_out, L) output gradients, T = L positions.

    Explicit per-sample weight gradients G_i = b_i P_i^T are formed chunk by chunk of samples,
    so that the patches never take more than :data:`PATCH_CHUNK_ELEMENTS` numbers at once.
    """
    n, c_out = gy.shape[:2]
    b = gy.reshape(n, c_out, -1)
    kh, kw = conv.kernel_size
    d_in, T = conv.in_channels * kh * kw, b.shape[2]
    weight, bias = names.get("weight"), names.get("bias")
    if weight is not None and _use_gram(n, T, d_in, c_out, max_explicit):
        patches = _patches(x, conv, gy.shape[2:])
        return _linear(patches.transpose(1, 2), b.transpose(1, 2), names, max_explicit, keep_sum)
    G = None
    if weight is not None:
        G = torch.empty(n, c_out, d_in, dtype=b.dtype, device=b.device)
        step = max(1, PATCH_CHUNK_ELEMENTS // (d_in * T))
        for start in range(0, n, step):
            patches = _patches(x[start:start + step], conv, gy.shape[2:])
            torch.bmm(b[start:start + step], patches.transpose(1, 2), out=G[start:start + step])
            del patches
    return _explicit(G, b.sum(2) if bias is not None else None, weight, bias, keep_sum)


def _explicit(G: torch.Tensor | None, beta: torch.Tensor | None, weight: str | None, bias: str | None,
              keep_sum: bool) -> _LayerResult:
    """Squared norms and weighted sums from explicit per-sample weight (n, d_out, d_in) and bias (n, d_out) gradients."""
    parts = []
    if G is not None:
        parts.append(torch.linalg.vector_norm(G, dim=(1, 2)).square())
    if beta is not None:
        parts.append(torch.linalg.vecdot(beta, beta))
    squared = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    if not keep_sum:
        G = beta = None

    def weighted_sum(c: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {}
        if weight is not None:
            out[weight] = torch.tensordot(c, G, 1)
        if bias is not None:
            out[bias] = torch.mv(beta.T, c)
        return out

    return _LayerResult(squared_norms=squared, weighted_sum=weighted_sum)


def _patches(x: torch.Tensor, conv: nn.Conv2d, out_size: torch.Size) -> torch.Tensor:
    """The (n, C_in k_h k_w, L) input patches of a Conv2d (what ``F.unfold`` gives, in its order).

    Built from a strided view (``Tensor.unfold``) and one copy, which is several times
    faster than ``F.unfold`` (im2col) on the CPU. The view is taken of ``x`` in the contiguous (NCHW)
    layout: from a channels_last ``x`` (what ``train()`` gives a convolutional model on the CPU) the copy
    gathers every number at a stride of C_in and took 3x as long (the MNIST CNN's second convolution: 6.7
    against 2.1 ms per 65 samples, the layout change itself 0.13 ms). The patches are the same numbers.
    """
    x = x.contiguous()
    padding = (0, 0) if conv.padding == "valid" else conv.padding
    if any(padding):
        x = F.pad(x, (padding[1], padding[1], padding[0], padding[0]))
    (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
    view = x.unfold(2, (kh - 1) * dh + 1, sh).unfold(3, (kw - 1) * dw + 1, sw)[..., ::dh, ::dw]
    if view.shape[2:4] != out_size:
        raise _Unsupported(f"Conv2d output size {tuple(out_size)} does not match its patches {tuple(view.shape[2:4])}")
    n, c = x.shape[:2]
    return view.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, -1)


def _linear(a: torch.Tensor, b: torch.Tensor, names: dict[str, str], max_explicit: int,
            keep_sum: bool) -> _LayerResult:
    """Norms and weighted sum of a Linear layer: a (n, [T,] d_in) inputs, b (n, [T,] d_out) output gradients."""
    n, d_in, d_out = a.shape[0], a.shape[-1], b.shape[-1]
    weight, bias = names.get("weight"), names.get("bias")
    if a.ndim == 2 or a[0].numel() == d_in:
        # T = 1: ||G_i||^2 + ||beta_i||^2 = (||a_i||^2 + [bias]) ||b_i||^2
        a1 = a if a.ndim == 2 else a.reshape(n, d_in)
        b1 = b if b.ndim == 2 else b.reshape(n, d_out)
        b_squared = torch.linalg.vecdot(b1, b1)
        if weight is None:
            squared = b_squared
        else:
            a_squared = torch.linalg.vecdot(a1, a1)
            squared = (a_squared + 1 if bias is not None else a_squared) * b_squared

        def weighted_sum_1(c: torch.Tensor) -> dict[str, torch.Tensor]:
            out = {}
            if weight is not None:
                out[weight] = torch.mm((b1 * c.unsqueeze(1)).T, a1)
            if bias is not None:
                out[bias] = torch.mv(b1.T, c)
            return out

        return _LayerResult(squared_norms=squared, weighted_sum=weighted_sum_1)
    a = a.reshape(n, -1, d_in)
    b = b.reshape(n, -1, d_out)
    T = a.shape[1]
    beta = b.sum(1) if bias is not None else None
    if weight is None or not _use_gram(n, T, d_in, d_out, max_explicit):
        G = torch.bmm(b.transpose(1, 2), a) if weight is not None else None  # (n, d_out, d_in)
        return _explicit(G, beta, weight, bias, keep_sum)
    # Gram (ghost) norm: ||G_i||^2 = sum_{t,s} (a_i a_i^T)_{ts} (b_i b_i^T)_{ts}
    gram = torch.bmm(a, a.transpose(1, 2)) * torch.bmm(b, b.transpose(1, 2))
    squared = gram.sum((1, 2)).clamp(min=0)
    del gram
    if beta is not None:
        squared = squared + torch.linalg.vecdot(beta, beta)
    if not keep_sum:
        a = b = beta = None

    def weighted_sum(c: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {weight: torch.einsum("nto,nti->oi", b * c.view(-1, 1, 1), a)}
        if bias is not None:
            out[bias] = torch.mv(beta.T, c)
        return out

    return _LayerResult(squared_norms=squared, weighted_sum=weighted_sum)


def _other(module: nn.Module, a: torch.Tensor, b: torch.Tensor, params: dict[str, torch.Tensor],
           names: dict[str, str], keep_sum: bool) -> _LayerResult:
    """Per-sample gradients of one module's own parameters by vmap of its vector-Jacobian product."""

    def one(x: torch.Tensor, cotangent: torch.Tensor) -> dict[str, torch.Tensor]:
        _, pullback = vjp(lambda p: functional_call(module, p, (x.unsqueeze(0),)), params)
        return pullback(cotangent.unsqueeze(0))[0]

    grads = vmap(one)(a, b)
    squared = sum(g.flatten(1).pow(2).sum(1) for g in grads.values())
    if not keep_sum:
        grads = {}

    def weighted_sum(c: torch.Tensor) -> dict[str, torch.Tensor]:
        return {names[local]: torch.tensordot(c, g, 1) for local, g in grads.items()}

    return _LayerResult(squared_norms=squared, weighted_sum=weighted_sum)
