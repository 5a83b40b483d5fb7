"""Esipova et al.'s split of the clipping term into direction and magnitude errors: the parts sum to R^clip, no
clipping gives neither, a pure rescaling gives no direction error; the batch estimate the history logs agrees with
the per-sample definition, on signed values and tiny unequal groups; the training history carries the terms."""

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.models import build_model
from dpfair_analysis.theory.decomposition import (StepMoments, batch_direction_magnitude, direction_magnitude,
                                                  one_step_decomposition, squared_error)
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import TrainConfig, train

values = st.one_of(st.just(0.0), st.floats(1e-6, 10.0), st.floats(-10.0, -1e-6))  # signed, none vanishingly small


def vectors(p):
    return arrays(np.float64, p, elements=values).map(torch.from_numpy)


@st.composite
def step_cases(draw):
    """K group gradients, an unclipped step and a clipped one (any signs), Hessians H_a (symmetric)."""
    k, p = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    groups = torch.stack([draw(vectors(p)) for _ in range(k)])
    step, clipped = draw(vectors(p)), draw(vectors(p))
    halves = torch.stack([draw(vectors((p, p))) for _ in range(k)])
    hessians = halves + halves.transpose(1, 2)
    return groups, step, clipped, hessians, draw(st.floats(1e-3, 2.0))


def quadratics(hessians, v):
    return torch.einsum("p,apq,q->a", v, hessians, v)


@settings(max_examples=60, deadline=None)
@given(case=step_cases())
def test_the_parts_sum_to_the_clipping_term(case):
    groups, step, clipped, hessians, lr = case
    quad, clipped_quad = quadratics(hessians, step), quadratics(hessians, clipped)
    direction, magnitude = direction_magnitude(groups, step, clipped, lr=lr, quadratic=quad,
                                               clipped_quadratic=clipped_quad)
    clip = lr * groups @ (step - clipped) + 0.5 * lr ** 2 * (clipped_quad - quad)
    scale = 1 + (lr * groups.abs() @ (step.abs() + clipped.abs())) + lr ** 2 * (clipped_quad.abs() + quad.abs())
    assert torch.allclose(direction + magnitude, clip, atol=1e-9 * float(scale.max()), rtol=0)


@settings(max_examples=60, deadline=None)
@given(case=step_cases())
def test_no_clipping_gives_neither_error(case):
    groups, step, _, hessians, lr = case
    quad = quadratics(hessians, step)
    direction, magnitude = direction_magnitude(groups, step, step.clone(), lr=lr, quadratic=quad,
                                               clipped_quadratic=quad.clone())
    assert torch.equal(direction, torch.zeros_like(direction)) and torch.equal(magnitude, torch.zeros_like(magnitude))


@settings(max_examples=60, deadline=None)
@given(case=step_cases(), factor=st.floats(1e-3, 1.0))
def test_a_pure_rescaling_has_no_direction_error(case, factor):
    groups, step, _, hessians, lr = case
    assume(float(step.norm()) > 1e-3)
    clipped = factor * step
    quad = quadratics(hessians, step)
    direction, magnitude = direction_magnitude(groups, step, clipped, lr=lr, quadratic=quad,
                                               clipped_quadratic=quadratics(hessians, clipped))
    scale = 1 + lr * float(groups.abs().max() * step.abs().sum()) + lr ** 2 * float(quad.abs().max())
    assert torch.allclose(direction, torch.zeros_like(direction), atol=1e-9 * scale, rtol=0)
    expected = lr * (1 - factor) * (groups @ step) + 0.5 * lr ** 2 * (factor ** 2 - 1) * quad
    assert torch.allclose(magnitude, expected, atol=1e-9 * scale, rtol=0)


@st.composite
def batches(draw):
    """Per-sample gradients with signed entries, tiny unequal groups (one group may have a single row), and
    clipping coefficients in (0, 1]."""
    k, p = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 6)) for _ in range(k)]
    group = torch.tensor([a for a, size in enumerate(sizes) for _ in range(size)])
    grads = torch.stack([draw(vectors(p)) for _ in range(len(group))])
    coefficients = torch.tensor([draw(st.floats(1e-3, 1.0)) for _ in range(len(group))], dtype=torch.float64)
    return grads, group, coefficients, k, draw(st.floats(1.0, 50.0)), draw(st.floats(1e-3, 1.0))


def _batch_inputs(grads, group, coefficients, k):
    norms = grads.norm(dim=1)
    sums = torch.stack([grads[group == a].sum(0) for a in range(k)])
    squares = norms ** 2
    return (sums, (coefficients[:, None] * grads).sum(0),
            torch.bincount(group, weights=squares, minlength=k),
            torch.bincount(group, weights=coefficients * squares, minlength=k),
            torch.bincount(group, minlength=k).double())


