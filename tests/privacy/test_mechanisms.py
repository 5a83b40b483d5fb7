"""The joint noise multiplier of several Gaussian releases on one batch."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.05, 100), min_size=1, max_size=5), st.lists(st.floats(-1, 1), min_size=10, max_size=10))
def test_joint_multiplier_is_the_whitened_sensitivity(multipliers, directions):
    """Brute force: a neighbour moves release i by a vector of length at most Delta_i; after
    dividing block i by its noise std s_i = sigma_i Delta_i, the largest joint move has
    length sqrt(sum sigma_i^-2), i.e. the joint mechanism has multiplier 1 / that."""
    deltas = np.abs(np.array(directions[:len(multipliers)])) + 0.1
    stds = np.array(multipliers) * deltas
    worst_move = math.sqrt(sum((d / s) ** 2 for d, s in zip(deltas, stds)))  # every block moved fully
    assert joint_noise_multiplier(multipliers) == pytest.approx(1 / worst_move, rel=1e-9)
    assert joint_noise_multiplier(multipliers) <= min(multipliers) * (1 + 1e-12)


def test_one_release_keeps_its_multiplier_and_bad_values_are_refused():
    assert joint_noise_multiplier([0.8]) == 0.8
    assert joint_noise_multiplier([10.0, 1.0]) == pytest.approx(1 / math.sqrt(1.01))
    for bad in ([], [0.0], [-1.0], [float("nan")]):
        with pytest.raises(ValueError):
            joint_noise_multiplier(bad)
