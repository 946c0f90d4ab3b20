"""A process is named by its pid *and* its start time: a number reused by another
process after the RM went down must not keep a restored container "running"
(nor get that process killed as one of the container's)."""
import json
import os
import time
from pathlib import Path

from gangmaster.protocol.rm_protocol import (
    AllocateRequest, ApplicationSubmission, ContainerState, ExitStatus, LaunchContext, ResourceRequest,
)
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.processes import is_running, session_members, start_time
from gangmaster.tools.rmsim.server import LiveRM

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def test_a_pid_names_a_process_only_together_with_its_start_time():
    me, started = os.getpid(), start_time(os.getpid())
    assert is_running(me, started) and is_running(me)
    assert not is_running(me, started + 1)            # a later process given the same number
    assert session_members(me, started + 1) == []     # ... leads no group of the one that had it
    assert not is_running(2**22 + 1)                  # above any pid the kernel hands out


def test_a_restored_container_whose_pid_now_names_another_process_ends_lost(tmp_path):
    specs = load_cluster_specs(FIX / "cluster.yaml")
    path = tmp_path / "s.json"
    live = LiveRM(specs, state_path=path, work_dir=tmp_path / "t", poll_s=0.02)
    core = live.core
    app = core.submit(ApplicationSubmission("reuse"))
    core.register(app)
    cid = core.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, R(1024, 1, gpus=2)),))).allocated[0].container_id
    core.start_container(cid, LaunchContext.of(["sleep", "1000"]))
    handle = dict(core.containers[cid].handle)
    live.stop()                  # with a state file the task outlives the RM, as after kill -9 ...
    os.killpg(handle["pid"], 9)  # ... then it ends while the RM is down, and its number goes to another process:
    data = json.loads(path.read_text())
    data["containers"][0]["handle"]["pid"] = os.getpid()
    path.write_text(json.dumps(data))

    restored = LiveRM(specs, state_path=path, work_dir=tmp_path / "t", poll_s=0.02)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and restored.core.container_status(cid).state is ContainerState.RUNNING:
            time.sleep(0.02)
        status = restored.core.container_status(cid)
        assert (status.state, status.exit_status) == (ContainerState.FAILED, ExitStatus.LOST_ON_RM_RESTART)
        assert all(n.free == n.capacity for n in restored.core.cluster_nodes())
    finally:
        restored.stop()
