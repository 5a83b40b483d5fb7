"""Paper 001 experiment helpers: unit-ball scaling and the mitigation's noise meeting the target epsilon."""

import math

import pytest
import torch

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.experiments import fairness_lens as lens
from dpfair_analysis.models import build_model
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import train
from dpfair_analysis.training.mitigation import FairnessLensMitigation


def data(n=400, scale=4.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = scale * torch.randn(n, 5, generator=g)
    group = (torch.rand(n, generator=g) < 0.25).long()
    y = (X[:, 0] > 0).long()
    return GroupedDataset(X, y, group, group_names=("a", "b"), label_names=("0", "1"))


def test_rows_end_in_the_unit_ball_and_small_rows_keep_their_direction():
    d = data()
    unit = lens.in_unit_ball(d, name="synthetic", bound=5.0)
    norms = unit.X.norm(dim=1)
    assert norms.max() <= 1.0
    inside = d.X.norm(dim=1) <= 5.0
    assert torch.allclose(unit.X[inside], d.X[inside] / 5.0)


def test_adult_uses_its_a_priori_bound():
    adult = lens.load_data("adult", rows=500)
    unit = lens.in_unit_ball(adult, name="adult")
    assert torch.allclose(unit.X, adult.X / math.sqrt(10.0))
    assert unit.X.norm(dim=1).max() <= 1.0


@pytest.mark.parametrize("epsilon", [0.5, 3.0])
def test_the_mitigation_run_meets_its_target_epsilon(epsilon):
    d = data()
    setting = lens.DPSGDSetting(hidden=(4,), epochs=2, batch_size=40, delta=1e-5)
    sigma, sigma_s = lens.mitigation_noise(epsilon, setting=setting, n=len(d), stats_ratio=2.0, count_noise=10.0)
    assert sigma_s == pytest.approx(2 * sigma)
    objective = FairnessLensMitigation(1.0, 1.0, setting.clip_bound, stats_noise_multiplier=sigma_s,
                                       count_noise_multiplier=10.0)
    result = train(build_model("mlp", input_shape=(5,), n_classes=2, hidden=(4,)), d,
                   UniformClipping(setting.clip_bound, sigma), setting.config(0), progress=False, objective=objective)
    assert result.epsilon <= epsilon
    assert result.epsilon > 0.99 * epsilon
