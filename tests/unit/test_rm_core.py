"""The RM core in virtual time: allocation, arbitration, queues, lifecycle, faults."""
from pathlib import Path

import pytest

from gangmaster.protocol.reasons import ReasonCode, reason
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationSubmission, AppState, ContainerState, ExitStatus, InvalidRequest, LaunchContext,
    NodeState, NotFound, ResourceRequest, WrongState,
)
from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.selectors.resources import ResourceError
from gangmaster.tools.rmsim.ledger import NodeLedger
from gangmaster.tools.rmsim.queues import Queue, load_queues
from gangmaster.tools.rmsim.simulation import Simulation
from gangmaster.tools.rmsim.workload import raw_task_env

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


@pytest.fixture
def sim():
    return Simulation.from_files(FIX / "cluster.yaml")


def start_app(sim, name="job", queue="default", **kw):
    app = sim.client.submit(ApplicationSubmission(name, queue=queue, **kw))
    return app, sim.client.register(app).attempt


def beat(sim, app, attempt=1, *asks, **kw):
    return sim.client.allocate(AllocateRequest(app, attempt, asks=tuple(asks), **kw))


def test_host_named_ask_gets_that_host_and_named_gpus(sim):
    app, att = start_app(sim)
    resp = beat(sim, app, att, ResourceRequest(7, R(1024, 2, gpu_mask=0b1100), host="dgx-001", relax_locality=False))
    (c,) = resp.allocated
    assert (c.host, c.rack, c.request_id, c.resource.gpu_mask, c.resource.gpus) == ("dgx-001", "rack-a", 7, 0b1100, 2)
    node = {n.host: n for n in sim.client.cluster_nodes()}["dgx-001"]
    assert node.free.gpu_mask == 0b11110011 and node.free.memory_mb == 65536 - 1024 and node.containers == 1


def test_two_ams_same_host_loser_pending_then_granted_after_release(sim):
    a, _ = start_app(sim, "a")
    b, _ = start_app(sim, "b")
    ask = ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False)
    won = beat(sim, a, 1, ask)
    lost = beat(sim, b, 1, ask)
    assert len(won.allocated) == 1 and lost.allocated == ()
    (pending,) = lost.pending
    assert pending.request_id == 1 and pending.remaining == 1 and "dgx-000" in str(pending.reason) and "GPUs" in str(pending.reason)
    beat(sim, a, 1, releases=(won.allocated[0].container_id,))
    later = beat(sim, b, 1)
    assert [c.host for c in later.allocated] == ["dgx-000"] and later.pending == ()
    sim.core.check_invariants()


def test_relaxed_locality_falls_back_to_rack_then_anywhere(sim):
    app, _ = start_app(sim)
    full = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False))
    assert len(full.allocated) == 1
    resp = beat(sim, app, 1, ResourceRequest(2, R(1024, 1, gpus=8), host="dgx-000", relax_locality=True))
    assert [c.host for c in resp.allocated] == ["dgx-001"]          # same rack
    resp = beat(sim, app, 1, ResourceRequest(3, R(1024, 1, gpus=4), host="dgx-000", relax_locality=True))
    assert resp.allocated[0].rack == "rack-b"                         # anywhere
    resp = beat(sim, app, 1, ResourceRequest(4, R(1024, 1, gpus=4), rack="rack-a", relax_locality=False))
    assert resp.allocated == () and "rack rack-a" in str(resp.pending[0].reason)


def test_never_fitting_asks_are_rejected_with_a_reason(sim):
    app, _ = start_app(sim)
    resp = beat(sim, app, 1,
                ResourceRequest(1, R(1024, 1, gpus=9)),
                ResourceRequest(2, R(1024, 1, gpus=4), host="cpu-000", relax_locality=False),
                ResourceRequest(3, R(1024, 1, gpu_mask=1 << 6), host="pcie-000", relax_locality=False),
                ResourceRequest(4, R(1024, 1), node_label="infiniband"),
                ResourceRequest(5, R(10 ** 9, 1)))
    reasons = {r.request_id: str(r.reason) for r in resp.rejected}
    assert set(reasons) == {1, 2, 3, 4, 5} and resp.allocated == () and resp.pending == ()
    assert "can never fit" in reasons[1]
    assert "cpu-000 has 0 GPU(s)" in reasons[2]
    assert "mask 0x40" in reasons[3]
    assert "infiniband" in reasons[4]
    assert "memory" in reasons[5] or "can never fit" in reasons[5]


