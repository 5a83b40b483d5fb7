"""Empirical privacy audits: one-sided lower bounds on epsilon from worst-case neighbours.

An (epsilon, delta)-DP mechanism M bounds every test that tries to tell M(D) from M(D')
for neighbouring D, D' (Kairouz, Oh & Viswanath 2015; Nasr et al. 2021, "Adversary
instantiation: lower bounds for differentially private machine learning", Eq. 1): for a
rejection region (guess "D'") with false-positive rate FPR (guessing D' on M(D)) and
false-negative rate FNR (guessing D on M(D')),

    FPR + e^epsilon FNR >= 1 - delta    and    FNR + e^epsilon FPR >= 1 - delta,

so  epsilon >= max( log((1 - delta - FNR) / FPR), log((1 - delta - FPR) / FNR) ).

An audit runs the mechanism ``trials`` times on each of D and D', scores every output
with a statistic (here always the Neyman-Pearson log-likelihood ratio of the two output
distributions, which the white-box auditor can compute because it knows the mechanism,
the data and everything but the noise), and

1. picks the threshold t (guess D' iff score > t) that maximises the bound on a first,
   *selection* part of the trials (``selection_fraction``, default one half);
2. counts false positives and false negatives at that t on the remaining, *evaluation*
   trials, which are independent of the choice of t;
3. replaces FPR and FNR by one-sided Clopper-Pearson upper confidence limits at level
   1 - alpha/2 each (alpha = 1 - confidence). By the union bound both limits hold
   together with probability >= 1 - alpha, and then both expressions above are valid
   lower bounds, so

       epsilon_lower = max(0, log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u))

   is a lower bound on the true epsilon of M at delta with confidence ``confidence``
   (:func:`epsilon_lower_bound`). The Clopper-Pearson limit for k events in n trials is
   the (1 - alpha/2) quantile of Beta(k + 1, n - k) (1 when k = n).

A correct mechanism must give epsilon_lower <= epsilon_claimed (``consistent``); a
result above the claim means the implementation (or its accounting) is broken, with
confidence 95%. A consistent result proves nothing on its own, so every mechanism is
also audited with a deliberately under-noised twin (all its noise scales multiplied by
``noise_fraction``, e.g. 0.25, while claiming the same epsilon), which the audit must
catch; the settings below were chosen so that it does with a few thousand trials.

Mechanisms are registered in :data:`MECHANISMS` as :class:`AuditSpec` entries: a
function that runs the toolkit's own code on the worst-case pair and returns the scores
of the outputs on D and D' with the claimed epsilon. Adding a mechanism is one more
entry (:func:`register`).

Shipped entries (all on a one-step, full-batch run so that the canary is always sampled
and the accountant's claim is that of one Gaussian release):

``dpsgd``, ``naive``, ``dpsgdf``
    the clipping policies of :mod:`dpfair_analysis.training` on one step of the shared
    loop's release (:func:`release_step`, the same functions and the same random draws
    as ``training.loop``'s step, cross-checked against ``train`` in the tests), with
    add/remove neighbours (the accountant's default): D has ten rows whose gradients at
    the public starting point are ~0 (unclipped, group 0); D' adds a canary (group 1,
    alone in its group) whose gradient norm exceeds every bound the policy can choose,
    so it is clipped to exactly its bound in a fixed direction and adds one to a released
    count (DPSGD-F: clipped count of its group; Naive: its group's size). Being alone in
    its group makes its group the most clipped (DPSGD-F: the largest bound C^k) and the
    smallest (Naive: the largest weight theta^k), which puts its contribution at the
    noise's reference scale. The claimed epsilon is the one ``train`` itself reports for
    that run (its ledger, PLD accountant).
``output-perturbation``
    :func:`~dpfair_analysis.privacy.output_perturbation.output_perturbation` with
    replace-one neighbours (its sensitivity's relation): one row (x, y) with ||x|| = 1
    whose label is flipped. The label flip changes the per-sample gradient by exactly
    [x; 1] (norm sqrt 2) at every theta, so the minimiser moves by about
    sqrt(2) / (n lambda) -- half the proved sensitivity 2 sqrt(2) / (n lambda); no pair
    was found that moves it more (see the module docstring of output_perturbation), so
    the audit of the correct mechanism cannot come close to its claim. The claimed
    epsilon is the calibration's target (the analytic Gaussian calibration is exact).
``pfld-primal``, ``pfld-dual``
    PF-LD's private primal step and dual update (:mod:`dpfair_analysis.training.lagrangian`,
    default mode with the bounds proved in :mod:`dpfair_analysis.privacy.sensitivity`)
    under their relation: one person's sensitive attribute changes (replace-one). The
    canary's group change moves the primal group sum by exactly 2 Delta_1 (coefficients
    (a, -a), gradient of h above C_p) and the dual sums by exactly sqrt(2) C_d (loss above
    C_d); the claim is ``pfld_epsilon`` of the event the step returns (PLD, replace-one).
    The one-time release of noisy group counts is not audited here.

``mitigation``
    paper 001's mitigation objective (:mod:`dpfair_analysis.training.mitigation`) on
    DP-SGD, the canary pair above with the objective's coefficients fixed to public
    values: one trial is the objective's one-time count release, the clipped noisy sum of
    its penalised per-sample gradients and its per-group statistics release; the score sums
    the three Gaussian log-likelihood ratios, the claim is ``train``'s ledger for that run.

``pfld-primal-paper``
    PF-LD's primal step as printed (``paper_exact=True``), whose claim is refuted in
    :mod:`dpfair_analysis.privacy.sensitivity`: its noise scale depends on the group
    sizes, i.e. on the sensitive attribute. The audit turns that into an empirical
    violation: at full noise the lower bound exceeds the paper's claimed epsilon
    (``expected_consistent=False``).

All claims are about 2.75 at delta = 1e-5 (a Gaussian with sensitivity/noise 2/3):
modest, so that a 0.25 twin (sensitivity/noise 8/3) is caught with a few thousand trials.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from scipy.stats import beta as _beta
from tqdm import tqdm

from dpfair_analysis.validation import check_choice, check_delta, check_fraction, check_seed

__all__ = [
    "AuditResult",
    "AuditSpec",
    "MECHANISMS",
    "MechanismSamples",
    "STEP_AUDITS",
    "StepCanaryAudit",
    "ThresholdTest",
    "audit",
    "audit_table",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "register",
    "release_step",
    "threshold_test",
]

DEFAULT_CONFIDENCE = 0.95
DEFAULT_DELTA = 1e-5


# =========================================================================== statistics
def clopper_pearson_upper(events: Any, trials: Any, *, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper confidence limit for a binomial rate.

    For k events in n trials the limit p_u with P(p <= p_u) >= ``level`` is the
    ``level`` quantile of Beta(k + 1, n - k); it is 1 when k = n.

    Parameters
    ----------
    events, trials : int or array of int
        k and n, 0 <= k <= n, n >= 1 (broadcast together).
    level : float
        Confidence level in (0, 1).
    """
    level = check_fraction(level, "level", open_high=True)
    k = np.asarray(events, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n) or np.any(k != np.floor(k)) or np.any(n != np.floor(n)):
        raise ValueError(f"need integer counts 0 <= events <= trials with trials >= 1, got events={events!r}, "
                         f"trials={trials!r}")
    full = k >= n
    upper = _beta.ppf(level, k + 1, np.where(full, 1.0, n - k))
    return np.where(full, 1.0, upper)


