"""One AM-side code path, two RMs: the in-process core and the gRPC server give the
same answers and raise the same errors."""
import time
from pathlib import Path

import pytest

from gangmaster.protocol.reasons import ReasonCode, reason
from gangmaster.protocol.rm_client import RMClient
from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.protocol.rm_codec import (
    allocate_request_from_pb, allocate_request_to_pb, allocate_response_from_pb, allocate_response_to_pb,
    submission_from_pb, submission_to_pb,
)
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationSubmission, ContainerState, GangRole, InvalidRequest, LaunchContext,
    HeldReservation, NodeState, NotFound, PreemptionMessage, ReservedNode, ResourceRequest, WrongState,
)
from gangmaster.protocol.proto import rm_pb2 as pb
from gangmaster.protocol.rm_codec import ask_from_pb
from gangmaster.protocol import rm_validation as check
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.server import LiveRM, start_server

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def am_flow(rm: RMClient):
    """What an AM does, written once against RMClient."""
    app = rm.submit(ApplicationSubmission("flow"))
    reg = rm.register(app)
    resp = rm.allocate(AllocateRequest(app, reg.attempt, asks=(
        ResourceRequest(1, R(1024, 1.5, gpu_mask=0b101, port_ranges=PortRanges.of((20003, 20004))),
                        host="dgx-001", relax_locality=False),
        ResourceRequest(2, R(1024, 1, gpus=9)),
        ResourceRequest(3, R(1024, 1, gpus=8), host="dgx-001", relax_locality=False),
    )))
    return app, reg, resp


def test_same_answers_both_ways(rm):
    app, reg, resp = am_flow(rm)
    assert reg.attempt == 1 and reg.maximum_resource.gpus == 8 and reg.queue == "default"
    (c,) = resp.allocated
    assert (c.host, c.resource.gpu_mask, c.resource.port_ranges, c.resource.vcores) == (
        "dgx-001", 0b101, PortRanges.of((20003, 20004)), 1.5)
    assert [j.request_id for j in resp.rejected] == [2]
    assert [(p.request_id, p.remaining) for p in resp.pending] == [(3, 1)]
    nodes = {n.host: n for n in rm.cluster_nodes()}
    assert nodes["dgx-001"].free.gpu_mask == 0b11111010 and nodes["dgx-001"].state is NodeState.RUNNING
    assert nodes["dgx-001"].free.port_ranges == PortRanges.of((20000, 20002), (20005, 20009))
    report = rm.application_report(app)
    assert report.pending_containers == 1 and report.used.gpus == 2
    rm.stop_container(c.container_id)
    status = rm.container_status(c.container_id)
    assert status.state is ContainerState.KILLED and status.exit_status == -105
    resp = rm.allocate(AllocateRequest(app, 1))
    assert [s.container_id for s in resp.completed] == [c.container_id]
    assert [x.host for x in resp.allocated] == ["dgx-001"]
    rm.finish(app, 1, "SUCCEEDED")
    assert rm.application_report(app).final_status == "SUCCEEDED"


def test_same_errors_both_ways(rm):
    app, reg, _ = am_flow(rm)
    with pytest.raises(InvalidRequest, match=r"asks\[0\].host: unknown host 'nosuch'"):
        rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(9, R(1), host="nosuch"),)))
    with pytest.raises(NotFound, match="queue"):
        rm.submit(ApplicationSubmission("x", queue="nope"))
    with pytest.raises(NotFound, match="app_id"):
        rm.application_report("app_7777")
    with pytest.raises(WrongState):
        rm.allocate(AllocateRequest(app, 5))
    # still serving
    assert rm.application_report(app).state.value == "RUNNING"


def test_negative_resource_over_the_wire_names_the_field():
    msg = pb.ResourceRequest(request_id=1, count=1)
    msg.resource.memory_mb = -5
    with pytest.raises(InvalidRequest, match=r"asks\[0\].resource: memory_mb"):
        ask_from_pb(msg, "asks[0]")
    req = AllocateRequest("app_0001", 1, asks=(ResourceRequest(4, R(10, 0.5, gpu_mask=0b11), host="h", rack="r",
                                                               relax_locality=False, node_label="x", priority=2, count=3),),
                          cancel=(1, 2), releases=("c",), blacklist_additions=("a",), blacklist_removals=("b",))
    assert allocate_request_from_pb(allocate_request_to_pb(req)) == req


