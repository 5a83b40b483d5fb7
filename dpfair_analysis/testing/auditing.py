"""Auditing any mechanism: an epsilon lower bound whose confidence holds over the whole search.

:func:`audit` runs the user's mechanism ``fn(data, rng)`` (:mod:`.runner`) on pairs of
neighbouring data sets, scores the outputs with a family of statistics (:mod:`.scores`)
and turns the error rates of the best test into a one-sided lower bound on epsilon
(:mod:`.bounds`). A bound above the claimed epsilon refutes the claim.

Family-wise confidence: a held-out split
----------------------------------------
Searching over pairs, statistics and thresholds and then bounding epsilon on the same
runs would report the luckiest of many tests: a correct mechanism audited over many pairs
would raise false alarms far above the nominal rate. The audit therefore keeps the search
and the bound on disjoint runs:

1. *selection* -- every candidate pair is run ``screen`` times per side; each statistic is
   fitted on a third of those runs (if it needs fitting), its threshold chosen on the second
   and the test ranked on the last; when there are more than ``top`` candidates, the best ``top`` are run again
   (``select`` fresh runs per side) and re-scored (under ``Budget.keep_patterns``, the relation's published patterns
   and the best ``top`` // 2 of the others: :func:`_kept_pairs`); with ``top`` or fewer (pairs given), each is run
   ``select`` times per side, plus the missing pairs' screening runs under ``Budget.pool_screen``; an unbatched
   mechanism with more than ``top`` candidates at a budget with ``Budget.halving`` instead gets successive halving
   over the pairs (:func:`_successive_halving`: the better half of the pairs gets twice the fresh runs, round by round,
   down to one pair scored on all its runs). The (pair, statistic,
   threshold) with the largest selection bound wins (ties at a forecast of 0 go to the largest forecast with the
   held-out rates as counted). None of these runs is counted in the bound. Only *non-degenerate*
   thresholds are candidates: the event "score > t" and its complement must each hold on at least
   :data:`MIN_SEPARATING` of the pooled selection runs -- an event that every run satisfies (a threshold
   below the smallest score) or none does bounds nothing.
2. *evaluation* -- the winner's pair is run N fresh times per side; errors at the
   fixed threshold give FPR and FNR, and :func:`~dpfair_analysis.testing.bounds.epsilon_lower_bound`
   turns them into epsilon_lower at ``confidence``. N is ``evaluate``, or ``escalate`` x ``evaluate`` for an
   unbatched mechanism when the winner's held-out rates forecast a bound above the claim at that size
   (:func:`_winner`): runs are spent where the selection forecasts a refutation.

The winner and N are functions of the selection runs only (the halving's rounds included: which pairs
survive and how many runs each gets), which are independent of the
evaluation runs, so conditionally on them the evaluation is a single test of a fixed size on fresh
data: P[epsilon_lower > true epsilon] <= 1 - confidence however many pairs, statistics and
thresholds were searched. No union bound is needed (and none is paid for).

No power: when no statistic gives a non-degenerate test, or the evaluation finds no evidence (epsilon_lower = 0,
whatever the selection forecast), or the claim is at or above what N runs can certify, ``AuditResult.no_power``
says why and ``certifiable_epsilon`` gives the largest bound N runs could give -- never a bare 0.

A family (``Budget.evaluated_tests`` = k, unbatched mechanisms at the full budget): the evaluation counts the
winner and the next k - 1 tests of its pair on the same fresh runs, each bound at confidence 1 - (1 - confidence)/k,
and reports the largest -- a union bound over k fixed tests, so the family-wise confidence is ``confidence``.

Power: :func:`audit` can audit an *under-noised twin* of the mechanism (the same claim
with a fraction of the noise; ``twin=0.25`` for a mechanism that takes ``noise_scale``) and
reports whether the audit catches it; every result reports the largest epsilon its
evaluation runs could ever certify (a claim above it cannot be refuted at this budget).

What a consistent verdict does not cover: the statistics read the outputs as real numbers, so
floating-point and implementation artefacts are outside what they test. The textbook floating-point
Laplace mechanism ``int(np.sum(data)) + rng.laplace(0, 1)`` is consistent with epsilon = 1 at the quick
and full budgets although its pure-DP epsilon is infinite (Mironov, CCS 2012: which doubles come out
depends on the count); a statistic of one's own (``statistics=``) that scores whether an output can be
reached from D' and not from D certifies epsilon >= 8.8 on it. Release through the snapping mechanism or
discrete noise (geometric, discrete Gaussian) instead.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from dpfair_analysis.errors import ArgumentError
from dpfair_analysis.testing._json import jsonable
from dpfair_analysis.testing.bounds import (
    DEFAULT_CONFIDENCE,
    ThresholdTest,
    check_delta_or_zero,
    choose_threshold,
    epsilon_lower_bound,
    largest_certifiable_epsilon,
    projected_epsilon,
)
from dpfair_analysis.testing.relations import (
    AddRemove,
    AttributeChange,
    NotNeighbours,
    QueryVector,
    Relation,
    ReplaceOne,
    as_dataset,
    make_relation,
)
from dpfair_analysis.testing.runner import AuditTimeout, MechanismError, Runner, describe_data, read_only
from dpfair_analysis.testing.families import statistic_family
from dpfair_analysis.testing.scores import Fitted, Skipped, Statistic, check_kinds
from dpfair_analysis.testing.sensitivity import seed_only
from dpfair_analysis.validation import check_fraction, check_seed


class PrivacyViolation(AssertionError):
    """An audit's lower bound exceeds the claimed epsilon (``result``: the :class:`AuditResult`)."""

    def __init__(self, message: str, result: AuditResult):
        super().__init__(message)
        self.result = result


class InsufficientPower(AssertionError):
    """An audit asked to show power did not catch the under-noised twin (``result``)."""

    def __init__(self, message: str, result: AuditResult):
        super().__init__(message)
        self.result = result


class NoPower(InsufficientPower):
    """The audit could not have refuted the claim (``result.no_power`` says why): a consistent verdict without
    power, which :func:`assert_private` refuses unless ``allow_no_power=True``."""


