"""Theorem 2 of paper 001 (one DP-SGD step's clipping / noise decomposition) against Monte Carlo."""

import numpy as np
import pytest
import torch
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.models import build_model
from dpfair_analysis.theory.decomposition import (DecompositionTracker, StepMoments, compare_with_simulation,
                                                  one_step_decomposition, simulate_one_step, squared_error)
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import TrainConfig, _BatchStats, _step, train
from dpfair_analysis.training.objectives import CrossEntropy
from dpfair_analysis.theory.excess_risk import group_losses


def grouped(n=200, d=3, minority_scale=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    group = (torch.rand(n, generator=g) < 0.3).long()
    X[group == 1] *= minority_scale
    w = torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)[:d]
    y = (X @ w + torch.randn(n, generator=g, dtype=torch.float64) > 0).long()
    return GroupedDataset(X, y, group, group_names=("a", "b"), label_names=("0", "1"))


def linear(d=3, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(d, 1).double()


def test_on_a_quadratic_loss_every_term_matches_monte_carlo_and_the_printed_noise_term_does_not():
    data = grouped()
    model = linear()
    kwargs = dict(lr=0.3, noise_multiplier=1.0, batch_size=20)
    predicted = one_step_decomposition(StepMoments(model, data, clip_bound=1.0, loss_fn=squared_error), **kwargs)
    measured = simulate_one_step(model, data, clip_bound=1.0, draws=6000, generator=torch.Generator().manual_seed(1),
                                 loss_fn=squared_error, **kwargs)
    table = compare_with_simulation(predicted, measured)
    for term in ("nonprivate", "clip", "noise", "expected_loss"):
        assert (table[f"{term}_z"] < 4.5).all(), table[[f"{term}_pred", f"{term}_meas", f"{term}_z"]]
    # clipping matters here (C = 1 below most gradient norms), so the check is not vacuous
    assert (table.clip_pred.abs() > 20 * table.clip_stderr).all()
    # the printed R^noise (no 1/b^2) is b^2 = 400 times the measured term
    assert (table.noise_printed_z > 100).all()
    assert np.allclose(table.noise_printed / table.noise_pred, 400.0)


def test_on_logistic_regression_the_expansion_holds_for_a_small_step():
    data = grouped()
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=0).double()
    kwargs = dict(lr=0.05, noise_multiplier=4.0, batch_size=20)
    predicted = one_step_decomposition(StepMoments(model, data, clip_bound=0.5), **kwargs)
    measured = simulate_one_step(model, data, clip_bound=0.5, draws=6000, generator=torch.Generator().manual_seed(2),
                                 **kwargs)
    table = compare_with_simulation(predicted, measured)
    for term in ("nonprivate", "clip", "noise", "expected_loss"):
        deviation = (table[f"{term}_pred"] - table[f"{term}_meas"]).abs()
        assert (deviation <= 4.5 * table[f"{term}_stderr"] + 0.02 * table[f"{term}_pred"].abs()).all(), table


def test_no_clipping_and_no_noise_give_zero_terms():
    data = grouped()
    model = linear()
    moments = StepMoments(model, data, clip_bound=1e9, loss_fn=squared_error)
    table = one_step_decomposition(moments, lr=0.1, noise_multiplier=0.0, batch_size=50)
    assert np.allclose(table["clip"], 0.0, atol=1e-15) and np.allclose(table.noise, 0.0)
    assert np.allclose(table.expected_loss, table.nonprivate)


def test_prediction_matches_the_training_loops_own_step():
    """The decomposition describes the step the toolkit actually takes (loop._step, with the L2 penalty)."""
    data = grouped(n=120)
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=0, l2=0.2).double()
    data32 = data
    lr, C, sigma, b = 0.05, 0.5, 2.0, 12
    predicted = one_step_decomposition(StepMoments(model, data32, clip_bound=C), lr=lr, noise_multiplier=sigma,
                                       batch_size=b)
    start = {k: v.detach().clone() for k, v in model.named_parameters()}
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(1500):
        with torch.no_grad():
            for k, v in model.named_parameters():
                v.copy_(start[k])
        index = torch.nonzero(torch.rand(len(data32), generator=gen) < b / len(data32)).flatten()
        _step(model, data32, index, UniformClipping(C, sigma), CrossEntropy(), lr=lr, generator=gen,
              expected_batch_size=b, accumulator=_BatchStats(2))
        losses.append(group_losses(model, data32).double())
    losses = torch.stack(losses)
    mean, stderr = losses.mean(0).numpy(), (losses.std(0) / len(losses) ** 0.5).numpy()
    assert np.all(np.abs(predicted.expected_loss.to_numpy() - mean) <= 4.5 * stderr + 2e-3), (predicted, mean, stderr)


def test_tracker_records_every_kth_iterate_during_training():
    data = grouped(n=150)
    train_data = GroupedDataset(data.X.float(), data.y, data.group, group_names=data.group_names,
                                label_names=data.label_names)
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=1)
    config = TrainConfig(epochs=2, batch_size=30, lr=0.2, seed=0)
    tracker = DecompositionTracker(train_data, lr=0.2, clip_bound=0.5, noise_multiplier=1.0,
                                   sampling_rate=30 / 150, every=5)
    result = train(model, train_data, UniformClipping(0.5, 1.0), config, progress=False, callbacks=[tracker])
    table = tracker.table()
    total = len(result.steps)
    assert total == 10 and sorted(table.step.unique()) == [0, 5, 10]
    last = table[table.step == total]
    direct = one_step_decomposition(StepMoments(model, train_data, clip_bound=0.5), lr=0.2, noise_multiplier=1.0,
                                    batch_size=30)
    assert np.allclose(last["clip"].to_numpy(), direct["clip"].to_numpy())
    assert not np.allclose(table[table.step == 0]["loss"].to_numpy(), last["loss"].to_numpy())
    assert set(table.group) == {"all", "a", "b"}


@pytest.mark.parametrize("kwargs, name", [(dict(lr=0), "lr"), (dict(noise_multiplier=-1), "noise_multiplier"),
                                          (dict(batch_size=1000), "batch_size")])
def test_bad_arguments_name_themselves(kwargs, name):
    moments = StepMoments(linear(), grouped(), clip_bound=1.0, loss_fn=squared_error)
    with pytest.raises(ValueError, match=name):
        one_step_decomposition(moments, **(dict(lr=0.1, noise_multiplier=1.0, batch_size=10) | kwargs))


def test_models_too_large_for_explicit_hessians_are_refused():
    model = build_model("mlp", input_shape=(3,), n_classes=2, hidden=(64, 64))
    with pytest.raises(ValueError, match="max_params"):
        StepMoments(model, grouped(), clip_bound=1.0, max_params=1000)
