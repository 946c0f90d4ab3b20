"""The tasks of one host meet at a local leader, which speaks for all of them to the
coordinator: one message per host per epoch, and the release fans out the same way (the
tree every MPI barrier uses). Why: with a message per task the coordinator's CPU per
arrival is the round time of a big gang (1,024 tasks: ~0.35 s on 2 cores); with one per
host it handles tasks/host times fewer, and a local Unix socket costs far less than a
gRPC message on either side.

**Meeting.** Every task of an attempt on one machine derives the same abstract Unix
socket name from the attempt's token and names (:func:`rendezvous_name`: no file, so
nothing stale is left behind when a process dies; only a process that knows the token
can know the name). The first task to call ``barrier()`` binds it and becomes the
host's *leader*: a daemon thread of its process (a ``selectors`` loop with the local socket
and ``HostSession`` streams to the coordinator, each driven by a worker thread as a
task drives its own Session: one per message waiting at the coordinator, reused). Every task, the leader's
own included, then talks to it as it would to the coordinator: the same ``SyncRequest``
and ``SyncReply`` messages, framed by their length. Nobody else starts anything: on
Slurm and YARN only the task processes run on the node, and the leader is one of them.
Both ends check that the other runs as the same user (``SO_PEERCRED``), and every
request carries the attempt's token, checked by the leader. Where the name cannot be
bound or reached (no abstract sockets, another network namespace per container) a task
leads only itself: nothing breaks, fewer messages are saved. ``GANGMASTER_BARRIER_LOCAL_GROUP``
splits one machine's tasks into groups that stand for hosts (the benchmark and tests);
``GANGMASTER_BARRIER_TREE=0`` turns the tree off (every task calls the coordinator).

**Aggregating.** The leader records each local task's call by epoch (idempotent by task,
as the coordinator is) and sends them in one ``HostSyncRequest`` as soon as every task
connected to it has called; arrivals not sent within :data:`LINGER_S` (a task connected
but slow, or one that never connects) are sent then, so the coordinator's epoch start,
"still waiting" logs and timeout name what really arrived, late by at most that. The
coordinator records each task's arrival as its own call would (mismatches and over-large
gathers included) and answers the message once: released (an all_gather's every message,
by task index), pending (fanned out: each task logs "waiting" and re-sends, the leader
re-sends its host's arrivals), or an error, which every local task gets.

**A leader that goes away.** The leader is a task: if its process ends, the attempt
fails as it does when any task dies. Its local tasks see their connection close; the
first one that needs it (a call waiting or a new one) tells the coordinator
(``SyncRequest.leader_lost``), which fails the attempt at once with an
:class:`~gangmaster.am.barrier.errors.AttemptFailed` naming the leader and its host, so
every task of the gang hears it without waiting for the AM to notice the exit. A leader
answers its own call last, after the others' replies are written, so a leader that
exits right after its last barrier never looks lost. A process that forks (a data
loader) closes its copies of these sockets in the child.
"""
from __future__ import annotations

import concurrent.futures
import errno
import hashlib
import heapq
import hmac
import logging
import os
import queue
import selectors   # the standard library's (gangmaster's is gangmaster.selectors)
import socket
import struct
import threading
import time
from typing import Callable

import grpc

from gangmaster.am.barrier.coordinator import FRAMING_BYTES
from gangmaster.protocol.proto import barrier_pb2 as pb
from gangmaster.conf.limits import BARRIER_MAX_MESSAGE_BYTES

__all__ = ["HostLeader", "LocalSession", "LeaderLost", "join", "rendezvous_name", "LINGER_S",
           "ENV_LOCAL_GROUP", "ENV_TREE"]

log = logging.getLogger("gangmaster.barrier.task")

#: Splits one machine's tasks into groups, each with its own leader (stands for hosts).
ENV_LOCAL_GROUP = "GANGMASTER_BARRIER_LOCAL_GROUP"
#: ``0``: no tree; every task calls the coordinator itself.
ENV_TREE = "GANGMASTER_BARRIER_TREE"

