"""The shared SGD / DP-SGD loop: the step is the algorithm, the accounting is what ran, seeds repeat."""

import math
import platform

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.synthetic import synthetic_groups
from dpfair_analysis.models import build_model, l2_penalty
from dpfair_analysis.privacy.accounting import dpsgd_epsilon
from dpfair_analysis.training.clipping import NonPrivate, UniformClipping
from dpfair_analysis.training.policies import make_policy
from dpfair_analysis.training.loop import TrainConfig, _BatchStats, make_generators, schedule, _step, train
from dpfair_analysis.training.objectives import CrossEntropy


def toy_data(n=300, d=5, seed=0, n_groups=2):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    y = (X[:, 0] + 0.5 * torch.randn(n, generator=g) > 0).long()
    group = torch.randint(0, n_groups, (n,), generator=g)
    return GroupedDataset(X, y, group, group_names=tuple(f"g{k}" for k in range(n_groups)), label_names=("0", "1"))


def test_dp_step_is_clip_sum_noise_average_then_penalty():
    data = toy_data(n=40)
    model = build_model("mlp", input_shape=(5,), n_classes=2, hidden=(4,), l2=0.1, seed=1)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    index = torch.arange(0, 40, 3)
    C, sigma, lr, b = 0.3, 0.7, 0.05, 16
    gen = torch.Generator().manual_seed(5)
    noise_gen = torch.Generator().set_state(gen.get_state())
    _step(model, data, index, UniformClipping(C, sigma), CrossEntropy(), lr=lr, generator=gen, expected_batch_size=b,
          accumulator=_BatchStats(2))
    # The reference: microbatched gradients, clipped one by one, summed, same noise draws.
    reference = build_model("mlp", input_shape=(5,), n_classes=2, hidden=(4,), l2=0.1, seed=1)
    total = {k: torch.zeros_like(v) for k, v in reference.named_parameters()}
    for i in index.tolist():
        reference.zero_grad()
        F.cross_entropy(reference(data.X[i:i + 1]), data.y[i:i + 1]).backward()
        norm = torch.sqrt(sum((p.grad ** 2).sum() for p in reference.parameters()))
        factor = min(1.0, C / float(norm))
        for k, p in reference.named_parameters():
            total[k] += factor * p.grad
    reference.zero_grad()
    l2_penalty(reference).backward()
    for k, p in reference.named_parameters():
        noise = torch.randn(p.shape, generator=noise_gen) * sigma * C
        penalty = p.grad if p.grad is not None else torch.zeros_like(p)  # biases carry no penalty
        expected = before[k] - lr * ((total[k] + noise) / b + penalty)
        torch.testing.assert_close(dict(model.named_parameters())[k].detach(), expected, rtol=1e-5, atol=1e-6)


def test_nonprivate_step_is_plain_minibatch_sgd():
    data = toy_data(n=50)
    model = build_model("logreg", input_shape=(5,), n_classes=2, seed=2)
    reference = build_model("logreg", input_shape=(5,), n_classes=2, seed=2)
    index = torch.arange(10, 35)
    _step(model, data, index, NonPrivate(), CrossEntropy(), lr=0.3, generator=torch.Generator(), expected_batch_size=25,
          accumulator=_BatchStats(2))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.3)
    F.cross_entropy(reference(data.X[index]), data.y[index]).backward()
    optimizer.step()
    for (k, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p, q)


@pytest.mark.parametrize("sampling", ["poisson", "shuffle"])
def test_same_seed_same_numbers_and_different_seed_different_numbers(sampling):
    data = toy_data()
    runs = []
    for seed in (3, 3, 4):
        model = build_model("logreg", input_shape=(5,), n_classes=2, seed=seed)
        result = train(model, data, UniformClipping(1.0, 1.0), TrainConfig(epochs=2, batch_size=32, seed=seed,
                                                                            sampling=sampling, lr=0.1),
                       progress=False)
        runs.append((result, torch.cat([p.detach().flatten() for p in model.parameters()])))
    assert torch.equal(runs[0][1], runs[1][1])
    assert runs[0][0].history.equals(runs[1][0].history)
    assert not torch.equal(runs[0][1], runs[2][1])


