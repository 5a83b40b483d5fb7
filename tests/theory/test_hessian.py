"""Group Hessian traces (paper 001, Thm 1 / Example 3): closed form, exact, GGN, Hutchinson, Hutch++."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from scipy import stats
from torch import nn
from torch.func import functional_call, hessian

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.gradients import parameters_of
from dpfair_analysis.models import MLP, LogisticRegression
from dpfair_analysis.theory.hessian import (NotPiecewiseLinearWarning, TraceEstimate, boundary_proxy,
                                            group_hessian_traces, hutchinson_trace, hutchpp_trace,
                                            is_piecewise_linear, per_sample_hessian_traces, exact_group_traces,
                                            exact_sample_traces)

torch.set_num_threads(1)


# ----------------------------------------------------------------------------- helpers
def flat_hessian(model: nn.Module, X: torch.Tensor, y: torch.Tensor, params=None) -> torch.Tensor:
    """The P x P Hessian of the MEAN cross-entropy over (X, y): an independent reference."""
    params = parameters_of(model) if params is None else params
    names = list(params)
    shapes = [params[k].shape for k in names]
    sizes = [params[k].numel() for k in names]
    theta = torch.cat([params[k].reshape(-1) for k in names])

    def loss(t):
        p = {k: v.view(s) for k, v, s in zip(names, torch.split(t, sizes), shapes)}
        return F.cross_entropy(functional_call(model, p, (X.to(theta.dtype),)), y)

    return hessian(loss)(theta)


def reference_traces(model, ds: GroupedDataset) -> dict[str, float]:
    out = {"all": float(flat_hessian(model, ds.X, ds.y).trace())}
    for k, name in enumerate(ds.group_names):
        rows = ds.group == k
        out[name] = float(flat_hessian(model, ds.X[rows], ds.y[rows]).trace()) if rows.any() else math.nan
    return out


def grouped(X, y, group, n_groups, n_classes) -> GroupedDataset:
    return GroupedDataset(X=X, y=y, group=group, group_names=tuple(f"g{k}" for k in range(n_groups)),
                          label_names=tuple(str(k) for k in range(n_classes)))


def randomise(model: nn.Module, scale: float, seed: int) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)
    return model


def small_mlp_data(activation: str, *, seed: int = 0, n: int = 40):
    torch.manual_seed(seed)
    model = MLP(6, 3, hidden=(10, 7), activation=activation).double()
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 6, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (n,), generator=gen)
    group = torch.randint(0, 2, (n,), generator=gen)
    return model, grouped(X, y, group, 2, 3)


# ------------------------------------------------------------------- closed form
@pytest.mark.network
def test_closed_form_equals_exact_autograd_on_adult():
    """Binary logistic regression on 3,000 real Adult rows (float64): closed == autograd Hessian trace."""
    from dpfair_analysis import data

    adult = data.load("adult")
    rows = torch.randperm(len(adult), generator=torch.Generator().manual_seed(0))[:3000]
    ds = adult.subset(rows)
    ds = GroupedDataset(X=ds.X.double(), y=ds.y, group=ds.group, group_names=ds.group_names,
                        label_names=ds.label_names)
    model = randomise(LogisticRegression(ds.n_features).double(), 0.3, seed=1)
    closed = group_hessian_traces(model, ds, method="closed").set_index("group")
    exact = group_hessian_traces(model, ds, method="exact").set_index("group")
    reference = reference_traces(model, ds)
    for name in ["all", *ds.group_names]:
        assert closed.loc[name, "trace"] == pytest.approx(reference[name], rel=1e-6)
        assert exact.loc[name, "trace"] == pytest.approx(reference[name], rel=1e-6)
    assert closed.loc["Male", "n"] + closed.loc["Female", "n"] == closed.loc["all", "n"] == 3000
    assert (closed["stderr"] == 0).all() and (closed["method"] == "closed").all()


@st.composite
def closed_form_cases(draw):
    n_classes = draw(st.sampled_from([2, 3, 4]))
    d = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(0, 5), min_size=1, max_size=4).filter(lambda s: sum(s) > 0))
    seed = draw(st.integers(0, 10_000))
    scale = draw(st.sampled_from([0.1, 1.0, 3.0]))
    gen = torch.Generator().manual_seed(seed)
    n = sum(sizes)
    X = torch.randn(n, d, generator=gen, dtype=torch.float64) * scale
    y = torch.randint(0, n_classes, (n,), generator=gen)
    group = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    model = randomise(LogisticRegression(d, n_classes).double(), scale, seed)
    return model, grouped(X, y, group, len(sizes), n_classes)


@settings(max_examples=40, deadline=None)
@given(closed_form_cases())
def test_closed_form_group_traces_property(case):
    """Binary and multiclass, groups of size 0, 1, ...: closed == exact Hessian of each group's mean loss."""
    model, ds = case
    table = group_hessian_traces(model, ds, method="closed").set_index("group")
    reference = reference_traces(model, ds)
    sizes = ds.group_sizes().tolist()
    for k, name in enumerate(ds.group_names):
        assert table.loc[name, "n"] == sizes[k]
        if sizes[k] == 0:
            assert math.isnan(table.loc[name, "trace"]) and math.isnan(table.loc[name, "stderr"])
        else:
            assert table.loc[name, "trace"] == pytest.approx(reference[name], rel=1e-9, abs=1e-12)
    assert table.loc["all", "trace"] == pytest.approx(reference["all"], rel=1e-9, abs=1e-12)
    # per-sample traces average to the group traces
    sample = per_sample_hessian_traces(model, ds.X, ds.y, method="closed")
    for k, name in enumerate(ds.group_names):
        if sizes[k]:
            assert float(sample[ds.group == k].mean()) == pytest.approx(table.loc[name, "trace"], rel=1e-12)


