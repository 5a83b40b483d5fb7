"""dpfair_analysis: how differential privacy hurts some groups more than others, and what to do about it."""

__version__ = "0.1.0"
