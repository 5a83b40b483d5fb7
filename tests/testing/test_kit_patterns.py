"""Pattern statistics for sparse-vector-like outputs (issue 48.1b), and the full-budget catch of plain SVTs."""

from __future__ import annotations

import numpy as np
import pytest

from dpfair_analysis.testing import audit
from dpfair_analysis.testing.auditing import Budget
from dpfair_analysis.testing.patterns import (
    VALUE,
    BlockSum,
    FirstValue,
    PatternPrefix,
    PatternSummary,
    PerPosition,
    ValuesGivenPattern,
    find_codes,
    output_blocks,
    pattern_family,
    symbols,
)
from dpfair_analysis.testing.families import statistic_family
from dpfair_analysis.testing.scores import check_kinds
from dpfair_analysis.testing.zoo import catalogue
from tests.testing import plain_svt


def _first_above(rng: np.random.Generator, n: int, weights: list[float], d: int = 6) -> np.ndarray:
    """Outputs of a cutoff-1 sparse vector: 0 (below) up to the first 1 (above) at a position drawn from
    ``weights`` (len d + 1, the last: never above), then -1 (not answered)."""
    first = rng.choice(d + 1, size=n, p=np.asarray(weights) / np.sum(weights))
    j = np.arange(d)[None, :]
    return np.where(j < first[:, None], 0.0, np.where(j == first[:, None], 1.0, -1.0))


def test_codes_and_symbols_read_any_encoding():
    out = np.array([[0.0, 1.0, -1.0], [0.0, 0.0, 3.7], [1.0, -1.0, -1.0]] * 50)
    codes = find_codes(out)
    assert set(codes) == {0.0, 1.0, -1.0, 3.7}  # 3.7 covers 1/9 of the entries: a code too
    out[1::3, 2] = np.linspace(2, 9, 50)  # released values: no code
    codes = find_codes(out)
    assert set(codes) == {0.0, 1.0, -1.0}
    sym = symbols(out, codes)
    assert np.all(sym[1::3, 2] == VALUE) and np.all(sym[0::3] >= 0)


def test_first_position_puts_the_shifted_cell_on_top():
    rng = np.random.default_rng(0)
    out0 = _first_above(rng, 20_000, [30, 10, 10, 10, 5, 5, 30])
    out1 = _first_above(rng, 20_000, [30, 10, 10, 10, 8, 5, 27])  # position 4 is 1.6x likelier on D'
    codes = find_codes(np.concatenate([out0, out1]))
    above = codes.index(1.0)
    fitted = PatternSummary("first", above, codes).fit_or_skip(out0, out1, None)
    probe = _first_above(rng, 7, [1] * 7)
    cells = np.where((probe == 1.0).any(1), (probe == 1.0).argmax(1), 6)
    assert cells[np.argmax(fitted.score(probe))] == 4 or 4 not in cells
    assert fitted.score(np.array([[0, 0, 0, 0, 1, -1.0]]))[0] > 0.3
    count = PatternSummary("count", codes.index(0.0), codes).fit_or_skip(out0, out1, None)
    assert count.score(np.array([[0, 0, 0, 0, 1, -1.0]]))[0] > 0.3  # four 0s before the first 1


def test_prefix_per_position_and_values_given_pattern_fit_and_score():
    rng = np.random.default_rng(1)
    out0 = _first_above(rng, 5_000, [1] * 7)
    out1 = _first_above(rng, 5_000, [1, 1, 1, 2, 1, 1, 1])
    codes = find_codes(np.concatenate([out0, out1]))
    for statistic in (PatternPrefix(codes), PerPosition(codes)):
        fitted = statistic.fit_or_skip(out0, out1, None)
        assert fitted.score(out0).shape == (5_000,)
        assert fitted.score(np.array([[0, 0, 0, 1, -1, -1.0]]))[0] > 0.3
    # released values: the value at the first "above" is lower on D'
    v0, v1 = out0.copy(), out1.copy()
    v0[v0 == 1.0] = rng.normal(5, 1, size=int((v0 == 1.0).sum()))
    v1[v1 == 1.0] = rng.normal(4, 1, size=int((v1 == 1.0).sum()))
    codes = find_codes(np.concatenate([v0, v1]))
    fitted = ValuesGivenPattern(codes).fit_or_skip(v0, v1, None)
    low, high = np.array([[0, 3.0, -1, -1, -1, -1]]), np.array([[0, 6.0, -1, -1, -1, -1]])
    assert fitted.score(low)[0] > fitted.score(high)[0]
    assert ValuesGivenPattern(find_codes(np.concatenate([out0, out1]))).fit_or_skip(out0, out1, None).reason


