"""Every training record's gradient norm during a run, for per-record privacy accounting
(:mod:`dpfair_analysis.privacy.individual`): :func:`~dpfair_analysis.training.norm_recorder.all_sample_norms` at the
current parameters, by the loop's own engine, and :class:`~dpfair_analysis.training.norm_recorder.NormRecorder`, a
``train()`` callback that stores them at checkpoints of the run.

Kept in ``training/`` because it computes with the trainer's objectives; the accounting it feeds sits one floor
below, in ``privacy/``, and needs only the norms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpfair_analysis.validation import check_positive_int


def all_sample_norms(model: Any, data: Any, *, records: Any = None, objective: Any = None,
                     chunk_size: int = 8192) -> np.ndarray:
    """:math:`\\|g_i(\\theta)\\|` of every record (or of ``records``) at the model's current parameters, by the
    training loop's own engine (``dpfair_analysis.training.objectives.batch_gradients`` of ``objective``,
    default cross-entropy: the same numbers a DP step on a batch holding the record sees, up to float
    rounding of the chunking).

    Parameters
    ----------
    model : torch.nn.Module
        The model, at the parameters to evaluate (not changed).
    data : GroupedDataset
        The training rows.
    records : array_like of int, optional
        Row indices (default all rows).
    objective : Objective, optional
        The run's objective (default ``CrossEntropy()``, the loop's default).
    chunk_size : int
        Rows per pass.

    Returns
    -------
    numpy.ndarray
        Shape (len(records),), in the model's dtype.
    """
    import torch

    from dpfair_analysis.gradients import parameters_of
    from dpfair_analysis.training.objectives import CrossEntropy, batch_gradients

    chunk_size = check_positive_int(chunk_size, "chunk_size")
    objective = CrossEntropy() if objective is None else objective
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    index = torch.arange(len(data)) if records is None else torch.as_tensor(np.asarray(records), dtype=torch.long)
    params = parameters_of(model)
    out = []
    for start in range(0, len(index), chunk_size):
        rows = index[start:start + chunk_size]
        X, y, group = (t[rows].to(device) for t in (data.X, data.y, data.group))
        batch, _ = batch_gradients(objective, model, X, y, group, params=params)
        out.append(batch.norms.detach().cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


class NormRecorder:
    """A training callback recording every record's gradient norm at the parameters of every ``every``-th step.

    Pass it in ``train(..., callbacks=[recorder])``. The loop calls it at :math:`\\theta_t` for
    :math:`t = 0, \\dots, T` (before step :math:`t+1`); at :math:`t \\equiv 0 \\pmod{\\text{every}}`, :math:`t < T`
    it stores :func:`all_sample_norms` of ``records`` -- the norms step :math:`t+1` would compute for them.
    It changes nothing in the run (no parameter, generator or output is touched: tested). Then

    ``dpfair_analysis.privacy.individual.individual_privacy(recorder.norms, repeats=recorder.repeats, ...)``

    charges step :math:`s` with the norms of the last checkpoint :math:`t \\le s - 1` (held norms when
    ``every > 1``: an approximation, whose error tests/privacy/test_individual.py measures against every step).

    Cost: :math:`\\lceil T/\\text{every} \\rceil` passes over ``records`` (a pass over all n rows is the
    per-sample work of n/b steps) and :math:`4 |\\text{records}| \\lceil T/\\text{every} \\rceil` bytes.

    Parameters
    ----------
    data : GroupedDataset
        The run's training rows (the same object passed to ``train``).
    every : int
        Steps between checkpoints (1: every step, exact).
    records : array_like of int, optional
        Rows to record (default all); their groups are ``data.group[records]``.
    objective : Objective, optional
        The run's objective (default cross-entropy, as the loop's).
    total_steps : int, optional
        T, if known: skips the checkpoint at t = T, which no step uses.
    """

    def __init__(self, data: Any, *, every: int = 1, records: Any = None, objective: Any = None,
                 total_steps: int | None = None) -> None:
        self.data = data
        self.every = check_positive_int(every, "every")
        self.records = None if records is None else np.asarray(records, dtype=np.int64)
        if self.records is not None and len(self.records) and (self.records.min() < 0
                                                                or self.records.max() >= len(data)):
            raise ValueError(f"records must be row indices in 0..{len(data) - 1}")
        self.objective = objective
        self.total_steps = None if total_steps is None else check_positive_int(total_steps, "total_steps")
        self._checkpoints: list[tuple[int, np.ndarray]] = []
        self._last = -1

    def __call__(self, t: int, model: Any, state: Any) -> None:
        self._last = max(self._last, int(t))
        if t % self.every or (self.total_steps is not None and t >= self.total_steps):
            return
        self._checkpoints.append((int(t), all_sample_norms(model, self.data, records=self.records,
                                                           objective=self.objective)))

    @property
    def steps(self) -> int:
        """T: the steps the run took (the last t the loop reported, or ``total_steps``)."""
        return self.total_steps if self.total_steps is not None else max(self._last, 0)

    @property
    def groups(self) -> np.ndarray:
        """Each recorded row's group code."""
        group = self.data.group.cpu().numpy()
        return group if self.records is None else group[self.records]

    @property
    def norms(self) -> np.ndarray:
        """(m, n_recorded): the norms at the checkpoints that some step uses."""
        used = [norms for t, norms in self._checkpoints if t < self.steps]
        if not used:
            raise ValueError("the recorder has no checkpoint yet: pass it to train(..., callbacks=[recorder])")
        return np.stack(used)

    @property
    def repeats(self) -> np.ndarray:
        """Steps each checkpoint in :attr:`norms` covers: up to the next checkpoint, or to T."""
        times = [t for t, _ in self._checkpoints if t < self.steps]
        return np.diff(np.asarray([*times, self.steps], dtype=np.int64))
