"""What the AM knows about its tasks: states, one record per task of an attempt,
and the history of every attempt (which task failed, how, and where).

A gang's roles move together through ``waiting → acquiring → launching →
running``; once running, each role ends ``succeeded`` or ``failed`` by its
completion policy. Every record here is plain data: the journal writes it as
JSON and a restarted AM reads it back (:meth:`to_dict` / :meth:`from_dict`).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class RoleState(str, enum.Enum):
    WAITING = "waiting"        # not asking yet: before the first try, or backing off after a release
    ACQUIRING = "acquiring"    # asking the RM for every instance of the gang; nothing started
    LAUNCHING = "launching"    # every instance granted; containers being started
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (RoleState.SUCCEEDED, RoleState.FAILED)


class TaskState(str, enum.Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"      # stopped by the AM when its attempt ended for another reason


# The members again as module names, for the code that reads them at every step of every
# gang (the AM's): reading a member off its Enum class goes through EnumType's __getattr__
# hook, about ten times the cost of reading a module's name.
ROLE_WAITING, ROLE_ACQUIRING, ROLE_LAUNCHING = RoleState.WAITING, RoleState.ACQUIRING, RoleState.LAUNCHING
ROLE_RUNNING, ROLE_SUCCEEDED, ROLE_FAILED = RoleState.RUNNING, RoleState.SUCCEEDED, RoleState.FAILED
TASK_RUNNING, TASK_SUCCEEDED, TASK_FAILED, TASK_STOPPED = (TaskState.RUNNING, TaskState.SUCCEEDED, TaskState.FAILED,
                                                           TaskState.STOPPED)


@dataclass
class TaskRecord:
    """One instance of a role in one attempt, from the moment it was started."""

    role: str
    index: int                 # instance index within the role
    rank: int                  # index within the gang (barrier task index)
    container_id: str
    host: str
    gpus: tuple[int, ...]
    ports: dict[str, int]
    started_at: float
    state: TaskState = TaskState.RUNNING
    exit_status: int | None = None     # None on a FAILED task: it never ran (the RM could not start it)
    diagnostics: str = ""
    finished_at: float | None = None
    gpu_milli: int = 0         # a share of its one GPU (``gpus``), in milli-GPU; 0: its GPUs whole

    @property
    def name(self) -> str:
        return f"{self.role}[{self.index}]"

    @property
    def launch_failed(self) -> bool:
        """The RM could not start this task's container (``diagnostics`` says why)."""
        return self.state is TaskState.FAILED and self.exit_status is None

    def where(self) -> str:
        gpus = (",".join(map(str, self.gpus)) or "-") + (f" share={self.gpu_milli}m" if self.gpu_milli else "")
        ports = ",".join(f"{k}={v}" for k, v in self.ports.items()) or "-"
        return f"{self.host} gpus={gpus} ports={ports}"

    def to_dict(self) -> dict:
        # by hand: dataclasses.asdict deep-copies every field, and a 6,000-task launch writes them all
        return {"role": self.role, "index": self.index, "rank": self.rank, "container_id": self.container_id,
                "host": self.host, "gpus": list(self.gpus), "ports": dict(self.ports),
                "started_at": self.started_at, "state": self.state.value, "exit_status": self.exit_status,
                "diagnostics": self.diagnostics, "finished_at": self.finished_at, "gpu_milli": self.gpu_milli}

    @classmethod
    def from_dict(cls, data: dict) -> "TaskRecord":
        data = dict(data)
        data["state"] = TaskState(data["state"])
        data["gpus"] = tuple(data["gpus"])
        return cls(**data)


