"""Shared pieces of the ``dpfair`` command: the one-line error, argument types, JSON output."""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Callable

from dpfair_analysis.costs import REFUSE_SECONDS, estimated_training_seconds, format_duration  # noqa: F401

EXIT_USAGE = 2
#: A bug, or a failure of the toolkit itself (never a verdict): ``dpfair: internal error: ...``.
EXIT_INTERNAL = 3


class UsageError(Exception):
    """A problem with the command line or its inputs, reported as one line."""


class Parser(argparse.ArgumentParser):
    """argparse, but its errors are one line and go through the same exit path."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


class ScriptParser(argparse.ArgumentParser):
    """argparse for the repository's scripts (``benchmarks/``, ``notebooks/*.py`` tools): an error is one line,
    ``PROG: error: MESSAGE`` on stderr, exit 2 -- no usage block (``-h`` still prints it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


# ----------------------------------------------------------------- argument types
def comma_items(text: str, what: str) -> list[str]:
    """The items of a comma-separated list (commas inside parentheses do not split: ``dpsgd(C=2,x=1)``),
    stripped; an empty list or item (``1,,2``, a trailing comma) is refused naming ``what`` -- never dropped."""
    import re

    items = [item.strip() for item in re.split(r",(?![^(]*\))", text)]
    if not text.strip() or any(not item for item in items):
        raise argparse.ArgumentTypeError(f"expected comma-separated {what} with no empty item, got {text!r}")
    return items


def positive_numbers(text: str) -> list[float]:
    """A comma-separated list of positive finite numbers (argparse type: ``--epsilons 1,2,4``)."""
    values = []
    for item in comma_items(text, "positive numbers"):
        try:
            value = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}")
        values.append(value)
    return values


def _number(check: Callable[[float], bool], allowed: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}") from None
        if not math.isfinite(value) or not check(value):
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}")
        return value
    return parse


positive_float = _number(lambda v: v > 0, "a positive finite number")
unit_open = _number(lambda v: 0 < v < 1, "a number in (0, 1)")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def device(text: str) -> str:
    """``--device``: cpu, or cuda / cuda:N where torch sees CUDA (one-line error otherwise; only a CUDA device
    needs torch imported to be checked -- argparse applies this to the default "cpu" of every command)."""
    if text not in ("cpu", "cuda") and not (text.startswith("cuda:") and text[5:].isdigit()):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text!r}")
    if text == "cpu":
        return text
    import torch

    if not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text!r} needs CUDA, but torch.cuda.is_available() is False on this "
                                         f"machine; use --device cpu")
    return text


def nonnegative_float(text: str) -> float:
    return _number(lambda v: v >= 0, "a finite number >= 0")(text)


def output_path(text: str) -> Path:
    """A file path whose directory exists and that holds nothing but a regular file (or nothing yet): a
    device, FIFO, socket or directory there is refused, and a symbolic link is followed to what it names
    (:func:`dpfair_analysis.io.output_target`) -- checked before any work is done."""
    from dpfair_analysis.io import output_target

    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name")
    if not path.is_symlink() and (not path.parent.exists() or not path.parent.is_dir()):
        raise argparse.ArgumentTypeError(f"directory {str(path.parent)!r} does not exist")
    try:
        output_target(path)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return path


def check_distinct_outputs(args: argparse.Namespace, flags: dict[str, str]) -> None:
    """No two output flags name the same file (``{attribute: flag}``; unset ones are skipped): one would
    silently replace the other."""
    from dpfair_analysis.io import output_target

    seen: dict[Path, str] = {}
    for attribute, flag in flags.items():
        value = getattr(args, attribute, None)
        if value is None:
            continue
        target = output_target(value).resolve()
        if target in seen:
            raise UsageError(f"{seen[target]} and {flag} name the same file {str(value)!r}; give each its own")
        seen[target] = flag


