"""DPSGD-Global-Adapt (Esipova et al. 2023): the step scales every gradient below Z by C / Z and clips the rest to
C, Z follows the noisy count above it, the ledger holds both releases of every step and its epsilon is their
composition computed independently, it trains on a small setting, its options are checked at the boundary and its
audit's under-noised control is caught."""

import math

import pytest
import torch
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis import data as datasets
from dpfair_analysis.gradients import clip_factors, clipped_sum
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import epsilon_from_event, poisson_gaussian_event
from dpfair_analysis.training import methods
from dpfair_analysis.training.global_adapt import GlobalAdapt, next_upper_bound, upper_bound_path
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.training.methods.global_adapt import GlobalAdaptOptions
from dpfair_analysis.training.policies import make_policy


def _adult(n=400):
    return datasets.load("adult").subset(torch.arange(n))


def _run(policy, data, *, epochs=2, batch_size=20, seed=0):
    config = TrainConfig(epochs=epochs, batch_size=batch_size, lr=0.1, delta=1e-5, seed=seed)
    return train(build_model("logreg", input_shape=(data.X.shape[1],), n_classes=2, seed=0), data, policy, config,
                 progress=False)


def _decide(policy, norms, seed=0):
    return policy.decide(norms, torch.zeros(len(norms), dtype=torch.long), n_groups=1,
                         expected_batch_size=len(norms), generator=torch.Generator().manual_seed(seed))


@settings(max_examples=100, deadline=None)
@given(norms=st.lists(st.floats(1e-6, 1e3), min_size=1, max_size=30), bound=st.floats(1e-3, 1e3),
       clip=st.floats(1e-3, 10.0))
def test_the_step_scales_below_z_by_c_over_z_and_clips_above_to_c(norms, bound, clip):
    """g^_i = (C/Z) g_i for ||g_i|| <= Z, C g_i / ||g_i|| above; no scaled gradient is longer than C."""
    norms = torch.tensor(norms, dtype=torch.float64)
    policy = GlobalAdapt(clip, 1.0, 10.0, initial_bound=bound)
    decision = _decide(policy, norms)
    grads = {"w": torch.diag(norms)}  # row i has norm ||g_i|| on its own coordinate
    scaled = clipped_sum(grads, decision.bounds, weights=decision.weights, norms=norms)["w"]
    expected = torch.where(norms <= bound, clip / bound * norms, torch.full_like(norms, clip))
    assert torch.allclose(scaled, expected, rtol=1e-12, atol=0)
    assert (scaled <= clip * (1 + 1e-12)).all()
    assert decision.noise_std == clip  # sigma C: the contribution bound is C whatever Z


@settings(max_examples=200, deadline=None)
@given(bound=st.floats(1e-6, 1e3), fraction=st.floats(-2.0, 3.0), target=st.floats(0.01, 0.99))
def test_the_update_is_z_times_exp_of_fraction_minus_target(bound, fraction, target):
    assert next_upper_bound(bound, fraction, target_fraction=target) == bound * math.exp(fraction - target)


def test_z_stays_within_its_public_range_where_the_weight_fits_float32():
    """Norms far below Z (then far above) at every step: Z stops at C / Z_RANGE (C Z_RANGE), C / Z stays finite."""
    from dpfair_analysis.training.global_adapt import Z_RANGE

    policy = GlobalAdapt(0.5, 1.0, 1e-3, initial_bound=1.0, target_fraction=0.5)
    g = torch.Generator().manual_seed(0)
    for scale, end in ((1e-30, 0.5 / Z_RANGE), (1e30, 0.5 * Z_RANGE)):
        for _ in range(200):
            norms = torch.full((4,), scale)
            decision = policy.decide(norms, torch.zeros(4, dtype=torch.long), n_groups=1, expected_batch_size=4,
                                     generator=g)
            assert torch.isfinite(decision.weights).all()
        assert policy.current_bound == pytest.approx(end)


