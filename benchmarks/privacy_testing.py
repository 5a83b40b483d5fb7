#!/usr/bin/env python
"""The kit's audits against the published DP testers, on the mechanisms their papers benchmark.

For every reference mechanism of :mod:`dpfair_analysis.testing.zoo` (StatDP's and DP-Sniper's
benchmarks, correct and incorrect, plus Gaussian and DP-Auditorium mean mechanisms) this script runs

* **quick** -- one audit at the kit's quick budget with the pair search on (StatDP's patterns around
  the base input and random sign patterns): is the claim refuted ("caught"), the epsilon lower
  bound, seconds on this machine;
* **bound** -- one audit at the full budget with ``--bound-trials`` evaluation runs per side: the
  lower bound to set beside the anchors' published lower bounds on the same instances;
* **matched** -- on the instances with anchors, one audit at the anchors' own settings: the kit's
  ``thorough`` budget (DP-Sniper's sample sizes: 1 M runs per side to screen each of 16 pairs, 10 M
  for each of the 4 kept, events of probability >= c = 0.01, rates ranked as counted), ``--matched-trials``
  (default 200 M, DP-Sniper's n_final) evaluation runs per side and 90% confidence;
* **consistency** -- for the correct mechanisms, ``--seeds`` quick audits with different seeds and
  the pair search on: how many are consistent with the claim (target: >= 19 of 20).
* **plain** (not in the default ``--parts``: hours) -- every mechanism as a user writes it, one output per call
  (:meth:`~dpfair_analysis.testing.zoo.ZooMechanism.single`: no batching, so none of the batched audit's 10-40x
  more runs), audited at the full budget with the pair search on, ``--plain-seeds`` seeds (default 20) and
  ``--workers`` worker processes (run from a git worktree: ``PYTHONPATH=.``, or the editable install's checkout is
  imported): every incorrect one flagged (on how many seeds), every correct one consistent
  on >= 19 of 20 seeds and, for every correct sparse-vector mechanism, epsilon_lower > 0 with a named event;
  CPU seconds per audit (this process and its workers); the bounds beside the anchors' published ones.
* **wall** (not in the default ``--parts``) -- the time target of a plain function's full audit (issue 48: <= 10
  minutes): the same audit as the plain part on each of ``--wall-seeds`` with ``--workers`` worker processes, its
  wall and CPU seconds. Run it on an otherwise idle machine.

Anchors (published lower bounds on the same instances, epsilon = 0.1 claims): DP-Sniper's
``eps_lcb`` with its logistic-regression and neural-network classifiers, and StatDP's events
verified by DP-Sniper (two runs), from the reference logs of Bichsel, Steffen, Bogunovic &
Vechev (S&P 2021), ``eth-sri/dp-sniper``, ``eval_sp2021/reference-results/{dd_search_reg,
dd_search_mlp, statdp_1, statdp_2}_data.log``: 90% confidence, 10.7 M samples to train and
200 M to estimate (ours: 95% confidence in quick and bound; their 90% and 200 M in matched).
Seconds are theirs on their machine (not comparable).

Usage (from the repository root)::

    .venv/bin/python benchmarks/privacy_testing.py                 # all three parts, ~1-2 h on 2 cores
    .venv/bin/python benchmarks/privacy_testing.py --parts quick   # verdicts and seconds only
    .venv/bin/python benchmarks/privacy_testing.py --smoke         # seconds: the smoke test's run
    .venv/bin/python benchmarks/privacy_testing.py --parts plain --plain-seeds 20   # plain functions, ~29 CPU-h
    .venv/bin/python benchmarks/privacy_testing.py --parts plain --plain-seeds 20 \
        --plain-records benchmarks/results/privacy_testing_plain_runs.json   # the same, resumable, in the background
    # the same on both cores: two one-worker recorders, one file, disjoint halves of ~39 CPU-min a seed each
    # (seed 0's costs; svt34_parallel adds ~13)
    ... --mechanisms laplace,truncated_geometric,noisy_hist1,noisy_hist2,noisy_max1,noisy_max2,noisy_max3,\
        noisy_max4,svt1,svt2,svt3,svt4,svt5 --workers 1 --plain-records ... &
    ... --mechanisms svt6,numerical_svt,prefix_sum,laplace_parallel,one_time_rappor,rappor,gaussian,\
        gaussian_l2_mistake,mean_replace_one,mean_add_remove,svt34_parallel --workers 1 --plain-records ... &
    .venv/bin/python benchmarks/privacy_testing.py --parts wall --mechanisms svt34_parallel --wall-seeds 4,11 \
        --workers 2 --out /tmp/wall.json   # the slowest zoo mechanism's full plain audit on both cores: ~7-8 min a seed
    .venv/bin/python benchmarks/privacy_testing.py --table benchmarks/results/privacy_testing.json
    .venv/bin/python benchmarks/privacy_testing.py --parts bound --bound-trials 50000000 \
        --update benchmarks/results/privacy_testing.json --out benchmarks/results/privacy_testing.json
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from dpfair_analysis.cli._common import ScriptParser, positive_int, unit_open
from dpfair_analysis.testing.zoo import catalogue

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "privacy_testing.json"
PARTS = ("quick", "bound", "matched", "consistency", "plain", "wall")


def parse_args(argv=None):
    """The command line, checked (before any heavy import)."""
    p = ScriptParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="quick,bound,matched,consistency",
                   help="comma-separated: quick, bound, matched, consistency (default all)")
    p.add_argument("--mechanisms", default=None, help="comma-separated zoo names (default all)")
    p.add_argument("--seeds", type=int, default=20, help="seeds of the consistency part (default 20)")
    p.add_argument("--bound-trials", type=positive_int, default=20_000_000,
                   help="evaluation runs per side of the bound part (default 20,000,000)")
    p.add_argument("--matched-trials", type=positive_int, default=200_000_000,
                   help="evaluation runs per side of the matched part (default 200,000,000: DP-Sniper's)")
    p.add_argument("--confidence", type=unit_open, default=0.95,
                   help="confidence of every bound (default 0.95; the anchors' is 0.9)")
    p.add_argument("--single", action="store_true",
                   help="call the one-output form fn(data, rng) instead of the batched one (much slower)")
    p.add_argument("--plain-seeds", type=int, default=20, help="seeds of the plain part (default 20)")
    p.add_argument("--plain-records", type=Path, default=None,
                   help="a records file for the plain part: each audit is recorded there the moment it ends and "
                        "read back instead of rerun (resumable across machines; seed by seed over the mechanisms)")
    p.add_argument("--plain-recorded-only", action="store_true",
                   help="with --plain-records: report the plain part on the seeds recorded so far, computing nothing")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes drawing the plain and wall parts' runs (default: none, one process)")
    p.add_argument("--wall-seeds", default="0", help="comma-separated seeds of the wall part (default 0)")
    p.add_argument("--smoke", action="store_true",
                   help="the smoke test's run: smoke budget, 3 mechanisms, 2 seeds (1 in the plain part)")
    p.add_argument("--out", type=Path, default=None, help=f"JSON output (default {DEFAULT_OUT}; _smoke with --smoke)")
    p.add_argument("--spread", action="store_true",
                   help="also replay the anchors' own events where the matched bound is below them (seconds)")
    p.add_argument("--table", type=Path, default=None, help="print the table of an earlier JSON and stop")
    p.add_argument("--update", type=Path, default=None,
                   help="an earlier JSON: replace only the parts run now (rows matched by mechanism), keep the rest, "
                        "and write the result to --out")
    args = p.parse_args(argv)
    if args.table is not None:
        return args
    parts = [s.strip() for s in args.parts.split(",") if s.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        p.error(f"--parts must be among {', '.join(PARTS)}; got {sorted(unknown)}")
    zoo = catalogue()  # numpy only: cheap
    names = list(zoo) if args.mechanisms is None else [s.strip() for s in args.mechanisms.split(",")]
    bad = [n for n in names if n not in zoo]
    if bad:
        p.error(f"--mechanisms: unknown {bad}; choose from {sorted(zoo)}")
    if args.plain_records is not None and not args.plain_records.parent.is_dir():
        p.error(f"--plain-records: directory {str(args.plain_records.parent)!r} does not exist")
    if args.plain_recorded_only and args.plain_records is None:
        p.error("--plain-recorded-only needs --plain-records")
    if args.plain_seeds < 1 or args.seeds < 1:
        p.error("--seeds and --plain-seeds must be >= 1")
    if args.workers is not None and args.workers < 1:
        p.error(f"--workers must be >= 1, got {args.workers}")
    wall_seeds = [x.strip() for x in args.wall_seeds.split(",") if x.strip()]
    if not wall_seeds or not all(x.isdigit() for x in wall_seeds):
        p.error(f"--wall-seeds must be comma-separated integers >= 0, got {args.wall_seeds!r}")
    args.wall_seeds = [int(x) for x in wall_seeds]
    args.parts, args.names = parts, names
    if args.smoke and not args.mechanisms:
        args.names = ["laplace", "noisy_hist2", "noisy_max1"]
    args.out = args.out or (DEFAULT_OUT.with_name("privacy_testing_smoke.json") if args.smoke else DEFAULT_OUT)
    if not args.out.parent.is_dir():
        p.error(f"--out: directory {str(args.out.parent)!r} does not exist")
    return args


if __name__ == "__main__":
    parse_args()  # a bad command line is refused before the imports below (scipy, scikit-learn: seconds)

from dpfair_analysis.io import write_atomically
from dpfair_analysis.testing.auditing import FULL, QUICK, SMOKE, THOROUGH, audit
from dpfair_analysis.testing.bounds import epsilon_lower_bound
from dpfair_analysis.testing.runner import AuditTimeout

SOURCE = ("eth-sri/dp-sniper eval_sp2021/reference-results/*_data.log (commit a4a2037; Bichsel et al., S&P 2021): "
          "eps_lcb at 90% confidence")

#: Published lower bounds (eps_lcb) and seconds of the anchors, per zoo mechanism: DP-Sniper with logistic
#: regression ("dpsniper_reg") and with a neural network ("dpsniper_mlp"), StatDP's two runs as verified by
#: DP-Sniper ("statdp_1", "statdp_2"). Seconds: DD-search + final estimate for DP-Sniper, the search for StatDP.
ANCHORS: dict[str, dict[str, float]] = {
    "laplace": dict(dpsniper_reg=0.096804, dpsniper_mlp=0.097634, statdp_1=0.099814, statdp_2=0.099617,
                    dpsniper_reg_seconds=21.4, statdp_1_seconds=46.5),
    "truncated_geometric": dict(dpsniper_reg=0.115564, dpsniper_mlp=0.115543, statdp_1=0.115881, statdp_2=0.116854,
                                dpsniper_reg_seconds=19.5, statdp_1_seconds=351.8),
    "noisy_hist1": dict(dpsniper_reg=0.097794, dpsniper_mlp=0.097699, statdp_1=0.082831, statdp_2=0.099436,
                        dpsniper_reg_seconds=37.7, statdp_1_seconds=505.1),
    "noisy_hist2": dict(dpsniper_reg=4.602022, dpsniper_mlp=4.601470, statdp_1=9.716927, statdp_2=10.002169,
                        dpsniper_reg_seconds=40.6, statdp_1_seconds=816.6),
    "noisy_max1": dict(dpsniper_reg=0.092254, dpsniper_mlp=0.092501, statdp_1=0.091952, statdp_2=0.092102,
                       dpsniper_reg_seconds=61.8, statdp_1_seconds=59.8),
    "noisy_max2": dict(dpsniper_reg=0.097503, dpsniper_mlp=0.097920, statdp_1=0.099575, statdp_2=0.099672,
                       dpsniper_reg_seconds=58.4, statdp_1_seconds=58.6),
    "noisy_max3": dict(dpsniper_reg=0.247816, dpsniper_mlp=0.248810, statdp_1=0.199142, statdp_2=0.196071,
                       dpsniper_reg_seconds=62.4, statdp_1_seconds=131.8),
    "noisy_max4": dict(dpsniper_reg=0.346343, dpsniper_mlp=0.353444, statdp_1=0.196020, statdp_2=0.198830,
                       dpsniper_reg_seconds=62.9, statdp_1_seconds=132.0),
    "svt1": dict(dpsniper_reg=0.085798, dpsniper_mlp=0.085782, statdp_1=0.029754, statdp_2=0.029846,
                 dpsniper_reg_seconds=126.0, statdp_1_seconds=343.6),
    "svt2": dict(dpsniper_reg=0.085934, dpsniper_mlp=0.085247, statdp_1=0.031642, statdp_2=0.040683,
                 dpsniper_reg_seconds=159.9, statdp_1_seconds=402.8),
    "svt3": dict(dpsniper_reg=0.171572, dpsniper_mlp=0.182168, statdp_1=0.023061, statdp_2=0.179285,
                 dpsniper_reg_seconds=160.3, statdp_1_seconds=5821.1),
    "svt4": dict(dpsniper_reg=0.168683, dpsniper_mlp=0.169569, statdp_1=0.170860, statdp_2=0.171908,
                 dpsniper_reg_seconds=130.5, statdp_1_seconds=555.6),
    "svt5": dict(dpsniper_reg=1.761185, dpsniper_mlp=1.760988, statdp_1=14.314309, statdp_2=14.314307,
                 dpsniper_reg_seconds=58.9, statdp_1_seconds=351.3),
    "svt6": dict(dpsniper_reg=0.272041, dpsniper_mlp=0.269827, statdp_1=0.322037, statdp_2=0.319954,
                 dpsniper_reg_seconds=95.5, statdp_1_seconds=755.0),
    "numerical_svt": dict(dpsniper_reg=0.034324, dpsniper_mlp=0.034501, dpsniper_reg_seconds=151.7),
    "prefix_sum": dict(dpsniper_reg=0.504012, dpsniper_mlp=0.577433, statdp_1=0.351606, statdp_2=0.344593,
                       dpsniper_reg_seconds=97.0, statdp_1_seconds=3367.0),
    "laplace_parallel": dict(dpsniper_reg=0.034953, dpsniper_mlp=0.029869, statdp_1=0.012593, statdp_2=0.013493,
                             dpsniper_reg_seconds=104.4, statdp_1_seconds=4717.1),
    "svt34_parallel": dict(dpsniper_reg=0.261038, dpsniper_mlp=0.261621, statdp_1=0.137089, statdp_2=0.196324,
                           dpsniper_reg_seconds=363.9, statdp_1_seconds=27301.1),
    "one_time_rappor": dict(dpsniper_reg=0.597778, dpsniper_mlp=0.599899, statdp_1=0.470635, statdp_2=0.060192,
                            dpsniper_reg_seconds=89.1, statdp_1_seconds=991.0),
    "rappor": dict(dpsniper_reg=0.292985, dpsniper_mlp=0.300802, statdp_1=0.241583, statdp_2=0.024255,
                   dpsniper_reg_seconds=144.9, statdp_1_seconds=1177.6),
}
ANCHOR_NAMES = ("dpsniper_reg", "dpsniper_mlp", "statdp_1", "statdp_2")


def _laplace_below(mean: float, t: float, scale: float) -> float:
    """P[mean + Lap(scale) < t] for t <= mean."""
    return 0.5 * math.exp(-(mean - t) / scale)


def _exponential_argmax_is_first(x: list[float], scale: float) -> float:
    """P[argmax(x + Exp(scale)) = 0] = int f(e) prod_j F(x_0 + e - x_j) de (one-sided noise: F(v) = 0 for v < 0)."""
    from scipy import integrate

    def integrand(e: float) -> float:
        rest = np.clip(x[0] + e - np.asarray(x[1:], dtype=float), 0.0, None)
        return math.exp(-e / scale) / scale * float(np.prod(1.0 - np.exp(-rest / scale)))

    return integrate.quad(integrand, 0.0, math.inf, epsabs=1e-14, epsrel=1e-12)[0]


def _svt_first_above_at(x: list[float], k: int, *, threshold_scale: float, query_scale: float,
                        threshold: float) -> float:
    """P[an SVT with cutoff 1 answers "above" first at query k] = E_rho[prod_(i<k) F(T + rho - x_i)
    (1 - F(T + rho - x_k))], F the CDF of Lap(query_scale), rho ~ Lap(threshold_scale)."""
    from scipy import integrate

    def laplace_cdf(v: np.ndarray) -> np.ndarray:
        return np.where(v < 0, 0.5 * np.exp(np.minimum(v, 0) / query_scale),
                        1 - 0.5 * np.exp(-np.maximum(v, 0) / query_scale))

    values = np.asarray(x, dtype=float)

    def integrand(rho: float) -> float:
        density = math.exp(-abs(rho) / threshold_scale) / (2 * threshold_scale)
        gap = threshold + rho - values
        return density * float(np.prod(laplace_cdf(gap[:k]))) * float(1 - laplace_cdf(gap[k:k + 1])[0])

    return integrate.quad(integrand, -math.inf, math.inf, epsabs=1e-15, epsrel=1e-11, limit=500)[0]


#: Events to replay where the kit's matched bound is below the best anchor: the best anchor's published event (its
#: pair, post-processing and event from its log), the mechanism's best event (the largest event of the largest
#: ratio) where it is plain, and the event the kit chose, as (mechanism, event, P[event] on the input where it is
#: rarer, on the other, source of the probabilities): exact from the closed forms, else the anchor's own 200 M-run
#: estimates (``p1``, ``p2`` in its log, themselves draws).
ANCHOR_EVENTS: dict[str, tuple[str, str, float, float, str]] = {
    "laplace, StatDP's event": ("laplace", "output < -0.8341653 on [1] vs [0]",
                                _laplace_below(1.0, -0.8341652871980578, 10.0),
                                _laplace_below(0.0, -0.8341652871980578, 10.0), "exact"),
    "laplace, the best event": ("laplace", "output < 0 on [1] vs [0] (ratio e^0.1, the largest such event)",
                                _laplace_below(1.0, 0.0, 10.0), _laplace_below(0.0, 0.0, 10.0), "exact"),
    "noisy_hist2, StatDP's event": ("noisy_hist2", "output[0] < 0.9510248 on [1,1,1,1,1] vs [2,1,1,1,1]",
                                    _laplace_below(2.0, 0.9510247959663243, 0.1),
                                    _laplace_below(1.0, 0.9510247959663243, 0.1), "exact"),
    "noisy_hist2, the best event": ("noisy_hist2", "output[0] < 1 on [1,1,1,1,1] vs [2,1,1,1,1] (ratio e^10)",
                                    _laplace_below(2.0, 1.0, 0.1), _laplace_below(1.0, 1.0, 0.1), "exact"),
    "noisy_max2, StatDP's event": ("noisy_max2", "argmax = 0 on [1,1,1,1,1] vs [2,0,0,0,0]", 0.2,
                                   _exponential_argmax_is_first([2.0, 0.0, 0.0, 0.0, 0.0], 20.0), "exact"),
    "svt1, DP-Sniper's event": ("svt1", "its logistic-regression event on [0]*5+[1]*5 vs [1]*5+[0]*5",
                                0.00995683895196358, 0.01087348800683502, "the anchor's estimates"),
    "svt1, the kit's event": ("svt1", "first 'above' at query 6 (output[5] = 1) on [1]*5+[0]*5 vs [0]*5+[1]*5",
                              _svt_first_above_at([1] * 5 + [0] * 5, 5, threshold_scale=20.0, query_scale=40.0,
                                                  threshold=0.5),
                              _svt_first_above_at([0] * 5 + [1] * 5, 5, threshold_scale=20.0, query_scale=40.0,
                                                  threshold=0.5), "exact"),
    "svt4, StatDP's event": ("svt4", "first 'above' at query 6 (CountPP(False) = 5) on [1]*10 vs [2]*5+[0]*5",
                             _svt_first_above_at([2] * 5 + [0] * 5, 5, threshold_scale=40.0, query_scale=40 / 3,
                                                 threshold=1.0),
                             _svt_first_above_at([1] * 10, 5, threshold_scale=40.0, query_scale=40 / 3,
                                                 threshold=1.0), "exact"),
    "svt4, the kit's event": ("svt4", "first 'above' at query 6 (output[5] = 1) on [1]*5+[0]*5 vs [0]*5+[1]*5",
                              _svt_first_above_at([1] * 5 + [0] * 5, 5, threshold_scale=40.0, query_scale=40 / 3,
                                                  threshold=1.0),
                              _svt_first_above_at([0] * 5 + [1] * 5, 5, threshold_scale=40.0, query_scale=40 / 3,
                                                  threshold=1.0), "exact"),
}


def anchor_event_spread(trials: int = 200_000_000, confidence: float = 0.9, replicates: int = 20_000,
                        seed: int = 0) -> dict[str, dict]:
    """What the :data:`ANCHOR_EVENTS` give at ``trials`` runs per side, by the same bound (binomial counts at the
    events' probabilities, :func:`dpfair_analysis.testing.bounds.epsilon_lower_bound`): the median and 5-95% range
    of the bound over ``replicates`` replays, and the quantile of the best anchor's published value in it. A
    published lower bound is one draw of such a spread; where it sits above the best event's median, no tester
    reaches it reliably."""
    rng = np.random.default_rng(seed)
    out = {}
    for label, (mechanism, event, p_rare, p_common, source) in ANCHOR_EVENTS.items():
        rare, common = rng.binomial(trials, p_rare, replicates), rng.binomial(trials, p_common, replicates)
        bounds = np.asarray(epsilon_lower_bound(rare, trials, trials - common, trials, delta=0.0,
                                                confidence=confidence))
        published = best_anchor(mechanism)
        out[label] = {"mechanism": mechanism, "event": event, "probabilities": [p_rare, p_common], "source": source,
                      "trials": trials, "confidence": confidence, "delta": 0.0, "replicates": replicates, "seed": seed,
                      "log_ratio": math.log(p_common / p_rare), "published": published,
                      "median": float(np.median(bounds)), "p5": float(np.quantile(bounds, 0.05)),
                      "p95": float(np.quantile(bounds, 0.95)),
                      "published_quantile": float(np.mean(bounds < published))}
    return out
#: The anchors' confidence (DP-Sniper's DDConfig: confidence=0.9), used by the matched part.
ANCHOR_CONFIDENCE = 0.9
#: The correct sparse-vector mechanisms: the plain part wants epsilon_lower > 0 with a named event on each.
SPARSE_VECTORS = ("svt1", "svt2", "numerical_svt")


def best_anchor(name: str) -> float | None:
    values = [ANCHORS.get(name, {}).get(k) for k in ANCHOR_NAMES]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (the workers, once closed)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_audit(z, *, budget, seed: int, trials: int | None = None, single: bool = False,
              confidence: float = 0.95, workers: int | None = None) -> dict:
    """One audit of a zoo entry; the JSON row."""
    fn = z.single() if single else z.batched()
    start, cpu = time.perf_counter(), _cpu_seconds()
    result = audit(fn, z.epsilon, z.delta, relation=z.relation, data=z.data, batched=not single, budget=budget,
                   trials=trials, seed=seed, time_budget=3600.0, name=z.name, confidence=confidence,
                   workers=workers)
    return {"epsilon_lower": result.epsilon_lower, "consistent": result.consistent,
            "caught": not result.consistent, "seconds": time.perf_counter() - start,
            "cpu_seconds": _cpu_seconds() - cpu, "evaluation_trials": result.evaluation_trials,
            "runs": result.trials, "statistic": result.witness["statistic"], "event": result.witness["event"],
            "no_power": result.no_power, "pair": result.witness["pair"], "change": result.witness["change"]}


@functools.cache
def kit_fingerprint() -> str:
    """SHA-256 over the privacy-testing kit's source (``dpfair_analysis/testing``) and the numerical libraries'
    versions: what, beside the mechanism, its seed, the budget and the confidence, determines an audit."""
    import dpfair_analysis.testing as kit
    from dpfair_analysis.experiments.cache import source_fingerprint

    return source_fingerprint(Path(kit.__file__).resolve().parent, (".",),
                              ("numpy", "scipy", "scikit-learn", "hypothesis"))


def plain_key(z, *, budget, seed: int, confidence: float) -> str:
    """The records' key of one plain audit: the mechanism, its seed, the budget and the confidence (not the number
    of workers: the same seed draws the same numbers whatever their number)."""
    from dpfair_analysis.experiments.cache import config_key

    return config_key("plain audit", z.name, z.epsilon, z.delta, seed, asdict(budget), confidence)


def plain_audit(z, *, budget, seed: int, confidence: float, workers: int | None, records=None) -> dict:
    """One plain audit's row: from ``records`` (a :class:`~dpfair_analysis.experiments.cache.RunRecords` keyed by
    :func:`plain_key`, fingerprinted by :func:`kit_fingerprint`) if it holds it, else run and recorded there."""
    def compute() -> list[dict]:
        return [run_audit(z, budget=budget, seed=seed, single=True, confidence=confidence, workers=workers)]

    if records is None:
        return compute()[0]
    return records.rows_or_compute(plain_key(z, budget=budget, seed=seed, confidence=confidence), compute,
                                   label=f"plain audit: {z.name} seed {seed}, {budget.name} budget")[0]


def record_plain_audits(entries: list, *, budget, seeds: int, confidence: float, workers: int | None,
                        records) -> None:
    """Run the plain audits ``records`` lacks, seed by seed across ``entries`` (seed 0 of every mechanism, then
    seed 1, ...: an interrupted run leaves every mechanism with as many seeds as it could), each recorded the
    moment it ends; resumable, and what a background job across sessions runs."""
    from tqdm import tqdm

    todo = [(s, z) for s in range(seeds) for z in entries
            if not records.recorded(plain_key(z, budget=budget, seed=s, confidence=confidence))]
    for s, z in tqdm(todo, desc="plain audits", unit="audit", file=sys.stderr, dynamic_ncols=True):
        try:
            row = plain_audit(z, budget=budget, seed=s, confidence=confidence, workers=workers, records=records)
        except AuditTimeout as error:  # wall time (a loaded or stopped machine): not a result, retried next time
            tqdm.write(f"not recorded: {z.name} seed {s} ran out of time ({error}); the next run retries it",
                       file=sys.stderr)
            continue
        tqdm.write(f"recorded {z.name} seed {s}: ε ≥ {row['epsilon_lower']:.4f} "
                   f"{'caught' if row['caught'] else 'consistent'}, {row['cpu_seconds']:.0f} CPU s", file=sys.stderr)


def plain_part(z, *, budget, seeds: int, confidence: float, workers: int | None, records=None,
               recorded_only: bool = False) -> dict | None:
    """The zoo entry as a plain function (one output per call) at ``budget`` on seeds 0..seeds-1: the verdicts
    against the part's targets (module docstring) and the CPU seconds. ``recorded_only``: on the seeds ``records``
    holds (None if it holds none), computing nothing -- a long run's state so far."""
    chosen = [s for s in range(seeds) if not recorded_only
              or records.recorded(plain_key(z, budget=budget, seed=s, confidence=confidence))]
    if not chosen:
        return None
    runs = [plain_audit(z, budget=budget, seed=s, confidence=confidence, workers=workers, records=records)
            for s in chosen]
    seeds = len(chosen)
    out = {"budget": budget.name, "seeds": seeds, "seed_list": chosen, "caught": sum(r["caught"] for r in runs),
           "consistent": sum(r["consistent"] for r in runs),
           "epsilon_lower": [r["epsilon_lower"] for r in runs], "events": [r["event"] for r in runs],
           "no_power": [r["no_power"] for r in runs], "cpu_seconds": [r["cpu_seconds"] for r in runs],
           "evaluation_trials": [r["evaluation_trials"] for r in runs], "runs": [r["runs"] for r in runs]}
    if z.correct:
        out["target_met"] = out["consistent"] >= math.ceil(0.95 * seeds)
        if z.name in SPARSE_VECTORS:  # a bound above 0 on every seed, from a named (non-degenerate) event
            out["target_met"] &= all(r["epsilon_lower"] > 0 and r["no_power"] is None for r in runs)
    else:
        out["target_met"] = out["caught"] == seeds
    return out


