"""No power is an outcome of its own, never a pass: assert_private raises NoPower (unless allow_no_power=True, or
require_power=True and the twin was caught), `dpfair audit` exits 4 with "verdict": "no power" in --json, and the
pytest plugin fails the test with the summary line saying NO POWER (status 4).

Each test failed before the change: a mechanism without noise claimed at epsilon = 12 (more than its runs can
certify) passed assert_private and the plugin's test, and `dpfair audit` exited 0 ("NO POWER" only in its text);
the plugin's summary said "consistent" (NO POWER only in the JSON report)."""

import json
import textwrap

import numpy as np
import pytest

from dpfair_analysis.cli import main
from dpfair_analysis.testing import InsufficientPower, NoPower, assert_private, audit
from dpfair_analysis.testing.auditing import Budget

pytest_plugins = ["pytester"]

SMALL = Budget("test", screen=200, select=1_000, evaluate=2_000, top=2, max_pairs=4, batch_factors=(1, 1, 1))


def exact_sum(data, rng):
    """No noise at all: not epsilon-DP for any epsilon."""
    return float(np.sum(data))


def laplace_sum(data, rng, noise_scale=1.0):
    return float(np.sum(data)) + rng.laplace(0.0, noise_scale)


def test_a_claim_above_what_the_runs_can_certify_raises_no_power_with_how_to_get_it():
    with pytest.raises(NoPower) as failure:
        assert_private(exact_sum, 12.0, relation="add-remove", budget=SMALL)
    message = str(failure.value)
    result = failure.value.result
    assert result.consistent and result.no_power and result.verdict == "no power"
    assert f"largest certifiable epsilon {result.certifiable_epsilon:.4g}" in message
    assert result.certifiable_epsilon < 12.0
    assert "allow_no_power=True" in message and "trials=" in message and "\n" not in message
    assert isinstance(failure.value, InsufficientPower) and isinstance(failure.value, AssertionError)


def test_no_test_with_power_raises_no_power():
    def rare_exact(data, rng):  # the exact sum with probability 1e-5, else 0: no run of the audit separates
        return float(np.sum(data)) if rng.random() < 1e-5 else 0.0

    with pytest.raises(NoPower, match="no test"):
        assert_private(rare_exact, 1.0, relation="add-remove", budget=SMALL)


def test_allow_no_power_accepts_it_explicitly_and_refutations_still_raise():
    result = assert_private(exact_sum, 12.0, relation="add-remove", budget=SMALL, allow_no_power=True)
    assert result.verdict == "no power" and result.no_power
    with pytest.raises(AssertionError, match="refuted"):
        assert_private(exact_sum, 1.0, relation="add-remove", budget=SMALL, allow_no_power=True)
    with pytest.raises(TypeError, match="allow_no_power"):
        assert_private(exact_sum, 12.0, relation="add-remove", budget=SMALL, allow_no_power="yes")


def test_require_power_keeps_working():
    """A caught twin shows the power: a correct mechanism passes; an uncaught twin is InsufficientPower, named."""
    result = assert_private(laplace_sum, 1.0, relation="add-remove", budget=SMALL, require_power=True)
    assert result.power["twin_caught"] and result.verdict == "consistent"
    with pytest.raises(InsufficientPower, match="twin"):
        assert_private(laplace_sum, 12.0, relation="add-remove", budget=SMALL, require_power=True)


def test_the_cli_exits_4_without_power_and_says_so_in_json(tmp_path, capsys):
    path = tmp_path / "exact.py"
    path.write_text("import numpy as np\n\ndef exact_sum(data, rng):\n    return float(np.sum(data))\n")
    argv = ["audit", "--target", f"{path}:exact_sum", "--epsilon", "12", "--relation", "add-remove",
            "--trials", "2000"]
    assert main(argv) == 4  # before: 0
    captured = capsys.readouterr()
    assert "-> NO POWER" in captured.out and "exit status 4" in captured.err
    assert main([*argv, "--json"]) == 4
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "no power" and payload["consistent"] and payload["no_power"]
    argv[argv.index("--epsilon") + 1] = "1"
    assert main([*argv, "--json"]) == 1  # refuted at a claim the runs can refute
    assert json.loads(capsys.readouterr().out)["verdict"] == "refuted"


def test_the_cli_exits_4_for_a_shipped_mechanism_without_power(capsys):
    assert main(["audit", "--mechanism", "output-perturbation", "--trials", "8", "--quiet"]) == 4  # before: 0
    captured = capsys.readouterr()
    assert "NO POWER" in captured.out and "NO POWER" in captured.err


