"""The live RM's gRPC API under random and hostile messages.

A real server (the one ``gangmaster rm serve`` runs, in this process, on
127.0.0.1) is sent random bytes as raw requests of every method, and well-formed
messages with hostile values (NaN, infinity, huge and negative counts, NUL and
control characters, names past the limits, unknown application and container
ids, calls in the wrong order). Whatever it is sent:

* every answer is OK or a typed refusal (INVALID_ARGUMENT, NOT_FOUND,
  FAILED_PRECONDITION) — never UNKNOWN or INTERNAL, which is what a server-side
  traceback looks like from the client;
* the server keeps serving (Ping and a node listing answer);
* its books balance: on every node free + used == capacity, nothing negative,
  nothing double-booked, free + used == 1000 milli on every GPU holding shares (the
  core's own recount, and the nodes as a client sees them).
"""
import math
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangmaster.protocol.proto import rm_pb2 as pb
from gangmaster.protocol.rm_codec import node_from_pb
from gangmaster.conf import limits
from gangmaster.conf.limits import INT32
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.tools.rmsim.proto import rmsim_pb2 as control_pb
from gangmaster.tools.rmsim.server import LiveRM, start_server

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
SPECS = load_cluster_specs(FIX / "cluster.yaml")
HOSTS = [s.host for s in SPECS]
#: the protocol's service and the simulator's own (faults, ping), served side by side
SERVICES = [pb.DESCRIPTOR.services_by_name["ResourceManager"], control_pb.DESCRIPTOR.services_by_name["SimulatorControl"]]
METHODS = [method.name for service in SERVICES for method in service.methods]
TYPED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
         grpc.StatusCode.FAILED_PRECONDITION}
INT64 = (-(2 ** 63), 2 ** 63 - 1)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def rm(tmp_path_factory):
    """(core, call) for one server shared by every example: state piles up across
    examples, as it would on a long-lived RM."""
    work = tmp_path_factory.mktemp("rm-fuzz")
    live = LiveRM(SPECS, state_path=work / "state.json", work_dir=work / "tasks", poll_s=0.05)
    server, port = start_server(live)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stubs = {method.name: channel.unary_unary(f"/{service.full_name}/{method.name}", request_serializer=None,
                                              response_deserializer=None)
             for service in SERVICES for method in service.methods}

    def call(method: str, payload: bytes) -> tuple[grpc.StatusCode, bytes]:
        """A raw call: (status, reply bytes)."""
        try:
            return grpc.StatusCode.OK, stubs[method](payload, timeout=10)
        except grpc.RpcError as exc:
            return exc.code(), b""

    try:
        yield live.core, call
    finally:
        with live.core.lock:   # stop every task process a fuzzed call started
            for app_id, app in list(live.core.apps.items()):
                if not app.state.finished:
                    live.core.kill(app_id, "fuzz test over")
        channel.close()
        server.stop(0)
        live.stop()


def assert_still_serving_and_balanced(core, call):
    """Ping answers; the core's recount of every node balances; and the nodes as a client
    sees them have their free resources within capacity, none negative."""
    assert call("Ping", b"")[0] is grpc.StatusCode.OK
    with core.lock:
        core.check_invariants()
    code, reply = call("GetClusterNodes", pb.NodesRequest().SerializeToString())
    assert code is grpc.StatusCode.OK
    nodes = [node_from_pb(n) for n in pb.NodesResponse.FromString(reply).nodes]
    assert sorted(n.host for n in nodes) == sorted(HOSTS)
    for node in nodes:
        used = node.used   # capacity - free: raises if free is not within capacity
        assert node.free.memory_mb >= 0 and node.free.vcores >= 0 and node.free.gpus >= 0
        assert node.free.add(used).memory_mb == node.capacity.memory_mb
        assert node.free.gpu_mask | used.gpu_mask == node.capacity.gpu_mask
        assert not node.free.gpu_mask & used.gpu_mask
        if node.gpu_milli_free is not None:   # some GPU holds shares: per GPU within 0..1000, wholly free at 1000
            assert len(node.gpu_milli_free) == node.capacity.gpus
            assert all(0 <= m <= 1000 for m in node.gpu_milli_free)
            assert all((m == 1000) == bool(node.free.gpu_mask >> g & 1) for g, m in enumerate(node.gpu_milli_free))