def epsilon_lower_bound(false_positives: Any, negatives: Any, false_negatives: Any, positives: Any, *,
                        delta: float, confidence: float = DEFAULT_CONFIDENCE) -> np.ndarray | float:
    """epsilon_lower from counts at one threshold (see the module docstring).

    With FPR_u, FNR_u the one-sided Clopper-Pearson upper limits at level
    1 - (1 - confidence) / 2 each (union bound: both hold with probability >= confidence),

        epsilon_lower = max(0, log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u)),

    an expression whose numerator is <= 0 giving no bound (Nasr et al. 2021, Eq. 1 with
    Clopper-Pearson intervals).

    Parameters
    ----------
    false_positives, negatives : int or array
        Outputs of M(D) guessed as D', out of ``negatives`` runs on D.
    false_negatives, positives : int or array
        Outputs of M(D') guessed as D, out of ``positives`` runs on D'.
    delta : float
        The delta of the guarantee being audited.
    confidence : float
        Joint confidence of the bound, in (0, 1).
    """
    delta = check_delta(delta)
    confidence = check_fraction(confidence, "confidence", open_high=True)
    level = 1.0 - (1.0 - confidence) / 2.0
    fpr = clopper_pearson_upper(false_positives, negatives, level=level)
    fnr = clopper_pearson_upper(false_negatives, positives, level=level)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(1 - delta - fnr > 0, np.log(np.maximum(1 - delta - fnr, 1e-300)) - np.log(fpr), -np.inf)
        second = np.where(1 - delta - fpr > 0, np.log(np.maximum(1 - delta - fpr, 1e-300)) - np.log(fnr), -np.inf)
    bound = np.maximum(0.0, np.maximum(first, second))
    return float(bound) if bound.ndim == 0 else bound


def _candidate_ranks(n: int) -> np.ndarray:
    """Ranks 0..n-1 to try as tail counts: all of the first 200, then geometric."""
    head = np.arange(min(n, 200))
    tail = np.unique(np.geomspace(200, max(n - 1, 200), num=200).astype(int)) if n > 200 else np.zeros(0, int)
    return np.unique(np.concatenate([head, tail[tail < n]]))


