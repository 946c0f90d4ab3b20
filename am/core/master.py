"""The ApplicationMaster: runs one job's gangs through the RM, all or nothing.

Each gang of the job (``gangmaster: gangs`` in the spec) lives through attempts,
each an explicit state machine (:class:`~gangmaster.am.core.gang_run.GangRun`):
waiting → acquiring (:mod:`gangmaster.am.core.acquisition`) → launching (every
container started in one heartbeat) → running → succeeded | failed. Each heartbeat
the gangs plan, the AM talks to the RM once, and each item of the answer goes to the
gang it concerns (:mod:`gangmaster.am.core.gang_dispatch`); timers (hold timeout,
reselection, release backoff) are checked against the clock in constant time. What
is left to the AM is the job's verdict: completion and restart are decided on the
counts of the gangs whose tasks ended (a failed task ends the attempt of its retry
scope: the whole job, or the gang of the failed role).

An ended attempt fails its barrier first (so every waiting task of the dead gang
is told at once), stops the tasks (:mod:`gangmaster.am.core.job_shutdown`), and the gang
starts again as attempt n+1.
Completions from an older attempt are ignored; a task is never run twice at once.
A task that cannot even be launched (the RM refuses to start its container: a
command too long for ``exec``, a node lost in between) is a failed task like any
other: its attempt ends and the gang restarts, or the job fails saying why.

The AM never sleeps and never asks which RM it has: a driver calls
:meth:`ApplicationMaster.heartbeat` on a clock (virtual time in simulation, real
time with ``--live``). Everything it decides goes to its journal first, so an AM
started again after a crash recovers the job, and the tasks still running are
kept, and a *new* application can resume the job in the same work folder after
the whole run stopped (:mod:`gangmaster.am.core.recovery`); a driver whose AMs are
never restarted and whose journals nobody reads (trace replay) may give it a journal
that keeps nothing, and then the AM builds no record. Each AM process writes its
own log (:mod:`gangmaster.am.ops.progress_log`).

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
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.settings import SelectionSettings

from gangmaster.am.ops import job_status

from . import recovery
from .acquisition import AcquisitionContext
from gangmaster.am.spec.am_settings import AMSettings
from .am_placement import AMPlacement, over_queue_limit, pipeline_seed
from .cluster_tracker import ClusterTracker
from gangmaster.am.ops.diagnosis import Occupant
from gangmaster.am.barrier.gang_barrier import GangBarrier
from .gang_dispatch import GangDispatch
from .gang_placement import GangDoesNotFit
from .gang_launch import GangLauncher
from .gang_events import JournalEvents, LogEvents, MetricsEvents, keeping, observing
from .gang_run import PENDING, GangRun, attempt_history
from .job_shutdown import Shutdown
from .retry_scope import preempted_gangs, restart, restart_preempted, roles_to_restart
from .journal import JOURNAL_FILE, Journal, MemoryJournal, NoJournal, avoidance_drops, read_records, read_state
from gangmaster.am.spec.jobspec_model import SUCCEEDED_EARLY, JobSpec, RoleSpec
from .lifecycle import ROLE_RUNNING, AttemptRecord, RoleState, TaskRecord
from gangmaster.am.ops.metrics import AMMetrics, GaugeValues
from gangmaster.am.ops.progress_log import ProgressLog, QuietLog
from gangmaster.protocol.rm_client import RMClient
from .rm_conversation import RMConversation
from gangmaster.protocol.rm_protocol import ApplicationReport, AppState, WrongState
from .recovery import recorded_gangs
from gangmaster.am.ops.why_feed import WhyFeed

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
    #: the most the AM's queue may hold at once (None: the cluster), as the RM registered it
    queue_limit: ResourceDescriptor | None = None

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
        that keeps nothing (:class:`~gangmaster.am.core.journal.NoJournal`: then the AM builds
        no record either, as for a quiet log it builds no line), a log
        instead of the folder's ``am-<n>.log``, a view of the cluster shared by every AM
        and kept by the driver (the RM then sends no node updates), and selection
        pipelines shared by every AM, seeded from ``selection.seed`` alone: one tie order
        for all the driver's jobs, as one scheduler would break ties (and one node index
        kept on the shared view serves them all). Without them the AM keeps its own.

        ``earlier_tasks``: what became of the tasks of the unfinished earlier run into
        ``work_dir`` that this AM resumes (:func:`~gangmaster.am.core.recovery.resume`); the
        driver knows (they ended with that run's RM, or it killed them at the RM)."""
        self.job, self.rm, self.app_id, self.now = job, rm, app_id, now
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
        previous = read_state(records) if records else None   # None: nothing ran before
        self.log = log if log is not None else ProgressLog(
            work_dir / f"am-{len(previous.am_attempts) + 1 if previous else 1}.log", now, echo)
        self.journal = journal if journal is not None else Journal(work_dir / JOURNAL_FILE, now)
        # Who keeps what happens: the journal, the log and the metrics, each as an observer of
        # the gangs' events, attached only when it keeps something.
        self.events = observing([MetricsEvents(self.metrics), keeping(self.journal, JournalEvents),
                                 keeping(self.log, LogEvents)])
        # what its gangs' acquisitions share: the outbox of what to send at the next heartbeat
        # among it, and the request ids, 1 up (those of different AM attempts never collide)
        asking = AcquisitionContext(
            self.settings, (self.selection.seed, job.name, app_id, self.am_attempt), self.log, self.events,
            self.metrics.selection_latency.observe, self.am_attempt * 1_000_000 + 1)
        running: dict[str, tuple[GangRun, TaskRecord]] = {}   # container id -> its task, while it runs
        self.placement = AMPlacement(rm.cluster_nodes, self.selection, app_id, running, tracker, shared_pipelines)
        self.gangs: list[GangRun] = []
        # why its gangs wait; occupants: what other applications hold where (names blocking jobs);
        # the reservation a reserving RM queue holds for it (its expected start), as the RM's
        # answers last said
        self.why = WhyFeed(job.name, app_id, self.gangs, self.placement, occupants or _nobody, self.settings,
                           self.log, self.metrics, job.priority, lambda: self.placement.rm_reservation(self.now()))
        # barrier: the coordinator (the AM's calls to it: am.attempt_barrier)
        launcher = GangLauncher(rm, barrier, app_id, job, self.queue, self.task_env, running, asking.releases)
        self.shutdown = Shutdown(launcher, self.log)
        self.dispatch = GangDispatch(self.gangs, running, asking, self.placement, launcher, self.log, self.am_attempt)
        self._earlier_drops = avoidance_drops(previous) if previous is not None else []   # (earlier AMs')
        self.events.am_started(self.am_attempt, app_id, job.name, job.total_instances, len(job.gangs), work_dir)
        if previous is None or previous.empty:
            self._start_fresh()
        elif self.am_attempt == 1:
            # The first AM of a new application: the journal is an earlier run's, and that
            # run's containers went with its RM. Nothing of it can be recovered but the record.
            self.journal.write("resumed", am_attempts=previous.am_attempts, app_id=previous.app_id)
            self._take_over(recovery.resume(job, previous, asking, now, self.log, earlier_tasks))
        else:
            self._take_over(recovery.recover(job, previous, registration.containers_from_previous_attempts, asking,
                                             now, rm.container_status, self.log))

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
                over = over_queue_limit(roles, self.queue_limit)
                if over:
                    self._finish("failed", f"gang {name} can never run in queue {self.queue}: {over}")
                    return
            # placed on the idle cluster itself: its first placement, while the view stays so
            checked.append((name, roles, None if placed is None else (placed, cluster.view, cluster.view.changes)))
        for name, roles, placed in checked:   # every gang can run: their first attempts begin
            gang = GangRun.begin(name, roles, 1, [], self.dispatch.asking, self.now())
            if placed is not None:
                gang.placed_at_start = placed
            self.gangs.append(gang)

    # ============================================================ heartbeat
    def heartbeat(self) -> None:
        """One round: the pending gangs plan, the AM talks to the RM once, the gangs whose
        every instance was granted launch, and the AM decides on the tasks that ended
        (:mod:`~gangmaster.am.core.gang_dispatch`)."""
        if self.done:
            return
        now = self.now()
        dispatch, watch = self.dispatch, self.why.watching   # (no watch is made during a heartbeat)
        finished = 0   # the tasks of the gangs' current attempts that ended (those of pending gangs: none yet)
        for gang in self.gangs:
            if gang.state in PENDING:
                dispatch.plan(gang, now)
                if watch is not None:
                    waited_too_long = watch.check(gang, now, self.why.diagnose)
                    if waited_too_long:
                        self._finish("failed", waited_too_long)
                        return
            else:
                finished += len(gang.tasks) - gang.running   # (GangRun.finished_tasks)
        if not self.conversation.heartbeat(dispatch.request(finished), dispatch, now):
            self._shutdown_requested(*dispatch.shutdown_request)
            return
        if dispatch.never_granted:
            self._finish("failed", dispatch.never_granted)
            return
        if dispatch.granted:   # (a gang's last container comes in a grant)
            dispatch.launch_granted(now)
        if dispatch.to_decide:   # else nothing ended (a task's end to journal is always a gang's to decide)
            self._decide(now)
        if watch is not None and watch.latest:
            watch.started(self.gangs)

    # ============================================================ decisions
    def _decide(self, now: float) -> None:
        """Decide on the gangs whose tasks ended: restart what their failed tasks call for
        (:mod:`~gangmaster.am.core.retry_scope`), else the job may have succeeded."""
        self.events.deciding(now)
        self.dispatch.keep_placeable(now)   # (before a restart plans the gang again)
        to_decide = self.dispatch.to_decide
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
        if not deciding:
            return
        if failing:
            preempted = preempted_gangs(failing)
            if preempted:   # restarted once every task has ended (the others may still be checkpointing)
                if not any(g.running for g in preempted):
                    restart_preempted(self.gangs, preempted, self.shutdown, self.events, now, self.now,
                                      self.job.retry.attempts)
                    self.dispatch.preempted_until = None
                return
            failed_roles = roles_to_restart(self.job, failing)
            if failed_roles:   # (a restart, or the job fails: the retry limit is reached)
                over = restart(self.job, self.gangs, failed_roles, self.shutdown, self.events, now, self.now)
                if over:
                    self._finish("failed", over)
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

    def _finish(self, outcome: str, reason: str, unregister: bool = True) -> None:
        now = self.now()
        self.events.deciding(now)
        self.shutdown.end_open_attempts(self.gangs, outcome, reason, now)
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

    def _shutdown_requested(self, ended: ApplicationReport | None, why: WrongState) -> None:
        """The RM no longer accepts this AM attempt: the application ended (``ended``: its
        report), or a newer AM attempt took over (the RM declared this one dead): then this
        one stops without deciding anything. Its files stay open: should the application end
        before a new AM registers, this one records the RM's verdict (:meth:`application_ended`)."""
        if ended is not None:
            self.application_ended(ended)
        else:
            self.log(f"the RM no longer accepts AM attempt {self.am_attempt}: {why}; stopping")
            self.done = True

    # ===================================================== no progress possible
    def waiting_on_cluster(self) -> bool:
        """True when nothing this AM does by itself can move the job on: none of its tasks
        runs, and every gang not finished waits, holding and asking for nothing and not
        backing off, because its last placement found no room. Only a change from outside
        (a node coming back, another application's containers ending) can help it then.
        The driver, which knows whether any such change is still to come, decides whether to
        call :meth:`cannot_progress`."""
        return not self.done and self.dispatch.waiting_on_cluster(self.now())

    def cannot_progress(self, why: str) -> None:
        """The driver found that nothing still to come can change what this job waits for:
        the job fails, saying ``why`` and why each gang waits (:meth:`WhyFeed.waiting`)."""
        self._finish("failed", f"it can make no progress ({why}); {self.why.waiting()}")

    # ============================================================== status
    def gauge_values(self) -> GaugeValues:
        """What the job's gauges show now (:func:`~gangmaster.am.ops.job_status.gauge_values`)."""
        return job_status.gauge_values(self.gangs, self.dispatch.running)

    def role_states(self) -> dict[str, RoleState]:
        return {r.name: g.role_state(r) for g in self.gangs for r in g.roles}

    def history(self) -> list[AttemptRecord]:
        """Every attempt of every gang, finished ones first, in the order they ended."""
        return attempt_history(self.gangs)

    def why_waiting(self) -> dict[str, str]:
        """For each gang not running yet: why, in numbers (:func:`~gangmaster.am.ops.job_status.why_waiting`)."""
        return job_status.why_waiting(self.gangs)

    def avoidance_drops(self) -> list[tuple[str, int, str]]:
        """(gang, attempt, role) of each role placed again on the nodes where it failed
        (:meth:`GangDispatch.keep_placeable`), this AM's and its predecessors', in order."""
        return self._earlier_drops + self.dispatch.dropped

    def why_report(self) -> dict:
        """What ``/why`` serves for this job: its outcome, and why its gangs wait (:meth:`WhyFeed.report`)."""
        return self.why.report(self.outcome, self.now())

    # ================================================= taken over from a journal
    def _take_over(self, recovered: recovery.Recovered) -> None:
        """Carry on from what a journal left (:mod:`~gangmaster.am.core.recovery`): watch again the
        tasks still running, end those that ended while no AM watched, reopen the barriers,
        stop the containers no gang owns, and decide as after any heartbeat."""
        if recovered.finished is not None and not recovered.gangs:
            self._finish(*recovered.finished)
            return
        now = self.now()
        dispatch = self.dispatch
        for taken in recovered.gangs:
            if taken.launched:
                dispatch.take_back(taken, now)
            self.gangs.append(taken.gang)
        if recovered.finished is not None:
            self._finish(*recovered.finished)
            return
        for cid in recovered.strays:
            self.log(f"stopping container {cid}: its gang's launch was not completed by the previous AM")
            self.shutdown.stop(cid)
        self._decide(now)


def _nobody() -> tuple:
    """What other applications hold, to a driver that does not tell: nothing known."""
    return ()


@lru_cache(maxsize=64)
def _folder(work_dir: str | Path) -> Path:
    """``work_dir`` as a Path: one per folder (a trace replay's AMs all name the same one)."""
    return Path(work_dir)