def test_grpc_runs_a_real_process_and_reports_its_exit(tmp_path):
    specs = load_cluster_specs(FIX / "cluster.yaml")
    live = LiveRM(specs, work_dir=tmp_path / "tasks", poll_s=0.02)
    server, port = start_server(live)
    rm = GrpcRMClient(f"127.0.0.1:{port}", timeout_s=5)
    try:
        app = rm.submit(ApplicationSubmission("real"))
        rm.register(app)
        resp = rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, R(512, 1, gpus=2, ports=2),
                                                                         host="pcie-001", relax_locality=False),)))
        (c,) = resp.allocated
        out = tmp_path / "env.txt"
        script = ("import os,sys; keys=['GANGMASTER_HOST','CUDA_VISIBLE_DEVICES','PAI_CONTAINER_HOST_PORT_LIST',"
                  "'PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX','PAI_CONTAINER_HOST_IP'];"
                  f"open({str(out)!r},'w').write('\\n'.join(k+'='+os.environ.get(k,'') for k in keys)); sys.exit(4)")
        import sys
        rm.start_container(c.container_id, LaunchContext.of(
            [sys.executable, "-c", script], env={"PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": "3"}))
        deadline = time.monotonic() + 20
        completed = []
        while not completed and time.monotonic() < deadline:
            completed = rm.allocate(AllocateRequest(app, 1)).completed
            time.sleep(0.05)
        assert completed and completed[0].state is ContainerState.FAILED and completed[0].exit_status == 4
        env = dict(line.split("=", 1) for line in out.read_text().splitlines())
        assert env == {"GANGMASTER_HOST": "pcie-001", "CUDA_VISIBLE_DEVICES": "0,1",
                       "PAI_CONTAINER_HOST_PORT_LIST": "20000,20001",
                       "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": "3", "PAI_CONTAINER_HOST_IP": "127.0.0.1"}
        with pytest.raises(InvalidRequest, match="launch.command"):
            c2 = rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(2, R(1)),))).allocated[0]
            rm.start_container(c2.container_id, LaunchContext.of())
        assert rm.container_status(c2.container_id).state is ContainerState.ALLOCATED
    finally:
        rm.close()
        server.stop(0)
        live.stop()


def test_cluster_view_from_node_reports(rm):
    from gangmaster.protocol.rm_protocol import view_from_nodes
    app, _, resp = am_flow(rm)
    view = view_from_nodes(rm.cluster_nodes())
    i = view.index("dgx-001")
    assert view.free(i).gpu_mask == 0b11111010 and view.free(i).memory_mb == 65536 - 1024
    assert 20003 not in set(view.free(i).port_ranges) and 20002 in set(view.free(i).port_ranges)
    assert view.racks[view.rack_code[i]] == "rack-a" and bool(view.healthy[i])


