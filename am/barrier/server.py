"""The barrier coordinator served over gRPC (``grpc.aio``): a thin layer over
:class:`gangmaster.am.barrier.coordinator.BarrierCoordinator`. The AM serves the same
service from one completion-queue thread instead
(:class:`gangmaster.am.barrier.cq_server.CompletionQueueBarrierServer`: about half the CPU per
host message); this one is for code that runs the coordinator inside its own event loop.

Two ways to run it:

- :class:`BarrierServer` — for the AM: runs its own event loop in a background
  thread; ``start()``, ``open_attempt(...)``, ``task_env(...)``, ``fail_attempt(...)``,
  ``close_attempt(...)``, ``stop()`` are plain synchronous calls, safe from any thread::

      server = BarrierServer(BarrierConfig.load())
      server.start()
      server.open_attempt("job", "gang", 1, [TaskInfo(0, "10.0.0.1", {"ssh": 22})])
      env = server.task_env("job", "gang", 1, 0)   # merge into the task's environment
      ...
      server.fail_attempt("job", "gang", 1, "task 3 exited with code 137")
      server.stop()

- :class:`AsyncBarrierServer` — the same inside an event loop the caller runs; its
  methods must be called from that loop's thread.

Tasks call ``Session``: one long-lived stream per task, one request and one reply
per epoch, each answered exactly as the unary ``Sync`` answers it (``Sync`` stays, for
older tasks). Why a stream: a grpc-python unary call costs both sides a call set-up
per epoch; a message on an open stream costs the server about a third of that, and
with 64 task processes sharing 2 cores that CPU is the round time (``gangmaster bench
barrier``, BENCHMARKS.md "Barriers").

Why the server is configured the way it is: every task holds a stream (and older
tasks a pending unary call per waiting ``barrier()``), and gRPC's server refuses calls
beyond about 1,000 pending requests by default (``grpc.server.max_pending_requests``,
hard limit 3,000), so both limits, and the streams per connection, are raised to
``max_pending_calls``. A waiting call is answered "pending" after the hold time the
task asked for (its log interval) and re-sent by the task; arrivals are idempotent,
so neither that nor a dropped call or stream can hang a barrier. Messages may be as
large as ``max_message_bytes`` (gRPC's default, 4 MiB, is far below an all_gather's
limit). The port is bound exclusively (no ``SO_REUSEPORT``: two coordinators on one
port would split the tasks between them), by :func:`gangmaster.protocol.grpc_security.listen`
as the RM's is; a fixed port in use is a :class:`ConfigError` naming ``barrier.port``.

What a caller sends is never trusted: a request that cannot be decoded is answered
INVALID_ARGUMENT (not UNKNOWN with a server traceback), one over the size limit
RESOURCE_EXHAUSTED (by gRPC), and everything else the coordinator refuses travels
as a typed error in the reply.
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import logging
import signal
import socket
import sys
import threading
from typing import Any, Callable, Sequence

import grpc
from google.protobuf.message import DecodeError

from gangmaster.am.barrier.coordinator import (ALL_GATHER, BARRIER, Arrival, BarrierCoordinator,
                                   CoordinatorStatistics, NotOpenYet, Released, TaskInfo)
from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.errors import BarrierError, BarrierInvalid
from gangmaster.am.barrier.task_context import attempt_env, own_env
from gangmaster.protocol.grpc_security import EXCLUSIVE_BIND, ListenError, PortInUse, listen
from gangmaster.protocol.proto import barrier_pb2 as pb
from gangmaster.conf.fields import ConfigError
from gangmaster.conf.limits import BARRIER_ENVELOPE_BYTES, BARRIER_MAX_MESSAGE_BYTES

__all__ = ["BarrierServer", "AsyncBarrierServer", "server_options", "error_to_proto"]

log = logging.getLogger("gangmaster.barrier")

#: The coordinator's name of each wire operation.
OPERATION_NAMES = {pb.BARRIER: BARRIER, pb.ALL_GATHER: ALL_GATHER}
#: The longest a waiting call is held before it is answered ``pending``, whatever it asked.
MAX_HOLD_S = 3600.0
_PENDING = object()
_PING_REPLY = pb.PingReply()


def error_to_proto(err: BarrierError) -> pb.Error:
    """The wire form of a coordinator error (the task side rebuilds the same class)."""
    out = pb.Error(code=err.code, message=err.message)
    if err.epoch is not None:
        out.has_epoch, out.epoch = True, err.epoch
    if err.arrived is not None and err.total is not None:
        out.has_progress, out.arrived, out.total = True, err.arrived, err.total
    out.missing.extend(err.missing)
    return out


def advertised_address(config: BarrierConfig, port: int) -> str:
    """The ``host:port`` tasks dial: ``barrier.advertise_host``, else the host listened on
    (this machine's name when that is every address)."""
    host = config.advertise_host
    if host is None:
        host = socket.getfqdn() if config.host in ("0.0.0.0", "::", "[::]") else config.host
    return f"{host}:{port}"


def log_waiting(coordinator: BarrierCoordinator) -> None:
    """The coordinator's periodic log: refusals not yet logged, and every epoch still waiting."""
    coordinator.log_refusals()
    for p in coordinator.waiting():
        shown = ", ".join(map(str, p.missing[:20])) + (" …" if len(p.missing) > 20 else "")
        log.info("%s barrier epoch %d: still waiting: %d/%d arrived after %.0f s; not yet: %s",
                 p.barrier, p.epoch, p.arrived, p.total, p.waiting_s, shown)


def released_reply(outcome: Released) -> bytes:
    """The serialised reply of a release, made once and shared by all its waiters (an
    all_gather reply holds every task's message: N waiters would copy N² messages). The
    release owns it (:attr:`Released.reply`): it goes when the coordinator lets the release
    go and its last waiter is answered, so a closed attempt's last gather, up to
    ``max_message_bytes``, is not held on to."""
    memo = outcome.reply
    if not memo:
        memo.append(pb.SyncReply(released=pb.Released(epoch=outcome.epoch, messages=outcome.messages))
                    .SerializeToString())
    return memo[0]


def _serialize(reply: Any) -> bytes:
    """A reply as sent: a message, or bytes already serialised (a release's, :func:`released_reply`)."""
    return reply if type(reply) is bytes else reply.SerializeToString()


def task_info_to_proto(info: TaskInfo) -> pb.TaskInfo:
    return pb.TaskInfo(index=info.index, host=info.host, ports=dict(info.ports), role=info.role,
                       role_index=info.role_index)


def server_options(max_pending_calls: int,
                   max_message_bytes: int = BARRIER_MAX_MESSAGE_BYTES) -> list[tuple[str, Any]]:
    """gRPC server arguments that let ``max_pending_calls`` calls wait at once, carry
    all_gathers of ``max_message_bytes``, and bind the port exclusively."""
    size = max_message_bytes + BARRIER_ENVELOPE_BYTES
    return [
        ("grpc.server.max_pending_requests", max_pending_calls),
        ("grpc.server.max_pending_requests_hard_limit", max_pending_calls),
        ("grpc.max_concurrent_streams", max_pending_calls),
        ("grpc.max_receive_message_length", size),
        ("grpc.max_send_message_length", size),
        EXCLUSIVE_BIND,
    ]


_SERVICE = pb.DESCRIPTOR.services_by_name["BarrierCoordinator"]


class Undecodable:
    """Stands in for a request that could not be decoded, so that its handler answers
    INVALID_ARGUMENT (grpc answers a deserializer's exception with UNKNOWN and logs a
    traceback per request: a log flood for any client sending garbage)."""

    __slots__ = ("detail",)

    def __init__(self, detail: str):
        self.detail = detail


def tolerant_parser(message_type: type) -> Callable[[bytes], Any]:
    """A request parser that gives an :class:`Undecodable` instead of raising."""
    name = message_type.DESCRIPTOR.full_name

    def parse(data: bytes):
        try:
            return message_type.FromString(data)
        except DecodeError as exc:
            return Undecodable(f"the request is not a valid {name} ({exc})")
    return parse


def _add_servicer(servicer: "_Servicer", server: grpc.aio.Server) -> None:
    """Register ``servicer`` for every method of the service, as the generated
    ``add_BarrierCoordinatorServicer_to_server`` does but with tolerant request parsers."""
    handlers = {}
    for method in _SERVICE.methods:
        request_type = getattr(pb, method.input_type.name)
        if method.client_streaming != method.server_streaming:
            raise TypeError(f"{method.full_name}: only unary-unary and stream-stream methods are served")
        make = (grpc.stream_stream_rpc_method_handler if method.client_streaming
                else grpc.unary_unary_rpc_method_handler)
        handlers[method.name] = make(getattr(servicer, method.name),
                                     request_deserializer=tolerant_parser(request_type),
                                     response_serializer=_serialize)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE.full_name, handlers),))
    server.add_registered_method_handlers(_SERVICE.full_name, handlers)