CLAIMS = textwrap.dedent('''
    import numpy as np
    import pytest

    def exact_sum(data, rng):
        return float(np.sum(data))

    @pytest.mark.dp(epsilon=12.0, relation="add-remove")
    def test_no_noise(dp):
        dp.assert_private(exact_sum, trials=2000)

    @pytest.mark.dp(epsilon=12.0, relation="add-remove", allow_no_power=True)
    def test_no_noise_accepted(dp):
        dp.assert_private(exact_sum, trials=2000)

    @pytest.mark.dp(epsilon=12.0, relation="add-remove", require_power=True)
    def test_no_noise_audit_only(dp):
        assert dp.audit(exact_sum, trials=2000).verdict == "no power"
''')


def test_the_plugin_fails_a_test_without_power_and_its_summary_says_no_power(pytester):
    pytester.makepyfile(test_claims=CLAIMS)
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--dp-budget", "smoke",
                                        "--dp-report", "report.json")
    text = out.stdout.str()
    out.assert_outcomes(failed=1, passed=2)  # before: 3 passed
    assert "NoPower: NO POWER: the audit could not have refuted the claim epsilon = 12" in text
    lines = {line.split(": claimed")[0]: line for line in text.splitlines() if line.startswith("[")}
    assert lines["[4] test_claims.py::test_no_noise"].count("NO POWER, largest certifiable ε") == 1
    assert "NO POWER (accepted: allow_no_power=True)" in lines["[4] test_claims.py::test_no_noise_accepted"]
    assert "NO POWER" in lines["[4] test_claims.py::test_no_noise_audit_only"]  # dp.audit: never raises
    assert "status: 3 no power (4)" in text
    report = json.loads((pytester.path / "report.json").read_text())
    assert [a["outcome"] for a in report["audits"] if "outcome" in a] == ["NoPower", "no power allowed"]


def test_the_marker_s_allow_no_power_must_be_a_bool(pytester):
    pytester.makepyfile(test_claims=textwrap.dedent('''
        import pytest

        @pytest.mark.dp(epsilon=1.0, relation="add-remove", allow_no_power="yes")
        def test_claim(dp):
            pass
    '''))
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    assert out.ret == 2 and "allow_no_power must be True or False" in out.stdout.str()


def test_the_plugin_reports_a_sensitivity_check_that_checked_nothing_as_no_power_and_a_nan_bound_as_bad_input(
        pytester):
    """Before: both passed, "[0] ... consistent, worst change 0 within the bound"."""
    pytester.makepyfile(test_claims=textwrap.dedent('''
        import math
        import numpy as np
        import pytest

        @pytest.mark.dp(relation="add-remove")
        def test_inf_bound(dp):
            dp.assert_sensitivity(lambda d: float(np.sum(d)), lambda a, b: math.inf, norm=1,
                                  data=np.linspace(-10, 10, 8))

        @pytest.mark.dp(relation="add-remove")
        def test_nan_bound(dp):
            dp.assert_sensitivity(lambda d: float(np.sum(d)), lambda a, b: float("nan"), norm=1,
                                  data=np.linspace(-10, 10, 8))
    '''))
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--dp-budget", "smoke")
    text = out.stdout.str()
    out.assert_outcomes(failed=2)
    lines = [line for line in text.splitlines() if line.startswith("[")]
    assert any(line.startswith("[4] test_claims.py::test_inf_bound") and "NO POWER (no pair checked)" in line
               for line in lines)
    assert any(line.startswith("[2] test_claims.py::test_nan_bound") and "returned nan" in line for line in lines)


def test_a_forecast_that_does_not_hold_on_the_evaluation_runs_is_no_power_not_a_bare_zero():
    """The selection forecasts a bound (the first runs separate the sides), the evaluation finds none (the later
    runs do not): epsilon_lower = 0, which is true of every mechanism. Failed before: no_power was None whenever
    the selection had forecast a bound above 0 (numerical_svt seed 2 at the full budget: a bare 0.0 on
    'output[1] > 50.46')."""
    selection_runs = 2 * (SMALL.screen * SMALL.max_pairs + SMALL.select * SMALL.top) + 2  # the check's run too

    def fading():
        calls = []

        def fades(data, rng):  # the sum shows for the selection's runs only: a forecast the evaluation cannot repeat
            calls.append(1)
            shift = float(np.sum(data)) if len(calls) <= selection_runs else 0.0
            return shift + rng.normal()
        return fades

    result = audit(fading(), 1.0, relation="add-remove", budget=SMALL)
    assert result.witness["selection_epsilon"] > 0  # the selection forecast a bound
    assert result.epsilon_lower == 0.0 and result.consistent
    assert result.no_power and "found no evidence on the evaluation runs" in result.no_power
    assert result.verdict == "no power"
    with pytest.raises(NoPower, match="found no evidence"):
        assert_private(fading(), 1.0, relation="add-remove", budget=SMALL)
