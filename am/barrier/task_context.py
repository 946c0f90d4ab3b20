"""The task side of barriers: :class:`BarrierTaskContext`.

A task of a gang (an ordinary program; no asyncio needed) does::

    from gangmaster.am.barrier.task_context import BarrierTaskContext

    ctx = BarrierTaskContext.get()          # reads the GANGMASTER_* environment
    ctx.barrier()                           # wait until every task of the gang is here
    hosts = [t.host for t in ctx.get_task_infos()]   # by task index
    values = ctx.all_gather(str(ctx.task_index()))   # every task's message, by index

Every error the coordinator raises arrives here as the same typed exception with
the same text (``gangmaster.am.barrier.errors``): ``BarrierTimeout`` names the
tasks that never arrived, ``AttemptFailed``/``StaleAttempt`` mean the gang is being
restarted as a new attempt, ``BarrierMismatch`` that tasks made different calls.
Calls travel on one ``Session`` stream per task (opened on first use, kept for the
task's life: cheaper per epoch than a unary call), driven by the calling thread
itself (:class:`_DirectSession`; no helper threads but a once-a-second watchdog).
Transport trouble (UNAVAILABLE,
CANCELLED, RESOURCE_EXHAUSTED, the stream ending, a reply overdue by
``reply_grace_s`` past the hold time) closes the stream; the task opens a new one and
re-sends its request, with backoff, for up to ``retry_give_up_s``: arrivals are
idempotent by (task, epoch), so a re-sent call is never counted twice. A message over
gRPC's size limit is not transport trouble and is never retried: an all_gather
message over ``max_message_bytes`` is not sent at all — the task tells the coordinator
its size, and the gather fails at once on every task with :class:`MessageTooLarge`. A coordinator
without ``Session`` (UNIMPLEMENTED) is called with unary ``Sync`` instead. While it waits, the task logs "waiting for barrier (epoch e): n/N
arrived after t s" every log interval.

The tasks of one host meet at a local leader first (:mod:`gangmaster.am.barrier.local`:
one of them, found through an abstract Unix socket named from the token), which sends the
coordinator one message per epoch for all of them; the calls answer exactly as above. A
task that loses its leader tells the coordinator, which fails the attempt naming it.

The environment is the contract with the AM; :func:`task_env` builds it (the attempt's
part, :func:`attempt_env`, and the task's own, :func:`own_env`).
"""
from __future__ import annotations

import functools
import logging
import os
import queue
import threading
import time
from typing import Iterator, Mapping

import grpc

from gangmaster.am.barrier.coordinator import FRAMING_BYTES, TaskInfo
from gangmaster.am.barrier.local import (ENV_LOCAL_GROUP, ENV_TREE, HOST_SESSION_METHOD, HostLeader,
                                         LeaderLost, LocalSession, OwnSession, join, rendezvous_name)
from gangmaster.am.barrier.errors import (BarrierError, BarrierId, CoordinatorUnavailable,
                                          MessageTooLarge, error_from_code)
from gangmaster.protocol.grpc_security import read_certificates
from gangmaster.conf.limits import BARRIER_ENVELOPE_BYTES, BARRIER_MAX_MESSAGE_BYTES
from gangmaster.protocol.proto import barrier_pb2 as pb
from gangmaster.protocol.proto import barrier_pb2_grpc as pb_grpc

__all__ = ["BarrierTaskContext", "TaskInfo", "task_env", "attempt_env", "plain_attempt_env", "own_env",
           "REQUIRED_ENV", "ENV_ADDRESS", "ENV_TOKEN",
           "ENV_JOB", "ENV_GANG", "ENV_ATTEMPT", "ENV_TASK_INDEX", "ENV_TASK_COUNT", "ENV_ROLE",
           "ENV_ROLE_INDEX", "ENV_PAI_ROLE", "ENV_PAI_ROLE_INDEX", "ENV_TLS_CA", "ENV_LOG_INTERVAL",
           "ENV_RETRY_GIVE_UP", "ENV_MAX_MESSAGE", "ENV_LOCAL_GROUP", "ENV_TREE", "ENV_PREEMPTION_NOTICE", "channel_options",
           "ENV_GRPC_EXPERIMENTS", "TASK_GRPC_EXPERIMENTS"]

