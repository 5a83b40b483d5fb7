"""The registry as the command line reads it: ``--methods`` names (:func:`parse_method`) and the flags the methods'
options declare (:func:`option_flags`, :func:`options_from_flags`), with a refused option named by its flag."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable

from dpfair_analysis.errors import ArgumentError
from dpfair_analysis.training.methods.registry import REGISTRY, get, names


def parse_method(method: str, *, default_clip: float) -> tuple[str, float]:
    """``"dpsgd(C=2)"`` -> ``("dpsgd", 2.0)``; other names keep ``default_clip`` (ValueError naming the
    registered methods otherwise). Reads only the registry, so the command line checks ``--methods`` with it
    before importing torch.

    Parameters
    ----------
    method : str
        A registered name, or ``NAME(C=<bound>)`` with the run's uniform clipping bound.
    default_clip : float
        The bound of a name without ``(C=...)``.
    """
    known = list(names())
    match = re.fullmatch(r"\s*([a-z]+)\s*(?:\(\s*C\s*=\s*([^)]+)\))?\s*", str(method))
    if match is None or match.group(1) not in known:
        raise ValueError(f"method must be one of {known} or 'dpsgd(C=<bound>)', got {method!r}")
    name, clip = match.groups()
    if clip is None:
        return name, default_clip
    try:
        return name, float(clip)
    except ValueError:
        raise ValueError(f"method {method!r}: C must be a number, got {clip!r}") from None


@dataclass(frozen=True)
class Flag:
    """One command-line flag of the methods' options: its name, the parser of its text (``type``), its allowed
    values (``choices``, or None), the default, help, and the (method, field) pairs it sets."""

    flag: str
    type: Callable[[str], Any]
    choices: tuple | None
    default: Any
    help: str
    targets: tuple[tuple[str, str], ...]

    @property
    def dest(self) -> str:
        """The attribute argparse stores it under (``--excess-cap`` -> ``excess_cap``)."""
        return self.flag.lstrip("-").replace("-", "_")


def option_flags() -> list[Flag]:
    """The flags every registered method's options declare (a flag named by several methods is one flag)."""
    flags: dict[str, Flag] = {}
    for method in REGISTRY.values():
        for f in dataclasses.fields(method.options):
            meta = f.metadata
            if "flag" not in meta:
                continue
            default = f.default if f.default is not dataclasses.MISSING else None
            known = flags.get(meta["flag"])
            targets = (known.targets if known else ()) + ((method.name, f.name),)
            labels = ", ".join(REGISTRY[m].label for m, _ in targets)
            help_text = f"{labels}: {meta.get('help', f.name)}"  # the first method's words, every method's label
            if known is not None:
                help_text = f"{labels}: {known.help.split(': ', 1)[1]}"
            flags[meta["flag"]] = Flag(meta["flag"], meta.get("type", str), meta.get("choices"), default, help_text,
                                       targets)
    return list(flags.values())


def options_from_flags(values: dict[str, Any]) -> dict[str, Any]:
    """Each method's options from flag values ``{flag: value}`` (a value of None keeps the field's default);
    a bad value is an :class:`~dpfair_analysis.errors.ArgumentError` naming its flag.

    Parameters
    ----------
    values : dict
        ``{flag: value}`` as parsed from the command line (``option_flags()`` lists the flags).
    """
    changes: dict[str, dict[str, Any]] = {}
    for flag in option_flags():
        value = values.get(flag.flag)
        if value is None:
            continue
        for method, name in flag.targets:
            changes.setdefault(method, {})[name] = value
    return {method: checked(method, lambda m=method, f=fields: get(m).options(**f))
            for method, fields in changes.items()}


def flag_of(method: str, message: str) -> str | None:
    """The command-line flag of ``method``'s option that an error ``message`` names first (messages of the
    toolkit's checks start with the argument's name), or None.

    Parameters
    ----------
    method : str
        A registered method.
    message : str
        The error message of a check of one of its options.
    """
    first = re.match(r"\w+", str(message))
    for f in dataclasses.fields(get(method).options):
        if "flag" in f.metadata and first is not None and first.group() == f.name:
            return f.metadata["flag"]
    return None


def checked(method: str, build: Callable[[], Any]) -> Any:
    """``build()``, with a ValueError or TypeError about one of ``method``'s options re-raised as an
    :class:`~dpfair_analysis.errors.ArgumentError` naming that option's flag (so the command line says which).

    Parameters
    ----------
    method : str
        A registered method.
    build : callable
        Builds the method's options or policy; called once, without arguments.
    """
    try:
        return build()
    except (ValueError, TypeError) as error:
        flag = flag_of(method, str(error))
        if flag is None or isinstance(error, ArgumentError):
            raise
        raise ArgumentError(flag, f"{method}: {error}") from None