class LaunchedTasks:
    """An attempt's tasks as they were when it launched: what the journal's ``launched``
    record holds, as the list of their dicts (:meth:`to_dict`). A journal in memory makes
    that list only if it is read (a trace replay's AMs are never restarted), so what of a
    task can change after its launch (state, exit status, diagnostics, end) is kept here as
    it was then: each task was running then (its end unknown) but the last one when the RM
    refused to start it (the launch stopped there), which had already failed (kept as it
    ended); the rest of a task never changes."""

    __slots__ = ("tasks", "refused")

    def __init__(self, tasks: list[TaskRecord]):
        self.tasks = tuple(tasks)
        #: (state, exit status, diagnostics, end) of the last task when it was not running at the launch
        self.refused = None
        if tasks and tasks[-1].state is not TASK_RUNNING:
            last = tasks[-1]
            self.refused = (last.state, last.exit_status, last.diagnostics, last.finished_at)

    def to_dict(self) -> list[dict]:
        out = []
        last = len(self.tasks) - 1
        for i, task in enumerate(self.tasks):
            state, exit_status, diagnostics, finished_at = (self.refused if i == last and self.refused is not None
                                                            else _RUNNING_END)
            data = task.to_dict()
            data.update(state=state.value, exit_status=exit_status, diagnostics=diagnostics, finished_at=finished_at)
            out.append(data)
        return out


#: What a running task's end is: not known yet.
_RUNNING_END = (TaskState.RUNNING, None, "", None)


class TaskEndings:
    """Tasks that ended, as the journal's ``tasks_finished`` record holds them: the list of
    ``[role, index, state, exit_status, diagnostics]`` of each (:meth:`to_dict`), made only
    when read (a journal in memory seldom is). An ended task never changes again."""

    __slots__ = ("tasks",)

    def __init__(self, tasks: list[TaskRecord]):
        self.tasks = tasks

    def to_dict(self) -> list[list]:
        return [[t.role, t.index, t.state.value, t.exit_status, t.diagnostics] for t in self.tasks]


class AttemptRecord:
    """One attempt of one gang: when, where every task ran, and how it ended. What an
    attempt has not reached yet (a start, an end, a release) reads as the class's default:
    a gang attempt begins with three fields known, and a replay begins tens of thousands."""

    started_at: float | None = None       # every task started
    ended_at: float | None = None
    outcome = ""                           # "" (in progress) | succeeded | failed | stopped | preempted
    reason = ""
    releases = 0                           # partial holds given back while acquiring
    reselections = 0                       # instances selected again after the RM would not grant them

    #: every field, in the order :meth:`to_dict` writes them
    FIELDS = ("gang", "attempt", "waiting_since", "started_at", "ended_at", "outcome", "reason", "releases",
              "reselections", "tasks")

    def __init__(self, gang: str, attempt: int, waiting_since: float, started_at: float | None = None, *,
                 tasks: list[TaskRecord] | None = None, **ended):
        """``ended``: any of the fields an attempt gets as it ends (``ended_at``, ``outcome``,
        ``reason``, ``releases``, ``reselections``)."""
        self.gang, self.attempt, self.waiting_since = gang, attempt, waiting_since
        self.tasks: list[TaskRecord] = [] if tasks is None else tasks
        if started_at is not None:
            self.started_at = started_at
        if ended:
            for name, value in ended.items():
                if name not in _ENDED_FIELDS:
                    raise TypeError(f"AttemptRecord has no field {name!r}")
                setattr(self, name, value)

    def __repr__(self) -> str:
        return "AttemptRecord(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS) + ")"

    def __eq__(self, other: object) -> bool:
        if type(other) is not AttemptRecord:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.FIELDS)

    __hash__ = None   # changes as the attempt goes on (as the dataclass it was)

    def failures(self) -> list[TaskRecord]:
        return [t for t in self.tasks if t.state is TaskState.FAILED]

    def to_dict(self) -> dict:
        data = {name: getattr(self, name) for name in self.FIELDS}
        data["tasks"] = [t.to_dict() for t in self.tasks]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "AttemptRecord":
        data = dict(data)
        data["tasks"] = [TaskRecord.from_dict(t) for t in data["tasks"]]
        return cls(**data)


_ENDED_FIELDS = frozenset(AttemptRecord.FIELDS[4:9])
