"""The applications (YARN's RMAppManager and RMApp, with the AMLivelinessMonitor): every
application the RM accepted, from its submission until it is forgotten, and its attempts.

An application's life: submitted (ACCEPTED, waiting for its AM), registered (RUNNING),
then FINISHED (its AM unregistered), KILLED (a client or a fault) or FAILED (its last
attempt failed). An attempt fails when its AM dies or stops heartbeating for its expiry;
a new attempt is ACCEPTED while attempts remain (keeping its containers when the
application asked for that). What the RM remembers of finished applications is bounded
(RM_MAX_COMPLETED_APPS: past it the tenth that finished first is forgotten, with their
containers). In the state file this collaborator's part is the ``apps`` list and the next
id's number ``next_app``.
"""
from __future__ import annotations

from typing import Callable

from gangmaster.protocol import rm_validation as check
from gangmaster.protocol.reasons import from_saved, to_saved
from gangmaster.protocol.rm_protocol import (
    ApplicationReport, ApplicationSubmission, AppState, ContainerState, ContainerStatus, ExitStatus, GangRole,
    InvalidRequest, NotFound, Rejection, WrongState,
)
from gangmaster.conf import limits
from gangmaster.selectors.resources import ResourceDescriptor

from .containers import Containers
from .events import Events
from .node_changes import NodeChanges
from .queue_books import QueueBooks
from .records import NO_NODES, Application


