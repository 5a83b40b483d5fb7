"""DPSGD-F and Naive: the printed formulas, the guards, and the sensitivities the noise relies on.

Sensitivities are checked by brute force over neighbouring batches chosen by hypothesis
(tiny and empty groups, all or no samples clipped, noisy counts near zero or negative,
extreme C0), not by re-deriving the formula.
"""

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from dpfair_analysis.gradients import clipped_sum
from dpfair_analysis.training.dpsgdf import DPSGDF, NaiveReweighting, dpsgdf_group_bounds

from neighbours import neighbour_of

SETTINGS = settings(max_examples=300, deadline=None)
finite_counts = st.floats(-50, 300, allow_nan=False)


def test_bounds_follow_line_12_when_no_guard_fires():
    m = torch.tensor([30.0, 5.0, 0.0], dtype=torch.float64)
    o = torch.tensor([70.0, 95.0, 56.0], dtype=torch.float64)
    bounds, fires = dpsgdf_group_bounds(m, o, base_clip=0.5, expected_batch_size=256, max_ratio=100)
    pooled = 35 / 256
    expected = [0.5 * (1 + (30 / 100) / pooled), 0.5 * (1 + (5 / 100) / pooled), 0.5]
    assert bounds.tolist() == pytest.approx(expected)
    assert sum(fires.values()) == 0


@SETTINGS
@given(st.lists(st.tuples(finite_counts, finite_counts), min_size=1, max_size=6),
       st.floats(1e-4, 1e3), st.floats(1, 4096), st.floats(0.1, 50))
def test_guards_keep_every_bound_finite_positive_and_capped(counts, base_clip, batch, max_ratio):
    m = torch.tensor([c[0] for c in counts], dtype=torch.float64)
    o = torch.tensor([c[1] for c in counts], dtype=torch.float64)
    bounds, fires = dpsgdf_group_bounds(m, o, base_clip=base_clip, expected_batch_size=batch, max_ratio=max_ratio)
    assert torch.isfinite(bounds).all()
    assert (bounds >= base_clip * (1 - 1e-12)).all()
    assert (bounds <= base_clip * (1 + max_ratio) * (1 + 1e-12)).all()
    assert fires["negative_count"] == int((m < 0).sum() + (o < 0).sum())
    assert all(v >= 0 for v in fires.values())


@st.composite
def batch_and_neighbour(draw):
    """A batch of (group, norm) pairs, plus a neighbour by add, remove or replace."""
    k = draw(st.integers(1, 4))
    base_clip = draw(st.sampled_from([1e-3, 0.5, 1.0, 1e3]))
    row = st.tuples(st.integers(0, k - 1),
                    st.sampled_from([0.0, base_clip / 2, base_clip, base_clip * (1 + 1e-9), 3 * base_clip, 1e6]))
    rows = draw(st.lists(row, max_size=12))
    neighbour, kind = draw(neighbour_of(rows, row))
    return k, base_clip, rows, neighbour, kind


def counts_of(rows, k, base_clip):
    m = torch.zeros(k, dtype=torch.float64)
    o = torch.zeros(k, dtype=torch.float64)
    for g, norm in rows:
        (m if norm > base_clip else o)[g] += 1
    return torch.cat([m, o])


@SETTINGS
@given(batch_and_neighbour())
def test_count_vector_moves_by_at_most_one_record_contribution(case):
    """One record adds 1 to one count: distance 1 under add/remove, sqrt(2) <= 2 under replace."""
    k, base_clip, rows, neighbour, kind = case
    distance = float((counts_of(rows, k, base_clip) - counts_of(neighbour, k, base_clip)).norm())
    limit = 1.0 if kind != "replace" else math.sqrt(2)
    assert distance <= limit + 1e-12
    # and the policy counts exactly this vector
    policy = DPSGDF(base_clip, 1.0, count_noise=1e-12)
    group = torch.tensor([g for g, _ in rows], dtype=torch.long)
    norms = torch.tensor([nm for _, nm in rows], dtype=torch.float64)
    decision = policy.decide(norms, group, n_groups=k, expected_batch_size=8, generator=torch.Generator())
    released = [decision.record[f"m[{j}]"] for j in range(k)] + [decision.record[f"o[{j}]"] for j in range(k)]
    assert released == pytest.approx(counts_of(rows, k, base_clip).tolist(), abs=1e-9)