log = logging.getLogger("gangmaster.barrier.task")

# ------------------------------------------------------------ the environment
#: ``host:port`` of the barrier coordinator.
ENV_ADDRESS = "GANGMASTER_BARRIER_ADDRESS"
#: The attempt's secret token (calls without it are refused).
ENV_TOKEN = "GANGMASTER_BARRIER_TOKEN"
ENV_JOB = "GANGMASTER_JOB"
ENV_GANG = "GANGMASTER_GANG"
ENV_ATTEMPT = "GANGMASTER_ATTEMPT"
#: The task's index within the gang, 0..N-1 (its rank; Spark's partition id).
ENV_TASK_INDEX = "GANGMASTER_TASK_INDEX"
#: Where the NodeManager leaves a preemption notice for the task (its deadline, in
#: seconds since the epoch), set by a NodeManager that can deliver one: see preemption_notice()
ENV_PREEMPTION_NOTICE = "GANGMASTER_PREEMPTION_NOTICE"
#: N, the number of tasks in the gang.
ENV_TASK_COUNT = "GANGMASTER_TASK_COUNT"
ENV_ROLE = "GANGMASTER_TASK_ROLE"
#: The task's index within its role (OpenPAI's name is set too, for its programs).
ENV_ROLE_INDEX = "GANGMASTER_TASK_ROLE_INDEX"
ENV_PAI_ROLE = "PAI_CURRENT_TASK_ROLE_NAME"
ENV_PAI_ROLE_INDEX = "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"
#: PEM file to verify the coordinator's TLS certificate with (unset: plaintext).
ENV_TLS_CA = "GANGMASTER_BARRIER_TLS_CA"
#: Seconds between "waiting for barrier" logs (optional).
ENV_LOG_INTERVAL = "GANGMASTER_BARRIER_LOG_INTERVAL_S"
#: Seconds to keep retrying an unreachable coordinator (optional).
ENV_RETRY_GIVE_UP = "GANGMASTER_BARRIER_RETRY_GIVE_UP_S"
#: The coordinator's ``barrier.max_message_bytes`` (optional; default the documented limit).
ENV_MAX_MESSAGE = "GANGMASTER_BARRIER_MAX_MESSAGE_BYTES"

#: gRPC's own variable (read once, when a process first loads gRPC, so it must be in the
#: task's environment at start): :func:`attempt_env` sets it to :data:`TASK_GRPC_EXPERIMENTS`.
ENV_GRPC_EXPERIMENTS = "GRPC_EXPERIMENTS"
#: A task's gRPC client without the EventEngine transport. Why: with it (grpcio's default), a
#: reply is read from the socket by EventEngine threads (a poller and a worker), which then
#: complete the call's queue and wake the task thread waiting on it: per round a host leader
#: had ~3.6 context switches on those threads of its ~7.5 (BENCHMARKS.md, session 16). Without
#: it (gRPC's older transport, which it keeps), the thread blocked on a ``_DirectSession``
#: stream polls the socket and reads its reply itself, as grpc's blocking calls do: none
#: (session 17). The wire is the same HTTP/2; the coordinator's server is not affected.
TASK_GRPC_EXPERIMENTS = "-event_engine_client"

#: The longest a waiting call is held before the task hears "still waiting" and re-sends.
MAX_HOLD_S = 3600.0

REQUIRED_ENV = (ENV_ADDRESS, ENV_TOKEN, ENV_JOB, ENV_GANG, ENV_ATTEMPT, ENV_TASK_INDEX, ENV_TASK_COUNT)

#: Transport failures that are retried (the call is re-sent; arrivals are idempotent).
RETRIED_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                           grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED})


