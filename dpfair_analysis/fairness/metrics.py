"""Group metrics: per-group accuracy and loss, the cost of privacy, parity violations.

Definitions (paper 000 §5.1 and §6.1.4; PF-LD paper 003 §3 for the violations):

* cost of privacy of group k:  Delta^k = acc_k(private) - acc_k(non-private)
  (negative when privacy costs accuracy, as the papers print it);
* inequality of the costs:      max_{i,j} |Delta^i - Delta^j|; equal costs at tolerance
  tau when it is <= tau (tau = 0.05 in the paper);
* demographic parity violation: max_{a,b} |P(yhat=1 | A=a) - P(yhat=1 | A=b)|;
* equalized odds violation:     max over y in {0,1} of the same gap conditioned on Y=y;
* accuracy parity violation:    max_{a,b} |acc_a - acc_b|;
* boundary proxy (paper 001, Thm 5 and Eq. 6): phi(x) = 1 - sum_k f_k(x)^2 of the predicted
  probabilities, 0 at a one-hot f (far from the boundary), 1 - 1/K at the uniform f.

Selection rates and conditional gaps come from fairlearn's MetricFrame; inside training loops per-group
accuracy comes from one ``bincount`` (:func:`per_group_accuracy`, the same numbers).
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from fairlearn.metrics import MetricFrame, demographic_parity_difference, equalized_odds_difference
from sklearn.metrics import accuracy_score


def boundary_proxy(probabilities):
    """phi = 1 - sum_k f_k^2 over the last axis of a probability tensor or array (paper 001, Thm 5)."""
    if isinstance(probabilities, torch.Tensor):
        return 1.0 - probabilities.pow(2).sum(-1)
    return 1.0 - (np.asarray(probabilities, dtype=np.float64) ** 2).sum(axis=-1)


def boundary_proxy_of_logits(logits: torch.Tensor) -> torch.Tensor:
    """phi of softmax(logits), per row (differentiable: the mitigation's objective uses its gradient)."""
    return boundary_proxy(torch.softmax(logits, dim=-1))


def _names(group: np.ndarray, group_names: Sequence[str] | None) -> np.ndarray:
    group = np.asarray(group)
    if group_names is None:
        return group.astype(str)
    return np.asarray(group_names, dtype=object)[group]


def group_accuracy(y_true, y_pred, group, *, group_names: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows ``group, n, accuracy`` for every group, then ``all`` for the whole population.

    Groups named in ``group_names`` but absent from the data are reported with n = 0 and
    accuracy NaN, so tables line up across runs.
    """
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape or y_true.shape != np.asarray(group).shape:
        raise ValueError(f"y_true, y_pred and group must have the same shape, got {y_true.shape}, "
                         f"{y_pred.shape}, {np.asarray(group).shape}")
    names = _names(group, group_names)
    frame = MetricFrame(metrics={"accuracy": accuracy_score}, y_true=y_true, y_pred=y_pred,
                        sensitive_features=pd.Series(names, name="group"))
    by_group = frame.by_group.reset_index()
    by_group["n"] = by_group["group"].map(pd.Series(names).value_counts()).astype(int)
    order = list(group_names) if group_names is not None else sorted(by_group["group"])
    by_group = by_group.set_index("group").reindex(order).reset_index()
    by_group["n"] = by_group["n"].fillna(0).astype(int)
    overall = pd.DataFrame([{"group": "all", "accuracy": float(frame.overall["accuracy"]), "n": len(y_true)}])
    return pd.concat([by_group, overall], ignore_index=True)[["group", "n", "accuracy"]]


def per_group_accuracy(correct: torch.Tensor, group: torch.Tensor, *, n_groups: int) -> torch.Tensor:
    """acc_k = (1/n_k) sum_{i in group k} 1[yhat_i = y_i] for k = 0..K-1 (NaN for an empty group), by one
    ``bincount`` on the tensors a trainer's evaluation already has.

    The training loop's evaluation runs this every epoch; :func:`group_accuracy` (fairlearn's MetricFrame,
    about 300 times slower) gives the same numbers for result tables: both divide an exact integer count of
    hits by n_k in float64.

    Parameters
    ----------
    correct : torch.Tensor
        Boolean (or 0/1) per row: the prediction was right.
    group : torch.Tensor
        Group id per row, in 0..n_groups-1.
    n_groups : int
        K, the number of groups (absent ones get NaN).
    """
    counts = torch.bincount(group, minlength=n_groups).to(torch.float64)
    hits = torch.bincount(group, weights=correct.to(torch.float64), minlength=n_groups)
    return torch.where(counts > 0, hits / counts.clamp(min=1.0), torch.full_like(counts, float("nan")))


def cost_of_privacy(private_accuracy: pd.Series, nonprivate_accuracy: pd.Series) -> pd.Series:
    """Delta^k = acc_k(private) - acc_k(non-private), per group (indexes must match)."""
    if set(private_accuracy.index) != set(nonprivate_accuracy.index):
        raise ValueError(f"the private and non-private accuracies cover different groups: "
                         f"{sorted(private_accuracy.index)} vs {sorted(nonprivate_accuracy.index)}")
    return (private_accuracy - nonprivate_accuracy.reindex(private_accuracy.index)).rename("cost")


def max_cost_gap(costs: pd.Series) -> float:
    """max_{i,j} |Delta^i - Delta^j| over the groups (the row ``all`` is ignored)."""
    values = costs.drop(labels="all", errors="ignore").dropna().to_numpy()
    if len(values) < 2:
        return float("nan")
    return float(max(abs(a - b) for a, b in itertools.combinations(values, 2)))


def equal_costs(costs: pd.Series, *, tau: float = 0.05) -> bool:
    """Paper 000's equal-costs test: max |Delta^i - Delta^j| <= tau."""
    return bool(max_cost_gap(costs) <= tau)


def parity_violations(y_true, y_pred, group) -> dict[str, float]:
    """Demographic-parity, equalized-odds and accuracy-parity violations (max pairwise gaps).

    The first two need binary labels and predictions and are NaN otherwise.
    """
    y_true, y_pred, group = np.asarray(y_true), np.asarray(y_pred), np.asarray(group)
    binary = set(np.unique(y_true)) <= {0, 1} and set(np.unique(y_pred)) <= {0, 1}
    accuracy = MetricFrame(metrics=accuracy_score, y_true=y_true, y_pred=y_pred, sensitive_features=group)
    return {
        "demographic_parity": float(demographic_parity_difference(y_true, y_pred, sensitive_features=group))
        if binary else float("nan"),
        "equalized_odds": float(equalized_odds_difference(y_true, y_pred, sensitive_features=group))
        if binary else float("nan"),
        "accuracy_parity": float(accuracy.difference(method="between_groups")),
    }
