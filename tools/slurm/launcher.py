"""The per-application launcher: a heterogeneous job's batch step, which runs its tasks.

A task runs as long as the ``srun`` that started it, so tasks started by the AM's
own ``srun`` children would die with the AM. Instead each job the Slurm client
submits (one per granted gang, :mod:`.client`) runs this launcher as its batch
script, on the job's first node; the AM talks to it through files in the job's
folder, which must be on a file system the AM and the nodes share (on the local
cluster, this machine's):

    launch/<container>.json   written by the AM: start this task (command, environment,
                              het group, CPUs, memory, GPUs); the launcher runs
                              ``srun --het-group=K --exact ...`` for it
    stop/<container>          written by the AM: stop it (SIGINT to its srun, which
                              with ``--quit-on-interrupt`` kills the step: SIGTERM, then
                              SIGKILL after Slurm's KillWait)
    exit/<container>.json     written by the launcher when the srun ended: the exit
                              status (128 + n for a task killed by signal n)
    logs/<container>.log      the task's output
    launcher.pid              this process, for the record

Every file is written whole (to a temporary name, then renamed), so a reader never
sees half of one. The AM can die and come back: the launcher and its tasks go on, and
the new AM reads the same folder. The launcher ends when Slurm ends the job (the AM
cancels it once every task has ended or been released).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: How often the launcher looks for new launch and stop files, seconds.
POLL_S = 0.05
#: How often the launcher asks Slurm whether its job still runs, seconds. A launcher whose
#: node's slurmd died is not told when Slurm ends the job (NODE_FAIL): it ends by itself.
JOB_CHECK_S = 2.0
#: A stopped task's srun gets SIGKILL if it has not ended this long after SIGINT, seconds
#: (Slurm's own KillWait has then long passed on the local cluster).
STOP_GRACE_S = 15.0


def write_whole(path: Path, data: dict | str) -> None:
    """Write a file whole, readable by its owner only (a task's launch holds its barrier
    token): a reader sees nothing or all of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))
    os.replace(tmp, path)


def srun_command(launch: dict, log: Path) -> list[str]:
    """The ``srun`` that runs one task in its het group, on exactly its CPUs, memory and GPUs."""
    group = [f"--het-group={launch['het_group']}"] if launch.get("het_group") is not None else []
    command = ["srun", *group, "--exact", "-N1", "-n1",
               f"--cpus-per-task={launch['cpus']}", f"--mem={launch['memory_mb']}M",
               f"--job-name={launch['container_id']}", "--quit-on-interrupt", "--kill-on-bad-exit=0",
               f"--output={log}", "--input=none"]
    command.append(f"--gres={launch['gres']}" if launch.get("gres") else "--gres=none")
    return command + list(launch["command"])


@dataclass
class Task:
    container_id: str
    process: subprocess.Popen
    stop_sent_at: float | None = None


class Launcher:
    def __init__(self, folder: Path):
        self.folder = folder
        for sub in ("launch", "stop", "exit", "logs"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        self.running: dict[str, Task] = {}
        self.seen: set[str] = {p.stem for p in (folder / "exit").glob("*.json")}

    def step(self) -> None:
        for path in sorted((self.folder / "launch").glob("*.json")):
            cid = path.stem
            if cid in self.seen:
                continue
            self.seen.add(cid)
            self._start(json.loads(path.read_text()))
        for path in (self.folder / "stop").iterdir():
            task = self.running.get(path.name)
            if task is None:
                continue
            now = time.monotonic()
            if task.stop_sent_at is None:
                task.stop_sent_at = now
                _signal(task.process, signal.SIGINT)
            elif now - task.stop_sent_at > STOP_GRACE_S:
                _signal(task.process, signal.SIGKILL)
        for cid, task in list(self.running.items()):
            code = task.process.poll()
            if code is not None:
                del self.running[cid]
                status = 128 - code if code < 0 else code   # srun itself killed by a signal
                write_whole(self.folder / "exit" / f"{cid}.json",
                            {"exit_status": status, "stopped": task.stop_sent_at is not None,
                             "ended_at": time.time()})

    def _start(self, launch: dict) -> None:
        cid = launch["container_id"]
        log = self.folder / "logs" / f"{cid}.log"
        env = {**os.environ, **launch["env"]}
        for name in ("SLURM_CPUS_PER_TASK", "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU"):
            env.pop(name, None)   # the batch step's own sizes must not leak into the task's step
        try:
            process = subprocess.Popen(srun_command(launch, log), env=env, cwd=launch.get("cwd") or None,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=open(log.with_suffix(".srun"), "ab"))
        except OSError as exc:
            write_whole(self.folder / "exit" / f"{cid}.json",
                        {"exit_status": 127, "stopped": False, "ended_at": time.time(),
                         "diagnostics": f"srun could not be started: {exc}"})
            return
        self.running[cid] = Task(cid, process)

    def run(self) -> None:
        write_whole(self.folder / "launcher.pid", str(os.getpid()))
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        checked = time.monotonic()
        while not stopping:
            self.step()
            time.sleep(POLL_S)
            if time.monotonic() - checked >= JOB_CHECK_S:
                checked = time.monotonic()
                if not _job_runs(os.environ.get("SLURM_JOB_ID", "")):
                    break
        for task in self.running.values():   # Slurm ends the job: its steps go with it
            _signal(task.process, signal.SIGINT)


def _job_runs(job_id: str) -> bool:
    """Whether Slurm still runs the job (True when it cannot tell: never stop on a hiccup)."""
    if not job_id:
        return True
    try:
        done = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return True
    if done.returncode != 0:
        return "Invalid job id" not in done.stderr
    states = done.stdout.split()
    return not states or any(s in ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED") for s in states)


def _signal(process: subprocess.Popen, sig: int) -> None:
    try:
        process.send_signal(sig)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gangmaster.tools.slurm.launcher JOB_FOLDER", file=sys.stderr)
        return 2
    Launcher(Path(args[0])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