def check_files_in(flag: str, directory: Path, names: tuple[str, ...], *, others: dict[str, Path | None]) -> None:
    """Before the work: each file a command will write in ``directory`` (``names``) takes a regular file (a FIFO,
    a directory or a device planted there is refused, as :func:`output_path` refuses one), and no other output
    flag (``others``: {flag: path}) names one of them (it would be overwritten)."""
    from dpfair_analysis.io import output_target

    inside = {}
    for name in names:
        try:  # a directory still to be made holds nothing yet
            inside[(output_target(directory / name) if directory.is_dir() else directory / name).resolve()] = name
        except ValueError as error:
            raise UsageError(f"{flag}: {error}") from None
    for other, path in others.items():
        if path is not None and output_target(path).resolve() in inside:
            raise UsageError(f"{other} {str(path)!r} is a file {flag} writes ({inside[output_target(path).resolve()]}); "
                             "give it another name")


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars only for a person watching: not with ``--quiet`` or ``--json``, and not when stderr is not
    a terminal (a log file would get one line per update)."""
    return not (getattr(args, "quiet", False) or getattr(args, "json", False)) and sys.stderr.isatty()


def print_json(payload: object) -> None:
    print(json_text(payload))


def json_text(payload: object) -> str:
    """``payload`` as the commands print and write JSON (numpy scalars as numbers, paths as strings)."""
    return json.dumps(payload, indent=2, default=_json_default)


def _json_default(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")




# ----------------------------------------------------------------- accounting flags
def add_accounting_flags(parser: argparse.ArgumentParser, *, accountant: str = "rdp",
                         accountants: tuple[str, ...] = ("rdp", "pld"), conversion: bool = True) -> None:
    """``--accountant`` (and ``--conversion``), turned into one AccountingSpec by :func:`accounting_from_args`."""
    parser.add_argument("--accountant", default=accountant, choices=accountants,
                        help=f"privacy accountant (default {accountant})")
    if conversion:
        parser.add_argument("--conversion", default="improved", choices=("improved", "classic"),
                            help="RDP to (ε, δ): improved (default) or classic (the papers' tool)")


def accounting_from_args(args: argparse.Namespace, *, neighboring: str = "add_remove", **fixed: object):
    """The :class:`~dpfair_analysis.privacy.accounting.AccountingSpec` the flags ask for (one-line errors)."""
    conversion = getattr(args, "conversion", "improved")
    if args.accountant == "pld" and conversion != "improved":
        raise UsageError(f"--conversion {conversion} applies only to --accountant rdp")
    from dpfair_analysis.privacy.accounting import AccountingSpec

    return AccountingSpec(accountant=args.accountant, conversion=conversion, neighboring=neighboring, **fixed)


def add_private_run_flags(parser: argparse.ArgumentParser) -> None:
    """The settings of a loop run, as ``dpfair compare`` takes them: ``--batch-size``, ``--sigma``, ``--clip``,
    ``--delta``, ``--lr``, ``--l2``, ``--sampling``, ``--eval-every``."""
    parser.add_argument("--batch-size", type=int_in(1, 1_000_000), default=256,
                        help="expected (Poisson) batch size (default 256)")
    parser.add_argument("--sigma", type=positive_float_upto(1e6), default=1.0, help="noise multiplier (default 1)")
    parser.add_argument("--clip", type=positive_float, default=0.5, help="clipping bound C (default 0.5)")
    parser.add_argument("--delta", type=unit_open, default=1e-6,
                        help="delta at which epsilon is reported (default 1e-6)")
    parser.add_argument("--lr", type=positive_float, default=None, help="learning rate (default 1/sqrt(T))")
    parser.add_argument("--l2", type=nonnegative_float, default=0.01, help="L2 weight (default 0.01)")
    parser.add_argument("--sampling", default="poisson", choices=("poisson", "shuffle"),
                        help="poisson (default; what the accountant assumes) or shuffle")
    parser.add_argument("--eval-every", type=int_in(1, 100_000), default=1, metavar="K",
                        help="evaluate the test (and training) set after every K-th epoch only, and after the last "
                             "(default 1: every epoch); the batch statistics and epsilon are reported every epoch")


def sampling_caveat(sampling: str, *, what: str = "every ε above is") -> str | None:
    """The line printed under every ε of runs trained with ``--sampling shuffle`` (None for Poisson): the ledger
    accounts each step as Poisson-sampled at q = b/n, which is not what fixed-size batches of a shuffled order are,
    so the number is not a privacy guarantee of these runs."""
    if sampling == "poisson":
        return None
    return (f"note: sampling={sampling} trains on fixed-size batches of a shuffled order, but {what} "
            "accounted as Poisson sampling at q = b/n: it is NOT a guarantee for these runs (--sampling poisson "
            "trains what the accountant assumes)")


def add_sweep_flags(parser: argparse.ArgumentParser) -> None:
    """``--jobs``, ``--backend`` and ``--address``: where a sweep's runs are computed (see
    :mod:`dpfair_analysis.experiments.sweep`), turned into a Backend by :func:`backend_from_args`."""
    parser.add_argument("--jobs", type=int_in(1, 1024), default=None,
                        help="runs computed at once: local processes (joblib), or the CPUs of a local Ray "
                             "instance (default 1: serial)")
    parser.add_argument("--backend", default=None, choices=("serial", "joblib", "ray"),
                        help="serial (default for --jobs 1), joblib (default for --jobs > 1) or ray "
                             "(needs pip install 'dpfair-analysis[ray]'); results are identical and share the cache")
    parser.add_argument("--address", default=None, metavar="ADDR",
                        help="with --backend ray: the cluster to run on, e.g. auto or ray://head:10001 "
                             "(default: a local instance)")


def backend_from_args(args: argparse.Namespace):
    """The :class:`~dpfair_analysis.experiments.sweep.Backend` the flags ask for (defaults from
    ``DPFAIR_BACKEND``/``DPFAIR_JOBS``/``DPFAIR_RAY_ADDRESS``); one-line errors."""
    from dpfair_analysis.experiments.sweep import Backend

    default = Backend.from_environment()
    jobs = default.jobs if args.jobs is None else args.jobs
    name = args.backend if args.backend is not None else (default.name if args.jobs is None else None)
    address = args.address if args.address is not None else (default.address if name == "ray" else None)
    if args.address is not None and name != "ray":
        raise UsageError(f"--address {args.address} needs --backend ray")
    if name == "serial" and jobs != 1:
        raise UsageError(f"--backend serial runs one job at a time; --jobs {jobs} needs --backend joblib or ray")
    if name == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise UsageError("--backend ray needs Ray: pip install 'dpfair-analysis[ray]'")
    return Backend(name=name, jobs=jobs, address=address)


def run_cache_from_args(args: argparse.Namespace):
    """The run cache (``--no-cache``: none; else ``$DPFAIR_CACHE`` or the user cache). A cache directory
    that cannot be written is said once, here, before any work -- and the command runs uncached rather than
    losing its result at the end."""
    from dpfair_analysis.experiments.cache import RunCache, default_cache_dir, unwritable_reason

    if getattr(args, "no_cache", False):
        return RunCache(None)
    directory = default_cache_dir()
    reason = unwritable_reason(directory)
    if reason is None:
        return RunCache(directory)
    print(f"dpfair: warning: the run cache {directory} (DPFAIR_CACHE) cannot be written: {reason}; "
          "running uncached", file=sys.stderr)
    cache = RunCache(directory if Path(directory).is_dir() else None)  # entries already there are still served
    cache.writable = False
    return cache


# ----------------------------------------------------------------- checks made before any work
def int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer in [low, high] (argparse type; the upper end keeps a typo from becoming a week's run)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer from {low:,} to {high:,}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low:,} to {high:,}, got {text!r}")
        return value
    return parse


#: Largest seed a command takes: the runs derive further seeds by small offsets (seed + 1, + fold, + 1000 x model)
#: and scikit-learn takes at most 2**32 - 1, so the seed itself stops at 2**31 - 1.
MAX_SEED = 2 ** 31 - 1

#: ``--seed``: an integer from 0 to :data:`MAX_SEED` (argparse type).
seed_value = int_in(0, MAX_SEED)


def positive_float_upto(high: float) -> Callable[[str], float]:
    """A finite number in (0, high]."""
    return _number(lambda v: 0 < v <= high, f"a number in (0, {high:g}]")


#: Free space an output file's directory must have before the work starts (a history CSV, a figure or a report is
#: well under it); a directory of figures (``--plots``) needs :data:`MIN_FREE_DIRECTORY`. What still fails at the
#: end (the disk filled during the work) is kept elsewhere by :class:`Outputs`.
MIN_FREE_FILE = 1 << 20
MIN_FREE_DIRECTORY = 4 << 20


def writable_file(text: str) -> Path:
    """An output file: its directory exists, takes a new file (tried) and has :data:`MIN_FREE_FILE` free; what is
    there is a regular file or nothing (:func:`output_path`). Checked before any work, so a run is never lost to
    its output path; nothing is left behind."""
    from dpfair_analysis.io import output_target

    path = output_path(text)
    _probe_writable(output_target(path).parent, need=MIN_FREE_FILE)
    return path


#: The file formats matplotlib's savefig writes (by suffix; tests check this list against matplotlib's own)
FIGURE_FORMATS = ("avif", "eps", "gif", "jpeg", "jpg", "pdf", "pgf", "png", "ps", "raw", "rgba", "svg", "svgz",
                  "tif", "tiff", "webp")


def figure_file(text: str) -> Path:
    """A :func:`writable_file` whose suffix names a figure format matplotlib writes (:data:`FIGURE_FORMATS`):
    checked before the work, so a run is not lost to ``--plot fig.jpgg``."""
    suffix = Path(text).suffix.lstrip(".").lower()
    if suffix not in FIGURE_FORMATS:
        raise argparse.ArgumentTypeError(f"{text!r} does not end in a figure format ({', '.join(FIGURE_FORMATS)})")
    return writable_file(text)


def png_file(text: str) -> Path:
    """A :func:`writable_file` ending in ``.png`` (a command that renders PNG bytes)."""
    if Path(text).suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(f"{text!r} must end in .png (the figure is written as PNG)")
    return writable_file(text)


def writable_directory(text: str) -> Path:
    """An output directory: an existing directory, or a new one whose parent exists; it takes a new file and has
    :data:`MIN_FREE_DIRECTORY` free."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not a directory")
    if not path.exists() and not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"directory {str(path.parent)!r} does not exist")
    _probe_writable(path if path.exists() else path.parent, need=MIN_FREE_DIRECTORY)
    return path


