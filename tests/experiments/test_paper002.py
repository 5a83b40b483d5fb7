"""Paper 002's comparison: all six methods at equal privacy from one command, the inequality indices in
its rows and JSON, the claim verdicts, and one-line errors for bad settings."""

import json
import math
from dataclasses import replace

import pandas as pd
import pytest

from dpfair_analysis.cli import main
from dpfair_analysis.experiments.compare import CompareConfig, dpsgd_epsilon_target, load_data, run_compare, \
    split_for_seed
from dpfair_analysis.experiments import cache as cache_module, fairdp as paper_module
from dpfair_analysis.experiments.cache import RunCache, RunRecords
from dpfair_analysis.verify.reproduction import claim_verdicts, sweep_verdicts
from dpfair_analysis.experiments.fairdp import PAPER002_METHODS, SWEEP_FIGURES, \
    fairdp_bounds_across, fairdp_shrink_only_sigma, membership_inference, preset, SWEEPS, save_sweep_figures, sweep, \
    sweep_config, sweep_table, table1
from dpfair_analysis.fairness.inequality import inequality_indices
from dpfair_analysis.privacy.accounting import ledger_from_records
from dpfair_analysis.training.loop import TrainConfig
from dpfair_analysis.training.methods.dpfedavg import FedAvgOptions

SIX = ",".join(PAPER002_METHODS)


@pytest.fixture(scope="module")
def synthetic_six():
    config = CompareConfig(dataset="synthetic", methods=PAPER002_METHODS, noise_multiplier=1.0, clip_bound=0.5,
                           method_options={"dpfedavg": FedAvgOptions(clients=200)}, train=TrainConfig(epochs=2, batch_size=64, lr=0.1, delta=1e-5),
                           seeds=(0, 1))
    return run_compare(config, progress=False)


def test_every_private_method_stops_at_dpsgds_epsilon(synthetic_six):
    result = synthetic_six
    target = dpsgd_epsilon_target(result.config, result.n_train)
    runs = pd.DataFrame(result.runs)
    for method in PAPER002_METHODS[1:]:
        for eps in runs.loc[runs["method"] == method, "epsilon"]:
            assert eps <= target * (1 + 1e-9), method
            assert eps > 0.8 * target, method  # and spends most of it
    steps = runs.groupby("method")["steps"].first()
    assert steps["optq"] == steps["dpsgd"]  # joint multiplier = sigma: DPSGD's steps exactly
    assert steps["fairdp"] < steps["dpsgd"] and steps["dpsgdf"] < steps["dpsgd"]
    fed = runs[runs["method"] == "dpfedavg"].iloc[0]
    assert fed["privacy_unit"].startswith("client") and fed["client_sampling_rate"] == pytest.approx(
        round(64 * 200 / result.n_train) / 200)


def test_epsilons_recomputed_from_the_saved_ledgers(synthetic_six):
    """The cache keeps each run's ledger records; re-accounting them gives the reported epsilon."""
    from dpfair_analysis.experiments.compare import _run_one, split_for_seed, load_data

    config = synthetic_six.config
    full, official = load_data(config)
    train_data, test_data = split_for_seed(config, full, official, seed=0)
    for method in ("optq", "fairdp", "dpfedavg"):
        run = _run_one(config, method, train_data, test_data, seed=0, progress=False)
        assert ledger_from_records(run["ledger"]).epsilon(1e-5) == pytest.approx(run["info"]["epsilon"], rel=1e-9)


def test_inequality_indices_are_those_of_the_per_group_accuracies(synthetic_six):
    result = synthetic_six
    per_seed = result.per_seed[~result.per_seed["group"].isin(["all", "max_gap"])]
    for (method, seed), rows in per_seed.groupby(["method", "seed"]):
        expected = inequality_indices(rows["accuracy"].to_numpy())
        got = result.inequality_per_seed.query("method == @method and seed == @seed").set_index("index")["value"]
        for index, value in expected.items():
            assert got[index] == pytest.approx(value, rel=1e-12)
    table = result.inequality.set_index("method")
    assert list(table.index) == list(PAPER002_METHODS)
    assert table.loc["sgd", "gini"] == pytest.approx(
        result.inequality_per_seed.query("method == 'sgd' and index == 'gini'")["value"].mean())
    payload = result.to_json()
    assert [r["method"] for r in payload["inequality"]] == list(PAPER002_METHODS)
    assert {"atkinson", "gini", "mld", "theil", "gini_sd"} <= set(payload["inequality"][0])
    json.dumps(payload)  # serialisable


