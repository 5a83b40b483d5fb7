"""Tests of dpfair_analysis.privacy.individual (per-record, per-group privacy estimates of DP-SGD).

References are independent: dp_accounting's own RdpAccountant composing each record's per-step events, and the
toolkit's ledger epsilon of the real run. Property tests run at a short order list (fast integer orders); the
default orders are checked once on fixed inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpfair_analysis.data.synthetic import synthetic_groups
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import PAPER_RDP_ORDERS, AccountingSpec, dpsgd_epsilon
from dpfair_analysis.privacy.individual import MAX_MULTIPLIER, group_privacy, individual_privacy
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import TrainConfig, batch_indices, make_generators, train
from dpfair_analysis.training.norm_recorder import NormRecorder, SampledNorms, all_sample_norms

SHORT = AccountingSpec(orders=(2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0))
PROPS = settings(max_examples=30, deadline=None)

settings_st = st.tuples(st.sampled_from([0.01, 0.1, 0.5]), st.sampled_from([0.7, 1.0, 2.0]),
                        st.sampled_from([0.5, 1.0, 3.0]), st.sampled_from([None, 8, 64]))


@st.composite
def norm_matrices(draw):
    steps, n = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    values = st.floats(0.0, 5.0, allow_nan=False)
    return np.array(draw(st.lists(st.lists(values, min_size=n, max_size=n), min_size=steps, max_size=steps)))


def _estimate(norms, q, sigma, clip, resolution, delta=1e-5, accounting=SHORT, **kw):
    return individual_privacy(norms, clip=clip, noise_multiplier=sigma, sampling_rate=q, delta=delta,
                              accounting=accounting, resolution=resolution, **kw)


def _independent(norms_of_record, q, sigma, clip, delta, orders):
    """dp_accounting's own composition of one record's events: a sampled Gaussian of multiplier
    sigma C / min(norm, C) per step (nothing for a zero norm; multipliers capped at MAX_MULTIPLIER, as documented,
    where dp_accounting would overflow)."""
    acct = rdp_privacy_accountant.RdpAccountant(list(orders))
    for norm in norms_of_record:
        s = min(norm, clip) / clip
        if s > 0:
            s = max(s, min(1.0, sigma / MAX_MULTIPLIER))
            acct.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma / s)))
    return acct.get_epsilon(delta)


@PROPS
@given(norm_matrices(), settings_st)
def test_every_record_at_most_the_run_epsilon_and_at_least_zero(norms, setting):
    q, sigma, clip, resolution = setting
    result = _estimate(norms, q, sigma, clip, resolution)
    assert np.all(result.epsilons >= 0)
    assert np.all(result.epsilons <= result.run_epsilon * (1 + 1e-12))
    run = dpsgd_epsilon(n=1000, batch_size=round(q * 1000), noise_multiplier=sigma, delta=1e-5,
                        steps=len(norms), accounting=SHORT)
    assert result.run_epsilon == pytest.approx(run, rel=1e-12)
    at_clip = np.all(norms >= clip, axis=0)
    np.testing.assert_array_equal(result.worst_case, at_clip)
    np.testing.assert_allclose(result.epsilons[at_clip], run, rtol=1e-12)
    assert np.all(result.epsilons[np.all(norms == 0, axis=0)] == 0)


@PROPS
@given(norm_matrices(), settings_st, st.data())
def test_monotone_in_each_steps_norm(norms, setting, data):
    q, sigma, clip, resolution = setting
    t = data.draw(st.integers(0, norms.shape[0] - 1))
    i = data.draw(st.integers(0, norms.shape[1] - 1))
    larger = norms.copy()
    larger[t, i] += data.draw(st.floats(0.0, 3.0, allow_nan=False))
    before, after = _estimate(norms, q, sigma, clip, resolution), _estimate(larger, q, sigma, clip, resolution)
    assert after.epsilons[i] >= before.epsilons[i]
    others = np.arange(norms.shape[1]) != i
    np.testing.assert_array_equal(after.epsilons[others], before.epsilons[others])


@PROPS
@given(norm_matrices(), settings_st)
@example(np.array([[1.0], [3e-293], [5e-324]]), (0.5, 0.7, 0.5, None))  # s^2 underflows: still above zero
def test_exact_mode_equals_an_independent_composition_and_the_grid_is_above_it(norms, setting):
    q, sigma, clip, resolution = setting
    exact = _estimate(norms, q, sigma, clip, None)
    for i in range(norms.shape[1]):
        reference = _independent(norms[:, i], q, sigma, clip, 1e-5, SHORT.orders)
        assert exact.epsilons[i] == pytest.approx(reference, rel=1e-9, abs=1e-12)
    grid = _estimate(norms, q, sigma, clip, resolution or 8)
    assert np.all(grid.epsilons >= exact.epsilons - 1e-12)


def test_worst_case_equals_the_run_at_the_toolkits_default_and_classic_accounting():
    norms = np.full((40, 3), 2.0)
    norms[:, 2] = 0.0
    for spec in (AccountingSpec(), AccountingSpec(conversion="classic")):
        result = _estimate(norms, 0.02, 1.1, 1.0, 4, delta=1e-6, accounting=spec)
        run = dpsgd_epsilon(n=1000, batch_size=20, noise_multiplier=1.1, delta=1e-6, steps=40, accounting=spec)
        assert result.run_epsilon == pytest.approx(run, rel=1e-12)
        np.testing.assert_allclose(result.epsilons, [run, run, 0.0], rtol=1e-12)
        np.testing.assert_array_equal(result.worst_case, [True, True, False])


def test_grid_error_against_exact_curves():
    """The default grid (K = 128, uniform in s^2) against each distinct value's own curve, at the papers' orders
    (the default orders' 128..1024 cost 20 ms a curve): measured (0.15% at most, 0.04% on average,
    on these norms), and bounded by the per-step rounding of s^2 up to k/K (RDP close to linear in s^2)."""
    rng = np.random.default_rng(0)
    norms = rng.uniform(0.0, 1.3, size=(6, 5))
    spec = AccountingSpec(orders=PAPER_RDP_ORDERS)
    exact = _estimate(norms, 0.01, 1.0, 1.0, None, accounting=spec)
    grid = _estimate(norms, 0.01, 1.0, 1.0, 128, accounting=spec)
    assert np.all(grid.epsilons >= exact.epsilons - 1e-12)
    error = grid.epsilons / exact.epsilons - 1
    print(f"grid K=128 against exact: max relative error {error.max():.2e}, mean {error.mean():.2e}")
    assert error.max() < 0.01


def test_repeats_and_streamed_rows_equal_the_expanded_matrix():
    rng = np.random.default_rng(1)
    checkpoints = rng.uniform(0.0, 2.0, size=(3, 4))
    repeats = [2, 1, 3]
    expanded = np.repeat(checkpoints, repeats, axis=0)
    full = _estimate(expanded, 0.1, 1.0, 1.0, 16)
    held = _estimate(checkpoints, 0.1, 1.0, 1.0, 16, repeats=repeats)
    streamed = _estimate(iter(list(expanded)), 0.1, 1.0, 1.0, 16)
    for other in (held, streamed):
        np.testing.assert_array_equal(other.epsilons, full.epsilons)
        np.testing.assert_array_equal(other.worst_case, full.worst_case)
        assert other.steps == full.steps == 6
    exact_held = _estimate(checkpoints, 0.1, 1.0, 1.0, None, repeats=repeats)
    np.testing.assert_allclose(exact_held.epsilons, _estimate(expanded, 0.1, 1.0, 1.0, None).epsilons, rtol=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    ({"accounting": AccountingSpec(accountant="pld")}, "accountant='rdp'"),
    ({"accounting": AccountingSpec(neighboring="replace_one")}, "add_remove"),
    ({"resolution": 0}, "resolution"),
    ({"clip": -1.0}, "clip"),
    ({"repeats": [1]}, "repeats"),
])
def test_bad_arguments_are_refused_by_name(kwargs, match):
    args = {"clip": 1.0, "noise_multiplier": 1.0, "sampling_rate": 0.1, "delta": 1e-5, "accounting": SHORT,
            "resolution": 8, **kwargs}
    with pytest.raises(ValueError, match=match):
        individual_privacy(np.ones((2, 3)), **args)


@pytest.mark.parametrize("norms, match", [(np.ones(3), "shape"), (-np.ones((2, 2)), ">= 0"),
                                          (np.full((2, 2), np.nan), "finite"), (np.zeros((0, 2)), "at least one"),
                                          ([np.ones(2), np.ones(3)], "shape")])
def test_bad_norms_are_refused(norms, match):
    with pytest.raises(ValueError, match=match):
        _estimate(norms, 0.1, 1.0, 1.0, 8)


def test_group_privacy_is_the_per_group_distribution():
    norms = np.array([[2.0, 0.1, 0.5, 0.0], [2.0, 0.2, 0.6, 0.0]])
    result = _estimate(norms, 0.1, 1.0, 1.0, 16)
    frame = group_privacy(result, np.array([0, 0, 1, 1]), group_names=["a", "b"], quantiles=(0.5,))
    table = frame.pivot(index="group", columns="metric", values="value")
    eps = result.epsilons
    assert table.loc["a", "mean"] == pytest.approx(eps[:2].mean())
    assert table.loc["b", "max"] == pytest.approx(eps[2:].max())
    assert table.loc["all", "q50"] == pytest.approx(np.median(eps))
    assert table.loc["a", "worst_case_share"] == 0.5 and table.loc["b", "worst_case_share"] == 0.0
    assert table.loc["a", "mean_over_run"] == pytest.approx(eps[:2].mean() / result.run_epsilon)
    assert table.loc["all", "n"] == 4
    assert frame.attrs["run_epsilon"] == result.run_epsilon and "not" in frame.attrs["what"]
    bare = group_privacy(eps, ["x", "y", "x", "y"])
    assert set(bare["group"]) == {"all", "x", "y"} and "worst_case_share" not in set(bare["metric"])
    with pytest.raises(ValueError, match="one group per record"):
        group_privacy(result, [0, 1])


# ---------------------------------------------------------------------------------- the recorder in a real run


def _run(recorder=None, *, seed=3, steps=12, model="logreg"):
    data = synthetic_groups(sizes=(120, 40), dim=4, seed=0)
    model = build_model(model, input_shape=(4,), n_classes=2, seed=0, l2=0.01, hidden=(8,))
    config = TrainConfig(epochs=100, batch_size=16, lr=0.5, seed=seed, max_steps=steps)
    policy = UniformClipping(clip_bound=0.5, noise_multiplier=1.0)
    result = train(model, data, policy, config, progress=False, callbacks=[] if recorder is None else [recorder])
    return data, model, result


@pytest.mark.parametrize("name", ["logreg", "mlp"])
def test_the_recorder_changes_nothing_in_the_run_and_records_what_each_step_saw(name):
    data, plain_model, plain = _run(model=name)
    recorder = NormRecorder(data)
    _, model, result = _run(recorder, model=name)
    for p, r in zip(plain_model.parameters(), model.parameters()):
        assert torch.equal(p, r)
    assert plain.history.equals(result.history)
    assert recorder.steps == 12 and recorder.norms.shape == (12, len(data))
    np.testing.assert_array_equal(recorder.repeats, np.ones(12))
    # step t+1's batch: the recorded norms at theta_t are the norms the loop computed for it
    sampler, _ = make_generators(3, 2)
    batches = batch_indices(len(data), 16, sampler)
    seen = _norms_the_policy_saw(name)
    for t in range(12):
        index = next(batches).numpy()
        np.testing.assert_allclose(recorder.norms[t][index], seen[t], rtol=1e-5, atol=1e-7)


def test_the_sampled_norms_change_nothing_and_are_what_each_step_clipped():
    """SampledNorms: one pass at theta_0 (all_sample_norms) and, after that, the norms the policy itself saw for
    each step's batch -- no other gradient work; the run is unchanged."""
    data, plain_model, _ = _run()
    recorder = SampledNorms(data)
    model = build_model("logreg", input_shape=(4,), n_classes=2, seed=0, l2=0.01, hidden=(8,))
    train(model, data, UniformClipping(clip_bound=0.5, noise_multiplier=1.0),
          TrainConfig(epochs=100, batch_size=16, lr=0.5, seed=3, max_steps=12), progress=False,
          callbacks=[recorder], batch_observers=[recorder.observe])
    for p, r in zip(plain_model.parameters(), model.parameters()):
        assert torch.equal(p, r)
    first = build_model("logreg", input_shape=(4,), n_classes=2, seed=0, l2=0.01, hidden=(8,))
    np.testing.assert_array_equal(recorder.initial, all_sample_norms(first, data))
    steps, records, norms = recorder.updates
    sampler, _ = make_generators(3, 2)
    batches = batch_indices(len(data), 16, sampler)
    for t, seen in enumerate(_norms_the_policy_saw("logreg"), start=1):
        np.testing.assert_array_equal(records[steps == t], next(batches).numpy())
        np.testing.assert_array_equal(norms[steps == t], seen)
    with pytest.raises(ValueError, match="no norms yet"):
        _ = SampledNorms(data).updates


