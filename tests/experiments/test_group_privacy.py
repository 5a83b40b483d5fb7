"""Tests of dpfair_analysis.experiments.group_privacy: each group's per-record epsilon_i beside its accuracy cost,
for DP-SGD and the group-bound methods (DPSGD-F, FairDP) -- issue 52.3."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis.experiments.compare import CompareConfig, _run_spec, load_data, split_for_seed
from dpfair_analysis.experiments.group_privacy import GROUP_PRIVACY_METHODS, GroupPrivacyResult, _account, \
    _bin_floors, _bins_at_changes, _bins_every_step, describe_group_privacy, group_privacy_frames, group_privacy_run, \
    nearest_sample_steps, record_sensitivities, sampled_sensitivity_histogram
from dpfair_analysis.privacy.accounting import AccountingSpec
from dpfair_analysis.training.loop import schedule, train
from dpfair_analysis.training.norm_recorder import NormRecorder


#: integer Renyi orders only: dp_accounting's fractional orders cost ~0.1 s per curve at these sampling rates
ORDERS = tuple(float(a) for a in range(2, 65))


def tiny(method: str = "dpsgdf") -> CompareConfig:
    """Synthetic groups of 90 and 30 rows, logistic regression, b = 16, 1 epoch (seconds)."""
    from dpfair_analysis.privacy.accounting import AccountingSpec
    from dpfair_analysis.training.loop import TrainConfig

    return CompareConfig(dataset="synthetic", data_options={"sizes": (90, 30), "dim": 4, "seed": 0},
                         methods=("sgd", method), clip_bound=0.3, seeds=(0,),
                         train=TrainConfig(epochs=1, batch_size=16, accounting=AccountingSpec(orders=ORDERS)))


def test_sensitivity_of_plain_dpsgd_is_the_clipped_norm_over_c():
    norms = np.array([0.0, 0.1, 0.5, 0.7])
    s = record_sensitivities(norms, np.full(4, 0.5), reference=0.5, noise_multiplier=1.3)
    np.testing.assert_allclose(s, [0.0, 0.2, 1.0, 1.0])
    assert s[2] == 1.0 and s[3] == 1.0  # exactly: these records are at the worst case


def test_sensitivity_gives_each_records_step_multiplier():
    """sigma_J / s' is the multiplier of the record's step: 1/m^2 = sum_a sigma_a^-2 + (min(g, C_k)/R)^2 sigma^-2."""
    rng = np.random.default_rng(0)
    norms, bounds = rng.uniform(0, 2, 50), rng.choice([0.4, 0.9, 1.2], 50)
    sigma, others = 0.8, (8.0, 3.0)
    s = record_sensitivities(norms, bounds, reference=1.2, noise_multiplier=sigma, other_multipliers=others)
    joint = (sigma ** -2 + sum(o ** -2 for o in others)) ** -0.5
    expected = sum(o ** -2 for o in others) + (np.minimum(norms, bounds) / 1.2) ** 2 / sigma ** 2
    np.testing.assert_allclose((s / joint) ** 2, expected, rtol=1e-12)
    assert np.all(s <= 1.0) and np.all(s > 0)  # a count is charged whatever the gradient
    at_largest = (bounds == 1.2) & (norms >= 1.2)
    assert at_largest.any() and np.all(s[at_largest] == 1.0) and np.all(s[~at_largest] < 1.0)


def test_sensitivity_is_monotone_in_the_norm_and_the_bound():
    norms = np.linspace(0, 2, 41)
    s = record_sensitivities(norms, np.full(41, 0.7), reference=1.0, noise_multiplier=1.0, other_multipliers=(10.0,))
    assert np.all(np.diff(s) >= 0)
    higher = record_sensitivities(norms, np.full(41, 0.9), reference=1.0, noise_multiplier=1.0,
                                  other_multipliers=(10.0,))
    assert np.all(higher >= s)


def _recorded(method: str):
    config = tiny(method)
    full, official = load_data(config)
    train_data, test_data = split_for_seed(config, full, official, seed=0)
    spec = _run_spec(config, method, train_data, test_data, seed=0)
    steps, _ = schedule(len(train_data), spec.config)
    recorder = NormRecorder(train_data, every=1, total_steps=steps)
    result = train(spec.model, spec.train_data, spec.policy, spec.config, progress=False, callbacks=[recorder])
    return spec, recorder, result, len(train_data)


@pytest.mark.parametrize("method", GROUP_PRIVACY_METHODS)
def test_each_records_epsilon_agrees_with_an_independent_composition_of_its_steps(method):
    """epsilon_i (grid K = 64, rounded up) is at least, and within 5% of, dp_accounting's RDP composition of the
    record's own steps, each a sampled Gaussian of multiplier (sum_a sigma_a^-2 + (min(g, C_k)/max_j C_j)^2
    sigma^-2)^(-1/2) from the step's released bounds; the worst case is the run's ledger epsilon."""
    spec, recorder, result, n = _recorded(method)
    q, delta = spec.config.batch_size / n, spec.config.delta
    estimate = _account(recorder, result.steps, spec.policy, sampling_rate=q, delta=delta,
                        accounting=spec.config.accounting, resolution=64)
    assert estimate.run_epsilon == pytest.approx(result.epsilon, rel=1e-9)
    assert np.all(estimate.epsilons <= result.epsilon * (1 + 1e-9))
    sigma = spec.policy.noise_multiplier
    others = [m for m in spec.policy.planned_noise_multipliers()]
    others.remove(sigma)
    groups = recorder.groups
    columns = [f"C[{k}]" for k in range(2)]
    bounds = result.steps[columns].to_numpy() if columns[0] in result.steps else \
        np.full((len(result.steps), 2), spec.policy.clip_bound)
    orders = spec.config.accounting.resolved_orders
    for i in (0, 5, n - 1):
        accountant = rdp_privacy_accountant.RdpAccountant(list(orders))
        for t in range(len(result.steps)):
            clipped = min(recorder.norms[t, i], bounds[t, groups[i]]) / bounds[t].max()
            precision = sum(o ** -2 for o in others) + clipped ** 2 / sigma ** 2
            if precision > 0:
                accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(precision ** -0.5)))
        independent = accountant.get_epsilon(delta)
        assert independent <= estimate.epsilons[i] * (1 + 1e-9) + 1e-12
        assert estimate.epsilons[i] <= 1.05 * independent + 1e-9


def test_group_privacy_run_sets_each_groups_epsilon_beside_its_cost():
    result = group_privacy_run(tiny("dpsgdf"), "dpsgdf", resolution=16)
    assert isinstance(result, GroupPrivacyResult)
    table = result.table
    assert list(table.index) == ["all", "0", "1"] or table.index[0] == "all"
    np.testing.assert_allclose(table["cost"], table["accuracy"] - table["accuracy_sgd"])
    assert (table["max"] <= result.run_epsilon * (1 + 1e-6)).all()
    assert (table["q10"] <= table["q50"]).all() and (table["q50"] <= table["q90"]).all()
    assert table.loc["all", "n_train"] == table.drop(index="all")["n_train"].sum() == len(result.epsilons)
    lines = describe_group_privacy(result)
    spends = table.drop(index="all")["mean"].idxmax()
    assert lines[0].startswith(f"{spends} spends the most privacy") or lines[0].startswith("every group")
    assert "not guarantees" in lines[-1]
    payload = result.to_json()
    assert payload["summary"] == lines and len(payload["groups"]) == 3
    epsilons, frame = group_privacy_frames([result])
    assert set(epsilons["method"]) == {"dpsgdf"} and "run_epsilon" in frame


def test_the_description_follows_the_numbers():
    """The sentence relating accuracy and privacy is chosen by the table, not written beforehand."""
    result = group_privacy_run(tiny("dpsgd"), "dpsgd", resolution=8)
    table = result.table.copy()
    table["mean"] = [2.0, 3.0, 1.0]
    table["cost"] = [-0.1, -0.2, -0.05]
    same = describe_group_privacy(replace(result, table=table))
    assert "also spends the most privacy" in same[1]
    table["cost"] = [-0.1, -0.05, -0.2]
    other = describe_group_privacy(replace(result, table=table))
    assert "spends the least privacy" in other[1]
    table["mean"] = [2.0, 2.0, 2.0]
    assert "every group spends the same" in describe_group_privacy(replace(result, table=table))[0]


def test_methods_without_group_bounds_are_refused():
    with pytest.raises(ValueError, match="method must be one of"):
        group_privacy_run(tiny("naive"), "naive")


@pytest.mark.parametrize("others", [(), (10.0,), (5.0, 2.0)])
def test_the_range_histogram_is_the_step_by_step_histogram_of_the_sensitivities(others):
    """sensitivity_histogram (binary searches per step, difference arrays per checkpoint) bins every record at every
    step exactly as rounding record_sensitivities up to the grid step by step does (individual_privacy's own
    binning), with held norms, group bounds that move each step, zero norms, and norms at the bounds."""
    from dpfair_analysis.experiments.group_privacy import sensitivity_histogram
    from dpfair_analysis.privacy.individual import _grid_histogram

    rng = np.random.default_rng(len(others))
    n, repeats, groups = 200, np.array([3, 1, 4]), rng.integers(0, 3, 200)
    norms = rng.exponential(0.6, (3, n))
    norms[:, :5] = 0.0
    T = int(repeats.sum())
    bounds = rng.uniform(0.2, 1.0, (T, 3))
    bounds[2] = 0.5  # a step with one bound for every group
    reference = bounds.max(axis=1)
    norms[0, 5:10] = bounds[0, groups[5:10]]  # at their bound on the first step
    checkpoint = np.repeat(np.arange(3), repeats)
    rows = ((record_sensitivities(norms[checkpoint[t]], bounds[t][groups], reference=reference[t],
                                  noise_multiplier=1.1, other_multipliers=others), 1) for t in range(T))
    expected, expected_worst, _, _ = _grid_histogram(rows, 1.0, 32)
    counts, worst = sensitivity_histogram(norms, repeats, groups, bounds, reference, noise_multiplier=1.1,
                                          other_multipliers=others, resolution=32)
    np.testing.assert_array_equal(worst, expected_worst)
    np.testing.assert_array_equal(counts, expected)
    if not others:
        assert (counts[:5, 0] == T).all()  # a zero gradient spends nothing


def test_the_grid_curves_come_from_the_cache_when_kept(tmp_path):
    """A second run at the same q and joint multiplier reads the grid's RDP curves from the run cache; the same
    epsilons either way."""
    from dpfair_analysis.experiments.cache import RunCache

    cache = RunCache(tmp_path)
    first = group_privacy_run(tiny("dpsgd"), "dpsgd", resolution=8, cache=cache)
    stored = cache.misses
    again = group_privacy_run(replace(tiny("dpsgd"), l2=0.02), "dpsgd", resolution=8, cache=cache)
    assert cache.hits >= 1 and cache.misses < 2 * stored
    fresh = group_privacy_run(replace(tiny("dpsgd"), l2=0.02), "dpsgd", resolution=8)
    np.testing.assert_allclose(again.epsilons["epsilon"], fresh.epsilons["epsilon"])
    assert first.run_epsilon == again.run_epsilon


def test_the_direct_binning_of_few_distinct_steps_is_the_step_by_step_histogram():
    """A checkpoint whose steps share one bound (plain DP-SGD) is binned record by record: the same counts."""
    from dpfair_analysis.experiments.group_privacy import sensitivity_histogram
    from dpfair_analysis.privacy.individual import _grid_histogram

    rng = np.random.default_rng(7)
    n, repeats, groups = 150, np.array([5, 2]), rng.integers(0, 2, 150)
    norms = rng.exponential(0.5, (2, n))
    norms[:, :3] = 0.0
    norms[0, 3:6] = 0.5
    bounds = np.full((7, 2), 0.5)
    bounds[5:] = [[0.3, 0.61]]  # 0.3 / 0.6 would put s = 1/2 on a grid point, which is binned one bin up
    reference = bounds.max(axis=1)
    checkpoint = np.repeat(np.arange(2), repeats)
    for others in [(), (4.0,)]:
        rows = ((record_sensitivities(norms[checkpoint[t]], bounds[t][groups], reference=reference[t],
                                      noise_multiplier=0.9, other_multipliers=others), 1) for t in range(7))
        expected, expected_worst, _, _ = _grid_histogram(rows, 1.0, 64)
        counts, worst = sensitivity_histogram(norms, repeats, groups, bounds, reference, noise_multiplier=0.9,
                                              other_multipliers=others, resolution=64)
        np.testing.assert_array_equal(counts, expected)
        np.testing.assert_array_equal(worst, expected_worst)


@pytest.mark.parametrize("others", [(), (5.0, 2.0)])
@pytest.mark.parametrize("moving", [False, True])
def test_the_sampled_histogram_is_the_step_by_step_histogram_of_the_held_norms(others, moving):
    """sampled_sensitivity_histogram (each record's bin held between its own batches and the steps whose bounds
    move) gives the counts of sensitivity_histogram with one checkpoint per step, each record's norm its norm at the
    nearest of its batches and step 1 (theta_0's pass), ties to the later: bounds fixed (DP-SGD) or moving each step
    (DPSGD-F)."""
    from dpfair_analysis.experiments.group_privacy import sampled_sensitivity_histogram, sensitivity_histogram

    rng = np.random.default_rng(3)
    n, T = 150, 30
    groups, initial = rng.integers(0, 2, n), rng.exponential(0.6, n)
    initial[:4] = 0.0
    sampled = [np.flatnonzero(rng.random(n) < 0.1) for _ in range(T)]
    steps = np.concatenate([np.full(len(rows), t + 1) for t, rows in enumerate(sampled)])
    records = np.concatenate(sampled)
    values = rng.exponential(0.6, len(records)).astype(np.float32)
    bounds = rng.uniform(0.2, 1.0, (T, 2)) if moving else np.full((T, 2), 0.5)
    reference = bounds.max(axis=1)
    held = np.empty((T, n))
    for i in range(n):  # each record's samples (step 1: theta_0's pass); every step takes the nearest, ties later
        at = np.concatenate([[1], steps[records == i]])
        seen = np.concatenate([[initial[i]], values[records == i]])
        for t in range(1, T + 1):
            distance = np.abs(at - t)
            held[t - 1, i] = seen[np.flatnonzero(distance == distance.min())[-1]]
    options = {"noise_multiplier": 1.1, "other_multipliers": others, "resolution": 32}
    expected = sensitivity_histogram(held, np.ones(T, dtype=np.int64), groups, bounds, reference, **options)
    counts, worst = sampled_sensitivity_histogram(initial, (steps, records, values), groups, bounds, reference,
                                                  **options)
    np.testing.assert_array_equal(counts, expected[0])
    np.testing.assert_array_equal(worst, expected[1])
    assert (counts.sum(axis=1) == T).all()


def _binnings(initial, updates, groups, bounds, reference, **options):
    """Both binnings of sampled_sensitivity_histogram on the same inputs: (every step, at changes)."""
    floors = _bin_floors(options["noise_multiplier"], options["other_multipliers"], options["resolution"]) * (1 - 1e-9)
    changed = np.zeros(len(reference), dtype=bool)
    changed[1:] = (np.diff(bounds, axis=0) != 0).any(axis=1) | (np.diff(reference) != 0)
    sampled = nearest_sample_steps(*updates)
    return [binning(initial, sampled, groups, bounds, reference, floors, changed, **options)
            for binning in (_bins_every_step, _bins_at_changes)]


@st.composite
def sampled_runs(draw):
    """A run's sampled norms and released bounds: n records in G groups, T steps, each record sampled at each step
    with probability 0.3; norms drawn among zeros, a few values, the bounds themselves and grid thresholds (where
    the arithmetic bin is within rounding of an integer and the search decides)."""
    n, T, G = draw(st.integers(1, 30)), draw(st.integers(1, 12)), draw(st.integers(1, 3))
    others = draw(st.sampled_from([(), (10.0,), (5.0, 2.0)]))
    resolution, sigma = draw(st.sampled_from([4, 32, 128])), draw(st.sampled_from([0.6, 1.0, 1.3]))
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    bounds = rng.choice([0.3, 0.5, 1.0], size=(T, G)) * rng.choice([1.0, 1.1], size=(T, 1))
    reference = bounds.max(axis=1)
    floors = _bin_floors(sigma, others, resolution) * (1 - 1e-9)
    pool = np.concatenate([[0.0, 0.2, 0.7, 2.0], bounds.ravel(), (reference[:, None] * floors[floors > 0]).ravel()])
    groups = rng.integers(0, G, n)
    sampled = rng.random((T, n)) < 0.3
    steps, records = np.nonzero(sampled)
    updates = (steps + 1, records, rng.choice(pool, len(records)))
    options = {"noise_multiplier": sigma, "other_multipliers": others, "resolution": resolution}
    return rng.choice(pool, n), updates, groups, bounds, reference, options


@settings(max_examples=60, deadline=None)
@given(sampled_runs())
def test_binning_every_step_is_binning_at_the_changes(run):
    """The arithmetic binning of every record at every step (DPSGD-F's and FairDP's path) gives exactly the counts
    and worst cases of the threshold search at each change (the reference: equal to the step-by-step histogram by
    test_the_sampled_histogram_is_the_step_by_step_histogram_of_the_held_norms), ties on thresholds and bounds
    included."""
    initial, updates, groups, bounds, reference, options = run
    (counts, worst), (expected, expected_worst) = _binnings(initial, updates, groups, bounds, reference, **options)
    np.testing.assert_array_equal(counts, expected)
    np.testing.assert_array_equal(worst, expected_worst)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2 ** 16), st.sampled_from([(), (10.0,), (5.0, 2.0)]), st.sampled_from([0.01, 0.1, 0.5]),
       st.sampled_from([8, 128]))
def test_the_fast_accounting_is_above_the_exact_composition_and_within_the_grids_rounding(seed, others, q, K):
    """The fast path (every step's grid bin, the grid's vectorised curves) against dp_accounting composing each
    record's own steps at multiplier sigma_J / s'_t (s' from record_sensitivities): never below it (the bins round
    s'^2 up), and at most the same composition with every s'^2 raised by 1/K (the rounding's bound)."""
    from dpfair_analysis.privacy.individual import grid_curves, individual_privacy_from_histogram
    from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier

    rng = np.random.default_rng(seed)
    n, T, sigma = 3, 5, 0.9
    groups, norms = rng.integers(0, 2, n), rng.choice([0.0, 0.2, 0.45, 0.8, 1.5], size=(T, n))
    bounds = rng.uniform(0.3, 1.0, (T, 2))
    reference = bounds.max(axis=1)
    every = (np.repeat(np.arange(1, T + 1), n), np.tile(np.arange(n), T), norms.ravel())  # held: each step's own
    options = {"noise_multiplier": sigma, "other_multipliers": others, "resolution": K}
    counts, worst = sampled_sensitivity_histogram(norms[0], every, groups, bounds, reference, **options)
    joint = joint_noise_multiplier((sigma, *others))
    spec = AccountingSpec(orders=(2.0, 4.0, 8.0, 16.0, 32.0, 64.0))
    fast = individual_privacy_from_histogram(counts, at_worst_case=worst, noise_multiplier=joint, sampling_rate=q,
                                             delta=1e-5, accounting=spec, curves=grid_curves(q, joint, spec, K))
    s = np.stack([record_sensitivities(norms[t], bounds[t, groups], reference=reference[t], noise_multiplier=sigma,
                                       other_multipliers=others) for t in range(T)])

    def composed(sensitivities):
        accountant = rdp_privacy_accountant.RdpAccountant(list(spec.orders))
        for value in sensitivities[sensitivities > 0]:
            accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(joint / value)))
        return accountant.get_epsilon(1e-5)

    for i in range(n):
        exact = composed(s[:, i])
        raised = composed(np.sqrt(np.minimum(1.0, s[:, i] ** 2 + (1 + 1e-6) / K)) * (s[:, i] > 0))
        assert exact - 1e-12 <= fast.epsilons[i] <= raised * (1 + 1e-9) + 1e-12