#: The longest a leader keeps an arrival before sending it (see the module docstring).
LINGER_S = 0.1
#: How long a task waits for a leader's answer to its hello before calling the coordinator itself.
HELLO_TIMEOUT_S = 10.0

_FRAME = struct.Struct("!I")
_CREDENTIALS = struct.Struct("3i")   # struct ucred: pid, uid, gid
#: The coordinator's method a leader's streams call.
HOST_SESSION_METHOD = "/gangmaster.barrier.BarrierCoordinator/HostSession"

#: File descriptors of the meeting sockets this process holds: closed in a forked child,
#: which must not keep a leader's socket (or a connection to one) open after it is gone.
_OWNED_FDS: set[int] = set()


def _close_in_child() -> None:
    for fd in list(_OWNED_FDS):
        try:
            os.close(fd)
        except OSError:
            pass
    _OWNED_FDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


def rendezvous_name(token: str, job: str, gang: str, attempt: int, group: str = "") -> bytes:
    """The abstract Unix socket name the tasks of one attempt meet at on one machine."""
    digest = hashlib.sha256("\0".join((token, job, gang, str(attempt), group)).encode()).hexdigest()[:40]
    return b"\0gangmaster-barrier-" + digest.encode()


def _frame(message) -> bytes:
    data = message.SerializeToString()
    return _FRAME.pack(len(data)) + data


def _peer(sock: socket.socket) -> tuple[int, int]:
    """The (pid, uid) of the process at the other end of a Unix socket."""
    pid, uid, _gid = _CREDENTIALS.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                         _CREDENTIALS.size))
    return pid, uid


def _same_caller(a: pb.Caller, b: pb.Caller) -> bool:
    return (a.job == b.job and a.gang == b.gang and a.attempt == b.attempt
            and hmac.compare_digest(a.token.encode(), b.token.encode()))


class LeaderLost(Exception):
    """The connection to the host's leader closed (its process ended or it left)."""


class LocalSession:
    """A task's connection to its host's leader: :meth:`exchange` is a Session's."""

    def __init__(self, sock: socket.socket, leader: int, leader_pid: int):
        self._sock, self.leader, self.leader_pid = sock, leader, leader_pid
        _OWNED_FDS.add(sock.fileno())

    def exchange(self, request: pb.SyncRequest) -> pb.SyncReply:
        """Send one request and wait for its reply; :class:`LeaderLost` if the leader is gone."""
        try:
            self._sock.sendall(_frame(request))
            data = self._sock.recv(65536)   # one reply, mostly in one piece
            if len(data) < _FRAME.size:
                data += self._read(_FRAME.size - len(data))
            (size,) = _FRAME.unpack_from(data)
            if len(data) < _FRAME.size + size:
                data += self._read(_FRAME.size + size - len(data))
            return pb.SyncReply.FromString(data[_FRAME.size:])
        except OSError as exc:
            raise LeaderLost(str(exc)) from exc

    def _read(self, size: int) -> bytes:
        data = self._sock.recv(size, socket.MSG_WAITALL)
        if len(data) < size:
            raise LeaderLost("the leader closed the connection")
        return data

    def close(self) -> None:
        _OWNED_FDS.discard(self._sock.fileno())
        self._sock.close()


def join(name: bytes, caller: pb.Caller, start_leader: Callable[[socket.socket], None]) -> LocalSession | None:
    """Connect to the leader at ``name``, becoming it (``start_leader(listener)``) when
    nobody listens there yet. None when the machine cannot do this (no abstract sockets),
    or the one listening there runs as another user: the task then calls the coordinator."""
    for _ in range(5):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(name)
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(name)
            except OSError as exc:
                listener.close()
                if exc.errno == errno.EADDRINUSE:   # another task of the host bound it first
                    continue
                return None
            listener.listen(4096)
            start_leader(listener)
            continue
        except OSError as exc:
            sock.close()
            log.debug("no local barrier leader (%s); calling the coordinator directly", exc)
            return None
        pid, uid = _peer(sock)
        if uid != os.getuid():
            log.warning("the local barrier socket is held by user id %d, not this task's: calling the "
                        "coordinator directly", uid)
            sock.close()
            return None
        session = LocalSession(sock, -1, pid)
        try:
            sock.settimeout(HELLO_TIMEOUT_S)   # a leader that never answers is not waited for
            sock.sendall(_frame(caller))
            (size,) = _FRAME.unpack(session._read(_FRAME.size))
            session.leader = pb.Caller.FromString(session._read(size)).task
            sock.settimeout(None)
        except (OSError, LeaderLost) as exc:
            session.close()
            log.warning("the local barrier leader did not answer (%s); calling the coordinator directly", exc)
            return None
        return session
    return None


