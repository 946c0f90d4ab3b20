"""The AM's state journal: what a restarted AM needs to carry on where the last
one stopped, without killing the tasks that are still running.

One JSON object per line, appended and flushed as each thing happens, so the
file survives the AM process being killed at any point (a line cut short by the
kill is ignored on reading). It is never rewritten: every AM attempt appends to
the same file, and its ``am_started`` lines show each restart.

Kinds, in the order a gang lives them::

    am_started     am_attempt, app_id, job
    resumed        am_attempts, app_id                 a new application carries on an earlier run's job
    gang_attempt   gang, attempt, waiting_since       a gang attempt begins to wait
    released       gang, attempt, containers, reason   a partial hold given back
    reselected     gang, attempt, count                instances selected again (their asks went stale)
    avoidance_dropped gang, attempt, role              the role is placed again on the nodes where it failed
                   (avoiding them would leave the gang unable to start even on the idle cluster)
    launched       gang, attempt, started_at, barrier_token, tasks   every task of the attempt started
    tasks_finished gang, attempt, finished_at, tasks   the tasks of an attempt that ended at one heartbeat,
                   each [role, index, state, exit_status, diagnostics]
    task_finished  gang, attempt, role, index, state, exit_status, diagnostics, finished_at
                   one task's end, as AMs before ``tasks_finished`` wrote it (still read)
    attempt_ended  record (an AttemptRecord)
    job_finished   outcome, reason
    am_stopped     reason                               the run stopped with the job unfinished

The gangs' lines *are* their transitions (:mod:`~gangmaster.am.core.gang_events` writes them):
:func:`read_state` keeps the job's own facts (its AM attempts, application, outcome) and
hands the gangs' lines on, in order, for recovery to replay through the gang's own methods
(:func:`~gangmaster.am.core.recovery.replay_gangs`); :func:`task_endings` reads every task's
end, whichever of the two kinds recorded it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from gangmaster.protocol.private_files import open_private

JOURNAL_FILE = "journal.jsonl"



def _as_plain(value):
    """A field that is a record (an :class:`~gangmaster.am.core.lifecycle.AttemptRecord`, a
    :class:`~gangmaster.am.core.lifecycle.LaunchedTasks`, a :class:`~gangmaster.am.core.lifecycle.TaskEndings`:
    anything with ``to_dict``) is written
    as what that returns."""
    to_dict = getattr(value, "to_dict", None)
    if to_dict is None:
        raise TypeError(f"a journal field cannot hold a {type(value).__name__}")
    return to_dict()


#: One encoder for every line (json.dumps with options builds a new one per call). Keys keep
#: the order the AM wrote them in (sorting them is a cost per object that no reader needs),
#: and records are built here from plain values and records, never cyclic, so no cycle check either.
_encode = json.JSONEncoder(check_circular=False, default=_as_plain).encode


class Journal:
    """Appends records to ``path`` (created with its folder when missing).

    A field is a plain value (what JSON holds), or a record that will not change any more
    (an ended attempt's :class:`~gangmaster.am.core.lifecycle.AttemptRecord`, a launch's
    :class:`~gangmaster.am.core.lifecycle.LaunchedTasks`, a heartbeat's
    :class:`~gangmaster.am.core.lifecycle.TaskEndings`), written as its ``to_dict()``: a
    journal in memory makes that only if it is read."""

    def __init__(self, path: str | Path, now=time.time):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.now = now
        self._file = open_private(self.path, "a")  # it holds barrier tokens

    def write(self, kind: str, at: float | None = None, **fields) -> None:
        """Append one record of ``kind`` with ``fields``, at time ``at`` (None: the clock's
        time now; the AM passes the time it has just read, as it decides at it)."""
        record = {"t": round(float(self.now() if at is None else at), 6), "kind": kind, **fields}
        self._file.write(_encode(record) + "\n")
        self._file.flush()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        self._file.close()


class MemoryJournal:
    """A journal kept in memory: the records a :class:`Journal` would write, without a
    file. For drivers that run many short-lived AMs in one process and need no
    failover from disk (trace replay: tens of thousands of jobs, one folder and two
    open files each would cost more than the jobs). :meth:`records` reads them back
    as :func:`read_records` reads a file. A driver whose AMs are never restarted and
    whose journals nobody reads needs not even this: :class:`NoJournal`."""

    def __init__(self, now=time.time):
        self.now = now
        self._written: list[tuple[float, str, dict]] = []   # (time, kind, fields) as written
        self.closed = False

    def write(self, kind: str, at: float | None = None, **fields) -> None:
        """As :meth:`Journal.write`; made into a record only when read (most never are: a
        trace replay's AMs are never restarted)."""
        self._written.append((self.now() if at is None else at, kind, fields))

    def records(self) -> list[dict]:
        if not self._written:
            return []
        return [{"t": round(float(t), 6), "kind": kind,
                 **{name: _plain(value) for name, value in fields.items()}} for t, kind, fields in self._written]

    def close(self) -> None:
        self.closed = True


class NoJournal:
    """A journal that keeps nothing, for an AM that is never restarted and whose journal
    nobody reads (trace replay: tens of thousands of jobs). It says so
    (:attr:`keeps_nothing`), and its AM then attaches no observer to keep the journal's
    events (:mod:`~gangmaster.am.core.gang_events`): no record is built at all, and what the AM
    decides is the same."""

    keeps_nothing = True
    closed = False

    def write(self, kind: str, at: float | None = None, **fields) -> None:
        """Keeps nothing."""

    def records(self) -> list[dict]:
        return []

    def close(self) -> None:
        self.closed = True


def _plain(value):
    return value.to_dict() if hasattr(value, "to_dict") else value


def read_records(path: str | Path) -> list[dict]:
    """Every complete record of the journal at ``path`` ([] when there is none)."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue            # the AM was killed while writing this line
        if isinstance(record, dict) and "kind" in record:
            records.append(record)
    return records


#: Outcomes after which a job is over for good; a killed job can be resumed.
FINAL_OUTCOMES = ("succeeded", "failed")


@dataclass
class JournalState:
    """What a journal says of its job (see the module docstring)."""

    am_attempts: list[int] = field(default_factory=list)
    app_id: str = ""               # the application of the latest AM
    job: str = ""                  # the job's name, as the latest AM wrote it
    gang_events: list[dict] = field(default_factory=list)   # the gangs' lines, in order (see the module docstring)
    outcome: str | None = None     # succeeded | failed | killed, once the job ended
    reason: str = ""
    last_time: float = 0.0         # the AM's clock at the latest record

    @property
    def empty(self) -> bool:
        return not self.am_attempts

    @property
    def finished(self) -> bool:
        """The job is over for good: running it again would change nothing."""
        return self.outcome in FINAL_OUTCOMES


#: The lines of the job itself; every other line is a gang's.
_JOB_KINDS = frozenset({"am_started", "resumed", "job_finished", "am_stopped"})


def read_state(records: list[dict]) -> JournalState:
    """The job's facts in ``records``, and its gangs' lines to replay (see the module docstring)."""
    state = JournalState()
    for r in records:
        kind = r["kind"]
        state.last_time = float(r.get("t", state.last_time))
        if kind not in _JOB_KINDS:
            state.gang_events.append(r)
        elif kind == "am_started":
            state.am_attempts.append(int(r["am_attempt"]))
            state.app_id, state.job = r.get("app_id", ""), r.get("job", "")
        elif kind == "resumed":
            state.outcome, state.reason = None, ""
        elif kind == "job_finished":
            state.outcome, state.reason = r["outcome"], r.get("reason", "")
    return state


def avoidance_drops(state: JournalState) -> list[tuple[str, int, str]]:
    """(gang, attempt, role) of each ``avoidance_dropped`` line, in order: what the run
    report says of them (recovery has nothing to replay of these lines)."""
    return [(r["gang"], int(r["attempt"]), r["role"]) for r in state.gang_events if r["kind"] == "avoidance_dropped"]


ENDING_KINDS = ("tasks_finished", "task_finished")


def task_endings(records: list[dict]) -> list[dict]:
    """Every task end in ``records``, in order, one dict per task: gang, attempt, role, index,
    state, exit_status, diagnostics, finished_at."""
    return [end for r in records if r["kind"] in ENDING_KINDS for end in endings_of(r)]


def endings_of(record: dict) -> list[dict]:
    """The task ends one line of :data:`ENDING_KINDS` records, one dict per task (as :func:`task_endings`)."""
    common = {"gang": record["gang"], "attempt": record["attempt"], "finished_at": record.get("finished_at")}
    if record["kind"] == "task_finished":
        return [{**common, **{key: record[key] for key in ("role", "index", "state", "exit_status", "diagnostics")}}]
    return [{**common, "role": role, "index": index, "state": state, "exit_status": exit_status,
             "diagnostics": diagnostics} for role, index, state, exit_status, diagnostics in record["tasks"]]
