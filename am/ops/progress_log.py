"""The AM's own log file: one line per thing it did, stamped with its clock.

Each AM process writes its own, ``am-<n>.log`` in the job's work folder (n counts
the AM processes the folder has seen), so none is ever overwritten; each line is
also handed to ``echo`` (the CLI prints it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, TextIO


class ProgressLog:
    """The AM's own log file, each line also handed to ``echo`` (the CLI prints it)."""

    def __init__(self, path: Path, now: Callable[[], float], echo: Callable[[str], None] | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.now = now
        self.echo = echo
        self._file: TextIO = open(path, "a", encoding="utf-8")

    def __call__(self, message: str) -> None:
        line = f"[{self.now():9.1f}s] {message}"
        self._file.write(line + "\n")
        self._file.flush()
        if self.echo is not None:
            self.echo(line)

    def close(self) -> None:
        self._file.close()


class QuietLog:
    """A progress log that keeps nothing: for drivers that run so many AMs that their
    lines would be noise (trace replay), and report outcomes from the AMs' records. It says
    so (:attr:`keeps_nothing`): the AM then attaches no observer to build the lines of its
    gangs' events (:mod:`~gangmaster.am.core.gang_events`)."""

    keeps_nothing = True

    def __call__(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass

