"""The host leader's own loop (gangmaster.am.barrier.local.HostLeader), in one process:
its tasks as threads, the coordinator a stand-in stream. Its loop writes without
blocking, so a reply larger than a socket's buffer goes out in parts; every task must
still read the whole reply, and the host must still send one message per epoch."""
from __future__ import annotations

import os
import queue
import socket
import struct
import threading

import pytest

from gangmaster.am.barrier.local import HostLeader, join, rendezvous_name
from gangmaster.protocol.proto import barrier_pb2 as pb


class _Coordinator:
    """Stands in for HostSession streams (``stream()`` opens one) that release every epoch
    at once with ``size`` bytes per task: a request is sent by ``start`` and answered to
    ``wait``, as the leader uses a stream."""

    def __init__(self, size: int, pending_first: bool):
        self.size, self.pending_first, self.requests = size, pending_first, []
        self.streams = 0

    def stream(self) -> "_Stream":
        self.streams += 1
        return _Stream(self)

    def answer(self, request: pb.HostSyncRequest) -> pb.SyncReply:
        self.requests.append(request)
        if self.pending_first and len(self.requests) == 1:
            return pb.SyncReply(pending=pb.Pending(epoch=request.epoch, arrived=len(request.tasks), total=9))
        return pb.SyncReply(released=pb.Released(epoch=request.epoch, messages=[
            bytes([task]) * self.size for task in sorted(request.tasks)]))


class _Stream:
    def __init__(self, coordinator: _Coordinator):
        self.coordinator = coordinator
        self._sent: queue.SimpleQueue = queue.SimpleQueue()

    def start(self, request: pb.HostSyncRequest) -> None:
        self._sent.put(request)

    def wait(self) -> pb.SyncReply:
        request = self._sent.get()
        if request is None:
            raise ConnectionError("cancelled")
        return self.coordinator.answer(request)

    def cancel(self) -> None:
        self._sent.put(None)


def _host(label: str, tasks: int, size: int = 0, pending_first: bool = False):
    """A leader (task 0) and ``tasks - 1`` connected local sessions, against the stand-in:
    the stand-in, the leader and every task's (Caller, session)."""
    caller = pb.Caller(job="j", gang="g", attempt=1, token="w%d" % os.getpid(), task=0)
    name = rendezvous_name(caller.token, "j", "g", 1, label)
    coordinator = _Coordinator(size, pending_first)
    leaders: list[HostLeader] = []

    def lead(listener):
        leaders.append(HostLeader(listener, caller, "stand-in", coordinator.stream, 5.0, 1.0))
        return leaders[-1].own_session()

    sessions = []
    for task in range(tasks):
        me = pb.Caller(); me.CopyFrom(caller); me.task = task
        sessions.append((me, join(name, me, lead)))
    return coordinator, leaders[0], sessions


@pytest.mark.parametrize("tasks, size, pending_first", [
    (2, 0, False),             # a plain barrier
    (3, 1 << 20, False),       # 3 MB replies: far over a Unix socket's buffer, written in parts
    (2, 1 << 20, True),        # "pending" fanned out, every task re-sends, then the release
])
def test_every_task_reads_the_whole_release_and_the_host_sends_one_message(tasks, size, pending_first):
    coordinator, leader, sessions = _host("unit-%d-%d-%s" % (tasks, size, pending_first), tasks, size, pending_first)
    assert all(session is not None and session.leader == 0 for _me, session in sessions)
    replies: dict[int, pb.SyncReply] = {}

    def call(me: pb.Caller, session) -> None:
        request = pb.SyncRequest(caller=me, epoch=0, operation=1)
        while (reply := session.exchange(request)).WhichOneof("outcome") == "pending":
            pass
        replies[me.task] = reply

    threads = [threading.Thread(target=call, args=pair) for pair in sessions]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        expected = [bytes([task]) * size for task in range(tasks)]
        assert {task: list(r.released.messages) for task, r in replies.items()} == {
            task: expected for task in range(tasks)}
        assert leader.uplink_messages == len(coordinator.requests) == (2 if pending_first else 1)
        assert sorted(coordinator.requests[-1].tasks) == list(range(tasks))
        if not pending_first:   # the leader's own task waited on the one stream that carried the epoch
            assert coordinator.streams == 1   # (no lane of its own thread was needed)
    finally:
        for _me, session in sessions:
            session.close()
        leader.stop()


