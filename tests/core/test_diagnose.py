"""dpfair diagnose: the predictor's pieces are the mathematics they claim, and it finds answers known by construction."""

import base64
import json
import math
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair_analysis.data import synthetic_groups
from dpfair_analysis.diagnose import (
    GROUP_KEYS,
    JSON_KEYS,
    REASONS,
    Calibration,
    DiagnosisOptions,
    PrivacyPlan,
    accumulated_covariance,
    diagnose,
    fairdp_stationary_bounds,
    fit_calibration,
    format_diagnosis,
    lyapunov_factor,
    quantile_rule_bound,
    reasons_for,
    report_html,
)
from dpfair_analysis.diagnose.dynamics import drift
from dpfair_analysis.diagnose.mechanisms import Mechanism
from dpfair_analysis.diagnose.problem import Problem, ggn_diagonal
from dpfair_analysis.gradients import flatten, per_sample_gradients
from dpfair_analysis.models import build_model

FAST = DiagnosisOptions(rows=1500, curvature_rows=400, theory_rows=400, draws=40, recommendation_draws=20,
                        max_steps=80, recommendations=False)


# ------------------------------------------------------------------ the mathematics
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-0.99, 1.0), min_size=1, max_size=4), st.integers(1, 40))
def test_lyapunov_factor_is_the_geometric_series(ms, steps):
    m = torch.tensor(ms, dtype=torch.float64)
    explicit = sum((m[:, None] * m[None, :]) ** t for t in range(steps))
    assert torch.allclose(lyapunov_factor(m, steps), explicit, rtol=1e-9, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 30), st.floats(0.01, 0.9))
def test_accumulated_covariance_is_the_covariance_of_the_linear_recursion(seed, steps, lr):
    """Sigma_T = sum_{t<T} M^t r^2 S M^t, M = I - r A: the covariance of zeta_T of zeta' = M zeta + r xi."""
    gen = torch.Generator().manual_seed(seed)
    P = 4
    F = torch.randn(P, P, generator=gen, dtype=torch.float64)
    A = F @ F.T / P                     # symmetric PSD; where r a > 2 the direction is unstable (capped)
    R = torch.randn(P, P, generator=gen, dtype=torch.float64)
    S = R @ R.T
    basis, inside, unstable = accumulated_covariance(A, S, lr=lr, steps=steps)
    M = torch.eye(P, dtype=torch.float64) - lr * A
    explicit = sum(torch.linalg.matrix_power(M, t) @ (lr ** 2 * S) @ torch.linalg.matrix_power(M, t)
                   for t in range(steps))
    if unstable == 0:
        assert torch.allclose(basis @ inside @ basis.T, explicit, rtol=1e-8, atol=1e-10)
    _, diag, _ = accumulated_covariance(torch.diagonal(A), torch.diagonal(S), lr=lr, steps=steps)
    m = (1 - lr * torch.diagonal(A).clamp(min=0)).clamp(min=-0.999)  # unstable directions capped
    assert torch.allclose(diag, lr ** 2 * torch.diagonal(S) * (1 - m ** (2 * steps)) / (1 - m ** 2))


def _problem(data, model):
    return Problem(model, data, rows=10_000, curvature_rows=10_000, theory_rows=10_000, seed=0)


def test_the_drift_is_the_expected_dpsgd_update_of_the_training_loop():
    """E[(1/b)(sum_{i in B} clip(g_i)) + lambda w] under Poisson sampling = (1/n) sum_i clip(g_i) + lambda w."""
    data = synthetic_groups(sizes=(40, 20), input_scale=(1.0, 5.0), seed=1)
    model = build_model("logreg", input_shape=(data.n_features,), n_classes=2, seed=0, l2=0.1)
    problem = _problem(data, model)
    theta = problem.theta0 + 0.3
    G = flatten(per_sample_gradients(problem.model, data.X.double(), data.y, params=problem.params(theta)))
    for name, C in (("dpsgd", 0.7), ("sgd", math.inf)):
        direction, norms, noise = drift(problem, Mechanism(name, clip_bound=C, sigma=2.0), theta)
        factors = torch.clamp(C / G.norm(dim=1), max=1.0)
        expected = (factors[:, None] * G).mean(0) + 0.1 * problem.weight_mask * theta
        assert torch.allclose(direction, expected, atol=1e-10)
        assert torch.allclose(norms, G.norm(dim=1), atol=1e-10)
        assert noise == (0.0 if name == "sgd" else 2.0 * C)


