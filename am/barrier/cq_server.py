"""The barrier coordinator served from gRPC's completion queue by one thread, without
``grpc.aio``: the same service, wire and answers as :class:`~gangmaster.am.barrier.server.BarrierServer`,
the same synchronous API for the AM.

Why: at 1,024 tasks (128 host leaders, each on its own connection) the coordinator's CPU
per host message was ~350–450 µs, nearly all of it grpc.aio's per-message handling (a
poller thread hands each completion to the event loop through a socket; each read and
each write is a future, a loop callback and a coroutine step), not the barrier's logic
(~8 µs per host message). Here one thread polls the server's completion queue and
handles each completion where it comes out: a request is decoded, handed to the
:class:`~gangmaster.am.barrier.coordinator.BarrierCoordinator`, and its reply is one batch
(send the reply, receive the stream's next request); a release is serialised once for
all its waiters. Measured with 128 client connections, one message each per round: 167
against 343 µs of server CPU per message (BENCHMARKS.md, "Session 15 — barriers at scale").
This is what grpc's own synchronous server and blocking calls do underneath (a
``cygrpc`` server and completion queue), as the tasks' ``_DirectSession`` does on the
client side; it relies on grpcio's internals, and where they are missing
:func:`new_barrier_server` gives the grpc.aio server instead.

How each method is answered is :class:`~gangmaster.am.barrier.server.BarrierServer`'s:
a request that cannot be decoded ends its call INVALID_ARGUMENT, a call naming an attempt
not reopened yet while the AM takes over ends UNAVAILABLE (the task retries), a waiting
call is answered ``pending`` after its hold time, a cancelled call withdraws its waiter,
messages over the size limit are refused RESOURCE_EXHAUSTED by gRPC. Calls from any
thread (the AM failing or closing an attempt) answer waiters through the same lock.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

import grpc
from grpc._cython import cygrpc

from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.coordinator import Arrival, BarrierCoordinator, NotOpenYet, Released
from gangmaster.am.barrier.errors import BarrierError, BarrierInvalid
from gangmaster.am.barrier.server import (MAX_HOLD_S, OPERATION_NAMES, BarrierServer, CoordinatorFront, Undecodable,
                                          advertised_address, error_to_proto, listen_as_configured, log_waiting,
                                          released_reply, server_options, task_info_to_proto, tolerant_parser)
from gangmaster.protocol.proto import barrier_pb2 as pb

__all__ = ["CompletionQueueBarrierServer", "new_barrier_server"]

log = logging.getLogger("gangmaster.barrier")

_SERVICE = "/gangmaster.barrier.BarrierCoordinator/"
_PENDING = object()
_EMPTY_REPLY = pb.PingReply().SerializeToString()
#: The longest the poll waits without a timer due (to notice a stop).
_IDLE_POLL_S = 1.0


class _Port:
    """What :func:`gangmaster.protocol.grpc_security.listen` binds: a cygrpc server's port."""

    def __init__(self, server: "cygrpc.Server"):
        self._server = server

    def add_insecure_port(self, address: str) -> int:
        return self._server.add_http2_port(address.encode())

    def add_secure_port(self, address: str, credentials: grpc.ServerCredentials) -> int:
        return self._server.add_http2_port(address.encode(), credentials._credentials)


class _Call:
    """One call in progress: its cygrpc call, whether its initial metadata is sent, the
    arrival waiting for an outcome (``turn``: a new object per request, so that an outcome
    for an earlier request never answers a later one) and its hold timer."""

    __slots__ = ("call", "streaming", "handle", "parse", "started", "closed", "turn", "waiter", "timer")

    def __init__(self, call, streaming: bool, handle: Callable, parse: Callable):
        self.call, self.streaming, self.handle, self.parse = call, streaming, handle, parse
        self.started = self.closed = False
        self.turn: object | None = None
        self.waiter = None
        self.timer: list | None = None