def test_closed_form_is_boundary_proxy_times_norm():
    """Example 3: Tr(H_i) = (1 - sum f^2)(||x||^2 + 1); the one-score binary model has half of it."""
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(25, 3, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 2, (25,), generator=gen)
    for n_classes, factor in [(2, 0.5), (4, 1.0)]:
        model = randomise(LogisticRegression(3, n_classes).double(), 1.0, seed=n_classes)
        traces = per_sample_hessian_traces(model, X, y % n_classes, method="closed")
        expected = factor * boundary_proxy(model, X) * ((X ** 2).sum(1) + 1)
        torch.testing.assert_close(traces, expected, rtol=1e-12, atol=0)
        proxy = boundary_proxy(model, X)
        assert (proxy >= 0).all() and (proxy <= 1 - 1 / n_classes + 1e-12).all()


def test_closed_form_without_trainable_bias_drops_the_one():
    model = randomise(LogisticRegression(3).double(), 1.0, seed=0)
    model.linear.bias.requires_grad_(False)
    X = torch.randn(7, 3, dtype=torch.float64)
    y = torch.randint(0, 2, (7,))
    torch.testing.assert_close(per_sample_hessian_traces(model, X, y, method="closed"),
                               per_sample_hessian_traces(model, X, y, method="exact"))


# ------------------------------------------------------------------------- GGN
def test_ggn_equals_exact_hessian_for_relu_mlp():
    """Piecewise-linear network: Hessian = J^T (diag p - pp^T) J a.e., so the traces agree to rounding."""
    model, ds = small_mlp_data("relu")
    assert is_piecewise_linear(model)
    ggn = per_sample_hessian_traces(model, ds.X, ds.y, method="ggn")
    exact = per_sample_hessian_traces(model, ds.X, ds.y, method="exact")
    torch.testing.assert_close(ggn, exact, rtol=1e-10, atol=1e-13)
    table = group_hessian_traces(model, ds, method="ggn").set_index("group")
    reference = reference_traces(model, ds)
    for name, value in reference.items():
        assert table.loc[name, "trace"] == pytest.approx(value, rel=1e-10)


