"""One gang of a job and its current attempt: the AM's unit of decision.

An attempt moves ``waiting → acquiring → launching → running → succeeded |
failed`` (:class:`~gangmaster.am.core.lifecycle.RoleState`), and only by the gang's own
methods (:meth:`GangRun.plan`, :meth:`~GangRun.launching`, :meth:`~GangRun.started`,
:meth:`~GangRun.task_ended`, :meth:`~GangRun.end_attempt`; :meth:`~GangRun.restart` begins
the next attempt), each of which tells the gang's observers what it did
(:mod:`~gangmaster.am.core.gang_events`: the journal among them). A restarted AM replays the
journal's events through the same methods (:func:`~gangmaster.am.core.recovery.replay_gangs`),
on a gang nobody observes yet (:meth:`GangRun.recorded`) until it carries on
(:meth:`GangRun.taken_over`). While it waits or
acquires, its :class:`~gangmaster.am.core.acquisition.GangAcquisition` holds the asks
and grants; once launched, its tasks. The gang keeps its count of running tasks,
and of ended ones by role and outcome, as the tasks end, so a decision about the
gang (did a role reach its failure threshold? is every task done?) reads counters
instead of walking every task of every gang.
"""
from __future__ import annotations

from collections import Counter
from types import MappingProxyType
from typing import Mapping, Sequence