def test_inequality_of_a_zero_accuracy_group_is_its_limit():
    values = inequality_indices([0.0, 0.9])
    # s = x / mean = (0, 2): Atkinson(0.5) = 1 - (mean sqrt(s))^2 = 1 - (sqrt(2)/2)^2; Gini = (n - 1)/n; Theil = log 2
    assert values["mld"] == math.inf and values["atkinson"] == pytest.approx(0.5)
    assert values["gini"] == pytest.approx(0.5) and values["theil"] == pytest.approx(math.log(2))
    assert inequality_indices([0.0, 0.9], atkinson_epsilon=1.0)["atkinson"] == 1.0


def _fake_result(costs: dict, inequality: dict, dataset="adult"):
    class Fake:
        pass

    groups = ["all", "Male", "Female"]
    rows = []
    for method, values in costs.items():
        for g, v in zip(groups, values):
            rows.append({"method": method, "group": g, "cost": v, "cost_sd": 0.01, "accuracy": 0.8 + v,
                         "accuracy_sd": 0.0})
    fake = Fake()
    fake.table = pd.DataFrame(rows)
    fake.inequality = pd.DataFrame([{"method": m, **dict(zip(("atkinson", "gini", "mld", "theil"), v))}
                                    for m, v in inequality.items()])
    return fake


def test_claim_verdicts_follow_the_numbers_and_can_fail():
    costs = {"sgd": [0, 0, 0], "dpsgd": [-0.06, -0.08, -0.03], "optq": [-0.06, -0.08, -0.03],
             "fairdp": [-0.002, 0.0, -0.008]}
    ineq = {"sgd": [1, 1, 1, 1], "dpsgd": [2, 2, 2, 2], "optq": [2, 2, 2, 2], "fairdp": [1.1, 0.9, 1.2, 1.0]}
    verdicts = claim_verdicts({"adult": _fake_result(costs, ineq)}).set_index("claim")
    assert verdicts["holds"].all() and len(verdicts) == 4
    worse = {**costs, "optq": [0.01, 0.02, -0.01], "fairdp": [-0.1, -0.1, -0.1]}
    unfair = {**ineq, "optq": [1, 1, 1, 1], "fairdp": [1.5, 1.5, 1.5, 0.9]}
    verdicts = claim_verdicts({"adult": _fake_result(worse, unfair)}).set_index("claim")
    assert not verdicts["holds"].any()
    # fairer than SGD counts as "as fair as SGD"; an infinite index is left out
    fairer = {**ineq, "fairdp": [0.5, 0.5, float("inf"), 0.5], "sgd": [1, 1, float("inf"), 1]}
    row = claim_verdicts({"adult": _fake_result(costs, fairer)}).set_index("claim").loc["sgd_like_inequality"]
    assert row["holds"] and "of 3 indices" in row["detail"]


def test_presets_follow_paper_000_settings():
    adult, mnist = preset("adult", "full"), preset("mnist", "full")
    assert adult.methods == PAPER002_METHODS and len(adult.seeds) >= 3
    assert (adult.train.batch_size, adult.train.epochs, adult.noise_multiplier, adult.clip_bound) == (256, 20, 1.0, 0.5)
    assert mnist.dataset == "mnist-full" and mnist.test_split == "official"
    assert mnist.train_group_fraction == {"8": 500 / 5851} and mnist.train.epochs == 60
    quick = preset("mnist", "quick")
    assert quick.dataset == "mnist" and quick.train.epochs == 1 and len(quick.seeds) == 1


