"""The pytest plugin checks its options when pytest configures and the marker's arguments when it collects (one
line each, never INTERNALERROR or a traceback of the kit), and a failed claim shows D, D' and the event.

Each test here failed before the change: a directory or /dev/full as --dp-report ended an all-green session in
INTERNALERROR, bad marker arguments failed only when the test ran (with a traceback), a failure printed the
source of assert_private and no D or D', and the summary had no statuses."""

import textwrap

import pytest

from dpfair_analysis.testing.plugin import _check_report_path

pytest_plugins = ["pytester"]

HEADER = textwrap.dedent('''
    import numpy as np
    import pytest
    from dpfair_analysis.testing.auditing import Budget

    SMALL = Budget("small", 200, 1000, 2000, 2, 4, (1, 1, 1))
''')
GREEN = HEADER + textwrap.dedent('''
    @pytest.mark.dp(relation="replace-one")
    def test_sensitivity_claim(dp):
        dp.assert_sensitivity(lambda d: float(np.clip(d, -1, 1).sum()), 2.0, norm=1, data=np.array([-2.0, 0.0, 2.0]),
                              examples=20)
''')


def run(pytester, source, *args):
    pytester.makepyfile(test_claims=source)
    # in a process of its own: an in-process run drops the modules it imported first, and a later test that imports
    # one of them again (scipy, numpy.fft: C extensions) fails with "cannot load module more than once per process"
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def output(result):
    return "\n".join(result.outlines + result.errlines)


def test_a_directory_as_report_is_a_usage_error_before_any_test_runs(pytester):
    result = run(pytester, GREEN, "--dp-report", ".")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = output(result)
    assert "--dp-report: refusing to write '.': it is a directory" in text and "INTERNALERROR" not in text
    assert "passed" not in text  # refused before the session ran


@pytest.mark.parametrize("report,fragment", [
    ("/dev/full", "it is a character device"),
    ("missing/report.json", "does not exist"),
], ids=["dev-full", "no-directory"])
def test_a_report_path_that_cannot_be_a_file_is_refused_by_name(tmp_path, monkeypatch, report, fragment):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(pytest.UsageError, match=f"^--dp-report: .*{fragment}"):
        _check_report_path(report)
    _check_report_path("report.json")  # a new file in a writable directory


def test_a_report_that_cannot_be_written_at_the_end_is_one_line_and_status_3(pytester):
    source = GREEN + textwrap.dedent('''
        def test_removes_the_report_directory(dp):
            import shutil
            shutil.rmtree("out")
    ''')
    (pytester.path / "out").mkdir()
    result = run(pytester, source, "--dp-report", "out/report.json")
    text = output(result)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR and "INTERNALERROR" not in text
    assert [line for line in text.splitlines() if "--dp-report: cannot write" in line] == [
        next(line for line in text.splitlines() if line.startswith("dpfair: error: --dp-report: cannot write"))]


MARKERS = {
    "negative_epsilon": ("epsilon=-1, relation='queries'", "epsilon must be a finite number >= 0, got -1"),
    "unknown_relation": ("epsilon=1, relation='add-remve'", "relation must be one of"),
    "misspelt": ("epsilom=1, relation='queries'", "unknown argument 'epsilom' (did you mean 'epsilon'?)"),
    "positional": ("1.0, relation='queries'", "takes keyword arguments only"),
}


def test_bad_marker_arguments_are_collection_errors_without_a_traceback(pytester):
    for name, (marker, _) in MARKERS.items():
        pytester.makepyfile(**{f"test_{name}": textwrap.dedent(f'''
            import pytest

            @pytest.mark.dp({marker})
            def test_claim(dp):
                raise RuntimeError("the test must not run")
        ''')})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    text = output(result)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's status for errors during collection
    for name, (_, fragment) in MARKERS.items():
        assert f"test_{name}.py::test_claim: @pytest.mark.dp: {fragment}" in text, text
    assert "Traceback" not in text and "plugin.py" not in text and "must not run" not in text


def test_a_failure_shows_d_d_prime_and_the_event_and_the_summary_its_status(pytester):
    source = HEADER + textwrap.dedent('''
        import sys

        @pytest.mark.dp(epsilon=0.1, relation="queries")
        def test_too_little_noise(dp):
            dp.assert_private(lambda d, rng: d[0] + rng.laplace(scale=0.1), pairs=([0.0], [1.0]), budget=SMALL)

        @pytest.mark.dp(epsilon=1.0, relation="queries")
        def test_exits(dp):
            dp.assert_private(lambda d, rng: sys.exit(0), data=np.ones(2), budget=SMALL)
    ''')
    result = run(pytester, source)
    text = output(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "D = [0.]" in text and "D' = [1.]" in text and "event" in text
    assert "def assert_private" not in text and "result = audit(" not in text  # the kit's frames are hidden
    assert "[1] test_claims.py::test_too_little_noise" in text
    assert "[2] test_claims.py::test_exits: assert_private: bad input or broken mechanism: MechanismError" in text
    assert "called sys.exit(0)" in text and "1 refuted (1), 1 bad input or broken mechanism (2)" in text
