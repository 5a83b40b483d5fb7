"""Paper 001's mitigation trained with DP-SGD: per-sample gradients that leak nothing across records, bounded statistics, honest ledger."""

import math

import pytest
import torch
import torch.nn.functional as F
from dp_accounting import dp_event
from hypothesis import given, settings, strategies as st

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import flatten, parameters_of, per_sample_gradients
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import epsilon_from_event
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.fairness.metrics import boundary_proxy_of_logits
from dpfair_analysis.training.mitigation import FairnessLensMitigation, penalty_coefficients, statistics_sensitivity


def grouped(n=60, d=3, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    X = scale * torch.randn(n, d, generator=g)
    group = (torch.rand(n, generator=g) < 0.3).long()
    X[group == 1] *= 2
    y = (X[:, 0] + 0.3 * torch.randn(n, generator=g) > 0).long()
    return GroupedDataset(X, y, group, group_names=("a", "b"), label_names=("0", "1"))


def primed(objective, model, data, seed=0):
    """An objective whose coefficients came from one release (as after a training step)."""
    gen = torch.Generator().manual_seed(seed)
    objective.prepare(data, generator=gen)
    objective.release(model, data.X, data.y, data.group, params=parameters_of(model),
                      bounds=torch.full((len(data),), objective.clip_bound), expected_batch_size=len(data),
                      generator=gen)
    return objective


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), drop=st.integers(0, 59), scale=st.sampled_from([1e-3, 1.0, 30.0]))
def test_a_records_penalised_gradient_does_not_depend_on_the_other_records(seed, drop, scale):
    data = grouped(seed=seed % 7, scale=scale)
    model = build_model("mlp", input_shape=(3,), n_classes=2, hidden=(4,), seed=seed % 5, activation="tanh")
    objective = primed(FairnessLensMitigation(1.0, 2.0, 0.5), model, data, seed=seed)
    params = parameters_of(model)
    full, _ = objective.per_sample_gradients(model, data.X, data.y, data.group, params=params)
    keep = torch.tensor([i for i in range(len(data)) if i != drop])
    part, _ = objective.per_sample_gradients(model, data.X[keep], data.y[keep], data.group[keep], params=params)
    assert torch.allclose(flatten(full)[keep], flatten(part), rtol=1e-5, atol=1e-7)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([1e-4, 1.0, 1e3]), C=st.sampled_from([1e-3, 0.1, 5.0]))
def test_each_records_statistics_block_is_within_the_stated_sensitivity(seed, scale, C):
    """Release with zero noise: each record's block [pi_C(g), pi_C(g - pi_C(g)), phi, 1] has norm <= Delta_s."""
    data = grouped(n=12, seed=seed % 11, scale=scale)
    model = build_model("mlp", input_shape=(3,), n_classes=2, hidden=(3,), seed=seed % 3)
    objective = FairnessLensMitigation(1.0, 1.0, C, stats_noise_multiplier=1e-300, smoothing=0.0)
    objective.prepare(data, generator=torch.Generator().manual_seed(0))
    size = sum(p.numel() for p in model.parameters())
    for i in range(len(data)):
        objective.statistics = None
        objective.release(model, data.X[i:i + 1], data.y[i:i + 1], data.group[i:i + 1], params=parameters_of(model),
                          bounds=torch.full((1,), C), expected_batch_size=1, generator=torch.Generator())
        block = objective.statistics[data.group[i]]
        assert block.norm() <= statistics_sensitivity(C) * (1 + 1e-9)
        assert block[-1] == 1.0 and -1e-250 <= block[2 * size] < 1
        assert objective.statistics[1 - data.group[i]].abs().max() < 1e-250


def test_with_zero_weights_the_gradients_are_plain_cross_entropy():
    data = grouped()
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=1)
    objective = primed(FairnessLensMitigation(0.0, 0.0, 0.5), model, data)
    got, losses = objective.per_sample_gradients(model, data.X, data.y, data.group, params=parameters_of(model))
    expected = per_sample_gradients(model, data.X, data.y)
    assert torch.allclose(flatten(got), flatten(expected), atol=1e-7)
    assert torch.allclose(losses, F.cross_entropy(model(data.X), data.y, reduction="none"), atol=1e-6)


def test_penalised_gradient_equals_autograd_of_the_written_objective():
    """grad psi_i = grad L_i + gamma1 k'_a H_i v + gamma2 k_a grad phi_i, checked by double backward per record."""
    data = grouped(n=10)
    model = build_model("mlp", input_shape=(3,), n_classes=2, hidden=(4,), seed=2, activation="tanh")
    objective = primed(FairnessLensMitigation(0.7, 1.3, 0.3), model, data)
    kappa1, kappa2, v = objective.coefficients
    got, _ = objective.per_sample_gradients(model, data.X, data.y, data.group, params=parameters_of(model))
    got = flatten(got)
    for i in range(len(data)):
        model.zero_grad()
        logits = model(data.X[i:i + 1])
        loss = F.cross_entropy(logits, data.y[i:i + 1])
        grads = torch.autograd.grad(loss, list(model.parameters()), create_graph=True)
        a = int(data.group[i])
        inner = sum((g * v[name]).sum() for g, (name, _) in zip(grads, model.named_parameters()))
        psi = loss + 0.7 * kappa1[a] * inner + 1.3 * kappa2[a] * boundary_proxy_of_logits(logits)[0]
        expected = torch.cat([g.flatten() for g in torch.autograd.grad(psi, list(model.parameters()))])
        assert torch.allclose(got[i], expected.float(), rtol=1e-4, atol=1e-6)