def _probe_writable(directory: Path, *, need: int) -> None:
    """``directory`` takes a new file (one is created and removed) and has ``need`` bytes free (for the user
    running the command: what ``df`` shows as available)."""
    import shutil
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
        free = shutil.disk_usage(directory).free
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write in {str(directory)!r}: {error.strerror or error}") from None
    if free < need:
        raise argparse.ArgumentTypeError(f"only {_size(free)} free in {str(directory)!r}, at least {_size(need)} "
                                         "needed: free some space or write elsewhere")


def _size(count: int) -> str:
    """A byte count for a message: ``0 bytes``, ``12 KiB``, ``3.5 MiB``."""
    if count < 1024:
        return f"{count} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        count /= 1024
        if count < 1024 or unit == "GiB":
            return f"{count:.3g} {unit}"
    raise AssertionError("unreachable")


def _reason(error: Exception) -> str:
    """An output error in a few words: the system's message of an OSError, else the error's text."""
    return (error.strerror if isinstance(error, OSError) else None) or str(error)


class Outputs:
    """The files a command writes once its work is done (``--out``, ``--report``, ``--plot``, ``--plots``).

    Each is written atomically (:func:`~dpfair_analysis.io.write_atomically`). An ``OSError`` while writing one
    (the disk filled during the work, a quota, the directory removed or made read-only) or a ``ValueError`` (a
    FIFO, a directory or another user's link planted at the path after it was checked) loses nothing: the output
    is written to a new file (or directory) of its own in the temporary directory instead, the command goes on to
    print its result, and :meth:`finish` -- called last -- ends it with one line naming the flag, the error and
    where the result is kept, status 2."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.failed: set[str] = set()

    def file(self, flag: str, path: Path, write: Callable[[Path], None], *, what: str) -> Path | None:
        """Write ``path`` with ``write(tmp)``; on an OSError, a file in the temporary directory instead. Returns
        the path written (None if neither could be)."""
        import os
        import tempfile

        from dpfair_analysis.io import write_atomically

        try:
            return write_atomically(path, write)
        except (OSError, ValueError) as error:
            problem = f"{flag}: could not write {str(path)!r} ({_reason(error)})"
        self.failed.add(flag)
        name = Path(path).name
        fallback = None
        try:
            fd, fallback = tempfile.mkstemp(prefix=f"dpfair-{Path(name).stem}-", suffix=Path(name).suffix)
            os.close(fd)
            write_atomically(fallback, write)
            self.failures.append(f"{problem}; the {what} is kept at {fallback} instead")
            return Path(fallback)
        except (OSError, ValueError) as error:
            if fallback is not None:
                Path(fallback).unlink(missing_ok=True)
            self.failures.append(f"{problem}, nor in {tempfile.gettempdir()} ({_reason(error)})")
            return None

    def directory(self, flag: str, path: Path, save: Callable[[Path], list[Path]], *, what: str) -> list[Path]:
        """``save(directory)`` into ``path``; on an OSError, into a new directory in the temporary directory
        instead. Returns the files written there (empty if neither could be)."""
        import shutil
        import tempfile

        try:
            return save(path)
        except (OSError, ValueError) as error:
            problem = f"{flag}: could not write in {str(path)!r} ({_reason(error)})"
        self.failed.add(flag)
        fallback = None
        try:
            fallback = tempfile.mkdtemp(prefix=f"dpfair-{Path(path).name or 'plots'}-")
            written = save(Path(fallback))
            self.failures.append(f"{problem}; the {what} are kept in {fallback} instead")
            return written
        except (OSError, ValueError) as error:
            if fallback is not None:
                shutil.rmtree(fallback, ignore_errors=True)
            self.failures.append(f"{problem}, nor in {tempfile.gettempdir()} ({_reason(error)})")
            return []

    def finish(self, *, kept: str | None = None) -> None:
        """One :class:`UsageError` for every output that could not be written where asked (nothing if all
        were), with ``kept`` -- where else the result is (the run cache, the output printed) -- at its end."""
        if self.failures:
            raise UsageError("; ".join(self.failures) + (f"; {kept}" if kept else ""))


def check_dataset_options(name: str, group_by: str | None, *, flag: str = "--group-by") -> None:
    """``group_by`` is one of the data set's groupings (from the registry, before loading anything)."""
    from dpfair_analysis.catalog import DATASETS

    entry = DATASETS[name]
    if group_by is not None and group_by not in entry.group_by:
        allowed = list(entry.group_by) or "none (its grouping is fixed)"
        raise UsageError(f"{flag} for {name} must be one of {allowed}, got {group_by!r}")


