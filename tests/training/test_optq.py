"""Opt-Q (adaptive quantile clipping, Andrew et al. 2021): the sensitivities its noise relies on, its
accounting, the update rule, and its agreement with Opacus's AdaClipDPOptimizer step by step.

Sensitivities are checked by brute force over neighbouring batches chosen by hypothesis (norms at,
just above and far from the bound, empty batches, add/remove/replace), not by re-deriving them.
"""

import math

import pytest
import torch
from hypothesis import assume, given, settings, strategies as st

from dpfair_analysis import data as datasets
from dpfair_analysis.gradients import clipped_sum
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import epsilon_from_event, poisson_gaussian_event
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.training.optq import OptQ, geometric_update, optq_gradient_multiplier
from dpfair_analysis.training.policies import make_policy

from neighbours import neighbour_of

SETTINGS = settings(max_examples=300, deadline=None)


@st.composite
def norms_and_neighbour(draw):
    clip = draw(st.sampled_from([1e-3, 0.5, 1.0, 1e3]))
    norm = st.sampled_from([0.0, clip / 2, clip, clip * (1 + 1e-9), 3 * clip, 1e6])
    rows = draw(st.lists(norm, max_size=12))
    neighbour, kind = draw(neighbour_of(rows, norm))
    return clip, rows, neighbour, kind


def centred_count(norms, clip):
    return sum(1.0 if n <= clip else 0.0 for n in norms) - 0.5 * len(norms)


@SETTINGS
@given(norms_and_neighbour())
def test_centred_count_moves_by_at_most_half(case):
    """One record adds or removes a term of +-1/2: contribution bound 1/2 (replace: <= 1 = 2 x 1/2)."""
    clip, rows, neighbour, kind = case
    change = abs(centred_count(rows, clip) - centred_count(neighbour, clip))
    assert change <= (0.5 if kind != "replace" else 1.0) + 1e-12
    if kind != "replace":
        assert change == 0.5  # attained by every record: the bound is tight


@SETTINGS
@given(norms_and_neighbour())
def test_the_policy_releases_the_centred_count(case):
    clip, rows, _, _ = case
    policy = OptQ(clip, 1e-10, count_noise=1e-9)
    decision = policy.decide(torch.tensor(rows, dtype=torch.float64), torch.zeros(len(rows), dtype=torch.long),
                             n_groups=1, expected_batch_size=8, generator=torch.Generator())
    assert decision.record["centred_count"] == pytest.approx(centred_count(rows, clip), abs=1e-6)
    assert decision.record["C"] == clip and decision.bounds.tolist() == [clip] * len(rows)


def test_uncentred_count_has_contribution_bound_one():
    """Why the centring matters: the plain count moves by 1 when a record with an unclipped gradient is
    added, so the same sigma_b on it would be a multiplier of sigma_b, not 2 sigma_b (Opacus's release)."""
    rows, clip = [0.1, 5.0], 1.0
    plain = lambda r: sum(n <= clip for n in r)
    assert plain(rows + [0.2]) - plain(rows) == 1
    assert abs(centred_count(rows + [0.2], clip) - centred_count(rows, clip)) == 0.5


@st.composite
def gradients_and_clip(draw):
    n, d = draw(st.integers(1, 10)), draw(st.integers(1, 4))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2 ** 16)))
    scales = torch.tensor(draw(st.lists(st.sampled_from([0.0, 1e-3, 1.0, 1e4]), min_size=n, max_size=n)))
    grads = torch.randn(n, d, generator=g, dtype=torch.float64) * scales[:, None]
    return grads, draw(st.sampled_from([1e-3, 0.5, 10.0])), draw(st.floats(0.3, 3.0)), draw(st.floats(0.5, 40.0))


@SETTINGS
@given(gradients_and_clip())
def test_clipped_sum_moves_by_at_most_noise_over_sigma_z(case):
    """Adding or removing any (signed, vector) gradient moves the clipped sum by <= C_t = noise_std / sigma_z."""
    grads, clip, sigma, sigma_b = case
    assume(sigma < 2 * sigma_b)
    policy = OptQ(clip, sigma, sigma_b)
    decision = policy.decide(grads.norm(dim=1), torch.zeros(len(grads), dtype=torch.long), n_groups=1,
                             expected_batch_size=4, generator=torch.Generator().manual_seed(0))
    full = clipped_sum({"w": grads}, decision.bounds)["w"]
    without = clipped_sum({"w": grads[1:]}, decision.bounds[1:])["w"]
    assert float((full - without).norm()) <= decision.noise_std / policy.gradient_multiplier * (1 + 1e-9)


