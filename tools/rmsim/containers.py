"""The containers (YARN's RMContainer): every container the RM granted, from its grant
until it is forgotten, where each one runs, and how each one ends.

A container's life: granted (ALLOCATED, its booking taken on its node and charged to its
queue), started by its AM (RUNNING), ended (COMPLETED, FAILED, KILLED). Ending gives its
booking back at once, unless its processes may still run (a stopped task keeps its GPUs
until the NodeManager reports it gone: ``held``). A container granted and never started
is taken back after the allocation expiry. What the RM remembers of finished containers
is bounded (RM_MAX_FINISHED_CONTAINERS: past it the tenth that finished first is forgotten).

In the state file this collaborator's part is the ``containers`` list and the next id's
number ``next_container``.
"""
from __future__ import annotations

from typing import Callable

from gangmaster.protocol.rm_protocol import (AppState, Container, ContainerState, ContainerStatus, ExitStatus,
                                             LaunchContext, NodeState, NotFound, WrongState)
from gangmaster.conf import limits
from gangmaster.selectors.ports import PortRanges

from .events import Events
from .ledger import Booking, NodeLedger
from .node_changes import NodeChanges
from .queue_books import QueueBooks
from .records import Application, ContainerRecord


class Containers:
    """Every container (``records``: by id, in grant order, finished ones too, until forgotten)
    and the live ones on each node (``on_node``). ``lock``: the RM's (its timers take it);
    ``apps``: the applications' records by id
    (read to find a container's application); ``wake``: tells the scheduler that what can
    be placed may have changed."""

    def __init__(self, ledger: NodeLedger, books: QueueBooks, changes: NodeChanges, clock, lock, node_manager,
                 events: Events, apps: dict[str, Application], wake: Callable[[], None],
                 allocation_expiry_s: float | None):
        self.ledger, self.books, self.changes, self.clock, self.lock = ledger, books, changes, clock, lock
        self.node_manager, self.events, self.apps, self.wake = node_manager, events, apps, wake
        self._heard = events.heard
        self.records: dict[str, ContainerRecord] = {}
        self.on_node: list[set] = [set() for _ in range(len(ledger))]
        self.next_id = 1
        self.allocation_expiry_s = allocation_expiry_s   # YARN: a granted container never started is taken back
        self._forget_at = limits.RM_MAX_FINISHED_CONTAINERS   # see _forget_old
        self.version = 0

    def get(self, container_id: str) -> ContainerRecord:
        rec = self.records.get(container_id)
        if rec is None:
            raise NotFound(f"container_id: unknown container {container_id!r}")
        return rec

    def grant(self, app: Application, request_id: int, node: int, booking: Booking) -> ContainerRecord:
        """A new container of ``app`` on ``node``, holding ``booking`` (already taken on the
        node: the scheduler booked it), for its AM's next response."""
        cid = "container_%04d_%02d_%06d" % (app.seq, app.attempt, self.next_id)
        self.next_id += 1
        rec = ContainerRecord(cid, app.app_id, app.attempt, node, booking, request_id, self.clock.now())
        self.records[cid] = rec
        app.containers[cid] = rec
        app.container_ids.append(cid)
        self.on_node[node].add(cid)
        self.changes.touch(node)
        books = self.books
        books.charge(books.queues[app.queue], booking.held)
        app.out_allocated.append(rec)
        if self.allocation_expiry_s is not None:
            self._arm_expiry(rec)
        self.version += 1
        if "container_allocated" in self._heard:
            self.events.emit("container_allocated", app.app_id, cid, self.ledger.hosts[node])
        return rec

    def started(self, rec: ContainerRecord, launch: LaunchContext) -> None:
        """The NodeManager launched ``rec`` with ``launch``: it is RUNNING."""
        rec.state = ContainerState.RUNNING
        rec.started_at = self.clock.now()
        if rec.expiry is not None:
            self._disarm_expiry(rec)
        rec.launch = launch
        self.version += 1
        if "container_started" in self._heard:
            self.events.emit("container_started", rec.app_id, rec.container_id, self.ledger.hosts[rec.node])

    def startable(self, container_id: str) -> ContainerRecord:
        """The record of container ``container_id``, to be started: NotFound when there is
        none, WrongState when it is not ALLOCATED, its application not running or its node lost."""
        rec = self.get(container_id)
        app = self.apps[rec.app_id]
        if rec.state is not ContainerState.ALLOCATED:
            raise WrongState(f"container {container_id} is {rec.state.value}; only an ALLOCATED "
                             f"container can be started")
        if app.state is not AppState.RUNNING:
            raise WrongState(f"application {app.app_id} is {app.state.value}")
        if self.ledger.states[rec.node] is NodeState.LOST:
            raise WrongState(f"container {container_id}: host {self.ledger.hosts[rec.node]} is LOST")
        return rec

    def exited(self, rec: ContainerRecord, exit_code: int, diagnostics: str,
               preempted: tuple[ContainerState, int, str] | None) -> None:
        """``rec``'s process ended by itself with ``exit_code``: it completed or failed, or,
        when it ended under a preemption notice (``preempted``: how the notice ends it), the
        notice ended it."""
        if preempted is not None:
            self.finish(rec, *preempted, stop=False)
            return
        state = ContainerState.COMPLETED if exit_code == 0 else ContainerState.FAILED
        self.finish(rec, state, exit_code, diagnostics or f"process exited with code {exit_code}", stop=False)

    def end_on_node(self, i: int, diagnostics: str) -> None:
        """Node ``i`` was lost: every container on it ends KILLED (``NODE_LOST``), in id order."""
        for cid in sorted(self.on_node[i]):
            self.finish(self.records[cid], ContainerState.KILLED, ExitStatus.NODE_LOST, diagnostics)

    def finish(self, rec: ContainerRecord, state: ContainerState, exit_status: int, diagnostics: str,
               stop: bool = True) -> None:
        """``rec`` ends ``state``; ``stop``: the NodeManager is told to stop its processes (not
        when they ended by themselves)."""
        was_running = rec.state is ContainerState.RUNNING
        if rec.expiry is not None:
            self._disarm_expiry(rec)
        rec.state, rec.exit_status, rec.diagnostics = state, int(exit_status), diagnostics
        rec.finished_at = self.clock.now()
        app = self.apps[rec.app_id]
        app.containers.pop(rec.container_id, None)
        rec.held = stop and was_running and not self.node_manager.frees_at_once
        if not rec.held:
            self._give_back(rec, app)
        if rec in app.out_allocated:   # granted but never delivered: the AM never hears of it
            app.out_allocated.remove(rec)
        elif not app.state.finished:
            app.out_completed.append(self.status(rec))
        self.wake()
        self.version += 1
        if stop and was_running:
            rec.stopping = True
            self.node_manager.stop(rec)
        if "container_finished" in self._heard:   # (its detail formatted when read: a replay hears of every one)
            self.events.emit("container_finished", rec.app_id, rec.container_id, self.ledger.hosts[rec.node],
                             ("{0.value} exit={1} {2}", state, exit_status, diagnostics))
        if len(self.records) > self._forget_at:
            self._forget_old()

    def released(self, container_id: str) -> None:
        """The NodeManager reports that a stopped container's processes are all gone: what
        it booked is free again."""
        rec = self.records.get(container_id)
        if rec is None or not rec.held:
            return
        rec.held = False
        self._give_back(rec, self.apps[rec.app_id])
        self.wake()
        self.version += 1

    def _give_back(self, rec: ContainerRecord, app: Application) -> None:
        """Free what a finished container (of ``app``) booked, on its node and in its queue."""
        node, booking = rec.node, rec.booking
        self.ledger.give_back(node, booking)
        self.on_node[node].discard(rec.container_id)
        self.changes.touch(node)
        books = self.books
        books.charge(books.queues[app.queue], booking.returned)

    # ---- what the AMs are told
    def container(self, rec: ContainerRecord) -> Container:
        ledger = self.ledger
        return Container(rec.container_id, rec.app_id, rec.attempt, ledger.hosts[rec.node],
                         ledger.specs[rec.node].rack, rec.booking.resource, rec.request_id, rec.allocated_at)

    def status(self, rec: ContainerRecord) -> ContainerStatus:
        return ContainerStatus(rec.container_id, self.ledger.hosts[rec.node], rec.state, rec.exit_status,
                               rec.diagnostics, rec.request_id)

    # ---- allocation expiry
    def restart_expiry(self, expiry_s: float | None) -> None:
        """Use ``expiry_s`` from now on, and give every container still ALLOCATED a full
        expiry from now (a restored RM: its clock restarted, its timers were not saved)."""
        self.allocation_expiry_s = expiry_s
        for rec in self.records.values():
            if rec.state is ContainerState.ALLOCATED:
                self._disarm_expiry(rec)
                self._arm_expiry(rec)

    def _arm_expiry(self, rec: ContainerRecord) -> None:
        if self.allocation_expiry_s is not None:
            rec.expiry = self.clock.call_later(self.allocation_expiry_s, self._expire, rec)

    def _expire(self, rec: ContainerRecord) -> None:
        with self.lock:   # (a timer of the clock: it calls in from outside the RM's calls)
            if rec.state is ContainerState.ALLOCATED:
                self.finish(rec, ContainerState.KILLED, ExitStatus.ABORTED,
                            f"container expired: not started within {self.allocation_expiry_s:g}s")

    def _disarm_expiry(self, rec: ContainerRecord) -> None:
        """The container left ALLOCATED: its expiry timer would do nothing, and in virtual time
        a pending timer reads as an event still to come (``VirtualLoop.has_one_shot_calls``)."""
        if rec.expiry is not None:
            self.clock.cancel(rec.expiry)
            rec.expiry = None

    # ---- history
    def forget(self, container_ids: list[str]) -> None:
        """Forget the containers of an application forgotten (some may be forgotten already)."""
        records = self.records
        for cid in container_ids:
            records.pop(cid, None)

    def _forget_old(self) -> None:
        """Past RM_MAX_FINISHED_CONTAINERS finished containers, forget the oldest tenth of
        them (their status then answers NOT_FOUND); the next check waits for a tenth of the
        limit more containers, so a pass is paid for rarely however many are live."""
        limit = limits.RM_MAX_FINISHED_CONTAINERS
        finished = [cid for cid, rec in self.records.items() if rec.state.finished and not rec.held]
        if len(finished) > limit:
            for cid in finished[:len(finished) - limit + limit // 10]:
                del self.records[cid]
            self.version += 1
        self._forget_at = len(self.records) + limit // 10

    # ---- the state file's part
    def snapshot(self) -> list[dict]:
        return [_saved(c) for c in self.records.values()]

    def restore(self, saved: list[dict], next_id: int) -> None:
        """The containers a state file holds, before their applications are restored."""
        self.next_id = next_id
        for c in saved:
            launch = c["launch"]
            rec = ContainerRecord(
                c["container_id"], c["app_id"], c["attempt"], c["node"],
                Booking(c["memory_mb"], c["mvcores"], c["gpu_mask"], PortRanges.of(*c["port_ranges"]),
                        c.get("gpu_milli", 0)),
                c["request_id"], c["allocated_at"])
            rec.state, rec.exit_status = ContainerState(c["state"]), c["exit_status"]
            rec.diagnostics, rec.started_at, rec.finished_at = c["diagnostics"], c["started_at"], c["finished_at"]
            # (files written before the workload model also hold "duration_s" and "exit_code": unused)
            rec.launch = (LaunchContext(tuple(launch["command"]), tuple(tuple(e) for e in launch["env"]))
                          if launch else None)
            rec.handle = c["handle"]
            rec.held = c.get("held", False) is True   # files before "held" hold none
            self.records[rec.container_id] = rec

    def rebook(self) -> None:
        """Book every live (or held) restored container again, through the ledger (which
        refuses a double booking), in its queue, and hand it back to the NodeManager. Its
        application is restored already."""
        for rec in self.records.values():
            if rec.state.finished and not rec.held:
                continue
            self.ledger.take(rec.node, rec.booking)
            self.on_node[rec.node].add(rec.container_id)
            app = self.apps[rec.app_id]
            if not rec.held:
                app.containers[rec.container_id] = rec
            self.books.charge(self.books.queues[app.queue], rec.booking.held)
            if rec.state is ContainerState.RUNNING:
                self.node_manager.adopt(rec)
            elif rec.held:                               # it was being stopped when the RM went down
                self.node_manager.adopt_stopping(rec)


def _saved(c: ContainerRecord) -> dict:
    b = c.booking
    launch = None
    if c.launch is not None:
        launch = {"command": list(c.launch.command), "env": [list(e) for e in c.launch.env]}
    return {"container_id": c.container_id, "app_id": c.app_id, "attempt": c.attempt, "node": c.node,
            "memory_mb": b.memory_mb, "mvcores": b.mvcores, "gpu_mask": b.gpu_mask, "gpu_milli": b.gpu_milli,
            "port_ranges": [list(r) for r in b.port_ranges.ranges], "request_id": c.request_id,
            "allocated_at": c.allocated_at, "state": c.state.value, "exit_status": c.exit_status,
            "diagnostics": c.diagnostics, "started_at": c.started_at, "finished_at": c.finished_at,
            "launch": launch, "handle": dict(c.handle), "held": c.held}
