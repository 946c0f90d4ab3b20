"""Starting a gang attempt whose every instance is granted: all its containers at once.

Each granted container becomes a task (in rank order: the order of the gang's slots), the
attempt's barrier is opened (:mod:`~gangmaster.am.barrier.attempt_barrier`), every task gets its
OpenPAI environment (:mod:`~gangmaster.am.core.launch_env`), and the whole batch goes to the RM
in one call. A task the RM cannot start is a failed task: the ones before it run on until
the AM ends the attempt in this same heartbeat, it fails, and the containers after it are
never started and are given back.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Mapping

from gangmaster.gpu_topology.masks import indices_of

from gangmaster.am.barrier.attempt_barrier import open_barrier
from gangmaster.am.barrier.gang_barrier import GangBarrier
from .gang_run import GangRun
from gangmaster.am.spec.jobspec_model import JobSpec
from .launch_env import launch_envs
from .lifecycle import TASK_FAILED, TaskRecord
from gangmaster.protocol.rm_client import RMClient
from gangmaster.protocol.rm_protocol import ContainerLaunch, LaunchContext, RMError, StartContainers, StartRefused

#: The shared launch of a batch of one container: it brings its whole launch itself.
_NOTHING_SHARED = LaunchContext()


class GangLauncher:
    """What an AM launches its gangs as, and where: the job of application ``app_id`` in
    ``queue``, each task with ``task_env`` besides its own environment; its containers
    started by ``rm``, its barriers opened at ``coordinator``. ``running`` (container id ->
    (gang, task)) gets each task while it runs, and ``releases`` (the AM's outbox) the
    containers never started: both are the AM's own, kept here by reference."""

    __slots__ = ("rm", "coordinator", "app_id", "job", "queue", "task_env", "running", "releases")

    def __init__(self, rm: RMClient, coordinator: GangBarrier, app_id: str, job: JobSpec, queue: str,
                 task_env: Mapping[str, str], running: dict, releases: list[str]):
        self.rm, self.coordinator, self.app_id, self.job, self.queue = rm, coordinator, app_id, job, queue
        self.task_env, self.running, self.releases = task_env, running, releases

    def launch(self, gang: GangRun, now: float) -> bool:
        """Start every container of ``gang`` (every one granted) at ``now``. False when the
        RM refused one (the attempt fails)."""
        gang.launching()
        running, job = self.running, self.job
        acq = gang.acquisition
        roles = acq.roles
        kinds = acq.layout.port_kinds
        tasks, task_kinds = [], []
        for rank, s in enumerate(acq.slots.values()):   # (in rank order)
            c, role = s.container, s.role
            resource = c.resource
            kind = kinds.of(role, resource.port_ranges)
            task = TaskRecord(role, s.index, rank, c.container_id, c.host, _gpu_indices(resource.gpu_mask),
                              kind.named, now, gpu_milli=resource.gpu_milli)
            tasks.append(task)
            task_kinds.append(kind)
            running[c.container_id] = (gang, task)   # running from here on, unless the RM refuses it
        token, barrier_env = open_barrier(self.coordinator, self.app_id, job, gang, tasks)
        shared, own = launch_envs(job, gang.roles, tasks, task_kinds, barrier_env, self.queue, self.task_env)
        launches = []
        for t, env in zip(tasks, own):
            launches.append(ContainerLaunch(t.container_id,
                                            LaunchContext.of_variables(_command(roles[t.role].commands), env)))
        shared = LaunchContext(env=shared) if shared else _NOTHING_SHARED
        try:
            refused = self.rm.start_containers(StartContainers(tuple(launches), shared))
        except RMError as exc:   # the whole batch refused (its shared launch, the RM out of reach)
            refused = StartRefused(0, tasks[0].container_id, exc)
        if refused is not None:   # those before it run; it failed; those after it were never started
            for task in tasks[refused.index:]:
                del running[task.container_id]
            del tasks[refused.index + 1:]
            task = tasks[-1]
            task.state, task.finished_at, task.diagnostics = TASK_FAILED, now, refused.error.message
            self.releases.extend([s.container.container_id for s in acq.in_order()[refused.index:]])
        gang.started(tasks, token, now)
        return refused is None


@lru_cache(maxsize=1024)
def _gpu_indices(mask: int) -> tuple[int, ...]:
    """A container's GPUs as indices: one tuple per mask (a gang's thousands of tasks hold a few masks)."""
    return tuple(indices_of(mask))


@lru_cache(maxsize=1024)
def _command(commands: tuple[str, ...]) -> tuple[str, ...]:
    """A role's container command: OpenPAI runs its commands as one shell script, and the
    first failing one fails the task. One per list of commands (a replay's roles share theirs)."""
    return ("/bin/sh", "-c", "set -e\n" + "\n".join(commands))