@SETTINGS
@given(st.floats(0.1, 20.0), st.floats(0.06, 500.0))
def test_joint_multiplier_is_the_target(sigma, sigma_b):
    """Andrew et al. Theorem 1: (sigma_z^-2 + (2 sigma_b)^-2)^-1/2 = sigma."""
    assume(sigma < 2 * sigma_b * (1 - 1e-6))
    policy = OptQ(1.0, sigma, sigma_b)
    count, gradient = policy.planned_noise_multipliers()
    assert count == 2 * sigma_b and gradient == pytest.approx(optq_gradient_multiplier(sigma, sigma_b))
    assert joint_noise_multiplier((count, gradient)) == pytest.approx(sigma, rel=1e-9)


@pytest.mark.parametrize("kwargs,name", [
    ({"noise_multiplier": 2.0, "count_noise": 1.0}, "count_noise"),
    ({"target_quantile": 1.0}, "target_quantile"),
    ({"target_quantile": 0.0}, "target_quantile"),
    ({"clip_lr": 0.0}, "clip_lr"),
    ({"min_clip": 2.0, "max_clip": 1.0}, "min_clip"),
])
def test_bad_settings_name_the_argument(kwargs, name):
    base = {"initial_clip": 1.0, "noise_multiplier": 1.0, "count_noise": 5.0}
    with pytest.raises(ValueError, match=name):
        OptQ(**{**base, **kwargs})


def test_update_direction_and_size():
    assert geometric_update(2.0, 0.9, target_quantile=0.5, clip_lr=0.2) == pytest.approx(2.0 * math.exp(-0.08))
    assert geometric_update(2.0, 0.1, target_quantile=0.5, clip_lr=0.2) > 2.0


@pytest.mark.parametrize("quantile", [0.2, 0.5, 0.9])
def test_bound_tracks_the_target_quantile(quantile):
    """On a fixed norm distribution (lognormal), C converges near its gamma-quantile (small count noise)."""
    g = torch.Generator().manual_seed(1)
    policy = OptQ(0.01, 1.0, count_noise=2.0, target_quantile=quantile, clip_lr=0.2)
    for _ in range(3000):
        norms = torch.exp(torch.randn(200, generator=g))
        policy.decide(norms, torch.zeros(200, dtype=torch.long), n_groups=1, expected_batch_size=200, generator=g)
    exact = float(torch.quantile(torch.exp(torch.randn(200_000, generator=g)), quantile))
    assert policy.current_clip == pytest.approx(exact, rel=0.1)


def _adult(n=400):
    return datasets.load("adult").subset(torch.arange(n))


def test_run_is_accounted_as_dpsgd_at_the_target_multiplier_and_runs_reset():
    """The ledger's epsilon, recomputed from its events, equals DP-SGD's at sigma (same q, same steps);
    a second run with the same policy object starts again at C_0 and repeats the first draw for draw."""
    data = _adult()
    policy = make_policy("optq", clip_bound=0.5, noise_multiplier=1.1, count_noise=3.0)
    config = TrainConfig(epochs=2, batch_size=20, lr=0.1, delta=1e-5)
    runs = [train(build_model("logreg", input_shape=(40,), n_classes=2, seed=0), data, policy, config,
                  progress=False) for _ in range(2)]
    steps = len(runs[0].steps)
    expected = epsilon_from_event(poisson_gaussian_event(20 / len(data), 1.1, steps=steps), 1e-5)
    assert runs[0].ledger.epsilon(1e-5) == pytest.approx(expected, rel=1e-9)
    assert runs[0].epsilon == pytest.approx(expected, rel=1e-9)
    assert runs[0].steps["C"].iloc[0] == 0.5 and runs[1].steps["C"].iloc[0] == 0.5
    assert runs[0].steps["C"].tolist() == runs[1].steps["C"].tolist()
    assert (runs[0].steps["C"].iloc[1:].to_numpy() == runs[0].steps["C_next"].iloc[:-1].to_numpy()).all()


# ------------------------------------------------------------------ against Opacus
