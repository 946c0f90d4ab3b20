"""Every call the AM makes to its barrier coordinator, in one place.

A gang attempt's barrier is opened before its tasks start (each task's
environment gets what it needs to reach it), reopened by an AM that recovers a
running attempt, and ended with the attempt: closed when it succeeded, failed
otherwise, so every task waiting in it is told at once.

A barrier is the application's, not the job name's: the coordinator's first key (the
tasks' ``GANGMASTER_JOB``) is the application id. Two applications of one job name are
legitimate (``gangmaster run a.yaml a.yaml``, a job ``--after`` itself in ``diagnose``)
and meet at barriers of their own.

The coordinator is a :class:`~gangmaster.am.barrier.gang_barrier.GangBarrier`: the gRPC
coordinator in live runs, the in-process one on the virtual clock in simulation.
These are functions of the coordinator and the job, not an object each AM builds:
a trace replay starts tens of thousands of AMs on one coordinator.
"""
from __future__ import annotations

import operator
from typing import Callable, Sequence

from .coordinator import TaskInfo, new_task_info
from .gang_barrier import GangBarrier
from gangmaster.am.core.gang_run import GangRun
from gangmaster.am.spec.jobspec_model import JobSpec
from gangmaster.am.core.lifecycle import TaskRecord


def open_barrier(coordinator: GangBarrier, app_id: str, job: JobSpec, gang: GangRun,
                 tasks: Sequence[TaskRecord]) -> tuple[str, dict[str, str]]:
    """Open the attempt's barrier for ``tasks`` (by rank): its token and the environment
    every task needs alike to reach it (each adds its own part,
    :func:`gangmaster.am.barrier.task_context.own_env`)."""
    name, attempt = gang.name, gang.attempt
    token = coordinator.open_attempt(app_id, name, attempt, _infos(tasks), timeout_s=job.barrier_timeout_s)
    gang.barrier_open = True
    return token, coordinator.attempt_env(app_id, name, attempt, token, len(tasks))


def reopen_barrier(coordinator: GangBarrier, app_id: str, job: JobSpec, gang: GangRun, token: str | None,
                   log: Callable[[str], None]) -> None:
    """The recovered attempt's barrier: still open when the coordinator outlived the
    AM (it belongs to the driver); otherwise opened again with the token its tasks
    already hold, so their next call is accepted."""
    try:
        coordinator.task_env(app_id, gang.name, gang.attempt, 0)
    except KeyError:
        try:
            coordinator.open_attempt(app_id, gang.name, gang.attempt, _infos(gang.tasks), token=token,
                                     timeout_s=job.barrier_timeout_s)
        except ValueError as exc:
            # The coordinator outlived the AM and had already ended this attempt: the old AM
            # failed the barrier and died before it journaled the restart. The tasks were
            # told (or are told at their next call) and fail; their failures restart the gang.
            log(f"gang {gang.name} attempt {gang.attempt}: its barrier has already ended at the "
                f"coordinator ({exc}); its tasks are told at their next barrier call")
            gang.barrier_open = False
            return
    gang.barrier_open = True


def end_barrier(coordinator: GangBarrier, app_id: str, gang: GangRun, outcome: str, reason: str,
                log: Callable[[str], None]) -> None:
    """The attempt ended: close its barrier when it succeeded or was preempted (a preempted
    attempt ends once every task has ended: none waits), else fail it (every waiting task is
    told at once). Nothing when its barrier is not open."""
    if not gang.barrier_open:
        return
    if outcome in ("succeeded", "preempted"):
        coordinator.close_attempt(app_id, gang.name, gang.attempt)
    else:
        waiters = coordinator.fail_attempt(app_id, gang.name, gang.attempt,
                                           f"gang {gang.name} attempt {gang.attempt} ended ({outcome}): {reason}")
        log(f"gang {gang.name} attempt {gang.attempt}: barrier failed, {waiters} waiting task(s) told at once")
    gang.barrier_open = False


def _infos(tasks: Sequence[TaskRecord]) -> list[TaskInfo]:
    """What the coordinator keeps of each task: where it runs (rank 0's host file)."""
    return list(map(new_task_info, map(_WHERE, tasks)))


#: A task's rank, host, ports, role and index in its role: its TaskInfo's fields.
_WHERE = operator.attrgetter("rank", "host", "ports", "role", "index")
