"""The repository's scripts (benchmarks/, the notebooks' tools) refuse a bad command line in one line, exit 2."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*ROOT.glob("benchmarks/*.py"), ROOT / "notebooks" / "execute.py", ROOT / "notebooks" / "record_runs.py",
                  ROOT / "notebooks" / "record_issue51.py"])


#: the arguments a script requires before an unknown one is reported
REQUIRED = {"record_issue51": ["--study", "method-grid"]}


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_an_unknown_option_is_one_line_naming_it_and_exit_2(script, capsys):
    """argparse's usage block is not printed on an error (ScriptParser): one line naming the option, status 2."""
    with pytest.raises(SystemExit) as exit_:
        _load(script).main([*REQUIRED.get(script.stem, []), "--no-such-option"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--no-such-option" in err[0] and "error" in err[0], err


#: modules a command-line refusal must not wait for (seconds of import, or a data load behind them)
HEAVY = ("torch", "pandas", "sklearn", "matplotlib", "scipy", "dp_accounting")

_REFUSE_WITHOUT_HEAVY_IMPORTS = """
import runpy, sys
for name in {heavy!r}:
    sys.modules[name] = None  # importing it now raises ImportError
sys.argv = [{script!r}, *{args!r}]
runpy.run_path({script!r}, run_name="__main__")
"""


#: a value each script refuses (out of its range), beside the unknown option
BAD_VALUE = {"diagnose_cost": ["--repeats", "0"], "exact_traces": ["--rows", "0"],
             "group_privacy_cost": ["--mnist-epochs", "0"], "individual_privacy": ["--resolution", "0"],
             "per_sample_step": ["--models", "vgg"], "privacy_testing": ["--confidence", "1.5"],
             "startup_time": ["--rounds", "0"], "sweep_backends": ["--backends", "ray"],
             "sweep_throughput": ["--models", "cnn"], "execute": ["--timeout", "0"], "record_runs": ["--jobs", "0"],
             "record_issue51": ["--seeds", "99"]}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_a_bad_command_line_is_refused_before_any_heavy_import(script):
    """The one-line refusal comes first: run as a script with torch, pandas, scikit-learn, matplotlib, scipy and
    dp_accounting made unimportable, an unknown option and a value out of range still give one line naming the
    option and status 2 (not an ImportError)."""
    for bad in (["--no-such-option"], BAD_VALUE[script.stem]):
        args = [*REQUIRED.get(script.stem, []), *bad]
        code = _REFUSE_WITHOUT_HEAVY_IMPORTS.format(heavy=HEAVY, script=str(script), args=args)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        err = done.stderr.strip().splitlines()
        assert done.returncode == 2, (bad, done.stderr[-2000:])
        assert len(err) == 1 and bad[0] in err[0], (bad, err)
