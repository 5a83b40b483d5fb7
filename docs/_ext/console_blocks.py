"""The console blocks of the pages: every fenced block whose first line is ``$ dpfair ...`` shows what that command
prints now, so a page cannot show yesterday's output.

    python docs/_ext/console_blocks.py            # check: run each command, compare with its page (exit 1 if off)
    python docs/_ext/console_blocks.py --write    # run each command and write its output into the pages

A block is the command line (``$ dpfair ARGS  # an optional comment``) and the command's standard output, in full.
Each command runs from the repository root, as ``python -m dpfair_analysis.cli ARGS``, with an empty run cache of its
own (what a reader who types it gets; its path is shown as ``$DPFAIR_CACHE``), trailing blanks removed. A page agrees with a fresh run when every word agrees and every number is
within :data:`TOLERANCE` (the runs are seeded: on one machine they are identical; another BLAS may move the last
digit); wall-clock times (``in 3.6 s``) are not compared. ``tests/test_docs.py`` runs the check.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The pages whose blocks are checked.
PAGES = ("README.md", "docs/guide/diagnose.md", "docs/guide/compare.md", "docs/guide/python_api.md",
         "docs/guide/verify.md", "docs/guide/privacy_testing.md",
         "docs/guide/group_privacy.md", "docs/guide/data.md", "docs/index.md")
BLOCK = re.compile(r"^```[a-z]*\n(\$ dpfair [^\n]*)\n(.*?)^```$", re.M | re.S)
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
#: ``|page - fresh| <= absolute + relative * |page|`` for a number of the page; integers (no decimal point) exactly.
TOLERANCE = {"absolute": 0.002, "relative": 0.01}
#: Wall-clock times, masked before comparing.
TIMES = re.compile(r"\bin \d+(?:\.\d+)? s\b")


@dataclass(frozen=True)
class Block:
    page: str
    command: str  # the line after "$ ", comment included
    shown: str    # the output on the page
    start: int    # character offsets of the output in the page
    end: int

    @property
    def argv(self) -> list[str]:
        words = shlex.split(self.command, comments=True)
        if not words or words[0] != "dpfair":
            raise ValueError(f"{self.page}: a console block must start with '$ dpfair', got {self.command!r}")
        return words[1:]


def blocks(page: str) -> list[Block]:
    """The console blocks of ``page`` (a path relative to the repository root)."""
    text = (ROOT / page).read_text()
    return [Block(page, match.group(1)[2:], match.group(2), match.start(2), match.end(2))
            for match in BLOCK.finditer(text)]


@functools.cache
def _printed(argv: tuple[str, ...]) -> str:
    return run(Block("", "dpfair " + shlex.join(argv), "", 0, 0))


def run(block: Block) -> str:
    """What ``block``'s command prints on standard output, run as a reader would (empty run cache)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "DPFAIR_CACHE": cache, "PYTHONHASHSEED": "0", "COLUMNS": "200"}
        done = subprocess.run([sys.executable, "-m", "dpfair_analysis.cli", *block.argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{block.page}: `dpfair {' '.join(block.argv)}` exited {done.returncode}: "
                               f"{done.stderr.strip()[-500:]}")
        printed = done.stdout.replace(cache, "$DPFAIR_CACHE")  # the reader's cache, not this run's temporary one
    return "".join(line.rstrip() + "\n" for line in printed.splitlines())


def differences(shown: str, fresh: str) -> list[str]:
    """Where ``shown`` and ``fresh`` disagree beyond :data:`TOLERANCE`, one line each (empty: they agree)."""
    shown_lines, fresh_lines = TIMES.sub("in _ s", shown).splitlines(), TIMES.sub("in _ s", fresh).splitlines()
    if len(shown_lines) != len(fresh_lines):
        return [f"{len(shown_lines)} lines on the page, {len(fresh_lines)} printed"]
    out = []
    for number, (a, b) in enumerate(zip(shown_lines, fresh_lines), start=1):
        if NUMBER.sub("#", a).split() != NUMBER.sub("#", b).split():
            out.append(f"line {number}: page {a.strip()!r}, printed {b.strip()!r}")
            continue
        for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)):
            if not _close(x, y):
                out.append(f"line {number}: page {x}, printed {y}: {b.strip()!r}")
    return out


def _close(page: str, fresh: str) -> bool:
    if page == fresh:
        return True
    if not any(c in page + fresh for c in ".e"):
        return False  # counts and sizes exactly
    a, b = float(page.replace(",", "")), float(fresh.replace(",", ""))
    return abs(a - b) <= TOLERANCE["absolute"] + TOLERANCE["relative"] * abs(a)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write each command's output into its page")
    parser.add_argument("pages", nargs="*", default=PAGES, help="pages (default: all that have console blocks)")
    args = parser.parse_args(argv)
    failures = 0
    for page in args.pages:
        found = blocks(page)
        if args.write and found:
            text = (ROOT / page).read_text()
            for block in reversed(found):  # from the end: earlier offsets stay valid
                text = text[:block.start] + _printed(tuple(block.argv)) + text[block.end:]
            (ROOT / page).write_text(text)
            print(f"{page}: {len(found)} block(s) written")
            continue
        for block in found:
            off = differences(block.shown, _printed(tuple(block.argv)))  # a command on several pages runs once
            failures += bool(off)
            print(f"{page}: $ {block.command}: " + ("agrees" if not off else "DIFFERS\n  " + "\n  ".join(off)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
