"""The live RM's state file: a save/restore round trip keeps everything, a file that
would double-book is refused, and scenarios play on the real-time clock."""
import json
import time
from pathlib import Path

import pytest

from gangmaster.protocol.rm_protocol import (
    AllocateRequest, ApplicationSubmission, GangRole, LaunchContext, NodeState, ResourceRequest,
)
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim import state
from gangmaster.tools.rmsim.clock import VirtualLoop
from gangmaster.tools.rmsim.nodemanager import SimulatedNodeManager
from gangmaster.tools.rmsim.scenario import Scenario
from gangmaster.tools.rmsim.live_rm import LiveRM
from gangmaster.tools.rmsim.queues import Queue
from gangmaster.tools.rmsim.simulation import Simulation

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def busy_sim():
    sim = Simulation.from_files(FIX / "cluster.yaml")
    app = sim.client.submit(ApplicationSubmission("s", keep_containers_across_attempts=True))
    sim.client.register(app)
    resp = sim.client.allocate(AllocateRequest(app, 1, asks=(
        ResourceRequest(1, R(1024, 1.5, gpus=3, ports=2), count=3),
        ResourceRequest(2, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False, count=2)),
        blacklist_additions=("pcie-001",)))
    sim.client.start_container(resp.allocated[0].container_id, LaunchContext.of(["x"], env={"A": "1"}))
    sim.core.mark_unhealthy("cpu-000", "fan")
    sim.core.fail_container(resp.allocated[1].container_id, 9)
    return sim, app


def test_round_trip_keeps_everything(tmp_path):
    sim, app = busy_sim()
    path = tmp_path / "state.json"
    state.save(sim.core, path)
    loop = VirtualLoop(start=sim.now())
    restored = state.load(path, loop, SimulatedNodeManager(loop))
    restored.check_invariants()
    assert state.snapshot(restored) == state.snapshot(sim.core)
    # the restored core goes on from where the first one was
    a = restored.allocate(AllocateRequest(app, 1))
    b = sim.core.allocate(AllocateRequest(app, 1))
    assert a == b and a.completed and a.pending


def test_a_file_written_before_the_rm_was_split_loads_and_is_written_back_the_same():
    """fixtures/rm/state-format1.json was written by the RM before its collaborators each kept
    their part (main at 93f559f: a running application with a pending ask, a blacklist, an AM
    expiry and containers running, failed and killed; a finished one; one waiting for its AM;
    an unhealthy node): it loads, and is written back key for key (so the RM before the split
    reads what this one writes)."""
    path = FIX / "state-format1.json"
    saved = json.loads(path.read_text())
    loop = VirtualLoop(start=saved["time"])
    restored = state.load(path, loop, SimulatedNodeManager(loop))
    restored.check_invariants()
    assert json.loads(json.dumps(state.snapshot(restored))) == saved
    assert [a.app_id for a in restored.apps.values() if a.asks] == ["app_0001"]
    assert restored.application_report("app_0002").final_status == "SUCCEEDED"


def test_a_state_file_that_double_books_is_refused(tmp_path):
    sim, _ = busy_sim()
    data = state.snapshot(sim.core)
    live = [c for c in data["containers"] if c["state"] in ("ALLOCATED", "RUNNING")]
    clone = dict(live[0], container_id="container_9999_01_999999")
    data["containers"].append(clone)
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    loop = VirtualLoop()
    with pytest.raises(ConfigError, match="state.json.*does not fit"):
        state.load(path, loop, SimulatedNodeManager(loop))
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="state.json"):
        state.load(path, loop, SimulatedNodeManager(loop))


def test_scenario_on_the_real_time_clock(tmp_path):
    specs = load_cluster_specs(FIX / "cluster.yaml")
    live = LiveRM(specs, state_path=tmp_path / "s.json", work_dir=tmp_path / "t", poll_s=0.02, save_every_s=0.02)
    try:
        live.play(Scenario.parse("events: [{at: 0.05, do: lose_node, host: dgx-001}]",
                                 hosts={s.host for s in specs}))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            nodes = {n.host: n.state for n in live.core.cluster_nodes()}
            if nodes["dgx-001"] is NodeState.LOST:
                break
            time.sleep(0.02)
        assert nodes["dgx-001"] is NodeState.LOST
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and '"LOST"' not in (tmp_path / "s.json").read_text():
            time.sleep(0.02)
        assert '"LOST"' in (tmp_path / "s.json").read_text()   # saved by the clock's save timer
    finally:
        live.stop()