#: The issue's time target of a plain function's full audit, wall seconds.
WALL_TARGET_SECONDS = 600.0


def wall_part(z, *, budget, seeds: list[int], confidence: float, workers: int | None) -> dict:
    """The zoo entry as a plain function, one full audit per seed with ``workers``: wall and CPU seconds against
    :data:`WALL_TARGET_SECONDS`, and the verdicts (the same as the plain part's on the same seeds)."""
    runs = [run_audit(z, budget=budget, seed=s, single=True, confidence=confidence, workers=workers) for s in seeds]
    return {"budget": budget.name, "workers": workers, "seeds": seeds, "seconds": [r["seconds"] for r in runs],
            "cpu_seconds": [r["cpu_seconds"] for r in runs], "epsilon_lower": [r["epsilon_lower"] for r in runs],
            "caught": [r["caught"] for r in runs], "target_seconds": WALL_TARGET_SECONDS,
            "target_met": all(r["seconds"] <= WALL_TARGET_SECONDS for r in runs)}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.table is not None:
        print_table(json.loads(args.table.read_text()))
        return 0
    parts, names, out = args.parts, args.names, args.out
    zoo = catalogue()
    quick, full, seeds, bound_trials = QUICK, FULL, args.seeds, args.bound_trials
    plain_seeds = args.plain_seeds
    thorough, matched_trials = THOROUGH, args.matched_trials
    if args.smoke:
        quick, full, seeds, bound_trials, plain_seeds = SMOKE, SMOKE, 2, 20_000, 1
        thorough, matched_trials = replace(SMOKE, min_event=THOROUGH.min_event), 20_000
    records = None
    if args.plain_records is not None and "plain" in parts:
        from dpfair_analysis.experiments.cache import RunRecords

        records = RunRecords(args.plain_records, fingerprint=kit_fingerprint)
        if not args.plain_recorded_only:
            record_plain_audits([zoo[n] for n in names], budget=full, seeds=plain_seeds,
                                confidence=args.confidence, workers=args.workers, records=records)
    rows = []
    for name in names:
        z = zoo[name]
        row = {"mechanism": name, "source": z.source, "correct": z.correct, "epsilon_claimed": z.epsilon,
               "delta": z.delta, "relation": z.relation.describe(), "true_epsilon": z.true_epsilon, "note": z.note,
               "anchors": ANCHORS.get(name, {}), "best_anchor": best_anchor(name)}
        if "quick" in parts:
            row["quick"] = run_audit(z, budget=quick, seed=0, single=args.single, confidence=args.confidence)
        if "bound" in parts:
            row["bound"] = run_audit(z, budget=full, seed=0, trials=bound_trials, single=args.single,
                                     confidence=args.confidence)
            if row["best_anchor"] is not None:
                row["bound"]["at_least_best_anchor"] = bool(row["bound"]["epsilon_lower"] >= row["best_anchor"])
        if "matched" in parts and row["best_anchor"] is not None:
            row["matched"] = run_audit(z, budget=thorough, seed=0, trials=matched_trials, single=args.single,
                                       confidence=ANCHOR_CONFIDENCE)
            row["matched"]["at_least_best_anchor"] = bool(row["matched"]["epsilon_lower"] >= row["best_anchor"])
        if "consistency" in parts and z.correct:
            runs = [run_audit(z, budget=quick, seed=s, single=args.single, confidence=args.confidence)
                    for s in range(1, seeds + 1)]
            row["consistency"] = {"seeds": seeds, "consistent": sum(r["consistent"] for r in runs),
                                  "epsilon_lower": [r["epsilon_lower"] for r in runs],
                                  "seconds": sum(r["seconds"] for r in runs)}
        if "plain" in parts:
            plain = plain_part(z, budget=full, seeds=plain_seeds, confidence=args.confidence, workers=args.workers,
                               records=records, recorded_only=args.plain_recorded_only)
            if plain is not None:
                row["plain"] = plain
        if "wall" in parts:
            row["wall"] = wall_part(z, budget=full, seeds=[0] if args.smoke else args.wall_seeds,
                                    confidence=args.confidence, workers=args.workers)
        rows.append(row)
        print(summary_line(row), flush=True)
    settings = {"parts": parts, "seeds": seeds, "bound_trials": bound_trials, "smoke": args.smoke,
                "matched_trials": matched_trials, "matched_budget": asdict(thorough),
                "matched_confidence": ANCHOR_CONFIDENCE,
                "interface": "single" if args.single else "batched", "confidence": args.confidence,
                "quick_budget": asdict(quick), "full_budget": asdict(full), "plain_seeds": plain_seeds,
                "workers": args.workers, "wall_seeds": args.wall_seeds,
                "python": sys.version.split()[0], "machine": platform.machine(),
                "cpus": os.cpu_count(), "anchor_source": SOURCE}
    payload = {"settings": settings, "rows": rows}
    if args.update is not None:
        payload = merge(json.loads(args.update.read_text()), payload, parts)
    if args.spread:
        payload["anchor_spread"] = anchor_event_spread(trials=matched_trials, replicates=2_000 if args.smoke
                                                       else 20_000)
    write_atomically(out, lambda tmp: tmp.write_text(json.dumps(payload, indent=1, default=_json)))
    print_table(payload)
    print(f"wrote {out}")
    return 0