@st.composite
def gradients_with_neighbour(draw):
    k = draw(st.integers(1, 4))
    n = draw(st.integers(1, 10))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    scales = torch.tensor(draw(st.lists(st.sampled_from([0.0, 1e-3, 1.0, 1e4]), min_size=n + 1, max_size=n + 1)))
    grads = torch.randn(n + 1, d, generator=g, dtype=torch.float64) * scales[:, None]
    group = torch.tensor(draw(st.lists(st.integers(0, k - 1), min_size=n + 1, max_size=n + 1)))
    noisy_m = torch.tensor(draw(st.lists(finite_counts, min_size=k, max_size=k)), dtype=torch.float64)
    noisy_o = torch.tensor(draw(st.lists(finite_counts, min_size=k, max_size=k)), dtype=torch.float64)
    return k, grads, group, noisy_m, noisy_o, draw(st.sampled_from([1e-3, 0.5, 10.0]))


@SETTINGS
@given(gradients_with_neighbour())
def test_dpsgdf_noise_bounds_the_clipped_sum_sensitivity(case):
    """Given the released counts, adding or removing any record moves the clipped sum by at
    most noise_std / sigma_2, for a record of any group with any gradient."""
    k, grads, group, noisy_m, noisy_o, base_clip = case
    sigma_2 = 0.7
    bounds, _ = dpsgdf_group_bounds(noisy_m, noisy_o, base_clip=base_clip, expected_batch_size=16, max_ratio=10)
    noise_std = sigma_2 * float(bounds.max())
    full = clipped_sum({"w": grads}, bounds[group])["w"]
    without_last = clipped_sum({"w": grads[:-1]}, bounds[group[:-1]])["w"]
    assert float((full - without_last).norm()) <= noise_std / sigma_2 * (1 + 1e-9)
    # replace: swap the last record for the first one's gradient in another group
    swapped_group = group.clone()
    swapped_group[-1] = (group[-1] + 1) % k
    replaced = clipped_sum({"w": torch.cat([grads[:-1], grads[:1]])}, bounds[swapped_group])["w"]
    assert float((full - replaced).norm()) <= 2 * noise_std / sigma_2 * (1 + 1e-9)


@SETTINGS
@given(gradients_with_neighbour(), st.floats(-20, 300))
def test_naive_noise_bounds_the_weighted_clipped_sum_sensitivity(case, count_shift):
    k, grads, group, *_ , base_clip = case
    policy = NaiveReweighting(base_clip, 0.9, count_noise=1e-9)
    norms = grads.norm(dim=1)
    decision = policy.decide(norms, group, n_groups=k, expected_batch_size=16, generator=torch.Generator())
    theta = torch.tensor([decision.record[f"theta[{j}]"] for j in range(k)], dtype=torch.float64)
    assert torch.isfinite(theta).all() and (theta > 0).all() and (theta <= 16 / k + 1e-12).all()
    full = clipped_sum({"w": grads}, decision.bounds, weights=decision.weights)["w"]
    without_last = clipped_sum({"w": grads[:-1]}, decision.bounds[:-1], weights=decision.weights[:-1])["w"]
    assert float((full - without_last).norm()) <= decision.noise_std / 0.9 * (1 + 1e-9)
    # Any record of any group would contribute at most C0 * theta^k <= noise_std / sigma_2.
    assert float(base_clip * theta.max()) <= decision.noise_std / 0.9 * (1 + 1e-12)


def test_dpsgdf_decision_noise_and_record_are_consistent():
    policy = DPSGDF(0.5, 1.3, count_noise=13.0)
    gen = torch.Generator().manual_seed(0)
    norms = torch.tensor([0.1, 0.7, 2.0, 0.2, 0.9])
    group = torch.tensor([0, 0, 1, 1, 1])
    decision = policy.decide(norms, group, n_groups=2, expected_batch_size=5, generator=gen)
    assert decision.noise_std == pytest.approx(1.3 * decision.record["C"])
    assert decision.record["C"] == pytest.approx(max(decision.record["C[0]"], decision.record["C[1]"]))
    assert decision.bounds.tolist() == pytest.approx([decision.record[f"C[{g}]"] for g in group.tolist()])
    assert decision.noise_multipliers == (13.0, 1.3)


def test_naive_weights_follow_algorithm_3():
    policy = NaiveReweighting(1.0, 1.0, count_noise=1e-12)
    group = torch.tensor([0] * 6 + [1] * 2)
    decision = policy.decide(torch.ones(8), group, n_groups=2, expected_batch_size=8, generator=torch.Generator())
    # theta^k = (b / K) / b^k = 4/6 and 4/2
    assert decision.weights.tolist() == pytest.approx([4 / 6] * 6 + [2.0] * 2)
    assert decision.noise_std == pytest.approx(2.0)
