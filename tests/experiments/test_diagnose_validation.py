"""The validation study's arithmetic: leave-one-data-set-out calibration, the metrics, the naive predictors."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis.experiments import diagnosis_validation as V


def records(seed: int = 0, *, perfect: bool = False) -> pd.DataFrame:
    """Three sources x two cells x three seeds x three groups, actual = 1.5 clip part + noise part + noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for source in ("adult", "bank", "german"):
        for regime in ("defaults", "noisy"):
            base = {"g0": -0.10, "g1": -0.05, "g2": 0.0}
            for s in range(3):
                for g, level in base.items():
                    clip = level + rng.normal(0, 0.002)
                    noise = -0.01 + rng.normal(0, 0.002)
                    actual = 1.5 * clip + noise + (0 if perfect else rng.normal(0, 0.003))
                    rows.append({"setting": f"{source}-x", "source": source, "regime": regime, "sigma": 1.0,
                                 "seed": s, "group": g, "n_train": {"g0": 1000, "g1": 300, "g2": 50}[g],
                                 "n_test": 100, "predicted": clip + noise, "low": clip + noise - 0.02,
                                 "high": clip + noise + 0.02, "half_width": 0.02, "clip_part": clip,
                                 "noise_part": noise, "actual": actual, "sgd_accuracy": 0.8,
                                 "grad_norm": {"g0": 1.0, "g1": 2.0, "g2": 3.0}[g],
                                 "clip_fraction": {"g0": 0.9, "g1": 0.5, "g2": 0.1}[g], "mechanism": "clipping",
                                 "predicted_collapse": False, "actual_collapse": False})
    return pd.DataFrame(rows)


def test_calibration_is_leave_one_dataset_out():
    """Every record's calibration was fitted on the other sources only; it fails if its own source is in it."""
    out = V.leave_one_dataset_out(records())
    for source, part in out.groupby("source"):
        used = set(part["calibration_sources"].iloc[0].split(","))
        assert source not in used and used == {"adult", "bank", "german"} - {source}
        assert part["calibration_sources"].nunique() == 1
    # the fitted scale is the data's 1.5 (learnt from the other sources), so the calibrated error is smaller
    assert (out["calibrated"] - out["actual"]).abs().mean() < (out["predicted"] - out["actual"]).abs().mean()


def test_the_lodo_check_can_fail(monkeypatch):
    """A calibration that leaks the evaluated source is refused (the guard the LODO test relies on)."""
    real_fit = V.fit_calibration

    def leaky(others, **kwargs):
        everything = records().assign(dataset=records()["source"])
        return real_fit(everything, **kwargs)

    monkeypatch.setattr(V, "fit_calibration", leaky)
    with pytest.raises(ValueError, match="not out of sample"):
        V.leave_one_dataset_out(records())


def test_a_perfect_ranking_scores_one_and_the_naive_directions_are_their_hypotheses():
    table = V.evaluate(records(perfect=True)).set_index("predictor")
    assert table.loc["diagnosis", "spearman"] == pytest.approx(1.0)
    assert table.loc["diagnosis", "most_hurt"] == 1.0
    # the uncalibrated parts are off by the data's factor 1.5 on the clipping part: the intervals miss, the
    # leave-one-out calibration learns the factor from the other sources and covers
    assert table.loc["diagnosis", "coverage"] < 0.5
    assert table.loc["calibrated", "coverage"] >= 0.9
    # here the largest group loses most: "smaller loses more" is exactly wrong, "more clipped loses more" right
    assert table.loc["size", "spearman"] == pytest.approx(-1.0) and table.loc["size", "most_hurt"] == 0.0
    assert table.loc["clip_fraction", "spearman"] == pytest.approx(1.0)
    assert table.loc["grad_norm", "spearman"] == pytest.approx(-1.0)
    assert table.loc["diagnosis", "chance"] == pytest.approx(1 / 3)
    assert set(table.index) == {"diagnosis", "calibrated", *V.NAIVE}


def test_cells_that_cannot_be_called_are_counted():
    r = records()
    r.loc[r["group"] == "g1", "actual"] = r.loc[r["group"] == "g0", "actual"].to_numpy() + 1e-4
    metrics = V.per_cell_metrics(r)
    assert not metrics["callable"].any()
    assert V.evaluate(r).set_index("predictor").loc["diagnosis", "callable_cells"] == 0