@pytest.mark.parametrize("ask, field", [
    (ResourceRequest(1, R(1), host="nosuch"), "asks[1].host"),
    (ResourceRequest(1, R(1), rack="rack-z"), "asks[1].rack"),
    (ResourceRequest(1, R(1), host="dgx-000", rack="rack-b"), "asks[1].rack"),
    (ResourceRequest(1, R(1), count=0), "asks[1].count"),
])
def test_bad_asks_raise_naming_the_field_and_change_nothing(sim, ask, field):
    app, _ = start_app(sim)
    good = ResourceRequest(9, R(1024, 1))
    with pytest.raises(InvalidRequest, match=field.replace("[", r"\[").replace("]", r"\]")):
        sim.client.allocate(AllocateRequest(app, 1, asks=(good, ask)))
    assert sim.client.application_report(app).pending_containers == 0
    assert len(beat(sim, app, 1, good).allocated) == 1     # still serving


def test_other_bad_input():
    with pytest.raises(ResourceError, match="memory_mb"):
        R(-1)
    sim = Simulation.from_files(FIX / "cluster.yaml")
    with pytest.raises(NotFound, match="queue"):
        sim.client.submit(ApplicationSubmission("x", queue="nosuch"))
    with pytest.raises(NotFound, match="app_id"):
        sim.client.register("app_9999")
    app, _ = start_app(sim)
    with pytest.raises(InvalidRequest, match=r"releases\[0\]"):
        beat(sim, app, 1, releases=("container_bogus",))
    with pytest.raises(InvalidRequest, match=r"blacklist_additions\[0\]"):
        beat(sim, app, 1, blacklist_additions=("nosuch",))
    with pytest.raises(WrongState, match="attempt 2"):
        beat(sim, app, 2)
    with pytest.raises(NotFound, match="container_id"):
        sim.client.start_container("container_x", LaunchContext.of())
    with pytest.raises(InvalidRequest, match="request_id"):
        beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False),
             ResourceRequest(1, R(1024, 1)))


def test_blacklist_additions_and_removals(sim):
    app, _ = start_app(sim)
    hosts = ["dgx-000", "dgx-001", "pcie-000", "pcie-001"]
    resp = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=1), count=4),
                blacklist_additions=("dgx-000", "dgx-001"))
    assert {c.host for c in resp.allocated} <= {"pcie-000", "pcie-001"}
    resp = beat(sim, app, 1, ResourceRequest(2, R(1024, 1, gpus=4), host="dgx-000", relax_locality=False))
    assert resp.allocated == () and resp.pending[0].remaining == 1
    resp = beat(sim, app, 1, blacklist_removals=("dgx-000",))
    assert [c.host for c in resp.allocated] == ["dgx-000"]
    assert all(c.host in hosts for c in resp.allocated)


def test_cancel_drops_the_rest_of_an_ask(sim):
    app, _ = start_app(sim)
    resp = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=8), count=5))
    assert len(resp.allocated) == 2 and resp.pending[0].remaining == 3
    resp = beat(sim, app, 1, cancel=(1,))
    assert resp.pending == () and sim.client.application_report(app).pending_containers == 0


def queued_sim():
    specs = load_cluster_specs(FIX / "cluster.yaml")
    return Simulation(specs, load_queues(FIX / "queues.yaml", NodeLedger(specs)))


