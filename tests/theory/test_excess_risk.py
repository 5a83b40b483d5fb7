"""Excess risk by Monte Carlo, and Theorem 1 of paper 001 checked against it."""


import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.models import build_model
from dpfair_analysis.theory.excess_risk import (dpsgd_excess_risk, excess_risk_table, group_losses,
                                                group_losses_over_draws, output_perturbation_excess_risk,
                                                theorem1_prediction, trace_risk_rank_correlation)


def two_scale_groups(n=(300, 60), d=4, scale=(0.3, 0.9), seed=0):
    """Group 1 is small and has larger inputs (so a larger Hessian trace); every row has norm <= 1."""
    g = torch.Generator().manual_seed(seed)
    Xs, ys, gs = [], [], []
    for k, (n_k, s_k) in enumerate(zip(n, scale)):
        X = torch.randn(n_k, d, generator=g, dtype=torch.float64)
        X = s_k * X / X.norm(dim=1, keepdim=True).clamp(min=1.0)
        Xs.append(X)
        ys.append((X[:, 0] + 0.2 * torch.randn(n_k, generator=g, dtype=torch.float64) > 0).long())
        gs.append(torch.full((n_k,), k))
    return GroupedDataset(torch.cat(Xs), torch.cat(ys), torch.cat(gs), group_names=("big", "small"),
                          label_names=("0", "1"))


def test_group_losses_over_draws_equal_a_loop_over_draws():
    data = two_scale_groups()
    model = build_model("mlp", input_shape=(4,), n_classes=2, hidden=(3,), seed=1)
    g = torch.Generator().manual_seed(2)
    draws = {k: v.detach().unsqueeze(0) + torch.randn((5, *v.shape), generator=g)
             for k, v in model.named_parameters()}
    got = group_losses_over_draws(model, data, draws, chunk_size=2)
    for r in range(5):
        with torch.no_grad():
            for k, v in model.named_parameters():
                v.copy_(draws[k][r])
            losses = F.cross_entropy(model(data.X.float()), data.y, reduction="none")
        expected = [losses.mean()] + [losses[data.group == k].mean() for k in range(2)]
        assert torch.allclose(got[r].float(), torch.stack(expected), rtol=1e-5, atol=1e-6)
    assert torch.allclose(group_losses(model, data), torch.stack(expected), rtol=1e-5, atol=1e-6)


def test_excess_risk_table_intervals_cover_the_true_mean_at_their_level():
    rng = np.random.default_rng(0)
    true = np.array([0.5, 0.2, 1.0])
    covered = np.zeros(3)
    gap_covered = np.zeros(3)
    trials = 400
    for _ in range(trials):
        losses = torch.tensor(rng.normal(true, [0.3, 0.2, 0.6], size=(200, 3)))
        table = excess_risk_table(losses, torch.zeros(3), group_names=["a", "b"], group_sizes=[10, 5])
        covered += ((table.ci_low <= true) & (true <= table.ci_high)).to_numpy()
        gap_true = true - true[0]
        gap_covered += ((table.gap_ci_low <= gap_true + 1e-12) & (gap_true - 1e-12 <= table.gap_ci_high)).to_numpy()
    # 95% nominal; binomial sd over 400 trials is 1.1%
    assert np.all(np.abs(covered / trials - 0.95) < 0.035), covered / trials
    assert np.all(np.abs(gap_covered[1:] / trials - 0.95) < 0.035), gap_covered / trials


def test_paired_reference_removes_shared_randomness():
    data = two_scale_groups()
    model_factory = lambda seed: build_model("logreg", input_shape=(4,), n_classes=2, seed=seed)  # noqa: E731
    table = dpsgd_excess_risk(model_factory, model_factory, data, seeds=[0, 1, 2], progress=False)
    assert np.allclose(table.excess_risk, 0.0) and np.allclose(table.stderr, 0.0)
    assert list(table.group) == ["all", "big", "small"] and list(table.n) == [360, 300, 60]


