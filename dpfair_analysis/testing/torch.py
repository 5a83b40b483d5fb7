"""Torch adapters: audit torch code through the kit's numpy interface (this module imports torch).

* :func:`torch_mechanism` turns ``fn(data, generator)`` -- torch code that draws its noise from a
  :class:`torch.Generator` -- into the kit's ``fn(data, rng)``: the generator is seeded from the
  kit's numpy ``rng`` (same seed, same output), numpy inputs become tensors, tensor outputs
  become numpy arrays.
* :func:`parameter_trajectory` collects a model's flattened parameters after every step (a
  callback for a training loop), the (T + 1, P) array :func:`~dpfair_analysis.testing.audit_step`
  takes; :func:`flat_parameters` is one snapshot.

A torch mechanism that draws from torch's *global* generator (``torch.randn`` without
``generator=``) is refused by the runner, as numpy's global generator is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def _to_torch(data: Any, dtype: torch.dtype) -> Any:
    if isinstance(data, dict):
        return {k: _to_torch(v, dtype) for k, v in data.items()}
    array = np.asarray(data)
    if not array.flags.writeable:  # the kit's read-only data: torch code gets a copy of its own (a tensor that
        array = array.copy()       # shared the memory could be written to, whatever numpy's flag says)
    if np.issubdtype(array.dtype, np.floating):
        return torch.as_tensor(array, dtype=dtype)
    return torch.as_tensor(array)


def _to_numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_complex():  # kept complex: the runner refuses it (a cast would keep the real part only)
            return value.detach().cpu().numpy()
        return value.detach().cpu().to(torch.float64).numpy()
    if isinstance(value, (tuple, list)):
        return np.concatenate([np.ravel(_to_numpy(v)) for v in value])
    return value


def torch_mechanism(fn: Callable[[Any, torch.Generator], Any], *, dtype: torch.dtype = torch.float64,
                    convert_data: bool = True) -> Callable[[Any, np.random.Generator], Any]:
    """The kit's ``fn(data, rng)`` for torch code ``fn(data, generator)``.

    Parameters
    ----------
    fn : callable
        ``fn(data, generator)`` returning a tensor, a number, or a tuple of tensors (concatenated).
    dtype : torch.dtype
        Floating-point data is passed as tensors of this dtype.
    convert_data : bool
        Pass numpy data as tensors (dicts entry by entry), each call a copy of its own (the kit's data is
        read-only); False passes it unchanged.
    """
    def mechanism(data: Any, rng: np.random.Generator) -> Any:
        generator = torch.Generator().manual_seed(int(rng.integers(2 ** 63 - 1)))
        return _to_numpy(fn(_to_torch(data, dtype) if convert_data else data, generator))

    mechanism.__qualname__ = getattr(fn, "__qualname__", "torch mechanism")
    return mechanism


def flat_parameters(model: torch.nn.Module) -> np.ndarray:
    """The model's parameters, flattened in ``named_parameters`` order, as float64 numpy.

    Parameters
    ----------
    model : torch.nn.Module
        The model.
    """
    return torch.cat([p.detach().reshape(-1).to(torch.float64) for p in model.parameters()]).cpu().numpy()


class parameter_trajectory:
    """A callback ``watch(step, model, *rest)`` that records :func:`flat_parameters` after every step.

    ``array()`` returns the (T + 1, P) trajectory (the first call should be before the first step).
    """

    def __init__(self) -> None:
        self.snapshots: list[np.ndarray] = []

    def __call__(self, step: int, model: torch.nn.Module, *rest: Any) -> None:
        self.snapshots.append(flat_parameters(model))

    def array(self) -> np.ndarray:
        if not self.snapshots:
            raise ValueError("no parameters recorded: pass the callback to the training loop")
        return np.stack(self.snapshots)


__all__ = ["flat_parameters", "parameter_trajectory", "torch_mechanism"]
