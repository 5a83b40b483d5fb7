"""The reproduction protocol (experiments/tuning.py): budgets, selection on validation rows only, the
validation split carved from the training rows, three-valued verdicts, and the MNIST analyses."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis.experiments import mnist_tuning as M
from dpfair_analysis.experiments import tuning as T
from dpfair_analysis.verify import reproduction as R


# ----------------------------------------------------------------------------- budgets
def test_the_printed_configuration_comes_first_and_the_product_follows():
    grid = T.TuningGrid({"lr": (0.05, 0.01, 0.1), "sampling": ("shuffle", "poisson")},
                        printed={"lr": 0.1, "sampling": "poisson"})
    configurations = grid.configurations()
    assert configurations[0] == {"lr": 0.1, "sampling": "poisson"}
    assert len(configurations) == len(grid) == 6
    assert {tuple(c.values()) for c in configurations} == set(itertools.product((0.05, 0.01, 0.1),
                                                                                ("shuffle", "poisson")))
    assert grid.budget().startswith("6 configurations: lr in {0.05, 0.01, 0.1} x sampling in {shuffle, poisson}")
    assert grid.as_dict()["configurations"] == 6 and grid.head(2).configurations() == configurations[:2]


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 7), st.data())
def test_the_half_fraction_contains_the_printed_configuration_and_every_pair_of_values(k, data):
    """The half fraction (design="half") of k >= 3 two-level hyperparameters: 2^(k-1) configurations, each an even
    number of changes away from the printed one, and every pair of hyperparameters at all four combinations
    (resolution >= III: the projection onto any two is the full 2 x 2)."""
    names = [f"h{i}" for i in range(k)]
    values = {n: tuple(data.draw(st.lists(st.integers(-5, 5), min_size=2, max_size=2, unique=True))) for n in names}
    printed = {n: values[n][data.draw(st.integers(0, 1))] for n in names}
    grid = T.TuningGrid(values, printed, design="half")
    configurations = grid.configurations()
    assert len(configurations) == len(grid) == 2 ** (k - 1) and configurations[0] == printed
    assert len({tuple(c.values()) for c in configurations}) == len(configurations)
    assert all(sum(c[n] != printed[n] for n in names) % 2 == 0 for c in configurations)
    for a, b in itertools.combinations(names, 2):
        assert {(c[a], c[b]) for c in configurations} == set(itertools.product(values[a], values[b]))


@pytest.mark.parametrize("kwargs, message", [
    ({"values": {}, "printed": {}}, "at least one hyperparameter"),
    ({"values": {"lr": (0.1, 0.1)}, "printed": {"lr": 0.1}}, "distinct"),
    ({"values": {"lr": (0.1, 0.2)}, "printed": {"lr": 0.3}}, "is not one of"),
    ({"values": {"lr": (0.1, 0.2)}, "printed": {}}, "exactly"),
    ({"values": {"lr": (0.1, 0.2, 0.3)}, "printed": {"lr": 0.1}, "design": "half"}, "exactly two values"),
    ({"values": {"lr": (0.1, 0.2)}, "printed": {"lr": 0.1}, "design": "third"}, "design"),
])
def test_a_bad_budget_is_refused_naming_what_is_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        T.TuningGrid(**kwargs)


# ----------------------------------------------------------------------------- selection
@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([0.1, 0.5, 0.5, 0.9]), st.just(math.nan)), min_size=1, max_size=8),
       st.lists(st.one_of(st.sampled_from([0.2, 0.7]), st.just(math.nan)), min_size=1, max_size=8))
def test_selection_takes_the_best_validation_score_ties_to_the_printed_side_never_a_nan(a, b):
    scores = pd.DataFrame([{"method": m, "configuration_index": i, "score": s}
                           for m, values in (("a", a), ("b", b)) for i, s in enumerate(values)])
    chosen = T.select(scores).set_index("method")
    for method, values in (("a", a), ("b", b)):
        finite = [(s, -i) for i, s in enumerate(values) if not math.isnan(s)]
        expected = -max(finite)[1] if finite else 0
        assert chosen.loc[method, "configuration_index"] == expected


def test_selection_reads_the_validation_rows_and_never_the_test_rows():
    """A configuration best on the test rows but not on the validation rows is not chosen, and changing the test
    rows changes no choice."""
    rows = _mnist_rows({("sgd", 0): (0.90, 0.99), ("sgd", 1): (0.95, 0.50),
                        ("dpsgd", 0): (0.80, 0.95), ("dpsgd", 1): (0.85, 0.10)})
    chosen = T.printed_and_tuned(rows, groups=M.MNIST_GROUPS).query("which == 'tuned'").set_index("method")
    assert chosen.loc["sgd", "configuration_index"] == 1 and chosen.loc["dpsgd", "configuration_index"] == 1
    flipped = rows.assign(accuracy=np.where(rows["split"] == "test", 1 - rows["accuracy"], rows["accuracy"]))
    again = T.printed_and_tuned(flipped, groups=M.MNIST_GROUPS).query("which == 'tuned'").set_index("method")
    assert (again["configuration_index"] == chosen["configuration_index"]).all()


# ----------------------------------------------------------------------------- verdicts
def test_within_is_one_sided_and_a_nan_never_reproduces():
    assert R.within(0.70, 0.72, margin=0.02) and not R.within(0.69, 0.72, margin=0.02)
    assert R.within(0.99, 0.72, margin=0.0)  # better than printed: reproduces the achievement
    assert R.within(0.11, 0.10, margin=0.02, direction="at_most") and not R.within(0.13, 0.10, margin=0.02,
                                                                                   direction="at_most")
    assert not R.within(math.nan, 0.5, margin=1.0)
    with pytest.raises(ValueError, match="direction"):
        R.within(0.5, 0.5, margin=0.1, direction="both")
    with pytest.raises(ValueError, match="margin"):
        R.within(0.5, 0.5, margin=-0.1)


def test_three_valued_verdicts_prefer_the_printed_settings():
    assert R.three_valued(True, False) == R.PRINTED and R.three_valued(True, True) == R.PRINTED
    assert R.three_valued(False, True) == R.TUNED and R.three_valued(None, True) == R.TUNED
    assert R.three_valued(False, False) == R.NOT_REPRODUCED


def test_cell_verdicts_use_the_printed_sd_or_the_floor_and_rows_need_every_cell():
    cells = pd.DataFrame([
        {"row": "x", "printed": 0.80, "printed_sd": 0.05, "direction": "at_least", "at_printed": 0.76, "tuned": 0.70},
        {"row": "x", "printed": 0.10, "printed_sd": 0.01, "direction": "at_most", "at_printed": 0.13, "tuned": 0.11},
        {"row": "y", "printed": 0.80, "printed_sd": math.nan, "direction": "at_least", "at_printed": 0.70,
         "tuned": 0.79},
        {"row": "z", "printed": 0.80, "printed_sd": 0.0, "direction": "at_least", "at_printed": 0.70,
         "tuned": 0.95}])
    judged = R.cell_verdicts(cells, tolerance=R.Tolerance(0.02, 1.0))
    assert judged["margin"].tolist() == pytest.approx([0.05, 0.02, 0.02, 0.02])
    assert judged["verdict"].tolist() == [R.PRINTED, R.TUNED, R.TUNED, R.TUNED]
    assert judged["note"].tolist()[3] == "better than printed by more than the margin"
    rows = R.row_verdicts(judged, ["row"]).set_index("row")["verdict"]
    assert rows.to_dict() == {"x": R.NOT_REPRODUCED, "y": R.TUNED, "z": R.TUNED}  # x: no one run does both
    assert R.verdict_counts(rows) == {R.PRINTED: 0, R.TUNED: 2, R.NOT_REPRODUCED: 1}


# ----------------------------------------------------------------------------- the validation split (MNIST)
def _fingerprints(data):
    return {hash(x.numpy().tobytes()) for x in data.X}


def test_the_validation_rows_come_from_the_training_data_and_the_cut_group_keeps_its_count():
    """Quick MNIST (the offline 5,000 images; test rows a seeded split as in the comparison): train, validation
    and test are disjoint; the test rows are exactly the comparison's; the validation rows have the data's
    natural group mix; class 8 keeps the count the comparison keeps."""
    from dpfair_analysis.experiments.compare import load_data, split_for_seed

    base = M.mnist_tuning_base("quick")
    train, validation, test = T.validation_split(base, seed=0)
    full, official = load_data(base)
    paper_train, paper_test = split_for_seed(base, full, official, seed=0)
    assert _fingerprints(test) == _fingerprints(paper_test)
    parts = [_fingerprints(p) for p in (train, validation, test)]
    assert all(not (a & b) for a, b in itertools.combinations(parts, 2))
    shares = validation.group_sizes().numpy() / len(validation)
    assert np.allclose(shares, 0.1, atol=0.02)  # 10 classes, about balanced, class 8 included
    # before the subsample, class 8 keeps the comparison's count of its training images
    unsubsampled = type(base)(**{**base.__dict__, "train_subsample": 1.0})
    kept = T.validation_split(unsubsampled, seed=0)[0].group_sizes()[8]
    cut = split_for_seed(unsubsampled, full, official, seed=0)[0].group_sizes()[8]
    assert kept == cut
    with pytest.raises(ValueError, match="fraction"):
        T.validation_split(base, seed=0, fraction=1.0)


def test_a_tuning_run_reports_both_splits_every_group_and_whether_its_sampling_is_accounted(tmp_path):
    from dpfair_analysis.experiments.cache import RunCache, RunRecords

    base = M.mnist_tuning_base("quick")
    records = RunRecords(tmp_path / "runs.json")
    rows = pd.DataFrame(T.tuning_rows(base, "dpsgd", {"lr": 0.05, "sampling": "shuffle"}, 0,
                                      cache=RunCache(tmp_path / "cache"), records=records))
    assert set(rows["split"]) == {"validation", "test"}
    assert set(rows["group"]) == {*map(str, range(10)), "all"}
    assert not rows["sampling_matches_accounting"].any() and (rows["epsilon"] > 0).all()
    assert rows["lr"].eq(0.05).all() and rows.query("split == 'test' and group == 'all'")["n"].item() == 300
    again = T.tuning_rows(base, "dpsgd", {"lr": 0.05, "sampling": "shuffle"}, 0, records=records,
                          compute_missing=False)
    assert again == rows.to_dict("records")
    assert T.tuning_rows(base, "dpsgd", {"lr": 0.1, "sampling": "shuffle"}, 0, records=records,
                         compute_missing=False) is None
    with pytest.raises(ValueError, match="sets lr, sampling"):
        T.tuned_config(base, {"epochs": 3})
    with pytest.raises(ValueError, match="method must be one of"):
        T.tuning_plan(base, methods=("dpsgd", "nonsense"), grid=M.MNIST_GRID)


# ----------------------------------------------------------------------------- MNIST analyses on synthetic rows
def _mnist_rows(accuracy: dict, *, epsilon: float = 5.9) -> pd.DataFrame:
    """Rows of recorded_tuning_runs: ``accuracy[(method, configuration index)] = (validation, test)`` accuracy
    of every group; configuration 0 = lr 0.01 Poisson, 1 = lr 0.1 shuffle."""
    labels = {0: ("lr 0.01, sampling poisson", 0.01, "poisson"), 1: ("lr 0.1, sampling shuffle", 0.1, "shuffle")}
    rows = []
    for (method, index), (validation, test) in accuracy.items():
        label, lr, sampling = labels[index]
        for split, value in (("validation", validation), ("test", test)):
            for group in ("all", "2", "8"):
                rows.append({"method": method, "seed": 0, "split": split, "group": group, "accuracy": value,
                             "epsilon": math.nan if method == "sgd" else epsilon,
                             "sampling_matches_accounting": sampling == "poisson" or method == "sgd",
                             "configuration": label, "configuration_index": index, "cfg_lr": lr,
                             "cfg_sampling": sampling})
    return pd.DataFrame(rows)


def test_costs_compare_printed_with_printed_and_tuned_with_tuned():
    rows = _mnist_rows({("sgd", 0): (0.90, 0.90), ("sgd", 1): (0.95, 0.97),
                        ("dpsgd", 0): (0.60, 0.60), ("dpsgd", 1): (0.80, 0.85)})
    costs = T.costs_of_privacy(T.printed_and_tuned(rows, groups=M.MNIST_GROUPS), groups=M.MNIST_GROUPS) \
        .set_index(["which", "method"])
    assert costs.loc[("printed", "dpsgd"), "all"] == pytest.approx(-0.30)
    assert costs.loc[("tuned", "dpsgd"), "all"] == pytest.approx(-0.12)
    assert costs.loc[("tuned", "sgd"), "all"] == pytest.approx(0.97) and costs.loc[("tuned", "sgd"),
                                                                                    "quantity"] == "accuracy"
    paper = pd.DataFrame([{"method": "sgd", "all": 0.98, "2": 0.98, "8": 0.98},
                          {"method": "dpsgd", "all": -0.05, "2": -0.10, "8": -0.15}])
    verdicts = R.mnist_table1_verdicts(costs.reset_index(), paper).set_index(["method", "group"])
    assert verdicts.loc[("sgd", "all"), "verdict"] == R.TUNED  # 0.97 is within 0.03 of 0.98, 0.90 is not
    assert verdicts.loc[("dpsgd", "all"), "verdict"] == R.NOT_REPRODUCED  # -0.12 is 0.07 short of -0.05
    assert verdicts.loc[("dpsgd", "2"), "verdict"] == R.TUNED  # -0.12 is 0.02 short of -0.10: within 0.03
    assert verdicts.loc[("dpsgd", "8"), "verdict"] == R.TUNED  # better than printed


def test_the_sampling_effect_is_shuffle_minus_poisson_at_each_learning_rate():
    rows = _mnist_rows({("dpsgd", 0): (0.60, 0.61), ("dpsgd", 1): (0.80, 0.85)})
    rows = pd.concat([rows, rows.assign(cfg_sampling=np.where(rows["cfg_sampling"] == "poisson", "shuffle",
                                                              "poisson"),
                                        accuracy=rows["accuracy"] - 0.05)])
    effect = T.sampling_effect(rows, groups=M.MNIST_GROUPS).query("split == 'test'").set_index("lr")
    assert effect.loc[0.01, "diff_all"] == pytest.approx(0.61 - 0.05 - 0.61)
    assert effect.loc[0.1, "diff_all"] == pytest.approx(0.85 - (0.85 - 0.05))


def test_the_tuning_grid_figure_circles_each_chosen_configuration_only():
    """The figure (plotting/, beside the other paper 002 figures) circles the configuration the choice on the
    validation rows made, for the methods given a choice, and nothing for the others."""
    import matplotlib.pyplot as plt

    from dpfair_analysis.plotting import plot_tuning_grid

    rows = _mnist_rows({("sgd", 0): (0.90, 0.90), ("sgd", 1): (0.95, 0.97),
                        ("dpsgd", 0): (0.60, 0.60), ("dpsgd", 1): (0.50, 0.85)})
    chosen = T.printed_and_tuned(rows[rows["method"] == "sgd"], groups=M.MNIST_GROUPS).query("which == 'tuned'")
    fig = plot_tuning_grid(rows, groups=M.MNIST_GROUPS, chosen=chosen)
    circled = [[tuple(map(tuple, c.get_offsets())) for c in ax.collections] for ax in fig.axes]
    assert circled[:3] == [[((0.1, 0.97),)]] * 3 and circled[3:] == [[]] * 3  # sgd row: lr 0.1; dpsgd: none
    plt.close(fig)


def test_mnist_claims_flip_with_the_numbers_they_rest_on():
    equal = _mnist_rows({("sgd", 0): (0.9, 0.9), ("sgd", 1): (0.9, 0.9),
                         ("dpsgdf", 0): (0.8, 0.8), ("dpsgdf", 1): (0.8, 0.8)})
    unequal = equal.copy()
    unequal.loc[(unequal["method"] == "dpsgdf") & (unequal["group"] == "8"), "accuracy"] = 0.1
    claims = {name: R.mnist_claims(rows).set_index("claim") for name, rows in (("equal", equal),
                                                                             ("unequal", unequal))}
    assert claims["equal"].loc["dpsgdf_equal", "verdict"] == R.PRINTED
    assert claims["unequal"].loc["dpsgdf_equal", "verdict"] == R.NOT_REPRODUCED


# ----------------------------------------------------------------------------- dpfair compare --tune
def test_compare_tune_json_reports_printed_and_tuned_with_verdicts(capsys, tmp_path, monkeypatch):
    import json

    from dpfair_analysis.cli import main

    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path))
    assert main(["compare", "--data", "german", "--methods", "sgd,dpsgd", "--epochs", "1", "--tune", "--tune-lr",
                 "0.05,0.5", "--tune-sampling", "poisson", "--lr", "0.05", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    protocol = document["protocol"]
    assert protocol["configurations"] == 2 and protocol["printed"] == {"lr": 0.05, "sampling": "poisson"}
    assert protocol["selection_privacy"] == T.SELECTION_PRIVACY
    selection = pd.DataFrame(document["selection"])
    assert set(zip(selection["method"], selection["which"])) == {(m, w) for m in ("sgd", "dpsgd")
                                                                 for w in ("printed", "tuned")}
    chosen = selection.query("which == 'tuned'").set_index("method")
    runs = selection.set_index(["method", "which"])
    for method in ("sgd", "dpsgd"):  # the choice is the better validation accuracy of the two (ties: printed)
        assert chosen.loc[method, "val_all"] >= runs.loc[(method, "printed"), "val_all"]
    claims = {c["claim"]: c for c in document["claims"]}
    assert claims["dpsgd_disparate"]["verdict"] in R.VERDICTS and sum(document["verdict_counts"].values()) == 1


@pytest.mark.parametrize("argv, fragment", [
    (["--methods", "sgd,dpfedavg"], "dpfedavg"),
    (["--tune-sampling", "poisson,random"], "--tune-sampling"),
    (["--tune-lr", "0.05,0.1", "--lr", "0.2"], "--lr 0.2 must be one of"),
    (["--tune-lr", "0.05,-1"], "--tune-lr"),
    (["--seeds", "2"], "one seed"),
])
def test_compare_tune_errors_are_one_line(capsys, argv, fragment):
    from dpfair_analysis.cli import main

    assert main(["compare", "--data", "adult", "--tune", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dpfair: error:") and fragment in err


def test_global_adapt_trains_at_its_authors_mnist_options_and_no_other_methods_key_moves():
    """The MNIST tuning base gives Global-Adapt its authors' MNIST threshold tau = 0.7 (their Adult/Dutch default
    is 1); a tuning run's key holds its own method's options only, so that change moves Global-Adapt's keys and no
    other method's (the committed records of the other methods stay reachable)."""
    base = M.mnist_tuning_base("quick")
    assert base.options("globaladapt").threshold == M.GLOBAL_ADAPT_MNIST["threshold"] == 0.7
    plain = base.with_options("globaladapt", threshold=1.0)
    for method in ("dpsgd", "dpsgdf", "boundedadaptive", "fairdp"):
        assert T.tuning_key(base, method, 0, 0.1) == T.tuning_key(plain, method, 0, 0.1)
    assert T.tuning_key(base, "globaladapt", 0, 0.1) != T.tuning_key(plain, "globaladapt", 0, 0.1)
    # a method named with its bound keeps its own options in its key
    assert T.tuning_key(base, "globaladapt(C=2)", 0, 0.1) != T.tuning_key(plain, "globaladapt(C=2)", 0, 0.1)


