"""audit / assert_private: valid over the whole search, powerful, and clear about what it found."""

import math
from dataclasses import replace

import numpy as np
import pytest
from dp_accounting import dp_event

from dpfair_analysis.privacy.accounting import AccountingSpec, epsilon_from_event
from dpfair_analysis.testing import (
    AttributeChange,
    InsufficientPower,
    PrivacyViolation,
    QueryVector,
    assert_private,
    audit,
)
from dpfair_analysis.testing import strategies as kit
from dpfair_analysis.testing.auditing import Budget, candidate_pairs
from dpfair_analysis.testing.bounds import choose_threshold
from dpfair_analysis.testing.families import statistic_family
from dpfair_analysis.testing.zoo import catalogue

ZOO = catalogue()
#: small budgets: seconds per audit (the benchmark runs the real ones)
SMALL = Budget("test", screen=400, select=2_000, evaluate=4_000, top=3, max_pairs=10, batch_factors=(1, 1, 1))


def laplace(epsilon):
    def mechanism(data, rng, n, noise_scale=1.0):
        x = np.asarray(data, dtype=float)
        return x + rng.laplace(scale=noise_scale / epsilon, size=(n, len(x)))
    return mechanism


def test_a_correct_mechanism_through_the_one_output_contract_is_consistent_and_its_twin_caught():
    z = ZOO["noisy_hist1"]  # Laplace(1/eps) per entry, one entry moves
    result = audit(lambda d, rng, noise_scale=1.0: d + rng.laplace(scale=noise_scale / 1.0, size=len(d)), 1.0,
                   relation=QueryVector(mode="one"), data=np.ones(3), budget=SMALL, twin=0.25, seed=2)
    assert result.consistent and 0.5 < result.epsilon_lower <= 1.0
    assert result.power["twin_caught"] and result.power["twin_epsilon_lower"] > 1.0
    assert result.power["largest_certifiable_epsilon"] > 5
    assert z.correct


def test_an_incorrect_mechanism_is_caught_with_its_witness():
    z = ZOO["noisy_hist2"]  # noise scale epsilon instead of 1 / epsilon: true epsilon 10 for a claim of 0.1
    with pytest.raises(PrivacyViolation, match="refuted") as failure:
        assert_private(z.batched(), z.epsilon, relation=z.relation, data=z.data, batched=True, budget=SMALL)
    result = failure.value.result
    assert result.epsilon_lower > 5 and not result.consistent
    w = result.witness
    assert w["change"]["kind"] == "queries" and abs(np.subtract(w["neighbour"], w["data"])).max() == 1
    assert w["false_positives"] + w["false_negatives"] < result.evaluation_trials


def test_family_wise_false_alarms_stay_below_the_nominal_rate_while_a_naive_search_raises_them():
    """A tight mechanism (Laplace at exactly its epsilon), ten candidate pairs, ~30 statistics, all thresholds:
    the held-out audit is consistent on >= 19 of 20 seeds; bounding epsilon on the runs the search used
    (what a per-pair tester does) exceeds the claim on most of them."""
    mechanism, relation = laplace(1.0), QueryVector(mode="one")
    kit_alarms, naive_alarms = 0, 0
    for seed in range(20):
        result = audit(mechanism, 1.0, relation=relation, data=np.zeros(4), batched=True, seed=seed, budget=SMALL,
                       statistics=("threshold", "histogram"))
        kit_alarms += not result.consistent
        if seed < 8:
            rng, best = np.random.default_rng(seed), 0.0
            for a, b in candidate_pairs(relation, data=np.zeros(4), pairs=None, limit=10, seed=seed):
                out0, out1 = mechanism(a, rng, 2000), mechanism(b, rng, 2000)
                for statistic in statistic_family(("threshold", "histogram"), out0, out1):
                    fitted = statistic.fit(out0, out1, (a, b))
                    if fitted is not None:
                        best = max(best, choose_threshold(fitted.score(out0), fitted.score(out1), delta=0.0)[1])
            naive_alarms += best > 1.0
    assert kit_alarms <= 1
    assert naive_alarms >= 4  # of 8: far above the nominal 5%


