"""The family of statistics an audit fits: each asked kind's members, for outputs like these.

The kinds live where they are defined -- ``threshold``, ``histogram``, ``learned`` and
``likelihood`` in :mod:`dpfair_analysis.testing.scores`, ``pattern`` in
:mod:`dpfair_analysis.testing.patterns`, which builds on ``scores`` -- and this module, above
both, gathers them, so that neither needs the other back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dpfair_analysis.testing.patterns import pattern_family
from dpfair_analysis.testing.scores import Learned, Likelihood, Statistic, histogram_family, threshold_family


def statistic_family(kinds: tuple[str, ...], out0: np.ndarray, out1: np.ndarray, *,
                     log_density: Callable | None = None, shape: tuple[int, ...] = (),
                     increments: bool = False) -> list[Statistic]:
    """The statistics of the asked ``kinds`` for outputs like these.

    Parameters
    ----------
    kinds : tuple of str and Statistic
        Among :data:`STATISTIC_KINDS`; :class:`Statistic` instances (a user's) are included as they are.
    out0, out1 : (n, d) arrays
        Runs on D and D'.
    log_density : callable, optional
        For ``likelihood``.
    shape : tuple
        The mechanism's output shape (passed back to ``log_density``).
    increments : bool
        The threshold family includes the increments' projections (:func:`threshold_family`).
    """
    members: list[Statistic] = []
    if "likelihood" in kinds and log_density is not None:
        members.append(Likelihood(log_density, shape))
    if "threshold" in kinds:
        members += threshold_family(out0.shape[1], increments=increments)
    if "histogram" in kinds:
        members += histogram_family(out0, out1)
    if "learned" in kinds:
        members.append(Learned())
    if "pattern" in kinds:
        members += pattern_family(out0, out1)
    return members + [k for k in kinds if isinstance(k, Statistic)]  # a user's own statistics, as given


__all__ = ["statistic_family"]
