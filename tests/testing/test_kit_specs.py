"""An audit as data (:mod:`dpfair_analysis.testing.specs`): the kit's one engine for audits whose pair and score are
known -- every audit the toolkit ships runs through it. Numpy only, seconds."""

import numpy as np
import pytest

from dpfair_analysis.testing import AuditResult, AuditSpec, MechanismSamples, audit_spec, epsilon_lower_bound

EPSILON = 1.0


def laplace_count(trials, *, seed, noise_fraction, progress=False):
    """count(D) = 10, count(D') = 11, released with Laplace(noise_fraction / epsilon): epsilon-DP at full noise."""
    rng = np.random.default_rng(seed)
    scale = noise_fraction / EPSILON
    return MechanismSamples(scores_without=10 + rng.laplace(scale=scale, size=trials),
                            scores_with=11 + rng.laplace(scale=scale, size=trials), epsilon_claimed=EPSILON,
                            delta=0.0, neighbouring="add-remove", setting={"scale": scale})


SPEC = AuditSpec("laplace-count", "a Laplace count", laplace_count, default_trials=20_000)


def test_a_correct_spec_is_consistent_and_its_twin_is_caught():
    shipped = audit_spec(SPEC, seed=0)
    twin = audit_spec(SPEC, seed=0, noise_fraction=0.25)
    assert isinstance(shipped, AuditResult) and shipped.mechanism == "laplace-count"
    assert shipped.consistent and SPEC.as_expected(shipped)
    assert not twin.consistent and SPEC.as_expected(twin) and twin.noise_fraction == 0.25
    assert twin.epsilon_lower > EPSILON and twin.epsilon_claimed == EPSILON  # same claim, a quarter of the noise


def test_the_bound_is_the_held_out_tests_and_the_result_states_its_power():
    """The first half of each side chooses the threshold, the second half is counted: epsilon_lower is the kit's
    Clopper-Pearson bound of those counts; the power is the bound of zero errors at that many runs."""
    result = audit_spec(SPEC, trials=2_000, seed=1)
    w = result.witness
    assert result.trials == 4_000 and result.evaluation_trials == 1_000 and result.relation == "add-remove"
    assert result.epsilon_lower == pytest.approx(float(epsilon_lower_bound(
        w["false_positives"], 1_000, w["false_negatives"], 1_000, delta=0.0, confidence=0.95)))
    zero_errors = float(epsilon_lower_bound(0, 1_000, 0, 1_000, delta=0.0, confidence=0.95))
    assert result.certifiable_epsilon == pytest.approx(zero_errors) == result.power["largest_certifiable_epsilon"]
    assert result.power["can_refute_claim"] and result.no_power is None
    assert result.setting == {"scale": 1.0}


def test_too_few_runs_to_refute_the_claim_say_no_power():
    result = audit_spec(SPEC, trials=8, seed=0)
    assert result.certifiable_epsilon < EPSILON and not result.power["can_refute_claim"]
    assert "no result of this audit could refute it" in result.no_power


def test_same_seed_same_result_whatever_the_time_it_took():
    assert audit_spec(SPEC, trials=400, seed=3) == audit_spec(SPEC, trials=400, seed=3)
    assert audit_spec(SPEC, trials=400, seed=3) != audit_spec(SPEC, trials=400, seed=4)


def test_controls_must_be_refuted():
    broken = AuditSpec("broken", "a known-broken design", laplace_count, 20_000, expected_consistent=False)
    twin = AuditSpec("twin", "a twin", laplace_count, 20_000, noise_fraction=0.25, base="laplace-count")
    assert broken.control and twin.control and not SPEC.control
    # the broken control's audit at full noise is consistent: not as expected (the audit had no power over it)
    assert not broken.as_expected(audit_spec(broken, seed=0))
    assert twin.as_expected(audit_spec(twin, seed=0))  # the twin runs at its own noise fraction


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(trials=7), ValueError, "trials must be an integer >= 8"),
    (dict(trials=10.0), ValueError, "trials"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(noise_fraction=0.0), ValueError, "noise_fraction"),
    (dict(noise_fraction=1.5), ValueError, "noise_fraction"),
    (dict(confidence=1.0), ValueError, "confidence"),
])
def test_bad_arguments_are_refused_by_name_before_anything_runs(kwargs, error, match):
    def never(*args, **kw):
        raise AssertionError("the mechanism ran")

    with pytest.raises(error, match=match):
        audit_spec(AuditSpec("never", "never runs", never, 100), **kwargs)
    with pytest.raises(TypeError, match="spec must be an AuditSpec"):
        audit_spec(laplace_count)
