"""paper 003 Table 2 by cross-validation (experiments/pfld.py) and ``dpfair pfld-table``."""

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dpfair_analysis.cli import main
from dpfair_analysis.experiments import pfld as P
from dpfair_analysis.verify import reproduction as R
from dpfair_analysis.experiments import pfld_tuned as PT
from dpfair_analysis.experiments.cache import RunCache, RunRecords

METHODS = ("clf", "z", "m", "pfld")  # A is covered in test_baselines.py (M runs the same code)
TINY = replace(P.with_profile("quick"), subsample=240, folds=2, epochs=2, batch_size=48, reductions_max_iter=3)


def test_folds_partition_the_rows_and_keep_group_label_shares():
    data = P.load_table_data("compas", subsample=500, seed=1)
    folds = P.cv_folds(data, 5, seed=3)
    assert len(folds) == 5
    tests = np.concatenate([t for _, t in folds])
    assert np.array_equal(np.sort(tests), np.arange(len(data)))  # each row tested exactly once
    strata = data.group.numpy() * 2 + data.y.numpy()
    for train, test in folds:
        assert not set(train) & set(test)
        for s in np.unique(strata):
            expected = (strata == s).sum() / 5
            assert abs((strata[test] == s).sum() - expected) <= 1
    again = P.cv_folds(data, 5, seed=3)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again))
    other = P.cv_folds(data, 5, seed=4)
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(folds, other))


def test_subsample_is_stratified_and_seeded():
    full = P.load_table_data("compas")
    part = P.load_table_data("compas", subsample=400, seed=0)
    assert len(part) == 400
    share = float(part.group.double().mean())
    assert share == pytest.approx(float(full.group.double().mean()), abs=0.01)
    assert np.array_equal(part.y.numpy(), P.load_table_data("compas", subsample=400, seed=0).y.numpy())


def test_each_split_is_scaled_on_its_training_rows_only():
    """Table 2's features are z-scored on the rows a run trains on (paper 003: zero mean, unit variance), not on
    the whole data set: the training part has mean 0 and sd 1 per column, the held-out part is transformed with
    the training statistics, and changing a held-out row's raw value changes nothing on the training side."""
    data = P.load_table_data("compas", subsample=400, seed=0)
    assert data.info["scaling"] == "none"
    (train_rows, test_rows), _ = P.cv_folds(data, 2, seed=0)
    train, test = P.scaled_on_train(data.subset(train_rows), data.subset(test_rows))
    X = train.X.double().numpy()
    varying = X.std(axis=0) > 0
    assert np.allclose(X.mean(axis=0), 0, atol=1e-6) and np.allclose(X.std(axis=0)[varying], 1, atol=1e-5)
    raw_train, raw_test = data.X[train_rows].double().numpy(), data.X[test_rows].double().numpy()
    mean, sd = raw_train.mean(axis=0), raw_train.std(axis=0)
    expected = np.where(sd > 0, (raw_test - mean) / np.where(sd > 0, sd, 1), 0)
    assert np.allclose(test.X.double().numpy(), expected, atol=1e-5)
    assert test.info["scaling_fitted_on"] == f"the {len(train)} training rows"
    moved = data.subset(test_rows)
    moved.X[0] += 1000.0  # an outlier in the held-out rows
    again, _ = P.scaled_on_train(data.subset(train_rows), moved)
    assert np.array_equal(again.X.numpy(), train.X.numpy())


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    cache = RunCache(tmp_path_factory.mktemp("pfld-table"))
    return P.table2("compas", constraints=("dp", "ap"), methods=METHODS, settings=TINY,
                    cache=cache), cache


def test_table_has_one_row_per_method_constraint_fold(rows):
    table, _ = rows
    assert len(table) == len(METHODS) * 2 * TINY.folds
    assert set(P.ROW_KEYS) <= set(table.columns)
    counts = table.groupby(["method", "constraint"]).size()
    assert (counts == TINY.folds).all()
    assert table["accuracy"].between(0, 1).all() and table["violation"].between(0, 1).all()


