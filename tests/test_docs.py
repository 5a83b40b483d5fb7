"""The documentation site is built like code: warnings are errors, every reference resolves, every notebook is in a
toctree, every public entry point has a numpydoc ``Parameters`` section and a place in the API reference.

One real build of the site (``sphinx -W -n -j 1``, notebooks rendered as committed, never executed) into a
temporary directory -- the repository is not written to -- and one small probe build through the same ``conf.py``
that feeds the checks a broken link, a broken reference and a notebook outside every toctree, to show they fail.
"""

from __future__ import annotations

import csv
import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from numpydoc.docscrape import ClassDoc, FunctionDoc

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BUILD_TIMEOUT = 240  # seconds; the build takes ~25-35 s on 2 shared cores (tests/test_docs.py's time box)

#: The public entry points: each needs a ``Parameters`` section and an entry in the API reference, under the name
#: the reference documents it by.
ENTRY_POINTS = [
    "dpfair_analysis.training.loop.train",
    "dpfair_analysis.diagnose.diagnose",
    "dpfair_analysis.experiments.compare.run_compare",
    "dpfair_analysis.verify.claims.run_claims",
    "dpfair_analysis.verify.audits.audit",
    "dpfair_analysis.data.load",
    "dpfair_analysis.privacy.accounting.calibrate_noise_multiplier",
    "dpfair_analysis.training.methods.register",
    "dpfair_analysis.training.methods.get",
    "dpfair_analysis.training.methods.Method",
]


def kit_functions() -> list[str]:
    """Every public function of the privacy-testing kit (its ``__all__``)."""
    import dpfair_analysis.testing as kit

    return [f"dpfair_analysis.testing.{name}" for name in kit.__all__ if inspect.isfunction(getattr(kit, name))]


def resolve(dotted: str):
    module, _, attribute = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


# --------------------------------------------------------------------------- the checkers
def sphinx_build(source: Path, out: Path, *extra: str) -> tuple[int, str]:
    """Build ``source`` with warnings as errors and nitpicky references; (exit status, warnings)."""
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-n", "--keep-going", "-j", "1", "-q",
               "-d", str(out / ".doctrees"), *extra, str(source), str(out / "html")]
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT, env=env, check=False)
    return done.returncode, done.stderr


def site_copy(tmp: Path, *, notebooks: Path | None = None, docs: Path = DOCS) -> Path:
    """A copy of ``docs/`` whose parent holds what ``conf.py`` reads from the repository (notebooks, examples,
    paper_figs, benchmarks/results), so the build writes nothing into the repository."""
    shutil.copytree(docs, tmp / "docs", ignore=shutil.ignore_patterns("_generated", "generated", "_notebooks"))
    (tmp / "notebooks").symlink_to(notebooks or ROOT / "notebooks")
    for name in ("examples", "paper_figs", "benchmarks"):
        (tmp / name).symlink_to(ROOT / name)
    return tmp / "docs"


def toctree_entries(page: Path) -> set[str]:
    """The documents a MyST page's ``{toctree}`` blocks list (relative to the page's folder)."""
    entries = set()
    for block in re.findall(r"```\{toctree\}\n(.*?)```", page.read_text(), flags=re.S):
        entries |= {line.strip() for line in block.splitlines() if line.strip() and not line.startswith(":")}
    return entries


def notebooks_missing_from_toctree(docs: Path, repository: Path) -> list[str]:
    """Notebooks of ``notebooks/`` and ``examples/`` that the reproductions page does not list."""
    listed = toctree_entries(docs / "reproductions" / "index.md")
    notebooks = sorted((repository / "notebooks").glob("*.ipynb")) + sorted((repository / "examples").glob("*.ipynb"))
    return [path.name for path in notebooks if f"_notebooks/{path.stem}" not in listed]


def missing_parameters(names: list[str]) -> list[str]:
    """Entry points that take arguments but whose docstring has no numpydoc ``Parameters`` section."""
    missing = []
    for name in names:
        obj = resolve(name)
        parameters = [p for p in inspect.signature(obj).parameters.values() if p.name not in ("self", "cls")]
        if not parameters:
            continue
        doc = ClassDoc(obj) if inspect.isclass(obj) else FunctionDoc(obj)
        if not doc["Parameters"] and not (inspect.isclass(obj) and doc["Attributes"]):
            missing.append(name)
    return missing


def missing_from_api(names: list[str], html: Path) -> list[str]:
    """Entry points without an anchor (``id="<dotted name>"``) on a page of the built API reference."""
    anchors = set()
    for page in (html / "api").rglob("*.html"):
        anchors |= set(re.findall(r'id="(dpfair_analysis\.[\w.]+)"', page.read_text(errors="replace")))
    return [name for name in names if name not in anchors]