def check_workload(seconds: float, *, what: str, flags: str, force: bool, quiet: bool = False) -> None:
    """Refuse work estimated beyond :data:`REFUSE_SECONDS` unless ``force`` (one line naming ``flags`` and the
    estimate); otherwise print the estimate to stderr when it is over a minute."""
    import sys

    if seconds > REFUSE_SECONDS and not force:
        raise UsageError(f"{flags}: {what} would take about {format_duration(seconds)} on this machine; "
                         f"lower {flags} or add --force")
    if seconds > 60 and not quiet:
        print(f"dpfair: {what}: about {format_duration(seconds)} here (estimate)", file=sys.stderr)


# ----------------------------------------------------------------- data: a built-in data set or a CSV file
CSV_FLAGS = {"path": "--csv", "label": "--label", "group": "--group", "drop": "--drop", "positive": "--positive"}


def add_data_flags(parser: argparse.ArgumentParser) -> None:
    """``--data NAME [--group-by G]`` or ``--csv PATH --label COL --group COL [--drop A,B] [--positive V]``."""
    parser.add_argument("--data", default=None, help="built-in data set (see `dpfair data list`; default adult)")
    parser.add_argument("--group-by", default=None, help="group column of a built-in data set (e.g. sex, race)")
    parser.add_argument("--csv", default=None, metavar="PATH",
                        help="your own data: a CSV file with a header row (numerics are standardised, "
                             "other columns one-hot encoded; rows with missing values are counted and removed)")
    parser.add_argument("--label", default=None, metavar="COL", help="with --csv: the column to predict")
    parser.add_argument("--group", default=None, metavar="COL", help="with --csv: the protected attribute")
    parser.add_argument("--drop", default=None, metavar="COL,...", help="with --csv: columns that are not features")
    parser.add_argument("--positive", default=None, metavar="VALUE",
                        help="with --csv: the label value that is class 1 (needed for a text label)")


