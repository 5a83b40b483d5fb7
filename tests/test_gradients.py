"""The per-sample gradient engine against naive microbatching and against Opacus.

Tolerance: float32 arithmetic summed in different orders; we require
|a - b| <= 1e-5 + 1e-4 |b| elementwise (torch.testing with rtol=1e-4, atol=1e-5).
"""

import math

import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings, strategies as st
from opacus import GradSampleModule

from dpfair_analysis.gradients import (clip_factors, clipped_sum, flatten, hessian_vector_product, mean_minimum,
                                       mean_loss_gradient, noisy_clipped_sum, per_sample_gradients,
                                       per_sample_gradients_and_losses, per_sample_losses, per_sample_norms)
from dpfair_analysis.models import build_model, count_parameters

RTOL, ATOL = 1e-4, 1e-5
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def microbatch_gradients(model, X, y):
    """The reference: one backward pass per sample."""
    out = {name: [] for name, _ in model.named_parameters()}
    for i in range(len(X)):
        model.zero_grad()
        F.cross_entropy(model(X[i:i + 1]), y[i:i + 1]).backward()
        for name, p in model.named_parameters():
            out[name].append(p.grad.detach().clone())
    model.zero_grad()
    return {name: torch.stack(v) for name, v in out.items()}


def opacus_gradients(model, X, y):
    gsm = GradSampleModule(model, loss_reduction="sum")
    gsm.zero_grad()
    F.cross_entropy(gsm(X), y, reduction="sum").backward()
    grads = {name.removeprefix("_module."): p.grad_sample.detach().clone() for name, p in gsm.named_parameters()}
    gsm._close()
    return grads


@st.composite
def tabular_case(draw):
    kind = draw(st.sampled_from(["logreg", "mlp"]))
    n = draw(st.integers(1, 17))
    d = draw(st.integers(1, 12))
    k = draw(st.integers(2, 4))
    hidden = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
    scale = draw(st.sampled_from([1e-3, 1.0, 30.0]))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g) * scale
    y = torch.randint(0, k, (n,), generator=g)
    model = build_model(kind, input_shape=(d,), n_classes=k, seed=seed, hidden=hidden,
                        activation=draw(st.sampled_from(["relu", "tanh"])))
    return model, X, y


@SETTINGS
@given(tabular_case())
def test_tabular_per_sample_gradients_match_microbatching_and_opacus(case):
    model, X, y = case
    ours = per_sample_gradients(model, X, y)
    reference = microbatch_gradients(model, X, y)
    opacus = opacus_gradients(model, X, y)
    assert ours.keys() == reference.keys() == opacus.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], reference[name], rtol=RTOL, atol=ATOL)
        torch.testing.assert_close(ours[name], opacus[name], rtol=RTOL, atol=ATOL)


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 5), seed=st.integers(0, 1000))
def test_cnn_per_sample_gradients_match_microbatching_and_opacus(n, seed):
    g = torch.Generator().manual_seed(seed)
    model = build_model("cnn", input_shape=(1, 28, 28), n_classes=10, seed=seed)
    X = torch.rand(n, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    ours = per_sample_gradients(model, X, y)
    reference = microbatch_gradients(model, X, y)
    opacus = opacus_gradients(model, X, y)
    for name in ours:
        torch.testing.assert_close(ours[name], reference[name], rtol=RTOL, atol=ATOL)
        torch.testing.assert_close(ours[name], opacus[name], rtol=RTOL, atol=ATOL)


def test_cnn_has_the_papers_parameter_count():
    assert count_parameters(build_model("cnn", input_shape=(1, 28, 28), n_classes=10)) == 431_080


def test_chunked_vmap_and_losses_agree_with_unchunked():
    g = torch.Generator().manual_seed(3)
    model = build_model("mlp", input_shape=(6,), n_classes=3, hidden=(5,))
    X, y = torch.randn(23, 6, generator=g), torch.randint(0, 3, (23,), generator=g)
    full = per_sample_gradients(model, X, y)
    chunked, losses = per_sample_gradients_and_losses(model, X, y, chunk_size=4)
    for name in full:
        torch.testing.assert_close(full[name], chunked[name])
    torch.testing.assert_close(losses, F.cross_entropy(model(X), y, reduction="none"))
    torch.testing.assert_close(per_sample_losses(model, X, y), losses)


@st.composite
def gradient_batch(draw):
    n = draw(st.integers(1, 12))
    shapes = draw(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=3))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    scale = torch.tensor(draw(st.lists(st.sampled_from([0.0, 1e-6, 0.3, 1.0, 1e4]), min_size=n, max_size=n)))
    grads = {f"p{j}": torch.randn(n, *shape, generator=g, dtype=torch.float64) * scale.view(-1, 1, 1).double()
             for j, shape in enumerate(shapes)}
    bounds = torch.tensor(draw(st.lists(st.floats(1e-3, 1e3), min_size=n, max_size=n)), dtype=torch.float64)
    return grads, bounds


