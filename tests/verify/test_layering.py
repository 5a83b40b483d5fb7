"""Layering: verify/ sits above training/ and theory/; nothing below imports it, the CLI or experiments/."""

from __future__ import annotations

import ast
from pathlib import Path

import dpfair_analysis

PACKAGE = Path(dpfair_analysis.__file__).parent
TOP = ("cli", "experiments", "verify")


def imported_modules(path: Path) -> set[str]:
    """Every module an import statement in ``path`` names (absolute, or relative resolved), at any depth."""
    tree = ast.parse(path.read_text())
    package = ".".join(("dpfair_analysis", *path.relative_to(PACKAGE).with_suffix("").parts[:-1]))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def lower_modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in TOP]


def upward_imports(paths: list[Path]) -> list[tuple[str, str]]:
    bad = []
    for path in paths:
        for name in imported_modules(path):
            if any(name == f"dpfair_analysis.{top}" or name.startswith(f"dpfair_analysis.{top}.") for top in TOP):
                bad.append((str(path.relative_to(PACKAGE)), name))
    return bad


def test_nothing_below_imports_verify_cli_or_experiments():
    paths = lower_modules()
    assert len(paths) > 30 and any(p.name == "loop.py" for p in paths)
    assert upward_imports(paths) == []


def test_the_check_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    """The test can fail: an upward import inside a function, absolute or relative, is found."""
    fake = PACKAGE / "training" / "_layering_probe.py"
    fake.write_text("def f():\n    from dpfair_analysis.verify.audits import audit\n    from ..cli import main\n")
    try:
        assert sorted(name for _, name in upward_imports([fake])) == [
            "dpfair_analysis.cli", "dpfair_analysis.cli.main", "dpfair_analysis.verify.audits",
            "dpfair_analysis.verify.audits.audit"]
    finally:
        fake.unlink()


#: The package's floors, bottom to top (README's architecture): a module may import its own floor and
#: the floors below, never one above. Data flows one way: data -> model -> trainer -> analysis -> reports.
#: A tuple is one floor: catalog.py is the data layer's index, light enough for the command line to read.
FLOORS = (("errors", "costs", "names"), "validation", "io", ("data", "catalog"), "models", "gradients", "fast_gradients", "fairness", "privacy", "testing", "training",
          "theory", "diagnose", "plotting", "experiments", "verify", "cli")


def floor(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "dpfair_analysis":
        return None
    return next((i for i, names in enumerate(FLOORS) if parts[1] in (names if isinstance(names, tuple) else (names,))),
                None)


def imports_against_the_floors(paths: list[Path]) -> list[tuple[str, str]]:
    bad = []
    for path in paths:
        own = floor(".".join(("dpfair_analysis", *path.relative_to(PACKAGE).with_suffix("").parts)))
        for name in imported_modules(path):
            target = floor(name)
            if own is not None and target is not None and target > own:
                bad.append((str(path.relative_to(PACKAGE)), name))
    return bad


def test_every_module_sits_on_a_floor():
    tops = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in PACKAGE.rglob("*.py")}
    named = {name for names in FLOORS for name in (names if isinstance(names, tuple) else (names,))}
    assert tops - {"__init__", "__main__"} <= named, sorted(tops - named)


def test_no_import_reaches_a_floor_above():
    assert imports_against_the_floors(list(PACKAGE.rglob("*.py"))) == []


def test_the_floor_check_can_fail():
    probe = PACKAGE / "privacy" / "_floor_probe.py"
    probe.write_text("def f():\n    from dpfair_analysis.training.loop import train\n")
    try:
        found = sorted(imports_against_the_floors([probe]))  # a set underneath: its order is the hash seed's
        assert found == [("privacy/_floor_probe.py", "dpfair_analysis.training.loop"),
                         ("privacy/_floor_probe.py", "dpfair_analysis.training.loop.train")]
    finally:
        probe.unlink()



# ----------------------------------------------------------------- no circles
def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("dpfair_analysis", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def loaded_modules(path: Path, known: set[str]) -> set[str]:
    """The package's modules (``known``) that the import statements in ``path`` load, at any depth: ``from P import
    N`` loads ``P.N`` where that is a module, else ``P``. The parent packages Python loads on the way are not
    counted: a package's ``__init__`` importing its own children is no circle."""
    package = ".".join(("dpfair_analysis", *path.relative_to(PACKAGE).with_suffix("").parts[:-1]))
    loaded: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            loaded.add(name)
    return loaded - {"", module_name(path)}


def import_circles(paths: list[Path]) -> list[list[str]]:
    """The circles of the import graph (its strongly connected components of two or more modules, Tarjan), each
    sorted; imports inside functions count (a lazy import that closes a circle is still one)."""
    known = {module_name(p) for p in paths}
    graph = {module_name(p): loaded_modules(p, known) & known for p in paths}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


#: Circles known and left to the work that owns them: none (the last, ``testing.scores`` <-> ``testing.patterns``,
#: was cut by gathering the statistic kinds' family in ``testing.families``, above both).
KNOWN_CIRCLES: list[list[str]] = []


def test_the_import_graph_has_no_circle():
    """No module imports, directly or through others, one that imports it back: registries are leaves that their
    entries import (``training/methods/registry.py``, ``verify/audits/registry.py``, ``verify/claims/core.py``),
    and a trainer never imports the method module that describes it (DP-FedAvg's partitions are ``fedavg.py``'s)."""
    assert import_circles(list(PACKAGE.rglob("*.py"))) == KNOWN_CIRCLES


def test_the_circle_check_can_fail():
    """A lazy import back is a circle and is found; a package whose ``__init__`` imports its children, which
    import a leaf beside them, is none."""
    methods = sorted((PACKAGE / "training" / "methods").glob("*.py"))
    assert len(methods) > 5 and import_circles(methods) == []
    there, back = PACKAGE / "training" / "_circle_probe.py", PACKAGE / "training" / "_circle_probe_back.py"
    there.write_text("from dpfair_analysis.training._circle_probe_back import f\n")
    back.write_text("def f():\n    from dpfair_analysis.training import _circle_probe\n")
    try:
        assert import_circles([*methods, there, back]) == [[module_name(there), module_name(back)]]
    finally:
        there.unlink()
        back.unlink()
