"""Membership-inference attacks (paper 002 Figure 3): a model that memorised its members is found, a constant
model is not, and the low-FPR metrics mean what they say."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from sklearn.metrics import roc_auc_score

from dpfair_analysis.privacy.membership import attack_metrics, auc_standard_error, lira_offline_scores, \
    logit_confidence, loss_scores, tpr_at_fpr


def memoriser_logits(n_members: int, n_nonmembers: int, *, n_classes: int = 2, seed: int = 0):
    """Logits of a model that memorised its members (huge margin on the true label) and guesses elsewhere."""
    rng = np.random.default_rng(seed)
    y = torch.from_numpy(rng.integers(0, n_classes, n_members + n_nonmembers))
    logits = torch.from_numpy(rng.normal(size=(len(y), n_classes)))
    logits[torch.arange(n_members), y[:n_members]] += 20.0
    return logits, y


def test_loss_attack_finds_a_memorising_model():
    logits, y = memoriser_logits(2000, 2000)
    labels = np.r_[np.ones(2000), np.zeros(2000)].astype(bool)
    losses = torch.nn.functional.cross_entropy(logits, y, reduction="none").numpy()
    metrics = attack_metrics(labels, loss_scores(losses)).set_index("group")
    assert metrics.loc["all", "auc"] > 0.99
    assert metrics.loc["all", "tpr@0.01"] > 0.95 and metrics.loc["all", "tpr@0.001"] > 0.9


def test_lira_finds_a_memorising_model_and_not_a_constant_one():
    logits, y = memoriser_logits(1500, 1500, n_classes=10)
    labels = np.r_[np.ones(1500), np.zeros(1500)].astype(bool)
    rng = np.random.default_rng(1)
    shadows = np.stack([logit_confidence(torch.from_numpy(rng.normal(size=(3000, 10))), y).numpy()
                        for _ in range(4)])  # OUT models: never saw any target
    memorising = attack_metrics(labels, lira_offline_scores(logit_confidence(logits, y).numpy(), shadows))
    assert memorising.set_index("group").loc["all", "auc"] > 0.99
    constant = torch.zeros(3000, 10)
    flat = attack_metrics(labels, lira_offline_scores(logit_confidence(constant, y).numpy(), shadows))
    # scores then depend on the shadows only, not on membership: chance, up to sampling (3000 targets)
    assert flat.set_index("group").loc["all", "auc"] == pytest.approx(0.5, abs=0.03)
    assert flat.set_index("group").loc["all", "tpr@0.01"] < 0.04


def test_constant_model_gives_auc_one_half_for_the_loss_attack():
    y = torch.from_numpy(np.random.default_rng(2).integers(0, 2, 1000))
    losses = torch.nn.functional.cross_entropy(torch.zeros(1000, 2), y, reduction="none").numpy()
    labels = np.r_[np.ones(500), np.zeros(500)].astype(bool)
    assert attack_metrics(labels, loss_scores(losses)).loc[0, "auc"] == pytest.approx(0.5)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300), st.integers(0, 10_000))
def test_tpr_at_fpr_respects_the_fpr_and_the_sample(n_pos, n_neg, seed):
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(n_pos), np.zeros(n_neg)].astype(bool)
    scores = rng.normal(size=n_pos + n_neg) + labels
    for alpha in (0.01, 0.1):
        tpr = tpr_at_fpr(labels, scores, alpha)
        if n_neg < math.ceil(1 / alpha):
            assert math.isnan(tpr)
            continue
        threshold = np.sort(scores[~labels])[::-1][int(np.floor(alpha * n_neg))] if alpha * n_neg < n_neg else -np.inf
        # the largest TPR whose FPR <= alpha: no threshold strictly above the (floor(alpha n)+1)-th negative helps
        achieved = (scores[labels] > threshold).mean()
        assert tpr == pytest.approx(achieved) or tpr >= achieved
        assert 0 <= tpr <= 1


def test_metrics_per_group_match_sklearn_on_each_group():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 4000).astype(bool)
    group = rng.integers(0, 2, 4000)
    scores = rng.normal(size=4000) + labels * (1 + group)  # group 1 is more exposed
    table = attack_metrics(labels, scores, group=group, group_names=("a", "b")).set_index("group")
    for k, name in enumerate(("a", "b")):
        assert table.loc[name, "auc"] == pytest.approx(roc_auc_score(labels[group == k], scores[group == k]))
        assert table.loc[name, "n_members"] == int(labels[group == k].sum())
    assert table.loc["b", "auc"] > table.loc["a", "auc"]


@pytest.mark.parametrize("shift, spread, n_members, n_nonmembers, levels", [
    (0.0, 1, 300, 300, None), (0.0, 1, 40, 900, None), (0.0, 1, 12, 5, None), (1.0, 1, 336, 311, None),
    (2.0, 1, 60, 200, None), (-1.0, 1, 500, 80, None), (0.5, 1, 200, 200, 3), (1.0, 3, 40, 900, None),
    (1.0, 3, 900, 40, None)])
def test_auc_standard_error_matches_the_spread_of_simulated_aucs(shift, spread, n_members, n_nonmembers, levels):
    """DeLong's SE, averaged over 1,000 simulated attacks (binormal scores, members ~ N(``shift``,
    ``spread``^2), non-members ~ N(0, 1); ``levels``: scores rounded to that many values, so ties), against the
    sd of their AUCs: within 10%, at chance and away from it, balanced, unbalanced (either way: with unequal
    spreads the two placements' variances differ, so each must be divided by its own count), tiny and tied."""
    rng = np.random.default_rng(7)
    labels = np.r_[np.ones(n_members, bool), np.zeros(n_nonmembers, bool)]
    aucs, errors = [], []
    for _ in range(1000):
        scores = rng.normal(size=len(labels)) * np.where(labels, spread, 1.0) + shift * labels
        if levels is not None:
            scores = np.digitize(scores, np.linspace(-1, 1, levels - 1))
        aucs.append(roc_auc_score(labels, scores))
        errors.append(auc_standard_error(labels, scores))
    assert np.mean(errors) == pytest.approx(np.std(aucs), rel=0.1)


def test_auc_standard_error_at_chance_is_the_mann_whitney_null_spread():
    """Scores independent of membership: SE^2 -> (n_1 + n_0 + 1) / (12 n_1 n_0), the null variance of the
    Mann-Whitney statistic (continuous scores)."""
    rng = np.random.default_rng(11)
    labels = np.r_[np.ones(2000, bool), np.zeros(3000, bool)]
    se = auc_standard_error(labels, rng.normal(size=5000))
    assert se == pytest.approx(math.sqrt((2000 + 3000 + 1) / (12 * 2000 * 3000)), rel=0.05)


def test_attack_metrics_report_each_auc_with_its_standard_error():
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, 1000).astype(bool)
    group = rng.integers(0, 2, 1000)
    scores = rng.normal(size=1000) + labels
    table = attack_metrics(labels, scores, group=group, group_names=("a", "b")).set_index("group")
    for k, name in enumerate(("a", "b")):
        assert table.loc[name, "auc_se"] == pytest.approx(auc_standard_error(labels[group == k], scores[group == k]))
    assert table.loc["all", "auc_se"] < table.loc["a", "auc_se"]  # more targets, tighter
    assert math.isnan(auc_standard_error([1, 0, 0], [0.3, 0.1, 0.2]))  # one member: no spread to estimate


def test_logit_confidence_is_log_odds_of_the_true_class():
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.0, 0.0, 0.0]])
    y = torch.tensor([1, 2])
    p = torch.softmax(logits.double(), 1)[torch.arange(2), y]
    assert logit_confidence(logits, y).tolist() == pytest.approx(torch.log(p / (1 - p)).tolist())


def test_bad_inputs():
    with pytest.raises(ValueError, match="2 shadow"):
        lira_offline_scores(np.zeros(3), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="fpr"):
        tpr_at_fpr([1, 0], [0.1, 0.2], 0.0)
    with pytest.raises(ValueError, match="finite"):
        attack_metrics([1, 0], [np.inf, 0.0])
