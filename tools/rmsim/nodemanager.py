"""NodeManagers: what "start a container" means in each mode.

* :class:`SimulatedNodeManager` (virtual time): nothing runs; what a started
  container does (meet its gang at the barrier, run so long, exit with some code)
  is the workload model's to say (:mod:`~gangmaster.tools.rmsim.workload`).
* :class:`~.process_nodemanager.ProcessNodeManager` (live, in its own module): a
  started container is a real local process, told where it "runs" through its
  environment (see :func:`~.process_nodemanager.container_env`), under a supervisor
  (:mod:`~gangmaster.tools.rmsim.supervisor`) that stops whatever the task
  leaves behind and writes the task's exit code to a file, so an RM restarted
  after ``kill -9`` can still learn how a task it did not spawn ended.

Both have ``bind(core)``, ``launch(rec, ctx)``, ``stop(rec)`` and ``adopt(rec)``
(take over a RUNNING container restored from a state file).
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Callable

from gangmaster.am.barrier.coordinator import Released, Waiter
from gangmaster.am.barrier.errors import BarrierError
from gangmaster.am.barrier.in_process import InProcessBarrier
from .collector import collector_paused
from gangmaster.am.barrier.task_context import (ENV_ADDRESS, ENV_ATTEMPT, ENV_GANG, ENV_JOB, ENV_TASK_INDEX, ENV_TOKEN,
                                   REQUIRED_ENV)
from gangmaster.protocol.rm_protocol import InvalidRequest, LaunchContext

from .process_nodemanager import ProcessNodeManager, container_env
from .workload import BARRIER_ERROR_EXIT_CODE, JobWorkload, TaskBehaviour, Workload

__all__ = ["SimulatedNodeManager", "ProcessNodeManager", "container_env"]

log = logging.getLogger(__name__)

class _ExitInstant(dict):
    """The containers that exit at one instant of virtual time: container id -> exit code,
    in the order they were started; and the clock's event for it (``timer``). A task run
    outside the RM (:meth:`SimulatedNodeManager.run_outside`) is there as its key -> the
    call that ends it."""

    __slots__ = ("timer",)


class SimulatedNodeManager:
    """Containers are timers on the virtual clock, as the workload model says.

    A task that joins its barrier calls ``barrier`` (the simulation's in-process
    coordinator) at epoch 0 when it starts, if its environment names that coordinator
    (a task given another one, e.g. a real coordinator a test wired to the AM, cannot
    reach it from here and runs without it); once released it runs its duration. A
    task told its barrier failed exits at once with
    :data:`~gangmaster.tools.rmsim.workload.BARRIER_ERROR_EXIT_CODE`. Without a
    ``barrier`` no task waits for one; without a ``workload`` no job is known."""

    #: A stopped container's resources are free at once: nothing of it runs on.
    frees_at_once = True

    def __init__(self, clock, workload: Workload | None = None, barrier: InProcessBarrier | None = None):
        self.clock = clock
        self.workload: Workload = workload if workload is not None else JobWorkload()
        self.barrier = barrier
        self.core = None
        self.exiting: dict[str, _ExitInstant] = {}      # container id -> the instant it exits, once known
        self._exiting_at: dict[float, _ExitInstant] = {}  # by its time
        self.waiting: dict[str, Waiter] = {}     # container id -> its call at the barrier
        self.notices: dict[str, float] = {}      # container id -> its preemption deadline, once told

    def bind(self, core) -> None:
        self.core = core

    def launch(self, rec, ctx: LaunchContext) -> None:
        env = ctx.variables
        task = self.workload.task(env)        # raises (and changes nothing) on an environment it cannot read
        cid = rec.container_id
        barrier = self.barrier
        if not task.joins_barrier or barrier is None or env.get(ENV_ADDRESS) != barrier.address:
            self._run(cid, task.duration_s, task.exit_code)   # it has no barrier here to call
            return
        try:   # the task's first barrier() call: epoch 0
            job, gang, token = env[ENV_JOB], env[ENV_GANG], env[ENV_TOKEN]
            attempt, index = int(env[ENV_ATTEMPT]), int(env[ENV_TASK_INDEX])
        except (KeyError, ValueError):
            raise InvalidRequest(f"launch.env: a barrier task needs {', '.join(REQUIRED_ENV)} "
                                 "(the AM's barrier task_env)") from None
        try:
            waiter = barrier.call_barrier(job, gang, attempt, token, index, 0, partial(self._told, cid, task))
        except BarrierError:
            self._run(cid, 0.0, BARRIER_ERROR_EXIT_CODE)
            return
        if waiter.__class__ is Released:   # it released its epoch alone (a gang of one task): it runs
            self._run(cid, task.duration_s, task.exit_code)
        elif not waiter.done:
            self.waiting[cid] = waiter

    def _told(self, container_id: str, task: TaskBehaviour, outcome: object) -> None:
        """The task in ``container_id`` is told its barrier call's outcome: it runs, or it
        exits at once when the barrier failed."""
        self.waiting.pop(container_id, None)
        if isinstance(outcome, BarrierError):
            self._run(container_id, 0.0, BARRIER_ERROR_EXIT_CODE)
        else:
            self._run(container_id, task.duration_s, task.exit_code)

    def _run(self, container_id: str, duration_s: float | None, exit_code: int) -> None:
        """The task runs ``duration_s`` from now (None: until stopped), then exits. The tasks
        that exit at the same instant (a gang started together, running alike) share one
        event on the clock, taking their turns in the order they were started."""
        if duration_s is None:
            return
        when = self.clock.now()
        if duration_s > 0:
            when += duration_s
        instant = self._exiting_at.get(when)
        if instant is None:
            instant = self._exiting_at[when] = _ExitInstant()
            instant.timer = self.clock.call_at(when, self._exit_at, when)
        instant[container_id] = exit_code
        self.exiting[container_id] = instant

    def run_outside(self, key: object, duration_s: float, on_exit: Callable[[object], object]) -> None:
        """A task the RM holds no container for (a trace replay's single-task lane,
        :mod:`gangmaster.tools.replay.lane`) runs ``duration_s`` from now, then ``on_exit(key)``
        is called: at the same instant, in the same event and the same turn as a container
        started now to run as long would exit (:meth:`_run`), so the clock runs the events
        it would run had the task been a container. ``key``: its own, never a container id
        (one ``on_exit`` serves every task: no call made per task)."""
        when = self.clock.now()
        if duration_s > 0:
            when += duration_s
        instant = self._exiting_at.get(when)
        if instant is None:
            instant = self._exiting_at[when] = _ExitInstant()
            instant.timer = self.clock.call_at(when, self._exit_at, when)
        instant[key] = on_exit

    def _exit_at(self, when: float) -> None:
        exits = self._exiting_at.pop(when)
        if len(exits) == 1:   # most instants: one task exits (nothing to keep the collector off for)
            [(container_id, exit_code)] = exits.items()
            if exit_code.__class__ is int:
                self._exited(container_id, exit_code)
            else:   # (run outside the RM: _exited's other case, without its call)
                exit_code(container_id)
            return
        with collector_paused():   # a gang that ends together leaves thousands of statuses and records
            for container_id, exit_code in exits.items():
                self._exited(container_id, exit_code)

    def _exited(self, container_id, exit_code) -> None:
        """One task of an instant exits: a container's (its exit code, an int), reported to
        the RM; or one run outside the RM (the call that ends it, given its key)."""
        if exit_code.__class__ is int:
            del self.exiting[container_id]
            self.core.container_exited(container_id, exit_code)
        else:
            exit_code(container_id)

    def stop(self, rec) -> None:
        instant = self.exiting.pop(rec.container_id, None)
        if instant is not None:
            del instant[rec.container_id]
            if not instant:   # nothing exits then any more: the clock holds no event for it
                self.clock.cancel(instant.timer)
                del self._exiting_at[instant.timer[0]]
        waiter = self.waiting.pop(rec.container_id, None)
        if waiter is not None:   # its arrival stays counted, as a killed process's does at a real coordinator
            self.barrier.withdraw(waiter)

    def notify_preemption(self, rec, deadline: float) -> None:
        """A simulated task does not checkpoint: it runs on until the deadline takes it back
        (``notices`` keeps what each was told)."""
        self.notices[rec.container_id] = deadline

    def adopt(self, rec) -> None:
        """After a restore the remaining run time is unknown: the container runs until stopped."""

    def adopt_stopping(self, rec) -> None:
        """A container restored while it was being stopped: nothing of it runs here."""
        self.core.container_released(rec.container_id)