@dataclass(frozen=True)
class Budget:
    """How hard an audit tries (runs per side): ``screen`` per candidate pair, ``select`` per pair kept
    (``top`` of them), ``evaluate`` for the bound; at most ``max_pairs`` candidates. A batched
    mechanism gets ``batch_factors`` times as many runs in each of the three phases, an unbatched one
    ``unbatched_factors`` times (a plain function at :data:`FULL`: 10 x the screen and 10 x the selection for each of
    8 kept pairs, 12 with ``keep_patterns``; see below).

    How the selection chooses tests (:func:`_score_tests`): ``min_event`` = c > 0 gives each statistic
    a second threshold beside the default one, the best among events of probability >= c on the selection
    runs with their error rates at ``event_level`` (0.5: as counted; DP-Sniper's rule). The default
    threshold's pessimistic rates (level 0.8) guard against lucky rare events; with millions of selection runs
    they also hide the strongest common events (NumericalSVT's), while DP-Sniper's c alone hides the strongest
    rare ones (PrefixSum's, at 0.05% of runs): :data:`THOROUGH` keeps both thresholds, and the held-out runs
    rank every candidate alike, each with its rates at the same pessimistic level. ``increments`` adds the
    largest and smallest increment of a vector output to the threshold statistics
    (:func:`~dpfair_analysis.testing.scores.threshold_family`: a running total's strongest events); on in
    :data:`THOROUGH`, off in the other budgets, whose verdicts and run times it would change.

    ``escalate`` = k > 1 (an unbatched mechanism only; a batched one already gets ``batch_factors``): when the
    selection forecasts a refutation -- the winner's held-out error rates, as counted, projected to k x
    ``evaluate`` runs give a bound above the claim -- the evaluation runs k x ``evaluate`` per side
    (:func:`_winner`). The size is a function of the selection runs only, so the evaluation stays one
    test of a fixed size on fresh runs and its confidence holds as before. The selection chooses thresholds and
    ranks tests for both sizes (``sizes``): a rare event, strong at k x ``evaluate`` runs and weak at
    ``evaluate``, is what the larger evaluation is for; where no test forecasts a refutation at k x ``evaluate``,
    the best test for ``evaluate`` runs is evaluated on that many (a common event: a correct mechanism's bound
    above 0 rather than a rare event that fires on no evaluation run).

    ``pool_screen`` (an unbatched mechanism only): when the audit has fewer candidate pairs than ``max_pairs``
    (pairs given), the screening runs the missing candidates would have had go to the selection of the given
    ones: ``select`` + ``screen`` x (``max_pairs`` - m) / m runs per side for each of the m pairs
    (``selection_runs``). A plain function's rare strong events (SVT3's, ~0.3% of runs) need the runs to be
    ranked; the runs are selection runs, so the confidence is untouched. On in :data:`FULL`.

    ``halving`` = n0 > 0 (an unbatched mechanism only): with more than ``top`` candidate pairs, the screening and
    selection are one successive halving over the pairs (:func:`_successive_halving`) instead of a screen of
    ``screen`` runs each and a selection of the best ``top``: round r gives each surviving pair n0 x 2^r fresh
    runs per side, scores it on all its runs so far, and keeps the better half, down to one pair. About
    m x n0 runs per side a round, ceil(log2 m) + 1 rounds; the last pair has ~2 x n0 x 2^ceil(log2 m) runs --
    meant to rank a rare event (SVT3's, SVT4's) on a plain function. Off in the shipped budgets: at the full
    budget with n0 = 5,000 (32 pairs, six rounds, ~960,000 selection runs per side, 315,000 on the last pair) it
    still missed plain SVT3 and SVT4 (seed 0: 0.049, 0.095) and left the correct SVT1 with no power (0.000,
    against 0.026 without it): on a few thousand runs no sparse-vector pair forecasts a bound, and the order
    prior or noise, not evidence, picks the survivors (docs/benchmarks.md).

    ``unbatched_factors`` (an unbatched mechanism only): the screen, selection and evaluation runs of a plain
    function (one output per call) are multiplied by these, and ``unbatched_top`` (0: ``top``) pairs are kept. At
    :data:`FULL`, (10, 10, 1) and 8: 100,000 screening runs per side for each of the 32 candidate pairs and 500,000
    selection runs for each of the 8 kept (12 with ``keep_patterns``), ~17 M calls in all (a one-output numpy sparse
    vector: ~12 us a call, 5-7 CPU-min with the scoring). A sparse vector's privacy loss lives in events of 0.1-2%
    of the runs whose log-ratio is 0.15-0.26 (SVT3's "first above at query 6 with a low value", SVT4's "first above
    at query 6"): on 10,000 screening runs that ratio has a standard deviation of ~0.2 and the noise, not the
    signal, ranks the pairs. Even on 100,000 the screen can lose the refuting pair (plain SVT3, seed 2: the X-shaped
    pair outside its top 12), so the selection keeps 8 pairs on half the runs each rather than 4 on 1,000,000: plain
    SVT3 (true epsilon infinite, claim 0.1) was refuted on 2 of seeds 0-4 with 4 pairs and on 5 of 5 with 8 at the
    same number of calls (docs/benchmarks.md). The evaluation keeps its size (``escalate`` decides it), so the
    confidence is untouched: only the selection, which no bound counts, grows. A mechanism slower than ~35 us a call
    needs ``time_budget`` above the default 600 s or ``workers`` at this budget (``dpfair audit --workers``).

    ``evaluated_tests`` = k > 1 (an unbatched mechanism only): the evaluation counts the errors of the winner and
    the next k - 1 tests of its pair (by rank, scored for the same size: :func:`_family`) on the same fresh runs,
    each bound at confidence 1 - (1 - ``confidence``) / k, and reports the largest (Bonferroni: P[any of the k
    bounds > true epsilon] <= 1 - ``confidence``, so the largest is a bound at ``confidence``). On a plain
    function the held-out third that ranks the tests is a few hundred thousand runs, and the best of dozens of
    forecasts is inflated by its luck (plain SVT3, seed 0: the winner forecast 0.126 and gave 0.063 on 4 M fresh
    runs); k tests cost one wider interval each (z 1.96 -> 2.50 at k = 4 and 95%: ~0.003 on a 1%-event's bound
    at 4 M runs) against picking a lucky test. At :data:`FULL`, k = 4 with ``escalate`` = 16 (4 M runs per side
    where the selection forecasts a refutation).

    ``confirm`` = r > 0 (an unbatched mechanism only): before the winner is picked, the ``finalists`` best tests
    for each size are counted again on r fresh runs per side of their pairs (:func:`_confirmed`), and these
    counts -- unbiased for each of a handful of fixed tests, where the held-out counts of the best of dozens are
    inflated by its luck -- rank them and size the evaluation. The confirmation runs are selection runs (the bound
    never counts them), so the confidence is untouched. At :data:`FULL`, the best tests of 2 pairs a size, on 250,000
    runs.

    ``escalate_level`` = l: how hopeful the forecast that spends the larger evaluation is (:func:`_winner`): the best
    test's error rates at their l Clopper-Pearson limits (0.5: as counted; below 0.5: the hopeful end of their spread).
    A forecast near the claim is a coin flip on a few hundred thousand confirmation runs: plain ``svt34_parallel``
    (claim 0.2), seed 0, had its best test confirmed at 0.198 as counted for 4 M runs (an event on ~1% of the runs,
    the log-ratio's standard error ~0.026), was evaluated on 250,000 and passed at 0.190. At :data:`FULL`, l = 0.2
    (about 0.84 standard errors hopeful): a refutation the counts cannot rule out gets the runs to show it; a
    correct mechanism whose best event is near its claim pays for a larger evaluation and gets a tighter bound. The
    size is still a function of the selection runs only, so the confidence is untouched.

    ``unbatched_min_event`` = c > 0 (an unbatched mechanism only): ``min_event`` for a plain function, where the budget
    gives it none -- the second threshold of DP-Sniper's rule beside the default one. On a plain function's few
    hundred thousand selection runs the default threshold, chosen for a 4 M-run evaluation, lands on events of
    0.002-0.02% whose ratio is luck (plain ``svt34_parallel``, seed 2, pair 7: the learned test's event held on 33
    of 166,668 held-out runs of D and was ranked last), while its events of ~1% have log-ratio 0.26 against a claim
    of 0.2. At :data:`FULL`, c = 0.01.

    ``keep_patterns`` (an unbatched mechanism searching pairs only): the relation's published worst-case patterns
    (:meth:`~dpfair_analysis.testing.relations.Relation.fixed_patterns`: StatDP's eight under the queries relation)
    go to the selection whatever their screen, beside the best ``top`` // 2 of the other candidates (``top`` of them
    when the relation has no patterns). A sparse vector's strongest pairs are two of these (half up and half down,
    and the X shape), and its events of 0.1-2% of the runs rank a pair by noise on 100,000 screening runs: plain
    SVT3 (claim 0.1, true epsilon infinite), seed 7, had the X shape 14th and half-up-half-down 18th of 32 by the
    screen, kept 6 random sign patterns and 2 weaker patterns, and passed at 0.058. On seeds 0-7 one of the two won
    on 5 and refuted at 0.133-0.158, a random pair on 3 with 0.115 at best (SVT4: 0.141-0.161 on 3 seeds against
    0.116-0.135 on 5). The patterns are a prior on where the selection spends its runs, which
    no bound counts, so the confidence is untouched. On in :data:`FULL` (12 pairs instead of 8 for a 10-query
    vector: ~17% more runs).

    ``sensitivity_examples``: the examples (hypothesis' ``max_examples``) a sensitivity search draws at this budget
    (the pytest plugin's ``dp.assert_sensitivity``): one table of budgets for every check the kit runs."""

    name: str
    screen: int
    select: int
    evaluate: int
    top: int
    max_pairs: int
    batch_factors: tuple[int, int, int] = (25, 100, 50)
    min_event: float = 0.0
    event_level: float = 0.5
    increments: bool = False
    escalate: int = 1
    pool_screen: bool = False
    halving: int = 0
    sensitivity_examples: int = 300
    unbatched_factors: tuple[int, int, int] = (1, 1, 1)
    unbatched_top: int = 0
    evaluated_tests: int = 1
    confirm: int = 0
    finalists: int = 2
    unbatched_min_event: float = 0.0
    escalate_level: float = 0.5
    keep_patterns: bool = False

    def scaled(self, batched: bool) -> Budget:
        f = self.batch_factors if batched else self.unbatched_factors
        top = self.top if batched or not self.unbatched_top else self.unbatched_top
        return replace(self, screen=self.screen * f[0], select=self.select * f[1], evaluate=self.evaluate * f[2],
                       top=top, batch_factors=(1, 1, 1), unbatched_factors=(1, 1, 1), unbatched_top=0,
                       escalate=1 if batched else self.escalate, pool_screen=self.pool_screen and not batched,
                       halving=0 if batched else self.halving, evaluated_tests=1 if batched else self.evaluated_tests,
                       confirm=0 if batched else self.confirm,
                       min_event=self.min_event if batched else max(self.min_event, self.unbatched_min_event),
                       unbatched_min_event=0.0, keep_patterns=self.keep_patterns and not batched)

    @property
    def ranked_for(self) -> int:
        """The largest evaluation, runs per side: ``escalate`` x ``evaluate``."""
        return max(1, self.escalate) * self.evaluate

    @property
    def sizes(self) -> tuple[int, ...]:
        """The evaluation sizes (runs per side) the selection chooses thresholds and ranks tests for: ``evaluate``,
        and ``escalate`` x ``evaluate`` when ``escalate`` > 1 (:func:`_winner` picks the size with the test)."""
        return (self.evaluate,) if self.ranked_for == self.evaluate else (self.evaluate, self.ranked_for)

    def selection_runs(self, pairs: int) -> int:
        """Selection runs per side for each of ``pairs`` (<= ``top``) candidates, the pooled screening included."""
        if not self.pool_screen or pairs >= self.max_pairs:
            return self.select
        return self.select + self.screen * (self.max_pairs - pairs) // pairs


