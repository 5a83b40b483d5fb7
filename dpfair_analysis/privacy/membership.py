"""Membership-inference attacks and their metrics (paper 002 Figure 3, "privacy vulnerability").

Paper 002's Figure 3 compares the methods' "privacy vulnerability"; the attack is not in our copy, so
two standard black-box attacks are used, both scored on a set of *targets* (members: rows the model
trained on; non-members: rows it did not see, from the same distribution):

* **loss threshold** (Yeom et al. 2018): score = -L(f(x), y); a member tends to have a smaller loss.
* **LiRA, offline** (Carlini et al. 2022, "Membership inference attacks from first principles",
  §IV-C offline variant): shadow models trained like the target on data that contains none of the
  targets ("OUT" models only); for each target, the logit-scaled confidence
  phi = log(p_y / (1 - p_y)) on the shadows is fitted by a Gaussian N(mu_out, s^2) and the target
  model's phi is scored by its one-sided standardised distance (phi - mu_out) / s -- larger means
  "more confident than a model that did not train on it". With few shadows the per-example variance
  is unreliable, so a global variance over all targets is used (the paper's recommendation for small
  numbers of shadows); ``global_variance=False`` uses the per-example one.

Metrics (scikit-learn's ``roc_curve`` and ``roc_auc_score``): AUC, and the TPR at a low FPR alpha
(the largest TPR over thresholds whose FPR is at most alpha; Carlini et al.'s headline metric). A TPR
at FPR alpha needs at least 1/alpha non-members to mean anything: with fewer it is reported as NaN.
Each AUC carries its standard error (DeLong et al. 1988), so a group's AUC can be told from chance:
with ~300 members and non-members per group an AUC within +-0.045 of 0.5 is indistinguishable from it.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score, roc_curve

#: The low false-positive rates reported (where the number of non-members allows).
DEFAULT_FPRS = (0.01, 0.001)


def logit_confidence(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """phi = log(p_y / (1 - p_y)) = z_y - logsumexp_{j != y} z_j of softmax(logits), per row (float64, stable)."""
    z = logits.double()
    true = z.gather(1, y.view(-1, 1)).squeeze(1)
    others = z.scatter(1, y.view(-1, 1), -math.inf)
    return true - torch.logsumexp(others, dim=1)


def loss_scores(losses) -> np.ndarray:
    """The loss-threshold attack's scores: -loss (higher = more likely a member)."""
    return -np.asarray(losses, dtype=np.float64)


def lira_offline_scores(target: np.ndarray, shadows_out: np.ndarray, *, global_variance: bool = True,
                        min_std: float = 1e-6) -> np.ndarray:
    """Offline LiRA scores (module docstring): (phi_target - mean_out) / std_out per target.

    Parameters
    ----------
    target : numpy.ndarray
        (n,) logit-scaled confidences of the target model on the targets.
    shadows_out : numpy.ndarray
        (S, n) the same on S >= 2 shadow models that did not train on any target.
    global_variance : bool
        One standard deviation for all targets (default) or one per target.
    min_std : float
        Floor of the standard deviation (a constant confidence would divide by 0).
    """
    target = np.asarray(target, dtype=np.float64)
    shadows_out = np.asarray(shadows_out, dtype=np.float64)
    if shadows_out.ndim != 2 or shadows_out.shape[1] != target.shape[0]:
        raise ValueError(f"shadows_out must have shape (S, {target.shape[0]}), got {shadows_out.shape}")
    if shadows_out.shape[0] < 2:
        raise ValueError(f"shadows_out needs at least 2 shadow models, got {shadows_out.shape[0]}")
    mean = shadows_out.mean(axis=0)
    if global_variance:
        std = np.full_like(mean, np.sqrt(np.mean(shadows_out.var(axis=0, ddof=1))))
    else:
        std = shadows_out.std(axis=0, ddof=1)
    return (target - mean) / np.maximum(std, min_std)


def tpr_at_fpr(labels, scores, fpr: float) -> float:
    """The largest TPR over thresholds with FPR <= ``fpr`` (NaN with fewer than 1/fpr non-members)."""
    labels = np.asarray(labels, dtype=bool)
    negatives = int((~labels).sum())
    if not 0 < fpr < 1:
        raise ValueError(f"fpr must be in (0, 1), got {fpr!r}")
    if negatives < math.ceil(1 / fpr) or labels.all():
        return math.nan
    false_positive, true_positive, _ = roc_curve(labels, np.asarray(scores, dtype=np.float64))
    return float(true_positive[false_positive <= fpr + 1e-12].max())


def auc_standard_error(labels, scores) -> float:
    """DeLong, DeLong and Clarke-Pearson's (1988) standard error of the empirical AUC of ``scores`` for
    ``labels`` (1 = member), distribution-free. With the placements
    V_i = P(score of a non-member < s_i) for member i and W_j = P(score of a member > s_j) for
    non-member j (ties count 1/2), AUC = mean_i V_i = mean_j W_j and

        SE^2 = var(V) / n_1 + var(W) / n_0    (sample variances).

    NaN unless there are at least two members and two non-members."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    n_members, n_nonmembers = int(labels.sum()), int((~labels).sum())
    if n_members < 2 or n_nonmembers < 2:
        return math.nan
    all_ranks = rankdata(scores)
    members_placement = (all_ranks[labels] - rankdata(scores[labels])) / n_nonmembers
    nonmembers_placement = 1.0 - (all_ranks[~labels] - rankdata(scores[~labels])) / n_members
    variance = members_placement.var(ddof=1) / n_members + nonmembers_placement.var(ddof=1) / n_nonmembers
    return math.sqrt(variance)


def attack_metrics(labels, scores, *, group=None, group_names: Sequence[str] | None = None,
                   fprs: Sequence[float] = DEFAULT_FPRS) -> pd.DataFrame:
    """One row per group (and ``all``): n_members, n_nonmembers, auc, auc_se (:func:`auc_standard_error`),
    tpr@<fpr> for each fpr.

    ``labels``: 1 for members, 0 for non-members; ``scores``: higher = more likely a member."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    if labels.shape != scores.shape:
        raise ValueError(f"labels and scores must have the same shape, got {labels.shape} and {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite")
    parts = [("all", np.ones_like(labels))]
    if group is not None:
        group = np.asarray(group)
        names = list(group_names) if group_names is not None else [str(k) for k in np.unique(group)]
        ids = range(len(names)) if group_names is not None else np.unique(group)
        parts += [(name, group == k) for name, k in zip(names, ids)]
    rows = []
    for name, mask in parts:
        y, s = labels[mask], scores[mask]
        row = {"group": name, "n_members": int(y.sum()), "n_nonmembers": int((~y).sum())}
        both = 0 < y.sum() < len(y)
        row["auc"] = float(roc_auc_score(y, s)) if both else math.nan
        row["auc_se"] = auc_standard_error(y, s)
        for alpha in fprs:
            row[f"tpr@{alpha:g}"] = tpr_at_fpr(y, s, alpha) if both else math.nan
        rows.append(row)
    return pd.DataFrame(rows)
