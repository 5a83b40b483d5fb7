"""Test-wide settings: results cache in a temporary directory, never the user's; the staged real data files."""

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
"""The staged real files beside the repository (CI has them); tests that need them skip without them."""


@pytest.fixture
def staged_file():
    """The path of a staged real file: ``staged_file(name)``; the test skips if it is not present."""
    def path(file: str) -> Path:
        if not (SHARED_DATA / file).is_file():
            pytest.skip(f"{SHARED_DATA / file} is not present")
        return SHARED_DATA / file
    return path


@pytest.fixture
def real_cache(tmp_path, monkeypatch, staged_file):
    """A fresh data cache with the staged file(s) installed through the verifying route (``--from``):
    ``real_cache(dataset, file)``. A test never depends on what an earlier session left in the user's cache."""
    from dpfair_analysis.cli import main

    monkeypatch.setenv("DPFAIR_DATA", str(tmp_path))

    def install(dataset: str, file: str) -> Path:
        assert main(["data", "fetch", dataset, "--from", str(staged_file(file))]) == 0
        return tmp_path / file
    return install


@pytest.fixture
def cli(capsys):
    """``cli(*argv)``: the ``dpfair`` command run in this process (its ``main``), returning (status, stdout,
    stderr) -- every CLI test's one helper."""
    from dpfair_analysis.cli import main

    def run(*argv) -> tuple[int, str, str]:
        status = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return status, out, err
    return run


@pytest.fixture(autouse=True)
def _isolated_result_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path_factory.mktemp("run-cache")))


@pytest.fixture(autouse=True)
def _no_data_set_kept_from_another_test():
    """Each test starts with no data set kept in memory by ``data.load`` (a test that replaces a loader's part must
    not be served another test's parse); within a test, repeated loads are served from memory as in a user's run."""
    import sys

    loaded = getattr(sys.modules.get("dpfair_analysis.data"), "_LOADED", None)
    if loaded is not None:
        loaded.clear()


# The suite runs two workers on two cores: one intra-op thread each avoids oversubscription,
# which made small-model steps up to 100x slower in the benchmark (benchmarks/README.md). The same for
# BLAS and OpenMP (numpy, scipy, scikit-learn, and the notebook kernels and CLI subprocesses, which inherit
# the environment): with a thread per core per worker, scipy's L-BFGS-B under fairlearn took 30 s of a
# 4.6 s test on a loaded machine.
import os  # noqa: E402

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

torch.set_num_threads(1)
threadpool_limits(1)  # the BLAS and OpenMP pools already loaded before this file was read
