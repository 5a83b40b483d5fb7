"""What work costs on this kind of machine (2 cores, one torch thread per run): the one model behind every
run-time estimate -- the commands' refusals of work beyond a day and their estimates, and the notebook
runner's (``notebooks/execute.py``). Imports nothing heavy: the command line reads it before torch."""

from __future__ import annotations

#: Seconds per DP step of a batch of 256 on one core here (benchmarks/results/per_sample_step.json,
#: rounded up) and per evaluated row per epoch: what run-time estimates are made of.
STEP_SECONDS = {"logreg": 0.001, "mlp": 0.002, "cnn": 0.12}
EVAL_SECONDS_PER_ROW = {"logreg": 2e-7, "mlp": 5e-7, "cnn": 2e-4}
REFUSE_SECONDS = 24 * 3600


def estimated_training_seconds(model: str, *, rows: int, batch_size: int, epochs: int, runs: int = 1) -> float:
    """Rough wall time of ``runs`` trainings: steps x time per step (scaled by the batch) + evaluation."""
    steps = -(-epochs * rows // max(batch_size, 1))
    per_step = STEP_SECONDS.get(model, STEP_SECONDS["cnn"]) * max(batch_size, 1) / 256
    evaluation = EVAL_SECONDS_PER_ROW.get(model, EVAL_SECONDS_PER_ROW["cnn"]) * rows * epochs
    return runs * (steps * per_step + evaluation)


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"