def test_z_settles_where_the_target_fraction_of_norms_lies_above_it():
    """Fixed norms 1..100, eta_Z = 0.1, little count noise: Z ends near the 90th percentile (90)."""
    policy = GlobalAdapt(1.0, 1.0, 1e-3, initial_bound=1.0, target_fraction=0.1)
    norms = torch.arange(1, 101, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    for _ in range(2000):
        policy.decide(norms, torch.zeros(100, dtype=torch.long), n_groups=1, expected_batch_size=100, generator=g)
    assert 85 < policy.current_bound < 95


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.floats(0.05, 0.9), st.floats(0.1, 200.0), st.integers(1, 60))
def test_the_expected_path_is_the_policys_bounds_without_count_noise(seed, target, initial, steps):
    """The whole population as the batch and sigma_b ~ 0: the policy clips to Z_0, ..., Z_{T-1} of
    :func:`upper_bound_path` (what the diagnosis averages a short run over)."""
    g = torch.Generator().manual_seed(seed)
    norms = torch.rand(50, generator=g, dtype=torch.float64) * 10
    policy = GlobalAdapt(0.5, 1.0, 1e-12, initial_bound=initial, target_fraction=target).for_run()
    used = []
    for _ in range(steps):
        used.append(policy.current_bound)
        policy.decide(norms, torch.zeros(50, dtype=torch.long), n_groups=1, expected_batch_size=50, generator=g)
    path = upper_bound_path(norms, clip_bound=0.5, initial=initial, target_fraction=target, threshold=1.0,
                            steps=steps)
    assert torch.allclose(path, torch.tensor(used, dtype=torch.float64), rtol=1e-9)


def test_a_short_run_from_the_authors_z0_stays_far_above_the_fixed_point():
    """From Z_0 = 50 on norms ~1 log Z falls eta_Z = 0.1 a step: after 12 steps Z is still 50 e^-1.1 ~ 16.6,
    16x the fixed point (the 0.9-quantile, ~0.9), so the diagnosis of a 12-step run cannot take Z*."""
    norms = torch.linspace(0.0, 1.0, 101, dtype=torch.float64)
    path = upper_bound_path(norms, clip_bound=0.5, initial=50.0, target_fraction=0.1, threshold=1.0, steps=12)
    assert float(path[-1]) == pytest.approx(50 * math.exp(-1.1))
    assert float(path[-1]) > 16 * float(torch.quantile(norms, 0.9))


def test_it_trains_on_a_small_setting():
    data = _adult()
    result = _run(make_policy("globaladapt", clip_bound=0.5, noise_multiplier=1.0), data, epochs=4)
    accuracy = result.history.query("split == 'train' and group == 'all' and metric == 'accuracy'")["value"]
    assert accuracy.iloc[-1] > 0.7  # the label's majority share in these rows is ~0.76; a constant model gets it
    assert result.steps["Z"].iloc[-1] < 50.0  # Z moved down from Z_0 towards the norms
    assert (result.steps["weight"] == 0.5 / result.steps["Z"]).all()


def test_the_ledger_holds_both_releases_and_its_epsilon_is_their_composition():
    """Each step released the count (multiplier sigma_b) and the sum (sigma) on the same sampled batch: one
    sampled Gaussian at (sigma^-2 + sigma_b^-2)^-1/2, written out here; above DP-SGD's at sigma, and above the
    authors' accounting, which composes the two releases as separately sampled events: one coin decides whether a
    record is in both, so they leak together and the separate composition under-counts."""
    data = _adult()
    sigma, sigma_b = 1.1, 3.0
    result = _run(make_policy("globaladapt", clip_bound=0.5, noise_multiplier=sigma, count_noise=sigma_b), data)
    steps, q = len(result.steps), 20 / len(data)
    joint = (sigma ** -2 + sigma_b ** -2) ** -0.5
    expected = epsilon_from_event(poisson_gaussian_event(q, joint, steps=steps), 1e-5)
    assert result.epsilon == pytest.approx(expected, rel=1e-9)
    assert result.ledger.epsilon(1e-5) == pytest.approx(expected, rel=1e-9)
    dpsgd = epsilon_from_event(poisson_gaussian_event(q, sigma, steps=steps), 1e-5)
    separate = epsilon_from_event(dp_event.ComposedDpEvent([poisson_gaussian_event(q, sigma_b, steps=steps),
                                                            poisson_gaussian_event(q, sigma, steps=steps)]), 1e-5)
    assert dpsgd < result.epsilon and separate < result.epsilon


def test_on_full_batches_the_epsilon_is_the_rdp_composition_of_the_two_gaussians():
    """q = 1 (every row in every batch): the ledger's epsilon equals dp_accounting's RDP composition of the
    count's Gaussian and the sum's Gaussian, each composed over the steps -- an accountant fed the two releases
    separately, not through the joint multiplier."""
    data = _adult(60)
    sigma, sigma_b = 1.3, 2.0
    result = _run(make_policy("globaladapt", clip_bound=0.5, noise_multiplier=sigma, count_noise=sigma_b), data,
                  batch_size=60)
    steps = len(result.steps)
    accountant = rdp.RdpAccountant()
    accountant.compose(dp_event.GaussianDpEvent(sigma_b), steps)
    accountant.compose(dp_event.GaussianDpEvent(sigma), steps)
    assert result.epsilon == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-6)