def channel_options(max_message_bytes: int = BARRIER_MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """gRPC channel arguments of a task: no transparent retries (the task retries itself,
    idempotently), and messages as large as the coordinator's gathers (gRPC's default,
    4 MiB, is far below them)."""
    size = max_message_bytes + BARRIER_ENVELOPE_BYTES
    return [("grpc.enable_retries", 0), ("grpc.max_receive_message_length", size),
            ("grpc.max_send_message_length", size)]


def task_env(address: str, job: str, gang: str, attempt: int, token: str, task: TaskInfo,
             count: int, tls_ca_file: str | None = None, log_interval_s: float | None = None,
             retry_give_up_s: float | None = None, max_message_bytes: int | None = None) -> dict[str, str]:
    """The environment variables a task needs for :meth:`BarrierTaskContext.get`: its
    attempt's (:func:`attempt_env`) and its own (:func:`own_env`)."""
    return {**attempt_env(address, job, gang, attempt, token, count, tls_ca_file, log_interval_s, retry_give_up_s,
                          max_message_bytes), **own_env(task.index, task.role, task.role_index)}


def attempt_env(address: str, job: str, gang: str, attempt: int, token: str, count: int,
                tls_ca_file: str | None = None, log_interval_s: float | None = None,
                retry_give_up_s: float | None = None, max_message_bytes: int | None = None) -> dict[str, str]:
    """The variables every task of a gang attempt has alike: where its coordinator is and
    how to talk to it (gRPC's client transport too, :data:`TASK_GRPC_EXPERIMENTS`), the
    attempt's token, names and number of tasks."""
    env = plain_attempt_env(address, job, gang, attempt, token, count)
    env[ENV_GRPC_EXPERIMENTS] = TASK_GRPC_EXPERIMENTS
    if tls_ca_file:
        env[ENV_TLS_CA] = str(tls_ca_file)
    if log_interval_s is not None:
        env[ENV_LOG_INTERVAL] = f"{log_interval_s:g}"
    if retry_give_up_s is not None:
        env[ENV_RETRY_GIVE_UP] = f"{retry_give_up_s:g}"
    if max_message_bytes is not None:
        env[ENV_MAX_MESSAGE] = str(max_message_bytes)
    return env


def plain_attempt_env(address: str, job: str, gang: str, attempt: int, token: str, count: int) -> dict[str, str]:
    """:func:`attempt_env` of a coordinator with none of its options set (the in-process one's)."""
    return {ENV_ADDRESS: address, ENV_TOKEN: token, ENV_JOB: job, ENV_GANG: gang, ENV_ATTEMPT: str(attempt),
            ENV_TASK_COUNT: str(count)}


@functools.lru_cache(maxsize=4096)
def own_env(index: int, role: str, role_index: int) -> dict[str, str]:
    """The variables that say which task of its gang a task is: its index in the gang, its
    role and its index in the role. One mapping per task of a shape (a replay's tasks are
    mostly task 0 of a few role names); read only: merge it."""
    text = str(role_index)
    return {ENV_TASK_INDEX: str(index), ENV_ROLE: role, ENV_ROLE_INDEX: text, ENV_PAI_ROLE: role,
            ENV_PAI_ROLE_INDEX: text}


def _env_int(env: Mapping[str, str], name: str) -> int:
    value = env[name]
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}: expected an integer, got {value!r}") from None


def _env_optional_int(env: Mapping[str, str], name: str, default: int) -> int:
    return _env_int(env, name) if env.get(name) else default


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    if not env.get(name):
        return default
    try:
        return float(env[name])
    except ValueError:
        raise ValueError(f"environment variable {name}: expected seconds, got {env[name]!r}") from None


def error_from_proto(err: pb.Error, barrier: BarrierId) -> BarrierError:
    """The coordinator's error, rebuilt as the same class with the same text."""
    return error_from_code(
        err.code, err.message, barrier=barrier,
        epoch=err.epoch if err.has_epoch else None,
        arrived=err.arrived if err.has_progress else None,
        total=err.total if err.has_progress else None,
        missing=tuple(err.missing))