def test_headroom_is_what_was_free_when_the_response_was_made(sim):
    """A response's headroom, built when first read, is what its queue could be given when
    the RM answered, whatever was granted after; it compares and hashes as a descriptor."""
    app, attempt = start_app(sim)
    free = sim.core.ledger
    before = beat(sim, app, attempt)
    gpus_free = int(free.gpus_free.sum())
    assert before.headroom == R(int(free.memory_free.sum()), int(free.mvcores_free.sum()) / 1000.0, gpus_free)
    granted = beat(sim, app, attempt, ResourceRequest(1, R(1024, 1, gpus=2)))
    unread = beat(sim, app, attempt)
    beat(sim, app, attempt, ResourceRequest(2, R(1024, 1, gpus=1)))
    assert granted.allocated and unread.headroom.gpus == gpus_free - 2 == granted.headroom.gpus
    assert unread.headroom.memory_mb == before.headroom.memory_mb - 1024
    copy = AllocateResponse(unread.allocated, unread.completed, unread.node_updates, unread.rejected, unread.pending,
                            unread.headroom, unread.response_id)
    assert copy == unread and hash(copy) == hash(unread)
    assert AllocateResponse().headroom == R()


def test_queue_limit_is_enforced():
    sim = queued_sim()
    app, _ = start_app(sim, queue="research")
    resp = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=1), count=10),
                ResourceRequest(2, R(1024, 1, gpus=9)))
    assert len(resp.allocated) == 8
    assert resp.rejected[0].request_id == 2 and "queue research" in str(resp.rejected[0].reason)
    assert resp.pending[0].remaining == 2 and "queue research limit" in str(resp.pending[0].reason)
    assert resp.headroom.gpus == 0
    sim.core.check_invariants()


def test_fair_between_queues_fifo_within():
    specs = load_cluster_specs(FIX / "cluster.yaml")
    sim = Simulation(specs, [Queue("a", max_gpus=24), Queue("b", max_gpus=24), Queue("c", max_gpus=24)])
    a1, _ = start_app(sim, "a1", queue="a")
    a2, _ = start_app(sim, "a2", queue="a")
    b1, _ = start_app(sim, "b1", queue="b")
    hog, _ = start_app(sim, "hog", queue="c")
    held = beat(sim, hog, 1, ResourceRequest(1, R(1024, 1, gpus=1), count=24)).allocated
    assert len(held) == 24                     # the cluster's 24 GPUs are all taken
    ask = ResourceRequest(1, R(512, 0.5, gpus=1), count=24)
    for app in (a2, a1, b1):                   # a2 asks before a1, but a1 was submitted first
        assert beat(sim, app, 1, ask).allocated == ()
    beat(sim, hog, 1, releases=tuple(c.container_id for c in held))
    got = {a: len(beat(sim, a, 1).allocated) for a in (a1, a2, b1)}
    assert got == {a1: 12, a2: 0, b1: 12}      # fair between queues, FIFO inside queue a
    sim.core.check_invariants()


def test_container_lifecycle_exit_codes(sim):
    app, _ = start_app(sim)
    resp = beat(sim, app, 1, ResourceRequest(1, R(1024, 1), count=4))
    ok, bad, stopped, released = (c.container_id for c in resp.allocated)
    sim.client.start_container(ok, LaunchContext.of(["true"], raw_task_env(5)))
    sim.client.start_container(bad, LaunchContext.of(["false"], raw_task_env(3, exit_code=3)))
    sim.client.start_container(stopped, LaunchContext.of(["sleep"]))
    assert sim.client.container_status(ok).state is ContainerState.RUNNING
    with pytest.raises(WrongState, match="ALLOCATED"):
        sim.client.start_container(ok, LaunchContext.of())
    sim.run_until(4)
    sim.client.stop_container(stopped)
    resp = beat(sim, app, 1, releases=(released,))
    sim.run_until(6)
    resp2 = beat(sim, app, 1)
    status = {s.container_id: s for s in resp.completed + resp2.completed}
    assert (status[bad].state, status[bad].exit_status) == (ContainerState.FAILED, 3)
    assert (status[stopped].state, status[stopped].exit_status) == (ContainerState.KILLED, ExitStatus.KILLED_BY_APPMASTER)
    assert (status[released].state, status[released].exit_status) == (ContainerState.KILLED, ExitStatus.ABORTED)
    assert (status[ok].state, status[ok].exit_status) == (ContainerState.COMPLETED, 0)
    assert sum(n.containers for n in sim.client.cluster_nodes()) == 0
    sim.core.check_invariants()


