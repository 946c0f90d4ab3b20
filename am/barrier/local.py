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
host's *leader* (:class:`HostLeader`: a ``selectors`` loop on a daemon thread of its process
for the local socket, and ``HostSession`` streams to the coordinator, one per message
waiting there, reused). Every other task then talks to it as it would to the coordinator:
the same ``SyncRequest`` and ``SyncReply`` messages, framed by their length; the leader's
own task calls it in its process (:class:`OwnSession`). Nobody else starts anything: on
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

import errno
import hashlib
import heapq
import hmac
import logging
import os
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

__all__ = ["HostLeader", "LocalSession", "OwnSession", "LeaderLost", "join", "rendezvous_name", "LINGER_S",
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


def join(name: bytes, caller: pb.Caller,
         start_leader: Callable[[socket.socket], "OwnSession"]) -> "LocalSession | OwnSession | None":
    """Connect to the leader at ``name``, or become it when nobody listens there yet:
    ``start_leader(listener)`` starts the leader and gives the leading task's own session
    (:meth:`HostLeader.own_session`). None when the machine cannot do this (no abstract
    sockets), or the one listening there runs as another user: the task then calls the
    coordinator."""
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
            return start_leader(listener)
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

    __slots__ = ("arrivals", "unsent", "waiters", "timer", "uplinks", "outcome", "own_lane")

    def __init__(self):
        self.arrivals: dict[int, tuple[int, int, bytes, int]] = {}   # task -> (task, operation, message, unsent)
        self.unsent: list[int] = []
        self.waiters: dict[int, "_Member"] = {}
        self.timer: _Timer | None = None
        self.uplinks = 0
        self.outcome: bytes | None = None
        self.own_lane: _Lane | None = None   # the lane the own task waits on for this epoch's next message


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


class OwnSession:
    """The leader's own task's connection to it: in its process, no socket (the task
    calls the leader, which answers it through an event); :meth:`exchange` is a Session's."""

    def __init__(self, leader: "HostLeader"):
        self._leader, self.leader, self.leader_pid = leader, leader.own_task, os.getpid()

    def exchange(self, request: pb.SyncRequest) -> pb.SyncReply:
        return self._leader.exchange_own(request)

    def close(self) -> None:
        """Nothing to close: the task's context stops its leader."""


class _Own(_Member):
    """The leader's own task as a member: its replies are handed over in the process."""

    __slots__ = ("reply", "answered")

    def __init__(self, task: int):
        super().__init__(None)   # type: ignore[arg-type]
        self.task = task
        self.reply: bytes | None = None
        self.answered = threading.Event()


class _Lane:
    """One HostSession stream to the coordinator and whoever waits for its replies: the
    leader's own task, while it waits for the epoch the lane carries, or a thread started
    for the one message. Whoever sends on it starts the message itself; the waiter, already
    blocked on the stream, takes the reply and writes it to the local tasks. Between
    messages nobody waits on it (a thread blocked on an idle stream would still be woken
    to poll the others' sockets on gRPC's older client transport, the tasks')."""

    __slots__ = ("stream", "job", "dead")

    def __init__(self, stream):
        self.stream = stream
        self.job: tuple[int, _Epoch, pb.HostSyncRequest] | None = None   # the message in flight
        self.dead = False


class HostLeader:
    """The leader of one host's tasks (see the module docstring): a daemon thread serving
    ``listener`` and speaking for the tasks to the coordinator at ``address``.

    Who does what, with no hand-off between threads on a round's path: the *loop* (a bare
    :mod:`selectors` loop, not asyncio: per local message one ``select`` wake-up and one
    ``recv``) reads the local tasks' calls; the leader's *own task* arrives by calling it
    (:class:`OwnSession`: no socket to itself) and then waits on the stream to the
    coordinator that will carry its epoch; whichever of them completes the host's arrivals
    starts the host message on that stream, without waiting; the own task, blocked on it,
    takes the reply and writes it to the local tasks. Messages nobody waits for that way
    (sent after :data:`LINGER_S` before the own task arrived, or re-sent) go on a stream
    (a *lane*) with a thread started to wait for that reply, which does the same. While the
    own task waits for the host's other tasks it reads their calls itself
    (:meth:`_read_members`): the loop then sleeps. One lock keeps the leader's
    state; each holds it only while it handles one event. Why: measured per round of 8
    tasks (session 16), the previous design's hand-offs (loop -> uplink worker -> wake-up
    socket -> loop, the own task's socket round trip) were about a third of the leader
    process's CPU, and each woke a thread more per round."""

    def __init__(self, listener: socket.socket, caller: pb.Caller, address: str,
                 open_stream: Callable[[], "object"], hold_s: float, retry_give_up_s: float,
                 max_message_bytes: int = BARRIER_MAX_MESSAGE_BYTES):
        self.caller, self.own_task = caller, caller.task
        self._listener, self._address = listener, address
        #: a new HostSession stream to the coordinator (``start(request)`` without waiting,
        #: ``wait()`` for its reply, ``exchange(request)`` for both, ``cancel()``; a broken
        #: stream raises an exception carrying ``code()`` and ``details()``)
        self._open_stream = open_stream
        self._lock = threading.Lock()
        self._hold_ms = max(1, int(hold_s * 1000))
        self._retry_give_up_s = retry_give_up_s
        self._max_message_bytes = max_message_bytes
        self._own = _Own(caller.task)
        self._members: dict[int, _Member] = {caller.task: self._own}   # task -> its connection
        self._epochs: dict[int, _Epoch] = {}
        self._spare: list[_Lane] = []   # lanes with no message in flight (nobody waits on them)
        self._lanes: set[_Lane] = set()
        self._selector = selectors.DefaultSelector()
        #: the local tasks' connections, polled by the loop through its own selector, or by
        #: the own task while it waits for the host's arrivals (:meth:`_read_members`)
        self._members_sel = selectors.DefaultSelector()
        self._nested = hasattr(self._members_sel, "fileno")   # (epoll, kqueue: a selector is a file)
        self._reader: int | None = None   # the own task's thread while it reads them (it keeps its deadlines)
        if not self._nested:
            self._members_sel.close()
            self._members_sel = self._selector
        self._timers: list[_Timer] = []
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
        if self._nested:
            self._selector.register(self._members_sel, selectors.EVENT_READ, self._members_ready)
        self._thread = threading.Thread(target=self._run, name="barrier-host-leader", daemon=True)
        self._thread.start()

    def own_session(self) -> OwnSession:
        """The leader's own task's session (what :func:`join` gives the task that leads)."""
        return OwnSession(self)

    # --------------------------------------------------------------- the loop
    def _run(self) -> None:
        selector, timers, lock = self._selector, self._timers, self._lock
        try:
            while not self._stopping:
                with lock:
                    while timers and timers[0].cancelled:
                        heapq.heappop(timers)
                    timeout = max(0.0, timers[0].when - time.monotonic()) if timers else None
                ready = selector.select(timeout)
                with lock:
                    for key, events in ready:
                        key.data(key.fileobj, events)
                    now = time.monotonic()
                    while timers and timers[0].when <= now:
                        timer = heapq.heappop(timers)
                        if not timer.cancelled:
                            timer.callback(*timer.args)
        finally:
            self._close()

    def _close(self) -> None:
        with self._lock:
            self._stopping = True
            own = (self._listener, self._wake_read)
            for key in list(self._members_sel.get_map().values()):   # every local connection, hello or not
                if key.fileobj not in own:
                    _OWNED_FDS.discard(key.fileobj.fileno())
                    key.fileobj.close()
            for sock in (self._listener, self._wake_read, self._wake_write):
                _OWNED_FDS.discard(sock.fileno())
                sock.close()
            lanes, self._spare = list(self._lanes), []
            self._own.reply = None
            self._own.answered.set()   # a waiting own call hears the leader is gone
        for lane in lanes:
            if lane.stream is not None:
                lane.stream.cancel()
        if self._nested:
            self._members_sel.close()
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
        """A timer on the loop (lock held); from another thread the loop is woken to see it."""
        timer = _Timer(time.monotonic() + delay, callback, args)
        heapq.heappush(self._timers, timer)
        if threading.get_ident() not in (self._thread.ident, self._reader) and self._timers[0] is timer:
            self._wake()
        return timer

    def _wake_for_timers(self) -> None:
        """Wake the loop to see a timer set without waking it (lock held)."""
        if any(not timer.cancelled for timer in self._timers):
            self._wake()

    def _woken(self, sock: socket.socket, _events: int) -> None:
        try:
            sock.recv(4096)
        except OSError:
            pass

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
        self._members_sel.register(sock, selectors.EVENT_READ, self._readable(_Member(sock)))

    def _members_ready(self, _sel, _events: int) -> None:
        """The loop: some local connection is ready (lock held). Not while the own task reads
        them (the loop saw them ready just before): what it read could start the host message,
        and the own task, blocked on their selector, would not hear of it before its deadline."""
        if self._reader is not None:
            return
        for key, events in self._members_sel.select(0):
            key.data(key.fileobj, events)

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
        """Send ``frame`` to a local task (lock held; from any thread): what its socket does
        not take at once waits in its ``pending`` buffer for the loop. The own task gets it
        handed over."""
        if member.closed:
            return
        if member is self._own:
            self._own.reply = frame
            self._own.answered.set()
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
            self._members_sel.modify(member.sock, selectors.EVENT_READ | selectors.EVENT_WRITE,
                                  self._readable(member))
            if threading.get_ident() != self._thread.ident:
                self._wake()   # the loop's select learns of the new interest

    def _flush(self, member: _Member) -> None:
        if member.closed or not member.pending:   # (the loop and the own task may both see it ready)
            return
        try:
            sent = member.sock.send(member.pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(member)
            return
        del member.pending[:sent]
        if not member.pending:
            self._members_sel.modify(member.sock, selectors.EVENT_READ, self._readable(member))

    def _drop(self, member: _Member) -> None:
        """Close a local task's connection (it closed, failed, or was refused)."""
        if member.closed:
            return
        member.closed = True
        try:
            self._members_sel.unregister(member.sock)
        except (KeyError, ValueError):
            pass
        _OWNED_FDS.discard(member.sock.fileno())
        member.sock.close()
        self.lost(member)

    # ------------------------------------------------------------ local tasks
    def hello(self, member: _Member, caller: pb.Caller) -> None:
        if not _same_caller(caller, self.caller) or caller.task == self.own_task:
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
        self._arrive(member, request)

    def exchange_own(self, request: pb.SyncRequest) -> pb.SyncReply:
        """The leader's own task's call (:class:`OwnSession`): arrive as a local task does and
        wait for the answer; :class:`LeaderLost` when the leader has stopped."""
        own = self._own
        with self._lock:
            if self._stopping:
                raise LeaderLost("the host's barrier leader stopped")
            own.reply = None
            own.answered.clear()
            ep = self._epochs.get(request.epoch)
            if ep is None:
                ep = self._epochs[request.epoch] = _Epoch()
            lane = None
            if ep.outcome is None and ep.own_lane is None:
                lane = ep.own_lane = self._spare.pop() if self._spare else self._new_lane()
            self._reader = threading.get_ident()   # (a linger timer set now is this thread's to keep)
            self._arrive(own, request)
            if lane is not None and lane.job is None and self.own_task not in ep.unsent:
                self._spare.append(lane)   # nothing will be sent on it: nobody waits on it
                ep.own_lane = lane = None
            read = lane is not None and lane.job is None and self._nested
            if read:   # the others' calls still to come: this thread reads them, the loop stops
                self._selector.unregister(self._members_sel)
            else:
                self._reader = None
                self._wake_for_timers()
        if read:
            self._read_members(request.epoch, ep, lane)
            with self._lock:
                if lane.job is None:   # the epoch ended (an error) or the leader stopped before it was sent
                    if ep.own_lane is lane:
                        ep.own_lane = None
                    if not self._stopping:
                        self._spare.append(lane)
                    lane = None
        if lane is not None:
            self._await_reply(lane)
        own.answered.wait()
        frame = own.reply
        if frame is None:
            raise LeaderLost("the host's barrier leader stopped")
        return pb.SyncReply.FromString(frame[_FRAME.size:])

    def _read_members(self, epoch: int, ep: _Epoch, lane: _Lane) -> None:
        """The own task, arrived before the host's other tasks, reads their calls itself until
        the host message is started on ``lane`` (or the epoch ends): the loop thread is not
        woken for them, and the message is started by the thread that will wait on its
        stream. Its linger deadline is kept here too. Then the loop reads them again."""
        sel = self._members_sel
        try:
            while True:
                with self._lock:
                    if lane.job is not None or ep.outcome is not None or self._stopping:
                        return
                    timer = ep.timer
                    if timer is not None and timer.when <= time.monotonic():
                        timer.cancel()
                        self._linger_over(epoch, ep)
                        continue
                    timeout = None if timer is None else timer.when - time.monotonic()
                ready = sel.select(timeout)
                with self._lock:
                    for key, events in ready:
                        key.data(key.fileobj, events)
        finally:
            with self._lock:
                self._reader = None
                if not self._stopping:
                    self._selector.register(sel, selectors.EVENT_READ, self._members_ready)
                    self._wake_for_timers()

    def _arrive(self, member: _Member, request: pb.SyncRequest) -> None:
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
        """Start the host's message on an idle lane (a new one when all are busy: a message
        waits at the coordinator until its epoch is released). Lock held."""
        if self._stopping:
            return
        ep.uplinks += 1
        tasks, operations, messages, unsent = zip(*self._within_limit(arrivals)) if arrivals else ((),) * 4
        request = pb.HostSyncRequest(caller=self.caller, epoch=epoch, hold_ms=self._hold_ms, tasks=tasks,
                                     operations=operations, messages=messages if any(messages) else (),
                                     unsent_sizes=unsent if any(unsent) else ())
        self.uplink_messages += 1
        lane = ep.own_lane
        if lane is None or lane.job is not None or lane.dead:
            lane = self._spare.pop() if self._spare else self._new_lane()
            threading.Thread(target=self._await_reply, args=(lane,), name="barrier-host-lane", daemon=True).start()
        lane.job = (epoch, ep, request)
        if lane.stream is not None:
            lane.stream.start(request)   # a stream that broke meanwhile: its lane re-sends it

    # ------------------------------------------------------------ the coordinator
    def _new_lane(self) -> _Lane:
        """A new stream to the coordinator (lock held)."""
        try:
            stream = self._open_stream()
        except Exception as exc:   # noqa: BLE001 - its waiter re-opens it, with backoff
            log.debug("the host's barrier leader could not open a stream (%s)", exc)
            stream = None
        lane = _Lane(stream)
        self._lanes.add(lane)
        return lane

    def _await_reply(self, lane: _Lane) -> None:
        """Wait for the reply to the message on ``lane`` (which may be started after this is
        called) and hand it to the local tasks; the lane goes back to the spare ones. When the
        stream breaks with a message in flight, the message is re-sent on a new one (with
        backoff, :meth:`_exchange`); a stream that breaks idle is forgotten."""
        error: Exception | None = None
        try:
            if lane.stream is None:
                raise _NoStream("no stream to the coordinator")
            reply = lane.stream.wait()
        except Exception as exc:   # noqa: BLE001 - a broken stream: code() says why
            error = exc
        with self._lock:
            if error is not None and (lane.job is None or self._stopping):   # broke idle, or stopping
                lane.dead = True   # (an epoch's own_lane that is dead is not sent on)
                self._lanes.discard(lane)
                return
            job = lane.job
        if error is not None:
            reply, lane.stream = self._exchange(job[2], error)
        with self._lock:
            lane.job = None
            if job[1].own_lane is lane:   # the own task's wait on it ends here
                job[1].own_lane = None
            if lane.stream is None or self._stopping:
                lane.dead = True
                self._lanes.discard(lane)
            else:
                self._spare.append(lane)
            self._uplink_done(job[0], job[1], reply)

    def _uplink_done(self, epoch: int, ep: _Epoch, reply: pb.SyncReply) -> None:
        ep.uplinks -= 1
        if ep.outcome is not None:
            return
        if reply.WhichOneof("outcome") == "pending":   # every local task logs it and re-sends
            frame = _frame(reply)
            for member in list(ep.waiters.values()):
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

    def _exchange(self, request: pb.HostSyncRequest, failure: Exception) -> tuple[pb.SyncReply, "object | None"]:
        """After ``failure`` on a lane's stream: the message re-sent on a new stream, with
        backoff, while the transport fails for up to ``retry_give_up_s``: its reply and the
        stream (None when it gave up; the reply then says why)."""
        delay, first_failure = 0.01, None
        while True:
            exc = failure
            code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNAVAILABLE
            details = exc.details() if hasattr(exc, "details") else str(exc)
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in (details or ""):
                return pb.SyncReply(error=pb.Error(code="TOO_LARGE", message=(
                    f"the host's barrier leader (task {self.own_task}): a message to or from the coordinator "
                    f"at {self._address} was over gRPC's size limit at epoch {request.epoch}: {details}"))), None
            now = time.monotonic()
            first_failure = first_failure or now
            if code not in _RETRIED or now - first_failure > self._retry_give_up_s or self._stopping:
                return pb.SyncReply(error=pb.Error(
                    code="UNAVAILABLE", message=f"the host's barrier leader (task {self.own_task}) could not "
                    f"reach the coordinator at {self._address}: {code.name}: {details}")), None
            with self._lock:
                self.retries += 1
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
            stream = None
            try:
                stream = self._open_stream()
                return stream.exchange(request), stream
            except Exception as exc:   # noqa: BLE001 - broken again: code() says why
                if stream is not None:
                    stream.cancel()
                failure = exc


class _NoStream(Exception):
    """A lane without a stream (opening one failed): its message is sent on a new one."""


_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                      grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED})