def _norms_the_policy_saw(name):
    seen = []

    class Spy(UniformClipping):
        def decide(self, norms, group, **kw):
            seen.append(norms.numpy().copy())
            return super().decide(norms, group, **kw)

    data = synthetic_groups(sizes=(120, 40), dim=4, seed=0)
    model = build_model(name, input_shape=(4,), n_classes=2, seed=0, l2=0.01, hidden=(8,))
    train(model, data, Spy(clip_bound=0.5, noise_multiplier=1.0),
          TrainConfig(epochs=100, batch_size=16, lr=0.5, seed=3, max_steps=12), progress=False)
    return seen


def test_a_run_worst_case_is_its_ledger_epsilon_and_same_seed_same_numbers():
    first, second = NormRecorder(synthetic_groups(sizes=(120, 40), dim=4, seed=0)), None
    data, _, result = _run(first)
    second = NormRecorder(data)
    _run(second)
    kwargs = {"clip": 0.5, "noise_multiplier": 1.0, "sampling_rate": 16 / len(data), "delta": 1e-6,
              "accounting": AccountingSpec(), "resolution": 4}
    a = individual_privacy(first.norms, repeats=first.repeats, **kwargs)
    b = individual_privacy(second.norms, repeats=second.repeats, **kwargs)
    np.testing.assert_array_equal(a.epsilons, b.epsilons)
    assert a.run_epsilon == pytest.approx(result.epsilon, rel=1e-12)
    assert np.all(a.epsilons <= result.epsilon * (1 + 1e-12))
    frame = group_privacy(a, data)
    assert set(frame["group"]) == {"all", *data.group_names}