def test_ggn_equals_exact_for_small_relu_cnn_with_max_pool():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 4)).double()
    X = torch.randn(12, 1, 6, 6, dtype=torch.float64)
    y = torch.randint(0, 4, (12,))
    torch.testing.assert_close(per_sample_hessian_traces(model, X, y, method="ggn"),
                               per_sample_hessian_traces(model, X, y, method="exact"), rtol=1e-10, atol=1e-13)


def test_ggn_differs_from_hessian_for_tanh_and_warns():
    """Smooth activations: the residual term sum_k (p_k - y_k) grad^2 z_k does not vanish."""
    model, ds = small_mlp_data("tanh")
    assert not is_piecewise_linear(model)
    with pytest.warns(NotPiecewiseLinearWarning, match="Tanh"):
        ggn = per_sample_hessian_traces(model, ds.X, ds.y, method="ggn")
    exact = per_sample_hessian_traces(model, ds.X, ds.y, method="exact")
    relative = ((ggn - exact).abs() / exact.abs()).max()
    assert relative > 1e-2
    # the GGN is PSD (trace > 0); the exact Hessian need not be
    assert (ggn > 0).all()


def test_exact_refuses_large_models_and_names_the_stochastic_methods():
    model = MLP(50, 2, hidden=(100,)).double()  # 5,302 parameters
    X, y = torch.randn(3, 50, dtype=torch.float64), torch.zeros(3, dtype=torch.long)
    with pytest.raises(ValueError, match="5302 parameters.*max_params=5000.*hutchinson"):
        per_sample_hessian_traces(model, X, y, method="exact")


# ----------------------------------------------------------- stochastic estimators
def small_hessian() -> torch.Tensor:
    model = MLP(5, 3, hidden=(6,)).double()
    randomise(model, 0.8, seed=4)
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(30, 5, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (30,), generator=gen)
    return flat_hessian(model, X, y)  # 57 x 57


def coverage(estimates: list[TraceEstimate], truth: float) -> float:
    z = torch.tensor([(e.estimate - truth) / e.stderr for e in estimates])
    return float((z.abs() < 2).double().mean())


def binomial_band(p: float, runs: int) -> float:
    return 4 * math.sqrt(p * (1 - p) / runs)


def test_hutchinson_stderr_covers_at_the_nominal_rate():
    """200 independent runs of 30 probes: |z| < 2 at the Student-t(29) rate (0.945), within 4 binomial sd."""
    H = small_hessian()
    truth = float(H.trace())
    runs = [hutchinson_trace(lambda v: H @ v, H.shape[0], probes=30, generator=seed) for seed in range(200)]
    nominal = 1 - 2 * stats.t.sf(2, df=29)
    assert abs(coverage(runs, truth) - nominal) <= binomial_band(nominal, 200)


def test_hutchpp_stderr_covers_at_the_nominal_rate():
    """Hutch++ with 30 matvecs (10 residual probes): |z| < 2 at the t(9) rate (0.923), within 4 binomial sd."""
    H = small_hessian()
    truth = float(H.trace())
    runs = [hutchpp_trace(lambda v: H @ v, H.shape[0], matvecs=30, generator=seed) for seed in range(200)]
    nominal = 1 - 2 * stats.t.sf(2, df=9)
    assert abs(coverage(runs, truth) - nominal) <= binomial_band(nominal, 200)


