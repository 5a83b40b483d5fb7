"""The pytest plugin of the kit (registered through the ``pytest11`` entry point ``dpfair``).

A privacy claim becomes a test::

    import numpy as np
    import pytest

    @pytest.mark.dp(epsilon=0.5, relation="queries")
    def test_noisy_count_is_private(dp):
        dp.assert_private(lambda data, rng: data[0] + rng.laplace(scale=2.0), data=np.ones(3))

* ``@pytest.mark.dp(epsilon=..., delta=0, relation=..., **audit options)`` states the claim;
  the ``dp`` fixture's :meth:`DPCheck.assert_private` / :meth:`DPCheck.audit` /
  :meth:`DPCheck.assert_sensitivity` take it as their defaults (any of them can be given
  in the call instead).
* ``--dp-budget quick|full`` sets how hard every audit searches (default quick; ``smoke``
  only checks that a suite runs);
  ``--dp-seed N`` shifts every test's seed. Each test's seed is derived from its node id,
  so a run is reproducible and two tests never share random numbers.
* No global registry: results travel with each test's report (``user_properties``) to one
  reporter object per session, so the summary also works under pytest-xdist.
* At the end: a summary table in the terminal and a JSON artifact -- ``--dp-report PATH``, or
  ``.pytest_cache/d/dpfair/dp-report.json`` when pytest's cache is on -- written atomically.

Importing this module imports only pytest and the standard library; the kit loads when a
test uses the fixture.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dpfair_analysis.testing._json import jsonable

_PROPERTY = "dpfair.audit"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpfair", "privacy claims (dpfair_analysis.testing)")
    group.addoption("--dp-budget", choices=("smoke", "quick", "full"), default="quick",
                    help="how hard @pytest.mark.dp audits search (default quick; smoke: only to check that a "
                         "suite runs, a pass proves little)")
    group.addoption("--dp-seed", type=int, default=0, help="added to every test's seed (default 0)")
    group.addoption("--dp-report", default=None, metavar="PATH",
                    help="write the JSON report of every privacy audit here (default: the pytest cache)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "dp(epsilon, delta=0, relation=..., **options): the privacy claim the `dp` fixture audits "
                   "(dpfair_analysis.testing)")
    config.pluginmanager.register(_Reporter(config), "dpfair-privacy-reporter")


def _test_seed(nodeid: str, offset: int) -> int:
    return (zlib.crc32(nodeid.encode()) + offset) % (2 ** 31)


class DPCheck:
    """The ``dp`` fixture: the kit's checks with the test's claim (``@pytest.mark.dp``), budget and seed.

    Parameters
    ----------
    claim : dict
        The marker's keyword arguments (epsilon, delta, relation, audit options).
    budget : str
        ``quick`` or ``full``.
    seed : int
        This test's seed.
    record : callable
        Called with each result's JSON-ready dict.
    """

    def __init__(self, claim: dict[str, Any], *, budget: str, seed: int, record: Callable[[dict], None]) -> None:
        self.claim, self.budget, self.seed, self._record = dict(claim), budget, seed, record

    def _options(self, overrides: dict[str, Any]) -> dict[str, Any]:
        options = {"budget": self.budget, "seed": self.seed, **self.claim, **overrides}
        missing = [k for k in ("epsilon", "relation") if k not in options]
        if missing:
            raise pytest.UsageError(f"the privacy claim needs {missing}: give them to @pytest.mark.dp(...) or to "
                                    f"the call")
        return options

    def audit(self, mechanism: Callable[..., Any], **overrides: Any):
        """:func:`dpfair_analysis.testing.auditing` with the claim's defaults; recorded, never raises on a refutation.

        Parameters
        ----------
        mechanism : callable
            ``fn(data, rng)``.
        **overrides
            Any argument of :func:`~dpfair_analysis.testing.auditing` (epsilon, delta, relation, data, pairs, ...).
        """
        from dpfair_analysis.testing.auditing import audit

        options = self._options(overrides)
        epsilon, delta = options.pop("epsilon"), options.pop("delta", 0.0)
        result = audit(mechanism, epsilon, delta, **options)
        self._record({"check": "audit", **result.as_dict()})
        return result

    def assert_private(self, mechanism: Callable[..., Any], **overrides: Any):
        """:func:`dpfair_analysis.testing.assert_private` with the claim's defaults (raises on a refutation).

        Parameters
        ----------
        mechanism : callable
            ``fn(data, rng)``.
        **overrides
            Any argument of :func:`~dpfair_analysis.testing.assert_private`.
        """
        from dpfair_analysis.testing.auditing import InsufficientPower, PrivacyViolation, assert_private

        options = self._options(overrides)
        epsilon, delta = options.pop("epsilon"), options.pop("delta", 0.0)
        try:
            result = assert_private(mechanism, epsilon, delta, **options)
        except (PrivacyViolation, InsufficientPower) as failure:
            self._record({"check": "assert_private", "outcome": type(failure).__name__, **failure.result.as_dict()})
            raise
        self._record({"check": "assert_private", "outcome": "passed", **result.as_dict()})
        return result

    def assert_sensitivity(self, release_fn: Callable[[Any], Any], bound: Any, **overrides: Any):
        """:func:`dpfair_analysis.testing.assert_sensitivity` with the claim's relation and this test's seed.

        Parameters
        ----------
        release_fn : callable
            f(data) -> number or array.
        bound : float or callable
            The claimed sensitivity.
        **overrides
            Any argument of :func:`~dpfair_analysis.testing.assert_sensitivity` (relation, norm, data, ...).
        """
        from dpfair_analysis.testing.sensitivity import SensitivityViolation, assert_sensitivity

        examples = {"smoke": 60, "quick": 300, "full": 3000}[self.budget]
        options = {"seed": self.seed, "examples": examples, **overrides}
        options.setdefault("relation", self.claim.get("relation"))
        if options["relation"] is None:
            raise pytest.UsageError("assert_sensitivity needs relation= (in @pytest.mark.dp or the call)")
        try:
            report = assert_sensitivity(release_fn, bound, **options)
        except SensitivityViolation as failure:
            self._record({"check": "assert_sensitivity", "outcome": "SensitivityViolation",
                          "relation": str(options["relation"]), "ratio": failure.ratio, "observed": failure.observed,
                          "bound": failure.bound, "change": failure.change.as_dict()})
            raise
        self._record({"check": "assert_sensitivity", "outcome": "passed", "relation": str(options["relation"]),
                      "worst": report.sensitivity, "tried": report.tried})
        return report


@pytest.fixture
def dp(request: pytest.FixtureRequest) -> DPCheck:
    """The test's privacy claim (``@pytest.mark.dp``) with the session's budget and the test's own seed."""
    marker = request.node.get_closest_marker("dp")
    claim: dict[str, Any] = {}
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("@pytest.mark.dp takes keyword arguments only: epsilon=..., delta=..., "
                                    "relation=...")
        claim = dict(marker.kwargs)
    config = request.config
    node = request.node

    def record(entry: dict) -> None:
        node.user_properties.append((_PROPERTY, json.dumps(jsonable({"test": node.nodeid, **entry}))))

    return DPCheck(claim, budget=config.getoption("--dp-budget"),
                   seed=_test_seed(node.nodeid, config.getoption("--dp-seed")), record=record)