# ------------------------------------------------------------------ random bytes
@FUZZ
@given(method=st.sampled_from(METHODS), payload=st.binary(max_size=300))
def test_random_bytes_get_a_typed_answer(rm, method, payload):
    core, call = rm
    assert call(method, payload)[0] in TYPED
    assert_still_serving_and_balanced(core, call)


# ------------------------------------------------------------------ hostile values
# Each message is drawn plausible (every field from values a real AM might send, so
# calls reach deep states: granted, started, finished containers) and then, half of
# the time, one field is replaced by a hostile value.
hostile_names = st.one_of(st.text(max_size=12), st.just("x" * (limits.MAX_NAME_CHARS + 1)),
                          st.sampled_from(["\x00", "dgx-000\x00", "app_0001\n"]))
hostile_int32 = st.one_of(st.sampled_from([-1, 0, INT32[0], INT32[1]]), st.integers(*INT32))
hostile_int64 = st.one_of(st.sampled_from([-1, INT64[0], INT64[1]]), st.integers(*INT64))
hostile_doubles = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 1e300, 5e-324]),
                            st.floats(allow_nan=True, allow_infinity=True))
# An application or a container: an index into the RM's own (newest first) at the time of
# the call, so calls reach live objects; or, as a hostile value, any name.
app_ids = st.integers(0, 10 ** 6)
attempts = st.just(None)   # the application's current attempt
hosts = st.sampled_from(HOSTS)
containers = st.integers(0, 10 ** 6)


def field(valid, hostile):
    return valid, hostile


@st.composite
def plausible(draw, fields: dict):
    """A dict of field values: all valid, or (half of the time) one of them hostile."""
    spoiled = draw(st.one_of(st.none(), st.sampled_from(sorted(fields))))
    return {key: draw(hostile if key == spoiled else valid) for key, (valid, hostile) in fields.items()}


resources = plausible({
    "memory_mb": field(st.sampled_from([0, 512, 1024, 4096]), st.one_of(st.sampled_from([-1, 2 ** 40]), hostile_int64)),
    "vcores": field(st.sampled_from([0.5, 1.0, 2.0]), hostile_doubles),
    "gpus": field(st.sampled_from([0, 1, 2]), st.one_of(st.sampled_from([9, 65, -1]), hostile_int32)),
    # A mask must agree with gpus (or gpus be 0): plausible asks go by count, hostile ones by any mask.
    "gpu_mask": field(st.just(0), st.one_of(st.sampled_from([0b1, 0b11, 0xF0, 0x1FF]), st.integers(0, 2 ** 64 - 1))),
    "ports": field(st.sampled_from([0, 0, 1]), st.one_of(st.sampled_from([70000, -1]), hostile_int32)),
    # a share of one GPU (with gpus > 0 it is refused: a plausible mix, a typed answer)
    "gpu_milli": field(st.sampled_from([0, 0, 0, 250, 500]), st.one_of(st.sampled_from([1000, -1, 999]),
                                                                       hostile_int32)),
    "ranges": field(st.just([]), st.lists(st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1)),
                                          min_size=1, max_size=3)),
})
asks = plausible({
    "request_id": field(st.integers(0, 10 ** 9), hostile_int64),   # a pending id again is refused
    "resource": field(resources, resources),
    "count": field(st.integers(1, 3), st.one_of(st.sampled_from([0, -1, limits.RM_MAX_COUNT_PER_ASK + 1,
                                                                 INT32[1]]), hostile_int32)),
    "host": field(st.one_of(st.just(""), hosts), hostile_names),
    "rack": field(st.sampled_from(["", "", "rack-a", "rack-b"]), hostile_names),
    "relax_locality": field(st.booleans(), st.booleans()),
    "node_label": field(st.sampled_from(["", "", "nvlink"]), hostile_names),
    "priority": field(st.integers(0, 2), hostile_int32),
})
# Commands a fuzzed StartContainer may really run are harmless ("true"); the hostile ones
# carry what execve cannot take or exceed a limit, and must be refused before anything runs.
commands = st.one_of(st.just([]), st.just(["tr\x00ue"]), st.just(["true"] * (limits.RM_MAX_COMMAND_ARGS + 1)))
envs = st.lists(st.tuples(st.sampled_from(["", "B=C", "D\x00", "E"]), st.sampled_from(["1", "x\x00"])),
                min_size=1, max_size=3)

