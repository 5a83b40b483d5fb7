"""The planned private run and how much work the diagnosis does: what :func:`~.diagnosis.diagnose` is asked.

:class:`PrivacyPlan` is the run the user means to make (sigma or a target epsilon, C, b, epochs, learning
rate, method); :meth:`PrivacyPlan.resolve` turns it into steps, sampling rate, sigma and epsilon on a
training set (:class:`ResolvedPlan`). :class:`DiagnosisOptions` sets the diagnosis's cost, never what it
predicts; :class:`Calibration` (fitted on *other* data sets by :func:`fit_calibration`) rescales the
prediction's two parts and widens its interval.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfair_analysis.privacy.accounting import (
    AccountingSpec,
    calibrate_noise_multiplier,
    poisson_gaussian_event,
    steps_for_epochs,
)
from dpfair_analysis.training import methods
from dpfair_analysis.validation import (
    check_choice,
    check_delta,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_seed,
)

#: The shipped methods a diagnosis can plan (:func:`diagnosable_methods` adds any registered since).
MECHANISMS = ("dpsgd", "dpsgdf", "naive", "mitigation", "fairdp")


def diagnosable_methods() -> tuple[str, ...]:
    """Every private method of the registry (:mod:`dpfair_analysis.training.methods`) that trains in the loop
    and states how the diagnosis sees its step (``Method.diagnosis``), and paper 001's mitigation (DP-SGD's
    step on another objective)."""
    registered = (methods.get(name) for name in methods.names())
    return tuple(dict.fromkeys([*MECHANISMS, *(m.name for m in registered
                                                if m.private and m.policy is not None and m.diagnosis is not None)]))
#: Fewest training rows a diagnosis accepts (and the smallest ``DiagnosisOptions.rows``).
MIN_TRAIN_ROWS = 100
#: The least a fitted calibration narrows the intervals (a quarter of their width).
MIN_WIDEN = 0.25


@dataclass(frozen=True)
class PrivacyPlan:
    """The planned private run: DP-SGD (or DPSGD-F, Naive, paper 001's mitigation, paper 002's FairDP) at
    these settings.

    Give ``noise_multiplier`` sigma, or ``target_epsilon`` (sigma is then the smallest that
    meets it at ``delta``, :func:`~dpfair_analysis.privacy.accounting.calibrate_noise_multiplier`).
    ``lr`` None is paper 000's r = 1/sqrt(T), T = ceil(epochs n / b), as in ``dpfair compare``.
    """

    noise_multiplier: float | None = 1.0
    target_epsilon: float | None = None
    clip_bound: float = 0.5
    batch_size: int = 256
    epochs: int = 20
    lr: float | None = None
    delta: float = 1e-6
    accounting: AccountingSpec = AccountingSpec()
    method: str = "dpsgd"
    count_noise_ratio: float = 10.0
    max_ratio: float = 10.0
    gammas: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        if (self.noise_multiplier is None) == (self.target_epsilon is None):
            raise ValueError("give exactly one of noise_multiplier (sigma) and target_epsilon")
        if self.noise_multiplier is not None:
            check_positive(self.noise_multiplier, "noise_multiplier")
        if self.target_epsilon is not None:
            check_positive(self.target_epsilon, "target_epsilon")
        check_positive(self.clip_bound, "clip_bound")
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.epochs, "epochs")
        if self.lr is not None:
            check_positive(self.lr, "lr")
        check_delta(self.delta)
        check_choice(self.method, "method", diagnosable_methods())
        check_positive(self.count_noise_ratio, "count_noise_ratio")
        check_positive(self.max_ratio, "max_ratio")

    def resolve(self, n: int) -> ResolvedPlan:
        """Steps, learning rate, sampling rate, sigma and epsilon of the run on ``n`` training rows."""
        n = check_positive_int(n, "n")
        if self.batch_size > n:
            raise ValueError(f"batch_size={self.batch_size} exceeds the {n} training rows")
        steps = steps_for_epochs(n, self.batch_size, self.epochs)
        q = self.batch_size / n
        lr = self.lr if self.lr is not None else 1.0 / math.sqrt(steps)
        if self.target_epsilon is not None:
            sigma = calibrate_noise_multiplier(self.target_epsilon, self.delta, sampling_rate=q, steps=steps,
                                               accounting=self.accounting)
        else:
            sigma = float(self.noise_multiplier)
        epsilon, order = planned_epsilon(q, sigma, steps, self.delta, self.accounting)
        return ResolvedPlan(plan=self, n=n, steps=steps, lr=lr, sampling_rate=q, sigma=sigma, epsilon=epsilon,
                            optimal_order=order)


@functools.lru_cache(maxsize=256)
def planned_epsilon(sampling_rate: float, sigma: float, steps: int, delta: float, accounting: AccountingSpec
                    ) -> tuple[float, float | None]:
    """(epsilon, the optimal Renyi order under RDP, else None) of T Poisson-sampled Gaussian steps: what
    :func:`~dpfair_analysis.privacy.accounting.epsilon_from_event` computes, remembered (a study diagnoses
    one plan many times) and with the order that :mod:`.equal_privacy`'s searches centre their window on."""
    acct = accounting.make_accountant()
    accounting.compose(acct, poisson_gaussian_event(sampling_rate, sigma, steps=steps))
    if accounting.accountant == "rdp":
        epsilon, order = acct.get_epsilon_and_optimal_order(delta)
        return float(epsilon), float(order)
    return float(acct.get_epsilon(delta)), None


