"""Every count, size and number the RM accepts is bounded and checked, the same way
through the in-process client and over gRPC: a bad call is refused with
InvalidRequest naming the field (gRPC INVALID_ARGUMENT), changes nothing, and the
RM goes on serving and saving its state."""
import json
import math
from pathlib import Path

import grpc
import pytest

from gangmaster.protocol.proto import rm_pb2 as pb
from gangmaster.protocol.rm_client import InProcessRMClient
from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, ApplicationSubmission, ContainerState, InvalidRequest, LaunchContext, NotFound,
    ResourceRequest, WrongState,
)
from gangmaster.conf import limits
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.control import SimulatorControl
from gangmaster.tools.rmsim.proto import rmsim_pb2 as control_pb
from gangmaster.tools.rmsim.server import LiveRM, start_server
from gangmaster.tools.rmsim.simulation import Simulation
from gangmaster.tools.rmsim.workload import raw_task_env

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
SPECS = load_cluster_specs(FIX / "cluster.yaml")


def app_of(rm):
    app = rm.submit(ApplicationSubmission("limits"))
    rm.register(app)
    return app


def assert_untouched(rm):
    """Nothing is booked and the books balance."""
    rm.core.check_invariants()
    assert all(n.free == n.capacity for n in rm.cluster_nodes())


def ask(resource=R(1024, 1), count=1, **kw):
    return AllocateRequest("app_0001", 1, asks=(ResourceRequest(1, resource, count, **kw),))


NAN = float("nan")

# (what, call(rm, app), expected message)
REFUSED = [
    ("an ask for nothing, 2**31-1 times", lambda rm, app: rm.allocate(ask(R(0, 0), count=2 ** 31 - 1)),
     r"asks\[0\].resource: expected memory_mb, vcores, gpus or gpu_milli > 0 \(an ask for nothing\)"),
    ("an ask for ports only", lambda rm, app: rm.allocate(ask(R(0, 0, ports=2))),
     r"an ask for nothing"),
    ("vcores rounding to 0", lambda rm, app: rm.allocate(ask(R(0, 0.0004))), r"an ask for nothing"),
    ("a count past the limit", lambda rm, app: rm.allocate(ask(count=limits.RM_MAX_COUNT_PER_ASK + 1)),
     r"asks\[0\].count: expected an integer in 1..100000 \(RM_MAX_COUNT_PER_ASK\), got 100001"),
    ("a count of 0", lambda rm, app: rm.allocate(ask(count=0)), r"asks\[0\].count: expected an integer in 1"),
    ("huge memory", lambda rm, app: rm.allocate(ask(R(2 ** 40, 1))),
     r"asks\[0\].resource.memory_mb: expected an integer in 0..4294967296 \(MAX_MEMORY_MB\)"),
    ("a NUL in a host", lambda rm, app: rm.allocate(ask(host="dgx-000\x00")),
     r"asks\[0\].host: expected no control characters, got '\\x00' at position 7"),
    ("a long label", lambda rm, app: rm.allocate(ask(node_label="x" * 256)),
     r"asks\[0\].node_label: expected at most 255 characters \(MAX_NAME_CHARS\), got 256"),
    ("NaN progress", lambda rm, app: rm.allocate(AllocateRequest("app_0001", 1, progress=NAN)),
     r"progress: expected a finite number"),
    ("a negative request id", lambda rm, app: rm.allocate(AllocateRequest(
        "app_0001", 1, asks=(ResourceRequest(-1, R(1, 1)),))), r"asks\[0\].request_id: expected an integer in 0"),
    ("a NUL in an application name", lambda rm, app: rm.submit(ApplicationSubmission("a\x00b")),
     r"name: expected no control characters"),
    ("a name of 256 characters", lambda rm, app: rm.submit(ApplicationSubmission("n" * 256)),
     r"name: expected at most 255 characters"),
    ("NaN AM expiry", lambda rm, app: rm.submit(ApplicationSubmission("x", am_expiry_s=NAN)),
     r"am_expiry_s: expected a finite number, got nan"),
    ("too many AM attempts", lambda rm, app: rm.submit(ApplicationSubmission("x", max_attempts=1001)),
     r"max_attempts: expected an integer in 1..1000 \(MAX_ATTEMPTS\)"),
    ("a NUL in an application id", lambda rm, app: rm.application_report("app_0001\x00"),
     r"app_id: expected no control characters"),
    ("an unknown final status", lambda rm, app: rm.finish(app, 1, "GREAT"),
     r"final_status: expected one of SUCCEEDED, FAILED, KILLED, UNDEFINED, got 'GREAT'"),
    ("a NUL in diagnostics", lambda rm, app: rm.kill(app, "oops\x00"), r"diagnostics: expected no NUL"),
]


