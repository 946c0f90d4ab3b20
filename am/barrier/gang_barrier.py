"""What the AM asks of a barrier coordinator: :class:`GangBarrier`.

The AM opens a gang attempt's barrier before it starts the gang's tasks, gives them all
:meth:`~GangBarrier.attempt_env` and each its own part
(:func:`gangmaster.am.barrier.task_context.own_env`), and ends the attempt
with :meth:`~GangBarrier.close_attempt` (it succeeded) or
:meth:`~GangBarrier.fail_attempt` (every waiting task is told at once). Two
implementations, one per way of running, so the AM never asks which it has:

* :class:`gangmaster.am.barrier.cq_server.CompletionQueueBarrierServer` — live: the
  coordinator served over gRPC to real task processes (the AM's; its grpc.aio twin
  :class:`gangmaster.am.barrier.server.BarrierServer` serves the same, for code running it
  in an event loop);
* :class:`gangmaster.am.barrier.in_process.InProcessBarrier` — simulation: the same
  coordinator on the simulation's virtual clock, which simulated tasks call in process.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from .coordinator import TaskInfo

__all__ = ["GangBarrier"]


class GangBarrier(Protocol):
    """A barrier coordinator as the AM drives it (see the module docstring)."""

    def open_attempt(self, job: str, gang: str, attempt: int, tasks: Sequence[TaskInfo],
                     timeout_s: float | None = None, token: str | None = None) -> str:
        """Open the barrier of a gang attempt (superseding an older open attempt of the
        gang) and return its secret token. ``timeout_s``: how long an epoch may wait
        for its last task (None: the coordinator's default). ``token``: reopen with the
        token the running tasks already hold (AM failover). ``ValueError`` when the
        attempt was already opened."""
        ...

    def task_env(self, job: str, gang: str, attempt: int, index: int) -> dict[str, str]:
        """The environment task ``index`` of an open attempt needs to reach its barrier
        (``KeyError`` when the attempt is not open)."""
        ...

    def attempt_env(self, job: str, gang: str, attempt: int, token: str, count: int) -> dict[str, str]:
        """What :meth:`task_env` gives every task of an attempt opened with ``token`` for
        ``count`` tasks alike: all of it but the task's own part
        (:func:`gangmaster.am.barrier.task_context.own_env`), in one mapping for the gang (what the AM
        asks when it launches the gang: the coordinator's address and options, the attempt's
        names and token)."""
        ...

    def close_attempt(self, job: str, gang: str, attempt: int) -> int:
        """The attempt finished; returns how many calls were still waiting (they fail)."""
        ...

    def fail_attempt(self, job: str, gang: str, attempt: int, reason: str) -> int:
        """Fail every waiting call of the attempt now; returns how many were waiting."""
        ...

    def waiting_tasks(self, job: str) -> int:
        """How many tasks of ``job``'s open attempts have a call waiting here now (the AM's
        ``gangmaster_barrier_waiting_tasks`` gauge)."""
        ...