def _bounds_at(thresholds: np.ndarray, sorted_without: np.ndarray, sorted_with: np.ndarray, *, delta: float,
               confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    fp = len(sorted_without) - np.searchsorted(sorted_without, thresholds, side="right")
    fn = np.searchsorted(sorted_with, thresholds, side="right")
    eps = epsilon_lower_bound(fp, len(sorted_without), fn, len(sorted_with), delta=delta, confidence=confidence)
    return np.atleast_1d(eps), fp, fn


@dataclass(frozen=True)
class ThresholdTest:
    """The test chosen on the selection trials and its counts on the evaluation trials.

    Guess D' iff score > ``threshold``. ``epsilon_lower`` is :func:`epsilon_lower_bound`
    of the evaluation counts; ``selection_epsilon`` the (optimistic, not a valid bound)
    value at the chosen threshold on the selection trials.
    """

    threshold: float
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int
    epsilon_lower: float
    selection_epsilon: float


def threshold_test(scores_without: Any, scores_with: Any, *, delta: float, confidence: float = DEFAULT_CONFIDENCE,
                   selection_fraction: float = 0.5) -> ThresholdTest:
    """Pick the threshold on the first part of the trials, bound epsilon on the rest.

    Parameters
    ----------
    scores_without, scores_with : 1-d arrays
        Test statistic of each run on D and on D' (larger = more like D'); both in the
        order drawn. The first ``ceil(selection_fraction * len)`` of each choose the
        threshold among the D-scores and D'-scores of the selection part (the bound
        log((1-delta-FNR)/FPR) is largest at a D-score for a given FP count, the other at
        a D'-score), trying every tail count up to 200 and geometric counts beyond.
    delta, confidence : float
        As in :func:`epsilon_lower_bound`.
    selection_fraction : float
        Share of the trials used to choose the threshold, in (0, 1).
    """
    delta = check_delta(delta)
    selection_fraction = check_fraction(selection_fraction, "selection_fraction", open_high=True)
    without = np.asarray(scores_without, dtype=np.float64).ravel()
    with_ = np.asarray(scores_with, dtype=np.float64).ravel()
    for name, values in (("scores_without", without), ("scores_with", with_)):
        if len(values) < 4:
            raise ValueError(f"{name} needs at least 4 trials (selection and evaluation), got {len(values)}")
        if np.isnan(values).any():
            raise ValueError(f"{name} has NaN scores")
    k0 = min(max(1, math.ceil(selection_fraction * len(without))), len(without) - 1)
    k1 = min(max(1, math.ceil(selection_fraction * len(with_))), len(with_) - 1)
    sel0, sel1 = np.sort(without[:k0]), np.sort(with_[:k1])
    candidates = np.unique(np.concatenate([
        sel0[::-1][_candidate_ranks(len(sel0))],            # t at a D-score: FP = rank
        np.nextafter(sel1[_candidate_ranks(len(sel1))], -np.inf),  # t just below a D'-score: FN = rank
    ]))
    eps, _, _ = _bounds_at(candidates, sel0, sel1, delta=delta, confidence=confidence)
    best = int(np.argmax(eps))
    threshold = float(candidates[best])
    ev0, ev1 = np.sort(without[k0:]), np.sort(with_[k1:])
    eval_eps, fp, fn = _bounds_at(np.array([threshold]), ev0, ev1, delta=delta, confidence=confidence)
    return ThresholdTest(threshold=threshold, false_positives=int(fp[0]), negatives=len(ev0),
                         false_negatives=int(fn[0]), positives=len(ev1), epsilon_lower=float(eval_eps[0]),
                         selection_epsilon=float(eps[best]))


# =========================================================================== registry
@dataclass(frozen=True)
class MechanismSamples:
    """What one audit run of a mechanism produced.

    ``scores_without`` / ``scores_with``: the test statistic of each of the ``trials``
    outputs on D and on D' (larger = more like D'), in the order drawn.
    ``epsilon_claimed`` at ``delta`` is what the toolkit claims for the *correctly*
    noised mechanism under ``neighbouring``; ``setting`` describes what was run.
    """

    scores_without: np.ndarray
    scores_with: np.ndarray
    epsilon_claimed: float
    delta: float
    neighbouring: str
    setting: dict[str, Any] = field(default_factory=dict)


SampleFn = Callable[..., MechanismSamples]


@dataclass(frozen=True)
class AuditSpec:
    """A registered mechanism.

    ``sample(trials, *, seed, noise_fraction, progress)`` runs the mechanism ``trials``
    times on each of D and D' (every noise scale multiplied by ``noise_fraction``, the
    claim unchanged) and returns :class:`MechanismSamples`. ``default_trials`` is the
    number that catches the 0.25 twin; ``description`` is one line for the CLI.
    ``expected_consistent`` is False for a mechanism audited to show that a published
    claim fails (its correctly noised version is expected to exceed the claim).
    """

    name: str
    description: str
    sample: SampleFn
    default_trials: int
    expected_consistent: bool = True


MECHANISMS: dict[str, AuditSpec] = {}


def register(spec: AuditSpec) -> AuditSpec:
    """Add ``spec`` to :data:`MECHANISMS` (replacing an entry of the same name)."""
    if not isinstance(spec, AuditSpec):
        raise TypeError(f"spec must be an AuditSpec, got {type(spec).__name__}")
    MECHANISMS[spec.name] = spec
    return spec


@dataclass(frozen=True)
class AuditResult:
    """One audit: the claim, the empirical lower bound and whether they agree.

    ``consistent`` = epsilon_lower <= epsilon_claimed. ``trials`` runs on each of D and
    D' (``evaluation_trials`` of them after the threshold was chosen).
    """

    mechanism: str
    epsilon_claimed: float
    delta: float
    epsilon_lower: float
    confidence: float
    trials: int
    consistent: bool
    noise_fraction: float
    neighbouring: str
    seed: int
    threshold: float
    false_positives: int
    false_negatives: int
    evaluation_trials: int
    setting: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit(mechanism: str, *, trials: int | None = None, seed: int = 0, noise_fraction: float = 1.0,
          confidence: float = DEFAULT_CONFIDENCE, selection_fraction: float = 0.5,
          progress: bool = False) -> AuditResult:
    """Audit a registered mechanism: epsilon lower bound vs the toolkit's claim.

    Parameters
    ----------
    mechanism : str
        A key of :data:`MECHANISMS`.
    trials : int, optional
        Runs on each of D and D' (default: the spec's ``default_trials``); at least 8.
    seed : int
        Seeds every draw (same seed, same result).
    noise_fraction : float
        In (0, 1]: 1 audits the mechanism as shipped; below 1 its under-noised twin
        (same claim), which a powerful audit must catch.
    confidence : float
        Confidence of the lower bound (default 0.95).
    selection_fraction : float
        Share of the trials used to choose the threshold (see :func:`threshold_test`).
    progress : bool
        Show a tqdm bar over the trials.
    """
    check_choice(mechanism, "mechanism", MECHANISMS)
    spec = MECHANISMS[mechanism]
    trials = spec.default_trials if trials is None else trials
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 8:
        raise ValueError(f"trials must be an integer >= 8, got {trials!r}")
    seed = check_seed(seed)
    noise_fraction = check_fraction(noise_fraction, "noise_fraction")
    confidence = check_fraction(confidence, "confidence", open_high=True)
    samples = spec.sample(trials, seed=seed, noise_fraction=noise_fraction, progress=progress)
    test = threshold_test(samples.scores_without, samples.scores_with, delta=samples.delta, confidence=confidence,
                          selection_fraction=selection_fraction)
    return AuditResult(mechanism=mechanism, epsilon_claimed=float(samples.epsilon_claimed), delta=samples.delta,
                       epsilon_lower=test.epsilon_lower, confidence=confidence, trials=trials,
                       consistent=bool(test.epsilon_lower <= samples.epsilon_claimed),
                       noise_fraction=noise_fraction, neighbouring=samples.neighbouring, seed=seed,
                       threshold=test.threshold, false_positives=test.false_positives,
                       false_negatives=test.false_negatives, evaluation_trials=test.negatives,
                       setting=dict(samples.setting))


def audit_table(results: list[AuditResult]) -> pd.DataFrame:
    """One row per audit: mechanism, noise_fraction, claimed and audited epsilon, trials, consistent."""
    columns = ["mechanism", "noise_fraction", "epsilon_claimed", "epsilon_lower", "delta", "confidence", "trials",
               "evaluation_trials", "false_positives", "false_negatives", "threshold", "neighbouring", "consistent"]
    return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in results], columns=columns)


def _generators(seed: int, count: int) -> list[torch.Generator]:
    states = np.random.SeedSequence(seed).generate_state(count, dtype=np.uint64)
    return [torch.Generator().manual_seed(int(s) & 0x7FFF_FFFF_FFFF_FFFF) for s in states]


# =========================================================== one step of the training loop
def release_step(grads: dict[str, torch.Tensor], norms: torch.Tensor, group: torch.Tensor, policy: Any, *,
                 n_groups: int, expected_batch_size: float,
                 generator: torch.Generator) -> tuple[Any, dict[str, torch.Tensor]]:
    """The private release of one step of ``training.loop``, given the batch's per-sample gradients.

    The same calls in the same order as the loop's step (so the same random draws from
    ``generator``): the policy's decision (which draws its own count noise), the
    weighted clipped sum sum_i w_i min(1, C_i/||g_i||) g_i and the Gaussian noise
    N(0, s^2 I) on it. Returns (decision, noisy sum); the loop's update
    theta - r (noisy sum / b + penalty) is post-processing of these.
    """
    from dpfair_analysis.gradients import add_gaussian_noise, clipped_sum

    decision = policy.decide(norms, group, n_groups=n_groups, expected_batch_size=expected_batch_size,
                             generator=generator)
    total = clipped_sum(grads, decision.bounds, weights=decision.weights, norms=norms)
    return decision, add_gaussian_noise(total, decision.noise_std, generator=generator)


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
    from dpfair_analysis.models import LogisticRegression

    model = LogisticRegression(2, 2)
    with torch.no_grad():
        model.linear.weight.copy_(torch.tensor([[0.0, 20.0]]))
        model.linear.bias.zero_()
    return model


def _flat(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors.values()]).to(torch.float64)


def _flat_rows(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-sample gradients as an (n, P) float64 matrix, parameters in the dict's order."""
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1).to(torch.float64)