def test_an_undecodable_frame_drops_that_connection_and_the_leader_serves_on():
    _coordinator, leader, [(caller, session)] = _host("unit-undecodable", 1)
    name = rendezvous_name(caller.token, "j", "g", 1, "unit-undecodable")
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        stranger.connect(name)
        stranger.settimeout(10)
        stranger.sendall(struct.pack("!I", 3) + b"\xff\xff\xff")   # not a Caller
        assert stranger.recv(16) == b""   # the leader closed it
        reply = session.exchange(pb.SyncRequest(caller=caller, epoch=0, operation=1))
        assert reply.WhichOneof("outcome") == "released"
    finally:
        stranger.close()
        session.close()
        leader.stop()


def test_the_leaders_task_arrived_first_sends_its_arrival_after_the_linger_and_then_the_late_ones():
    """The own task reads the others' calls while it waits for them (the loop sleeps): it
    keeps the linger deadline itself, and a call that comes later is still answered."""
    import time

    from gangmaster.am.barrier.local import LINGER_S

    coordinator, leader, sessions = _host("unit-linger", 2)
    (own, own_session), (late, late_session) = sessions
    try:
        start, replies = time.monotonic(), []
        call = threading.Thread(target=lambda: replies.append(
            own_session.exchange(pb.SyncRequest(caller=own, epoch=0, operation=1))), daemon=True)
        call.start()
        call.join(10)   # (a deadline nobody keeps would leave it waiting)
        took = time.monotonic() - start
        assert replies and replies[0].HasField("released")
        assert [list(r.tasks) for r in coordinator.requests] == [[0]]   # sent alone, at the linger's end
        assert LINGER_S * 0.9 <= took < LINGER_S + 2.0
        reply = late_session.exchange(pb.SyncRequest(caller=late, epoch=0, operation=1))
        assert reply.HasField("released")   # the epoch's outcome, kept for the late one
        start = time.monotonic()   # the next epoch: both call, one message, no linger
        both = threading.Thread(target=late_session.exchange, args=(pb.SyncRequest(caller=late, epoch=1, operation=1),))
        both.start()
        assert own_session.exchange(pb.SyncRequest(caller=own, epoch=1, operation=1)).HasField("released")
        both.join(10)
        assert sorted(coordinator.requests[-1].tasks) == [0, 1] and leader.uplink_messages == 2
    finally:
        for _me, session in sessions:
            session.close()
        leader.stop()


def test_a_local_task_that_leaves_while_the_leaders_task_waits_for_it_is_not_waited_for():
    coordinator, leader, sessions = _host("unit-leaves", 3)
    (own, own_session), (one, one_session), (_two, two_session) = sessions   # task 2 never calls
    try:
        calls = threading.Thread(target=one_session.exchange, args=(pb.SyncRequest(caller=one, epoch=0, operation=1),))
        done: list = []
        own_call = threading.Thread(target=lambda: done.append(
            own_session.exchange(pb.SyncRequest(caller=own, epoch=0, operation=1))))
        own_call.start()   # the own task arrives first and reads the others' calls
        calls.start()
        calls.join(10)
        two_session.close()   # task 2 leaves: the host's message goes without waiting for the linger
        own_call.join(10)
        assert done and done[0].HasField("released")
        assert sorted(t for r in coordinator.requests for t in r.tasks) == [0, 1]
    finally:
        for _me, session in sessions[:2]:
            session.close()
        leader.stop()


def test_the_leaders_task_hears_an_error_that_ends_the_epoch_while_it_reads_the_others_calls():
    """Task 1's arrival went alone (the linger) and is failed while the leader's task, arrived
    since, waits for task 2: the error is every local task's, the leader's too (it must not wait
    on a stream that will never carry its message)."""
    coordinator, leader, sessions = _host("unit-error", 3)
    (own, own_session), (one, one_session), _never = sessions
    held = threading.Event()
    answer = coordinator.answer

    def failing(request):
        if list(request.tasks) == [1]:
            coordinator.requests.append(request)
            held.wait(10)
            return pb.SyncReply(error=pb.Error(code="FAILED", message="the attempt failed"))
        return answer(request)

    coordinator.answer = failing
    replies: dict[int, pb.SyncReply] = {}

    def call(me, session):
        replies[me.task] = session.exchange(pb.SyncRequest(caller=me, epoch=0, operation=1))

    first = threading.Thread(target=call, args=(one, one_session), daemon=True)
    own_call = threading.Thread(target=call, args=(own, own_session), daemon=True)
    try:
        first.start()
        while not coordinator.requests and first.is_alive():
            first.join(0.01)   # task 1's arrival is on its way (after the linger)
        own_call.start()
        own_call.join(0.02)   # the leader's task arrives and waits for task 2
        held.set()
        first.join(10)
        own_call.join(10)
        assert {task: r.error.code for task, r in replies.items()} == {0: "FAILED", 1: "FAILED"}
    finally:
        held.set()
        for _me, session in sessions:
            session.close()
        leader.stop()