def test_step_counts_and_epsilon_match_the_accountant():
    data = toy_data(n=300)
    config = TrainConfig(epochs=3, batch_size=64, lr=0.1, delta=1e-5)
    result = train(build_model("logreg", input_shape=(5,), n_classes=2), data, UniformClipping(1.0, 1.2), config,
                   progress=False)
    assert len(result.steps) == math.ceil(3 * 300 / 64)
    expected = dpsgd_epsilon(n=300, batch_size=64, noise_multiplier=1.2, delta=1e-5, epochs=3)
    assert result.epsilon == pytest.approx(expected, rel=1e-9)
    eps_by_epoch = result.history.query("metric == 'epsilon'").sort_values("epoch")["value"].to_numpy()
    assert len(eps_by_epoch) == 4 and eps_by_epoch[0] == 0.0  # before the first step (every trainer's driver)
    assert all(a < b for a, b in zip(eps_by_epoch, eps_by_epoch[1:]))
    assert result.sampling_matches_accounting


def test_shuffled_batches_are_flagged_and_cover_each_row_once_per_epoch():
    n, b = 70, 16
    total, ends = schedule(n, TrainConfig(epochs=2, batch_size=b, sampling="shuffle"))
    assert total == 2 * math.ceil(n / b) and sorted(ends.values()) == [1, 2]
    data = toy_data(n=n)
    result = train(build_model("logreg", input_shape=(5,), n_classes=2), data, UniformClipping(1.0, 1.0),
                   TrainConfig(epochs=2, batch_size=b, sampling="shuffle", lr=0.1), progress=False)
    assert not result.sampling_matches_accounting
    seen = result.history.query("split == 'batches' and metric == 'n_seen' and group == 'all'")["value"]
    assert list(seen) == [n, n]


def test_poisson_batches_have_the_expected_size():
    n, b = 1000, 100
    data = toy_data(n=n)
    result = train(build_model("logreg", input_shape=(5,), n_classes=2), data, NonPrivate(),
                   TrainConfig(epochs=20, batch_size=b, lr=0.01), progress=False)
    sizes = result.steps["batch_size"].to_numpy()
    # Binomial(n, q): mean b, sd sqrt(b(1-q)) = 9.5; the mean of 200 batches has sd 0.67.
    assert abs(sizes.mean() - b) < 4 * math.sqrt(b * (1 - b / n) / len(sizes))


def test_history_reports_clipping_per_group():
    data = toy_data()
    for bound, expected in ((1e6, 0.0), (1e-6, 1.0)):
        result = train(build_model("logreg", input_shape=(5,), n_classes=2), data, UniformClipping(bound, 1.0),
                       TrainConfig(epochs=1, batch_size=32, lr=0.1), progress=False)
        clipped = result.history.query("metric == 'frac_clipped'")
        assert set(clipped["group"]) == {"all", "g0", "g1"}
        assert (clipped["value"] == expected).all()
    metrics = set(result.history["metric"])
    assert {"loss", "accuracy", "grad_norm", "frac_clipped", "epsilon"} <= metrics


def test_sgd_learns_a_separable_problem():
    data = toy_data(n=400)
    result = train(build_model("logreg", input_shape=(5,), n_classes=2), data, NonPrivate(),
                   TrainConfig(epochs=10, batch_size=32, lr=0.5), progress=False)
    final = result.history.query("split == 'train' and metric == 'accuracy' and group == 'all'")["value"].iloc[-1]
    assert final > 0.8  # the label is sign(x0 + noise/2): Bayes accuracy ~ 0.85


