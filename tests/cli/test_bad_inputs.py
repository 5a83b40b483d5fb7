"""Every command refuses bad input at once: exit status 2, one line on stderr that names the flag, no
traceback, nothing written -- and before any data is loaded or any model trained (the loaders and
trainers are replaced by tripwires, so an error that comes late fails here whatever the machine's speed).

To add a command, add its bad invocations to BAD: (argv, the flag the message must name).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from dpfair_analysis.cli import main

EXISTING_FILE = "{tmp}/existing.txt"
EXISTING_DIR = "{tmp}/adir"
FIFO = "{tmp}/fifo"                 # special files the writer must never replace
LINK_TO_FIFO = "{tmp}/link-to-fifo"


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
    (["compare", "--eval-every", "0"], "--eval-every"),
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
    # privacy groups
    (["privacy", "groups", "--method", "naive"], "--method"),
    (["privacy", "groups", "--data", "nope"], "--data"),
    (["privacy", "groups", "--every", "0"], "--every"),
    (["privacy", "groups", "--resolution", "0"], "--resolution"),
    (["privacy", "groups", "--accountant", "pld"], "--accountant"),
    (["privacy", "groups", "--epochs", "0"], "--epochs"),
    (["privacy", "groups", "--batch-size", "100000"], "--batch-size"),
    (["privacy", "groups", "--plot", "/nonexistent/x.png"], "--plot"),
    (["privacy", "groups", "--out", EXISTING_DIR], "--out"),
    (["privacy", "groups", "--out", "{tmp}/same.csv", "--plot", "{tmp}/same.csv"], "--plot"),
    (["privacy", "groups", "--train-fraction", "Male=2"], "--train-fraction"),
    # privacy one-run
    (["privacy", "one-run", "--epsilons", "0"], "--epsilons"),
    (["privacy", "one-run", "--epsilons", "1,,2"], "--epsilons"),
    (["privacy", "one-run", "--epsilons", "nan"], "--epsilons"),
    (["privacy", "one-run", "--per-group", "5"], "--per-group"),
    (["privacy", "one-run", "--seeds", "0"], "--seeds"),
    (["privacy", "one-run", "--method", "naive"], "--method"),
    (["privacy", "one-run", "--batch-size", "0"], "--batch-size"),
    (["privacy", "one-run", "--out", EXISTING_DIR], "--out"),
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
    (["audit", "--mechanism", "dpsgd", "--workers", "0"], "--workers"),
    (["audit", "--mechanism", "dpsgd", "--workers", "2"], "--workers"),
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
    # special files, unsafe inputs, one path for two outputs (issue 34)
    (["diagnose", "--report", FIFO], "--report"),
    (["diagnose", "--plot", LINK_TO_FIFO], "--plot"),
    (["compare", "--out", FIFO], "--out"),
    (["diagnose", "--report", "{tmp}/same.png", "--plot", "{tmp}/same.png"], "--report and --plot"),
    (["diagnose", "--model", EXISTING_FILE], "--trust-model-file"),
    (["diagnose", "--model", "logreg", "--trust-model-file"], "--trust-model-file"),
    (["diagnose", "--model", "logreg", "--weights", "{tmp}/missing.pt"], "--weights"),
    (["diagnose", "--model", EXISTING_FILE, "--weights", EXISTING_FILE], "--weights"),
    (["diagnose", "--rows", "1"], "--rows"),
    (["diagnose", "--rows", "99"], "--rows"),
    # empty items in comma lists are refused, never dropped
    (["compare", "--clips", "1,,2"], "--clips"),
    (["compare", "--clips", "1,"], "--clips"),
    (["compare", "--methods", "sgd,,dpsgd"], "--methods"),
    (["diagnose", "--hidden", "8,,2"], "--hidden"),
    (["diagnose", "--csv", EXISTING_FILE, "--label", "y", "--group", "g", "--drop", "a,,b"], "--drop"),
    (["excess-risk", "--data", "adult", "--mechanism", "output", "--epsilons", "1,,2"], "--epsilons"),
    (["pfld-table", "--data", "compas", "--methods", "z,,m"], "--methods"),
    (["pfld-table", "--data", "compas", "--folds", "100000"], "--folds"),
    (["train", "--hidden", "4,,2"], "--hidden"),
    # verify
    (["verify", "--budget", "nope"], "--budget"),
    (["verify", "--paper", "007"], "--paper"),
    (["verify", "--claim", "001.thm99"], "--claim"),
    # flag combinations, refused right after parsing (issue 47): a --tune flag without --tune was ignored, the
    # others were refused only after the imports (and for diagnose, the data)
    (["compare", "--tune-lr", "0.1"], "--tune-lr"),
    (["compare", "--tune-sampling", "poisson"], "--tune-sampling"),
    (["compare", "--validation-fraction", "0.2"], "--validation-fraction"),
    (["compare", "--tune", "--tune-lr", "0,abc"], "--tune-lr"),
    (["compare", "--tune", "--tune-sampling", "poisson,nope"], "--tune-sampling"),
    (["compare", "--tune", "--out", "{tmp}/h.csv"], "--out"),
    (["compare", "--tune", "--plots", "{tmp}/plots"], "--plots"),
    (["compare", "--methods", "dpsgd(C=-1)"], "--methods"),
    (["diagnose", "--split-mode", "per-split", "--splits", "5"], "--splits"),
    (["pfld-table", "--data", "adult", "--tune", "--methods", "fld"], "--methods"),
    (["audit", "--sampled", "--mechanism", "nope"], "--mechanism"),
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
    assert len(BAD) >= 60 and len(BAD) + len(BAD_ENVIRONMENT) + len(BAD_CSV) >= 170
    from dpfair_analysis.cli import COMMANDS
    covered = {argv[argv.index(next(a for a in argv if not a.startswith("-") and a != "0"))] for argv, _ in BAD}
    assert {c.__name__.rsplit(".", 1)[-1].replace("_", "-") for c in COMMANDS} <= covered | {"pfld-table"}


@pytest.mark.parametrize("argv, flag", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_invocation_is_one_line_naming_the_flag(argv, flag, tmp_path, capsys, tripwires):
    (tmp_path / "existing.txt").write_text("keep me")
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link-to-fifo").symlink_to(tmp_path / "fifo")
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
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode) and (tmp_path / "link-to-fifo").is_symlink()


def test_work_beyond_a_day_is_refused_with_its_estimate_and_runs_with_force(capsys, tripwires):
    assert main(["compare", "--data", "mnist-full", "--model", "cnn", "--epochs", "5000", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "would take about" in err and "--force" in err, err
    from dpfair_analysis.cli._common import estimated_training_seconds
    assert estimated_training_seconds("cnn", rows=60_000, batch_size=256, epochs=5000, runs=2) > 24 * 3600
    assert estimated_training_seconds("logreg", rows=36_000, batch_size=256, epochs=20, runs=2) < 60
    # with --force the estimate no longer stops it: the tripwire (data loading) is reached, an internal error (3)
    assert main(["compare", "--data", "mnist-full", "--model", "cnn", "--epochs", "5000", "--quiet", "--force"]) == 3
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


# ----------------------------------------------------------------- environment variables are named too
BAD_ENVIRONMENT = [
    ({"DPFAIR_JOBS": "0"}, ["compare", "--epochs", "1"], "DPFAIR_JOBS"),
    ({"DPFAIR_JOBS": "two"}, ["compare", "--epochs", "1"], "DPFAIR_JOBS"),
    ({"DPFAIR_BACKEND": "dask"}, ["compare", "--epochs", "1"], "DPFAIR_BACKEND"),
    ({"DPFAIR_BACKEND": "serial", "DPFAIR_JOBS": "2"}, ["compare", "--epochs", "1"], "DPFAIR_BACKEND"),
    ({"DPFAIR_DATA": EXISTING_FILE}, ["data", "fetch", "compas"], "DPFAIR_DATA"),
]


@pytest.mark.parametrize("environment, argv, name", BAD_ENVIRONMENT,
                         ids=[" ".join(f"{k}={v}" for k, v in e.items()) for e, _, _ in BAD_ENVIRONMENT])
def test_a_bad_environment_variable_is_one_line_naming_it(environment, argv, name, tmp_path, capsys, monkeypatch):
    (tmp_path / "existing.txt").write_text("keep me")
    for key, value in environment.items():
        monkeypatch.setenv(key, value.format(tmp=tmp_path))
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("dpfair: error: ") and name in err, err
    assert (tmp_path / "existing.txt").read_text() == "keep me"


# ----------------------------------------------------------------- degenerate and oversized CSV files
def _rows(n: int, *, value: str = "0.5", group: str | None = None) -> str:
    return "".join(f"{value if i != 3 else value},{i % 2},{group if group is not None else 'ab'[i % 2]}\n"
                   for i in range(n))


BAD_CSV = [
    ("header only", "x,y,g\n", "has a header row but no data rows"),
    ("duplicate column", "x,x,y,g\n" + "".join(f"1,2,{i % 2},{'ab'[i % 2]}\n" for i in range(40)),
     "names column(s) ['x'] more than once"),
    ("duplicate label column", "x,y,y,g\n" + "".join(f"1,{i % 2},1,{'ab'[i % 2]}\n" for i in range(40)),
     "names column(s) ['y'] more than once"),
    ("inf in a column", "x,y,g\n" + _rows(10) + "inf,1,a\n" + _rows(30), "infinite values"),
    ("-inf in a column", "x,y,g\n" + _rows(10) + "-inf,1,a\n" + _rows(30), "infinite values"),
    ("all-missing group", "x,y,g\n" + _rows(40, group=""), "--group: column 'g'"),
    ("all-missing label", "x,y,g\n" + "".join(f"1,,{'ab'[i % 2]}\n" for i in range(40)), "--label: column 'y'"),
    ("too wide", ",".join(f"c{i}" for i in range(10_001)) + ",y,g\n", "more than 10,000 columns"),
    ("one-hot too wide", "id,y,g\n" + "".join(f"row{i},{i % 2},{'ab'[i % 2]}\n" for i in range(20_001)),
     "after one-hot encoding"),
    ("a one-row group", "x,y,g\n" + _rows(40) + "0.1,1,c\n", "--group"),
]


@pytest.mark.parametrize("content, message", [(c, m) for _, c, m in BAD_CSV], ids=[i for i, _, _ in BAD_CSV])
def test_a_degenerate_csv_is_one_line_naming_the_problem_before_training(content, message, tmp_path, capsys,
                                                                        tripwires):
    path = tmp_path / "data.csv"
    path.write_text(content)
    status = main(["diagnose", "--csv", str(path), "--label", "y", "--group", "g"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("dpfair: error: ") and message in err, err
    assert "Tripwire" not in err


@pytest.mark.parametrize("argv, flag", [
    (["diagnose", "--data", "synthetic", "--train-fraction", "Alien=0.5", "--rows", "200"], "--train-fraction"),
    (["compare", "--data", "synthetic", "--train-fraction", "Alien=0.5", "--epochs", "1"], "--train-fraction"),
    (["diagnose", "--data", "synthetic", "--epsilon", "1e-9", "--rows", "200"], "--epsilon"),
], ids=["diagnose unknown group", "compare unknown group", "unreachable epsilon"])
def test_a_value_known_bad_only_with_the_data_still_names_its_flag(argv, flag, capsys):
    assert main([*argv, "--no-cache"] if argv[0] == "compare" else argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"dpfair: error: {flag}"), err


# ----------------------------------------------------------------- faults: nothing finished is lost
def test_an_unwritable_cache_is_said_once_and_the_run_still_completes(tmp_path, capsys, monkeypatch):
    (tmp_path / "a-file").write_text("not a directory")
    for cache in (tmp_path / "a-file", tmp_path / "a-file" / "runs"):  # a file at the path, a path under a file
        monkeypatch.setenv("DPFAIR_CACHE", str(cache))
        status = main(["compare", "--data", "synthetic", "--epochs", "1", "--methods", "sgd,dpsgd", "--json"])
        out, err = capsys.readouterr()
        assert status == 0, err
        assert err.count("cannot be written") == 1 and "running uncached" in err, err
        assert len(__import__("json").loads(out)["rows"]) > 0
    assert (tmp_path / "a-file").read_text() == "not a directory"


def test_an_output_that_is_a_symlink_writes_its_target_and_keeps_the_link(tmp_path, capsys):
    target = tmp_path / "kept" / "history.csv"
    target.parent.mkdir()
    target.write_text("old")
    (tmp_path / "link.csv").symlink_to(target)
    status = main(["compare", "--data", "synthetic", "--epochs", "1", "--methods", "sgd", "--no-cache", "--quiet",
                   "--out", str(tmp_path / "link.csv")])
    assert status == 0, capsys.readouterr().err
    assert (tmp_path / "link.csv").is_symlink() and os.readlink(tmp_path / "link.csv") == str(target)
    header = target.read_text().splitlines()[0].split(",")
    assert {"method", "seed", "epoch"} <= set(header)  # the history, written through the link
    assert sorted(p.name for p in target.parent.iterdir()) == ["history.csv"]


@pytest.mark.parametrize("launcher, after", [("-m", "dpfair_analysis.cli"), ("-m", "torch"),
                                             ("-m", "dpfair_analysis.training.loop"), ("script", "dpfair_analysis.cli"),
                                             ("script", "torch")])
def test_ctrl_c_at_any_moment_of_startup_ends_with_one_line_and_status_130(tmp_path, launcher, after):
    """SIGINT while the command starts (just after the CLI module, while torch loads, while the trainer loads):
    'dpfair: interrupted', status 130, no traceback. The moment is found from ``-X importtime``'s report of
    each finished import, not from a delay, so the test is the same on a loaded machine."""
    import signal

    command = ["-m", "dpfair_analysis.cli"] if launcher == "-m" else [str(Path(sys.executable).parent / "dpfair")]
    process = subprocess.Popen([sys.executable, "-X", "importtime", *command, "compare", "--data", "synthetic",
                                "--epochs", "50", "--no-cache", "--quiet"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    for line in process.stderr:
        if line.rstrip().endswith(f"| {after}") or line.rstrip().endswith(f"|   {after}"):
            break
        if line.split("|")[-1].strip() == after:
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    lines = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert process.returncode == 130, (after, err[-2000:])
    assert lines == ["dpfair: interrupted"], (after, lines)


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """``dpfair verify --list | head -0``: the reader closes the pipe before the command writes (the command
    takes a tenth of a second to start, the close a microsecond); the command stops without a word on stderr
    (no 'internal error: BrokenPipeError'), with status 141, as a shell reports a writer killed by SIGPIPE."""
    process = subprocess.Popen([sys.executable, "-m", "dpfair_analysis.cli", "verify", "--list"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    process.stdout.close()  # the reader leaves
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141 and err == "", err


@pytest.mark.parametrize("argv", [
    ["--help"], ["compare", "--help"], ["compare", "--data", "nope"], ["compare", "--clips", "1,,2"],
    ["diagnose", "--rows", "1"], ["diagnose", "--model", "resnet"], ["privacy", "epsilon", "--n", "0"],
    ["data", "describe", "adult", "--group-by", "nope"], ["excess-risk", "--data", "nope"],
    ["pfld-table", "--data", "compas", "--folds", "1"], ["train", "--epsilon", "0"],
    ["hessian", "--data", "adult", "--probes", "0"], ["audit", "--mechanism", "dpsgd", "--trials", "3"],
    ["audit", "--sampled", "--mechanism", "dpsgd", "--noise-fraction", "0.5"], ["verify", "--budget", "nope"],
], ids=lambda argv: " ".join(argv))
def test_help_and_refusals_import_neither_torch_nor_scipy_nor_pandas(argv):
    """Startup: --help and a refused flag are answered before the heavy libraries load (5-6 s and 350 MB
    before; measured in a fresh process: nothing is imported that the answer does not need)."""
    code = ("import sys\nfrom dpfair_analysis.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'scipy', 'dp_accounting', 'pandas', 'sklearn') if m in sys.modules))"
            % (argv,))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip().splitlines()[-1] == "[]", (result.stdout[-300:], result.stderr[-300:])


# ----------------------------------------------------------------- refused before any work (issue 47)
#: Heavy libraries: a refusal must come before any of them is imported.
HEAVY = ("torch", "scipy", "dp_accounting", "pandas", "sklearn")
FULL = "{full}"  # a directory on a disk the command sees as full (0 bytes free)

BEFORE_WORK = [
    (["compare", "--tune", "--tune-lr", "0,abc"], "--tune-lr"),
    (["compare", "--tune", "--tune-sampling", "poisson,nope"], "--tune-sampling"),
    (["compare", "--tune-lr", "0.1"], "--tune-lr"),
    (["diagnose", "--split-mode", "per-split", "--splits", "5"], "--splits"),
    (["pfld-table", "--data", "adult", "--tune", "--methods", "fld"], "--methods"),
    (["compare", "--methods", "dpsgd,nope"], "--methods"),
    (["audit", "--mechanism", "nope"], "--mechanism"),
    (["audit", "--sampled", "--mechanism", "nope"], "--mechanism"),
    (["pfld-table", "--data", "bank", "--group-by", "age3", "--methods", "clf,z", "--tune"], "--methods"),
    (["compare", "--out", f"{FULL}/h.csv"], "--out"),
    (["compare", "--plots", f"{FULL}/plots"], "--plots"),
    (["diagnose", "--report", f"{FULL}/r.html"], "--report"),
    (["diagnose", "--plot", f"{FULL}/p.png"], "--plot"),
]


@pytest.mark.parametrize("argv, flag", BEFORE_WORK, ids=[" ".join(a) for a, _ in BEFORE_WORK])
def test_refused_before_work_in_one_line_without_importing_torch(argv, flag, tmp_path):
    """Each is one line naming the flag, status 2, in a fresh process that imports none of the heavy libraries
    (before issue 47 each imported torch, most loaded the data, one trained: 3-7 s of CPU here, 25-84 s of wall
    time on a loaded machine). An output on a full disk is refused up front: its free space is checked."""
    full = tmp_path / "full"
    full.mkdir()
    argv = [a.format(full=full) for a in argv]
    code = f"""