def test_coefficients_make_the_batch_mean_the_penalty_gradient():
    """(1/n) sum_i k_{a(i)} grad phi_i = sum_a s_a (grad m_a - grad m) at the true fractions."""
    data = grouped(n=40)
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=3)
    signs = torch.tensor([1.0, -1.0], dtype=torch.float64)
    fractions = data.group_sizes().double() / len(data)
    k = penalty_coefficients(signs, fractions)
    phi_grads = []
    for i in range(len(data)):
        model.zero_grad()
        boundary_proxy_of_logits(model(data.X[i:i + 1]))[0].backward()
        phi_grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]).double())
    phi_grads = torch.stack(phi_grads)
    lhs = (k[data.group].unsqueeze(1) * phi_grads).mean(0)
    m = phi_grads.mean(0)
    rhs = sum(signs[a] * (phi_grads[data.group == a].mean(0) - m) for a in range(2))
    assert torch.allclose(lhs, rhs, atol=1e-10)


def test_the_ledger_holds_the_count_release_and_one_joint_event_per_step():
    data = grouped(n=100)
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=0)
    objective = FairnessLensMitigation(1.0, 1.0, 0.5, stats_noise_multiplier=3.0, count_noise_multiplier=20.0)
    config = TrainConfig(epochs=2, batch_size=20, lr=0.1, delta=1e-5, seed=1)
    result = train(model, data, UniformClipping(0.5, 1.5), config, progress=False, objective=objective)
    steps = len(result.steps)
    joint = 1 / math.sqrt(1 / 1.5 ** 2 + 1 / 3.0 ** 2)
    event = dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(20.0),
                                      dp_event.SelfComposedDpEvent(
                                          dp_event.PoissonSampledDpEvent(0.2, dp_event.GaussianDpEvent(joint)), steps)])
    assert result.epsilon == pytest.approx(epsilon_from_event(event, 1e-5), rel=1e-9)
    plain = train(build_model("logreg", input_shape=(3,), n_classes=2, seed=0), data, UniformClipping(0.5, 1.5),
                  config, progress=False)
    assert result.epsilon > plain.epsilon
    assert {"kappa1[0]", "kappa2[1]"} <= set(result.steps.columns)


@pytest.mark.parametrize("kwargs, name", [(dict(gamma1=-1.0), "gamma1"), (dict(gamma2=float("nan")), "gamma2"),
                                          (dict(clip_bound=0.0), "clip_bound"), (dict(smoothing=1.0), "smoothing"),
                                          (dict(stats_noise_multiplier=0.0), "stats_noise_multiplier")])
def test_bad_settings_name_the_argument(kwargs, name):
    args = dict(gamma1=1.0, gamma2=1.0, clip_bound=1.0) | kwargs
    with pytest.raises(ValueError, match=name):
        FairnessLensMitigation(**args)


def test_boundary_proxy_extremes():
    logits = torch.tensor([[0.0, 0.0, 0.0], [100.0, 0.0, 0.0]])
    assert torch.allclose(boundary_proxy_of_logits(logits), torch.tensor([2 / 3, 0.0]), atol=1e-6)


def test_a_record_whose_gradient_is_not_finite_adds_nothing_to_the_statistics():
    """Its clipped gradient, bias, phi and count are all left out (zero noise here): the released block equals the
    block without it; before, its group's row became NaN, so the released statistics named its group."""
    d = 10
    X = torch.randn(12, d, generator=torch.Generator().manual_seed(0))
    X[-1] = torch.randn(d, generator=torch.Generator().manual_seed(5)).sign() * 3e38
    data = GroupedDataset(X, torch.arange(12) % 2, torch.arange(12) % 2, group_names=("a", "b"),
                          label_names=("0", "1"))
    model = build_model("mlp", input_shape=(d,), n_classes=2, seed=0)
    G = flatten(per_sample_gradients(model, X[-1:], data.y[-1:]))
    assert not torch.isfinite(G).all()  # the record this test is about
    blocks = []
    for rows in (torch.arange(12), torch.arange(11)):
        objective = FairnessLensMitigation(1.0, 1.0, 0.5, stats_noise_multiplier=1e-300, smoothing=0.0)
        objective.prepare(data, generator=torch.Generator().manual_seed(0))
        objective.release(model, X[rows], data.y[rows], data.group[rows], params=parameters_of(model),
                          bounds=torch.full((len(rows),), 0.5), expected_batch_size=12, generator=torch.Generator())
        blocks.append(objective.statistics)
    assert torch.isfinite(blocks[0]).all()
    torch.testing.assert_close(blocks[0], blocks[1], rtol=1e-9, atol=1e-200)