@pytest.mark.parametrize("kwargs, name", [
    ({"epochs": 0}, "epochs"), ({"batch_size": -1}, "batch_size"), ({"lr": float("nan")}, "lr"),
    ({"lr": 0.0}, "lr"), ({"delta": 1.0}, "delta"), ({"delta": 0}, "delta"), ({"sampling": "wor"}, "sampling"),
    ({"seed": -2}, "seed"), ({"eval_every": 0}, "eval_every"), ({"eval_every": 1.5}, "eval_every"),
])
def test_bad_training_settings_name_the_argument(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("kwargs, name", [
    ({"clip_bound": 0.0, "noise_multiplier": 1.0}, "clip_bound"),
    ({"clip_bound": float("inf"), "noise_multiplier": 1.0}, "clip_bound"),
    ({"clip_bound": 1.0, "noise_multiplier": -1.0}, "noise_multiplier"),
    ({"clip_bound": 1.0, "noise_multiplier": float("nan")}, "noise_multiplier"),
])
def test_bad_dpsgd_settings_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        UniformClipping(**kwargs)


def test_unknown_method_and_mismatched_labels_are_refused():
    with pytest.raises(ValueError, match="method"):
        make_policy("dpsgd-x", clip_bound=1.0, noise_multiplier=1.0)
    three_class = GroupedDataset(torch.randn(10, 5), torch.arange(10) % 3, torch.zeros(10, dtype=torch.long),
                                 group_names=("a",), label_names=("0", "1", "2"))
    with pytest.raises(ValueError, match="labels"):
        train(build_model("logreg", input_shape=(5,), n_classes=2), three_class, NonPrivate(),
              TrainConfig(epochs=1, batch_size=2), progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        train(build_model("logreg", input_shape=(5,), n_classes=2), toy_data(n=10), NonPrivate(),
              TrainConfig(epochs=1, batch_size=11), progress=False)


def test_generators_are_independent_and_seeded():
    a1, b1 = make_generators(7, 2)
    a2, b2 = make_generators(7, 2)
    assert torch.equal(torch.rand(5, generator=a1), torch.rand(5, generator=a2))
    assert not torch.equal(torch.rand(5, generator=make_generators(7, 2)[0]), torch.rand(5, generator=make_generators(7, 2)[1]))


def test_a_private_policy_that_states_no_noise_is_refused():
    from dataclasses import dataclass

    from dpfair_analysis.training.clipping import StepDecision

    @dataclass(frozen=True)
    class Leaky:
        name: str = "leaky"
        private: bool = True

        def planned_noise_multipliers(self):
            return ()

        def decide(self, norms, group, *, n_groups, expected_batch_size, generator):
            return StepDecision(bounds=torch.ones_like(norms), noise_std=0.0)

    with pytest.raises(RuntimeError, match="cannot be accounted"):
        train(build_model("logreg", input_shape=(5,), n_classes=2), toy_data(n=50), Leaky(),
              TrainConfig(epochs=1, batch_size=10), progress=False)


def test_callbacks_see_every_iterate_and_do_not_change_the_run():
    data = toy_data(n=120)
    config = TrainConfig(epochs=2, batch_size=30, lr=0.1, seed=3)
    seen = []

    def record(t, model, state):
        seen.append((t, torch.cat([p.detach().flatten().clone() for p in model.parameters()])))

    plain = train(build_model("logreg", input_shape=(5,), n_classes=2, seed=0), data, UniformClipping(1.0, 1.0),
                  config, progress=False)
    watched = train(build_model("logreg", input_shape=(5,), n_classes=2, seed=0), data, UniformClipping(1.0, 1.0),
                    config, progress=False, callbacks=[record])
    total, _ = schedule(len(data), config)
    assert [t for t, _ in seen] == list(range(total + 1))
    final = torch.cat([p.detach().flatten() for p in watched.model.parameters()])
    assert torch.equal(seen[-1][1], final)
    assert not torch.equal(seen[0][1], seen[1][1])
    assert torch.equal(final, torch.cat([p.detach().flatten() for p in plain.model.parameters()]))


def test_a_diverging_run_stops_at_the_step_it_diverges():
    from dpfair_analysis.training.loop import TrainingDiverged

    data = synthetic_groups(sizes=(200, 100), dim=4, seed=0)
    model = build_model("logreg", input_shape=(4,), n_classes=2, seed=0)
    with pytest.raises(TrainingDiverged) as info:
        train(model, data, UniformClipping(1.0, 1.0), TrainConfig(epochs=3, batch_size=50, lr=1e300, seed=0),
              progress=False)
    assert info.value.step == 1 and info.value.total_steps == 18 and "1e+300" in str(info.value)
    # a sane learning rate trains to the end
    result = train(build_model("logreg", input_shape=(4,), n_classes=2, seed=0), data, UniformClipping(1.0, 1.0),
                   TrainConfig(epochs=3, batch_size=50, lr=0.1, seed=0), progress=False)
    assert len(result.steps) == 18


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32),
                                          st.sampled_from([3e38, -3e38, 1e-45])), min_size=0, max_size=40),
                       min_size=0, max_size=4),
       dtype=st.sampled_from([torch.float32, torch.float64]))
