"""The fast per-sample path (norms from activations and output gradients, book-kept sums) equals the reference.

Reference: :class:`MaterialisedGradients` on ``vmap(grad)``. Everything runs in float64,
and agreement is required to 1e-10 relative:

* norms:  |n_fast - n_ref| <= 1e-10 n_ref + 1e-12 max_j n_ref,j;
* sums:   |S_fast - S_ref| <= 1e-10 sum_i |c_i| ||g_i||  elementwise (the scale of the sum
          before any cancellation between samples), with c_i each engine's own clip factors.
"""

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch import nn

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.fast_gradients import FastPerSampleGradients, fast_per_sample_gradients
from dpfair_analysis.gradients import MaterialisedGradients, clip_factors, clipped_sum, parameters_of, \
    per_sample_gradients_and_losses
from dpfair_analysis.models import build_model
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import TrainConfig, release_step, train
from dpfair_analysis.training.objectives import CrossEntropy, batch_gradients
from dpfair_analysis.training.policies import make_policy

RTOL = 1e-10
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(model, X, y):
    """The vmap engine (for n = 0 what the loop uses: empty gradients; vmap cannot run every model on 0 rows)."""
    if len(X) == 0:
        params = parameters_of(model)
        return (MaterialisedGradients({k: torch.zeros((0, *p.shape), dtype=p.dtype) for k, p in params.items()},
                                      norms=torch.zeros(0, dtype=X.dtype)), torch.zeros(0, dtype=X.dtype))
    grads, losses = per_sample_gradients_and_losses(model, X, y)
    return MaterialisedGradients(grads), losses


def assert_norms_agree(fast, ref):
    assert fast.shape == ref.shape and fast.dtype == ref.dtype
    if len(ref) == 0:
        return
    scale = float(ref.max())
    assert torch.all((fast - ref).abs() <= RTOL * ref + 1e-12 * scale), (fast, ref)


def coefficient_cases(norms: torch.Tensor, draw_kind: list[str], weights: torch.Tensor | None):
    """Per-sample bounds: inf, tiny, equal to the norm, or a moderate number; optional weights."""
    bounds = []
    for i, kind in enumerate(draw_kind):
        norm = float(norms[i])
        bounds.append({"inf": math.inf, "tiny": 1e-12, "norm": norm if norm > 0 else 1.0,
                       "half": 0.5 * norm + 1e-3, "big": 1e3}[kind])
    return torch.tensor(bounds, dtype=torch.float64), weights


def assert_sums_agree(fast, ref, bounds, weights):
    """Both engines' clipped, weighted sums (each with its own clip factors, as release_step does)."""
    s_fast = clipped_sum(fast, bounds, weights=weights)
    s_ref = clipped_sum(ref, bounds, weights=weights)
    assert list(s_fast) == list(s_ref)
    c = clip_factors(ref.norms, bounds) * (1 if weights is None else weights)
    scale = float((c.abs() * ref.norms).sum())
    for name in s_ref:
        assert s_fast[name].shape == s_ref[name].shape and s_fast[name].dtype == s_ref[name].dtype
        diff = float((s_fast[name] - s_ref[name]).abs().max()) if s_ref[name].numel() else 0.0
        assert diff <= RTOL * scale + 1e-300, (name, diff, scale)


def check_engine_agreement(model, X, y, kinds, weights, clipped="bookkeeping"):
    ref, ref_losses = reference(model, X, y)
    fast, losses = fast_per_sample_gradients(model, X, y, clipped_sum=clipped)
    assert isinstance(fast, FastPerSampleGradients)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-12, atol=1e-12)
    assert_norms_agree(fast.norms, ref.norms)
    bounds, weights = coefficient_cases(ref.norms, kinds, weights)
    assert_sums_agree(fast, ref, bounds, weights)
    return fast, ref


