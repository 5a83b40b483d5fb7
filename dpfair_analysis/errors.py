"""Exceptions that cross layers (the command line catches them without importing what raises them)."""

from __future__ import annotations


class TrainingDiverged(ArithmeticError):
    """The parameters became non-finite (NaN or inf): training stopped at ``step``.

    Attributes: ``step``, ``total_steps``, ``lr`` (the learning rate in use)."""

    def __init__(self, *, step: int, total_steps: int, lr: float) -> None:
        self.step, self.total_steps, self.lr = step, total_steps, lr
        super().__init__(f"training diverged at step {step} of {total_steps}: the parameters are no longer finite "
                         f"(NaN or inf); lower the learning rate (now {lr:g}) or the clipping bound")
