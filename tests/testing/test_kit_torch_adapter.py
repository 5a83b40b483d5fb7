"""Torch code through the kit: seeded from the kit's rng, refused when it draws from torch's global generator."""

import numpy as np
import pytest
import torch

from dpfair_analysis.testing import MechanismError, audit
from dpfair_analysis.testing.auditing import Budget
from dpfair_analysis.testing.torch import flat_parameters, parameter_trajectory, torch_mechanism

SMALL = Budget("test", screen=200, select=800, evaluate=2_000, top=2, max_pairs=4, batch_factors=(1, 1, 1))


def noisy_sum(data: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return data.sum().reshape(1) + torch.randn(1, generator=generator, dtype=torch.float64)


def test_same_rng_seed_same_output_and_an_audit_runs():
    mechanism = torch_mechanism(noisy_sum)
    a = mechanism(np.ones(3), np.random.default_rng(1))
    assert isinstance(a, np.ndarray) and a.dtype == np.float64
    assert np.array_equal(a, mechanism(np.ones(3), np.random.default_rng(1)))
    result = audit(mechanism, 10.0, 1e-5, relation="queries", data=np.zeros(3), budget=SMALL)
    assert result.consistent


def test_torch_global_generator_is_refused():
    def global_noise(data, generator):
        return data.sum() + torch.randn(1)

    with pytest.raises(MechanismError, match="global random generator"):
        audit(torch_mechanism(global_noise), 1.0, relation="queries", data=np.zeros(2), budget=SMALL)


def test_parameter_trajectory_records_every_step():
    model = torch.nn.Linear(2, 1)
    watch = parameter_trajectory()
    watch(0, model)
    with torch.no_grad():
        model.weight.add_(1.0)
    watch(1, model)
    trajectory = watch.array()
    assert trajectory.shape == (2, 3) and np.allclose(trajectory[1] - trajectory[0], [1, 1, 0])
    assert np.array_equal(flat_parameters(model), trajectory[1])
    with pytest.raises(ValueError, match="no parameters"):
        parameter_trajectory().array()


def test_a_complex_tensor_is_refused_not_cast_to_its_real_part():
    def complex_release(data, generator):
        return torch.randn(1, generator=generator, dtype=torch.float64) + 1j * data.sum()

    with pytest.raises(MechanismError, match="returned complex output"):  # before: audited by its real part
        audit(torch_mechanism(complex_release), 1.0, relation="queries", data=np.zeros(3), budget=SMALL)
