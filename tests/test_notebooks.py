"""Notebooks: one source each, an executed copy that matches it, and a quick run of each.

``notebooks/<name>.py`` (jupytext percent format) is the source of truth; the committed
``notebooks/<name>.ipynb`` is its executed copy (outputs kept). The copy's cells must be
the source's cells, so the two cannot drift: after editing a source, update the copy's
inputs with ``jupytext --update --to ipynb notebooks/<name>.py`` (keeps the outputs) or
re-execute it with ``notebooks/execute.py --in-place``.

Notebooks read ``DPFAIR_PROFILE`` (``quick`` here, ``full`` by default) to pick their
settings; they call the library and write figures to paper_figs/ -- here redirected to a
temporary directory through ``DPFAIR_FIGS`` so a test run leaves the tree unchanged.
"""

from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
TOOLS = {"execute.py"}  # scripts in notebooks/ that are not notebooks
SOURCES = sorted(p for p in NOTEBOOK_DIR.glob("*.py") if p.name not in TOOLS)
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def test_there_are_notebooks_to_run():
    assert SOURCES, "notebooks/ has no notebook sources"


def test_every_source_has_its_executed_copy_and_every_copy_its_source():
    assert {p.stem for p in SOURCES} == {p.stem for p in NOTEBOOKS}


def _cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_the_executed_copy_has_the_cells_of_its_source(source):
    expected = _cells(jupytext.read(source))
    committed = _cells(nbformat.read(source.with_suffix(".ipynb"), as_version=4))
    assert committed == expected, (
        f"{source.with_suffix('.ipynb').name} has drifted from {source.name}: run "
        f"`jupytext --update --to ipynb notebooks/{source.name}` (keeps the outputs)")


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_the_source_is_python_and_paired(source):
    compile(source.read_text(encoding="utf-8"), str(source), "exec")
    executed = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    assert executed.metadata.get("jupytext", {}).get("formats") == "ipynb,py:percent"


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_notebook_runs_with_the_quick_profile(source, tmp_path, monkeypatch):
    monkeypatch.setenv("DPFAIR_PROFILE", "quick")
    monkeypatch.setenv("DPFAIR_FIGS", str(tmp_path / "figs"))
    notebook = jupytext.read(source)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(source.parent)}}).execute()
    errors = [out for cell in notebook.cells if cell.cell_type == "code"
              for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
    assert any((tmp_path / "figs").rglob("*.png")), "the notebook wrote no figure"