def test_a_table_of_fewer_methods_reuses_the_larger_tables_runs(tmp_path):
    cache = RunCache(tmp_path)
    larger = table1("adult", profile="quick", methods=("sgd", "dpsgd", "fairdp"), cache=cache)
    smaller = table1("adult", profile="quick", methods=("sgd", "fairdp"), cache=cache)
    assert list(dict.fromkeys(smaller.table["method"])) == ["sgd", "fairdp"]
    assert (cache.hits, cache.misses) == (2, 3)
    pd.testing.assert_frame_equal(larger.table.query("method == 'fairdp'").reset_index(drop=True),
                                  smaller.table.query("method == 'fairdp'").reset_index(drop=True))


@pytest.mark.parametrize("dataset", ["adult", "mnist"])
@pytest.mark.parametrize("parameter", list(SWEEP_FIGURES))
def test_each_swept_value_reaches_every_method_dpfedavg_included(dataset, parameter):
    """A swept value must change what each method runs; DP-FedAvg's learning rate is its clients' step."""
    base = preset(dataset, "full", seeds=1)
    n_train = 40_000
    low, high = SWEEPS[parameter][dataset][0], SWEEPS[parameter][dataset][-1]
    runs = {value: sweep_config(base, parameter, value, profile="full") for value in (low, high)}
    fed = {value: config.run_config("dpfedavg", n_train=n_train, seed=0) for value, config in runs.items()}
    policies = {value: config.policy("dpsgd") for value, config in runs.items()}
    if parameter == "lr":
        assert [runs[v].train.learning_rate(n_train) for v in (low, high)] == [low, high]
        assert [fed[v].local_lr for v in (low, high)] == [low, high]
        assert fed[high].update_clip / fed[low].update_clip == pytest.approx(high / low)
    elif parameter == "batch_size":
        assert [runs[v].train.batch_size for v in (low, high)] == [low, high]
        assert fed[high].clients_per_round > fed[low].clients_per_round
    else:
        assert [policies[v].noise_multiplier for v in (low, high)] == [low, high]
        assert [fed[v].noise_multiplier for v in (low, high)] == [low, high]


def test_sweep_figures_draw_each_parameter_from_its_own_runs(tmp_path):
    values = {"lr": (0.01, 0.1), "batch_size": (64, 256), "noise_multiplier": (1.0, 2.0)}
    rows = save_sweep_figures("adult", tmp_path, profile="quick", values=values, methods=("sgd", "dpsgd"),
                              cache=RunCache(tmp_path / "cache"))
    for parameter, number in SWEEP_FIGURES.items():
        assert (tmp_path / f"figure{number}_{parameter}_adult.png").stat().st_size > 10_000
        drawn = pd.read_csv(tmp_path / f"figure{number}_{parameter}_adult.csv")
        assert sorted(drawn["value"].unique()) == sorted(values[parameter])
    noise = rows.query("parameter == 'noise_multiplier' and method == 'dpsgd' and group == 'all'")
    assert noise.set_index("value")["epsilon"][1.0] > noise.set_index("value")["epsilon"][2.0]  # more noise, less eps


def _no_training(*args, **kwargs):
    raise AssertionError("trained although every run is recorded")