@pytest.mark.parametrize("what, call, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_the_field_and_nothing_changes(rm, what, call, message):
    app = app_of(rm)
    with pytest.raises(InvalidRequest, match=message):
        call(rm, app)
    assert_untouched(rm)
    # still serving: the same application goes on
    resp = rm.allocate(ask(R(1024, 1, gpus=1)))
    assert len(resp.allocated) == 1


def started_container(rm):
    app = app_of(rm)
    (c,) = rm.allocate(ask(R(512, 1))).allocated
    return app, c.container_id


LAUNCHES = [
    ("a NUL in the command", LaunchContext.of(["ec\x00ho"]), r"launch.command\[0\]: expected no NUL character"),
    ("a NUL in a variable", LaunchContext.of(["true"], env={"A": "x\x00"}),
     r"launch.env\[0\].value \(A\): expected no NUL"),
    ("'=' in a variable's name", LaunchContext.of(["true"], env={"A=B": "x"}),
     r"launch.env\[0\].name: expected a non-empty name without '='"),
    ("an empty variable name", LaunchContext.of(["true"], env={"": "x"}), r"launch.env\[0\].name"),
    ("too many arguments", LaunchContext.of(["true"] * (limits.RM_MAX_COMMAND_ARGS + 1)),
     r"launch.command: expected at most 4096 entries \(RM_MAX_COMMAND_ARGS\), got 4097"),
    ("too many bytes", LaunchContext.of(["true", "x" * limits.RM_MAX_LAUNCH_BYTES]),
     r"launch: command and environment take \d+ bytes, over the limit of 1048576 \(RM_MAX_LAUNCH_BYTES\)"),
]


@pytest.mark.parametrize("what, launch, message", LAUNCHES, ids=[r[0] for r in LAUNCHES])
def test_a_launch_that_cannot_be_started_is_refused(rm, what, launch, message):
    _, cid = started_container(rm)
    with pytest.raises(InvalidRequest, match=message):
        rm.start_container(cid, launch)
    assert rm.container_status(cid).state is ContainerState.ALLOCATED
    rm.core.check_invariants()


def test_list_lengths_are_bounded(rm, monkeypatch):
    monkeypatch.setattr(limits, "RM_MAX_ASKS_PER_CALL", 3)
    monkeypatch.setattr(limits, "RM_MAX_IDS_PER_CALL", 2)
    app = app_of(rm)
    asks = tuple(ResourceRequest(k, R(1, 1)) for k in range(4))
    with pytest.raises(InvalidRequest, match=r"asks: expected at most 3 entries \(RM_MAX_ASKS_PER_CALL\), got 4"):
        rm.allocate(AllocateRequest(app, 1, asks=asks))
    with pytest.raises(InvalidRequest, match=r"blacklist_additions: expected at most 2 entries"):
        rm.allocate(AllocateRequest(app, 1, blacklist_additions=("dgx-000",) * 3))
    with pytest.raises(InvalidRequest, match=r"cancel: expected at most 2 entries"):
        rm.allocate(AllocateRequest(app, 1, cancel=(1, 2, 3)))
    assert_untouched(rm)


def test_an_application_cannot_hold_and_wait_for_more_than_the_limit(rm, monkeypatch):
    monkeypatch.setattr(limits, "RM_MAX_CONTAINERS_PER_APP", 5)
    app = app_of(rm)
    first = rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, R(512, 1), count=3),)))
    assert len(first.allocated) == 3
    with pytest.raises(InvalidRequest, match=r"asks: application app_0001 would hold and wait for 6 containers, "
                                             r"over the limit of 5 \(RM_MAX_CONTAINERS_PER_APP\)"):
        rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(2, R(512, 1), count=3),)))
    # releasing in the same call makes room
    again = rm.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(2, R(512, 1), count=3),),
                                        releases=(first.allocated[0].container_id,)))
    assert len(again.allocated) == 3
    rm.core.check_invariants()


