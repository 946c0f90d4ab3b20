"""A real barrier coordinator on 127.0.0.1, fed random and hostile gRPC messages.

Undecodable bytes, fields with any varint (negative and huge task indices, epochs,
attempts), invalid UTF-8 and NUL bytes in names, wrong and empty tokens, unknown
attempts and operations, payloads over the size limit, on every method, unary and
streamed. Whatever comes in, the coordinator

- answers with a typed error: a gRPC status of INVALID_ARGUMENT, RESOURCE_EXHAUSTED,
  UNAUTHENTICATED, NOT_FOUND or FAILED_PRECONDITION with a message, or a reply whose
  error is one of the coordinator's codes — never UNKNOWN or INTERNAL, never a
  traceback in its log;
- keeps serving: afterwards a real gang's all_gather completes;
- stays consistent: no call left waiting, the attempts it had open still open.
"""
from __future__ import annotations

import logging
import threading
import time

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangmaster.am.barrier.coordinator import TaskInfo
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.errors import ERROR_CLASSES
from gangmaster.am.barrier.server import BarrierServer
from gangmaster.am.barrier.task_context import BarrierTaskContext, channel_options
from gangmaster.protocol.proto import barrier_pb2 as pb

LIMIT = 64 * 1024  # barrier.max_message_bytes of the server under test: oversize stays cheap
TYPED_STATUSES = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
                  grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.NOT_FOUND,
                  grpc.StatusCode.FAILED_PRECONDITION}
SERVICE = "/gangmaster.barrier.BarrierCoordinator/"
UNARY = {"Sync": pb.SyncReply, "GetTaskInfos": pb.TaskInfosReply, "Ping": pb.PingReply}
STREAMS = {"Session": pb.SyncReply, "HostSession": pb.SyncReply, "PingSession": pb.PingReply}
FUZZ_TOKEN = "fuzz-token"   # the fuzzer may know this gang's token: deeper checks run
REAL_TOKEN = "real-token"   # ... but never this one's


class Fuzzed:
    """The server under test, a raw channel to it, and what the fuzzer saw."""

    def __init__(self):
        self.server = BarrierServer(BarrierConfig(max_message_bytes=LIMIT, log_interval_s=0.5,
                                                  retry_give_up_s=10))
        address = self.server.start()
        # one task: any call it makes that passes the checks is released at once (never waits)
        self.fz_attempt = 0
        self.renew()
        self.server.open_attempt("real", "g", 1, [TaskInfo(i, "127.0.0.1") for i in range(3)],
                                 token=REAL_TOKEN)
        self.channel = grpc.insecure_channel(address, options=channel_options(4 * LIMIT))
        self.calls = 0
        self.broken = False
        self.statuses: dict[str, int] = {}

    def renew(self):
        """A new attempt of the fuzz gang (the last one was broken by an oversize gather)."""
        self.fz_attempt += 1
        self.server.open_attempt("fz", "g", self.fz_attempt, [TaskInfo(0, "127.0.0.1")], token=FUZZ_TOKEN)

    def deep_request(self, f: dict) -> bytes:
        epoch = self.server.coordinator.progress("fz", "g", self.fz_attempt, FUZZ_TOKEN, 0).epoch
        attempt = self.fz_attempt if f["attempt"] is None else f["attempt"]
        caller = pb.Caller(job=f["job"], gang=f["gang"], attempt=attempt, token=f["token"], task=f["task"])
        return pb.SyncRequest(caller=caller, epoch=max(0, epoch + f["epoch_offset"]), operation=f["operation"],
                              message=f["message"], hold_ms=f["hold_ms"],
                              unsent_size=f["unsent_size"]).SerializeToString()

    def close(self):
        self.channel.close()
        self.server.stop(grace=0)

    def unary(self, method: str, raw: bytes):
        call = self.channel.unary_unary(SERVICE + method, request_serializer=None,
                                        response_deserializer=None)
        try:
            self.check_reply(method, call(raw, timeout=10), UNARY[method])
        except grpc.RpcError as exc:
            self.check_status(exc)

    def stream(self, method: str, raws: list[bytes]):
        call = self.channel.stream_stream(SERVICE + method, request_serializer=None,
                                          response_deserializer=None)
        try:
            for reply in call(iter(raws), timeout=10):
                self.check_reply(method, reply, STREAMS[method])
        except grpc.RpcError as exc:
            self.check_status(exc)

    def check_reply(self, method: str, raw: bytes, reply_type) -> None:
        self.calls += 1
        reply = reply_type.FromString(raw)
        outcome = reply.WhichOneof("outcome") if reply_type is not pb.PingReply else None
        key = f"{method}:{reply.error.code if outcome == 'error' else outcome}"
        self.statuses[key] = self.statuses.get(key, 0) + 1
        if outcome == "error":
            assert reply.error.code in ERROR_CLASSES and reply.error.message, reply.error
            if reply.error.code in ("TOO_LARGE", "MISMATCH", "TIMEOUT"):
                self.broken = True

    def check_status(self, exc: grpc.RpcError) -> None:
        self.calls += 1
        self.statuses[exc.code().name] = self.statuses.get(exc.code().name, 0) + 1
        assert exc.code() in TYPED_STATUSES, (exc.code(), exc.details())
        assert exc.details(), exc.code()


@pytest.fixture(scope="module")
def fuzzed():
    f = Fuzzed()
    yield f
    f.close()