def merge(earlier: dict, now: dict, parts: list[str]) -> dict:
    """``earlier`` with the ``parts`` of ``now``'s rows put in (by mechanism); the settings of each part say which
    run produced it (``settings["runs"]``)."""
    rows = {r["mechanism"]: r for r in earlier["rows"]}
    for row in now["rows"]:
        target = rows.setdefault(row["mechanism"], {k: v for k, v in row.items() if k not in PARTS})
        for part in parts:
            if part in row:
                target[part] = row[part]
    for row in rows.values():  # every row judged against the anchors as this script lists them
        row["anchors"], row["best_anchor"] = ANCHORS.get(row["mechanism"], {}), best_anchor(row["mechanism"])
        for part in ("bound", "matched"):
            if part in row and row["best_anchor"] is not None:
                row[part]["at_least_best_anchor"] = bool(row[part]["epsilon_lower"] >= row["best_anchor"])
    runs = earlier["settings"].get("runs", {part: earlier["settings"] for part in earlier["settings"]["parts"]})
    runs.update({part: now["settings"] for part in parts})
    settings = {**earlier["settings"], "parts": sorted(set(earlier["settings"]["parts"]) | set(parts)), "runs": runs}
    return {**{k: v for k, v in earlier.items() if k not in ("settings", "rows")}, "settings": settings,
            "rows": list(rows.values())}


