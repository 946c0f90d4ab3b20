"""The AM's side of the RM (YARN's ApplicationMasterService): register, heartbeat
(allocate), unregister (finish).

A heartbeat carries everything an AM changes (new asks, cancels, releases, blacklist)
and answers everything that happened since its last one (containers granted and ended,
asks rejected or still pending with why, node updates, headroom). What it carries is
checked against the RM's state before any of it is applied (:mod:`.asks`), so a refused
heartbeat changes nothing; with no scheduling interval it runs the scheduler's pass.
"""
from __future__ import annotations

from gangmaster.protocol import rm_validation as check
from gangmaster.protocol.rm_protocol import (
    AllocateRequest, AllocateResponse, AppState, ContainerState, ExitStatus, InvalidRequest, PendingAsk,
    RegisterResponse, Rejection,
)

from .applications import Applications
from .asks import AskIntake
from .containers import Containers
from .nodes import Nodes
from .preemption import Preemptions
from .queue_books import QueueBooks
from .records import Application, AskState
from .scheduler import Scheduler


class ApplicationMasterService:
    """What an AM calls, under the RM's ``lock``. ``node_updates`` False: responses carry
    no node updates; ``scheduling_interval_s`` None: every heartbeat may run a pass."""

    def __init__(self, lock, clock, applications: Applications, granted: Containers, scheduler: Scheduler,
                 intake: AskIntake, nodes: Nodes, books: QueueBooks, node_updates: bool,
                 scheduling_interval_s: float | None, preemptions: Preemptions):
        self.lock, self.clock, self.applications, self.granted = lock, clock, applications, granted
        self.preemptions = preemptions
        self.scheduler, self.intake, self.nodes, self.books = scheduler, intake, nodes, books
        self.node_updates, self.scheduling_interval_s = node_updates, scheduling_interval_s

    def register(self, app_id: str, checked: bool = False) -> RegisterResponse:
        if not checked:
            check.check_name(app_id, "app_id")
        with self.lock:
            app = self.applications.get(app_id)
            self.applications.register(app)
            container = self.granted.container
            previous = (tuple([container(c) for c in app.containers.values() if c.attempt < app.attempt])
                        if app.containers else ())
            return RegisterResponse(app_id, app.attempt, app.queue, self.intake.max_allocation, previous,
                                    self.books.limits[app.queue])

    def allocate(self, request: AllocateRequest, checked: bool = False) -> AllocateResponse:
        """One AM heartbeat. ``checked``: the request's form (types, ranges, names, list
        lengths) was already checked or built by code that cannot get it wrong (see
        :class:`~gangmaster.protocol.rm_client.InProcessRMClient`); what it asks is checked
        against the RM's state either way (known hosts and racks, ids, sizes)."""
        if not checked:
            if not isinstance(request, AllocateRequest):
                raise InvalidRequest(f"request: expected an AllocateRequest, got {type(request).__name__}")
            check.check_allocate(request)
        with self.lock:
            app = self.applications.live_attempt(request.app_id, request.attempt)
            if (request.asks or request.releases or request.cancel or request.blacklist_additions
                    or request.blacklist_removals):
                asks = self._take_request(app, request)
            else:   # a quiet heartbeat (how an AM hears that its containers ended): nothing to check
                app.last_heartbeat = self.clock.now()
                asks = ()
            scheduler = self.scheduler
            if self.scheduling_interval_s is None and scheduler.dirty and scheduler.asking:
                scheduler.run()
            if asks:
                self._reject_never_fitting(app, asks)
            return self._drain(app)

    def _take_request(self, app: Application, request: AllocateRequest) -> list[AskState] | tuple[()]:
        """Check everything an allocate carries against the RM's state, then apply it all (a
        refused call changes nothing); the new asks."""
        intake = self.intake
        asks, asked = intake.asks(app, request) if request.asks else ((), 0)
        releases = intake.releases(app, request) if request.releases else ()
        if asks:
            intake.check_size(app, request, asked, releases)
        blacklist = None
        if request.blacklist_additions or request.blacklist_removals:
            blacklist = ([intake.known_host(h, f"blacklist_additions[{k}]")
                          for k, h in enumerate(request.blacklist_additions)],
                         [intake.known_host(h, f"blacklist_removals[{k}]")
                          for k, h in enumerate(request.blacklist_removals)])
        # Everything is valid: apply.
        app.last_heartbeat = self.clock.now()
        for rec in releases:
            self.granted.finish(rec, ContainerState.KILLED, ExitStatus.ABORTED,
                                    "released by the application master")
        self.scheduler.take(app, asks, request.cancel, blacklist)
        return asks

    def _reject_never_fitting(self, app: Application, asks: list[AskState]) -> None:
        """Reject, in the call that made them, the new asks that can never fit. An ask that
        has been granted a container has shown that it fits, so only those still wholly
        waiting are checked: one that can never fit is never granted, so checking after the
        scheduling pass, not before, rejects the same asks with the same reasons."""
        for ask in asks:
            if ask.remaining < ask.request.count:
                continue
            reason = self.intake.why_never(app, ask)
            if reason:
                del app.asks[ask.request.request_id]
                app.out_rejected += (Rejection(ask.request.request_id, reason),)

    def _drain(self, app: Application) -> AllocateResponse:
        """The response of ``app``'s heartbeat: what happened since its last one."""
        app.response_id += 1
        response = AllocateResponse(
            tuple(map(self.granted.container, app.out_allocated)) if app.out_allocated else (),
            tuple(app.out_completed) if app.out_completed else (),
            self.nodes.updates_for(app) if self.node_updates else (),
            app.out_rejected,
            tuple([PendingAsk(a.request.request_id, a.remaining, a.reason) for a in app.asks.values()])
            if app.asks else (),
            self.books.headroom(app.queue),
            app.response_id,
            self.preemptions.take_notice(app.app_id),
            self.scheduler.reserved_against(app),
            self.scheduler.reservation_of(app),
        )
        if app.out_allocated:
            app.out_allocated = []
        if app.out_completed:
            app.out_completed = []
        if app.out_rejected:
            app.out_rejected = ()
        return response

    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED", diagnostics: str = "",
               checked: bool = False) -> None:
        """The AM unregisters; its remaining containers are killed."""
        if not checked:
            check.check_finish(app_id, attempt, final_status, diagnostics)
        with self.lock:
            app = self.applications.live_attempt(app_id, attempt)
            self.applications.end(app, AppState.FINISHED, final_status, diagnostics,
                                  ExitStatus.KILLED_AFTER_APP_COMPLETION)

