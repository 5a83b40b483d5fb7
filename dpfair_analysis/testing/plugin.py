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
* ``--dp-budget smoke|quick|full|thorough`` sets how hard every audit searches (default quick; ``smoke``
  only checks that a suite runs; ``thorough`` uses the published testers' sample sizes);
  ``--dp-seed N`` shifts every test's seed. Each test's seed is derived from its node id,
  so a run is reproducible and two tests never share random numbers.
* No global registry: results travel with each test's report (``user_properties``) to one
  reporter object per session, so the summary also works under pytest-xdist.
* At the end: a summary table in the terminal and a JSON artifact -- ``--dp-report PATH``, or
  ``.pytest_cache/d/dpfair/dp-report.json`` when pytest's cache is on -- written atomically.
  Each line of the summary carries the status of the CLI's table (:data:`STATUSES`): 0 consistent,
  1 refuted, 2 bad input or a broken mechanism, 3 internal error, 4 no power (the audit could not have refuted
  the claim).
* No power fails the test: ``dp.assert_private`` raises :class:`~dpfair_analysis.testing.auditing.NoPower` for a
  consistent result whose ``no_power`` is set (the claim at or above the largest epsilon the runs can certify,
  or no test with power), with the largest certifiable epsilon, why, and how to get power; the summary line
  says NO POWER (status 4). ``allow_no_power=True`` (in the marker or the call) accepts such a result
  explicitly -- the test passes, the summary still says NO POWER -- and ``require_power=True`` with the
  under-noised twin caught shows the power instead. ``dp.audit`` never raises; its line says NO POWER too.
* Checked early, as one line and no traceback: the options when pytest configures (a bad ``--dp-report``
  is a usage error, pytest's status 4), the marker's arguments when pytest collects (a collection error,
  pytest's status 2); a report that cannot be written at the end is one line and pytest's status 3.
* A failed check shows the test's own frame and the kit's message (D, D' and the event); the kit's
  frames are hidden (``__tracebackhide__``).

Importing this module imports only pytest and the standard library; the kit loads when a
test uses the fixture.
"""

from __future__ import annotations

import difflib
import inspect
import json
import math
import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dpfair_analysis.io import output_target, write_atomically
from dpfair_analysis.names import KIT_BUDGETS
from dpfair_analysis.testing._json import jsonable

_PROPERTY = "dpfair.audit"

#: The status of each check in the summary, as ``dpfair audit`` exits: (status, word) by outcome.
STATUSES = {"consistent": (0, "consistent"), "passed": (0, "consistent"), "refuted": (1, "REFUTED"),
            "PrivacyViolation": (1, "REFUTED"), "SensitivityViolation": (1, "REFUTED"),
            "broken": (2, "bad input or broken mechanism"), "internal": (3, "internal error"),
            "no power": (4, "NO POWER"), "NoPower": (4, "NO POWER"),
            "InsufficientPower": (4, "NO POWER (the under-noised twin was not caught)"),
            "no power allowed": (4, "NO POWER (accepted: allow_no_power=True)"),
            "NothingChecked": (4, "NO POWER (no pair checked)")}
#: The summary's name of each status (the CLI's table).
STATUS_NAMES = {0: "consistent", 1: "refuted", 2: "bad input or broken mechanism", 3: "internal error",
                4: "no power"}
#: Marker arguments besides those of :func:`~dpfair_analysis.testing.auditing.audit` (the claim itself).
_CLAIM_ARGUMENTS = ("epsilon", "delta", "relation", "require_power", "allow_no_power")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpfair", "privacy claims (dpfair_analysis.testing)")
    group.addoption("--dp-budget", choices=KIT_BUDGETS, default="quick",
                    help="how hard @pytest.mark.dp audits search (default quick; smoke: only to check that a "
                         "suite runs, a pass proves little; full and thorough: more runs, minutes per claim)")
    group.addoption("--dp-seed", type=int, default=0, help="added to every test's seed (default 0)")
    group.addoption("--dp-report", default=None, metavar="PATH",
                    help="write the JSON report of every privacy audit here (default: the pytest cache)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "dp(epsilon, delta=0, relation=..., **options): the privacy claim the `dp` fixture audits "
                   "(dpfair_analysis.testing)")
    _check_report_path(config.getoption("--dp-report"))
    config.pluginmanager.register(_Reporter(config), "dpfair-privacy-reporter")


def _check_report_path(path: str | None) -> None:
    """``--dp-report``: a regular file or a new path in a writable directory, refused now (pytest's usage
    error, one line) rather than after the whole session has run."""
    if path is None:
        return

    try:
        target = output_target(path)
    except ValueError as error:
        raise pytest.UsageError(f"--dp-report: {error} (give a file path such as dp-report.json)") from None
    directory = target.parent
    if not os.access(directory, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"--dp-report: cannot write in directory {str(directory)!r} (permission denied)")


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object):
    """Check each collected test's ``@pytest.mark.dp`` arguments: a bad one is a collection error of its
    module (one line, no traceback), not a failure of the test when it runs."""
    result = yield
    items = result if isinstance(result, list) else [result]
    for item in items:
        if isinstance(item, pytest.Item):
            marker = item.get_closest_marker("dp")
            problem = None if marker is None else marker_problem(marker.args, marker.kwargs)
            if problem:
                raise collector.CollectError(f"{item.nodeid}: @pytest.mark.dp: {problem}")
    return result


def marker_problem(args: tuple, kwargs: dict[str, Any]) -> str | None:
    """What is wrong with the arguments of ``@pytest.mark.dp(*args, **kwargs)``, or None.

    Parameters
    ----------
    args : tuple
        Positional arguments (none are allowed).
    kwargs : dict
        The claim: ``epsilon``, ``delta``, ``relation``, ``require_power``, ``allow_no_power`` and any argument of
        :func:`~dpfair_analysis.testing.auditing.audit`.
    """
    from dpfair_analysis.testing.auditing import BUDGETS, Budget, audit
    from dpfair_analysis.testing.relations import make_relation

    if args:
        return "takes keyword arguments only: epsilon=..., delta=..., relation=..."
    allowed = sorted(set(_CLAIM_ARGUMENTS) | set(list(inspect.signature(audit).parameters)[1:]))
    for key in kwargs:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"unknown argument {key!r}{hint}; allowed: {', '.join(allowed)}"
    epsilon = kwargs.get("epsilon", 0.0)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) \
            or epsilon < 0:
        return f"epsilon must be a finite number >= 0, got {epsilon!r}"
    delta = kwargs.get("delta", 0.0)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
        return f"delta must be a number in [0, 1), got {delta!r}"
    for flag in ("require_power", "allow_no_power"):
        if flag in kwargs and not isinstance(kwargs[flag], bool):
            return f"{flag} must be True or False, got {kwargs[flag]!r}"
    if "relation" in kwargs:
        try:
            make_relation(kwargs["relation"])
        except (ValueError, TypeError) as error:
            return str(error)
    budget = kwargs.get("budget", "quick")
    if not (isinstance(budget, Budget) or (isinstance(budget, str) and budget in BUDGETS)):
        return f"budget must be one of {sorted(BUDGETS)} or a Budget, got {budget!r}"
    return None


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
        __tracebackhide__ = True
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
        __tracebackhide__ = True
        from dpfair_analysis.testing.auditing import audit

        options = self._options(overrides)
        epsilon, delta = options.pop("epsilon"), options.pop("delta", 0.0)
        for flag in ("require_power", "allow_no_power"):  # assert_private's: audit() reports, never raises
            options.pop(flag, None)
        with self._recording_errors("audit"):
            result = audit(mechanism, epsilon, delta, **options)
        self._record({"check": "audit", **result.as_dict()})
        return result

    def _recording_errors(self, check: str):
        """Record a check that ended in an error: status 2 for bad input or a broken mechanism (ValueError,
        TypeError, MechanismError among them), 3 for anything else (an internal error)."""
        return _recorded_errors(check, self._record)

    def assert_private(self, mechanism: Callable[..., Any], **overrides: Any):
        """:func:`dpfair_analysis.testing.assert_private` with the claim's defaults (raises on a refutation).

        Parameters
        ----------
        mechanism : callable
            ``fn(data, rng)``.
        **overrides
            Any argument of :func:`~dpfair_analysis.testing.assert_private`.
        """
        __tracebackhide__ = True
        from dpfair_analysis.testing.auditing import InsufficientPower, PrivacyViolation, assert_private

        options = self._options(overrides)
        epsilon, delta = options.pop("epsilon"), options.pop("delta", 0.0)
        try:
            with self._recording_errors("assert_private"):
                result = assert_private(mechanism, epsilon, delta, **options)
        except (PrivacyViolation, InsufficientPower) as failure:
            self._record({"check": "assert_private", "outcome": type(failure).__name__, **failure.result.as_dict()})
            raise
        # a result without power passes only when accepted explicitly (or the twin showed the power)
        outcome = "no power allowed" if result.no_power and not options.get("require_power") else "passed"
        self._record({"check": "assert_private", "outcome": outcome, **result.as_dict()})
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
        __tracebackhide__ = True
        from dpfair_analysis.testing.auditing import BUDGETS
        from dpfair_analysis.testing.sensitivity import NothingChecked, SensitivityViolation, assert_sensitivity

        examples = BUDGETS[self.budget].sensitivity_examples  # the kit's one budget table
        options = {"seed": self.seed, "examples": examples, **overrides}
        options.setdefault("relation", self.claim.get("relation"))
        if options["relation"] is None:
            raise pytest.UsageError("assert_sensitivity needs relation= (in @pytest.mark.dp or the call)")
        try:
            with self._recording_errors("assert_sensitivity"):
                report = assert_sensitivity(release_fn, bound, **options)
        except SensitivityViolation as failure:
            self._record({"check": "assert_sensitivity", "outcome": "SensitivityViolation",
                          "relation": str(options["relation"]), "ratio": failure.ratio, "observed": failure.observed,
                          "bound": failure.bound, "change": failure.change.as_dict()})
            raise
        except NothingChecked as failure:
            self._record({"check": "assert_sensitivity", "outcome": "NothingChecked",
                          "relation": str(options["relation"]), "tried": failure.report.tried, "checked": 0})
            raise
        self._record({"check": "assert_sensitivity", "outcome": "passed", "relation": str(options["relation"]),
                      "worst": report.sensitivity, "tried": report.tried, "checked": report.checked})
        return report


@contextmanager
def _recorded_errors(check: str, record: Callable[[dict], None]) -> Iterator[None]:
    """Record an error that ends a check (see :meth:`DPCheck._recording_errors`); assertion failures
    (refutations) are recorded by the check itself."""
    __tracebackhide__ = True
    try:
        yield
    except AssertionError:
        raise
    except Exception as error:
        outcome = "broken" if isinstance(error, (ValueError, TypeError)) else "internal"
        record({"check": check, "outcome": outcome, "error": f"{type(error).__name__}: {' '.join(str(error).split())}"})
        raise


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
        self.error: str | None = None

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

        payload = {"budget": self.config.getoption("--dp-budget"), "seed_offset": self.config.getoption("--dp-seed"),
                   "audits": self.results}
        try:
            write_atomically(path, lambda tmp: tmp.write_text(json.dumps(payload, indent=2)))
        except (OSError, ValueError) as error:  # checked at configure time: a full disk, a path gone since
            self.error = f"dpfair: error: --dp-report: cannot write {path}: {' '.join(str(error).split())}"
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        self.path = str(path)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if not self.results:
            return
        tr = terminalreporter
        tr.section("privacy claims (dpfair_analysis.testing)")
        counts: dict[int, int] = {}
        for r in self.results:
            status, word = _status(r)
            counts[status] = counts.get(status, 0) + 1
            if r.get("outcome") in ("broken", "internal"):
                tr.write_line(f"[{status}] {r['test']}: {r.get('check')}: {word}: {r.get('error')}")
            elif r.get("check") == "assert_sensitivity":
                if r.get("outcome") == "NothingChecked":
                    detail = f"the bound was infinite or None on all {r.get('tried')} pairs tried"
                elif r.get("outcome") != "passed":
                    detail = f"ratio {float(r['ratio']):.3g} to the bound"
                else:
                    detail = (f"worst change {float(r.get('worst', 0)):.4g} within the bound ({r.get('checked')} of "
                              f"{r.get('tried')} pairs checked)")
                tr.write_line(f"[{status}] {r['test']}: sensitivity under {r.get('relation')}: {word}, {detail}")
            else:
                power = (f", largest certifiable ε {float(r.get('certifiable_epsilon') or 0):.4g}" if status == 4
                         else "")
                tr.write_line(f"[{status}] {r['test']}: claimed ε = {r.get('epsilon_claimed')} (δ = "
                              f"{r.get('delta')}), audited ε ≥ {float(r.get('epsilon_lower', 0)):.4f} at "
                              f"{r.get('confidence')} -> {word}{power} [{r.get('trials')} runs, "
                              f"{float(r.get('seconds', 0)):.1f} s]")
        tr.write_line("status: " + ", ".join(f"{counts[k]} {STATUS_NAMES[k]} ({k})" for k in sorted(counts)))
        if self.path:
            tr.write_line(f"report: {self.path}")
        if self.error:
            tr.write_line(self.error, red=True)


def _status(result: dict) -> tuple[int, str]:
    """(status, word) of one recorded check, as in :data:`STATUSES`: by its outcome, else (``dp.audit``) refuted,
    no power (consistent with ``no_power`` set) or consistent."""
    outcome = result.get("outcome")
    if outcome in STATUSES:
        return STATUSES[outcome]
    if not result.get("consistent"):
        return STATUSES["refuted"]
    return STATUSES["no power" if result.get("no_power") else "consistent"]
