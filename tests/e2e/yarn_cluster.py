"""A real Apache Hadoop YARN cluster for the YARN end-to-end tests, and how they run jobs on it.

One cluster for the whole test session, whatever the number of pytest-xdist workers
(:func:`shared_cluster`, through the ``yarn_cluster`` fixture of ``conftest.py``): one
ResourceManager and three NodeManagers of ``conf/clusters/yarn-local.yaml``, on free ports,
a node declared LOST 8 s after its NodeManager went silent. The workers share it through a
folder of the session's temporary root: the first to need it starts it, the last to finish
stops it (a count under a file lock). Tests share it (``yarn_cluster``), but one that disturbs
the others (kills a NodeManager, takes every GPU) holds it alone (``yarn_cluster_alone``): a
second lock, shared or exclusive. (pytest-xdist's
``--dist loadgroup`` would keep them on one worker, but its ``xdist_group`` mark has no effect
under pytest 9.2, which no longer lets it rename a test.) They skip, saying why, where Java,
Maven or Maven Central is missing."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from gangmaster.conf import conf_path
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.yarn.local_cluster import LocalCluster, Ports, YarnUnavailable, ensure_jars

from free_ports import free_block
from task_procs import MARKER_VAR, kill_marked, new_marker

REPO = Path(__file__).resolve().parents[2]
TASK = "python tests/e2e/gang_task.py"
#: the marks of every YARN end-to-end test
YARN = [pytest.mark.slow]
NM_EXPIRY_MS = 8000


def start_cluster(folder: Path) -> LocalCluster:
    try:
        lib = ensure_jars()
    except YarnUnavailable as exc:
        pytest.skip(f"no local YARN cluster: {exc}")
    specs = load_cluster_specs(conf_path("clusters/yarn-local.yaml"))
    ports = Ports(free_block(28030, 9, 28500), free_block(29000, 10 * len(specs), 31000))
    if (folder / "local-cluster.json").exists():   # an earlier cluster of the session, stopped: its folder anew
        shutil.rmtree(folder)
    cluster = LocalCluster(folder)
    cluster.start(specs, ports, lib=lib, nm_expiry_ms=NM_EXPIRY_MS)
    return cluster


@contextmanager
def _locked(path: Path, mode: int = fcntl.LOCK_EX):
    with open(path, "a+") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _shared_root(tmp_path_factory) -> Path:
    """A folder every worker of this session shares (the workers' basetemps are its children)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def shared_cluster(tmp_path_factory):
    """The session's cluster: started by the first worker that needs it, stopped by the last."""
    shared = _shared_root(tmp_path_factory) / "yarn-shared"
    shared.mkdir(exist_ok=True)
    users = shared / "users"
    with _locked(shared / "lock"):
        count = int(users.read_text()) if users.is_file() else 0
        cluster = LocalCluster(shared / "cluster")
        if not count or len(cluster.running()) != 1 + len(cluster.state()["nodes"]):
            if cluster.running():
                cluster.stop(grace_s=5)
            cluster = start_cluster(shared / "cluster")
            count = 0
        users.write_text(str(count + 1))
    try:
        yield cluster
    finally:
        with _locked(shared / "lock"):
            count = int(users.read_text()) - 1
            users.write_text(str(count))
            if count == 0:
                cluster.stop(grace_s=5)


@contextmanager
def turn(cluster: LocalCluster, alone: bool):
    """The cluster to this test while it runs: shared with other tests that share it, or
    ``alone`` (the other workers' YARN tests wait, and it waits for theirs)."""
    with _locked(cluster.work_dir.parent / "turn", fcntl.LOCK_EX if alone else fcntl.LOCK_SH):
        yield cluster


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

    def start(self, *jobs: Path, work_dir: Path, extra: tuple[str, ...] = (), **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(*jobs, work_dir=work_dir, extra=extra), stdout=subprocess.PIPE,
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