def _fairdp_gap(norms, group, clips, *, bias_coef, noise_coef, n_groups):
    """p_k(C_k) - gamma_k(C_k) from the FairDP policy's own statistics and target."""
    from dpfair_analysis.training.fairdp import fairdp_statistics, target_clipped_fraction

    counts, excess = fairdp_statistics(norms, group, clips, n_groups=n_groups, excess_cap=5.0)
    rows = counts.sum(0).clamp(min=1.0)
    return counts[0] / rows - target_clipped_fraction(excess / rows, bias_coef=bias_coef, noise_coef=noise_coef)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-4, 1e3), st.integers(0, 3)), min_size=1, max_size=60),
       st.floats(2.0, 40.0), st.floats(1e-6, 10.0), st.floats(0.01, 10.0))
def test_fairdp_stationary_bounds_are_where_the_update_rests(rows, bias_coef, noise_coef, initial):
    """Tiny and absent groups, norms over seven decades: p_k - gamma_k is non-increasing in C (so the fixed point
    is unique) and the bound returned is its crossing, to 1e-6 relatively, or an end of FairDP's range."""
    norms = torch.tensor([r[0] for r in rows], dtype=torch.float64)
    group = torch.tensor([r[1] for r in rows])
    kw = dict(bias_coef=bias_coef, noise_coef=noise_coef, n_groups=4)
    grid = torch.logspace(-5, 5, 60, dtype=torch.float64)
    gaps = torch.stack([_fairdp_gap(norms, group, torch.full((4,), float(c), dtype=torch.float64), **kw)
                        for c in grid])
    assert bool((gaps[1:] <= gaps[:-1] + 1e-12).all())
    bounds = fairdp_stationary_bounds(norms, group, initial=initial, **kw)
    present = torch.bincount(group, minlength=4) > 0
    below = _fairdp_gap(norms, group, bounds * (1 - 1e-6), **kw)
    above = _fairdp_gap(norms, group, bounds * (1 + 1e-6), **kw)
    for k in range(4):
        if not present[k]:
            assert float(bounds[k]) == initial
            continue
        assert float(below[k]) >= 0 or bounds[k] <= initial / 100 * (1 + 1e-9)
        assert float(above[k]) <= 0 or bounds[k] >= initial * 100 * (1 - 1e-9)


def test_the_fairdp_policy_run_on_exact_statistics_settles_at_the_stationary_bounds():
    """The training policy itself (counts noise ~0, every step's statistics on the same rows) drives each C_k to
    the predictor's bound: the predictor models the method that ships."""
    from dpfair_analysis.training.fairdp import FairDP, noise_coefficient

    gen = torch.Generator().manual_seed(0)
    group = torch.cat([torch.zeros(300, dtype=torch.long), torch.ones(40, dtype=torch.long)])
    norms = torch.cat([torch.rand(300, generator=gen, dtype=torch.float64) * 2,
                       1 + torch.rand(40, generator=gen, dtype=torch.float64) * 8])
    policy = FairDP(0.5, 1.0, 1e-9, 1e-9, dimension=20, learning_rate=0.5, smoothing=0.0).for_run()
    for _ in range(3000):
        policy.decide(norms, group, n_groups=2, expected_batch_size=64.0, generator=gen)
    settled = policy.current_clips(2)
    predicted = fairdp_stationary_bounds(norms, group, n_groups=2, initial=0.5, bias_coef=policy.bias_coef,
                                         noise_coef=noise_coefficient(1.0, 20, 64.0))
    assert torch.allclose(settled.log(), predicted.log(), atol=0.06)
    assert float(predicted[1]) > float(predicted[0])  # the group with the larger norms gets the larger bound


def test_quantile_rule_clips_at_most_kappa_of_b_rows():
    norms = torch.linspace(0.1, 10.0, 1000, dtype=torch.float64)
    C = quantile_rule_bound(norms, noise_multiplier=1.0, batch_size=100, n_params=40)
    kappa = math.sqrt(2) * math.exp(math.lgamma(20.5) - math.lgamma(20))
    assert float((norms > C).double().mean()) <= kappa / 100 + 1e-9
    assert float((norms >= C).double().mean()) >= kappa / 100 - 1e-3
    assert quantile_rule_bound(norms, noise_multiplier=50.0, batch_size=10, n_params=40) == 0.0


