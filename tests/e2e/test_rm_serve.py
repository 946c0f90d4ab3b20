"""`gangmaster rm serve` as a real process: a gRPC client allocates, starts a real
task, sees it finish; the server is killed with SIGKILL and restarted from its
state file with nodes, applications and the running container intact."""
import os
import signal
import subprocess
import sys
import time

import pytest

from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.tools.rmsim.control import SimulatorControl
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, AppState, ContainerState, LaunchContext, NodeState, ResourceRequest,
)
from gangmaster.selectors.resources import ResourceDescriptor as R
from rm_serve_helpers import FIX, pinned_containers, start_rm_serve, stop_rm_serve

pytestmark = pytest.mark.slow


def wait_for(fn, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_serve_run_task_kill9_restart(tmp_path):
    state = tmp_path / "rm-state.json"
    go = tmp_path / "go"
    args = ("--state", str(state), "--work-dir", str(tmp_path / "tasks"))
    server, address = start_rm_serve(tmp_path, *args)
    task_pids = []
    try:
        rm = GrpcRMClient(address, timeout_s=5)
        app, (quick, slow) = pinned_containers(rm, "e2e", (R(1024, 1, gpu_mask=0b11), "dgx-000"),
                                               (R(1024, 1, gpus=4, ports=1), "dgx-001"))
        rm.start_container(quick.container_id, LaunchContext.of([sys.executable, "-c", "print('hello')"]))
        rm.start_container(slow.container_id, LaunchContext.of(
            ["/bin/sh", "-c", f'while [ ! -f "{go}" ]; do sleep 0.05; done; exit 5']))
        done = wait_for(lambda: rm.allocate(AllocateRequest(app, 1)).completed)
        assert [(s.container_id, s.state, s.exit_status) for s in done] == [
            (quick.container_id, ContainerState.COMPLETED, 0)]
        assert "hello" in (tmp_path / "tasks" / f"{quick.container_id}.log").read_text()
        SimulatorControl(rm).inject_fault("mark_unhealthy", host="pcie-000", text="disk full")
        before = {n.host: n for n in rm.cluster_nodes()}
        rm.close()

        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
        import json
        task_pids.append(json.loads(state.read_text())["containers"][1]["handle"]["pid"])

        server, address = start_rm_serve(tmp_path, *args)
        rm = GrpcRMClient(address, timeout_s=5)
        after = {n.host: n for n in rm.cluster_nodes()}
        assert after["pcie-000"].state is NodeState.UNHEALTHY and after["pcie-000"].health_report == "disk full"
        for host in ("dgx-000", "dgx-001"):
            assert after[host].free == before[host].free
        assert after["dgx-001"].free.gpu_mask == 0xF0 and after["dgx-001"].containers == 1
        assert rm.application_report(app).state is AppState.RUNNING
        assert rm.container_status(slow.container_id).state is ContainerState.RUNNING
        cli = [sys.executable, "-m", "gangmaster.tools.cli", "rm"]
        listing = subprocess.run(cli + ["nodes", "--address", address], capture_output=True, text=True, timeout=30)
        row = next(line for line in listing.stdout.splitlines() if line.startswith("dgx-001"))
        assert listing.returncode == 0 and "RUNNING" in row and "4/8 0xf0" in row
        fault = subprocess.run(cli + ["fault", "--address", address, "restore_node", "--host", "pcie-000"],
                               capture_output=True, text=True, timeout=30)
        assert fault.returncode == 0, fault.stderr
        assert {n.host: n.state for n in rm.cluster_nodes()}["pcie-000"] is NodeState.RUNNING
        bad = subprocess.run(cli + ["fault", "--address", address, "lose_node", "--host", "nosuch"],
                             capture_output=True, text=True, timeout=30)
        assert bad.returncode == 1 and "host: unknown host 'nosuch'" in bad.stderr
        go.write_text("go")
        done = wait_for(lambda: rm.allocate(AllocateRequest(app, 1)).completed)
        assert [(s.container_id, s.state, s.exit_status) for s in done] == [
            (slow.container_id, ContainerState.FAILED, 5)]
        assert all(n.free == n.capacity for n in rm.cluster_nodes())
        # the restored RM keeps serving new work
        resp = rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(3, R(1024, 1, gpus=8)),)))
        assert len(resp.allocated) == 1
        rm.close()
    finally:
        go.write_text("go")          # a task still waiting ends by itself
        stop_rm_serve(server)
        for pid in task_pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def test_serve_rejects_a_malformed_cluster_file(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gangmaster.tools.cli", "rm", "serve", "--cluster", str(FIX / "bad_cluster.yaml")],
        capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert proc.returncode == 2
    assert "bad_cluster.yaml: nodeGroups[0].gpus: expected an integer" in proc.stderr