def test_a_container_released_twice_in_one_call_is_released_once(rm):
    app = app_of(rm)
    (c,) = rm.allocate(ask(R(512, 1))).allocated
    rm.allocate(AllocateRequest(app, 1, releases=(c.container_id, c.container_id)))
    assert rm.container_status(c.container_id).state is ContainerState.KILLED
    assert_untouched(rm)


def test_running_applications_are_bounded(rm, monkeypatch):
    monkeypatch.setattr(rm.core.applications, "max_running", 2)   # RM_MAX_RUNNING_APPS unless its driver sizes it
    a = rm.submit(ApplicationSubmission("a"))
    rm.submit(ApplicationSubmission("b"))
    with pytest.raises(WrongState, match=r"2 applications are running.*RM_MAX_RUNNING_APPS"):
        rm.submit(ApplicationSubmission("c"))
    rm.kill(a)
    rm.submit(ApplicationSubmission("c"))


def test_finished_applications_and_containers_are_forgotten_past_the_limits(monkeypatch):
    monkeypatch.setattr(limits, "RM_MAX_COMPLETED_APPS", 10)
    monkeypatch.setattr(limits, "RM_MAX_FINISHED_CONTAINERS", 20)
    sim = Simulation(SPECS)
    rm = InProcessRMClient(sim.core)
    apps, containers = [], []
    for k in range(30):
        app = rm.submit(ApplicationSubmission(f"a{k}"))
        rm.register(app)
        containers += [c.container_id for c in rm.allocate(AllocateRequest(app, 1, asks=(
            ResourceRequest(1, R(512, 1), count=2),))).allocated]
        rm.finish(app, 1)
        apps.append(app)
    remembered = [a for a in apps if a in sim.core.apps]
    assert 9 <= len(remembered) <= 10 and remembered == apps[-len(remembered):]
    with pytest.raises(NotFound, match="app_id: unknown application 'app_0001'"):
        rm.application_report(apps[0])
    assert rm.application_report(apps[-1]).final_status == "SUCCEEDED"
    assert len(sim.core.containers) <= 20
    with pytest.raises(NotFound):
        rm.container_status(containers[0])
    assert rm.container_status(containers[-1]).state is ContainerState.KILLED
    sim.core.check_invariants()


def test_a_cluster_past_the_node_limit_is_refused(monkeypatch):
    from gangmaster.tools.rmsim.core import ResourceManager

    monkeypatch.setattr(limits, "MAX_CLUSTER_NODES", 4)
    with pytest.raises(ValueError, match=r"a cluster of 5 nodes is over the limit of 4 \(MAX_CLUSTER_NODES\)"):
        ResourceManager(SPECS)


# ---------------------------------------------------------------- gRPC only
@pytest.fixture
def served(tmp_path):
    live = LiveRM(SPECS, state_path=tmp_path / "state.json", work_dir=tmp_path / "tasks", poll_s=0.05)
    server, port = start_server(live)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = GrpcRMClient(f"127.0.0.1:{port}", timeout_s=10)
    try:
        yield live, channel, client
    finally:
        client.close()
        channel.close()
        server.stop(0)
        live.stop()


#: the RM simulator's own calls (its service, not the protocol's)
CONTROL = {"InjectFault", "Ping"}


def raw_call(channel, method: str, payload: bytes):
    service = "gangmaster.rmsim.SimulatorControl" if method in CONTROL else "gangmaster.rm.ResourceManager"
    call = channel.unary_unary(f"/{service}/{method}",
                               request_serializer=None, response_deserializer=None)
    return call(payload, timeout=10)


def test_bytes_that_are_not_a_message_are_invalid_argument(served):
    _, channel, client = served
    bad_utf8 = b"\x0a\x02\xff\xfe"   # SubmitRequest.name = invalid UTF-8
    with pytest.raises(grpc.RpcError) as err:
        raw_call(channel, "Submit", bad_utf8)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "request: not a valid gangmaster.rm.SubmitRequest message" in err.value.details()
    SimulatorControl(client).ping()   # the server still answers


