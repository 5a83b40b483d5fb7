"""Bounded adaptive clipping (Zhao et al. 2025): the bound never goes below C_LB, with C_LB = 0 it is Opt-Q draw for
draw, its ledger holds exactly the releases it made (the count and the sum, at every step), its options and flags
are checked at the boundary, and its audit's under-noised control is caught."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis import data as datasets
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import epsilon_from_event, poisson_gaussian_event
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training import methods
from dpfair_analysis.training.bounded_adaptive import BoundedAdaptive, bound_path, bounded_update
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.training.methods.bounded_adaptive import BoundedAdaptiveOptions
from dpfair_analysis.training.optq import OptQ
from dpfair_analysis.training.policies import make_policy


def _adult(n=400):
    return datasets.load("adult").subset(torch.arange(n))


def _run(policy, data, *, epochs=2, seed=0):
    config = TrainConfig(epochs=epochs, batch_size=20, lr=0.1, delta=1e-5, seed=seed)
    return train(build_model("logreg", input_shape=(data.X.shape[1],), n_classes=2, seed=0), data, policy, config,
                 progress=False)


@settings(max_examples=200, deadline=None)
@given(clip=st.floats(1e-6, 1e3), fraction=st.floats(0.0, 1.0), quantile=st.floats(0.01, 0.99),
       lr=st.floats(1e-3, 5.0), lower=st.floats(0.0, 1e3))
def test_the_update_is_the_geometric_one_floored_at_the_lower_bound(clip, fraction, quantile, lr, lower):
    following = bounded_update(clip, fraction, target_quantile=quantile, clip_lr=lr, lower_bound=lower)
    assert following == max(lower, clip * math.exp(-lr * (fraction - quantile)))
    assert following >= lower


@settings(max_examples=30, deadline=None)
@given(lower=st.floats(1e-3, 2.0), seed=st.integers(0, 2**31 - 1))
def test_the_bound_never_goes_below_the_lower_bound(lower, seed):
    """Norms far below every bound push b~ to 1 and C down at every step: it stops at C_LB and stays there."""
    g = torch.Generator().manual_seed(seed)
    policy = BoundedAdaptive(1.0, 1.0, count_noise=5.0, lower_bound=lower, clip_lr=1.0)
    bounds = []
    for _ in range(60):
        norms = torch.rand(50, generator=g, dtype=torch.float64) * 1e-4
        decision = policy.decide(norms, torch.zeros(50, dtype=torch.long), n_groups=1, expected_batch_size=50,
                                 generator=g)
        bounds += [decision.record["C"], decision.record["C_next"]]
        assert (decision.bounds == decision.record["C"]).all()
    assert min(bounds) >= lower
    assert bounds[-1] == lower  # reached: 60 steps of exp(-0.5) from 1 pass every lower bound >= 1e-3


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.floats(0.05, 0.95), st.floats(0.01, 1.0), st.floats(0.0, 3.0),
       st.floats(0.1, 20.0), st.integers(1, 60))
def test_the_expected_path_is_the_policys_bounds_without_count_noise(seed, quantile, lr, lower, initial, steps):
    """The whole population as the batch and sigma_b ~ 0: the policy clips to C_0, ..., C_{T-1} of
    :func:`bound_path` (what the diagnosis averages a short run over)."""
    g = torch.Generator().manual_seed(seed)
    norms = torch.rand(50, generator=g, dtype=torch.float64) * 10
    policy = BoundedAdaptive(initial, 1e-12, 1e-12, lower_bound=lower, target_quantile=quantile,
                             clip_lr=lr).for_run()
    used = []
    for _ in range(steps):
        used.append(policy.current_clip)
        policy.decide(norms, torch.zeros(50, dtype=torch.long), n_groups=1, expected_batch_size=50, generator=g)
    path = bound_path(norms, initial=initial, lower_bound=lower, target_quantile=quantile, clip_lr=lr,
                      count_threshold=1.0, steps=steps)
    assert torch.allclose(path, torch.tensor(used, dtype=torch.float64), rtol=1e-9)


def test_in_a_run_on_adult_the_bound_stays_above_it_where_opt_q_falls_below():
    data = _adult()
    bounded = _run(make_policy("boundedadaptive", clip_bound=0.5, noise_multiplier=1.0, min_clip=0.49,
                                   count_noise=1.0), data)
    unbounded = _run(make_policy("optq", clip_bound=0.5, noise_multiplier=1.0, count_noise=1.0), data)
    assert bounded.steps["C"].min() >= 0.49 and bounded.steps["C_next"].min() >= 0.49
    assert unbounded.steps["C"].min() < 0.49  # the bound binds in this setting
    assert (bounded.steps["C_next"] == 0.49).any()  # same draws as Opt-Q until Opt-Q's bound would fall below


def test_with_no_lower_bound_it_is_opt_q_step_for_step():
    """C_LB = 0 (kappa = 1, plain clipping): the same bounds, counts, noise and parameters as Opt-Q, same seed."""
    data = _adult()
    ours = _run(make_policy("boundedadaptive", clip_bound=0.5, noise_multiplier=1.1, min_clip=0.0, count_noise=3.0),
                data, seed=4)
    optq = _run(make_policy("optq", clip_bound=0.5, noise_multiplier=1.1, count_noise=3.0), data, seed=4)
    for column in ("C", "C_next", "unclipped_fraction", "centred_count", "noise_std", "batch_size"):
        assert ours.steps[column].tolist() == optq.steps[column].tolist(), column
    for a, b in zip(ours.model.parameters(), optq.model.parameters()):
        assert torch.equal(a, b)
    assert ours.epsilon == optq.epsilon


def test_policy_level_identity_with_opt_q_on_random_batches():
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    ours, theirs = BoundedAdaptive(0.2, 1.0, 4.0, lower_bound=0.0), OptQ(0.2, 1.0, 4.0)
    for i in range(200):
        norms = torch.exp(torch.randn(30, generator=torch.Generator().manual_seed(i)))
        a = ours.decide(norms, torch.zeros(30, dtype=torch.long), n_groups=1, expected_batch_size=30, generator=g1)
        b = theirs.decide(norms, torch.zeros(30, dtype=torch.long), n_groups=1, expected_batch_size=30, generator=g2)
        assert (a.record["C"], a.record["C_next"], a.noise_std, a.noise_multipliers) == (
            b.record["C"], b.record["C_next"], b.noise_std, b.noise_multipliers)


def test_the_ledger_holds_exactly_the_releases_made():
    """Each step released the noisy count (multiplier 2 sigma_b) and the noisy sum (sigma_z); the ledger's epsilon
    is those events' composition, which is DP-SGD's at the joint sigma (same q, same steps)."""
    data = _adult()
    result = _run(make_policy("boundedadaptive", clip_bound=0.5, noise_multiplier=1.1, min_clip=0.2,
                              count_noise=3.0), data)
    steps, q = len(result.steps), 20 / len(data)
    policy = BoundedAdaptive(0.5, 1.1, 3.0, lower_bound=0.2)
    count, gradient = policy.planned_noise_multipliers()
    assert count == 6.0 and joint_noise_multiplier([count, gradient]) == pytest.approx(1.1, rel=1e-12)
    expected = epsilon_from_event(poisson_gaussian_event(q, joint_noise_multiplier([count, gradient]), steps=steps),
                                  1e-5)
    assert result.ledger.epsilon(1e-5) == pytest.approx(expected, rel=1e-9)
    assert result.epsilon == pytest.approx(expected, rel=1e-9)
    # every step's record is what was released: the sum's noise is sigma_z C_t at that step's bound
    assert (result.steps["noise_std"] - gradient * result.steps["C"]).abs().max() < 1e-12
    assert policy.count_share == pytest.approx((1.1 / 6.0) ** 2)


def test_normalized_clipping_weights_by_one_over_c_and_noises_at_sigma_z():
    policy = BoundedAdaptive(0.5, 1.0, 3.0, lower_bound=0.1, normalize=True)
    norms = torch.tensor([0.1, 2.0, 5.0], dtype=torch.float64)
    decision = policy.decide(norms, torch.zeros(3, dtype=torch.long), n_groups=1, expected_batch_size=3,
                             generator=torch.Generator().manual_seed(0))
    assert decision.weights.tolist() == [2.0, 2.0, 2.0] and decision.record["weight"] == 2.0
    # one record contributes at most w C = 1; the noise is sigma_z x 1
    assert decision.noise_std == pytest.approx(policy.gradient_multiplier)


def test_count_threshold_counts_norms_up_to_kappa_c():
    policy = BoundedAdaptive(1.0, 1e-6, 1e-6, count_threshold=2.5)
    norms = torch.tensor([0.5, 2.4, 2.6, 10.0], dtype=torch.float64)
    _, noisy = policy.noisy_fraction(norms, 1.0, expected_batch_size=4, generator=torch.Generator())
    assert noisy == pytest.approx(2 - 0.5 * 4, abs=1e-5)


@pytest.mark.parametrize("kwargs,name", [
    ({"min_clip": -0.1}, "min_clip"), ({"min_clip": math.nan}, "min_clip"), ({"target_quantile": 1.0},
                                                                             "target_quantile"),
    ({"clip_lr": 0.0}, "clip_lr"), ({"initial_clip": 0.0}, "initial_clip"), ({"count_noise": -1.0}, "count_noise"),
    ({"count_threshold": 0.0}, "count_threshold"), ({"clipping": "auto"}, "clipping")])
def test_bad_options_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BoundedAdaptiveOptions(**kwargs)


def test_count_noise_below_half_sigma_is_refused():
    with pytest.raises(ValueError, match="count_noise"):
        make_policy("boundedadaptive", clip_bound=0.5, noise_multiplier=4.0, count_noise=1.0)


def test_defaults_and_flags():
    options = BoundedAdaptiveOptions()
    assert options.lower_bound(0.5) == 0.25 and options.start(0.5) == 0.5
    assert options.count_noise_std(batch_size=256, noise_multiplier=1.0) == 25.6
    assert options.count_noise_std(batch_size=4, noise_multiplier=1.0) == 1.0
    method = methods.get("boundedadaptive")
    assert method.equal_privacy and method.private
    assert method.canary({"C": 0.3, "weight": 1.0}, 0.5, group=1) == (0.3, 1.0)
    flags = {flag.flag: flag for flag in methods.option_flags()}
    assert {m for m, _ in flags["--target-quantile"].targets} == {"optq", "boundedadaptive"}
    parsed = methods.options_from_flags({"--min-clip": 0.0, "--bounded-clipping": "normalized"})
    assert parsed["boundedadaptive"] == BoundedAdaptiveOptions(min_clip=0.0, clipping="normalized")


def _view(steps, batch_size=256.0):
    from dpfair_analysis.training.methods.registry import DiagnosisView

    return DiagnosisView(clip_bound=0.5, noise_multiplier=1.0, batch_size=batch_size, sampling_rate=0.1,
                         learning_rate=0.1, group_sizes=torch.tensor([4.0]), n=4, dimension=3, steps=steps)


def test_the_diagnosis_step_is_dpsgd_at_the_bounded_quantile():
    method = methods.get("boundedadaptive")
    norms = torch.tensor([0.01, 0.02, 0.03, 2.0], dtype=torch.float64)
    sigma_z = (1.0 - (2 * 25.6) ** -2) ** -0.5  # the gradient's multiplier at sigma_b = 256 / 10
    bounds, coefficients, noise = method.diagnosis(BoundedAdaptiveOptions(), norms, torch.zeros(4, dtype=torch.long),
                                                   _view(None))
    assert bounds.tolist() == [0.25] * 4 and noise == pytest.approx(0.25 * sigma_z)  # median 0.025 < C_LB = 0.25
    assert coefficients.tolist() == pytest.approx([1.0, 1.0, 1.0, 0.125])
    bounds, _, _ = method.diagnosis(BoundedAdaptiveOptions(min_clip=0.0), norms, torch.zeros(4, dtype=torch.long),
                                    _view(None))
    assert bounds[0] == pytest.approx(0.025)


@pytest.mark.parametrize("clipping", ["plain", "normalized"])
@pytest.mark.parametrize("steps", [1, 12])
def test_the_diagnosis_of_a_t_step_run_averages_the_policys_step_over_its_path(steps, clipping):
    """c_i = mean over the run's steps of the policy's factor w_t min(1, C_t / ||g_i||) and the noise std the
    root mean square of sigma_z w_t C_t, C_t on the expected path from C_0 = C (a zero norm included)."""
    method = methods.get("boundedadaptive")
    norms = torch.tensor([0.0, 0.01, 0.02, 0.03, 2.0], dtype=torch.float64)
    options = BoundedAdaptiveOptions(clipping=clipping, min_clip=0.01)
    _, coefficients, noise = method.diagnosis(options, norms, torch.zeros(5, dtype=torch.long), _view(steps, 32.0))
    path = bound_path(norms, initial=0.5, lower_bound=0.01, target_quantile=0.5, clip_lr=0.2, count_threshold=1.0,
                      steps=steps)
    weights = 1.0 / path if clipping == "normalized" else torch.ones_like(path)
    factors = torch.stack([w * torch.where(norms > c, c / norms.clamp(min=1e-300), 1.0) for w, c in zip(weights, path)])
    sigma_z = (1.0 - (2 * 3.2) ** -2) ** -0.5  # sigma_b = 32 / 10
    assert torch.allclose(coefficients, factors.mean(0), rtol=1e-10)
    assert noise == pytest.approx(sigma_z * float((weights * path).pow(2).mean().sqrt()))
    if steps == 1:
        assert coefficients[-1] == pytest.approx(float(weights[0]) * 0.25)  # C_0 / ||g|| = 0.5 / 2


@pytest.mark.slow  # the default suite's cheaper check: tests/verify/test_sampled_audits.py (a tenth of the noise)
def test_the_audit_catches_the_under_noised_twin():
    from dpfair_analysis.verify.audits.trainers import audit_sampled

    result = audit_sampled("boundedadaptive@0.25", trials=150, seed=0)
    assert result["control"] and not result["consistent"] and result["as_expected"]
