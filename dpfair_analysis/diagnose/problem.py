"""The diagnosis's view of the model and the data: one flat float64 parameter vector, the rows each part of
the prediction uses, per-sample gradients, curvature diagonals and the largest curvature.

(Softmax) logistic regression -- the model of every tabular setting -- has closed forms for all of them
(:class:`LinearScores`): scores z = W x~ with x~ = [x; 1], per-sample gradient g_i = r_i (x) x~_i with the
residual r_i = dL/dz_i (sigma(z_i) - y_i for the binary single score, softmax(z_i) - e_{y_i} otherwise), so
||g_i|| = ||r_i|| ||x~_i||, a clipped sum is one matrix product and the drift's Jacobian is
(1/m) sum_i B_i (x) x~_i x~_i^T (:meth:`LinearScores.drift_jacobian`). Other models go through torch.func.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, jvp, vjp, vmap

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import parameters_of
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.theory.hessian import flat_parameterisation

#: Most per-sample gradient entries the diagnosis materialises at once (rows x parameters).
MATERIALISED_ELEMENTS = 2 ** 25


class Problem:
    """The model as a function of one flat float64 parameter vector, and the rows the diagnosis uses."""

    def __init__(self, model: nn.Module, train: GroupedDataset, *, rows: int, curvature_rows: int,
                 theory_rows: int, seed: int) -> None:
        self.model = copy.deepcopy(model).to(torch.float64)
        self.model.eval()
        params = {k: v.detach().to(torch.float64) for k, v in parameters_of(self.model).items()}
        self.theta0, self.unflatten = flat_parameterisation(params)
        self.theta0 = self.theta0.clone()
        self.names = list(params)
        self.P = self.theta0.numel()
        self.weight_mask = torch.cat([torch.zeros(v.numel(), dtype=torch.float64) if k.endswith("bias")
                                      else torch.ones(v.numel(), dtype=torch.float64) for k, v in params.items()])
        self.l2 = float(getattr(model, "l2", 0.0) or 0.0)
        self.n_groups = train.n_groups
        self.group_names = train.group_names
        self.label_names = train.label_names
        self.train_sizes = train.group_sizes().to(torch.float64)
        self.n = len(train)
        self.drift_data = stratified(train, rows, seed)
        # the curvature rows' per-sample gradients are materialised (rows x P numbers): at most 2^25 of them
        # (256 MiB), so a large model (the MNIST CNN's 431,080 parameters: 77 rows) uses fewer rows
        cap = max(32, MATERIALISED_ELEMENTS // max(self.P, 1))
        self.curvature_data = stratified(self.drift_data, min(curvature_rows, cap), seed + 1)
        self.theory_data = stratified(self.drift_data, min(theory_rows, 4 * cap), seed + 2)
        self.linear = LinearScores.of(self.model, self.names)
        self._augmented: dict[int, tuple[GroupedDataset, torch.Tensor, torch.Tensor]] = {}

    def augmented(self, data: GroupedDataset) -> torch.Tensor:
        """x~ = [x; 1] of ``data``'s rows (logistic regression only), computed once per data set."""
        return self._augmented_rows(data)[1]

    def augmented_norms(self, data: GroupedDataset) -> torch.Tensor:
        """||x~_i|| of ``data``'s rows (logistic regression only), computed once per data set."""
        return self._augmented_rows(data)[2]

    def _augmented_rows(self, data: GroupedDataset) -> tuple[GroupedDataset, torch.Tensor, torch.Tensor]:
        key = id(data)
        if key not in self._augmented:
            rows = self.linear.augmented(data.X)
            self._augmented[key] = (data, rows, rows.norm(dim=1))
        return self._augmented[key]

    def params(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.unflatten(theta)

    def penalty(self, theta: torch.Tensor) -> torch.Tensor:
        return self.l2 * self.weight_mask * theta


def stratified(data: GroupedDataset, rows: int, seed: int) -> GroupedDataset:
    """At most ``rows`` rows, a group-stratified random subset (every group keeps a row)."""
    if len(data) <= rows:
        return data
    rng = np.random.default_rng(seed)
    group = data.group.numpy()
    keep = []
    for k in range(data.n_groups):
        idx = np.flatnonzero(group == k)
        if len(idx):
            take = max(1, int(round(rows * len(idx) / len(data))))
            keep.append(rng.choice(idx, size=min(take, len(idx)), replace=False))
    return data.subset(np.sort(np.concatenate(keep)))


def ggn_diagonal(problem: Problem, theta: torch.Tensor, X: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_i w_i diag(J_i^T (diag p_i - p_i p_i^T) J_i): per-row Gauss-Newton diagonals (the Hessian's for
    piecewise-linear models), from K vector-Jacobian products per row (see
    :func:`~dpfair_analysis.theory.hessian.ggn_sample_traces`, whose trace this is the diagonal of)."""

    def row_diagonal(x: torch.Tensor) -> torch.Tensor:
        logits, pullback = vjp(lambda t: functional_call(problem.model, problem.unflatten(t),
                                                          (x.unsqueeze(0),)).squeeze(0), theta)
        prob = torch.softmax(logits, dim=0)
        root = prob.sqrt()
        cotangents = torch.diag(root) - root.unsqueeze(1) * prob.unsqueeze(0)  # row k = a_k
        (rows,) = vmap(pullback)(cotangents)
        return (rows ** 2).sum(0)

    model = problem.model
    if isinstance(model, LogisticRegression) and set(problem.names) == {"linear.weight", "linear.bias"}:
        # closed form (paper 001 Example 3): H_i = (diag f - f f^T) kron x~ x~^T, so the diagonal entry of
        # weight (k, j) is f_k (1 - f_k) x_j^2 (binary, one score: p (1 - p) x_j^2) and of bias k f_k (1 - f_k)
        params = problem.params(theta)
        with torch.no_grad():
            f = torch.softmax(functional_call(model, params, (X,)), dim=1)
        curvature = (f[:, 1] * f[:, 0]).unsqueeze(1) if model.binary else f * (1 - f)   # (n, outputs)
        weighted = curvature * weights.unsqueeze(1)
        parts = {"linear.weight": weighted.T @ X.flatten(1) ** 2, "linear.bias": weighted.sum(0)}
        return torch.cat([parts[name].reshape(-1) for name in problem.names])
    n_out = int(functional_call(model, problem.unflatten(theta), (X[:1],)).shape[1])
    chunk = max(1, 2 ** 22 // max(problem.P * n_out, 1))
    total = torch.zeros(problem.P, dtype=torch.float64)
    for start in range(0, len(X), chunk):
        part = vmap(row_diagonal)(X[start:start + chunk])
        total += weights[start:start + chunk] @ part
    return total


def largest_curvature(problem: Problem, theta: torch.Tensor, iterations: int = 12) -> float:
    """lambda_max of the non-private drift's Jacobian at theta (power iteration on Jacobian-vector products)."""
    data = problem.curvature_data
    X = data.X.to(torch.float64)

    def mean_loss(t: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(problem.model, problem.unflatten(t), (X,)), data.y)

    def hvp(v: torch.Tensor) -> torch.Tensor:
        return jvp(grad(mean_loss), (theta,), (v,))[1] + problem.l2 * problem.weight_mask * v

    gen = torch.Generator().manual_seed(12345)
    v = torch.randn(problem.P, generator=gen, dtype=torch.float64)
    v /= v.norm()
    value = 0.0
    for _ in range(iterations):
        w = hvp(v)
        value = float(v @ w)
        norm = w.norm()
        if norm == 0:
            break
        v = w / norm
    return max(value, 0.0)


class LinearScores:
    """Closed forms of (softmax) logistic regression in the diagnosis's flat parameter layout.

    theta = [vec(W) (K x d, row-major), b (K)] with K = 1 (binary: one score z, logits (0, z))
    or the number of classes; x~ = [x; 1], so the score matrix is W~ = [W, b] (K x (d + 1)).
    """

    def __init__(self, n_features: int, n_scores: int, binary: bool) -> None:
        self.d, self.K, self.binary = n_features, n_scores, binary

    @classmethod
    def of(cls, model: nn.Module, names: list[str]) -> LinearScores | None:
        """The closed forms for ``model`` if it is a :class:`~dpfair_analysis.models.LogisticRegression`
        (parameters ``linear.weight``, ``linear.bias``), else None."""
        if not isinstance(model, LogisticRegression) or names != ["linear.weight", "linear.bias"]:
            return None
        weight = model.linear.weight
        return cls(int(weight.shape[1]), int(weight.shape[0]), bool(model.binary))

    @staticmethod
    def augmented(X: torch.Tensor) -> torch.Tensor:
        """x~ = [x; 1] per row, float64, shape (n, d + 1)."""
        X = X.flatten(1).to(torch.float64)
        return torch.cat([X, torch.ones(len(X), 1, dtype=torch.float64)], 1)

    def matrix(self, theta: torch.Tensor) -> torch.Tensor:
        """W~ = [W, b], shape (K, d + 1)."""
        K, d = self.K, self.d
        return torch.cat([theta[:K * d].view(K, d), theta[K * d:].view(K, 1)], 1)

    def flat(self, M: torch.Tensor) -> torch.Tensor:
        """A (..., K, d + 1) array in theta's layout, shape (..., P)."""
        lead = M.shape[:-2]
        return torch.cat([M[..., :self.d].reshape(*lead, -1), M[..., self.d]], -1)

    def scores(self, theta: torch.Tensor, Xt: torch.Tensor) -> torch.Tensor:
        """z = x~ W~^T, shape (n, K) (Xt: augmented rows)."""
        return Xt @ self.matrix(theta).T

    def residuals(self, scores: torch.Tensor, y: torch.Tensor, *, curvature: bool = True
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(r = dL/dz, the curvature of the loss in z) per row: binary (sigma(z) - y, p (1 - p)), shapes
        (n, 1) and (n, 1); K classes (softmax(z) - e_y, diag p - p p^T), shapes (n, K) and (n, K, K).
        ``curvature=False``: (r, None) (a drift needs r alone)."""
        if self.binary:
            p = torch.sigmoid(scores)
            return p - y.to(torch.float64).unsqueeze(1), p * (1 - p) if curvature else None
        p = torch.softmax(scores, dim=1)
        residuals = p.clone()
        residuals[torch.arange(len(y)), y] -= 1.0
        if not curvature:
            return residuals, None
        return residuals, torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1)

    def gradient_sum(self, residuals: torch.Tensor, Xt: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """sum_i a_i g_i = vec((a o R)^T X~) in theta's layout, shape (P,)."""
        return self.flat((residuals * weights.unsqueeze(1)).T @ Xt)

    def per_sample(self, residuals: torch.Tensor, Xt: torch.Tensor) -> torch.Tensor:
        """The per-sample gradients g_i = r_i (x) x~_i, shape (n, P)."""
        return self.flat(residuals.unsqueeze(2) * Xt.unsqueeze(1))

    def drift_jacobian(self, residuals: torch.Tensor, curvature: torch.Tensor, Xt: torch.Tensor,
                       coefficients: torch.Tensor, clipped: torch.Tensor) -> torch.Tensor:
        """d/dtheta sum_i c_i(theta) g_i(theta) with each row's bound and weight held: (P, P).

        An unclipped row contributes c_i H_i = c_i S_i (x) x~ x~^T (S_i: the loss's curvature in z);
        a clipped one, c_i g_i = w_i C_i g_i / ||g_i||, contributes c_i (I - g^ g^^T) H_i =
        c_i ((I - r^ r^^T) S_i) (x) x~ x~^T with r^ = r_i / ||r_i|| -- zero for the binary score, whose
        clipped gradient C_i sign(r_i) x~_i / ||x~_i|| does not move with theta.
        """
        if self.binary:
            weights = coefficients * curvature[:, 0] * (~clipped).to(torch.float64)
            return (Xt * weights.unsqueeze(1)).T @ Xt
        unit = residuals / residuals.norm(dim=1, keepdim=True).clamp(min=1e-300)
        projected = curvature - clipped.to(torch.float64)[:, None, None] * unit.unsqueeze(2) * (
            unit.unsqueeze(1) @ curvature)
        B = coefficients[:, None, None] * projected                       # (n, K, K)
        full = torch.einsum("ikl,ij,im->kjlm", B, Xt, Xt).reshape(self.K * (self.d + 1), -1)
        return full[self.order][:, self.order]

    @property
    def order(self) -> torch.Tensor:
        """theta's entries as positions in the row-major (K, d + 1) array W~ (weights first, then biases)."""
        d1 = self.d + 1
        return torch.tensor([k * d1 + j for k in range(self.K) for j in range(self.d)] +
                            [k * d1 + self.d for k in range(self.K)])
