"""The neighbour strategy shared by the sensitivity tests is the public kit's:
:func:`dpfair_analysis.testing.strategies.neighbour_of` (a batch that differs from a batch of rows in one row,
by add, remove or replace, and how)."""

from dpfair_analysis.testing.strategies import NEIGHBOUR_KINDS as KINDS, neighbour_of

__all__ = ["KINDS", "neighbour_of"]
