#!/usr/bin/env python
"""Startup of the ``dpfair`` command: fresh-process wall and CPU time, import profile, heavy modules imported.

Research with the toolkit starts many short commands (a ``--help``, a typo answered by one error line, an epsilon
computed for a table). Each is measured in a fresh process (``python -m dpfair_analysis.cli ...``, run from the
checkout, one thread), interleaved round by round with the same commands of another checkout (``--baseline``):

* ``import_cli``  -- ``python -c "import dpfair_analysis.cli"``;
* ``help``        -- ``dpfair --help`` (exit 0);
* ``bad_input``   -- ``dpfair compare --epochs -1`` (exit 2, one ``dpfair: error:`` line);
* ``epsilon``     -- ``dpfair privacy epsilon --n 30000 --batch-size 256 --sigma 1 --epochs 20 --delta 1e-6``;

and, once per checkout, ``python -X importtime -c "import dpfair_analysis.cli"`` (the cumulative import time of
the package's CLI and of torch, scipy, dp_accounting, pandas, fairlearn where they are imported) and which of those
heavy modules each command leaves in ``sys.modules``.

Usage (from the repository root)::

    .venv/bin/python benchmarks/startup_time.py --baseline /path/to/old/checkout      # ~1 minute
    .venv/bin/python benchmarks/startup_time.py --quick                              # smoke test
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "startup_time.json"
HEAVY = ("torch", "scipy", "dp_accounting", "pandas", "fairlearn", "sklearn", "matplotlib")
EPSILON = ["privacy", "epsilon", "--n", "30000", "--batch-size", "256", "--sigma", "1", "--epochs", "20",
           "--delta", "1e-6"]
#: name -> (argv after ``python``, the exit status it must give)
COMMANDS = {"import_cli": (["-c", "import dpfair_analysis.cli"], 0),
            "help": (["-m", "dpfair_analysis.cli", "--help"], 0),
            "bad_input": (["-m", "dpfair_analysis.cli", "compare", "--epochs", "-1"], 2),
            "epsilon": (["-m", "dpfair_analysis.cli", *EPSILON], 0)}
#: name -> the CLI arguments whose heavy imports are listed (None: importing the CLI only)
MODULE_CHECKS = {"import_cli": None, "help": ["--help"], "bad_input": ["compare", "--epochs", "-1"],
                 "epsilon": EPSILON}
_MODULES = """
import contextlib, io, json, sys
from dpfair_analysis.cli import main
args = {args!r}
if args is not None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(args)
        except SystemExit:
            pass
print(json.dumps([m for m in {heavy!r} if m in sys.modules]))
"""


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str], root: Path) -> subprocess.CompletedProcess:
    """``python argv`` from ``root`` (``-c``/``-m`` put the working directory first on sys.path), one thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=root, check=False,
                          timeout=600)


def time_command(name: str, root: Path) -> dict:
    argv, status = COMMANDS[name]
    start, cpu = time.perf_counter(), children_cpu()
    done = run(argv, root)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != status:
        raise RuntimeError(f"{name} in {root} exited {done.returncode}, not {status}: {done.stderr[-2000:]}")
    if name == "bad_input" and not (done.stderr.startswith("dpfair: error:") or "\ndpfair: error:" in done.stderr):
        raise RuntimeError(f"bad_input in {root} did not print a dpfair: error: line: {done.stderr[-2000:]}")
    return {"wall": wall, "cpu": cpu}


def import_profile(root: Path) -> dict:
    """Seconds of ``python -X importtime -c "import dpfair_analysis.cli"``: ``total`` (the CLI's cumulative
    time), and per heavy package the sum of the self times of its modules (``torch``: torch and torch.*)."""
    done = run(["-X", "importtime", "-c", "import dpfair_analysis.cli"], root)
    if done.returncode != 0:
        raise RuntimeError(f"importing the CLI of {root} failed: {done.stderr[-2000:]}")
    own: dict[str, int] = {}
    total = 0
    for line in done.stderr.splitlines():
        fields = [f.strip() for f in line.removeprefix("import time:").split("|")]
        if not line.startswith("import time:") or len(fields) != 3 or not fields[0].isdigit():
            continue
        name, root_package = fields[2], fields[2].split(".")[0]
        own[root_package] = own.get(root_package, 0) + int(fields[0])
        if name == "dpfair_analysis.cli":
            total = int(fields[1])
    return {"total": total / 1e6, **{k: own[k] / 1e6 for k in ("dpfair_analysis", *HEAVY) if k in own}}


def heavy_modules(root: Path, names: list[str]) -> dict:
    """For each command of ``names``, the modules of :data:`HEAVY` in ``sys.modules`` after it (fresh process)."""
    out = {}
    for name in names:
        done = run(["-c", _MODULES.format(args=MODULE_CHECKS[name], heavy=HEAVY)], root)
        if done.returncode != 0:
            raise RuntimeError(f"module check {name} in {root} failed: {done.stderr[-2000:]}")
        out[name] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main(argv=None) -> int:
    p = ScriptParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--baseline", type=Path, default=None, help="another checkout measured too, interleaved")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 1 round, no import profile, no epsilon (its dp_accounting import is seconds)")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.baseline is not None and not (args.baseline / "dpfair_analysis" / "__init__.py").is_file():
        p.error(f"--baseline {args.baseline} is not a checkout of dpfair_analysis")
    roots = {"after": ROOT, **({} if args.baseline is None else {"before": args.baseline.resolve()})}
    rounds = 1 if args.quick else args.rounds
    names = [name for name in COMMANDS if not (args.quick and name == "epsilon")]
    samples: dict[tuple[str, str], list[dict]] = {}
    for r in range(rounds):
        order = list(roots.items()) if r % 2 == 0 else list(reversed(roots.items()))
        for name in names:
            for label, root in order:
                samples.setdefault((label, name), []).append(time_command(name, root))
        print(f"round {r + 1}/{rounds}: " + ", ".join(f"{label} {name} {s[-1]['wall']:.2f} s"
                                                      for (label, name), s in samples.items()), flush=True)
    rows = [{"code": label, "command": name, "wall_seconds": statistics.median(s["wall"] for s in x),
             "cpu_seconds": statistics.median(s["cpu"] for s in x), "wall_each_round": [s["wall"] for s in x],
             "rounds": len(x)} for (label, name), x in samples.items()]
    payload = {"settings": {"rounds": rounds, "commands": {k: " ".join(v[0]) for k, v in COMMANDS.items()},
                            "baseline": None if args.baseline is None else str(args.baseline),
                            "cpus": os.cpu_count(), "python": platform.python_version(), "quick": args.quick},
               "rows": rows,
               "import_seconds": {} if args.quick else {label: import_profile(root) for label, root in roots.items()},
               "heavy_modules": {label: heavy_modules(root, names) for label, root in roots.items()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    from dpfair_analysis.io import write_atomically

    write_atomically(args.out, lambda tmp: tmp.write_text(json.dumps(payload, indent=1)))
    for row in rows:
        print(f"{row['code']:6} {row['command']:10} {row['wall_seconds']:.3f} s wall, {row['cpu_seconds']:.3f} s CPU")
    print(json.dumps(payload["import_seconds"]), json.dumps(payload["heavy_modules"]))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