def test_privacy_columns_say_what_each_method_guarantees(rows):
    table, _ = rows
    pf = table[table["method"] == "pfld"]
    assert (pf["epsilon"] <= 1.0 + 1e-3).all() and (pf["epsilon"] > 0.5).all()
    assert pf["privacy"].str.contains("established").all() and not pf["privacy"].str.contains("NOT").any()
    assert (table[table["method"] == "m"]["epsilon"] == 1.0).all()
    assert table[table["method"].isin(["clf", "z"])]["epsilon"].isna().all()


def test_clf_is_fit_once_and_scored_per_constraint(rows):
    table, _ = rows
    clf = table[table["method"] == "clf"].set_index(["fold", "constraint"])
    for f in range(TINY.folds):
        assert clf.loc[(f, "dp"), "accuracy"] == clf.loc[(f, "ap"), "accuracy"]


def test_summary_and_paper_columns(rows):
    table, _ = rows
    summary = P.summarize(table)
    assert len(summary) == len(METHODS) * 2
    first = table[(table["method"] == "z") & (table["constraint"] == "dp")]
    row = summary[(summary["method"] == "z") & (summary["constraint"] == "dp")].iloc[0]
    assert row["accuracy"] == pytest.approx(first["accuracy"].mean())
    assert row["violation_sd"] == pytest.approx(first["violation"].std())
    side = P.side_by_side(table)
    cell = side[(side["method"] == "pfld") & (side["constraint"] == "dp")].iloc[0]
    assert cell["paper_accuracy"] == 0.667 and cell["paper_violation"] == 0.098  # COMPAS DP, DF-LP column
    text = P.format_table(table)
    assert "PF-LD" in text and "0.667 (0.015)" in text


def test_cached_rerun_returns_the_same_rows(rows):
    table, cache = rows
    again = P.table2("compas", constraints=("dp", "ap"), methods=METHODS, settings=TINY,
                     cache=cache)
    pd.testing.assert_frame_equal(table[list(P.ROW_KEYS)], again[list(P.ROW_KEYS)])


def test_paper_table_is_complete():
    # Income, COMPAS, Bank: 3 constraints x 5 methods; M-Bank3 / M-Bank5: Z is NA in the paper
    assert len(P.PAPER_TABLE2) == 3 * 3 * 5 + 2 * 3 * 4
    assert set(P.PAPER_TABLE2["dataset"]) == {"income", "compas", "bank", "m-bank3", "m-bank5"}
    assert not P.PAPER_TABLE2.duplicated(["dataset", "constraint", "method"]).any()
    assert P.PAPER_TABLE2[["accuracy", "violation"]].stack().between(0, 1).all()


def test_pfld_vs_m_counts_cells():
    frame = pd.DataFrame([
        {"dataset": "d", "constraint": "dp", "method": "pfld", "fold": 0, "accuracy": 0.8, "violation": 0.10},
        {"dataset": "d", "constraint": "dp", "method": "m", "fold": 0, "accuracy": 0.7, "violation": 0.05},
        {"dataset": "d", "constraint": "eo", "method": "pfld", "fold": 0, "accuracy": 0.6, "violation": 0.3},
        {"dataset": "d", "constraint": "eo", "method": "m", "fold": 0, "accuracy": 0.7, "violation": 0.2}])
    verdict = P.pfld_vs_m(frame).set_index("constraint")
    assert verdict.loc["dp", "better_accuracy"] and not verdict.loc["dp", "better_violation"]
    assert not verdict.loc["eo", "better_either"]


@pytest.mark.parametrize("group_by, groups, correction", [("age", 2, "scale"), ("age3", 3, "none"),
                                                        ("age5", 5, "none")])
def test_m_runs_on_every_bank_grouping_with_the_correction_derived_for_it(group_by, groups, correction, real_cache):
    """M-Bank3 / M-Bank5 (paper 003 Table 2): M's flip-rate correction is derived for 2 groups only, so more
    groups run uncorrected, and the row says which ran (the staged Kaggle bank.csv: it has no download source)."""
    real_cache("bank", "bank.csv")
    data = P.load_table_data("bank", group_by=group_by, subsample=400, seed=0)
    assert data.n_groups == groups
    (train, test), _ = P.cv_folds(data, 2, seed=0)
    row = P.run_method("m", "dp", data.subset(train), data.subset(test), settings=TINY, epsilon=1.0)
    assert row["m_correction"] == correction
    assert 0 <= row["accuracy"] <= 1 and 0 <= row["violation"] <= 1