# ------------------------------------------------------------------ strategies
def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: int | bytes) -> bytes:
    """One field on the wire: a varint, or length-delimited bytes."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


HUGE_INTS = st.sampled_from([0, 1, 2, 3, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1])
ANY_VARINT = st.one_of(HUGE_INTS, st.integers(0, 2**64 - 1))
NAMES = st.one_of(st.sampled_from([b"fz", b"real", b"g", b"", b"fz\x00", b"\x00", b"\xff\xfe", b"x" * 5000]),
                  st.binary(max_size=40))
TOKENS = st.one_of(st.sampled_from([FUZZ_TOKEN.encode(), b"", b"guess", b"real-token\x00", b"\xc3\x28"]),
                   st.binary(max_size=40))


@st.composite
def callers(draw) -> bytes:
    parts = [field(1, draw(NAMES)), field(2, draw(NAMES)),
             field(3, draw(ANY_VARINT)), field(4, draw(TOKENS)), field(5, draw(ANY_VARINT))]
    return b"".join(draw(st.permutations(parts))[:draw(st.integers(0, len(parts)))])


@st.composite
def sync_requests(draw) -> bytes:
    """A SyncRequest built on the wire, so that any value can go in any field."""
    parts = [field(1, draw(callers())), field(2, draw(ANY_VARINT)), field(3, draw(ANY_VARINT)),
             field(4, draw(st.binary(max_size=300))), field(5, draw(ANY_VARINT)),
             field(6, draw(st.one_of(st.just(0), ANY_VARINT)))]
    return b"".join(draw(st.lists(st.sampled_from(parts), max_size=8)))


@st.composite
def well_formed(draw) -> dict:
    """The fields of a decodable SyncRequest aimed at the fuzz gang, mostly with its
    token, attempt and current epoch (filled in when sent: :meth:`Fuzzed.deep_request`),
    so that deep validation (task index, epoch, operation, size) runs, not only auth."""
    authentic = draw(st.booleans())
    return dict(
        job="fz" if authentic else draw(st.sampled_from(["fz", "real", "fz\x00", "", "é" * 300])),
        gang="g" if authentic else draw(st.sampled_from(["g", "h", "\x00"])),
        attempt=None if authentic else draw(st.sampled_from([0, 2**32 - 1])),
        token=FUZZ_TOKEN if authentic else draw(st.sampled_from(["", "guess", REAL_TOKEN + "\x00"])),
        task=draw(st.sampled_from([0, 0, 0, 1, 2**32 - 1])),
        epoch_offset=draw(st.sampled_from([0, 0, 0, -1, -2, 1, 2**63])),
        operation=draw(st.sampled_from([0, 1, 1, 7])),
        message=draw(st.sampled_from([b"", b"m", b"\x00" * 10, b"x" * (LIMIT - 100), b"y" * (LIMIT + 1)])),
        hold_ms=draw(st.sampled_from([0, 1, 100])),
        unsent_size=draw(st.sampled_from([0, 0, 0, 5, 2**64 - 1])))


FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))


# ----------------------------------------------------------------------- tests
def test_hostile_calls_get_typed_answers_and_the_coordinator_keeps_serving(fuzzed, caplog):
    @FUZZ
    @given(method=st.sampled_from(sorted(UNARY)), raw=st.one_of(st.binary(max_size=200), sync_requests()))
    def unary_garbage(method, raw):
        fuzzed.unary(method, raw)

    @FUZZ
    @given(method=st.sampled_from(sorted(STREAMS)),
           raws=st.lists(st.one_of(st.binary(max_size=100), sync_requests()), min_size=1, max_size=4))
    def stream_garbage(method, raws):
        fuzzed.stream(method, raws)

    @FUZZ
    @given(fields=well_formed(), streamed=st.booleans())
    def deep(fields, streamed):
        if fuzzed.broken:
            fuzzed.renew()
            fuzzed.broken = False
        raw = fuzzed.deep_request(fields)
        if streamed:
            fuzzed.stream("Session", [raw])
        else:
            fuzzed.unary("Sync", raw)

    with caplog.at_level(logging.WARNING):
        unary_garbage()
        stream_garbage()
        deep()
        for method in ("Sync", "Ping"):  # over the channel's limit: refused by gRPC itself
            fuzzed.unary(method, field(4, b"z" * (2 * LIMIT)))
        fuzzed.stream("Session", [field(4, b"z" * (2 * LIMIT))])
    seen = {key.split(":")[-1] for key in fuzzed.statuses}
    assert {"INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "AUTH"} <= seen, fuzzed.statuses
    assert seen & {"released", "INVALID", "STALE_EPOCH", "TOO_LARGE"}, "the fuzz never got past authentication"
    tracebacks = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not tracebacks, tracebacks[0].getMessage()

    # consistent: nothing waits, both attempts are still open, refusals were counted
    deadline = time.monotonic() + 10
    while fuzzed.server.statistics().calls_waiting and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = fuzzed.server.statistics()
    assert stats.calls_waiting == 0 and stats.attempts_open == 2 and stats.auth_refusals > 0

    # still serving: a real gang's all_gather goes through, at epoch 0 (the fuzz never moved it)
    ctxs = [BarrierTaskContext.from_env(fuzzed.server.task_env("real", "g", 1, i)) for i in range(3)]
    got: dict[int, list[str]] = {}
    threads = [threading.Thread(target=lambda c=c: got.__setitem__(c.task_index(), c.all_gather(str(c.task_index()))))
               for c in ctxs]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert got == {i: ["0", "1", "2"] for i in range(3)}
        assert all(c.epoch == 1 and c.retries == 0 for c in ctxs)
    finally:
        for c in ctxs:
            c.close()