QUICK = Budget("quick", screen=2_000, select=10_000, evaluate=50_000, top=3, max_pairs=16, escalate=2,
               sensitivity_examples=300)
FULL = Budget("full", screen=10_000, select=50_000, evaluate=250_000, top=4, max_pairs=32, batch_factors=(10, 20, 40),
              escalate=16, pool_screen=True, sensitivity_examples=3_000, unbatched_factors=(10, 10, 1), unbatched_top=8,
              evaluated_tests=4, confirm=250_000, unbatched_min_event=0.01, escalate_level=0.2, keep_patterns=True)
#: The published testers' sample sizes (DP-Sniper: 10.7 M runs per side to train and choose, 200 M to
#: estimate; events of probability >= c = 0.01), for a batched mechanism; minutes per mechanism.
THOROUGH = Budget("thorough", screen=10_000, select=100_000, evaluate=2_000_000, top=4, max_pairs=16,
                  batch_factors=(100, 100, 100), min_event=0.01, event_level=0.5, increments=True,
                  sensitivity_examples=10_000)
#: For smoke-running a suite of privacy tests (CI): a pass at this budget proves little.
SMOKE = Budget("smoke", screen=200, select=1_000, evaluate=3_000, top=2, max_pairs=6, batch_factors=(5, 5, 5),
               sensitivity_examples=60)
BUDGETS = {"smoke": SMOKE, "quick": QUICK, "full": FULL, "thorough": THOROUGH}
#: Statistics per pair carried from screening into selection.
KEPT_STATISTICS = 6
#: The most bytes of one pair's runs (both sides) scored in a worker process (:meth:`.runner.Runner.elsewhere`:
#: they are pickled there, a few pairs at a time); larger ones are scored here.
ELSEWHERE_BYTES = 512 * 2 ** 20
#: A selected event and its complement must each hold on at least this many of the pooled selection runs of the
#: two sides (:func:`~dpfair_analysis.testing.bounds.choose_threshold`'s ``min_count``): an event that (almost)
#: every run satisfies, or none, separates nothing and certifies epsilon >= 0 whatever the mechanism.
MIN_SEPARATING = 5


@dataclass(frozen=True)
class AuditResult:
    """One audit (see the module docstring).

    ``epsilon_lower`` is a one-sided lower bound on the mechanism's epsilon at ``delta``, valid
    with probability >= ``confidence`` over the whole search; ``consistent`` =
    epsilon_lower <= epsilon_claimed. ``witness``: the pair (D, D'), the change, the statistic,
    the threshold and the error counts of the test. ``trials``: mechanism runs in all;
    ``evaluation_trials``: runs per side counted in the bound. ``power``: the largest certifiable
    epsilon, whether the claim lies below it (``can_refute_claim``: if not, the audit cannot fail
    however broken the mechanism is) and, if asked, the under-noised twin's audit. ``skipped``: the
    statistics that did not apply to the outputs (on some pair), each with its reason (a constant
    coordinate, a continuous output for the discrete histogram, ...); when every statistic was skipped
    there is no test: ``epsilon_lower`` = 0, ``evaluation_trials`` = 0 and no power.

    An audit of a spec (:func:`~dpfair_analysis.testing.specs.audit_spec`: a shipped mechanism on its known pair
    with its white-box score) fills in ``mechanism`` (the spec's name), ``noise_fraction`` (< 1: an under-noised
    twin) and ``setting`` (what was run); ``seconds`` is left out of equality (same seed, equal results).

    ``certifiable_epsilon``: the largest epsilon_lower these evaluation runs could give at this confidence,
    the bound at zero false positives and zero false negatives (Clopper-Pearson upper limits
    p_u = 1 - (alpha/4)^(1/N) of both error rates at N runs per side, alpha = 1 - confidence:
    log((1 - delta - p_u) / p_u); with a family of k tests, alpha = (1 - confidence) / k); 0 when nothing was
    evaluated. ``no_power``: None when the audit could
    have shown a violation, else why not -- no test separates the two sides (every event the statistics
    offer is held by (almost) all or none of the selection runs, :data:`MIN_SEPARATING`), the evaluation found no
    evidence (epsilon_lower = 0, whatever the selection forecast), or the claim is at or above
    ``certifiable_epsilon``. A result with ``no_power`` set says nothing about the mechanism.
    """

    epsilon_lower: float
    confidence: float
    consistent: bool
    epsilon_claimed: float
    delta: float
    relation: str
    witness: dict[str, Any]
    trials: int
    evaluation_trials: int
    seconds: float = field(compare=False)
    candidates: int
    budget: str
    seed: int
    power: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    certifiable_epsilon: float = 0.0
    no_power: str | None = None
    mechanism: str | None = None
    noise_fraction: float = 1.0
    setting: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))

    @property
    def verdict(self) -> str:
        """``refuted`` (epsilon_lower above the claim), ``no power`` (consistent, but the audit could not have
        refuted the claim: ``no_power`` says why) or ``consistent`` -- the three outcomes of an audit, which the
        command line exits with as 1, 4 and 0."""
        if not self.consistent:
            return "refuted"
        return "no power" if self.no_power else "consistent"

    def summary(self) -> dict[str, Any]:
        """The fields of the CLI's ``--json``: verdict (:attr:`verdict`), epsilon_lower, confidence, consistent,
        witness, trials, seconds, power, certifiable_epsilon and no_power.

        ``power`` says what a consistent verdict is worth: ``largest_certifiable_epsilon``, the largest lower
        bound the evaluation runs could give (no errors at all: the bound of 0 false positives and 0 false
        negatives in ``evaluation_trials`` runs per side), and ``can_refute_claim`` = claim < that value;
        ``epsilon_lower`` and the claim beside it; with a twin, whether it was caught. A claim at or above
        the largest certifiable epsilon cannot be refuted by this audit however broken the mechanism is.
        ``certifiable_epsilon`` repeats that largest bound and ``no_power`` says why the audit could not have
        shown a violation (None when it could)."""
        full = self.as_dict()
        out = {"verdict": self.verdict}
        out.update({k: full[k] for k in ("epsilon_lower", "confidence", "consistent", "witness", "trials", "seconds")})
        out["power"] = dict(full["power"], evaluation_trials=full["evaluation_trials"])
        out.update({k: full[k] for k in ("certifiable_epsilon", "no_power")})  # what the audit could show
        return out


# ============================================================================ candidates
def _base_data(relation: Relation, data: Any) -> Any:
    """The base data set of the pair search: ``data``, or :func:`default_data` when it is None."""
    return default_data(relation) if data is None else as_dataset(data)


def default_data(relation: Relation) -> Any:
    """The base data set an audit uses when none is given (give your own: the worst pairs depend on it).

    queries: StatDP's base vector (1, 1, 1, 1, 1); add-remove and replace-one: eight scalar
    records evenly spread over [-1, 1]; attribute-change: eight people in groups of 3 and 5.

    Parameters
    ----------
    relation : Relation
        The relation of the audit.
    """
    if isinstance(relation, QueryVector):
        return np.ones(5)
    if isinstance(relation, (AddRemove, ReplaceOne)):
        return np.linspace(-1.0, 1.0, 8)
    if isinstance(relation, AttributeChange):
        return np.array([0, 0, 0, 1, 1, 1, 1, 1])
    raise ValueError(f"no default data for {relation.describe()}: give data=")


