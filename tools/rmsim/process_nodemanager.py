"""The live NodeManager: a started container is a real local process, told where it
"runs" through its environment (see :func:`container_env`), under a supervisor
(:mod:`~gangmaster.tools.rmsim.supervisor`) that stops whatever the task leaves behind
and writes the task's exit code to a file, so an RM restarted after ``kill -9`` can still
learn how a task it did not spawn ended. (The simulated one is :mod:`.nodemanager`'s.)
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from gangmaster.am.task import ENV_PREEMPTION_NOTICE
from gangmaster.protocol.rm_protocol import InvalidRequest, LaunchContext
from gangmaster.gpu_topology.masks import indices_of

from .processes import is_running, send, session_members, start_time

log = logging.getLogger(__name__)

def container_env(core, rec, ctx: LaunchContext) -> dict[str, str]:
    """The environment of a task process: the AM's variables (OpenPAI's
    ``PAI_TASK_ROLE_<role>_HOST_LIST``, ``PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX``…
    are the AM's to set) plus what only the NodeManager knows, which wins:

    ``GANGMASTER_HOST`` / ``PAI_CONTAINER_HOST_NAME``  the simulated host name
    ``PAI_CONTAINER_HOST_IP`` / ``PAI_CURRENT_CONTAINER_IP``  127.0.0.1 (where the process really is)
    ``PAI_WORK_DIR``  the folder the process starts in
    ``GANGMASTER_PORTS``  the container's ports, comma separated
    ``CUDA_VISIBLE_DEVICES`` / ``GANGMASTER_GPU_INDICES``  the container's GPU indices
    ``GANGMASTER_CONTAINER_ID`` / ``PAI_CONTAINER_ID``, ``GANGMASTER_APP_ID``, ``GANGMASTER_RACK``
    ``GANGMASTER_PREEMPTION_NOTICE``  where a preemption notice is left (:func:`notice_file`)

    ``PAI_CONTAINER_HOST_PORT_LIST`` (the ports, comma separated) and
    ``PAI_CURRENT_CONTAINER_PORT`` (the first) are defaults only: the AM, which knows
    the ports' labels, sets them in OpenPAI's format (``gangmaster.am.core.launch_env``).
    """
    ledger = core.ledger
    env = dict(os.environ)
    ports = ",".join(str(p) for p in rec.booking.port_ranges)
    env["PAI_CONTAINER_HOST_PORT_LIST"] = ports
    env["PAI_CURRENT_CONTAINER_PORT"] = ports.split(",")[0] if ports else ""
    env.update(ctx.env_dict)
    gpus = ",".join(str(g) for g in indices_of(rec.booking.gpu_mask))
    host = ledger.hosts[rec.node]
    env.update({
        "GANGMASTER_HOST": host,
        "GANGMASTER_RACK": ledger.specs[rec.node].rack,
        "GANGMASTER_APP_ID": rec.app_id,
        "GANGMASTER_CONTAINER_ID": rec.container_id,
        "GANGMASTER_PORTS": ports,
        "GANGMASTER_GPU_INDICES": gpus,
        "CUDA_VISIBLE_DEVICES": gpus,
        "PAI_CONTAINER_ID": rec.container_id,
        "PAI_CONTAINER_HOST_NAME": host,
        "PAI_CONTAINER_HOST_IP": "127.0.0.1",
        "PAI_CURRENT_CONTAINER_IP": "127.0.0.1",
        "PAI_WORK_DIR": os.getcwd(),
        ENV_PREEMPTION_NOTICE: str(notice_file(core.node_manager.work_dir, rec.container_id)),
    })
    return env


def notice_file(work_dir: Path, container_id: str) -> Path:
    """Where the container's preemption notice is left: its deadline, in seconds since the
    epoch (read by ``BarrierTaskContext.preemption_notice``)."""
    return Path(work_dir) / f"{container_id}.preempt"




#: The program every live container runs under (see its docstring).
SUPERVISOR_MODULE = "gangmaster.tools.rmsim.supervisor"
#: A stopped container's supervisor has the grace period and then this long to finish
#: stopping its processes; past that the NodeManager kills what is left itself (seconds).
BACKSTOP_S = 2.0


@dataclass(eq=False)
class TaskProcesses:
    """One container's processes as the NodeManager knows them: the supervisor that
    leads their session and process group, named by pid *and* start time (a pid may
    be reused once reaped), and its ``Popen`` when this NodeManager started it
    (None for a container adopted from a state file)."""

    pid: int
    started: int | None
    exit_file: str | None
    supervised: bool = True            # False: a container started by an older RM (a /bin/sh wrapper)
    proc: subprocess.Popen | None = None
    kill_after: float | None = None    # stopped: kill whatever is left after this time (RM clock)

    @classmethod
    def from_handle(cls, handle: dict) -> "TaskProcesses | None":
        pid = handle.get("pid")
        if not pid:
            return None
        return cls(pid, handle.get("start_time"), handle.get("exit_file"), handle.get("supervised", False))

    def leader_running(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None      # also reaps it
        return is_running(self.pid, self.started)

    def exit_code(self) -> int | None:
        """The task's exit code, once recorded (None: not yet, or its supervisor was killed first)."""
        return _read_exit_file(self.exit_file)

    def leftovers(self) -> list[int]:
        """Processes of the container's group and session still running (the leader included).
        None once the supervisor has ended after recording the exit code: it records it only
        when every process of the session is gone (so no need to look)."""
        if self.supervised and not self.leader_running() and self.exit_code() is not None:
            return []
        return session_members(self.pid, self.started)

    def terminate(self) -> None:
        """Ask for a stop: the supervisor stops the task (SIGTERM, then SIGKILL after its grace)."""
        if self.supervised and self.leader_running():
            send([self.pid], signal.SIGTERM)     # the task gets one SIGTERM, from its supervisor
        else:
            send(self.leftovers(), signal.SIGTERM)

    def kill(self) -> None:
        send(self.leftovers(), signal.SIGKILL)

    def gone(self) -> bool:
        return not self.leader_running() and not self.leftovers()