def broken_internal_links(html: Path) -> list[str]:
    """``href``s and ``src``s (links, images, scripts such as the site's own MathJax) of the built pages that point
    to a file of the site that does not exist."""
    broken = []
    for page in html.rglob("*.html"):
        if page.relative_to(html).parts[0] in ("_static", "_sources"):
            continue  # the theme's templates and the page sources, not pages of the site
        for target in re.findall(r'(?:href|src)="([^"#?]+)', page.read_text(errors="replace")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                continue  # another site, or mailto:
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(html)} -> {target}")
    return broken


# --------------------------------------------------------------------------- the site
def test_the_site(tmp_path):
    """One build (a single test, so ``pytest -n 2`` builds the site once) and every check on it."""
    source = site_copy(tmp_path)
    status, warnings = sphinx_build(source, tmp_path / "out")
    html = tmp_path / "out" / "html"
    # warnings as errors, nitpicky references: a broken link or reference, a notebook outside the toctrees
    assert status == 0 and "WARNING" not in warnings and "ERROR" not in warnings, warnings[-5000:]
    # every notebook rendered, and listed by the reproductions page
    assert notebooks_missing_from_toctree(DOCS, ROOT) == []
    for notebook in [*ROOT.joinpath("notebooks").glob("*.ipynb"), *ROOT.joinpath("examples").glob("*.ipynb")]:
        assert (html / "reproductions" / "_notebooks" / f"{notebook.stem}.html").is_file(), notebook.name
    # no link, image or script of the built site points to a missing file (MathJax is served by the site)
    assert broken_internal_links(html) == []
    # every entry point has its place in the API reference
    assert missing_from_api(ENTRY_POINTS + kit_functions(), html) == []
    # the CLI reference comes from the real parser: every command, and the commands' own flags
    from dpfair_analysis.cli import build_parser

    page = (html / "cli.html").read_text()
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert commands and set(commands) <= set(re.findall(r"<h3>([\w-]+)", page))
    assert "--weights" in page and "--trust-model-file" in page
    if shutil.which("chromium"):  # the maths typeset offline, in a real browser (where one is installed)
        done = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                               "--virtual-time-budget=15000", "--dump-dom", (html / "methods" / "pfld.html").as_uri()],
                              capture_output=True, text=True, timeout=120, check=False)
        assert "MathJax_" in done.stdout and "Math Processing Error" not in done.stdout


def test_every_entry_point_has_a_parameters_section():
    assert missing_parameters(ENTRY_POINTS + kit_functions()) == []


# --------------------------------------------------------------------------- the checks fail on probes
def test_the_build_fails_on_a_broken_link_a_broken_reference_and_a_notebook_outside_the_toctrees(tmp_path):
    """A probe site through the real ``conf.py``: an index, a page with a broken link and a reference to an object
    that does not exist, and one notebook that no toctree lists. The API and reproduction pages are left out
    (``-D exclude_patterns``) to keep the probe cheap."""
    notebooks = tmp_path / "probe_notebooks"
    notebooks.mkdir()
    stray = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A notebook no toctree lists")])
    nbformat.write(stray, notebooks / "stray.ipynb")
    source = site_copy(tmp_path, notebooks=notebooks)
    for child in source.iterdir():
        if child.suffix in (".md", ".rst") and child.name != "index.md":
            child.unlink()
    (source / "index.md").write_text("# Probe\n\n```{toctree}\n\npage\n```\n")
    (source / "page.md").write_text("# Page\n\nA [link](no_such_page.md) and "
                                    "{py:func}`dpfair_analysis.no_such_function`.\n\n"
                                    "An existing object without a page of its own resolves: "
                                    "{py:func}`dpfair_analysis.training.loop.poisson_batch`.\n")
    status, warnings = sphinx_build(source, tmp_path / "out", "-D",
                                    "exclude_patterns=api,guide,methods,reproductions/index.md,_generated,_ext")
    assert status != 0
    assert "no_such_page.md" in warnings
    assert "dpfair_analysis.no_such_function" in warnings
    assert re.search(r"stray.ipynb: WARNING: document isn't included in any toctree", warnings)
    assert "poisson_batch" not in warnings
    assert notebooks_missing_from_toctree(DOCS, tmp_path) == ["stray.ipynb"]


def _documented(x: int) -> int:
    """Return ``x``.

    Parameters
    ----------
    x : int
        A number.
    """
    return x


def _undocumented(x: int) -> int:
    """Return ``x`` (no Parameters section)."""
    return x