import shutil, sys
real = shutil.disk_usage
def disk_usage(path):  # {str(full)!r} is on a full disk
    usage = real(path)
    return usage._replace(free=0) if str(path).startswith({str(full)!r}) else usage
shutil.disk_usage = disk_usage
from dpfair_analysis.cli import main
status = main({argv!r})
print(status, sorted(m for m in {HEAVY!r} if m in sys.modules))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.stdout.strip().splitlines()[-1:] == ["2 []"], (result.stdout[-300:], result.stderr[-500:])
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dpfair: error: ") and flag in \
        result.stderr, result.stderr
    assert list(full.iterdir()) == []


# ----------------------------------------------------------------- a disk that fills during the work
@pytest.mark.parametrize("argv, flag, kept", [
    (["compare", "--data", "synthetic", "--epochs", "1", "--methods", "sgd", "--quiet", "--out", "{full}/h.csv"],
     "--out", "the history is kept at"),
    (["compare", "--data", "synthetic", "--epochs", "1", "--methods", "sgd", "--quiet", "--plots", "{full}/plots"],
     "--plots", "the figures are kept in"),
    (["diagnose", "--data", "synthetic", "--rows", "200", "--epochs", "2", "--split-mode", "per-split",
      "--no-recommendations", "--report", "{full}/r.html"], "--report", "the report is kept at"),
    (["diagnose", "--data", "synthetic", "--rows", "200", "--epochs", "2", "--split-mode", "per-split",
      "--no-recommendations", "--plot", "{full}/p.png"], "--plot", "the figure is kept at"),
], ids=["compare --out", "compare --plots", "diagnose --report", "diagnose --plot"])
def test_a_write_that_fails_at_the_end_keeps_the_result_and_says_where_in_one_line(argv, flag, kept, tmp_path,
                                                                                   capsys, monkeypatch):
    """No space left when the result is written (the disk filled during the work): one line naming the flag, the
    error and the file the finished result was written to instead, status 2 -- not 'internal error: OSError',
    status 1, and the run lost. The table is still printed; nothing is left half in the full directory."""
    full, elsewhere = tmp_path / "full", tmp_path / "elsewhere"
    full.mkdir()
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))  # the fallback's directory (the temporary one)
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path / "cache"))
    real_replace = os.replace

    def replace(source, target):  # every file renamed into place under full/ finds the disk full
        if Path(full) in Path(target).parents:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    status = main([a.format(full=full) for a in argv])
    out, err = capsys.readouterr()
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith(f"dpfair: error: {flag}: could not write") and \
        "No space left on device" in err and kept in err and "Traceback" not in err, err
    where = Path(re.search(rf"{kept} (\S+) instead", err).group(1))
    assert elsewhere in where.parents and where.exists()
    assert (any(where.iterdir()) if where.is_dir() else where.stat().st_size > 0)
    assert ("run cache" in err) == (argv[0] == "compare")
    assert "accuracy" in out.lower() or "cost" in out.lower()  # the result is printed as well
    assert [p for p in full.rglob("*") if p.is_file()] == []  # no temporary file left behind