@st.composite
def tabular_case(draw, max_n=40):
    kind = draw(st.sampled_from(["logreg", "mlp"]))
    n = draw(st.sampled_from([0, 1, 2, 3, 7, max_n]))
    d = draw(st.integers(1, 9))
    k = draw(st.integers(2, 4))
    hidden = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
    activation = draw(st.sampled_from(["relu", "tanh", "sigmoid", "elu"]))
    seed = draw(st.integers(0, 2 ** 16))
    g = torch.Generator().manual_seed(seed)
    model = build_model(kind, input_shape=(d,), n_classes=k, seed=seed, hidden=hidden, activation=activation).double()
    X = torch.randn(n, d, generator=g, dtype=torch.float64) * draw(st.sampled_from([1e-3, 1.0, 30.0]))
    y = torch.randint(0, k, (n,), generator=g)
    if n:
        rows = draw(st.lists(st.sampled_from(["plain", "zero", "duplicate", "confident"]), min_size=n, max_size=n))
        for i, row in enumerate(rows):
            if row == "zero":
                X[i] = 0.0
            elif row == "duplicate" and i:
                X[i], y[i] = X[i - 1], y[i - 1]
            elif row == "confident":  # a huge, correctly classified input: the loss gradient underflows to 0
                X[i] = X[i] * 1e6 + 1e6
                with torch.no_grad():
                    y[i] = model(X[i:i + 1]).argmax(1)[0]
    kinds = draw(st.lists(st.sampled_from(["inf", "tiny", "norm", "half", "big"]), min_size=n, max_size=n))
    weights = None
    if draw(st.booleans()):
        weights = torch.tensor(draw(st.lists(st.sampled_from([0.0, 0.3, 1.0, 7.0]), min_size=n, max_size=n)),
                               dtype=torch.float64)
    return model, X, y, kinds, weights


@SETTINGS
@given(tabular_case(), st.sampled_from(["bookkeeping", "backward"]))
def test_fast_path_equals_reference_on_logreg_and_mlp(case, clipped):
    model, X, y, kinds, weights = case
    check_engine_agreement(model, X, y, kinds, weights, clipped)


def test_confident_rows_really_have_zero_gradients():
    """The 'confident' rows of the strategy above are true zero-gradient samples (not just small)."""
    model = build_model("mlp", input_shape=(3,), n_classes=2, hidden=(4,), seed=1).double()
    X = torch.ones(2, 3, dtype=torch.float64) * 1e6 + 1e6
    with torch.no_grad():
        y = model(X).argmax(1)
    fast, _ = check_engine_agreement(model, X, y, ["tiny", "norm"], None)
    assert torch.all(fast.norms == 0)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.sampled_from([0, 1, 2, 3]), seed=st.integers(0, 1000),
       kinds=st.lists(st.sampled_from(["inf", "tiny", "norm", "half"]), min_size=3, max_size=3),
       clipped=st.sampled_from(["bookkeeping", "backward"]))
def test_fast_path_equals_reference_on_the_mnist_cnn(n, seed, kinds, clipped):
    g = torch.Generator().manual_seed(seed)
    model = build_model("cnn", input_shape=(1, 28, 28), n_classes=10, seed=seed).double()
    X = torch.rand(n, 1, 28, 28, generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (n,), generator=g)
    if n == 3:
        X[2] = X[1]
        y[2] = y[1]
    check_engine_agreement(model, X, y, kinds[:n], None, clipped)


def test_the_cnn_engine_reads_both_convolutions_and_both_linears():
    model = build_model("cnn", input_shape=(1, 28, 28), n_classes=10).double()
    X, y = torch.rand(2, 1, 28, 28, dtype=torch.float64), torch.tensor([3, 7])
    fast, _ = fast_per_sample_gradients(model, X, y)
    assert isinstance(fast, FastPerSampleGradients) and len(fast.layers) == 4


