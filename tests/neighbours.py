"""Hypothesis strategy shared by the sensitivity tests: a neighbouring batch of a batch of rows."""

from hypothesis import assume, strategies as st

KINDS = ("add", "remove", "replace")


@st.composite
def neighbour_of(draw, rows: list, row: st.SearchStrategy) -> tuple[list, str]:
    """A batch that differs from ``rows`` in one row, and how: ``add`` a row drawn from ``row``,
    ``remove`` one of ``rows``, or ``replace`` one (remove it, then add a drawn row at the end).

    Returns ``(neighbour, kind)``; ``rows`` is not changed. Removing from an empty batch is rejected
    (``assume``), so an empty batch only has neighbours by addition.
    """
    kind = draw(st.sampled_from(KINDS))
    neighbour = list(rows)
    if kind in ("remove", "replace"):
        assume(rows)
        neighbour.pop(draw(st.integers(0, len(rows) - 1)))
    if kind in ("add", "replace"):
        neighbour.append(draw(row))
    return neighbour, kind
