"""Sphinx configuration of the dpfair_analysis documentation (``make docs`` -> build/docs/html).

Built like code: warnings are errors and every cross-reference must resolve (tests/test_docs.py). No network:
no intersphinx, notebooks rendered as committed (never executed here).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

project = "dpfair_analysis"
author = "dpfair_analysis developers"
copyright = "2026, dpfair_analysis developers"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinxarg.ext",
]

# .rst first: autosummary writes its generated API pages in the first suffix's format
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "reproductions/_notebooks/*.py"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_theme = "pydata_sphinx_theme"
html_title = "dpfair_analysis"
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2, "secondary_sidebar_items": ["page-toc"]}

# notebooks: rendered as committed (their outputs are hours of computation), never executed at build time
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_typehints = "none"          # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False
numpydoc_validation_checks = set()
nitpicky = True
nitpick_ignore_regex = [
    # types named in signatures and docstrings that live in other projects (no intersphinx: no network)
    (r"py:.*", r"(torch|np|numpy|pd|pandas|nn|dp_event|dp_accounting|hypothesis|st|scipy|sklearn|fairlearn)\..*"),
    (r"py:class", r"(optional|callable|default .*|array-like|int or .*|float or .*|path|mapping|sequence.*|.* of .*)"),
]


def _copy_notebooks(app) -> None:
    """The committed, executed notebooks under reproductions/_notebooks (Sphinx reads sources below docs/)."""
    target = DOCS / "reproductions" / "_notebooks"
    target.mkdir(parents=True, exist_ok=True)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copy2(notebook, target / notebook.name)
    for notebook in sorted((ROOT / "examples").glob("*.ipynb")):
        shutil.copy2(notebook, target / notebook.name)


def setup(app) -> None:
    app.connect("builder-inited", _copy_notebooks)
