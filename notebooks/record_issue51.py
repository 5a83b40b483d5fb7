"""Run issue 51's two studies and write their JSON as they go.

    .venv/bin/python notebooks/record_issue51.py --study method-grid [--settings adult-sex,dutch-sex] [--seeds N]
                                                 [--methods a,b,...] [--out PATH]
    .venv/bin/python notebooks/record_issue51.py --study recommendations [--out PATH]

``method-grid`` (51.3): every registered method on each setting over its grid
(:mod:`dpfair_analysis.experiments.method_grid`), seeds 0..N-1, one method's grid at a time (the claims' methods
first); the JSON (default ``paper_figs/equal_eps/method_grid.json``) is rewritten atomically after every (setting,
seed, method), and one already in it is not run again, so an interrupted study resumes.

``recommendations`` (51.5): every recommendation of the diagnosis validation study's ``recommendations`` profile
beside its real runs (:func:`~dpfair_analysis.experiments.diagnosis_validation.run_recommendation_check`), cell by
cell through the run cache (``$DPFAIR_CACHE``: resumable); the JSON (default
``paper_figs/diagnose/recommendation_check.json``) is rewritten after every cell.

``--merge A.json,B.json`` joins the rows of method-grid runs recorded by other processes (e.g. one per method, each
with its own ``--out``) to ``--out``'s and rewrites it with today's tables and verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from dpfair_analysis.cli._common import ScriptParser

REPO = Path(__file__).resolve().parent.parent
STUDIES = ("method-grid", "recommendations")
DEFAULT_OUT = {"method-grid": REPO / "paper_figs" / "equal_eps" / "method_grid.json",
               "recommendations": REPO / "paper_figs" / "diagnose" / "recommendation_check.json"}
SETTING_NAMES = ("adult-sex", "dutch-sex", "mnist-5k-skewed")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, checked before anything heavy is imported."""
    parser = ScriptParser(prog="record_issue51", description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True)
    parser.add_argument("--settings", default=",".join(SETTING_NAMES))
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--methods", default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--merge", default="", help="method-grid JSON files (comma-separated) whose rows join --out's")
    args = parser.parse_args(argv)
    if args.study not in STUDIES:
        parser.error(f"--study must be one of {', '.join(STUDIES)}, got {args.study!r}")
    args.settings = tuple(s for s in args.settings.split(",") if s)
    unknown = [s for s in args.settings if s not in SETTING_NAMES]
    if unknown or not args.settings:
        parser.error(f"--settings must name some of {', '.join(SETTING_NAMES)}, got {unknown or 'none'}")
    if not 1 <= args.seeds <= 20:
        parser.error(f"--seeds must be an integer from 1 to 20, got {args.seeds}")
    args.out = args.out or DEFAULT_OUT[args.study]
    args.merge = tuple(Path(p) for p in args.merge.split(",") if p)
    missing = [str(p) for p in args.merge if not p.is_file()]
    if missing:
        parser.error(f"--merge must name existing method-grid JSON files, got missing {missing}")
    return args


def write_json(path: Path, payload: dict) -> None:
    """``payload`` to ``path`` atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        json.dump(payload, handle, indent=1, default=str)
        handle.write("\n")
    os.chmod(handle.name, 0o644)  # a temporary file is private; the JSON is committed
    os.replace(handle.name, path)


def method_grid(args: argparse.Namespace) -> int:
    """51.3: one (setting, seed) at a time, the JSON rewritten after each."""
    import pandas as pd

    from dpfair_analysis.experiments import method_grid as study
    from dpfair_analysis.verify.reproduction import CLAIM_MARGIN, later_claim_verdicts

    methods = tuple(args.methods.split(",")) if args.methods else study.RECORDING_ORDER
    try:
        study.study_plan(methods)
    except ValueError as error:
        print(f"record_issue51: --methods: {error}", file=sys.stderr)
        return 2
    rows, seconds = {}, {}
    for path in (args.out, *args.merge):  # the rows recorded so far, here and by other processes
        if not path.exists():
            continue
        for name, part in json.loads(path.read_text())["settings"].items():
            frame = pd.concat([rows.get(name, pd.DataFrame()), pd.DataFrame(part["rows"])], ignore_index=True)
            rows[name] = frame.drop_duplicates(["seed", "method", "configuration_index", "split", "group"])
            seconds[name] = seconds.get(name, 0.0) + (part.get("seconds") or 0.0)
    configs = study.setting_configs()

    def save() -> None:
        payload = study.study_json(rows, seeds=range(args.seeds), methods=methods, seconds=seconds)
        robustness = {setting: study.robustness_table(frame) for setting, frame in rows.items()}
        verdicts = later_claim_verdicts(robustness, judged={study.NEAREST_TO_SKEWED_MNIST: study.NEAREST_NOTE})
        payload |= {"claims": study.json_records(verdicts), "claim_margin": CLAIM_MARGIN}
        write_json(args.out, payload)

    for name in args.settings:
        for seed in range(args.seeds):
            for method in methods:  # one method's grid at a time: each is recorded the moment it is done
                done = rows.get(name)
                if done is not None and len(done) and ((done["seed"] == seed) & (done["method"] == method)).any():
                    continue
                start = time.perf_counter()
                new = study.run_study(configs[name], methods=(method,), seeds=(seed,))
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
                rows[name] = new if done is None or not len(done) else pd.concat([done, new], ignore_index=True)
                save()
                print(f"{name} seed {seed} {method}: {time.perf_counter() - start:.0f} s", flush=True)
    if rows:
        save()  # today's tables and verdicts of the rows recorded
    return 0


def recommendations(args: argparse.Namespace) -> int:
    """51.5: cell by cell through the run cache, the JSON rewritten after each."""
    import pandas as pd

    from dpfair_analysis.diagnose import SplitRuns
    from dpfair_analysis.experiments import diagnosis_validation as study
    from dpfair_analysis.experiments.cache import RunCache, default_cache_dir

    cache = RunCache(default_cache_dir())
    names = study.profile_settings("recommendations").settings
    settings = [s for s in study.SETTINGS if s.name in names and s.available()]
    frames = []
    for cell in study.cells("recommendations", settings):
        start = time.perf_counter()
        frames.append(study.run_recommendation_cell(cell, cache=cache, split_runs=SplitRuns()))
        write_json(args.out, study.recommendation_check_json(pd.concat(frames, ignore_index=True)))
        print(f"{cell.label}: {time.perf_counter() - start:.0f} s", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    sys.path.insert(0, str(REPO))
    return method_grid(args) if args.study == "method-grid" else recommendations(args)


if __name__ == "__main__":
    raise SystemExit(main())
