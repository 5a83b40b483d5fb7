"""The ``dpfair`` command: parses, calls the library, prints.

Any bad argument or unusable input ends in one line on stderr,
``dpfair: error: <what is wrong>``, and exit status 2 -- never a traceback. A bug or a failure of the
toolkit itself ends in ``dpfair: internal error: ...`` and status 3 (:data:`EXIT_STATUSES`). Output files
are written to a temporary file and renamed, so nothing is left half-written.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_starting(signum, frame) -> None:
    """Ctrl-C before :func:`main` runs (while Python imports the command): the same one line and status as
    after, never a traceback."""
    os.write(2, b"dpfair: interrupted\n")
    os._exit(130)


# Started as the command (the console script, or ``python -m dpfair_analysis.cli``, whose argv[0] is "-m" while
# the package loads), not imported by a program: from here until main() takes over.
if os.path.basename(sys.argv[0] if sys.argv else "") in ("dpfair", "-m"):
    signal.signal(signal.SIGINT, _interrupted_while_starting)

import argparse  # noqa: E402
import warnings  # noqa: E402
from typing import Sequence  # noqa: E402

from dpfair_analysis.cli import audit, compare, data, diagnose, excess_risk, hessian, pfld_table, privacy, train, \
    verify  # noqa: E402
from dpfair_analysis.cli._common import EXIT_INTERNAL, EXIT_USAGE, Parser, UsageError, positive_int  # noqa: E402
from dpfair_analysis.errors import ArgumentError, TrainingDiverged  # noqa: E402

#: Library arguments whose bad values show only once data or accounting are at hand (``ArgumentError``),
#: and the flag that sets each: the one-line message names the flag.
FLAGS_OF_ARGUMENTS = {"train_group_fraction": "--train-fraction", "target_epsilon": "--epsilon",
                      "target": "--target", "pair": "--pair", "pairs": "--pair", "data": "--data",
                      "per_group": "--per-group"}

#: The exit statuses, shown in ``dpfair --help``. ``audit`` exits 1 for a refuted claim and 4 for a result without
#: power; only 0 reads as a pass, and 2, 3 and 4 are never a pass (``docs/guide/privacy_testing.md``, "Exit statuses").
EXIT_STATUSES = ("exit status: 0 success (audit: consistent with the claim); 1 audit: a claim refuted, or a run "
                 "that failed (a diverged training, an unreachable cluster); 2 bad input, or a mechanism under "
                 "audit that broke its contract (raised, exited, crashed, returned NaN or complex numbers, wrote "
                 "to its input data, ran out of memory or time); 3 internal error; 4 audit: no power -- the audit "
                 "could not have refuted the claim; 130 interrupted")

# One module per command group; each has ``register(subparsers)``. Add new commands here.
COMMANDS = (compare, diagnose, privacy, data, hessian, excess_risk, train, audit, pfld_table, verify)


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="dpfair", description="How differential privacy hurts some groups more than others.",
                    epilog=EXIT_STATUSES)
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch intra-op threads (default 1: on a shared 2-core machine more threads "
                             "made per-sample steps several times slower; see benchmarks/README.md)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dpfair``; returns the exit status. Warnings are printed as one line each,
    ``dpfair: warning: <message>`` (no source line), and the caller's warning display is restored.
    Ctrl-C ends the command with ``dpfair: interrupted`` and status 130."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # from here a KeyboardInterrupt, caught below
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning_on_one_line
        return _main(argv)


#: A writer whose reader closed the pipe: 128 + SIGPIPE, what a shell reports for ``cat`` in ``cat f | head``.
EXIT_BROKEN_PIPE = 141


def _discard_stdout() -> None:
    """Point stdout at the null device, so the interpreter's final flush of what is still buffered does not
    raise a second BrokenPipeError at exit (Python's documented recipe for SIGPIPE)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout without a descriptor (captured in a test): nothing
        pass


def _show_warning_on_one_line(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"dpfair: warning: {_one_line(message)}", file=sys.stderr if file is None else file)


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        _set_threads(args.threads)
        status = args.handler(args)
    except UsageError as error:
        print(f"dpfair: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except TrainingDiverged as error:  # a run that went to NaN: say where and what to change, exit 1
        print(f"dpfair: error: {_one_line(error)} (--lr)", file=sys.stderr)
        return 1
    except ArgumentError as error:
        flag = FLAGS_OF_ARGUMENTS.get(error.argument, error.argument)
        print(f"dpfair: error: {flag}: {_one_line(error.detail)}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"dpfair: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("dpfair: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``dpfair verify --list | head``): stop quietly, as cat does
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except ConnectionError as error:  # (BrokenPipeError is one: caught above) an unreachable cluster: exit 1
        print(f"dpfair: error: {_one_line(error)}", file=sys.stderr)
        return 1
    except Exception as error:  # a bug, not a usage problem: still one line unless asked
        if os.environ.get("DPFAIR_DEBUG"):
            raise
        what = ("out of memory (MemoryError)" if isinstance(error, MemoryError)
                else f"{type(error).__name__}: {_one_line(error)}")
        print(f"dpfair: internal error: {what} (set DPFAIR_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
    return int(status or 0)


def _set_threads(threads: int) -> None:
    """``--threads``: torch's intra-op threads. Commands import torch only when they need it (``--help`` and a
    refused flag need none of it), so the count goes to the environment torch reads when it is imported, and
    to torch itself when it already is (in-process callers)."""
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return " ".join(text.split()) if text else type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