@dataclass(frozen=True)
class StepCanaryAudit:
    """How to audit one clipping policy on the canary pair (see the module docstring).

    ``make_policy(noise_fraction)`` builds the policy with every noise scale multiplied by
    ``noise_fraction``. ``canary_terms(decision, policy)`` gives the canary's clipping
    bound and weight under a step's decision (a function of the released counts only,
    so the auditor can evaluate it for runs on D too). ``count_vector(decision)`` reads
    the released noisy counts from the step record, ``true_counts(policy, norms, group)``
    computes their noiseless values on a data set, ``count_noise(policy)`` their noise
    standard deviation (None for policies that release no counts).
    """

    name: str
    description: str
    make_policy: Callable[[float], Any]
    canary_terms: Callable[[Any, Any], tuple[float, float]]
    count_vector: Callable[[Any], np.ndarray] | None = None
    true_counts: Callable[[Any, torch.Tensor, torch.Tensor], np.ndarray] | None = None
    count_noise: Callable[[Any], float] | None = None
    delta: float = DEFAULT_DELTA
    accountant: str = "pld"


def sample_step_canary(spec: StepCanaryAudit, trials: int, *, seed: int, noise_fraction: float,
                       progress: bool = False) -> MechanismSamples:
    """Run one full-batch step of ``spec``'s policy ``trials`` times on each of D and D'.

    Score of a run: the log-likelihood ratio log p_D'(out) / p_D(out) of its release
    out = (noisy counts c~, noisy sum G~). Given the counts, the bounds, weights and noise
    s are fixed (post-processing), G~ ~ N(S_D + v, s^2 I) on D' and N(S_D, s^2 I) on D
    (S_D: the clipped sum of D's rows, v: the canary's clipped, weighted gradient), and
    c~ ~ N(c_D' , s_1^2 I) vs N(c_D, s_1^2 I); so

        LLR = (<G~ - S_D, v> - ||v||^2 / 2) / s^2 + (<c~ - c_D, c_D' - c_D> - ||c_D' - c_D||^2 / 2) / s_1^2.

    The claimed epsilon is the one ``training.loop.train`` reports for this one-step run of
    the correctly noised policy on D' (its own privacy ledger, accountant ``spec.accountant``).
    """
    from dpfair_analysis.gradients import clip_factors, parameters_of, per_sample_gradients_and_losses, \
        per_sample_norms
    from dpfair_analysis.training.loop import TrainConfig, train

    without, with_ = canary_datasets()
    n, b = len(without), len(with_)
    policy = spec.make_policy(noise_fraction)
    nominal = spec.make_policy(1.0)
    claim = train(canary_model(), with_, nominal,
                  TrainConfig(epochs=1, batch_size=b, lr=1.0, delta=spec.delta, seed=seed, accountant=spec.accountant),
                  progress=False)
    if len(claim.ledger) != 1 or claim.epsilon is None:
        raise RuntimeError(f"the claim run of {spec.name} made {len(claim.ledger)} releases, expected one step")
    model = canary_model()
    params = parameters_of(model)
    batches = []
    for data in (without, with_):
        grads, _ = per_sample_gradients_and_losses(model, data.X, data.y, params=params)
        batches.append((grads, per_sample_norms(grads), data.group))
    grads0, norms0, _ = batches[0]
    canary_grads = {k: g[n:] for k, g in batches[1][0].items()}
    canary_norms = batches[1][1][n:]
    counted = spec.count_vector is not None
    if counted:
        c0 = np.asarray(spec.true_counts(policy, norms0, without.group), dtype=np.float64)
        shift = np.asarray(spec.true_counts(policy, batches[1][1], with_.group), dtype=np.float64) - c0
        sigma_1 = float(spec.count_noise(policy))
    flat0, flat_canary = _flat_rows(grads0), _flat_rows(canary_grads)[0]
    generators = _generators(seed, 2)
    scores = []
    bar = tqdm(total=2 * trials, desc=f"audit {spec.name}", disable=not progress, leave=False)
    for (grads, norms, group), generator in zip(batches, generators):
        released, base_bounds, base_weights, canary, stds, counts = [], [], [], [], [], []
        for t in range(trials):
            decision, noisy = release_step(grads, norms, group, policy, n_groups=2, expected_batch_size=b,
                                           generator=generator)
            released.append(_flat(noisy))
            base_bounds.append(decision.bounds[:n])
            base_weights.append(torch.ones(n, dtype=norms.dtype) if decision.weights is None else
                                decision.weights[:n])
            canary.append(spec.canary_terms(decision, policy))
            stds.append(decision.noise_std)
            if counted:
                counts.append(spec.count_vector(decision))
            bar.update()
        # S_D and v for every trial at once: the same clip factors min(1, C_i/||g_i||) as clipped_sum
        factors = clip_factors(norms0.expand(trials, n), torch.stack(base_bounds)).double()
        base = (factors * torch.stack(base_weights).double()) @ flat0
        canary_bw = torch.tensor(canary, dtype=torch.float64)
        canary_factor = clip_factors(canary_norms.double().expand(trials), canary_bw[:, 0]) * canary_bw[:, 1]
        v = canary_factor.unsqueeze(1) * flat_canary
        s = torch.tensor(stds, dtype=torch.float64)
        llr = (((torch.stack(released) - base) * v).sum(1) - 0.5 * (v * v).sum(1)) / s ** 2
        if counted:
            c = torch.from_numpy(np.stack(counts) - c0)
            llr = llr + (c @ torch.from_numpy(shift) - 0.5 * float(shift @ shift)) / sigma_1 ** 2
        scores.append(llr.numpy())
    bar.close()
    setting = {"rows_without": n, "rows_with": b, "steps": 1, "sampling_rate": 1.0,
               "claimed_noise_multipliers": list(nominal.planned_noise_multipliers()),
               "actual_noise_multipliers": list(policy.planned_noise_multipliers()),
               "accountant": spec.accountant}
    return MechanismSamples(scores_without=scores[0], scores_with=scores[1], epsilon_claimed=float(claim.epsilon),
                            delta=spec.delta, neighbouring="add_remove", setting=setting)


#: The step audits by name (their registered entries call :func:`sample_step_canary` with them).
STEP_AUDITS: dict[str, StepCanaryAudit] = {}


def _step_entry(spec: StepCanaryAudit, default_trials: int) -> AuditSpec:
    STEP_AUDITS[spec.name] = spec

    def sample(trials: int, *, seed: int, noise_fraction: float, progress: bool = False) -> MechanismSamples:
        return sample_step_canary(spec, trials, seed=seed, noise_fraction=noise_fraction, progress=progress)

    return AuditSpec(name=spec.name, description=spec.description, sample=sample, default_trials=default_trials)