def test_first_value_ranks_a_low_value_at_its_position_and_makes_the_ratio_monotone():
    rng = np.random.default_rng(4)
    out0, out1 = _first_above(rng, 8_000, [1] * 7), _first_above(rng, 8_000, [1] * 7)
    for out, shift in ((out0, 0.0), (out1, -1.0)):  # the value at the first "above": lower on D' at position 3
        at = out == 1.0
        out[at] = rng.normal(5, 1, size=int(at.sum())) + shift * (np.nonzero(at)[1] == 3)
    fitted = FirstValue(find_codes(np.concatenate([out0, out1]))).fit_or_skip(out0, out1, None)
    values = np.linspace(2, 8, 25)
    probe = np.zeros((25, 6)) - 1.0
    probe[:, :3], probe[:, 3] = 0.0, values
    scores = fitted.score(probe)
    assert np.all(np.diff(scores) <= 1e-12) and scores[0] > 0.5 > scores[-1]  # monotone, low values say D'
    elsewhere = probe.copy()
    elsewhere[:, 3], elsewhere[:, 1] = -1.0, values
    elsewhere[:, 2] = -1.0
    assert np.abs(fitted.score(elsewhere)).max() < 0.3  # position 1: no shift
    codes = find_codes(np.concatenate([_first_above(rng, 500, [1] * 7)] * 2))
    assert "no released values" in FirstValue(codes).fit_or_skip(*[_first_above(rng, 500, [1] * 7)] * 2,
                                                                  None).reason


def released_at_random_position(data, rng, n):
    """A tight mechanism whose loss lives where :class:`FirstValue` looks: the answer + Lap(1) released at a
    position drawn independently of the data (0.0 elsewhere): 1-DP when the answer moves by 1, and every event
    "value at k > t" has ratio at most e."""
    out = np.zeros((n, 4))
    out[np.arange(n), rng.integers(0, 4, size=n)] = float(np.asarray(data).ravel()[0]) + rng.laplace(size=n)
    return out


def test_first_value_on_a_tight_mechanism_raises_no_false_alarm():
    """Laplace at exactly its claim, audited with the first-value statistic alone on 20 seeds: consistent on
    >= 19 (the bound's confidence is 95% per audit; the monotone fit and the threshold search spend none of it)."""
    small = Budget("small", screen=500, select=3_000, evaluate=6_000, top=2, max_pairs=2, batch_factors=(1, 1, 1))
    alarms = sum(not audit(released_at_random_position, 1.0, relation="queries", pairs=(np.zeros(1), np.ones(1)),
                           batched=True, statistics=(FirstValue((0.0,)),), budget=small, seed=seed).consistent
                 for seed in range(20))
    assert alarms <= 1

def test_outputs_that_are_no_pattern_are_skipped_with_a_reason():
    rng = np.random.default_rng(2)
    continuous = rng.normal(size=(500, 4))
    members = pattern_family(continuous, continuous + 1)
    assert len(members) == 1
    skipped = members[0].fit_or_skip(continuous, continuous + 1, None)
    assert "continuous" in skipped.reason
    one = rng.integers(0, 3, size=(500, 1)).astype(float)
    assert "one output coordinate" in pattern_family(one, one)[0].fit_or_skip(one, one, None).reason


def test_the_family_holds_the_pattern_statistics_by_default():
    rng = np.random.default_rng(3)
    out = _first_above(rng, 1_000, [1] * 7)
    kinds = check_kinds("auto", log_density=None)
    assert "pattern" in kinds
    members = statistic_family(kinds, out, out)
    assert any(m.kind == "pattern" for m in members)
    assert any(isinstance(m, PatternSummary) and m.which == "first" for m in members)


def test_output_blocks_split_where_the_alphabet_changes():
    rng = np.random.default_rng(5)
    # SVT3's values, -1000 and -2000 beside SVT4's 1, 0 and -1
    svt34 = catalogue()["svt34_parallel"].batched()(np.ones(10), rng, 4_000)
    assert output_blocks(svt34) == [(0, 10), (10, 20)]
    counts = rng.integers(0, 6, size=(4_000, 3)).astype(float)
    noisy_sum_beside_counts = np.c_[rng.laplace(size=4_000), counts]
    assert output_blocks(noisy_sum_beside_counts) == [(0, 1), (1, 4)]
    assert output_blocks(rng.laplace(size=(4_000, 3))) == [(0, 3)]  # continuous throughout: one block
    assert output_blocks(counts) == [(0, 3)]  # one alphabet: one block
    assert [m for m in pattern_family(counts, counts) if isinstance(m, BlockSum)] == []
    assert [m.blocks for m in pattern_family(svt34, svt34) if isinstance(m, BlockSum)] == [((0, 10), (10, 20))]
    assert [m.blocks for m in pattern_family(noisy_sum_beside_counts, noisy_sum_beside_counts)
            if isinstance(m, BlockSum)] == [((0, 1), (1, 4))]


