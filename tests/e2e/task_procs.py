"""Finding the processes a test's tasks started, by a marker in their environment.

A test puts ``GANGMASTER_TEST_MARKER=<unique>`` in the environment of the driver it
starts; every task process inherits it, and so does everything a task starts, so
scanning ``/proc`` for it finds every process a run left behind. Zombies (ended,
not yet reaped; a parent killed with ``kill -9`` leaves them) count as gone.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

MARKER_VAR = "GANGMASTER_TEST_MARKER"


def new_marker() -> str:
    return uuid.uuid4().hex


def marked(marker: str) -> list[tuple[int, list[str], dict[str, str]]]:
    """(pid, argv, environment) of every running process carrying ``marker``, this one aside."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            if needle not in environ:
                continue
            stat = (entry / "stat").read_bytes()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2:].split()[0] in (b"Z", b"X"):
            continue
        env = dict(e.decode(errors="replace").partition("=")[::2] for e in environ if e)
        found.append((int(entry.name), [a.decode(errors="replace") for a in argv if a], env))
    return found


def running(marker: str, program: str, *args: str) -> list[int]:
    """Pids of the marked processes running ``program`` (the basename of argv[0]) with
    ``args`` as their first arguments."""
    return [pid for pid, argv, _ in marked(marker)
            if argv and os.path.basename(argv[0]) == program and argv[1:1 + len(args)] == list(args)]


def wait_until(predicate, timeout_s: float, what: str):
    """Poll ``predicate`` until it returns something true (returned) or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.05)


def kill_marked(marker: str) -> None:
    """Clean-up after a failing test: SIGKILL what it left behind."""
    for pid, _, _ in marked(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@contextmanager
def killed_on_exit(proc: subprocess.Popen):
    """``proc`` for the block; killed and reaped when it is still running as the block
    ends (a failed assertion must not leave the process behind)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