def test_node_lost_unhealthy_restored(sim):
    app, _ = start_app(sim)
    resp = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False),
                ResourceRequest(2, R(1024, 1, gpus=2), host="pcie-000", relax_locality=False))
    on_dgx = next(c for c in resp.allocated if c.host == "dgx-000").container_id
    on_pcie = next(c for c in resp.allocated if c.host == "pcie-000").container_id
    sim.core.lose_node("dgx-000", "power")
    sim.core.mark_unhealthy("pcie-000", "disk full")
    resp = beat(sim, app, 1, ResourceRequest(3, R(1024, 1, gpus=1), host="pcie-000", relax_locality=False))
    (lost,) = resp.completed
    assert (lost.container_id, lost.state, lost.exit_status) == (on_dgx, ContainerState.KILLED, ExitStatus.NODE_LOST)
    updates = {n.host: n for n in resp.node_updates}
    assert updates["dgx-000"].state is NodeState.LOST and updates["pcie-000"].state is NodeState.UNHEALTHY
    assert updates["pcie-000"].health_report == "disk full"
    assert resp.allocated == () and "UNHEALTHY" in str(resp.pending[0].reason)
    assert sim.client.container_status(on_pcie).state is ContainerState.ALLOCATED   # unhealthy keeps containers
    sim.core.restore_node("pcie-000")
    resp = beat(sim, app, 1)
    assert [c.host for c in resp.allocated] == ["pcie-000"]
    assert resp.node_updates[0].state is NodeState.RUNNING
    sim.core.check_invariants()


def test_kill_am_keeps_containers_when_asked():
    sim = Simulation.from_files(FIX / "cluster.yaml")
    app, _ = start_app(sim, keep_containers_across_attempts=True, max_attempts=2)
    resp = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=1), count=2))
    run, idle = (c.container_id for c in resp.allocated)
    sim.client.start_container(run, LaunchContext.of(["x"]))
    events = []
    sim.subscribe(events.append)
    sim.core.kill_am(app)
    assert [e.kind for e in events if e.kind == "attempt_failed"] == ["attempt_failed"]
    with pytest.raises(WrongState):
        beat(sim, app, 1)
    reg = sim.client.register(app)
    assert reg.attempt == 2 and [c.container_id for c in reg.containers_from_previous_attempts] == [run]
    assert sim.client.container_status(idle).state is ContainerState.KILLED
    sim.core.kill_am(app)
    report = sim.client.application_report(app)
    assert report.state is AppState.FAILED and "attempt 2 of 2" in report.diagnostics
    assert sim.client.container_status(run).exit_status == ExitStatus.KILLED_AFTER_APP_COMPLETION
    sim.core.check_invariants()


def test_am_expiry_fails_the_attempt_without_heartbeats():
    sim = Simulation.from_files(FIX / "cluster.yaml")
    app, _ = start_app(sim, am_expiry_s=10, max_attempts=1)
    beat(sim, app, 1, ResourceRequest(1, R(1024, 1), count=1))
    sim.run_until(8)
    beat(sim, app, 1)
    sim.run_until(17)
    assert sim.client.application_report(app).state is AppState.RUNNING
    sim.run_until(19)
    report = sim.client.application_report(app)
    assert report.state is AppState.FAILED and "no heartbeat for 10s" in report.diagnostics


def test_kill_and_finish_free_everything(sim):
    a, _ = start_app(sim, "a")
    b, _ = start_app(sim, "b")
    beat(sim, a, 1, ResourceRequest(1, R(1024, 1, gpus=2), count=3))
    beat(sim, b, 1, ResourceRequest(1, R(1024, 1, gpus=2), count=3))
    sim.client.kill(a, "user asked")
    sim.client.finish(b, 1, "SUCCEEDED")
    ra, rb = sim.client.application_report(a), sim.client.application_report(b)
    assert (ra.state, rb.state, rb.final_status) == (AppState.KILLED, AppState.FINISHED, "SUCCEEDED")
    assert all(n.free == n.capacity for n in sim.client.cluster_nodes())
    with pytest.raises(WrongState):
        beat(sim, b, 1)


