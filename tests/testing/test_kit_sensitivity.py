"""assert_sensitivity finds and shrinks counterexamples; find_sensitivity finds the worst change."""

import math

import numpy as np
import pytest
from hypothesis import strategies as st

from dpfair_analysis.testing import (
    ReplaceOne,
    SensitivityViolation,
    assert_sensitivity,
    find_sensitivity,
    find_violation,
)
from dpfair_analysis.testing.sensitivity import distance

VALUES = st.lists(st.floats(-3, 3), min_size=1, max_size=8).map(lambda v: np.asarray(v, dtype=float))


def clipped_sum(data):
    return np.clip(np.asarray(data, dtype=float), -1.0, 1.0).sum()


def test_a_replace_one_claim_that_forgets_the_sign_flip_fails_with_a_shrunk_pair():
    with pytest.raises(SensitivityViolation) as failure:
        assert_sensitivity(clipped_sum, 1.0, relation="replace-one", norm=1, data=VALUES)
    error = failure.value
    assert error.ratio == pytest.approx(2.0) and error.observed == pytest.approx(2.0)
    # shrunk to two records: the replacement keeps to the data's observed range, which must hold both signs
    assert error.change.kind == "replace" and len(error.data) == 2
    assert abs(error.change.before) >= 1 and abs(error.change.after) >= 1
    assert "ratio 2" in str(error)
    with pytest.raises(SensitivityViolation) as anywhere:  # any record values: one record and a far point
        assert_sensitivity(clipped_sum, 1.0, relation=ReplaceOne(domain="any"), norm=1, data=VALUES)
    assert len(anywhere.value.data) == 1 and anywhere.value.ratio == pytest.approx(2.0)


def test_the_correct_bound_passes_and_the_search_reaches_it():
    report = assert_sensitivity(clipped_sum, 2.0, relation="replace-one", mechanism="laplace", data=VALUES)
    assert report.sensitivity == pytest.approx(2.0)
    assert find_sensitivity(clipped_sum, relation="replace-one", norm=1, data=VALUES).sensitivity == pytest.approx(2.0)


def test_add_remove_of_the_clipped_sum_is_one():
    assert find_sensitivity(clipped_sum, relation="add-remove", norm=1, data=VALUES).sensitivity == pytest.approx(1.0)
    assert_sensitivity(clipped_sum, 1.0, relation="add-remove", norm=1, data=VALUES)


def group_means(data):
    """Per-group mean of clipped x (two groups; 0 for an empty group): the release of paper 003's dual step."""
    x, g = np.clip(data["X"][:, 0], -1, 1), data["group"]
    return np.array([x[g == k].mean() if np.any(g == k) else 0.0 for k in (0, 1)])


def printed_bound(d, d2):
    """A printed-style claim: sqrt(2) C / (smallest group - 1), C = 1 (infinite for a group of one)."""
    smallest = min(np.count_nonzero(d["group"] == k) for k in (0, 1))
    return math.sqrt(2) / (smallest - 1) if smallest > 1 else None


def test_attribute_change_search_breaks_a_printed_group_mean_bound():
    with pytest.raises(SensitivityViolation) as failure:
        assert_sensitivity(group_means, printed_bound, relation="attribute-change", mechanism="gaussian",
                           examples=500)
    error = failure.value
    assert error.ratio > 1 and error.change.kind == "attribute"
    assert len(error.data["group"]) <= 12


def test_the_default_search_includes_the_canary_families():
    # a claim of 0 is broken by any pair that changes the release at all; the canary pairs are dicts
    with pytest.raises(SensitivityViolation):
        assert_sensitivity(lambda d: d["X"].sum(), 1e-9, relation="add-remove", norm=1, examples=50)


def test_norms_and_errors():
    assert distance([0, 0], [3, 4], 2) == 5 and distance([0, 0], [3, 4], "l1") == 7
    assert distance([0, 0], [3, 4], math.inf) == 4
    with pytest.raises(ValueError, match="norm"):
        distance([0], [1], 0.5)
    with pytest.raises(ValueError, match="one shape"):
        distance([0, 0], [1], 2)
    with pytest.raises(ValueError, match="release_fn raised ZeroDivisionError"):
        assert_sensitivity(lambda d: 1 / 0, 1.0, relation="replace-one", norm=1, data=VALUES, examples=5)
    with pytest.raises(ValueError, match="bound"):
        assert_sensitivity(clipped_sum, -1.0, relation="replace-one", norm=1, data=VALUES)