def _json(value):
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return str(value)


def summary_line(row: dict) -> str:
    parts = [f"{row['mechanism']:<20}"]
    if "quick" in row:
        q = row["quick"]
        parts.append(f"quick ε≥{q['epsilon_lower']:.4f} {'CAUGHT' if q['caught'] else 'ok':<6} {q['seconds']:6.1f}s")
    if "bound" in row:
        parts.append(f"bound ε≥{row['bound']['epsilon_lower']:.4f} ({row['bound']['seconds']:.0f}s)")
    if "matched" in row:
        parts.append(f"matched ε≥{row['matched']['epsilon_lower']:.4f} ({row['matched']['seconds']:.0f}s)")
    if "consistency" in row:
        c = row["consistency"]
        parts.append(f"consistent {c['consistent']}/{c['seeds']}")
    if "plain" in row:
        c = row["plain"]
        parts.append(f"plain ε≥{min(c['epsilon_lower']):.4f}..{max(c['epsilon_lower']):.4f} caught {c['caught']}/"
                     f"{c['seeds']} {np.mean(c['cpu_seconds']):.0f} CPU-s {'met' if c['target_met'] else 'MISSED'}")
    if "wall" in row:
        w = row["wall"]
        parts.append(f"wall {', '.join(f'{t:.0f}' for t in w['seconds'])} s with {w['workers'] or 'no'} workers "
                     f"(seeds {', '.join(map(str, w['seeds']))}; {'met' if w['target_met'] else 'OVER'} "
                     f"{w['target_seconds']:.0f} s)")
    return "  ".join(parts)


