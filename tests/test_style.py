"""One docstring style, numpydoc: no Google-style section headers (``Args:``, ``Returns:``, ...), and every
numpydoc section in the package laid out as numpydoc lays it out (ruff's pydocstyle rules for section
names, underlines, blank lines and documented parameters, numpy convention as in pyproject.toml)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION_RULES = "D406,D407,D408,D409,D410,D411,D412,D414,D416,D417"
GOOGLE_HEADER = re.compile(r"^\s+(Args|Arguments|Keyword Args|Returns|Raises|Yields|Attributes|Examples?|Notes?|"
                           r"Parameters|Todo):\s*$", re.MULTILINE)


def google_headers(text: str) -> list[str]:
    return [m.group(0).strip() for m in GOOGLE_HEADER.finditer(text)]


def test_no_google_style_section_headers():
    found = {str(p.relative_to(ROOT)): google_headers(p.read_text()) for p in (ROOT / "dpfair_analysis").rglob("*.py")}
    assert not {k: v for k, v in found.items() if v}


def test_the_header_check_catches_a_google_docstring():
    assert google_headers('def f(x):\n    """Do it.\n\n    Args:\n        x: a number.\n    """\n') == ["Args:"]
    assert google_headers('def f(x):\n    """Do it.\n\n    Parameters\n    ----------\n    x : int\n    """\n') == []


def test_docstring_sections_are_numpydoc():
    exe = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(exe).exists():
        pytest.fail("ruff is a test dependency (pip install -e '.[test]')")
    result = subprocess.run([exe, "check", "--select", SECTION_RULES, "--output-format", "concise",
                             str(ROOT / "dpfair_analysis")], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def imported_test_modules(path: Path) -> set[str]:
    """Names of ``test_*`` modules a test file imports (``from test_x import ...`` / ``import test_x``)."""
    pattern = re.compile(r"^\s*(?:from|import)\s+(test_\w+)", re.MULTILINE)
    return set(pattern.findall(path.read_text()))


def test_no_test_module_imports_one_from_another_directory():
    """Only the test's own directory is on sys.path for sure (rootdir import mode): importing a
    ``test_*`` module from another directory passes or fails with the collection order."""
    tests = ROOT / "tests"
    crossing = {}
    for path in tests.rglob("test_*.py"):
        for name in imported_test_modules(path):
            if not (path.parent / f"{name}.py").exists():
                crossing[str(path.relative_to(ROOT))] = name
    assert not crossing, f"move the shared helpers into a tests/*.py module without test_: {crossing}"
