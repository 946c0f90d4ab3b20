"""A real Apache Hadoop YARN cluster for the YARN end-to-end tests, and how they run jobs on it.

One cluster for the whole test session (:func:`start_cluster`, through the ``yarn_cluster``
fixture of ``conftest.py``): one ResourceManager and three NodeManagers of
``conf/clusters/yarn-local.yaml``, on free ports, a node declared LOST 8 s after its
NodeManager went silent. Every YARN test is marked ``xdist_group("yarn")`` (:data:`YARN`):
pytest-xdist (``--dist loadgroup``) gives them all to one worker, so the session starts
one cluster, and the tests take turns on it. They skip, saying why, where Java, Maven or
Maven Central is missing."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gangmaster.conf import conf_path
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.yarn.local_cluster import LocalCluster, Ports, YarnUnavailable, ensure_jars

from task_procs import MARKER_VAR, kill_marked, new_marker

REPO = Path(__file__).resolve().parents[2]
TASK = "python tests/e2e/yarn_task.py"
#: the marks of every YARN end-to-end test: slow, and on the one worker that holds the cluster
YARN = [pytest.mark.slow, pytest.mark.xdist_group("yarn")]
NM_EXPIRY_MS = 8000


def _free_block(start: int, count: int, stop: int) -> int:
    for first in range(start, stop - count, 10):
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
    raise RuntimeError(f"no {count} free ports in {start}..{stop}")


def start_cluster(folder: Path) -> LocalCluster:
    try:
        lib = ensure_jars()
    except YarnUnavailable as exc:
        pytest.skip(f"no local YARN cluster: {exc}")
    specs = load_cluster_specs(conf_path("clusters/yarn-local.yaml"))
    ports = Ports(_free_block(28030, 9, 28900), _free_block(28100, 10 * len(specs), 29000))
    cluster = LocalCluster(folder)
    started = time.monotonic()
    cluster.start(specs, ports, lib=lib, nm_expiry_ms=NM_EXPIRY_MS)
    cluster.start_s = time.monotonic() - started
    return cluster


def job_yaml(name: str, *, chief_gpus: int = 1, worker_gpus: int = 2, workers: int = 3, retries: int = 2,
             per_node: int = 1) -> str:
    """A gang of 1 chief and ``workers`` workers, at most ``per_node`` worker per node."""
    return f"""\
protocolVersion: 2
name: {name}
type: job
jobRetryCount: {retries}
taskRoles:
  chief:
    instances: 1
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: {chief_gpus}}}
    commands: ["{TASK}"]
  worker:
    instances: {workers}
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: {worker_gpus}, ports: {{mpi: 1}}}}
    commands: ["{TASK}"]
    gangmaster: {{maxInstancesPerNode: {per_node}}}
gangmaster:
  gangs: [[chief, worker]]
  retryScope: job
  barrierTimeoutSeconds: 120
"""


class Runner:
    """Runs ``gangmaster run --rm yarn`` on the cluster, every task marked (for clean-up)."""

    def __init__(self, cluster: LocalCluster):
        self.cluster = cluster
        self.marker = new_marker()

    def env(self, **extra: str) -> dict[str, str]:
        import os
        return {**os.environ, MARKER_VAR: self.marker, "PYTHONUNBUFFERED": "1", **extra}

    def command(self, *jobs: Path, work_dir: Path, extra: tuple[str, ...] = ()) -> list[str]:
        return [sys.executable, "-m", "gangmaster.tools.cli", "run", *map(str, jobs), "--rm", "yarn",
                "--yarn-rm", str(self.cluster.work_dir), "--work-dir", str(work_dir), "--json", "--timeout", "150",
                *extra]

    def run(self, *jobs: Path, work_dir: Path, extra: tuple[str, ...] = (), **env: str) -> tuple[int, list[dict], str]:
        done = subprocess.run(self.command(*jobs, work_dir=work_dir, extra=extra), capture_output=True, text=True,
                              timeout=200, cwd=REPO, env=self.env(**env))
        return done.returncode, reports(done.stdout, done.stderr), done.stderr

    def start(self, *jobs: Path, work_dir: Path, **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(*jobs, work_dir=work_dir), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO, env=self.env(**env))

    def clean_up(self) -> None:
        kill_marked(self.marker)


def reports(stdout: str, stderr: str = "") -> list[dict]:
    try:
        return json.loads(stdout)
    except ValueError:
        raise AssertionError(f"gangmaster run printed no JSON report: {stdout[-2000:]}\n{stderr[-2000:]}") from None


def records(output: Path, kind: str, attempt: int) -> list[dict]:
    """What the tasks of an attempt wrote (kind: started or passed), by rank."""
    found = [json.loads(p.read_text()) for p in output.glob(f"{kind}-{attempt}-*.json")]
    return sorted(found, key=lambda r: r["rank"])
