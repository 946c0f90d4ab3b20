"""The scheduler: the asks waiting, and the pass that grants them containers.

A pass runs when anything changed since the last one (new asks, freed resources, node
health: the other collaborators :meth:`~Scheduler.wake` it) and some application has asks
waiting. It serves queues by lowest dominant share first, one container at a time (fair
between queues), and inside a queue the applications in submission order, each one's asks
by priority then arrival (FIFO). An ask that cannot be placed now is skipped for the rest
of the pass (resources only shrink during a pass) and reported pending with the reason.

With a queue of ``policy: reserve`` a pass first plans that queue's reservations
(:mod:`.reservations`): an ask is then not granted on a node reserved for another
application's waiting gang unless its application is declared to end before the gang starts.
"""
from __future__ import annotations

import heapq

import numpy as np

from gangmaster.protocol.reasons import reason
from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.protocol.rm_protocol import AppState, HeldReservation, ReservedNode
from gangmaster.selectors.fit import Demand

from .ledger import Booking, NodeLedger, Refused
from .queue_books import QueueBooks
from .queues import Queue
from .records import Application, AskState
from .reservations import RMReservations


def _submission_order(app: Application) -> int:
    return app.seq


def _ask_priority(ask: AskState) -> int:
    return ask.request.priority


def _asks_in_order(app: Application) -> list[AskState]:
    """The application's asks as a pass serves them: by priority, then arrival."""
    asks = app.asks
    if len(asks) > 1 and any([a.request.priority for a in asks.values()]):
        return sorted(asks.values(), key=_ask_priority)
    return list(asks.values())


def _alike(ask: AskState, reserving: bool = False) -> tuple:
    """What placing ``ask`` depends on in a scheduling pass: asks alike fit or fail alike
    (of one application when it has nodes closed to it: a blacklist, or reservations held)."""
    req, app = ask.request, ask.app
    return (ask.need, req.node_label, ask.host_i, ask.rack_code, req.relax_locality,
            app.app_id if app.blacklist or reserving else None)


