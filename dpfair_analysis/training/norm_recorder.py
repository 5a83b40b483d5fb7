"""Every training record's gradient norm during a run, for per-record privacy accounting
(:mod:`dpfair_analysis.privacy.individual`): :func:`~dpfair_analysis.training.norm_recorder.all_sample_norms` at the
current parameters, by the loop's own engine, and :class:`~dpfair_analysis.training.norm_recorder.NormRecorder`, a
``train()`` callback that stores them at checkpoints of the run, and
:class:`~dpfair_analysis.training.norm_recorder.SampledNorms`, which keeps the norms the DP step computes anyway.

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


class SampledNorms:
    """Every record's gradient norm as the DP step itself computed it: no pass over the data but one.

    Pass it twice, ``train(..., callbacks=[recorder], batch_observers=[recorder.observe])``. At :math:`\\theta_0` (the
    callback at t = 0) it takes :func:`all_sample_norms` of every record, once; after that, step t's batch
    observer hands it the norms :math:`\\|g_i(\\theta_{t-1})\\|` of the rows of :math:`B_t` -- the numbers the step
    clips, so recording them costs no gradient work. Record i's norm at step t is then

    .. math:: v_{i,t} = \\|g_i(\\theta_{s-1})\\|, \\qquad s = \\arg\\min\\{|s - t| : s = 1 \\text{ or } i \\in B_s\\}
              \\text{ (ties to the later)},

    exact on the steps whose batch holds i and the nearest such norm otherwise (under Poisson sampling at q = b/n
    a record is in a batch every 1/q steps on average, about once an epoch: a holding like a :class:`NormRecorder`'s
    at ``every = n/b``, whose pass over every record each epoch it replaces; measured against every step in
    benchmarks/group_privacy_cost.py).
    :func:`~dpfair_analysis.experiments.group_privacy.sampled_sensitivity_histogram` composes them.

    Cost: one per-sample-norm pass over the data at :math:`\\theta_0` (the per-sample work of n/b steps) and
    12 bytes per sampled row (b T in all).

    Parameters
    ----------
    data : GroupedDataset
        The run's training rows (the same object passed to ``train``).
    objective : Objective, optional
        The run's objective (default cross-entropy, as the loop's): the first pass's.
    """

    def __init__(self, data: Any, *, objective: Any = None) -> None:
        self.data = data
        self.objective = objective
        self.initial: np.ndarray | None = None
        self._updates: list[tuple[int, np.ndarray, np.ndarray]] = []

    def __call__(self, t: int, model: Any, state: Any) -> None:
        if t == 0:
            self.initial = all_sample_norms(model, self.data, objective=self.objective)

    def observe(self, t: int, index: Any, norms: Any) -> None:
        """Step t's batch rows and their norms (a :data:`~dpfair_analysis.training.loop.BatchObserver`)."""
        self._updates.append((int(t), index.numpy().astype(np.int64, copy=False),
                              norms.cpu().numpy().astype(np.float32)))

    @property
    def groups(self) -> np.ndarray:
        """Each record's group code."""
        return self.data.group.cpu().numpy()

    @property
    def updates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, records, norms): one entry per sampled row, in step order (steps 1-based)."""
        if self.initial is None:
            raise ValueError("the recorder has no norms yet: pass it to train(..., callbacks=[recorder], "
                             "batch_observers=[recorder.observe])")
        if not self._updates:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        steps = np.concatenate([np.full(len(index), t, dtype=np.int64) for t, index, _ in self._updates])
        return steps, np.concatenate([u[1] for u in self._updates]), np.concatenate([u[2] for u in self._updates])
