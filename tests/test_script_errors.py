"""The repository's scripts (benchmarks/, the notebooks' tools) refuse a bad command line in one line, exit 2."""

from __future__ import annotations

import importlib.util
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