def test_approximate_dp_gaussian_and_the_l2_mistake():
    good, bad = ZOO["gaussian"], ZOO["gaussian_l2_mistake"]
    ok = audit(good.batched(), good.epsilon, good.delta, relation=good.relation, data=good.data, batched=True,
               budget=SMALL)
    assert ok.consistent and ok.epsilon_lower <= good.epsilon
    caught = audit(bad.batched(), bad.epsilon, bad.delta, relation=bad.relation, data=bad.data, batched=True,
                   budget=SMALL)
    assert not caught.consistent and caught.witness["change"]["index"] is None  # several entries moved


def test_white_box_densities_give_a_nearly_tight_bound():
    """Gaussian noise sigma = 3 on a 3-vector whose every entry moves by 1 (l2 distance sqrt 3): the
    likelihood-ratio statistic from the densities reaches most of the exact (PLD) epsilon -- typically: one audit
    reaches 0.51-0.68 of it (seeds 0-5, 200,000 runs a side), so the median of five seeds is what is asserted."""
    sigma, shift = 3.0, np.ones(3)
    exact = epsilon_from_event(dp_event.GaussianDpEvent(sigma / np.sqrt(3)), 1e-5,
                               accounting=AccountingSpec(accountant="pld"))

    def log_density(outputs, data):
        return -0.5 * (((outputs - data) / sigma) ** 2).sum(axis=1)

    results = [audit(lambda d, rng, n: d + rng.normal(scale=sigma, size=(n, 3)), exact, 1e-5,
                     relation=QueryVector(mode="every"), pairs=(np.zeros(3), shift), batched=True,
                     statistics="likelihood", log_density=log_density, trials=200_000, budget=SMALL, seed=seed)
               for seed in range(5)]
    assert all(r.witness["statistic_kind"] == "likelihood" and r.epsilon_lower <= exact for r in results)
    assert np.median([r.epsilon_lower for r in results]) > 0.55 * exact


def test_pairs_given_drawn_from_a_strategy_or_refused():
    mechanism, one = laplace(1.0), QueryVector(mode="one")  # Laplace(1) per entry: 1-DP when one entry moves
    given = audit(mechanism, 1.0, relation=one, pairs=(np.zeros(2), np.array([1.0, 0.0])), batched=True,
                  budget=SMALL)
    assert given.candidates == 1 and given.witness["neighbour"] == [1.0, 0.0]
    drawn = audit(mechanism, 1.0, relation=one, pairs=kit.pairs(one), batched=True, budget=SMALL)
    assert drawn.candidates == SMALL.max_pairs and drawn.consistent
    # under "every entry moves", the same mechanism on long vectors is not 1-DP: the drawn pairs show it
    every = audit(mechanism, 1.0, relation="queries", pairs=kit.pairs("queries"), batched=True, budget=SMALL)
    assert not every.consistent and len(every.witness["data"]) > 1
    with pytest.raises(ValueError, match="pair 1 is not a neighbouring pair.*moves by 2"):
        audit(mechanism, 1.0, relation="queries", batched=True, budget=SMALL,
              pairs=[(np.zeros(2), np.ones(2)), (np.zeros(2), np.array([2.0, 0.0]))])


def test_attribute_change_on_dict_data():
    """A group-mean release whose noise is calibrated to 1/n of the group but the lone member can move."""
    def group_means(data, rng, noise_scale=1.0):
        x, g = data["x"], data["group"]
        means = np.array([x[g == k].mean() if np.any(g == k) else 0.0 for k in (0, 1)])
        return means + rng.laplace(scale=noise_scale * 1.0 / len(x), size=2)  # claims sensitivity 1/n: wrong

    data = {"x": np.array([1.0, 1.0, 1.0, 0.0, 0.0]), "group": np.array([0, 0, 0, 0, 1])}
    result = audit(group_means, 1.0, relation=AttributeChange(), data=data, budget=SMALL)
    assert not result.consistent
    assert result.witness["change"]["kind"] == "attribute"


