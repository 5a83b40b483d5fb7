"""The worst-case neighbouring pairs and public starting points of the one-release audits."""

from __future__ import annotations


import torch

from dpfair_analysis.gradients import flatten
from dpfair_analysis.models import LogisticRegression


#: Rows of D in the step audits (group 0, ~zero gradient at the starting point).
CANARY_BASE_ROWS = 10


def canary_datasets():
    """(D, D'): ten rows with ~zero gradients at :func:`canary_model`'s parameters, and D plus a canary.

    Rows of D: x = (0, 1), y = 1, group 0 -- score z = 20, so the logistic gradient
    (sigmoid(z) - y) [x; 1] has norm ~3e-9 (never clipped). The canary (last row of D'):
    x = (8, 0), y = 0, group 1 -- z = 0, gradient 0.5 [8, 0, 1] of norm 4.03, above every
    bound the audited policies can choose (<= 2.75), so it is clipped to exactly its
    bound, always in the same direction.
    """
    from dpfair_analysis.data.dataset import GroupedDataset

    n = CANARY_BASE_ROWS
    X = torch.cat([torch.tensor([[0.0, 1.0]]).repeat(n, 1), torch.tensor([[8.0, 0.0]])])
    y = torch.tensor([1] * n + [0])
    group = torch.tensor([0] * n + [1])
    full = GroupedDataset(X=X, y=y, group=group, group_names=("base", "canary"), label_names=("0", "1"),
                          feature_names=("x0", "x1"), name="audit-canary")
    return full.subset(torch.arange(n)), full


def canary_model():
    """Logistic regression with the public starting point w = (0, 20), b = 0 (no L2 penalty)."""
    model = LogisticRegression(2, 2)
    with torch.no_grad():
        model.linear.weight.copy_(torch.tensor([[0.0, 20.0]]))
        model.linear.bias.zero_()
    return model


def _flat(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors.values()]).to(torch.float64)


def _flat_rows(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-sample gradients as an (n, P) float64 matrix (:func:`~dpfair_analysis.gradients.flatten`)."""
    return flatten(grads).to(torch.float64)



def output_perturbation_pair():
    """(D, D'): one row x = (1, 0) (||x|| = 1, the assumed bound) with label 1, and the same row with label 0."""
    from dpfair_analysis.data.dataset import GroupedDataset

    def data(label: int) -> GroupedDataset:
        return GroupedDataset(X=torch.tensor([[1.0, 0.0]]), y=torch.tensor([label]), group=torch.tensor([0]),
                              group_names=("all",), label_names=("0", "1"), name="audit-output-perturbation")

    return data(1), data(0)



def pfld_step_pair(canary_x: tuple[float, float], canary_y: int):
    """(D, D') for one PF-LD step's audit under its relation (one person's group changes): seven rows, the canary
    row 0, in group 0 on D and group 1 on D'; three rows x = (0, 1), y = 1 in each group besides. (The trainer's
    audit, every step of a run, uses :func:`~dpfair_analysis.verify.audits.trainers.pfld_training_pair`.)"""
    from dpfair_analysis.data.dataset import GroupedDataset

    X = torch.tensor([list(canary_x)] + [[0.0, 1.0]] * 6)
    y = torch.tensor([canary_y] + [1] * 6)
    others = [0, 0, 0, 1, 1, 1]

    def data(canary_group: int) -> GroupedDataset:
        return GroupedDataset(X=X, y=y, group=torch.tensor([canary_group] + others), group_names=("a", "b"),
                              label_names=("0", "1"), name="audit-pfld")

    return data(0), data(1)


