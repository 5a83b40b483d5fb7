"""Compute the long runs of a reproduction and record each as it finishes.

    .venv/bin/python notebooks/record_runs.py [--study figures|mnist-tuning] [--profile full|quick]
                                              [--records PATH] [--jobs N] [--max-runs K] [--from-end]
                                              [--stop-by HH:MM [--run-minutes M]]
    .venv/bin/python notebooks/record_runs.py --study pfld-tuned --data income|bank|m-bank3|m-bank5|compas
                                              [--profile full|quick] [--records PATH] [--max-runs K]
    .venv/bin/python notebooks/record_runs.py --summary [--study ...] [--data ...] [--records PATH]

Three studies: ``figures`` (the default), the runs of ``fairdp_mnist_figures`` (paper 002's MNIST Figures 4-6);
``mnist-tuning``, the runs of ``fairdp_mnist_tuning`` (the reproduction protocol's MNIST study: every method of
papers 000 and 002 on the learning rate x batch sampling grid, trained without the validation rows,
:mod:`dpfair_analysis.experiments.mnist_tuning`), recorded in ``paper_figs/fairdp/mnist_tuning_runs.json``, run in
:func:`~dpfair_analysis.experiments.mnist_tuning.mnist_tuning_plan`'s order (DPSGD and DPSGD-F first);
``pfld-tuned``, paper 003's Table 2 of one data set under the reproduction protocol
(:func:`~dpfair_analysis.experiments.pfld_tuned.tuned_table2`, what ``dpfair pfld-table --tune`` prints: 1,170
runs per data set at the full profile), recorded in ``paper_figs/pfld/tuned_runs_<data>.json`` one run at a time
in :func:`~dpfair_analysis.experiments.pfld_tuned.plan`'s order (PF-LD and CLF under every constraint first; of
each, the printed configuration's folds, then fold by fold the 16 configurations and the refit of the chosen one),
then built from that file alone on any machine::

    nice -n 10 .venv/bin/python notebooks/record_runs.py --study pfld-tuned --data income &
    dpfair pfld-table --data income --tune --json --records paper_figs/pfld/tuned_runs_income.json

``--summary`` of the ``pfld-tuned`` study says, per method, how many of its runs are recorded, the median CPU
seconds of a recorded run and the CPU hours the rest will take at that median.

The full profile is 64 runs of a 60-epoch CNN on full MNIST, ~29 CPU-hours: longer than one of our
machines lives, and the run cache (``$DPFAIR_CACHE``) goes with the machine. Executing the notebook
computes missing runs too, but records a swept value's runs only once all of its methods are done.
This script computes them ``--jobs`` at a time (one torch thread each), the most informative points
first (:data:`POINTS`), and writes each run's rows to the records file
(:class:`~dpfair_analysis.experiments.cache.RunRecords`, default
``paper_figs/fairdp/mnist_runs.json`` for the full profile) the moment it finishes, so a machine that
stops loses only the runs in flight. Recorded runs are skipped; commit the records file as it grows, and
execute the notebook in place (``notebooks/execute.py fairdp_mnist_figures --profile full --in-place``)
once every run is recorded: it then trains nothing.

``--stop-by HH:MM`` (the machine's local time, today or, if that has passed, tomorrow): a worker starts no run that
would end after then if it took ``--run-minutes`` (default 60, a full-MNIST run beside two other jobs on this
machine); such runs stay pending for the next recorder. A machine that is known to stop (a session's end) then
spends its last hour on runs that finish rather than on one that is lost.

``--summary`` prints what is recorded (one line per record: the figures' groups, ε, FairDP's bounds) and
computes nothing.

Workers compute and cache a run (:func:`~dpfair_analysis.experiments.fairdp.sweep` of one method, no
records); this process then records it through the same functions the notebook calls, from the cache.
"""

from __future__ import annotations

import datetime
import math
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dpfair_analysis.cli._common import ScriptParser  # noqa: E402

#: ``--profile``: the notebooks' profiles (``experiments.fairdp.PROFILES``, checked below)
PROFILES = ("quick", "full")
#: ``--data`` of the pfld-tuned study -> (data set, grouping) of :func:`~pfld_tuned.tuned_table2`
PFLD_TABLES = {"income": ("income", None), "bank": ("bank", None), "m-bank3": ("bank", "age3"),
               "m-bank5": ("bank", "age5"), "compas": ("compas", None)}


