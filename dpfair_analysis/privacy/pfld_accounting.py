"""PF-LD's accounting (paper 003): what a run of a given shape releases, its epsilon, and the noise that meets a target.

PF-LD (``training/lagrangian.py``) is private in the sensitive attribute: neighbours
differ in one person's group, a replace-one relation. Its releases are recorded in the
convention of dp_accounting's PLD under ``REPLACE_ONE``, where a Gaussian of noise
multiplier m shifts by twice the contribution bound: a release of replace distance d
and noise std s is ``GaussianDpEvent(2 s / d)`` (:func:`replace_one_gaussian_event`), and
a primal step (one person contributes at most Delta_1 on either side, noise
sigma_p Delta_1) is ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma_p))``.

The default accounting is ``PFLD_ACCOUNTING`` (PLD, replace-one); ``AccountingSpec(
accountant="rdp", neighboring="replace_one")`` gives RDP without subsampling
amplification (valid, looser; :func:`~.accounting.replace_one_as_add_remove`). The
paper-exact variant keeps the paper's bookkeeping (Lemma 1-2, Theorem 5: add/remove
events), so its spec is the same with ``neighboring="add_remove"``
(:func:`pfld_accounting`).
"""

from __future__ import annotations

from dataclasses import replace

from dp_accounting import dp_event, mechanism_calibration

from dpfair_analysis.privacy.accounting import AccountingSpec, epsilon_from_event, steps_for_epochs
from dpfair_analysis.validation import check_delta, check_positive

__all__ = ["PFLD_ACCOUNTING", "pfld_accounting", "replace_one_gaussian_event", "pfld_schedule_event",
           "pfld_epsilon", "calibrate_pfld_noise"]

#: PF-LD's default: dp_accounting's PLD, replace-one, a 1e-3 grid (calibration runs it many times).
PFLD_ACCOUNTING = AccountingSpec(accountant="pld", neighboring="replace_one", value_discretization_interval=1e-3)


def pfld_accounting(spec: AccountingSpec, *, paper_exact: bool) -> AccountingSpec:
    """The spec a PF-LD run is accounted with: ``spec`` (replace-one), or the paper's add/remove bookkeeping."""
    if not isinstance(spec, AccountingSpec):
        raise TypeError(f"accounting must be an AccountingSpec, got {spec!r}")
    if spec.neighboring != "replace_one":
        raise ValueError("PF-LD's neighbours differ in one person's sensitive attribute (replace-one): "
                         f"accounting.neighboring must be 'replace_one', got {spec.neighboring!r}")
    return replace(spec, neighboring="add_remove") if paper_exact else spec


def replace_one_gaussian_event(std_over_distance: float) -> dp_event.GaussianDpEvent:
    """A Gaussian release of replace distance d and noise std s, in the convention of
    dp_accounting's PLD under REPLACE_ONE (which shifts both sides by the 'sensitivity',
    i.e. distance 2): noise multiplier 2 s / d."""
    return dp_event.GaussianDpEvent(2.0 * std_over_distance)


def pfld_schedule_event(*, n: int, batch_size: int, epochs: int, sigma_p: float, sigma_d: float,
                        sigma_c: float, paper_exact: bool = False) -> dp_event.DpEvent:
    """Everything a PF-LD run of this shape releases, as one DpEvent (for calibration).

    Default: counts once, primal steps of epochs 2..E (lambda = 0 in epoch 1), dual
    steps after epochs 1..E-1. ``paper_exact``: the paper's Theorem 5, T n/|B| primal
    steps and T dual steps (add/remove convention).
    """
    q = batch_size / n
    if paper_exact:
        steps = steps_for_epochs(n, batch_size, epochs)
        return dp_event.ComposedDpEvent([
            dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma_p)), steps),
            dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(sigma_d), epochs)])
    parts: list[dp_event.DpEvent] = [replace_one_gaussian_event(sigma_c)]
    primal_steps = steps_for_epochs(n, batch_size, epochs) - steps_for_epochs(n, batch_size, 1)
    if primal_steps > 0:
        parts.append(dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma_p)), primal_steps))
    if epochs > 1:
        parts.append(dp_event.SelfComposedDpEvent(replace_one_gaussian_event(sigma_d), epochs - 1))
    return dp_event.ComposedDpEvent(parts)


def pfld_epsilon(event: dp_event.DpEvent, delta: float, *, accounting: AccountingSpec = PFLD_ACCOUNTING,
                 paper_exact: bool = False) -> float:
    """Epsilon of a PF-LD ledger event at ``delta`` under :func:`pfld_accounting` of ``accounting``."""
    return epsilon_from_event(event, check_delta(delta), accounting=pfld_accounting(accounting,
                                                                                   paper_exact=paper_exact))


def calibrate_pfld_noise(*, n: int, batch_size: int, epochs: int, epsilon: float, delta: float,
                         dual_noise_ratio: float = 4.0, count_noise_ratio: float = 4.0,
                         accounting: AccountingSpec = PFLD_ACCOUNTING, paper_exact: bool = False) -> dict[str, float]:
    """Smallest sigma_p (with sigma_d, sigma_c at fixed ratios to it) meeting (epsilon, delta).

    One shared multiplier with fixed ratios: the dual and count releases are sums over the
    whole data, so a large multiplier costs them little accuracy; the default ratios (4)
    leave most of the budget to the primal steps. Uses
    ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` over
    :func:`pfld_schedule_event`; the result is checked against the target.
    """
    epsilon, delta = check_positive(epsilon, "epsilon"), check_delta(delta)
    spec = pfld_accounting(accounting, paper_exact=paper_exact)

    def schedule(sigma: float) -> dp_event.DpEvent:
        return pfld_schedule_event(n=n, batch_size=batch_size, epochs=epochs, sigma_p=sigma,
                                   sigma_d=dual_noise_ratio * sigma, sigma_c=count_noise_ratio * sigma,
                                   paper_exact=paper_exact)

    sigma = float(mechanism_calibration.calibrate_dp_mechanism(
        spec.make_accountant, lambda s: spec.accountable(schedule(s)), epsilon, delta,
        bracket_interval=mechanism_calibration.LowerEndpointAndGuess(0.05, 1.0), tol=1e-3))
    achieved = epsilon_from_event(schedule(sigma), delta, accounting=spec)
    if achieved > epsilon * (1 + 1e-6):
        raise RuntimeError(f"calibration returned sigma={sigma} with epsilon {achieved} > target {epsilon}")
    return {"primal": sigma, "dual": dual_noise_ratio * sigma, "counts": count_noise_ratio * sigma}
