"""``device`` / ``--device``: CPU by default, CUDA only where torch sees it (only the CPU path runs here)."""

import json

import pytest
import torch

from dpfair_analysis.cli import main
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.models import build_model
from dpfair_analysis.training.clipping import UniformClipping
from dpfair_analysis.training.lagrangian import LagrangianConfig
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.validation import check_device

NO_CUDA = not torch.cuda.is_available()


def toy(n=80, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 4, generator=g)
    y = (X[:, 0] > 0).long()
    return GroupedDataset(X, y, torch.randint(0, 2, (n,), generator=g), group_names=("a", "b"),
                          label_names=("0", "1"))


def test_device_names_are_checked():
    assert check_device("cpu") == "cpu"
    for bad in ("tpu", "gpu", "cuda:x"):
        with pytest.raises(ValueError, match="device"):
            check_device(bad)
    with pytest.raises(TypeError, match="device"):
        check_device(0)


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("make", [lambda: TrainConfig(device="cuda"), lambda: LagrangianConfig(device="cuda:0"),
                                  lambda: check_device("cuda")])
def test_cuda_is_refused_without_cuda(make):
    with pytest.raises(ValueError, match=r"device.*torch.cuda.is_available\(\) is False"):
        make()


def test_an_explicit_cpu_run_is_the_default_run():
    results = []
    for config in (TrainConfig(epochs=1, batch_size=16, lr=0.1, seed=3),
                   TrainConfig(epochs=1, batch_size=16, lr=0.1, seed=3, device="cpu")):
        model = build_model("mlp", input_shape=(4,), n_classes=2, hidden=(5,), seed=1)
        results.append(train(model, toy(), UniformClipping(1.0, 1.0), config, progress=False))
        assert all(p.device.type == "cpu" for p in model.parameters())
    assert results[0].history.equals(results[1].history)
    for p, q in zip(results[0].model.parameters(), results[1].model.parameters()):
        assert torch.equal(p, q)


def test_dataset_to_its_own_device_is_itself():
    data = toy()
    assert data.to("cpu") is data and data.to(torch.device("cpu")) is data


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("command", [["compare", "--data", "synthetic"], ["train", "--data", "compas"],
                                     ["hessian", "--data", "compas"]])
def test_cli_refuses_cuda_in_one_line_naming_device(capsys, command):
    code = main([*command, "--device", "cuda"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("dpfair: error:") and "--device" in err and "cuda" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_device_cpu_trains(capsys):
    code = main(["compare", "--data", "synthetic", "--epochs", "1", "--batch-size", "64", "--json", "--quiet",
                 "--no-cache", "--device", "cpu"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert {r["method"] for r in json.loads(out)["rows"]} == {"sgd", "dpsgd"}
    code = main(["train", "--data", "compas", "--method", "fld", "--epochs", "1", "--batch-size", "512",
                 "--hidden", "4", "--json", "--device", "cpu"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["method"] == "fld"


def test_hessian_on_the_cpu_device_gives_the_default_traces(capsys):
    argv = ["hessian", "--data", "compas", "--model", "mlp", "--hidden", "4", "--method", "hutchinson",
            "--probes", "8", "--train-epochs", "1", "--json"]
    assert main(argv) == 0
    default = json.loads(capsys.readouterr().out)
    assert main([*argv, "--device", "cpu"]) == 0
    on_cpu = json.loads(capsys.readouterr().out)
    assert on_cpu["settings"]["device"] == "cpu"
    assert on_cpu["rows"] == default["rows"] and all(r["trace"] > 0 for r in default["rows"])