class Scheduler:
    """The waiting asks (``asking``: the applications that may have some) and the passes.
    Its grants go through the containers (:meth:`grants_through`, wired once by the RM)."""

    def __init__(self, ledger: NodeLedger, books: QueueBooks, reservations: RMReservations | None = None):
        self.ledger, self.books = ledger, books
        self.containers = None
        #: the reserving queues' reservations (None, or not active: no queue reserves, a pass plans none)
        self.reservations = reservations if reservations is not None and reservations.active else None
        self._reserving = False     # per pass: some reservation is held (asks are checked against them)
        #: The applications that may have asks waiting (a pass looks at these, not at every
        #: running application): added when an allocate brings asks, dropped when their last
        #: ask is granted (or, asks cancelled, rejected or ended with their attempt, by the
        #: next pass): an allocate runs a pass only while some application is here.
        self.asking: dict[str, Application] = {}
        self.dirty = True           # something changed since the last pass
        self._failed: dict = {}     # per pass: ask key -> why it could not be placed
        self._candidates: dict = {}  # per pass: (need, label, rack) -> candidate nodes
        self.version = 0
        #: Applications preempted for a gang that has not started yet: their asks wait until it
        #: has (the room their preemption made is its; :mod:`.preemption_monitor` keeps this)
        self.yielding: set[str] = set()

    def grants_through(self, containers) -> None:
        """The :class:`~.containers.Containers` a pass grants through (they wake it in turn)."""
        self.containers = containers

    def wake(self) -> None:
        """What can be placed may have changed: the next chance runs a pass."""
        self.dirty = True

    def add(self, app: Application, asks: list[AskState]) -> None:
        """New asks of ``app``, checked already, waiting from now on."""
        waiting = app.asks
        for ask in asks:
            waiting[ask.request.request_id] = ask
        self.dirty = True
        self.asking[app.app_id] = app

    def take(self, app: Application, asks: list[AskState], cancel: tuple[int, ...],
             blacklist: tuple[list[int], list[int]] | None) -> None:
        """What an allocate changes of the waiting (checked already): the blacklist's
        additions and removals, the asks it cancels, its new asks."""
        if blacklist is not None:
            add, remove = blacklist
            app.blacklist = app.blacklist.union(add).difference(remove)
            self.dirty = True
        for request_id in cancel:
            if app.asks.pop(request_id, None) is not None:
                self.version += 1
        if asks:
            self.add(app, asks)
        if asks or cancel:
            self.version += 1

    def plan_reservations(self) -> None:
        """Plan the reserving queues' reservations again (a pass starts, or the RM was restored)."""
        if self.reservations is not None:
            self.reservations.plan()
            self._reserving = bool(self.reservations.held)

    def reserved_against(self, app: Application) -> tuple[ReservedNode, ...]:
        """The nodes reserved for other gangs that ``app`` may not be granted on, as of the last
        pass (:meth:`.reservations.RMReservations.closed_nodes`; none when nothing is reserved)."""
        return self.reservations.closed_nodes(app) if self._reserving else ()

    def reservation_of(self, app: Application) -> HeldReservation | None:
        """The reservation held for ``app``'s gang as of the last pass, as its AM is told it."""
        return self.reservations.held_for(app.app_id) if self._reserving else None

    def restore(self, app: Application, asks: list[AskState]) -> None:
        """Asks a state file held for ``app``."""
        for ask in asks:
            app.asks[ask.request.request_id] = ask
        if app.asks:
            self.asking[app.app_id] = app

    def run(self) -> int:
        """A pass, if anything changed since the last; the containers granted. (An allocate
        calls it only when some application asks: with none, a pass grants nothing, and the
        next asks wake it again.)"""
        if not self.dirty:
            return 0
        self.dirty = False
        plans = self._plans()
        if not plans:   # nothing asked, or every ask was served: no pass to make
            return 0
        self.plan_reservations()
        try:
            if len(plans) == 1:   # one queue asks: each ask in turn, granted until it is served or cannot be
                (queue, plan), = plans
                granted = 0
                for ask in plan:
                    while ask.remaining > 0 and self._place(queue, ask):
                        granted += 1
            else:
                granted = self._serve_by_share(plans)
        finally:   # what the pass learnt holds for this pass only
            for _, plan in plans:
                for ask in plan:
                    ask.levels = None
                    ask.blocked = False
            if self._failed:
                self._failed = {}
            if self._candidates:
                self._candidates = {}
        return granted

    def _serve_by_share(self, plans: list[tuple[Queue, list[AskState]]]) -> int:
        """A pass when several queues ask: one container at a time to the queue of lowest
        dominant share, each queue's asks in its plan's order; the containers granted."""
        granted = 0
        by_name = {queue.name: (queue, plan) for queue, plan in plans}
        cursors = dict.fromkeys(by_name, 0)   # per queue: the first of its asks not yet served in full
        heap = [(queue.share(), queue.name) for queue, _ in plans]
        heapq.heapify(heap)
        while heap:
            _, name = heapq.heappop(heap)
            (queue, plan), cursor = by_name[name], cursors[name]
            while cursor < len(plan):
                ask = plan[cursor]
                if ask.remaining > 0 and not ask.blocked and self._place(queue, ask):
                    break
                cursor += 1
            else:   # every ask of the queue is served or cannot be: it leaves the pass
                continue
            # (the next turn starts past an ask this grant served in full)
            cursors[name] = cursor if ask.remaining > 0 else cursor + 1
            granted += 1
            heapq.heappush(heap, (queue.share(), name))
        return granted

    def _plans(self) -> list[tuple[Queue, list[AskState]]]:
        """A pass's plan: each queue with asks, with its asks in the order they are served:
        its running applications in submission order, each one's asks by priority then
        arrival (queues in the order their first application asked). The applications whose
        asks were all served leave :attr:`asking`."""
        asking, queues = self.asking, self.books.queues
        if len(asking) == 1:   # one application asks (a pass at every allocate: the usual case)
            (app,) = asking.values()
            if not app.asks:
                asking.clear()
                return []
            return ([(queues[app.queue], _asks_in_order(app))]
                    if app.state is AppState.RUNNING and not (self.yielding and app.app_id in self.yielding) else [])
        by_queue: dict[str, list[Application]] = {}
        for app_id, app in list(asking.items()):
            if not app.asks:
                del asking[app_id]
            elif app.state is AppState.RUNNING and not (self.yielding and app_id in self.yielding):
                by_queue.setdefault(app.queue, []).append(app)
        plans = []
        for name, apps in by_queue.items():
            if len(apps) > 1:
                apps.sort(key=_submission_order)
            plan: list[AskState] = []
            for app in apps:
                plan += _asks_in_order(app)
            plans.append((queues[name], plan))
        return plans

    def _place(self, queue: Queue, ask: AskState) -> bool:
        """Grant ``ask`` (of ``queue``, still waiting for containers) one container, if its
        queue has room and a node holds it now; else say why, and block it for the pass."""
        app = ask.app
        if app.asks.get(ask.request.request_id) is not ask:   # cancelled, or its attempt ended
            return False
        need = ask.need
        if queue.name not in self.books.boundless and not queue.room_for(need.memory_mb, need.mvcores, need.gpus,
                                                                         need.gpu_milli):
            ask.reason = reason(R.QUEUE_FULL, queue=queue.name, used=queue.share())
            ask.blocked = True
            return False
        # Resources only shrink during a pass: an ask alike one that failed cannot fit either
        # (looked up once some ask of the pass has failed).
        failed = self._failed.get(_alike(ask, self._reserving)) if self._failed else None
        booked = None if failed is not None else self._book_first(ask)
        if booked is None:
            if failed is not None:
                ask.reason = failed
            else:
                self._failed[_alike(ask, self._reserving)] = ask.reason
            ask.blocked = True
            return False
        self.containers.grant(app, ask.request.request_id, *booked)
        ask.remaining -= 1
        if ask.remaining <= 0:
            del app.asks[ask.request.request_id]
            if not app.asks:   # every ask served: the next passes need not look at it
                self.asking.pop(app.app_id, None)
        return True

    def _book_first(self, ask: AskState) -> tuple[int, Booking] | None:
        """Book ``ask`` on the first node, in locality order, that holds it now: the node
        and its booking. Each node is tried by booking it, which checks the fit once and
        names the shortfall only on a refusal. An ask of one host whose locality is not
        relaxed (the AM's, for each instance) tries that host alone, as its one locality
        level would, with no levels listed."""
        ledger = self.ledger
        need, exact = ask.need, ask.exact
        i = ask.host_i
        blacklist = self.reservations.closed_to(ask.app) if self._reserving else ask.app.blacklist
        if i is not None and not ask.request.relax_locality:   # its one host (what _levels would list)
            label = ask.request.node_label
            lent = i in blacklist and self._lent(ask, i)
            if i in blacklist and not lent and i not in ask.app.blacklist:   # reserved for another's gang
                ask.reason = self.reservations.why_closed(ask.app, i)
                return None
            if (i not in blacklist or lent) and (not label or ledger.label_scope(label)[i]):
                try:
                    return i, ledger.book(i, need, exact)
                except Refused as refused:
                    ask.reason = refused.reason
                    return None
            if not ask.reason:
                ask.reason = reason(R.NO_NODE_FREE, host=ask.request.host, rack="", resource=str(ask.request.resource))
            return None
        if ask.levels is None:
            ask.levels = self._levels(ask)
            ask.level = ask.pos = 0
        levels = ask.levels
        while ask.level < len(levels):
            nodes = levels[ask.level]
            if callable(nodes):
                nodes = levels[ask.level] = nodes()
            while ask.pos < len(nodes):
                i = int(nodes[ask.pos])
                if i in blacklist and not self._lent(ask, i):
                    ask.pos += 1
                    continue
                try:
                    return i, ledger.book(i, need, exact)
                except Refused as refused:
                    if ask.level == 0 and ask.host_i is not None:
                        ask.reason = refused.reason
                ask.pos += 1
            ask.level += 1
            ask.pos = 0
        if not ask.reason or ask.host_i is None or ask.request.relax_locality:
            req = ask.request
            if ask.host_i is not None and ask.reason:
                ask.reason = reason(R.NO_NODE_FREE_BECAUSE, host=req.host or "", rack=req.rack or "",
                                    resource=str(req.resource), cause=ask.reason)
            else:
                ask.reason = reason(R.NO_NODE_FREE, host=req.host or "", rack=req.rack or "",
                                    resource=str(req.resource))
        return None

    def _lent(self, ask: AskState, i: int) -> bool:
        """Whether node ``i``, closed to ``ask``'s application, is closed only by reservations
        that still lend it the GPUs it asks (not by its blacklist)."""
        return (self._reserving and i not in ask.app.blacklist
                and self.reservations.lends(ask.app, i, ask.need.gpus if not ask.need.gpu_milli else 0))

    def _levels(self, ask: AskState) -> list:
        """Where to look, in order: the host, its rack, anywhere (as far as locality is relaxed)."""
        ledger, need, req = self.ledger, ask.need, ask.request
        label = ledger.label_scope(req.node_label)
        levels: list = []
        if ask.host_i is not None:
            if label is None or label[ask.host_i]:
                levels.append((ask.host_i,))
            if not req.relax_locality:
                return levels
        rack = ask.rack_code if ask.rack_code is not None else (
            int(ledger.rack_of[ask.host_i]) if ask.host_i is not None else None)
        if rack is not None:
            levels.append(lambda: self._candidates_of(need, req.node_label, rack))
            if not req.relax_locality:
                return levels
        levels.append(lambda: self._candidates_of(need, req.node_label, None))
        return levels

    def _candidates_of(self, need: Demand, label: str | None, rack: int | None) -> np.ndarray:
        """Nodes that could hold ``need`` now, computed once per pass per (need, label, rack):
        during a pass resources only shrink, so an earlier list is a superset of the truth
        and every node taken from it is checked again before booking."""
        key = (need, label, rack)
        found = self._candidates.get(key)
        if found is None:
            ledger = self.ledger
            scope = ledger.label_scope(label)
            if rack is not None:
                in_rack = ledger.rack_of == rack
                scope = in_rack if scope is None else scope & in_rack
            found = self._candidates[key] = ledger.candidates(need, scope)
        return found
