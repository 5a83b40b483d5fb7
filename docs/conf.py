"""Sphinx configuration of the dpfair_analysis documentation (``make docs`` -> build/docs/html).

Built like code: warnings are errors and every cross-reference must resolve (tests/test_docs.py). No network:
no intersphinx, notebooks rendered as committed (never executed here).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

import findings_tables  # noqa: E402  (docs/_ext: the findings page's tables, from the committed CSVs)

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
exclude_patterns = ["_build", "**.ipynb_checkpoints", "reproductions/_notebooks/*.py", "_generated", "_ext"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_theme = "pydata_sphinx_theme"
html_title = "dpfair_analysis"
html_css_files = ["custom.css"]
# the findings page is wide tables: no left navigation there
html_sidebars = {"findings": []}
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2, "secondary_sidebar_items": ["page-toc"]}

# notebooks: rendered as committed (their outputs are hours of computation), never executed at build time
nb_execution_mode = "off"
nb_merge_streams = True
nb_output_stderr = "remove"  # warnings printed while the notebooks ran (paths of the machine that ran them)
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_inherit_docstrings = False  # inherited ones are dp_accounting's (another project's markup)
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


_MISSING = object()

#: The modules the API reference documents (docs/api/index.rst), read at build time.
API_MODULES = [line.strip() for line in (DOCS / "api" / "index.rst").read_text().splitlines()
               if line.strip().startswith("dpfair_analysis.") and " " not in line.strip()]


def _skip_documented_elsewhere(app, what, name, obj, skip, options):
    """A module page lists what its ``__all__`` re-exports, but an object defined under another module that the
    API reference documents gets its one description there (no duplicate object descriptions)."""
    current = app.env.temp_data.get("autodoc:module") or ""
    home = getattr(obj, "__module__", None) or ""
    if what != "module" or not home or home == current:
        return None
    if any(home == m or home.startswith(m + ".") for m in API_MODULES
           if m != current and not current.startswith(m + ".")):
        return True
    return None


def _existing_python_object(target: str, module: str | None, klass: str | None):
    """The object a Python cross-reference names, looked up as Python would from the documented context, or None."""
    target = target.lstrip(".~")
    candidates = [target]
    if module:
        parts = module.split(".")
        prefixes = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
        if klass:
            candidates.insert(0, f"{module}.{klass}.{target}")
        candidates[:0] = [f"{prefix}.{target}" for prefix in prefixes]
    for name in candidates:
        parts = name.split(".")
        for split in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:split]))
            except ImportError:
                continue
            for attribute in parts[split:]:
                fields = getattr(obj, "__dataclass_fields__", {})
                if attribute in fields:  # a dataclass field without a class-level default
                    obj = fields[attribute]
                    continue
                obj = getattr(obj, attribute, _MISSING)
                if obj is _MISSING:
                    break
            if obj is not _MISSING:
                return obj
            break
    return None


def _documenting_modules(node) -> list[str]:
    """The module whose docstring holds the reference (``docstring of pkg.mod.func``), and its parents."""
    source = str(node.source or "")
    if "docstring of " not in source:
        return []
    parts = source.rsplit("docstring of ", 1)[1].split(".")
    paths = [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
    # a class re-exported by its package (dpfair_analysis.testing.Budget) is documented under the package, while the
    # helpers its docstrings name live in the module that defines it (dpfair_analysis.testing.auditing)
    defining = [getattr(_existing_python_object(path, None, None), "__module__", None) for path in paths]
    return paths + [m for m in defining if isinstance(m, str) and m not in paths]


def _undocumented_but_real(app, env, node, contnode):
    """A Python reference to an object that exists but has no page of its own (a private helper, a submodule the API
    reference does not list): rendered as code, without a link. A reference to a name that does not exist (a typo,
    a renamed or deleted object) finds nothing here and stays a nitpicky warning, so the -W build fails on it."""
    if node.get("refdomain") != "py":
        return None
    for module in [node.get("py:module"), *_documenting_modules(node)]:
        if _existing_python_object(node["reftarget"], module, node.get("py:class")) is not None:
            return contnode
    return None


_LITERAL_SPANS = re.compile(r"(``.*?``|:\w+:`[^`]*`|`[^`]*`)")


def _absolute_values_not_substitutions(app, what, name, obj, options, lines):
    """The docstrings write plain-text maths, where ``|x|`` is an absolute value (never a reST substitution):
    escape those bars outside literals, roles, grid tables and the indented body of a ``::`` block (literal
    blocks, ``.. math::``)."""
    block_indent = None
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if block_indent is not None and line.strip() and indent <= block_indent:
            block_indent = None
        if block_indent is None and line.rstrip().endswith("::"):
            block_indent = indent
            if ".. math::" in line:
                continue
        if block_indent is not None and (indent > block_indent or not line.strip()):
            continue
        stripped = line.strip()
        grid_row = stripped[:1] == stripped[-1:] == "|" and stripped.count("|") > 3
        if "|" not in line or stripped.startswith("+-") or grid_row:
            continue  # a grid table's border or row
        pieces = _LITERAL_SPANS.split(line)
        lines[i] = "".join(p if k % 2 else p.replace("|", "\\|") for k, p in enumerate(pieces))


# MathJax served with the site (the Jupyter project's MathJax 2.7 from the docs extra): the maths renders where
# there is no network. Without the package the site falls back to Sphinx's default (a CDN).
_MATHJAX = importlib.util.find_spec("jupyter_server_mathjax")
MATHJAX_STATIC = Path(_MATHJAX.submodule_search_locations[0]) / "static" if _MATHJAX else None
if MATHJAX_STATIC is not None and (MATHJAX_STATIC / "MathJax.js").is_file():
    mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
    # MyST marks pages "mathjax_ignore" (so a stray $ is text) and its maths "math": MathJax 2's names for that
    mathjax2_config = {"tex2jax": {"processClass": "tex2jax_process|mathjax_process|math|output_area",
                                   "ignoreClass": "tex2jax_ignore|mathjax_ignore"}}


def _copy_mathjax(app, exception) -> None:
    if exception is None and app.builder.format == "html" and "mathjax_path" in globals():
        shutil.copytree(MATHJAX_STATIC, Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def _write_findings_tables(app) -> None:
    findings_tables.write_tables(ROOT, DOCS / "_generated")


def _python_warnings_as_build_warnings(app) -> None:
    """A Python warning raised while the site builds (numpydoc's "Unknown section", a deprecated call in an
    extension) becomes a Sphinx warning, so ``-W`` fails the build on it as on any other."""
    import warnings

    from sphinx.util import logging

    logger = logging.getLogger("python-warnings")

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        logger.warning(f"Python {category.__name__}: {message} ({filename}:{lineno})")

    warnings.showwarning = show


def setup(app) -> None:
    _python_warnings_as_build_warnings(app)
    app.connect("builder-inited", _write_findings_tables)
    app.connect("build-finished", _copy_mathjax)
    app.connect("autodoc-process-docstring", _absolute_values_not_substitutions)
    app.connect("builder-inited", _copy_notebooks)
    app.connect("missing-reference", _undocumented_but_real)
    app.connect("autodoc-skip-member", _skip_documented_elsewhere)
