"""``dpfair audit``: empirical privacy audits (epsilon lower bounds) of the shipped mechanisms, or of any
mechanism in a Python file (``--target``), on the public kit :mod:`dpfair_analysis.testing`.

Heavy imports (torch, scipy, dp_accounting, the kit's audits) happen inside the handlers, so that
``dpfair --help`` and the other commands do not pay for them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpfair_analysis.cli._common import (
    UsageError,
    _number,
    int_in,
    nonnegative_float,
    positive_float,
    print_json,
    seed_value,
    show_progress,
    unit_open,
)
from dpfair_analysis.names import KIT_BUDGETS

#: ``--delta`` of a claim: 0 (pure DP) or a failure probability below 1.
_delta = _number(lambda v: 0 <= v < 1, "a number in [0, 1)")

RELATIONS = ("add-remove", "replace-one", "attribute-change", "queries")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="empirical privacy audit: 95%% lower bound on epsilon vs the claimed epsilon",
                       description="Run a private mechanism many times on neighbouring data sets, test which one was "
                                   "used and turn the error rates into a one-sided lower bound on epsilon "
                                   "(Clopper-Pearson; Nasr et al. 2021). A bound above the claimed epsilon means the "
                                   "implementation or its accounting is broken. Either a shipped mechanism "
                                   "(--mechanism, white-box likelihood-ratio statistic on a worst-case pair) or "
                                   "your own (--target FILE.py:FUNCTION, a function fn(data, rng) returning a number "
                                   "or numpy array; the kit searches neighbouring pairs, statistics and thresholds, "
                                   "and the confidence holds over the whole search).",
                       epilog="exit status: 0 consistent (every shipped mechanism as expected); 1 refuted (or a "
                              "control not caught); 2 bad input or a broken mechanism -- with --target, the file "
                              "or function cannot be used, or the code raised, called sys.exit or os._exit, "
                              "crashed, returned NaN or complex numbers, wrote to its input data, ran out of "
                              "memory or out of --time-budget (its import included); 3 internal error; 4 no "
                              "power: the audit could not have refuted this claim (the claim at or above the "
                              "largest epsilon the runs can certify, or no test with power: raise --trials or "
                              "--budget). With --target the audit runs in a process of its own and whatever the "
                              "code prints goes to stderr, so neither its output nor its exit can be read as the "
                              "verdict; the code is not sandboxed against deliberate tampering (see the guide).")
    p.add_argument("--mechanism", default=None,
                   help="a registered mechanism (dpsgd, naive, dpsgdf, output-perturbation, ...) or 'all'")
    p.add_argument("--target", default=None, metavar="FILE.py:FUNCTION",
                   help="audit your own mechanism: FUNCTION(data, rng) in FILE.py. The file is IMPORTED AND EXECUTED "
                        "(only the file you name here); rng is a numpy Generator the kit seeds")
    p.add_argument("--pair", default=None, metavar="FILE.py:FUNCTION",
                   help="with --target: FUNCTION() returns the neighbouring pair (D, D') to audit (the file is "
                        "executed); default: the kit searches pairs around --data")
    p.add_argument("--epsilon", type=nonnegative_float, default=None, help="with --target: the claimed epsilon")
    p.add_argument("--delta", type=_delta, default=0.0,
                   help="with --target: the claimed delta in [0, 1) (default 0: pure DP)")
    p.add_argument("--relation", default=None, choices=RELATIONS,
                   help="with --target: the neighbouring relation of the claim")
    p.add_argument("--sensitivity", type=positive_float, default=1.0,
                   help="with --relation queries: Delta, how far an entry may move (default 1)")
    p.add_argument("--query-mode", default="every", choices=("every", "one"),
                   help="with --relation queries: every entry moves by <= Delta (default) or one entry does")
    p.add_argument("--data", default=None, metavar="FILE.npy|FILE.csv",
                   help="with --target: the base data set whose neighbours are searched (records along axis 0; a "
                        "CSV whose first row names the columns is a dict of columns, e.g. group,y; default: the "
                        "kit's default for the relation)")
    p.add_argument("--batched", action="store_true",
                   help="with --target: FUNCTION(data, rng, n) returns n outputs at once (faster, more runs)")
    p.add_argument("--budget", default="quick", choices=KIT_BUDGETS,
                   help="with --target: runs per phase of the search (default quick; smoke only checks that the "
                        "audit runs; full and thorough take minutes)")
    p.add_argument("--time-budget", type=positive_float, default=600.0,
                   help="with --target: seconds the code under test may run in total -- the import of its file, "
                        "--pair and every call -- before the audit stops with status 2 (default 600)")
    p.add_argument("--workers", type=int_in(1, 256), default=None,
                   help="with --target: draw the runs in this many worker processes (each chunk of runs from a seed "
                        "of its own: the same numbers for every count, none included; default: this process); the "
                        "full budget runs a plain function ~17 M times")
    p.add_argument("--trials", type=int_in(1, 100_000_000), default=None,
                   help="runs on each of the two data sets (default: the mechanism's own, enough to catch a "
                        "0.25 under-noised twin; with --target: the budget's evaluation runs); at least 8 (10 with "
                        "--target)")
    p.add_argument("--seed", type=seed_value, default=0, help="seed of every draw (default 0)")
    p.add_argument("--noise-fraction", type=unit_open_or_one, default=1.0,
                   help="run the mechanism with its noise scaled by this fraction in (0, 1] while claiming the "
                        "same epsilon (default 1: the mechanism as shipped; e.g. 0.25 must be caught)")
    p.add_argument("--confidence", type=unit_open, default=0.95, help="confidence of the bound (default 0.95)")
    p.add_argument("--sampled", action="store_true",
                   help="audit the trainers as they run (Poisson sampling q < 1, every step, the model after every "
                        "step and every public release seen): shipped mechanisms dpsgd, naive, dpsgdf, "
                        "mitigation, pfld, output-perturbation, optq, fairdp, dpfedavg (user level); controls "
                        "pfld-primal-shared-batch and each under-noised twin NAME@0.25, "
                        "which must be caught. Exit 1 if a shipped one is inconsistent or a control is not caught")
    p.add_argument("--json", action="store_true",
                   help="print JSON instead of the table (with --target: verdict -- consistent, refuted or no "
                        "power --, epsilon_lower, confidence, consistent, witness, trials, seconds, power, "
                        "certifiable_epsilon, no_power)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=run)


def unit_open_or_one(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def run(args: argparse.Namespace) -> int | None:
    if (args.mechanism is None) == (args.target is None):
        raise UsageError("give exactly one of --mechanism (a shipped mechanism, or 'all') and "
                         "--target FILE.py:FUNCTION")
    if args.target is not None:
        return run_target(args)
    for flag in ("pair", "epsilon", "relation", "data", "workers"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag} applies only with --target")
    _check_mechanism_name(args.mechanism, sampled=args.sampled)
    if args.sampled:
        return run_sampled(args)
    if args.trials is not None and args.trials < 8:  # refused before the audits' heavy imports
        raise UsageError(f"--trials must be at least 8 (half choose the threshold, half bound epsilon), "
                         f"got {args.trials}")
    from dpfair_analysis.verify.audits import MECHANISMS, audit, mechanism_row

    names = list(MECHANISMS) if args.mechanism == "all" else [args.mechanism]
    if args.mechanism != "all" and args.mechanism not in MECHANISMS:
        raise UsageError(f"--mechanism must be one of {sorted(MECHANISMS) + ['all']}, got {args.mechanism!r}")
    results = [audit(name, trials=args.trials, seed=args.seed, noise_fraction=args.noise_fraction,
                     confidence=args.confidence, progress=show_progress(args)) for name in names]
    as_expected = all(MECHANISMS[r.mechanism].as_expected(r) for r in results)
    for r in results:
        if not MECHANISMS[r.mechanism].as_expected(r):
            _say_unexpected(r.mechanism, control=r.noise_fraction < 1 or MECHANISMS[r.mechanism].control,
                            lower=r.epsilon_lower, claimed=r.epsilon_claimed)
    powerless = [r for r in results if r.consistent and r.no_power]
    for r in powerless:
        print(f"dpfair: audit: {r.mechanism}: NO POWER: {r.no_power}", file=sys.stderr)
    status = 1 if not as_expected else 4 if powerless else 0
    if args.json:
        print_json({"results": [mechanism_row(r) for r in results]})
        return status
    print(f"{'mechanism':<22} {'claimed ε':>10} {'audited ε ≥':>12} {'trials':>8}  consistent")
    for r in results:
        print(f"{r.mechanism:<22} {r.epsilon_claimed:>10.3f} {r.epsilon_lower:>12.3f} {r.trials // 2:>8d}  "
              f"{'NO' if not r.consistent else 'NO POWER' if r.no_power else 'yes'}")
    for r in results:
        if not MECHANISMS[r.mechanism].expected_consistent:
            print(f"{r.mechanism}: audits a published claim that is refuted; NO is the expected answer")
    first = results[0]
    print(f"(δ = {first.delta:g}, one-sided {first.confidence:.0%} Clopper-Pearson bound; noise fraction "
          f"{args.noise_fraction:g}{' — an under-noised twin' if args.noise_fraction < 1 else ''})")
    return status


def _check_mechanism_name(mechanism: str, *, sampled: bool) -> None:
    """--mechanism names a registered audit (or 'all'), checked against the static table of names
    (:mod:`dpfair_analysis.names`) so that an unknown name is refused before the audits -- and torch -- are
    imported. A program that registered an audit of its own (it imported the registry to do so) or a training
    method (audited as it runs) is checked against the live registry instead."""
    from dpfair_analysis import names
    from dpfair_analysis.training import methods

    if mechanism == "all":
        return
    if sampled:
        if "dpfair_analysis.verify.audits.trainers" in sys.modules or methods.names() != names.METHODS:
            from dpfair_analysis.verify.audits import trainers

            allowed = list(trainers.sampled_audits())
        else:
            allowed = list(names.SAMPLED_AUDITS)
    else:
        registry = sys.modules.get("dpfair_analysis.verify.audits.registry")
        allowed = list(registry.MECHANISMS) if registry is not None else list(names.AUDIT_MECHANISMS)
    if mechanism not in allowed:
        raise UsageError(f"--mechanism{' with --sampled' if sampled else ''} must be one of "
                         f"{sorted(allowed) + ['all']}, got {mechanism!r}")


def _say_unexpected(mechanism: str, *, control: bool, lower: float, claimed: float) -> None:
    """One line on stderr for an audit that did not come out as it must (the exit status is 1 as well): a
    control the audit did not catch (no power at these trials), or a shipped mechanism found inconsistent."""
    if control:
        what = (f"control not caught: audited ε ≥ {lower:.3f} does not exceed the claimed {claimed:.3f}, so the "
                "audit had no power here (raise --trials)")
    else:
        what = (f"INCONSISTENT with its claim: audited ε ≥ {lower:.3f} exceeds the claimed {claimed:.3f} -- a "
                "privacy bug, or an unlucky draw at the stated confidence")
    print(f"dpfair: audit: {mechanism}: {what}", file=sys.stderr)


def run_sampled(args: argparse.Namespace) -> int:
    """The trainers audited as they run; exit status 1 unless every shipped entry is
    consistent and every control is caught."""
    if args.trials is not None and args.trials < 8:  # refused before the audits' heavy imports
        raise UsageError(f"--trials must be at least 8 (half choose the threshold, half bound epsilon), "
                         f"got {args.trials}")
    if args.noise_fraction != 1.0:
        raise UsageError("--noise-fraction does not apply with --sampled: the under-noised twins are the "
                         "entries NAME@0.25")
    from dpfair_analysis.verify.audits import trainers

    entries = trainers.sampled_audits()  # the registry's methods now, a method registered since import included
    if args.mechanism != "all" and args.mechanism not in entries:
        raise UsageError(f"--mechanism with --sampled must be one of {sorted(entries) + ['all']}, "
                         f"got {args.mechanism!r}")
    names = list(entries) if args.mechanism == "all" else [args.mechanism]
    results = [trainers.audit_sampled(name, trials=args.trials, seed=args.seed, confidence=args.confidence,
                                      progress=show_progress(args)) for name in names]
    for r in results:
        if not r["as_expected"]:
            _say_unexpected(r["mechanism"], control=r["control"], lower=r["epsilon_lower"],
                            claimed=r["epsilon_claimed"])
    if args.json:
        print_json({"results": results})
    else:
        print(f"{'mechanism':<26} {'control':>7} {'q':>6} {'steps':>5} {'claimed ε':>10} {'audited ε ≥':>12} "
              f"{'trials':>7}  verdict")
        for r in results:
            verdict = ("caught" if not r["consistent"] else "NOT CAUGHT") if r["control"] else (
                "consistent" if r["consistent"] else "INCONSISTENT")
            print(f"{r['mechanism']:<26} {'yes' if r['control'] else 'no':>7} {r['sampling_rate']:>6.3f} "
                  f"{r['steps']:>5d} {r['epsilon_claimed']:>10.3f} {r['epsilon_lower']:>12.3f} {r['trials']:>7d}  "
                  f"{verdict}")
        print(f"(δ = {results[0]['delta']:g}, one-sided {args.confidence:.0%} Clopper-Pearson bound)")
    return 0 if all(r["as_expected"] for r in results) else 1


# ------------------------------------------------------------------ --target: any mechanism
def _load_data(text: str):
    """--data: a .npy array, or a .csv file -- a dict of columns when its first row names them, else an array.

    Only records of finite numbers are audited: an empty file, a file without records, text where a number
    belongs, NaN or an infinity is refused naming --data and what is wrong; a .npy file that holds Python objects
    (or is no .npy file) is refused and never unpickled."""
    import warnings

    import numpy as np

    path = Path(text)
    if not path.is_file():
        raise UsageError(f"--data: {text!r} is not a file")
    if path.suffix not in (".npy", ".csv"):
        raise UsageError(f"--data must be a .npy or .csv file, got {text!r}")
    if path.stat().st_size == 0:
        raise UsageError(f"--data: {text} is empty; give the records along axis 0 (a numeric .npy array or CSV rows)")
    try:
        if path.suffix == ".npy":
            data = np.load(path, allow_pickle=False)
        else:
            first = path.read_text().splitlines()[0].split(",")
            with warnings.catch_warnings():  # a file without rows is said below, not by numpy's warning
                warnings.simplefilter("ignore", UserWarning)
                if not all(_is_number(cell) for cell in first):
                    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
                    if table.size and table.shape[1] != len(first):
                        raise ValueError(f"the header names {len(first)} columns, the rows have {table.shape[1]}")
                    data = {name.strip(): column for name, column in zip(first, table.T)} if table.size else {}
                else:
                    data = np.loadtxt(path, delimiter=",", ndmin=1)
    except (ValueError, IndexError, EOFError, OSError) as error:
        raise UsageError(f"--data: cannot read {text}: {_unreadable(error)}") from None
    if not isinstance(data, dict) and data.ndim == 0:
        raise UsageError(f"--data: {text} holds one number (a 0-d array), not records; save the records along axis 0 "
                         f"(numpy.save(FILE, numpy.array([...])))")
    columns = data if isinstance(data, dict) else {"": data}
    if not columns or any(column.size == 0 for column in columns.values()):
        raise UsageError(f"--data: {text} has no records (the audit needs at least one row of numbers)")
    for name, column in columns.items():
        where = f"column {name!r}" if name else "the records"
        if column.dtype.kind not in "biuf":
            raise UsageError(f"--data: {text}: {where} holds {column.dtype} values, not numbers (the audit needs "
                             "integers or floats)")
        bad = np.argwhere(~np.isfinite(column))
        if len(bad):
            first_bad = tuple(int(i) for i in bad[0])
            value = "NaN" if np.isnan(column[first_bad]) else "an infinity"
            at = f"record {first_bad[0]}" + (f", index {first_bad[1:]}" if len(first_bad) > 1 else "")
            raise UsageError(f"--data: {text}: {where} holds {value} ({len(bad)} non-finite value(s), the first at "
                             f"{at}); the audit needs finite numbers: remove or replace them")
    if isinstance(data, dict):
        return {name: (column.astype(np.int64) if np.all(column == np.round(column)) else column)
                for name, column in data.items()}
    return data


def _unreadable(error: BaseException) -> str:
    """Why --data could not be read, in words for this command: numpy's advice to load a file holding Python
    objects "unsafely" (unpickling runs code stored in it) is replaced by what the file must be."""
    message = " ".join(str(error).split())
    if "pickle" in message or isinstance(error, EOFError):
        return ("it is not a numeric .npy array (it holds Python objects, or is no .npy file at all); save the "
                "records with numpy.save(FILE, array) of an array of numbers")
    if "could not convert" in message:
        return f"text where a number belongs ({message})"
    return message or type(error).__name__


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def run_target(args: argparse.Namespace) -> int:
    """Audit FUNCTION of FILE.py against the claim in a child process (:mod:`dpfair_analysis.testing.isolation`:
    whatever the file does by accident -- exit, print, hang, crash -- the status is decided here, and a result
    inconsistent with itself is an internal error; deliberate tampering is out of scope); print the result after
    the child has ended. Exit status: 0 consistent, 1 refuted, 2 bad input or a broken mechanism, 3 internal error,
    4 no power (consistent, but the audit could not have refuted the claim: ``AuditResult.no_power``)."""
    for flag in ("epsilon", "relation"):
        if getattr(args, flag) is None:
            raise UsageError(f"--target needs --{flag}")
    if args.sampled or args.noise_fraction != 1.0:
        raise UsageError("--sampled and --noise-fraction apply to --mechanism, not --target")
    if args.trials is not None and args.trials < 10:
        raise UsageError(f"--trials must be at least 10 with --target, got {args.trials}")
    from dpfair_analysis.testing.isolation import audit_file
    from dpfair_analysis.testing.relations import QueryVector, make_relation

    relation = (QueryVector(sensitivity=args.sensitivity, mode=args.query_mode) if args.relation == "queries"
                else make_relation(args.relation))
    data = _load_data(args.data) if args.data is not None else None
    result = audit_file(args.target, args.epsilon, args.delta, pair=args.pair, relation=relation, data=data,
                        budget=args.budget, trials=args.trials, confidence=args.confidence, seed=args.seed,
                        batched=args.batched, time_budget=args.time_budget, workers=args.workers)
    if args.json:
        print_json(result.summary())
    else:
        w = result.witness
        print(f"{args.target}: claimed ε = {result.epsilon_claimed:g}, δ = {result.delta:g} under {result.relation}")
        print(f"audited ε ≥ {result.epsilon_lower:.4f} with confidence {result.confidence:g} -> "
              f"{ {'consistent': 'consistent', 'refuted': 'REFUTED', 'no power': 'NO POWER'}[result.verdict]}")
        print(f"witness: pair {w['pair']} ({w['change']}), event {w['event']}; {w['false_positives']} false "
              f"positives and {w['false_negatives']} false negatives in {result.evaluation_trials} runs per side")
        print(f"{result.trials} runs, {result.seconds:.1f} s, {result.candidates} candidate pairs")
        if result.no_power:
            print(f"NO POWER: {result.no_power} (largest certifiable ε with these runs: "
                  f"{result.certifiable_epsilon:.4g})")
    if result.verdict == "no power":
        print(f"dpfair: audit: no power: the audit could not have refuted the claim (largest certifiable ε "
              f"{result.certifiable_epsilon:.4g}); exit status 4", file=sys.stderr)
    return {"consistent": 0, "refuted": 1, "no power": 4}[result.verdict]
