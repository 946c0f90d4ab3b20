"""The RM's reservations: nodes held for the waiting gangs of queues with ``policy: reserve``.

An application's AM asks for its gang's containers only once select() finds room for the
whole gang, so a big gang among a stream of smaller jobs asks nothing the scheduler could
skip: it simply never sees room, while every smaller job takes what frees up (it starves).
A reserving queue (:mod:`.queues`) keeps room for it instead. At each scheduling pass its
oldest applications that were never granted a container and declared a gang (the submission's
``gang``: :func:`~gangmaster.am.core.reservation_plan.declared_gang`) are planned by the one
planner the trace replay and the diagnosis use
(:func:`~gangmaster.am.core.reservation_plan.plan_start`): the nodes where the gang starts
earliest, given each running container's expected end (when it started plus its
application's declared duration; an application that declared none holds its GPUs for an
unknown time, which the plan never counts on). At most the queue's ``max_reservations``
gangs, and ``cluster_reservations`` of every reserving queue together, hold one that cannot
start now, the first by rank (the queue's priority, then the job's, then age: a higher-priority
gang that comes takes the reservation over), each planned after the ones before it; a gang
reserves only once it waited its queue's ``reserve_after_s``.

A reservation binds the applications ranked after its gang: a reserved node is closed to
their asks unless the application is declared to end by the reservation's start
(:meth:`Reservation.admits`: backfill never delays the gang), or the node can still lend
the GPUs it asks (:meth:`RMReservations.lends`: what the node will have free at the start
beyond what the reservations need there). The gang's own asks, and every ask on other nodes,
are served as always. Each allocate answer tells an application's AM the reserved nodes closed
to it (:meth:`RMReservations.closed_nodes`), so that it places its gang elsewhere rather than
asking where it would wait for the reservation to end, and the reservation held for its own
gang (:meth:`RMReservations.held_for`), which its diagnosis reads. The planner counts GPUs
only. A gang that can start now keeps its nodes for the pass in which its AM asks for them
(its plan starts now, so it admits no one), uncounted by the bounds, and drops its
reservation once it is granted containers.
Only a first start is planned: a gang that was granted containers and waits again (a retry,
a partial hold given back) waits as under ``fifo``.

Nothing is booked: free + used = capacity on every node throughout. A queue of another
policy reserves nothing, and with no reserving queue the scheduler never looks here.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping

from gangmaster.protocol.reasons import Reason, reason
from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.am.core.reservation_plan import DECLARED, UNKNOWN, Hold, Reservation, plan_start
from gangmaster.protocol.rm_protocol import AppState, HeldReservation, ReservedNode

from .ledger import NodeLedger
from .queue_books import QueueBooks
from .records import Application


class RMReservations:
    """The reservations of one scheduling pass, by node, and who they leave a node open to."""

    def __init__(self, ledger: NodeLedger, books: QueueBooks, apps: Mapping[str, Application],
                 now: Callable[[], float]):
        self.ledger, self.books, self.apps, self.now = ledger, books, apps, now
        #: whether some queue reserves (else a pass never plans: the scheduler skips this book)
        self.active = any(queue.policy == "reserve" for queue in books.queues.values())
        self.held: list[tuple[str, Reservation]] = []       # (owner's app id, its reservation), in order
        self._on_node: dict[int, list[tuple[str, Reservation]]] = {}
        self._closed: dict[str, frozenset[int]] = {}        # app id -> reserved nodes closed to it (this pass)
        self._back: dict[int, list[Hold]] = {}               # node -> the running containers' holds on it

    def plan(self) -> None:
        """Plan every reserving queue's reservations again (a pass starts: the plan may have changed)."""
        self.held, self._on_node, self._closed = [], {}, {}
        ledger, now = self.ledger, self.now()
        free = {host: (int(ledger.gpus_free[i]) if ledger.usable[i] else 0) for i, host in enumerate(ledger.hosts)}
        holds = self._running_holds(now)
        self._back = {}
        for hold in holds:
            self._back.setdefault(ledger.host_index[hold.host], []).append(hold)
        reserving = [queue for queue in self.books.queues.values() if queue.policy == "reserve"]
        bound = max(queue.cluster_reservations for queue in reserving)
        reserved = dict.fromkeys((queue.name for queue in reserving), 0)
        waiting = 0   # the gangs holding one that cannot start now
        for queue, app in self._candidates(reserving, now):
            if waiting >= bound:
                break
            if reserved[queue.name] >= queue.max_reservations:
                continue
            planned = plan_start(now, free, holds, app.gang, app.expected_s, app.name)
            if planned is None:
                continue
            if planned.start_s > now:   # (one that fits now keeps its nodes, uncounted, until its AM asks)
                reserved[queue.name] += 1
                waiting += 1
            self.held.append((app.app_id, planned))
            holds += planned.holds()
        for app_id, reservation in self.held:
            for host in reservation.gpus_by_host:
                self._on_node.setdefault(ledger.host_index[host], []).append((app_id, reservation))

    def _rank(self, app: Application) -> tuple:
        """An application's place among the gangs that may reserve: higher priority (its queue's,
        then its own) first, then older first."""
        queue = self.books.queues.get(app.queue)
        return (-(queue.priority if queue is not None else 0), -app.priority, app.seq)

    def _before(self, owner: str, app: Application) -> bool:
        """Whether the reservation of ``owner`` binds ``app``: it ranks before it (a gang's
        reservation never holds back an older or higher-priority application)."""
        holder = self.apps.get(owner)
        return owner != app.app_id and holder is not None and self._rank(holder) < self._rank(app)

    def _candidates(self, reserving, now: float):
        """The gangs that may reserve, first first: of every reserving queue, those waiting for
        their first start that waited the queue's ``reserve_after_s``, by priority (the queue's,
        then the job's: a higher-priority gang that comes takes the reservation over), then age."""
        found = [(self._rank(app), queue, app) for queue in reserving
                 for app in self._waiting(queue) if now - app.submitted_at >= queue.reserve_after_s]
        found.sort(key=lambda item: item[0])
        return [(queue, app) for _, queue, app in found]

    def lends(self, app: Application, i: int, gpus: int) -> bool:
        """Whether node ``i``, reserved for other gangs that ``app`` would delay, can still give
        it ``gpus`` whole GPUs: at each such reservation's start the node must keep free what the
        reservations holding it then need (free now, plus what its running containers give back
        by then). A node is not held whole: what its gang will not need there is lent."""
        if gpus <= 0:   # (a share of a GPU, or no GPU: the plan counts whole GPUs only, it stays closed)
            return False
        end = math.inf if app.expected_s is None else self.now() + app.expected_s
        host = self.ledger.hosts[i]
        free = int(self.ledger.gpus_free[i])
        on_node = self._on_node.get(i, ())
        for owner, r in on_node:
            if not self._before(owner, app) or r.admits(end):
                continue
            back = sum(hold.gpus for hold in self._back.get(i, ()) if hold.end_s <= r.start_s)
            held = sum(other.gpus_by_host[host] for _, other in on_node if other.start_s <= r.start_s < other.end_s)
            if free + back - held < gpus:
                return False
        return True

    def closed_to(self, app: Application) -> frozenset[int]:
        """The nodes ``app`` may not be granted on this pass: its blacklist and the reserved
        nodes it would delay (it is not declared to end by the reservation's start)."""
        closed = self._closed.get(app.app_id)
        if closed is None:
            end = math.inf if app.expected_s is None else self.now() + app.expected_s
            reserved = {i for i, held in self._on_node.items()
                        if any(self._before(owner, app) and not r.admits(end) for owner, r in held)}
            closed = self._closed[app.app_id] = app.blacklist | reserved
        return closed

    def closed_nodes(self, app: Application) -> tuple[ReservedNode, ...]:
        """The reserved nodes closed to ``app`` this pass (its blacklist left out: its AM knows
        that one), each from the earliest start of the reservations that close it: what its AM
        is told, so that it places elsewhere (``AllocateResponse.reserved``)."""
        closed = self.closed_to(app)
        if not closed:
            return ()
        end = math.inf if app.expected_s is None else self.now() + app.expected_s
        hosts = self.ledger.hosts
        return tuple([ReservedNode(hosts[i], min(r.start_s for owner, r in self._on_node[i]
                                                 if self._before(owner, app) and not r.admits(end)))
                      for i in sorted(closed) if i not in app.blacklist])

    def why_closed(self, app: Application, i: int) -> Reason:
        """Why node ``i`` is closed to ``app`` (a pending ask's reason)."""
        for owner, reservation in self._on_node.get(i, ()):
            if self._before(owner, app):
                wait = max(0.0, reservation.start_s - self.now())
                return reason(R.RESERVED_FOR, host=self.ledger.hosts[i], gang=self.apps[owner].name, app_id=owner,
                              wait_s=wait)
        return reason(R.BLACKLISTED, host=self.ledger.hosts[i])

    def reserved_for(self, app_id: str) -> Reservation | None:
        """The reservation ``app_id`` holds this pass, if any (for its diagnosis)."""
        return next((r for owner, r in self.held if owner == app_id), None)

    def held_for(self, app_id: str) -> HeldReservation | None:
        """:meth:`reserved_for` as its AM is told it, counted from now (``AllocateResponse.reservation``)."""
        held = self.reserved_for(app_id)
        if held is None:
            return None
        duration = None if math.isinf(held.end_s) else held.end_s - held.start_s
        return HeldReservation(max(0.0, held.start_s - self.now()), duration, tuple(held.gpus_by_host.items()),
                               held.waits_for, held.known)

    def _waiting(self, queue):
        """The queue's running applications, oldest first, that declared a gang and were never
        granted a container: waiting for their first start. (One that was granted some has
        started, or its AM gave a partial hold back: it is not planned, nor is a gang's retry.)"""
        apps = self.apps
        for app_id in queue.apps:
            app = apps.get(app_id)
            if app is not None and app.state is AppState.RUNNING and app.gang and not app.container_ids:
                yield app

    def _running_holds(self, now: float) -> list[Hold]:
        """Each live container's GPUs, held until its application's declared end (unknown: never)."""
        holds = []
        hosts, apps = self.ledger.hosts, self.apps
        for app in apps.values():
            for rec in app.containers.values():
                whole = rec.booking.held[2]
                if not whole:
                    continue
                since = rec.started_at if rec.started_at is not None else rec.allocated_at
                end = math.inf if app.expected_s is None else since + app.expected_s
                holds.append(Hold(hosts[rec.node], whole, -math.inf, max(end, now), app.name,
                                  UNKNOWN if app.expected_s is None else DECLARED))
        return holds