def test_require_power_refuses_a_pass_that_means_nothing():
    with pytest.raises(InsufficientPower, match="twin"):
        assert_private(laplace(0.01), 0.01, relation="queries", data=np.zeros(2), batched=True, budget=SMALL,
                       require_power=True, trials=50)


def test_same_seed_same_result():
    run = [audit(laplace(1.0), 1.0, relation="queries", data=np.zeros(2), batched=True, budget=SMALL, seed=5)
           for _ in range(2)]
    assert run[0].epsilon_lower == run[1].epsilon_lower and run[0].witness == run[1].witness


@pytest.mark.parametrize("kwargs,error,match", [
    ({"epsilon": -1.0}, ValueError, "epsilon"),
    ({"trials": 5}, ValueError, "trials"),
    ({"statistics": "magic"}, ValueError, "statistics"),
    ({"statistics": "likelihood"}, ValueError, "log_density"),
    ({"budget": "huge"}, TypeError, "budget"),
    ({"delta": 1.0}, ValueError, "delta"),
    ({"twin": 2.0}, ValueError, "twin"),
])
def test_bad_arguments_name_themselves(kwargs, error, match):
    options = {"epsilon": 1.0, "relation": "queries", "data": np.zeros(2), "batched": True, "budget": SMALL}
    options.update(kwargs)
    epsilon = options.pop("epsilon")
    with pytest.raises(error, match=match):
        audit(laplace(1.0), epsilon, **options)


def test_result_json_and_summary_fields():
    result = audit(laplace(1.0), 1.0, relation="queries", data=np.zeros(2), batched=True, budget=SMALL)
    summary = result.summary()
    assert set(summary) == {"verdict", "epsilon_lower", "confidence", "consistent", "witness", "trials", "seconds",
                            "power", "certifiable_epsilon", "no_power"}
    assert summary["power"]["largest_certifiable_epsilon"] == result.power["largest_certifiable_epsilon"]
    assert summary["power"]["can_refute_claim"] is True and summary["power"]["evaluation_trials"] == 4000
    assert result.trials > 2 * result.evaluation_trials and math.isfinite(result.seconds)


def test_an_audit_says_when_it_cannot_refute_the_claim():
    result = audit(laplace(1.0), 50.0, relation="queries", data=np.zeros(2), batched=True, budget=SMALL)
    assert result.power["can_refute_claim"] is False and result.power["largest_certifiable_epsilon"] < 50


@pytest.mark.slow
def test_the_learned_statistic_separates_svt34_parallel_beyond_its_claim_when_fitted_on_enough_runs():
    """(Slow, ~20 s: 2.4 M runs and two fits; the default suite's check that the learned statistic finds the optimal
    test of a flagged output is tests/testing/test_kit_scores.py's.) DP-Sniper's witness for SVT34Parallel (ones
    vs half up, half down) is a rare event (~1% of runs): a
    logistic regression fitted on the statistic's cap (200,000 runs per side) finds an event of probability
    >= 0.5% whose log-ratio exceeds the claimed 0.2 by 0.05, and separates better than one fitted on 25,000
    (the former cap's half: 0.24 vs 0.27 here, 0.21 vs 0.31 at seed 12) -- why the cap is where it is."""
    from dpfair_analysis.testing.scores import MAX_FIT_ROWS, Learned

    z = ZOO["svt34_parallel"]
    pair = (np.ones(10), np.r_[np.full(5, 2.0), np.zeros(5)])
    rng = np.random.default_rng(11)
    fit0, fit1 = z.batched()(pair[0], rng, MAX_FIT_ROWS), z.batched()(pair[1], rng, MAX_FIT_ROWS)
    fresh0, fresh1 = z.batched()(pair[0], rng, 1_000_000), z.batched()(pair[1], rng, 1_000_000)

    def largest_ratio(fitted) -> float:  # max over "score <= t" events seen >= 5,000 times under D
        s0, s1 = np.sort(fitted.score(fresh0)), np.sort(fitted.score(fresh1))
        t = s0[5_000:100_000:250]
        below0 = np.searchsorted(s0, t, side="right")
        below1 = np.maximum(np.searchsorted(s1, t, side="right"), 1)
        return float(np.max(np.log(below0 / below1)))

    small = largest_ratio(Learned().fit(fit0[:25_000], fit1[:25_000], pair))
    full = largest_ratio(Learned().fit(fit0, fit1, pair))
    assert MAX_FIT_ROWS >= 200_000
    assert full > z.epsilon + 0.05 and full > small


