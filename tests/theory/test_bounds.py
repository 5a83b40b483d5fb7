"""Paper 000 Eq. (1): what holds (upper bound, minimiser), what does not (the lower bound at half)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from dpfair_analysis.theory.bounds import (bias_variance_bound, bound_curve, bound_minimising_clip,
                                           clipping_bias_term, expected_gaussian_norm, monte_carlo_group_error)


@pytest.mark.parametrize("dim", [1, 2, 7, 100])
def test_expected_gaussian_norm_matches_monte_carlo(dim):
    g = torch.Generator().manual_seed(dim)
    draws = torch.randn(200_000, dim, generator=g, dtype=torch.float64) * 1.7
    norms = draws.norm(dim=1)
    stderr = float(norms.std() / math.sqrt(len(norms)))
    assert abs(float(norms.mean()) - expected_gaussian_norm(1.7, dim)) < 5 * stderr


@st.composite
def group_gradients(draw, signed=True):
    b = draw(st.integers(1, 8))
    d = draw(st.integers(1, 5))
    values = st.floats(-50, 50) if signed else st.floats(0, 50)
    grads = torch.tensor(draw(st.lists(st.lists(values, min_size=d, max_size=d), min_size=b, max_size=b)),
                         dtype=torch.float64)
    return grads, draw(st.floats(0.01, 20))


@settings(max_examples=150, deadline=None)
@given(group_gradients(), st.sampled_from(["gaussian", "laplace"]), st.floats(0.01, 30), st.integers(0, 1000))
def test_upper_bound_holds_draw_by_draw(case, noise, scale, seed):
    """||G^ - G|| <= ||Z||/b + B for every noise draw, hence in expectation, for signed vectors."""
    grads, clip_bound = case
    b = len(grads)
    gen = torch.Generator().manual_seed(seed)
    measured = monte_carlo_group_error(grads, clip_bound, noise=noise, noise_scale=scale, draws=2000, generator=gen)
    gen = torch.Generator().manual_seed(seed)  # the same draws again, to get E||Z|| on them
    d = grads.shape[1]
    if noise == "gaussian":
        z = torch.randn(2000, d, generator=gen, dtype=torch.float64) * scale
    else:
        u = torch.rand(2000, d, generator=gen, dtype=torch.float64) - 0.5
        z = -scale * torch.sign(u) * torch.log1p(-2 * u.abs())
    bias = clipping_bias_term(grads.norm(dim=1), clip_bound)
    assert measured["mean"] <= float(z.norm(dim=1).mean()) / b + bias + 1e-9


def test_lower_bound_at_half_fails_for_opposite_signs():
    """The counterexample in the module docstring, measured: g = (+10, -10), C = 1, Lap(0.01)."""
    grads = torch.tensor([[10.0], [-10.0]], dtype=torch.float64)
    measured = monte_carlo_group_error(grads, 1.0, noise="laplace", noise_scale=0.01, draws=20_000,
                                       generator=torch.Generator().manual_seed(0))
    bound = bias_variance_bound(grads.norm(dim=1), 1.0, expected_noise_norm=0.01)
    assert measured["ci_high"] < bound["lower_half"]
    assert measured["mean"] == pytest.approx(0.01 / 2, rel=0.05)  # E|Lap(0.01)| / b
    assert bound["lower_half"] == pytest.approx(0.5 * (0.01 / 2 + 9))


@settings(max_examples=60, deadline=None)
@given(group_gradients(signed=False), st.floats(0.05, 30), st.integers(0, 1000))
def test_lower_bound_at_half_holds_for_nonnegative_scalars(case, scale, seed):
    """Amin et al.'s setting: non-negative scalars, symmetric noise. Then E|Z/b - B| >= max(V, B)."""
    grads, clip_bound = case
    scalars = grads[:, :1]
    measured = monte_carlo_group_error(scalars, clip_bound, noise="laplace", noise_scale=scale, draws=4000,
                                       generator=torch.Generator().manual_seed(seed))
    bound = bias_variance_bound(scalars.norm(dim=1), clip_bound, expected_noise_norm=scale)
    assert measured["mean"] + 4 * measured["stderr"] + 1e-12 >= bound["lower_half"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 100), min_size=1, max_size=30), st.floats(0.05, 40))
def test_minimiser_beats_every_point_of_a_fine_grid(norms, kappa):
    norms = torch.tensor(norms, dtype=torch.float64)
    best = bound_minimising_clip(norms, noise_per_unit_clip=kappa)
    grid = np.unique(np.concatenate([np.linspace(0, float(norms.max()) * 1.1 + 1, 400), norms.numpy()]))
    curve = bound_curve(norms, grid, noise_per_unit_clip=kappa)
    at_best = bound_curve(norms, np.array([best]), noise_per_unit_clip=kappa)["upper"].iloc[0]
    assert at_best <= curve["upper"].min() + 1e-9
