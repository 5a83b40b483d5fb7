"""Imports sit at the top of a module; one inside a function says why it is there.

A function-level import in ``dpfair_analysis`` is justified, and only then, when (pure AST, no import runs):

- ``cli/init``: it is in ``cli/`` or a package ``__init__``, whose start-up cost is measured (the CLI refuses bad
  input before heavy imports, ``tests/cli/test_bad_inputs.py``; the kit imports without torch,
  ``tests/testing/test_kit_import.py``);
- ``heavy``: it imports a library of :data:`HEAVY` that the module does not already load at its top, itself or
  through the package's modules it imports (import times on the shared dev machine, numpy included: torch 3.5 s,
  sklearn 3.2 s, dp_accounting 2.8 s, matplotlib.pyplot 1.4 s, pandas 0.9 s, hypothesis 0.4 s, numpy and scipy 0.3 s);
- ``heavy-via``: the package module it imports would load such a library;
- ``circle``: the module it imports (or a package above it that this module is not in) loads this one back at
  import time;
- ``optional``: it sits in a ``try`` whose handler catches ``ImportError`` (a platform or version fallback);
- or it is in :data:`ALLOWED` with a one-line reason.

Standard-library modules are never heavy; imports under ``if TYPE_CHECKING:`` never run and are not counted.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import dpfair_analysis

PACKAGE = Path(dpfair_analysis.__file__).parent
ROOT_NAME = "dpfair_analysis"

#: Third-party libraries whose import costs start-up time (or which are optional extras: ray, opacus, tqdm).
HEAVY = frozenset({"torch", "pandas", "matplotlib", "scipy", "sklearn", "dp_accounting", "fairlearn", "ray", "joblib",
                   "opacus", "seaborn", "hypothesis", "numpy", "tqdm", "nbformat", "jupytext", "sphinx", "PIL",
                   "pyarrow", "pytest"})

#: Hoistable imports left where they are, ``(module path, imported name): reason``.
ALLOWED: dict[tuple[str, str], str] = {}

Lazy = collections.namedtuple("Lazy", "path module line names")  # path: relative to the package


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> list[str]:
    """What an import statement loads: ``import a.b`` loads ``a.b``; ``from P import N`` loads ``P.N`` where that is a
    package module, else ``P`` (relative ``P`` resolved against ``module``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]


def is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def catches_import_error(node: ast.AST) -> bool:
    return isinstance(node, ast.Try) and any(
        handler.type is not None and "ImportError" in ast.unparse(handler.type) for handler in node.handlers)


def scan(paths: list[Path], package: Path) -> tuple[dict[str, set[str]], list[tuple[Lazy, bool]]]:
    """Each module's top-level imports and every function-level import, with whether it is an optional one."""
    known = {module_name(p, package) for p in paths}
    top: dict[str, set[str]] = {name: set() for name in known}
    lazy: list[tuple[Lazy, bool]] = []
    for path in paths:
        module = module_name(path, package)
        relative = str(path.relative_to(package))

        def walk(node: ast.AST, in_function: bool, optional: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if is_type_checking(child):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    names = imported_names(child, module, path.name == "__init__.py", known)
                    if in_function:
                        lazy.append((Lazy(relative, module, child.lineno, names), optional))
                    else:
                        top[module].update(names)
                walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
                     optional or catches_import_error(child))

        walk(ast.parse(path.read_text()), False, False)
    return top, lazy


def loaded_on_import(module: str, top: dict[str, set[str]], memo: dict) -> tuple[set[str], set[str]]:
    """The package modules and the third-party roots that importing ``module`` loads (its parents included);
    ``memo`` keeps each module's answer for the next question about the same ``top``."""
    if module in memo:
        return memo[module]
    seen: set[str] = set()
    external: set[str] = set()
    stack = [module]
    while stack:
        current = stack.pop()
        if current in seen or current not in top:
            continue
        seen.add(current)
        for name in top[current]:
            parts = name.split(".")
            if parts[0] == ROOT_NAME:
                stack.extend(".".join(parts[:i]) for i in range(1, len(parts) + 1))
            else:
                external.add(parts[0])
    memo[module] = seen, external
    return seen, external


def reason(lazy: Lazy, optional: bool, top: dict[str, set[str]], memo: dict) -> str | None:
    """Why a function-level import stays inside its function (the module docstring's rule), or None: hoist it."""
    module = lazy.module
    if module.startswith(f"{ROOT_NAME}.cli") or lazy.path.endswith("__init__.py"):
        return "cli/init"
    if optional:
        return "optional"
    modules, external = loaded_on_import(module, top, memo)
    for name in lazy.names:
        parts = name.split(".")
        if parts[0] != ROOT_NAME:
            if parts[0] in HEAVY - external:
                return f"heavy:{parts[0]}"
            continue
        prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]  # importing a.b.c loads a and a.b too
        loads = {prefix: loaded_on_import(prefix, top, memo) for prefix in prefixes}
        target_external = set().union(*(external for _, external in loads.values()))
        # a package this module sits in is already loading when its import runs: no circle through it
        if any(module in loads[prefix][0] for prefix in prefixes if not module.startswith(f"{prefix}.")):
            return "circle"
        if (target_external & HEAVY) - external:
            return "heavy-via:" + ",".join(sorted((target_external & HEAVY) - external))
    allowed = [ALLOWED.get((lazy.path, name)) for name in lazy.names]
    return f"allowed: {allowed[0]}" if allowed and all(allowed) else None


def classify(paths: list[Path], package: Path = PACKAGE) -> list[tuple[Lazy, str | None]]:
    top, lazy = scan(paths, package)
    memo: dict = {}
    return [(entry, reason(entry, optional, top, memo)) for entry, optional in lazy]


def hoistable(classified: list[tuple[Lazy, str | None]]) -> list[str]:
    return [f"{entry.path}:{entry.line} {' '.join(sorted(set(entry.names)))}"
            for entry, why in classified if why is None]


def test_every_function_level_import_says_why():
    """Counts by reason are printed (``pytest -s``): the issue's before/after."""
    paths = sorted(PACKAGE.rglob("*.py"))
    assert len(paths) > 100
    classified = classify(paths)
    reasons = collections.Counter((why or "HOISTABLE").split(":")[0] for _, why in classified)
    print(sum(reasons.values()), dict(sorted(reasons.items())))
    assert hoistable(classified) == []
    allowed = {(entry.path, name) for entry, why in classified
               if why and why.startswith("allowed") for name in entry.names}
    assert set(ALLOWED) <= allowed, f"ALLOWED entries that no longer name a hoistable import: {set(ALLOWED) - allowed}"


def test_the_check_can_fail(tmp_path):
    """A light import inside a function is found; heavy, optional, circular and TYPE_CHECKING ones are not (the
    probe is a package of its own: the real one stays untouched for the tests running beside this one)."""
    package = tmp_path / ROOT_NAME
    (package / "training").mkdir(parents=True)
    (package / "errors.py").write_text("class ArgumentError(ValueError):\n    pass\n")
    probe, back = package / "training" / "probe.py", package / "training" / "probe_back.py"
    probe.write_text("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    import pandas\n"
                     "def f():\n    import json\n    import torch\n    from ..errors import ArgumentError\n"
                     "    try:\n        import fcntl\n    except ImportError:\n        fcntl = None\n"
                     "    from . import probe_back\n")
    back.write_text("from dpfair_analysis.training import probe\n")
    found = hoistable(classify(sorted(package.rglob("*.py")), package))
    assert found == ["training/probe.py:5 json", "training/probe.py:7 dpfair_analysis.errors"], found
