"""The barrier coordinator in process, on a simulation's clock: :class:`InProcessBarrier`.

In simulation the AM drives a barrier exactly as it does live (it is a
:class:`~gangmaster.am.barrier.gang_barrier.GangBarrier`), and the simulated tasks call it
directly instead of over gRPC (:meth:`InProcessBarrier.call_barrier`). It is the same
:class:`~gangmaster.am.barrier.coordinator.BarrierCoordinator` the gRPC server wraps, reading the
simulation's clock; an epoch's deadline is a call scheduled on that clock, so a
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

import functools
import itertools
from typing import Any, Callable, Protocol

from .coordinator import YEAR_S, BarrierCoordinator
from .task_context import plain_attempt_env, task_env

__all__ = ["InProcessBarrier", "IN_PROCESS_ADDRESS"]

#: What tasks find as their coordinator's address (``GANGMASTER_BARRIER_ADDRESS``):
#: not a network address; only a simulated task, in this process, can reach it.
IN_PROCESS_ADDRESS = "in-process"


class Scheduler(Protocol):
    """The clock of a simulation (``tools.rmsim.clock.VirtualLoop`` is one)."""

    def now(self) -> float: ...

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> object: ...

    def cancel(self, handle: object) -> None: ...


class InProcessBarrier(BarrierCoordinator):
    """A :class:`~gangmaster.am.barrier.gang_barrier.GangBarrier` for simulation (see the module
    docstring): the coordinator itself, on the simulation's clock, with numbered tokens
    and one call kept scheduled at its next epoch deadline."""

    address = IN_PROCESS_ADDRESS

    def __init__(self, loop: Scheduler, default_timeout_s: float = YEAR_S):
        super().__init__(clock=loop, default_timeout_s=default_timeout_s,
                         new_token=map("in-process-{}".format, itertools.count(1)).__next__)
        self.loop = loop
        self._timer: object | None = None
        self._timer_at: float | None = None

    # ----------------------------------------------------------- the AM's side
    def task_env(self, job: str, gang: str, attempt: int, index: int) -> dict[str, str]:
        token, tasks = self.attempt_tasks(job, gang, attempt)
        return task_env(self.address, job, gang, attempt, token, tasks[index], len(tasks))

    #: ``attempt_env(job, gang, attempt, token, count)``: context.attempt_env at this address, with
    #: none of its options (nothing else can reach this coordinator).
    attempt_env = staticmethod(functools.partial(plain_attempt_env, IN_PROCESS_ADDRESS))

    # The tasks' side is the coordinator's: a simulated task's ``barrier()`` call is
    # :meth:`~gangmaster.am.barrier.coordinator.BarrierCoordinator.call_barrier` (it raises a ``BarrierError``
    # at once, returns the release of a call that released its epoch alone, or calls its callback
    # once with the outcome), and a task whose container was
    # stopped is withdrawn (:meth:`~gangmaster.am.barrier.coordinator.BarrierCoordinator.withdraw`): it
    # is told nothing more, and its arrival stays counted, as a killed process's does at the
    # gRPC coordinator.

    # ------------------------------------------------------------------- time
    def _deadlines_moved(self) -> None:
        """Keep exactly one call scheduled, at the next epoch deadline (none when no epoch
        is running). Only the first arrival of an epoch starts its deadline, and the last
        one (or a failure) ends it: the arrivals in between (thousands, in a big gang) and a
        gang of one task's whole life never come here."""
        deadline = self._next_deadline()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self.loop.cancel(self._timer)
        self._timer = self._timer_at = None
        if deadline is not None:
            self._timer_at = deadline
            self._timer = self.loop.call_at(deadline, self._on_deadline)

    def _on_deadline(self) -> None:
        self._timer = self._timer_at = None
        self.expire()
        with self._lock:
            self._deadlines_moved()
