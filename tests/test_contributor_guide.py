"""The contributor guide (docs/develop/) as printed: each page's example runs in a fresh interpreter (it
registers into the package's registries, so it must not share this process), and the front page's floors
are the layering test's."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "develop"
PAGES = ("method", "claim", "audit", "data_set", "statistic")


def example(page: str) -> str:
    """The one ```python block of ``page``."""
    blocks = re.findall(r"^```python\n(.*?)^```$", (GUIDE / f"{page}.md").read_text(), flags=re.S | re.M)
    assert len(blocks) == 1, f"{page}.md has {len(blocks)} python blocks"
    return blocks[0]


def test_every_extension_page_is_listed_and_tested():
    index = (GUIDE / "index.md").read_text()
    assert sorted(p.stem for p in GUIDE.glob("*.md") if p.stem != "index") == sorted(PAGES)
    assert all(f"\n{page}\n" in index for page in PAGES)  # in the toctree
    assert "develop/index" in (ROOT / "docs" / "index.md").read_text()


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_example_runs_as_printed(page, tmp_path):
    out = subprocess.run([sys.executable, "-c", example(page)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]


def layering_floors() -> tuple:
    """``FLOORS`` of tests/verify/test_layering.py, read from its source (test modules import no other test module)."""
    tree = ast.parse((ROOT / "tests" / "verify" / "test_layering.py").read_text())
    return next(ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["FLOORS"])


def test_the_floors_on_the_front_page_are_the_layering_tests():
    FLOORS = layering_floors()
    rows = re.findall(r"^\| (\d+) \| (.*?) \|", (GUIDE / "index.md").read_text(), flags=re.M)
    listed = [tuple(re.findall(r"`(\w+)`", modules)) for _, modules in rows]
    assert listed == [floor if isinstance(floor, tuple) else (floor,) for floor in FLOORS]
