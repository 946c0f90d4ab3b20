"""The rm: knobs and fault scenarios reach the RM in every wiring of `gangmaster run`:
simulated, and live (the same LiveRM `gangmaster rm serve` builds)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ContainerState, ResourceRequest
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.job_runner import LiveRuns
from gangmaster.tools.rmsim.rm_settings import RMSettings
from job_texts import one_role_job

REPO = Path(__file__).resolve().parents[2]

TWO_NODES = """
name: two-gpus
nodeGroups:
  - {name: n, count: 2, rack: rack-a, gpuType: V100, memoryMB: 16384, vcores: 4, gpus: 1}
"""


def pair(command: str) -> str:
    """A gang of two 1-GPU tasks running ``command``, restarted once."""
    return one_role_job("pair", 2, command=command, retry=1)


#: The AM asks for both nodes at its heartbeat at 1 s; n-001 is blacklisted before the RM's
#: pass at 1.5 s, so only n-000 is granted and the gang holds it, never started, until
#: n-001 comes back.
BLACKLIST_AFTER_THE_ASK = """
events:
  - {at: 1.2, do: mark_unhealthy, host: n-001}
  - {at: 20, do: restore_node, host: n-001}
"""


def gangmaster(*args, cwd: Path, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("expiry, expired", [("5", True), ("null", False)])
def test_a_simulated_run_honours_rm_allocation_expiry(tmp_path, expiry, expired):
    config = write(tmp_path / "config.yaml", f"rm: {{scheduling_interval_s: 1, allocation_expiry_s: {expiry}}}\n"
                                             "am: {hold_timeout_s: 60}\n")
    result = gangmaster("run", write(tmp_path / "job.yaml", pair("sleep 1")), "--cluster",
                        write(tmp_path / "cluster.yaml", TWO_NODES), "--scenario",
                        write(tmp_path / "scenario.yaml", BLACKLIST_AFTER_THE_ASK), "--config", config,
                        "--work-dir", tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("was lost before it started (container expired: not started within 5s)" in result.stdout) is expired
    assert "job pair (app_0001): SUCCEEDED" in result.stdout


@pytest.mark.slow
def test_a_live_run_plays_a_scenario(tmp_path):
    scenario = write(tmp_path / "scenario.yaml",
                     "events: [{at: 3, do: fail_container, app: app_0001, exitCode: 7}]\n")
    command = 'if [ "$GANGMASTER_ATTEMPT" = 1 ]; then sleep 60; fi'   # attempt 1 runs until the fault
    # the AM's heartbeat a quarter second: attempt 1 runs well before the fault, attempt 2 soon after it
    config = write(tmp_path / "config.yaml", "am: {heartbeat_s: 0.25}\n")
    result = gangmaster("run", write(tmp_path / "job.yaml", pair(command)), "--live", "--cluster",
                        write(tmp_path / "cluster.yaml", TWO_NODES), "--scenario", scenario, "--config", config,
                        "--work-dir", tmp_path / "run", "--timeout", "60", "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gang worker attempt 1: failed" in result.stdout and "exited with status 7" in result.stdout
    assert "gang worker attempt 2: succeeded" in result.stdout


@pytest.mark.slow
def test_a_live_run_honours_rm_allocation_expiry(tmp_path):
    runs = LiveRuns(load_cluster_specs(write(tmp_path / "cluster.yaml", TWO_NODES)), tmp_path / "run",
                    AMSettings(), rm_settings=RMSettings(allocation_expiry_s=0.3))
    try:
        rm = runs.client
        with runs.clock.lock:
            app = rm.submit(ApplicationSubmission("holder"))
            rm.register(app)
            (granted,) = rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, R(1024, 1, gpus=1)),))).allocated
        deadline = time.monotonic() + 10
        completed = []
        while not completed and time.monotonic() < deadline:
            time.sleep(0.05)
            with runs.clock.lock:
                completed = rm.allocate(AllocateRequest(app, 1)).completed
        assert [(c.container_id, c.state) for c in completed] == [(granted.container_id, ContainerState.KILLED)]
        assert "not started within 0.3s" in completed[0].diagnostics
    finally:
        runs.shutdown()
