"""FairDP (paper 002, reconstructed): the sensitivities of its three releases, the update's fixed point,
its guards, Eq. (4) against the registered claim's form, and its accounting.

Sensitivities are checked by brute force over neighbouring batches chosen by hypothesis: tiny, empty and
unequal groups, arbitrary current bounds per group, norms at and around the bounds, signed vector
gradients, add/remove/replace.
"""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings, strategies as st

from dpfair_analysis import data as datasets
from dpfair_analysis.gradients import clipped_sum
from dpfair_analysis.models import build_model, count_parameters
from dpfair_analysis.privacy.accounting import epsilon_from_event, poisson_gaussian_event
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.fairdp import FairDP, ShrinkOnlyWarning, fairdp_statistics, fairdp_update, \
    noise_coefficient, shrink_only_noise_multiplier, target_clipped_fraction, tau_eq4, tau_minimising_excess
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.training.policies import make_policy

from neighbours import neighbour_of

SETTINGS = settings(max_examples=300, deadline=None)
CAPS = [0.5, 5.0, 20.0]


@st.composite
def batch_and_neighbour(draw):
    """Rows (group, norm), per-group current bounds, and a neighbour by add, remove or replace."""
    k = draw(st.integers(1, 4))
    clips = draw(st.lists(st.sampled_from([1e-3, 0.5, 1.0, 7.0, 1e3]), min_size=k, max_size=k))
    # a row of group g has a norm at or around g's own bound
    row = st.integers(0, k - 1).flatmap(lambda g: st.tuples(st.just(g), st.sampled_from(
        [0.0, clips[g] / 2, clips[g], clips[g] * (1 + 1e-9), 3 * clips[g], 1e6])))
    rows = draw(st.lists(row, max_size=12))
    neighbour, kind = draw(neighbour_of(rows, row))
    return k, torch.tensor(clips, dtype=torch.float64), rows, neighbour, kind, draw(st.sampled_from(CAPS))


def stats(rows, k, clips, cap):
    group = torch.tensor([g for g, _ in rows], dtype=torch.long)
    norms = torch.tensor([n for _, n in rows], dtype=torch.float64)
    counts, excess = fairdp_statistics(norms, group, clips, n_groups=k, excess_cap=cap)
    return counts.flatten(), excess


@SETTINGS
@given(batch_and_neighbour())
def test_count_vector_moves_by_at_most_one(case):
    """(m_k, o_k)_k: one record adds 1 to exactly one entry (replace: sqrt(2) <= 2 x 1)."""
    k, clips, rows, neighbour, kind, cap = case
    distance = float((stats(rows, k, clips, cap)[0] - stats(neighbour, k, clips, cap)[0]).norm())
    assert distance <= (1.0 if kind != "replace" else math.sqrt(2)) + 1e-12
    if kind != "replace":
        assert distance == 1.0


@SETTINGS
@given(batch_and_neighbour())
def test_capped_excess_moves_by_at_most_the_cap(case):
    """(x_k)_k: one record adds min(||g||/C_k - 1, R)^+ in [0, R] to one entry (replace: <= 2R)."""
    k, clips, rows, neighbour, kind, cap = case
    distance = float((stats(rows, k, clips, cap)[1] - stats(neighbour, k, clips, cap)[1]).norm())
    assert distance <= (cap if kind != "replace" else 2 * cap) * (1 + 1e-12)


def test_capped_excess_bound_is_attained():
    counts, excess = fairdp_statistics(torch.tensor([1e6]), torch.tensor([0]), torch.tensor([1.0]), n_groups=1,
                                       excess_cap=5.0)
    assert float(excess[0]) == 5.0 and counts[:, 0].tolist() == [1.0, 0.0]


