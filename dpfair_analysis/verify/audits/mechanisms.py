"""Audited mechanisms (one release each): the step audits of the clipping policies, output
perturbation, paper 001's mitigation and PF-LD's primal and dual steps.

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
import warnings
from dataclasses import dataclass, replace as _replace
from typing import Any, Callable

import numpy as np
import torch
from tqdm import tqdm

from dpfair_analysis.fairness.constraints import make_constraint
from dpfair_analysis.gradients import (clip_factors, parameters_of, per_sample_gradients,
                                       per_sample_gradients_and_losses, per_sample_norms)
from dpfair_analysis.models import LogisticRegression
from dpfair_analysis.privacy.accounting import AccountingSpec
from dpfair_analysis.privacy.pfld_accounting import pfld_epsilon
from dpfair_analysis.privacy.sensitivity import dual_group_sums, primal_group_sum
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.dpsgdf import DPSGDF, NaiveReweighting
from dpfair_analysis.training.lagrangian import PrivateState, private_dual_update, private_primal_step
from dpfair_analysis.training.loop import TrainConfig, release_step, train
from dpfair_analysis.training.mitigation import FairnessLensMitigation, statistics_sensitivity
from dpfair_analysis.validation import check_name_free
from dpfair_analysis.verify.audits.canaries import _flat, _flat_rows, canary_datasets, canary_model, \
    output_perturbation_pair, pfld_step_pair
from dpfair_analysis.verify.audits.registry import DEFAULT_DELTA, AuditSpec, MechanismSamples, _generators, register

#: PF-LD steps' claims: PLD, replace-one, dp_accounting's default grid.
_PLD_REPLACE_ONE = AccountingSpec(accountant="pld", neighboring="replace_one")


def _release(grads, norms, group, policy, **kwargs):
    """The training loop's own release (:func:`~dpfair_analysis.training.loop.release_step`): (decision, noisy sum)."""
    decision, _, noisy = release_step(grads, norms, group, policy, **kwargs)
    return decision, noisy


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
    without, with_ = canary_datasets()
    n, b = len(without), len(with_)
    policy = spec.make_policy(noise_fraction)
    nominal = spec.make_policy(1.0)
    claim = train(canary_model(), with_, nominal,
                  TrainConfig(epochs=1, batch_size=b, lr=1.0, delta=spec.delta, seed=seed,
                              accounting=AccountingSpec(accountant=spec.accountant)),
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
            decision, noisy = _release(grads, norms, group, policy, n_groups=2, expected_batch_size=b,
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
    STEP_AUDITS[check_name_free(spec.name, STEP_AUDITS, "step audit")] = spec

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
    return UniformClipping(1.0, DPSGD_AUDIT_SIGMA * fraction)


def _naive_policy(fraction: float):
    return NaiveReweighting(1.0, TWO_RELEASE_AUDIT_SIGMA * fraction, TWO_RELEASE_AUDIT_SIGMA * fraction)


def _dpsgdf_policy(fraction: float):
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
    gradients and, through the loop's own :func:`~dpfair_analysis.training.loop.release_step` in its
    order, the objective's statistics release (``release``, no smoothing) and DP-SGD's clipped noisy sum (C = 1), and scores the three
    outputs by their summed Gaussian log-likelihood ratios (counts: shift e_canary-group,
    sigma_n; gradient: the canary's clipped penalised gradient, sigma C; statistics: the
    canary's block row, sigma_s Delta_s). The claim is what ``train`` reports for the same
    one-step run with the objective (its ledger: the count event and the joint step event).
    """
    sigma, C = MITIGATION_AUDIT_SIGMA, MITIGATION_AUDIT_CLIP

    def objective(fraction: float) -> FairnessLensMitigation:
        return FairnessLensMitigation(1.0, 1.0, C, stats_noise_multiplier=sigma * fraction,
                                      count_noise_multiplier=sigma * fraction, smoothing=0.0)

    without, with_ = canary_datasets()
    n, b = len(without), len(with_)
    claim = train(canary_model(), with_, UniformClipping(C, sigma), TrainConfig(epochs=1, batch_size=b, lr=1.0,
                  delta=DEFAULT_DELTA, seed=seed, accounting=AccountingSpec(accountant="pld")), progress=False,
                  objective=objective(1.0))
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
        _, total = _release(grads, norms, data.group, UniformClipping(C, 1e-300), n_groups=2,
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
            # the loop's order: the policy's decision, the objective's statistics release, the noisy sum
            _, _, total = release_step(
                grads, norms, data.group, policy, n_groups=2, expected_batch_size=b, generator=generator,
                objective_release=lambda bounds, m=mechanism, d=data, g=generator: m.release(
                    model, d.X, d.y, d.group, params=params, bounds=bounds, expected_batch_size=b, generator=g))
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

# ========================================================================= PF-LD (paper 003)
#: PF-LD's primal audit: full batch (q = 1), replace-one distance 2 Delta_1, noise sigma_p Delta_1.
PFLD_PRIMAL_SIGMA = 3.0
#: PF-LD's dual audit: replace distance sqrt(2) C_d, noise sigma_d sqrt(2) C_d.
PFLD_DUAL_SIGMA = 1.5
PFLD_AUDIT_CLIP_PRIMAL = 1.0
PFLD_AUDIT_CLIP_DUAL = 5.0


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
    Claim: :func:`~dpfair_analysis.privacy.pfld_accounting.pfld_epsilon` of the step's event.
    """
    constraint = make_constraint("dp", n_groups=2)
    pair = pfld_step_pair((8.0, 0.0), 1)
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
    claimed = pfld_epsilon(record["event"], delta, accounting=_PLD_REPLACE_ONE)
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
    :func:`~dpfair_analysis.privacy.pfld_accounting.pfld_epsilon` of the step's event.
    """
    constraint = make_constraint("ap", n_groups=2)
    pair = pfld_step_pair((0.0, 1.0), 0)
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
    claimed = pfld_epsilon(event, delta, accounting=_PLD_REPLACE_ONE)
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
    description="PF-LD private primal step (paper 003 Eq. 10, corrected): canary's group change at 2 Delta_1",
    sample=sample_pfld_primal,
    default_trials=1500,
))

register(AuditSpec(
    name="pfld-dual",
    description="PF-LD private dual step (paper 003 Eq. 13, corrected): canary's group change at sqrt(2) C_d",
    sample=sample_pfld_dual,
    default_trials=4000,
))


def sample_pfld_primal_paper(trials: int, *, seed: int, noise_fraction: float, progress: bool = False,
                             delta: float = DEFAULT_DELTA) -> MechanismSamples:
    """PF-LD's primal step *as printed* (``paper_exact=True``: paper 003 Eqs. 7, 10 and Thm 5's accounting).

    The paper scales the noise by Delta_p = 2 C_p lambda_max / (min_i |B_{G_i}| - 1), a
    function of the sensitive attribute: moving the canary (x = (100, 0), h = 0.9) from
    group 0 (sizes 3, 4) to group 1 (sizes 2, 5) doubles the noise standard deviation
    and flips both batch signs. The score is the exact Gaussian log-likelihood ratio
    with the two means (from runs with noise multiplier 1e-9) and the two standard
    deviations the step reports:

        LLR = ||x - m_D||^2 / (2 s_D^2) - ||x - m_D'||^2 / (2 s_D'^2) - P log(s_D' / s_D).

    Claim: the paper's bookkeeping (Poisson-sampled Gaussian with multiplier sigma_p,
    add/remove; :func:`~dpfair_analysis.privacy.pfld_accounting.pfld_epsilon` with
    ``paper_exact=True``). Expected to be caught at full noise.
    """
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
    claimed = pfld_epsilon(nominal["event"], delta, accounting=_PLD_REPLACE_ONE, paper_exact=True)
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
    description="PF-LD primal step as printed (paper 003 Eq. 10, Thm 1 noise): refuted, noise depends on A",
    sample=sample_pfld_primal_paper,
    default_trials=4000,
    expected_consistent=False,
))