def test_a_request_over_the_wire_is_bounded_before_it_is_decoded(served, monkeypatch):
    monkeypatch.setattr(limits, "RM_MAX_ASKS_PER_CALL", 2)
    _, channel, client = served
    msg = pb.AllocateRequest(app_id="app_0001", attempt=1)
    for k in range(3):
        msg.asks.add(request_id=k, count=1).resource.memory_mb = 1
    with pytest.raises(grpc.RpcError) as err:
        raw_call(channel, "Allocate", msg.SerializeToString())
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "asks: expected at most 2 entries (RM_MAX_ASKS_PER_CALL), got 3" in err.value.details()


def test_the_state_file_is_saved_after_a_refused_request(served):
    """The issue's request (an ask for nothing, count 2**31-1) sent straight to the server, past
    the client's own checks: refused, and the server goes on serving and saving its state."""
    live, channel, client = served
    app = client.submit(ApplicationSubmission("saved"))
    client.register(app)
    hostile = pb.AllocateRequest(app_id=app, attempt=1)
    hostile.asks.add(request_id=1, count=2 ** 31 - 1)
    with pytest.raises(grpc.RpcError) as err:
        raw_call(channel, "Allocate", hostile.SerializeToString())
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "an ask for nothing" in err.value.details() or "count" in err.value.details()
    (c,) = client.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(2, R(512, 1)),))).allocated
    later = client.submit(ApplicationSubmission("after"))
    state = json.loads(live.state_path.read_text())
    assert [a["app_id"] for a in state["apps"]] == [app, later]
    assert [x["container_id"] for x in state["containers"]] == [c.container_id]


def _allocate(**ask_fields):
    msg = pb.AllocateRequest(app_id="app_0001", attempt=1)
    resource = ask_fields.pop("resource", {"memory_mb": 1024, "vcores": 1})
    a = msg.asks.add(request_id=1, count=ask_fields.pop("count", 1), **ask_fields)
    for key, value in resource.items():
        setattr(a.resource, key, value)
    return msg


# Hostile messages straight from a stub (no client-side checks): (method, message, expected detail)
OVER_THE_WIRE = [
    ("Allocate", _allocate(resource={}, count=2 ** 31 - 1),
     "asks[0].resource: expected memory_mb, vcores, gpus or gpu_milli > 0"),
    ("Allocate", _allocate(resource={"gpu_milli": 1000}),
     "asks[0].resource: gpu_milli: expected a whole number of milli-GPU from 1 to 999"),
    ("Allocate", _allocate(resource={"gpu_milli": -250}), "asks[0].resource: gpu_milli: expected a finite number >= 0"),
    ("Allocate", _allocate(resource={"gpu_milli": 250, "gpus": 1}),
     "asks[0].resource: gpu_milli=250 and gpus=1: a share of one GPU and whole GPUs cannot be asked together"),
    ("Allocate", _allocate(resource={"gpu_milli": 250, "gpu_mask": 0b11}),
     "asks[0].resource: gpu_milli=250: a share sits on one GPU, but gpu_mask 0x3 names 2"),
    ("Allocate", _allocate(resource={"memory_mb": 1, "vcores": math.nan}), "asks[0].resource: vcores: expected a finite number >= 0, got nan"),
    ("Allocate", _allocate(resource={"memory_mb": 1, "gpus": -1}), "asks[0].resource: gpus: expected a finite number >= 0"),
    ("Allocate", _allocate(host="dgx\x00"), "asks[0].host: expected no control characters"),
    ("Allocate", _allocate(count=-5), "asks[0].count: expected an integer in 1..100000"),
    ("Submit", pb.SubmitRequest(name="x\x00y"), "name: expected no control characters"),
    ("Submit", pb.SubmitRequest(name="x", am_expiry_s=math.inf), "am_expiry_s: expected a finite number"),
    ("Submit", pb.SubmitRequest(name="x", max_attempts=-3), "max_attempts: expected an integer in 1..100"),
    ("Finish", pb.FinishRequest(app_id="app_0001", attempt=1, final_status="\x00"), "final_status"),
    ("StartContainer", pb.StartContainerRequest(container_id="c\x00"), "container_id: expected no control"),
    ("InjectFault", control_pb.FaultRequest(action="lose_node", host="\x00"), "host: expected no control characters"),
    ("InjectFault", control_pb.FaultRequest(action="x" * 300), "action: expected one of lose_node"),
    ("InjectFault", control_pb.FaultRequest(action="lose_node", host="dgx-000", text="a\x00"), "text: expected no NUL"),
]