def build_parser() -> ScriptParser:
    """The command line (argparse only: nothing heavy is imported to build it)."""
    parser = ScriptParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=("figures", "mnist-tuning", "pfld-tuned"), default="figures",
                        help="which runs (default figures: fairdp_mnist_figures; pfld-tuned: dpfair pfld-table "
                             "--tune of --data)")
    parser.add_argument("--data", choices=tuple(PFLD_TABLES), default=None,
                        help="the pfld-tuned study's data set (Table 2's Income, Bank, M-Bank3, M-Bank5, COMPAS)")
    parser.add_argument("--profile", choices=PROFILES, default="full")
    parser.add_argument("--records", type=Path, default=None,
                        help="the records file (default paper_figs/fairdp/mnist_runs.json, or "
                             "mnist_tuning_runs.json for --study mnist-tuning, or paper_figs/pfld/"
                             "tuned_runs_<data>.json for pfld-tuned; quick: under build/)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="runs at a time (default 2; the pfld-tuned study runs one at a time)")
    parser.add_argument("--max-runs", type=int, default=None, help="stop after this many runs")
    parser.add_argument("--from-end", action="store_true",
                        help="take the pending runs from the end of the plan: a second recorder on another core, "
                             "beside one in plan order (same records file and run cache: a run either records is "
                             "served to the other, not trained again)")
    parser.add_argument("--stop-by", default=None, metavar="HH:MM",
                        help="mnist-tuning: start no run that would end after this local time (next occurrence) if it "
                             "took --run-minutes; those runs stay pending")
    parser.add_argument("--run-minutes", type=float, default=60.0,
                        help="with --stop-by: the minutes a run is assumed to take (default 60)")
    parser.add_argument("--summary", action="store_true", help="print the recorded runs and compute nothing")
    return parser


def command_line_error(args) -> str | None:
    """What is wrong with a parsed command line, as one line; None if nothing."""
    if args.stop_by is not None and not (re.fullmatch(r"([01]?\d|2[0-3]):[0-5]\d", args.stop_by)
                                         and args.study == "mnist-tuning"):
        return (f"--stop-by is a time HH:MM (00:00 to 23:59) for --study mnist-tuning, got {args.stop_by!r} with "
                f"--study {args.study}")
    if not (math.isfinite(args.run_minutes) and args.run_minutes > 0):
        return f"--run-minutes must be a positive number, got {args.run_minutes}"
    for flag, value in (("--jobs", args.jobs), ("--max-runs", args.max_runs)):
        if value is not None and value < 1:
            return f"{flag} must be a positive integer, got {value}"
    pfld_study = args.study == "pfld-tuned"
    return ("--data is required with --study pfld-tuned" if pfld_study and args.data is None else
            f"--data is for --study pfld-tuned, got --study {args.study}" if args.data and not pfld_study else
            f"--jobs: the pfld-tuned study records one run at a time, got {args.jobs}"
            if pfld_study and (args.jobs or 1) > 1 else None)


def refuse(wrong: str) -> int:
    """A bad command line: one line on stderr, status 2."""
    print(f"record_runs.py: {wrong}", file=sys.stderr)
    return 2


if __name__ == "__main__" and (wrong := command_line_error(build_parser().parse_args())):
    sys.exit(refuse(wrong))  # before the imports below (pandas, torch: seconds)

from dpfair_analysis.experiments import fairdp as paper  # noqa: E402
from dpfair_analysis.experiments import mnist_tuning, pfld_tuned, tuning  # noqa: E402
from dpfair_analysis.experiments.cache import (  # noqa: E402
    RunCache, RunRecords, code_fingerprint, config_key, default_cache_dir)
from dpfair_analysis.experiments.compare import load_data, run_keys  # noqa: E402

assert paper.PROFILES == PROFILES

#: (parameter, value, FairDP's excess cap R or None for the preset's), most informative first: the preset's
#: point (shared by the three figures), then the learning rates and batch sizes of Figures 4-5, then Figure 6's
#: noise multipliers, then the notebook's R = 50 diagnostic at sigma = 2
POINTS = ([("lr", 0.01, None), ("batch_size", 256, None), ("lr", 0.05, None), ("batch_size", 512, None),
           ("batch_size", 64, None), ("lr", 0.1, None), ("lr", 0.005, None), ("batch_size", 128, None)]
          + [("noise_multiplier", sigma, None) for sigma in paper.SWEEPS["noise_multiplier"]["mnist"]]
          + [("noise_multiplier", 2.0, 50.0)])


def kinds(method: str, cap: float | None) -> tuple[str, ...]:
    """What the notebook records of a run: its sweep rows (the figures' points; not for the R = 50 diagnostic,
    which no figure draws) and, for FairDP, its bound summary."""
    return (() if cap is not None else ("sweep rows",)) + (("fairdp bounds",) if method == "fairdp" else ())


def pending(profile: str, records: RunRecords) -> list[tuple[str, float, str, float | None]]:
    """(parameter, value, method, cap) of every run of :data:`POINTS` not yet fully recorded, each run once
    (points share runs: the preset's runs are every sweep's), in :data:`POINTS` order."""
    base = paper.preset("mnist", profile, seeds=1)
    todo, seen, loaded = [], set(), {}
    for parameter, value, cap in POINTS:
        start = base if cap is None else base.with_options("fairdp", excess_cap=cap)
        methods = paper.PAPER002_METHODS if cap is None else ("fairdp",)
        config = replace(paper.sweep_config(start, parameter, value, profile=profile), methods=methods)
        data = (config.dataset, repr(sorted(config.data_options.items())), config.test_split)
        if data not in loaded:  # every point is the same data set: loaded once, not once per point
            loaded[data] = load_data(config)
        for (method, _), key in run_keys(config, data=loaded[data]).items():
            if key in seen:
                continue
            seen.add(key)
            if any(records.get(config_key(kind, key)) is None for kind in kinds(method, cap)):
                todo.append((parameter, value, method, cap))
    return todo


def compute(profile: str, parameter: str, value: float, method: str, cap: float | None) -> tuple:
    """In a worker: train one run (one torch thread) into the run cache."""
    import torch

    torch.set_num_threads(1)
    cache = RunCache(default_cache_dir())
    if cap is None:
        paper.sweep("mnist", parameter, (value,), profile=profile, seeds=1, methods=(method,), cache=cache)
    else:
        paper.fairdp_bounds_across("mnist", parameter, (value,), profile=profile, excess_cap=cap, cache=cache)
    return parameter, value, method, cap


def record(profile: str, parameter: str, value: float, method: str, cap: float | None, records: RunRecords) -> None:
    """Record one cached run as the notebook reads it."""
    cache = RunCache(default_cache_dir())
    if cap is None:
        paper.sweep("mnist", parameter, (value,), profile=profile, seeds=1, methods=(method,), cache=cache,
                    records=records)
    if method == "fairdp":
        paper.fairdp_bounds_across("mnist", parameter, (value,), profile=profile, excess_cap=cap, cache=cache,
                                   records=records)


def pending_tuning(profile: str, records: RunRecords) -> list[tuple[str, dict, int]]:
    """(method, configuration, seed) of every run of the MNIST tuning not yet recorded, in plan order."""
    base = mnist_tuning.mnist_tuning_base(profile)
    return [(method, configuration, seed) for method, configuration, seed in mnist_tuning.mnist_tuning_plan(base)
            if tuning.tuning_rows(base, method, configuration, seed, records=records, compute_missing=False,
                                  cache=None) is None]


def starts_in_time(stop_by: float | None, run_seconds: float) -> bool:
    """Whether a run started now, taking ``run_seconds``, ends by ``stop_by`` (a ``time.time()``; None: no limit)."""
    return stop_by is None or time.time() + run_seconds <= stop_by


def deadline(clock: str, now: datetime.datetime | None = None) -> float:
    """``time.time()`` of the next ``HH:MM`` in the machine's local time (today, or tomorrow if it has passed)."""
    now = now or datetime.datetime.now()
    hours, minutes = (int(part) for part in clock.split(":"))  # checked by the caller
    at = now.replace(hour=hours, minute=minutes, second=0, microsecond=0)
    return (at if at > now else at + datetime.timedelta(days=1)).timestamp()


def compute_tuning(profile: str, method: str, configuration: dict, seed: int, stop_by: float | None = None,
                   run_seconds: float = 0.0) -> tuple | None:
    """In a worker: train one tuning run (one torch thread) into the run cache; None, training nothing, if it
    would not end by ``stop_by`` (decided when the worker takes it, not when it was queued)."""
    import torch

    if not starts_in_time(stop_by, run_seconds):
        return None
    torch.set_num_threads(1)
    tuning.tuning_rows(mnist_tuning.mnist_tuning_base(profile), method, configuration, seed,
                       cache=RunCache(default_cache_dir()))
    return method, configuration, seed


def record_tuning(profile: str, method: str, configuration: dict, seed: int, records: RunRecords) -> dict:
    """Record one cached tuning run; its test-split rows of all, 2 and 8 and its validation accuracy."""
    rows = tuning.tuning_rows(mnist_tuning.mnist_tuning_base(profile), method, configuration, seed,
                              cache=RunCache(default_cache_dir()), records=records)
    return {(row["split"], row["group"]): row["accuracy"] for row in rows}


def tuning_summary(records: RunRecords) -> "pandas.DataFrame":
    """One row per tuning record: validation and test accuracy overall and of classes 2 and 8, epsilon."""
    import pandas as pd

    lines, fingerprint = [], code_fingerprint()
    for entry in records._entries().values():
        rows = entry["rows"]
        line = {"run": entry["label"].partition(": ")[2], "current": entry["fingerprint"] == fingerprint,
                "epsilon": rows[0]["epsilon"]}
        line |= {f"{row['split'][:3]} {row['group']}": row["accuracy"] for row in rows
                 if row["group"] in ("all", "2", "8")}
        lines.append(line)
    return pd.DataFrame(lines).sort_values("run", ignore_index=True) if lines else pd.DataFrame()


def summary(records: RunRecords) -> "pandas.DataFrame":
    """One row per record, sorted by label: test accuracy overall and of the figures' classes 2 and 8 with the
    run's ε (sweep rows), or class 2's and 8's median bound C, share of steps at the floor and mean target
    quantile γ with the run's largest bound (FairDP's bound summary); ``current`` is whether this code computed
    it (a record from other code is retrained unless ``DPFAIR_CACHE_ALLOW_STALE=1``)."""
    import pandas as pd

    lines, fingerprint = [], code_fingerprint()
    for entry in records._entries().values():  # the records file as RunRecords reads it (a damaged one is refused)
        by_group = {str(row["group"]): row for row in entry["rows"]}
        kind, _, run = entry["label"].partition(": ")
        line = {"kind": kind, "run": run, "current": entry["fingerprint"] == fingerprint}
        if kind == "sweep rows":
            line |= {f"acc {group}": by_group[group]["accuracy"] for group in ("all", "2", "8")}
            line["epsilon"] = by_group["all"]["epsilon"]
        else:
            for group in ("2", "8"):
                line |= {f"C_median {group}": by_group[group]["C_median"],
                         f"at_floor {group}": by_group[group]["at_floor"],
                         f"gamma {group}": by_group[group]["gamma_mean"]}
            line["C_max"] = by_group["2"]["C_max"]
        lines.append(line)
    return pd.DataFrame(lines, columns=["kind", "run", "current"] if not lines else None).sort_values(
        ["kind", "run"], ignore_index=True)


def pfld_runs(data: str, profile: str) -> pfld_tuned.TunedRuns:
    """The runs of ``dpfair pfld-table --data D --tune`` (every constraint, every method the paper prints for that
    table: no Z on M-Bank3 and M-Bank5) of a ``--data`` name."""
    from dpfair_analysis.experiments.pfld import paper_methods

    dataset, group_by = PFLD_TABLES[data]
    return pfld_tuned.tuned_runs(dataset, group_by=group_by, profile=profile, methods=paper_methods(data))


def pending_pfld(runs: pfld_tuned.TunedRuns, records: RunRecords) -> list[pfld_tuned.PlannedRun]:
    """The planned runs not recorded yet, in plan order (a refit whose fold is not in yet has no key)."""
    return [planned for planned in pfld_tuned.plan(runs, records)
            if planned.key is None or not records.recorded(planned.key)]


def record_pfld(runs: pfld_tuned.TunedRuns, records: RunRecords, max_runs: int | None) -> None:
    """Compute and record the pending runs one at a time in this process (one torch thread), each the moment it
    ends, re-planning as they arrive (a fold's refit is known once its validation runs are recorded)."""
    import torch
    from tqdm import tqdm

    from dpfair_analysis.experiments.sweep import Backend, run_sweep

    torch.set_num_threads(1)
    total = min(len(pending_pfld(runs, records)), max_runs or sys.maxsize)
    print(f"{total} runs to compute and record in {records.path}", flush=True)
    cache = RunCache(default_cache_dir())
    with tqdm(total=total, desc=f"pfld tuned {runs.name}", unit="run") as bar:
        for planned in pfld_tuned.plan(runs, records):
            if bar.n >= total:
                break
            if planned.key is None or records.recorded(planned.key):
                continue
            result = run_sweep([pfld_tuned.planned_run(runs, planned)], cache=cache, records=records,
                               backend=Backend(), progress=False)[0]
            row = next(iter(result.values())) if planned.method == "clf" else result
            # a run served from an older run cache has no cpu_seconds in its row (the summary's median skips it)
            bar.write(f"recorded {planned.method} {planned.constraint} fold {planned.fold} {planned.role} "
                      f"configuration {planned.configuration_index}: accuracy {row['accuracy']:.3f}, violation "
                      f"{row['violation']:.3f}, {row.get('cpu_seconds', math.nan):.1f} CPU s")
            bar.update()


def pfld_summary(runs: pfld_tuned.TunedRuns, records: RunRecords) -> str:
    """What is recorded of the tuned table, per method, and the CPU hours left at each method's median."""
    progress = pfld_tuned.records_progress(runs, records)
    done, total = int(progress["recorded"].sum()), int(progress["runs"].sum())
    unknown = progress.loc[progress["cpu_seconds_per_run"].isna(), "method"].tolist()
    left = progress["cpu_hours_left"].sum()
    return (f"{done} of {total} runs of the tuned Table 2 of {runs.name} recorded in {records.path}; "
            f"projected CPU time left: {left:.2f} h" + (f" plus the runs of {', '.join(unknown)} (none recorded yet)"
                                                        if unknown else "") + "\n"
            + progress.to_string(index=False, float_format="{:.2f}".format, na_rep="-"))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    wrong = command_line_error(args)
    if wrong:  # one line, before any data is loaded
        return refuse(wrong)
    pfld_study = args.study == "pfld-tuned"
    figures = REPO / ("paper_figs" if args.profile == "full" else "build/notebooks/quick/paper_figs")
    tuning_study = args.study == "mnist-tuning"
    records = RunRecords(args.records or (figures / "pfld" / f"tuned_runs_{args.data}.json" if pfld_study else
                                          figures / "fairdp" / ("mnist_tuning_runs.json" if tuning_study
                                                                else "mnist_runs.json")))
    try:  # a damaged records file is one line (RunRecords refuses it), never overwritten
        if pfld_study:
            runs = pfld_runs(args.data, args.profile)
            if args.summary:
                print(pfld_summary(runs, records))
            else:
                record_pfld(runs, records, args.max_runs)
            return 0
        if args.summary and tuning_study:
            table = tuning_summary(records)
            print(f"{len(table)} records in {records.path}")
            print(table.to_string(index=False, float_format="{:.3f}".format) if len(table) else "")
            return 0
        if args.summary:
            table = summary(records)
            print(f"{len(table)} records in {records.path}")
            for kind, part in table.groupby("kind"):
                print(f"\n{kind}:\n" + part.drop(columns="kind").dropna(axis=1, how="all").to_string(
                    index=False, float_format="{:.3f}".format, na_rep="-"))
            return 0
        todo = (pending_tuning if tuning_study else pending)(args.profile, records)
        todo = (todo[::-1] if args.from_end else todo)[:args.max_runs]
    except ValueError as error:
        print(f"record_runs.py: {error}", file=sys.stderr)
        return 2
    print(f"{len(todo)} runs to compute and record in {records.path}", flush=True)
    from joblib import Parallel, delayed
    from tqdm import tqdm

    parallel = Parallel(n_jobs=args.jobs or 2, backend="loky", return_as="generator_unordered")
    if tuning_study:
        stop_by = None if args.stop_by is None else deadline(args.stop_by)
        left = 0
        with tqdm(total=len(todo), desc="mnist tuning runs", unit="run") as bar:
            for done in parallel(delayed(compute_tuning)(args.profile, *run, stop_by, 60 * args.run_minutes)
                                 for run in todo):
                if done is None:
                    left += 1
                    continue
                accuracy = record_tuning(args.profile, *done, records)
                bar.write(f"recorded {done[0]} at {tuning.describe_configuration(done[1])} seed {done[2]}: "
                          + ", ".join(f"{split[:3]} {group} {accuracy[(split, group)]:.3f}"
                                      for split in ("validation", "test") for group in ("all", "2", "8")))
                bar.update()
        if left:
            print(f"{left} runs left pending: started after {args.stop_by} less {args.run_minutes:g} minutes "
                  f"(--stop-by), they would not have ended in time", flush=True)
        return 0
    with tqdm(total=len(todo), desc="mnist runs", unit="run") as bar:
        for done in parallel(delayed(compute)(args.profile, *run) for run in todo):
            record(args.profile, *done, records)
            bar.write(f"recorded {done[2]} at {done[0]} = {done[1]:g}" + (f" (R = {done[3]:g})" if done[3] else ""))
            bar.update()
    return 0


if __name__ == "__main__":
    sys.exit(main())
