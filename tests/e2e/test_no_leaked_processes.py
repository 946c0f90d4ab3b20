"""Nothing a job started outlives it: real task processes, found by a marker in
their environment (see task_procs.py), after the driver is signalled, killed with
``kill -9`` or times out, after a task leaves children behind, and across an RM
restored from its state file after ``kill -9``."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import load_job
from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.protocol.rm_protocol import AllocateRequest, ContainerState, ExitStatus, LaunchContext
from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.job_runner import LiveRuns
from gangmaster.tools.rmsim.rm_settings import RMSettings
from task_procs import MARKER_VAR, kill_marked, marked, new_marker, running, wait_until
from job_texts import one_role_job
from rm_serve_helpers import pinned_containers, start_rm_serve, stop_rm_serve

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def job_file(tmp_path: Path, command: str, instances: int = 2) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(one_role_job("leaks", instances, command=command))
    return path


def start_live_run(job: Path, work: Path, marker: str, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gangmaster.tools.cli", "run", str(job), "--live", "--quiet",
                             "--work-dir", str(work), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=dict(os.environ, **{MARKER_VAR: marker}))


@pytest.fixture
def marker():
    value = new_marker()
    yield value
    kill_marked(value)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_live_run_stops_every_task_before_it_exits(sig, marker, tmp_path):
    proc = start_live_run(job_file(tmp_path, "sleep 1000"), tmp_path / "run", marker)
    try:
        wait_until(lambda: len(running(marker, "sleep")) == 2, 60, "both tasks to start")
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert marked(marker) == []
    assert proc.returncode == 128 + sig, stderr
    assert f"gangmaster run: interrupted by {sig.name}; stopped the processes of 2 running task(s)" in stderr


def test_tasks_of_a_driver_killed_with_kill_9_end_with_it(marker, tmp_path):
    proc = start_live_run(job_file(tmp_path, "sleep 1000"), tmp_path / "run", marker)
    try:
        wait_until(lambda: len(running(marker, "sleep")) == 2, 60, "both tasks to start")
    finally:
        proc.kill()
        proc.communicate()
    wait_until(lambda: not marked(marker), 30, "every task process to end after the driver was killed")


def _live_runs(tmp_path: Path, command: str, instances: int, monkeypatch, marker: str) -> LiveRuns:
    monkeypatch.setenv(MARKER_VAR, marker)      # task processes inherit this process's environment
    runs = LiveRuns(load_cluster_specs(default_cluster_path()), tmp_path / "run",
                    AMSettings(heartbeat_s=0.05), rm_settings=RMSettings(kill_grace_s=0.5))
    runs.submit(load_job(job_file(tmp_path, command, instances)), tmp_path / "run")
    return runs


def test_a_task_that_ignores_sigterm_is_killed_at_the_timeout(marker, tmp_path, monkeypatch):
    runs = _live_runs(tmp_path, "trap '' TERM; sleep 1000", 2, monkeypatch, marker)
    try:
        wait_until(lambda: len(running(marker, "sleep")) == 2, 60, "both tasks to start")
        assert runs.run(timeout_s=0.1) is False
    finally:
        runs.shutdown()
    assert marked(marker) == []
    assert runs.timed_out and runs.stopped_tasks == 2


def test_what_a_task_leaves_behind_is_gone_when_its_job_ends(marker, tmp_path, monkeypatch):
    # one child in the background, one that even leaves the task's session
    runs = _live_runs(tmp_path, "sleep 1000 & setsid sleep 1001 & exit 0", 1, monkeypatch, marker)
    try:
        assert runs.run(timeout_s=60)
        assert runs.runs[0].outcome == "succeeded"
        assert marked(marker) == []                  # gone before the job was seen to end
    finally:
        runs.shutdown()
    log = next((tmp_path / "run" / "tasks").glob("*.log")).read_text()
    assert "the task ended and left 2 process(es) behind; stopping them" in log


def test_a_restored_rm_frees_a_container_only_once_its_processes_are_gone(tmp_path):
    """kill -9 of `rm serve --state` while two containers run, each with a child in the
    background. While it is down, one task ends by itself, and the other's supervisor is
    killed with kill -9. The restored RM frees neither's GPUs while a process of it runs."""
    state, go = tmp_path / "rm-state.json", tmp_path / "go"
    args = ("--state", str(state), "--work-dir", str(tmp_path / "tasks"))
    markers = {"ends": new_marker(), "orphaned": new_marker()}
    server, address = start_rm_serve(tmp_path, *args)
    try:
        rm = GrpcRMClient(address, timeout_s=5)
        app, (ends, orphaned) = pinned_containers(rm, "leaks", (R(1024, 1, gpu_mask=0b11), "dgx-000"),
                                                  (R(1024, 1, gpu_mask=0b1100), "dgx-000"))
        rm.start_container(ends.container_id, LaunchContext.of(
            ["/bin/sh", "-c", f'sleep 1000 & while [ ! -f "{go}" ]; do sleep 0.05; done; exit 0'],
            {MARKER_VAR: markers["ends"]}))
        rm.start_container(orphaned.container_id, LaunchContext.of(
            ["/bin/sh", "-c", "sleep 1000 & while true; do sleep 0.05; done"], {MARKER_VAR: markers["orphaned"]}))
        for m in markers.values():
            wait_until(lambda: running(m, "sleep", "1000"), 30, "the background children to start")
        rm.close()

        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
        handles = {c["container_id"]: c["handle"] for c in json.loads(state.read_text())["containers"]}
        go.write_text("go")
        os.kill(handles[orphaned.container_id]["pid"], signal.SIGKILL)
        wait_until(lambda: not running(markers["ends"], "sh"), 30, "the first task to end by itself")

        server, address = start_rm_serve(tmp_path, *args)
        rm = GrpcRMClient(address, timeout_s=5)
        masks = {ends.container_id: 0b11, orphaned.container_id: 0b1100}
        names = {ends.container_id: "ends", orphaned.container_id: "orphaned"}
        freed: set[str] = set()
        statuses = {}

        def both_freed() -> bool:
            free = next(n for n in rm.cluster_nodes() if n.host == "dgx-000").free.gpu_mask
            for cid, mask in masks.items():
                if cid not in freed and free & mask == mask:
                    assert marked(markers[names[cid]]) == [], f"{names[cid]}: GPUs freed while its processes run"
                    freed.add(cid)
            statuses.update((s.container_id, s) for s in rm.allocate(AllocateRequest(app, 1)).completed)
            return freed == set(masks) and set(statuses) == set(masks)

        wait_until(both_freed, 30, "both containers' GPUs to be free again")
        assert (statuses[ends.container_id].state, statuses[ends.container_id].exit_status) == (
            ContainerState.COMPLETED, 0)
        assert (statuses[orphaned.container_id].state, statuses[orphaned.container_id].exit_status) == (
            ContainerState.FAILED, ExitStatus.LOST_ON_RM_RESTART)
        rm.close()
    finally:
        go.write_text("go")
        stop_rm_serve(server)
        for m in markers.values():
            kill_marked(m)