class Applications:
    """The applications (``apps``: by id, in submission order, until forgotten; the dict
    :class:`~.containers.Containers` reads) and the finished ones in the order they finished
    (``finished``: what is forgotten first). ``wake``: tells the scheduler that what can be
    placed may have changed; ``lock``: the RM's (the AM expiry timers take it)."""

    def __init__(self, apps: dict[str, Application], books: QueueBooks, containers: Containers, changes: NodeChanges,
                 clock, lock, events: Events, wake: Callable[[], None], max_running: int):
        self.apps, self.books, self.containers, self.changes = apps, books, containers, changes
        self.clock, self.lock, self.events, self.wake = clock, lock, events, wake
        self._heard = events.heard
        self.finished: dict[str, Application] = {}
        #: applications submitted and not finished (every queue's ``apps``), kept as they come and go
        self.running = books.running_apps()
        self.max_running = max_running
        self.next_seq = 1
        self.version = 0

    def get(self, app_id: str) -> Application:
        app = self.apps.get(app_id)
        if app is None:
            raise NotFound(f"app_id: unknown application {app_id!r}")
        return app

    def live_attempt(self, app_id: str, attempt: int) -> Application:
        """The application whose running attempt is ``attempt`` (WrongState for any other)."""
        app = self.apps.get(app_id)
        if app is not None and app.state is AppState.RUNNING and app.attempt == attempt:
            return app
        app = self.get(app_id)   # raises NotFound for an unknown application
        raise WrongState(f"application {app_id} attempt {attempt} is not the running attempt "
                         f"(application {app.state.value}, attempt {app.attempt})")

    def submit(self, submission: ApplicationSubmission) -> str:
        queues = self.books.queues
        if submission.queue not in queues:
            raise NotFound(f"queue: unknown queue {submission.queue!r}; queues: {', '.join(queues)}")
        running = self.running
        if running >= self.max_running:
            raise WrongState(f"{running} applications are running, the most the RM takes at once "
                             f"(RM_MAX_RUNNING_APPS); submit again when one has finished")
        seq = self.next_seq
        self.next_seq += 1
        app_id = "app_%04d" % seq   # (as an f-string's format specs would, in one call)
        app = Application(app_id, seq, submission.name, submission.queue, self.clock.now(),
                          submission.max_attempts, submission.keep_containers_across_attempts,
                          submission.am_expiry_s, submission.priority, submission.gang,
                          submission.expected_duration_s)
        self.apps[app_id] = app
        queues[submission.queue].apps[app_id] = None
        self.running += 1
        self.version += 1
        if "app_submitted" in self._heard:
            self.events.emit("app_submitted", app_id, detail=submission.queue)
        return app_id

    def register(self, app: Application) -> None:
        """Its AM attempt registered: the application RUNS (and its AM is watched)."""
        if app.state is not AppState.ACCEPTED:
            raise WrongState(f"application {app.app_id} is {app.state.value}; only an ACCEPTED application "
                             f"(waiting for its AM attempt {app.attempt}) can register")
        app.state = AppState.RUNNING
        app.last_heartbeat = self.clock.now()
        app.node_cursor = self.changes.seq   # the AM reads cluster_nodes() once, then the changes
        if app.am_expiry_s is not None:
            self.watch(app)
        self.version += 1
        if "app_registered" in self._heard:
            self.events.emit("app_registered", app.app_id, detail=f"attempt {app.attempt}")

    def end(self, app: Application, state: AppState, final_status: str, diagnostics: str, exit_status: int) -> None:
        """The application ends ``state``; its live containers end KILLED with ``exit_status``."""
        app.state = state
        app.final_status, app.diagnostics = final_status, diagnostics
        app.finished_at = self.clock.now()
        app.asks.clear()
        if app.expiry_timer is not None:
            self.clock.cancel(app.expiry_timer)
        if app.containers:
            for cid in sorted(app.containers):
                self.containers.finish(app.containers[cid], ContainerState.KILLED, exit_status,
                                       f"application {app.app_id} {state.value.lower()}")
        del self.books.queues[app.queue].apps[app.app_id]
        self.running -= 1
        self.wake()
        self.version += 1
        self.finished[app.app_id] = app
        if "app_finished" in self._heard:
            self.events.emit("app_finished", app.app_id, detail=f"{state.value} {final_status} {diagnostics}")
        if len(self.finished) > limits.RM_MAX_COMPLETED_APPS:
            self._forget_old()

    def fail_attempt(self, app: Application, diagnostics: str) -> None:
        """The running attempt failed: the application fails with its last attempt, else
        waits for the next one (keeping its running containers when it asked for that)."""
        if app.attempt >= app.max_attempts:
            self.end(app, AppState.FAILED, "FAILED", f"attempt {app.attempt} of {app.max_attempts} failed: {diagnostics}",
                     ExitStatus.KILLED_AFTER_APP_COMPLETION)
            return
        failed = app.attempt
        for cid in sorted(app.containers):
            rec = app.containers[cid]
            if not app.keep_containers or rec.state is ContainerState.ALLOCATED:
                self.containers.finish(rec, ContainerState.KILLED, ExitStatus.KILLED_AFTER_APP_COMPLETION,
                                       f"AM attempt {failed} ended: {diagnostics}")
        app.attempt += 1
        app.state = AppState.ACCEPTED
        app.asks.clear()
        app.blacklist = NO_NODES
        app.out_allocated, app.out_completed, app.out_rejected = [], [], ()
        app.diagnostics = f"attempt {failed} failed: {diagnostics}"
        if app.expiry_timer is not None:
            self.clock.cancel(app.expiry_timer)
        self.wake()
        self.version += 1
        self.events.emit("attempt_failed", app.app_id, detail=f"attempt {failed} failed ({diagnostics}); "
                                                                f"attempt {app.attempt} may register")

    def watch(self, app: Application) -> None:
        """Fail the running attempt if its AM does not heartbeat for ``am_expiry_s``."""
        if app.am_expiry_s is None:
            return
        if app.expiry_timer is not None:
            self.clock.cancel(app.expiry_timer)
        attempt = app.attempt

        def check() -> None:
            with self.lock:
                if app.state is not AppState.RUNNING or app.attempt != attempt:
                    return
                due = app.last_heartbeat + app.am_expiry_s
                if self.clock.now() + 1e-9 >= due:
                    self.fail_attempt(app, f"no heartbeat for {app.am_expiry_s:g}s")
                else:
                    app.expiry_timer = self.clock.call_at(due, check)

        app.expiry_timer = self.clock.call_at(app.last_heartbeat + app.am_expiry_s, check)

    def report(self, app: Application) -> ApplicationReport:
        running = sum(1 for c in app.containers.values() if c.state is ContainerState.RUNNING)
        mem = mvc = gpus = gpu_milli = 0
        for c in app.containers.values():
            mem += c.booking.memory_mb
            mvc += c.booking.mvcores
            gpus += c.booking.demand.gpus
            gpu_milli += c.booking.gpu_milli
        records = self.containers.records   # its containers stopped whose processes are not gone yet
        stopping = sum(1 for cid in app.container_ids if (rec := records.get(cid)) is not None and rec.held)
        return ApplicationReport(
            app.app_id, app.name, app.queue, app.state, app.attempt, app.submitted_at, app.finished_at,
            app.final_status, app.diagnostics, running, sum(a.remaining for a in app.asks.values()),
            ResourceDescriptor(mem, mvc / 1000.0, gpus), gpu_milli, stopping)

    def _forget_old(self) -> None:
        """Past RM_MAX_COMPLETED_APPS finished applications, forget the tenth of them that
        finished first (with their containers), as YARN forgets its completed applications:
        memory stays bounded however many applications come and go, and the cost of a pass
        is spread over a tenth of the limit's application ends. The pass reads the finished
        applications in the order they finished, never the running ones nor every container
        the RM remembers: an application is forgotten with the containers it was granted
        (its own list); one whose booking is still held (a stopped container whose processes
        are not gone yet) is kept until it is released."""
        finished = self.finished
        limit = limits.RM_MAX_COMPLETED_APPS
        if len(finished) <= limit:
            return
        drop = len(finished) - limit + limit // 10
        records = self.containers.records
        gone = []
        for app in finished.values():
            if len(gone) >= drop:
                break
            for cid in app.container_ids:
                rec = records.get(cid)
                if rec is not None and rec.held:
                    break
            else:   # none of its containers holds its booking
                gone.append(app)
        for app in gone:
            del self.apps[app.app_id]
            del finished[app.app_id]
            self.containers.forget(app.container_ids)
        self.version += 1

    # ---- the state file's part
    def snapshot(self, hosts: list[str], saved_asks: Callable[[Application], list]) -> list[dict]:
        """Each application as the file keeps it; its asks as ``saved_asks`` (the scheduler's) say."""
        return [_saved(a, hosts, saved_asks) for a in self.apps.values()]

    def restore(self, saved: list[dict], next_seq: int, host_index: dict[str, int]) -> None:
        """The applications a state file holds (their containers restored already; their asks
        are the scheduler's to restore, :meth:`~.scheduler.Scheduler.restore`)."""
        self.next_seq = next_seq
        records, now = self.containers.records, self.clock.now()
        for a in saved:
            app = Application(a["app_id"], a["seq"], a["name"], a["queue"], a["submitted_at"], a["max_attempts"],
                              a["keep_containers"], a["am_expiry_s"], *_declared(a))
            app.state, app.attempt, app.finished_at = AppState(a["state"]), a["attempt"], a["finished_at"]
            app.final_status, app.diagnostics = a["final_status"], a["diagnostics"]
            app.last_heartbeat, app.response_id = now, a["response_id"]
            app.blacklist = frozenset([host_index[h] for h in a["blacklist"]])
            app.out_allocated = [records[cid] for cid in a["out_allocated"]]
            app.out_completed = [ContainerStatus(s[0], s[1], ContainerState(s[2]), s[3], s[4], s[5])
                                 for s in a["out_completed"]]
            app.out_rejected = tuple([Rejection(j[0], from_saved(j[1:])) for j in a["out_rejected"]])
            app.node_cursor = int(a.get("node_cursor", 0))
            self.apps[app.app_id] = app
        for app in sorted((app for app in self.apps.values() if app.state.finished), key=lambda app: app.finished_at):
            self.finished[app.app_id] = app   # in the order they finished
        for rec in records.values():   # in grant order, as the RM listed them
            owner = self.apps.get(rec.app_id)
            if owner is not None:
                owner.container_ids.append(rec.container_id)

    def watch_restored(self, saved: list[dict]) -> None:
        """Watch every running application's AM again (its clock starts now)."""
        for a in saved:
            app = self.apps[a["app_id"]]
            if app.state is AppState.RUNNING:
                self.watch(app)


