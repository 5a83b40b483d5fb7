"""Fairness constraints as (population, group, h) terms (paper 003 Eq. 1, Examples 1-3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference
from hypothesis import given, strategies as st
from pfld_hypothesis import PROPERTY

from dpfair_analysis.fairness.constraints import make_constraint


def _logits(pred):
    """Logits whose argmax is ``pred`` and whose positive-class probability is 0.8 or 0.2."""
    p = torch.where(torch.tensor(pred) == 1, 0.8, 0.2)
    return torch.stack([torch.log(1 - p), torch.log(p)], dim=1)


Y = torch.tensor([1, 0, 1, 1, 0, 0, 1])
G = torch.tensor([0, 0, 0, 1, 1, 2, 2])
PRED = [1, 0, 0, 1, 1, 0, 0]


def test_terms_of_each_notion():
    dp = make_constraint("dp", n_groups=3, group_names=["a", "b", "c"])
    eo = make_constraint("eo", n_groups=3)
    ap = make_constraint("ap", n_groups=3)
    assert dp.term_names == ("group=a", "group=b", "group=c")
    assert eo.n_terms == 6 and {t.label for t in eo.terms} == {0, 1}
    assert ap.n_terms == 3 and ap.h_bound is None and dp.h_bound == 1.0
    assert not dp.h_signed and dp.max_terms_per_person == 1


def test_violations_by_hand():
    logits = _logits(PRED)
    # dp: positive rates a = 1/3, b = 2/2, c = 0 -> max gap 1
    assert make_constraint("dp", n_groups=3).violation(logits, Y, G) == pytest.approx(1.0)
    # eo: Y=1: a {1,0} 1/2, b {1} 1, c {0} 0 -> 1; Y=0: a {0} 0, b {1} 1, c {0} 0 -> 1
    assert make_constraint("eo", n_groups=3).violation(logits, Y, G) == pytest.approx(1.0)
    # ap: errors a: (0,0,1) 1/3, b: (0,1) 1/2, c: (0,1) 1/2 -> 1/6
    assert make_constraint("ap", n_groups=3).violation(logits, Y, G) == pytest.approx(1 / 6)


def test_two_group_violations_match_fairlearn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    g = rng.integers(0, 2, 200)
    pred = rng.integers(0, 2, 200)
    logits = _logits(pred.tolist())
    yt, gt = torch.tensor(y), torch.tensor(g)
    assert make_constraint("dp", n_groups=2).violation(logits, yt, gt) == pytest.approx(
        demographic_parity_difference(y, pred, sensitive_features=g))
    assert make_constraint("eo", n_groups=2).violation(logits, yt, gt) == pytest.approx(
        equalized_odds_difference(y, pred, sensitive_features=g))


def test_term_gaps_and_soft_h():
    dp = make_constraint("dp", n_groups=3)
    h = dp.h(_logits(PRED), Y)
    assert torch.allclose(h, torch.tensor([0.8, 0.2, 0.2, 0.8, 0.8, 0.2, 0.2]))
    gaps = dp.term_gaps(h.double(), Y, G)
    mu = (0.8 * 3 + 0.2 * 4) / 7
    assert torch.allclose(gaps, torch.tensor([mu - 0.4, mu - 0.8, mu - 0.2], dtype=torch.float64))
    # a non-reporter is in the population, not in any group subset
    reported = torch.tensor([False, True, True, True, True, True, True])
    gaps = dp.term_gaps(h.double(), Y, G, reported)
    assert gaps[0] == pytest.approx(mu - 0.2)
    ap = make_constraint("ap", n_groups=3)
    assert torch.allclose(ap.h(_logits(PRED), Y)[:2], -torch.log(torch.tensor([0.8, 0.8])))


def test_empty_group_is_skipped():
    dp = make_constraint("dp", n_groups=3)
    assert dp.violation(_logits([1, 0]), torch.tensor([0, 0]), torch.tensor([0, 1])) == pytest.approx(1.0)
    assert dp.term_gaps(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), torch.tensor([0, 1]))[2] == 0


@st.composite
def _batches(draw):
    """Tiny batches over 2-5 groups with signed logits, where group-label cells are often empty."""
    kind = draw(st.sampled_from(("dp", "eo", "ap")))
    k = draw(st.integers(2, 5))
    n = draw(st.integers(1, 12))
    group = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    logits = draw(st.lists(st.floats(-30, 30), min_size=2 * n, max_size=2 * n))
    reported = draw(st.none() | st.lists(st.booleans(), min_size=n, max_size=n))
    return (kind, k, torch.tensor(logits, dtype=torch.float64).reshape(n, 2), torch.tensor(y), torch.tensor(group),
            None if reported is None else torch.tensor(reported))


@PROPERTY
@given(_batches())
def test_term_gaps_have_finite_gradients_and_are_the_mean_differences(batch):
    """F-LD differentiates lambda^T |mu(B_P) - mu(B_G)| on every batch; a batch missing a group-label cell
    (Bank's under-25/over-60 group under equalized odds) once gave a NaN gradient and diverged."""
    kind, k, logits, y, group, reported = batch
    c = make_constraint(kind, n_groups=k)
    logits = logits.clone().requires_grad_(True)
    h = c.h(logits, y)
    gaps = c.term_gaps(h, y, group, reported)
    (gaps.abs().sum() + gaps.sum()).backward()
    assert torch.isfinite(gaps).all() and torch.isfinite(logits.grad).all()
    values = h.detach().numpy()
    pop = c.population_masks(y).numpy()
    grp = c.group_masks(y, group, reported).numpy()
    for i in range(c.n_terms):
        if grp[:, i].any():
            expected = values[pop[:, i]].mean() - values[grp[:, i]].mean()
            assert float(gaps[i].detach()) == pytest.approx(expected, abs=1e-9)
        else:
            assert float(gaps[i].detach()) == 0.0


@pytest.mark.parametrize("kwargs,match", [
    ({"kind": "xx", "n_groups": 2}, "constraint must be one of"),
    ({"kind": "dp", "n_groups": 1}, "n_groups must be an integer >= 2"),
    ({"kind": "eo", "n_groups": 2, "n_classes": 3}, "needs binary labels"),
    ({"kind": "dp", "n_groups": 2, "group_names": ["a"]}, "group_names has 1 names"),
])
def test_bad_arguments(kwargs, match):
    kind = kwargs.pop("kind")
    with pytest.raises(ValueError, match=match):
        make_constraint(kind, **kwargs)