@settings(max_examples=60, deadline=None)
@given(case=batches())
def test_the_batch_estimate_is_the_pairwise_definition(case):
    """<g_a, v> estimated from pairs i in a, j != i: sum_{i in a} sum_{j != i} <g_i, c_j g_j> / (n_a b)."""
    grads, group, coefficients, k, b, lr = case
    direction, magnitude = batch_direction_magnitude(*_batch_inputs(grads, group, coefficients, k), lr=lr,
                                                     expected_batch_size=b)
    total, clipped = grads.sum(0), (coefficients[:, None] * grads).sum(0)
    s = float(clipped.norm() / total.norm()) if float(total.norm()) > 0 else 1.0
    off_diagonal = 1 - torch.eye(len(group), dtype=torch.float64)
    gram = grads @ grads.T * off_diagonal
    for a, rows in [*((a, group == a) for a in range(k)), (k, torch.ones_like(group, dtype=torch.bool))]:
        plain = float(gram[rows].sum()) / (int(rows.sum()) * b)
        turned = float((gram[rows] * coefficients).sum()) / (int(rows.sum()) * b)
        scale = 1 + lr * float(gram.abs().sum()) / b
        assert float(direction[a]) == pytest.approx(lr * (s * plain - turned), abs=1e-9 * scale)
        assert float(magnitude[a]) == pytest.approx(lr * (1 - s) * plain, abs=1e-9 * scale)


@settings(max_examples=60, deadline=None)
@given(case=batches())
def test_in_a_batch_no_clipping_gives_zero_and_equal_factors_no_direction(case):
    grads, group, coefficients, k, b, lr = case
    ones = torch.ones_like(coefficients)
    direction, magnitude = batch_direction_magnitude(*_batch_inputs(grads, group, ones, k), lr=lr,
                                                     expected_batch_size=b)
    scale = 1 + lr * float((grads @ grads.T).abs().sum()) / b
    assert direction.abs().max() <= 1e-9 * scale and magnitude.abs().max() <= 1e-9 * scale
    equal = torch.full_like(coefficients, float(coefficients[0]))
    direction, _ = batch_direction_magnitude(*_batch_inputs(grads, group, equal, k), lr=lr, expected_batch_size=b)
    assert direction.abs().max() <= 1e-9 * scale


def test_an_absent_group_is_nan():
    grads = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)
    inputs = _batch_inputs(grads, torch.tensor([0, 0]), torch.tensor([1.0, 0.5], dtype=torch.float64), 2)
    direction, magnitude = batch_direction_magnitude(*inputs, lr=0.1, expected_batch_size=2.0)
    assert torch.isnan(direction[1]) and torch.isnan(magnitude[1]) and torch.isfinite(direction[[0, 2]]).all()


def _grouped(n=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    group = (torch.rand(n, generator=g) < 0.2).long()
    X[group == 1] *= 4.0
    y = (X @ torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64) > 0).long()
    return GroupedDataset(X, y, group, group_names=("a", "b"), label_names=("0", "1"))


def test_theorem_2s_table_splits_its_clipping_term():
    data = _grouped()
    model = torch.nn.Linear(3, 1).double()
    table = one_step_decomposition(StepMoments(model, data, clip_bound=0.5, loss_fn=squared_error), lr=0.2,
                                   noise_multiplier=1.0, batch_size=20)
    assert np.allclose(table["clip_direction"] + table["clip_magnitude"], table["clip"], atol=1e-12)
    assert (table.misalignment > 0).all()  # the minority's large gradients are cut harder: the step turns
    unclipped = one_step_decomposition(StepMoments(model, data, clip_bound=1e9, loss_fn=squared_error), lr=0.2,
                                       noise_multiplier=1.0, batch_size=20)
    assert np.allclose(unclipped[["clip_direction", "clip_magnitude", "misalignment"]], 0.0, atol=1e-12)


def test_the_training_history_logs_both_errors_per_group_and_epoch():
    data = _grouped()
    data = GroupedDataset(data.X.float(), data.y, data.group, group_names=("a", "b"), label_names=("0", "1"))
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=0)
    config = TrainConfig(epochs=2, batch_size=20, lr=0.2, seed=0)
    history = train(model, data, UniformClipping(0.2, 1.0), config, progress=False).history
    rows = history.query("split == 'batches' and metric in ['clip_direction', 'clip_magnitude']")
    assert set(rows.group) == {"a", "b", "all"} and set(rows.epoch) == {1, 2}
    assert rows["value"].notna().all() and (rows["value"] != 0).any()
    plain = train(build_model("logreg", input_shape=(3,), n_classes=2, seed=0), data,
                  UniformClipping(1e9, 1.0), config, progress=False).history
    unclipped = plain.query("metric in ['clip_direction', 'clip_magnitude']")["value"]
    assert np.allclose(unclipped, 0.0, atol=1e-7)  # float32 sums: zero to rounding