@settings(max_examples=200, deadline=None)
@given(gradient_batch())
def test_each_clipped_contribution_is_within_its_bound(case):
    grads, bounds = case
    norms = per_sample_norms(grads)
    torch.testing.assert_close(norms, flatten(grads).norm(dim=1))
    factors = clip_factors(norms, bounds)
    clipped_norms = factors * norms
    assert torch.all(clipped_norms <= bounds * (1 + 1e-12))
    # Unclipped samples are untouched; clipped ones land exactly on the bound.
    assert torch.all(factors[norms <= bounds] == 1)
    torch.testing.assert_close(clipped_norms[norms > bounds], bounds[norms > bounds])
    # Removing any one sample changes the clipped sum by at most its bound.
    def as_vector(summed):
        return torch.cat([v.flatten() for v in summed.values()])

    total = as_vector(clipped_sum(grads, bounds))
    for i in range(len(bounds)):
        keep = torch.arange(len(bounds)) != i
        without = as_vector(clipped_sum({k: v[keep] for k, v in grads.items()}, bounds[keep]))
        assert (total - without).norm() <= bounds[i] * (1 + 1e-9)


def test_noisy_sum_is_reproducible_and_has_the_stated_noise_scale():
    grads = {"w": torch.zeros(4, 2000, dtype=torch.float64)}
    a = noisy_clipped_sum(grads, 1.0, noise_std=2.5, generator=torch.Generator().manual_seed(1))["w"]
    b = noisy_clipped_sum(grads, 1.0, noise_std=2.5, generator=torch.Generator().manual_seed(1))["w"]
    assert torch.equal(a, b)
    # sample sd of 2000 N(0, 2.5^2) draws: relative standard error ~ 1/sqrt(2*2000) = 1.6%
    assert abs(float(a.std()) / 2.5 - 1) < 5 * (1 / math.sqrt(4000))


def test_hessian_vector_product_matches_autograd_hessian():
    g = torch.Generator().manual_seed(0)
    model = build_model("logreg", input_shape=(3,), n_classes=3)
    X, y = torch.randn(10, 3, generator=g), torch.randint(0, 3, (10,), generator=g)
    params = {k: v.double() for k, v in model.named_parameters()}
    model = model.double()
    X = X.double()
    names = list(params)
    flat = torch.cat([params[k].detach().flatten() for k in names])
    shapes = [params[k].shape for k in names]

    def loss_of(vec):
        parts, start = {}, 0
        for k, s in zip(names, shapes):
            parts[k] = vec[start:start + s.numel()].view(s)
            start += s.numel()
        return F.cross_entropy(torch.func.functional_call(model, parts, (X,)), y)

    H = torch.autograd.functional.hessian(loss_of, flat)
    v = torch.randn(flat.numel(), generator=g, dtype=torch.float64)
    v_dict, start = {}, 0
    for k, s in zip(names, shapes):
        v_dict[k] = v[start:start + s.numel()].view(s)
        start += s.numel()
    hv = hessian_vector_product(model, X, y, v_dict)
    torch.testing.assert_close(torch.cat([hv[k].flatten() for k in names]), H @ v)
    grad = mean_loss_gradient(model, X, y)
    torch.testing.assert_close(torch.cat([grad[k].flatten() for k in names]),
                               torch.autograd.functional.jacobian(loss_of, flat))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1e6, allow_subnormal=False), min_size=1, max_size=30),
       st.lists(st.one_of(st.floats(0.0, 1e6, allow_subnormal=False), st.just(math.inf)), min_size=0, max_size=30))
def test_mean_minimum_is_the_mean_over_the_levels_of_the_minimum(levels, values):
    """Ties, zeros, equal levels and infinite values (a zero gradient's 1 / ||g||) included."""
    a = torch.tensor(levels, dtype=torch.float64)
    x = torch.tensor(values, dtype=torch.float64)
    expected = torch.minimum(a[:, None], x[None, :]).mean(0) if len(values) else torch.zeros(0, dtype=torch.float64)
    assert torch.allclose(mean_minimum(a, x), expected, rtol=1e-12, atol=0.0)