def test_a_target_epsilon_is_met_and_sigma_xor_epsilon():
    plan = PrivacyPlan(noise_multiplier=None, target_epsilon=2.0, batch_size=64, epochs=3)
    resolved = plan.resolve(2000)
    assert resolved.epsilon <= 2.0 + 1e-9 and resolved.epsilon > 1.9
    with pytest.raises(ValueError, match="exactly one"):
        PrivacyPlan(noise_multiplier=1.0, target_epsilon=2.0)
    with pytest.raises(ValueError, match="batch_size=64 exceeds"):
        PrivacyPlan(batch_size=64).resolve(10)


# ------------------------------------------------------------------ known by construction
def test_a_group_with_ten_times_the_input_norms_is_flagged_clipping():
    """g1's inputs are 10x g0's, so its gradients are clipped and its pull on the shared boundary (its own
    sits at w^T x = 1, g0's at 0) is cut: DP-SGD moves the boundary to g0's side and g1 pays."""
    data = synthetic_groups(sizes=(1500, 1500), input_scale=(0.3, 3.0), margin=(0.1, 0.5), offset=(0.0, 1.0),
                            temperature=0.05, seed=0)
    train, test = data.split(0.3, seed=0)
    model = build_model("logreg", input_shape=(data.n_features,), n_classes=2, seed=0, l2=0.01)
    d = diagnose(train, test, model, PrivacyPlan(noise_multiplier=1.0, clip_bound=0.5, batch_size=64, epochs=5,
                                                 lr=0.2), options=FAST)
    g1 = d.groups.set_index("group").loc["g1"]
    assert "clipping" in g1["reasons"]
    assert d.most_hurt["group"] == "g1" and d.most_hurt["callable"]
    g0 = d.groups.set_index("group").loc["g0"]
    assert g1["clip_fraction"] > g0["clip_fraction"] and g1["clip_bias"] > 5 * g0["clip_bias"]
    assert d.mechanism == "clipping"


def test_a_tiny_group_at_the_boundary_is_flagged_noise_and_size():
    data = synthetic_groups(sizes=(2000, 80), input_scale=(1.0, 1.0), margin=(0.4, 0.02), temperature=0.02, seed=0)
    train, test = data.split(0.3, seed=0)
    model = build_model("logreg", input_shape=(data.n_features,), n_classes=2, seed=0, l2=0.01)
    d = diagnose(train, test, model, PrivacyPlan(noise_multiplier=4.0, clip_bound=5.0, batch_size=32, epochs=5,
                                                 lr=0.5), options=FAST)
    g1 = d.groups.set_index("group").loc["g1"]
    assert {"noise", "size"} <= set(g1["reasons"]) and "clipping" not in g1["reasons"]
    assert "near the boundary" in g1["reasons"]
    assert d.mechanism == "noise"
    assert g1["boundary"] > d.groups.set_index("group").loc["g0", "boundary"]


def test_reasons_follow_their_rules():
    row = pd.Series({"cost": -0.05, "clip_part": -0.04, "noise_part": -0.01, "boundary": 0.5, "n": 10})
    assert reasons_for(row, population_boundary=0.3, n_total=1000, n_groups=2) == ["clipping", "size",
                                                                                    "near the boundary"]
    calm = row.copy()
    calm["cost"] = -0.001
    assert reasons_for(calm, population_boundary=0.3, n_total=1000, n_groups=2) == []


# ------------------------------------------------------------------ outputs
@pytest.fixture(scope="module")
def diagnosis():
    data = synthetic_groups(sizes=(900, 300, 100), input_scale=(1.0, 3.0, 1.0), margin=(0.3, 0.6, 0.05),
                            offset=(0.0, 0.8, 0.0), temperature=0.1, seed=2)
    train, test = data.split(0.3, seed=0)
    model = build_model("logreg", input_shape=(data.n_features,), n_classes=2, seed=0, l2=0.01)
    options = DiagnosisOptions(rows=1500, curvature_rows=400, theory_rows=400, draws=30, recommendation_draws=20,
                               max_steps=60)
    return diagnose(train, test, model, PrivacyPlan(noise_multiplier=2.0, clip_bound=1.0, batch_size=32, epochs=3,
                                                    lr=0.3), options=options, dataset="synthetic")