# ----------------------------------------------------------------- other layer shapes
class Sequence(nn.Module):
    """Linear layers on (n, T, d) inputs (T positions per sample) and a LayerNorm (vmap fallback layer)."""

    def __init__(self, d=4, hidden=5, k=3):
        super().__init__()
        self.inner = nn.Linear(d, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.wide = nn.Linear(hidden, 40)
        self.out = nn.Linear(40, k, bias=False)

    def forward(self, x):
        return self.out(torch.tanh(self.wide(self.norm(self.inner(x))))).mean(1)


class Convs(nn.Module):
    """Conv2d with padding, stride and dilation, a bias-free conv, and a grouped conv (vmap fallback)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(2, 3, 3, padding=1, stride=2)
        self.b = nn.Conv2d(3, 4, (2, 3), dilation=(2, 1), bias=False)
        self.c = nn.Conv2d(4, 4, 1, groups=2)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.c(torch.relu(self.b(torch.relu(self.a(x)))))).mean((2, 3)))


@settings(max_examples=15, deadline=None)
@given(n=st.sampled_from([1, 2, 5]), T=st.sampled_from([1, 2, 6]), seed=st.integers(0, 1000),
       clipped=st.sampled_from(["bookkeeping", "backward"]), max_explicit=st.sampled_from([0, 2 ** 25]))
def test_linear_on_sequences_gram_and_explicit_and_a_layernorm(n, T, seed, clipped, max_explicit):
    """T > 1 exercises the Gram (ghost) norm (small T, or max_explicit = 0) and the explicit one."""
    torch.manual_seed(seed)
    model = Sequence().double()
    X = torch.randn(n, T, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (n,))
    ref, _ = reference(model, X, y)
    fast, _ = fast_per_sample_gradients(model, X, y, clipped_sum=clipped, max_explicit_elements=max_explicit)
    assert isinstance(fast, FastPerSampleGradients)
    assert_norms_agree(fast.norms, ref.norms)
    assert_sums_agree(fast, ref, torch.full((n,), 0.5, dtype=torch.float64), None)


@settings(max_examples=8, deadline=None)
@given(n=st.sampled_from([1, 2, 4]), seed=st.integers(0, 1000), clipped=st.sampled_from(["bookkeeping", "backward"]))
def test_conv2d_with_padding_stride_dilation_and_groups(n, seed, clipped):
    torch.manual_seed(seed)
    model = Convs().double()
    X = torch.randn(n, 2, 9, 10, dtype=torch.float64)
    y = torch.randint(0, 3, (n,))
    ref, _ = reference(model, X, y)
    fast, _ = fast_per_sample_gradients(model, X, y, clipped_sum=clipped)
    assert isinstance(fast, FastPerSampleGradients)
    assert_norms_agree(fast.norms, ref.norms)
    assert_sums_agree(fast, ref, torch.full((n,), 0.1, dtype=torch.float64), torch.rand(n, dtype=torch.float64))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 2)

    def forward(self, x):
        return self.b(self.a(torch.tanh(self.a(x))))  # self.a runs twice


class Scaled(nn.Module):
    """Owns a parameter and has a child with parameters."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.scale * self.fc(x)


@pytest.mark.parametrize("make", [Tied, Scaled])
def test_structures_the_hooks_cannot_read_fall_back_to_the_reference(make):
    torch.manual_seed(0)
    model = make().double()
    X, y = torch.randn(4, 3, dtype=torch.float64), torch.tensor([0, 1, 1, 0])
    ref, _ = reference(model, X, y)
    fast, _ = fast_per_sample_gradients(model, X, y)
    assert isinstance(fast, MaterialisedGradients)
    assert_norms_agree(fast.norms, ref.norms)
    assert_sums_agree(fast, ref, torch.full((4,), 0.3, dtype=torch.float64), None)


def test_params_other_than_the_models_own_are_differentiated_at():
    """``params`` given (not the model's own tensors): the fast path runs the model at those values."""
    model = build_model("mlp", input_shape=(3,), n_classes=2, hidden=(4,)).double()
    params = {k: v + 0.1 for k, v in parameters_of(model).items()}
    X, y = torch.randn(5, 3, dtype=torch.float64), torch.tensor([0, 1, 1, 0, 1])
    grads, _ = per_sample_gradients_and_losses(model, X, y, params=params)
    ref = MaterialisedGradients(grads)
    fast, _ = fast_per_sample_gradients(model, X, y, params=params)
    assert_norms_agree(fast.norms, ref.norms)
    assert_sums_agree(fast, ref, torch.full((5,), 0.2, dtype=torch.float64), None)
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("clipped", ["bookkeeping", "backward"])
def test_an_outer_no_grad_does_not_silence_the_fast_path(clipped):
    """torch.func.grad ignores an outer no_grad; so must the fast path (else every norm would be 0)."""
    model = build_model("mlp", input_shape=(3,), n_classes=2, hidden=(4,)).double()
    X, y = torch.randn(5, 3, dtype=torch.float64), torch.tensor([0, 1, 1, 0, 1])
    ref, _ = reference(model, X, y)
    with torch.no_grad():
        fast, _ = fast_per_sample_gradients(model, X, y, clipped_sum=clipped)
        assert_norms_agree(fast.norms, ref.norms)
        assert_sums_agree(fast, ref, torch.full((5,), 0.2, dtype=torch.float64), None)


def test_objective_engines_and_validation():
    with pytest.raises(ValueError, match="engine"):
        CrossEntropy(engine="opacus")
    with pytest.raises(ValueError, match="clipped_sum"):
        CrossEntropy(clipped_sum="twice")
    model = build_model("logreg", input_shape=(3,), n_classes=2).double()
    X, y, group = torch.randn(4, 3, dtype=torch.float64), torch.tensor([0, 1, 1, 0]), torch.zeros(4, dtype=torch.long)
    params = parameters_of(model)
    fast, _ = batch_gradients(CrossEntropy(), model, X, y, group, params=params)
    ref, _ = batch_gradients(CrossEntropy(engine="vmap"), model, X, y, group, params=params)
    assert isinstance(fast, FastPerSampleGradients) and isinstance(ref, MaterialisedGradients)
    assert_norms_agree(fast.norms, ref.norms)


def test_release_step_gives_the_same_decision_and_noise_for_dict_and_fast_gradients():
    """release_step keeps one code path: a dict of gradients (as the audits pass) or the fast object."""
    model = build_model("mlp", input_shape=(4,), n_classes=3, hidden=(5,)).double()
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(9, 4, generator=g, dtype=torch.float64), torch.randint(0, 3, (9,), generator=g)
    group = torch.randint(0, 2, (9,), generator=g)
    ref, _ = reference(model, X, y)
    fast, _ = fast_per_sample_gradients(model, X, y)
    policy = make_policy("dpsgdf", clip_bound=0.3, noise_multiplier=1.0)
    outs = []
    for grads, norms in ((ref.grads, ref.norms), (fast, fast.norms)):
        outs.append(release_step(grads, norms, group, policy, n_groups=2, expected_batch_size=9,
                                 generator=torch.Generator().manual_seed(4)))
    (d1, _, s1), (d2, _, s2) = outs
    assert d1.record == d2.record and torch.equal(d1.bounds, d2.bounds)
    for name in s1:
        torch.testing.assert_close(s1[name], s2[name], rtol=1e-10, atol=1e-12)
    # the noise is drawn in the same order: zero-noise twins differ from these by the same draws
    quiet = UniformClipping(0.3, 1e-300)
    q1 = release_step(ref.grads, ref.norms, group, quiet, n_groups=2, expected_batch_size=9,
                      generator=torch.Generator())[2]
    q2 = release_step(fast, fast.norms, group, quiet, n_groups=2, expected_batch_size=9,
                      generator=torch.Generator())[2]
    for name in q1:
        torch.testing.assert_close(q1[name], q2[name], rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------- whole runs
def double_data(n=160, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = (X[:, 0] + 0.5 * torch.randn(n, generator=g, dtype=torch.float64) > 0).long()
    group = (torch.rand(n, generator=g) < 0.3).long()
    X[::17] = 0.0  # some zero inputs
    return GroupedDataset(X, y, group, group_names=("g0", "g1"), label_names=("0", "1"))


@pytest.mark.parametrize("method", ["dpsgd", "naive", "dpsgdf"])
@pytest.mark.parametrize("model_name", ["logreg", "mlp"])
def test_train_with_fast_and_reference_engines_gives_the_same_run(method, model_name):
    data = double_data()
    results = {}
    for engine in ("fast", "vmap"):
        model = build_model(model_name, input_shape=(5,), n_classes=2, hidden=(6, 4), seed=3, l2=0.01).double()
        policy = make_policy(method, clip_bound=0.2, noise_multiplier=0.8)
        config = TrainConfig(epochs=2, batch_size=32, lr=0.2, seed=11)
        results[engine] = train(model, data, policy, config, objective=CrossEntropy(engine=engine), progress=False)
    fast, ref = results["fast"], results["vmap"]
    for (k1, p1), (k2, p2) in zip(fast.model.named_parameters(), ref.model.named_parameters()):
        assert k1 == k2
        torch.testing.assert_close(p1, p2, rtol=1e-10, atol=1e-12)
    assert list(fast.steps.columns) == list(ref.steps.columns) and len(fast.steps) == len(ref.steps) > 5
    for column in fast.steps.columns:
        torch.testing.assert_close(torch.tensor(fast.steps[column].to_numpy(dtype=float)),
                                   torch.tensor(ref.steps[column].to_numpy(dtype=float)), rtol=1e-10, atol=1e-12,
                                   equal_nan=True)
    torch.testing.assert_close(torch.tensor(fast.history["value"].to_numpy(dtype=float)),
                               torch.tensor(ref.history["value"].to_numpy(dtype=float)), rtol=1e-9, atol=1e-12,
                               equal_nan=True)
    assert fast.epsilon == ref.epsilon


def test_empty_batches_train_on_both_engines():
    """Poisson sampling at a tiny rate draws empty batches; both engines step through them alike."""
    data = double_data(n=40)
    outs = []
    for engine in ("fast", "vmap"):
        model = build_model("logreg", input_shape=(5,), n_classes=2, seed=1).double()
        result = train(model, data, UniformClipping(0.5, 1.0), TrainConfig(epochs=1, batch_size=1, lr=0.1, seed=2),
                       objective=CrossEntropy(engine=engine), progress=False)
        assert (result.steps["batch_size"] == 0).any()
        outs.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-10, atol=1e-12)


def test_fast_path_on_an_empty_batch():
    model = build_model("mlp", input_shape=(3,), n_classes=2, hidden=(4,)).double()
    fast, losses = fast_per_sample_gradients(model, torch.zeros(0, 3, dtype=torch.float64),
                                             torch.zeros(0, dtype=torch.long))
    assert fast.norms.shape == (0,) and losses.shape == (0,)
    total = fast.weighted_sum(torch.zeros(0, dtype=torch.float64))
    assert list(total) == list(parameters_of(model))
    assert all(float(v.abs().sum()) == 0 for v in total.values())
    with pytest.raises(ValueError, match="coefficients"):
        fast.weighted_sum(torch.zeros(2, dtype=torch.float64))


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
@pytest.mark.parametrize("options", [{}, {"stride": 2}, {"dilation": 2}, {"padding": 2},
                                     {"stride": (2, 1), "dilation": (1, 2), "padding": (1, 3)}])
def test_conv_patches_are_unfolds_numbers_exactly_in_either_layout(layout, options):
    """The patches are copied from the NCHW layout whatever x's layout (channels_last is what train() gives a CNN):
    the same numbers as F.unfold, bit for bit."""
    import torch.nn.functional as F

    from dpfair_analysis.fast_gradients import _patches

    conv = nn.Conv2d(3, 4, (3, 5), **options)
    x = torch.randn(7, 3, 17, 19, generator=torch.Generator().manual_seed(0)).contiguous(memory_format=layout)
    expected = F.unfold(x, conv.kernel_size, dilation=conv.dilation, padding=conv.padding, stride=conv.stride)
    assert torch.equal(_patches(x, conv, conv(x).shape[2:]), expected)


def _record_with_dead_first_layer(model, d: int) -> torch.Tensor:
    """Finite float32 features whose squared norm overflows (entries ~1e20) and at which every first-layer ReLU
    is dead (W1 x + b1 < 0), so that layer's output gradient is exactly 0: the fast engines' (||a||^2 + 1) ||b||^2
    for that layer is inf * 0 = NaN, while the record's gradient from the later layers is finite."""
    W1, b1 = model.net[0].weight.detach().double(), model.net[0].bias.detach().double()
    v = torch.linalg.lstsq(W1, -torch.ones(W1.shape[0], dtype=torch.float64) - b1).solution
    x = (v / v.abs().max() * 1e20).float()
    assert torch.isfinite(x).all() and not torch.isfinite((x * x).sum())
    return x


def test_a_clip_factor_is_zero_where_the_norm_is_not_a_number():
    """c_i = min(1, C / ||g_i||), and 0 for a NaN or infinite norm: a NaN norm compares as "not above the bound" and
    would pass unclipped (factor 1) otherwise."""
    norms = torch.tensor([0.0, 0.3, 0.5, 2.0, math.inf, math.nan], dtype=torch.float64)
    assert clip_factors(norms, 0.5).tolist() == [1.0, 1.0, 1.0, 0.25, 0.0, 0.0]
    assert clip_factors(norms.float(), torch.full((6,), 0.5)).tolist() == [1.0, 1.0, 1.0, 0.25, 0.0, 0.0]


@pytest.mark.parametrize("method, options", [("dpsgd", {}), ("globaladapt", {"initial_bound": 1e-3}),
                                             ("boundedadaptive", {}), ("boundedadaptive", {"clipping": "normalized"})])
def test_a_crafted_record_whose_fast_norm_is_nan_stays_within_its_bound(method, options):
    """Sensitivity at the edge of float32: a record with finite features ~1e20 that kills every first-layer ReLU gets a
    NaN norm from the fast engine (inf * 0). Removing it changes the released sum (same seed, so the same noise) by
    at most its claimed contribution w_i C_i. Before c_i = 0 for NaN norms it entered unclipped: 0.836 against
    C = 0.5 for DP-SGD, 418 (x C / Z) for Global-Adapt at Z = 1e-3. (The methods here decide this step's bounds and
    weights from their state, not from this batch, so the same seed gives both batches the same noise; the other
    methods reach every sample through clip_factors too, which the test above checks.)"""
    d, C = 100, 0.5
    model = build_model("mlp", input_shape=(d,), n_classes=2, seed=0)
    g = torch.Generator().manual_seed(0)
    X = torch.cat([torch.randn(7, d, generator=g), _record_with_dead_first_layer(model, d).unsqueeze(0)])
    y, group = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1]), torch.zeros(8, dtype=torch.long)
    params = parameters_of(model)
    fast, _ = batch_gradients(CrossEntropy(), model, X, y, group, params=params)
    assert math.isnan(float(fast.norms[-1]))
    true_norm = float(batch_gradients(CrossEntropy(engine="vmap"), model, X, y, group, params=params)[0].norms[-1])
    assert true_norm > C  # a record that clipping must shrink, not one that passes whole anyway
    released = []
    for rows in (torch.arange(8), torch.arange(7)):
        grads, _ = batch_gradients(CrossEntropy(), model, X[rows], y[rows], group[rows], params=params)
        policy = make_policy(method, clip_bound=C, noise_multiplier=1.0, batch_size=8, **options)
        policy = policy.for_run() if hasattr(policy, "for_run") else policy
        decision, _, total = release_step(grads, grads.norms, group[rows], policy, n_groups=1, expected_batch_size=8,
                                          generator=torch.Generator().manual_seed(1))
        released.append((decision, total))
    (with_it, s_with), (_, s_without) = released
    change = math.sqrt(sum(float(((s_with[k].double() - s_without[k].double()) ** 2).sum()) for k in s_with))
    weight = 1.0 if with_it.weights is None else float(with_it.weights[-1])
    assert change <= weight * float(with_it.bounds[-1]) * (1 + 1e-5), (change, weight, float(with_it.bounds[-1]))


