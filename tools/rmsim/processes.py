"""Processes as Linux's ``/proc`` shows them: what the NodeManager and the task
supervisor need to find, identify and stop every process a task started.

A pid alone does not name a process for long: once a process is reaped, the
kernel may hand its number to a new one. The pair *(pid, start time)* does —
the start time (clock ticks since boot) never changes for a process and differs
between two processes that share a number in turn. So the NodeManager records
both for each container (also in the live RM's state file), and asks
:func:`is_running` rather than "does this pid exist".

A zombie (exited, not yet reaped) counts as gone everywhere here: it holds no
resources, and a parent that died (``kill -9``) may leave it unreaped for long.

Standard library only: the supervisor imports this module at every task start.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator

PROC = "/proc"


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` this package uses (see proc(5))."""

    pid: int
    state: str          # R, S, D, Z (zombie), T, ...
    ppid: int
    pgid: int           # process group
    sid: int            # session
    start_time: int     # clock ticks since boot

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int) -> ProcStat | None:
    """``pid``'s stat, or None when there is no such process (or it cannot be read)."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces and ')': split after the last ')'.
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        return ProcStat(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    stat = read_stat(pid)
    return None if stat is None else stat.start_time


def is_running(pid: int | None, started: int | None = None) -> bool:
    """True while process ``pid`` runs (not a zombie) and, when ``started`` is
    given, is the same process that started then (not a later one given its number)."""
    if not pid:
        return False
    stat = read_stat(pid)
    if stat is None or stat.zombie:
        return False
    return started is None or stat.start_time == started


def processes() -> Iterator[ProcStat]:
    """Every process that still runs (zombies left out), in no particular order."""
    try:
        names = os.listdir(PROC)
    except OSError:
        return
    for name in names:
        if name.isdigit():
            stat = read_stat(int(name))
            if stat is not None and not stat.zombie:
                yield stat


def session_members(leader: int, started: int | None = None) -> list[int]:
    """The running processes of the process group and session that ``leader``
    (pid, with its start time) created, itself included.

    Once the leader is gone its number names the group and session for as long as
    one member remains (the kernel does not reuse a number still in use as a group
    or session id). So if another process now has that number, the group is empty.
    """
    stat = read_stat(leader)
    if stat is not None and started is not None and stat.start_time != started:
        return []
    return [p.pid for p in processes() if p.pgid == leader or p.sid == leader]


def send(pids: Iterable[int], sig: int) -> None:
    """Send ``sig`` to each of ``pids``; one that has already gone is skipped."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