@example(values=[[3e38] * 40, [3e38] * 3], dtype=torch.float32)     # finite entries whose sum overflows float32
@example(values=[[1e308, 1e308], [-1.0]], dtype=torch.float64)     # ... and float64: the exact check decides
@example(values=[[float("inf"), float("-inf")]], dtype=torch.float32)  # inf + -inf = NaN
def test_all_finite_is_every_entry_finite(values, dtype):
    from dpfair_analysis.training.loop import all_finite

    tensors = [torch.tensor(v, dtype=dtype) for v in values]
    assert all_finite(tensors) == all(bool(torch.isfinite(t).all()) for t in tensors)


# ----------------------------------------------------------------- the O(b) Poisson sampler is exactly Poisson
def _chi_square_p(counts: dict, expected: dict) -> float:
    from scipy.stats import chisquare

    keys = sorted(expected)
    observed = np.array([counts.get(k, 0) for k in keys], dtype=float)
    return float(chisquare(observed, np.array([expected[k] for k in keys]) * observed.sum() /
                           sum(expected.values())).pvalue)


def test_the_poisson_batch_has_exactly_the_poisson_subset_distribution():
    """Every one of the 2^6 subsets S of 6 rows appears with probability q^|S| (1 - q)^(6 - |S|) (the product of
    independent inclusions the accountant assumes): chi-square over 40,000 seeded batches, both of
    uniform_subset's branches (k <= n/2: distinct draws; k > n/2: a permutation) exercised."""
    from collections import Counter
    from itertools import combinations

    from dpfair_analysis.training.loop import poisson_batch

    n, q = 6, 0.45
    g = torch.Generator().manual_seed(11)
    counts = Counter(tuple(poisson_batch(n, q, g).tolist()) for _ in range(40_000))
    expected = {S: q ** k * (1 - q) ** (n - k) for k in range(n + 1) for S in combinations(range(n), k)}
    assert set(counts) <= set(expected)  # sorted, distinct, in range
    assert _chi_square_p(counts, expected) > 1e-3


def test_the_uniform_subset_is_uniform_on_both_branches():
    from collections import Counter
    from itertools import combinations

    from dpfair_analysis.training.loop import uniform_subset

    g = torch.Generator().manual_seed(5)
    for n, k in ((9, 3), (7, 5)):   # distinct draws; permutation
        counts = Counter(tuple(uniform_subset(n, k, g).tolist()) for _ in range(20_000))
        subsets = list(combinations(range(n), k))
        assert set(counts) <= set(subsets)
        assert _chi_square_p(counts, {S: 1.0 for S in subsets}) > 1e-3


def test_a_large_poisson_batch_has_binomial_size_and_independent_rows():
    """n = 2,000, q = 0.05 (the distinct-draws branch): size mean and variance of Binomial(n, q); each row's
    inclusion rate q; two rows' joint inclusion q^2."""
    from dpfair_analysis.training.loop import poisson_batch

    n, q, draws = 2000, 0.05, 4000
    g = torch.Generator().manual_seed(3)
    member = torch.zeros(draws, n, dtype=torch.bool)
    for t in range(draws):
        member[t, poisson_batch(n, q, g)] = True
    sizes = member.sum(1).double()
    assert abs(sizes.mean() - n * q) < 4 * math.sqrt(n * q * (1 - q) / draws)
    assert abs(sizes.var() / (n * q * (1 - q)) - 1) < 0.1
    rates = member.double().mean(0)
    assert abs(rates.mean() - q) < 4 * math.sqrt(q * (1 - q) / (draws * n))
    assert float(((rates - q).abs() > 5 * math.sqrt(q * (1 - q) / draws)).double().mean()) < 0.001
    joint = (member[:, 0] & member[:, 1]).double().mean()
    assert abs(joint - q * q) < 5 * math.sqrt(q * q / draws)


