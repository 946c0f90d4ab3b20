"""A stopped container's GPUs, memory and ports are free again only once its processes
are gone: a task that ignores SIGTERM keeps its GPUs booked until it is killed, so the
gang's next attempt can never be granted GPUs a dying task still holds."""
import time
from pathlib import Path

from gangmaster.protocol.rm_protocol import (
    AllocateRequest, ApplicationSubmission, ContainerState, ExitStatus, LaunchContext, ResourceRequest,
)
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.processes import is_running, session_members
from gangmaster.tools.rmsim.server import LiveRM

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def _start_stubborn_task(live, gpus=2):
    core = live.core
    app = core.submit(ApplicationSubmission("stubborn"))
    core.register(app)
    (c,) = core.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, R(1024, 1, gpus=gpus)),))).allocated
    core.start_container(c.container_id, LaunchContext.of(["sh", "-c", "trap '' TERM; sleep 60"]))
    handle = core.containers[c.container_id].handle
    assert _wait_for(lambda: any(_command(pid).startswith(b"sleep") for pid in
                                 session_members(handle["pid"], handle["start_time"]))), "the task never started"
    return app, c


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _free_gpus(core, host):
    return next(n.free.gpus for n in core.cluster_nodes() if n.host == host)


def _wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_a_stopped_containers_gpus_are_free_only_once_its_processes_are_gone(tmp_path):
    live = LiveRM(load_cluster_specs(FIX / "cluster.yaml"), work_dir=tmp_path / "t", poll_s=0.02,
                  kill_grace_s=0.5)
    core = live.core
    try:
        app, c = _start_stubborn_task(live)
        pid = core.containers[c.container_id].handle["pid"]
        started = core.containers[c.container_id].handle["start_time"]
        free_while_running = _free_gpus(core, c.host)
        core.stop_container(c.container_id)
        # the AM learns at once that its container was stopped ...
        status = core.container_status(c.container_id)
        assert (status.state, status.exit_status) == (ContainerState.KILLED, ExitStatus.KILLED_BY_APPMASTER)
        # ... but its GPUs stay booked while the task (ignoring SIGTERM) still runs
        assert is_running(pid, started)
        assert _free_gpus(core, c.host) == free_while_running
        core.check_invariants()
        # once the grace period ends the task is killed, and only then are the GPUs free
        assert _wait_for(lambda: _free_gpus(core, c.host) == free_while_running + 2)
        assert not is_running(pid, started)
        core.check_invariants()
    finally:
        live.stop()


def test_a_restored_rm_keeps_a_stopping_containers_booking_until_its_processes_are_gone(tmp_path):
    specs = load_cluster_specs(FIX / "cluster.yaml")
    path = tmp_path / "s.json"
    live = LiveRM(specs, state_path=path, work_dir=tmp_path / "t", poll_s=0.02, kill_grace_s=30)
    app, c = _start_stubborn_task(live)
    handle = dict(live.core.containers[c.container_id].handle)
    free_while_running = _free_gpus(live.core, c.host)
    live.core.stop_container(c.container_id)
    live.save()
    live.stop()                    # as after kill -9: the stubborn task is still there
    assert is_running(handle["pid"], handle["start_time"])
    restored = LiveRM(specs, state_path=path, work_dir=tmp_path / "t", poll_s=0.02, kill_grace_s=0.5)
    try:
        core = restored.core
        assert core.container_status(c.container_id).state is ContainerState.KILLED
        booked = _free_gpus(core, c.host) == free_while_running
        gone = not is_running(handle["pid"], handle["start_time"])
        assert booked or gone, "the GPUs were freed while the stopped task still ran"
        assert _wait_for(lambda: _free_gpus(core, c.host) == free_while_running + 2)
        assert not is_running(handle["pid"], handle["start_time"])
        core.check_invariants()
    finally:
        restored.stop()


def test_a_killed_applications_report_counts_its_tasks_until_their_processes_are_gone(tmp_path):
    """What a rerun waits on before it starts a job again (tools.job_runner.RemoteRuns):
    the killed application's stopping_containers, > 0 while a task of it still runs."""
    live = LiveRM(load_cluster_specs(FIX / "cluster.yaml"), work_dir=tmp_path / "t", poll_s=0.02,
                  kill_grace_s=0.5)
    core = live.core
    try:
        app, c = _start_stubborn_task(live)
        assert core.application_report(app).stopping_containers == 0     # running, not stopping
        core.kill(app, "a rerun takes the job over")
        report = core.application_report(app)
        assert report.state.finished and report.running_containers == 0
        assert report.stopping_containers == 1                          # it ignores SIGTERM: still there
        assert _wait_for(lambda: core.application_report(app).stopping_containers == 0), \
            "the report still counts a task killed after the grace period"
        assert not session_members(core.containers[c.container_id].handle["pid"],
                                   core.containers[c.container_id].handle["start_time"])
    finally:
        live.stop()
