"""Verification of the toolkit's privacy and theory claims: it sits above training/ and theory/, nothing below imports it."""