def test_scenario_file_drives_faults():
    sim = Simulation.from_files(FIX / "cluster.yaml", scenario=FIX / "scenario.yaml")
    app, _ = start_app(sim, max_attempts=2)
    resp = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=8), count=2))
    for c in resp.allocated:
        sim.client.start_container(c.container_id, LaunchContext.of(["x"]))
    statuses = []
    sim.every(1.0, lambda: statuses.extend(beat(sim, app, 1).completed)
              if sim.client.application_report(app).attempt == 1 else None)
    sim.run_until(30)
    by_host = {s.host: s for s in statuses}
    assert (by_host["dgx-000"].state, by_host["dgx-000"].exit_status) == (ContainerState.FAILED, 3)
    assert by_host["dgx-001"].exit_status == ExitStatus.NODE_LOST
    assert [a for _, a, _ in sim.scenario.log] == ["fail_container", "lose_node", "mark_unhealthy",
                                                   "restore_node", "kill_am"]
    assert sim.client.application_report(app).attempt == 2
    nodes = {n.host: n.state for n in sim.client.cluster_nodes()}
    assert nodes["dgx-001"] is NodeState.RUNNING and nodes["pcie-000"] is NodeState.UNHEALTHY


@pytest.mark.parametrize("name, field", [
    ("bad_scenario_action.yaml", "events[0].do"),
    ("bad_scenario_host.yaml", "events[0].host"),
    ("bad_scenario_time.yaml", "events[0].at"),
])
def test_malformed_scenarios_name_the_field(name, field):
    with pytest.raises(ConfigError) as err:
        Simulation.from_files(FIX / "cluster.yaml", scenario=FIX / name)
    assert name in str(err.value) and field in str(err.value)


def test_malformed_queue_and_cluster_files_name_the_field():
    with pytest.raises(ConfigError, match=r"bad_queues.yaml: queues\[0\].machines"):
        Simulation.from_files(FIX / "cluster.yaml", queues=FIX / "bad_queues.yaml")
    with pytest.raises(ConfigError, match=r"bad_cluster.yaml: nodeGroups\[0\].gpus"):
        Simulation.from_files(FIX / "bad_cluster.yaml")


def run_workload(seed_events):
    sim = Simulation.from_files(FIX / "cluster.yaml", scenario=FIX / "scenario.yaml")
    sim.subscribe(seed_events.append)
    apps = [start_app(sim, f"j{k}")[0] for k in range(3)]
    rid = [0]

    def heartbeat(app):
        rid[0] += 1
        resp = beat(sim, app, sim.client.application_report(app).attempt,
                    ResourceRequest(rid[0], R(1024, 1, gpus=1 + rid[0] % 3), count=2))
        for c in resp.allocated:
            sim.client.start_container(c.container_id, LaunchContext.of(env=raw_task_env(1 + rid[0] % 4)))

    for app in apps:
        sim.every(1.0, lambda app=app: heartbeat(app)
                  if sim.client.application_report(app).state is AppState.RUNNING else None)
    sim.run_until(24)
    sim.core.check_invariants()


def test_same_inputs_same_event_sequence():
    first, second = [], []
    run_workload(first)
    run_workload(second)
    assert len(first) > 50 and first == second


def test_node_label_restricts_placement_even_when_relaxed(sim):
    app, _ = start_app(sim)
    resp = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=1), host="pcie-000", node_label="nvlink", count=2))
    assert [c.host for c in resp.allocated] == ["dgx-000", "dgx-000"]   # pcie-000 lacks the label
    resp = beat(sim, app, 1, ResourceRequest(2, R(1024, 1, gpus=1), host="pcie-000", node_label="nvlink",
                                             relax_locality=False))
    assert "does not have label 'nvlink'" in str(resp.rejected[0].reason)