def _record_with_nan_gradient(d: int) -> torch.Tensor:
    """Finite float32 features of size +-3e38: the MLP's logits, loss and gradient on it are NaN or inf."""
    return torch.randn(d, generator=torch.Generator().manual_seed(5)).sign() * 3e38


@pytest.mark.parametrize("engine, clipped", [("fast", "bookkeeping"), ("fast", "backward"), ("vmap", "bookkeeping")])
@pytest.mark.parametrize("model_name", ["mlp", "logreg"])
def test_a_record_whose_gradient_is_not_finite_adds_nothing_to_the_release(model_name, engine, clipped):
    """Its clip factor is 0, but 0 * NaN = NaN: unless its row is left out of the sum, the whole release is NaN with
    it and finite without it (and the run fails at that step: the failure itself reveals the record). The release
    with it equals the release without it (same seed, so the same noise)."""
    d = 10
    model = build_model(model_name, input_shape=(d,), n_classes=2, seed=0)
    params = parameters_of(model)
    X = torch.cat([torch.randn(7, d, generator=torch.Generator().manual_seed(0)),
                   _record_with_nan_gradient(d).unsqueeze(0)])
    y, group = torch.tensor([0, 1, 0, 1, 0, 1, 0, 0]), torch.zeros(8, dtype=torch.long)
    objective = CrossEntropy(engine=engine, clipped_sum=clipped) if engine == "fast" else CrossEntropy(engine=engine)
    released = []
    for rows in (torch.arange(8), torch.arange(7)):
        grads, _ = batch_gradients(objective, model, X[rows], y[rows], group[rows], params=params)
        _, _, total = release_step(grads, grads.norms, group[rows], UniformClipping(0.5, 1.0), n_groups=1,
                                   expected_batch_size=8, generator=torch.Generator().manual_seed(1))
        released.append(torch.cat([t.flatten() for t in total.values()]))
    with_it, without = released
    assert torch.isfinite(with_it).all()
    torch.testing.assert_close(with_it, without, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batched", [False, True])
def test_a_run_with_a_record_whose_gradient_is_not_finite_completes(batched):
    """DP-SGD on an MLP with one such record trains to the end (serially and K runs at once), as its neighbour
    without it does: before its row was left out of the sums, the run with it stopped at its first batch."""
    from dpfair_analysis.training.batched import RunSpec, train_many

    d, n = 10, 60
    X = torch.randn(n, d, generator=torch.Generator().manual_seed(0))
    X[-1] = _record_with_nan_gradient(d)
    data = GroupedDataset(X, torch.arange(n) % 2, torch.arange(n) % 2, group_names=("a", "b"),
                          label_names=("0", "1"))
    config = TrainConfig(epochs=2, batch_size=20, seed=0)
    model = build_model("mlp", input_shape=(d,), n_classes=2, seed=0)
    if batched:
        results = train_many([RunSpec(model, data, UniformClipping(0.5, 1.0), config),
                              RunSpec(build_model("mlp", input_shape=(d,), n_classes=2, seed=1), data,
                                      UniformClipping(0.5, 1.0), config)], progress=False)
    else:
        results = [train(model, data, UniformClipping(0.5, 1.0), config, progress=False)]
    for result in results:
        assert len(result.steps) == 6 and all(torch.isfinite(p).all() for p in result.model.parameters())
