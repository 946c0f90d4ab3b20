"""`gangmaster slurm local-cluster` when daemons die: `status` names each dead one and
fails, `start` starts them again without clearing Slurm's state, so a job that ran
through slurmctld's death runs on, the very same job; `stop` with slurmctld dead still
ends the jobs' processes. Its own small cluster (daemons are killed); skipped, saying
why, where Slurm cannot run (see slurm_cluster.require_slurm)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import uuid

from pathlib import Path

import pytest

from gangmaster.tools.slurm.listeners import is_loopback, listeners
from gangmaster.tools.slurm.local_cluster import LocalCluster

from slurm_cluster import free_ports, gangmaster, require_slurm
from task_procs import MARKER_VAR, kill_marked, marked, new_marker, wait_until

pytestmark = pytest.mark.slow

TWO_NODES = """\
name: slurm-restart
nodeGroups:
  - name: cpu
    count: 2
    memoryMB: 2048
    vcores: 2
"""


def _slurm(cluster: LocalCluster, *command: str, **env: str) -> str:
    return subprocess.run(command, env={**cluster.env, **env}, capture_output=True, text=True, timeout=30,
                          check=True).stdout


def ports_of(ports, nodes: int) -> list[int]:
    return [ports.controller, *range(ports.first_slurmd, ports.first_slurmd + nodes)]


def _running_on(cluster: LocalCluster, job: str) -> str | None:
    state, _, node = _slurm(cluster, "squeue", "-h", "-j", job, "-o", "%T %N").strip().partition(" ")
    return node if state == "RUNNING" else None


def _saved(cluster: LocalCluster, job: str) -> None:
    """Wait until the job state slurmctld saved holds the job running. Killed before such a
    save, slurmctld recovers the job as pending and requeues it. It saves a few seconds
    after a change, packing the jobs and then writing them out; under load a save packed
    before the job started can be written after any moment the test picks, so the file's
    mtime proves nothing. A comment set once the job runs is packed into its saved record:
    a saved file that holds the comment holds the job running."""
    note = f"running-{uuid.uuid4().hex}"
    _slurm(cluster, "scontrol", "update", f"JobId={job}", f"Comment={note}")
    state = cluster.work_dir / "state" / "job_state"

    def holds_note() -> bool:
        try:            # slurmctld links the new file in after unlinking the old one
            return note.encode() in state.read_bytes()
        except FileNotFoundError:
            return False
    wait_until(holds_note, 30, "slurmctld to save the running job")


def test_a_dead_controller_is_named_and_start_brings_it_back_with_its_jobs(tmp_path):
    require_slurm()
    (tmp_path / "cluster.yaml").write_text(TWO_NODES)
    # not under tmp_path: pytest-xdist's is too deep for slurmstepd's sockets (local-cluster start refuses it)
    short = Path(tempfile.mkdtemp(prefix="gm-sr-"))
    work = short / "slurm"
    ports = free_ports(2)
    cluster = LocalCluster(work)
    marker = new_marker()   # in the job's processes' environment
    started = gangmaster("slurm", "local-cluster", "start", "--cluster", tmp_path / "cluster.yaml", "--work-dir", work,
                         "--port", ports.controller, "--slurmd-port", ports.first_slurmd)
    try:
        assert started.returncode == 0, started.stderr
        exposed = [f"{a}:{port}" for port, found in listeners(ports_of(ports, 2)).items()
                   for a in found if not is_loopback(a)]
        assert ("WARNING: other machines can reach this cluster" in started.stderr) == bool(exposed), started.stderr
        job = _slurm(cluster, "sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 300",
                     **{MARKER_VAR: marker}).strip()
        node = wait_until(lambda: _running_on(cluster, job), 30, f"job {job} to run")
        _saved(cluster, job)
        ctld = cluster.running_daemons()["slurmctld"]
        os.kill(ctld, signal.SIGKILL)
        slurmd = cluster.stop_node(node)          # its node's slurmd too, as SIGKILL
        wait_until(lambda: not ({ctld, slurmd} & set(cluster.running_daemons().values())), 10, "both to die")

        status = gangmaster("slurm", "local-cluster", "status", "--work-dir", work)
        assert status.returncode == 1, status.stdout
        assert f"2 of 3 daemons do not run: slurmctld, slurmd -N {node}" in status.stdout
        dead = {m.group(1) for m in re.finditer(r"^  (slurm\S*(?: -N \S+)?) +DEAD", status.stdout, re.M)}
        assert dead == {"slurmctld", f"slurmd -N {node}"}, status.stdout

        refused = gangmaster("slurm", "local-cluster", "start", "--work-dir", work, "--port", ports.controller + 1)
        assert refused.returncode == 1
        assert f"not as asked: --port {ports.controller + 1} (it uses {ports.controller})" in refused.stderr

        again = gangmaster("slurm", "local-cluster", "start", "--work-dir", work)
        assert again.returncode == 0, again.stderr
        assert f"started again: slurmctld, slurmd -N {node};" in again.stdout
        status = gangmaster("slurm", "local-cluster", "status", "--work-dir", work)
        assert status.returncode == 0 and "every daemon runs" in status.stdout, status.stdout
        # the very job: still running where it ran, never requeued
        assert _slurm(cluster, "squeue", "-h", "-j", job, "-o", "%T %N").split() == ["RUNNING", node]
        assert "Restarts=0" in _slurm(cluster, "scontrol", "show", "job", job)

        os.kill(cluster.running_daemons()["slurmctld"], signal.SIGKILL)   # no scancel can reach the job now
        stopped = gangmaster("slurm", "local-cluster", "stop", "--work-dir", work)
        assert stopped.returncode == 0 and "stopped 2 daemon(s)" in stopped.stdout, stopped.stdout
        wait_until(lambda: not marked(marker), 10, "the job's processes to end")
    finally:
        gangmaster("slurm", "local-cluster", "stop", "--work-dir", work)
        kill_marked(marker)
        shutil.rmtree(short, ignore_errors=True)