def test_the_parameters_check_fails_on_a_probe(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "_probe_ok", _documented, raising=False)
    monkeypatch.setattr(sys.modules[__name__], "_probe_bad", _undocumented, raising=False)
    assert missing_parameters([f"{__name__}._probe_ok", f"{__name__}._probe_bad"]) == [f"{__name__}._probe_bad"]


def test_the_api_and_link_checks_fail_on_probes(tmp_path):
    html = tmp_path / "html"
    (html / "api").mkdir(parents=True)
    (html / "api" / "page.html").write_text('<dt id="dpfair_analysis.data.load"></dt>'
                                            '<a href="other.html#x">ok</a><a href="gone.html">broken</a>'
                                            '<a href="https://example.org/x.html">external</a>')
    (html / "api" / "other.html").write_text('<script src="../_static/missing.js"></script>')
    assert missing_from_api(["dpfair_analysis.data.load", "dpfair_analysis.data.nope"], html) == \
        ["dpfair_analysis.data.nope"]
    assert sorted(broken_internal_links(html)) == ["api/other.html -> ../_static/missing.js",
                                                   "api/page.html -> gone.html"]


# --------------------------------------------------------------------------- console blocks
def test_every_console_block_shows_what_its_command_prints_now():
    """Each ``$ dpfair ...`` block of README.md and the guide agrees with a fresh run of its command (words exactly,
    numbers within docs/_ext/console_blocks.py's TOLERANCE); ``python docs/_ext/console_blocks.py --write`` rewrites
    them. And the comparison can fail: a changed word, a number off by more than the tolerance, a missing line."""
    sys.path.insert(0, str(DOCS / "_ext"))
    import console_blocks

    assert console_blocks.differences("acc 0.8089 n 9044\n", "acc 0.8090 n 9044\n") == []
    assert console_blocks.differences("[diagnosis in 3.6 s]\n", "[diagnosis in 11.8 s]\n") == []
    assert console_blocks.differences("acc 0.8089\n", "acc 0.8389\n")
    assert console_blocks.differences("n 9044\n", "n 9045\n")
    assert console_blocks.differences("Most hurt: Male\n", "Most hurt: Female\n")
    assert console_blocks.differences("a\n", "a\nb\n")
    found = [block for page in console_blocks.PAGES for block in console_blocks.blocks(page)]
    assert {tuple(block.argv)[:1] for block in found} >= {("diagnose",), ("compare",)}
    stale = {f"{block.page}: $ {block.command}": off for block in found
             if (off := console_blocks.differences(block.shown, console_blocks._printed(tuple(block.argv))))}
    assert not stale, "run python docs/_ext/console_blocks.py --write: " + repr(stale)


def test_every_paper_of_the_registry_has_its_table_on_the_findings_page():
    """A paper whose claims are in the verdicts CSV (later work included) has its generated registry table
    included in docs/findings.md: a new paper's claims cannot be missing from the page."""
    import csv

    with (ROOT / "paper_figs" / "verify" / "verdicts.csv").open(newline="") as handle:
        papers = {row["paper"] for row in csv.DictReader(handle)}
    page = (DOCS / "findings.md").read_text()
    assert papers >= {"000", "001", "002", "003", "004", "005", "006"}
    assert all(f"_generated/registry_{paper}.md" in page for paper in papers)


def test_the_tuned_table_states_epsilon_from_above_and_the_part_that_decides_each_verdict():
    sys.path.insert(0, str(DOCS / "_ext"))
    import findings_tables

    assert findings_tables.epsilon_bound([1.0000003, 1.0000039]) == "ε ≤ 1.000004"  # rounded up, never "= 1"
    assert findings_tables.epsilon_bound([1.0]) == "ε ≤ 1.000000"
    row = {"accuracy_verdict": "does not reproduce within the budget", "accuracy_margin": 0.02, "tuned_accuracy": 0.654,
           "paper_accuracy": 0.677, "violation_verdict": "reproduces at the printed settings", "violation_margin": 0.04}
    assert findings_tables._why(row) == ("accuracy 0.654 below the paper's 0.677 by more than 0.020; "
                                         "violation reproduces at the printed settings")
    table = findings_tables.pfld_tuned_table(ROOT / "paper_figs" / "pfld" / "tuned_table2_compas.json")
    eo_pfld = next(line for line in table.splitlines() if line.startswith("| eo | pfld |"))
    assert "does not reproduce" in eo_pfld and "accuracy 0.637 below" in eo_pfld and "ε ≤ 1.000004" in eo_pfld