#: Noise multiplier of the DP-SGD audit: one full-batch step, PLD epsilon 2.75 at delta 1e-5.
DPSGD_AUDIT_SIGMA = 1.5
#: sigma_1 = sigma_2 of the Naive and DPSGD-F audits: joint multiplier 1.5, the same claim as DP-SGD's.
TWO_RELEASE_AUDIT_SIGMA = 1.5 * math.sqrt(2.0)
DPSGDF_AUDIT_BASE_CLIP = 0.25
DPSGDF_AUDIT_MAX_RATIO = 10.0


def _dpsgd_policy(fraction: float):
    from dpfair_analysis.training.clipping import UniformClipping

    return UniformClipping(1.0, DPSGD_AUDIT_SIGMA * fraction)


def _naive_policy(fraction: float):
    from dpfair_analysis.training.dpsgdf import NaiveReweighting

    return NaiveReweighting(1.0, TWO_RELEASE_AUDIT_SIGMA * fraction, TWO_RELEASE_AUDIT_SIGMA * fraction)


def _dpsgdf_policy(fraction: float):
    from dpfair_analysis.training.dpsgdf import DPSGDF

    return DPSGDF(DPSGDF_AUDIT_BASE_CLIP, TWO_RELEASE_AUDIT_SIGMA * fraction, TWO_RELEASE_AUDIT_SIGMA * fraction,
                  max_ratio=DPSGDF_AUDIT_MAX_RATIO)


def _group_counts(group: torch.Tensor, n_groups: int = 2) -> np.ndarray:
    return torch.bincount(group, minlength=n_groups).double().numpy()


register(_step_entry(StepCanaryAudit(
    name="dpsgd",
    description="DP-SGD (UniformClipping), one full-batch step, canary at the clipping bound",
    make_policy=_dpsgd_policy,
    canary_terms=lambda decision, policy: (policy.clip_bound, 1.0),
), default_trials=4000))

register(_step_entry(StepCanaryAudit(
    name="naive",
    description="Naive reweighting (paper 000 Alg. 3): noisy group sizes + weighted noisy sum, canary alone in "
                "its group",
    make_policy=_naive_policy,
    canary_terms=lambda decision, policy: (policy.base_clip, decision.record["theta[1]"]),
    count_vector=lambda decision: np.array([decision.record["b[0]"], decision.record["b[1]"]]),
    true_counts=lambda policy, norms, group: _group_counts(group),
    count_noise=lambda policy: policy.count_noise,
), default_trials=4000))

register(_step_entry(StepCanaryAudit(
    name="dpsgdf",
    description="DPSGD-F (paper 000 Alg. 2): noisy clipped/unclipped counts + noisy sum with group bounds, canary "
                "alone in its group",
    make_policy=_dpsgdf_policy,
    canary_terms=lambda decision, policy: (decision.record["C[1]"], 1.0),
    count_vector=lambda decision: np.array([decision.record[k] for k in ("m[0]", "m[1]", "o[0]", "o[1]")]),
    true_counts=lambda policy, norms, group: np.concatenate([
        _group_counts(group[norms > policy.base_clip]), _group_counts(group[norms <= policy.base_clip])]),
    count_noise=lambda policy: policy.count_noise,
), default_trials=4000))


# ================================================================== output perturbation
OUTPUT_PERTURBATION_EPSILON = 3.0
OUTPUT_PERTURBATION_L2 = 10.0


def output_perturbation_pair():
    """(D, D'): one row x = (1, 0) (||x|| = 1, the assumed bound) with label 1, and the same row with label 0."""
    from dpfair_analysis.data.dataset import GroupedDataset

    def data(label: int) -> GroupedDataset:
        return GroupedDataset(X=torch.tensor([[1.0, 0.0]]), y=torch.tensor([label]), group=torch.tensor([0]),
                              group_names=("all",), label_names=("0", "1"), name="audit-output-perturbation")

    return data(1), data(0)


def sample_output_perturbation(trials: int, *, seed: int, noise_fraction: float,
                               progress: bool = False, epsilon: float = OUTPUT_PERTURBATION_EPSILON,
                               delta: float = DEFAULT_DELTA, l2: float = OUTPUT_PERTURBATION_L2) -> MechanismSamples:
    """``trials`` releases of output perturbation on each of the label-flip pair, vectorised.

    Each side: :func:`~dpfair_analysis.privacy.output_perturbation.output_perturbation`
    (assumption check, ERM solve, sensitivity, analytic calibration of s for
    (epsilon, delta)), then ``trials`` draws theta* + N(0, (noise_fraction s)^2 I) by its
    :func:`~dpfair_analysis.privacy.output_perturbation.perturb`. Score: the Gaussian
    log-likelihood ratio (<theta~ - theta*_D, u> - ||u||^2 / 2) / s'^2 with
    u = theta*_D' - theta*_D.
    """
    from dpfair_analysis.models import LogisticRegression
    from dpfair_analysis.privacy.output_perturbation import output_perturbation, perturb

    generators = _generators(seed, 2)
    minimisers, noisy, sigmas = [], [], []
    for data, generator in zip(output_perturbation_pair(), generators):
        release = output_perturbation(LogisticRegression(2, 2), data, epsilon=epsilon, delta=delta, l2=l2,
                                      generator=generator)
        sigma = noise_fraction * release.sigma
        minimisers.append(release.solution.theta)
        draws = perturb(release.solution.params, sigma, draws=trials, generator=generator)
        noisy.append(torch.cat([t.reshape(trials, -1) for t in draws.values()], dim=1))  # theta's order
        sigmas.append(sigma)
        sensitivity = release.sensitivity
    u = (minimisers[1] - minimisers[0]).to(torch.float64)
    s = sigmas[0]
    scores = [(((out.to(torch.float64) - minimisers[0]) @ u - 0.5 * float(u @ u)) / s ** 2).numpy() for out in noisy]
    setting = {"rows": 1, "l2": l2, "sensitivity": sensitivity, "minimiser_shift": float(u.norm()),
               "shift_over_sensitivity": float(u.norm()) / sensitivity, "sigma_claimed": s / noise_fraction,
               "sigma_actual": s, "calibration": "analytic"}
    return MechanismSamples(scores_without=scores[0], scores_with=scores[1], epsilon_claimed=float(epsilon),
                            delta=delta, neighbouring="replace_one", setting=setting)


register(AuditSpec(
    name="output-perturbation",
    description="output perturbation of L2-regularised logistic regression (paper 001 §5), label-flip pair",
    sample=sample_output_perturbation,
    default_trials=400_000,
))



