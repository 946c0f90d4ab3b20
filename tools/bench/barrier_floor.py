"""The floor of ``gangmaster bench barrier``'s tree: the same round with nothing but bare
Unix sockets, measured in the same run so the barrier's figure sits beside what this
machine, at this load, can do with the same shape at all.

Why: a 1,024-task round on 2 cores runs 256 processes; what bounds it may be the
scheduler handing the CPUs between them, not the barrier. The floor keeps the shape the
bench gives the tree and drops everything else: every host is a *relay* process (in place
of the leader) and its tasks are the same processes as the bench's (a process per task up
to ``--max-process-tasks``, else the host's tasks as coroutines of one process); every
task sends a 4-byte epoch to its relay and waits for 4 bytes back; the relay, once all its
tasks have sent, sends one message to a *hub* process (in place of the coordinator), which
answers every relay once all have sent; the relays fan the release out. No gRPC, no
protobuf, no tokens, no timers: each loop is a ``selectors`` loop of a few lines. A round
is measured as the bench measures it (last release to last release).
"""
from __future__ import annotations

import asyncio
import os
import selectors   # the standard library's (gangmaster's is gangmaster.selectors)
import socket
import struct
import time

_EPOCH = struct.Struct("!I")


def _connect(name: bytes) -> socket.socket:
    """Connect to ``name``, waiting for its process to listen there."""
    deadline = time.monotonic() + 60
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(name)
            return sock
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _listen(name: bytes) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(name)
    listener.listen(4096)
    return listener


def _gather_and_release(listener: socket.socket, members: int, upstream: socket.socket | None,
                        total: int) -> None:
    """Accept ``members`` connections; for each of ``total`` epochs wait for a message from
    every member, then (with an ``upstream``) send one up and wait for its answer, and
    answer every member. The hub and the relays are this loop."""
    conns = [listener.accept()[0] for _ in range(members)]
    listener.close()
    selector = selectors.DefaultSelector()
    for conn in conns:
        selector.register(conn, selectors.EVENT_READ)
    for epoch in range(total):
        frame, arrived = _EPOCH.pack(epoch), 0
        while arrived < members:
            for key, _ in selector.select():
                if key.fileobj.recv(4096):
                    arrived += 1
        if upstream is not None:
            upstream.sendall(frame)
            upstream.recv(4096)
        for conn in conns:
            conn.sendall(frame)
    for conn in conns:
        conn.close()


def hub(name: bytes, hosts: int, total: int) -> None:
    _gather_and_release(_listen(name), hosts, None, total)


def relay(name: bytes, hub_name: bytes, tasks: int, total: int) -> None:
    listener = _listen(name)
    _gather_and_release(listener, tasks, _connect(hub_name), total)


def one_task(index: int, name: bytes, total: int, results) -> None:
    sock = _connect(name)
    times = []
    for epoch in range(total):
        sock.sendall(_EPOCH.pack(epoch))
        sock.recv(4096)
        times.append(time.monotonic_ns())
    sock.close()
    results.put((index, times, 0, time.process_time()))


def host_tasks(first: int, count: int, name: bytes, total: int, results) -> None:
    """The ``count`` tasks of one host as coroutines of this process."""
    async def task(index: int) -> None:
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(name)
                break
            except (ConnectionRefusedError, FileNotFoundError):
                await asyncio.sleep(0.01)
        times = []
        for epoch in range(total):
            writer.write(_EPOCH.pack(epoch))
            await reader.readexactly(_EPOCH.size)
            times.append(time.monotonic_ns())
        writer.close()
        done.append((index, times, 0))

    async def main() -> None:
        await asyncio.gather(*(task(first + i) for i in range(count)))

    done: list = []
    asyncio.run(main())
    cpu = time.process_time() / max(1, len(done))
    for out in done:
        results.put((*out, cpu))


def processes(ctx, n: int, tasks_per_host: int, total: int, process_per_task: bool, results) -> list:
    """The floor's processes for ``n`` tasks, not started: the hub, a relay per host, and
    the tasks (laid out as the bench lays out the tree's)."""
    prefix = b"\0gangmaster-barrier-floor-%d-%d-" % (os.getpid(), time.monotonic_ns())
    hub_name = prefix + b"hub"
    hosts = [(first, min(tasks_per_host, n - first)) for first in range(0, n, tasks_per_host)]
    procs = [ctx.Process(target=hub, args=(hub_name, len(hosts), total))]
    for h, (first, count) in enumerate(hosts):
        name = prefix + b"host%d" % h
        procs.append(ctx.Process(target=relay, args=(name, hub_name, count, total)))
        if process_per_task:
            procs += [ctx.Process(target=one_task, args=(first + i, name, total, results))
                      for i in range(count)]
        else:
            procs.append(ctx.Process(target=host_tasks, args=(first, count, name, total, results)))
    return procs
