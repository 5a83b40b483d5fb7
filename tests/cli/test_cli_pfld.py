"""``dpfair train``: one-line errors with exit status 2, and a tiny end-to-end run."""

from __future__ import annotations

import json

import pytest




@pytest.mark.parametrize("argv,fragment", [
    (["--cp", "-1"], "argument --cp"),
    (["--cd", "0"], "argument --cd"),
    (["--constraint", "xx"], "argument --constraint"),
    (["--method", "sgd"], "argument --method"),
    (["--missing-rate", "1"], "argument --missing-rate"),
    (["--epsilon", "nan"], "argument --epsilon"),
    (["--delta", "1"], "argument --delta"),
    (["--hidden", "8,0"], "argument --hidden"),
    (["--seed", "-3"], "--seed"),
])
def test_bad_arguments_give_one_line_and_exit_2(cli, argv, fragment):
    code, out, err = cli("train", "--data", "compas", *argv)
    assert code == 2
    assert err.startswith("dpfair: error:") and fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_tiny_pfld_run_json(cli):
    code, out, err = cli("train", "--data", "compas", "--method", "pfld", "--constraint", "eo",
                         "--epochs", "2", "--batch-size", "512", "--hidden", "8,8", "--epsilon", "2", "--json")
    assert code == 0, err
    row = json.loads(out)
    assert {"method", "constraint", "accuracy", "violation", "epsilon", "delta", "privacy_established"} <= set(row)
    assert row["method"] == "pfld" and row["constraint"] == "eo" and row["privacy_established"]
    assert 0 < row["epsilon"] <= 2.0 * (1 + 1e-6)
    assert 0.4 < row["accuracy"] < 1 and 0 <= row["violation"] <= 1


def test_tiny_fld_run_prints_epochs_and_a_final_line(cli):
    code, out, err = cli("train", "--data", "compas", "--method", "fld", "--epochs", "2",
                         "--batch-size", "512", "--hidden", "8,8")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 4 and lines[0].startswith("epoch   0") and "ε" not in lines[1]
    assert lines[-1].startswith("fld dp on compas: test accuracy")


def test_a_private_run_says_its_train_columns_are_not_covered_by_epsilon(cli):
    """PF-LD's per-epoch train accuracy and violation are exact statistics of the private data (flipping one
    person's group moves the epoch-0 violation deterministically): the printed table says they are outside ε."""
    code, out, err = cli("train", "--data", "compas", "--method", "pfld", "--epochs", "1", "--batch-size", "512",
                         "--hidden", "8,8")
    assert code == 0, err
    lines = out.strip().splitlines()
    first_epoch = next(i for i, line in enumerate(lines) if line.startswith("epoch   0"))
    assert "not covered by ε" in lines[first_epoch - 1] and "ε=" in lines[first_epoch]