def test_live_am_that_stops_heartbeating_is_declared_dead(tmp_path):
    from gangmaster.protocol.rm_protocol import AppState
    specs = load_cluster_specs(FIX / "cluster.yaml")
    live = LiveRM(specs, work_dir=tmp_path / "t")
    try:
        core = live.core
        app = core.submit(ApplicationSubmission("quiet", am_expiry_s=0.1, max_attempts=2))
        core.register(app)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and core.application_report(app).attempt == 1:
            time.sleep(0.02)
        report = core.application_report(app)
        assert (report.state, report.attempt) == (AppState.ACCEPTED, 2)
        assert "no heartbeat for 0.1s" in report.diagnostics
    finally:
        live.stop()


def reserving_sim():
    """A reserving queue on fixtures/rm/cluster.yaml: a job declared to run 100 s holds
    dgx-000, a gang of both dgx nodes (priority 3) waits, and another job's ask runs a pass."""
    sim = Simulation(load_cluster_specs(FIX / "cluster.yaml"), [Queue("default", policy="reserve")])
    rm = sim.client
    running = rm.submit(ApplicationSubmission("running", expected_duration_s=100.0))
    rm.register(running)
    rm.allocate(AllocateRequest(running, 1, asks=(
        ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False),)))
    gang = rm.submit(ApplicationSubmission("gang", priority=3, expected_duration_s=50.0,
                                           gang=(GangRole("worker", 2, gpus=8, vcores=1, memory_mb=1024),)))
    rm.register(gang)
    other = rm.submit(ApplicationSubmission("other"))
    rm.register(other)
    rm.allocate(AllocateRequest(other, 1, asks=(ResourceRequest(1, R(1024, 1, gpus=4)),)))
    return sim, gang


def test_a_restarted_rm_holds_the_reservation_it_held(tmp_path):
    """The applications' declared priority, gang and duration are in the state file, so the RM
    restarted from it holds the same nodes for the same gang from the same instant (before:
    none of them was saved, and the restored RM held nothing)."""
    sim, gang = reserving_sim()
    held = sim.core.reservations.reserved_for(gang)
    assert held is not None and sorted(held.gpus_by_host) == ["dgx-000", "dgx-001"]
    path = tmp_path / "state.json"
    state.save(sim.core, path)
    loop = VirtualLoop(start=sim.now())
    restored = state.load(path, loop, SimulatedNodeManager(loop))
    assert restored.reservations.reserved_for(gang) == held
    app = restored.apps[gang]
    assert (app.priority, app.roles, app.expected_s) == (3, sim.core.apps[gang].roles, 50.0)
    assert state.snapshot(restored) == state.snapshot(sim.core)


def test_a_restarted_rm_keeps_its_queues_reservation_bounds(tmp_path):
    """A queue's ``reserve_after_s`` and the file's ``cluster_reservations`` survive a restart
    (before: they were not saved, and the restored RM reserved at once, one gang at a time)."""
    queue = Queue("default", policy="reserve", reserve_after_s=30.0, cluster_reservations=3)
    sim = Simulation(load_cluster_specs(FIX / "cluster.yaml"), [queue])
    path = tmp_path / "state.json"
    state.save(sim.core, path)
    loop = VirtualLoop(start=sim.now())
    restored = state.load(path, loop, SimulatedNodeManager(loop)).queues["default"]
    assert (restored.reserve_after_s, restored.cluster_reservations) == (30.0, 3)


@pytest.mark.parametrize("field, saved, error", [
    ("gang", [["w", 0, 8, 0, 1.0, 1024, None]], r"application app_0002: gang\[0\].instances"),
    ("gang", [["w"]], r"state.json.*consistent RM state file"),
    ("expected_s", -5, r"application app_0002: expected_duration_s"),
    ("priority", 10 ** 6, r"application app_0002: priority.*MAX_PRIORITY"),
])
def test_a_bad_declaration_in_a_state_file_is_refused_naming_it(tmp_path, field, saved, error):
    sim, gang = reserving_sim()
    data = state.snapshot(sim.core)
    next(a for a in data["apps"] if a["app_id"] == gang)[field] = saved
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    loop = VirtualLoop()
    with pytest.raises(ConfigError, match=error):
        state.load(path, loop, SimulatedNodeManager(loop))


def test_a_queue_setting_out_of_range_in_a_state_file_is_refused_naming_it(tmp_path):
    sim, _ = reserving_sim()
    data = state.snapshot(sim.core)
    assert data["queues"][0]["policy"] == "reserve"
    data["queues"][0]["policy"] = "lottery"
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    loop = VirtualLoop()
    with pytest.raises(ConfigError, match=r"state.json.*queue default: .*policy one of fifo, reserve.*'lottery'"):
        state.load(path, loop, SimulatedNodeManager(loop))
