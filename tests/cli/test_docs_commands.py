"""The user guide's own-data example runs as written, on the CSV that ships for it (examples/people.csv)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]


def guide_command(page: str, prefix: str) -> list[str]:
    """The first command of ``page``'s bash blocks that starts with ``prefix`` (continuation lines joined)."""
    text = (ROOT / page).read_text()
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.split("  #")[0].strip()
            if command.startswith(prefix):
                return shlex.split(command)
    raise AssertionError(f"{page} has no command starting {prefix!r}")


def test_the_diagnose_guides_csv_example_runs_as_written(cli, tmp_path, monkeypatch):
    argv = guide_command("docs/guide/diagnose.md", "dpfair diagnose --csv examples/people.csv")
    monkeypatch.chdir(ROOT)
    argv = [str(tmp_path / "report.html") if arg == "report.html" else arg for arg in argv[1:]]
    assert "--report" in argv and (ROOT / "examples" / "people.csv").is_file()
    code, out, err = cli(*argv)
    assert code == 0, err
    assert "rank  group" in out and "Female" in out and "Male" in out
    assert (tmp_path / "report.html").is_file()
