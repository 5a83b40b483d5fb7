"""Run notebooks top to bottom and save them with their outputs (figures go to paper_figs/).

    .venv/bin/python notebooks/execute.py notebooks/dpsgdf.ipynb [--profile quick|full]

The profile reaches the notebook as DPFAIR_PROFILE; runs are cached by configuration, so a
second execution only redraws.
"""

import argparse
import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dpfair_analysis.io import write_atomically  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--profile", default="full", choices=["quick", "full"])
    parser.add_argument("--timeout", type=int, default=6 * 3600, help="seconds per cell")
    args = parser.parse_args()
    os.environ["DPFAIR_PROFILE"] = args.profile
    for path in args.notebooks:
        notebook = nbformat.read(path, as_version=4)
        NotebookClient(notebook, timeout=args.timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.resolve().parent)}}).execute()
        write_atomically(path, lambda tmp: nbformat.write(notebook, str(tmp)))
        print(f"executed {path} ({args.profile})")


if __name__ == "__main__":
    main()