# ================================================================== paper 001 mitigation
#: sigma of each of the mitigation's three releases (counts once, gradient, statistics): composed on one
#: full-batch step they act as one Gaussian of multiplier 1.5, the same claim as DP-SGD's audit.
MITIGATION_AUDIT_SIGMA = 1.5 * math.sqrt(3.0)
MITIGATION_AUDIT_CLIP = 1.0


def sample_mitigation_canary(trials: int, *, seed: int, noise_fraction: float,
                             progress: bool = False) -> MechanismSamples:
    """Paper 001's mitigation (:class:`~dpfair_analysis.training.mitigation.FairnessLensMitigation`), one step.

    The canary pair of the step audits (:func:`canary_datasets`, add/remove), with the
    objective's coefficients fixed to public values (primed once on a separate generator,
    as the previous step's release would make them), gamma_1 = gamma_2 = 1. Each trial
    runs the objective's one-time count release (``prepare``), its penalised per-sample
    gradients, DP-SGD's clipped noisy sum (:func:`release_step`, C = 1) and the
    objective's statistics release (``release``, no smoothing), and scores the three
    outputs by their summed Gaussian log-likelihood ratios (counts: shift e_canary-group,
    sigma_n; gradient: the canary's clipped penalised gradient, sigma C; statistics: the
    canary's block row, sigma_s Delta_s). The claim is what ``train`` reports for the same
    one-step run with the objective (its ledger: the count event and the joint step event).
    """
    from dataclasses import replace as _replace

    from dpfair_analysis.gradients import parameters_of, per_sample_norms
    from dpfair_analysis.training.clipping import UniformClipping
    from dpfair_analysis.training.loop import TrainConfig, train
    from dpfair_analysis.training.mitigation import FairnessLensMitigation, statistics_sensitivity

    sigma, C = MITIGATION_AUDIT_SIGMA, MITIGATION_AUDIT_CLIP

    def objective(fraction: float) -> FairnessLensMitigation:
        return FairnessLensMitigation(1.0, 1.0, C, stats_noise_multiplier=sigma * fraction,
                                      count_noise_multiplier=sigma * fraction, smoothing=0.0)

    without, with_ = canary_datasets()
    n, b = len(without), len(with_)
    claim = train(canary_model(), with_, UniformClipping(C, sigma), TrainConfig(epochs=1, batch_size=b, lr=1.0,
                  delta=DEFAULT_DELTA, seed=seed, accountant="pld"), progress=False, objective=objective(1.0))
    model = canary_model()
    params = parameters_of(model)
    primer = objective(1.0)
    public = torch.Generator().manual_seed(2 ** 31 - 1)
    primer.prepare(with_, generator=public)
    primer.release(model, with_.X, with_.y, with_.group, params=params, bounds=torch.full((b,), C),
                   expected_batch_size=b, generator=public)
    coefficients, fractions = primer.coefficients, primer.fractions

    def noiseless(data):
        """(count vector, clipped penalised gradient sum, statistics block) of ``data`` without noise."""
        quiet = _replace(objective(1.0), stats_noise_multiplier=1e-300, count_noise_multiplier=1e-300)
        quiet.fractions, quiet.coefficients = fractions, coefficients
        grads, _ = quiet.per_sample_gradients(model, data.X, data.y, data.group, params=params)
        norms = per_sample_norms(grads)
        _, total = release_step(grads, norms, data.group, UniformClipping(C, 1e-300), n_groups=2,
                                expected_batch_size=b, generator=torch.Generator())
        quiet.release(model, data.X, data.y, data.group, params=params, bounds=torch.full((len(data),), C),
                      expected_batch_size=b, generator=torch.Generator())
        counts = data.group_sizes().to(torch.float64)
        return counts, _flat(total), quiet.statistics.flatten().clone()

    base, canary = noiseless(without), noiseless(with_)
    shifts = [c - b0 for c, b0 in zip(canary, base)]
    stds = [sigma * noise_fraction, sigma * noise_fraction * C,
            sigma * noise_fraction * statistics_sensitivity(C)]
    scores = []
    bar = tqdm(total=2 * trials, desc="audit mitigation", disable=not progress, leave=False)
    for data, generator in zip((without, with_), _generators(seed, 2)):
        llr = np.zeros(trials)
        for t in range(trials):
            mechanism = objective(noise_fraction)
            mechanism.prepare(data, generator=generator)
            mechanism.coefficients = coefficients
            grads, _ = mechanism.per_sample_gradients(model, data.X, data.y, data.group, params=params)
            norms = per_sample_norms(grads)
            policy = UniformClipping(C, sigma * noise_fraction)
            decision, total = release_step(grads, norms, data.group, policy, n_groups=2, expected_batch_size=b,
                                           generator=generator)
            mechanism.release(model, data.X, data.y, data.group, params=params, bounds=decision.bounds,
                              expected_batch_size=b, generator=generator)
            outputs = (mechanism.released_counts, _flat(total), mechanism.statistics.flatten())
            llr[t] = sum(float((out - b0) @ shift - 0.5 * shift @ shift) / std ** 2
                         for out, b0, shift, std in zip(outputs, base, shifts, stds))
            bar.update()
        scores.append(llr)
    bar.close()
    setting = {"rows_without": n, "rows_with": b, "steps": 1, "sampling_rate": 1.0, "gamma1": 1.0, "gamma2": 1.0,
               "clip_bound": C, "sigma_claimed": sigma, "sigma_actual": sigma * noise_fraction,
               "canary_gradient_shift": float(shifts[1].norm()), "canary_statistics_shift": float(shifts[2].norm()),
               "statistics_sensitivity": statistics_sensitivity(C)}
    return MechanismSamples(scores_without=scores[0], scores_with=scores[1], epsilon_claimed=float(claim.epsilon),
                            delta=DEFAULT_DELTA, neighbouring="add_remove", setting=setting)


register(AuditSpec(
    name="mitigation",
    description="paper 001's mitigation objective (Eq. 6, boundary proxy) on DP-SGD: count, gradient and "
                "statistics releases of one step, canary alone in its group",
    sample=sample_mitigation_canary,
    default_trials=2000,
))

# ========================================================================= PF-LD (papers/003)
#: PF-LD's primal audit: full batch (q = 1), replace-one distance 2 Delta_1, noise sigma_p Delta_1.
PFLD_PRIMAL_SIGMA = 3.0
#: PF-LD's dual audit: replace distance sqrt(2) C_d, noise sigma_d sqrt(2) C_d.
PFLD_DUAL_SIGMA = 1.5
PFLD_AUDIT_CLIP_PRIMAL = 1.0
PFLD_AUDIT_CLIP_DUAL = 5.0


