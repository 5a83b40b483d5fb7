"""Auditing a mechanism from a Python file in a process of its own: what the code under test does by accident --
exit, print, hang, crash, run out of memory -- cannot end its audit or be read as its verdict.

:func:`audit_file` (the engine of ``dpfair audit --target FILE.py:FUNCTION``) starts a child Python process
that imports the file, calls the pair function if one is named, and runs :func:`~.auditing.audit`; the parent
decides what happened:

* the child's standard output is the parent's standard error, from the first instruction: whatever the code
  under test prints (``print``, ``os.write(1, ...)``) cannot be read as the verdict or the JSON, which the
  caller prints only after the child has finished;
* the result comes back as JSON on a pipe of its own (never unpickled);
* one :class:`~.runner.TimeBudget` covers the import of the file, the pair function and every call of the
  mechanism. The child stops a span that overruns it (``SIGALRM``); the parent, told when each span starts,
  kills a child whose span outlives the budget by :data:`GRACE_SECONDS` (a hang no signal interrupts);
* a child that ends without a result -- ``os._exit``, a crash in native code, a kill by the kernel (out of
  memory) -- is a :class:`~.runner.MechanismError` naming its exit status or signal and where it was (importing
  the file, in the pair function, in the mechanism); outside the code under test, an :class:`IsolatedError`;
* the result is checked for consistency (:func:`check_result`): its claim is the one asked about, its
  epsilon_lower is the kit's bound of its witness counts, its verdict follows from the two, and it says "no
  power" wherever its evaluation runs could not refute the claim. A result that fails is an
  :class:`IsolatedError`, "inconsistent result from the child".

What is not guaranteed: the code under test runs in the same process as the audit it is audited by, with the
same rights. Code written to forge its verdict -- writing a result of its own to the result pipe, replacing
:func:`~.auditing.audit` or the bound functions in the child, patching numpy -- can produce a consistent-looking
result; the consistency check catches a result whose numbers disagree with each other, not one forged with care.
Deliberately malicious code is out of scope: audit code you would run anyway, or run the audit in a sandbox.

Errors, by what the caller should do (the CLI's exit statuses in brackets):

* ``ValueError`` (an :class:`~dpfair_analysis.errors.ArgumentError` naming ``target`` or ``pair``):
  the file or function cannot be used [2];
* :class:`~.runner.MechanismError` (:class:`~.runner.AuditTimeout` among them): the code under test broke the
  contract, exited, crashed, ran out of memory or time [2];
* :class:`IsolatedError`: the audit itself failed in the child [3].

``KeyboardInterrupt`` in the parent stops the child and propagates; the child ignores ``SIGINT`` (the parent
decides), so a ``KeyboardInterrupt`` raised there comes from the code under test and is a mechanism error.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import select
import signal
import subprocess
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpfair_analysis.errors import ArgumentError
from dpfair_analysis.io import read_regular
from dpfair_analysis.testing._json import jsonable
from dpfair_analysis.testing.auditing import AuditResult, audit
from dpfair_analysis.testing.bounds import DEFAULT_CONFIDENCE, epsilon_lower_bound, largest_certifiable_epsilon
from dpfair_analysis.testing.runner import AuditTimeout, MechanismError, TimeBudget, _Expired

#: Seconds a span of the code under test may outlive the time budget before the parent kills the child (the
#: child's own alarm normally stops it first, with the number of calls in its message).
GRACE_SECONDS = 2.0


class IsolatedError(RuntimeError):
    """The audit failed in the child process outside the code under test (a bug of the kit, or the process
    killed while the kit was running)."""


# ============================================================================ loading the user's file
def parse_spec(spec: str, argument: str) -> tuple[Path, str]:
    """``FILE.py:FUNCTION`` as (path, name), refused as an :class:`ArgumentError` naming ``argument``.

    Parameters
    ----------
    spec : str
        ``FILE.py:FUNCTION``.
    argument : str
        The name of the argument, for the error (``target`` or ``pair``).
    """
    path_text, sep, name = str(spec).rpartition(":")
    if not sep or not path_text or not name:
        raise ArgumentError(argument, f"must be FILE.py:FUNCTION, got {spec!r}")
    path = Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise ArgumentError(argument, f"{path_text!r} is not a Python file (FILE.py:FUNCTION)")
    return path, name


def load_function(spec: str, argument: str, *, budget: TimeBudget | None = None) -> Callable[..., Any]:
    """FUNCTION from FILE.py in ``FILE.py:FUNCTION``: the file is imported (executed) as a module of its own.

    Parameters
    ----------
    spec : str
        ``FILE.py:FUNCTION``.
    argument : str
        The argument's name in errors (``target``, ``pair``).
    budget : TimeBudget, optional
        The import runs on it (a sleep at import time counts toward the audit's time).

    Raises
    ------
    ArgumentError
        The spec, the file's import (any exception, ``sys.exit`` included) or the function is unusable.
    AuditTimeout
        The import outlived the budget.
    """
    path, name = parse_spec(spec, argument)
    module_name = f"_dpfair_target_{abs(hash(str(path.resolve())))}"
    try:  # the source the user named, compiled here: no __pycache__/*.pyc beside it is read (or written) -- one
        # planted there by another user ran instead of the file, and could forge the verdict
        code = compile(read_regular(path), str(path), "exec", dont_inherit=True)
    except (OSError, ValueError, SyntaxError) as error:
        raise ArgumentError(argument, f"cannot read {path}: {error}") from None
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    sys.modules[module_name] = module

    def expired() -> AuditTimeout:
        return AuditTimeout(f"importing {path} used up the time budget of {budget.seconds:g} s "  # type: ignore
                            f"(the import counts toward --time-budget / time_budget)")
    try:
        if budget is None:
            exec(code, module.__dict__)  # noqa: S102  (the file the user named: running it is the audit)
        else:
            with budget.running(expired):
                exec(code, module.__dict__)  # noqa: S102
    except (_Expired, AuditTimeout, KeyboardInterrupt):
        sys.modules.pop(module_name, None)
        raise
    except SystemExit as error:
        sys.modules.pop(module_name, None)
        raise ArgumentError(argument, f"importing {path} called sys.exit({error.code!r})") from None
    except BaseException as error:  # noqa: BLE001  (the user's file: any exception is theirs to fix)
        sys.modules.pop(module_name, None)
        raise ArgumentError(argument, f"importing {path} raised {type(error).__name__}: {error}") from None
    function = getattr(module, name, None)
    if function is None:
        raise ArgumentError(argument, f"{path} has no function {name!r}")
    if not callable(function):
        raise ArgumentError(argument, f"{path}:{name} is not callable")
    return function


# ============================================================================ the parent
def audit_file(target: str, epsilon: float, delta: float = 0.0, *, pair: str | None = None,
               time_budget: float = 600.0, **options: Any):
    """Audit ``FUNCTION`` of ``FILE.py`` (``target``) in a child process; see the module docstring.

    Parameters
    ----------
    target : str
        ``FILE.py:FUNCTION``, the mechanism ``fn(data, rng)`` (the file is imported and executed).
    epsilon, delta : float
        The claim.
    pair : str, optional
        ``FILE.py:FUNCTION`` whose ``FUNCTION()`` returns the pair (D, D') to audit.
    time_budget : float
        Seconds the code under test may run in total: the imports, the pair function and every call.
    **options
        Passed to :func:`~dpfair_analysis.testing.auditing.audit` (``relation`` required; picklable values).

    Returns
    -------
    AuditResult
        As :func:`~dpfair_analysis.testing.auditing.audit` returns it, rebuilt from its JSON form.
    """
    parse_spec(target, "target")
    if pair is not None:
        parse_spec(pair, "pair")
    TimeBudget(time_budget)  # refused here, before a process starts
    job = pickle.dumps({"target": target, "pair": pair, "epsilon": epsilon, "delta": delta,
                        "time_budget": time_budget, "options": options,
                        "debug": bool(os.environ.get("DPFAIR_DEBUG"))})
    # the child imports this package from where the parent did, whatever its working directory and sys.path
    home = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (home, os.environ.get("PYTHONPATH")) if p)}
    read_end, write_end = os.pipe()
    try:
        # -P: the working directory is not on the child's sys.path (a numpy.py planted there would run)
        child = subprocess.Popen([sys.executable, "-P", "-m", "dpfair_analysis.testing.isolation", str(write_end)],
                                 stdin=subprocess.PIPE, stdout=2, pass_fds=(write_end,), close_fds=True, env=env)
    finally:
        os.close(write_end)
    try:
        reply, where = _watch(child, job, read_end, time_budget)
    except BaseException:  # Ctrl-C (or anything else) in the parent: the child goes too
        _stop(child)
        raise
    finally:
        os.close(read_end)
    if reply is None:
        raise _ended(child.returncode, where, target)
    kind = reply.get("kind")
    if kind == "result":
        try:
            result = AuditResult(**reply["result"])
        except (TypeError, ValueError) as error:
            raise IsolatedError(f"inconsistent result from the child: not an audit result ({error})") from None
        return check_result(result, epsilon=epsilon, delta=delta,
                            confidence=options.get("confidence", DEFAULT_CONFIDENCE))
    message = str(reply.get("message", ""))
    if kind == "argument":
        raise ArgumentError(reply.get("argument", "target"), message)
    if kind == "timeout":
        raise AuditTimeout(message)
    if kind == "mechanism":
        raise MechanismError(message)
    raise IsolatedError(message)


def check_result(result: AuditResult, *, epsilon: float, delta: float, confidence: float) -> AuditResult:
    """``result`` if it is consistent with the claim asked about and with itself, else :class:`IsolatedError`
    ("inconsistent result from the child"): a cheap check, in the parent, of what the child sent back.

    With N = ``evaluation_trials`` runs per side and the witness's false positives and negatives, the result must
    have the claim (epsilon, delta, confidence) it was asked about; ``epsilon_lower`` =
    :func:`~.bounds.epsilon_lower_bound` (fp, N, fn, N) (0 when nothing was evaluated); ``consistent`` =
    epsilon_lower <= epsilon; ``certifiable_epsilon`` = :func:`~.bounds.largest_certifiable_epsilon` (N); and
    ``no_power`` set when the claim is at or above it. What it does not catch: a result forged with care (see the
    module docstring).

    Parameters
    ----------
    result : AuditResult
        What the child sent.
    epsilon, delta, confidence : float
        The claim and the confidence the audit was asked for.
    """
    problems = []
    witness = result.witness if isinstance(result.witness, dict) else {}
    n, fp, fn = result.evaluation_trials, witness.get("false_positives"), witness.get("false_negatives")
    if (result.epsilon_claimed, result.delta, result.confidence) != (epsilon, delta, confidence):
        problems.append(f"it is about epsilon = {result.epsilon_claimed!r}, delta = {result.delta!r} at confidence "
                        f"{result.confidence!r}, not the claim asked about ({epsilon!r}, {delta!r}, {confidence!r})")
    counts = [v for v in (n, fp, fn) if isinstance(v, int) and not isinstance(v, bool)]
    if len(counts) != 3 or n < 0 or not (0 <= fp <= n and 0 <= fn <= n):
        problems.append(f"its evaluation counts are not counts (N = {n!r} runs per side, {fp!r} false positives, "
                        f"{fn!r} false negatives)")
    else:
        bound = float(epsilon_lower_bound(fp, n, fn, n, delta=delta, confidence=confidence)) if n else 0.0
        certifiable = largest_certifiable_epsilon(n, delta=delta, confidence=confidence) if n else 0.0
        if not math.isclose(result.epsilon_lower, bound, rel_tol=1e-9, abs_tol=1e-12):
            problems.append(f"epsilon_lower = {result.epsilon_lower!r}, but its witness ({fp} false positives and "
                            f"{fn} false negatives in {n} runs per side) bounds epsilon by {bound!r}")
        if not math.isclose(result.certifiable_epsilon, certifiable, rel_tol=1e-9, abs_tol=1e-12):
            problems.append(f"certifiable_epsilon = {result.certifiable_epsilon!r}, but {n} runs per side certify "
                            f"at most {certifiable!r}")
        if certifiable <= epsilon and not result.no_power:
            problems.append(f"it claims power, but {n} runs per side certify at most {certifiable!r} <= the claim")
    if result.consistent is not (result.epsilon_lower <= epsilon):
        problems.append(f"consistent = {result.consistent!r} contradicts epsilon_lower = {result.epsilon_lower!r} "
                        f"against the claim {epsilon!r}")
    if problems:
        raise IsolatedError("inconsistent result from the child (the code under test may have tampered with its "
                            "audit): " + "; ".join(problems))
    return result


def _watch(child: subprocess.Popen, job: bytes, fd: int, budget: float) -> tuple[dict | None, str | None]:
    """Send the job, then read the child's messages until its reply or its end; kill it when a span of the
    code under test outlives the budget. Returns (the reply or None, what was running when the child ended)."""
    try:
        child.stdin.write(job)  # type: ignore[union-attr]
        child.stdin.close()  # type: ignore[union-attr]
    except BrokenPipeError:  # the child is already gone: its status says why
        pass
    buffer, reply, where = b"", None, None
    deadline: float | None = None
    while True:
        wait = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            data = os.read(fd, 65536)
            if not data:  # the child closed the pipe: it has ended (or is ending)
                try:
                    child.wait(timeout=GRACE_SECONDS)
                except subprocess.TimeoutExpired:  # it closed the pipe but lives on: it has nothing left to say
                    _stop(child)
                return reply, where
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                if message.get("kind") == "span":
                    if message["running"]:
                        where = message["what"]
                        deadline = time.monotonic() + budget - float(message["spent"]) + GRACE_SECONDS
                    else:
                        where, deadline = None, None
                else:
                    reply = message
        if deadline is not None and time.monotonic() > deadline:
            _stop(child)
            raise AuditTimeout(f"{where} was still running {GRACE_SECONDS:g} s after the time budget of "
                               f"{budget:g} s ran out (a hang no signal interrupted): the audit's process was "
                               f"stopped")


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.kill()
    child.wait()


def _ended(status: int, where: str | None, target: str) -> Exception:
    """The error for a child that ended without a reply, with exit ``status`` (negative: killed by a signal)."""
    if status < 0:
        name = signal.Signals(-status).name if -status in signal.Signals._value2member_map_ else str(-status)
        how = f"was killed by signal {name}" + {"SIGKILL": " (out of memory?)",
                                                  "SIGSEGV": " (a crash in native code)"}.get(name, "")
    else:
        how = f"exited with status {status} (os._exit, or a crash) without a result"
    if where is None:
        return IsolatedError(f"the audit's process {how} outside the code under test")
    return MechanismError(f"the audit's process {how} while {where} was running: the code under test must "
                          f"return its outputs, not end the process")


# ============================================================================ the child
def _child(fd: int) -> None:
    """Run one job (pickled on stdin) and send its reply as a JSON line on ``fd``; see :func:`audit_file`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C does
    channel = os.fdopen(fd, "w", buffering=1)

    def send(kind: str, **fields: Any) -> None:
        channel.write(json.dumps(jsonable({"kind": kind, **fields})) + "\n")
        channel.flush()

    job = pickle.loads(sys.stdin.buffer.read())
    spans = {"what": "the import of " + job["target"].rpartition(":")[0]}

    def observer(running: bool, spent: float) -> None:
        send("span", running=running, spent=spent, what=spans["what"])

    budget = TimeBudget(job["time_budget"], observer=observer)
    try:
        try:
            reply = _run_job(job, budget, spans)
        except KeyboardInterrupt:  # SIGINT is ignored here: the code under test raised it
            raise MechanismError(f"{spans['what']} raised KeyboardInterrupt") from None
    except ArgumentError as error:
        send("argument", argument=error.argument, message=error.detail)
    except AuditTimeout as error:
        send("timeout", message=str(error))
    except MechanismError as error:
        send("mechanism", message=str(error))
    except BaseException as error:  # noqa: BLE001  (the kit failed: an internal error; traceback when debugging)
        if isinstance(error, MemoryError):
            message = "MemoryError: the audit ran out of memory outside the mechanism (lower trials or the budget)"
        else:
            message = f"{type(error).__name__}: {' '.join(str(error).split()) or type(error).__name__}"
        if job.get("debug"):
            traceback.print_exc()
        send("internal", message=message)
    else:
        send("result", result=reply)
    channel.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # not through the interpreter's exit: threads or atexit hooks left by the code under test


def _run_job(job: dict, budget: TimeBudget, spans: dict) -> dict:
    mechanism = load_function(job["target"], "target", budget=budget)
    pairs = None
    if job["pair"] is not None:
        spans["what"] = "the import of " + job["pair"].rpartition(":")[0]
        make_pair = load_function(job["pair"], "pair", budget=budget)
        spans["what"] = f"the pair function {job['pair']}"
        pairs = _call_pair(make_pair, job["pair"], budget)
    spans["what"] = f"the mechanism {job['target']}"
    result = audit(mechanism, job["epsilon"], job["delta"], pairs=pairs, time_budget=budget, name=job["target"],
                   **job["options"])
    return result.as_dict()


def _call_pair(make_pair: Callable[[], Any], spec: str, budget: TimeBudget) -> tuple[Any, Any]:
    def expired() -> AuditTimeout:
        return AuditTimeout(f"the pair function {spec} used up the time budget of {budget.seconds:g} s")
    try:
        with budget.running(expired):
            pairs = make_pair()
    except (AuditTimeout, KeyboardInterrupt):
        raise
    except SystemExit as error:
        raise ArgumentError("pair", f"{spec}() called sys.exit({error.code!r})") from None
    except BaseException as error:  # noqa: BLE001  (the user's function)
        raise ArgumentError("pair", f"{spec}() raised {type(error).__name__}: {error}") from None
    if not (isinstance(pairs, (tuple, list)) and len(pairs) == 2):
        raise ArgumentError("pair", f"{spec}() must return the pair (D, D'), got {type(pairs).__name__}")
    return tuple(pairs)


if __name__ == "__main__":
    _child(int(sys.argv[1]))
