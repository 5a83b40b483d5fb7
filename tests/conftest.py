"""Test-wide settings: results cache in a temporary directory, never the user's."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_result_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path_factory.mktemp("run-cache")))


# The suite runs two workers on two cores: one intra-op thread each avoids oversubscription,
# which made small-model steps up to 100x slower in the benchmark (benchmarks/README.md).
import torch  # noqa: E402

torch.set_num_threads(1)
