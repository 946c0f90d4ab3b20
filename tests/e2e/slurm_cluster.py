"""A local Slurm cluster for the Slurm end-to-end tests, and how they run jobs on it.

The tests skip, saying why, where Slurm cannot run (slurm-wlm not installed, not
root): :func:`require_slurm`. The cluster: four 4-GPU nodes in two racks and one CPU
node, one slurmd each, on free ports of this machine."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.slurm.local_cluster import LocalCluster, Ports, missing_requirements

from free_ports import free_block
from task_procs import MARKER_VAR, kill_marked, new_marker

REPO = Path(__file__).resolve().parents[2]
TASK = "python tests/e2e/gang_task.py"

CLUSTER_YAML = """\
name: slurm-test
nodeGroups:
  - name: gpu
    count: 4
    racks: [rack-a, rack-b]
    labels: [nvlink]
    gpuType: V100
    memoryMB: 8192
    vcores: 4
    gpus: 4
    ports: "20000-29999"
  - name: cpu
    count: 1
    memoryMB: 4096
    vcores: 4
"""


def gangmaster(*args, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``gangmaster ARGS`` from the repository, in this environment updated by ``env``
    (a value of None removes the variable)."""
    merged = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO,
                          env={k: v for k, v in merged.items() if v is not None})


def require_slurm() -> None:
    why = missing_requirements()
    if why:
        pytest.skip(why if "not installed" not in why else "slurm-wlm not installed: apt-get install slurm-wlm")


def free_ports(count: int) -> Ports:
    """A controller port and ``count`` slurmd ports, free now, from this worker's own
    ports (clear of `gangmaster bench slurm`'s, which start at 6870 and 17600)."""
    return Ports(free_block(6900, 1, 7000), free_block(17100, count, 17600))


def start_cluster(folder: Path) -> LocalCluster:
    require_slurm()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster.yaml").write_text(CLUSTER_YAML)
    specs = load_cluster_specs(folder / "cluster.yaml")
    cluster = LocalCluster(folder / "slurm")
    ports = free_ports(len(specs))
    cluster.start(specs, ports, source=str(folder / "cluster.yaml"))
    return cluster


def job_yaml(name: str, *, chief_gpus: int = 1, worker_gpus: int = 2, workers: int = 3, retries: int = 2) -> str:
    """A gang of 1 chief and ``workers`` workers, at most one worker per node."""
    return f"""\
protocolVersion: 2
name: {name}
type: job
jobRetryCount: {retries}
taskRoles:
  chief:
    instances: 1
    resourcePerInstance: {{cpu: 1, memoryMB: 512, gpu: {chief_gpus}}}
    commands: ["{TASK}"]
  worker:
    instances: {workers}
    resourcePerInstance: {{cpu: 1, memoryMB: 512, gpu: {worker_gpus}}}
    commands: ["{TASK}"]
    gangmaster: {{maxInstancesPerNode: 1}}
gangmaster:
  gangs: [[chief, worker]]
  retryScope: job
  barrierTimeoutSeconds: 120
"""


class Runner:
    """Runs ``gangmaster run --rm slurm`` on the cluster, every task marked (for clean-up)."""

    def __init__(self, cluster: LocalCluster, tmp: Path):
        self.cluster, self.tmp = cluster, tmp
        self.marker = new_marker()

    def env(self, **extra: str) -> dict[str, str]:
        return {**self.cluster.env, MARKER_VAR: self.marker, "PYTHONUNBUFFERED": "1", **extra}

    def command(self, *jobs: Path, work_dir: Path) -> list[str]:
        return [sys.executable, "-m", "gangmaster.tools.cli", "run", *map(str, jobs), "--rm", "slurm",
                "--work-dir", str(work_dir), "--json", "--timeout", "150"]

    def run(self, *jobs: Path, work_dir: Path, **env: str) -> tuple[int, list[dict], str]:
        done = subprocess.run(self.command(*jobs, work_dir=work_dir), capture_output=True, text=True,
                              timeout=200, cwd=REPO, env=self.env(**env))
        return done.returncode, _reports(done.stdout), done.stderr

    def start(self, *jobs: Path, work_dir: Path, **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(*jobs, work_dir=work_dir), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO, env=self.env(**env))

    def clean_up(self) -> None:
        kill_marked(self.marker)


def _reports(stdout: str) -> list[dict]:
    try:
        return json.loads(stdout)
    except ValueError:
        raise AssertionError(f"gangmaster run printed no JSON report: {stdout[-2000:]}") from None


def records(output: Path, kind: str, attempt: int) -> list[dict]:
    """What the tasks of an attempt wrote (kind: started or passed), by rank."""
    found = [json.loads(p.read_text()) for p in output.glob(f"{kind}-{attempt}-*.json")]
    return sorted(found, key=lambda r: r["rank"])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