def _two_sparse_vectors(rng: np.random.Generator, n: int, weights: list[float]) -> np.ndarray:
    """Two independent cutoff-1 sparse vectors side by side, the second coded 5/6/7 instead of 0/1/-1."""
    second = _first_above(rng, n, weights)
    return np.c_[_first_above(rng, n, weights), np.select([second == 0, second == 1], [5.0, 6.0], 7.0)]


def test_block_sum_adds_the_blocks_log_ratios_and_finds_their_product_event():
    """Each block alone: 'first above at query 2' has log-ratio log((1.35 / 7.35) / (1 / 7)) = 0.251; the two
    blocks are independent, so the event 'both at query 2' has 0.502 -- the sum the block scores give."""
    rng = np.random.default_rng(11)
    w0, w1 = [1] * 7, [1, 1, 1.35, 1, 1, 1, 1]
    fit0, fit1 = _two_sparse_vectors(rng, 30_000, w0), _two_sparse_vectors(rng, 30_000, w1)
    statistic = BlockSum(tuple(output_blocks(np.r_[fit0, fit1])))
    fitted = statistic.fit_or_skip(fit0, fit1, None)
    assert fitted.name.startswith("blocks' scores summed") and fitted.name.count("of output[") == 2
    fresh0, fresh1 = _two_sparse_vectors(rng, 400_000, w0), _two_sparse_vectors(rng, 400_000, w1)
    s0, s1 = fitted.score(fresh0), fitted.score(fresh1)
    top = s0.max()
    both_at_2 = lambda o: (o[:, 2] == 1) & (o[:, 8] == 6)  # noqa: E731
    assert np.array_equal(s0 >= top - 1e-9, both_at_2(fresh0))  # the largest score is the product event
    ratio = np.log(np.mean(s1 >= top - 1e-9) / np.mean(s0 >= top - 1e-9))
    assert abs(ratio - 2 * np.log(1.35 * 7 / 7.35)) < 0.06, ratio
    assert abs(top - 2 * np.log(1.35 * 7 / 7.35)) < 0.1, top  # the score is the sum of the blocks' log-ratios


def test_block_sum_is_skipped_with_a_reason_on_one_block():
    out = _first_above(np.random.default_rng(2), 1_000, [1] * 7)
    skipped = BlockSum(((0, 6),)).fit_or_skip(out, out, None)
    assert "one block" in skipped.reason


def test_a_plain_sparse_vector_audit_names_a_pattern_or_coordinate_event_at_a_small_budget():
    small = Budget("small", screen=1_000, select=6_000, evaluate=6_000, top=2, max_pairs=4)
    result = audit(plain_svt.svt1, 0.1, relation="queries", pairs=plain_svt.WITNESS, budget=small, seed=0)
    assert result.consistent
    w = result.witness
    assert 0 < w["false_positives"] < result.evaluation_trials and 0 < w["false_negatives"] < result.evaluation_trials


@pytest.mark.slow
@pytest.mark.parametrize("name", ["svt4", "svt5", "svt6"])
def test_full_budget_refutes_incorrect_plain_sparse_vectors(name):
    """Lyu et al.'s incorrect variants as a user writes them (one output per call), claimed epsilon 0.1, on the
    witness pair: refuted at the full budget (SVT4's true epsilon is 0.175; before issue 48 it stayed consistent
    with a degenerate test)."""
    result = audit(getattr(plain_svt, name), 0.1, relation="queries", pairs=plain_svt.WITNESS, budget="full")
    assert not result.consistent, result.witness


@pytest.mark.slow
def test_full_budget_correct_plain_sparse_vector_is_consistent_with_a_positive_bound_and_a_named_event():
    result = audit(plain_svt.svt1, 0.1, relation="queries", pairs=plain_svt.WITNESS, budget="full")
    assert result.consistent and result.epsilon_lower > 0 and result.no_power is None
    assert "> -4.9" not in result.witness["event"]


@pytest.mark.slow
def test_full_budget_refutes_a_plain_svt3():
    """Lyu et al.'s Alg. 3 (releases its noisy answer) as a user writes it, claimed 0.1, on the witness pair:
    refuted at the full budget on seed 0 (with 360,000 selection runs, before a plain function's selection grew
    20-fold: epsilon_lower 0.141; seeds 1-4: 0.106, 0.076, 0.098, 0.125 -- 3 of 5 seeds refute; the best event at
    1 M runs per side gives 0.17). Before: 0.095 -- its strong events, 'first above at query 6 with a low value' (P ~ 0.3%),
    were found neither by the released values' logistic fit nor on the 50,000 selection runs; now the first
    released value by position (monotone ratio) on the pooled screening runs finds them."""
    result = audit(plain_svt.svt3, 0.1, relation="queries", pairs=plain_svt.WITNESS, budget="full")
    assert not result.consistent, result.witness  # reported by whichever test of the evaluated family bounds highest
