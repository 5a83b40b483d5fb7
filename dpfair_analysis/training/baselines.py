"""The baselines of paper 003 (Tran, Fioretto & Van Hentenryck, AAAI'21) Table 2.

Every baseline takes the same :class:`~dpfair_analysis.fairness.constraints.FairnessConstraint`
and :class:`~dpfair_analysis.data.dataset.GroupedDataset` objects as F-LD / PF-LD, and
returns a :class:`BaselineResult`: a fitted predictor with ``predict(X)`` (hard labels)
and the accuracy and fairness violation computed by the *shared* metric
:meth:`FairnessConstraint.violation` (the paper's "largest difference of the constraint
quantity between any two groups", hard predictions).

=====  ==================================================================  ===================
name   what                                                                private w.r.t. A?
=====  ==================================================================  ===================
clf    ReLU MLP, two hidden layers, cross-entropy only (the shared          no use of A
       training loop with :class:`~dpfair_analysis.training.clipping.NonPrivate`)
a      Agarwal et al. 2018 reductions: fairlearn ``ExponentiatedGradient``  **no** (uses A)
       over scikit-learn ``LogisticRegression``; dp -> ``DemographicParity``,
       eo -> ``EqualizedOdds``, ap -> ``ErrorRateParity`` (accuracy parity is
       parity of the error rate P(y_hat != y | A = a), paper 003 Example 3
       with the 0-1 loss, exactly fairlearn's error-rate parity)
m      Mozannar et al. 2020: k-ary randomized response on A (epsilon-local  epsilon-LDP on A
       DP), then ``a`` on the privatised attribute with the constraint
       bound corrected for the known flip rates (:func:`corrected_difference_bound`)
z      Zafar et al. 2017 fair logistic regression: logistic loss subject     **no** (uses A)
       to decision-boundary covariance constraints, scipy SLSQP (binary A)
=====  ==================================================================  ===================

The paper (Sec. 8, "Architectures") says A and M use the same ReLU network as PF-LD;
fairlearn's reductions need a scikit-learn estimator that accepts sample weights, so here
(as in the paper's own baseline list, "fair logistic regression model based on
reductions") they use logistic regression.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import minimize

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fairness.constraints import FairnessConstraint
from dpfair_analysis.models import build_model
from dpfair_analysis.training.clipping import NonPrivate
from dpfair_analysis.validation import check_int_at_least, check_nonnegative, check_positive, check_positive_int, \
    check_seed

BASELINES = ("clf", "z", "a", "m")

__all__ = ["BASELINES", "BaselineResult", "evaluate_predictions", "fit_clf", "fit_reductions",
           "fit_mozannar", "fit_zafar", "fit_baseline", "keep_probability", "randomized_response",
           "estimate_group_rates", "noisy_gap_scale", "corrected_difference_bound"]


# ------------------------------------------------------------------ results
@dataclass
class BaselineResult:
    """A fitted baseline: ``predict(X)`` returns int64 hard labels (numpy), ``metrics``
    holds ``{split}_accuracy`` and ``{split}_violation`` for train (and test)."""

    method: str
    constraint: str
    predict: Callable[[Any], np.ndarray]
    metrics: dict[str, float]
    info: dict[str, Any] = field(default_factory=dict)


def _numpy_X(X: Any) -> np.ndarray:
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    X = np.asarray(X, dtype=np.float64)
    return X.reshape(len(X), -1)


def evaluate_predictions(pred: Any, data: GroupedDataset, constraint: FairnessConstraint) -> dict[str, float]:
    """Accuracy and the shared fairness violation of hard predictions ``pred`` on ``data``.

    The predictions become one-hot 'logits', so :meth:`FairnessConstraint.violation`
    (which takes the argmax) sees exactly these labels.
    """
    pred_t = torch.as_tensor(np.asarray(pred), dtype=torch.int64).reshape(-1)
    if pred_t.shape != data.y.shape:
        raise ValueError(f"pred has shape {tuple(pred_t.shape)}, data has {len(data)} rows")
    logits = F.one_hot(pred_t, num_classes=max(constraint.n_classes, data.n_classes)).double()
    return {"accuracy": float((pred_t == data.y).double().mean()),
            "violation": constraint.violation(logits, data.y, data.group)}


def _finish(method: str, constraint: FairnessConstraint, predict: Callable[[Any], np.ndarray],
            train: GroupedDataset, test: GroupedDataset | None, info: dict[str, Any]) -> BaselineResult:
    metrics: dict[str, float] = {}
    for split, data in (("train", train), ("test", test)):
        if data is None:
            continue
        for key, value in evaluate_predictions(predict(data.X), data, constraint).items():
            metrics[f"{split}_{key}"] = value
    return BaselineResult(method=method, constraint=constraint.kind, predict=predict, metrics=metrics, info=info)


def _check_inputs(train: GroupedDataset, constraint: FairnessConstraint, test: GroupedDataset | None) -> None:
    if not isinstance(constraint, FairnessConstraint):
        raise TypeError(f"constraint must be a FairnessConstraint (make_constraint), got {constraint!r}")
    if not isinstance(train, GroupedDataset):
        raise TypeError(f"train must be a GroupedDataset, got {type(train).__name__}")
    if test is not None and not isinstance(test, GroupedDataset):
        raise TypeError(f"test must be a GroupedDataset or None, got {type(test).__name__}")
    if constraint.n_groups != train.n_groups:
        raise ValueError(f"constraint has {constraint.n_groups} groups, train has {train.n_groups}")
    if train.n_classes != 2:
        raise ValueError(f"the Table 2 baselines need binary labels, train has {train.n_classes} classes")


# ------------------------------------------------------------------ CLF
def fit_clf(train: GroupedDataset, constraint: FairnessConstraint, *, test: GroupedDataset | None = None,
            epochs: int = 10, batch_size: int = 256, lr: float = 0.05, hidden: tuple[int, ...] = (64, 64),
            seed: int = 0, progress: bool = False) -> BaselineResult:
    """CLF: ReLU MLP with two hidden layers trained for accuracy only (paper 003 Sec. 8).

    Non-private plain SGD (:class:`~dpfair_analysis.training.clipping.NonPrivate`) in the
    shared loop, Poisson-sampled batches of expected size ``batch_size``; the same
    architecture, epochs, batch size and learning rate as the F-LD / PF-LD defaults
    (:class:`~dpfair_analysis.training.lagrangian.LagrangianConfig`). ``constraint`` is
    used only to report the violation.
    """
    from dpfair_analysis.training.loop import TrainConfig, predict_logits
    from dpfair_analysis.training.loop import train as train_loop

    _check_inputs(train, constraint, test)
    model = build_model("mlp", input_shape=tuple(train.X.shape[1:]), n_classes=train.n_classes, seed=seed,
                        hidden=hidden)
    config = TrainConfig(epochs=epochs, batch_size=min(batch_size, len(train)), lr=lr, seed=seed)
    train_loop(model, train, NonPrivate(), config, progress=progress)
    model.eval()

    def predict(X: Any) -> np.ndarray:
        X_t = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X, dtype=train.X.dtype)
        return predict_logits(model, X_t).argmax(dim=1).numpy().astype(np.int64)

    return _finish("clf", constraint, predict, train, test,
                   {"model": model, "epochs": epochs, "batch_size": batch_size, "lr": lr, "hidden": hidden})


# ------------------------------------------------------------------ A: reductions
def _fairlearn_moment(kind: str, difference_bound: float):
    from fairlearn.reductions import DemographicParity, EqualizedOdds, ErrorRateParity

    moment = {"dp": DemographicParity, "eo": EqualizedOdds, "ap": ErrorRateParity}[kind]
    return moment(difference_bound=difference_bound)


def _reductions(X: np.ndarray, y: np.ndarray, sensitive: np.ndarray, kind: str, *, difference_bound: float,
                eps: float, max_iter: int, seed: int):
    from fairlearn.reductions import ExponentiatedGradient
    from sklearn.linear_model import LogisticRegression

    base = LogisticRegression(max_iter=1000, random_state=seed)
    mitigator = ExponentiatedGradient(base, constraints=_fairlearn_moment(kind, difference_bound), eps=eps,
                                      max_iter=max_iter)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn convergence chatter on reweighted fits
        mitigator.fit(X, y, sensitive_features=sensitive)
    return mitigator


def fit_reductions(train: GroupedDataset, constraint: FairnessConstraint, *, test: GroupedDataset | None = None,
                   difference_bound: float = 0.01, eps: float = 0.01, max_iter: int = 50, seed: int = 0,
                   sensitive: np.ndarray | None = None, method: str = "a",
                   info: dict[str, Any] | None = None) -> BaselineResult:
    """A: the reductions approach (Agarwal et al. 2018) via fairlearn.

    ``ExponentiatedGradient(LogisticRegression, constraints)`` with
    dp -> ``DemographicParity``, eo -> ``EqualizedOdds``, ap -> ``ErrorRateParity``, each
    with ``difference_bound`` gamma: for every group a (and, for eo, every label y),
    :math:`|E[g \\mid A=a(, Y=y)] - E[g (\\mid Y=y)]| \\le \\gamma` with g the positive
    prediction (dp, eo) or the error (ap). ``eps`` is ExponentiatedGradient's
    allowed constraint slack of the saddle point. Uses the true sensitive attribute
    (``sensitive`` overrides it: that is how :func:`fit_mozannar` reuses this), so it is
    **not** private. The result is fairlearn's randomised classifier; ``predict`` draws
    its coin flips from ``seed`` (same seed, same labels).
    """
    _check_inputs(train, constraint, test)
    check_positive(difference_bound, "difference_bound")
    check_positive(eps, "eps")
    check_positive_int(max_iter, "max_iter")
    check_seed(seed)
    X = _numpy_X(train.X)
    s = train.group.numpy() if sensitive is None else np.asarray(sensitive)
    mitigator = _reductions(X, train.y.numpy(), s, constraint.kind, difference_bound=difference_bound, eps=eps,
                            max_iter=max_iter, seed=seed)

    def predict(X_new: Any) -> np.ndarray:
        return np.asarray(mitigator.predict(_numpy_X(X_new), random_state=seed), dtype=np.int64)

    details = {"difference_bound": difference_bound, "eps": eps, "max_iter": max_iter,
               "n_predictors": int(len(mitigator.predictors_)), "mitigator": mitigator, **(info or {})}
    return _finish(method, constraint, predict, train, test, details)


# ------------------------------------------------------------------ M: Mozannar et al.
def keep_probability(epsilon: float, n_groups: int) -> float:
    """k-ary randomized response: P(Z = A) = e^eps / (e^eps + K - 1) (epsilon-local DP).

    Each other value has probability 1 / (e^eps + K - 1), so the likelihood ratio of any
    report between two true values is at most e^eps. ``epsilon = inf`` keeps every value.
    """
    check_int_at_least(n_groups, "n_groups", 2)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating)) or not epsilon > 0:
        raise ValueError(f"epsilon must be a number > 0 (inf allowed), got {epsilon!r}")
    if math.isinf(epsilon):
        return 1.0
    # e^eps / (e^eps + K - 1) = 1 / (1 + (K - 1) e^-eps), stable for large eps
    return 1.0 / (1.0 + (n_groups - 1) * math.exp(-epsilon))


def randomized_response(group: torch.Tensor | np.ndarray, n_groups: int, epsilon: float, *,
                        seed: int) -> np.ndarray:
    """Privatise each group id independently: keep it with probability
    :func:`keep_probability`, else report one of the other K - 1 values uniformly."""
    check_seed(seed)
    g = np.asarray(group.numpy() if isinstance(group, torch.Tensor) else group, dtype=np.int64)
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        raise ValueError(f"group ids must lie in 0..{n_groups - 1}")
    pi = keep_probability(epsilon, n_groups)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3]))
    keep = rng.random(g.shape) < pi
    shift = rng.integers(1, n_groups, size=g.shape)  # uniform over the other K - 1 values
    return np.where(keep, g, (g + shift) % n_groups)


def estimate_group_rates(noisy: np.ndarray, n_groups: int, epsilon: float) -> np.ndarray:
    """Unbiased estimate of the true group shares p from privatised ids (post-processing).

    E[q] = M p with M = pi_bar 1 1^T + (pi - pi_bar) I, so p_hat = M^{-1} q_hat, clipped
    into [1/n, 1] and renormalised.
    """
    noisy = np.asarray(noisy, dtype=np.int64)
    n = max(len(noisy), 1)
    q = np.bincount(noisy, minlength=n_groups) / n
    pi = keep_probability(epsilon, n_groups)
    pi_bar = (1 - pi) / (n_groups - 1)
    M = pi_bar * np.ones((n_groups, n_groups)) + (pi - pi_bar) * np.eye(n_groups)
    p = np.linalg.solve(M, q)
    p = np.clip(p, 1.0 / n, 1.0)
    return p / p.sum()


def noisy_gap_scale(p: np.ndarray, epsilon: float) -> float:
    """C = (2 pi - 1) p_0 p_1 / (q_0 q_1): binary randomized response shrinks every
    between-group gap by this factor.

    Derivation (binary A, report Z from randomized response, so Z is independent of
    (X, Y, y_hat) given A): for any statistic g and population event E (all, or Y = y),
    :math:`E[g \\mid Z=z, E] = \\sum_a P(A=a \\mid Z=z, E)\\, E[g \\mid A=a, E]`, hence
    :math:`\\tilde\\gamma_0 - \\tilde\\gamma_1 = (w_{00} - w_{01})(\\gamma_0 - \\gamma_1)`
    with :math:`w_{0z} = P(A=0 \\mid Z=z, E)`, and
    :math:`w_{00} - w_{01} = (2\\pi - 1) p_0 p_1 / (q_0 q_1)`, where p = P(A | E),
    q = P(Z | E) = (pi p_0 + (1-pi) p_1, (1-pi) p_0 + pi p_1). C -> 1 as eps -> inf.
    """
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (2,):
        raise ValueError(f"the flip-rate correction is derived for 2 groups, got {p.shape[0]} shares")
    pi = keep_probability(epsilon, 2)
    q = np.array([pi * p[0] + (1 - pi) * p[1], (1 - pi) * p[0] + pi * p[1]])
    return float((2 * pi - 1) * p[0] * p[1] / (q[0] * q[1]))


def corrected_difference_bound(difference_bound: float, noisy: np.ndarray, y: np.ndarray, kind: str,
                               epsilon: float) -> tuple[float, dict[str, float]]:
    """The fairlearn ``difference_bound`` on the privatised attribute Z that enforces the
    same *true* pairwise gap as ``difference_bound`` on A (binary groups).

    fairlearn bounds max_z |E[g | Z=z, E] - E[g | E]| = max(q) |gamma~_0 - gamma~_1|
    (binary: E[g | E] = q_0 gamma~_0 + q_1 gamma~_1), and on A, max(p) |gamma_0 - gamma_1|.
    With gamma~ gap = C gamma gap (:func:`noisy_gap_scale`), the true gap bound
    d / max(p) is met on Z by d' = d C max(q) / max(p). For eo, one bound serves both
    label events, so d' is the smallest over y in {0, 1}. p is estimated from the noisy
    reports (:func:`estimate_group_rates`, within each label event for eo); q is the
    empirical share of the noisy reports -- all post-processing of the private release.
    """
    noisy, y = np.asarray(noisy, dtype=np.int64), np.asarray(y, dtype=np.int64)
    events = [np.ones_like(y, dtype=bool)] if kind in ("dp", "ap") else [y == 0, y == 1]
    bounds, detail = [], {}
    for i, mask in enumerate(events):
        p = estimate_group_rates(noisy[mask], 2, epsilon)
        q = np.bincount(noisy[mask], minlength=2) / max(int(mask.sum()), 1)
        scale = noisy_gap_scale(p, epsilon)
        bound = difference_bound * scale * float(q.max()) / float(p.max())
        bounds.append(bound)
        detail[f"scale[{i}]"] = scale
    d = max(min(bounds), 1e-6)
    return d, detail


def fit_mozannar(train: GroupedDataset, constraint: FairnessConstraint, *, epsilon: float = 1.0,
                 test: GroupedDataset | None = None, difference_bound: float = 0.01, eps: float = 0.01,
                 max_iter: int = 50, correction: str = "scale", seed: int = 0) -> BaselineResult:
    """M: Mozannar, Ohannessian & Srebro 2020 -- fair learning with privatised demographics.

    1. Each training row's group is privatised once by k-ary randomized response
       (:func:`randomized_response`, keep probability e^eps / (e^eps + K - 1)):
       epsilon-local DP for the sensitive attribute of every person, so everything after
       it (the fitted model included) is epsilon-DP with respect to A by post-processing.
    2. The reductions approach (:func:`fit_reductions`) runs on the privatised ids with
       the constraint bound corrected for the known flip rates
       (``correction="scale"``: :func:`corrected_difference_bound`, binary groups only;
       ``"none"``: the uncorrected bound, any number of groups). Noise on Z shrinks every
       measured gap by C < 1, so the correction tightens the bound by C (times the
       max-share ratio): what we implement is this bound correction of the in-processing
       approach; Mozannar et al.'s guarantees (and their post-processing variant) are not
       re-derived here. With epsilon -> inf, Z = A and the bound is unchanged: M = A.

    Test metrics use the *true* groups (the evaluation, not the training, sees A).
    """
    _check_inputs(train, constraint, test)
    if correction not in ("scale", "none"):
        raise ValueError(f"correction must be 'scale' or 'none', got {correction!r}")
    if not (isinstance(epsilon, (int, float)) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive number (inf allowed), got {epsilon!r}")
    if correction == "scale" and train.n_groups != 2:
        raise ValueError(f"correction='scale' is derived for 2 groups, got {train.n_groups}; "
                         "use correction='none'")
    noisy = randomized_response(train.group, train.n_groups, epsilon, seed=seed)
    bound, detail = difference_bound, {}
    if correction == "scale":
        bound, detail = corrected_difference_bound(difference_bound, noisy, train.y.numpy(), constraint.kind, epsilon)
    info = {"epsilon": epsilon, "keep_probability": keep_probability(epsilon, train.n_groups),
            "flipped_fraction": float((noisy != train.group.numpy()).mean()), "requested_bound": difference_bound,
            "correction": correction, **detail}
    return fit_reductions(train, constraint, test=test, difference_bound=bound, eps=eps, max_iter=max_iter,
                          seed=seed, sensitive=noisy, method="m", info=info)


# ------------------------------------------------------------------ Z: Zafar et al.
def _zafar_covariances(theta: np.ndarray, Xb: np.ndarray, ys: np.ndarray, zc: np.ndarray,
                       subsets: list[np.ndarray], kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Cov(z, d_theta) per subset and its Jacobian rows.

    dp: d = theta^T x (linear); ap / eo: d = min(0, y theta^T x) (Zafar et al. WWW'17's
    misclassification-distance proxy), per subset (all for ap; y=0 -> FPR and y=1 -> FNR
    for eo). zc = z - mean(z) within the subset.
    """
    values, jac = [], []
    for S in subsets:
        X_s, zc_s = Xb[S], zc[S]
        m = max(len(zc_s), 1)
        if kind == "dp":
            values.append(float(zc_s @ (X_s @ theta)) / m)
            jac.append(zc_s @ X_s / m)
        else:
            margin = ys[S] * (X_s @ theta)
            active = (margin < 0).astype(np.float64)
            values.append(float(zc_s @ np.minimum(0.0, margin)) / m)
            jac.append((zc_s * active * ys[S]) @ X_s / m)
    return np.asarray(values), np.asarray(jac)


