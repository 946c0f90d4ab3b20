"""How an AM stops what it started: an attempt's barrier, its tasks, the job's open attempts.

An attempt ends barrier first (:func:`~gangmaster.am.barrier.attempt_barrier.end_barrier`: every
task waiting in it is told at once), then its running tasks are stopped at the RM; when
the job ends, every attempt still open ends with it (succeeded with a succeeded job, else
stopped). An RM that cannot stop a container is logged, not raised: the RM stops what is
left of an application when it ends.
"""
from __future__ import annotations

from typing import Callable, Sequence

from gangmaster.am.barrier.attempt_barrier import end_barrier
from .gang_launch import GangLauncher
from .gang_run import GangRun
from gangmaster.protocol.rm_protocol import RMError


class Shutdown:
    """Ends the attempts that ``launched`` started (:class:`~gangmaster.am.core.gang_launch.GangLauncher`:
    the same application, barrier coordinator, RM, and running tasks)."""

    __slots__ = ("launched", "log")

    def __init__(self, launched: GangLauncher, log: Callable[[str], None]):
        self.launched, self.log = launched, log

    def end_attempt(self, gang: GangRun, outcome: str, reason: str, now: float) -> None:
        """Fail the barrier first (waiters are told at once), then stop the tasks, then record."""
        launched = self.launched
        end_barrier(launched.coordinator, launched.app_id, gang, outcome, reason, self.log)
        for task in gang.end_attempt(outcome, reason, now):
            self.stop(task.container_id)
            launched.running.pop(task.container_id, None)

    def end_open_attempts(self, gangs: Sequence[GangRun], outcome: str, reason: str, now: float) -> None:
        """The job ended ``outcome``: the attempts still open end with it."""
        for gang in gangs:
            if not gang.record.outcome:
                if outcome == "succeeded":
                    self.end_attempt(gang, outcome, reason, now)
                else:
                    self.end_attempt(gang, "stopped", f"job {outcome}: {reason}", now)

    def stop(self, container_id: str) -> None:
        try:
            self.launched.rm.stop_container(container_id)
        except RMError as exc:
            self.log(f"stopping {container_id}: {exc}")