def test_find_violation_is_deterministic_and_reports_the_worst_ratio():
    strategy = st.floats(0, 10)
    runs = [find_violation(strategy, lambda x: x / 20, examples=50) for _ in range(2)]
    assert runs[0] == runs[1] and runs[0][0] is None and 0 < runs[0][1] <= 0.5
    found, ratio, _ = find_violation(strategy, lambda x: x / 5, examples=200)
    assert found is not None and ratio == found / 5 > 1
    seeded = [find_violation(strategy, lambda x: x / 20, examples=30, seed=3)[1] for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_find_violation_draws_depend_on_the_seed_alone(monkeypatch):
    # hypothesis mixes constants of the loaded modules into its draws (and caches them per choice type): a search,
    # the kit's or the claims registry's, must draw the same examples whatever the process imported or drew before
    from hypothesis import find, settings
    from hypothesis.errors import NoSuchExample
    from hypothesis.internal.cache import LRUCache
    from hypothesis.internal.conjecture import providers

    strategy, planted = st.integers(-10**6, 10**6), {123_457, -987_653}

    def draws(search):
        seen = []
        search(lambda x: seen.append(x) or False)
        return seen

    def kit(condition):
        find_violation(strategy, lambda x: condition(x) or 0.0, examples=300, shrink=False)

    def plain_hypothesis(condition):
        with pytest.raises(NoSuchExample):
            find(strategy, condition, settings=settings(max_examples=300, derandomize=True, database=None))

    monkeypatch.setattr(providers, "CONSTANTS_CACHE", LRUCache(1024))
    alone = draws(kit)
    monkeypatch.setattr(providers, "_get_local_constants", lambda: providers.Constants(integers=set(planted)))
    assert planted & set(draws(plain_hypothesis))  # hypothesis itself draws the planted constants, and caches them
    assert draws(kit) == alone and not planted & set(alone)


def per_group_counts(attribute):
    """Members of group 0 and of group 1: one person changing group moves them by (-1, +1)."""
    return np.bincount(np.asarray(attribute), minlength=2).astype(float)


def test_a_sensitivity_claim_states_its_norm():
    """Issue 48.4: per-group counts claimed at sensitivity 1.5 under attribute change passed under the silent
    default norm=2 (their l2 change is sqrt 2); the Laplace mechanism needs the l1 change, 2. Before the change
    the call without a norm passed; now it is a TypeError naming norm=, and the claim fails in l1."""
    data = np.array([0, 0, 1, 1, 1])
    with pytest.raises(TypeError, match=r"norm=.*mechanism="):
        assert_sensitivity(per_group_counts, 1.5, relation="attribute-change", data=data, examples=20)
    with pytest.raises(TypeError, match="norm="):
        find_sensitivity(per_group_counts, relation="attribute-change", data=data, examples=20)
    with pytest.raises(SensitivityViolation, match="_1 = 2") as failure:
        assert_sensitivity(per_group_counts, 1.5, relation="attribute-change", mechanism="laplace", data=data,
                           examples=20)
    assert failure.value.observed == pytest.approx(2.0)
    assert_sensitivity(per_group_counts, 1.5, relation="attribute-change", mechanism="gaussian", data=data,
                       examples=20)  # sqrt 2 <= 1.5: the Gaussian mechanism's claim holds
    assert_sensitivity(per_group_counts, 2.0, relation="attribute-change", norm=1, data=data, examples=20)


@pytest.mark.parametrize("options,error,match", [
    ({"mechanism": "cauchy"}, ValueError, "mechanism must be one of"),
    ({"mechanism": "laplace", "norm": 2}, ValueError, "disagrees"),
    ({"norm": 0.5}, ValueError, "norm"),
])
def test_a_bad_norm_or_mechanism_names_itself(options, error, match):
    with pytest.raises(error, match=match):
        assert_sensitivity(clipped_sum, 1.0, relation="replace-one", data=VALUES, examples=5, **options)


# ----------------------------------------------------------------------------- the bound (an adversarial review)
# Each test below failed before the change: a bound that was NaN (or inf) on every pair passed without checking
# one, a constant inf bound passed, a negative data-dependent bound passed, and np.int64(100) was refused.
BASE = np.linspace(-10.0, 10.0, 8)


def total(data):
    return float(np.sum(data))


@pytest.mark.parametrize("bound", [lambda a, b: float("nan"), lambda a, b: np.float64(np.nan),
                                   lambda a, b: -1.0, lambda a, b: "one"], ids=["nan", "numpy-nan", "negative", "str"])
def test_a_bad_bound_on_a_pair_is_bad_input_naming_the_pair(bound):
    with pytest.raises(ValueError, match=r"bound\(D, D'\) returned .* on D = \[-10"):
        assert_sensitivity(total, bound, relation="add-remove", norm=1, data=BASE, examples=20, seed=0)


@pytest.mark.parametrize("bound", [float("nan"), math.inf, 0.0, -1.0, True, "1"])
def test_a_bad_constant_bound_is_refused_by_name(bound):
    with pytest.raises(ValueError, match="bound must be a finite number > 0"):
        assert_sensitivity(total, bound, relation="add-remove", norm=1, data=BASE, examples=5, seed=0)


def test_a_check_that_checked_no_pair_does_not_pass():
    from dpfair_analysis.testing import NothingChecked

    with pytest.raises(NothingChecked, match="no pair was checked") as failure:
        assert_sensitivity(total, lambda a, b: math.inf, relation="add-remove", norm=1, data=BASE, examples=20,
                           seed=0)
    assert failure.value.report.checked == 0 and failure.value.report.tried > 0
    assert isinstance(failure.value, AssertionError)


def test_pairs_with_an_infinite_bound_are_tried_not_checked():
    def only_removals(a, b):  # the claim covers removals only
        return 10.0 if len(b) < len(a) else None

    report = assert_sensitivity(total, only_removals, relation="add-remove", norm=1, data=BASE, examples=40, seed=0)
    assert 0 < report.checked < report.tried


@pytest.mark.parametrize("bound", [np.int64(100), np.float32(100.0), np.uint8(100), 100])
def test_numpy_scalars_are_bounds(bound):
    report = assert_sensitivity(total, bound, relation="add-remove", norm=1, data=np.linspace(-1, 1, 8),
                                examples=20, seed=0)
    assert report.checked == report.tried > 0
