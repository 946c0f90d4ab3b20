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


@pytest.mark.parametrize("tasks, size, pending_first", [
    (2, 0, False),             # a plain barrier
    (3, 1 << 20, False),       # 3 MB replies: far over a Unix socket's buffer, written in parts
    (2, 1 << 20, True),        # "pending" fanned out, every task re-sends, then the release
])
def test_every_task_reads_the_whole_release_and_the_host_sends_one_message(tasks, size, pending_first):
    caller = pb.Caller(job="j", gang="g", attempt=1, token="t%d" % os.getpid(), task=0)
    name = rendezvous_name(caller.token, "j", "g", 1, "unit-%d-%d-%s" % (tasks, size, pending_first))
    coordinator = _Coordinator(size, pending_first)
    leaders: list[HostLeader] = []

    def lead(listener):
        leaders.append(HostLeader(listener, caller, "stand-in", coordinator.stream, 5.0, 1.0))
        return leaders[-1].own_session()

    sessions = []
    for task in range(tasks):
        me = pb.Caller(); me.CopyFrom(caller); me.task = task
        session = join(name, me, lead)
        assert session is not None and session.leader == 0
        sessions.append((me, session))
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
        assert leaders[0].uplink_messages == len(coordinator.requests) == (2 if pending_first else 1)
        assert sorted(coordinator.requests[-1].tasks) == list(range(tasks))
        if not pending_first:   # the leader's own task waited on the one stream that carried the epoch
            assert coordinator.streams == 1   # (no lane of its own thread was needed)
    finally:
        for _me, session in sessions:
            session.close()
        leaders[0].stop()


def test_an_undecodable_frame_drops_that_connection_and_the_leader_serves_on():
    caller = pb.Caller(job="j", gang="g", attempt=1, token="u%d" % os.getpid(), task=0)
    name = rendezvous_name(caller.token, "j", "g", 1, "unit-undecodable")
    coordinator = _Coordinator(0, False)
    leaders: list[HostLeader] = []
    def lead(listener):
        leaders.append(HostLeader(listener, caller, "stand-in", coordinator.stream, 5.0, 1.0))
        return leaders[-1].own_session()

    session = join(name, caller, lead)
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
        leaders[0].stop()