from .acquisition import AcquisitionContext, GangAcquisition
from .gang_events import NO_EVENTS, GangEvents
from gangmaster.am.spec.jobspec_model import RoleSpec
from .lifecycle import (ROLE_ACQUIRING, ROLE_FAILED, ROLE_LAUNCHING, ROLE_RUNNING, ROLE_SUCCEEDED, ROLE_WAITING,
                        TASK_FAILED, TASK_RUNNING, TASK_STOPPED, TASK_SUCCEEDED, AttemptRecord, RoleState, TaskRecord,
                        TaskState)


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
    acquisition_context: AcquisitionContext | None = None   # what its attempts' acquisitions share
    # Counted from ``tasks`` as they change (plain dicts: read them with ``.get(key, 0)``),
    # made when the attempt has tasks; until then none, read from the class:
    succeeded: Mapping[str, int] = _NONE_YET        # per role: tasks of this attempt that succeeded
    failed: Mapping[str, int] = _NONE_YET           # per role: tasks of this attempt that failed
    running = 0                                     # tasks of this attempt running now
    events: GangEvents = NO_EVENTS                  # told of each transition

    def __init__(self, name: str, roles: tuple[RoleSpec, ...], attempt: int, state: RoleState,
                 record: AttemptRecord, *, tasks: list[TaskRecord] | None = None,
                 history: list[AttemptRecord] | None = None, events: GangEvents | None = None):
        """``events``: told of each transition (none: nobody is)."""
        self.name, self.roles, self.attempt, self.state, self.record = name, roles, attempt, state, record
        if events is not None:
            self.events = events
        self.tasks: list[TaskRecord] = [] if tasks is None else tasks
        self.history: list[AttemptRecord] = [] if history is None else history
        if tasks:
            self._recount()

    @classmethod
    def begin(cls, name: str, roles: tuple[RoleSpec, ...], attempt: int, history: list[AttemptRecord],
              context: AcquisitionContext, now: float, waiting_since: float | None = None) -> "GangRun":
        """A gang attempt begins: waiting, with nothing asked yet, its acquisition sharing
        ``context`` (and its observers); with ``waiting_since`` it is one a journal recorded
        already (its observers hear of it as not new)."""
        since = now if waiting_since is None else waiting_since
        events = context.events
        gang = cls(name, roles, attempt, ROLE_WAITING, AttemptRecord(name, attempt, since), history=history,
                   events=events)
        gang.acquisition = GangAcquisition(name, roles, context)
        gang.acquisition_context = context
        events.attempt_began(gang, now, waiting_since is None)
        return gang

    @classmethod
    def recorded(cls, name: str, roles: tuple[RoleSpec, ...], attempt: int, waiting_since: float,
                 history: list[AttemptRecord]) -> "GangRun":
        """A gang attempt as a journal recorded its beginning: waiting since ``waiting_since``,
        with no acquisition and no observer (a replay of the journal tells nobody again)."""
        return cls(name, roles, attempt, ROLE_WAITING, AttemptRecord(name, attempt, waiting_since), history=history)

    def taken_over(self, context: AcquisitionContext, now: float) -> None:
        """A gang replayed from a journal (:meth:`recorded`) carries on under a new AM: its
        observers and acquisitions are that AM's (``context``), and an attempt still waiting
        acquires again from nothing. Its observers hear of it as not new."""
        self.events, self.acquisition_context = context.events, context
        if self.state is ROLE_WAITING:
            self.acquisition = GangAcquisition(self.name, self.roles, context)
        self.events.attempt_began(self, now, False)

    def restart(self, now: float) -> "GangRun":
        """The next attempt of this gang (this one has ended), waiting."""
        return GangRun.begin(self.name, self.roles, self.attempt + 1, self.history, self.acquisition_context, now)

    def __repr__(self) -> str:
        return f"GangRun({self.name!r}, attempt {self.attempt}, {self.state.value})"

    @property
    def pending(self) -> bool:
        """Waiting for, or acquiring, its containers."""
        return self.state in PENDING

    # ------------------------------------------------------------ transitions
    def plan(self, now: float, view_source, place, cluster_growth: int) -> None:
        """Decide this heartbeat's asks, cancels and releases (:meth:`GangAcquisition.plan`):
        acquiring while it holds or asks for anything, else waiting."""
        acq = self.acquisition
        if acq.found_no_room and acq.first_grant_at is None and acq.stalled(now, cluster_growth):
            # Holding and asking for nothing, and nothing new could let it fit (only a gang whose
            # last placement found no room can be stalled: the first test): planning would
            # change nothing (releases and reselections happen only in it), so a stuck gang
            # costs this one check a heartbeat.
            self.state = ROLE_WAITING
            return
        releases, reselections = acq.release_count, acq.reselections
        acq.plan(now, view_source, place, cluster_growth)
        if acq.reselections != reselections:
            self.reselected(acq.reselections - reselections)
        if acq.release_count != releases:
            self.released(acq.last_released, now)
        self.state = ROLE_ACQUIRING if acq.by_request or acq.by_container else ROLE_WAITING

    def reselected(self, count: int) -> None:
        """``count`` instances were selected again (the RM would not grant their asks)."""
        self.record.reselections += count
        self.events.reselected(self, count)

    def released(self, containers: list[str], now: float) -> None:
        """The partial hold (``containers``) was given back: it timed out."""
        self.record.releases += 1
        self.events.released(self, containers, now)

    def launching(self) -> None:
        """Every instance is granted: its containers are being started."""
        self.state = ROLE_LAUNCHING

    def task_ended(self, task: TaskRecord, exit_status: int | None, diagnostics: str, now: float) -> None:
        """A running task of this attempt ended by itself (exit status 0: it succeeded)."""
        self.end_task(task, TASK_SUCCEEDED if exit_status == 0 else TASK_FAILED, now, diagnostics, exit_status)
        self.events.task_ended(self, task, now)

    def end_attempt(self, outcome: str, reason: str, now: float) -> list[TaskRecord]:
        """The attempt ends ``outcome`` (succeeded, failed, stopped, preempted) for ``reason``: its
        running tasks are stopped, what it holds or asks for is given back (into the
        outbox), and it joins the history. Returns the tasks it stopped (the caller stops
        their containers)."""
        stopped = []
        if self.running:
            for task in self.tasks:
                if task.state is TASK_RUNNING:
                    stopped.append(task)
                    self.end_task(task, TASK_STOPPED, now, "stopped: its attempt ended")
        elif self.state in PENDING and self.acquisition is not None:
            self.acquisition.abandon()   # (into the outbox)
        record = self.record
        record.ended_at, record.outcome, record.reason, record.tasks = now, outcome, reason, self.tasks
        self.history.append(record)
        self.state = ROLE_SUCCEEDED if outcome == "succeeded" else ROLE_FAILED
        self.events.attempt_ended(self, now)
        return stopped

    def launched(self, tasks: list[TaskRecord], started_at: float) -> None:
        """Every container of the attempt was started (or refused) at ``started_at``, as a
        journal recorded it: the tasks are its own (any of them may have ended since), and it runs."""
        self.acquisition = None
        self.tasks = self.record.tasks = tasks
        self._recount()
        self.state, self.record.started_at = ROLE_RUNNING, started_at

    def started(self, tasks: list[TaskRecord], token: str | None, now: float) -> None:
        """The AM has just started every container of the attempt (its barrier's ``token``):
        the tasks are its own, all running but the last when the RM refused to start it
        (those after it were never started, and are not tasks), and it runs. As
        :meth:`launched`, without counting them one by one."""
        self.tasks = self.record.tasks = tasks
        self.succeeded, self.failed = {}, {}
        last = tasks[-1]
        refused = last.state is not TASK_RUNNING
        if refused:
            self.running = len(tasks) - 1
            self._count_ended(last)
        else:
            self.running = len(tasks)
        self.state, self.record.started_at = ROLE_RUNNING, now
        self.events.launched(self, token, now, refused)

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


def task_counts(gangs: Sequence[GangRun]) -> tuple[Mapping[str, int], Mapping[str, int]]:
    """Per role, the tasks of the gangs' current attempts that succeeded, and those that
    failed: what the job's completion policy decides on (``JobSpec.verdict``)."""
    if len(gangs) == 1:   # most jobs: the gang's own counts are the job's
        return gangs[0].succeeded, gangs[0].failed
    succeeded: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for g in gangs:
        succeeded.update(g.succeeded)
        failed.update(g.failed)
    return succeeded, failed


def failed_attempts(gangs: Sequence[GangRun]) -> int:
    """How many attempts of these gangs failed (gangs restarted together share attempt numbers)."""
    return len({a.attempt for g in gangs for a in g.history if a.outcome == "failed"})
