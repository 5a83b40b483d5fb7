"""F-LD / PF-LD training (paper 003 Alg. 1, Eqs. 10, 13) and its privacy accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import rdp_privacy_accountant

from dpfair_analysis.fairness.constraints import make_constraint
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import AccountingSpec, ledger_from_records
from dpfair_analysis.privacy.pfld_accounting import PFLD_ACCOUNTING, calibrate_pfld_noise, pfld_epsilon, \
    pfld_schedule_event
from dpfair_analysis.privacy.sensitivity import PrivacyNotEstablishedWarning
from dpfair_analysis.training.lagrangian import LagrangianConfig, PrivateState, private_primal_step, \
    train_lagrangian
from lagrangian_data import biased_data

COARSE_PLD = AccountingSpec(accountant="pld", neighboring="replace_one", value_discretization_interval=1e-2)


DATA = biased_data()
DP = make_constraint("dp", n_groups=2, group_names=("a", "b"))


def run(**overrides):
    options = dict(method="fld", epochs=6, batch_size=64, lr=0.2, dual_lr=5.0, lambda_max=10.0, seed=0)
    options.update(overrides)
    model = build_model("mlp", input_shape=(3,), n_classes=2, seed=0, hidden=(8,))
    return train_lagrangian(model, DATA, DP, LagrangianConfig(**options), progress=False)


def test_fld_reduces_violation_against_unconstrained():
    free = run(dual_lr=1e-9)  # multipliers stay ~0: plain SGD
    fair = run()
    v_free = free.per_epoch()["train_violation"].iloc[-1]
    v_fair = fair.per_epoch()["train_violation"].iloc[-1]
    assert v_free > 0.4  # the data are strongly biased
    assert v_fair < 0.5 * v_free
    assert float(fair.lambdas.max()) > 1.0 and free.epsilon is None and len(free.ledger) == 0


def test_pfld_epsilon_is_recomputed_from_the_recorded_events():
    result = run(method="pfld", noise_multiplier=1.5, epochs=3)
    assert result.privacy_established
    events = ledger_from_records(result.ledger.to_records()).event
    acct = pld_privacy_accountant.PLDAccountant(NeighboringRelation.REPLACE_ONE, value_discretization_interval=1e-3)
    acct.compose(events)
    assert result.epsilon == pytest.approx(acct.get_epsilon(1e-5), rel=1e-9)
    # what was released: the counts once, primal steps only once some lambda > 0 (epochs 2-3), one
    # dual step after epochs 1 and 2, each with the stated multipliers
    steps = result.steps
    q = 64 / len(DATA)
    n_primal = int(steps["released"].sum())
    assert n_primal == int(steps["step"].gt(math.ceil(len(DATA) / 64)).sum())
    runs = result.ledger.runs
    primal = [(e, k) for e, k in runs if isinstance(e, dp_event.PoissonSampledDpEvent)]
    assert sum(k for _, k in primal) == n_primal
    assert all(e == dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(1.5)) for e, _ in primal)
    gauss = [(e, k) for e, k in runs if isinstance(e, dp_event.GaussianDpEvent)]
    assert sorted(e.noise_multiplier for e, k in gauss for _ in range(k)) == [2 * 6.0] * 3  # 2 * ratio 4 * 1.5
    released = steps[steps["released"]]
    assert np.allclose(released["noise_std"], 1.5 * released["delta1"])
    # the RDP route: every release as a plain Gaussian of its replace distance (no amplification)
    sigma_eff = (n_primal / (1.5 / 2) ** 2 + 3 / 6.0 ** 2) ** -0.5
    rdp = rdp_privacy_accountant.RdpAccountant()
    rdp.compose(dp_event.GaussianDpEvent(sigma_eff))
    rdp_replace_one = AccountingSpec(neighboring="replace_one")
    assert pfld_epsilon(result.ledger.event, 1e-5, accounting=rdp_replace_one) == pytest.approx(rdp.get_epsilon(1e-5),
                                                                                                rel=1e-6)
    assert pfld_epsilon(result.ledger.event, 1e-5, accounting=PFLD_ACCOUNTING) < rdp.get_epsilon(1e-5)
    # the trainer's own epsilon is the ledger's, incrementally, under its config's spec
    assert result.epsilon == pfld_epsilon(result.ledger.event, 1e-5, accounting=result.config.accounting)


def test_pfld_calibrated_run_spends_its_target():
    result = run(method="pfld", epsilon=2.0, epochs=3, accounting=COARSE_PLD)
    assert result.epsilon <= 2.0 * (1 + 1e-6)
    assert result.epsilon > 1.8  # the schedule releases what the calibration assumed
    eps = result.per_epoch()["epsilon"].to_numpy()
    assert (np.diff(eps) >= -1e-12).all() and eps[0] > 0  # the count release is spent first


def test_calibration_is_the_smallest_multiplier():
    kw = dict(n=600, batch_size=64, epochs=3, delta=1e-5)
    sigmas = calibrate_pfld_noise(epsilon=1.0, accounting=COARSE_PLD, **kw)
    at = lambda s: pfld_epsilon(pfld_schedule_event(sigma_p=s, sigma_d=4 * s, sigma_c=4 * s, n=600, batch_size=64,
                                                    epochs=3), 1e-5, accounting=COARSE_PLD)
    assert at(sigmas["primal"]) <= 1.0 + 1e-9 < at(0.98 * sigmas["primal"])
    assert sigmas["dual"] == pytest.approx(4 * sigmas["primal"])


def test_paper_exact_warns_and_is_not_established():
    with pytest.warns(PrivacyNotEstablishedWarning):
        result = run(method="pfld", noise_multiplier=1.0, epochs=2, paper_exact=True,
                     accounting=AccountingSpec(neighboring="replace_one"))
    assert not result.privacy_established
    assert result.final()["method"] == "pfld-paper"


def test_missing_values_and_determinism():
    a = run(method="pfld", noise_multiplier=1.0, epochs=2, missing_rate=0.6)
    b = run(method="pfld", noise_multiplier=1.0, epochs=2, missing_rate=0.6)
    assert 0.3 < a.reported_fraction < 0.5
    assert a.history.equals(b.history) and a.epsilon == b.epsilon
    # non-reporters are in no group subset: the noisy denominators estimate the reporting counts
    reporting = (DATA.group_sizes().double() * a.reported_fraction).numpy()
    assert np.allclose(a.info["denominators"], reporting, rtol=0.6)


@pytest.mark.parametrize("kwargs,match", [
    ({"method": "xx"}, "method must be one of"),
    ({"clip_primal": -1.0}, "clip_primal must be a positive"),
    ({"missing_rate": 1.0}, "missing_rate must be in"),
    ({"delta": 0.0}, "delta must be in"),
    ({"public_batch": "same"}, "public_batch must be one of"),
])
def test_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LagrangianConfig(**kwargs)


# ----------------------------------------------------------- the public part's own batch
def _outlier_step(*, include_outlier: bool, shared: bool) -> torch.Tensor:
    """theta after one primal step whose private batch does or does not hold an outlier.

    The outlier reports no group (contribution 0 to every group sum) and has a public
    feature of 300 (a z-scored one-hot column held by one person in ~90,000). The public
    batch (independent mode) is the same for both calls, and so are the noise draws.
    """
    model = build_model("logreg", input_shape=(3,), n_classes=2, seed=0)
    base_X, base_y, base_g = DATA.X[:40], DATA.y[:40], DATA.group[:40]
    outlier = torch.tensor([[300.0, 0.0, 0.0]])
    X = torch.cat([base_X, outlier]) if include_outlier else base_X
    y = torch.cat([base_y, torch.tensor([1])]) if include_outlier else base_y
    g = torch.cat([base_g, torch.tensor([0])]) if include_outlier else base_g
    reported = torch.ones(len(y), dtype=torch.bool)
    if include_outlier:
        reported[-1] = False
    state = PrivateState(lambdas=torch.tensor([1.0, 1.0], dtype=torch.float64),
                         signs=torch.tensor([1.0, -1.0], dtype=torch.float64),
                         denominators=torch.tensor([400.0, 200.0], dtype=torch.float64))
    public = None if shared else (DATA.X[100:140], DATA.y[100:140])
    private_primal_step(model, X, y, g, reported=reported, constraint=DP, state=state, sampling_rate=0.1,
                        clip=1.0, sigma_p=1.0, lr=0.1, generator=torch.Generator().manual_seed(5), public=public)
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_independent_public_batch_hides_who_was_sampled():
    """Default PF-LD: whether the outlier is in the private batch leaves no trace in theta
    (its group contribution is 0 and the public part never sees the private batch), so
    the update is the Poisson-sampled Gaussian of the group sums and nothing else."""
    with_outlier, without = _outlier_step(include_outlier=True, shared=False), _outlier_step(
        include_outlier=False, shared=False)
    assert torch.equal(with_outlier, without)


def test_shared_public_batch_reveals_who_was_sampled():
    """The negative control: the un-noised public part on the private batch moves theta by
    far more than the noise when the outlier is sampled (the flaw of issue 10)."""
    moved = (_outlier_step(include_outlier=True, shared=True) - _outlier_step(include_outlier=False,
                                                                               shared=True)).norm()
    # noise std on theta: lr * sigma_p * Delta_1 = 0.1 * 1 * (1 / (0.1 * 200)) = 0.005 per coordinate
    assert moved > 100 * 0.005


def test_shared_batch_control_warns_and_is_not_established():
    with pytest.warns(PrivacyNotEstablishedWarning, match="shared"):
        control = run(method="pfld", noise_multiplier=1.0, epochs=3, public_batch="shared")
    default = run(method="pfld", noise_multiplier=1.0, epochs=3)
    assert not control.privacy_established and default.privacy_established
    assert control.info["public_batch"] == "shared" and default.info["public_batch"] == "independent"
    # same accounting (the control's claim is the one it cannot keep), other batches for the public part
    assert control.epsilon == pytest.approx(default.epsilon, rel=1e-12)
    assert (control.steps["public_batch_size"] == control.steps["batch_size"]).all()
    assert (default.steps["public_batch_size"] != default.steps["batch_size"]).any()
    # the private batches and the noise are drawn from the same streams in both designs
    assert control.steps["batch_size"].equals(default.steps["batch_size"])