def test_the_collapse_check_reads_accuracy_as_a_label_share():
    from dpfair_analysis.data import synthetic_groups

    data = synthetic_groups(sizes=(30, 20), seed=0)
    shares = {name: float((data.y[data.group == k] == 1).double().mean()) for k, name in enumerate(data.group_names)}
    assert V._collapsed(pd.Series(shares), data)
    assert not V._collapsed(pd.Series({n: s + 0.01 for n, s in shares.items()}), data)


def test_the_full_profile_covers_the_issue_grid_and_quick_is_a_subset_of_it():
    full = V.profile_settings("full")
    assert len(full.seeds) >= 3 and full.settings is None  # every setting
    assert all(len(r.sigmas) >= 3 for r in full.regimes)  # >= 3 noise levels in each regime
    quick = V.profile_settings("quick")
    assert {r.name for r in full.regimes} == {r.name for r in quick.regimes} == {"defaults", "noisy"}
    assert set(quick.settings) < {s.name for s in V.SETTINGS} and len({
        s.source for s in V.SETTINGS if s.name in quick.settings}) >= 3  # leave-one-source-out needs sources
    assert len(V.SETTINGS) >= 8 and {s.source for s in V.SETTINGS} >= {"adult", "compas", "german", "bank", "dutch",
                                                                      "mnist", "synthetic"}


def records_with_split(seed: int = 0) -> pd.DataFrame:
    """records() with the per-split predictions and the probabilities the study records since issue 39."""
    r = records(seed)
    r["split_predicted"] = r["predicted"] + 0.001
    r["split_low"], r["split_high"] = r["low"], r["high"]
    r["p_most_hurt"] = r["group"].map({"g0": 0.8, "g1": 0.15, "g2": 0.05})
    r["split_p_most_hurt"] = r["p_most_hurt"]
    return r


def test_width_to_spread_is_the_interval_width_over_the_groups_spread_of_measured_costs():
    r = records_with_split()
    widths = V.interval_widths(r)["diagnosis"]
    # every interval is 0.04 wide; per cell the groups' mean actual costs span about 1.5 x 0.10 + noise
    spreads = [cell.groupby("group")["actual"].mean().agg(lambda s: s.max() - s.min())
               for _, cell in r.groupby(V.CELL)]
    assert widths["width_to_spread"] == pytest.approx(np.mean([0.04 / s for s in spreads]))
    table = V.evaluate(r).set_index("predictor")
    assert table.loc["diagnosis", "width_to_spread"] == pytest.approx(widths["width_to_spread"])
    assert "per_split" in table.index and np.isnan(table.loc["size", "width_to_spread"])


def test_most_hurt_calibration_counts_who_was_most_hurt_in_each_seeds_run():
    r = records_with_split()
    table = V.most_hurt_calibration(r).set_index("bin")
    # g0 (p = 0.8) is the most hurt in every run of this table; g1 and g2 never
    assert table["records"].sum() == len(r)
    top = table[np.isclose(table["predicted"], 0.8)]
    assert float(top["observed"].iloc[0]) == 1.0
    assert float(table["brier"].iloc[0]) == pytest.approx(((0.8 - 1) ** 2 + 0.15 ** 2 + 0.05 ** 2) / 3)
    shuffled = r.assign(actual=r.groupby(V.CELL + ["seed"])["actual"].transform(lambda s: s.to_numpy()[::-1]))
    assert V.most_hurt_calibration(shuffled)["brier"].iloc[0] > table["brier"].iloc[0]  # it can fail


def test_single_call_vs_expectation_marks_cells_where_the_modes_name_different_groups():
    """Records before issue 51 (no verdict columns): each mode names its highest P(most hurt), not its lowest
    predicted cost (a split cost of -1 for g1 changes nothing; its P does)."""
    r = records_with_split()
    adult0 = (r["seed"] == 0) & (r["source"] == "adult")
    r.loc[adult0 & (r["group"] == "g1"), "split_predicted"] = -1.0
    assert not V.single_call_vs_expectation(r)["differ"].any()
    r.loc[adult0, "split_p_most_hurt"] = r.loc[adult0, "group"].map({"g0": 0.1, "g1": 0.85, "g2": 0.05})
    table = V.single_call_vs_expectation(r)
    assert set(table["differ"]) == {True, False}
    differ = table[table["differ"]]
    assert (differ["setting"] == "adult-x").all() and (differ["per_split_names"] == "g1").all()
    assert (differ["expectation_right"]).all() and not differ["per_split_right"].any()


