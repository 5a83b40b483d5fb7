"""``dpfair privacy one-run``: the per-group one-run audit on Adult by sex (issue 52.2)."""

from __future__ import annotations

import json

import pytest


def test_the_cli_methods_are_the_audits():
    from dpfair_analysis.cli.privacy import ONE_RUN_METHODS
    from dpfair_analysis.verify.audits.one_run import METHODS

    assert ONE_RUN_METHODS == METHODS


def test_one_run_prints_each_sets_bounds_and_writes_the_json(cli, tmp_path, monkeypatch):
    """The command's lines and JSON are adult_by_sex_grid's (replaced here by a stand-in: the real run takes a
    minute and is tested in tests/verify/test_one_run_audit.py); a refuted set makes the exit status 1."""
    import dpfair_analysis.verify.audits.one_run as one_run

    def fake(epsilon, *, per_group, seed, method, batch_size):
        bound = 9.0 if epsilon == 2.0 else 0.1
        return {"target_epsilon": epsilon, "seed": seed, "method": method, "steps": 7, "sampling_rate": 0.01,
                "noise_multiplier": 1.0, "epsilon": epsilon, "delta": 1e-5, "canaries": 4 * per_group,
                "per_group": per_group, "batch_size": batch_size,
                "sets": [{"group": "Male/gradient", "epsilon_lower": bound, "exceeds_accounted": bound > epsilon}],
                "summary": f"Male/gradient: Steinke eps >= {bound}"}

    monkeypatch.setattr(one_run, "adult_by_sex", fake)
    code, out, err = cli("privacy", "one-run", "--epsilons", "1,4", "--per-group", "10", "--seeds", "2",
                         "--out", tmp_path / "r.json")
    assert code == 0, err
    assert out.count("target ε") == 4 and "seed 1" in out and "Steinke eps >= 0.1" in out and "BUG" not in out
    payload = json.loads((tmp_path / "r.json").read_text())
    assert [(r["target_epsilon"], r["seed"]) for r in payload["runs"]] == [(1.0, 0), (4.0, 0), (1.0, 1), (4.0, 1)]
    assert payload["refuted"] is False and payload["per_group"] == 10 and payload["method"] == "dpsgd"
    code, out, err = cli("privacy", "one-run", "--epsilons", "2", "--per-group", "10", "--json")
    assert code == 1 and json.loads(out)["refuted"] is True


@pytest.mark.slow
def test_one_run_on_adult_at_few_canaries(cli):
    """The real command at 10 canaries per group and family (about a minute)."""
    code, out, err = cli("privacy", "one-run", "--epsilons", "4", "--per-group", "10", "--json")
    assert code == 0, err
    run = json.loads(out)["runs"][0]
    assert run["epsilon"] == pytest.approx(4.0, abs=0.05)
    assert {row["group"] for row in run["sets"]} == {"Male/gradient", "Male/input", "Female/gradient", "Female/input"}
