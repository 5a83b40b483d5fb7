"""PF-LD bias-variance bounds (paper 003 Thms 6, 7) against Monte Carlo on real per-sample
quantities, the bound's minimiser, and Figure 3's fraction of gradients above C_p."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dpfair_analysis.fairness.constraints import make_constraint
from dpfair_analysis.models import build_model, count_parameters
from dpfair_analysis.privacy.sensitivity import paper_primal_sensitivity
from dpfair_analysis.theory.pfld_bounds import (dual_error_bound, dual_error_monte_carlo, fraction_above_clip,
                                                h_gradients, paper_primal_error_bound, primal_bound_minimiser,
                                                primal_error_bound, primal_error_monte_carlo)

from lagrangian_data import DATA, biased_data

DP = make_constraint("dp", n_groups=2)


@pytest.fixture(scope="module")
def batch():
    model = build_model("mlp", input_shape=(3,), n_classes=2, seed=1, hidden=(16, 16))
    data = biased_data(n=120, seed=3)
    grads = h_gradients(model, data, DP)
    masks = DP.group_masks(data.y, data.group)
    return model, data, grads, masks


def test_primal_bound_holds_against_monte_carlo(batch):
    model, data, grads, masks = batch
    norms = torch.linalg.vector_norm(grads, dim=1).numpy()
    lambdas = [1.0, 0.5]
    clip = float(np.median(norms))  # half the gradients are clipped: the bias term matters
    by_term = [norms[masks[:, i].numpy()] for i in range(2)]
    for noise_std in (0.0, 1e-3, 0.05):
        mc, se = primal_error_monte_carlo(grads, masks, lambdas, clip=clip, noise_std=noise_std, draws=400)
        bound = primal_error_bound(by_term, lambdas, clip=clip, noise_std=noise_std, n_params=grads.shape[1])
        assert mc <= bound + 3 * se
        assert mc > 0
    # the paper's version with its Delta_p is the same inequality with s = sigma Delta_p
    s = 0.5 * paper_primal_sensitivity([len(v) for v in by_term], clip=clip, lambda_max=1.0)
    mc, se = primal_error_monte_carlo(grads, masks, lambdas, clip=clip, noise_std=s, draws=400)
    assert mc <= paper_primal_error_bound(by_term, lambdas, clip=clip, sigma=0.5, lambda_max=1.0,
                                          n_params=grads.shape[1]) + 3 * se


def test_dual_bound_holds_against_monte_carlo():
    data = biased_data(n=200, seed=4)
    model = build_model("mlp", input_shape=(3,), n_classes=2, seed=2, hidden=(8,))
    ap = make_constraint("ap", n_groups=2)
    with torch.no_grad():
        h = ap.h(model(data.X) * 6.0, data.y).double()  # scaled logits: losses well above C_d
    clip = float(h.median())
    masks = ap.group_masks(data.y, data.group)
    by_term = [h[masks[:, i]].numpy() for i in range(2)]
    for s in (0.0, 0.01, 0.2):
        mc = dual_error_monte_carlo(h, data.y, data.group, constraint=ap, clip=clip, noise_std=s, draws=4000)
        bound = dual_error_bound(by_term, clip=clip, noise_std=s)
        assert (mc <= bound + 0.02 * s + 1e-12).all()
    assert dual_error_bound(by_term, clip=clip, noise_std=0.0).max() > 0  # clipping bias present


def test_minimiser_by_hand():
    norms = [np.array([1.0, 2.0, 3.0])]
    out = primal_bound_minimiser(norms, [1.0], slope=0.5)
    # b(0)=2, b(1)=1.5, b(2)=4/3, b(3)=1.5: minimiser 2; the paper's condition 0.5 = P(||g|| >= C) has no solution
    assert out["c_low"] == out["c_high"] == 2.0 and out["bound"] == pytest.approx(4 / 3)
    assert out["paper_condition_residual"] == pytest.approx(0.5 - 2 / 3)
    flat = primal_bound_minimiser(norms, [1.0], slope=1 / 3)
    assert (flat["c_low"], flat["c_high"]) == (2.0, 3.0)  # a whole interval of minimisers
    assert primal_bound_minimiser(norms, [1.0], slope=1.5)["c_low"] == 0.0


def test_bound_minimiser_is_zero_for_a_network(batch):
    """With S = thousands of parameters, the slope 2 sqrt(S) sigma lambda_max / (min|B_G| - 1) exceeds
    sum lambda_i, so the bound is minimised by clipping every gradient to 0."""
    model = build_model("mlp", input_shape=(3,), n_classes=2, seed=1, hidden=(64, 64))
    grads = h_gradients(model, DATA.subset(torch.arange(64)), DP)
    masks = DP.group_masks(DATA.y[:64], DATA.group[:64])
    norms = torch.linalg.vector_norm(grads, dim=1).numpy()
    by_term = [norms[masks[:, i].numpy()] for i in range(2)]
    S = count_parameters(model)
    slope = 2 * math.sqrt(S) * 1.0 * 1.0 / (min(len(v) for v in by_term) - 1)
    out = primal_bound_minimiser(by_term, [1.0, 1.0], slope=slope)
    assert slope > 2.0 and out["c_low"] == 0.0


def test_fraction_above_clip():
    table = fraction_above_clip(np.array([0.5, 2.0, 3.0, 0.1]), np.array([0, 0, 1, 1]), [1.0, 2.5],
                                group_names=["a", "b"])
    got = {(r.clip, r.group): r.fraction_above for r in table.itertuples()}
    assert got == {(1.0, "a"): 0.5, (1.0, "b"): 0.5, (2.5, "a"): 0.0, (2.5, "b"): 0.5}