class _Timer:
    """A callback due at ``when`` (``time.monotonic``) on the leader's loop; cancellable."""

    __slots__ = ("when", "callback", "args", "cancelled")

    def __init__(self, when: float, callback: Callable, args: tuple):
        self.when, self.callback, self.args, self.cancelled = when, callback, args, False

    def __lt__(self, other: "_Timer") -> bool:
        return self.when < other.when

    def cancel(self) -> None:
        self.cancelled = True


class _Epoch:
    """What the leader holds of one epoch: its tasks' calls, those not yet sent, the
    local calls waiting for its outcome, and the outcome's frame once known."""

    __slots__ = ("arrivals", "unsent", "waiters", "timer", "uplinks", "outcome")

    def __init__(self):
        self.arrivals: dict[int, tuple[int, int, bytes, int]] = {}   # task -> (task, operation, message, unsent)
        self.unsent: list[int] = []
        self.waiters: dict[int, "_Member"] = {}
        self.timer: _Timer | None = None
        self.uplinks = 0
        self.outcome: bytes | None = None


class _Member:
    """One local task's connection to the leader: a hello (its Caller), then requests.
    Non-blocking: what the socket does not take at once waits in ``pending`` until it
    is writable."""

    __slots__ = ("sock", "task", "buffer", "pending", "closed")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.task: int | None = None
        self.buffer = bytearray()
        self.pending = bytearray()
        self.closed = False


