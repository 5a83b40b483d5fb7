"""A small biased data set shared by the F-LD / PF-LD tests (tests/training, tests/theory).

Group 1 (a third of the rows) has a much higher positive rate and a feature is a proxy for the
group, so an unconstrained model is unfair and a fairness constraint has something to do.
"""

from __future__ import annotations

import numpy as np
import torch

from dpfair_analysis.data.dataset import GroupedDataset


def biased_data(n: int = 600, seed: int = 0) -> GroupedDataset:
    """Group 1 (a third) has a much higher positive rate, and a feature is a proxy for the group."""
    rng = np.random.default_rng(seed)
    group = (rng.random(n) < 1 / 3).astype(np.int64)
    x1 = rng.normal(size=n)
    proxy = group + 0.3 * rng.normal(size=n)
    y = (x1 + 2.0 * group + 0.3 * rng.normal(size=n) > 0.8).astype(np.int64)
    X = np.stack([x1, proxy, rng.normal(size=n)], axis=1).astype(np.float32)
    return GroupedDataset(X=torch.from_numpy(X), y=torch.from_numpy(y), group=torch.from_numpy(group),
                          group_names=("a", "b"), label_names=("0", "1"), name="biased")


DATA = biased_data()