def test_held_norms_against_every_step():
    """Checkpoints every k steps, norms held in between, against every step (the exact estimate): the
    measured error is small on this run and zero at k = 1."""
    data = synthetic_groups(sizes=(120, 40), dim=4, seed=0)
    recorders = {k: NormRecorder(data, every=k) for k in (1, 4)}
    recorders["known_T"] = NormRecorder(data, total_steps=12)
    model = build_model("logreg", input_shape=(4,), n_classes=2, seed=0, l2=0.01)
    train(model, data, UniformClipping(clip_bound=0.5, noise_multiplier=1.0),
          TrainConfig(epochs=100, batch_size=16, lr=0.5, seed=3, max_steps=12), progress=False,
          callbacks=list(recorders.values()))
    kwargs = {"clip": 0.5, "noise_multiplier": 1.0, "sampling_rate": 16 / 160, "delta": 1e-6, "accounting": SHORT,
              "resolution": 64}
    every = individual_privacy(recorders[1].norms, **kwargs).epsilons
    held = individual_privacy(recorders[4].norms, repeats=recorders[4].repeats, **kwargs).epsilons
    np.testing.assert_array_equal(recorders[4].repeats, [4, 4, 4])
    assert len(recorders[1]._checkpoints) == 13 and len(recorders["known_T"]._checkpoints) == 12  # t = T skipped
    np.testing.assert_array_equal(recorders["known_T"].norms, recorders[1].norms)
    np.testing.assert_array_equal(recorders[4].norms, recorders[1].norms[::4])
    error = np.abs(held - every) / every
    print(f"held every 4 steps against every step: max relative error {error.max():.3f}, mean {error.mean():.4f}")
    assert error.max() < 0.25


