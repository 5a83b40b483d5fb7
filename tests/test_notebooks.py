"""Every notebook in notebooks/ runs top to bottom with the quick profile.

Notebooks read ``DPFAIR_PROFILE`` (``quick`` here, ``full`` by default) to pick their
settings; they call the library and write figures to paper_figs/ -- here redirected to a
temporary directory through ``DPFAIR_FIGS`` so a test run leaves the tree unchanged.
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks_to_run():
    assert NOTEBOOKS, "notebooks/ has no notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_with_the_quick_profile(path, tmp_path, monkeypatch):
    monkeypatch.setenv("DPFAIR_PROFILE", "quick")
    monkeypatch.setenv("DPFAIR_FIGS", str(tmp_path / "figs"))
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [out for cell in notebook.cells if cell.cell_type == "code"
              for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
    assert any((tmp_path / "figs").rglob("*.png")), "the notebook wrote no figure"
