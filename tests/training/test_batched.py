"""K runs trained together (training.batched.train_many) give, run by run, what train() gives each alone:
the same batches, decisions, noise, ledger and history, to floating-point rounding."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from dpfair_analysis.data.synthetic import synthetic_groups
from dpfair_analysis.models import build_model
from dpfair_analysis.training.batched import RunSpec, batchable, train_many
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.training.policies import make_policy


def _runs(model: str, method: str, *, classes: int = 2, seeds=(0, 1, 2), sampling: str = "poisson"):
    runs = []
    for seed in seeds:
        data = synthetic_groups(sizes=(150, 40, 12), n_classes=classes, seed=seed)
        train_data, test_data = data.split(0.25, seed=seed)
        net = build_model(model, input_shape=(data.n_features,), n_classes=classes, seed=seed, hidden=(6,), l2=0.01)
        runs.append(RunSpec(net, train_data, make_policy(method, clip_bound=0.4, noise_multiplier=1.3),
                            TrainConfig(epochs=3, batch_size=24, lr=0.3, seed=seed, delta=1e-5, sampling=sampling),
                            test_data))
    return runs


def _serial(runs):
    return [train(copy.deepcopy(r.model), r.train_data, r.policy, r.config, test_data=r.test_data, progress=False)
            for r in runs]


@pytest.mark.parametrize("model, method, classes, sampling", [
    ("logreg", "dpsgd", 2, "poisson"), ("logreg", "dpsgdf", 3, "poisson"), ("logreg", "naive", 2, "shuffle"),
    ("logreg", "sgd", 2, "poisson"), ("mlp", "dpsgd", 2, "poisson"), ("mlp", "dpsgdf", 2, "poisson"),
], ids=lambda v: str(v))
def test_each_batched_run_is_its_serial_run(model, method, classes, sampling):
    runs = _runs(model, method, classes=classes, sampling=sampling)
    serial = _serial(runs)
    batched = train_many(runs, progress=False)
    for one, many in zip(serial, batched):
        assert one.policy == many.policy and one.learning_rate == many.learning_rate
        assert list(one.steps["batch_size"]) == list(many.steps["batch_size"])  # the same batches
        columns = [c for c in one.steps.columns if c != "step"]
        assert list(one.steps.columns) == list(many.steps.columns)
        np.testing.assert_allclose(one.steps[columns].to_numpy(float), many.steps[columns].to_numpy(float),
                                   rtol=1e-4, atol=1e-5)
        keys = ["epoch", "split", "group", "metric", "step"]
        merged = one.history.merge(many.history, on=keys, suffixes=("_one", "_many"))
        assert len(merged) == len(one.history) == len(many.history)
        np.testing.assert_allclose(merged["value_one"], merged["value_many"], rtol=1e-4, atol=1e-5)
        assert (one.epsilon is None and many.epsilon is None) or one.epsilon == pytest.approx(many.epsilon, rel=1e-12)
        for (name, p), q in zip(one.model.named_parameters(), many.model.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)


def test_what_cannot_be_batched_is_named():
    runs = _runs("logreg", "dpsgd")
    assert batchable(runs) is None
    cnn = build_model("cnn", input_shape=(1, 28, 28), n_classes=10)
    assert "logistic regression and MLP" in batchable([RunSpec(cnn, runs[0].train_data, runs[0].policy,
                                                              runs[0].config)])
    longer = [runs[0], RunSpec(runs[1].model, runs[1].train_data, runs[1].policy,
                               TrainConfig(epochs=4, batch_size=24, lr=0.3, seed=1))]
    assert "numbers of steps" in batchable(longer)
    with pytest.raises(ValueError, match="cannot be trained together: .*numbers of steps"):
        train_many(longer, progress=False)