def test_the_study_reads_each_calls_verdict_and_a_tie_is_never_right():
    """Issue 51: the study's names are the diagnosis' verdicts (columns named/tied from most_hurt_group), a call
    that cannot be called lists its tied groups and counts as a miss, in single_call_vs_expectation and in
    evaluate's most_hurt_named."""
    r = records_with_split()
    r["named"], r["tied"] = r["group"] == "g0", False
    r["split_named"], r["split_tied"] = r["named"], False
    adult0 = (r["seed"] == 0) & (r["source"] == "adult")
    r.loc[adult0, "split_named"] = False
    r.loc[adult0, "split_tied"] = r.loc[adult0, "group"].isin(["g0", "g1"])
    table = V.single_call_vs_expectation(r)
    differ = table[table["differ"]]
    assert (differ["setting"] == "adult-x").all() and len(differ) == 2
    assert (differ["per_split_names"] == "cannot be called: g0, g1").all() and not differ["per_split_right"].any()
    assert table["expectation_right"].all()
    r.loc[(r["seed"] == 1) & (r["source"] == "bank"), "named"] = False        # bank's seed-1 calls: tied
    out = V.evaluate(r).set_index("predictor")
    metrics = V.per_cell_metrics(r)
    assert out.loc["diagnosis", "most_hurt_named"] == pytest.approx(metrics["named_hit"].mean())
    assert out.loc["diagnosis", "most_hurt_named"] == pytest.approx((4 * 1 + 2 * (2 / 3)) / 6)
    assert out.loc["diagnosis", "named_share"] == pytest.approx((4 * 1 + 2 * (2 / 3)) / 6)
    assert np.isnan(out.loc["size", "most_hurt_named"])


# ----------------------------------------------------------------------------- the recommendations against real runs
def test_each_recommendation_runs_as_the_comparison_it_names():
    from dpfair_analysis.experiments.compare import CompareConfig

    config = CompareConfig(methods=("sgd", "dpsgd"), clip_bound=0.5, noise_multiplier=1.0)
    method, _ = V.option_config(config, {"changes": {"method": "dpsgdf"}})
    assert method.methods == ("sgd", "dpsgdf") and method.equal_privacy
    bound, name = V.option_config(config, {"changes": {"clip_bound": 1.7}})
    assert bound.clip_bound == 1.7 and name == "dpsgd" and bound.noise_multiplier == 1.0
    batch, _ = V.option_config(config, {"changes": {"batch_size": 1024, "noise_multiplier": 2.5}})
    assert batch.train.batch_size == 1024 and batch.noise_multiplier == 2.5 and batch.clip_bound == 0.5
    assert V.option_config(config, {"changes": {"method": "mitigation"}}) is None  # not a method of compare


def recommendation_records(measured) -> pd.DataFrame:
    """Four cells x two seeds of one kind; the measured change per cell from ``measured(predicted)``."""
    rows = []
    for cell, predicted in enumerate((-0.04, -0.01, 0.02, 0.05)):
        for seed in (0, 1):
            rows.append({"setting": f"s{cell}", "regime": "defaults", "sigma": 1.0, "seed": seed,
                         "action": "dpsgdf", "predicted_worst_change": predicted,
                         "measured_worst_change": measured(predicted) + (0.001 if seed else -0.001),
                         "measured": True})
    rows.append({**rows[0], "action": "mitigation", "measured_worst_change": np.nan, "measured": False})
    return pd.DataFrame(rows)


def test_recommendation_agreement_counts_signs_and_ranks_per_kind():
    right = V.recommendation_agreement(recommendation_records(lambda p: 2 * p)).set_index("action")
    assert right.loc["dpsgdf", "sign_agreement"] == 1 and right.loc["dpsgdf", "spearman"] == pytest.approx(1)
    assert right.loc["dpsgdf", "cells"] == 4 and "mitigation" not in right.index  # unmeasured: left out
    assert right.loc["dpsgdf", "helped"] == 2
    wrong = V.recommendation_agreement(recommendation_records(lambda p: -p)).set_index("action")
    assert wrong.loc["dpsgdf", "sign_agreement"] == 0 and wrong.loc["dpsgdf", "spearman"] == pytest.approx(-1)
    # within the tolerance a change counts as none: -0.01 predicted against -0.01 measured agree, 0.02 against 0
    tolerant = V.recommendation_agreement(recommendation_records(lambda p: p if abs(p) > 0.015 else 0.0),
                                          tolerance=0.015).set_index("action")
    assert tolerant.loc["all", "sign_agreement"] == 1


