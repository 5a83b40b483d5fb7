"""``dpfair verify --explain CLAIM`` and :func:`dpfair_analysis.verify.claims.explain`: the statement as printed, where,
what the check does, the verdict with its counterexample or worst ratio, the fix and the corrected form; the
JSON carries the same fields. A bad id is refused in one line naming --explain, before any check runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpfair_analysis.cli import main
from dpfair_analysis.verify.claims import CLAIMS, QUICK, explain, format_explanation

FIELDS = {"id", "paper", "citation", "kind", "location", "quote", "statement", "regime", "method", "verdict", "key",
          "fix", "counterexample", "ratio", "worst_ratio", "effort", "corrected_form"}


def test_explain_a_misprint_gives_quote_fix_counterexample_and_corrected_form():
    info = explain("003.thm3", QUICK)
    assert FIELDS <= set(info)
    assert info["verdict"] == "misprinted" and info["kind"] == "printed"
    assert "1/(1 − α)" in info["quote"] and "§6.1" in info["location"] and "003" == info["paper"]
    assert "1/(α − 1)" in info["fix"] and info["counterexample"]["defined_divergence"] < 0
    assert [c["id"] for c in info["corrected_form"]["claims"]] == ["003.thm3.mironov"]
    assert info["corrected_form"]["claims"][0]["verdict"] == "holds"
    text = format_explanation(info)
    for label in ("Where", "As printed", "Tested", "Check", "Verdict", "Fix", "Counterexample", "Registered"):
        assert f"\n{label}" in text, label
    assert "MISPRINTED" in text.splitlines()[0]


def test_explain_a_holding_claim_reports_its_worst_ratio():
    info = explain("003.thm4", QUICK)
    assert info["verdict"] == "holds" and info["counterexample"] is None and 0.9 < info["worst_ratio"] <= 1 + 1e-6
    assert "Worst ratio" in format_explanation(info)


def test_explain_a_corrected_claim_names_what_it_corrects():
    info = explain("003.thm3.mironov", QUICK)
    assert info["kind"] == "corrected" and info["refers_to"]["id"] == "003.thm3"
    assert "Corrects" in format_explanation(info)


def test_cli_explain_prints_the_fields_and_json_carries_the_same(capsys):
    assert main(["verify", "--explain", "001.cor1.trace", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "001.cor1.trace" in text and "E_{X∼D_a} ||X||²" in text and "misprinted" in text
    assert main(["verify", "--explain", "001.cor1.trace", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert FIELDS <= set(info) and info["verdict"] == "misprinted" and "2 E||X||²" in info["fix"]


@pytest.mark.parametrize("argv,needle", [
    (["verify", "--explain", "001.thm99"], "--explain: unknown claim '001.thm99'; known: 000.sec3.gaussian"),
    (["verify", "--explain", "003.thm3", "--paper", "003"], "--explain takes one claim"),
    (["verify", "--explain", "003.thm3", "--budget", "huge"], "--budget"),
])
def test_cli_explain_refuses_bad_input_in_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_a_bad_explain_id_is_refused_before_any_check_runs(monkeypatch, capsys):
    import dpfair_analysis.verify.claims as registry

    def tripwire(*args, **kwargs):
        raise AssertionError("a check ran")

    monkeypatch.setattr(registry, "explain", tripwire)
    monkeypatch.setattr(registry, "run_claims", tripwire)
    assert main(["verify", "--explain", "nope"]) == 2
    assert "--explain: unknown claim 'nope'" in capsys.readouterr().err


def test_the_registry_loads_without_the_heavy_libraries():
    """Ids, quotes and locations (what --list and a refused --explain need) load without torch, scipy,
    dp_accounting or pandas; the checks import what they use."""
    code = ("import sys\nimport dpfair_analysis.verify.claims as c\nassert len(c.CLAIMS) > 80\n"
            "print(sorted(m for m in ('torch', 'scipy', 'dp_accounting', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cli_json_carries_kind_and_counts(capsys):
    assert main(["verify", "--claim", "003.thm3", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    [row] = out["claims"]
    assert row["kind"] == "printed" and row["verdict"] == "misprinted" and row["fix"]
    assert out["counts"] == {"holds": 0, "holds-on-violated-premises": 0, "violated": 0, "misprinted": 1,
                             "inconclusive": 0}
    assert row["standing"] == "misprinted" and row["rests_on"] == [] and row["readings"] == []
    assert len({c.id for c in CLAIMS}) == len(CLAIMS)


@pytest.fixture
def corrected_thm5_on_the_lemmas(monkeypatch):
    """003.thm5.corrected made to rest on the violated Lemmas 1-2 (no registered claim holds on violated premises
    since 003.thm5 itself is violated end to end), to exercise how a standing apart is shown."""
    from dataclasses import replace

    from dpfair_analysis.verify import claims

    claim = replace(claims.get_claim("003.thm5.corrected"), rests_on=("003.lemma1", "003.lemma2"),
                    context=claims.get_claim("003.thm5").context)
    monkeypatch.setitem(claims._BY_ID, claim.id, claim)
    return claim.id


def test_explain_names_the_premises_and_the_standing(corrected_thm5_on_the_lemmas):
    info = explain(corrected_thm5_on_the_lemmas, QUICK)
    assert info["verdict"] == "holds" and info["standing"] == "holds-on-violated-premises"
    assert info["rests_on"] == {"003.lemma1": "violated", "003.lemma2": "violated"}
    assert any("Lemmas 1 and 2" in q for q in info["context"])
    text = format_explanation(info)
    assert "HOLDS (holds, but rests on violated premises)" in text.splitlines()[0]
    assert "\nRests on" in text and "003.lemma1 (violated)" in text and "\nPaper also" in text


def test_explain_shows_the_other_reading_with_its_computed_number():
    info = explain("000.sec6.1.3.count-budget", QUICK)
    assert info["verdict"] == "violated" and info["reading"].startswith("joint")
    [alt] = info["alternative_readings"]
    assert alt["reading"] == "separate" and alt["verdict"] == "holds" and "0.011" in alt["key"]
    assert "0.081" in info["key"]
    text = format_explanation(info)
    assert "\nReading" in text and "\nOther reading   separate" in text


def test_lemma_explanation_quotes_the_proof_and_the_paper_setting():
    info = explain("003.lemma1.given-sensitivity", QUICK)
    assert info["verdict"] == "violated" and "σ = σ_p Δ_p" in info["quote"]
    assert any("Gaussian noise with parameter σ_p" in q for q in info["context"])
    assert any("C_p = 10.0" in q for q in info["context"])
    assert [c["id"] for c in info["corrected_form"]["claims"]] == ["003.lemma1.given-sensitivity.multiplier"]
    assert info["corrected_form"]["claims"][0]["verdict"] == "holds"


def test_cli_table_marks_a_claim_on_violated_premises_and_an_other_reading(capsys, corrected_thm5_on_the_lemmas):
    assert main(["verify", "--claim", corrected_thm5_on_the_lemmas, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "holds†" in out and "† holds, but rests on violated premises: 003.lemma1 (violated)" in out
    assert "0 holds, 1 holds but rests on violated premises" in out
    assert main(["verify", "--claim", "001.ex2.sum", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "↔ read as '∝' literally" in out and "comparable: holds" in out