def test_hutchpp_beats_hutchinson_on_a_low_rank_dominated_matrix():
    """Equal matvecs (30), 200 seeds: Hutch++'s variance is far below Hutchinson's on a top-heavy spectrum."""
    gen = torch.Generator().manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(100, 100, generator=gen, dtype=torch.float64))
    spectrum = torch.cat([torch.full((5,), 50.0), torch.full((95,), 0.05)]).double()
    H = q @ torch.diag(spectrum) @ q.T
    truth = float(spectrum.sum())
    plain = torch.tensor([hutchinson_trace(lambda v: H @ v, 100, probes=30, generator=s).estimate for s in range(200)])
    plus = torch.tensor([hutchpp_trace(lambda v: H @ v, 100, matvecs=30, generator=s).estimate for s in range(200)])
    assert float(plus.mean()) == pytest.approx(truth, rel=0.01)
    assert float(plus.var()) < float(plain.var()) / 100
    # and on the small MLP's Hessian (spectrum decays less): still no worse
    Hm = small_hessian()
    plain = torch.tensor([hutchinson_trace(lambda v: Hm @ v, 57, probes=30, generator=s).estimate for s in range(200)])
    plus = torch.tensor([hutchpp_trace(lambda v: Hm @ v, 57, matvecs=30, generator=s).estimate for s in range(200)])
    assert float(plus.var()) < float(plain.var())


@pytest.mark.parametrize("method", ["hutchinson", "hutchpp"])
def test_group_traces_stochastic_methods_agree_with_exact(method):
    """Through the model's Hessian-vector products: every row's |z| < 4 over 10 seeds."""
    model, ds = small_mlp_data("relu")
    reference = reference_traces(model, ds)
    for seed in range(10):
        table = group_hessian_traces(model, ds, method=method, probes=30, generator=seed).set_index("group")
        for name, value in reference.items():
            z = (table.loc[name, "trace"] - value) / table.loc[name, "stderr"]
            assert abs(z) < 4, (seed, name, z)
        assert table.loc["g0", "matvecs"] == 30 and table.loc["all", "matvecs"] == 60


def test_stochastic_estimates_are_reproducible_and_take_templates():
    H = small_hessian()
    a = hutchinson_trace(lambda v: H @ v, 57, probes=10, generator=torch.Generator().manual_seed(7))
    b = hutchinson_trace(lambda v: H @ v, 57, probes=10, generator=7)
    assert a == b
    c = hutchinson_trace(lambda v: (H @ v.reshape(-1)).reshape(3, 19), torch.zeros(3, 19, dtype=torch.float64),
                         probes=10, generator=7)
    assert c == a
    template = {"a": torch.zeros(50, dtype=torch.float64), "b": torch.zeros(7, dtype=torch.float64)}

    def dict_hvp(v):
        out = H @ torch.cat([v["a"], v["b"]])
        return {"a": out[:50], "b": out[50:]}

    assert hutchinson_trace(dict_hvp, template, probes=10, generator=7) == a
    assert hutchpp_trace(dict_hvp, template, matvecs=12, generator=7) == hutchpp_trace(lambda v: H @ v, 57,
                                                                                      matvecs=12, generator=7)


def test_hutchpp_is_exact_when_the_sketch_spans_everything():
    H = small_hessian()[:8, :8]
    est = hutchpp_trace(lambda v: H @ v, 8, matvecs=30, generator=0)
    assert est.estimate == pytest.approx(float(H.trace()), rel=1e-10)


# ------------------------------------------------------------------ validation
def test_bad_arguments_are_refused_clearly():
    model, ds = small_mlp_data("relu")
    with pytest.raises(ValueError, match="method must be one of"):
        group_hessian_traces(model, ds, method="lanczos")
    with pytest.raises(ValueError, match="LogisticRegression"):
        group_hessian_traces(model, ds, method="closed")
    with pytest.raises(ValueError, match="generator"):
        group_hessian_traces(model, ds, method="hutchinson")
    with pytest.raises(ValueError, match="params must name exactly"):
        group_hessian_traces(model, ds, method="exact", params={"w": torch.zeros(3)})
    with pytest.raises(ValueError, match="probes must be >= 2"):
        hutchinson_trace(lambda v: v, 5, probes=1, generator=0)
    with pytest.raises(ValueError, match="matvecs must be >= 4"):
        hutchpp_trace(lambda v: v, 5, matvecs=3, generator=0)
    with pytest.raises(ValueError, match="template"):
        hutchinson_trace(lambda v: v, "five", probes=3, generator=0)
    with pytest.raises(ValueError, match="y must be an int64"):
        per_sample_hessian_traces(model, ds.X, ds.y.float(), method="exact")