def test_many_identical_blocked_asks_all_stay_pending_with_the_reason(sim):
    app, _ = start_app(sim)
    beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=4), count=6))          # every GPU taken
    resp = beat(sim, app, 1, *(ResourceRequest(10 + k, R(1024, 1, gpus=1)) for k in range(5)))
    assert resp.allocated == () and len(resp.pending) == 5
    assert all("no usable node in the cluster" in str(p.reason) for p in resp.pending)


def test_allocated_but_never_started_containers_expire():
    sim = Simulation(load_cluster_specs(FIX / "cluster.yaml"), allocation_expiry_s=5)
    app, _ = start_app(sim)
    idle, used = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=8), count=2)).allocated
    sim.client.start_container(used.container_id, LaunchContext.of(["x"]))
    sim.run_until(6)
    (expired,) = beat(sim, app, 1).completed
    assert (expired.container_id, expired.state, expired.exit_status) == (
        idle.container_id, ContainerState.KILLED, ExitStatus.ABORTED)
    assert "not started within 5s" in expired.diagnostics
    assert sim.client.container_status(used.container_id).state is ContainerState.RUNNING


def test_an_unused_node_reports_all_of_itself_free_as_the_ledger_holds_it():
    """Whole-milli vcores report the capacity itself; vcores finer than a milli report the
    ledger's booked amount (the capacity rounded to millis), never the unrounded capacity."""
    from gangmaster.selectors.cluster import NodeSpec
    from gangmaster.selectors.ports import PortRanges
    specs = [NodeSpec("whole", memory_mb=4096, vcores=2.5, gpus=2, ports=PortRanges.of((8000, 8009))),
             NodeSpec("fine", memory_mb=4096, vcores=1.0004, gpus=0)]
    sim = Simulation(specs)
    ledger = sim.core.ledger
    for _ in range(2):   # the first report and the remembered one alike
        reports = {n.host: n for n in sim.client.cluster_nodes()}
        for i, spec in enumerate(specs):
            assert reports[spec.host].free == ledger.free(i)
    assert reports["whole"].free == reports["whole"].capacity
    assert reports["fine"].free.vcores == 1.0 != reports["fine"].capacity.vcores


@pytest.mark.parametrize("interval", [None, 1.0])
def test_never_fitting_asks_are_rejected_in_their_call_in_order_beside_granted_ones(interval):
    """Never-fitting asks are answered in the call that made them, in the order asked,
    whether the RM schedules in the call or later; asks that fit are granted or wait."""
    sim = Simulation(load_cluster_specs(FIX / "cluster.yaml"), scheduling_interval_s=interval)
    app, att = start_app(sim)
    resp = beat(sim, app, att,
                ResourceRequest(1, R(1024, 1, gpus=9)),
                ResourceRequest(2, R(1024, 1, gpus=1), host="dgx-000", relax_locality=False),
                ResourceRequest(3, R(1024, 1), node_label="infiniband"),
                ResourceRequest(4, R(1024, 1, gpus=2), count=2),
                ResourceRequest(5, R(1024, 1, gpus=4), host="cpu-000", relax_locality=False))
    assert [r.request_id for r in resp.rejected] == [1, 3, 5]
    if interval is None:
        assert sorted(c.request_id for c in resp.allocated) == [2, 4, 4] and resp.pending == ()
    else:
        assert resp.allocated == () and sorted(p.request_id for p in resp.pending) == [2, 4]
        sim.run_until(2.0)
        later = beat(sim, app, att)
        assert sorted(c.request_id for c in later.allocated) == [2, 4, 4] and later.rejected == ()
    sim.core.check_invariants()