OPS = {
    "Submit": {"name": field(st.just("job"), hostile_names),
               "queue": field(st.sampled_from(["default", "default", "nope"]), hostile_names),
               "max_attempts": field(st.sampled_from([0, 1, 2, 3]), hostile_int32),
               "keep": field(st.booleans(), st.booleans()),
               "expiry": field(st.sampled_from([0.0, 0.0, 30.0]), hostile_doubles)},
    "Register": {"app_id": field(app_ids, hostile_names)},
    "Allocate": {"app_id": field(app_ids, hostile_names), "attempt": field(attempts, hostile_int32),
                 "asks": field(st.lists(asks, max_size=3), st.lists(asks, min_size=1, max_size=3)),
                 "cancel": field(st.lists(st.integers(0, 30), max_size=1), st.lists(hostile_int64, min_size=1)),
                 "releases": field(st.lists(containers, max_size=2), st.lists(hostile_names, min_size=1)),
                 "blacklist": field(st.lists(hosts, max_size=1), st.lists(hostile_names, min_size=1)),
                 "progress": field(st.floats(0, 1), hostile_doubles)},
    "Finish": {"app_id": field(app_ids, hostile_names), "attempt": field(attempts, hostile_int32),
               "final_status": field(st.sampled_from(["", "SUCCEEDED", "FAILED"]), hostile_names),
               "diagnostics": field(st.just("done"), st.sampled_from(["\x00", "d" * (limits.RM_MAX_TEXT_CHARS + 1)]))},
    "Kill": {"app_id": field(app_ids, hostile_names), "diagnostics": field(st.just(""), hostile_names)},
    "GetApplicationReport": {"app_id": field(app_ids, hostile_names)},
    "StartContainer": {"container": field(containers, hostile_names),
                       "command": field(st.just(["true"]), commands),
                       "env": field(st.just([("A", "1")]), envs)},
    "StopContainer": {"container": field(containers, hostile_names)},
    "GetContainerStatus": {"container": field(containers, hostile_names)},
    "InjectFault": {"action": field(st.sampled_from(["lose_node", "mark_unhealthy", "restore_node", "restore_node",
                                                     "kill_container", "fail_container", "kill_am"]),
                                    st.sampled_from(["nuke", "", "\x00", "x" * 300])),
                    "host": field(hosts, hostile_names), "container": field(containers, hostile_names),
                    "app_id": field(app_ids, hostile_names), "exit_code": field(st.sampled_from([0, 1, 137]),
                                                                                hostile_int32),
                    "text": field(st.just(""), hostile_names)},
}
# How often each call is made: mostly the calls that build state (register, allocate, start).
WEIGHTS = {"Submit": 2, "Register": 3, "Allocate": 6, "StartContainer": 3, "Finish": 1, "Kill": 1,
           "GetApplicationReport": 1, "StopContainer": 1, "GetContainerStatus": 1, "InjectFault": 2}
ops = st.one_of(*[st.tuples(st.just(kind), plausible(OPS[kind])) for kind in OPS for _ in range(WEIGHTS[kind])])


# What a plausible call names: an index into the RM's objects of the kind the call
# wants (an ACCEPTED application to register, a RUNNING one to allocate for, an
# ALLOCATED container to start, ...), newest first, so shrunk examples name the
# newest; when there is none of that kind, any of them. A hostile value is a name.
WANTS = {
    "Register": ("apps", lambda a: a.state.value == "ACCEPTED"),
    "Allocate": ("apps", lambda a: a.state.value == "RUNNING"),
    "Finish": ("apps", lambda a: a.state.value == "RUNNING"),
    "StartContainer": ("containers", lambda c: c.state.value == "ALLOCATED"),
    "StopContainer": ("containers", lambda c: not c.state.finished),
}