@SETTINGS
@given(batch_and_neighbour())
def test_the_policy_releases_exactly_these_statistics(case):
    """With negligible noise, the released record is the statistics above at the policy's current bounds."""
    k, clips, rows, _, _, cap = case
    policy = FairDP(1.0, 1.0, count_noise=1e-12, excess_noise=1e-13, dimension=10, learning_rate=0.1,
                    excess_cap=cap, min_clip=1e-4, max_clip=1e4)
    object.__setattr__(policy, "_clips", clips.clone())  # as if earlier steps had moved them there
    group = torch.tensor([g for g, _ in rows], dtype=torch.long)
    norms = torch.tensor([n for _, n in rows], dtype=torch.float64)
    decision = policy.decide(norms, group, n_groups=k, expected_batch_size=8, generator=torch.Generator())
    counts, excess = stats(rows, k, clips, cap)
    released = [decision.record[f"m[{j}]"] for j in range(k)] + [decision.record[f"o[{j}]"] for j in range(k)]
    assert released == pytest.approx(counts.tolist(), abs=1e-9)
    assert [decision.record[f"x[{j}]"] for j in range(k)] == pytest.approx(excess.tolist(), abs=1e-9)
    assert decision.bounds.tolist() == pytest.approx(clips[group].tolist())
    assert decision.noise_std == pytest.approx(float(clips.max()))


@st.composite
def vector_batch(draw):
    k = draw(st.integers(1, 4))
    n, d = draw(st.integers(1, 10)), draw(st.integers(1, 4))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2 ** 16)))
    scales = torch.tensor(draw(st.lists(st.sampled_from([0.0, 1e-3, 1.0, 1e4]), min_size=n, max_size=n)))
    grads = torch.randn(n, d, generator=g, dtype=torch.float64) * scales[:, None]
    group = torch.tensor(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    clips = torch.tensor(draw(st.lists(st.sampled_from([1e-3, 0.5, 3.0, 1e3]), min_size=k, max_size=k)),
                         dtype=torch.float64)
    return k, grads, group, clips


@SETTINGS
@given(vector_batch(), st.floats(0.3, 3.0))
def test_clipped_sum_moves_by_at_most_noise_over_sigma(case, sigma):
    """Removing any (signed, vector) gradient of any group moves the clipped sum by <= max_k C_k =
    noise_std / sigma; replacing it by another group's gradient by <= 2 max_k C_k."""
    k, grads, group, clips = case
    policy = FairDP(1.0, sigma, 10.0, 10.0, dimension=5, learning_rate=0.1, min_clip=1e-4, max_clip=1e4)
    object.__setattr__(policy, "_clips", clips.clone())
    decision = policy.decide(grads.norm(dim=1), group, n_groups=k, expected_batch_size=4,
                             generator=torch.Generator().manual_seed(0))
    limit = decision.noise_std / sigma
    full = clipped_sum({"w": grads}, decision.bounds)["w"]
    without = clipped_sum({"w": grads[:-1]}, decision.bounds[:-1])["w"]
    assert float((full - without).norm()) <= limit * (1 + 1e-9)
    swapped = group.clone()
    swapped[-1] = (group[-1] + 1) % k
    replaced = clipped_sum({"w": torch.cat([grads[:-1], grads[:1]])}, clips[swapped])["w"]
    assert float((full - replaced).norm()) <= 2 * limit * (1 + 1e-9)


finite = st.floats(-300, 300, allow_nan=False)


@SETTINGS
@given(st.lists(st.tuples(finite, finite, finite, st.sampled_from([1e-3, 0.5, 1.0, 50.0])), min_size=1, max_size=5),
       st.floats(1e-4, 1e3), st.floats(2.0, 10.0), st.sampled_from(CAPS), st.floats(0.01, 1.0))
def test_update_stays_finite_positive_and_in_range(cases, noise_coef, bias_coef, cap, clip_lr):
    counts = torch.tensor([[c[0] for c in cases], [c[1] for c in cases]], dtype=torch.float64)
    excess = torch.tensor([c[2] for c in cases], dtype=torch.float64)
    clips = torch.tensor([c[3] for c in cases], dtype=torch.float64)
    following, estimates, fires = fairdp_update(counts, excess, clips, bias_coef=bias_coef, noise_coef=noise_coef,
                                                excess_cap=cap, clip_lr=clip_lr, min_clip=1e-3, max_clip=50.0)
    assert torch.isfinite(following).all() and (following >= 1e-3).all() and (following <= 50.0).all()
    ratio = following / clips.clamp(1e-3, 50.0)
    assert (ratio <= math.exp(clip_lr) * (1 + 1e-12)).all() or (clips > 50).any()
    assert ((estimates["gamma"] > 0) & (estimates["gamma"] <= 1)).all()
    assert fires["empty_group"] == int((counts.sum(0) < 1).sum())


@st.composite
def norms_for_one_group(draw):
    n = draw(st.integers(2, 40))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2 ** 16)))
    return torch.exp(torch.randn(n, generator=g, dtype=torch.float64) * draw(st.floats(0.1, 2.0))), \
        draw(st.floats(0.05, 5.0))


