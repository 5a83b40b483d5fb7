"""examples/ is smoke-run by the default suite: the pytest example passes at the smoke budget, the tutorial's
executed copy has the cells of its source, and the source runs (smoke profile)."""

import os
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_pytest_example_is_short_and_passes():
    assert len((EXAMPLES / "test_fair_gap.py").read_text().splitlines()) <= 20
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--dp-budget", "smoke",
                          str(EXAMPLES)], check=False, capture_output=True, text=True, cwd=EXAMPLES, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "2 passed" in out.stdout and "REFUTED" in out.stdout


def test_the_tutorial_copy_matches_its_source_and_the_source_runs():
    source = EXAMPLES / "fair_gap_tutorial.py"
    expected = [(c.cell_type, c.source) for c in jupytext.read(source).cells]
    executed = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    assert [(c.cell_type, c.source) for c in executed.cells] == expected, (
        "run `jupytext --update --to ipynb examples/fair_gap_tutorial.py` (keeps the outputs)")
    assert all(c.get("outputs") for c in executed.cells if c.cell_type == "code"), "the copy is not executed"
    env = {**os.environ, "DPFAIR_PROFILE": "smoke", "MPLBACKEND": "Agg"}
    out = subprocess.run([sys.executable, source.name], check=False, capture_output=True, text=True, cwd=EXAMPLES,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "caught = True" in out.stdout and "private_gap_wrong exit status 1" in out.stdout