def test_concurrent_ams_racing_for_one_host_over_grpc(tmp_path):
    """Eight AMs in eight threads ask for the whole of dgx-000 at once: exactly one wins,
    the others see the ask pending with the reason, and nothing is double-booked."""
    import threading
    specs = load_cluster_specs(FIX / "cluster.yaml")
    live = LiveRM(specs, work_dir=tmp_path / "tasks")
    server, port = start_server(live, workers=8)
    results = []
    try:
        def am(k):
            rm = GrpcRMClient(f"127.0.0.1:{port}", timeout_s=10)
            app = rm.submit(ApplicationSubmission(f"am{k}"))
            rm.register(app)
            barrier.wait()
            resp = rm.allocate(AllocateRequest(app, 1, asks=(
                ResourceRequest(1, R(1024, 1, gpus=8), host="dgx-000", relax_locality=False),)))
            results.append(resp)
            rm.close()

        barrier = threading.Barrier(8)
        threads = [threading.Thread(target=am, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(results) == 8
        assert sum(len(r.allocated) for r in results) == 1
        losers = [r for r in results if not r.allocated]
        assert all("host dgx-000: GPUs free 0 < 8 asked" in str(r.pending[0].reason) for r in losers)
        live.core.check_invariants()
    finally:
        server.stop(0)
        live.stop()


def test_priority_and_preemption_notice_both_ways(rm):
    """A submission's priority reaches the RM, and a preemption notice reaches the AM and
    is forwarded to the task, over gRPC as in process (before: the gRPC AM never heard of it)."""
    app = rm.submit(ApplicationSubmission("urgent", priority=7))
    assert rm.core.applications.get(app).priority == 7
    reg = rm.register(app)
    (c,) = rm.allocate(AllocateRequest(app, reg.attempt, asks=(ResourceRequest(1, R(1024, 1, gpus=1)),))).allocated
    sent = rm.core.preempt(app, 30.0, "for app_0009")
    notice = rm.allocate(AllocateRequest(app, reg.attempt)).preemption
    assert notice == sent and notice.containers == (c.container_id,) and str(notice.reason) == "for app_0009"
    assert rm.allocate(AllocateRequest(app, reg.attempt)).preemption is None   # told once
    assert rm.notify_preemption(c.container_id) == notice.deadline
    with pytest.raises(WrongState, match="not under a preemption notice"):
        rm.notify_preemption("container_nosuch_01")


def test_preemption_and_priority_round_trip():
    notice = PreemptionMessage(("c1", "c2"), 1234.5, reason(ReasonCode.PREEMPTED_FOR_APP, app_id="app_0002",
                                                            priority="(5,)"))
    response = AllocateResponse(preemption=notice, response_id=3,
                                reserved=(ReservedNode("dgx-000", 60.0), ReservedNode("dgx-001", 61.5)))
    assert allocate_response_from_pb(allocate_response_to_pb(response)) == response
    for held in (HeldReservation(12.5, 30.0, (("dgx-000", 8), ("dgx-001", 4)), ("first", "second"), "declared"),
                 HeldReservation(0.0, None, (("pcie-000", 2),), (), "unknown")):
        response = AllocateResponse(reservation=held)
        assert allocate_response_from_pb(allocate_response_to_pb(response)) == response
    assert allocate_response_from_pb(allocate_response_to_pb(AllocateResponse())).preemption is None
    submission = ApplicationSubmission("j", "q", 3, True, 60.0, priority=-4)
    assert submission_from_pb(submission_to_pb(submission)) == submission


@pytest.mark.parametrize("gang, duration_s", [
    ((), None),
    ((GangRole("ps", 1, vcores=2.5, memory_mb=4096), GangRole("worker", 4, gpus=8, vcores=1, memory_mb=1024,
                                                                max_instances_per_node=1)), 3600.0),
    ((GangRole("share", 3, gpu_milli=250, vcores=0.5),), 0.0),   # a declared 0 s is not "unknown"
])
def test_a_declared_gang_and_duration_round_trip(gang, duration_s):
    submission = ApplicationSubmission("j", gang=gang, expected_duration_s=duration_s)
    assert submission_from_pb(submission_to_pb(submission)) == submission


@pytest.mark.parametrize("role, duration_s, error", [
    (GangRole("w", 0, gpus=1), None, r"gang\[0\].instances: expected an integer in 1..100000 \(MAX_INSTANCES_PER_JOB\), got 0"),
    (GangRole("w", 1, gpus=65), None, r"gang\[0\].gpus: .*MAX_GPUS_PER_NODE.*got 65"),
    (GangRole("w", 1, gpus=1, gpu_milli=500), None, r"gang\[0\].gpu_milli: expected a share of one GPU"),
    (GangRole("w", 1, gpu_milli=1000), None, r"gang\[0\].gpu_milli: expected an integer in 0..999"),
    (GangRole("w", 1, vcores=float("nan")), None, r"gang\[0\].vcores: expected a finite number"),
    (GangRole("w", 1, memory_mb=-1), None, r"gang\[0\].memory_mb: .*MAX_MEMORY_MB.*got -1"),
    (GangRole("w", 1, gpus=1, max_instances_per_node=-2), None, r"gang\[0\].max_instances_per_node"),
    (GangRole("w\x01", 1, gpus=1), None, r"gang\[0\].name: expected no control characters"),
    (GangRole("w", 1), None, r"gang\[0\]: expected memory_mb, vcores, gpus or gpu_milli > 0"),
    (GangRole("w", 1, gpus=1), -1.0, r"expected_duration_s: expected a number >= 0"),
    (GangRole("w", 1, gpus=1), 1e12, r"expected_duration_s: .*MAX_DURATION_S"),
])
def test_a_bad_declared_gang_over_the_wire_is_refused_naming_the_field(rm, role, duration_s, error):
    with pytest.raises(InvalidRequest, match=error):
        rm.submit(ApplicationSubmission("x", gang=(role,), expected_duration_s=duration_s))
    assert not rm.core.apps   # refused whole: nothing was submitted


def test_a_gang_of_more_instances_than_a_job_may_have_is_refused():
    msg = submission_to_pb(ApplicationSubmission("x", gang=(GangRole("a", 60_000, gpus=1),
                                                             GangRole("b", 60_000, gpus=1))))
    with pytest.raises(InvalidRequest, match=r"gang instances: expected at most 100000 entries "
                                             r"\(MAX_INSTANCES_PER_JOB\), got 120000"):
        check.check_submission(submission_from_pb(msg))


@pytest.mark.parametrize("containers, deadline, reason, error", [
    ([], 10.0, "", r"preemption.containers: expected at least one container, got none"),
    (["c\x01"], 10.0, "", r"preemption.containers\[0\]"),
    (["c1"], float("nan"), "", r"preemption.deadline: expected a finite number"),
    (["c1"], -1.0, "", r"preemption.deadline: expected a number >= 0"),
    (["c1"], 1.0, "x\x00", r"preemption.reason"),
])
def test_a_bad_preemption_notice_over_the_wire_names_the_field(containers, deadline, reason, error):
    msg = pb.AllocateResponse()
    msg.preemption.containers.extend(containers)
    msg.preemption.deadline, msg.preemption.reason = deadline, reason
    with pytest.raises(InvalidRequest, match=error):
        allocate_response_from_pb(msg)


@pytest.mark.parametrize("host, start, error", [
    ("n\x01", 1.0, r"reserved\[0\].host: expected no control characters"),
    ("n0", float("inf"), r"reserved\[0\].start: expected a finite number"),
    ("n0", -1.0, r"reserved\[0\].start: expected a number >= 0"),
])
def test_a_bad_reserved_node_over_the_wire_names_the_field(host, start, error):
    msg = pb.AllocateResponse()
    msg.reserved.add(host=host, start=start)
    with pytest.raises(InvalidRequest, match=error):
        allocate_response_from_pb(msg)


@pytest.mark.parametrize("field, value, error", [
    ("start_in", float("nan"), r"reservation.start_in: expected a finite number"),
    ("start_in", -1.0, r"reservation.start_in: expected a number >= 0"),
    ("duration", -2.0, r"reservation.duration: expected a number >= 0"),
    ("known", "guessed", r"reservation.known: expected one of declared, observed, unknown, got 'guessed'"),
    ("gpus", 0, r"reservation.hosts\[0\].gpus: expected an integer in 1..64"),
    ("host", "h\x01", r"reservation.hosts\[0\].host: expected no control characters"),
    ("waits_for", "a\x00b", r"reservation.waits_for\[0\]: expected no control characters"),
])
def test_a_bad_held_reservation_over_the_wire_names_the_field(field, value, error):
    good = HeldReservation(5.0, 10.0, (("dgx-000", 8),), ("first",), "declared")
    msg = allocate_response_to_pb(AllocateResponse(reservation=good))
    held = msg.reservation
    if field in ("gpus", "host"):
        setattr(held.hosts[0], field, value)
    elif field == "waits_for":
        held.waits_for[0] = value
    else:
        setattr(held, field, value)
    with pytest.raises(InvalidRequest, match=error):
        allocate_response_from_pb(msg)


def test_a_priority_out_of_range_over_the_wire_is_refused(rm):
    with pytest.raises(InvalidRequest, match=r"priority: .*MAX_PRIORITY"):
        rm.submit(ApplicationSubmission("x", priority=10 ** 6))
