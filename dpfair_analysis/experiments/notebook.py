"""What every notebook in ``notebooks/`` reads from its environment, in one place.

* ``DPFAIR_PROFILE``: ``full`` (default, what ``paper_figs/`` holds), ``quick``
  (``notebooks/execute.py``'s default: small data, few epochs, every figure still drawn) or
  ``smoke`` (the test suite's: the quick profile's settings on the fewest runs, claims and
  sweep values that still draw every figure and table);
* ``DPFAIR_FIGS``: the directory the figures go to (default ``../paper_figs``, relative to
  the notebook's working directory, ``notebooks/``); each notebook writes below
  ``<DPFAIR_FIGS>/<its folder>``;
* ``DPFAIR_THREADS``: torch intra-op threads (default 1: small-model steps oversubscribe
  badly, see ``benchmarks/README.md``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dpfair_analysis.validation import check_choice

PROFILES = ("smoke", "quick", "full")


@dataclass(frozen=True)
class NotebookEnvironment:
    """A notebook's settings: its ``profile``, the directory ``figs`` its figures go to, and
    the torch ``threads`` it runs with."""

    profile: str
    figs: Path
    threads: int

    @property
    def quick(self) -> bool:
        """Small data and few epochs: the quick profile's settings (the smoke profile's too)."""
        return self.profile in ("smoke", "quick")

    @property
    def smoke(self) -> bool:
        """The quick profile's settings on fewer runs, claims and sweep values."""
        return self.profile == "smoke"

    @property
    def settings(self) -> str:
        """The experiment presets' profile (``quick`` or ``full``) the notebook passes to the toolkit: the
        smoke profile runs the quick profile's settings."""
        return "quick" if self.quick else self.profile


def notebook_environment(folder: str, *, set_threads: bool = True) -> NotebookEnvironment:
    """Read ``DPFAIR_PROFILE``, ``DPFAIR_FIGS`` and ``DPFAIR_THREADS`` (module docstring) for
    the notebook whose figures go to ``<DPFAIR_FIGS>/<folder>``; with ``set_threads`` also
    apply the thread count to torch.

    Raises ValueError naming the variable if the profile is not one of :data:`PROFILES` or
    the thread count is not a positive integer.
    """
    profile = os.environ.get("DPFAIR_PROFILE", "full")
    check_choice(profile, "DPFAIR_PROFILE", PROFILES)
    raw_threads = os.environ.get("DPFAIR_THREADS", "1")
    try:
        threads = int(raw_threads)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"DPFAIR_THREADS must be a positive integer, got {raw_threads!r}")
    figs = Path(os.environ.get("DPFAIR_FIGS", os.path.join("..", "paper_figs"))) / folder
    if set_threads:
        import torch

        torch.set_num_threads(threads)
    return NotebookEnvironment(profile=profile, figs=figs, threads=threads)
