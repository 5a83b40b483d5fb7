"""The pytest plugin: a marked claim is audited with the session's budget, summarised and reported."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

CLAIMS = textwrap.dedent('''
    import numpy as np
    import pytest
    from dpfair_analysis.testing.auditing import Budget

    SMALL = Budget("small", 200, 1000, 2000, 2, 4, (1, 1, 1))

    @pytest.mark.dp(epsilon=1.0, relation="queries")
    def test_laplace_is_private(dp):
        dp.assert_private(lambda d, rng: d[0] + rng.laplace(), data=np.ones(2), budget=SMALL)

    @pytest.mark.dp(epsilon=0.1, relation="queries")
    def test_too_little_noise_is_caught(dp):
        dp.assert_private(lambda d, rng: d[0] + rng.laplace(scale=0.1), data=np.ones(2), budget=SMALL)

    @pytest.mark.dp(relation="replace-one")
    def test_sensitivity_claim(dp):
        dp.assert_sensitivity(lambda d: float(np.clip(d, -1, 1).sum()), 2.0, norm=1, data=np.array([-2.0, 0.0, 2.0]),
                              examples=30)

    def test_seed_depends_on_the_test(dp):
        print("SEED", dp.seed, dp.budget)
''')


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_claims.py").write_text(CLAIMS)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_claims.py",
                           *args], check=False, capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_marked_claims_are_audited_summarised_and_reported(tmp_path):
    out = run(tmp_path, "--dp-report", "report.json")
    assert out.returncode == 1, out.stdout[-2000:]  # the under-noised mechanism fails its claim
    assert "1 failed, 3 passed" in out.stdout and "PrivacyViolation" in out.stdout
    assert "privacy claims (dpfair_analysis.testing)" in out.stdout and "REFUTED" in out.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["budget"] == "quick" and len(report["audits"]) == 3
    outcomes = {a["test"].split("::")[1]: a.get("outcome") for a in report["audits"]}
    assert outcomes == {"test_laplace_is_private": "passed", "test_too_little_noise_is_caught": "PrivacyViolation",
                        "test_sensitivity_claim": "passed"}


def test_budget_and_seed_options(tmp_path):
    first = run(tmp_path, "--dp-budget", "full", "--dp-seed", "7", "-k", "seed")
    second = run(tmp_path, "--dp-budget", "full", "--dp-seed", "7", "-k", "seed")
    line = next(s for s in first.stdout.splitlines() if s.startswith("SEED"))
    assert line.endswith("full") and line == next(s for s in second.stdout.splitlines() if s.startswith("SEED"))
    bad = run(tmp_path, "--dp-budget", "huge")
    assert bad.returncode == 4 and "--dp-budget" in bad.stderr