def pfld_pair(canary_x: tuple[float, float], canary_y: int):
    """(D, D') for PF-LD's relation (one person's group changes): the canary is row 0, in
    group 0 on D and group 1 on D'; three rows x = (0, 1), y = 1 in each group besides."""
    from dpfair_analysis.data.dataset import GroupedDataset

    X = torch.tensor([list(canary_x)] + [[0.0, 1.0]] * 6)
    y = torch.tensor([canary_y] + [1] * 6)
    others = [0, 0, 0, 1, 1, 1]

    def data(canary_group: int) -> GroupedDataset:
        return GroupedDataset(X=X, y=y, group=torch.tensor([canary_group] + others), group_names=("a", "b"),
                              label_names=("0", "1"), name="audit-pfld")

    return data(0), data(1)


def sample_pfld_primal(trials: int, *, seed: int, noise_fraction: float, progress: bool = False,
                       delta: float = DEFAULT_DELTA) -> MechanismSamples:
    """PF-LD's private primal step (:func:`~dpfair_analysis.training.lagrangian.private_primal_step`).

    Demographic-parity terms, full batch (sampling rate 1), multipliers lambda = (1, 1)
    with signs (+1, -1) and equal public denominators, so the group coefficients are
    a = (a, -a): the canary (x = (8, 0), y = 1, gradient of h = p(positive) of norm 2.02 >
    C_p = 1, clipped to C_p) moving from group 0 to 1 changes the released group sum by
    2 a C_p = 2 Delta_1, the largest change the accountant allows. The released model
    theta_1 = theta_0 - r (public gradient - V - noise) has the same noise on D and D', so
    the likelihood ratio is increasing in <theta_1, V_D' - V_D> (V from
    :func:`~dpfair_analysis.privacy.sensitivity.primal_group_sum` on each data set).
    Claim: :func:`~dpfair_analysis.training.lagrangian.pfld_epsilon` of the step's event.
    """
    from dpfair_analysis.fairness.constraints import make_constraint
    from dpfair_analysis.gradients import parameters_of, per_sample_gradients
    from dpfair_analysis.privacy.sensitivity import primal_group_sum
    from dpfair_analysis.training.lagrangian import PrivateState, pfld_epsilon, private_primal_step

    constraint = make_constraint("dp", n_groups=2)
    pair = pfld_pair((8.0, 0.0), 1)
    lambdas, signs, denominators = torch.ones(2), torch.tensor([1.0, -1.0]), torch.full((2,), 4.0)
    start = parameters_of(canary_model())

    def step(data, sigma: float, generator: torch.Generator, model):
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(start[name])
        state = PrivateState(lambdas=lambdas.clone(), signs=signs.clone(), denominators=denominators.clone())
        record = private_primal_step(model, data.X, data.y, data.group, reported=None, constraint=constraint,
                                     state=state, sampling_rate=1.0, clip=PFLD_AUDIT_CLIP_PRIMAL, sigma_p=sigma,
                                     lr=1.0, generator=generator)
        return record, _flat(parameters_of(model))

    model = canary_model()
    record, _ = step(pair[1], PFLD_PRIMAL_SIGMA, torch.Generator().manual_seed(0), model)
    claimed = pfld_epsilon(record["event"], delta, accountant="pld")
    grads = per_sample_gradients(model, pair[0].X, pair[0].y, params=start,
                                 loss_fn=lambda logit, t: constraint.h(logit, t).sum())
    flat = torch.cat([g.reshape(len(pair[0]), -1) for g in grads.values()], dim=1)
    coefficients = (lambdas * signs / denominators).double()
    sums = [primal_group_sum(flat, d.y, d.group, constraint=constraint, coefficients=coefficients,
                             clip=PFLD_AUDIT_CLIP_PRIMAL).double() for d in pair]
    direction = sums[1] - sums[0]
    sigma = PFLD_PRIMAL_SIGMA * noise_fraction
    scores = []
    bar = tqdm(total=2 * trials, desc="audit pfld-primal", disable=not progress, leave=False)
    for data, generator in zip(pair, _generators(seed, 2)):
        out = np.empty(trials)
        for t in range(trials):
            _, theta = step(data, sigma, generator, model)
            out[t] = float(theta @ direction)
            bar.update()
        scores.append(out)
    bar.close()
    setting = {"rows": len(pair[0]), "constraint": "dp", "sampling_rate": 1.0, "clip_primal": PFLD_AUDIT_CLIP_PRIMAL,
               "delta1": record["delta1"], "change_over_delta1": float(direction.norm()) / record["delta1"],
               "sigma_p_claimed": PFLD_PRIMAL_SIGMA, "sigma_p_actual": sigma, "accountant": "pld"}
    return MechanismSamples(scores_without=scores[0], scores_with=scores[1], epsilon_claimed=claimed, delta=delta,
                            neighbouring="replace_one (sensitive attribute)", setting=setting)


def sample_pfld_dual(trials: int, *, seed: int, noise_fraction: float, progress: bool = False,
                     delta: float = DEFAULT_DELTA) -> MechanismSamples:
    """PF-LD's private dual step (:func:`~dpfair_analysis.training.lagrangian.private_dual_update`).

    Accuracy-parity terms (h = the loss, unbounded, so C_d binds): the canary
    (x = (0, 1), y = 0, loss ~20 > C_d = 5) moving from group 0 to 1 moves the released
    group sums S by (-C_d, +C_d), distance sqrt(2) C_d -- the bound the noise is scaled
    to. The released noisy gap mu_P - S~ / m (public m) has the same noise on D and D';
    the likelihood ratio is increasing in <gap, -(S_D' - S_D)> (S from
    :func:`~dpfair_analysis.privacy.sensitivity.dual_group_sums`). Claim:
    :func:`~dpfair_analysis.training.lagrangian.pfld_epsilon` of the step's event.
    """
    from dpfair_analysis.fairness.constraints import make_constraint
    from dpfair_analysis.privacy.sensitivity import dual_group_sums
    from dpfair_analysis.training.lagrangian import PrivateState, pfld_epsilon, private_dual_update

    constraint = make_constraint("ap", n_groups=2)
    pair = pfld_pair((0.0, 1.0), 0)
    model = canary_model()
    denominators = torch.full((2,), 4.0, dtype=torch.float64)

    def step(data, sigma: float, generator: torch.Generator):
        state = PrivateState(lambdas=torch.zeros(2, dtype=torch.float64), signs=torch.zeros(2, dtype=torch.float64),
                             denominators=denominators.clone())
        event = private_dual_update(model, data, reported=None, constraint=constraint, state=state,
                                    clip=PFLD_AUDIT_CLIP_DUAL, sigma_d=sigma, dual_lr=1.0, lambda_max=1e9,
                                    generator=generator)
        return event, state.noisy_gap.double()

    event, _ = step(pair[1], PFLD_DUAL_SIGMA, torch.Generator().manual_seed(0))
    claimed = pfld_epsilon(event, delta, accountant="pld")
    with torch.no_grad():
        sums = [dual_group_sums(constraint.h(model(d.X), d.y).double(), d.y, d.group, constraint=constraint,
                                clip=PFLD_AUDIT_CLIP_DUAL) for d in pair]
    direction = -(sums[1] - sums[0]) / denominators
    sigma = PFLD_DUAL_SIGMA * noise_fraction
    scores = []
    bar = tqdm(total=2 * trials, desc="audit pfld-dual", disable=not progress, leave=False)
    for data, generator in zip(pair, _generators(seed, 2)):
        out = np.empty(trials)
        for t in range(trials):
            _, gap = step(data, sigma, generator)
            out[t] = float(gap @ direction)
            bar.update()
        scores.append(out)
    bar.close()
    setting = {"rows": len(pair[0]), "constraint": "ap", "clip_dual": PFLD_AUDIT_CLIP_DUAL,
               "sum_change": float((sums[1] - sums[0]).norm()),
               "change_over_bound": float((sums[1] - sums[0]).norm()) / (math.sqrt(2) * PFLD_AUDIT_CLIP_DUAL),
               "sigma_d_claimed": PFLD_DUAL_SIGMA, "sigma_d_actual": sigma, "accountant": "pld"}
    return MechanismSamples(scores_without=scores[0], scores_with=scores[1], epsilon_claimed=claimed, delta=delta,
                            neighbouring="replace_one (sensitive attribute)", setting=setting)


