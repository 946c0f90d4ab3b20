"""The completion-queue coordinator answers every call as the grpc.aio one does: the same
cases against both servers, each started once for the module."""
from __future__ import annotations

import gc
import threading
import time
import tracemalloc

import grpc
import pytest

from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.coordinator import TaskInfo
from gangmaster.am.barrier import cq_server
from gangmaster.am.barrier.cq_server import CompletionQueueBarrierServer, new_barrier_server
from gangmaster.am.barrier.errors import AttemptFailed
from gangmaster.am.barrier.server import BarrierServer
from gangmaster.am.barrier.task_context import BarrierTaskContext
from gangmaster.protocol.proto import barrier_pb2 as pb

SERVICE = "/gangmaster.barrier.BarrierCoordinator/"


@pytest.fixture(scope="module", params=[BarrierServer, CompletionQueueBarrierServer], ids=["aio", "cq"])
def server(request):
    with request.param(BarrierConfig(log_interval_s=60.0)) as s:
        yield s


@pytest.fixture(scope="module")
def channel(server):
    with grpc.insecure_channel(server.address) as ch:
        yield ch


def _open(server, gang: str, n: int = 2) -> str:
    return server.open_attempt("j", gang, 1, [TaskInfo(i, "h") for i in range(n)])


def _sync(gang: str, token: str, task: int, epoch: int = 0, hold_ms: int = 60_000) -> bytes:
    return pb.SyncRequest(caller=pb.Caller(job="j", gang=gang, attempt=1, token=token, task=task),
                          epoch=epoch, hold_ms=hold_ms).SerializeToString()


def _call(channel, method: str, data: bytes, reply=pb.SyncReply, timeout: float = 10):
    """A unary call with raw request bytes: (status code, reply or None)."""
    try:
        out = channel.unary_unary(SERVICE + method, response_deserializer=reply.FromString)(data, timeout=timeout)
    except grpc.RpcError as exc:
        return exc.code(), None
    return grpc.StatusCode.OK, out


def test_tasks_meet_gather_and_read_their_infos(server):
    _open(server, "meet")
    ctxs = [BarrierTaskContext.from_env({**server.task_env("j", "meet", 1, i), "GANGMASTER_BARRIER_TREE": "0"})
            for i in range(2)]
    got: dict[int, list] = {}

    def run(ctx):
        ctx.barrier()
        got[ctx.task_index()] = [ctx.all_gather(f"m{ctx.task_index()}"), len(ctx.get_task_infos())]

    threads = [threading.Thread(target=run, args=(c,)) for c in ctxs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    for c in ctxs:
        c.close()
    assert got == {0: [["m0", "m1"], 2], 1: [["m0", "m1"], 2]}


@pytest.mark.parametrize("method, data, code", [
    ("Sync", b"\xff\xff\xff", grpc.StatusCode.INVALID_ARGUMENT),       # not a SyncRequest
    ("GetTaskInfos", b"\x0a\x05", grpc.StatusCode.INVALID_ARGUMENT),   # a truncated Caller
    ("NoSuchMethod", b"", grpc.StatusCode.UNIMPLEMENTED),
    ("Ping", b"", grpc.StatusCode.OK),
])
def test_what_cannot_be_served_is_refused_by_status(channel, method, data, code):
    assert _call(channel, method, data, pb.PingReply if method == "Ping" else pb.SyncReply)[0] == code


def test_a_wrong_token_is_answered_with_a_typed_error(server, channel):
    _open(server, "auth")
    code, reply = _call(channel, "Sync", _sync("auth", "not-the-token", 0))
    assert code == grpc.StatusCode.OK and reply.error.code == "AUTH"


def test_a_call_while_taking_over_is_told_to_come_back(server, channel):
    server.coordinator.taking_over()
    try:
        assert _call(channel, "Sync", _sync("not-open-yet", "tok", 0))[0] == grpc.StatusCode.UNAVAILABLE
    finally:
        server.coordinator.taking_over(False)


def test_a_waiting_call_is_answered_pending_after_its_hold(server, channel):
    token = _open(server, "hold")
    code, reply = _call(channel, "Sync", _sync("hold", token, 0, hold_ms=50))
    assert code == grpc.StatusCode.OK
    assert (reply.pending.epoch, reply.pending.arrived, reply.pending.total) == (0, 1, 2)
    assert server.statistics().calls_waiting == 0


def test_failing_the_attempt_from_another_thread_answers_its_waiter(server, channel):
    token = _open(server, "fail")
    got: list = []
    waiting = threading.Thread(target=lambda: got.append(_call(channel, "Sync", _sync("fail", token, 0))))
    waiting.start()
    while server.statistics().calls_waiting == 0 and waiting.is_alive():
        waiting.join(0.01)
    server.fail_attempt("j", "fail", 1, "task 1 exited with code 137")
    waiting.join(10)
    code, reply = got[0]
    assert code == grpc.StatusCode.OK and reply.error.code == AttemptFailed.code
    assert "code 137" in reply.error.message


def test_a_cancelled_stream_withdraws_its_waiter(server, channel):
    token = _open(server, "cancel")
    session = channel.stream_stream(SERVICE + "Session", response_deserializer=pb.SyncReply.FromString)
    replies = session(iter([_sync("cancel", token, 0)]))
    while server.statistics().calls_waiting == 0:
        threading.Event().wait(0.01)
    replies.cancel()
    for _ in range(500):
        if server.statistics().calls_waiting == 0:
            break
        threading.Event().wait(0.01)
    assert server.statistics().calls_waiting == 0


class _OldCygrpc:
    """A grpc without the completion-queue server's internals."""


@pytest.mark.parametrize("cygrpc, expected", [
    (cq_server.cygrpc, CompletionQueueBarrierServer),
    (_OldCygrpc(), BarrierServer),
])
def test_the_am_falls_back_to_grpc_aio_where_grpc_lacks_the_internals(monkeypatch, cygrpc, expected):
    monkeypatch.setattr(cq_server, "cygrpc", cygrpc)
    assert type(new_barrier_server(BarrierConfig())) is expected


def test_a_closed_attempts_last_gather_is_not_held(server):
    """The reply of a release is made once for all its waiters and owned by the release:
    once the attempt is closed and its tasks have their answers, nothing keeps it (traced
    memory falls back to where it was before the gather)."""
    size = 1 << 20   # each task's message: the reply holds both, 2 MiB
    _open(server, "held")
    ctxs = [BarrierTaskContext.from_env({**server.task_env("j", "held", 1, i), "GANGMASTER_BARRIER_TREE": "0"})
            for i in range(2)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        got: dict[int, int] = {}

        def run(ctx):
            got[ctx.task_index()] = sum(map(len, ctx.all_gather_bytes(bytes([ctx.task_index()]) * size)))

        threads = [threading.Thread(target=run, args=(c,)) for c in ctxs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert got == {0: 2 * size, 1: 2 * size}
        server.close_attempt("j", "held", 1)
        for ctx in ctxs:
            ctx.close()
        deadline = time.monotonic() + 5   # the server thread finishes the closed streams' calls
        while (held := _traced_after_gc() - before) >= size // 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        tracemalloc.stop()
    assert held < size // 2, f"{held:,} bytes still held after the attempt closed"


def _traced_after_gc() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]