async def _refuse_undecodable(request: object, context) -> None:
    if isinstance(request, Undecodable):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.detail)


async def _or_come_back(reply, context):
    """The awaited ``reply``; but a call naming an attempt the AM has not reopened yet while
    it takes over (:class:`~gangmaster.am.barrier.coordinator.NotOpenYet`) ends UNAVAILABLE, which
    the task retries as any transport trouble, instead of hearing a refusal."""
    try:
        return await reply
    except NotOpenYet as exc:
        await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))


class _Servicer:
    def __init__(self, owner: "AsyncBarrierServer"):
        self.owner = owner
        self.core = owner.coordinator

    async def Sync(self, request: pb.SyncRequest, context) -> pb.SyncReply:
        await _refuse_undecodable(request, context)
        return await _or_come_back(self.answer(request), context)

    async def Session(self, requests, context):
        """One task's stream of Sync calls: each request is answered as :meth:`Sync`
        answers it, in order. A cancelled stream (the task went away, or re-opens it)
        cancels the waiting answer, which withdraws its waiter."""
        async for request in requests:
            await _refuse_undecodable(request, context)
            yield await _or_come_back(self.answer(request), context)

    async def HostSession(self, requests, context):
        """One host leader's stream: each request speaks for the host's tasks at one epoch
        (:meth:`BarrierCoordinator.arrive_host`) and is answered as :meth:`Session` answers a
        task's request."""
        async for request in requests:
            await _refuse_undecodable(request, context)
            yield await _or_come_back(self.answer_host(request), context)

    async def answer(self, request: pb.SyncRequest) -> pb.SyncReply:
        """The reply to one barrier()/all_gather() call: released, pending, or an error."""
        c = request.caller
        if request.HasField("leader_lost"):
            try:
                self.core.leader_lost(c.job, c.gang, c.attempt, c.token, c.task, request.epoch, request.leader_lost)
            except BarrierError as err:
                return pb.SyncReply(error=error_to_proto(err))
        operation = OPERATION_NAMES.get(request.operation, f"operation #{request.operation}")
        arrival = Arrival(c.job, c.gang, c.attempt, c.token, c.task, request.epoch, operation,
                          request.message, request.unsent_size)
        return await self._wait(c, request.hold_ms, lambda settle: self.core.arrive(arrival, settle))

    async def answer_host(self, request: pb.HostSyncRequest) -> pb.SyncReply:
        """The reply to a host leader's message: as :meth:`answer`'s, for all its tasks."""
        c = request.caller
        tasks = list(request.tasks)
        n = len(tasks)
        operations = [OPERATION_NAMES.get(o, f"operation #{o}") for o in request.operations]
        messages = list(request.messages) or [b""] * n
        unsent = list(request.unsent_sizes) or [0] * n
        if not len(operations) == len(messages) == len(unsent) == n:
            return pb.SyncReply(error=pb.Error(code=BarrierInvalid.code, message=(
                f"a host message of {n} tasks with {len(operations)} operations, {len(request.messages)} "
                f"messages and {len(request.unsent_sizes)} unsent sizes; expected one of each per task "
                "(or no messages, no unsent sizes)")))
        arrivals = list(zip(tasks, operations, messages, unsent))
        return await self._wait(c, request.hold_ms, lambda settle: self.core.arrive_host(
            c.job, c.gang, c.attempt, c.token, c.task, request.epoch, arrivals, settle))

    async def _wait(self, c: pb.Caller, hold_ms: int, arrive: Callable) -> pb.SyncReply:
        """Arrive (``arrive(settle)`` returns the waiter) and wait for the outcome, at most the
        hold time: released, an error, or pending with the epoch's progress."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(outcome: object) -> None:
            if not future.done():
                future.set_result(outcome)

        try:
            waiter = arrive(settle)
        except BarrierError as err:
            return pb.SyncReply(error=error_to_proto(err))
        if not future.done():
            self.owner.arm_timer()
            hold = min(hold_ms / 1000.0 or self.owner.config.log_interval_s, MAX_HOLD_S)

            def hold_over() -> None:
                self.core.withdraw(waiter)
                settle(_PENDING)

            handle = loop.call_later(hold, hold_over)
            try:
                await future
            except asyncio.CancelledError:
                self.core.withdraw(waiter)
                raise
            finally:
                handle.cancel()
        outcome = future.result()
        if isinstance(outcome, Released):
            return released_reply(outcome)
        if isinstance(outcome, BarrierError):
            return pb.SyncReply(error=error_to_proto(outcome))
        try:
            p = self.core.progress(c.job, c.gang, c.attempt, c.token, c.task)
        except BarrierError as err:
            return pb.SyncReply(error=error_to_proto(err))
        return pb.SyncReply(pending=pb.Pending(epoch=p.epoch, arrived=p.arrived, total=p.total,
                                               waiting_s=p.waiting_s))

    async def GetTaskInfos(self, request: pb.TaskInfosRequest, context) -> pb.TaskInfosReply:
        await _refuse_undecodable(request, context)
        return await _or_come_back(self._task_infos(request.caller), context)

    async def _task_infos(self, c: pb.Caller) -> pb.TaskInfosReply:
        try:
            infos = self.core.task_infos(c.job, c.gang, c.attempt, c.token, c.task)
        except BarrierError as err:
            return pb.TaskInfosReply(error=error_to_proto(err))
        return pb.TaskInfosReply(infos=pb.TaskInfos(tasks=[task_info_to_proto(t) for t in infos]))

    async def Ping(self, request: pb.PingRequest, context) -> pb.PingReply:
        await _refuse_undecodable(request, context)
        return _PING_REPLY

    async def PingSession(self, requests, context):
        async for request in requests:
            await _refuse_undecodable(request, context)
            yield _PING_REPLY


def listen_as_configured(server: Any, config: BarrierConfig) -> int:
    """Bind ``server`` (grpc.aio's, or anything with its ``add_*_port`` methods) to the
    configured address, with TLS when ``config`` has it: the port, or a :class:`ConfigError`
    naming the setting (unusable TLS files, ``barrier.port`` in use, ``barrier.host`` not
    this machine's)."""
    credentials = None
    if config.tls:
        cert, key = config.read_tls()
        credentials = grpc.ssl_server_credentials([(key, cert)])
    try:
        return listen(server, config.host, config.port, credentials)
    except PortInUse as exc:
        raise ConfigError("barrier coordinator", "barrier.port",
                          f"a port no other process listens on (port {exc.port} is in use on {exc.host})") from None
    except ListenError as exc:
        raise ConfigError("barrier coordinator", "barrier.host",
                          f"an address this machine can listen on ({exc})") from None


class CoordinatorFront:
    """What a coordinator server offers the AM beside serving (one piece for
    :class:`AsyncBarrierServer` and the completion-queue server,
    :mod:`~gangmaster.am.barrier.cq_server`): a gang attempt's barrier opened, failed and
    closed, and the environment its tasks need. A subclass gives ``address``."""

    config: BarrierConfig
    coordinator: BarrierCoordinator

    def __init__(self, config: BarrierConfig | None = None, coordinator: BarrierCoordinator | None = None):
        self.config = config or BarrierConfig()
        self.coordinator = coordinator or BarrierCoordinator(default_timeout_s=self.config.timeout_s,
                                                             max_message_bytes=self.config.max_message_bytes)

    @property
    def address(self) -> str:
        raise NotImplementedError

    def open_attempt(self, job: str, gang: str, attempt: int, tasks: Sequence[TaskInfo],
                     timeout_s: float | None = None, token: str | None = None) -> str:
        """Open the barrier of a gang attempt; returns the attempt's secret token."""
        return self.coordinator.open_attempt(job, gang, attempt, tasks, token=token, timeout_s=timeout_s)

    def fail_attempt(self, job: str, gang: str, attempt: int, reason: str) -> int:
        """Fail every waiter of the attempt now (the gang is being restarted)."""
        return self.coordinator.fail_attempt(job, gang, attempt, reason)

    def close_attempt(self, job: str, gang: str, attempt: int) -> int:
        """The attempt finished; later calls from it are refused as stale."""
        return self.coordinator.close_attempt(job, gang, attempt)

    def task_env(self, job: str, gang: str, attempt: int, index: int) -> dict[str, str]:
        """The environment variables task ``index`` of an open attempt needs for
        :meth:`BarrierTaskContext.get` (``KeyError`` when the attempt is not open)."""
        token, tasks = self.coordinator.attempt_tasks(job, gang, attempt)
        task = tasks[index]
        return {**self.attempt_env(job, gang, attempt, token, len(tasks)),
                **own_env(task.index, task.role, task.role_index)}

    def attempt_env(self, job: str, gang: str, attempt: int, token: str, count: int) -> dict[str, str]:
        """The variables every task of an attempt opened with ``token`` for ``count`` tasks
        has alike (:meth:`task_env` less the task's own)."""
        return attempt_env(self.address, job, gang, attempt, token, count,
                           tls_ca_file=self.config.tls_cert_file,
                           log_interval_s=self.config.log_interval_s,
                           retry_give_up_s=self.config.retry_give_up_s,
                           max_message_bytes=self.coordinator.max_message_bytes)

    def statistics(self) -> CoordinatorStatistics:
        return self.coordinator.statistics()

    def waiting_tasks(self, job: str) -> int:
        """How many tasks of ``job`` wait here now (:meth:`BarrierCoordinator.waiting_tasks`)."""
        return self.coordinator.waiting_tasks(job)


class AsyncBarrierServer(CoordinatorFront):
    """The coordinator's gRPC server in the caller's event loop.

    All methods except the coroutines ``start``/``stop`` are synchronous and must be
    called from the loop's thread (the coordinator's callbacks resolve asyncio futures)."""

    def __init__(self, config: BarrierConfig | None = None, coordinator: BarrierCoordinator | None = None):
        super().__init__(config, coordinator)
        self._server: grpc.aio.Server | None = None
        self._port: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._logger: asyncio.Task | None = None

    @property
    def address(self) -> str:
        """``host:port`` tasks dial."""
        if self._port is None:
            raise RuntimeError("the barrier server is not started")
        return advertised_address(self.config, self._port)

    async def start(self) -> str:
        """Listen and serve; :class:`ConfigError` for unusable TLS files or a port in use."""
        config = self.config
        server = grpc.aio.server(options=server_options(config.max_pending_calls, config.max_message_bytes))
        _add_servicer(_Servicer(self), server)
        port = listen_as_configured(server, config)
        await server.start()
        self._server, self._port = server, port
        self._logger = asyncio.get_running_loop().create_task(self._log_waiting())
        log.info("barrier coordinator listening on %s (%s)", self.address,
                 "TLS" if self.config.tls else "plaintext")
        return self.address

    async def stop(self, grace: float | None = 1.0) -> None:
        if self._logger is not None:
            self._logger.cancel()
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            await self._server.stop(grace)
        self._server = None

    # ------------------------------------------------------------------- time
    def arm_timer(self) -> None:
        """Make sure a timer fires at the coordinator's next epoch deadline."""
        deadline = self.coordinator.next_deadline()
        if deadline is None or (self._timer_at is not None and self._timer_at <= deadline):
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = deadline
        self._timer = loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        self.coordinator.expire()
        self.arm_timer()

    async def _log_waiting(self) -> None:
        while True:
            await asyncio.sleep(self.config.log_interval_s)
            log_waiting(self.coordinator)


async def _finish_tasks(timeout_s: float = 5.0) -> None:
    """Let the calls gRPC cancelled when the server stopped finish before the loop stops
    (a loop stopped under them reports "Task was destroyed but it is pending")."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if others:
        await asyncio.wait(others, timeout=timeout_s)


class BarrierServer:
    """:class:`AsyncBarrierServer` on its own event loop in a background thread, with a
    synchronous API for the AM (safe from any thread)."""

    def __init__(self, config: BarrierConfig | None = None, coordinator: BarrierCoordinator | None = None):
        self.inner = AsyncBarrierServer(config, coordinator)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def config(self) -> BarrierConfig:
        return self.inner.config

    @property
    def coordinator(self) -> BarrierCoordinator:
        return self.inner.coordinator

    @property
    def address(self) -> str:
        return self.inner.address

    def start(self, timeout_s: float = 30.0) -> str:
        """Start serving; returns the ``host:port`` tasks dial."""
        if self._thread is not None:
            raise RuntimeError("the barrier server is already started")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="barrier-server", daemon=True)
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self.inner.start(), self._loop).result(timeout_s)
        except BaseException:
            self._shutdown_loop()
            raise

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving (waiting calls are cancelled after ``grace`` seconds) and end the thread."""
        if self._loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.inner.stop(grace), self._loop).result((grace or 0) + 30)
            asyncio.run_coroutine_threadsafe(_finish_tasks(), self._loop).result(30)
        finally:
            self._shutdown_loop()

    def _shutdown_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(10)
        if not loop.is_running():
            loop.close()

    def __enter__(self) -> "BarrierServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _call(self, fn: Callable, *args, **kwargs):
        """Run ``fn`` in the server's loop thread and return its result (directly, when
        the server is not started: there is no other thread to race with)."""
        if self._loop is None or threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        done: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the caller's thread
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result()

    def open_attempt(self, job: str, gang: str, attempt: int, tasks: Sequence[TaskInfo],
                     timeout_s: float | None = None, token: str | None = None) -> str:
        """Open the barrier of a gang attempt (superseding an older open attempt of the
        gang, whose waiters fail at once); returns the attempt's secret token."""
        return self._call(self.inner.open_attempt, job, gang, attempt, tasks, timeout_s, token)

    def fail_attempt(self, job: str, gang: str, attempt: int, reason: str) -> int:
        """Fail every waiter of the attempt now with ``AttemptFailed``; returns how many."""
        return self._call(self.inner.fail_attempt, job, gang, attempt, reason)

    def close_attempt(self, job: str, gang: str, attempt: int) -> int:
        return self._call(self.inner.close_attempt, job, gang, attempt)

    def task_env(self, job: str, gang: str, attempt: int, index: int) -> dict[str, str]:
        return self._call(self.inner.task_env, job, gang, attempt, index)

    def attempt_env(self, job: str, gang: str, attempt: int, token: str, count: int) -> dict[str, str]:
        return self.inner.attempt_env(job, gang, attempt, token, count)   # reads only what never changes once started

    def statistics(self) -> CoordinatorStatistics:
        return self._call(self.inner.statistics)

    def waiting_tasks(self, job: str) -> int:
        return self.inner.waiting_tasks(job)   # the coordinator is thread-safe


def main(argv: list[str] | None = None) -> int:
    """Serve one attempt standalone (manual tests): prints the address and the env of task 0."""
    parser = argparse.ArgumentParser(prog="python -m gangmaster.am.barrier.server",
                                     description="Run a barrier coordinator for one gang attempt of "
                                                 "N tasks on this machine, until interrupted.")
    parser.add_argument("--tasks", type=int, required=True, help="N, the tasks of the gang")
    parser.add_argument("--job", default="job")
    parser.add_argument("--gang", default="gang")
    parser.add_argument("--attempt", type=int, default=1)
    parser.add_argument("--config", help="override file for conf/defaults.yaml (barrier: section)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    server = BarrierServer(BarrierConfig.load(args.config))
    server.start()
    host = server.address.rsplit(":", 1)[0]
    server.open_attempt(args.job, args.gang, args.attempt,
                        [TaskInfo(i, host) for i in range(args.tasks)])
    print(json.dumps(server.task_env(args.job, args.gang, args.attempt, 0)), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