class _Reporter:
    """Collects the audits of one session (from each test's report, so xdist workers' results arrive too),
    writes the JSON artifact and the terminal summary. One per session: no module-level state."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[dict] = []
        self.path: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.failed):
            self.results += [json.loads(v) for k, v in report.user_properties if k == _PROPERTY]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput") or not self.results:  # an xdist worker: the controller reports
            return
        path = self.config.getoption("--dp-report")
        cache = getattr(self.config, "cache", None)  # absent with -p no:cacheprovider
        if path is None and cache is not None:
            path = str(cache.mkdir("dpfair") / "dp-report.json")
        if path is None:
            return
        from dpfair_analysis.io import write_atomically

        target = Path(path)
        if not target.parent.is_dir():
            raise pytest.UsageError(f"--dp-report: directory {str(target.parent)!r} does not exist")
        payload = {"budget": self.config.getoption("--dp-budget"), "seed_offset": self.config.getoption("--dp-seed"),
                   "audits": self.results}
        write_atomically(target, lambda tmp: tmp.write_text(json.dumps(payload, indent=2)))
        self.path = str(target)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if not self.results:
            return
        tr = terminalreporter
        tr.section("privacy claims (dpfair_analysis.testing)")
        for r in self.results:
            if r.get("check") == "assert_sensitivity":
                detail = (f"ratio {float(r['ratio']):.3g} to the bound" if r.get("outcome") != "passed"
                          else f"worst change {float(r.get('worst', 0)):.4g} within the bound ({r.get('tried')} "
                               f"pairs)")
                tr.write_line(f"{r['test']}: sensitivity under {r.get('relation')}: {r.get('outcome')}, {detail}")
                continue
            verdict = "consistent" if r.get("consistent") else "REFUTED"
            tr.write_line(f"{r['test']}: claimed ε = {r.get('epsilon_claimed')} (δ = {r.get('delta')}), audited "
                          f"ε ≥ {float(r.get('epsilon_lower', 0)):.4f} at {r.get('confidence')} -> {verdict} "
                          f"[{r.get('trials')} runs, {float(r.get('seconds', 0)):.1f} s]")
        if self.path:
            tr.write_line(f"report: {self.path}")
