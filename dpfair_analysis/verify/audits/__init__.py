"""Empirical privacy audits (the sampled trainer audits live in :mod:`.trainers`)."""