def test_json_has_exactly_the_issue_schema(diagnosis):
    payload = json.loads(json.dumps(diagnosis.to_json()))
    assert tuple(payload) == JSON_KEYS
    assert len(payload["groups"]) == 3
    for group in payload["groups"]:
        assert tuple(group) == GROUP_KEYS
        assert group["predicted_cost_low"] <= group["predicted_cost"] <= group["predicted_cost_high"]
        assert set(group["reasons"]) <= set(REASONS)
        assert 0 <= group["clip_fraction"] <= 1 and 0 <= group["boundary"] <= 0.5 and group["trace"] > 0
    assert sorted(g["rank"] for g in payload["groups"]) == [1, 2, 3]
    costs = [g["predicted_cost"] for g in sorted(payload["groups"], key=lambda g: g["rank"])]
    assert costs == sorted(costs)
    assert payload["settings"]["mechanism"] in ("clipping", "noise", "both", "neither")
    assert payload["epsilon"] > 0 and payload["delta"] == 1e-6
    assert payload["recommendations"] and all(r["prediction"] is True for r in payload["recommendations"])
    actions = {r["action"] for r in payload["recommendations"]}
    assert {"dpsgdf", "naive", "fairdp", "larger epsilon"} <= actions
    text = format_diagnosis(diagnosis)
    assert any(verdict in text for verdict in ("Most hurt:", "cannot be called", "No group is predicted"))


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.rows, self.images, self.external, self.items = {}, {}, [], [], 0
        self._table = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = attrs.get("id")
            self.tables[self._table] = 0
        elif tag == "tr" and self._table:
            self.tables[self._table] += 1
        elif tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag == "li":
            self.items += 1
        for key in ("src", "href"):
            if key in attrs and not str(attrs[key]).startswith("data:"):
                self.external.append(attrs[key])
        if tag in ("script", "link"):
            self.external.append(tag)

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None


def test_the_html_report_is_self_contained_with_table_figure_and_explanation(diagnosis):
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    page = _Page()
    page.feed(report_html(diagnosis, figure_png=png))
    assert page.tables["groups"] == 1 + 3          # header + one row per group
    assert page.tables["settings"] >= 5
    assert page.tables["recommendations"] == 1 + len(diagnosis.recommendations)
    assert len(page.images) == 1 and page.images[0].startswith("data:image/png;base64,")
    assert base64.b64decode(page.images[0].split(",", 1)[1]) == png
    assert page.items >= 2 and page.external == []


def test_the_figure_draws(diagnosis):
    import matplotlib.pyplot as plt

    from dpfair_analysis.plotting import figure_png, plot_diagnosis

    fig = plot_diagnosis(diagnosis)
    assert figure_png(fig).startswith(b"\x89PNG")
    plt.close(fig)


# ------------------------------------------------------------------ calibration
def test_a_calibration_refuses_the_data_sets_it_was_fitted_on():
    rng = np.random.default_rng(0)
    clip, noise = rng.normal(-0.05, 0.03, 200), rng.normal(-0.02, 0.02, 200)
    records = pd.DataFrame({"dataset": ["a"] * 100 + ["b"] * 100, "clip_part": clip, "noise_part": noise,
                            "half_width": 0.01, "actual": 2.0 * clip + 0.5 * noise + rng.normal(0, 0.005, 200)})
    calibration = fit_calibration(records)
    assert calibration.clip_scale == pytest.approx(2.0, rel=0.05)
    assert calibration.noise_scale == pytest.approx(0.5, rel=0.2)
    pred = calibration.clip_scale * clip + calibration.noise_scale * noise
    assert np.mean(np.abs(records["actual"] - pred) <= calibration.widen * 0.01) >= 0.9
    assert calibration.datasets == ("a", "b")
    with pytest.raises(ValueError, match="not out of sample"):
        calibration.check_applicable("a")
    calibration.check_applicable("c")
    data = synthetic_groups(sizes=(100, 50), seed=0)
    model = build_model("logreg", input_shape=(data.n_features,), n_classes=2)
    with pytest.raises(ValueError, match="not out of sample"):
        diagnose(data, data, model, PrivacyPlan(batch_size=16, epochs=1), options=FAST,
                 calibration=Calibration(datasets=("synthetic",)))


