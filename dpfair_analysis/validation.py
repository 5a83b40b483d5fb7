"""Argument checks at the API boundary.

Each check raises ``ValueError`` (or ``TypeError``) whose message names the argument,
the value received and what is allowed; the CLI prints that message as its one line.
"""

from __future__ import annotations

import math
from numbers import Integral, Real


def check_positive(value: object, name: str) -> float:
    """A finite real number > 0 (noise multipliers, clipping bounds, learning rates)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a positive finite number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def check_nonnegative(value: object, name: str) -> float:
    """A finite real number >= 0 (weight decay, a noise multiplier of 0 for no noise)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a finite number >= 0, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def check_positive_int(value: object, name: str) -> int:
    """An integer >= 1 (batch sizes, epochs, steps)."""
    if not _is_int(value) or int(value) < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_int_at_least(value: object, name: str, minimum: int) -> int:
    """An integer >= ``minimum``: counts with another floor than 1 (classes and groups >= 2, audit trials)."""
    if not _is_int(value) or int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _is_int(value: object) -> bool:
    """An integer (Python's or numpy's), and not a bool."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_fraction(value: object, name: str, *, open_low: bool = True, open_high: bool = False) -> float:
    """A real number in (0, 1] by default; the ends are open or closed as asked."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    low_ok = value > 0 if open_low else value >= 0
    high_ok = value < 1 if open_high else value <= 1
    if not (math.isfinite(value) and low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return value


def check_delta(value: object, name: str = "delta") -> float:
    """A DP failure probability, strictly inside (0, 1)."""
    return check_fraction(value, name, open_low=True, open_high=True)


def check_seed(value: object, name: str = "seed") -> int:
    """A non-negative integer seed."""
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def check_choice(value: object, name: str, allowed) -> str:
    """One of a fixed set of names."""
    allowed = list(allowed)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value  # type: ignore[return-value]


def check_name_free(name: str, registry, kind: str) -> str:
    """``name`` if no entry of ``registry`` (a dict of a registry: methods, audits, claims) holds it; a taken name is
    refused (ValueError), whatever entry holds it -- the one rule of every registry in the toolkit."""
    if name in registry:
        raise ValueError(f"a {kind} named {name!r} is registered already")
    return name


def check_device(value: object, name: str = "device") -> str:
    """A torch device name the toolkit can train on here: ``"cpu"``, or ``"cuda"`` / ``"cuda:N"`` with CUDA present."""
    import torch  # here, so that the other checks import without torch (dpfair_analysis.testing's core)

    if not isinstance(value, str):
        raise TypeError(f"{name} must be a device name such as 'cpu' or 'cuda', got {value!r}")
    try:
        device = torch.device(value)
    except RuntimeError:
        raise ValueError(f"{name} must be 'cpu', 'cuda' or 'cuda:N', got {value!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} must be 'cpu', 'cuda' or 'cuda:N', got {value!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{name}={value!r} needs CUDA, but torch.cuda.is_available() is False on this "
                             f"machine; use {name}='cpu'")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"{name}={value!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return value