register(AuditSpec(
    name="pfld-primal",
    description="PF-LD private primal step (papers/003 Eq. 10, corrected): canary's group change at 2 Delta_1",
    sample=sample_pfld_primal,
    default_trials=1500,
))

register(AuditSpec(
    name="pfld-dual",
    description="PF-LD private dual step (papers/003 Eq. 13, corrected): canary's group change at sqrt(2) C_d",
    sample=sample_pfld_dual,
    default_trials=4000,
))


def sample_pfld_primal_paper(trials: int, *, seed: int, noise_fraction: float, progress: bool = False,
                             delta: float = DEFAULT_DELTA) -> MechanismSamples:
    """PF-LD's primal step *as printed* (``paper_exact=True``: papers/003 Eqs. 7, 10 and Thm 5's accounting).

    The paper scales the noise by Delta_p = 2 C_p lambda_max / (min_i |B_{G_i}| - 1), a
    function of the sensitive attribute: moving the canary (x = (100, 0), h = 0.9) from
    group 0 (sizes 3, 4) to group 1 (sizes 2, 5) doubles the noise standard deviation
    and flips both batch signs. The score is the exact Gaussian log-likelihood ratio
    with the two means (from runs with noise multiplier 1e-9) and the two standard
    deviations the step reports:

        LLR = ||x - m_D||^2 / (2 s_D^2) - ||x - m_D'||^2 / (2 s_D'^2) - P log(s_D' / s_D).

    Claim: the paper's bookkeeping (Poisson-sampled Gaussian with multiplier sigma_p,
    add/remove; :func:`~dpfair_analysis.training.lagrangian.pfld_epsilon` with
    ``paper_exact=True``). Expected to be caught at full noise.
    """
    import warnings

    from dpfair_analysis.fairness.constraints import make_constraint
    from dpfair_analysis.gradients import parameters_of
    from dpfair_analysis.training.lagrangian import PrivateState, pfld_epsilon, private_primal_step

    constraint = make_constraint("dp", n_groups=2)
    X = torch.tensor([[100.0, 0.0], [0, 1.0], [0, -1.0], [0, -1.0], [0, 1.0], [0, -1.0], [0, 1.0]])
    y = torch.tensor([1, 1, 0, 0, 1, 0, 1])
    groups = (torch.tensor([0, 0, 0, 1, 1, 1, 1]), torch.tensor([1, 0, 0, 1, 1, 1, 1]))
    model = canary_model()
    with torch.no_grad():
        model.linear.weight[0, 0] = 0.022  # canary score 2.2: h = 0.9, gradient of h of norm 9
    start = parameters_of(model)

    def step(group, sigma: float, generator: torch.Generator):
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(start[name])
        state = PrivateState(lambdas=torch.ones(2), signs=torch.zeros(2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PrivacyNotEstablishedWarning: known, that is what is audited
            record = private_primal_step(model, X, y, group, reported=None, constraint=constraint, state=state,
                                         sampling_rate=1.0, clip=1.0, sigma_p=sigma, lr=1.0, generator=generator,
                                         paper_exact=True, lambda_max=1.0)
        return record, _flat(parameters_of(model))

    nominal, _ = step(groups[1], PFLD_DUAL_SIGMA, torch.Generator().manual_seed(0))
    claimed = pfld_epsilon(nominal["event"], delta, accountant="pld", paper_exact=True)
    sigma = PFLD_DUAL_SIGMA * noise_fraction
    means, stds = [], []
    for group in groups:
        record, mean = step(group, 1e-9, torch.Generator().manual_seed(0))
        means.append(mean)
        stds.append(sigma * record["delta1"])
    scores = []
    bar = tqdm(total=2 * trials, desc="audit pfld-primal-paper", disable=not progress, leave=False)
    for group, generator in zip(groups, _generators(seed, 2)):
        out = torch.stack([step(group, sigma, generator)[1] for _ in range(trials)])
        bar.update(trials)
        llr = (((out - means[0]) ** 2).sum(1) / (2 * stds[0] ** 2) - ((out - means[1]) ** 2).sum(1) / (2 * stds[1] ** 2)
               - out.shape[1] * math.log(stds[1] / stds[0]))
        scores.append(llr.numpy())
    bar.close()
    setting = {"rows": len(y), "constraint": "dp", "paper_exact": True, "sampling_rate": 1.0,
               "delta_p": [s / sigma for s in stds], "mean_shift": float((means[1] - means[0]).norm()),
               "sigma_p_claimed": PFLD_DUAL_SIGMA, "sigma_p_actual": sigma, "accountant": "pld (add/remove, paper)"}
    return MechanismSamples(scores_without=scores[0], scores_with=scores[1], epsilon_claimed=claimed, delta=delta,
                            neighbouring="replace_one (sensitive attribute)", setting=setting)


register(AuditSpec(
    name="pfld-primal-paper",
    description="PF-LD primal step as printed (papers/003 Eq. 10, Thm 1 noise): refuted, noise depends on A",
    sample=sample_pfld_primal_paper,
    default_trials=4000,
    expected_consistent=False,
))
