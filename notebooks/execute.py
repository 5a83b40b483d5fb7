"""Execute notebooks from their sources; by default into a build directory, not the repository.

    .venv/bin/python notebooks/execute.py [NAME ...] [--profile smoke|quick|full] [--out DIR | --in-place]

NAME is a notebook's name (``dpsgdf``) or the path of its source ``notebooks/<name>.py``
or executed copy ``notebooks/<name>.ipynb``; no NAME means every notebook. The source
(jupytext percent format) is what runs.

* Default: the ``quick`` profile; the executed copy goes to ``<out>/<name>.ipynb`` and the
  figures to ``<out>/paper_figs/`` (``--out``, default ``build/notebooks/<profile>``); the
  repository is left as it is.
* ``--profile smoke``: the quick profile's settings on the fewest runs that still draw every
  figure and table (the test suite's default run of each notebook).
* ``--in-place``: update the repository's copies, ``notebooks/<name>.ipynb`` and
  ``paper_figs/``. They hold the full profile, so ``--in-place`` needs ``--profile full``
  (``make figures`` runs exactly that).

Before it starts, the script prints how long each notebook should take (``--estimate``
prints only that); see :data:`ESTIMATES` for where the numbers come from. The profile
reaches the notebooks as ``DPFAIR_PROFILE``, the figure directory as ``DPFAIR_FIGS``, and
the kernel imports this repository's ``dpfair_analysis`` (``PYTHONPATH``). ``--jobs N`` and
``--backend joblib|ray [--address ADDR]`` run the notebooks' sweeps (every comparison and
PF-LD grid) on the sweep runner's processes or Ray cluster, with the same results. Training runs
are cached by configuration (``$DPFAIR_CACHE``), so executing a notebook again mostly
redraws.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser
from dpfair_analysis.costs import estimated_training_seconds, format_duration

NOTEBOOKS = Path(__file__).resolve().parent
REPO = NOTEBOOKS.parent
TOOLS = {"execute.py", "record_runs.py", "record_issue51.py"}  # the .py files in notebooks/ that are not notebook sources

#: Seconds per notebook and profile on this project's 2-core machine (shared with other work).
#:
#: * quick: measured -- the notebook's test (tests/test_notebooks.py, one process, empty run
#:   cache, load ~2), rounded up.
#: * smoke: the CPU seconds of ``execute.py NAME --profile smoke`` with an empty run cache
#:   (2026-12-06), rounded up; the quick profile's where the smoke profile runs the same.
#: * full, with an empty run cache: quickstart (46 s), fairness_lens (26 min) and verify_claims
#:   (6 min) cache nothing, so their committed copies' own cell timings are the cold times.
#:   dpsgdf and pfld were executed with their runs already cached (61 s and 13 s), so their
#:   cold times are estimated, not measured: dpsgdf = 21 full-MNIST CNN runs measured at 24-33 min
#:   each on one core (2026-11-26; Table 1 on 2 seeds and Table 3's four uniform C: 12 runs of 60
#:   epochs; balanced MNIST: 4 runs on 60,000 rows; Figure 3: 20 and 40 epochs and 3 more noise
#:   scales) ~ 10 h of one core + Dutch (4 tables x 5 seeds, ~20 min) + Adult,
#:   balanced Adult and the uniform-C control at 5 seeds x 20 epochs (~20x5 the 1-epoch
#:   full-data run, ~4 s per method) ~ 10.5 h (about half with --jobs 2); pfld = Table 2 on
#:   36k Income rows (5 folds x 3 constraints of A, M, Z, PF-LD, F-LD, ~1.5 h) + COMPAS Table 2 (~10 min) + Bank's three
#:   Table 2 groupings (~45 PF-LD runs at ~20 s, ~20 min) and ~110 Bank sweep runs (~40 min) + the
#:   Income Figure 1 sweep (20 runs, ~30 min) ~ 3 h.
#: A warm run cache only redraws; how long that took is read from the committed copy at
#: run time (:func:`recorded_seconds`).
#: One 60-epoch CNN run on unbalanced full MNIST (54,649 rows, b = 256), from the toolkit's one cost model
#: (:mod:`dpfair_analysis.costs`), which the commands' own estimates use too.
CNN_RUN = estimated_training_seconds("cnn", rows=54_649, batch_size=256, epochs=60)
ESTIMATES: dict[str, dict[str, float]] = {
    "quickstart": {"smoke": 12, "quick": 12, "full": 50},
    "dpsgdf": {"smoke": 30, "quick": 50, "full": 21 * CNN_RUN + 0.5 * 3600},
    # fairness_lens full: 4 min measured (2026-11-26, beside two other jobs)
    "fairness_lens": {"smoke": 20, "quick": 20, "full": 6 * 60},
    "pfld": {"smoke": 20, "quick": 20, "full": 3 * 3600},
    "verify_claims": {"smoke": 15, "quick": 40, "full": 6.5 * 60},
    # quick: measured by its notebook test (66 s at load ~9); full: timed cells x cells
    # (experiments.diagnosis_validation.time_cell)
    "diagnose": {"smoke": 70, "quick": 70, "full": 2.5 * 3600},
    # fairdp quick: measured (52 s cold, 110 s at load ~9). Full: Table 1 on full MNIST is 18 CNN runs of 60 epochs
    # measured at 1,370-1,600 s each on one core (2026-11-26, FairDP, Opt-Q, DP-FedAvg, DP-SGD, DPSGD-F alike)
    # ~ 7.5 h; Adult (Table 1, the Adult sweeps of Figures 4-6 and Figure 3's 54 MLP runs for the attack, ~12 s
    # per run) ~ 30 min; Figure 1's (C, sigma) grid, 8 new DP-SGD runs at ~25 min each, ~3.5 h
    "fairdp": {"smoke": 30, "quick": 60, "full": (18 + 8) * CNN_RUN + 0.5 * 3600},
    # fairdp_mnist_figures quick: measured by its notebook test. Full: Figures 4-6 on MNIST and the R = 50
    # diagnostic, 64 runs at 24-32 min each two at a time (DP-FedAvg's up to 42 min), with an empty cache and no
    # runs recorded in paper_figs/fairdp/mnist_runs.json (a recorded run is not trained again)
    "fairdp_mnist_figures": {"smoke": 40, "quick": 40, "full": 64 * CNN_RUN / 2},
    # fairdp_mnist_tuning quick: measured by its notebook test (8 one-epoch runs on 5k images, ~40 s at load ~5).
    # Full: issue 36's 36 tuning runs (6 methods x 6 configurations, 60 epochs on 49,235 images) one at a time,
    # with an empty cache and nothing recorded in paper_figs/fairdp/mnist_tuning_runs.json
    "fairdp_mnist_tuning": {"smoke": 45, "quick": 45, "full": 36 * CNN_RUN},
    # group_privacy smoke (Adult by sex only) and quick: measured by its notebook test. Full: 3 census settings x
    # (SGD + 3 methods) with the DP step's norms recorded and the 5k-MNIST CNN at 60 epochs (4 runs, ~110 s each):
    # 25 min with an empty cache at load ~6 (43 min with the once-an-epoch recorder it replaced)
    "group_privacy": {"smoke": 20, "quick": 75, "full": 30 * 60},
}


def sources(names: list[str]) -> list[Path]:
    """The notebook sources ``names`` refer to (every notebook if none); ValueError naming an
    unknown one."""
    known = {p.stem: p for p in sorted(NOTEBOOKS.glob("*.py")) if p.name not in TOOLS}
    if not names:
        return list(known.values())
    chosen = []
    for name in names:
        stem = Path(name).stem if name.endswith((".py", ".ipynb")) else name
        if stem not in known:
            raise ValueError(f"unknown notebook {name!r}; notebooks: {', '.join(known)}")
        chosen.append(known[stem])
    return chosen


def recorded_seconds(executed: Path) -> float | None:
    """Wall time of the last execution recorded in an executed copy (sum of its cells'
    ``execution`` timings), or None if it has none."""
    import nbformat

    if not executed.exists():
        return None
    total = 0.0
    found = False
    for cell in nbformat.read(executed, as_version=4).cells:
        timing = cell.get("metadata", {}).get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if start and end:
            total += (dt.datetime.fromisoformat(end.rstrip("Z")) - dt.datetime.fromisoformat(start.rstrip("Z"))
                      ).total_seconds()
            found = True
    return total if found else None


def estimate_lines(paths: list[Path], profile: str) -> list[str]:
    """One line per notebook with its expected run time, and a total."""
    lines, total = [], 0.0
    for path in paths:
        seconds = ESTIMATES.get(path.stem, {}).get(profile)
        total += seconds or 0.0
        line = f"  {path.stem:14s} {profile}: ~{format_duration(seconds)}" if seconds else \
            f"  {path.stem:14s} {profile}: no estimate recorded"
        if profile == "full":
            line += " with an empty run cache"
            warm = recorded_seconds(path.with_suffix(".ipynb"))
            if warm is not None:
                line += f"; the committed copy's last run took {format_duration(warm)}"
        lines.append(line)
    lines.append(f"  total ~{format_duration(total)} (2 shared cores; cached runs only redraw; how these were "
                 f"measured: ESTIMATES in notebooks/execute.py)")
    return lines


def execute(source: Path, *, profile: str, figs: Path, timeout: int):
    """Run notebook ``source`` (jupytext percent format) top to bottom with ``profile``,
    figures to ``figs``; the executed notebook (nbformat node). The kernel starts in
    ``notebooks/`` and imports this repository's package."""
    import jupytext
    from nbclient import NotebookClient

    os.environ["DPFAIR_PROFILE"] = profile
    os.environ["DPFAIR_FIGS"] = str(figs)
    path = os.environ.get("PYTHONPATH", "")
    if str(REPO) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), path) if p)
    notebook = jupytext.read(source)
    NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(source.parent)}}).execute()
    return notebook


