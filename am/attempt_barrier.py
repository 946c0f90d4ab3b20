"""Every call the AM makes to its barrier coordinator, in one place.

A gang attempt's barrier is opened before its tasks start (each task's
environment gets what it needs to reach it), reopened by an AM that recovers a
running attempt, and ended with the attempt: closed when it succeeded, failed
otherwise, so every task waiting in it is told at once.

The coordinator is a :class:`~gangmaster.am.gang_barrier.GangBarrier`: the gRPC
coordinator in live runs, the in-process one on the virtual clock in simulation.
"""
from __future__ import annotations

from typing import Callable, Sequence

from .barrier import TaskInfo
from .gang_barrier import GangBarrier
from .gang_run import GangRun
from .lifecycle import TaskRecord


class AttemptBarrier:
    def __init__(self, coordinator: GangBarrier, job: str, timeout_s: float | None, log: Callable[[str], None]):
        self.coordinator = coordinator
        self.job, self.timeout_s, self.log = job, timeout_s, log

    def open(self, gang: GangRun, tasks: Sequence[TaskRecord]) -> tuple[str, dict[str, str]]:
        """Open the attempt's barrier for ``tasks`` (by rank): its token and the environment
        every task needs alike to reach it (each adds its own part,
        :func:`gangmaster.am.context.own_env`)."""
        token = self.coordinator.open_attempt(self.job, gang.name, gang.attempt, _infos(tasks),
                                              timeout_s=self.timeout_s)
        gang.barrier_open = True
        return token, self.coordinator.attempt_env(self.job, gang.name, gang.attempt, token, len(tasks))

    def reopen(self, gang: GangRun, token: str | None) -> None:
        """The recovered attempt's barrier: still open when the coordinator outlived the
        AM (it belongs to the driver); otherwise opened again with the token its tasks
        already hold, so their next call is accepted."""
        try:
            self.coordinator.task_env(self.job, gang.name, gang.attempt, 0)
        except KeyError:
            try:
                self.coordinator.open_attempt(self.job, gang.name, gang.attempt, _infos(gang.tasks), token=token,
                                              timeout_s=self.timeout_s)
            except ValueError as exc:
                # The coordinator outlived the AM and had already ended this attempt: the old AM
                # failed the barrier and died before it journaled the restart. The tasks were
                # told (or are told at their next call) and fail; their failures restart the gang.
                self.log(f"gang {gang.name} attempt {gang.attempt}: its barrier has already ended at the "
                         f"coordinator ({exc}); its tasks are told at their next barrier call")
                gang.barrier_open = False
                return
        gang.barrier_open = True

    def end(self, gang: GangRun, outcome: str, reason: str) -> None:
        """The attempt ended: close its barrier when it succeeded, else fail it (every waiting
        task is told at once)."""
        if not gang.barrier_open:
            return
        if outcome == "succeeded":
            self.coordinator.close_attempt(self.job, gang.name, gang.attempt)
        else:
            waiters = self.coordinator.fail_attempt(self.job, gang.name, gang.attempt,
                                                    f"gang {gang.name} attempt {gang.attempt} ended ({outcome}): "
                                                    f"{reason}")
            self.log(f"gang {gang.name} attempt {gang.attempt}: barrier failed, {waiters} waiting task(s) "
                     f"told at once")
        gang.barrier_open = False


def _infos(tasks: Sequence[TaskRecord]) -> list[TaskInfo]:
    """What the coordinator keeps of each task: where it runs (rank 0's host file)."""
    return [TaskInfo(t.rank, t.host, t.ports, t.role, t.index) for t in tasks]
