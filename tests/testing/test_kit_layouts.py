"""Any fixed-shape numeric output is audited without crashing (issue 48, item 2).

Before the fix, an output mixing a continuous coordinate with a discrete one -- a noisy sum beside a
coin, a DP-SGD step beside its batch's group counts -- raised ``ValueError: attempt to get argmax of an
empty sequence`` in ``MixedHistogram.fit`` at every budget, in ``audit`` (pair and search) and in
``audit_step``. Every statistic now either scores a layout or is skipped with a stated reason.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpfair_analysis.testing import AddRemove, audit, audit_step, families, scores

D = np.linspace(-1.0, 1.0, 8)
PAIR = (D, D[:-1])  # the last record (1.0) removed: the sum moves by 1


def mixed(data, rng):
    """The issue's repro: a noisy sum (Laplace, scale 1: 1-DP for a sum of records in [-1, 1]) beside a coin."""
    return np.array([data.sum() + rng.laplace(), float(rng.random() < .5)])


def test_the_mixed_histogram_fits_a_continuous_coordinate_beside_a_discrete_one():
    rng = np.random.default_rng(0)
    out0 = np.stack([mixed(D, rng) for _ in range(300)])
    out1 = np.stack([mixed(D[:-1], rng) for _ in range(300)])
    fitted = scores.MixedHistogram().fit(out0, out1, PAIR)  # raised ValueError (argmax of an empty sequence)
    assert fitted is not None and fitted.score(out0).shape == (300,)


@pytest.mark.parametrize("how", ["pair", "search"])
def test_the_mixed_output_repro_is_audited_and_a_correct_claim_is_consistent(how):
    options = {"pairs": PAIR} if how == "pair" else {"data": D}
    relation = AddRemove(bounds=(-1.0, 1.0))  # the claim's domain: the sum's sensitivity is 1
    result = audit(mixed, 1.0, relation=relation, budget="smoke", seed=0, **options)  # raised before
    assert result.consistent and result.evaluation_trials > 0


def test_a_wrong_claim_on_the_mixed_output_is_refuted():
    result = audit(mixed, 0.25, relation="add-remove", pairs=PAIR, budget="smoke", seed=0)  # true epsilon: 1
    assert not result.consistent and result.epsilon_lower > 0.25


def test_audit_step_scores_a_mixed_release():
    result = audit_step(mixed, data=D, canary=1.0, epsilon=1.0, delta=0.0, budget="smoke", seed=0)  # raised before
    assert result.consistent
    wrong = audit_step(mixed, data=D, canary=1.0, epsilon=0.25, delta=0.0, budget="smoke", seed=0)
    assert not wrong.consistent


def test_a_constant_output_has_no_test_and_says_why():
    result = audit(lambda data, rng: np.array([3.0, 0.0]), 1.0, relation="add-remove", pairs=PAIR, budget="smoke")
    assert result.consistent and result.epsilon_lower == 0.0 and result.evaluation_trials == 0
    assert result.power["can_refute_claim"] is False and "no statistic applies" in result.power["reason"]
    assert "output[0]" in result.skipped and "constant" in result.skipped["output[0]"]


def test_every_skipped_statistic_states_its_reason():
    rng = np.random.default_rng(1)
    out0 = np.c_[rng.normal(size=400), np.zeros(400), rng.random(400) < 0.003]  # continuous, constant, rare
    out1 = np.c_[rng.normal(size=400) + 1, np.zeros(400), rng.random(400) < 0.003]
    outcomes = [s.fit_or_skip(out0, out1, PAIR) for s in families.statistic_family(
        ("threshold", "histogram", "learned"), out0, out1)]
    skipped = [o for o in outcomes if isinstance(o, scores.Skipped)]
    assert {o.name for o in skipped} >= {"output[1]", "-output[1]", "histogram of output[1]"}
    assert all(o.reason for o in skipped)
    assert any(not isinstance(o, scores.Skipped) for o in outcomes)


# ---------------------------------------------------------------------------------------------- layouts
#: Coordinate kinds. Each private one is eps_j-DP under add-remove on records in [-1, 1]; constant and rare
#: ones do not depend on the data (epsilon 0); the whole release is (sum of eps_j)-DP by composition.
KINDS = ("continuous", "coin", "count", "constant", "rare")


def layout_mechanism(kinds, eps_each):
    p = np.exp(eps_each) / (1 + np.exp(eps_each))
    a = np.exp(-eps_each)

    def mechanism(data, rng):
        total = float(np.clip(data, -1, 1).sum())
        out = []
        for kind in kinds:
            if kind == "continuous":    # Laplace sum: sensitivity 1
                out.append(total + rng.laplace(scale=1 / eps_each))
            elif kind == "coin":        # randomised response on a bit of the data
                bit = float(total > 0)
                out.append(bit if rng.random() < p else 1 - bit)
            elif kind == "count":       # two-sided geometric noise on the count: integer values
                out.append(len(data) + rng.geometric(1 - a) - rng.geometric(1 - a))
            elif kind == "constant":
                out.append(3.0)
            else:                       # rare: 1 in about 0.3% of runs, whatever the data
                out.append(float(rng.random() < 0.003))
        return np.array(out)

    return mechanism


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=4), search=st.booleans())
def test_any_layout_of_a_correct_mechanism_is_audited_without_a_false_alarm(kinds, search):
    private = sum(k in ("continuous", "coin", "count") for k in kinds)
    epsilon = 1.0
    mechanism = layout_mechanism(kinds, epsilon / max(private, 1))
    options = {"data": D} if search else {"pairs": PAIR}
    result = audit(mechanism, epsilon, relation="add-remove", budget="smoke", seed=3, **options)
    assert result.consistent, (kinds, result.witness)
    if private == 0 and "rare" not in kinds:  # a constant output: nothing to test, and it says so
        assert result.evaluation_trials == 0 and result.skipped