# ----------------------------------------------------------------- audit --data: only finite numbers
def _saved(array, **kwargs) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array, **kwargs)
    return buffer.getvalue()


BAD_AUDIT_DATA = [
    ("nan.csv", "1\nnan\n2\n", "NaN"),
    ("inf.csv", "1\ninf\n2\n", "an infinity"),
    ("nan-column.csv", "group,y\n0,1\n1,nan\n", "column 'y' holds NaN"),
    ("nan.npy", _saved(np.array([1.0, np.nan])), "NaN"),
    ("inf.npy", _saved(np.array([[1.0, -np.inf]])), "an infinity"),
    ("empty.csv", "", "is empty"),
    ("empty.npy", b"", "is empty"),
    ("no-records.npy", _saved(np.array([])), "no records"),
    ("header-only.csv", "group,y\n", "no records"),
    ("text.csv", "group,y\na,b\n", "text where a number belongs"),
    ("text.npy", _saved(np.array(["a", "b"])), "not numbers"),
    ("objects.npy", _saved(np.array([{"a": 1}], dtype=object), allow_pickle=True), "not a numeric .npy array"),
    ("garbage.npy", b"\x80\x04 not an array", "not a numeric .npy array"),
]


@pytest.mark.parametrize("name, content, fragment", BAD_AUDIT_DATA, ids=[n for n, _, _ in BAD_AUDIT_DATA])
def test_audit_data_that_is_not_finite_numbers_is_refused_naming_data(name, content, fragment, tmp_path, capsys):
    """NaN, infinities, an empty file, no records, text: refused naming --data and the problem (before issue 47
    NaN was audited as a number or blamed on the pair, an empty CSV audited, an empty .npy an internal error);
    a .npy that holds Python objects gets no advice to 'load it unsafely'."""
    (tmp_path / "mechanism.py").write_text("import numpy as np\n\ndef f(data, rng):\n"
                                           "    return float(np.sum(np.asarray(data, dtype=float))) + rng.laplace()\n")
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    status = main(["audit", "--target", f"{tmp_path / 'mechanism.py'}:f", "--epsilon", "1", "--relation",
                   "add-remove", "--trials", "10", "--data", str(path)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("dpfair: error: --data") and fragment in err, err
    assert "unsafe" not in err and "allow_pickle" not in err and "pickle.load" not in err, err


# ----------------------------------------------------------------- outputs planted or clashing, and late refusals
def test_a_fifo_planted_in_the_plots_directory_is_refused_before_the_work(tmp_path, capsys):
    """The review's plotsC: a FIFO at plots/cost.png and a directory at loss_grad_norm.csv. Before, the runs were
    trained and then the command ended with status 2, no table printed and half the figures written."""
    plots = tmp_path / "plots"
    plots.mkdir()
    os.mkfifo(plots / "cost.png")
    status = main(["compare", "--data", "synthetic", "--epochs", "1", "--methods", "sgd", "--quiet", "--no-cache",
                   "--plots", str(plots)])
    out, err = capsys.readouterr()
    assert status == 2 and err.count("\n") == 1 and "--plots" in err and "FIFO" in err and out == ""
    assert sorted(p.name for p in plots.iterdir()) == ["cost.png"]


def test_an_out_file_among_the_plots_files_is_refused_before_the_work(tmp_path, capsys):
    """--out DIR/accuracy.csv --plots DIR: the figure's data would have replaced the history without a word."""
    status = main(["compare", "--data", "synthetic", "--epochs", "1", "--methods", "sgd", "--quiet", "--no-cache",
                   "--out", str(tmp_path / "accuracy.csv"), "--plots", str(tmp_path)])
    _, err = capsys.readouterr()
    assert status == 2 and "--out" in err and "--plots writes (accuracy.csv)" in err
    assert not (tmp_path / "accuracy.csv").exists()


def test_a_figure_format_matplotlib_cannot_write_is_refused_before_the_work(tmp_path, capsys):
    status = main(["privacy", "groups", "--data", "synthetic", "--epochs", "1", "--plot", str(tmp_path / "f.jpgg")])
    _, err = capsys.readouterr()
    assert status == 2 and err.count("\n") == 1 and "--plot" in err and "figure format" in err


def test_the_figure_formats_are_the_ones_matplotlib_writes():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backend_bases import FigureCanvasBase

    from dpfair_analysis.cli._common import FIGURE_FORMATS

    assert set(FIGURE_FORMATS) == set(FigureCanvasBase.get_supported_filetypes())


def test_a_refusal_that_arrives_after_the_check_keeps_the_result_elsewhere(tmp_path, monkeypatch):
    """A FIFO planted at --out while the runs train: the write is refused (ValueError), and the output goes to a
    file of its own in the temporary directory, as for a full disk -- before, the result was lost (status 2, --json
    printed nothing)."""
    from dpfair_analysis.cli._common import Outputs, UsageError

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    target = tmp_path / "h.csv"
    os.mkfifo(target)
    outputs = Outputs()
    kept = outputs.file("--out", target, lambda tmp: tmp.write_text("result"), what="history")
    assert kept is not None and elsewhere in kept.parents and kept.read_text() == "result"
    with pytest.raises(UsageError, match="--out: could not write .* FIFO .* the history is kept at"):
        outputs.finish()
