"""``gangmaster ARGS`` in the test's own process, for the end-to-end tests whose runs are
in virtual time: there a second Python's start-up and imports would be most of a run's
wall time. A run that needs a process of its own (live tasks, signals, a server to kill)
stays a subprocess."""
from __future__ import annotations

import io
import subprocess
from contextlib import redirect_stderr, redirect_stdout

from gangmaster.tools.cli import main


def gangmaster(*args) -> subprocess.CompletedProcess:
    """What ``gangmaster ARGS`` exited with and printed, as :func:`subprocess.run` tells it."""
    argv = list(map(str, args))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:   # argparse's refusals
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