def _worst_rows(worst: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """Tuning rows of two configurations per method; class '1' is the worst, at (validation, test) accuracies
    ``worst[method]`` in configuration 1 and 0.1 below in configuration 0 (the printed one)."""
    rows = []
    for method, (val, test) in worst.items():
        for index in (0, 1):
            for split, acc in (("validation", val), ("test", test)):
                acc = acc - 0.1 * (index == 0)
                rows += [{"method": method, "seed": 0, "split": split, "group": group, "accuracy": value,
                          "epsilon": 6.3, "configuration_index": index, "configuration": f"c{index}"}
                         for group, value in (("all", 0.9), ("0", 0.95), ("1", acc))]
    return pd.DataFrame(rows)


def test_zhaos_worst_class_claims_are_judged_on_the_grid_once_both_budgets_are_complete():
    """mnist_tuning.later_claims: bounded adaptive clipping's gain in test worst-class accuracy over DPSGD and Opt-Q,
    at the printed configurations and at the ones chosen on validation worst-class accuracy, judged on this
    setting; a claim whose two methods are not both complete has no row."""
    rows = _worst_rows({"dpsgd": (0.5, 0.50), "optq": (0.4, 0.40), "boundedadaptive": (0.6, 0.56)})
    worst, verdicts = R.mnist_later_claims(rows, ("dpsgd", "optq", "boundedadaptive", "sgd"))
    assert list(worst["method"]) == ["dpsgd", "optq", "boundedadaptive"]
    gains = verdicts.set_index("claim")
    assert gains.loc["zhao-vs-constant", "gain_after_tuning"] == pytest.approx(0.06)
    assert gains.loc["zhao-vs-constant", "gain_at_defaults"] == pytest.approx(0.06)
    assert gains.loc["zhao-vs-unbounded", "gain_after_tuning"] == pytest.approx(0.16)
    assert set(gains["verdict"]) == {"reproduces at the printed settings"}
    assert (gains["setting_note"] == M.LATER_SETTING_NOTE).all()
    _, verdicts = R.mnist_later_claims(rows, ("dpsgd", "boundedadaptive"))  # Opt-Q's budget not complete
    assert list(verdicts["claim"]) == ["zhao-vs-constant"]
    assert R.mnist_later_claims(rows, ("sgd",))[1].empty


def test_the_equal_epsilon_table_and_the_findings_are_drawn_from_the_grid():
    """mnist_equal_epsilon: every complete method, chosen on the validation worst class, and whether the chosen
    configuration samples as the accountant assumes; mnist_findings states the budget, each claim's verdict and the
    highest and lowest worst class at equal privacy, with the caveat where the epsilon is no guarantee."""
    rows = _worst_rows({"dpsgd": (0.5, 0.50), "optq": (0.4, 0.40), "boundedadaptive": (0.6, 0.56), "sgd": (0.9, 0.9)})
    rows["configuration"] = rows["configuration_index"].map({0: "lr 0.01, sampling poisson",
                                                              1: "lr 0.1, sampling shuffle"})
    table = R.mnist_equal_epsilon(rows, ("dpsgd", "optq", "boundedadaptive", "sgd"))
    assert list(table["method"]) == ["dpsgd", "optq", "boundedadaptive", "sgd"]
    assert table.set_index("method").loc["boundedadaptive", "chosen_worst"] == pytest.approx(0.56)
    assert not table["chosen_accounted"].any()  # every chosen configuration is the shuffled one here
    assert R.mnist_equal_epsilon(rows, ("dpsgd",))["method"].tolist() == ["dpsgd"]
    status = pd.DataFrame([{"method": m, "configurations_run": 2, "budget": 2, "complete": True}
                           for m in ("dpsgd", "optq", "boundedadaptive", "sgd")])
    _, later = R.mnist_later_claims(rows, ("dpsgd", "optq", "boundedadaptive"))
    claims = pd.DataFrame([{"claim": "dpsgd_disparate", "verdict": "reproduces at the printed settings"}])
    text = R.mnist_findings(status, pd.DataFrame(), claims, later, table)
    assert "8 of 8 runs" in text and "Claim dpsgd_disparate: reproduces at the printed settings." in text
    assert "zhao-vs-constant (printed gain +0.05): worst class +0.060" in text
    assert ("highest test worst class boundedadaptive 0.560 (lr 0.1, sampling shuffle, shuffled batches: its epsilon "
            "is not a guarantee); lowest optq 0.400") in text
    assert "whose chosen sampling" not in text  # none is: nothing to add
    table.loc[table["method"] == "dpsgd", "chosen_accounted"] = True
    text = R.mnist_findings(status, pd.DataFrame(), claims, later, table)
    assert text.endswith("Highest of those whose chosen sampling is the accountant's: dpsgd 0.500 (lr 0.1, sampling "
                         "shuffle).")