def test_recorded_sweeps_and_bounds_are_served_from_the_records_file_alone(tmp_path, monkeypatch):
    """Runs computed once and recorded (rows per run in a JSON file) are served from that file with no
    run cache and no training: the same rows, and a hand-edited row comes back as edited (the file, not a
    recomputation, answers). A value with one run missing trains; rows from other code are recomputed."""
    records = RunRecords(tmp_path / "runs.json")
    kwargs = dict(profile="quick", methods=("sgd", "dpsgd", "fairdp"))
    first = sweep("adult", "lr", (0.05,), **kwargs, cache=RunCache(None), records=records)
    bounds = fairdp_bounds_across("adult", "lr", (0.05,), profile="quick", cache=RunCache(None), records=records)
    assert records.misses == 3 + 1 and set(first["method"]) == {"sgd", "dpsgd", "fairdp"}
    assert first.query("method == 'dpsgd'")["epsilon"].gt(0).all() and first.query("method == 'sgd'")["epsilon"].isna().all()

    monkeypatch.setattr(paper_module, "run_compare", _no_training)
    served = sweep("adult", "lr", (0.05,), **kwargs, cache=RunCache(None), records=RunRecords(records.path))
    pd.testing.assert_frame_equal(served, first)
    pd.testing.assert_frame_equal(fairdp_bounds_across("adult", "lr", (0.05,), profile="quick", cache=RunCache(None),
                                                       records=RunRecords(records.path)), bounds)
    stored = json.loads(records.path.read_text())
    sgd_rows = next(e["rows"] for e in stored["records"].values() if e["label"].startswith("sweep rows: adult sgd"))
    sgd_rows[0]["accuracy"] = 0.123  # the first row of the sweep: SGD's, group "all"
    records.path.write_text(json.dumps(stored))
    assert sweep("adult", "lr", (0.05,), **kwargs, records=RunRecords(records.path))["accuracy"].iloc[0] == 0.123

    with pytest.raises(AssertionError, match="trained although"):  # Opt-Q at this value is not recorded
        sweep("adult", "lr", (0.05,), profile="quick", methods=("sgd", "optq"), records=RunRecords(records.path))
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "another version of the code")
    with pytest.raises(AssertionError, match="trained although"):
        sweep("adult", "lr", (0.05,), **kwargs, records=RunRecords(records.path))


def test_sweep_table_averages_seeds_per_value_and_keeps_the_figure_groups():
    """Two seeds of two methods at two values: each cell is the mean over seeds of that (value, method, group);
    groups the figures do not draw are left out; epsilon is the value's."""
    rows = pd.DataFrame([{"parameter": "lr", "value": value, "method": method, "seed": seed, "group": group,
                          "accuracy": accuracy, "epsilon": eps}
                         for value, eps in ((0.01, 2.0), (0.1, 2.0))
                         for method in ("sgd", "fairdp")
                         for seed in (0, 1)
                         for group, accuracy in (("all", 0.5 + seed / 10 + value), ("Male", 0.2 * seed),
                                                 ("Female", 0.9 - (method == "fairdp") * 0.1 * seed),
                                                 ("Other", -1.0))])
    table = sweep_table(rows, "adult")
    assert list(table.columns) == ["all", "Male", "Female", "epsilon"]
    assert len(table) == 4
    assert table.loc[("lr", 0.1, "sgd"), "all"] == pytest.approx(0.65)
    assert table.loc[("lr", 0.01, "fairdp"), "Male"] == pytest.approx(0.1)
    assert table.loc[("lr", 0.01, "fairdp"), "Female"] == pytest.approx(0.85)
    assert table.loc[("lr", 0.01, "sgd"), "Female"] == pytest.approx(0.9)
    assert (table["epsilon"] == 2.0).all()


def _sweep_rows(accuracy):
    """Sweep rows of one seed from {(value, method): (all, Male, Female)}."""
    return pd.DataFrame([{"parameter": "batch_size", "value": value, "method": method, "seed": 0, "group": group,
                          "accuracy": a, "epsilon": 1.0}
                         for (value, method), triple in accuracy.items()
                         for group, a in zip(("all", "Male", "Female"), triple)])


def test_sweep_verdicts_hold_only_where_fairdp_leads_at_every_value():
    leads = {(64, "sgd"): (0.9, 0.9, 0.9), (64, "dpsgd"): (0.70, 0.60, 0.80), (64, "fairdp"): (0.80, 0.70, 0.85),
             (512, "sgd"): (0.9, 0.9, 0.9), (512, "dpsgd"): (0.70, 0.60, 0.80), (512, "fairdp"): (0.75, 0.70, 0.85)}
    verdicts = sweep_verdicts(_sweep_rows(leads), "adult").set_index("group")
    assert verdicts["holds"].all() and list(verdicts.index) == ["all", "Male", "Female"]
    assert verdicts.loc["all", "margin"] == pytest.approx(0.05)  # the smaller lead, at 512
    # DPSGD ahead of FairDP on Female at 512 by 0.02 (fails), overall by 0.004 (< tolerance 0.005: holds)
    behind = {**leads, (512, "dpsgd"): (0.754, 0.60, 0.87)}
    verdicts = sweep_verdicts(_sweep_rows(behind), "adult").set_index("group")
    assert verdicts.loc["all", "holds"] and verdicts.loc["all", "margin"] == pytest.approx(-0.004)
    assert not verdicts.loc["Female", "holds"] and verdicts.loc["Female", "margin"] == pytest.approx(-0.02)
    detail = verdicts.loc["Female", "detail"]
    assert "1 of 2 values" in detail and "at 512 (dpsgd leads)" in detail
    assert not sweep_verdicts(_sweep_rows(behind), "adult", tolerance=0.001).set_index("group").loc["all", "holds"]


