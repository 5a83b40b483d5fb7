"""``dpfair excess-risk``: JSON rows, the theorem beside the measurement, one-line errors."""

import json

import pytest




def test_output_perturbation_rows(cli):
    code, out, err = cli("excess-risk", "--data", "synthetic", "--mechanism", "output", "--epsilons",
                         "1,4", "--draws", "200", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["epsilon"] for r in rows] == [1.0] * 3 + [4.0] * 3
    assert {"group", "n", "excess_risk", "ci_low", "ci_high", "gap", "trace", "predicted_risk"} <= set(rows[0])
    for r in rows:
        assert r["ci_low"] <= r["excess_risk"] <= r["ci_high"]
    # less noise, less excess risk
    assert rows[3]["excess_risk"] < rows[0]["excess_risk"]


def test_dpsgd_rows_and_table(cli):
    code, out, err = cli("excess-risk", "--data", "synthetic", "--mechanism", "dpsgd", "--epsilons", "2",
                         "--epochs", "1", "--seeds", "2", "--rows", "600", "--quiet")
    assert code == 0, err
    assert "excess_risk" in out and "sigma" in out and out.count("\n") >= 4


@pytest.mark.parametrize("argv, needle", [
    (["--mechanism", "output", "--epsilons", "0"], "--epsilons"),
    (["--mechanism", "output", "--epsilons", "a,b"], "--epsilons"),
    (["--mechanism", "laplace"], "--mechanism"),
    (["--mechanism", "dpsgd", "--seeds", "1"], "--seeds"),
    (["--mechanism", "output", "--delta", "2"], "--delta"),
    (["--mechanism", "output", "--seed", "-1"], "--seed"),
])
def test_bad_arguments_are_one_line(cli, argv, needle):
    code, out, err = cli("excess-risk", "--data", "synthetic", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dpfair: error:") and needle in err