def test_a_sweep_records_a_diverged_run_and_the_summary_counts_it():
    """Figure 4 on Bank at C_d = 100 (accuracy parity) diverges: with h = the loss and noisy negative signs the
    Lagrangian maximises the population loss. A sweep keeps such a run as a row (NaN metrics, its step) and the
    summary averages the others and counts it; Table 2 (record_divergence=False) still raises."""
    from dpfair_analysis.training.loop import TrainingDiverged

    data = P.load_table_data("compas", subsample=240, seed=0)
    train, test = data.split(0.2, seed=0, stratify="group_label")
    row = P.run_method("fld", "ap", train, test, settings=TINY, lr=1e300, record_divergence=True)
    assert math.isnan(row["accuracy"]) and math.isnan(row["violation"]) and row["diverged_at_step"] >= 1
    with pytest.raises(TrainingDiverged):
        P.run_method("fld", "ap", train, test, settings=TINY, lr=1e300)
    fine = P.run_method("fld", "ap", train, test, settings=TINY)
    rows = pd.DataFrame([{**fine, "lr": 0.05}, {**row, "lr": 0.05}])
    summary = P.sweep_summary(rows, ["lr"]).iloc[0]
    assert summary["runs"] == 2 and summary["diverged"] == 1
    assert summary["accuracy"] == pytest.approx(fine["accuracy"])


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="profile"):
        P.with_profile("medium")
    with pytest.raises(ValueError, match="dataset"):
        P.table2("nope", settings=TINY)
    with pytest.raises(ValueError, match="constraint"):
        P.table2("compas", constraints=("xx",), settings=TINY)
    with pytest.raises(ValueError, match="method"):
        P.table2("compas", methods=("q",), settings=TINY)
    with pytest.raises(ValueError, match="folds"):
        P.cv_folds(P.load_table_data("compas", subsample=100), 1)


