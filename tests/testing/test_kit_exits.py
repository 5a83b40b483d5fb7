"""What the code under test does by accident cannot end, hang or pass its own audit: `dpfair audit --target` runs
it in a process of its own and decides the status (0 consistent, 1 refuted, 2 bad input or a broken mechanism,
3 internal error, 4 no power), and refuses a result that is inconsistent with itself (status 3).

Each test here failed before the change: sys.exit(0) in the mechanism made the audit exit 0 with nothing printed,
os._exit ended the command (in-process: the test session), printed text corrupted --json, a sleep at import time
was outside the time budget and internal errors exited 1, the status of a refuted claim."""

import json
import textwrap

import numpy as np
import pytest

from dpfair_analysis.cli import main
from dpfair_analysis.testing.isolation import IsolatedError, _ended
from dpfair_analysis.testing.runner import MechanismError

MECHANISMS = textwrap.dedent('''
    import os
    import signal
    import sys
    import time

    def exits(data, rng):
        sys.exit(0)

    def hard_exit(data, rng):
        if rng.random() < 0.01:
            os._exit(0)
        return data[0] + rng.laplace()

    def chatty(data, rng):
        if rng.random() < 0.001:
            print('{"consistent": true}')
            os.write(1, b"consistent\\n")
        return data[0] + rng.laplace(scale=0.1)

    def pair():
        return [0.0], [1.0]

    def out_of_memory(data, rng):
        raise MemoryError("simulated")

    def interrupts(data, rng):
        raise KeyboardInterrupt

    def hangs(data, rng):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the alarm cannot interrupt it
        time.sleep(60)
''')
CLAIM = ["--epsilon", "1", "--relation", "queries", "--trials", "1000", "--quiet"]


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "mechanisms.py"
    path.write_text(MECHANISMS)
    return path


def audit_status(capfd, spec, *extra):
    status = main(["audit", "--target", spec, *CLAIM, *extra])
    out, err = capfd.readouterr()
    audit_status.err = err  # everything on stderr, the mechanism's own prints included
    return status, out, [line for line in err.splitlines() if line.startswith("dpfair:")]


@pytest.mark.parametrize("function,fragment", [
    ("exits", "called sys.exit(0) instead of returning an output"),
    ("hard_exit", "exited with status 0 (os._exit, or a crash) without a result while the mechanism"),
    ("out_of_memory", "raised MemoryError: simulated"),
    ("interrupts", "raised KeyboardInterrupt"),
])
def test_code_that_ends_its_process_is_status_2_and_one_line(target, capfd, function, fragment):
    status, out, lines = audit_status(capfd, f"{target}:{function}")
    assert status == 2 and out == ""
    assert len(lines) == 1 and lines[0].startswith("dpfair: error:") and fragment in lines[0], lines


def test_what_the_mechanism_prints_cannot_forge_the_json(target, capfd):
    status, out, _ = audit_status(capfd, f"{target}:chatty", "--pair", f"{target}:pair", "--json")
    assert status == 1 and json.loads(out)["consistent"] is False  # stdout is the JSON and nothing else
    assert '{"consistent": true}' in audit_status.err  # its prints went to stderr


@pytest.mark.parametrize("source,fragment", [
    ("import time\ntime.sleep(60)\n", "used up the time budget of 0.5 s"),
    ("import sys\nsys.exit(3)\n", "--target: importing"),
], ids=["sleep", "sys.exit(3)"])
def test_the_import_is_inside_the_time_budget_and_cannot_exit(tmp_path, capfd, source, fragment):
    path = tmp_path / "at_import.py"
    path.write_text(source + "def f(data, rng):\n    return 0.0\n")
    status, out, lines = audit_status(capfd, f"{path}:f", "--time-budget", "0.5")
    assert status == 2 and out == "" and len(lines) == 1 and fragment in lines[0], lines


def test_a_hang_no_signal_interrupts_is_stopped_by_the_parent(target, capfd):
    status, _, lines = audit_status(capfd, f"{target}:hangs", "--time-budget", "0.5")
    assert status == 2 and len(lines) == 1 and "a hang no signal interrupted" in lines[0], lines


def test_an_internal_error_is_status_3_not_a_verdict(monkeypatch, capsys):
    import dpfair_analysis.cli.audit as audit_command

    def broken(args):
        raise MemoryError()

    monkeypatch.setattr(audit_command, "run", broken)
    monkeypatch.delenv("DPFAIR_DEBUG", raising=False)
    assert main(["audit", "--mechanism", "dpsgd"]) == 3
    assert capsys.readouterr().err.startswith("dpfair: internal error: out of memory (MemoryError)")


def test_an_ended_child_is_the_mechanism_s_fault_only_while_it_ran():
    assert isinstance(_ended(-9, "the mechanism m.py:f", "m.py:f"), MechanismError)
    assert "SIGKILL (out of memory?)" in str(_ended(-9, "the mechanism m.py:f", "m.py:f"))
    assert isinstance(_ended(1, None, "m.py:f"), IsolatedError)


# ----------------------------------------------------------------------------- tampering (an adversarial review)
TAMPERS = textwrap.dedent('''
    import dataclasses
    import sys

    import numpy as np

    _main = sys.modules["__main__"]  # the child: python -m dpfair_analysis.testing.isolation
    if hasattr(_main, "audit"):
        _real = _main.audit

        def _audit(*args, **kwargs):
            return dataclasses.replace(_real(*args, **kwargs), epsilon_lower=0.5, consistent=True)

        _main.audit = _audit

    def exact_sum(data, rng):  # no noise at all
        return float(np.sum(data))
''')


def test_a_result_tampered_with_in_the_child_is_refused_as_inconsistent(tmp_path, capfd):
    """Before: status 0, "audited epsilon >= 0.5 -> consistent" for a mechanism without noise."""
    path = tmp_path / "tampers.py"
    path.write_text(TAMPERS)
    status, out, lines = audit_status(capfd, f"{path}:exact_sum")
    assert status == 3 and out == "" and len(lines) == 1, lines
    assert lines[0].startswith("dpfair: internal error:") and "inconsistent result from the child" in lines[0]
    assert "bounds epsilon by" in lines[0]


def test_the_consistency_check_recomputes_the_bound_the_verdict_and_the_power():
    import dataclasses

    from dpfair_analysis.testing import audit
    from dpfair_analysis.testing.isolation import check_result

    def noisy(data, rng):
        return float(np.sum(data)) + rng.laplace()

    result = audit(noisy, 1.0, relation="add-remove", trials=2000, budget="smoke")
    claim = {"epsilon": 1.0, "delta": 0.0, "confidence": 0.95}
    assert check_result(result, **claim) is result
    for change, fragment in [({"epsilon_lower": result.epsilon_lower + 0.5}, "bounds epsilon by"),
                             ({"consistent": not result.consistent}, "contradicts"),
                             ({"epsilon_claimed": 2.0}, "not the claim asked about"),
                             ({"certifiable_epsilon": 50.0}, "certify at most"),
                             ({"witness": {**result.witness, "false_positives": -1}}, "not counts")]:
        with pytest.raises(IsolatedError, match=fragment):
            check_result(dataclasses.replace(result, **change), **claim)
    above = audit(noisy, 40.0, relation="add-remove", trials=2000, budget="smoke")  # no power: claim > certifiable
    with pytest.raises(IsolatedError, match="claims power"):
        check_result(dataclasses.replace(above, no_power=None), **{**claim, "epsilon": 40.0})