def tau_with_fixed_grad(norms, clip, grad_norm, a, v):
    eta = float((norms - clip).clamp(min=0).mean())
    return a * grad_norm * eta + eta ** 2 + v * clip ** 2


@SETTINGS
@given(norms_for_one_group(), st.floats(2.0, 10.0), st.floats(1e-3, 50.0))
def test_step_direction_is_minus_the_sign_of_d_tau_d_c(case, a, v):
    """Noise-free, the step's sign (p - gamma) is minus the sign of d tau_k / d C (||grad f_k|| held at the
    upper bound C + eta used by the update), checked by central finite differences of Eq. (4)."""
    norms, clip = case
    assume(not bool(((norms - clip).abs() < 1e-3 * clip).any()))  # tau is not differentiable at a norm
    counts, excess = fairdp_statistics(norms, torch.zeros(len(norms), dtype=torch.long),
                                       torch.tensor([clip], dtype=torch.float64), n_groups=1, excess_cap=1e9)
    b = float(counts.sum())
    p, e = float(counts[0, 0]) / b, float(excess[0]) / b
    gamma = float(target_clipped_fraction(torch.tensor(e), bias_coef=a, noise_coef=v))
    grad_norm = clip * (1 + e)
    h = 1e-6 * clip
    derivative = (tau_with_fixed_grad(norms, clip + h, grad_norm, a, v)
                  - tau_with_fixed_grad(norms, clip - h, grad_norm, a, v)) / (2 * h)
    analytic = clip * (2 * v - p * (a * (1 + e) + 2 * e))
    assert derivative == pytest.approx(analytic, rel=1e-4, abs=1e-9)
    assume(abs(p - gamma) > 1e-9 and gamma < 1)
    assert np.sign(p - gamma) == -np.sign(derivative)


@SETTINGS
@given(st.integers(1, 10 ** 7), st.floats(1.0, 4096.0), st.floats(2.0, 50.0), st.floats(0.01, 100.0),
       st.lists(st.tuples(finite, finite, st.floats(0.0, 1e4), st.sampled_from([1e-3, 0.5, 1.0, 50.0])),
                min_size=1, max_size=5), st.floats(1.0, 100.0))
def test_above_the_shrink_only_sigma_every_target_is_one_and_no_bound_grows(dimension, batch, a, cap, cases, above):
    """At sigma >= sigma* (= b sqrt((a (1 + R) + 2 R) / (6 |1|))) gamma_k = 1 for every e_k in [0, R], and the
    update, fed any statistics (signed noisy counts, any excess), never raises a bound; just below sigma*
    the target at e_k = R is under 1, so sigma* is the threshold, not a bound on it."""
    sigma_star = shrink_only_noise_multiplier(dimension=dimension, batch_size=batch, bias_coef=a, excess_cap=cap)
    v = noise_coefficient(sigma_star * (1 + 1e-6) * above, dimension, batch)
    grid = torch.linspace(0.0, cap, 201, dtype=torch.float64)
    assert (target_clipped_fraction(grid, bias_coef=a, noise_coef=v) == 1.0).all()
    counts = torch.tensor([[c[0] for c in cases], [c[1] for c in cases]], dtype=torch.float64)
    excess = torch.tensor([c[2] for c in cases], dtype=torch.float64)
    clips = torch.tensor([c[3] for c in cases], dtype=torch.float64)
    following, _, _ = fairdp_update(counts, excess, clips, bias_coef=a, noise_coef=v, excess_cap=cap, clip_lr=0.05,
                                    min_clip=1e-3, max_clip=50.0)
    assert (following <= clips).all()
    below = noise_coefficient(sigma_star * (1 - 1e-4), dimension, batch)
    assert float(target_clipped_fraction(torch.tensor(cap, dtype=torch.float64), bias_coef=a, noise_coef=below)) < 1