def task_info_from_proto(t: pb.TaskInfo) -> TaskInfo:
    return TaskInfo(t.index, t.host, dict(t.ports), t.role, t.role_index)


_SESSION_METHOD = "/gangmaster.barrier.BarrierCoordinator/Session"


class _StreamBroken(Exception):
    """A Session stream ended: ``code`` is why (a coordinator that ended it cleanly
    reads as UNAVAILABLE: the task re-opens it like any dropped stream)."""

    def __init__(self, code: grpc.StatusCode | None, details: str):
        super().__init__(details)
        self._code = grpc.StatusCode.UNAVAILABLE if code in (None, grpc.StatusCode.OK) else code
        self._details = details or "the coordinator ended the session stream"

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class _DirectSession:
    """One open ``Session`` stream, driven by the calling thread alone.

    Why not grpc's public streaming API: its synchronous bidi streams move every
    message through a request iterator on a grpc thread and a channel-wide polling
    thread — three Python threads handing the GIL around per epoch, ~0.25 ms of CPU
    per round trip with 64 task processes on 2 cores, against ~0.11 ms here (the
    BENCHMARKS.md "Barriers" section). This is what grpc's own blocking calls do: a
    *segregated* call with its own completion queue, polled by the caller. It uses
    grpc internals (``Channel._channel``, ``grpc._cython.cygrpc``), which the pinned
    grpcio version fixes; where they are missing, :class:`_ThreadedSession` is used.
    The waiting thread reads the socket itself only on gRPC's older client transport
    (:data:`TASK_GRPC_EXPERIMENTS`, in every task's environment); on the EventEngine's,
    its threads read it and wake this one.
    """

    _OPEN, _STATUS, _EXCHANGE = "open", "status", "exchange"

    def __init__(self, channel: grpc.Channel, method: str = _SESSION_METHOD,
                 reply_type: type = pb.SyncReply):
        from grpc._cython import cygrpc

        self._cygrpc, self._reply_type = cygrpc, reply_type
        self._status: tuple[grpc.StatusCode | None, str] | None = None
        self._first = True
        #: a request sent whose reply is not taken yet; with the status, changed under the lock
        #: (start and wait may be called from two threads: the host leader's)
        self._in_flight = False
        self._lock = threading.Lock()
        self._call = channel._channel.segregated_call(  # type: ignore[attr-defined]
            cygrpc.PropagationConstants.GRPC_PROPAGATE_DEFAULTS, method.encode(), None, None,
            None, None,
            (((cygrpc.SendInitialMetadataOperation(None, 0),), self._OPEN),
             ((cygrpc.ReceiveStatusOnClientOperation(0),), self._STATUS)),
            None, None)

    def exchange(self, request):
        """Send one request and wait for its reply; :class:`_StreamBroken` when the
        stream ended (cancelled, unreachable, closed by the coordinator)."""
        self.start(request)
        return self.wait()

    def start(self, request) -> None:
        """Send ``request`` without waiting (any thread; one request at a time): its reply
        is :meth:`wait`'s."""
        cygrpc = self._cygrpc
        operations = (cygrpc.SendMessageOperation(request.SerializeToString(), 0),
                      cygrpc.ReceiveMessageOperation(0))
        with self._lock:
            if self._first:
                operations += (cygrpc.ReceiveInitialMetadataOperation(0),)
            self._in_flight = self._status is None and self._call.operate(operations, self._EXCHANGE)
            if self._in_flight:
                self._first = False

    def wait(self):
        """The reply to the request :meth:`start` sent (which may come after this is
        called); :class:`_StreamBroken` when the stream ended, with or without a request
        in flight."""
        while True:
            with self._lock:
                if self._status is not None and not self._in_flight:   # ended, and no reply to come
                    break
            event = self._call.next_event()
            if event.tag == self._EXCHANGE:
                with self._lock:
                    self._in_flight = False
                reply = event.batch_operations[1].message()
                if reply is not None:
                    return self._reply_type.FromString(reply)
                break
            with self._lock:
                self._note(event)
        while self._status is None:  # the exchange failed: the call's status says why
            self._note(self._call.next_event())
        raise _StreamBroken(*self._status)

    def _note(self, event) -> None:
        if event.tag == self._STATUS:
            status = event.batch_operations[0]
            code = grpc._common.CYGRPC_STATUS_CODE_TO_STATUS_CODE.get(status.code())  # type: ignore[attr-defined]
            details = status.details()
            self._status = (code, details.decode("utf-8", "replace") if isinstance(details, bytes) else details)

    def cancel(self) -> None:
        """End the stream (from any thread): a waiting :meth:`exchange` fails with CANCELLED."""
        self._call.cancel(self._cygrpc.StatusCode.cancelled, "cancelled by the task")