#: Batched sparse vectors the quick budget's pair search misses on seed 0 (measured 12-07 when the default stream
#: became the workers' chunked one, 0fbc68e). Their events (0.3-2% of the runs, log-ratio 0.15-0.18) rank their
#: pairs only by luck on 50,000 screening runs: seeds 0-5 caught svt3 on 3 of 6 (0.068, 0.069, 0.122, 0.102, 0.121,
#: 0.082) and svt4 on 5 of 6 (0.099, 0.113, 0.130, 0.151, 0.101, 0.115); the earlier stream caught both on seed 0
#: (svt3 0.171, svt4 0.150). Even the full budget is seed-dependent on svt3 (seed 0 0.149, seed 1 0.092).
QUICK_MISSES = {"svt3": 0.0677, "svt4": 0.0987}


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(
    strict=True, reason=f"the quick budget misses batched {n} on seed 0 (epsilon >= {QUICK_MISSES[n]})"))
    if n in QUICK_MISSES else n for n in sorted(n for n, z in ZOO.items() if not z.correct)])
def test_every_incorrect_reference_mechanism_is_refuted_at_the_quick_budget_with_the_pair_search(name):
    z = ZOO[name]
    result = audit(z.batched(), z.epsilon, z.delta, relation=z.relation, data=z.data, batched=True, budget="quick",
                   seed=0, time_budget=600.0, name=name)
    assert not result.consistent, f"{name}: epsilon >= {result.epsilon_lower:.4f} against the claimed {z.epsilon}"


def rare_leak(data, rng, n):
    """Laplace(1/0.5) on the query, and on D' = [1] only, 0.5% of runs reveal it (output 100): not epsilon-DP for
    any epsilon, but only through an event of probability 0.5%."""
    x = float(np.asarray(data, dtype=float)[0])
    out = x + rng.laplace(scale=2.0, size=(n, 1))
    if x == 1.0:
        out[rng.random(n) < 0.005] = 100.0
    return out


def test_a_minimum_event_probability_adds_common_events_without_losing_the_rare_leak():
    # budget="thorough" gives each statistic a second threshold among events of probability >= c (DP-Sniper's c)
    # beside the default one, and held-out runs choose: the default rule finds the 0.5% leak and refutes the
    # claim epsilon = 1; so must the two rules together (c alone could not: among events of probability >= 1% the
    # largest log-ratio is that of "output > t" with P_D = 1%, t = 2 ln 50: log((0.995 e^0.5 0.01 + 0.005) / 0.01)
    # = 0.761, below the claim)
    pair = (np.zeros(1), np.ones(1))
    plain = Budget("t", screen=400, select=20_000, evaluate=40_000, top=1, max_pairs=1, batch_factors=(1, 1, 1))
    both = replace(plain, min_event=0.01, event_level=0.5)
    for budget in (plain, both):
        result = audit(rare_leak, 1.0, relation="queries", pairs=pair, budget=budget, batched=True, seed=1)
        assert not result.consistent and result.epsilon_lower > 1.0
        assert result.witness["false_positives"] < 0.004 * result.evaluation_trials  # the rare event


def laplace_query(data, rng, n):
    """The Laplace mechanism on one query, epsilon = 0.1: every event "output > t" with t >= 1 (D = [0],
    D' = [1]) has the same log-ratio 0.1, so the surest is the most common, t = 1 (probability 0.45 under D)."""
    return float(np.asarray(data, dtype=float)[0]) + rng.laplace(scale=10.0, size=(n, 1))