def print_table(payload: dict) -> None:
    print(f"{'mechanism':<20} {'claim':>6} {'ok?':>4} {'quick ε≥':>9} {'caught':>6} {'sec':>6} {'bound ε≥':>9} "
          f"{'matched':>9} {'DP-Sniper':>9} {'StatDP':>7} {'≥anchor':>7} {'consistent':>10}")
    for r in payload["rows"]:
        a = r.get("anchors", {})
        q, b, c, m = r.get("quick"), r.get("bound"), r.get("consistency"), r.get("matched")
        sniper, statdp = _published(a, ("dpsniper_reg", "dpsniper_mlp")), _published(a, ("statdp_1", "statdp_2"))
        print(f"{r['mechanism']:<20} {r['epsilon_claimed']:>6.3f} {'yes' if r['correct'] else 'NO':>4} "
              f"{_f(q and q['epsilon_lower']):>9} {('yes' if q['caught'] else 'no') if q else '-':>6} "
              f"{_f(q and q['seconds'], 1):>6} {_f(b and b['epsilon_lower']):>9} {_f(m and m['epsilon_lower']):>9} "
              f"{_f(sniper):>9} {_f(statdp):>7} {_at_least(m or b):>7} "
              f"{(str(c['consistent']) + '/' + str(c['seeds'])) if c else '-':>10}")
    plain = [r for r in payload["rows"] if "plain" in r]
    if plain:
        print_plain_table(plain)
    if payload.get("anchor_spread"):
        print("\nthe anchors' own events, the best ones and the kit's replayed "
              "(bound at the matched part's runs and confidence):")
        print(f"{'event':<30} {'published':>10} {'median':>9} {'5-95%':>19} {'quantile':>8}")
        for label, e in payload["anchor_spread"].items():
            print(f"{label:<30} {e['published']:>10.6f} {e['median']:>9.6f} "
                  f"{e['p5']:>9.6f}-{e['p95']:<9.6f} {e['published_quantile']:>8.2f}")