def train_fractions_from_args(args: argparse.Namespace) -> dict[str, float]:
    """{group: fraction of its training rows kept} from the repeated ``--train-fraction GROUP=FRACTION``
    flags (FRACTION in (0, 1]); one-line errors naming the flag."""
    fractions = {}
    for item in args.train_fraction:
        group, sep, value = item.partition("=")
        try:
            fractions[group] = float(value)
        except ValueError:
            raise UsageError(f"--train-fraction must look like GROUP=FRACTION, got {item!r}") from None
        if not sep or not group or not 0 < fractions[group] <= 1:
            raise UsageError(f"--train-fraction must look like GROUP=FRACTION with FRACTION in (0, 1], got {item!r}")
    return fractions


def data_from_args(args: argparse.Namespace) -> tuple[str, dict, list[str]]:
    """(registry name, loader options, what was done to a CSV file) from the data flags; one-line errors.

    A CSV file is read once here (so a bad column, a one-row group, a one-class or text label is
    reported naming its flag before any work) and named by its SHA-256 in the options, so cached
    results of an edited file are never served.
    """
    csv_only = [flag for flag, value in (("--label", args.label), ("--group", args.group), ("--drop", args.drop),
                                         ("--positive", args.positive)) if value is not None]
    if args.csv is None:
        if csv_only:
            raise UsageError(f"{', '.join(csv_only)} need(s) --csv PATH (for a built-in data set use --data and "
                             f"--group-by)")
        name = args.data or "adult"
        from dpfair_analysis.catalog import DATASETS

        if name not in DATASETS or name == "csv":
            raise UsageError(f"--data must be one of {[n for n in DATASETS if n != 'csv']} (or use --csv PATH), "
                             f"got {name!r}")
        check_dataset_options(name, args.group_by)
        options = {} if args.group_by is None else {"by": args.group_by}
        return name, options, []
    if args.data is not None or args.group_by is not None:
        raise UsageError("give either --data [--group-by] or --csv --label --group, not both")
    for flag, value in (("--label", args.label), ("--group", args.group)):
        if value is None:
            raise UsageError(f"--csv needs {flag} COL")
    try:
        drop = [] if args.drop is None else comma_items(args.drop, "column names")
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"--drop: {error}") from None
    path = Path(args.csv).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"--csv {str(path)!r} is not a file")
    from dpfair_analysis.data.sources import DataWarning
    from dpfair_analysis.data.user_csv import user_csv

    with warnings.catch_warnings(record=True) as caught:  # said once, as a note on stderr, not a Python warning
        warnings.simplefilter("always", DataWarning)
        dataset = user_csv(path=path, label=args.label, group=args.group, drop=drop, positive=args.positive,
                           argument_names=CSV_FLAGS)
    for warning in caught:
        print(f"dpfair: note: {warning.message}", file=sys.stderr)
    options = {"path": str(path), "label": args.label, "group": args.group, "drop": drop, "positive": args.positive,
               "sha256": dataset.info["sha256"]}
    return "csv", options, list(dataset.info["preprocessing"])