class CompletionQueueBarrierServer(CoordinatorFront):
    """The coordinator's gRPC server on one completion-queue thread, with
    :class:`~gangmaster.am.barrier.server.BarrierServer`'s synchronous API (safe from any thread)."""

    def __init__(self, config: BarrierConfig | None = None, coordinator: BarrierCoordinator | None = None):
        super().__init__(config, coordinator)
        self._lock = threading.RLock()
        self._server = self._cq = self._thread = None
        self._port: int | None = None
        self._stopping = False
        self._shut_down = threading.Event()
        #: set (under the lock) when the queue is shut: no batch may be started after it
        self._queue_closed = False
        self._timers: list[list] = []   # [when, seq, callback, live], earliest first
        self._seq = itertools.count()
        self._deadline_timer: list | None = None
        self._methods = {
            (_SERVICE + "Sync").encode(): (False, self._sync, tolerant_parser(pb.SyncRequest)),
            (_SERVICE + "Session").encode(): (True, self._sync, tolerant_parser(pb.SyncRequest)),
            (_SERVICE + "HostSession").encode(): (True, self._host, tolerant_parser(pb.HostSyncRequest)),
            (_SERVICE + "GetTaskInfos").encode(): (False, self._task_infos, tolerant_parser(pb.TaskInfosRequest)),
            (_SERVICE + "Ping").encode(): (False, self._ping, tolerant_parser(pb.PingRequest)),
            (_SERVICE + "PingSession").encode(): (True, self._ping, tolerant_parser(pb.PingRequest)),
        }

    # ------------------------------------------------------------ life cycle
    @property
    def address(self) -> str:
        """``host:port`` tasks dial."""
        if self._port is None:
            raise RuntimeError("the barrier server is not started")
        return advertised_address(self.config, self._port)

    def start(self, timeout_s: float = 30.0) -> str:
        """Listen and serve; returns the ``host:port`` tasks dial (:class:`ConfigError` for
        unusable TLS files or a port in use)."""
        if self._thread is not None:
            raise RuntimeError("the barrier server is already started")
        config = self.config
        cq = cygrpc.CompletionQueue()
        server = cygrpc.Server(tuple(server_options(config.max_pending_calls, config.max_message_bytes)), False)
        server.register_completion_queue(cq)
        port = listen_as_configured(_Port(server), config)
        server.start()
        self._server, self._cq, self._port = server, cq, port
        self._call_later(config.log_interval_s, self._log_waiting)
        server.request_call(cq, cq, self._on_call)
        self._thread = threading.Thread(target=self._run, name="barrier-server", daemon=True)
        self._thread.start()
        log.info("barrier coordinator listening on %s (%s; completion queue)", self.address,
                 "TLS" if config.tls else "plaintext")
        return self.address

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving: calls still open after ``grace`` seconds are cancelled; the thread ends."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping = True
        with self._lock:
            server.shutdown(self._cq, self._on_shutdown)
        if not self._shut_down.wait(grace or 0):
            with self._lock:
                server.cancel_all_calls()
            self._shut_down.wait(30)
        thread.join(30)
        self._server = self._thread = None

    def __enter__(self) -> "CompletionQueueBarrierServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        cq, timers = self._cq, self._timers
        while True:
            wait = _IDLE_POLL_S
            if timers:
                wait = min(wait, max(0.0, timers[0][0] - time.monotonic()))
            event = cq.poll(time.time() + wait)
            kind = event.completion_type
            if kind == cygrpc.CompletionType.queue_shutdown:
                return
            with self._lock:
                if kind == cygrpc.CompletionType.operation_complete:
                    try:
                        event.tag(event)
                    except Exception:   # noqa: BLE001 - one call's trouble must not end the server
                        log.exception("barrier coordinator: a call's completion failed")
                now = time.monotonic()
                while timers and timers[0][0] <= now:
                    _when, _seq, callback, live = heapq.heappop(timers)
                    if live:
                        callback()
            event = None

    def _on_shutdown(self, _event) -> None:
        self._queue_closed = True
        self._shut_down.set()
        self._cq.shutdown()

    def _call_later(self, delay: float, callback: Callable) -> list:
        timer = [time.monotonic() + delay, next(self._seq), callback, True]
        heapq.heappush(self._timers, timer)
        return timer

    # ------------------------------------------------------------------ calls
    def _on_call(self, event) -> None:
        if self._stopping or not event.success:
            return
        self._server.request_call(self._cq, self._cq, self._on_call)
        call = event.call
        method = self._methods.get(event.call_details.method)
        if method is None:
            call.start_server_batch((cygrpc.SendInitialMetadataOperation(None, 0),
                                     cygrpc.SendStatusFromServerOperation(None, cygrpc.StatusCode.unimplemented,
                                                                          b"Method not found!", 0)), _ignore)
            return
        c = _Call(call, *method)
        call.start_server_batch((cygrpc.ReceiveCloseOnServerOperation(0),), lambda ev: self._closed(c, ev))
        call.start_server_batch((cygrpc.ReceiveMessageOperation(0),), lambda ev: self._received(c, ev))

    def _received(self, c: _Call, event) -> None:
        data = event.batch_operations[-1].message() if event.success else None
        if data is None:   # the client ended its stream (or the call broke)
            if event.success and not c.closed:
                self._finish(c, cygrpc.StatusCode.ok, b"")
            return
        request = c.parse(data)
        if isinstance(request, Undecodable):
            self._finish(c, cygrpc.StatusCode.invalid_argument, request.detail.encode())
            return
        c.turn = object()
        try:
            c.handle(c, request)
        except NotOpenYet as exc:
            self._finish(c, cygrpc.StatusCode.unavailable, str(exc).encode())

    def _closed(self, c: _Call, event) -> None:
        """The call is over: a cancelled one withdraws its waiting arrival."""
        c.closed = True
        c.turn = None
        if c.timer is not None:
            c.timer[3] = False
        if c.waiter is not None:
            waiter, c.waiter = c.waiter, None
            self.coordinator.withdraw(waiter)

    def _reply(self, c: _Call, data: bytes) -> None:
        """Send one reply: a stream then waits for its next request, a unary call ends."""
        if c.closed or self._queue_closed:
            return
        ops = [cygrpc.SendMessageOperation(data, 0)]
        if not c.started:
            c.started = True
            ops.insert(0, cygrpc.SendInitialMetadataOperation(None, 0))
        if c.streaming:
            ops.append(cygrpc.ReceiveMessageOperation(0))
            c.call.start_server_batch(ops, lambda ev: self._received(c, ev))
        else:
            ops.append(cygrpc.SendStatusFromServerOperation(None, cygrpc.StatusCode.ok, b"", 0))
            c.call.start_server_batch(ops, _ignore)

    def _finish(self, c: _Call, code, details: bytes) -> None:
        if self._queue_closed:
            return
        ops = [cygrpc.SendStatusFromServerOperation(None, code, details, 0)]
        if not c.started:
            c.started = True
            ops.insert(0, cygrpc.SendInitialMetadataOperation(None, 0))
        c.call.start_server_batch(ops, _ignore)

    # --------------------------------------------------------------- methods
    def _ping(self, c: _Call, _request) -> None:
        self._reply(c, _EMPTY_REPLY)

    def _task_infos(self, c: _Call, request: pb.TaskInfosRequest) -> None:
        k = request.caller
        try:
            infos = self.coordinator.task_infos(k.job, k.gang, k.attempt, k.token, k.task)
        except BarrierError as err:
            reply = pb.TaskInfosReply(error=error_to_proto(err))
        else:
            reply = pb.TaskInfosReply(infos=pb.TaskInfos(tasks=[task_info_to_proto(t) for t in infos]))
        self._reply(c, reply.SerializeToString())

    def _sync(self, c: _Call, request: pb.SyncRequest) -> None:
        """A barrier()/all_gather() call (unary Sync or a Session's request)."""
        k = request.caller
        if request.HasField("leader_lost"):
            try:
                self.coordinator.leader_lost(k.job, k.gang, k.attempt, k.token, k.task, request.epoch,
                                             request.leader_lost)
            except BarrierError as err:
                self._reply(c, pb.SyncReply(error=error_to_proto(err)).SerializeToString())
                return
        operation = OPERATION_NAMES.get(request.operation, f"operation #{request.operation}")
        arrival = Arrival(k.job, k.gang, k.attempt, k.token, k.task, request.epoch, operation,
                          request.message, request.unsent_size)
        self._wait(c, k, request.hold_ms, lambda settle: self.coordinator.arrive(arrival, settle))

    def _host(self, c: _Call, request: pb.HostSyncRequest) -> None:
        """A host leader's message: as :meth:`_sync`, for all its tasks."""
        k = request.caller
        tasks = request.tasks
        n = len(tasks)
        names = OPERATION_NAMES
        operations = [names.get(o, f"operation #{o}") for o in request.operations]
        messages = list(request.messages) or [b""] * n
        unsent = list(request.unsent_sizes) or [0] * n
        if not len(operations) == len(messages) == len(unsent) == n:
            self._reply(c, pb.SyncReply(error=pb.Error(code=BarrierInvalid.code, message=(
                f"a host message of {n} tasks with {len(operations)} operations, {len(request.messages)} "
                f"messages and {len(request.unsent_sizes)} unsent sizes; expected one of each per task "
                "(or no messages, no unsent sizes)"))).SerializeToString())
            return
        arrivals = list(zip(tasks, operations, messages, unsent))
        self._wait(c, k, request.hold_ms, lambda settle: self.coordinator.arrive_host(
            k.job, k.gang, k.attempt, k.token, k.task, request.epoch, arrivals, settle))

    def _wait(self, c: _Call, k: pb.Caller, hold_ms: int, arrive: Callable) -> None:
        """Arrive and answer once the outcome is known (now, or from whichever thread settles
        it), or ``pending`` after the hold time."""
        turn = c.turn

        def settle(outcome: object) -> None:
            with self._lock:
                if c.turn is not turn:
                    return
                c.turn = c.waiter = None
                if c.timer is not None:
                    c.timer[3] = False
                    c.timer = None
                self._reply(c, self._outcome(k, outcome))

        try:
            waiter = arrive(settle)
        except BarrierError as err:
            settle(err)
            return
        if c.turn is not turn:   # settled during the arrival
            return
        c.waiter = waiter
        hold = min(hold_ms / 1000.0 or self.config.log_interval_s, MAX_HOLD_S)

        def hold_over() -> None:
            if c.turn is turn:
                c.timer = None
                self.coordinator.withdraw(waiter)
                settle(_PENDING)

        c.timer = self._call_later(hold, hold_over)
        self._arm_deadline()

    def _outcome(self, k: pb.Caller, outcome: object) -> bytes:
        if isinstance(outcome, Released):
            return released_reply(outcome)
        if isinstance(outcome, BarrierError):
            return pb.SyncReply(error=error_to_proto(outcome)).SerializeToString()
        try:
            p = self.coordinator.progress(k.job, k.gang, k.attempt, k.token, k.task)
        except BarrierError as err:
            return pb.SyncReply(error=error_to_proto(err)).SerializeToString()
        return pb.SyncReply(pending=pb.Pending(epoch=p.epoch, arrived=p.arrived, total=p.total,
                                               waiting_s=p.waiting_s)).SerializeToString()

    # ------------------------------------------------------------------- time
    def _arm_deadline(self) -> None:
        """A timer at the coordinator's next epoch deadline (when none earlier is armed)."""
        deadline = self.coordinator.next_deadline()
        armed = self._deadline_timer
        if deadline is None or (armed is not None and armed[3] and armed[0] <= deadline):
            return
        if armed is not None:
            armed[3] = False
        self._deadline_timer = self._call_later(deadline - self.coordinator.clock.now(), self._expire)

    def _expire(self) -> None:
        self._deadline_timer = None
        self.coordinator.expire()
        self._arm_deadline()

    def _log_waiting(self) -> None:
        log_waiting(self.coordinator)
        self._call_later(self.config.log_interval_s, self._log_waiting)


#: What this server uses of grpc's internals.
_CYGRPC_NAMES = ("Server", "CompletionQueue", "CompletionType", "StatusCode", "SendInitialMetadataOperation",
                 "SendMessageOperation", "SendStatusFromServerOperation", "ReceiveMessageOperation",
                 "ReceiveCloseOnServerOperation")


def new_barrier_server(config: BarrierConfig | None = None,
                       coordinator: BarrierCoordinator | None = None) -> "CompletionQueueBarrierServer | BarrierServer":
    """The AM's coordinator server: this module's, or grpc.aio's
    :class:`~gangmaster.am.barrier.server.BarrierServer` where the grpcio installed lacks the
    internals it uses (the same fallback as the tasks' ``_DirectSession``)."""
    missing = [name for name in _CYGRPC_NAMES if not hasattr(cygrpc, name)]
    if missing:
        log.info("grpc lacks %s: the barrier coordinator runs on grpc.aio", ", ".join(missing))
        return BarrierServer(config, coordinator)
    return CompletionQueueBarrierServer(config, coordinator)


def _ignore(_event) -> None:
    """The completion of a batch nobody waits for (a status sent)."""