def test_group_table_layout_and_empty_group():
    model = randomise(LogisticRegression(2).double(), 1.0, seed=0)
    X = torch.randn(4, 2, dtype=torch.float64)
    ds = grouped(X, torch.tensor([0, 1, 1, 0]), torch.tensor([0, 0, 2, 2]), 3, 2)
    table = group_hessian_traces(model, ds, method="exact")
    assert list(table.columns) == ["group", "n", "trace", "stderr", "method", "matvecs"]
    assert table["group"].tolist() == ["all", "g0", "g1", "g2"]
    assert table["n"].tolist() == [4, 2, 0, 2]
    assert pd.isna(table.loc[2, "trace"]) and not table["trace"].drop(index=2).isna().any()
    assert table.loc[0, "trace"] == pytest.approx(0.5 * (table.loc[1, "trace"] + table.loc[3, "trace"]))


# -------------------------------------------- exact group traces from batched basis HVPs (no per-sample Hessians)
@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(["logreg2", "logreg3", "relu", "tanh"]), st.integers(1, 30), st.integers(0, 12),
       st.integers(1, 7), st.sampled_from([1, 3, 1000]), st.integers(0, 10_000))
def test_exact_group_traces_equal_the_per_sample_route(kind, n_a, n_b, chunk, row_chunk, seed):
    """Tr(H_a) from basis HVPs = mean of the per-sample Hessian traces, for any chunking of basis vectors and
    rows, unequal and empty groups, signed inputs of mixed scale, smooth and piecewise-linear models."""
    g = torch.Generator().manual_seed(seed)
    n = n_a + n_b
    X = torch.randn(n, 3, generator=g, dtype=torch.float64) * torch.tensor([0.1, 1.0, 10.0], dtype=torch.float64)
    classes = 3 if kind == "logreg3" else 2
    y = torch.randint(0, classes, (n,), generator=g)
    group = torch.tensor([0] * n_a + [1] * n_b)
    if kind.startswith("logreg"):
        model = LogisticRegression(3, classes).double()
    else:
        model = MLP(3, 2, hidden=(4,), activation=kind).double()
    exact = exact_group_traces(model, X, y, group, n_groups=2, chunk_size=chunk, row_chunk=row_chunk)
    per_sample = exact_sample_traces(model, X, y)
    assert float(exact[0]) == pytest.approx(float(per_sample[group == 0].mean()), rel=1e-10, abs=1e-13)
    if n_b:
        assert float(exact[1]) == pytest.approx(float(per_sample[group == 1].mean()), rel=1e-10, abs=1e-13)
    else:
        assert math.isnan(float(exact[1]))


def test_group_table_exact_uses_basis_hvps_and_counts_them():
    data = GroupedDataset(torch.randn(30, 4, dtype=torch.float64), torch.randint(0, 2, (30,)),
                          torch.tensor([0] * 20 + [1] * 10), group_names=("a", "b"), label_names=("0", "1"))
    model = MLP(4, 2, hidden=(5,), activation="tanh").double()
    table = group_hessian_traces(model, data, method="exact")
    n_params = sum(p.numel() for p in model.parameters())
    assert table.set_index("group").loc["a", "matvecs"] == n_params  # P HVPs per group, no P x P per row
    per_sample = exact_sample_traces(model, data.X, data.y)
    assert table.set_index("group").loc["b", "trace"] == pytest.approx(float(per_sample[20:].mean()), rel=1e-10)
