"""Synthetic groups whose latent factors are set by hand: size, input norm, distance to boundary.

The fairness-lens analysis (paper 001, Thm 1-3 and Sec. 5) attributes the excessive
risk of a group under DP to its size, its input norms (which scale gradient norms and
the Hessian trace) and its distance to the decision boundary (which scales the
logistic weights :math:`\\sigma(1-\\sigma)`). :func:`synthetic_groups` generates data in
which each of these is a free parameter per group, under one shared true linear model.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Sequence

import numpy as np
import torch

from dpfair_analysis.data import _tabular as tab
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.validation import check_nonnegative, check_positive, check_positive_int, check_seed

NORM_SPREAD = (0.75, 1.25)
"""Per-sample input norm = input_scale[g] times Uniform(0.75, 1.25) (mean exactly 1)."""
MARGIN_SPREAD = (0.5, 1.5)
"""Per-sample boundary distance = margin[g] times Uniform(0.5, 1.5) (mean exactly 1)."""


def synthetic_groups(*, sizes: Sequence[int] = (2000, 500), dim: int = 10,
                     input_scale: Sequence[float] | None = None, margin: Sequence[float] | None = None,
                     n_classes: int = 2, temperature: float = 1.0, seed: int = 0,
                     group_names: Sequence[str] | None = None, offset: Sequence[float] | None = None,
                     group_indicators: bool = False) -> GroupedDataset:
    r"""Linear (logistic / softmax) data with per-group input scale and boundary distance.

    **Generative model.** With :math:`K` = ``n_classes``, draw (from ``seed``) an orthonormal
    :math:`Q \in \mathbb{R}^{d \times K}` and put the class directions at the vertices
    of a centred regular simplex, :math:`u_k = Q(e_k - \tfrac1K \mathbf 1) /
    \|e_k - \tfrac1K \mathbf 1\|` (unit vectors; for :math:`K = 2`,
    :math:`u_1 = -u_0 = w`). For each of the ``sizes[g]`` samples of group :math:`g`:

    1. a latent class :math:`c \sim \mathrm{Uniform}\{0..K-1\}`;
    2. a distance to the decision boundary :math:`\delta = m_g \cdot U(0.5, 1.5)`;
    3. a norm :math:`\rho = s_g \cdot U(0.75, 1.25)`;
    4. :math:`x = a\,u_c + \sqrt{\rho^2 - a^2}\;\hat r`, with :math:`\hat r` uniform on
       the unit sphere of the complement of :math:`\mathrm{span}\{u_k\}` and
       :math:`a = \delta / \kappa`, :math:`\kappa = \sqrt{K / (2(K-1))}` (so that the
       distance from :math:`x` to the nearest boundary between class :math:`c` and any
       other class is exactly :math:`\delta`; :math:`\kappa = 1` for :math:`K = 2`);
    5. the label from the true model :math:`P(y = k \mid x) \propto \exp(\lambda
       u_k^\top x / \tau)`, :math:`\lambda = \sqrt{(K-1)/(2K)}`, so that the logit gap
       between two classes is the signed distance to their boundary divided by
       :math:`\tau` = ``temperature``. For :math:`K = 2` this is the logistic model
       :math:`P(y=1 \mid x) = \sigma(w^\top x / \tau)`. ``temperature=0`` gives the
       noiseless labels :math:`y = c`.

    Hence :math:`\|x\| = \rho` exactly (mean :math:`s_g`) and the distance to the true
    boundary has mean :math:`m_g`, independently per group; group sizes are exact.

    **Group-specific boundaries** (``offset``, two classes only): group :math:`g`'s true
    boundary is :math:`w^\top x = o_g` instead of :math:`w^\top x = 0` -- the row is placed
    at signed distance :math:`\pm\delta` from it (:math:`w^\top x = o_g \pm \delta`) and
    labelled by :math:`\sigma((w^\top x - o_g)/\tau)`. A model that does not see the
    group must then compromise between the groups' boundaries, weighted by their
    influence on the gradient -- which clipping changes. ``group_indicators`` appends one
    indicator column per group (``group=<name>``), so a linear model can learn each
    group's offset as its own bias (learnt only from that group's rows: a small group's
    offset is learnt slowly and is exposed to the noise). Requires
    :math:`|o_g| + 1.5\,m_g \le 0.75\,s_g`.
    Requires :math:`1.5\,m_g/\kappa \le 0.75\,s_g` (a point cannot be farther from a
    boundary through the origin than its norm).

    Parameters
    ----------
    sizes : sequence of int
        Rows per group (each >= 1); the number of groups is ``len(sizes)``.
    dim : int
        Input dimension, at least ``n_classes``.
    input_scale : sequence of float, optional
        :math:`s_g > 0`, the mean input norm per group (default 1 for every group).
    margin : sequence of float, optional
        :math:`m_g \ge 0`, the mean distance to the true boundary (default
        ``0.25 * input_scale[g]``).
    n_classes : int
        :math:`K \ge 2`.
    temperature : float
        :math:`\tau \ge 0` of the label model.
    seed : int
        Seed of every random draw (directions, rows, labels).
    group_names : sequence of str, optional
        Default ``("g0", "g1", ...)``.
    offset : sequence of float, optional
        :math:`o_g`, the position of each group's true boundary along :math:`w` (two
        classes only; default 0 for every group: the draws are then exactly those without it).
    group_indicators : bool
        Append one 0/1 column per group (after the ``dim`` features).

    Returns
    -------
    GroupedDataset
        Float32 ``X`` (n, dim), rows ordered by group; ``info["directions"]`` holds the
        class directions :math:`u_k` as a (K, dim) array (see :func:`boundary_distance`).
    """
    sizes = _int_list(sizes, "sizes")
    n_groups = len(sizes)
    k = check_positive_int(n_classes, "n_classes")
    if k < 2:
        raise ValueError(f"n_classes must be at least 2, got {n_classes!r}")
    dim = check_positive_int(dim, "dim")
    if dim < k:
        raise ValueError(f"dim must be at least n_classes={k}, got {dim}")
    scales = _float_list(input_scale, "input_scale", n_groups, default=1.0, positive=True)
    margins = ([0.25 * s for s in scales] if margin is None
               else _float_list(margin, "margin", n_groups, default=0.0, positive=False))
    tau = check_nonnegative(temperature, "temperature")
    seed = check_seed(seed)
    names = tuple(f"g{g}" for g in range(n_groups)) if group_names is None else tuple(group_names)
    if len(names) != n_groups or not all(isinstance(n, str) for n in names):
        raise ValueError(f"group_names must be {n_groups} strings, got {group_names!r}")
    offsets = _float_list(offset, "offset", n_groups, default=0.0, positive=False, signed=True)
    if any(offsets) and k != 2:
        raise ValueError(f"offset needs n_classes=2 (a shifted boundary per group), got n_classes={k}")
    kappa = math.sqrt(k / (2 * (k - 1)))
    for g, (s, m, o) in enumerate(zip(scales, margins, offsets)):
        if abs(o) + MARGIN_SPREAD[1] * m / kappa > NORM_SPREAD[0] * s * (1 + 1e-12):
            raise ValueError(f"offset[{g}]={o} with margin[{g}]={m} does not fit input_scale[{g}]={s}: allowed "
                             f"|offset| + 1.5 margin <= 0.75 input_scale")
        if MARGIN_SPREAD[1] * m / kappa > NORM_SPREAD[0] * s * (1 + 1e-12):
            bound = NORM_SPREAD[0] * s * kappa / MARGIN_SPREAD[1]
            raise ValueError(f"margin[{g}]={m} is too large for input_scale[{g}]={s}: allowed "
                             f"margin <= {bound:.6g} (= 0.5 * kappa * input_scale, kappa={kappa:.4g})")

    rng = np.random.default_rng(seed)
    directions = class_directions(dim, k, rng)
    basis = np.linalg.svd(directions.T, full_matrices=False)[0][:, : k - 1]  # span of the u_k
    blocks, latent, group = [], [], []
    for g, n in enumerate(sizes):
        c = rng.integers(k, size=n)
        delta = margins[g] * rng.uniform(*MARGIN_SPREAD, size=n)
        rho = scales[g] * rng.uniform(*NORM_SPREAD, size=n)
        a = delta / kappa
        if offsets[g]:  # signed position along w = u_1 = -u_0: o_g + delta toward class c
            a = offsets[g] * np.where(c == 1, 1.0, -1.0) + a
        r = rng.standard_normal((n, dim))
        r -= (r @ basis) @ basis.T
        r /= np.linalg.norm(r, axis=1, keepdims=True)
        blocks.append(a[:, None] * directions[c] + np.sqrt(np.maximum(rho**2 - a**2, 0.0))[:, None] * r)
        latent.append(c)
        group.append(np.full(n, g, dtype=np.int64))
    X, c, group = np.concatenate(blocks), np.concatenate(latent), np.concatenate(group)
    y = c if tau == 0 else _sample_labels(X - np.asarray(offsets)[group, None] * directions[1], directions, tau, rng)
    info = {"generator": "synthetic_groups", "directions": directions, "input_scale": tuple(scales),
            "margin": tuple(margins), "temperature": tau, "seed": seed, "offset": tuple(offsets)}
    feature_names = [f"x{j}" for j in range(dim)]
    if group_indicators:
        X = np.concatenate([X, np.eye(n_groups)[group]], axis=1)
        feature_names += [f"group={name}" for name in names]
    return tab.make_dataset(X, y, group, feature_names=feature_names, group_names=names,
                            label_names=[str(j) for j in range(k)], name="synthetic", info=info)


def class_directions(dim: int, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors at the vertices of a centred regular simplex in a random subspace, (K, dim)."""
    q = np.linalg.qr(rng.standard_normal((dim, n_classes)))[0]
    vertices = np.eye(n_classes) - 1.0 / n_classes
    vertices /= np.linalg.norm(vertices, axis=1, keepdims=True)
    return vertices @ q.T