class _ThreadedSession:
    """One open ``Session`` stream through grpc's public API (the fallback of
    :class:`_DirectSession`): requests go through a queue that grpc sends from on its
    own thread."""

    _END = object()

    def __init__(self, channel: grpc.Channel, method: str = _SESSION_METHOD):
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        method = channel.stream_stream(method, request_serializer=lambda r: r.SerializeToString(),
                                       response_deserializer=pb.SyncReply.FromString)
        self._replies: Iterator[pb.SyncReply] = method(iter(self._requests.get, self._END))

    def exchange(self, request: pb.SyncRequest) -> pb.SyncReply:
        self.start(request)
        return self.wait()

    def start(self, request: pb.SyncRequest) -> None:
        self._requests.put(request)

    def wait(self) -> pb.SyncReply:
        try:
            return next(self._replies)
        except StopIteration:
            raise _StreamBroken(None, "the coordinator ended the session stream") from None
        except grpc.RpcError as exc:
            raise _StreamBroken(exc.code(), exc.details()) from exc

    def cancel(self) -> None:
        self._requests.put(self._END)
        self._replies.cancel()


def _open_session(channel: grpc.Channel,
                  method: str = _SESSION_METHOD) -> "_DirectSession | _ThreadedSession":
    try:
        return _DirectSession(channel, method)
    except (AttributeError, ImportError, TypeError) as exc:  # grpc's internals moved
        log.debug("single-threaded session unavailable (%s); using grpc's streaming API", exc)
        return _ThreadedSession(channel, method)


