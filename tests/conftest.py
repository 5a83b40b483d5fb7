"""Test-wide settings: results cache in a temporary directory, never the user's."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_result_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DPFAIR_CACHE", str(tmp_path_factory.mktemp("run-cache")))