def test_the_plain_audits_table_says_missed_and_not_yet_decided_apart(tmp_path):
    sys.path.insert(0, str(DOCS / "_ext"))
    import findings_tables

    def row(name, correct, caught, bounds, no_power=None):
        return {"mechanism": name, "correct": correct, "epsilon_claimed": 0.1, "anchors": {"dpsniper_reg": 0.17},
                "plain": {"seeds": len(bounds), "caught": caught, "consistent": len(bounds) - caught,
                          "epsilon_lower": bounds, "no_power": no_power or [None] * len(bounds),
                          "cpu_seconds": [100.0] * len(bounds),
                          "target_met": caught == len(bounds) if not correct else caught <= len(bounds) // 20}}

    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"settings": {"plain_seeds": 3}, "rows": [
        row("svt3", False, 2, [0.11, 0.08, 0.12]), row("svt4", False, 2, [0.13, 0.12]),
        row("svt1", True, 0, [0.0, 0.04, 0.03], ["no test forecast a bound", None, None]),
        {"mechanism": "rappor", "correct": True, "epsilon_claimed": 4.09}]}))
    table = findings_tables.plain_audits_table(path)
    lines = {line.split(" | ")[0][2:]: line for line in table.splitlines()[2:] if line.startswith("|")}
    assert "2 of 3 caught, **1 missed**" in lines["svt3"] and lines["svt3"].endswith("| **missed** |")
    assert "**2 of 2 caught**" in lines["svt4"] and "on track (2 of 3 seeds)" in lines["svt4"]
    assert "3 of 3 consistent" in lines["svt1"] and "| 0.0300 | 0.0000 | 1 |" in lines["svt1"]
    assert "rappor" not in lines and table.endswith("Not recorded yet: rappor.\n")


def test_the_mnist_equal_epsilon_table_says_where_an_epsilon_is_no_guarantee(tmp_path):
    sys.path.insert(0, str(DOCS / "_ext"))
    import findings_tables

    equal = tmp_path / "equal.csv"
    equal.write_text("method,configurations,epsilon,default_worst,default_gap,chosen,chosen_worst,chosen_gap,"
                     "chosen_all,grid_min_worst,grid_max_worst,range,chosen_accounted\n"
                     "dpsgd,6,6.28,0.001,0.99,\"lr 0.1, sampling poisson\",0.638,0.33,0.929,0.001,0.64,0.639,True\n"
                     "globaladapt,6,6.29,0.0,0.99,\"lr 0.1, sampling shuffle\",0.661,0.3,0.928,0.0,0.67,0.67,False\n"
                     "sgd,6,,0.91,0.08,\"lr 0.1, sampling shuffle\",0.947,0.05,0.987,0.91,0.95,0.04,False\n")
    missing = tmp_path / "later.csv"  # no later claim judged yet: the table alone
    table = findings_tables.mnist_equal_epsilon_table(equal, missing)
    lines = [line for line in table.splitlines() if line.startswith("| ")][1:]
    assert lines[0].startswith("| DP-SGD | 0.001 → 0.638 | lr 0.1, sampling poisson | ")
    assert lines[0].endswith(" 6.280 |")
    assert "lr 0.1, sampling shuffle (shuffled: ε not a guarantee)" in lines[1]
    assert lines[2].endswith("| — |") and "ε not" not in lines[2] and "Zhao" not in table  # SGD: no privacy to state
    missing.write_text("claim,paper,statement,printed_gain,gain_at_defaults,gain_after_tuning,verdict\n"
                       "zhao-vs-constant,Zhao et al. 2025,bounded adaptive clipping improves worst-class accuracy by "
                       "5 points,0.05,0.006,0.021,does not reproduce within the budget\n")
    table = findings_tables.mnist_equal_epsilon_table(equal, missing)
    assert table.rstrip().endswith("printed +0.05 -- **does not reproduce within the budget**.")


def test_the_tuned_mnist_table_is_the_notebooks_verdicts():
    sys.path.insert(0, str(DOCS / "_ext"))
    import findings_tables

    figs = ROOT / "paper_figs" / "fairdp"
    table = findings_tables.mnist_tuned_table1(figs / "mnist_tuning_table1_verdicts.csv",
                                               figs / "mnist_tuning_claims.csv")
    with (figs / "mnist_tuning_table1_verdicts.csv").open(newline="") as handle:
        verdicts = [row["verdict"] for row in csv.DictReader(handle)]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[-1].rstrip(" |") for row in rows] == verdicts
    with (figs / "mnist_tuning_claims.csv").open(newline="") as handle:
        claims = list(csv.DictReader(handle))
    assert [line.split("**")[-2] for line in table.splitlines() if line.startswith("- `")] == [
        c["verdict"] for c in claims]
