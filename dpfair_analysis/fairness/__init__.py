"""fairness."""