@SETTINGS
@given(st.integers(1, 10 ** 7), st.floats(1.0, 4096.0), st.floats(2.0, 50.0), st.floats(0.01, 100.0),
       st.floats(1e-3, 1e3))
def test_the_cap_hides_taus_minimiser_exactly_when_sigma_is_past_the_shrink_only_sigma(dimension, batch, a, cap,
                                                                                       sigma):
    """R <= e* = (2V - a)/(a + 2) iff sigma >= sigma*, and at e = e* a fully clipped group is stationary
    (target gamma = 1 = its clipped fraction)."""
    sigma_star = shrink_only_noise_multiplier(dimension=dimension, batch_size=batch, bias_coef=a, excess_cap=cap)
    assume(abs(sigma / sigma_star - 1) > 1e-6)
    v = noise_coefficient(sigma, dimension, batch)
    e_star = tau_minimising_excess(bias_coef=a, noise_coef=v)
    assert (cap <= e_star) == (sigma >= sigma_star)
    if e_star > 0:
        at = float(2 * v / (a * (1 + e_star) + 2 * e_star))
        assert at == pytest.approx(1.0, rel=1e-9)


def _first_step_warnings(policy, batch_size):
    norms = torch.tensor([0.5, 3.0, 1.5], dtype=torch.float64)
    group = torch.tensor([0, 1, 1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy.decide(norms, group, n_groups=2, expected_batch_size=batch_size, generator=torch.Generator())
        policy.decide(norms, group, n_groups=2, expected_batch_size=batch_size, generator=torch.Generator())
    return [w for w in caught if issubclass(w.category, ShrinkOnlyWarning)]


@pytest.mark.parametrize("sigma, cap, warns", [(0.8, 5.0, False), (1.0, 5.0, True), (2.0, 5.0, True),
                                               (2.0, 50.0, False), (5.0, 50.0, True)])
def test_a_run_warns_once_when_its_cap_switches_the_bounds_update_off(sigma, cap, warns):
    """Full MNIST's CNN (431,080 parameters, b = 256, a = 4): sigma* = 0.93 at R = 5 and 2.78 at R = 50."""
    policy = FairDP(initial_clip=1.0, noise_multiplier=sigma, count_noise=1.0, excess_noise=1.0, dimension=431_080,
                    learning_rate=0.01, excess_cap=cap)
    caught = _first_step_warnings(policy.for_run(), 256)
    assert len(caught) == (1 if warns else 0)
    if warns:
        message = str(caught[0].message)
        e_star = (2 * noise_coefficient(sigma, 431_080, 256) - 4) / 6
        assert f"excess_cap {cap:g} <= {e_star:.3g}" in message and "sigma* = " in message


def test_tau_matches_the_registered_claims_form_of_eq4():
    """tau_eq4 is the same expression claim 002.eq4 checks (verify/claims/p002_fairdp.py), on the same inputs."""
    from dpfair_analysis.verify.claims.p002_fairdp import quadratic_step

    x = ([[3.0, -1.0], [0.5, 0.2], [-4.0, 2.0]], [0.3, -0.2, 0.0], 0.0, 0.5, 1.0, 1.0, True, [1.0, 1.0])
    r = quadratic_step(x)
    ours = tau_eq4(r["grad_norm"], r["eta"], 1.0, noise_multiplier=1.0, dimension=2, batch_size=3,
                   learning_rate=r["mu"], smoothness=r["L"])
    assert ours["tau"] == pytest.approx(r["tau"], rel=1e-12)
    assert ours["variance"] == pytest.approx(noise_coefficient(1.0, 2, 3))


@pytest.mark.parametrize("kwargs,name", [
    ({"dimension": 0}, "dimension"), ({"count_noise": 0.0}, "count_noise"), ({"excess_cap": -1.0}, "excess_cap"),
    ({"smoothing": 1.0}, "smoothing"), ({"min_clip": 2.0}, "min_clip"), ({"learning_rate": 0.0}, "learning_rate"),
])
def test_bad_settings_name_the_argument(kwargs, name):
    base = dict(initial_clip=1.0, noise_multiplier=1.0, count_noise=10.0, excess_noise=10.0, dimension=5,
                learning_rate=0.1)
    with pytest.raises(ValueError, match=name):
        FairDP(**{**base, **kwargs})


def test_make_policy_needs_the_model_dimension_and_step_size():
    with pytest.raises(ValueError, match="dimension"):
        make_policy("fairdp", clip_bound=1.0, noise_multiplier=1.0)


def test_minority_group_with_larger_norms_gets_the_larger_bound():
    """The mechanism's purpose: with exact statistics (tiny noise), a group whose gradients are 10x larger
    ends with a bound about 10x larger (both settle where their clipped fraction meets their target)."""
    g = torch.Generator().manual_seed(0)
    policy = FairDP(1.0, 1.0, 1e-6, 1e-6, dimension=2000, learning_rate=0.1, clip_lr=0.1, smoothing=0.0)
    group = torch.tensor([0] * 230 + [1] * 26)
    for _ in range(600):
        norms = torch.exp(torch.randn(256, generator=g, dtype=torch.float64) * 0.5) * torch.where(group == 1, 10.0,
                                                                                                   1.0)
        policy.decide(norms, group, n_groups=2, expected_batch_size=256, generator=g)
    clips = policy.current_clips(2)
    assert 5 < float(clips[1] / clips[0]) < 20


def test_run_is_accounted_with_the_joint_multiplier_and_runs_reset():
    """Epsilon recomputed from the ledger's events is the Poisson-sampled Gaussian of the joint multiplier
    (sigma_1^-2 + sigma_x^-2 + sigma^-2)^-1/2 over the steps run; a second run with the same object starts
    again at C_0 and repeats the first."""
    data = datasets.load("adult").subset(torch.arange(400))
    model = build_model("logreg", input_shape=(40,), n_classes=2, seed=0)
    policy = make_policy("fairdp", clip_bound=0.5, noise_multiplier=1.1, count_noise_ratio=9.0 / 1.1,
                         dimension=count_parameters(model), learning_rate=0.1)
    config = TrainConfig(epochs=2, batch_size=20, lr=0.1, delta=1e-5)
    runs = [train(build_model("logreg", input_shape=(40,), n_classes=2, seed=0), data, policy, config,
                  progress=False) for _ in range(2)]
    sigma = joint_noise_multiplier((9.0, 9.0, 1.1))
    expected = epsilon_from_event(poisson_gaussian_event(20 / 400, sigma, steps=len(runs[0].steps)), 1e-5)
    assert runs[0].ledger.epsilon(1e-5) == pytest.approx(expected, rel=1e-9)
    assert runs[0].epsilon == pytest.approx(expected, rel=1e-9)
    assert runs[0].steps["C[0]"].iloc[0] == 0.5 and runs[1].steps["C[0]"].iloc[0] == 0.5
    assert runs[0].steps[["C[0]", "C[1]"]].equals(runs[1].steps[["C[0]", "C[1]"]])
    assert runs[0].steps["C"].nunique() > 5  # the bounds moved
    assert (runs[0].steps["noise_std"] == 1.1 * runs[0].steps["C"]).all()


def test_a_nan_norm_counts_as_clipped_with_the_full_excess():
    """A sample whose norm is NaN (clip factor 0: left out of the sum) counts as clipped with excess R: finite
    statistics, each record's share within the stated sensitivity; a NaN here would have made every later bound
    NaN, and a NaN bound passed every sample whole."""
    norms = torch.tensor([0.5, 3.0, math.nan], dtype=torch.float64)
    counts, excess = fairdp_statistics(norms, torch.tensor([0, 0, 1]), torch.tensor([1.0, 1.0]), n_groups=2,
                                       excess_cap=4.0)
    assert counts.tolist() == [[1.0, 1.0], [1.0, 0.0]] and excess.tolist() == [2.0, 4.0]
