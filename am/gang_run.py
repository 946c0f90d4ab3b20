"""One gang of a job and its current attempt: the AM's unit of decision.

An attempt moves ``waiting → acquiring → launching → running → succeeded |
failed`` (:class:`~gangmaster.am.lifecycle.RoleState`). While it waits or
acquires, its :class:`~gangmaster.am.acquisition.GangAcquisition` holds the asks
and grants; once launched, its tasks. The gang keeps its count of running tasks,
and of ended ones by role and outcome, as the tasks end, so a decision about the
gang (did a role reach its failure threshold? is every task done?) reads counters
instead of walking every task of every gang.
"""
from __future__ import annotations

from collections import Counter
from types import MappingProxyType
from typing import Mapping, Sequence

from .acquisition import GangAcquisition
from .jobspec_model import JobSpec, RoleSpec, gang_name
from .journal import JournalState
from .lifecycle import (ROLE_ACQUIRING, ROLE_FAILED, ROLE_RUNNING, ROLE_SUCCEEDED, ROLE_WAITING, TASK_FAILED,
                        TASK_RUNNING, TASK_SUCCEEDED, AttemptRecord, RoleState, TaskRecord, TaskState)


#: The states of a gang not started yet.
PENDING = (ROLE_WAITING, ROLE_ACQUIRING)

#: The counts of an attempt without tasks (read only).
_NONE_YET: Mapping = MappingProxyType({})


class GangRun:
    """One gang and its current attempt; two are equal only when they are the same one."""

    acquisition: GangAcquisition | None = None   # while it waits or acquires
    barrier_open = False
    #: (placement, view, its changes) when the AM's never-fits check placed the gang on the
    #: idle cluster itself: its first placement, while that view stays unchanged (used once)
    placed_at_start: tuple | None = None
    # Counted from ``tasks`` as they change (plain dicts: read them with ``.get(key, 0)``),
    # made when the attempt has tasks; until then none, read from the class:
    succeeded: Mapping[str, int] = _NONE_YET        # per role: tasks of this attempt that succeeded
    failed: Mapping[str, int] = _NONE_YET           # per role: tasks of this attempt that failed
    running = 0                                     # tasks of this attempt running now

    def __init__(self, name: str, roles: tuple[RoleSpec, ...], attempt: int, state: RoleState,
                 record: AttemptRecord, *, tasks: list[TaskRecord] | None = None,
                 history: list[AttemptRecord] | None = None):
        self.name, self.roles, self.attempt, self.state, self.record = name, roles, attempt, state, record
        self.tasks: list[TaskRecord] = [] if tasks is None else tasks
        self.history: list[AttemptRecord] = [] if history is None else history
        if tasks:
            self._recount()

    def __repr__(self) -> str:
        return f"GangRun({self.name!r}, attempt {self.attempt}, {self.state.value})"

    @property
    def pending(self) -> bool:
        """Waiting for, or acquiring, its containers."""
        return self.state in PENDING

    def launched(self, tasks: list[TaskRecord]) -> None:
        """Every container of the attempt was started (or refused): the tasks are its own, as
        a journal recorded them (any of them may have ended since)."""
        self.tasks = self.record.tasks = tasks
        self._recount()

    def started(self, tasks: list[TaskRecord]) -> None:
        """The AM has just started every container of the attempt: the tasks are its own, all
        running but the last when the RM refused to start it (those after it were never
        started, and are not tasks). As :meth:`launched`, without counting them one by one."""
        self.tasks = self.record.tasks = tasks
        self.succeeded, self.failed = {}, {}
        last = tasks[-1]
        if last.state is TASK_RUNNING:
            self.running = len(tasks)
        else:
            self.running = len(tasks) - 1
            self._count_ended(last)

    def end_task(self, task: TaskRecord, state: TaskState, now: float, diagnostics: str,
                 exit_status: int | None = None) -> None:
        """A running task of this attempt ended (by itself, or stopped by the AM)."""
        self.running -= 1   # it was running
        task.state, task.finished_at, task.diagnostics, task.exit_status = state, now, diagnostics, exit_status
        self._count_ended(task)

    @property
    def finished_tasks(self) -> int:
        return len(self.tasks) - self.running

    @property
    def by_state(self) -> Counter[TaskState]:
        """Tasks of this attempt by TaskState, counted now (read when the gauges are scraped,
        maybe from another thread: it counts a copy of the list)."""
        return Counter([t.state for t in list(self.tasks)])

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        return dict(self.succeeded), dict(self.failed)

    def role_state(self, role: RoleSpec) -> RoleState:
        if self.state is not ROLE_RUNNING:
            return self.state
        if role.completion.failed(self.failed.get(role.name, 0)):
            return ROLE_FAILED
        if not any(t.state is TASK_RUNNING for t in self.tasks if t.role == role.name):
            return ROLE_SUCCEEDED
        return ROLE_RUNNING

    def _recount(self) -> None:
        self.succeeded, self.failed = {}, {}
        running = 0
        for task in self.tasks:
            if task.state is TASK_RUNNING:
                running += 1
            else:
                self._count_ended(task)
        self.running = running

    def _count_ended(self, task: TaskRecord) -> None:
        """Count ``task`` in its role's successes or failures, if it ended so."""
        state = task.state
        if state is TASK_SUCCEEDED:
            self.succeeded[task.role] = self.succeeded.get(task.role, 0) + 1
        elif state is TASK_FAILED:
            self.failed[task.role] = self.failed.get(task.role, 0) + 1


def recorded_gangs(job: JobSpec, journal: JournalState) -> list[GangRun]:
    """The job's gangs as a journal left them, every attempt in their history: what a
    report of a finished run shows, without an AM."""
    gangs = []
    for number, names in enumerate(job.gangs):
        saved = journal.gangs.get(gang_name(names))
        if saved is not None and saved.history:
            last = saved.history[-1]
            state = ROLE_SUCCEEDED if last.outcome == "succeeded" else ROLE_FAILED
            gangs.append(GangRun(last.gang, job.gang_roles(number), last.attempt, state, last,
                                 tasks=last.tasks, history=list(saved.history)))
    return gangs


def attempt_history(gangs: Sequence[GangRun]) -> list[AttemptRecord]:
    """Every attempt of every gang, finished ones first, in the order they ended."""
    ended = sorted((a for g in gangs for a in g.history), key=lambda a: (a.ended_at or 0, a.gang))
    current = [g.record for g in gangs if not g.record.outcome]
    return ended + current


def failure(task: TaskRecord) -> str:
    """How a failed task failed, in one phrase."""
    if task.launch_failed:
        return f"task {task.name} could not be launched on {task.host}: {task.diagnostics}"
    return f"{task.name} exited with status {task.exit_status} on {task.host}"


def failed_attempts(gangs: Sequence[GangRun]) -> int:
    """How many attempts of these gangs failed (gangs restarted together share attempt numbers)."""
    return len({a.attempt for g in gangs for a in g.history if a.outcome == "failed"})