def _draw_pairs(strategy: Any, count: int, seed: int) -> list[tuple[Any, Any]]:
    """``count`` pairs drawn from a hypothesis strategy, the same for the same seed
    (:func:`~dpfair_analysis.testing.sensitivity.seed_only`)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    drawn: list[tuple[Any, Any]] = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(pair: Any) -> None:
        if len(drawn) < count:
            drawn.append(pair)

    with seed_only():
        collect()
    return drawn


def candidate_pairs(relation: Relation, *, data: Any, pairs: Any, limit: int, seed: int) -> list[tuple[Any, Any]]:
    """The pairs an audit searches, validated against the relation, each data set as a read-only view
    (:func:`~dpfair_analysis.testing.runner.read_only`: neither the mechanism nor a statistic can change the pair
    that is audited and reported as the witness).

    Parameters
    ----------
    relation : Relation
        Every pair must be neighbours under it.
    data : array, dict or None
        Base data set for the relation's adversarial candidates (:meth:`Relation.candidates`).
    pairs : None, (D, D'), list of pairs or hypothesis strategy of pairs
        Given pairs (used as they are), a strategy (``limit`` pairs drawn), or None (search).
    limit : int
        Most candidates.
    seed : int
        Seeds the random candidates.

    Raises
    ------
    ArgumentError
        (a ValueError) naming ``pairs`` (a pair that is not (D, D'), not a data set or not neighbours; no pair at
        all) or ``data`` (a base data set that is not one, or that the relation cannot take): bad input, which the
        command line reports on one line with status 2 (``--pair``, ``--data``).
    """
    from hypothesis.strategies import SearchStrategy

    if pairs is None:
        try:
            found = relation.candidates(_base_data(relation, data), rng=np.random.default_rng(seed), limit=limit)
        except ValueError as error:  # (NotNeighbours among them) the data does not suit the relation
            raise ArgumentError("data", _detail(error)) from None
    elif isinstance(pairs, SearchStrategy):
        found = _draw_pairs(pairs, limit, seed)
    elif isinstance(pairs, tuple) and len(pairs) == 2 and not _is_pair(pairs[0]):
        found = [pairs]
    else:
        found = list(pairs)
    if not found:
        raise ArgumentError("pairs", "gave no neighbouring pair to audit")
    checked = []
    for k, pair in enumerate(found):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ArgumentError("pairs", f"pair {k} must be (D, D'), got {describe_data(pair)}")
        try:
            a, b = as_dataset(pair[0], f"pair {k}'s D"), as_dataset(pair[1], f"pair {k}'s D'")
        except ValueError as error:
            raise ArgumentError("pairs", _detail(error)) from None
        try:
            relation.check(a, b)
        except NotNeighbours as error:
            raise ArgumentError("pairs", f"pair {k} is not a neighbouring pair under {relation.describe()}: "
                                         f"{error}") from None
        checked.append((read_only(a), read_only(b)))  # what is audited is what the witness shows
    return checked


def _detail(error: BaseException) -> str:
    """An error's message without the argument name an :class:`ArgumentError` already carries."""
    return error.detail if isinstance(error, ArgumentError) else str(error)


def _is_pair(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2 and not np.isscalar(value[0])


# ============================================================================ selection
@dataclass
class _Choice:
    """One (pair, statistic, threshold) scored on selection runs."""

    index: int
    statistic: Statistic
    fitted: Fitted
    threshold: float
    selection_epsilon: float
    #: The same forecast with the held-out rates as counted (level 0.5): breaks ties among tests whose pessimistic
    #: forecast is 0 (weak events on few runs: a plain function's sparse vector), and sizes the evaluation.
    counted_epsilon: float = 0.0
    #: Held-out counts (false positives, runs on D, false negatives, runs on D') behind the two forecasts.
    held: tuple[int, int, int, int] = (0, 1, 0, 1)
    #: Evaluation runs per side the threshold was chosen for and the forecasts projected to (``Budget.sizes``).
    trials: int = 0

    @property
    def rank(self) -> tuple[float, float]:
        """Sort key: the pessimistic forecast; among tests that forecast nothing (0), the as-counted one."""
        return self.selection_epsilon, self.counted_epsilon if self.selection_epsilon <= 0 else 0.0


def _score_tests(out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any], index: int,
                 statistics: list[Statistic], *, delta: float, confidence: float,
                 plan: Budget, skipped: dict[str, str] | None = None) -> list[_Choice]:
    """Score each statistic's best test on selection runs, best first.

    The runs are split in three: a statistic that needs fitting is fitted on the first third;
    its threshold is chosen on the second (on the first two if nothing is fitted); its
    criterion -- the bound projected to the evaluation's number of runs if it forecasts a refutation
    (``Budget.ranked_for``, :func:`~dpfair_analysis.testing.bounds.projected_epsilon`) -- is computed on
    the last third, at the fixed threshold, with the error rates at their 1 - 0.2 / sqrt(number of statistics)
    Clopper-Pearson upper limits. The threshold search over thousands of candidates therefore
    does not inflate the criterion, and the choice among the statistics is paid for by the
    pessimism of the rates. With ``plan.min_event`` = c > 0 (:class:`Budget`) each statistic gets a
    second threshold, the best among events of probability >= c with rates at ``plan.event_level``
    (DP-Sniper's rule; none if the statistic has no such event), ranked like the first: a noisy estimate
    loses to an equally strong but surer one. Only a ranking: the reported bound comes from fresh runs.

    A statistic that does not apply to these outputs (:meth:`~dpfair_analysis.testing.scores.Statistic.fit_or_skip`),
    or has no threshold that qualifies, is left out and its reason written to ``skipped`` (name -> reason)."""
    skipped = {} if skipped is None else skipped
    third0, third1 = len(out0) // 3, len(out1) // 3
    valid0, valid1 = out0[2 * third0:], out1[2 * third1:]
    # (threshold level, minimum event probability); every test is ranked with its rates the more pessimistic
    # the more statistics are compared
    rules = [(0.8, 0.0)]
    if plan.min_event > 0:
        rules.append((plan.event_level, plan.min_event))
    level = 1.0 - 0.2 / math.sqrt(max(1, len(statistics)))
    scored = []
    for statistic in statistics:
        if statistic.needs_fit:
            fitted = statistic.fit_or_skip(out0[:third0], out1[:third1], pair)
            pick0, pick1 = out0[third0:2 * third0], out1[third1:2 * third1]
        else:
            fitted = statistic.fit_or_skip(out0[:2 * third0], out1[:2 * third1], pair)
            pick0, pick1 = out0[:2 * third0], out1[:2 * third1]
        if isinstance(fitted, Skipped):
            skipped.setdefault(fitted.name, fitted.reason)
            continue
        if fitted is None:  # a user statistic's fit_or_skip that returned None
            skipped.setdefault(statistic.describe(), "not applicable to these outputs (no reason given)")
            continue
        picked0, picked1 = fitted.score(pick0), fitted.score(pick1)
        held0, held1 = fitted.score(valid0), fitted.score(valid1)
        found = False
        for (threshold_level, min_event), size in itertools.product(rules, plan.sizes):
            threshold, _ = choose_threshold(picked0, picked1, delta=delta, confidence=confidence,
                                            evaluation_trials=size, ranking_level=threshold_level,
                                            min_event=min_event, min_count=MIN_SEPARATING)
            if math.isnan(threshold):
                continue
            found = True
            fp, fn = int(np.count_nonzero(held0 > threshold)), int(np.count_nonzero(held1 <= threshold))
            criterion = float(projected_epsilon(fp, len(valid0), fn, len(valid1), evaluation_trials=size,
                                                delta=delta, confidence=confidence, level=level))
            counted = float(projected_epsilon(fp, len(valid0), fn, len(valid1), evaluation_trials=size,
                                              delta=delta, confidence=confidence, level=0.5))
            scored.append(_Choice(index, statistic, fitted, threshold, criterion, counted,
                                  (fp, len(valid0), fn, len(valid1)), size))
        if not found:
            skipped.setdefault(fitted.name, f"no threshold qualifies on the selection runs (every event of it holds "
                                            f"on all but < {MIN_SEPARATING} or on < {MIN_SEPARATING} of them: it "
                                            f"separates nothing)")
    return sorted(scored, key=lambda c: -c.selection_epsilon)


def _tests_and_skipped(out0: np.ndarray, out1: np.ndarray, pair: tuple[Any, Any], index: int,
                       statistics: Callable[[np.ndarray, np.ndarray], list[Statistic]], *, delta: float,
                       confidence: float, plan: Budget) -> tuple[list[_Choice], dict[str, str]]:
    """:func:`_score_tests` of ``statistics(out0, out1)`` and the statistics it skipped: one pair's scoring, a job
    a worker process can run (:meth:`~.runner.Runner.elsewhere`)."""
    skipped: dict[str, str] = {}
    return _score_tests(out0, out1, pair, index, statistics(out0, out1), delta=delta, confidence=confidence,
                        plan=plan, skipped=skipped), skipped


def _given(statistics: list[Statistic]) -> Callable[[np.ndarray, np.ndarray], list[Statistic]]:
    """The statistics of any runs: ``statistics``."""
    return lambda out0, out1: statistics


def _event(fitted: Fitted, threshold: float) -> str:
    return f"{fitted.name} > {threshold:.6g} (guess D')"


# ============================================================================ the audit
def audit(mechanism: Callable[..., Any], epsilon: float, delta: float = 0.0, *, relation: Relation | str,
          data: Any = None, pairs: Any = None, statistics: Any = "auto", log_density: Callable | None = None,
          budget: str | Budget = "quick", trials: int | None = None, confidence: float = DEFAULT_CONFIDENCE,
          seed: int = 0, batched: bool = False, time_budget: float | None = 600.0, twin: Any = None,
          name: str | None = None, workers: int | None = None) -> AuditResult:
    """Audit an (epsilon, delta)-DP claim of any mechanism: a lower bound on its epsilon, and whether it agrees.

    A result is refuted (epsilon_lower above the claim), consistent, or without power (``no_power`` set: this
    audit could not have refuted the claim; :attr:`AuditResult.verdict`). A consistent result is evidence
    about the mechanism as a map to real numbers: its statistics do not test floating-point or other
    implementation artefacts (the textbook floating-point Laplace mechanism passes although its pure-DP
    epsilon is infinite, Mironov 2012; see the module docstring), which a statistic of one's own
    (``statistics=``) can target.

    Parameters
    ----------
    mechanism : callable
        ``fn(data, rng)`` returning a number or a numpy array of fixed shape; ``rng`` is a
        :class:`numpy.random.Generator` the kit seeds (``fn(data, rng, n)`` returning n outputs
        with ``batched=True``). Torch code: wrap it with :func:`dpfair_analysis.testing.torch.torch_mechanism`.
    epsilon : float
        The claimed epsilon (>= 0).
    delta : float
        The claimed delta, in [0, 1) (default 0: pure DP).
    relation : Relation or str
        The neighbouring relation of the claim: ``add-remove``, ``replace-one``,
        ``attribute-change``, ``queries`` or a :class:`~dpfair_analysis.testing.relations.Relation`.
    data : array, dict or None
        The base data set whose neighbours are searched (records along axis 0; the query
        vector under ``queries``; the attribute vector or a dict with ``group`` under
        ``attribute-change``). Default: :func:`default_data`.
    pairs : None, (D, D'), list of pairs or hypothesis strategy
        Pairs to audit instead of the search: one pair, several, or a strategy of pairs
        (budget.max_pairs drawn). Each is checked against ``relation``.
    statistics : "auto", kinds, or Statistic instances
        Test statistics to search (:mod:`.scores`): the kinds threshold, histogram, learned, pattern, likelihood,
        and any :class:`~dpfair_analysis.testing.scores.Statistic` of your own (its ``fit`` or ``fit_or_skip``
        returns a :class:`~dpfair_analysis.testing.scores.Fitted` score), e.g. ``("threshold", MyStatistic())``.
    log_density : callable, optional
        White box: ``log_density(outputs, data) -> (n,)`` log-densities of outputs (stacked along
        axis 0) under the mechanism on ``data``; adds the likelihood-ratio statistic.
    budget : "quick", "full", "smoke" or Budget
        Runs per phase (:data:`QUICK`, :data:`FULL`; :data:`SMOKE` only to smoke-run a test suite).
    trials : int, optional
        Evaluation runs per side, overriding the budget's (at least 10).
    confidence : float
        Confidence of the bound over the whole search, in (0, 1).
    seed : int
        Seeds everything (same seed, same result).
    batched : bool
        ``mechanism(data, rng, n)`` returns n outputs at once.
    time_budget : float, TimeBudget or None
        Seconds the mechanism may run in total (default 600) before :class:`~.runner.AuditTimeout`; a
        :class:`~.runner.TimeBudget` is shared with whatever else holds it (the twin included).
    twin : None, float or callable
        An under-noised twin to audit too (power check): a callable mechanism, or a fraction f in
        (0, 1) for a mechanism that takes a ``noise_scale`` keyword (``mechanism(..., noise_scale=f)``).
    name : str, optional
        The mechanism's name in messages.
    workers : int, optional
        Draw the runs in this many forked worker processes, each chunk of runs from a seed of its own indexed by
        the chunk (:mod:`.runner`): the same seed gives the same result for every ``workers``, ``None`` (the
        default: the same chunks drawn in this process) included.
    """
    __tracebackhide__ = True
    start = time.perf_counter()
    epsilon = _check_epsilon(epsilon)
    delta = check_delta_or_zero(delta)
    confidence = check_fraction(confidence, "confidence", open_high=True)
    seed = check_seed(seed)
    relation = make_relation(relation)
    plan = BUDGETS[budget] if isinstance(budget, str) and budget in BUDGETS else budget
    if not isinstance(plan, Budget):
        raise TypeError(f"budget must be one of {sorted(BUDGETS)} or a Budget, got {budget!r}")
    plan = plan.scaled(batched)
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 10:
            raise ValueError(f"trials must be an integer >= 10 (evaluation runs per side), got {trials!r}")
        plan = replace(plan, evaluate=trials)
    kinds = check_kinds(statistics, log_density=log_density)
    twin_fn = _twin(mechanism, twin)
    candidates = candidate_pairs(relation, data=data, pairs=pairs, limit=plan.max_pairs, seed=seed)
    patterns = 0 if pairs is not None else min(len(candidates), relation.fixed_patterns(_base_data(relation, data)))
    runner = Runner(mechanism, name=name, batched=batched, time_budget=time_budget, workers=workers)
    try:
        result = _run(runner, candidates, epsilon=epsilon, delta=delta, relation=relation, plan=plan, kinds=kinds,
                      log_density=log_density, confidence=confidence, seed=seed, start=start, patterns=patterns)
    finally:
        runner.close()
    if twin_fn is None:
        return result
    twin_runner = Runner(twin_fn, name=f"{runner.name} (twin)", batched=batched, time_budget=time_budget,
                         workers=workers)
    try:
        twin_result = _run(twin_runner, candidates, epsilon=epsilon, delta=delta, relation=relation, plan=plan,
                           kinds=kinds, log_density=None, confidence=confidence, seed=seed, start=time.perf_counter(),
                           patterns=patterns)
    finally:
        twin_runner.close()
    power = dict(result.power, twin=_describe_twin(twin), twin_epsilon_lower=twin_result.epsilon_lower,
                 twin_caught=not twin_result.consistent, twin_witness=twin_result.witness)
    return AuditResult(**{**asdict(result), "power": power, "seconds": time.perf_counter() - start,
                          "trials": result.trials + twin_result.trials})


def _check_epsilon(epsilon: Any) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) \
            or epsilon < 0:
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return float(epsilon)


def _twin(mechanism: Callable, twin: Any) -> Callable | None:
    if twin is None:
        return None
    if callable(twin):
        return twin
    fraction = check_fraction(twin, "twin", open_high=True)
    return functools.partial(mechanism, noise_scale=fraction)


def _describe_twin(twin: Any) -> str:
    return f"noise_scale={twin:g}" if isinstance(twin, (int, float)) else getattr(twin, "__qualname__", repr(twin))


def _run(runner: Runner, candidates: list[tuple[Any, Any]], *, epsilon: float, delta: float, relation: Relation,
         plan: Budget, kinds: tuple[str, ...], log_density: Callable | None, confidence: float, seed: int,
         start: float, patterns: int = 0) -> AuditResult:
    streams = np.random.SeedSequence(seed).spawn(3)
    check_seed_, screen_seeds, final_seeds = streams[0], streams[1], streams[2]
    shape = runner.check(candidates[0][0], int(check_seed_.generate_state(1)[0]))
    runs = 0

    def sample(i: int, n: int, seeds: np.random.SeedSequence) -> tuple[np.ndarray, np.ndarray]:
        nonlocal runs
        s0, s1 = seeds.spawn(2)
        runner.new_pair()
        pair = candidates[i]
        with _naming_the_change(relation, pair, i):
            out0, out1 = runner.flat(runner.sample(pair[0], n, s0)), runner.flat(runner.sample(pair[1], n, s1))
        runs += 2 * n
        return out0, out1

    skipped: dict[str, str] = {}

    def scored(requests: Iterable[tuple[int, int, np.random.SeedSequence, Callable]]) -> Iterator[list[_Choice]]:
        """Each request's tests (pair, runs a side, seed, statistics of the runs), in order. With worker processes
        a pair's tests are scored in one of them (:meth:`Runner.elsewhere`) while this process draws the next
        pairs' runs: scoring, not drawing, is most of a plain function's selection. The same tests either way (a
        function of the runs alone); the statistics skipped are merged in the requests' order."""
        pending: collections.deque = collections.deque()

        def tests(item: tuple[Callable, Callable | None]) -> list[_Choice]:
            job, result = item
            choices, skipped_ = job() if result is None else result()
            for name, reason in skipped_.items():
                skipped.setdefault(name, reason)
            return choices

        for i, n, seed_, statistics in requests:
            out0, out1 = sample(i, n, seed_)
            job = functools.partial(_tests_and_skipped, out0, out1, candidates[i], i, statistics, delta=delta,
                                    confidence=confidence, plan=plan)
            small = out0.nbytes + out1.nbytes <= ELSEWHERE_BYTES
            pending.append((job, runner.elsewhere(job) if small else None))
            while pending and (len(pending) > (runner.workers or 1) or pending[-1][1] is None):
                yield tests(pending.popleft())
        while pending:
            yield tests(pending.popleft())

    def every(kinds_: tuple[str, ...]) -> Callable:
        return lambda out0, out1: statistic_family(kinds_, out0, out1, log_density=log_density, shape=shape,
                                                   increments=plan.increments)

    stage_seeds = screen_seeds.spawn(2)
    if len(candidates) <= plan.top:
        requests = zip(range(len(candidates)), itertools.repeat(plan.selection_runs(len(candidates))),
                       stage_seeds[0].spawn(len(candidates)), itertools.repeat(every(kinds)))
        choices = [c for tests in scored(requests) for c in tests]
    elif plan.halving:
        def rescore(i: int, out0: np.ndarray, out1: np.ndarray) -> list[_Choice]:
            return _score_tests(out0, out1, candidates[i], i, every(kinds)(out0, out1), delta=delta,
                                confidence=confidence, plan=plan, skipped=skipped)

        choices = _successive_halving(sample, rescore, len(candidates), first=plan.halving, seeds=stage_seeds[0])
    else:
        # 1. screen every pair with every statistic (the learned one included: on SVT34Parallel only it ranks
        #    DP-Sniper's witness pair among the kept); keep the best pairs and, for each, its best few statistics;
        # 2. score those (and the learned one) on fresh, larger samples
        requests = zip(range(len(candidates)), itertools.repeat(plan.screen), stage_seeds[0].spawn(len(candidates)),
                       itertools.repeat(every(kinds)))
        screened = dict(enumerate(scored(requests)))
        # pairs whose best test forecasts nothing keep the candidates' order (the relation's strongest patterns
        # first): on a few hundred runs that prior beats the as-counted forecast
        ranked = _kept_pairs(screened, plan, patterns)
        extra = statistic_family(tuple(k for k in kinds if k == "learned"), np.zeros((1, 1)), np.zeros((1, 1)))
        requests = [(kept[0].index, plan.select, seed_,
                     _given(list(dict.fromkeys(c.statistic for c in kept))[:KEPT_STATISTICS] + extra))
                    for kept, seed_ in zip(ranked, stage_seeds[1].spawn(len(ranked)))]
        choices = [c for tests in scored(requests) for c in tests]
    if not choices:
        return _untestable(relation, candidates, skipped, epsilon=epsilon, delta=delta, confidence=confidence,
                           runs=runs, plan=plan, seed=seed, start=start)
    finalists = choices if not plan.confirm else _confirmed(choices, plan, sample, _confirmation_seeds(seed),
                                                             delta=delta, confidence=confidence)
    best, evaluate = _winner(finalists, plan, epsilon=epsilon, delta=delta, confidence=confidence)
    family = _family(best, choices, plan)
    each = _each_confidence(confidence, len(family))
    pair = candidates[best.index]
    with _naming_the_change(relation, pair, best.index):
        tests = _evaluate(runner, pair, evaluate, final_seeds, family, delta=delta, confidence=each)
    runs += 2 * evaluate
    k = max(range(len(tests)), key=lambda i: tests[i].epsilon_lower)  # ties: the better-ranked test
    chosen, test = family[k], tests[k]
    certifiable = largest_certifiable_epsilon(evaluate, delta=delta, confidence=each)
    witness = dict(_witness(relation, pair, chosen, test), evaluated_tests=len(family),
                   confidence_each=each)
    return AuditResult(
        epsilon_lower=test.epsilon_lower, confidence=confidence, consistent=bool(test.epsilon_lower <= epsilon),
        epsilon_claimed=epsilon, delta=delta, relation=relation.describe(),
        witness=witness, trials=runs, evaluation_trials=evaluate,
        seconds=time.perf_counter() - start, candidates=len(candidates), budget=plan.name, seed=seed,
        power=_power(evaluate, epsilon=epsilon, delta=delta, confidence=each), skipped=dict(skipped),
        certifiable_epsilon=certifiable, no_power=_no_power(chosen, test, epsilon=epsilon, certifiable=certifiable,
                                                            tests=len(choices)))


def _kept_pairs(screened: dict[int, list[_Choice]], plan: Budget, patterns: int) -> list[list[_Choice]]:
    """The screened pairs the selection runs again (each as its tests, best first): the best ``plan.top`` by their
    best test's pessimistic forecast; with ``plan.keep_patterns`` and a relation whose first ``patterns`` candidates
    are its published patterns, those (in order) and the best ``plan.top`` // 2 of the others. A pair with no
    non-degenerate test is never kept."""
    prior = [screened[i] for i in range(patterns) if screened[i]] if plan.keep_patterns else []
    others = (c for i, c in screened.items() if c and not (prior and i < patterns))
    return prior + sorted(others, key=lambda c: -c[0].selection_epsilon)[:plan.top // 2 if prior else plan.top]


def _confirmation_seeds(seed: int) -> np.random.SeedSequence:
    """The confirmation's seeds: the audit seed's fourth child (the first three -- the check, the selection and the
    evaluation -- are what they were before the confirmation existed)."""
    return np.random.SeedSequence(seed).spawn(4)[3]


def _confirmed(choices: list[_Choice], plan: Budget, sample: Callable[[int, int, np.random.SeedSequence],
               tuple[np.ndarray, np.ndarray]], seeds: np.random.SeedSequence, *, delta: float,
               confidence: float) -> list[_Choice]:
    """For each size, the best test (:attr:`_Choice.rank`) of each of the ``plan.finalists`` best pairs, with its
    held-out counts replaced by counts on ``plan.confirm`` fresh runs per side of its pair (``sample(i, n, seed)``),
    forecast at every size of ``plan.sizes`` (a test whose threshold was chosen for the smaller evaluation may be
    worth the larger: plain SVT3, seed 0, 'first value' on pair 7, confirmed at log-ratio 0.13 against a claim of
    0.1), and only them: the winner is chosen among the confirmed tests (its family among all of its pair's).

    One finalist a pair: the tests of one pair share its held-out runs, so they are lucky together. Plain
    ``svt34_parallel``, seed 4: the best few tests were all of pair 21, forecast 0.24-0.25 as counted on the same
    166,668 held-out runs per side, and 0.17 on fresh ones; pair 7, which refutes the claim, ranked next and was
    never confirmed, and the audit passed at 0.133."""
    finalists = [c for size in plan.sizes
                 for c in _distinct(_by_rank(c for c in choices if c.trials == size), plan.finalists,
                                    key=lambda c: c.index)]
    pairs = sorted({c.index for c in finalists})
    level = 1.0 - 0.2 / math.sqrt(max(1, len(finalists)))
    confirmed = []
    for i, pair_seed in zip(pairs, seeds.spawn(len(pairs))):
        out0, out1 = sample(i, plan.confirm, pair_seed)
        for c in (c for c in finalists if c.index == i):
            fp = int(np.count_nonzero(c.fitted.score(out0) > c.threshold))
            fn = int(np.count_nonzero(c.fitted.score(out1) <= c.threshold))
            held = (fp, len(out0), fn, len(out1))
            for size in plan.sizes:  # each finalist, at its threshold, may be evaluated at either size
                forecast = functools.partial(projected_epsilon, *held, evaluation_trials=size, delta=delta,
                                             confidence=confidence)
                confirmed.append(replace(c, selection_epsilon=float(forecast(level=level)),
                                         counted_epsilon=float(forecast(level=0.5)), held=held, trials=size))
    return confirmed


def _family(best: _Choice, choices: list[_Choice], plan: Budget) -> list[_Choice]:
    """The tests the evaluation counts: ``best`` and the next ``plan.evaluated_tests`` - 1 tests of its pair scored
    for the same evaluation size, by rank, one per (statistic, threshold). All are chosen on the selection runs
    alone, so the evaluation is a family of fixed tests on the same fresh runs."""
    same = _by_rank(c for c in choices if c.index == best.index and c.trials == best.trials and c is not best)
    return _distinct([best, *same], plan.evaluated_tests, key=lambda c: (c.fitted.name, c.threshold))


def _by_rank(choices: Iterable[_Choice]) -> list[_Choice]:
    """``choices`` best first (:attr:`_Choice.rank`; ties keep their order)."""
    return sorted(choices, key=lambda c: c.rank, reverse=True)


def _distinct(ordered: list[_Choice], most: int, *, key: Callable[[_Choice], Any]) -> list[_Choice]:
    """The first ``most`` of ``ordered`` whose ``key`` (the event a test names) no earlier one has."""
    kept: dict[Any, _Choice] = {}
    for c in ordered:
        if len(kept) >= most:
            break
        kept.setdefault(key(c), c)
    return list(kept.values())


def _each_confidence(confidence: float, tests: int) -> float:
    """Bonferroni: each of ``tests`` bounds at 1 - (1 - confidence) / tests, so that P[any of them > true epsilon]
    <= 1 - confidence and the largest is a lower bound at ``confidence``."""
    return 1.0 - (1.0 - confidence) / tests


def _successive_halving(sample: Callable[[int, int, np.random.SeedSequence], tuple[np.ndarray, np.ndarray]],
                        score: Callable[[int, np.ndarray, np.ndarray], list[_Choice]], pairs: int, *, first: int,
                        seeds: np.random.SeedSequence) -> list[_Choice]:
    """The tests of the pair that survives successive halving over ``pairs`` candidates (``Budget.halving``).

    Round r = 0, 1, ...: each of the m_r surviving pairs (m_0 = ``pairs``) is run ``first`` x 2^r fresh times per
    side (``sample(i, n, seed)``), its tests are scored on all its runs so far (``score(i, out0, out1)``, best
    first) and the ceil(m_r / 2) pairs whose best test has the largest pessimistic forecast
    (:attr:`_Choice.selection_epsilon`; a pair without a test last) survive; ties -- on a few thousand runs
    every pair of a sparse vector forecasts 0 -- keep the order before, the relation's strongest patterns first.
    Not the as-counted forecast: on a few thousand runs it ranks an event seen on 4 runs of one side and none of
    the other (noise) above every real one. The round with one pair left returns its tests. Pair i's runs in round
    r come from the seed indexed (r, i): the same seed, the same rounds.

    Family-wise confidence: every run here is a selection run. The surviving pair, its test and, from the test's
    rates, the evaluation's size are functions of these runs alone, and the evaluation draws fresh runs from
    seeds of its own; conditionally on the selection it is one test of fixed size, so P[epsilon_lower > true
    epsilon] <= 1 - confidence however many rounds, pairs and tests were compared. The halving only decides
    where the selection runs go: many on the pair where a refutation is forecast, few on the others."""
    alive = list(range(pairs))
    rounds = math.ceil(math.log2(pairs)) + 1 if pairs > 1 else 1
    runs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    n = first
    for round_seed in seeds.spawn(rounds):
        pair_seeds = round_seed.spawn(pairs)
        tests = {}
        for i in alive:
            out0, out1 = sample(i, n, pair_seeds[i])
            if i in runs:
                out0, out1 = np.concatenate([runs[i][0], out0]), np.concatenate([runs[i][1], out1])
            runs[i] = (out0, out1)
            tests[i] = score(i, out0, out1)
        if len(alive) == 1:
            return tests[alive[0]]
        best = {i: max((c.selection_epsilon for c in tests[i]), default=-math.inf) for i in alive}
        alive = sorted(alive, key=best.__getitem__, reverse=True)[:math.ceil(len(alive) / 2)]
        runs = {i: runs[i] for i in alive}
        n *= 2
    return tests[alive[0]]


def _winner(choices: list[_Choice], plan: Budget, *, epsilon: float, delta: float,
            confidence: float) -> tuple[_Choice, int]:
    """The test to evaluate and the evaluation's size, runs per side.

    Every test was scored for each size of ``plan.sizes`` (its threshold chosen and its forecast projected for
    that many evaluation runs). The largest size is spent when its best test (by :attr:`_Choice.rank`) forecasts a
    bound above the claim with its held-out rates at their ``plan.escalate_level`` Clopper-Pearson limits (0.5: as
    counted) -- a refutation worth the runs; otherwise the best test scored for ``plan.evaluate`` runs is evaluated
    on that many: a rare event chosen for millions of runs is weak on a quarter of a million, and the smaller
    evaluation needs the common event it would pass over.

    Both are functions of the selection runs only: conditionally on them the evaluation is one test of a fixed
    size on fresh runs, so P[epsilon_lower > true epsilon] <= 1 - confidence still holds."""
    most = max(c.trials for c in choices)
    base = [c for c in choices if c.trials == plan.evaluate]
    if most > plan.evaluate:
        best = max((c for c in choices if c.trials == most), key=lambda c: c.rank)
        hopeful = projected_epsilon(*best.held, evaluation_trials=most, delta=delta, confidence=confidence,
                                    level=plan.escalate_level)
        if hopeful > epsilon or not base:  # (no threshold qualified for the smaller size)
            return best, most
    return max(base, key=lambda c: c.rank), plan.evaluate


def _no_power(best: _Choice, test: ThresholdTest, *, epsilon: float, certifiable: float, tests: int) -> str | None:
    """Why an evaluated audit could not have shown a violation, or None (see :class:`AuditResult`).

    A bound of 0 is never reported bare: it is true of every mechanism, so whether the selection forecast nothing
    or the selected event did not separate the sides on the evaluation runs (a rare event that fired on neither,
    a forecast that did not hold), the result says the test had no power."""
    if certifiable <= epsilon:
        return (f"the claim {epsilon:g} is at or above the largest epsilon these evaluation runs can certify "
                f"({certifiable:.4g}): no result of this audit could refute it (raise the budget or trials)")
    if test.epsilon_lower > 0:
        return None
    remedy = ("epsilon_lower = 0 says nothing about the mechanism (raise the budget, give a witness pair if you know "
              "one, or a statistic of your own)")
    if best.selection_epsilon <= 0:
        return (f"no test has power: none of the {tests} non-degenerate tests the selection scored forecast a "
                f"bound above 0, and the best of them ({_event(best.fitted, best.threshold)}) found none on the "
                f"evaluation runs; {remedy}")
    return (f"the selected test ({_event(best.fitted, best.threshold)}, forecast {best.selection_epsilon:.3g} on "
            f"the selection runs) found no evidence on the evaluation runs ({test.false_positives} false positives, "
            f"{test.false_negatives} false negatives); {remedy}")


def _untestable(relation: Relation, candidates: list[tuple[Any, Any]], skipped: dict[str, str], *, epsilon: float,
                delta: float, confidence: float, runs: int, plan: Budget, seed: int, start: float) -> AuditResult:
    """The result when no statistic gave a non-degenerate test on any pair (e.g. an output that never changes): no test,
    so epsilon_lower = 0 (true of every mechanism) and no power: nothing is evaluated, no claim can be refuted."""
    pair = candidates[0]
    witness = {"pair": 0, "data": _compact(pair[0]), "neighbour": _compact(pair[1]),
               "change": relation.check(*pair).as_dict(), "statistic": None, "statistic_kind": None,
               "event": "none: no statistic gave a non-degenerate test (see skipped)", "threshold": math.nan,
               "false_positives": 0, "false_negatives": 0, "selection_epsilon": math.nan}
    reason = ("no test: no statistic applies to the outputs or gives a non-degenerate event: "
              + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    power = {"largest_certifiable_epsilon": 0.0, "can_refute_claim": False, "reason": reason}
    return AuditResult(epsilon_lower=0.0, confidence=confidence, consistent=True, epsilon_claimed=epsilon,
                       delta=delta, relation=relation.describe(), witness=witness, trials=runs, evaluation_trials=0,
                       seconds=time.perf_counter() - start, candidates=len(candidates), budget=plan.name, seed=seed,
                       power=power, skipped=dict(skipped), certifiable_epsilon=0.0, no_power=reason)


@contextlib.contextmanager
def _naming_the_change(relation: Relation, pair: tuple[Any, Any], index: int) -> Iterator[None]:
    """A :class:`MechanismError` raised on a pair is raised again with the pair's change: the record that was
    added, removed or swapped, the person whose attribute moved -- what broke the mechanism (the data set's own
    description is cut short and hides a record added at its end). Time-outs pass unchanged."""
    try:
        yield
    except AuditTimeout:
        raise
    except MechanismError as error:
        try:
            change = relation.check(*pair)
        except Exception:  # noqa: BLE001  (a pair the relation cannot describe: say nothing more)
            raise error from None
        hint = ""
        if change.kind in ("add", "replace") and isinstance(relation, (AddRemove, ReplaceOne)) \
                and relation.bounds is None and relation.domain == "any":
            hint = ("; the relation takes any record values (domain='any'): if that record is outside the claim's "
                    "domain, declare the domain with bounds=(low, high) or keep the default domain='observed'")
        raise MechanismError(f"{error} -- on candidate pair {index} under {relation.describe()}, whose neighbour "
                             f"D' is D with {_describe_change(change)}{hint}") from error


def _describe_change(change: Any) -> str:
    """One line for a :class:`~dpfair_analysis.testing.relations.Change`."""
    value = {"before": _compact(change.before) if change.before is not None else None,
             "after": _compact(change.after) if change.after is not None else None}
    if change.kind == "add":
        return f"record {value['after']} added at index {change.index}"
    if change.kind == "remove":
        return f"record {change.index} ({value['before']}) removed"
    if change.kind == "replace":
        return f"record {change.index} replaced: {value['before']} -> {value['after']}"
    if change.kind == "attribute":
        return f"person {change.index}'s attribute changed: {value['before']} -> {value['after']}"
    return f"the queries moved: {value['before']} -> {value['after']}"


def _power(trials: int, *, epsilon: float, delta: float, confidence: float) -> dict[str, Any]:
    """What the evaluation runs could show at best: the largest certifiable epsilon, and whether the claim is
    below it (if not, no result of this audit could refute the claim: it has no power against it)."""
    largest = largest_certifiable_epsilon(trials, delta=delta, confidence=confidence)
    return {"largest_certifiable_epsilon": largest, "can_refute_claim": bool(largest > epsilon)}


def _evaluate(runner: Runner, pair: tuple[Any, Any], n: int, seeds: np.random.SeedSequence, family: list[_Choice],
              *, delta: float, confidence: float) -> list[ThresholdTest]:
    """Errors of each test of ``family`` on the same ``n`` fresh runs per side, counted in chunks (no output is
    kept); each bound at ``confidence``."""
    counts = np.zeros((2, len(family)), dtype=np.int64)
    runner.new_pair()
    for side, s in zip((0, 1), seeds.spawn(2)):
        for chunk in runner.stream(pair[side], n, s):
            flat = runner.flat(chunk)
            counts[side] += [np.count_nonzero(c.fitted.score(flat) > c.threshold) for c in family]
    tests = []
    for c, false_positives, above in zip(family, counts[0].tolist(), counts[1].tolist()):
        false_negatives = n - above
        epsilon = float(epsilon_lower_bound(false_positives, n, false_negatives, n, delta=delta,
                                            confidence=confidence))
        tests.append(ThresholdTest(threshold=c.threshold, false_positives=false_positives, negatives=n,
                                   false_negatives=false_negatives, positives=n, epsilon_lower=epsilon,
                                   selection_epsilon=c.selection_epsilon))
    return tests


def _witness(relation: Relation, pair: tuple[Any, Any], choice: _Choice, test: ThresholdTest) -> dict[str, Any]:
    return {"pair": choice.index, "data": _compact(pair[0]), "neighbour": _compact(pair[1]),
            "change": relation.check(*pair).as_dict(), "statistic": choice.fitted.name,
            "statistic_kind": choice.fitted.kind, "event": _event(choice.fitted, choice.threshold),
            "threshold": choice.threshold, "false_positives": test.false_positives,
            "false_negatives": test.false_negatives, "selection_epsilon": choice.selection_epsilon}


def _compact(data: Any) -> Any:
    """A data set for a report: the values themselves when small, else a one-line description."""
    if isinstance(data, dict):
        return {k: _compact(v) for k, v in data.items()}
    array = np.asarray(data)
    return array.tolist() if array.size <= 64 else describe_data(array, 120)


def _shown(data: Any) -> str:
    """A witness's data set (as :func:`_compact` gives it) on one line."""
    return data if isinstance(data, str) else describe_data(data, 200)


def assert_private(mechanism: Callable[..., Any], epsilon: float, delta: float = 0.0, *,
                   require_power: bool = False, allow_no_power: bool = False, **options: Any) -> AuditResult:
    """:func:`audit`, raising when the claim is refuted -- and, by default, when the audit could not have refuted
    it.

    Outcomes (the rule: only an audit that could have failed may pass):

    * refuted (epsilon_lower > the claim): :class:`PrivacyViolation`;
    * no power (:attr:`AuditResult.no_power` set: the claim is at or above the largest epsilon the evaluation
      runs can certify, or no test had power): :class:`NoPower` (an :class:`InsufficientPower`), naming the
      largest certifiable epsilon, why, and how to get power -- unless ``allow_no_power=True`` accepts such a
      result explicitly, or ``require_power=True`` and the under-noised twin was caught (the twin shows the
      power);
    * ``require_power=True`` and the twin not caught: :class:`InsufficientPower`;
    * else the :class:`AuditResult` is returned.

    Parameters
    ----------
    mechanism : callable
        As in :func:`audit`.
    epsilon, delta : float
        The claim.
    require_power : bool
        Also raise :class:`InsufficientPower` unless the under-noised twin (``twin=``, default
        0.25 when this is True) is caught: a passing audit then means something.
    allow_no_power : bool
        Return a consistent result without power instead of raising :class:`NoPower` (its ``no_power`` still
        says why it proves nothing).
    **options
        Passed to :func:`audit` (``relation`` is required).
    """
    __tracebackhide__ = True  # a failing pytest shows the test's line and this message, not the kit's source
    if not isinstance(allow_no_power, bool):
        raise TypeError(f"allow_no_power must be True or False, got {allow_no_power!r}")
    if require_power and options.get("twin") is None:
        options["twin"] = 0.25
    result = audit(mechanism, epsilon, delta, **options)
    if not result.consistent:
        w = result.witness
        raise PrivacyViolation(
            f"privacy claim refuted: epsilon >= {result.epsilon_lower:.4g} with confidence {result.confidence:g} "
            f"> claimed {result.epsilon_claimed:g} (delta = {result.delta:g}, {result.relation}); witness: "
            f"D = {_shown(w['data'])}, D' = {_shown(w['neighbour'])} (candidate pair {w['pair']}, change "
            f"{w['change']}), event {w['event']}, {w['false_positives']} false positives and "
            f"{w['false_negatives']} false negatives in {result.evaluation_trials} runs per side", result)
    if require_power and not result.power.get("twin_caught", False):
        raise InsufficientPower(
            f"the audit did not catch the under-noised twin ({result.power.get('twin')}): its lower bound "
            f"{result.power.get('twin_epsilon_lower', math.nan):.4g} <= claimed {result.epsilon_claimed:g}; a "
            f"passing audit at this budget proves little (raise the budget or trials, or give pairs/log_density)",
            result)
    if result.no_power and not allow_no_power and not require_power:
        raise NoPower(no_power_message(result), result)
    return result


def no_power_message(result: AuditResult) -> str:
    """One line for a result without power: the claim, the largest epsilon its runs could certify, why it has no
    power, and how to get it (or accept the result explicitly)."""
    reason = " ".join(str(result.no_power).split())
    return (f"NO POWER: the audit could not have refuted the claim epsilon = {result.epsilon_claimed:g} "
            f"(delta = {result.delta:g}, {result.relation}; largest certifiable epsilon "
            f"{result.certifiable_epsilon:.4g} with {result.evaluation_trials} evaluation runs per side): {reason}. "
            f"Get power with more runs (trials=, a larger budget), a witness pair (pairs=) or a statistic of your "
            f"own, or accept a result without power explicitly with allow_no_power=True (in @pytest.mark.dp or "
            f"the call)")


__all__ = [
    "BUDGETS",
    "FULL",
    "QUICK",
    "THOROUGH",
    "AuditResult",
    "Budget",
    "InsufficientPower",
    "NoPower",
    "PrivacyViolation",
    "assert_private",
    "audit",
    "candidate_pairs",
    "default_data",
]
