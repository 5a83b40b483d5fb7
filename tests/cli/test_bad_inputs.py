"""Every command refuses bad input at once: exit status 2, one line on stderr that names the flag, no
traceback, nothing written -- and before any data is loaded or any model trained (the loaders and
trainers are replaced by tripwires, so an error that comes late fails here whatever the machine's speed).

To add a command, add its bad invocations to BAD: (argv, the flag the message must name).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpfair_analysis.cli import main

EXISTING_FILE = "{tmp}/existing.txt"
EXISTING_DIR = "{tmp}/adir"


def epsilon_argv(**flags: str | None) -> list[str]:
    """``privacy epsilon`` with valid settings (n 100, batch 10, sigma 1, 1 epoch, delta 1e-5), some replaced, added
    (``accountant="moments"``) or left out (``epochs=None``)."""
    settings = {"n": "100", "batch_size": "10", "sigma": "1", "epochs": "1", "delta": "1e-5"} | flags
    return ["privacy", "epsilon"] + [part for name, value in settings.items() if value is not None
                                     for part in (f"--{name.replace('_', '-')}", value)]


BAD = [
    # compare
    (["compare", "--data", "nope"], "--data"),
    (["compare", "--group-by", "age"], "--group-by"),
    (["compare", "--model", "resnet"], "--model"),
    (["compare", "--methods", "dpsgd,nope"], "--methods"),
    (["compare", "--methods", ""], "--methods"),
    (["compare", "--sampling", "nope"], "--sampling"),
    (["compare", "--test-split", "nope"], "--test-split"),
    (["compare", "--data", "adult", "--test-split", "official"], "--test-split"),
    (["compare", "--epochs", "0"], "--epochs"),
    (["compare", "--epochs", "1000000000"], "--epochs"),
    (["compare", "--epochs", "1e9"], "--epochs"),
    (["compare", "--batch-size", "0"], "--batch-size"),
    (["compare", "--batch-size", "100000000"], "--batch-size"),
    (["compare", "--sigma", "0"], "--sigma"),
    (["compare", "--sigma", "1e300"], "--sigma"),
    (["compare", "--sigma", "nan"], "--sigma"),
    (["compare", "--clip", "-1"], "--clip"),
    (["compare", "--delta", "1"], "--delta"),
    (["compare", "--lr", "0"], "--lr"),
    (["compare", "--l2", "-1"], "--l2"),
    (["compare", "--accountant", "moments"], "--accountant"),
    (["compare", "--accountant", "pld", "--conversion", "classic"], "--conversion"),
    (["compare", "--seeds", "0"], "--seeds"),
    (["compare", "--seeds", "100000"], "--seeds"),
    (["compare", "--seed", "-1"], "--seed"),
    (["compare", "--seed", "99999999999999999999999"], "--seed"),  # torch cannot take it: refused up front
    (["compare", "--out", "/nonexistent/x.csv"], "--out"),
    (["compare", "--out", EXISTING_DIR], "--out"),
    (["compare", "--out", "/proc/x.csv"], "--out"),
    (["compare", "--plots", EXISTING_FILE], "--plots"),
    (["compare", "--train-fraction", "8=2"], "--train-fraction"),
    (["compare", "--train-fraction", "x"], "--train-fraction"),
    (["compare", "--clips", "0"], "--clips"),
    (["compare", "--count-noise-ratio", "0"], "--count-noise-ratio"),
    (["compare", "--device", "cuda"], "--device"),
    (["compare", "--data", "mnist-full", "--model", "cnn", "--epochs", "5000"], "--force"),  # ~39 h: refused
    (["compare", "--data", "compas", "--batch-size", "7000"], "--batch-size"),
    (["--threads", "0", "compare"], "--threads"),
    (["compare", "--jobs", "0"], "--jobs"),
    (["compare", "--methods", "sgd,dpfedavg", "--clients", "0"], "--clients"),
    (["compare", "--clip", "inf"], "--clip"),
    (["compare", "--train-fraction", "8=abc"], "--train-fraction"),
    (["compare", "--data", "synthetic", "--train-fraction", "g0=1.5"], "--train-fraction"),
    (["frobnicate"], "invalid choice"),  # not a command
    (["compare", "--methods", "sgd,dpfedavg", "--clients", "10", "--clients-per-round", "20"], "--clients-per-round"),
    (["compare", "--partition", "shards"], "--partition"),
    (["compare", "--methods", "optq", "--optq-count-noise", "0.4"], "--optq-count-noise"),
    (["compare", "--local-batch", "0"], "--local-batch"),
    (["compare", "--excess-cap", "-1"], "--excess-cap"),
    (["compare", "--backend", "dask"], "--backend"),
    (["compare", "--address", "auto"], "--address"),
    (["compare", "--backend", "serial", "--jobs", "2"], "--backend"),
    # privacy
    (epsilon_argv(n="0"), "--n"),
    (epsilon_argv(batch_size="200"), "--batch-size"),
    (epsilon_argv(sigma="0"), "--sigma"),
    (epsilon_argv(delta="0"), "--delta"),
    (epsilon_argv(epochs=None, steps="0"), "--steps"),
    (epsilon_argv(sigma="nan"), "--sigma"),
    (epsilon_argv(delta="1.5"), "--delta"),
    (epsilon_argv(batch_size="0"), "--batch-size"),
    (epsilon_argv(epochs="-1"), "--epochs"),
    (epsilon_argv(accountant="moments"), "--accountant"),
    (epsilon_argv(accountant="pld", conversion="classic"), "--conversion"),
    # data
    (["data", "fetch", "nope"], "name"),
    (["data", "describe", "nope"], "name"),
    (["data", "describe", "adult", "--group-by", "nope"], "--group-by"),
    (["data", "fetch", "adult", "--from", "/nonexistent/file"], "--from"),
    (["data", "describe", "mnist-full", "--split", "nope"], "--split"),
    # hessian
    (["hessian", "--data", "compas", "--device", "cuda"], "--device"),
    (["hessian", "--data", "nope"], "--data"),
    (["hessian", "--data", "adult", "--model", "cnn"], "--model"),
    (["hessian", "--data", "adult", "--model", "mlp", "--method", "closed"], "--method"),
    (["hessian", "--data", "adult", "--method", "hutchpp", "--probes", "1"], "--probes"),
    (["hessian", "--data", "adult", "--seed", "-1"], "--seed"),
    (["hessian", "--data", "adult", "--l2", "0"], "--l2"),
    (["hessian", "--data", "adult", "--group-by", "nope"], "--group-by"),
    (["hessian", "--data", "adult", "--probes", "100000000"], "--probes"),
    # excess-risk
    (["excess-risk", "--data", "adult", "--mechanism", "nope"], "--mechanism"),
    (["excess-risk", "--data", "adult", "--mechanism", "output", "--epsilons", "0,1"], "--epsilons"),
    (["excess-risk", "--data", "adult", "--mechanism", "output", "--epsilons", "abc"], "--epsilons"),
    (["excess-risk", "--data", "adult", "--mechanism", "output", "--delta", "2"], "--delta"),
    (["excess-risk", "--data", "adult", "--mechanism", "output", "--draws", "0"], "--draws"),
    (["excess-risk", "--data", "adult", "--mechanism", "output", "--draws", "1000000000"], "--draws"),
    (["excess-risk", "--data", "adult", "--mechanism", "dpsgd", "--seeds", "1"], "--seeds"),
    (["excess-risk", "--data", "adult", "--mechanism", "output", "--rows", "0"], "--rows"),
    (["excess-risk", "--data", "nope", "--mechanism", "output"], "--data"),
    (["excess-risk", "--data", "adult", "--mechanism", "dpsgd", "--epochs", "1000000000"], "--epochs"),
    (["excess-risk", "--data", "adult", "--mechanism", "output", "--seed", "2147483648"], "--seed"),
    # train
    (["train", "--data", "nope"], "--data"),
    (["train", "--method", "nope"], "--method"),
    (["train", "--constraint", "nope"], "--constraint"),
    (["train", "--epsilon", "0"], "--epsilon"),
    (["train", "--cp", "0"], "--cp"),
    (["train", "--missing-rate", "1"], "--missing-rate"),
    (["train", "--hidden", "0,2"], "--hidden"),
    (["train", "--epochs", "1000000000"], "--epochs"),
    (["train", "--batch-size", "0"], "--batch-size"),
    (["train", "--accountant", "moments"], "--accountant"),
    (["train", "--seed", "-1"], "--seed"),
    (["train", "--sigma", "1e300"], "--sigma"),
    # audit
    (["audit", "--mechanism", "nope"], "--mechanism"),
    (["audit", "--mechanism", "dpsgd", "--trials", "4"], "--trials"),
    (["audit", "--mechanism", "dpsgd", "--trials", "1000000000"], "--trials"),
    (["audit", "--mechanism", "dpsgd", "--noise-fraction", "0"], "--noise-fraction"),
    (["audit", "--mechanism", "dpsgd", "--confidence", "1"], "--confidence"),
    (["audit", "--mechanism", "dpsgd", "--seed", "-1"], "--seed"),
    (["audit", "--mechanism", "nope", "--sampled"], "--mechanism"),
    # diagnose
    (["diagnose", "--data", "nope"], "--data"),
    (["diagnose", "--group-by", "age"], "--group-by"),
    (["diagnose", "--label", "y"], "--csv"),
    (["diagnose", "--csv", "{tmp}/missing.csv", "--label", "y", "--group", "g"], "--csv"),
    (["diagnose", "--csv", EXISTING_FILE], "--label"),
    (["diagnose", "--method", "fairdp-nope"], "--method"),
    (["diagnose", "--model", "resnet"], "--model"),
    (["diagnose", "--hidden", "64,x"], "--hidden"),
    (["diagnose", "--hidden", "0"], "--hidden"),
    (["diagnose", "--batch-size", "0"], "--batch-size"),
    (["diagnose", "--epochs", "0"], "--epochs"),
    (["diagnose", "--sigma", "0"], "--sigma"),
    (["diagnose", "--epsilon", "-1"], "--epsilon"),
    (["diagnose", "--sigma", "1", "--epsilon", "1"], "--epsilon"),
    (["diagnose", "--clip", "0"], "--clip"),
    (["diagnose", "--delta", "2"], "--delta"),
    (["diagnose", "--draws", "0"], "--draws"),
    (["diagnose", "--rows", "0"], "--rows"),
    (["diagnose", "--train-fraction", "Female=0"], "--train-fraction"),
    (["diagnose", "--seed", "-3"], "--seed"),
    (["diagnose", "--report", "/nonexistent/r.html"], "--report"),
    (["diagnose", "--plot", EXISTING_DIR], "--plot"),
    (["diagnose", "--calibration", "{tmp}/missing.json"], "--calibration"),
    # pfld-table
    (["pfld-table", "--data", "nope"], "--data"),
    (["pfld-table", "--data", "compas", "--jobs", "0"], "--jobs"),
    (["pfld-table", "--data", "compas", "--backend", "joblib", "--address", "auto"], "--address"),
    (["pfld-table", "--data", "compas", "--methods", "z,xx"], "--methods"),
    (["pfld-table", "--data", "compas", "--folds", "1"], "--folds"),
    (["pfld-table", "--data", "compas", "--epsilon", "0"], "--epsilon"),
    (["pfld-table", "--data", "compas", "--constraints", ""], "--constraints"),
    (["pfld-table", "--data", "compas", "--group-by", "nope"], "--group-by"),
    # verify
    (["verify", "--budget", "nope"], "--budget"),
    (["verify", "--paper", "007"], "--paper"),
    (["verify", "--claim", "001.thm99"], "--claim"),
]


class Tripwire(Exception):
    pass


@pytest.fixture
def tripwires(monkeypatch):
    """Loading data or training fails loudly: a bad invocation must be refused before either. Every module
    that imported these functions by name gets the tripwire too (imported first, so no module binds the
    tripwire for good)."""
    import importlib
    import sys

    import dpfair_analysis.data as data
    import dpfair_analysis.training.lagrangian as lagrangian
    import dpfair_analysis.training.loop as loop

    for name in ("compare", "pfld", "fairness_lens", "dpsgdf"):
        importlib.import_module(f"dpfair_analysis.experiments.{name}")

    def trip(*args, **kwargs):
        raise Tripwire("data was loaded or a model trained before the input was checked")

    originals = [data.load, loop.train, lagrangian.train_lagrangian]
    for module in [m for name, m in sys.modules.items() if name.startswith("dpfair_analysis") and m is not None]:
        for attribute, value in list(vars(module).items()):
            if any(value is original for original in originals):
                monkeypatch.setattr(module, attribute, trip)
    monkeypatch.setenv("DPFAIR_DATA", "/nonexistent-data-cache")  # nothing may be fetched either


def test_there_are_at_least_sixty_cases():
    assert len(BAD) >= 60
    from dpfair_analysis.cli import COMMANDS
    covered = {argv[argv.index(next(a for a in argv if not a.startswith("-") and a != "0"))] for argv, _ in BAD}
    assert {c.__name__.rsplit(".", 1)[-1].replace("_", "-") for c in COMMANDS} <= covered | {"pfld-table"}


@pytest.mark.parametrize("argv, flag", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_invocation_is_one_line_naming_the_flag(argv, flag, tmp_path, capsys, tripwires):
    (tmp_path / "existing.txt").write_text("keep me")
    (tmp_path / "adir").mkdir()
    argv = [a.format(tmp=tmp_path) for a in argv]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 2, (status, out, err)
    assert err.count("\n") == 1 and err.startswith("dpfair: error: "), err
    assert flag in err, err
    assert "Traceback" not in err and "Tripwire" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and (tmp_path / "existing.txt").read_text() == \
        "keep me"


def test_work_beyond_a_day_is_refused_with_its_estimate_and_runs_with_force(capsys, tripwires):
    assert main(["compare", "--data", "mnist-full", "--model", "cnn", "--epochs", "5000", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "would take about" in err and "--force" in err, err
    from dpfair_analysis.cli._common import estimated_training_seconds
    assert estimated_training_seconds("cnn", rows=60_000, batch_size=256, epochs=5000, runs=2) > 24 * 3600
    assert estimated_training_seconds("logreg", rows=36_000, batch_size=256, epochs=20, runs=2) < 60
    # with --force the estimate no longer stops it: the tripwire (data loading) is reached
    assert main(["compare", "--data", "mnist-full", "--model", "cnn", "--epochs", "5000", "--quiet", "--force"]) == 1
    assert "Tripwire" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["compare", "--epochs", "1", "--lr", "1e300", "--quiet", "--no-cache"],
                                  ["train", "--data", "compas", "--epochs", "2", "--lr", "1e30", "--sigma", "1"]],
                         ids=["compare", "train"])
def test_divergence_stops_the_run_with_one_line_and_a_non_zero_status(argv, capsys):
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "diverged at step" in err and "--lr" in err and "Traceback" not in err
    assert "accuracy" not in out  # no table of a NaN model


def test_verify_lists_its_claims(capsys):
    assert main(["verify", "--list", "--paper", "003"]) == 0
    out = capsys.readouterr().out
    assert "003.thm1 " in out and "003.lemma1.shared-batch" in out and "001." not in out