def test_the_cnn_trains_in_channels_last_to_the_same_numbers_and_comes_back_contiguous(monkeypatch):
    """A convolutional model trains in the channels_last layout on the CPU (faster); the numbers are the
    default layout's to float32 rounding, and the model is returned in the default layout."""
    from dpfair_analysis.training import loop

    g = torch.Generator().manual_seed(0)
    data = GroupedDataset(X=torch.rand(48, 1, 28, 28, generator=g), y=torch.randint(0, 10, (48,), generator=g),
                          group=torch.randint(0, 2, (48,), generator=g), group_names=("a", "b"),
                          label_names=tuple(str(i) for i in range(10)))
    config = TrainConfig(epochs=1, batch_size=16, lr=0.05, seed=1)
    fast = build_model("cnn", input_shape=(1, 28, 28), n_classes=10, seed=0)
    result = train(fast, data, UniformClipping(1.0, 1.0), config, progress=False)
    assert loop._memory_format(fast, torch.device("cpu")) == torch.channels_last
    assert all(p.is_contiguous() for p in fast.parameters())
    monkeypatch.setattr(loop, "_memory_format", lambda model, device: torch.contiguous_format)
    plain = build_model("cnn", input_shape=(1, 28, 28), n_classes=10, seed=0)
    reference = train(plain, data, UniformClipping(1.0, 1.0), config, progress=False)
    for p, q in zip(fast.parameters(), plain.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    assert list(result.steps["batch_size"]) == list(reference.steps["batch_size"])


def test_eval_every_evaluates_every_kth_epoch_and_the_ends_and_changes_nothing_else():
    """``eval_every`` = 3 over 7 epochs: the splits at epochs 0, 3, 6 and 7 only, with the numbers of an every-epoch
    run at those epochs; the batch statistics, epsilon, steps and model are the same."""
    data, test = toy_data(200, seed=1), toy_data(80, seed=2)
    runs = {}
    for every in (1, 3):
        model = build_model("logreg", input_shape=(5,), n_classes=2, seed=0)
        runs[every] = train(model, data, UniformClipping(1.0, 1.0),
                            TrainConfig(epochs=7, batch_size=50, lr=0.1, eval_every=every),
                            test_data=test, progress=False), model
    (every_epoch, model_1), (sparse, model_3) = runs[1], runs[3]
    evaluated = sparse.history.query("split in ['train', 'test']")
    assert sorted(set(evaluated["epoch"])) == [0, 3, 6, 7]
    kept = every_epoch.history[every_epoch.history["epoch"].isin([0, 3, 6, 7])
                               | ~every_epoch.history["split"].isin(["train", "test"])]
    assert kept.reset_index(drop=True).equals(sparse.history.reset_index(drop=True))
    assert every_epoch.steps.equals(sparse.steps)
    assert all(torch.equal(p, q) for p, q in zip(model_1.parameters(), model_3.parameters()))


def test_eval_every_keeps_the_run_key_at_its_default():
    """A new TrainConfig field left at its default is not in the key, so recorded runs are still found."""
    from dpfair_analysis.experiments.cache import config_key

    assert config_key(TrainConfig(eval_every=1)) == config_key(TrainConfig())
    assert config_key(TrainConfig(eval_every=5)) != config_key(TrainConfig())


def test_the_driver_gives_free_heap_back_every_few_steps_and_after_each_evaluation(monkeypatch):
    """run_steps calls release_free_heap after every HEAP_TRIM_STEPS-th step and every evaluation (a full-MNIST
    run's resident set otherwise grew ~2 MB a step from heap fragmentation); trimming changes no number."""
    from dpfair_analysis.training import loop

    assert loop.release_free_heap() is (platform.libc_ver()[0] == "glibc")  # elsewhere a no-op that says so
    calls = []
    monkeypatch.setattr(loop, "HEAP_TRIM_STEPS", 4)
    monkeypatch.setattr(loop, "release_free_heap", lambda: calls.append(len(steps)) or True)
    steps: list[int] = []
    loop.run_steps(torch.nn.Linear(1, 1), total_steps=10, epoch_ends={5: 1, 10: 2},
                   step=lambda t: steps.append(t) or {}, evaluate=lambda epoch: [], epsilon=lambda: None,
                   progress=False)
    assert calls == [4, 5, 8, 10]