@dataclass(frozen=True)
class ResolvedPlan:
    """A :class:`PrivacyPlan` on a training set of ``n`` rows (what the run will do)."""

    plan: PrivacyPlan
    n: int
    steps: int
    lr: float
    sampling_rate: float
    sigma: float
    epsilon: float
    optimal_order: float | None = None

    @property
    def accounting_point(self) -> tuple[float, float, int, float | None]:
        """(q, sigma, T, the optimal Renyi order) of the run: where :mod:`.equal_privacy` centres its searches."""
        return self.sampling_rate, self.sigma, self.steps, self.optimal_order

    def as_dict(self) -> dict:
        p = self.plan
        return {"method": p.method, "noise_multiplier": self.sigma, "target_epsilon": p.target_epsilon,
                "clip_bound": p.clip_bound, "batch_size": p.batch_size, "epochs": p.epochs, "steps": self.steps,
                "learning_rate": self.lr, "learning_rate_rule": "1/sqrt(T)" if p.lr is None else "given",
                "sampling_rate": self.sampling_rate, "n_train": self.n, "delta": p.delta,
                "accounting": p.accounting.as_dict()}


@dataclass(frozen=True)
class DiagnosisOptions:
    """How much work the diagnosis does (its cost, not what it predicts).

    ``rows``: training rows (group-stratified subsample) for the trajectories;
    ``curvature_rows``: rows for the drift's Jacobian and the sampling covariance;
    ``theory_rows``: rows for Theorem 2's terms and the traces; ``max_steps``: integration
    steps K of the explicit integrator (other models than logistic regression) beyond which the
    trajectories use proportionally fewer rows (K itself is what a stable explicit integrator needs,
    h lambda_max <= 0.5, at most T); ``chebyshev_steps``: where that K is larger, the explicit integrator takes
    this many Runge-Kutta-Chebyshev steps instead, with as many stages each as their stability needs
    (:func:`~.dynamics.stages_for`; 40 land within 0.5% of the step-by-step run on unbalanced MNIST);
    ``implicit_steps``: K of logistic regression's implicit integrator
    (:mod:`.dynamics`; 24 land within 0.1-1.8% of the step-by-step run on the study's data sets);
    ``recommendation_steps``: the same for the recommendations' own trajectories (12: within 0.2-3.3%);
    ``draws``: noise draws per prediction;
    ``max_exact_params``: the largest model whose Jacobian is formed exactly (else its diagonal);
    ``recommendations``: predict the mitigations too.
    """

    rows: int = 4000
    curvature_rows: int = 1000
    theory_rows: int = 1500
    max_steps: int = 200
    min_steps: int = 40
    chebyshev_steps: int = 40
    implicit_steps: int = 24
    recommendation_steps: int = 12
    draws: int = 200
    recommendation_draws: int = 100
    max_exact_params: int = 600
    recommendations: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rows", "curvature_rows", "theory_rows", "max_steps", "min_steps", "chebyshev_steps",
                     "implicit_steps", "recommendation_steps", "draws",
                     "recommendation_draws", "max_exact_params"):
            check_positive_int(getattr(self, name), name)
        if self.rows < MIN_TRAIN_ROWS:
            raise ValueError(f"rows must be at least {MIN_TRAIN_ROWS} (the trajectories' training rows: fewer cannot "
                             f"tell groups apart), got {self.rows}")
        if self.draws < 10 or self.recommendation_draws < 10:
            raise ValueError(f"draws and recommendation_draws must be >= 10, got {self.draws}, "
                             f"{self.recommendation_draws}")
        check_seed(self.seed)


