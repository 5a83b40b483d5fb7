"""``python -m dpfair_analysis.cli``: the ``dpfair`` command."""

import os
import sys

from dpfair_analysis.cli import main

status = main()
if status == 130:
    # interrupted: leave now. Through sys.exit, ``python -m`` would re-raise SIGINT at exit whenever the
    # KeyboardInterrupt had passed through code compiled from a string (dataclasses' generated methods), a
    # CPython quirk, and report death by signal instead of the status.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)
sys.exit(status)
