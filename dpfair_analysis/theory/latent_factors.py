"""Paper 001's latent factors (Figures 3-6): input norms, gradient norms, Hessian traces, boundary proxy.

Paper: ``paper 001_b43f969615163a73.txt`` (Sec. 7-8). The paper argues that a group's
excessive risk under DP-SGD is driven by its gradient norms (clip term, Thm 3) and its
Hessian trace (noise term, Thm 4), and that both are controlled by *latent* factors:
the input norm ||x|| (Examples 1-3: ||g_x|| ~ ||x||, Tr(H_x) ~ ||x||^2) and the closeness
to the decision boundary, proxied by 1 - sum_k f_k(x)^2 (Thm 5). Its figures:

* Figure 3 -- per-group mean gradient norm after clipping for several C:
  :func:`clipped_gradient_norms`;
* Figures 4, 5 -- per-sample correlations (input norm vs gradient norm; Hessian trace vs
  input norm and vs the boundary proxy) along DP-SGD training: :class:`LatentFactorTracker`
  (a ``train(..., callbacks=[tracker])`` callback) over :func:`per_sample_factors` and
  :func:`factor_correlations`;
* Figure 6 -- group input norms vs group excessive risk: :func:`input_norm_vs_excess_risk`.

The paper's setting (one-hidden-layer network, DP-SGD with C = 0.1, sigma = 1, on Bank)
is not fully specified (the appendix is missing): hidden width, learning rate, batch
size and epochs are the caller's choice; the notebook states them.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import clip_factors, per_sample_gradients, per_sample_norms, parameters_of
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.theory.hessian import boundary_proxy, is_piecewise_linear, per_sample_hessian_traces
from dpfair_analysis.validation import check_positive, check_positive_int, check_seed

FACTORS = ("input_norm", "grad_norm", "hessian_trace", "boundary_proxy")
DEFAULT_PAIRS = (("input_norm", "grad_norm"), ("input_norm", "hessian_trace"),
                 ("boundary_proxy", "hessian_trace"), ("input_norm", "boundary_proxy"))


def default_trace_method(model: nn.Module) -> str:
    """closed for logistic regression, ggn for piecewise-linear (ReLU) nets, exact otherwise
    (small smooth nets; ``exact`` refuses models above its parameter limit)."""
    if isinstance(model, LogisticRegression):
        return "closed"
    if is_piecewise_linear(model):
        return "ggn"
    return "exact"


def per_sample_factors(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, group: torch.Tensor | None = None,
                       trace_method: str | None = None, params: Mapping[str, torch.Tensor] | None = None,
                       chunk_size: int | None = None) -> pd.DataFrame:
    """Per-sample latent factors at ``params`` (default: the model's current parameters).

    Columns: input_norm ||x_i||, grad_norm ||g_i|| (cross-entropy, all parameters,
    :mod:`dpfair_analysis.gradients`), hessian_trace Tr(H_i)
    (:func:`~dpfair_analysis.theory.hessian.per_sample_hessian_traces` with
    ``trace_method``, default :func:`default_trace_method`), boundary_proxy
    1 - sum_k f_k(x_i)^2, and group (if given).
    """
    params = parameters_of(model) if params is None else dict(params)
    method = default_trace_method(model) if trace_method is None else trace_method
    X = X.to(next(iter(params.values())).dtype)
    with torch.no_grad():
        norms_in = torch.linalg.vector_norm(X.flatten(1), dim=1)
    grads = per_sample_gradients(model, X, y, params=params, chunk_size=chunk_size)
    frame = pd.DataFrame({
        "input_norm": norms_in.numpy(),
        "grad_norm": per_sample_norms(grads).detach().numpy(),
        "hessian_trace": per_sample_hessian_traces(model, X, y, method=method, params=params,
                                                   chunk_size=chunk_size).detach().numpy(),
        "boundary_proxy": boundary_proxy(model, X, params=params).detach().numpy(),
    })
    if group is not None:
        frame["group"] = group.numpy()
    return frame


def _correlation(x: np.ndarray, y: np.ndarray, kind: str) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan  # undefined for constant inputs (e.g. ||x|| fixed by construction)
    fn = stats.pearsonr if kind == "pearson" else stats.spearmanr
    return float(fn(x, y).statistic)


def factor_correlations(frame: pd.DataFrame, *, pairs: Sequence[tuple[str, str]] = DEFAULT_PAIRS) -> pd.DataFrame:
    """Pearson and Spearman correlation (scipy.stats) of each pair of factor columns.

    Returns columns x, y, pearson, spearman, n (NaN where a column is constant).
    """
    rows = []
    for x, y in pairs:
        if x not in frame or y not in frame:
            raise ValueError(f"frame has no column {x!r} or {y!r}; columns: {list(frame.columns)}")
        a, b = frame[x].to_numpy(np.float64), frame[y].to_numpy(np.float64)
        rows.append({"x": x, "y": y, "pearson": _correlation(a, b, "pearson"),
                     "spearman": _correlation(a, b, "spearman"), "n": len(frame)})
    return pd.DataFrame(rows)


class LatentFactorTracker:
    """Training callback recording per-sample factor correlations every ``every`` steps (Figs. 4, 5).

    Use as ``train(model, data, policy, config, callbacks=[tracker])``: the loop calls
    ``tracker(t, model)`` at every iterate theta_t, t = 0..T; the tracker evaluates at
    t = 0, every ``every`` steps and at the last call it sees (see :meth:`finish`) on a
    fixed evaluation subset of ``eval_size`` rows drawn once from ``seed`` (stratified
    by nothing: a uniform subset without replacement).

    Attributes
    ----------
    frame : pandas.DataFrame
        Tidy: step, epoch (= step / steps_per_epoch, fractional; NaN if not given), x, y,
        pearson, spearman, n.
    """

    def __init__(self, data: GroupedDataset, *, every: int = 50, eval_size: int = 1000, seed: int = 0,
                 steps_per_epoch: float | None = None, trace_method: str | None = None,
                 pairs: Sequence[tuple[str, str]] = DEFAULT_PAIRS) -> None:
        if not isinstance(data, GroupedDataset):
            raise TypeError(f"data must be a GroupedDataset, got {type(data).__name__}")
        self.every = check_positive_int(every, "every")
        size = min(check_positive_int(eval_size, "eval_size"), len(data))
        gen = torch.Generator().manual_seed(check_seed(seed))
        self.index = torch.randperm(len(data), generator=gen)[:size].sort().values
        self.X, self.y, self.group = data.X[self.index], data.y[self.index], data.group[self.index]
        self.steps_per_epoch = None if steps_per_epoch is None else check_positive(steps_per_epoch,
                                                                                     "steps_per_epoch")
        self.trace_method = trace_method
        self.pairs = tuple(pairs)
        self._rows: list[dict] = []
        self._last: tuple[int, nn.Module] | None = None
        self._done: set[int] = set()
        self.samples: dict[int, pd.DataFrame] = {}

    def __call__(self, step: int, model: nn.Module, state: object = None) -> None:
        self._last = (step, model)
        if step % self.every == 0:
            self._record(step, model)

    def finish(self) -> None:
        """Record the last iterate seen if it was not on the ``every`` grid (call after ``train``)."""
        if self._last is not None and self._last[0] not in self._done:
            self._record(*self._last)

    def _record(self, step: int, model: nn.Module) -> None:
        factors = per_sample_factors(model, self.X, self.y, group=self.group, trace_method=self.trace_method)
        self.samples[step] = factors
        epoch = math.nan if self.steps_per_epoch is None else step / self.steps_per_epoch
        for row in factor_correlations(factors, pairs=self.pairs).to_dict("records"):
            self._rows.append({"step": step, "epoch": epoch, **row})
        self._done.add(step)

    @property
    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self._rows, columns=["step", "epoch", "x", "y", "pearson", "spearman", "n"])


def clipped_gradient_norms(model: nn.Module, data: GroupedDataset, clip_bounds: Sequence[float], *,
                           params: Mapping[str, torch.Tensor] | None = None,
                           chunk_size: int | None = None) -> pd.DataFrame:
    """Per-group gradient norms before and after clipping, for each C (paper 001, Figure 3 top).

    For each C and group a: mean_i ||g_i|| (unclipped), mean_i ||pi_C(g_i)|| =
    mean_i min(||g_i||, C) (<= C), the norm of the group's mean clipped gradient
    ||g_bar_{D_a}|| (<= C) beside ||g_{D_a}||, and the fraction of rows clipped. Group
    "all" is the population. At fixed ``params`` (Figure 3 trains one model per C; do
    that by evaluating each trained model).

    Returns columns clip_bound, group, n, mean_norm, mean_clipped_norm, mean_gradient_norm,
    mean_clipped_gradient_norm, fraction_clipped.
    """
    bounds = [check_positive(c, "clip_bounds[]") for c in clip_bounds]
    if not bounds:
        raise ValueError("clip_bounds must hold at least one positive number")
    params = parameters_of(model) if params is None else dict(params)
    grads = per_sample_gradients(model, data.X.to(next(iter(params.values())).dtype), data.y, params=params,
                                 chunk_size=chunk_size)
    flat = torch.cat([g.flatten(1) for g in grads.values()], dim=1).detach()
    norms = per_sample_norms(grads).detach()
    groups = [("all", torch.ones(len(data), dtype=torch.bool))]
    groups += [(name, data.group == k) for k, name in enumerate(data.group_names)]
    rows = []
    for c in bounds:
        factors = clip_factors(norms, c)
        clipped = flat * factors[:, None]
        for name, mask in groups:
            m = int(mask.sum())
            if m == 0:
                continue
            rows.append({"clip_bound": c, "group": name, "n": m, "mean_norm": float(norms[mask].mean()),
                         "mean_clipped_norm": float((norms[mask] * factors[mask]).mean()),
                         "mean_gradient_norm": float(torch.linalg.vector_norm(flat[mask].mean(0))),
                         "mean_clipped_gradient_norm": float(torch.linalg.vector_norm(clipped[mask].mean(0))),
                         "fraction_clipped": float((norms[mask] > c).double().mean())})
    return pd.DataFrame(rows)


def input_norm_vs_excess_risk(data: GroupedDataset, excess: pd.DataFrame | Mapping[str, float], *,
                              sample_excess: np.ndarray | torch.Tensor | None = None,
                              bins: int = 10) -> tuple[pd.DataFrame, dict[str, float]]:
    """Group mean input norms beside group excessive risks, and their correlation (paper 001, Fig. 6).

    Parameters
    ----------
    data : GroupedDataset
        The rows on which the excessive risk was measured.
    excess : DataFrame (group, excess_risk) or mapping group -> R_a
        Per-group excessive risk (e.g. DP-SGD with C = 0.1, sigma = 1 minus the non-private
        loss, averaged over runs).
    sample_excess : array (n,), optional
        Per-sample excess loss (private minus non-private loss of each row). If given,
        rows are also binned by input-norm quantile (``bins`` equal-count bins) and the
        bins' mean input norm is correlated with their mean excess loss.
    bins : int
        Number of equal-count input-norm bins for ``sample_excess``.

    Returns
    -------
    (table, correlations)
        table: group, n, mean_input_norm, excess_risk (+ rows with level "bin" if
        ``sample_excess``), with a column level ("group"/"bin"); correlations: pearson and
        spearman across groups (with 2 groups they are +-1 and say only the sign of the
        relation) and, if binned, across bins.
    """
    values = {str(k): float(v) for k, v in (excess.set_index("group")["excess_risk"].items()
                                            if isinstance(excess, pd.DataFrame) else excess.items())}
    norms = torch.linalg.vector_norm(data.X.flatten(1).double(), dim=1).numpy()
    rows = []
    for k, name in enumerate(data.group_names):
        mask = (data.group == k).numpy()
        if name not in values or not mask.any():
            continue
        rows.append({"level": "group", "group": name, "n": int(mask.sum()),
                     "mean_input_norm": float(norms[mask].mean()), "excess_risk": values[name]})
    if len(rows) < 2:
        raise ValueError(f"need the excessive risk of at least two non-empty groups, got {sorted(values)}")
    g = pd.DataFrame(rows)
    corr = {"group_pearson": _correlation(g["mean_input_norm"].to_numpy(), g["excess_risk"].to_numpy(), "pearson"),
            "group_spearman": _correlation(g["mean_input_norm"].to_numpy(), g["excess_risk"].to_numpy(),
                                           "spearman"), "groups": len(g)}
    if sample_excess is not None:
        per = np.asarray(sample_excess, dtype=np.float64).reshape(-1)
        if per.shape != norms.shape:
            raise ValueError(f"sample_excess must have one value per row ({len(norms)}), got {per.shape}")
        bins = check_positive_int(bins, "bins")
        labels = pd.qcut(norms, q=bins, labels=False, duplicates="drop")
        frame = pd.DataFrame({"bin": labels, "norm": norms, "excess": per}).groupby("bin")
        b = pd.DataFrame({"level": "bin", "group": [f"bin{i}" for i in frame.groups],
                          "n": frame.size().to_numpy(), "mean_input_norm": frame["norm"].mean().to_numpy(),
                          "excess_risk": frame["excess"].mean().to_numpy()})
        corr["bin_pearson"] = _correlation(b["mean_input_norm"].to_numpy(), b["excess_risk"].to_numpy(), "pearson")
        corr["bin_spearman"] = _correlation(b["mean_input_norm"].to_numpy(), b["excess_risk"].to_numpy(),
                                            "spearman")
        corr["bins"] = len(b)
        g = pd.concat([g, b], ignore_index=True)
    return g, corr