# ------------------------------------------------------------------ CLI
def test_cli_json_rows_have_the_schema(capsys):
    code = main(["pfld-table", "--data", "compas", "--methods", "z", "--constraints", "dp,ap", "--profile", "quick",
                 "--no-cache", "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["delta"] == 1e-5 and document["settings"]["data"] == "compas"
    payload = document["rows"]
    assert len(payload) == 2 * 2  # 2 constraints x 2 quick folds
    for row in payload:
        assert tuple(row) == P.ROW_KEYS
        assert row["method"] == "z" and row["constraint"] in ("dp", "ap") and row["fold"] in (0, 1)
        assert 0 <= row["accuracy"] <= 1 and 0 <= row["violation"] <= 1 and row["epsilon"] is None


def test_cli_human_table_shows_the_paper_beside(capsys):
    assert main(["pfld-table", "--data", "compas", "--methods", "z", "--constraints", "dp", "--profile", "quick",
                 "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "0.634 (0.017)" in out and "0.023 (0.012)" in out  # the paper's Z on COMPAS / DP


@pytest.mark.parametrize("argv, fragment", [
    (["--data", "compas", "--methods", "z,xx"], "--methods"),
    (["--data", "compas", "--constraints", ""], "--constraints"),
    (["--data", "compas", "--folds", "1"], "--folds"),
    (["--data", "compas", "--epsilon", "0"], "--epsilon"),
    (["--data", "nope"], "--data"),
    (["--data", "bank", "--methods", "z", "--profile", "quick", "--no-cache"], "bank"),
])
def test_cli_errors_are_one_line(capsys, monkeypatch, tmp_path, argv, fragment):
    if fragment == "bank":  # Bank has no offline source: an empty data cache (never the user's) must say so
        monkeypatch.setenv("DPFAIR_DATA", str(tmp_path))
    assert main(["pfld-table", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dpfair: error:") and fragment in err


def test_epsilon_sweep_rows(tmp_path):
    rows = P.epsilon_sweep("compas", epsilons=(2.0,), methods=("m",), settings=TINY, seeds=2,
                           cache=RunCache(tmp_path))
    assert len(rows) == 2 and set(rows["seed"]) == {0, 1}
    assert (rows["requested_epsilon"] == 2.0).all() and not math.isnan(rows["violation"].iloc[0])


# ------------------------------------------------------------------ the reproduction protocol (issue 36)
from collections import Counter  # noqa: E402

from dpfair_analysis.experiments import tuning as T  # noqa: E402

TWO = {"clf": PT.CLF_GRID.head(2), "pfld": PT.PFLD_GRID.head(2), "m": PT.GAMMA_GRID.head(2)}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The tuned table on tiny COMPAS, recording which rows each run trained on and was scored on."""
    seen = []
    original = P.run_method

    def spy(method, kind, train, test, **kwargs):
        seen.append((method, _rows_of(train), _rows_of(test)))
        return original(method, kind, train, test, **kwargs)

    cache = RunCache(tmp_path_factory.mktemp("tuned"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(P, "run_method", spy)
        patch.setattr(PT, "run_method", spy)
        # rows are told apart by their raw features here; the per-split scaling has its own test above
        for module in (P, PT):
            patch.setattr(module, "scaled_on_train", lambda train, held_out: (train, held_out))
        table = PT.tuned_table2("compas", constraints=("dp",), methods=("clf", "pfld"), settings=TINY, grids=TWO,
                               cache=cache)
    return table, seen


def _rows_of(data):
    """The multiset of a data set's rows (COMPAS has rows with equal features, so a set would merge them)."""
    return Counter(hash(x.numpy().tobytes() + bytes([int(y), int(g)])) for x, y, g in zip(data.X, data.y, data.group))


def test_tuning_scores_on_training_rows_only_and_refits_the_validation_choice_on_the_whole_fold(tuned):
    table, seen = tuned
    data = P.load_table_data("compas", subsample=TINY.subsample, seed=TINY.seed)
    folds = [(_rows_of(data.subset(tr)), _rows_of(data.subset(te))) for tr, te in P.cv_folds(data, TINY.folds)]
    pfld_runs = [(train, scored) for method, train, scored in seen if method == "pfld"]
    tuning_runs = [r for r in pfld_runs if not any(r == fold for fold in folds)]
    refits = [r for r in pfld_runs if any(r == fold for fold in folds)]
    assert len(tuning_runs) == 2 * TINY.folds and len(refits) == 2 * TINY.folds  # defaults + the chosen refits
    for train, scored in tuning_runs:  # the training fold split in two: what it trained on, what scored it
        assert sum(train + scored == fold_train for fold_train, _ in folds) == 1
    runs = table.runs.set_index(["method", "fold", "configuration_index"])
    for row in table.chosen.itertuples():
        candidates = runs.loc[(row.method, row.fold)]
        assert candidates["chosen"].sum() == 1
        best = candidates["score"].max()
        assert candidates.loc[row.configuration_index, "score"] == best
        assert row.configuration_index == min(candidates.index[candidates["score"] == best])
    assert table.chosen.groupby("method").size().to_dict() == {"clf": TINY.folds, "pfld": TINY.folds}
    assert (table.chosen.query("method == 'pfld'")["epsilon"] - 1.0).abs().max() < 0.01


def test_a_refit_is_the_chosen_configuration_trained_on_the_whole_fold(tuned):
    table, _ = tuned
    data = P.load_table_data("compas", subsample=TINY.subsample, seed=TINY.seed)
    train, test = (data.subset(i) for i in P.cv_folds(data, TINY.folds)[0])
    row = table.chosen.query("method == 'pfld' and fold == 0").iloc[0]
    configuration = PT.PFLD_GRID.configurations()[int(row["configuration_index"])]
    settings, overrides = P._configured(configuration, TINY)
    direct = P.run_method("pfld", "dp", train, test, settings=settings, epsilon=1.0, seed=TINY.seed, **overrides)
    assert direct["accuracy"] == row["accuracy"] and direct["violation"] == row["violation"]


def _tuned_stub(default, chosen) -> PT.TunedTable2:
    """A tuned table of one PF-LD cell (COMPAS dp, paper 0.667 (0.015) / 0.098 (0.037)) over two folds."""
    def frame(values):
        return pd.DataFrame([{"dataset": "compas", "constraint": "dp", "method": "pfld", "fold": f,
                              "accuracy": a, "violation": v, "configuration": "c", "validation_score": 0.0,
                              "epsilon": 1.0} for f, (a, v) in enumerate(values)])

    return PT.TunedTable2("compas", runs=pd.DataFrame(), chosen=frame(chosen), defaults=frame(default),
                         grids={"pfld": PT.PFLD_GRID}, validation_fraction=0.2)


@pytest.mark.parametrize("default, chosen, verdict", [
    ([(0.66, 0.09), (0.66, 0.11)], [(0.50, 0.0), (0.50, 0.0)], R.PRINTED),
    ([(0.55, 0.09), (0.57, 0.11)], [(0.66, 0.12), (0.67, 0.12)], R.TUNED),  # violation 0.12 <= 0.098 + 0.037
    ([(0.55, 0.09), (0.57, 0.11)], [(0.66, 0.15), (0.67, 0.15)], R.NOT_REPRODUCED),  # too unfair
    ([(0.55, 0.09), (0.57, 0.11)], [(0.62, 0.00), (0.63, 0.00)], R.NOT_REPRODUCED),  # too inaccurate
])
def test_a_cell_reproduces_only_if_accuracy_and_violation_both_do(default, chosen, verdict):
    summary = R.tuned_side_by_side(_tuned_stub(default, chosen)).iloc[0]
    assert summary["verdict"] == verdict
    assert summary["accuracy_margin"] == pytest.approx(0.02) and summary["violation_margin"] == pytest.approx(0.037)
    assert summary["epsilon"] == 1.0 and summary["selection_privacy"] == T.SELECTION_PRIVACY


def _sweep_rows(values, *, column, violation, accuracy=None, seeds=2):
    rows = []
    for value, v in zip(values, violation):
        for s in range(seeds):
            rows.append({"method": "pfld", "requested_epsilon": 1.0 if column != "requested_epsilon" else value,
                         column: value, "seed": s, "violation": v + 0.001 * s,
                         "accuracy": 0.7 if accuracy is None else accuracy, "diverged_at_step": math.nan})
    return pd.DataFrame(rows)


def test_figure_claims_follow_the_numbers_they_test():
    eps = (0.1, 0.5, 1.0, 2.0, 5.0)
    falls = R.figure_claims({"fig1": _sweep_rows(eps, column="requested_epsilon",
                                                 violation=(0.3, 0.2, 0.1, 0.05, 0.01))}).set_index("claim")
    rises = R.figure_claims({"fig1": _sweep_rows(eps, column="requested_epsilon",
                                                 violation=(0.01, 0.05, 0.1, 0.2, 0.3))}).set_index("claim")
    assert falls.loc["violation_falls", "holds"] and not rises.loc["violation_falls", "holds"]
    rates = (0.6, 0.4, 0.2, 0.0)
    fewer = R.figure_claims({"fig5": _sweep_rows(rates, column="missing_rate", violation=(0.3, 0.2, 0.1, 0.0))})
    more = R.figure_claims({"fig5": _sweep_rows(rates, column="missing_rate", violation=(0.0, 0.1, 0.2, 0.3))})
    assert fewer["holds"].item() and not more["holds"].item()
    verdicts = R.figure_verdicts(rises.reset_index(), falls.reset_index())
    assert verdicts.set_index("claim").loc["violation_falls", "verdict"] == R.TUNED


def _forbid_training(monkeypatch) -> None:
    """Every Table 2 run fails if it trains: what is asked for must come from records."""
    def trains(*args, **kwargs):
        raise AssertionError("a run was trained")

    for module in (P, PT):
        monkeypatch.setattr(module, "run_method", trains)
        monkeypatch.setattr(module, "_clf_for_every_constraint", trains)


def test_a_tuned_table_built_from_its_records_alone_equals_the_computed_one(tmp_path, monkeypatch):
    """Each run of the tuned table is recorded (RunRecords) as it is computed or served from the run cache; with no
    run cache and no training allowed, the same table comes from the records file alone -- every run a hit, and
    exactly the runs the recorder plans (pfld_tuned.plan), each once."""
    kwargs = {"constraints": ("dp",), "methods": ("clf", "pfld"), "settings": TINY, "grids": TWO}
    cache = RunCache(tmp_path / "cache")
    direct = PT.tuned_table2("compas", cache=cache, **kwargs)
    path = tmp_path / "tuned_runs.json"
    PT.tuned_table2("compas", cache=cache, records=RunRecords(path), **kwargs)  # served from the cache, recorded
    _forbid_training(monkeypatch)
    records = RunRecords(path)
    alone = PT.tuned_table2("compas", records=records, **kwargs)
    recorded = json.loads(path.read_text())["records"]
    # CLF and PF-LD: 2 printed, 2 x 2 validation and 2 refit runs each (CLF's shared by every constraint)
    assert records.hits == len(recorded) == 2 * (2 + 2 * 2 + 2) and records.misses == 0
    assert sorted(p.key for p in PT.plan(PT.tuned_runs("compas", **kwargs), records)) == sorted(recorded)
    for part in ("runs", "chosen", "defaults"):
        pd.testing.assert_frame_equal(getattr(alone, part), getattr(direct, part))


def test_cli_tune_json_carries_the_protocol_and_a_verdict_per_cell(capsys, tmp_path, monkeypatch):
    """... and with --records, a second call on an empty run cache serves every run from the records file (nothing
    trains) and prints the same JSON; a damaged records file is one line, exit 2, and left as it is."""
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path / "cache"))
    records = tmp_path / "tuned_runs.json"
    argv = ["pfld-table", "--data", "compas", "--methods", "clf,pfld", "--constraints", "dp", "--profile", "quick",
            "--tune", "--json", "--records", str(records)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    document = json.loads(out)
    protocol = document["protocol"]
    assert protocol["selection_privacy"] == T.SELECTION_PRIVACY and "0.02" in protocol["tolerance"]
    assert protocol["budgets"]["pfld"]["configurations"] == 2  # quick: the first two of 16
    assert {row["method"] for row in document["summary"]} == {"clf", "pfld"}
    assert all(row["verdict"] in R.VERDICTS for row in document["summary"])
    assert sum(document["verdict_counts"].values()) == 2
    assert len(document["tuned_rows"]) == 2 * 2 and set(document["tuned_rows"][0]) == set(PT.TUNED_ROW_KEYS)
    assert main(["pfld-table", "--data", "compas", "--methods", "clf,fld", "--tune"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tune tunes" in err and "fld" in err
    with monkeypatch.context() as fresh_machine:
        fresh_machine.setenv("DPFAIR_CACHE", str(tmp_path / "empty"))
        _forbid_training(fresh_machine)
        assert main(argv) == 0
        assert capsys.readouterr().out == out
    damaged = tmp_path / "damaged.json"
    damaged.write_text(records.read_text()[:-40])
    assert main([*argv[:-1], str(damaged)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--records" in err and "unreadable" in err
    assert damaged.read_text() == records.read_text()[:-40]


def test_naming_banks_default_grouping_keys_the_same_runs_as_leaving_it_out():
    """Bank's loader groups by "age" when no grouping is named: the pfld notebook names it, `dpfair pfld-table --data
    bank` and the committed records leave it out -- one run either way (the notebook retrained all 1,170 before);
    M-Bank3's grouping keys other runs."""
    assert P.keyed_group_by("bank", "age") is None and P.keyed_group_by("bank", "age3") == "age3"
    assert P.keyed_group_by("income", None) is None
    named, unnamed, m3 = (PT.tuned_runs("bank", group_by=g, profile="quick") for g in ("age", None, "age3"))
    configuration = named.grids["pfld"].configurations()[1]
    for role in ("printed", "validation", "refit"):
        assert named.key("pfld", "dp", 0, configuration, role) == unnamed.key("pfld", "dp", 0, configuration, role)
        assert m3.key("pfld", "dp", 0, configuration, role) != unnamed.key("pfld", "dp", 0, configuration, role)
    assert named.name == unnamed.name == "bank"