def pick(core, which, table: str, wanted=lambda obj: True) -> str:
    if isinstance(which, str):
        return which
    with core.lock:
        objects = getattr(core, table)
        ids = [k for k, v in objects.items() if wanted(v)] or list(objects)
    return ids[-1 - which % len(ids)] if ids else "none"


def resolve(core, kind: str, which, table: str) -> str:
    wanted_table, wanted = WANTS.get(kind, (table, lambda obj: True))
    return pick(core, which, table, wanted if wanted_table == table else (lambda obj: True))


def current_attempt(core, app: str, attempt) -> int:
    """``None`` (plausible): the application's attempt now; else the hostile number as it is."""
    if attempt is not None:
        return attempt
    with core.lock:
        found = core.apps.get(app)
        return found.attempt if found else 1


def own_containers(core, app: str, which: list) -> list[str]:
    """Plausible releases: the application's own live containers (picked by index)."""
    with core.lock:
        found = core.apps.get(app)
        mine = sorted(found.containers) if found else []
    return [mine[k % len(mine)] for k in which if isinstance(k, int) and mine] + \
        [k for k in which if isinstance(k, str)]


def message(core, op) -> tuple[str, bytes]:
    """The wire form of one generated operation."""
    kind, f = op
    app = resolve(core, kind, f["app_id"], "apps") if "app_id" in f else ""
    container = resolve(core, kind, f["container"], "containers") if "container" in f else ""
    if kind == "Submit":
        msg = pb.SubmitRequest(name=f["name"], queue=f["queue"], max_attempts=f["max_attempts"],
                               keep_containers_across_attempts=f["keep"], am_expiry_s=f["expiry"])
    elif kind == "Register":
        msg = pb.RegisterRequest(app_id=app)
    elif kind == "Allocate":
        msg = pb.AllocateRequest(app_id=app, attempt=current_attempt(core, app, f["attempt"]), cancel=f["cancel"],
                                 releases=own_containers(core, app, f["releases"]),
                                 blacklist_additions=f["blacklist"], progress=f["progress"])
        for a in f["asks"]:
            out = msg.asks.add(request_id=a["request_id"], count=a["count"], host=a["host"], rack=a["rack"],
                               relax_locality=a["relax_locality"], node_label=a["node_label"],
                               priority=a["priority"])
            r = a["resource"]
            out.resource.memory_mb, out.resource.vcores, out.resource.gpus = r["memory_mb"], r["vcores"], r["gpus"]
            out.resource.gpu_mask, out.resource.ports = r["gpu_mask"], r["ports"]
            out.resource.gpu_milli = r["gpu_milli"]
            for begin, end in r["ranges"]:
                out.resource.port_ranges.add(begin=begin, end=end)
    elif kind == "Finish":
        msg = pb.FinishRequest(app_id=app, attempt=current_attempt(core, app, f["attempt"]),
                               final_status=f["final_status"], diagnostics=f["diagnostics"])
    elif kind == "Kill":
        msg = pb.KillRequest(app_id=app, diagnostics=f["diagnostics"])
    elif kind == "GetApplicationReport":
        msg = pb.AppId(app_id=app)
    elif kind == "StartContainer":
        msg = pb.StartContainerRequest(container_id=container, launch=pb.LaunchContext(
            command=f["command"], env=[pb.EnvVar(name=k, value=v) for k, v in f["env"]]))
    elif kind in ("StopContainer", "GetContainerStatus"):
        msg = pb.ContainerId(container_id=container)
    else:
        msg = control_pb.FaultRequest(action=f["action"], host=f["host"], container_id=container, app_id=app,
                              exit_code=f["exit_code"], text=f["text"])
    return kind, msg.SerializeToString()


@FUZZ
@given(st.lists(ops, min_size=1, max_size=12))
def test_hostile_calls_in_any_order_get_a_typed_answer(rm, op_list):
    core, call = rm
    for op in op_list:
        method, payload = message(core, op)
        code, _ = call(method, payload)
        assert code in TYPED, (op, code)
    assert_still_serving_and_balanced(core, call)

