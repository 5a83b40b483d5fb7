"""The per-group one-run audit of DP-SGD as it ships: the canaries, the scores the adversary computes, a correct
run never refuted, an under-noised twin refuted in every group."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dpfair_analysis.data.synthetic import synthetic_groups
from dpfair_analysis.gradients import flatten, per_sample_gradients
from dpfair_analysis.testing.one_run import guess_grid
from dpfair_analysis.verify.audits.one_run import (
    audit_run_by_group,
    canary_clipping,
    canary_epsilons,
    draw_canaries,
    one_run_table,
    run_with_canaries,
    with_canaries,
)

SETTING = {"clip": 1.0, "epochs": 2, "batch_size": 40, "lr": 0.01, "delta": 1e-5, "value": 300.0}


def _data(seed: int = 0):
    data = synthetic_groups(sizes=(600, 400), dim=5, seed=seed, group_names=("a", "b"))
    return data.split(0.5, seed=seed)


def test_canaries_look_like_their_group_and_own_one_column_each():
    train, pool = _data()
    canaries = draw_canaries(pool, per_group=20, value=300.0, seed=1)
    assert len(canaries) == 2 * 2 * 20
    gradient = canaries.own_column >= 0
    assert sorted(canaries.own_column[gradient]) == list(range(5, 5 + int(gradient.sum())))
    own = canaries.X[:, 5:]
    assert (own[~torch.from_numpy(gradient)] == 0).all() and (own.abs().sum(dim=1)[gradient] == 300.0).all()
    data = with_canaries(train, canaries)
    assert len(data) == len(train) + int(canaries.included.sum())
    assert (data.X[:len(train), 5:] == 0).all()  # no real row moves a canary's own weight
    with pytest.raises(ValueError, match="per_group"):
        draw_canaries(pool, per_group=5)
    with pytest.raises(ValueError, match="held-out pool has"):
        draw_canaries(pool, per_group=150)


def test_the_trace_is_the_models_own_gradients():
    train, pool = _data()
    canaries = draw_canaries(pool, per_group=10, seed=2)
    result, trace = run_with_canaries(train, canaries, clip=1.0, noise_multiplier=1.0, epochs=1, batch_size=40,
                                      lr=0.01, delta=1e-5)
    grads = flatten(per_sample_gradients(result.model, canaries.X, canaries.y)).double()
    assert np.allclose(trace.norms[-1], grads.norm(dim=1).numpy(), rtol=1e-4)
    own = canaries.own_column[canaries.own_column >= 0]
    assert np.allclose(trace.own_gradient[-1], grads[canaries.own_column >= 0][:, own].diagonal().numpy(),
                       rtol=1e-4)
    assert len(trace.weights) == len(result.steps) + 1


def _audit(seed: int, noise_fraction: float = 1.0, per_group: int = 100) -> dict:
    train, pool = _data(seed)
    return audit_run_by_group(train, pool, per_group=per_group, noise_multiplier=2.0, families=("gradient",),
                              noise_fraction=noise_fraction, seed=seed, **SETTING)


def test_a_correct_run_is_consistent_and_its_under_noised_twin_is_refuted_in_every_group():
    correct = _audit(0)
    assert not any(row["exceeds_accounted"] or row["exceeds_gaussian_hypothesis"] for row in correct["sets"])
    assert {row["group"] for row in correct["sets"]} == {"a/gradient", "b/gradient"}
    row = correct["sets"][0]
    assert row["canaries"] == 100 and row["family_size"] == 2 * len(guess_grid(100)) and row["largest_certifiable_epsilon"] > 0
    # gradient canaries are clipped on every step: their per-record estimate is the run's epsilon
    assert row["canary_epsilon_i_median"] == pytest.approx(correct["epsilon"], rel=1e-6)
    assert row["canary_epsilon_i_mean"] == pytest.approx(correct["epsilon"], rel=1e-6)
    twin = _audit(0, noise_fraction=0.05)
    assert twin["epsilon"] == pytest.approx(correct["epsilon"], rel=1e-9)  # the twin claims the correct run's
    assert all(row["exceeds_accounted"] for row in twin["sets"]), twin["summary"]
    assert "BUG" in twin["summary"]


@pytest.mark.slow
def test_dpsgd_runs_are_never_refuted_on_20_seeds():
    refuted = []
    for seed in range(20):
        out = _audit(seed, per_group=200)
        refuted += [f"seed {seed}: {row['group']}" for row in out["sets"]
                    if row["exceeds_accounted"] or row["exceeds_gaussian_hypothesis"]]
    assert refuted == []


def test_dpsgdf_canaries_are_clipped_at_their_groups_released_bounds():
    train, pool = _data()
    out = audit_run_by_group(train, pool, per_group=50, noise_multiplier=2.0, families=("gradient",),
                             method="dpsgdf", seed=1, **SETTING)
    assert out["method"] == "dpsgdf" and {row["group"] for row in out["sets"]} == {"a/gradient", "b/gradient"}
    assert not any(row["exceeds_accounted"] for row in out["sets"]), out["summary"]
    for row in out["sets"]:  # group-bound accounting: at most the run's epsilon, below it off the largest bound
        assert 0 < row["canary_epsilon_i_median"] <= row["canary_epsilon_i_max"] <= out["epsilon"] * (1 + 1e-9)
        assert 0 < row["canary_epsilon_i_mean"] <= row["canary_epsilon_i_max"] * (1 + 1e-12)  # a mean of equals
    canaries = draw_canaries(pool, per_group=10, families=("gradient",), value=300.0, seed=1)
    result, trace = run_with_canaries(train, canaries, clip=1.0, noise_multiplier=2.0, epochs=1, batch_size=40,
                                      lr=0.01, delta=1e-5, method="dpsgdf")
    bounds, weights = canary_clipping(result, canaries.group.numpy(), clip=1.0)
    assert (weights == 1.0).all() and trace.noise_multipliers[0] == 2.0 and len(trace.noise_multipliers) == 2
    for g in (0, 1):
        assert np.array_equal(bounds[:, canaries.group.numpy() == g][:, 0], result.steps[f"C[{g}]"].to_numpy())
    epsilons = canary_epsilons(result, trace, canaries, clip=1.0)
    largest = np.array([bounds[t] == bounds[t].max() for t in range(len(bounds))])  # clipped at the largest bound
    always = largest.all(axis=0) & (trace.norms[:len(bounds)] >= bounds).all(axis=0)
    np.testing.assert_allclose(epsilons[always], result.epsilon, rtol=1e-6)  # the ledger's step, every step
    assert (epsilons[~always] < result.epsilon).all()
    with pytest.raises(ValueError, match="method"):
        run_with_canaries(train, canaries, clip=1.0, noise_multiplier=2.0, epochs=1, batch_size=40, lr=0.01,
                          delta=1e-5, method="naive")


def test_fairdp_is_audited_at_its_released_group_bounds_with_its_releases_charged():
    """FairDP: each group's canaries clipped at its C[g], the counts and capped excess charged to every canary's
    epsilon_i (all below the run's epsilon, which charges the largest bound); consistent with the claim."""
    train, pool = _data()
    out = audit_run_by_group(train, pool, per_group=50, noise_multiplier=2.0, families=("gradient",),
                             method="fairdp", seed=1, **SETTING)
    assert out["method"] == "fairdp" and not any(row["exceeds_accounted"] for row in out["sets"]), out["summary"]
    assert all(0 < row["canary_epsilon_i_max"] <= out["epsilon"] * (1 + 1e-9) for row in out["sets"])


def _set(group: str, lower: float, *, mean: float | None = None, certifiable: float = 4.5) -> dict:
    row = {"group": group, "canaries": 100, "included": 50, "epsilon_lower": lower, "mu_epsilon_lower": 2 * lower,
           "mu_lower": lower / 4, "mean_step_bound": 0.5, "epsilon_accounted": 1.5, "exceeds_accounted": lower > 1.5,
           "epsilon_guesses": [10, 10], "epsilon_correct": 12, "mu_guesses": [10, 10], "mu_correct": 12,
           "delta": 1e-5, "confidence": 0.95, "test_level": 0.99, "family_size": 8,
           "largest_certifiable_epsilon": certifiable, "largest_certifiable_mu": certifiable / 3}
    return row if mean is None else {**row, "canary_epsilon_i_mean": mean}


def test_one_run_table_is_each_set_over_its_seeds():
    runs = [{"method": "dpsgd", "target_epsilon": 1.0, "seed": s, "epsilon": 1.0 + s / 100,
             "sets": [_set("a/gradient", 0.1 * (s + 1), mean=0.9), _set("b/input", 2.0 * s)]} for s in (0, 1)]
    table = one_run_table([{"runs": runs}, {"runs": [{**runs[0], "method": "dpsgdf"}]}]).set_index(
        ["method", "group", "family"])
    a, b = table.loc[("dpsgd", "a", "gradient")], table.loc[("dpsgd", "b", "input")]
    assert (a["m"], a["seeds"], a["refuted"]) == (100, 2, 0) and b["refuted"] == 1
    assert (a["steinke_min"], a["steinke_max"], a["fdp_max"]) == pytest.approx((0.1, 0.2, 0.4))
    assert a["run_epsilon"] == pytest.approx(1.005) and a["epsilon_i_mean"] == 0.9 and np.isnan(b["epsilon_i_mean"])
    assert table.loc[("dpsgdf", "a", "gradient"), "seeds"] == 1
    # no power: seed 0 of b audits 0 (evidence of nothing); every seed of a could have refuted 1.5
    assert (a["no_power"], b["no_power"]) == (0, 1)


def test_one_run_table_counts_a_set_too_small_for_its_claim_as_without_power():
    """A set whose canaries cannot certify its accounted epsilon (every guess right) is counted in ``no_power``
    whatever it audited: its 0 refuted is not evidence."""
    runs = [{"method": "dpsgd", "target_epsilon": 1.0, "seed": 0, "epsilon": 1.5,
             "sets": [_set("a/gradient", 0.3, certifiable=1.5), _set("b/gradient", 0.3, certifiable=1.6)]}]
    table = one_run_table([{"runs": runs}]).set_index("group")
    assert table["no_power"].to_dict() == {"a": 1, "b": 0}


COMMITTED = sorted((Path(__file__).resolve().parents[2] / "paper_figs" / "group_privacy").glob("one_run_adult_*.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_committed_one_run_audits_state_both_bounds_beside_the_accounting_and_none_is_refuted(path):
    """Each committed audit (``dpfair privacy one-run --out``) states per set m, Steinke et al.'s and the f-DP
    bound on the same guesses, the canaries' epsilon_i and the run's epsilon; no bound exceeds its run's."""
    payload = json.loads(path.read_text())
    assert path.stem == f"one_run_adult_{payload['method']}" and payload["refuted"] is False
    for run in payload["runs"]:
        for row in run["sets"]:
            assert row["canaries"] == payload["per_group"]
            assert not (row["exceeds_accounted"] or row["exceeds_gaussian_hypothesis"])
            assert 0 <= row["epsilon_lower"] <= run["epsilon"] and 0 <= row["mu_epsilon_lower"] <= run["epsilon"]
            assert 0 < row["canary_epsilon_i_max"] <= run["epsilon"] * (1 + 1e-9)
    table = one_run_table([payload])
    assert set(table["target_epsilon"]) == set(payload["epsilons"]) and (table["refuted"] == 0).all()