def test_a_one_host_ask_says_why_it_waits_as_locality_levels_would(sim):
    """An ask of one host, locality not relaxed, is tried on that host alone: refused there,
    it waits with the host's refusal (an alike ask of the same pass with the same one);
    its host blacklisted, with the scope no usable node of which has it free."""
    a, _ = start_app(sim, "a")
    b, _ = start_app(sim, "b")
    full = ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False)
    assert len(beat(sim, a, 1, full).allocated) == 1
    resp = beat(sim, b, 1, ResourceRequest(1, R(1024, 1, gpu_mask=0b1), host="dgx-000", relax_locality=False),
                ResourceRequest(2, R(1024, 1, gpu_mask=0b1), host="dgx-000", relax_locality=False))
    first, second = resp.pending
    assert str(first.reason) == "host dgx-000: GPUs 0x1 of mask 0x1 are taken"
    assert second.reason == first.reason
    c, _ = start_app(sim, "c")
    resp = beat(sim, c, 1, ResourceRequest(1, R(1024, 1, gpus=1), host="dgx-001", relax_locality=False),
                blacklist_additions=("dgx-001",))
    (pending,) = resp.pending
    assert str(pending.reason) == f"no usable node in dgx-001 has {R(1024, 1, gpus=1)} free"
    sim.core.check_invariants()


def test_an_event_is_a_value_whose_detail_is_formatted_when_read(sim):
    from gangmaster.tools.rmsim.core import RMEvent
    heard = []
    sim.core.subscribe(heard.append, kinds=("container_finished",))
    app, _ = start_app(sim)
    (c,) = beat(sim, app, 1, ResourceRequest(1, R(1024, 1))).allocated
    sim.client.start_container(c.container_id, LaunchContext.of(["false"], raw_task_env(2, exit_code=3)))
    sim.run_until(5)
    (event,) = heard
    assert (event.kind, event.app_id, event.container_id) == ("container_finished", app, c.container_id)
    assert event.detail == "FAILED exit=3 process exited with code 3"
    same = RMEvent(event.time, event.kind, event.app_id, event.container_id, event.host,
                   "FAILED exit=3 process exited with code 3")
    assert same == event and hash(same) == hash(event) and repr(same) == repr(event)
    assert "detail='FAILED exit=3" in repr(event)


def test_a_node_emptied_again_reports_as_it_did_unused_and_its_state_still_shows(sim):
    """A node whose last container ended reports all of itself free, as before its first
    container; a change of its health is reported even while it holds nothing."""
    before = {n.host: n for n in sim.client.cluster_nodes()}["dgx-000"]
    app, _ = start_app(sim)
    (c,) = beat(sim, app, 1, ResourceRequest(1, R(1024, 1, gpus=2), host="dgx-000", relax_locality=False)).allocated
    used = {n.host: n for n in sim.client.cluster_nodes()}["dgx-000"]
    assert used.containers == 1 and used.free != before.free
    beat(sim, app, 1, releases=(c.container_id,))
    assert {n.host: n for n in sim.client.cluster_nodes()}["dgx-000"] == before
    sim.core.mark_unhealthy("dgx-000", "disk full")
    sick = {n.host: n for n in sim.client.cluster_nodes()}["dgx-000"]
    assert (sick.state, sick.health_report, sick.free) == (NodeState.UNHEALTHY, "disk full", before.free)
    sim.core.restore_node("dgx-000")
    assert {n.host: n for n in sim.client.cluster_nodes()}["dgx-000"] == before


def test_a_relaxed_ask_that_waits_keeps_its_hosts_reason_whole_within_its_own(sim):
    """The reason of a relaxed ask names its host's shortfall inside its own: as a reason
    (its code and numbers), not as words folded into the outer one."""
    app, _ = start_app(sim)
    asks = [ResourceRequest(k, R(1024, 1, gpus=8), host=f"dgx-00{k}", relax_locality=False) for k in range(2)]
    assert len(beat(sim, app, 1, *asks).allocated) == 2   # both 8-GPU nodes taken
    resp = beat(sim, app, 1, ResourceRequest(9, R(1024, 1, gpus=8), host="dgx-000", relax_locality=True))
    (pending,) = resp.pending
    assert pending.reason.code is ReasonCode.NO_NODE_FREE_BECAUSE and pending.reason.cause == reason(
        ReasonCode.GPUS_SHORT, host="dgx-000", free=0, asked=8)
    assert str(pending.reason) == (f"no usable node in dgx-000 has {R(1024, 1, gpus=8)} free "
                                   f"(host dgx-000: GPUs free 0 < 8 asked)")