@pytest.mark.parametrize("method, msg, detail", OVER_THE_WIRE, ids=[f"{m}-{d[:30]}" for m, _, d in OVER_THE_WIRE])
def test_hostile_messages_over_the_wire_are_invalid_argument(served, method, msg, detail):
    live, channel, client = served
    app = client.submit(ApplicationSubmission("target"))
    client.register(app)
    with pytest.raises(grpc.RpcError) as err:
        raw_call(channel, method, msg.SerializeToString())
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert detail in err.value.details()
    live.core.check_invariants()
    assert all(n.free == n.capacity for n in client.cluster_nodes())


def test_a_job_whose_role_asks_for_nothing_is_refused_when_read():
    """The RM refuses an ask for nothing, so a job spec whose role asks for no CPU, memory
    or GPU is refused up front (`validate`, `run`), not by the RM in the middle of a run."""
    from gangmaster.am.spec.jobspec import JobSpecError, parse_job

    spec = ("protocolVersion: 2\nname: zero\ntype: job\ntaskRoles:\n  worker:\n    instances: 1\n"
            "    resourcePerInstance: {cpu: 0, memoryMB: 0, gpu: 0}\n    commands: [\"true\"]\n")
    with pytest.raises(JobSpecError, match=r"job.yaml: taskRoles.worker.resourcePerInstance.cpu: expected cpu, "
                                           r"memoryMB or gpu > 0, or gangmaster.gpuMilli \(a task must ask for "
                                           r"something\), got 0"):
        parse_job(spec, "job.yaml")
    share = parse_job(spec + "    gangmaster: {gpuMilli: 100}\n", "job.yaml")   # a share of a GPU is something
    assert share.role("worker").ask_resource().gpu_milli == 100


@pytest.mark.parametrize("size_over_limit", [-1, 0, 1])
def test_the_launch_size_limit_is_exact(monkeypatch, size_over_limit):
    """The fast check of a whole launch and the field-by-field walk agree on the byte count:
    ``a b`` + ``K=v`` is 2 + 2 + 4 bytes with their NULs."""
    from gangmaster.protocol.rm_validation import check_launch

    monkeypatch.setattr(limits, "RM_MAX_LAUNCH_BYTES", 8 + size_over_limit)
    launch = LaunchContext.of(command=["a", "b"], env={"K": "v"})
    if size_over_limit < 0:
        with pytest.raises(InvalidRequest, match="take 8 bytes, over the limit of 7"):
            check_launch(launch)
    else:
        check_launch(launch)


@pytest.mark.parametrize("value", ["h" * 300 + "\x00", "\x00" + "h" * 300, "ü\x00"])
def test_a_nul_in_any_environment_value_is_refused_long_or_short(value):
    from gangmaster.protocol.rm_validation import check_launch

    with pytest.raises(InvalidRequest, match=r"launch.env\[1\].value \(B\): expected no NUL"):
        check_launch(LaunchContext.of(command=["true"], env={"A": "h" * 300, "B": value}))


def test_an_application_whose_stopped_container_is_still_dying_is_not_forgotten(monkeypatch):
    """Forgetting old applications must not drop a container whose booking is still held
    (its processes not yet gone): its release would find nothing and its GPUs stay booked."""
    from gangmaster.tools.rmsim.nodemanager import SimulatedNodeManager

    class SlowToStop(SimulatedNodeManager):
        frees_at_once = False

    monkeypatch.setattr(limits, "RM_MAX_COMPLETED_APPS", 4)
    sim = Simulation(SPECS)
    core = sim.core
    core.node_manager = SlowToStop(sim.loop)
    core.node_manager.bind(core)
    rm = InProcessRMClient(core)
    first = rm.submit(ApplicationSubmission("dying"))
    rm.register(first)
    (c,) = rm.allocate(AllocateRequest(first, 1, asks=(ResourceRequest(1, R(512, 1, gpus=1)),))).allocated
    rm.start_container(c.container_id, LaunchContext.of(env=raw_task_env(1000)))
    rm.finish(first, 1)                       # its container is stopped, its processes not yet gone
    for k in range(12):                       # enough finished applications to forget the oldest
        app = rm.submit(ApplicationSubmission(f"a{k}"))
        rm.register(app)
        rm.finish(app, 1)
    core.check_invariants()
    core.container_released(c.container_id)   # the processes are gone now
    core.check_invariants()
    assert all(n.free == n.capacity for n in core.cluster_nodes())