def _published(anchors: dict, names: tuple[str, str]) -> float | None:
    return max([v for v in (anchors.get(names[0]), anchors.get(names[1])) if v is not None], default=None)


def print_plain_table(rows: list[dict]) -> None:
    """The plain part: per mechanism the median bound over the seeds, the verdicts, CPU seconds per audit, the
    anchors' published bounds and the first seed's event."""
    print(f"\nplain functions (one output per call), {rows[0]['plain'].get('budget', 'full')} budget:")
    print(f"{'mechanism':<20} {'claim':>6} {'ok?':>4} {'median ε≥':>9} {'min ε≥':>7} {'verdicts':>16} "
          f"{'CPU-s':>6} {'DP-Sniper':>9} {'StatDP':>7} {'target':>6}  event (seed 0)")
    for r in rows:
        c, a = r["plain"], r.get("anchors", {})
        verdict = (f"{c['consistent']}/{c['seeds']} consistent" if r["correct"]
                   else f"{c['caught']}/{c['seeds']} caught")
        print(f"{r['mechanism']:<20} {r['epsilon_claimed']:>6.3f} {'yes' if r['correct'] else 'NO':>4} "
              f"{float(np.median(c['epsilon_lower'])):>9.4f} {min(c['epsilon_lower']):>7.4f} {verdict:>16} "
              f"{float(np.mean(c['cpu_seconds'])):>6.0f} {_f(_published(a, ('dpsniper_reg', 'dpsniper_mlp'))):>9} "
              f"{_f(_published(a, ('statdp_1', 'statdp_2'))):>7} {'met' if c['target_met'] else 'MISSED':>6}  "
              f"{c['events'][0]}")


def _at_least(part: dict | None) -> str:
    """Whether the part's bound reaches the best anchor ('-': no anchor on this instance)."""
    if not part or "at_least_best_anchor" not in part:
        return "-"
    return "yes" if part["at_least_best_anchor"] else "no"


def _f(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


if __name__ == "__main__":
    sys.exit(main())
