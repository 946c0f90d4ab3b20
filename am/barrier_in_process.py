"""The barrier coordinator in process, on a simulation's clock: :class:`InProcessBarrier`.

In simulation the AM drives a barrier exactly as it does live (it is a
:class:`~gangmaster.am.gang_barrier.GangBarrier`), and the simulated tasks call it
directly instead of over gRPC (:meth:`InProcessBarrier.arrive`). Underneath is the
same :class:`~gangmaster.am.barrier.BarrierCoordinator` the gRPC server wraps, reading
the simulation's clock; an epoch's deadline is a call scheduled on that clock, so a
barrier timeout fires in virtual time, and no call stays scheduled once no epoch is
running (a driver that asks whether anything is still to come gets a true answer)::

    loop = VirtualLoop()
    barrier = InProcessBarrier(loop)
    token = barrier.open_attempt("job", "gang", 1, [TaskInfo(0, "h0"), TaskInfo(1, "h1")], timeout_s=30)
    outcomes = []
    barrier.arrive(Arrival("job", "gang", 1, token, task=0, epoch=0), outcomes.append)
    loop.run_until(60)            # task 1 never arrived: task 0 got a BarrierTimeout at t=30

Tokens are numbered, not random: nothing outside the process can call this
coordinator, and numbered tokens let a simulation replay byte for byte (the AM
journals them).
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Protocol, Sequence

from .barrier import YEAR_S, Arrival, BarrierCoordinator, Callback, CoordinatorStatistics, TaskInfo, Waiter
from .context import attempt_env, task_env

__all__ = ["InProcessBarrier", "IN_PROCESS_ADDRESS"]

#: What tasks find as their coordinator's address (``GANGMASTER_BARRIER_ADDRESS``):
#: not a network address; only a simulated task, in this process, can reach it.
IN_PROCESS_ADDRESS = "in-process"


class _Handle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """The clock of a simulation (``tools.rmsim.clock.VirtualLoop`` is one)."""

    def now(self) -> float: ...

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> _Handle: ...


class InProcessBarrier:
    """A :class:`~gangmaster.am.gang_barrier.GangBarrier` for simulation (see the module docstring)."""

    address = IN_PROCESS_ADDRESS

    def __init__(self, loop: Scheduler, default_timeout_s: float = YEAR_S):
        self.loop = loop
        self.coordinator = BarrierCoordinator(clock=loop, default_timeout_s=default_timeout_s)
        self._tokens = itertools.count(1)
        self._timer: _Handle | None = None
        self._timer_at: float | None = None
        self._armed_at = -1   # the coordinator's deadline_changes when the timer was last set

    # ----------------------------------------------------------- the AM's side
    def open_attempt(self, job: str, gang: str, attempt: int, tasks: Sequence[TaskInfo],
                     timeout_s: float | None = None, token: str | None = None) -> str:
        token = token or f"in-process-{next(self._tokens)}"
        try:
            return self.coordinator.open_attempt(job, gang, attempt, tasks, token=token, timeout_s=timeout_s)
        finally:
            self._arm()   # a superseded attempt's running epoch has ended

    def task_env(self, job: str, gang: str, attempt: int, index: int) -> dict[str, str]:
        token, tasks = self.coordinator.attempt_tasks(job, gang, attempt)
        return task_env(self.address, job, gang, attempt, token, tasks[index], len(tasks))

    def attempt_env(self, job: str, gang: str, attempt: int, token: str, count: int) -> dict[str, str]:
        return attempt_env(self.address, job, gang, attempt, token, count)

    def close_attempt(self, job: str, gang: str, attempt: int) -> int:
        try:
            return self.coordinator.close_attempt(job, gang, attempt)
        finally:
            self._arm()

    def fail_attempt(self, job: str, gang: str, attempt: int, reason: str) -> int:
        try:
            return self.coordinator.fail_attempt(job, gang, attempt, reason)
        finally:
            self._arm()

    def statistics(self) -> CoordinatorStatistics:
        return self.coordinator.statistics()

    # ---------------------------------------------------------- the tasks' side
    def arrive(self, arrival: Arrival, callback: Callback) -> Waiter:
        """A simulated task's ``barrier()`` call: as
        :meth:`BarrierCoordinator.arrive <gangmaster.am.barrier.BarrierCoordinator.arrive>`
        (raises a ``BarrierError`` at once, or calls ``callback`` once with the outcome)."""
        try:
            return self.coordinator.arrive(arrival, callback)
        finally:
            # Only the first arrival of an epoch starts its deadline, and the last one (or a
            # failure) ends it: the arrivals in between (thousands, in a big gang) change
            # nothing, and _arm sees that without asking the coordinator for its deadline.
            self._arm()

    def withdraw(self, waiter: Waiter) -> None:
        """The task behind ``waiter`` is gone (its container was stopped): it is told
        nothing more. Its arrival stays counted, as a killed process's does at the gRPC
        coordinator."""
        self.coordinator.withdraw(waiter)

    # ------------------------------------------------------------------- time
    def _arm(self) -> None:
        """Keep exactly one call scheduled, at the coordinator's next epoch deadline (none
        when no epoch is running): set again only when the coordinator's deadlines changed."""
        if self.coordinator.deadline_changes != self._armed_at:
            self._rearm()

    def _rearm(self) -> None:
        self._armed_at = self.coordinator.deadline_changes
        deadline = self.coordinator.next_deadline()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None
        if deadline is not None:
            self._timer_at = deadline
            self._timer = self.loop.call_at(deadline, self._on_deadline)

    def _on_deadline(self) -> None:
        self._timer = self._timer_at = None
        self.coordinator.expire()
        self._rearm()