def sweep_environment(backend: str | None, jobs: int | None, address: str | None) -> None:
    """Pass the sweep backend to the kernels as ``DPFAIR_BACKEND``/``DPFAIR_JOBS``/``DPFAIR_RAY_ADDRESS``,
    which :class:`dpfair_analysis.experiments.sweep.Backend` reads; checked here first."""
    sys.path.insert(0, str(REPO))
    from dpfair_analysis.experiments.sweep import Backend

    chosen = Backend(name=backend, jobs=1 if jobs is None else jobs, address=address)
    os.environ.update({"DPFAIR_BACKEND": chosen.name, "DPFAIR_JOBS": str(chosen.jobs)})
    if chosen.address:
        os.environ["DPFAIR_RAY_ADDRESS"] = chosen.address


def main(argv: list[str] | None = None) -> int:
    parser = ScriptParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("notebooks", nargs="*", metavar="NAME", help="notebooks to run (default: all)")
    parser.add_argument("--profile", default="quick", choices=["smoke", "quick", "full"],
                        help="quick (default): small data, every figure; smoke: quick on the fewest runs "
                             "(the tests'); full: the papers' settings (hours)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=None,
                       help="directory for the executed copies and their paper_figs/ "
                            "(default: build/notebooks/<profile>)")
    where.add_argument("--in-place", action="store_true",
                       help="update notebooks/<name>.ipynb and paper_figs/ (needs --profile full)")
    parser.add_argument("--timeout", type=int, default=6 * 3600, help="seconds per cell (default 6 h)")
    parser.add_argument("--estimate", action="store_true", help="print the time estimate and stop")
    parser.add_argument("--jobs", type=int, default=None,
                        help="training runs at once in the notebooks' sweeps (local processes or Ray CPUs)")
    parser.add_argument("--backend", default=None, choices=["serial", "joblib", "ray"],
                        help="where the sweeps' runs are computed (default: serial, joblib with --jobs > 1)")
    parser.add_argument("--address", default=None, help="with --backend ray: the Ray cluster's address")
    args = parser.parse_args(argv)
    try:
        sweep_environment(args.backend, args.jobs, args.address)
    except ValueError as error:
        parser.error(str(error))
    if args.timeout < 1:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.in_place and args.profile != "full":
        parser.error("--in-place updates the repository's copies, which hold the full profile: "
                     "add --profile full (or use --out DIR for a quick run)")
    try:
        paths = sources(args.notebooks)
    except ValueError as error:
        parser.error(str(error))
    out = None if args.in_place else (args.out or REPO / "build" / "notebooks" / args.profile).resolve()
    target = "notebooks/ and paper_figs/ (in place)" if args.in_place else str(out)
    print(f"Executing {len(paths)} notebook(s), profile {args.profile}, into {target}. Estimated time:")
    print("\n".join(estimate_lines(paths, args.profile)), flush=True)
    if args.estimate:
        return 0

    import jupytext
    from nbclient.exceptions import CellExecutionError

    sys.path.insert(0, str(REPO))
    from dpfair_analysis.io import write_atomically

    from dpfair_analysis.io import output_target

    figs = REPO / "paper_figs" if args.in_place else out / "paper_figs"
    figs.mkdir(parents=True, exist_ok=True)
    destinations = {source: source.with_suffix(".ipynb") if args.in_place else out / f"{source.stem}.ipynb"
                    for source in paths}
    for destination in destinations.values():  # before hours of execution: each takes a regular file
        try:
            output_target(destination)
        except ValueError as error:
            parser.error(str(error))
    status = 0
    for source in paths:
        destination = destinations[source]
        start = time.perf_counter()
        try:
            notebook = execute(source, profile=args.profile, figs=figs, timeout=args.timeout)
        except CellExecutionError as error:
            print(f"FAILED {source.stem} after {format_duration(time.perf_counter() - start)}: "
                  f"{str(error).strip().splitlines()[-1]}", file=sys.stderr)
            status = 1
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        # jupytext's ipynb writer: outputs kept, the text-only metadata of the source dropped
        text = jupytext.writes(notebook, fmt="ipynb")
        try:
            write_atomically(destination, lambda tmp, text=text: tmp.write_text(text, encoding="utf-8"))
        except (OSError, ValueError) as error:  # a late failure keeps this notebook and runs the next ones
            destination = kept_elsewhere(source.stem, text)
            print(f"could not write {source.stem}.ipynb ({error}); kept at {destination}", file=sys.stderr)
            status = 2
        print(f"executed {source.stem} ({args.profile}) in {format_duration(time.perf_counter() - start)} -> "
              f"{destination.relative_to(REPO) if destination.is_relative_to(REPO) else destination}", flush=True)
    return status


def kept_elsewhere(stem: str, text: str) -> Path:
    """An executed notebook that could not be written where asked, written to a new file in the temporary
    directory instead (hours of execution are not lost to a full disk or a planted FIFO)."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix=f"{stem}-executed-", suffix=".ipynb")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return Path(name)


if __name__ == "__main__":
    sys.exit(main())