def test_all_sample_norms_in_chunks_and_a_subset():
    data = synthetic_groups(sizes=(50, 30), dim=3, seed=1)
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=0)
    whole = all_sample_norms(model, data)
    np.testing.assert_allclose(all_sample_norms(model, data, chunk_size=7), whole, rtol=1e-6)
    np.testing.assert_allclose(all_sample_norms(model, data, records=[3, 60]), whole[[3, 60]], rtol=1e-6)
    recorder = NormRecorder(data, records=[3, 60])
    np.testing.assert_array_equal(recorder.groups, data.group.numpy()[[3, 60]])
    with pytest.raises(ValueError, match="records"):
        NormRecorder(data, records=[80])


def test_the_histogram_entry_point_is_individual_privacy_on_the_same_bins():
    """individual_privacy_from_histogram on the grid histogram of some norms gives individual_privacy's epsilons
    and worst cases; kept curves of another shape, rows of different T, negative counts are refused."""
    from dpfair_analysis.privacy.individual import _grid_histogram, grid_curves, individual_privacy_from_histogram

    rng = np.random.default_rng(3)
    norms = rng.exponential(1.0, (6, 40))
    direct = _estimate(norms, 0.1, 1.0, 1.0, 16)
    counts, at_clip, _, _ = _grid_histogram(((row / 1.0, 1) for row in norms), 1.0, 16)
    kwargs = {"at_worst_case": at_clip, "noise_multiplier": 1.0, "sampling_rate": 0.1, "delta": 1e-5,
              "accounting": SHORT}
    via = individual_privacy_from_histogram(counts, **kwargs)
    np.testing.assert_allclose(via.epsilons, direct.epsilons, rtol=1e-12)
    np.testing.assert_array_equal(via.worst_case, direct.worst_case)
    assert via.run_epsilon == direct.run_epsilon
    kept = individual_privacy_from_histogram(counts, curves=grid_curves(0.1, 1.0, SHORT, 16), **kwargs)
    np.testing.assert_array_equal(kept.epsilons, via.epsilons)
    with pytest.raises(ValueError, match="curves must have shape"):
        individual_privacy_from_histogram(counts, curves=grid_curves(0.1, 1.0, SHORT, 8), **kwargs)
    uneven = counts.copy()
    uneven[0, 0] += 1
    with pytest.raises(ValueError, match="same number of steps"):
        individual_privacy_from_histogram(uneven, **kwargs)
    with pytest.raises(ValueError, match="non-negative integers"):
        individual_privacy_from_histogram(-counts, **kwargs)


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-4, 0.9), st.floats(0.3, 60.0), st.lists(st.sampled_from([1.5, 2.0, 2.5, 3.0, 7.3, 16.0, 64.0]),
                                                               min_size=1, max_size=4, unique=True))