class ProcessNodeManager:
    """Containers are real local processes, each under a supervisor
    (:mod:`gangmaster.tools.rmsim.supervisor`) that makes sure nothing the task
    starts outlives it; their end is noticed by polling.

    A container counts as ended only once every process of its session is gone:
    if its supervisor was killed and left processes behind, they are killed first
    and the container's resources stay booked until they are gone.

    ``tasks_outlive_rm``: False (``gangmaster run --live``, an RM without a state
    file): every task is tied to this process by a *lifeline* pipe and stops when
    this process dies, even by ``kill -9``; :meth:`shutdown` stops them all. True
    (``rm serve --state``): tasks keep running across an RM restart and the
    restored RM adopts them (:meth:`adopt`).
    """

    #: A stopped container keeps its booking until its processes are gone.
    frees_at_once = False

    def __init__(self, clock, work_dir: str | Path, poll_s: float = 0.1, kill_grace_s: float = 2.0,
                 tasks_outlive_rm: bool = False):
        self.clock = clock
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.kill_grace_s = kill_grace_s
        # Only this process holds the write end: when it dies, every supervisor reads EOF.
        self._lifeline = None if tasks_outlive_rm else os.pipe()
        self.core = None
        self.running: dict[str, TaskProcesses] = {}
        self.stopping: dict[str, TaskProcesses] = {}   # stopped, until their processes are gone
        self.poll_timer = clock.every(poll_s, self.poll)

    def bind(self, core) -> None:
        self.core = core

    def launch(self, rec, ctx: LaunchContext) -> None:
        command = list(ctx.command)
        if not command:
            raise InvalidRequest("launch.command: expected a command to run")
        exit_file = self.work_dir / f"{rec.container_id}.exit"
        exit_file.unlink(missing_ok=True)        # one left by an earlier RM in this folder is not this task's
        log_file = self.work_dir / f"{rec.container_id}.log"
        argv = [sys.executable, "-m", SUPERVISOR_MODULE, "--exit-file", str(exit_file),
                "--grace", repr(float(self.kill_grace_s))]
        pass_fds: tuple[int, ...] = ()
        if self._lifeline is not None:
            argv += ["--lifeline", str(self._lifeline[0])]
            pass_fds = (self._lifeline[0],)
        try:
            with open(log_file, "ab") as out:
                proc = subprocess.Popen([*argv, "--", *command], env=container_env(self.core, rec, ctx), stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, pass_fds=pass_fds)
        except OSError as exc:
            raise InvalidRequest(f"launch.command: cannot start {command[0]!r}: {exc.strerror}") from None
        task = TaskProcesses(proc.pid, start_time(proc.pid), str(exit_file), proc=proc)
        self.running[rec.container_id] = task
        rec.handle = {"pid": task.pid, "start_time": task.started, "supervised": True,
                      "exit_file": str(exit_file), "log": str(log_file)}

    def notify_preemption(self, rec, deadline: float) -> None:
        """Tell the container's task it is preempted at ``deadline`` (RM clock): the notice
        file holds the deadline as wall-clock time (written whole, then renamed into place),
        then every process of the task (not its supervisor) gets SIGUSR1, which the supervisor
        started them ignoring: only a program that handles it hears it."""
        task = self.running.get(rec.container_id)
        if task is None:
            return
        path = notice_file(self.work_dir, rec.container_id)
        partial = path.with_suffix(".preempt.tmp")
        partial.write_text(repr(time.time() + max(0.0, deadline - self.clock.now())) + "\n")
        partial.replace(path)
        send([pid for pid in task.leftovers() if pid != task.pid], signal.SIGUSR1)

    def adopt(self, rec) -> None:
        """Take over a RUNNING container restored from a state file: it ends when its
        supervisor has ended and its processes are gone (killed, if it left any)."""
        task = TaskProcesses.from_handle(rec.handle)
        if task is not None:
            self.running[rec.container_id] = task

    def stop(self, rec) -> None:
        task = self.running.pop(rec.container_id, None) or TaskProcesses.from_handle(rec.handle)
        if task is None:
            self.core.container_released(rec.container_id)
            return
        task.terminate()
        task.kill_after = self.clock.now() + self.kill_grace_s + BACKSTOP_S
        self.stopping[rec.container_id] = task

    def adopt_stopping(self, rec) -> None:
        """Take over a container restored from a state file while it was being stopped:
        its booking is freed once its processes are gone (they are killed now)."""
        task = TaskProcesses.from_handle(rec.handle)
        if task is None:
            self.core.container_released(rec.container_id)
            return
        task.terminate()
        task.kill_after = self.clock.now()
        self.stopping[rec.container_id] = task

    def poll(self) -> None:
        for cid, task in list(self.stopping.items()):
            if self._finish_stopping(task):
                del self.stopping[cid]
                self.core.container_released(cid)
        for cid, task in list(self.running.items()):
            if task.leader_running():
                continue
            left = task.leftovers()
            if left:           # its supervisor was killed: kill what it left, free nothing until it is gone
                if task.kill_after is None:
                    task.kill_after = self.clock.now()
                    log.warning("container %s: its supervisor ended and left %d process(es); killing them",
                                cid, len(left))
                send(left, signal.SIGKILL)
                continue
            del self.running[cid]
            self._report_end(cid, task)

    def _finish_stopping(self, task: TaskProcesses) -> bool:
        """One look at a stopped container: True once its processes are gone."""
        if task.leader_running():
            if self.clock.now() >= task.kill_after:
                task.kill()
            return False
        left = task.leftovers()
        send(left, signal.SIGKILL)      # its supervisor is gone: anything left is an orphan
        return not left

    def _report_end(self, container_id: str, task: TaskProcesses) -> None:
        rec = self.core.containers.get(container_id)
        if rec is None or rec.state.finished:
            return
        code = task.exit_code()
        if code is None and task.proc is not None:
            ret = task.proc.returncode
            code = ret if ret >= 0 else 128 - ret
        if code is None:
            self.core.container_lost(container_id, "the process ended while the RM was down; exit code unknown")
        else:
            self.core.container_exited(container_id, code)

    def shutdown(self) -> int:
        """Stop polling. Unless tasks outlive the RM, stop every container's processes
        and wait until they are gone (the grace period, then SIGKILL); returns the
        number of containers whose processes had to be stopped."""
        with self.core.lock if self.core is not None else nullcontext():
            self.clock.cancel(self.poll_timer)
            if self._lifeline is None:     # tasks outlive the RM (or this ran before)
                return 0
            # the ones with processes are counted before any is told to stop: a task that ends
            # at once on SIGTERM still had to be stopped (counted after, it raced the count)
            tasks = [t for t in [*self.running.values(), *self.stopping.values()] if not t.gone()]
            for task in self.running.values():
                task.terminate()
            self.running.clear()
            self.stopping = {}
        left = _wait_gone(tasks, self.kill_grace_s + BACKSTOP_S)
        for task in left:
            task.kill()
        left = _wait_gone(left, BACKSTOP_S)
        if left:
            log.error("%d container(s) still have processes after SIGKILL: %s", len(left),
                      ", ".join(str(t.pid) for t in left))
        for fd in reversed(self._lifeline):   # the write end first: any supervisor not accounted for stops
            os.close(fd)
        self._lifeline = None
        return len(tasks)


def _wait_gone(tasks: list[TaskProcesses], timeout_s: float) -> list[TaskProcesses]:
    """Wait up to ``timeout_s`` until every task's processes are gone; the ones left."""
    deadline = time.monotonic() + timeout_s
    while True:
        tasks = [t for t in tasks if not t.gone()]
        if not tasks or time.monotonic() >= deadline:
            return tasks
        time.sleep(0.05)


def _read_exit_file(path: str | None) -> int | None:
    if not path:
        return None
    try:
        with open(path, "rb") as exit_file:   # the supervisor writes a few digits; read no more
            return int(exit_file.read(32).strip())
    except (OSError, ValueError):
        return None
