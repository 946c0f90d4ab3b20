"""NodeManagers: what "start a container" means in each mode.

* :class:`SimulatedNodeManager` (virtual time): a started container ends after
  ``LaunchContext.duration_s`` with ``LaunchContext.exit_code`` (never, when the
  duration is ``None``, until it is stopped).
* :class:`ProcessNodeManager` (live): a started container is a real local
  process, told where it "runs" through its environment (see
  :func:`container_env`). Each process is wrapped by ``/bin/sh`` that writes
  the task's exit code to a file, so an RM restarted after ``kill -9`` can still
  learn how a task it did not spawn ended.

Both have ``bind(core)``, ``launch(rec, ctx)``, ``stop(rec)`` and ``adopt(rec)``
(take over a RUNNING container restored from a state file).
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
from pathlib import Path

from gangmaster.am.rm_protocol import ContainerState, ExitStatus, InvalidRequest, LaunchContext
from gangmaster.gpu_topology.masks import indices_of

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

    ``PAI_CONTAINER_HOST_PORT_LIST`` (the ports, comma separated) and
    ``PAI_CURRENT_CONTAINER_PORT`` (the first) are defaults only: the AM, which knows
    the ports' labels, sets them in OpenPAI's format (``gangmaster.am.launch_env``).
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
    })
    return env


class SimulatedNodeManager:
    """Containers are timers on the virtual clock."""

    def __init__(self, clock):
        self.clock = clock
        self.core = None
        self.timers: dict[str, object] = {}

    def bind(self, core) -> None:
        self.core = core

    def launch(self, rec, ctx: LaunchContext) -> None:
        if ctx.duration_s is not None:
            if ctx.duration_s < 0:
                raise InvalidRequest(f"launch.duration_s: expected a number >= 0, got {ctx.duration_s}")
            self.timers[rec.container_id] = self.clock.call_later(
                ctx.duration_s, self._exited, rec.container_id, ctx.exit_code)

    def _exited(self, container_id: str, exit_code: int) -> None:
        self.timers.pop(container_id, None)
        self.core.container_exited(container_id, exit_code)

    def stop(self, rec) -> None:
        timer = self.timers.pop(rec.container_id, None)
        if timer is not None:
            timer.cancel()

    def adopt(self, rec) -> None:
        """After a restore the remaining run time is unknown: the container runs until stopped."""


_WRAPPER = '"$@"; code=$?; echo $code > "$GM_EXIT_FILE.tmp" && mv "$GM_EXIT_FILE.tmp" "$GM_EXIT_FILE"; exit $code'


class ProcessNodeManager:
    """Containers are real local processes; their exit is noticed by polling."""

    def __init__(self, clock, work_dir: str | Path, poll_s: float = 0.1, kill_grace_s: float = 2.0):
        self.clock = clock
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.kill_grace_s = kill_grace_s
        self.core = None
        self.procs: dict[str, subprocess.Popen | None] = {}   # None: adopted after a restart
        self.reaping: list[subprocess.Popen] = []              # stopped, to be waited for
        self.poll_timer = clock.every(poll_s, self.poll)

    def bind(self, core) -> None:
        self.core = core

    def launch(self, rec, ctx: LaunchContext) -> None:
        command = list(ctx.command)
        if not command:
            if ctx.duration_s is None:
                raise InvalidRequest("launch.command: expected a command to run (or duration_s)")
            command = ["/bin/sh", "-c", f"sleep {float(ctx.duration_s)}; exit {int(ctx.exit_code)}"]
        exit_file = self.work_dir / f"{rec.container_id}.exit"
        exit_file.unlink(missing_ok=True)   # an earlier run's container of the same id (a resumed work folder)
        log_file = self.work_dir / f"{rec.container_id}.log"
        env = container_env(self.core, rec, ctx)
        env["GM_EXIT_FILE"] = str(exit_file)
        try:
            with open(log_file, "ab") as out:
                proc = subprocess.Popen(["/bin/sh", "-c", _WRAPPER, "sh", *command], env=env, stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        except OSError as exc:
            raise InvalidRequest(f"launch.command: cannot start {command[0]!r}: {exc.strerror}") from None
        self.procs[rec.container_id] = proc
        rec.handle = {"pid": proc.pid, "exit_file": str(exit_file), "log": str(log_file)}

    def adopt(self, rec) -> None:
        self.procs[rec.container_id] = None

    def stop(self, rec) -> None:
        proc = self.procs.pop(rec.container_id, None)
        if proc is not None:
            self.reaping.append(proc)
        pid = rec.handle.get("pid")
        if not pid:
            return
        _signal_group(pid, signal.SIGTERM)
        self.clock.call_later(self.kill_grace_s, _signal_group, pid, signal.SIGKILL)

    def poll(self) -> None:
        self.reaping = [p for p in self.reaping if p.poll() is None]
        for cid, proc in list(self.procs.items()):
            rec = self.core.containers.get(cid)
            if rec is None or rec.state.finished:
                self.procs.pop(cid, None)
                continue
            code = _read_exit_file(rec.handle.get("exit_file"))
            if proc is not None:
                ret = proc.poll()
                if ret is None:
                    continue
                if code is None:
                    code = ret if ret >= 0 else 128 - ret
            elif code is None:
                if _alive(rec.handle.get("pid")):
                    continue
                self.procs.pop(cid, None)
                self.core._finish_container(rec, ContainerState.FAILED, ExitStatus.LOST_ON_RM_RESTART,
                                            "the process ended while the RM was down; exit code unknown",
                                            stop=False)
                continue
            self.procs.pop(cid, None)
            self.core.container_exited(cid, code)

    def shutdown(self) -> None:
        self.poll_timer.cancel()


def _read_exit_file(path: str | None) -> int | None:
    if not path:
        return None
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:   # a zombie nobody reaps (the RM that spawned it is gone) is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