@dataclass(frozen=True)
class Calibration:
    """Rescaling of the two parts of the prediction and a widening of its interval.

    Delta^k = ``clip_scale`` clip_k + ``noise_scale`` noise_k, half-width x ``widen``.
    ``datasets`` names the data sets it was fitted on: it refuses to be applied to any of
    them (:meth:`check_applicable`), so an evaluation with it is leave-one-data-set-out.
    """

    clip_scale: float = 1.0
    noise_scale: float = 1.0
    widen: float = 1.0
    datasets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_nonnegative(self.clip_scale, "clip_scale")
        check_nonnegative(self.noise_scale, "noise_scale")
        check_positive(self.widen, "widen")

    def check_applicable(self, dataset: str) -> None:
        """ValueError if ``dataset`` is one this calibration was fitted on."""
        if dataset in self.datasets:
            raise ValueError(f"the calibration was fitted on {dataset!r} (datasets {list(self.datasets)}): "
                             f"evaluating it there is not out of sample; fit it without {dataset!r}")


def fit_calibration(records: pd.DataFrame, *, coverage: float = 0.9) -> Calibration:
    """Least-squares scales of the clipping and noise parts, and the interval widening for ``coverage``.

    ``records`` has one row per (data set, setting, seed, group) with columns dataset,
    clip_part, noise_part, half_width (the uncalibrated 90% half-width) and actual (the
    measured cost). The scales minimise sum (actual - a clip - b noise)^2 over a, b >= 0;
    the widening is the smallest w such that ``coverage`` of the rows have
    |actual - prediction| <= w half_width: below 1 where the intervals cover more than they
    must on those data sets (it shrinks them), never below :data:`MIN_WIDEN`. The result
    remembers its data sets.
    """
    needed = {"dataset", "clip_part", "noise_part", "half_width", "actual"}
    if not needed <= set(records.columns):
        raise ValueError(f"records needs columns {sorted(needed)}, got {sorted(records.columns)}")
    if records.empty:
        raise ValueError("records is empty: nothing to calibrate on")
    check_positive(coverage, "coverage")
    design = records[["clip_part", "noise_part"]].to_numpy(dtype=float)
    target = records["actual"].to_numpy(dtype=float)
    from scipy.optimize import nnls

    (a, b), _ = nnls(design, target)
    pred = design @ np.array([a, b])
    ratio = np.abs(target - pred) / np.maximum(records["half_width"].to_numpy(dtype=float), 1e-9)
    widen = max(MIN_WIDEN, float(np.quantile(ratio, coverage)))
    return Calibration(clip_scale=float(a), noise_scale=float(b), widen=widen,
                       datasets=tuple(sorted(set(map(str, records["dataset"])))))