class BarrierTaskContext:
    """One task's handle on its gang's barrier. Synchronous; one call at a time."""

    _current: "BarrierTaskContext | None" = None
    _current_lock = threading.Lock()

    def __init__(self, address: str, token: str, job: str, gang: str, attempt: int, index: int,
                 count: int, tls_ca_file: str | None = None, log_interval_s: float = 60.0,
                 retry_give_up_s: float = 300.0, max_message_bytes: int = BARRIER_MAX_MESSAGE_BYTES,
                 tree: bool = True, local_group: str = "", preemption_notice_file: str | None = None):
        if not 0 <= index < count:
            raise ValueError(f"task index {index} is outside 0..{count - 1}")
        self.max_message_bytes = max_message_bytes
        self._notice_file = preemption_notice_file
        self.address, self.barrier_id = address, BarrierId(job, gang, attempt)
        self._caller = pb.Caller(job=job, gang=gang, attempt=attempt, token=token, task=index)
        self._index, self._count = index, count
        self.log_interval_s, self.retry_give_up_s = log_interval_s, retry_give_up_s
        self._epoch = 0
        self._retries = 0  # transport failures retried so far (the benchmark reports them)
        #: A reply overdue by this much past the hold time counts as lost: the stream is
        #: cancelled and the request re-sent on a new one.
        self.reply_grace_s = 30.0
        self._session: _DirectSession | _ThreadedSession | None = None
        self._sessions_supported = True  # False after an UNIMPLEMENTED: unary Sync calls
        self._reply_due: float | None = None  # monotonic time; read by the watchdog
        self._closed = threading.Event()
        self._watchdog: threading.Thread | None = None
        #: the host's leader (barrier_local): tried at the first call; None when not joined
        self._tree, self._local_group = tree, local_group
        self._local: LocalSession | OwnSession | None = None
        self._leader: HostLeader | None = None   # when this task leads its host
        options = channel_options(max_message_bytes)
        if tls_ca_file:
            ca = read_certificates(tls_ca_file, f"environment variable {ENV_TLS_CA}")
            creds = grpc.ssl_channel_credentials(root_certificates=ca)
            self._channel = grpc.secure_channel(address, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self._stub = pb_grpc.BarrierCoordinatorStub(self._channel)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "BarrierTaskContext":
        """A new context from ``env`` (default ``os.environ``); a missing variable is named."""
        env = os.environ if env is None else env
        missing = [name for name in REQUIRED_ENV if not env.get(name)]
        if missing:
            raise RuntimeError("not running as a gangmaster barrier task: environment variable(s) "
                               f"{', '.join(missing)} not set (the AM sets them; see "
                               "gangmaster.am.barrier.task_context.task_env)")
        return cls(env[ENV_ADDRESS], env[ENV_TOKEN], env[ENV_JOB], env[ENV_GANG],
                   _env_int(env, ENV_ATTEMPT), _env_int(env, ENV_TASK_INDEX),
                   _env_int(env, ENV_TASK_COUNT), tls_ca_file=env.get(ENV_TLS_CA) or None,
                   log_interval_s=_env_float(env, ENV_LOG_INTERVAL, 60.0),
                   retry_give_up_s=_env_float(env, ENV_RETRY_GIVE_UP, 300.0),
                   max_message_bytes=_env_optional_int(env, ENV_MAX_MESSAGE, BARRIER_MAX_MESSAGE_BYTES),
                   tree=env.get(ENV_TREE, "1") != "0", local_group=env.get(ENV_LOCAL_GROUP, ""),
                   preemption_notice_file=env.get(ENV_PREEMPTION_NOTICE) or None)

    @classmethod
    def get(cls) -> "BarrierTaskContext":
        """This process's context (made from ``os.environ`` on first use, then reused, so
        the epoch count carries across calls as Spark's ``BarrierTaskContext.get()``)."""
        with cls._current_lock:
            if cls._current is None:
                cls._current = cls.from_env()
            return cls._current

    # ------------------------------------------------------------ the task API
    def task_index(self) -> int:
        """This task's index in the gang, 0..N-1 (its rank)."""
        return self._index

    def partition_id(self) -> int:
        """Spark's name for :meth:`task_index`."""
        return self._index

    def attempt_number(self) -> int:
        return self.barrier_id.attempt

    def num_tasks(self) -> int:
        return self._count

    @property
    def transport(self) -> str:
        """How barrier calls travel: ``"session"`` (one stream per task, the default) or
        ``"unary"`` (one call per epoch; used when the coordinator has no Session)."""
        return "session" if self._sessions_supported else "unary"

    @property
    def retries(self) -> int:
        """Transport failures retried so far by this task, and by its host's leader when it
        is the leader (it calls the coordinator for the host's tasks)."""
        leader = self._leader
        return self._retries + (leader.retries if leader is not None else 0)

    @property
    def epoch(self) -> int:
        """How many barrier()/all_gather() calls this task has completed."""
        return self._epoch

    def preemption_notice(self) -> float | None:
        """When this task's container will be taken back by a preemption (seconds since the
        epoch, as ``time.time()``), or None while it is not preempted. The task may poll it
        (or poll it on SIGUSR1, which comes with the notice) and checkpoint before then: its
        gang restarts later without counting a failure. (The RM's notice reaches the task
        through its AM and NodeManager; a NodeManager that cannot deliver one leaves None.)"""
        if not self._notice_file:
            return None
        try:
            with open(self._notice_file) as notice:
                return float(notice.read())
        except (OSError, ValueError):   # none yet (it is written whole, then renamed into place)
            return None

    def barrier(self) -> None:
        """Block until every task of the gang attempt has called ``barrier()`` as often."""
        self._sync(pb.BARRIER, b"")

    def all_gather(self, message: str) -> list[str]:
        """Like :meth:`barrier`, and return every task's ``message``, ordered by task index."""
        return [m.decode("utf-8") for m in self._sync(pb.ALL_GATHER, message.encode("utf-8"))]

    def all_gather_bytes(self, message: bytes) -> list[bytes]:
        """:meth:`all_gather` for bytes (the same operation on the wire)."""
        return self._sync(pb.ALL_GATHER, bytes(message))

    def get_task_infos(self) -> list[TaskInfo]:
        """Every task's address (host, named ports, role), ordered by task index."""
        request = pb.TaskInfosRequest(caller=self._caller)
        reply = self._call(self._stub.GetTaskInfos, request, timeout=60.0)
        if reply.WhichOneof("outcome") == "error":
            raise error_from_proto(reply.error, self.barrier_id)
        return [task_info_from_proto(t) for t in reply.infos.tasks]

    def close(self) -> None:
        self._closed.set()
        self._drop_session()
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._leader is not None:
            self._leader.stop()
            self._leader = None
        self._channel.close()

    def __enter__(self) -> "BarrierTaskContext":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------- internals
    def _sync(self, operation: int, message: bytes) -> list[bytes]:
        epoch = self._epoch
        hold_s = min(self.log_interval_s, MAX_HOLD_S)
        request = pb.SyncRequest(caller=self._caller, epoch=epoch, operation=operation,
                                 hold_ms=max(1, int(hold_s * 1000)))
        if len(message) + FRAMING_BYTES > self.max_message_bytes:
            request.unsent_size = len(message)  # the coordinator fails the gather for every task
        else:
            request.message = message
        # The server answers within hold_s; the deadline only guards against a lost reply.
        timeout = hold_s + self.reply_grace_s
        while True:
            reply = self._exchange(request, timeout)
            outcome = reply.WhichOneof("outcome")
            if outcome == "released":
                self._epoch = epoch + 1
                return list(reply.released.messages)
            if outcome == "error":
                raise error_from_proto(reply.error, self.barrier_id)
            p = reply.pending
            log.info("waiting for barrier (epoch %d): %d/%d arrived after %.0f s",
                     epoch, p.arrived, p.total, p.waiting_s)

    def _exchange(self, request: pb.SyncRequest, timeout: float) -> pb.SyncReply:
        """One call through the host's leader (:mod:`gangmaster.am.barrier.local`; joined, or
        become, at the first call), else :meth:`_exchange_direct`. A leader that went away
        is reported to the coordinator, which fails the attempt naming it."""
        if self._tree:
            local = self._local or self._join_local()
            if local is not None:
                try:
                    return local.exchange(request)
                except LeaderLost:
                    self._local, self._tree = None, False
                    local.close()
                    log.warning("%s: the host's barrier leader, task %d (pid %d), went away; telling the "
                                "coordinator at %s", self.barrier_id, local.leader, local.leader_pid, self.address)
                    lost = pb.SyncRequest()
                    lost.CopyFrom(request)
                    lost.leader_lost = local.leader
                    return self._exchange_direct(lost, timeout)
        return self._exchange_direct(request, timeout)

    def _join_local(self) -> "LocalSession | OwnSession | None":
        c = self._caller
        name = rendezvous_name(c.token, c.job, c.gang, c.attempt, self._local_group)
        self._local = join(name, c, self._lead)
        if self._local is None:
            self._tree = False
        return self._local

    def _lead(self, listener) -> OwnSession:
        """Become the host's leader, serving ``listener``; this task's own session to it
        (barrier_local.join's call)."""
        self._leader = HostLeader(listener, self._caller, self.address,
                                  functools.partial(_open_session, self._channel, HOST_SESSION_METHOD),
                                  min(self.log_interval_s, MAX_HOLD_S), self.retry_give_up_s,
                                  self.max_message_bytes)
        return self._leader.own_session()

    def _exchange_direct(self, request: pb.SyncRequest, timeout: float) -> pb.SyncReply:
        """One Sync call on this task's Session stream, opened on first use and re-opened
        (the request re-sent: arrivals are idempotent) when it breaks; retried like
        :meth:`_call`. A reply not there ``timeout`` s after the request counts as lost
        (the watchdog cancels the stream). A coordinator without Session (UNIMPLEMENTED)
        is called with unary Sync from then on."""
        retry = _Retry(self)
        while self._sessions_supported:
            try:
                session = self._session or self._open_session()
                self._reply_due = time.monotonic() + timeout
                try:
                    return session.exchange(request)
                finally:
                    self._reply_due = None
            except _StreamBroken as exc:
                self._drop_session()
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    log.info("the coordinator at %s has no Session stream; using unary calls", self.address)
                    self._sessions_supported = False
                    break
                retry.failed(exc)
        return self._call(self._stub.Sync, request, timeout=timeout)

    def _open_session(self) -> "_DirectSession | _ThreadedSession":
        self._session = _open_session(self._channel)
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="barrier-reply-watchdog", daemon=True)
            self._watchdog.start()
        return self._session

    def _drop_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.cancel()

    #: How often the watchdog looks for an overdue reply (seconds).
    WATCH_PERIOD_S = 1.0

    def _watch(self) -> None:
        """Cancel the stream when a reply is overdue (lost): the waiting call then fails
        with CANCELLED and re-sends on a new stream. Wakes once per ``WATCH_PERIOD_S``."""
        while not self._closed.wait(self.WATCH_PERIOD_S):
            due, session = self._reply_due, self._session
            if due is not None and session is not None and time.monotonic() > due:
                log.warning("%s: no reply from the coordinator at %s within %.0f s of the hold "
                            "time; re-sending on a new stream", self.barrier_id, self.address,
                            self.reply_grace_s)
                session.cancel()

    def _call(self, method, request, timeout: float):
        """One unary call, retried with backoff on transport failures for up to
        ``retry_give_up_s`` of consecutive failure."""
        retry = _Retry(self)
        while True:
            try:
                return method(request, timeout=timeout)
            except grpc.RpcError as exc:
                retry.failed(exc)