def test_the_recommendation_check_json_is_plain_json():
    import json

    payload = V.recommendation_check_json(recommendation_records(lambda p: p))
    text = json.dumps(payload, allow_nan=False)
    assert payload["profile"] == "recommendations" and "agreement_negligible" in text
    assert {"table", "cells", "rule", "resolution_se"} <= set(payload)
    assert V.profile_settings("recommendations").options.recommendations
    assert len(V.profile_settings("recommendations").seeds) >= 5  # enough seeds for a standard error


def test_the_recommendation_summary_is_generated_from_the_check():
    """Its numbers are the payload's: advice that is always right reads 100%; flipping every measured sign makes
    the same text say 0% and name each resolved change it got wrong."""
    right = V.recommendation_check_summary(V.recommendation_check_json(recommendation_records(lambda p: 3 * p)))
    assert "4 (kind, cell) pairs over 5 seeds" in right and "Plain signs agree in 100%" in right
    assert "Wrong on a resolved change" not in right
    wrong = V.recommendation_check_summary(V.recommendation_check_json(recommendation_records(lambda p: -3 * p)))
    assert "Plain signs agree in 0%" in wrong
    assert wrong.count("Wrong on a resolved change: dpsgdf") == 4  # every cell: each change is resolved


def test_the_resolution_rule_on_its_cases():
    # (predicted, measured mean, se) -> outcome: the rule as RESOLUTION_RULE states it
    cases = [(0.02, 0.03, 0.01, "agrees"),       # signed, resolved, same sign
             (0.02, -0.03, 0.01, "wrong"),       # signed, resolved, other sign
             (0.02, 0.03, 0.02, "unresolved"),   # |mean| < 2 se: the runs cannot tell
             (0.02, 0.004, 0.0, "unresolved"),   # resolved by se but under the negligible 0.005
             (1e-7, 0.0, 0.0, "agrees"),         # negligible predicted, nothing measured
             (1e-7, 0.01, 0.008, "agrees"),      # negligible predicted, unresolved
             (1e-7, -0.03, 0.005, "wrong"),      # negligible predicted, resolved change
             (0.02, 0.03, np.nan, "unresolved")]  # one seed: no standard error, nothing resolved
    for predicted, mean, se, outcome in cases:
        got = V.recommendation_outcome(V.predicted_sign(predicted), V.resolved_sign(mean, se))
        assert got == outcome, (predicted, mean, se)


@given(st.floats(-1, 1), st.floats(-1, 1), st.floats(0, 1), st.floats(1, 10))
@settings(max_examples=200, deadline=None)
def test_the_resolution_rule_is_symmetric_and_more_seeds_never_unresolve(predicted, mean, se, shrink):
    outcome = V.recommendation_outcome(V.predicted_sign(predicted), V.resolved_sign(mean, se))
    assert outcome == V.recommendation_outcome(V.predicted_sign(-predicted), V.resolved_sign(-mean, se))
    resolved = V.resolved_sign(mean, se)
    if resolved != 0:  # a smaller standard error keeps a resolved sign
        assert V.resolved_sign(mean, se / shrink) == resolved
        assert np.sign(mean) == resolved and abs(mean) > V.NEGLIGIBLE


def test_recommendation_cells_carry_mean_standard_error_and_n():
    cells = V.recommendation_cells(recommendation_records(lambda p: 2 * p)).set_index("setting")
    assert list(cells["n"]) == [2] * 4 and "mitigation" not in set(cells["action"])  # unmeasured: left out
    assert cells.loc["s0", "measured_worst_change"] == pytest.approx(-0.08)
    assert cells.loc["s0", "measured_se"] == pytest.approx(np.std([-0.081, -0.079], ddof=1) / np.sqrt(2))
    assert cells.loc["s0", "measured_per_seed"] == pytest.approx([-0.081, -0.079])
    # -0.02 predicted against -0.02 +- 0.001 measured: resolved, same sign; every cell agrees
    assert list(cells["outcome"]) == ["agrees"] * 4
    table = V.recommendation_table(recommendation_records(lambda p: -p)).set_index("action")
    assert table.loc["dpsgdf", ["sign_agreement", "sign_agreement_negligible", "agreement"]].tolist() == [0, 0, 0]
    assert table.loc["dpsgdf", "resolved"] == 4 and table.loc["dpsgdf", "wrong"] == 4