def test_shrink_only_sigma_of_the_presets():
    """Full MNIST (b = 256, R = 5, a = 4; the CNN's 431,080 parameters, tests/core/test_gradients.py):
    sigma* = 256 sqrt(34 / (6 x 431,080)) = 0.928, between Figure 6's 0.8 and 1; Adult's logistic
    regression (41 parameters) is far from it."""
    assert fairdp_shrink_only_sigma(preset("mnist", "full"), 431_080) == pytest.approx(0.92816, abs=1e-5)
    assert fairdp_shrink_only_sigma(preset("adult", "full"), 41) > 90


def test_above_the_shrink_only_sigma_fairdps_trainer_never_raises_a_bound(tmp_path):
    """The trainer's own FairDP run (quick MNIST: b = 26, so sigma* = 0.09) at sigma = 0.8: every step's
    target is 1 and no group's bound ever exceeds its initial C; at sigma = 0.05 < sigma* some target is below 1."""
    config = preset("mnist", "quick")
    assert fairdp_shrink_only_sigma(config, 431_080) < 0.1
    rows = fairdp_bounds_across("mnist", "noise_multiplier", (0.05, 0.8), profile="quick", cache=RunCache(tmp_path))
    above, below = rows[rows["sigma"] == 0.8], rows[rows["sigma"] == 0.05]
    assert (above["gamma_mean"] == 1.0).all() and (above["C_max"] <= config.clip_bound).all()
    assert (below["gamma_mean"] < 1.0).any()
    assert above["shrink_only"].all() and not below["shrink_only"].any()
    assert rows["sigma_star"].to_numpy() == pytest.approx(fairdp_shrink_only_sigma(config, 431_080))
    assert ((rows["at_floor"] >= 0) & (rows["at_floor"] <= 1)).all() and list(rows["group"].unique()) == ["2", "8"]


def test_a_larger_excess_cap_moves_the_shrink_only_sigma_past_the_run_and_lets_a_bound_grow(tmp_path):
    """sigma* rises with the cap R (R = 1000: 1.25 on quick MNIST), so the same sigma = 0.8 run that could
    only shrink its bounds at R = 5 now has targets below 1 and a bound above its initial C."""
    config = preset("mnist", "quick").with_options("fairdp", excess_cap=1000.0)
    assert fairdp_shrink_only_sigma(config, 431_080) > 1.0
    rows = fairdp_bounds_across("mnist", "noise_multiplier", (0.8,), profile="quick", excess_cap=1000.0,
                                cache=RunCache(tmp_path))
    assert (rows["excess_cap"] == 1000.0).all()
    assert (rows["gamma_mean"] < 1.0).all() and (rows["C_max"] > config.clip_bound).all()


def test_fairdps_shrink_only_sigma_grows_with_the_batch_and_the_trainer_follows_it(tmp_path):
    """Figure 5's prediction on the trainer's own runs: sigma* = b sqrt((a(1 + R) + 2R) / (6|1|)) is
    proportional to b, so at the preset's sigma = 0.8 a small batch is past it (every target 1, no bound above
    its initial C) and a large one is not (quick MNIST, whose batches are the figure's x 0.1: b = 6 and 400,
    sigma* = 0.022 and 1.45)."""
    rows = fairdp_bounds_across("mnist", "batch_size", (64, 4000), profile="quick", cache=RunCache(tmp_path))
    small, large = rows[rows["value"] == 64], rows[rows["value"] == 4000]
    assert (small["batch_size"] == 6).all() and (large["batch_size"] == 400).all()
    assert large["sigma_star"].iloc[0] / small["sigma_star"].iloc[0] == pytest.approx(400 / 6)
    assert small["shrink_only"].all() and not large["shrink_only"].any()
    assert (small["gamma_mean"] == 1.0).all() and (small["C_max"] <= preset("mnist", "quick").clip_bound).all()
    assert (large["gamma_mean"] < 1.0).any()


