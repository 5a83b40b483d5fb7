"""Exceptions that cross layers (the command line catches them without importing what raises them)."""

from __future__ import annotations


class TrainingDiverged(ArithmeticError):
    """The parameters became non-finite (NaN or inf): training stopped at ``step``.

    Attributes: ``step``, ``total_steps``, ``lr`` (the learning rate in use)."""

    def __init__(self, *, step: int, total_steps: int, lr: float) -> None:
        self.step, self.total_steps, self.lr = step, total_steps, lr
        super().__init__(f"training diverged at step {step} of {total_steps}: the parameters are no longer finite "
                         f"(NaN or inf); lower the learning rate (now {lr:g}) or the clipping bound")


class ArgumentError(ValueError):
    """A bad value of one named argument of a library function, found only once the data or the accounting is
    at hand (a group name the data do not have, an epsilon no noise can reach). ``argument`` is the parameter's
    name, so the command line can name its own flag for it (``train_group_fraction`` -> ``--train-fraction``)."""

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        super().__init__(f"{argument}: {message}")
        self.detail = message
