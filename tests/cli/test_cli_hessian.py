"""``dpfair hessian``: JSON shape, values against the closed form, one-line errors."""

import json

import pytest
import torch

from dpfair_analysis.data import load
from dpfair_analysis.models import build_model



def test_json_rows_at_init_match_the_closed_form(cli):
    code, out, err = cli("hessian", "--data", "synthetic", "--at", "init", "--seed", "3", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["group"] for r in rows] == ["all", "g0", "g1"]
    assert all(set(r) == {"group", "n", "trace", "stderr", "method"} for r in rows)
    assert all(r["method"] == "closed" and r["stderr"] == 0 for r in rows)
    # by hand: binary LR, Tr(H_i) = p(1-p)(||x||^2 + 1) at the seed-3 initialisation
    data = load("synthetic")
    model = build_model("logreg", input_shape=data.X.shape[1:], n_classes=2, seed=3)
    with torch.no_grad():
        X = data.X.double()
        p = torch.sigmoid(X @ model.linear.weight.double().reshape(-1) + model.linear.bias.double())
        per = p * (1 - p) * (X.pow(2).sum(1) + 1)
    expected = {"all": per.mean()} | {n: per[data.group == k].mean() for k, n in enumerate(data.group_names)}
    for r in rows:
        assert r["trace"] == pytest.approx(float(expected[r["group"]]), rel=1e-9)
        assert r["n"] == (len(data) if r["group"] == "all" else int((data.group == data.group_names.index(
            r["group"])).sum()))


def test_trained_logreg_and_stochastic_mlp(cli):
    code, out, err = cli("hessian", "--data", "synthetic", "--json")
    assert code == 0, err
    trained = json.loads(out)["rows"]
    code, out, err = cli("hessian", "--data", "synthetic", "--model", "mlp", "--method", "hutchinson",
                         "--probes", "4", "--train-epochs", "1", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert all(r["method"] == "hutchinson" and r["stderr"] > 0 for r in rows)
    assert all(r["trace"] > 0 for r in trained)
    code, out, err = cli("hessian", "--data", "synthetic")
    assert code == 0 and "Tr(H_a)" in out and "regularised ERM" in out


@pytest.mark.parametrize("argv, needle", [
    (["--data", "synthetic", "--model", "mlp", "--method", "closed"], "--method closed"),
    (["--data", "nope"], "nope"),
    (["--data", "synthetic", "--method", "hutchpp", "--probes", "3"], "--probes"),
    (["--data", "synthetic", "--method", "magic"], "--method"),
    (["--data", "synthetic", "--seed", "-1"], "--seed"),
    (["--data", "synthetic", "--model", "cnn"], "--model"),
    (["--data", "adult", "--group-by", "age"], "by"),
    (["--model", "logreg"], "--data"),
])
def test_one_line_errors(cli, argv, needle):
    code, out, err = cli("hessian", *argv)
    assert code == 2 and out == ""
    assert err.startswith("dpfair: error:") and err.count("\n") == 1 and needle in err