# ------------------------------------------------------------------ the command
def test_compare_runs_the_six_methods_and_reports_the_indices(capsys):
    code = main(["compare", "--data", "synthetic", "--methods", SIX, "--epochs", "1", "--batch-size", "64",
                 "--clients", "100", "--json", "--quiet", "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload["epsilon"]) == set(PAPER002_METHODS[1:])
    assert max(payload["epsilon"].values()) <= payload["epsilon"]["dpsgd"] * (1 + 1e-9)
    assert [r["method"] for r in payload["inequality"]] == list(PAPER002_METHODS)
    options = payload["settings"]["method_options"]
    assert options["optq"]["target_quantile"] == 0.5 and options["dpfedavg"]["clients"] == 100


def test_compare_prints_the_inequality_table(capsys):
    code = main(["compare", "--data", "synthetic", "--methods", "sgd,optq,fairdp", "--epochs", "1", "--batch-size",
                 "64", "--quiet", "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Gini" in out and "Theil" in out and "FairDP" in out


@pytest.mark.parametrize("argv,flag", [
    (["--target-quantile", "1.5"], "--target-quantile"),
    (["--target-quantile", "0"], "--target-quantile"),
    (["--target-quantile", "1"], "--target-quantile"),
    (["--clients", "0"], "--clients"),
    (["--clients", "-4"], "--clients"),
    (["--clients", "5000", "--methods", "sgd,dpfedavg"], "--clients"),
    (["--clients", "10", "--clients-per-round", "11", "--methods", "dpfedavg"], "--clients-per-round"),
    (["--clients-per-round", "0"], "--clients-per-round"),
    (["--optq-count-noise", "0.4", "--methods", "optq"], "--optq-count-noise"),
    (["--partition", "zipf"], "--partition"),
    (["--local-lr", "0"], "--local-lr"),
    (["--excess-cap", "-1"], "--excess-cap"),
])
def test_bad_settings_are_one_line_errors_naming_the_flag(capsys, argv, flag):
    code = main(["compare", "--data", "synthetic", "--epochs", "1", "--quiet", "--no-cache", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert flag in err[0] and "Traceback" not in err[0]


def test_compare_figures_are_drawn_with_dpfedavg(synthetic_six, tmp_path):
    """DP-FedAvg has no per-sample gradient steps (no 'batches' history): its panels say so instead of failing."""
    from dpfair_analysis.experiments.compare import save_compare_figures

    written = save_compare_figures(synthetic_six, tmp_path)
    assert {p.name for p in written} >= {"accuracy.png", "loss_grad_norm.png", "cost.png"}


def test_membership_inference_runs_at_a_setting_of_ones_own_and_states_its_epsilon():
    """``config`` replaces the preset (here: 2% of Adult's training rows, 2 epochs): the targets are half the
    smaller training split, every AUC has its standard error, and the private method's rows carry DPSGD's
    epsilon for that run (SGD's NaN)."""
    config = replace(preset("adult", "quick", seeds=1, methods=("sgd", "dpsgd")), model="mlp",
                     train_subsample=0.02)
    config = replace(config, train=replace(config.train, epochs=2, batch_size=16))
    rows = membership_inference("adult", methods=("sgd", "dpsgd"), n_shadows=2, n_targets=10_000,
                                      config=config)
    train_data, _ = split_for_seed(config, *load_data(config), seed=0)
    everyone = rows[rows["group"] == "all"]
    assert set(everyone["n_members"]) == {len(train_data) // 2}
    assert rows["auc_se"].between(0.0, 0.1).all()
    assert rows.loc[rows["method"] == "sgd", "epsilon"].isna().all()
    assert rows.loc[rows["method"] == "dpsgd", "epsilon"].to_numpy() == pytest.approx(
        dpsgd_epsilon_target(config, len(train_data)))