def fit_zafar(train: GroupedDataset, constraint: FairnessConstraint, *, test: GroupedDataset | None = None,
              covariance_fraction: float = 0.1, l2: float = 1e-4, max_iter: int = 200,
              seed: int = 0) -> BaselineResult:
    """Z: Zafar et al. fair logistic regression with decision-boundary covariance constraints.

    .. math:: \\min_\\theta \\frac1n \\sum_i \\log(1 + e^{-y_i \\theta^\\top x_i})
              + \\tfrac{l_2}{2}\\|\\theta\\|^2 \\quad \\text{s.t.}\\quad
              |\\widehat{\\mathrm{Cov}}(z, d_\\theta(x, y))| \\le c

    with y in {-1, +1}, x with an intercept column and z the (binary) group.

    * dp (Zafar et al., AISTATS'17, paper 003 ref. [42]): d = theta^T x, the signed
      distance to the boundary; the constraint is linear in theta.
    * ap and eo (Zafar et al., WWW'17 "disparate mistreatment", ref. [41], which the
      paper cites for these): d = min(0, y theta^T x); ap constrains it over everyone
      (overall misclassification), eo separately within y = 0 (false positives) and
      y = 1 (false negatives). Zafar et al. solve this non-convex problem with DCCP;
      here SLSQP (a local method) from the unconstrained solution.

    c = ``covariance_fraction`` x |Cov| of the unconstrained logistic regression, per
    constraint (Zafar et al. sweep such a multiplicative factor). Binary groups only (the
    paper: "Z only handles binary group data"). Deterministic; ``seed`` is accepted for a
    uniform signature.
    """
    _check_inputs(train, constraint, test)
    check_nonnegative(covariance_fraction, "covariance_fraction")
    check_nonnegative(l2, "l2")
    check_positive_int(max_iter, "max_iter")
    check_seed(seed)
    if train.n_groups != 2:
        raise ValueError(f"Zafar et al.'s covariance constraint needs 2 groups, got {train.n_groups}")
    X = _numpy_X(train.X)
    Xb = np.hstack([X, np.ones((len(X), 1))])
    ys = np.where(train.y.numpy() == 1, 1.0, -1.0)
    z = train.group.numpy().astype(np.float64)
    if constraint.kind == "eo":
        subsets = [np.flatnonzero(ys < 0), np.flatnonzero(ys > 0)]
    else:
        subsets = [np.arange(len(ys))]
    zc = np.zeros_like(z)
    for S in subsets:
        zc[S] = z[S] - z[S].mean() if len(S) else 0.0
    n = len(ys)

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        margin = ys * (Xb @ theta)
        value = np.logaddexp(0.0, -margin).mean() + 0.5 * l2 * theta @ theta
        weight = -ys * np.exp(-np.logaddexp(0.0, margin))  # -y sigmoid(-margin)
        return float(value), Xb.T @ weight / n + l2 * theta

    theta0 = np.zeros(Xb.shape[1])
    free = minimize(loss, theta0, jac=True, method="L-BFGS-B", options={"maxiter": 1000})
    cov0, _ = _zafar_covariances(free.x, Xb, ys, zc, subsets, constraint.kind)
    c = covariance_fraction * np.abs(cov0)

    def cons_fun(theta: np.ndarray) -> np.ndarray:
        cov, _ = _zafar_covariances(theta, Xb, ys, zc, subsets, constraint.kind)
        return np.concatenate([c - cov, c + cov])

    def cons_jac(theta: np.ndarray) -> np.ndarray:
        _, jac = _zafar_covariances(theta, Xb, ys, zc, subsets, constraint.kind)
        return np.vstack([-jac, jac])

    fitted = minimize(loss, free.x, jac=True, method="SLSQP",
                      constraints=[{"type": "ineq", "fun": cons_fun, "jac": cons_jac}],
                      options={"maxiter": max_iter, "ftol": 1e-9})
    theta = fitted.x
    cov_final, _ = _zafar_covariances(theta, Xb, ys, zc, subsets, constraint.kind)

    def predict(X_new: Any) -> np.ndarray:
        Xn = _numpy_X(X_new)
        return ((Xn @ theta[:-1] + theta[-1]) > 0).astype(np.int64)

    info = {"theta": theta, "covariance_unconstrained": cov0.tolist(), "covariance": cov_final.tolist(),
            "threshold": c.tolist(), "success": bool(fitted.success), "message": str(fitted.message),
            "covariance_fraction": covariance_fraction}
    return _finish("z", constraint, predict, train, test, info)


# ------------------------------------------------------------------ dispatch
def fit_baseline(method: str, train: GroupedDataset, constraint: FairnessConstraint, *,
                 test: GroupedDataset | None = None, epsilon: float = 1.0, seed: int = 0,
                 **options: Any) -> BaselineResult:
    """Fit one Table 2 baseline by name (``clf``, ``z``, ``a``, ``m``); ``epsilon`` is M's."""
    if method == "clf":
        return fit_clf(train, constraint, test=test, seed=seed, **options)
    if method == "z":
        return fit_zafar(train, constraint, test=test, seed=seed, **options)
    if method == "a":
        return fit_reductions(train, constraint, test=test, seed=seed, **options)
    if method == "m":
        return fit_mozannar(train, constraint, epsilon=epsilon, test=test, seed=seed, **options)
    raise ValueError(f"method must be one of {list(BASELINES)}, got {method!r}")