def test_theorem1_with_the_mean_hessian_matches_the_measurement_where_the_expansion_holds():
    data = two_scale_groups()
    model = build_model("logreg", input_shape=(4,), n_classes=2)
    # epsilon large enough that s is small against the loss's curvature scale
    table = output_perturbation_excess_risk(model, data, epsilons=[20.0, 40.0], delta=1e-5, l2=0.05, draws=3000,
                                            seed=1, progress=False)
    groups = table[table.group != "all"]
    # the group with larger inputs has the larger trace and the larger measured excess risk
    for _, part in groups.groupby("epsilon"):
        big, small = part.set_index("group").loc["big"], part.set_index("group").loc["small"]
        assert small.trace > big.trace and small.excess_risk > big.excess_risk
    # (1/2) s^2 Tr(H_a) of the MEAN loss is within 4 standard errors + 3% (third-order terms)
    deviation = (table.excess_risk - table.predicted_risk).abs()
    assert np.all(deviation <= 4 * table.stderr + 0.03 * table.predicted_risk), table
    # the paper's printed H_a (the group SUM) overshoots by the group size
    assert np.all(table.predicted_risk_sum_hessian > 20 * table.excess_risk)
    # the gap's prediction (1/2) s^2 |Tr_a - Tr| matches the measured |R_a - R|
    dev_gap = (groups.gap.abs() - groups.predicted_gap).abs()
    assert np.all(dev_gap <= 4 * groups.gap_stderr + 0.05 * groups.predicted_gap), groups
    assert np.allclose(table.predicted_risk, theorem1_prediction(table.trace.to_numpy(), 1.0) * table.noise_std ** 2)


def test_at_large_noise_the_second_order_prediction_overshoots():
    data = two_scale_groups()
    model = build_model("logreg", input_shape=(4,), n_classes=2)
    table = output_perturbation_excess_risk(model, data, epsilons=[0.01], delta=1e-5, l2=0.05, draws=500,
                                            seed=1, progress=False)
    # s is several units: the loss grows ~linearly in ||z||, far below (1/2) s^2 Tr
    assert np.all(table.excess_risk < 0.5 * table.predicted_risk)


def test_same_seed_same_numbers():
    data = two_scale_groups()
    model = build_model("logreg", input_shape=(4,), n_classes=2)
    kwargs = dict(epsilons=[1.0], l2=0.05, draws=50, progress=False)
    a = output_perturbation_excess_risk(model, data, seed=3, **kwargs)
    b = output_perturbation_excess_risk(model, data, seed=3, **kwargs)
    c = output_perturbation_excess_risk(model, data, seed=4, **kwargs)
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a.excess_risk, c.excess_risk)


def test_rank_correlation_per_epsilon():
    table = pd.DataFrame({"epsilon": [1, 1, 1, 1, 2, 2, 2], "group": ["all", "a", "b", "c", "a", "b", "c"],
                          "trace": [0, 1, 2, 3, 1, 2, 3], "excess_risk": [9, 0.1, 0.2, 0.3, 0.3, 0.2, 0.1]})
    out = trace_risk_rank_correlation(table)
    assert out.spearman.tolist() == [1.0, -1.0] and out.groups.tolist() == [3, 3]


@pytest.mark.parametrize("kwargs, name", [
    (dict(epsilons=[]), "epsilons"), (dict(epsilons=[-1.0]), "epsilons"), (dict(draws=0), "draws"),
    (dict(delta=1.5), "delta"), (dict(bound=0.1), "bound"),
])
def test_bad_arguments_name_themselves(kwargs, name):
    data = two_scale_groups()
    model = build_model("logreg", input_shape=(4,), n_classes=2)
    args = dict(epsilons=[1.0], l2=0.05, draws=10, progress=False) | kwargs
    with pytest.raises(ValueError, match=name):
        output_perturbation_excess_risk(model, data, **args)