def test_every_step_noises_the_sum_at_sigma_c_and_scales_by_c_over_z():
    data = _adult()
    result = _run(make_policy("globaladapt", clip_bound=0.5, noise_multiplier=1.2, count_noise=4.0), data)
    assert (result.steps["noise_std"] == 1.2 * 0.5).all()
    following = result.steps["Z"].iloc[1:].to_numpy()
    assert (following == result.steps["Z_next"].iloc[:-1].to_numpy()).all()  # Z_{t+1} is the step's Z_next


def test_same_seed_same_run():
    data = _adult(200)
    a = _run(make_policy("globaladapt", clip_bound=0.5, noise_multiplier=1.0), data, seed=3)
    b = _run(make_policy("globaladapt", clip_bound=0.5, noise_multiplier=1.0), data, seed=3)
    assert a.steps["Z"].tolist() == b.steps["Z"].tolist()
    for x, y in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(x, y)


@pytest.mark.parametrize("kwargs,name", [
    ({"initial_bound": 0.0}, "initial_bound"), ({"target_fraction": 1.0}, "target_fraction"),
    ({"target_fraction": 0.0}, "target_fraction"), ({"count_noise": -1.0}, "count_noise"),
    ({"threshold": math.nan}, "threshold")])
def test_bad_options_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        GlobalAdaptOptions(**kwargs)


def test_defaults_flags_and_canary_rule():
    options = GlobalAdaptOptions()
    assert (options.initial_bound, options.target_fraction, options.count_noise, options.threshold) == (
        50.0, 0.1, 10.0, 1.0)
    method = methods.get("globaladapt")
    assert method.equal_privacy and method.private
    assert method.canary({"Z": 4.0, "weight": 0.125}, 0.5, group=0) == (4.0, 0.125)
    parsed = methods.options_from_flags({"--upper-bound-target": 0.2, "--initial-upper-bound": 5.0})
    assert parsed["globaladapt"] == GlobalAdaptOptions(target_fraction=0.2, initial_bound=5.0)


def _view(steps):
    from dpfair_analysis.training.methods.registry import DiagnosisView

    return DiagnosisView(clip_bound=0.5, noise_multiplier=1.0, batch_size=10.0, sampling_rate=1.0, learning_rate=0.1,
                         group_sizes=torch.tensor([10.0]), n=10, dimension=3, steps=steps)


def test_the_diagnosis_step_is_at_the_fixed_point_of_z():
    method = methods.get("globaladapt")
    norms = torch.arange(1, 11, dtype=torch.float64)
    bounds, coefficients, noise = method.diagnosis(GlobalAdaptOptions(), norms, torch.zeros(10, dtype=torch.long),
                                                   _view(None))
    z = float(torch.quantile(norms, 0.9))
    assert bounds.tolist() == [z] * 10 and noise == 0.5
    assert (coefficients * norms).max() <= 0.5 + 1e-12  # no contribution above C
    assert coefficients[0] == pytest.approx(0.5 / z)


@pytest.mark.parametrize("steps", [1, 12, 400])
def test_the_diagnosis_of_a_t_step_run_averages_the_policys_factors_over_its_path(steps):
    """c_i = mean over the run's steps of the policy's own factor (C / Z_t) min(1, Z_t / ||g_i||), Z_t on the
    expected path from Z_0 = 50 (a zero norm included); after 400 steps Z has settled and the factor is near the
    fixed point's."""
    method = methods.get("globaladapt")
    norms = torch.cat([torch.zeros(1, dtype=torch.float64), torch.arange(1, 10, dtype=torch.float64)])
    options = GlobalAdaptOptions()
    _, coefficients, noise = method.diagnosis(options, norms, torch.zeros(10, dtype=torch.long), _view(steps))
    path = upper_bound_path(norms, clip_bound=0.5, initial=50.0, target_fraction=0.1, threshold=1.0, steps=steps)
    policy_factors = torch.stack([(0.5 / z) * clip_factors(norms, torch.full_like(norms, float(z))) for z in path])
    assert torch.allclose(coefficients, policy_factors.mean(0), rtol=1e-10) and noise == 0.5
    if steps == 1:
        assert coefficients.tolist() == pytest.approx([0.01] * 10)  # C / Z_0: nothing above Z_0 = 50
    if steps == 400:
        _, settled, _ = method.diagnosis(options, norms, torch.zeros(10, dtype=torch.long), _view(None))
        assert torch.allclose(coefficients, settled, rtol=0.15)


@pytest.mark.slow  # the default suite's cheaper check: tests/verify/test_sampled_audits.py (a tenth of the noise)
def test_the_audit_catches_the_under_noised_twin():
    from dpfair_analysis.verify.audits.trainers import audit_sampled

    result = audit_sampled("globaladapt@0.25", trials=150, seed=0)
    assert result["control"] and not result["consistent"] and result["as_expected"]