class HostLeader:
    """The leader of one host's tasks (see the module docstring): a daemon thread serving
    ``listener`` and speaking for the tasks to the coordinator at ``address``.

    Its loop is a bare :mod:`selectors` loop, not asyncio: per local message it costs
    one ``select`` wake-up and one ``recv``, no handle, protocol or task objects (at
    1,024 tasks on 2 cores the asyncio loop's share was most of the leader's CPU). The
    messages to the coordinator block, so they go to worker threads, which hand their
    replies back through a queue and a wake-up socket."""

    def __init__(self, listener: socket.socket, caller: pb.Caller, address: str,
                 open_stream: Callable[[], "object"], hold_s: float, retry_give_up_s: float,
                 max_message_bytes: int = BARRIER_MAX_MESSAGE_BYTES):
        self.caller, self.own_task = caller, caller.task
        self._listener, self._address = listener, address
        #: a new HostSession stream to the coordinator (``exchange(request)``, ``cancel()``,
        #: the broken stream's exception carrying ``code()`` and ``details()``)
        self._open_stream = open_stream
        self._streams_lock = threading.Lock()
        self._workers = concurrent.futures.ThreadPoolExecutor(64, thread_name_prefix="barrier-host-uplink")
        self._hold_ms = max(1, int(hold_s * 1000))
        self._retry_give_up_s = retry_give_up_s
        self._max_message_bytes = max_message_bytes
        self._members: dict[int, _Member] = {}   # task -> its connection, once it said hello
        self._epochs: dict[int, _Epoch] = {}
        self._streams: list = []
        self._selector = selectors.DefaultSelector()
        self._timers: list[_Timer] = []
        self._replies: queue.SimpleQueue = queue.SimpleQueue()   # (epoch, _Epoch, reply) from the workers
        self._wake_read, self._wake_write = socket.socketpair()
        self._stopping = False
        self.uplink_messages = 0   # HostSyncRequests sent (tests count them)
        self.retries = 0   # transport failures retried (the leader's task reports them as its own)
        for sock in (listener, self._wake_read, self._wake_write):
            _OWNED_FDS.add(sock.fileno())
        listener.setblocking(False)
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        self._selector.register(listener, selectors.EVENT_READ, self._accept)
        self._selector.register(self._wake_read, selectors.EVENT_READ, self._woken)
        self._thread = threading.Thread(target=self._run, name="barrier-host-leader", daemon=True)
        self._thread.start()

    # --------------------------------------------------------------- the thread
    def _run(self) -> None:
        selector, timers = self._selector, self._timers
        try:
            while not self._stopping:
                timeout = None
                while timers and timers[0].cancelled:
                    heapq.heappop(timers)
                if timers:
                    timeout = max(0.0, timers[0].when - time.monotonic())
                for key, events in selector.select(timeout):
                    key.data(key.fileobj, events)
                now = time.monotonic()
                while timers and timers[0].when <= now:
                    timer = heapq.heappop(timers)
                    if not timer.cancelled:
                        timer.callback(*timer.args)
        finally:
            self._close()

    def _close(self) -> None:
        own = (self._listener, self._wake_read)
        for key in list(self._selector.get_map().values()):   # every local connection, hello or not
            if key.fileobj not in own:
                _OWNED_FDS.discard(key.fileobj.fileno())
                key.fileobj.close()
        for sock in (self._listener, self._wake_read, self._wake_write):
            _OWNED_FDS.discard(sock.fileno())
            sock.close()
        with self._streams_lock:
            streams, self._streams = self._streams, []
        for stream in streams:
            stream.cancel()
        self._workers.shutdown(wait=False, cancel_futures=True)
        self._selector.close()

    def stop(self) -> None:
        """Stop leading (the leader's task closed its context): the local tasks that need
        it again find it gone."""
        if self._stopping or not self._thread.is_alive():
            return
        self._stopping = True
        self._wake()
        self._thread.join(5)

    def _wake(self) -> None:
        try:
            self._wake_write.send(b"\0")
        except OSError:   # already closed (stopped), or a wake-up is waiting anyway
            pass

    def _call_later(self, delay: float, callback: Callable, *args) -> _Timer:
        timer = _Timer(time.monotonic() + delay, callback, args)
        heapq.heappush(self._timers, timer)
        return timer

    def _woken(self, sock: socket.socket, _events: int) -> None:
        try:
            sock.recv(4096)
        except OSError:
            pass
        replies = self._replies
        while not replies.empty():
            self._uplink_done(*replies.get_nowait())

    def _accept(self, listener: socket.socket, _events: int) -> None:
        try:
            sock, _ = listener.accept()
        except OSError:
            return
        _pid, uid = _peer(sock)
        if uid != os.getuid():
            sock.close()
            return
        _OWNED_FDS.add(sock.fileno())
        sock.setblocking(False)
        self._selector.register(sock, selectors.EVENT_READ, self._readable(_Member(sock)))

    def _readable(self, member: _Member) -> Callable:
        def ready(_sock: socket.socket, events: int) -> None:
            if events & selectors.EVENT_WRITE:
                self._flush(member)
            if events & selectors.EVENT_READ and not member.closed:
                self._read(member)
        return ready

    def _read(self, member: _Member) -> None:
        try:
            data = member.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(member)
            return
        buffer = member.buffer
        buffer += data
        while len(buffer) >= _FRAME.size and not member.closed:
            (size,) = _FRAME.unpack_from(buffer)
            if len(buffer) < _FRAME.size + size:
                return
            payload = bytes(buffer[_FRAME.size:_FRAME.size + size])
            del buffer[:_FRAME.size + size]
            try:
                message = (pb.Caller if member.task is None else pb.SyncRequest).FromString(payload)
            except Exception as exc:   # noqa: BLE001 - a frame that is not ours: that task only
                log.warning("the host's barrier leader dropped a local connection that sent an undecodable "
                            "frame (%s)", exc)
                self._drop(member)
                return
            if member.task is None:
                self.hello(member, message)
            else:
                self.request(member, message)

    def _write(self, member: _Member, frame: bytes) -> None:
        if member.closed:
            return
        if member.pending:
            member.pending += frame
            return
        try:
            sent = member.sock.send(frame)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._drop(member)
            return
        if sent < len(frame):
            member.pending += frame[sent:]
            self._selector.modify(member.sock, selectors.EVENT_READ | selectors.EVENT_WRITE,
                                  self._readable(member))

    def _flush(self, member: _Member) -> None:
        try:
            sent = member.sock.send(member.pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(member)
            return
        del member.pending[:sent]
        if not member.pending:
            self._selector.modify(member.sock, selectors.EVENT_READ, self._readable(member))

    def _drop(self, member: _Member) -> None:
        """Close a local task's connection (it closed, failed, or was refused)."""
        if member.closed:
            return
        member.closed = True
        try:
            self._selector.unregister(member.sock)
        except (KeyError, ValueError):
            pass
        _OWNED_FDS.discard(member.sock.fileno())
        member.sock.close()
        self.lost(member)

    # ------------------------------------------------------------ local tasks
    def hello(self, member: _Member, caller: pb.Caller) -> None:
        if not _same_caller(caller, self.caller):
            self._drop(member)
            return
        member.task = caller.task
        old = self._members.get(caller.task)
        self._members[caller.task] = member
        if old is not None and old is not member:
            self._drop(old)
        self._write(member, _frame(pb.Caller(task=self.own_task)))

    def request(self, member: _Member, request: pb.SyncRequest) -> None:
        if request.caller.task != member.task or not _same_caller(request.caller, self.caller):
            self._write(member, _frame(pb.SyncReply(error=pb.Error(
                code="AUTH", message="refused by the host's barrier leader: the call did not carry this "
                                     "attempt's names and token"))))
            return
        epoch = request.epoch
        ep = self._epochs.get(epoch)
        if ep is None:
            ep = self._epochs[epoch] = _Epoch()
        if ep.outcome is not None:
            self._write(member, ep.outcome)
            return
        task = member.task
        ep.waiters[task] = member
        if task not in ep.arrivals:
            ep.arrivals[task] = (task, request.operation, request.message, request.unsent_size)
            ep.unsent.append(task)
            self._consider(epoch, ep)
        elif not ep.unsent and not ep.uplinks:   # a re-send after "pending": wait at the coordinator again
            self._send(epoch, ep, list(ep.arrivals.values()))

    def lost(self, member: _Member) -> None:
        """A local task's connection closed: its arrivals stay (as a dead task's do at the
        coordinator); the epochs waiting only for it go on."""
        if member.task is None or self._members.get(member.task) is not member:
            return
        del self._members[member.task]
        for epoch, ep in list(self._epochs.items()):
            if ep.waiters.get(member.task) is member:
                del ep.waiters[member.task]
            if ep.outcome is None:
                self._consider(epoch, ep)

    def _consider(self, epoch: int, ep: _Epoch) -> None:
        """Send the epoch's unsent arrivals when every connected task has called, else
        within :data:`LINGER_S`."""
        if not ep.unsent:
            return
        arrivals = ep.arrivals
        if all(task in arrivals for task in self._members):
            if ep.timer is not None:
                ep.timer.cancel()
                ep.timer = None
            self._send_unsent(epoch, ep)
        elif ep.timer is None:
            ep.timer = self._call_later(LINGER_S, self._linger_over, epoch, ep)

    def _linger_over(self, epoch: int, ep: _Epoch) -> None:
        ep.timer = None
        if ep.unsent and ep.outcome is None:
            self._send_unsent(epoch, ep)

    def _send_unsent(self, epoch: int, ep: _Epoch) -> None:
        arrivals = [ep.arrivals[t] for t in ep.unsent]
        ep.unsent = []
        self._send(epoch, ep, arrivals)

    def _within_limit(self, arrivals: list) -> list:
        """``arrivals`` as sent: once the all_gather messages of one host message would pass
        the coordinator's limit, the rest go without their bytes, their size told
        (``unsent_size``, as a task does with a message over the limit alone), so the
        coordinator fails the gather naming the size and the limit, and no message is
        ever over gRPC's size limit."""
        total, out = 0, []
        for task, operation, message, unsent in arrivals:
            total += max(len(message), unsent) + FRAMING_BYTES
            if total > self._max_message_bytes and message:
                message, unsent = b"", len(message)
            out.append((task, operation, message, unsent))
        return out

    def _send(self, epoch: int, ep: _Epoch, arrivals: list) -> None:
        ep.uplinks += 1
        tasks, operations, messages, unsent = zip(*self._within_limit(arrivals)) if arrivals else ((),) * 4
        request = pb.HostSyncRequest(caller=self.caller, epoch=epoch, hold_ms=self._hold_ms, tasks=tasks,
                                     operations=operations, messages=messages if any(messages) else (),
                                     unsent_sizes=unsent if any(unsent) else ())
        self.uplink_messages += 1
        try:
            self._workers.submit(self._uplink, epoch, ep, request)
        except RuntimeError:   # shut down: the leader is stopping
            pass

    # ------------------------------------------------------------ the coordinator
    def _uplink(self, epoch: int, ep: _Epoch, request: pb.HostSyncRequest) -> None:
        """In a worker thread: the host's message and its reply, handed to the loop."""
        self._replies.put((epoch, ep, self._exchange(request)))
        self._wake()

    def _uplink_done(self, epoch: int, ep: _Epoch, reply: pb.SyncReply) -> None:
        ep.uplinks -= 1
        if ep.outcome is not None:
            return
        if reply.WhichOneof("outcome") == "pending":   # every local task logs it and re-sends
            frame = _frame(reply)
            for member in ep.waiters.values():
                self._write(member, frame)
            ep.waiters.clear()
            return
        ep.outcome = _frame(reply)
        if ep.timer is not None:
            ep.timer.cancel()
            ep.timer = None
        own = ep.waiters.pop(self.own_task, None)
        others = list(ep.waiters.values())
        ep.waiters.clear()
        for member in others:
            self._write(member, ep.outcome)
        for old in [e for e in self._epochs if e < epoch - 1]:
            del self._epochs[old]
        if own is not None:
            self._answer_own(own, ep.outcome, others)

    def _answer_own(self, own: _Member, frame: bytes, others: list) -> None:
        """The leader's own task hears last, once the others' replies are written out (it
        may exit at once; what it leaves unwritten would read as a lost leader)."""
        if any(not m.closed and m.pending for m in others):
            self._call_later(0.001, self._answer_own, own, frame, others)
        else:
            self._write(own, frame)

    def _exchange(self, request: pb.HostSyncRequest) -> pb.SyncReply:
        """One message on an idle HostSession stream (a new one when all are busy: a message
        waits at the coordinator until its epoch is released), re-sent on a new stream
        with backoff when the transport fails, for up to ``retry_give_up_s``."""
        delay, first_failure = 0.01, None
        while True:
            try:
                return self._blocking_exchange(request)
            except Exception as exc:   # noqa: BLE001 - a broken stream: code() says why
                code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNAVAILABLE
                details = exc.details() if hasattr(exc, "details") else str(exc)
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in (details or ""):
                    return pb.SyncReply(error=pb.Error(code="TOO_LARGE", message=(
                        f"the host's barrier leader (task {self.own_task}): a message to or from the coordinator "
                        f"at {self._address} was over gRPC's size limit at epoch {request.epoch}: {details}")))
                now = time.monotonic()
                first_failure = first_failure or now
                if code not in _RETRIED or now - first_failure > self._retry_give_up_s or self._stopping:
                    return pb.SyncReply(error=pb.Error(
                        code="UNAVAILABLE", message=f"the host's barrier leader (task {self.own_task}) could not "
                        f"reach the coordinator at {self._address}: {code.name}: {details}"))
                self.retries += 1
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _blocking_exchange(self, request: pb.HostSyncRequest) -> pb.SyncReply:
        """The exchange on an idle stream, which goes back to the idle ones after it (a
        broken one is dropped)."""
        with self._streams_lock:
            stream = self._streams.pop() if self._streams else None
        stream = stream or self._open_stream()
        try:
            reply = stream.exchange(request)
        except BaseException:
            stream.cancel()
            raise
        with self._streams_lock:
            self._streams.append(stream)
        return reply


_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                      grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED})