def boundary_distance(X: torch.Tensor | np.ndarray, directions: np.ndarray) -> np.ndarray:
    r"""Distance of each row to the nearest true decision boundary.

    For simplex directions, :math:`\|u_j - u_k\| = \sqrt{2K/(K-1)}` for all pairs, so the
    distance is (top logit - second logit) / that norm, with logits :math:`u_k^\top x`.
    """
    X = X.numpy() if isinstance(X, torch.Tensor) else np.asarray(X)
    logits = X.reshape(len(X), -1).astype(np.float64) @ np.asarray(directions).T
    k = logits.shape[1]
    top2 = np.sort(logits, axis=1)[:, -2:]
    return (top2[:, 1] - top2[:, 0]) / math.sqrt(2 * k / (k - 1))


def _sample_labels(X: np.ndarray, directions: np.ndarray, tau: float, rng: np.random.Generator) -> np.ndarray:
    k = directions.shape[0]
    z = math.sqrt((k - 1) / (2 * k)) * (X @ directions.T) / tau
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    u = rng.uniform(size=(len(X), 1))
    return np.minimum((u > np.cumsum(p, axis=1)).sum(axis=1), k - 1).astype(np.int64)


def _int_list(values: object, name: str) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise TypeError(f"{name} must be a non-empty sequence of positive integers, got {values!r}")
    if not all(isinstance(v, Integral) and not isinstance(v, bool) and v >= 1 for v in values):
        raise ValueError(f"{name} must hold positive integers, got {list(values)!r}")
    return [int(v) for v in values]


def _float_list(values: object, name: str, n: int, *, default: float, positive: bool,
                signed: bool = False) -> list[float]:
    if values is None:
        return [default] * n
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of {n} numbers, got {values!r}")
    if len(values) != n:
        raise ValueError(f"{name} must have one value per group ({n}, from sizes), got {len(values)}")
    if signed:
        out = []
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name}[{i}] must be a finite number, got {v!r}")
            out.append(float(v))
        return out
    check = check_positive if positive else check_nonnegative
    return [check(v, f"{name}[{i}]") for i, v in enumerate(values)]
