"""`dpfair audit --target FILE.py:FUNCTION`: the result as JSON, exit status from the verdict, one-line errors."""

import json
import textwrap

import numpy as np
import pytest

from dpfair_analysis.cli import main

MECHANISMS = textwrap.dedent('''
    import numpy as np

    def private(data, rng):
        return data[0] + rng.laplace(scale=1.0)

    def leaky(data, rng):
        return data[0] + rng.laplace(scale=0.1)

    def broken(data, rng):
        raise RuntimeError("no data")

    def pair():
        return np.zeros(2), np.array([1.0, 0.0])

    def not_a_pair():
        return np.zeros(2)

    def not_neighbours():
        return np.zeros(3), np.ones(5)

    def huge(data, rng):  # a correct Laplace sum in units of 1e-160: finite doubles whose squares overflow
        return np.array([float(np.sum(data)) + rng.laplace(0.0, 1.0), 0.0]) * 1e160

    def coin(data, rng):
        return float(rng.random() < 0.5)

    NOT_CALLABLE = 3
''')
FAST = ["--trials", "2000", "--epsilon", "1.0", "--relation", "queries"]


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "mechanisms.py"
    path.write_text(MECHANISMS)
    return path


def test_json_has_the_fields_and_the_exit_status_follows_the_verdict(target, capsys):
    assert main(["audit", "--target", f"{target}:private", *FAST, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) == {"verdict", "epsilon_lower", "confidence", "consistent", "witness", "trials", "seconds",
                            "power", "certifiable_epsilon", "no_power"}
    assert payload["consistent"] is True and payload["epsilon_lower"] <= 1.0
    assert main(["audit", "--target", f"{target}:leaky", *FAST, "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["consistent"] is False and payload["epsilon_lower"] > 1.0
    assert {"pair", "change", "event", "statistic"} <= set(payload["witness"])


def test_workers_give_the_same_numbers_for_every_count(target, capsys):
    """``--workers k``: each chunk of runs from a seed of its own, so no workers, one and two give the same result."""
    results = []
    for workers in ([], ["--workers", "1"], ["--workers", "2"]):
        assert main(["audit", "--target", f"{target}:private", *FAST, *workers, "--json"]) == 0
        payload = json.loads(capsys.readouterr().out)
        results.append((payload["epsilon_lower"], payload["witness"]["event"], payload["trials"]))
    assert results[0] == results[1] == results[2]


def test_pair_and_data_options(target, tmp_path, capsys):
    assert main(["audit", "--target", f"{target}:private", "--pair", f"{target}:pair", *FAST, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["witness"]["neighbour"] == [1.0, 0.0]
    np.savetxt(tmp_path / "base.csv", np.array([3.0, 3.0, 3.0]), delimiter=",")
    assert main(["audit", "--target", f"{target}:private", "--data", str(tmp_path / "base.csv"), *FAST]) == 0
    out = capsys.readouterr().out
    assert "consistent" in out and "witness" in out


@pytest.mark.parametrize("argv,fragment", [
    (["--target", "{t}:private", "--relation", "queries"], "--epsilon"),
    (["--target", "{t}:private", "--epsilon", "1"], "--relation"),
    (["--target", "{t}:nothing", "--epsilon", "1", "--relation", "queries"], "no function 'nothing'"),
    (["--target", "{t}:NOT_CALLABLE", "--epsilon", "1", "--relation", "queries"], "not callable"),
    (["--target", "missing.py:f", "--epsilon", "1", "--relation", "queries"], "not a Python file"),
    (["--target", "{t}", "--epsilon", "1", "--relation", "queries"], "FILE.py:FUNCTION"),
    (["--target", "{t}:broken", "--epsilon", "1", "--relation", "queries"], "raised RuntimeError: no data"),
    (["--target", "{t}:private", "--pair", "{t}:not_a_pair", "--epsilon", "1", "--relation", "queries"],
     "must return the pair"),
    (["--target", "{t}:private", "--mechanism", "dpsgd", "--epsilon", "1", "--relation", "queries"],
     "exactly one of --mechanism"),
    (["--mechanism", "dpsgd", "--epsilon", "1"], "--epsilon applies only with --target"),
    (["--target", "{t}:private", "--epsilon", "-1", "--relation", "queries"], "--epsilon"),
    (["--target", "{t}:private", "--epsilon", "1", "--delta", "1", "--relation", "queries"], "--delta"),
    # before: status 3, "internal error: IsolatedError: ValueError: pair 0 is not a neighbouring pair ..."
    (["--target", "{t}:private", "--pair", "{t}:not_neighbours", "--epsilon", "1", "--relation", "add-remove"],
     "--pair: pair 0 is not a neighbouring pair under add-remove"),
])
def test_bad_input_is_one_line_and_exit_2(target, capsys, argv, fragment):
    argv = [a.replace("{t}", str(target)) for a in argv]
    assert main(["audit", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpfair: error:") and fragment in err[0]


def test_a_target_whose_import_fails_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("raise ImportError('missing dependency')\n")
    assert main(["audit", "--target", f"{bad}:f", "--epsilon", "1", "--relation", "queries"]) == 2
    err = capsys.readouterr().err
    assert "importing" in err and "missing dependency" in err


def test_an_audit_without_power_says_so_in_text_and_json(target, capsys):
    assert main(["audit", "--target", f"{target}:coin", *FAST, "--epsilon", "0.1"]) == 4  # no power: status 4
    assert "NO POWER: no test has power" in capsys.readouterr().out
    assert main(["audit", "--target", f"{target}:coin", *FAST, "--epsilon", "0.1", "--json"]) == 4
    payload = json.loads(capsys.readouterr().out)
    assert payload["no_power"] and payload["certifiable_epsilon"] > 0.1 and payload["verdict"] == "no power"


def test_audit_argument_checks_in_the_child_are_bad_input_not_internal_errors(target, tmp_path, capsys):
    """A 0-d --data array is refused before the child starts; given to the child anyway (the API), the audit's own
    check is an ArgumentError naming data, not an IsolatedError (status 3 before)."""
    from dpfair_analysis.errors import ArgumentError
    from dpfair_analysis.testing.isolation import audit_file
    from dpfair_analysis.testing.relations import make_relation

    np.save(tmp_path / "scalar.npy", np.array(3.0))
    assert main(["audit", "--target", f"{target}:private", "--data", str(tmp_path / "scalar.npy"), "--epsilon",
                 "1", "--relation", "add-remove"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpfair: error: --data:") and "0-d" in err[0]
    with pytest.raises(ArgumentError, match="records along axis 0") as error:
        audit_file(f"{target}:private", 1.0, relation=make_relation("add-remove"), data=np.array(3.0), trials=100)
    assert error.value.argument == "data"


def test_huge_finite_outputs_are_audited_not_an_internal_error(target, capsys):
    """Before: status 3, the learned statistic's squared features overflowed ("Input X contains NaN")."""
    status = main(["audit", "--target", f"{target}:huge", "--epsilon", "1", "--relation", "add-remove", "--json",
                   "--budget", "smoke"])
    captured = capsys.readouterr()
    assert status in (0, 4), captured.err
    payload = json.loads(captured.out)
    assert payload["consistent"] and "Warning" not in captured.err


def test_the_file_named_is_what_runs_not_a_pyc_planted_beside_it(tmp_path):
    """The loader used to import the file, which reads __pycache__/NAME.cpython-XY.pyc when its header matches the
    source's mtime and size: another user who can write the directory planted one and it ran instead (and printed
    a normal verdict). The source is now compiled from the file itself."""
    import importlib._bootstrap_external as external
    import importlib.util
    import os

    from dpfair_analysis.testing.isolation import load_function

    source = tmp_path / "umech.py"
    source.write_text("def fn(data, rng):\n    return 'the user file'\n")
    info = os.stat(source)
    evil = compile("def fn(data, rng):\n    return 'planted'\n", str(source), "exec")
    cache = tmp_path / "__pycache__" / os.path.basename(importlib.util.cache_from_source(str(source)))
    cache.parent.mkdir()
    cache.write_bytes(external._code_to_timestamp_pyc(evil, int(info.st_mtime), info.st_size))
    assert load_function(f"{source}:fn", "target")(None, None) == "the user file"


def test_a_module_planted_in_the_working_directory_is_not_imported_by_the_child(target, tmp_path, monkeypatch,
                                                                                  capsys):
    """`python -m` puts the working directory first on sys.path: a numpy.py planted there ran in the --target
    child. The child runs with -P."""
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "PWNED"
    (work / "numpy.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise ImportError('planted')\n")
    monkeypatch.chdir(work)
    assert main(["audit", "--target", f"{target}:private", *FAST]) == 0
    assert not marker.exists()