@pytest.mark.parametrize("kind", ["logreg-binary", "logreg-multiclass", "linear-mlp"])
def test_the_large_model_curvature_diagonal_is_the_hessian_diagonal(kind):
    """Past max_exact_params the accumulated noise uses sum_i w_i diag(H_i): closed form for logistic regression,
    K vector-Jacobian products otherwise; both are the exact Hessian diagonal of sum_i w_i L_i here."""
    from torch.func import functional_call, hessian

    from dpfair_analysis.models import MLP

    classes = 2 if kind == "logreg-binary" else 3
    data = synthetic_groups(sizes=(30, 20), dim=5, n_classes=classes, seed=3)
    model = MLP(5, classes, hidden=()) if kind == "linear-mlp" else \
        build_model("logreg", input_shape=(5,), n_classes=classes, seed=1)
    problem = _problem(data, model)
    theta = problem.theta0 + 0.2
    X = data.X.double()
    w = torch.rand(len(X), generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def weighted_loss(t):
        logits = functional_call(problem.model, problem.unflatten(t), (X,))
        return (w * torch.nn.functional.cross_entropy(logits, data.y, reduction="none")).sum()

    exact = torch.diagonal(hessian(weighted_loss)(theta))
    assert torch.allclose(ggn_diagonal(problem, theta, X, w), exact, rtol=1e-8, atol=1e-10)


def test_a_group_of_a_few_rows_gets_size_and_an_honest_interval_never_a_zero_width_one():
    """Issue 34: a 3-row group once got "+0.0000 [0, 0]" and no reason. Now: "size", and the binomial range of
    the change of its few rows (at least one row either side, within the feasible range)."""
    from dpfair_analysis.diagnose import MIN_GROUP_ROWS
    from dpfair_analysis.diagnose.prediction import small_group_half_width

    data = synthetic_groups(sizes=(3000, 6), input_scale=(1.0, 1.0), margin=(0.4, 0.4), seed=1)
    train, test = data.split(0.5, seed=0)
    n_tiny = int((test.group == 1).sum())
    assert 0 < n_tiny < MIN_GROUP_ROWS
    model = build_model("logreg", input_shape=(data.n_features,), n_classes=2, seed=0, l2=0.01)
    d = diagnose(train, test, model, PrivacyPlan(noise_multiplier=1.0, clip_bound=0.5, batch_size=64, epochs=2,
                                                 lr=0.3), options=FAST)
    tiny = d.groups.set_index("group").loc["g1"]
    assert "size" in tiny["reasons"] and bool(tiny["too_small"])
    acc = tiny["acc_nonprivate"]
    assert -acc - 1e-12 <= tiny["low"] <= tiny["cost"] <= tiny["high"] <= 1 - acc + 1e-12
    assert tiny["high"] - tiny["low"] >= 1 / n_tiny - 1e-12            # never narrower than one of its rows
    population = float(np.average(d.groups["change_rate"], weights=d.groups["n_eval"]))
    honest = small_group_half_width(n_tiny, max(population, float(tiny["change_rate"])))
    assert tiny["high"] - tiny["low"] >= min(2 * honest, 1 / n_tiny) - 1e-12
    big = d.groups.set_index("group").loc["g0"]
    assert not big["too_small"] and big["high"] - big["low"] < 0.5
    assert any("Too few rows to predict from the model: g1" in note for note in d.notes)
    assert not d.most_hurt["callable"] or d.most_hurt["group"] != "g1"


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 29), st.floats(0.0, 1.0))
def test_the_small_group_half_width_is_the_binomial_upper_quantile_of_its_changes(n, p):
    """P(#changes / n <= half) >= 0.95 (so +-half covers a two-sided 90% range), never below one row."""
    from scipy import stats as sps

    from dpfair_analysis.diagnose.prediction import small_group_half_width

    half = small_group_half_width(n, p)
    assert half >= 1 / n - 1e-12 and half <= 1.0 + 1e-12
    assert sps.binom.cdf(round(half * n), n, p) >= 0.95 - 1e-12


def test_too_few_training_rows_or_trajectory_rows_are_refused():
    data = synthetic_groups(sizes=(60, 30), seed=0)
    model = build_model("logreg", input_shape=(data.n_features,), n_classes=2, seed=0)
    with pytest.raises(ValueError, match="train has 90 rows; a diagnosis needs at least 100"):
        diagnose(data, data, model, PrivacyPlan(), options=FAST)
    with pytest.raises(ValueError, match="rows must be at least 100"):
        DiagnosisOptions(rows=1)


def test_the_report_settings_read_as_words_not_identifiers(diagnosis):
    from dpfair_analysis.diagnose import report_html

    page = report_html(diagnosis)
    settings = page[page.index('<table id="settings">'):page.index("</table>", page.index('<table id="settings">'))]
    headers = [h.split("</th>")[0] for h in settings.split("<th>")[1:]]
    assert headers and not [h for h in headers if "_" in h]  # noise_multiplier, collapse_predicted, ...
    cells = [c.split("</td>")[0] for c in settings.split("<td>")[1:]]
    assert not [c for c in cells if c in ("True", "False") or "e+" in c]  # yes/no; 24,420, not 2.44e+04
    assert f"{diagnosis.plan.n:,}" in cells