@example(0.5, 0.3, [64.0, 2.5])  # infinite at order 64 in dp_accounting too
@example(1.0, 0.8, [1.5, 3.0])  # q = 1: dp_accounting's closed form
def test_the_vectorised_sampled_gaussian_rdp_is_dp_accountings(q, multiplier, orders):
    """grid_curves' arrays of dp_accounting's formulas (integer orders' binomial sum, fractional orders' erfc series
    stopped where dp_accounting stops) give dp_accounting's RDP within relative 1e-10 or absolute 1e-13."""
    from dpfair_analysis.privacy.individual import _curves, _sampled_gaussian_rdp

    orders = tuple(sorted(orders))
    fast = _sampled_gaussian_rdp(q, np.array([multiplier, 3 * multiplier]), orders)
    reference = np.stack([_curves(q, m, orders, np.array([1.0]))[0] for m in (multiplier, 3 * multiplier)])
    _assert_rdp_close(fast, reference)


def _assert_rdp_close(fast, reference):
    """The same infinities; elsewhere within relative 1e-10 or absolute 1e-13."""
    np.testing.assert_array_equal(np.isinf(fast), np.isinf(reference))
    finite = np.isfinite(reference)
    assert np.all(np.abs(fast[finite] - reference[finite]) <= 1e-10 * np.abs(reference[finite]) + 1e-13)


def test_the_grid_curves_at_the_default_orders_are_dp_accountings_per_grid_point():
    """The grid's curves at dp_accounting's default orders (fractional 1.1..10.9, integer up to 1024) against one
    dp_accounting curve per grid point, as grid_curves computed them before: within relative 1e-10 / absolute
    1e-13, so each epsilon_i within relative 1e-9."""
    from dpfair_analysis.privacy.individual import _curves, grid_curves, individual_privacy_from_histogram

    rng = np.random.default_rng(5)
    for q, sigma in [(0.007, 0.7), (0.1, 1.1), (0.5, 3.0)]:
        grid = np.sqrt(np.arange(3) / 2)
        fast, reference = grid_curves(q, sigma, None, 2), _curves(q, sigma, AccountingSpec().resolved_orders, grid)
        _assert_rdp_close(fast, reference)
        counts = rng.multinomial(50, np.full(3, 1 / 3), size=8)
        kwargs = {"at_worst_case": counts[:, -1], "noise_multiplier": sigma, "sampling_rate": q, "delta": 1e-6}
        np.testing.assert_allclose(individual_privacy_from_histogram(counts, curves=fast, **kwargs).epsilons,
                                   individual_privacy_from_histogram(counts, curves=reference, **kwargs).epsilons,
                                   rtol=1e-9)
