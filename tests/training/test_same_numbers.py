"""A default run gives the same numbers, bit for bit, as before the step and the evaluation were made cheaper.

The background recorder trains full MNIST from this code and its committed records are reached by their
configuration's key: a change that moved any float of a default run would silently mix two versions of the
numbers. The fingerprints below are SHA-256 digests of a tiny default run's history, step records and final
parameters (float64 bytes), recorded at commit c9db4b9 (before issue 49.2's changes) with the torch build and CPU
kernels named beside them, at one intra-op thread (the recorder's setting and the suite's; two threads
give the CNN other bits); on another torch build or CPU instruction set the float arithmetic itself may differ,
so the test is skipped there (with the reason) rather than failing for a reason that is not this code's.
"""

import hashlib

import numpy as np
import pytest
import torch

from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.models import build_model
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.loop import TrainConfig, train

#: (torch version, CPU capability) the fingerprints were recorded with
RECORDED_WITH = ("2.13.0+cpu", "AVX512")
#: The digests of c9db4b9's code, per CPU they were computed on: the same torch build and capability give other bits on
#: other CPUs (an AMD EPYC's AVX512 kernels round differently from the first machine's; 2026-12-07, where c9db4b9's
#: code and today's gave the same digests). A run must give one CPU's digests (a change of the code's numbers gives
#: none of them); a new CPU's are recorded by running c9db4b9's ``default_run_fingerprint`` there.
FINGERPRINTS_BY_CPU = {
    "the machine of c9db4b9 (2026-12-06)": {
        "cnn": "e0e659d8106b77cd09091cec11042acacb982ccea7969785516aeb117602ff77",
        "mlp": "9d2efefb729bb065c4c0b75b0a3e7804b715e92c824c40989f814b32044b28f2",
    },
    "AMD EPYC (2026-12-07)": {
        "cnn": "5780ae9835bb39b1c935a9a07201553d2ed9fbd40ca9fd73d6f64d517934ab52",
        "mlp": "337909e4096a922e45638341ef7da583085fe84bd876c7313d5b796a6d97d049",
    },
}
FINGERPRINTS = {model: {digests[model] for digests in FINGERPRINTS_BY_CPU.values()} for model in ("cnn", "mlp")}


def tiny_data(model_name: str, n: int, seed: int) -> GroupedDataset:
    """``n`` random rows shaped for ``model_name`` (1x28x28 images for the CNN, 12 features otherwise), 3 groups."""
    gen = torch.Generator().manual_seed(seed)
    shape = (n, 1, 28, 28) if model_name == "cnn" else (n, 12)
    X = torch.rand(shape, generator=gen)
    y = torch.randint(0, 10 if model_name == "cnn" else 2, (n,), generator=gen)
    group = torch.randint(0, 3, (n,), generator=gen)
    return GroupedDataset(X=X, y=y, group=group, group_names=("a", "b", "c"),
                          label_names=tuple(str(k) for k in range(10 if model_name == "cnn" else 2)))


def default_run_fingerprint(model_name: str) -> str:
    """SHA-256 of a tiny DP-SGD run with every loop setting at its default: history values, step records, and the
    final parameters, as float64 bytes in order."""
    train_data, test_data = tiny_data(model_name, 160, seed=1), tiny_data(model_name, 40, seed=2)
    model = build_model(model_name, input_shape=tuple(train_data.X.shape[1:]), n_classes=train_data.n_classes,
                        seed=0)
    result = train(model, train_data, UniformClipping(1.0, 1.0), TrainConfig(epochs=2, batch_size=80, lr=0.1),
                   test_data=test_data, progress=False)
    digest = hashlib.sha256()
    digest.update(result.history[["epoch", "step"]].to_numpy(np.float64).tobytes())
    digest.update(result.history["value"].to_numpy(np.float64).tobytes())
    digest.update("|".join(result.history["split"] + ":" + result.history["group"] + ":"
                           + result.history["metric"]).encode())
    digest.update(result.steps.select_dtypes("number").to_numpy(np.float64).tobytes())
    for p in model.parameters():
        digest.update(p.detach().to(torch.float64).numpy().tobytes())
    return digest.hexdigest()


@pytest.mark.parametrize("model_name", sorted(FINGERPRINTS))
def test_a_default_run_gives_the_recorded_numbers_bit_for_bit(model_name):
    here = (torch.__version__, torch.backends.cpu.get_cpu_capability())
    if here != RECORDED_WITH:
        pytest.skip(f"fingerprints recorded with torch {RECORDED_WITH[0]} on {RECORDED_WITH[1]}; here {here}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert default_run_fingerprint(model_name) in FINGERPRINTS[model_name]
    finally:
        torch.set_num_threads(threads)
