"""``dpfair privacy groups``: each group's per-record epsilon_i beside its accuracy cost (issue 52.3)."""

from __future__ import annotations

import json

import pandas as pd

ARGV = ("privacy", "groups", "--data", "synthetic", "--epochs", "1", "--batch-size", "64", "--resolution", "8",
        "--no-cache")


def test_groups_prints_each_groups_epsilon_beside_its_cost_and_writes_the_table_and_figure(cli, tmp_path):
    code, out, err = cli(*ARGV, "--method", "dpsgdf", "--out", tmp_path / "t.csv", "--plot", tmp_path / "f.png")
    assert code == 0, err
    assert "run ε =" in out and "worst_case_share" in out and "cost" in out
    assert "norms recorded at each record's own batches" in out
    assert "spends the most privacy" in out or "every group spends the same" in out
    assert "not guarantees" in out and "CPU time when computed: the run in" in out
    table = pd.read_csv(tmp_path / "t.csv")
    assert table["group"].iloc[0] == "all" and {"mean", "q50", "max", "accuracy_sgd", "cost"} <= set(table)
    assert (tmp_path / "f.png").stat().st_size > 0
    assert f"figure written to {tmp_path / 'f.png'}" in out


def test_groups_say_the_epsilons_of_shuffled_batches_are_not_guarantees(cli):
    code, out, err = cli(*ARGV, "--sampling", "shuffle")
    assert code == 0, err
    lines = out.splitlines()
    run_line = next(i for i, line in enumerate(lines) if "run ε =" in line)
    assert "the run ε and every ε_i below are accounted as Poisson" in lines[run_line + 1]
    assert "NOT a guarantee" in lines[run_line + 1]


def test_groups_json_carries_the_table_the_run_epsilon_and_what_epsilon_i_is(cli):
    code, out, err = cli(*ARGV, "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["method"] == "dpsgd" and payload["groups"][0]["group"] == "all"
    assert all(g["max"] <= payload["run_epsilon"] * (1 + 1e-6) for g in payload["groups"])
    assert "ex-post" in payload["what"] and payload["summary"]


def test_the_cli_methods_are_the_librarys():
    from dpfair_analysis.cli.privacy import GROUP_METHODS
    from dpfair_analysis.experiments.group_privacy import GROUP_PRIVACY_METHODS

    assert GROUP_METHODS == GROUP_PRIVACY_METHODS