def test_the_held_out_ranking_prefers_a_sure_common_event_to_an_equally_strong_noisy_rare_one():
    # with budget="thorough"'s two thresholds per statistic, the held-out runs rank both alike (pessimistic
    # rates): a 1%-event's estimate is ~7x noisier than a 45%-event's, so it must not win on its luck; ranked as
    # counted (the rule before) it did, and the bound lost what the common event gives at the evaluation's size
    pair = (np.zeros(1), np.ones(1))
    budget = Budget("t", screen=2_000, select=1_500_000, evaluate=2_000_000, top=1, max_pairs=1,
                    batch_factors=(1, 1, 1), min_event=0.01, event_level=0.5)
    for seed in range(4):   # ranked as counted, seeds 2 and 3 chose events of 7% and 12% (0.084, 0.092)
        result = audit(laplace_query, 0.1, relation="queries", pairs=pair, budget=budget, batched=True, seed=seed)
        rare_side = min(result.witness["false_positives"], result.witness["false_negatives"])
        assert rare_side > 0.25 * result.evaluation_trials, result.witness
        assert 0.095 < result.epsilon_lower <= 0.1


def test_the_increments_statistic_refutes_what_the_other_statistics_miss_on_a_short_running_total():
    """The default suite's check of the increments' power (the zoo's 10-entry prefix sum below is slow): cumsum(x +
    Lap(4)) over 4 entries is 1-DP when every entry moves by 1 (each increment is Laplace with scale 4), and its
    strongest event bounds the 4 increments at once (probabilities (0.5 e^-0.25)^4 and 0.5^4). Claimed at 0.7,
    the increments' statistics refute it (0.80-0.97 on seeds 0-9 at these sizes, ~0.5 s) and the others do not
    (0.44-0.57: no coordinate, projection, histogram or linear score reaches the joint event)."""
    def running_total(data, rng, n):
        return np.cumsum(data[None, :] + rng.laplace(scale=4.0, size=(n, 4)), axis=1)

    pair = (np.ones(4), np.zeros(4))
    base = Budget("t", screen=1_000, select=60_000, evaluate=40_000, top=1, max_pairs=1, batch_factors=(1, 1, 1))
    without = audit(running_total, 0.7, relation="queries", pairs=pair, budget=base, batched=True, seed=0)
    with_ = audit(running_total, 0.7, relation="queries", pairs=pair, budget=replace(base, increments=True),
                  batched=True, seed=0)
    assert without.consistent and without.epsilon_lower < 0.6, without.witness["statistic"]
    assert not with_.consistent and 0.7 < with_.epsilon_lower <= 1.0
    assert "increment" in with_.witness["statistic"]


@pytest.mark.slow
def test_the_increments_statistic_refutes_an_understated_prefix_sum_claim_the_other_statistics_miss():
    # (Slow, ~20 s: 2 M runs; the short running total above is the default suite's check.)
    # PrefixSum releases cumsum(x + Lap(10)) over 10 entries: 1-DP when every entry moves by 1, and its strongest
    # events bound every increment at once ("all increments < 0" on ones vs zeros: probabilities (0.5 e^-0.1)^10
    # and 0.5^10, ratio e^1). Claimed at 0.6, it is refuted with the increments' statistics (0.72-0.90 on seeds
    # 0-3 at these sizes) and not without (0.42-0.46: no coordinate, projection, histogram or linear score)
    z = ZOO["prefix_sum"]
    pair = (np.ones(10), np.zeros(10))
    base = Budget("t", screen=1_000, select=600_000, evaluate=400_000, top=1, max_pairs=1, batch_factors=(1, 1, 1))
    without = audit(z.batched(), 0.6, relation=z.relation, pairs=pair, budget=base, batched=True, seed=0)
    with_ = audit(z.batched(), 0.6, relation=z.relation, pairs=pair, budget=replace(base, increments=True),
                  batched=True, seed=0)
    assert without.consistent and without.epsilon_lower < 0.5, without.witness["statistic"]
    assert not with_.consistent and 0.6 < with_.epsilon_lower <= 1.0
    assert "increment" in with_.witness["statistic"]