class _Retry:
    """Backoff over consecutive transport failures of one call: sleep and return when
    the failure is retried, raise :class:`CoordinatorUnavailable` when it is not (or
    after ``retry_give_up_s`` of failing)."""

    def __init__(self, ctx: BarrierTaskContext):
        self.ctx, self.delay, self.first_failure = ctx, 0.01, None

    def failed(self, exc) -> None:
        ctx = self.ctx
        code = exc.code() if hasattr(exc, "code") else None
        details = exc.details() if hasattr(exc, "details") else str(exc)
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in (details or ""):
            raise MessageTooLarge(  # gRPC's size limit: the same call would fail again
                f"{ctx.barrier_id}: a message to or from the coordinator at {ctx.address} was over "
                f"gRPC's size limit at epoch {ctx.epoch}: {details} (this task allows "
                f"{ctx.max_message_bytes:,} bytes; the coordinator's barrier.max_message_bytes may be "
                "lower)", ctx.barrier_id, ctx.epoch) from exc
        if code not in RETRIED_CODES:
            raise CoordinatorUnavailable(
                f"{ctx.barrier_id}: the coordinator at {ctx.address} failed the call: "
                f"{code}: {details}",
                ctx.barrier_id, ctx.epoch) from exc
        now = time.monotonic()
        self.first_failure = self.first_failure or now
        if now - self.first_failure > ctx.retry_give_up_s:
            raise CoordinatorUnavailable(
                f"{ctx.barrier_id}: the coordinator at {ctx.address} was unreachable for "
                f"{now - self.first_failure:.0f} s (last: {code.name}) at epoch {ctx.epoch}",
                ctx.barrier_id, ctx.epoch) from exc
        ctx._retries += 1
        log.debug("barrier call failed with %s; retrying in %.2f s", code, self.delay)
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, 1.0)