def _saved(a: Application, hosts: list[str], saved_asks: Callable[[Application], list]) -> dict:
    saved = {
        "app_id": a.app_id, "seq": a.seq, "name": a.name, "queue": a.queue, "submitted_at": a.submitted_at,
        "max_attempts": a.max_attempts, "keep_containers": a.keep_containers, "am_expiry_s": a.am_expiry_s,
        "state": a.state.value, "attempt": a.attempt, "finished_at": a.finished_at,
        "final_status": a.final_status, "diagnostics": a.diagnostics, "response_id": a.response_id,
        "asks": saved_asks(a),
        "blacklist": sorted(hosts[i] for i in a.blacklist),
        "out_allocated": [r.container_id for r in a.out_allocated],
        "out_completed": [[s.container_id, s.host, s.state.value, s.exit_status, s.diagnostics, s.request_id]
                          for s in a.out_completed],
        "out_rejected": [[j.request_id, *to_saved(j.reason)] for j in a.out_rejected],
        "node_cursor": a.node_cursor,
    }
    # What it declared when submitted (a reserving queue plans from its gang and duration, the
    # preemption monitor compares its priority and places its gang); written only when declared,
    # so a file of applications that declared nothing reads as it did before these were kept.
    if a.priority:
        saved["priority"] = a.priority
    if a.roles:
        saved["gang"] = [[r.name, r.instances, r.gpus, r.gpu_milli, r.vcores, r.memory_mb, r.max_instances_per_node]
                         for r in a.roles]
    if a.expected_s is not None:
        saved["expected_s"] = a.expected_s
    return saved


def _declared(a: dict) -> tuple[int, tuple[GangRole, ...], float | None]:
    """A saved application's priority, gang and declared duration (none in a file written before
    they were saved), checked as a submission's are (a ValueError naming the application)."""
    gang = tuple([GangRole(*role) for role in a.get("gang", ())])
    submission = ApplicationSubmission(a["name"], a["queue"], priority=a.get("priority", 0), gang=gang,
                                       expected_duration_s=a.get("expected_s"))
    try:
        check.check_submission(submission)
    except InvalidRequest as exc:
        raise ValueError(f"application {a['app_id']}: {exc.message}") from None
    return submission.priority, submission.gang, submission.expected_duration_s
