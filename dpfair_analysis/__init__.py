"""dpfair_analysis: how differential privacy hurts some groups more than others, and what to do about it."""

from __future__ import annotations

import importlib

__version__ = "0.1.0"


def lazy_exports(package: str, homes: dict[str, str]):
    """A package's ``__getattr__`` and ``__dir__`` that import an exported entry point's module on first use.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    homes : dict
        Each exported name and the module, relative to ``package``, that defines it (e.g. ``{"train": ".loop"}``).

    Returns
    -------
    tuple of callable
        ``(__getattr__, __dir__)`` for the package's namespace (PEP 562), so ``import package`` stays as cheap as
        before while ``package.name`` and ``from package import name`` work.
    """
    def __getattr__(name: str):
        if name in homes:
            return getattr(importlib.import_module(homes[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(homes))

    return __getattr__, __dir__
