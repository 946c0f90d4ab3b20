"""The ApplicationMaster: runs one job's gangs through the RM, all or nothing.

Each gang of the job (``gangmaster: gangs`` in the spec) lives through attempts,
each an explicit state machine (:class:`~gangmaster.am.gang_run.GangRun`):
waiting → acquiring (:mod:`gangmaster.am.acquisition`) → launching (every
container started in one heartbeat) → running → succeeded | failed. The AM moves
the gangs on events, never by re-examining everything each heartbeat:

* **containers granted, rejected, pending** move the gang that asked for them;
* **containers completed** end a task of the gang that runs it; completion and
  restart are then decided on that gang's own counts (a failed task ends the
  attempt of its retry scope: the whole job, or the gang of the failed role);
* **node updates** keep the AM's view of the cluster
  (:mod:`gangmaster.am.cluster_tracker`); a gang that did not fit is placed again
  only when one of them gave some node more room;
* **timers** (hold timeout, reselection, release backoff) are checked against
  the clock each heartbeat in constant time.

An ended attempt fails its barrier first (so every waiting task of the dead gang
is told at once), stops the tasks, and the gang starts again as attempt n+1.
Completions from an older attempt are ignored; a task is never run twice at once.
A task that cannot even be launched (the RM refuses to start its container: a
command too long for ``exec``, a node lost in between) is a failed task like any
other: its attempt ends and the gang restarts, or the job fails saying why.

The AM never sleeps and never asks which RM it has: a driver calls
:meth:`ApplicationMaster.heartbeat` on a clock (virtual time in simulation, real
time with ``--live``). Everything it decides goes to its journal first, so an AM
started again after a crash recovers the job, and the tasks still running are
kept, and a *new* application can resume the job in the same work folder after
the whole run stopped (:mod:`gangmaster.am.recovery`); a driver whose AMs are
never restarted and whose journals nobody reads (trace replay) may give it a journal
that keeps nothing, and then the AM builds no record. Each AM process writes its
own log (:mod:`gangmaster.am.progress_log`).

Each AM's selection pipelines are seeded from ``selection.seed`` and its
application id: a run is replayable, and two AMs do not break ties alike.

The job ends ``succeeded`` or ``failed`` by its own policy, ``killed`` or
``failed`` when the RM ends the application (a client killed it, its AM
attempts ran out: :meth:`ApplicationMaster.application_ended`), or ``failed``
when the driver finds it can make no progress
(:meth:`ApplicationMaster.cannot_progress`).
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache, partial
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.settings import SelectionSettings

from . import job_status, recovery
from .acquisition import AcquisitionContext
from .am_settings import AMSettings
from .attempt_barrier import end_barrier, reopen_barrier
from .am_placement import AMPlacement, pipeline_seed
from .cluster_tracker import ClusterTracker
from .diagnosis import Diagnosis, Occupant, diagnose
from .gang_barrier import GangBarrier
from .gang_placement import GangDoesNotFit
from .gang_launch import launch_gang
from .gang_events import GangEvents, JournalEvents, LogEvents, MetricsEvents, observing
from .gang_run import PENDING, GangRun, attempt_history, failed_attempts, failure, recorded_gangs
from .journal import JOURNAL_FILE, Journal, MemoryJournal, NoJournal, read_records, replay
from .jobspec_model import SUCCEEDED_EARLY, JobSpec, RoleSpec
from .lifecycle import ROLE_ACQUIRING, ROLE_LAUNCHING, ROLE_RUNNING, TASK_FAILED, TASK_RUNNING, AttemptRecord, RoleState, TaskRecord
from .metrics import AMMetrics, GaugeValues
from .progress_log import ProgressLog, QuietLog
from .rm_client import RMClient
from .rm_conversation import RMConversation
from .rm_protocol import (AllocateRequest, ApplicationReport, AppState, Container, ContainerStatus, ExitStatus,
                          NodeReport, PendingAsk, PreemptionMessage, Rejection, RMError, WrongState)
from .waiting_watch import WaitingWatch, watches

__all__ = ["ApplicationMaster", "GangRun", "ProgressLog", "attempt_history", "recorded_gangs", "pipeline_seed"]


class ApplicationMaster:
    """One job's AM. Build it once its application is ACCEPTED by the RM; then
    call :meth:`heartbeat` every ``settings.heartbeat_s`` until :attr:`done`."""

    #: the job ended (then :attr:`outcome` and :attr:`reason` say how)
    done = False
    outcome: str | None = None
    reason = ""
    #: the environment every task gets (``task_env``); read only
    task_env: Mapping[str, str] = MappingProxyType({})
    #: what other applications hold where (a driver that knows tells; names blocking jobs)
    _occupants = staticmethod(lambda: ())
    #: the most the AM's queue may hold at once (None: the cluster), as the RM registered it
    queue_limit: ResourceDescriptor | None = None
    _watch: WaitingWatch | None = None   # made when first needed (:attr:`watch`)
    _granted = False   # this heartbeat's response granted containers
    #: the deadline of a preemption notice whose gang has not restarted yet (None: not preempted)
    preempted_until: float | None = None

    def __init__(self, job: JobSpec, rm: RMClient, app_id: str, now: Callable[[], float], work_dir: str | Path, *,
                 settings: AMSettings | None = None, selection: SelectionSettings | None = None,
                 barrier: GangBarrier, metrics: AMMetrics | None = None, echo: Callable[[str], None] | None = None,
                 task_env: Mapping[str, str] | None = None,
                 occupants: Callable[[], Sequence[Occupant]] | None = None,
                 journal: Journal | MemoryJournal | NoJournal | None = None,
                 log: ProgressLog | QuietLog | None = None, tracker: ClusterTracker | None = None,
                 shared_pipelines: dict[str, SelectionPipeline] | None = None, earlier_tasks: str = recovery.ENDED_WITH_THE_RUN):
        """``journal``, ``log``, ``tracker`` and ``shared_pipelines`` are for drivers that
        run many AMs in one process (trace replay): a journal kept in memory instead of
        ``work_dir``'s file (an earlier run is read from it, not from the folder), or one
        that keeps nothing (:class:`~gangmaster.am.journal.NoJournal`: then the AM builds
        no record either, as for a quiet log it builds no line), a log
        instead of the folder's ``am-<n>.log``, a view of the cluster shared by every AM
        and kept by the driver (the RM then sends no node updates), and selection
        pipelines shared by every AM, seeded from ``selection.seed`` alone: one tie order
        for all the driver's jobs, as one scheduler would break ties (and one node index
        kept on the shared view serves them all). Without them the AM keeps its own.

        ``earlier_tasks``: what became of the tasks of the unfinished earlier run into
        ``work_dir`` that this AM resumes (:func:`~gangmaster.am.recovery.resume`); the
        driver knows (they ended with that run's RM, or it killed them at the RM)."""
        self.job, self.rm, self.app_id, self.now = job, rm, app_id, now
        if occupants is not None:
            self._occupants = occupants
        self.settings = settings or AMSettings()
        self.selection = selection or SelectionSettings()
        self.metrics = metrics or AMMetrics()
        self.metrics.watch(self)
        if task_env:
            self.task_env = dict(task_env)
        work_dir = _folder(work_dir)
        self.conversation = RMConversation(rm, app_id)
        registration = self.conversation.register()
        self.am_attempt = registration.attempt
        self.queue = registration.queue
        if registration.queue_limit is not None:
            self.queue_limit = registration.queue_limit
        records = read_records(work_dir / JOURNAL_FILE) if journal is None else journal.records()
        previous = replay(records) if records else None   # None: nothing ran before
        self.log = log if log is not None else ProgressLog(
            work_dir / f"am-{len(previous.am_attempts) + 1 if previous else 1}.log", now, echo)
        self.journal = journal if journal is not None else Journal(work_dir / JOURNAL_FILE, now)
        # Who keeps what happens: the journal, the log and the metrics, each as an observer of
        # the gangs' events, attached only when it keeps something.
        self.events = observing([MetricsEvents(self.metrics), _observer(self.journal, JournalEvents),
                                 _observer(self.log, LogEvents)])
        if watches(self.settings):   # a pending gang's heartbeat checks its wait
            self._watch = WaitingWatch(self.settings, self.log, self.metrics)
        # what its gangs' acquisitions share: the outbox of what to send at the next heartbeat
        # among it, and the request ids, 1 up (those of different AM attempts never collide)
        self._asking = AcquisitionContext(self.settings, (self.selection.seed, job.name, app_id, self.am_attempt),
                                          self.log, self.events, self.metrics.selection_latency.observe,
                                          self.am_attempt * 1_000_000 + 1)
        self._coordinator = barrier   # the barrier coordinator (the AM's calls to it: am.attempt_barrier)
        self._running: dict[str, tuple[GangRun, TaskRecord]] = {}   # container id -> its task, while it runs
        self.placement = AMPlacement(rm.cluster_nodes, self.selection, app_id, self._running, tracker,
                                     shared_pipelines)
        self._to_decide: set[GangRun] = set()   # gangs whose tasks ended since the last decision
        self.gangs: list[GangRun] = []
        self.events.am_started(self.am_attempt, app_id, job.name, job.total_instances, len(job.gangs), work_dir)
        if previous is None or previous.empty:
            self._start_fresh()
        elif self.am_attempt == 1:
            # The first AM of a new application: the journal is an earlier run's, and that
            # run's containers went with its RM. Nothing of it can be recovered but the record.
            self.journal.write("resumed", am_attempts=previous.am_attempts, app_id=previous.app_id)
            self._take_over(recovery.resume(job, previous, self._new_gang, self.events, self.log, earlier_tasks))
        else:
            self._take_over(recovery.recover(job, previous, registration.containers_from_previous_attempts,
                                             self._new_gang, rm.container_status, self.log))

    @property
    def watch(self) -> WaitingWatch:
        """The watch on the gangs that wait (:mod:`~gangmaster.am.waiting_watch`): made with
        the AM when its settings diagnose waiting gangs or limit their wait, else when first
        needed (an AM is asked why a gang waits); a trace replay's AMs never need it."""
        watch = self._watch
        if watch is None:
            watch = self._watch = WaitingWatch(self.settings, self.log, self.metrics)
        return watch

    # =============================================================== start
    def _start_fresh(self) -> None:
        cluster = self.placement.cluster
        checked = []   # (name, roles, its placement on the idle cluster or None) of each gang
        for name, roles in self.job.named_gangs:
            try:
                placed = cluster.check_fits_empty(roles, self.placement.pipeline_for)
            except GangDoesNotFit as exc:
                self._finish("failed", f"gang {name} can never run on this cluster: {exc}")
                return
            if self.queue_limit is not None:
                over = self._over_queue_limit(roles)
                if over:
                    self._finish("failed", f"gang {name} can never run in queue {self.queue}: {over}")
                    return
            # placed on the idle cluster itself: its first placement, while the view stays so
            checked.append((name, roles, None if placed is None else (placed, cluster.view, cluster.view.changes)))
        for name, roles, placed in checked:   # every gang can run: their first attempts begin
            gang = self._new_gang(name, roles, 1, [])
            if placed is not None:
                gang.placed_at_start = placed
            self.gangs.append(gang)

    def _over_queue_limit(self, roles: tuple[RoleSpec, ...]) -> str:
        """Why the whole gang asks more than its queue may ever hold at once ("" when it fits)."""
        limit = self.queue_limit
        if limit is None:
            return ""
        memory = sum(r.instances * r.memory_mb for r in roles)
        vcores = sum(r.instances * r.ask_vcores for r in roles)
        gpus = sum(r.instances * r.gpu_share for r in roles)   # a share of a GPU counts its fraction
        over = [f"{need:g} {what} in all, the queue is limited to {cap:g}"
                for need, cap, what in ((memory, limit.memory_mb, "MB memory"), (vcores, limit.vcores, "vcores"),
                                        (gpus, limit.gpus, "GPUs")) if need > cap + 1e-9]
        return "; ".join(over)

    def _new_gang(self, name: str, roles: tuple[RoleSpec, ...], attempt: int,
                  history: list[AttemptRecord], waiting_since: float | None = None) -> GangRun:
        """A gang attempt begins: waiting, with nothing asked yet."""
        return GangRun.begin(name, roles, attempt, history, self._asking, self.now(), waiting_since)

    # ============================================================ heartbeat
    def heartbeat(self) -> None:
        """One round: decide, talk to the RM once, react."""
        if self.done:
            return
        now = self.now()
        finished = 0   # the tasks of the gangs' current attempts that ended (those of pending gangs: none yet)
        for gang in self.gangs:
            if gang.state in PENDING:
                self._plan(gang, now)
                if self._watch is not None:
                    waited_too_long = self._watch.check(gang, now, self.diagnose)
                    if waited_too_long:
                        self._finish("failed", waited_too_long)
                        return
            else:
                finished += len(gang.tasks) - gang.running   # (GangRun.finished_tasks)
        self._granted = False
        if not self.conversation.heartbeat(self._request(finished), self, now) or self.done:
            return
        if self._granted:   # (a gang's last container comes in a grant)
            for gang in self.gangs:
                if gang.state is ROLE_ACQUIRING and gang.acquisition.complete:
                    self._launch(gang, now)
        if self._to_decide:   # else nothing ended (a task's end to journal is always a gang's to decide)
            self._decide(now)
        if self._watch is not None and self._watch.latest:
            self._watch.started(self.gangs)

    def _plan(self, gang: GangRun, now: float) -> None:
        placement = self.placement
        gang.plan(now, partial(placement.view_for, gang), partial(placement.place, gang), placement.cluster.grown)

    def _request(self, finished: int) -> AllocateRequest:
        """This heartbeat's allocate request: what the gangs' plans ask, cancel and give back,
        after what the AM itself had to (containers it did not want, attempts that ended),
        and its progress: the share of the job's instances whose task (of the current attempt)
        has ended (``finished`` of them)."""
        total = self.job.total_instances
        progress = finished / total if total else 1.0   # (an attempt has at most its gang's instances as tasks)
        out = self._asking
        if not (out.asks or out.cancels or out.releases):   # a heartbeat that only hears what happened
            return AllocateRequest(self.app_id, self.am_attempt, progress=progress)
        asks, cancels, releases = out.take_outbox()
        return AllocateRequest(self.app_id, self.am_attempt, asks=tuple(asks), cancel=tuple(cancels),
                               releases=tuple(releases), progress=progress)

    # ------------------------------------------- what the RM answered (RMCallbacks)
    def on_nodes_updated(self, updates: Sequence[NodeReport]) -> None:
        self.placement.cluster.apply(updates)

    def on_containers_allocated(self, containers: Sequence[Container], now: float) -> None:
        """Each container is taken by the gang that asked for it, else given back."""
        gangs = self.gangs
        self._granted = True   # some gang may have all it asked for: it launches after the whole response
        for container in containers:
            for gang in gangs:
                if gang.state is ROLE_ACQUIRING and gang.acquisition.on_granted(container, now):
                    break
            else:
                self._asking.releases.append(container.container_id)

    def on_requests_rejected(self, rejections: Sequence[Rejection]) -> None:
        """An ask the RM rejected is selected again, unless it was rejected too often (the job fails)."""
        for rejection in rejections:
            gang = self._asker(rejection.request_id)
            if gang is not None:
                gang.acquisition.on_rejected(rejection.request_id, rejection.reason)
                if gang.acquisition.never_reason:
                    self._finish("failed", f"gang {gang.name} can never be granted: {gang.acquisition.never_reason}")
                    return

    def on_requests_pending(self, pending: Sequence[PendingAsk]) -> None:
        for ask in pending:
            gang = self._asker(ask.request_id)
            if gang is not None:
                gang.acquisition.on_pending(ask.request_id, ask.reason)

    def on_containers_completed(self, statuses: Sequence[ContainerStatus], now: float) -> None:
        """A running task's container ended: its task ended; else a granted one was lost."""
        running = self._running
        for status in statuses:
            found = running.pop(status.container_id, None)
            if found is None:
                self._container_lost(status.container_id, status.diagnostics)
                continue
            gang, task = found
            if gang in self.gangs and task.state is TASK_RUNNING:   # not an older attempt (GangRun: eq is identity)
                self._task_finished(gang, task, status.exit_status, status.diagnostics, now)

    def on_preemption(self, message: PreemptionMessage, now: float) -> None:
        """The RM preempts this job's gang (YARN's strict contract: these containers end at
        ``message.deadline``): each running task is told (a signal and a notice it can poll,
        ``BarrierTaskContext.preemption_notice``) so that it can checkpoint first. The gang
        restarts once its tasks have ended, without counting a failure (:meth:`_restarted`)."""
        told = 0
        for container_id in message.containers:
            if container_id in self._running:
                try:
                    self.rm.notify_preemption(container_id)
                    told += 1
                except RMError as exc:
                    self.log(f"telling the task of {container_id} it is preempted: {exc}")
        self.preempted_until = message.deadline
        self.log(f"preempted{f' ({message.reason})' if message.reason else ''}: {len(message.containers)} "
                 f"container(s) end by {message.deadline:g}s; {told} task(s) told")

    def on_shutdown_request(self, ended: ApplicationReport | None, why: WrongState) -> None:
        """The RM no longer accepts this AM attempt: the application ended (``ended``: its
        report), or a newer AM attempt took over (the RM declared this one dead): then this
        one stops without deciding anything. Its files stay open: should the application end
        before a new AM registers, this one records the RM's verdict (:meth:`application_ended`)."""
        if ended is not None:
            self.application_ended(ended)
        else:
            self.log(f"the RM no longer accepts AM attempt {self.am_attempt}: {why}; stopping")
            self.done = True

    def _asker(self, request_id: int) -> GangRun | None:
        """The gang whose ask ``request_id`` is outstanding (None: no current attempt's)."""
        for gang in self.gangs:
            if gang.state is ROLE_ACQUIRING and request_id in gang.acquisition.by_request:
                return gang
        return None

    def _container_lost(self, container_id: str, diagnostics: str) -> None:
        """A container ended that runs no task: one granted and not started yet is selected
        again; one of an older attempt, or one given back, needs nothing."""
        for gang in self.gangs:
            if gang.state is ROLE_ACQUIRING and gang.acquisition.on_lost(container_id):
                self.log(f"gang {gang.name}: granted container {container_id} was lost before it started "
                         f"({diagnostics}); selecting again")
                return
        # a container of an older attempt, or one given back: nothing to do

    def _task_finished(self, gang: GangRun, task: TaskRecord, exit_status: int | None, diagnostics: str,
                       now: float) -> None:
        """A task of the gang's current attempt ended by itself (no longer in :attr:`_running`):
        the gang decides at the end of this heartbeat (:meth:`_decide`)."""
        self._to_decide.add(gang)
        gang.task_ended(task, exit_status, diagnostics, now)
        if exit_status != 0:
            if exit_status is not None and exit_status < 0 and exit_status != ExitStatus.PREEMPTED:
                # the node or the RM, not the program (a preemption is no fault of the node)
                self.placement.cluster.mark_failed(task.role, task.host)
            self.log(f"gang {gang.name} attempt {gang.attempt}: {task.name} on {task.host} failed with exit "
                     f"status {exit_status}" + (f" ({diagnostics})" if diagnostics else ""))

    def _pipeline_for(self, role: RoleSpec) -> SelectionPipeline:
        """The pipeline that places ``role`` (:meth:`AMPlacement.pipeline_for`)."""
        return self.placement.pipeline_for(role)

    # =============================================================== launch
    def _launch(self, gang: GangRun, now: float) -> None:
        """Every instance is granted: start them all now (:mod:`~gangmaster.am.gang_launch`).
        A task the RM refused fails its attempt, in this same heartbeat (:meth:`_decide`)."""
        if not launch_gang(gang, now, self.rm, self._coordinator, self.app_id, self.job, self.queue, self.task_env,
                           self._running, self._asking.releases):
            self._to_decide.add(gang)
            self.log(f"gang {gang.name} attempt {gang.attempt}: {failure(gang.tasks[-1])}; the attempt fails")

    # ============================================================ decisions
    def _decide(self, now: float) -> None:
        """Decide on the gangs whose tasks ended: a task never launched restarts its gang
        (a gang starts whole or not at all, whatever the completion policy says); a role
        that reached its failure threshold restarts its retry scope; else the job may have
        succeeded."""
        self.events.deciding(now)
        to_decide = self._to_decide
        if not to_decide:   # no task ended: nothing to decide
            return
        deciding = False
        failing: list[GangRun] = []   # the deciding gangs with a failed task
        for g in self.gangs:
            if g in to_decide and g.state is ROLE_RUNNING:
                deciding = True
                if g.failed:   # (no role fails without a failed task: a Completion's min_failed is at least 1)
                    failing.append(g)
        to_decide.clear()
        if not deciding or failing and self._restarted(failing, now):
            return
        gangs = self.gangs
        if len(gangs) == 1:   # most jobs: the gang's own counts are the job's
            verdict = self.job.verdict(gangs[0].succeeded, gangs[0].failed)
        else:
            succeeded, failed = Counter(), Counter()
            for g in gangs:
                succeeded.update(g.succeeded)
                failed.update(g.failed)
            verdict = self.job.verdict(succeeded, failed)
        if verdict is SUCCEEDED_EARLY:
            self._finish("succeeded", "a role reached its minSucceededInstances")
        elif verdict == "succeeded":
            self._finish("succeeded", "every role completed")

    def _restarted(self, failing: list[GangRun], now: float) -> bool:
        """Restart what the failed tasks of ``failing`` call for: the gangs with a task never
        launched, else the retry scopes of the roles that reached their failure threshold.
        False when neither (the job may still succeed)."""
        preempted = [g for g in failing if any(t.exit_status == ExitStatus.PREEMPTED for t in g.tasks)]
        if preempted:   # restarted once every task has ended (the others may still be checkpointing)
            if not any(g.running for g in preempted):
                self._restart_preempted(preempted, now)
            return True
        unlaunched = [t for g in failing for t in g.tasks if t.launch_failed]
        if unlaunched:
            self._restart([self.job.role(name) for name in dict.fromkeys(t.role for t in unlaunched)], now)
            return True
        failed_roles = [r for g in failing for r in g.roles if r.completion.failed(g.failed.get(r.name, 0))]
        if failed_roles:
            self._restart(failed_roles, now)
            return True
        return False

    def _restart(self, failed_roles: list[RoleSpec], now: float) -> None:
        names = {r.name for r in failed_roles}
        culprits = [g for g in self.gangs if names & {r.name for r in g.roles}]
        if self.job.retry.scope == "job":
            restart, limit = list(self.gangs), self.job.retry.attempts
        else:
            restart = culprits
            limit = min(r.retry.attempts for r in failed_roles)
        failures = [t for g in culprits for t in g.tasks if t.state is TASK_FAILED]
        reason = "; ".join(failure(t) for t in failures[:5])
        if len(failures) > 5:
            reason += f" and {len(failures) - 5} more"
        for gang in restart:
            outcome = "failed" if gang in culprits else "stopped"
            self._end_attempt(gang, outcome, reason if gang in culprits else f"restarted with the job: {reason}", now)
        # Attempts that failed count against the limit; one stopped by an interrupted run does not.
        if self.job.retry.scope == "job":
            failed = failed_attempts(self.gangs)
        else:
            failed = max(failed_attempts([g]) for g in culprits)
        if failed >= limit:
            self._finish("failed", f"attempt {failed} of {limit} failed: {reason}")
            return
        for i, gang in enumerate(self.gangs):
            if gang in restart:
                self.events.restarting(gang, limit)
                self.gangs[i] = gang.restart(self.now())

    def _restart_preempted(self, preempted: list[GangRun], now: float) -> None:
        """The preempted gangs start again as new attempts; a preemption is no failure, so
        it spends none of the job's retries (:func:`failed_attempts` counts ``failed`` only)."""
        reason = next(t.diagnostics for g in preempted for t in g.tasks if t.exit_status == ExitStatus.PREEMPTED)
        for gang in preempted:
            self._end_attempt(gang, "preempted", reason, now)
        self.preempted_until = None
        for i, gang in enumerate(self.gangs):
            if gang in preempted:
                self.events.restarting(gang, self.job.retry.attempts)
                self.gangs[i] = gang.restart(self.now())

    def _end_attempt(self, gang: GangRun, outcome: str, reason: str, now: float) -> None:
        """Fail the barrier first (waiters are told at once), then stop the tasks, then record."""
        end_barrier(self._coordinator, self.app_id, gang, outcome, reason, self.log)
        for task in gang.end_attempt(outcome, reason, now):
            self._stop(task.container_id)
            self._running.pop(task.container_id, None)

    def _stop(self, container_id: str) -> None:
        try:
            self.rm.stop_container(container_id)
        except RMError as exc:
            self.log(f"stopping {container_id}: {exc}")

    def _finish(self, outcome: str, reason: str, unregister: bool = True) -> None:
        now = self.now()
        self.events.deciding(now)
        for gang in self.gangs:
            if not gang.record.outcome:   # the attempts still open end with the job
                if outcome == "succeeded":
                    self._end_attempt(gang, outcome, reason, now)
                else:
                    self._end_attempt(gang, "stopped", f"job {outcome}: {reason}", now)
        self.outcome, self.reason, self.done = outcome, reason, True
        self.events.job_finished(self.job.name, outcome, reason, now)
        if unregister:
            self.conversation.unregister(outcome == "succeeded", reason, self.log)
        self.close()

    def close(self) -> None:
        """Close the log and the journal (the driver calls it when the run is over). An AM
        closed before its job finished records when it stopped, so a run that resumes the
        job later knows how long the interrupted attempts lasted."""
        if not self.done and not self.journal.closed:
            self.journal.write("am_stopped", reason="the run stopped before the job finished")
        self.log.close()
        self.journal.close()

    # ====================================================== ended from outside
    def application_ended(self, report: ApplicationReport) -> None:
        """The RM ended the application without this AM (a client killed it, or its AM attempts
        ran out): the job ends ``killed`` or ``failed`` with the reason the RM gave. The RM has
        already stopped every container; the tasks are recorded as stopped. Does nothing when
        the job already has an outcome."""
        if self.outcome is not None:
            return
        outcome = {AppState.KILLED: "killed", AppState.FINISHED: report.final_status.lower()}.get(report.state)
        if outcome not in ("killed", "succeeded", "failed"):
            outcome = "failed"
        reason = report.diagnostics or f"the ResourceManager ended {self.app_id} ({report.state.value})"
        self.log(f"the RM ended {self.app_id} ({report.state.value}): {reason}")
        self._finish(outcome, reason, unregister=False)

    # ===================================================== no progress possible
    def waiting_on_cluster(self) -> bool:
        """True when nothing this AM does by itself can move the job on: none of its tasks
        runs, and every gang not finished waits, holding and asking for nothing and not
        backing off, because its last placement found no room. Only a change from outside
        (a node coming back, another application's containers ending) can help it then.
        The driver, which knows whether any such change is still to come, decides whether to
        call :meth:`cannot_progress`."""
        if self.done or self._running:
            return False
        now = self.now()
        waiting = False
        for gang in self.gangs:
            if gang.state is ROLE_LAUNCHING:
                return False
            if gang.pending:
                if not gang.acquisition.stalled(now, self.placement.cluster.grown):
                    return False
                waiting = True
        return waiting

    def cannot_progress(self, why: str) -> None:
        """The driver found that nothing still to come can change what this job waits for:
        the job fails, saying ``why`` and why each gang waits (:meth:`why_waiting`)."""
        waiting = "; ".join(f"gang {g.name} is waiting: {self.watch.why(g, self.diagnose)}" for g in self.gangs
                            if g.pending and g.acquisition is not None)
        self._finish("failed", f"it can make no progress ({why}); {waiting}")

    # ============================================================== status
    def gauge_values(self) -> GaugeValues:
        """What the job's gauges show now (:func:`~gangmaster.am.job_status.gauge_values`)."""
        return job_status.gauge_values(self.gangs, self._running)

    def role_states(self) -> dict[str, RoleState]:
        return {r.name: g.role_state(r) for g in self.gangs for r in g.roles}

    def history(self) -> list[AttemptRecord]:
        """Every attempt of every gang, finished ones first, in the order they ended."""
        return attempt_history(self.gangs)

    def why_waiting(self) -> dict[str, str]:
        """For each gang not running yet: why, in numbers (:func:`~gangmaster.am.job_status.why_waiting`)."""
        return job_status.why_waiting(self.gangs)

    def why_report(self) -> dict:
        """What ``/why`` serves for this job (:func:`~gangmaster.am.job_status.why_report`)."""
        return job_status.why_report(self.job.name, self.app_id, self.outcome, self.gangs, self.now(),
                                     self._watch.latest if self._watch is not None else {})

    def diagnose(self, gang: GangRun) -> Diagnosis:
        """Why ``gang`` waits, as data (:mod:`~gangmaster.am.diagnosis`), on the AM's view
        now: its granted containers count as placed, the rest is placed again."""
        acq = gang.acquisition
        wanted = {role: [s.index for s in acq.in_order() if s.role == role and s.container is None]
                  for role in acq.roles}
        return self.diagnose_roles(gang.name, gang.roles, wanted,
                                   [(s.role, s.container.host, s.container.resource) for s in acq.granted])

    def diagnose_roles(self, name: str, roles: tuple[RoleSpec, ...], wanted: Mapping[str, Sequence[int]] | None = None,
                       held: Sequence[tuple] = ()) -> Diagnosis:
        """:meth:`diagnose` for ``roles`` placed with this AM's pipelines on its view now;
        ``held``: the containers the gang holds, (role, host, resource)."""
        view = self.placement.view_for()
        for role, host, _resource in held:
            view.instances_of(role)[view.index(host)] += 1
        return diagnose(view, roles, self.placement.pipeline_for, job=self.job.name, gang=name, occupants=self._occupants(),
                        indices=wanted, own=[(host, resource) for _role, host, resource in held],
                        priority=self.job.priority)

    # ================================================= taken over from a journal
    def _take_over(self, recovered: recovery.Recovered) -> None:
        """Carry on from what a journal left (:mod:`~gangmaster.am.recovery`): watch again the
        tasks still running, end those that ended while no AM watched, reopen the barriers,
        stop the containers no gang owns, and decide as after any heartbeat."""
        if recovered.finished is not None and not recovered.gangs:
            self._finish(*recovered.finished)
            return
        now = self.now()
        for taken in recovered.gangs:
            gang = taken.gang
            if taken.launched:
                self._running.update((t.container_id, (gang, t)) for t in gang.tasks if t.state is TASK_RUNNING)
                self._to_decide.add(gang)
                for task, exit_status, diagnostics in taken.ended:
                    self._running.pop(task.container_id, None)
                    self._task_finished(gang, task, exit_status, diagnostics, now)
                self.log(f"gang {gang.name} attempt {gang.attempt}: recovered {len(gang.tasks)} task(s), "
                         f"{gang.running} still running")
                reopen_barrier(self._coordinator, self.app_id, self.job, gang, taken.barrier_token, self.log)
            self.gangs.append(gang)
        if recovered.finished is not None:
            self._finish(*recovered.finished)
            return
        for cid in recovered.strays:
            self.log(f"stopping container {cid}: its gang's launch was not completed by the previous AM")
            self._stop(cid)
        self._decide(now)


def _observer(keeper, observer: Callable) -> GangEvents | None:
    """The observer that keeps the events for ``keeper`` (a journal, a log), or None when it
    keeps nothing (a :class:`~gangmaster.am.journal.NoJournal`, a quiet log): it says so by
    ``keeps_nothing``."""
    return None if getattr(keeper, "keeps_nothing", False) else observer(keeper)


@lru_cache(maxsize=64)
def _folder(work_dir: str | Path) -> Path:
    """``work_dir`` as a Path: one per folder (a trace replay's AMs all name the same one)."""
    return Path(work_dir)
