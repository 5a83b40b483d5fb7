"""The reference mechanisms are what their papers say: exact privacy where it is known, one interface."""

import math
from collections import Counter

import numpy as np
import pytest
from dp_accounting import dp_event

from dpfair_analysis.privacy.accounting import AccountingSpec, epsilon_from_event
from dpfair_analysis.privacy.gaussian import gaussian_sigma_analytic
from dpfair_analysis.testing.zoo import (
    catalogue,
    geometric_epsilon,
    rappor_epsilon,
    truncated_geometric,
)

ZOO = catalogue()


def truncated_geometric_pmf(count: int, people: int = 5, epsilon: float = 0.1) -> np.ndarray:
    """The truncated geometric mechanism's distribution in closed form (Ghosh, Roughgarden & Sundararajan 2009):
    P(z) = (1 - a)/(1 + a) a^|z - c| inside, a^c / (1 + a) at 0 and a^(n - c) / (1 + a) at n, with
    a = 1 / (1 + 2^-k), k = ceil(ln(2 / epsilon)) -- what GeoSample samples with integers only."""
    a = 1 / (1 + 2.0 ** -math.ceil(math.log(2.0 / epsilon)))
    inside = [(1 - a) / (1 + a) * a ** abs(z - count) for z in range(1, people)]
    return np.array([a ** count / (1 + a), *inside, a ** (people - count) / (1 + a)])


def test_truncated_geometric_samples_the_closed_form_with_the_privacy_of_balcer_and_vadhan():
    worst = max(abs(math.log(p / q)) for c in range(5)
                for p, q in zip(truncated_geometric_pmf(c), truncated_geometric_pmf(c + 1)))
    assert worst == pytest.approx(geometric_epsilon(0.1), rel=1e-9)
    for count in (0, 2, 5):
        draws = truncated_geometric(np.array([float(count)]), np.random.default_rng(count), 400_000)
        observed = np.bincount(draws.astype(int), minlength=6) / 400_000
        assert np.allclose(observed, truncated_geometric_pmf(count), atol=0.004)


def test_analytic_gaussian_calibration_meets_its_target_exactly():
    sigma = gaussian_sigma_analytic(1.0, 1e-5, 1.0)  # the zoo's Gaussian draws with it
    pld = epsilon_from_event(dp_event.GaussianDpEvent(sigma), 1e-5, accounting=AccountingSpec(accountant="pld"))
    assert pld == pytest.approx(1.0, abs=2e-3)
    assert 3.0 < sigma < 4.5


def test_rappor_epsilon_formula():
    assert rappor_epsilon(4, 0.95) == pytest.approx(8 * math.log(0.525 / 0.475))


@pytest.mark.parametrize("name", sorted(ZOO))
def test_every_entry_has_one_interface_and_valid_inputs(name):
    z = ZOO[name]
    batch = z.batched()(z.data, np.random.default_rng(3), 4)
    single = z.single()(z.data, np.random.default_rng(3))
    assert batch.shape[0] == 4 and np.shape(single) == batch.shape[1:]
    assert np.all(np.isfinite(batch))
    pairs = z.relation.candidates(z.data, rng=np.random.default_rng(0), limit=4)
    for a, b in pairs:
        z.relation.check(a, b)
    assert z.correct == (z.true_epsilon is not None and z.true_epsilon <= z.epsilon + 1e-12) or z.name == "rappor"


def test_a_plain_form_has_the_batched_forms_distribution():
    """svt2's plain loop against its batched code: the distribution of the output pattern (first positive answer's
    position, or none) on an input where every position has mass, 40,000 runs each, chi-square p > 1e-3 (seeds
    fixed), and the cutoff (-1 after the first positive answer) in every plain output."""
    from scipy.stats import chi2_contingency

    z, data = ZOO["svt2"], np.array([1.0, 0.0] * 5)
    assert z.plain is not None
    batched = z.batched()(data, np.random.default_rng(0), 40_000)
    rng = np.random.default_rng(1)
    plain = np.stack([z.single()(data, rng) for _ in range(40_000)])

    def pattern(out: np.ndarray) -> np.ndarray:
        hit = out == 1.0
        return np.where(hit.any(1), hit.argmax(1), len(data))

    for out in (batched, plain):
        first = pattern(out)
        after = np.arange(len(data))[None, :] > first[:, None]
        assert np.all(out[after] == -1.0) and np.all(np.isin(out[~after], (0.0, 1.0)))
    counts = np.array([np.bincount(pattern(out), minlength=len(data) + 1) for out in (batched, plain)])
    assert chi2_contingency(counts[:, counts.sum(0) > 0]).pvalue > 1e-3


SPECIAL_CODES = (-2000.0, -1000.0, -1.0, 0.0, 1.0)


@pytest.mark.parametrize("name", [n for n, z in ZOO.items() if z.plain is not None and n != "svt2"])
def test_every_plain_loop_has_the_batched_forms_distribution(name):
    """Each sparse vector's one-output loop against its batched code on an input where every position has mass,
    30,000 runs each (seeds fixed): the joint pattern of codes (released value, above/below, cut off; patterns seen
    fewer than 20 times pooled) by a chi-square test, and the released values by a two-sample Kolmogorov-Smirnov test, both p > 1e-3."""
    from scipy.stats import chi2_contingency, ks_2samp

    z, data, n = ZOO[name], np.array([1.0, 0.0] * 5), 30_000
    batched = z.batched()(data, np.random.default_rng(0), n)
    rng = np.random.default_rng(1)
    plain = np.stack([z.single()(data, rng) for _ in range(n)])
    assert plain.shape == batched.shape

    def patterns(out: np.ndarray) -> list[bytes]:
        codes = np.where(np.isin(out, SPECIAL_CODES), out, 7.0)  # 7: a released (noisy) value
        return [row.tobytes() for row in codes]

    tallies = [Counter(patterns(out)) for out in (batched, plain)]
    kinds = sorted(set(tallies[0]) | set(tallies[1]))
    counts = np.array([[tally[k] for k in kinds] for tally in tallies])
    frequent = counts.sum(0) >= 20  # the rare patterns (2^10 of them without a cutoff) pooled into one cell
    table = np.column_stack([counts[:, frequent], counts[:, ~frequent].sum(1)])
    assert chi2_contingency(table[:, table.sum(0) > 0]).pvalue > 1e-3
    values = [out[~np.isin(out, SPECIAL_CODES)] for out in (batched, plain)]
    assert (len(values[0]) > 0) == (len(values[1]) > 0)
    if len(values[0]):
        assert ks_2samp(*values).pvalue > 1e-3


@pytest.mark.parametrize("name", [n for n, z in ZOO.items() if z.plain is not None and n != "svt2"])
def test_a_plain_loop_draws_the_batched_codes_numbers(name):
    """The loops draw their noise in the batched code's order: the same seed gives the batched code's output at
    n = 1, run after run (so the audits of the plain forms are those recorded with the batched code at n = 1)."""
    z = ZOO[name]
    data = np.array([1.0, 0.0] * 5)
    loop, batched = np.random.default_rng(7), np.random.default_rng(7)
    for _ in range(300):
        assert np.array_equal(z.single()(data, loop), z.batched()(data, batched, 1)[0])
