"""The ApplicationMaster: runs one job's gangs through the RM, all or nothing.

Each gang of the job (``gangmaster: gangs`` in the spec) lives through attempts,
each an explicit state machine (:class:`~gangmaster.am.core.gang_run.GangRun`):
waiting → acquiring (:mod:`gangmaster.am.core.acquisition`) → launching (every
container started in one heartbeat) → running → succeeded | failed. Each heartbeat is
one round of the RM conversation (:mod:`gangmaster.am.core.rm_conversation`): the gangs
plan, the AM talks to the RM once, and each item of the answer goes to the gang it
concerns (:mod:`gangmaster.am.core.gang_dispatch`); timers (hold timeout, reselection,
release backoff) are checked against the clock in constant time. What is left to the AM
is the job's verdict: completion and restart are decided on the counts of the gangs
whose tasks ended (a failed task ends the attempt of its retry scope: the whole job, or
the gang of the failed role).

An ended attempt fails its barrier first and stops its tasks
(:mod:`gangmaster.am.core.job_shutdown`); a failure restarts its retry scope as attempt
n+1, or fails the job (:mod:`gangmaster.am.core.retry_scope`). Completions from an older
attempt are ignored; a task is never run twice at once.

The AM never sleeps and never asks which RM it has: a driver calls
:meth:`ApplicationMaster.heartbeat` on a clock (virtual time in simulation, real
time with ``--live``). What happens to its gangs is told to observers (the journal, the
log, the metrics: :mod:`gangmaster.am.core.gang_events`), so an AM started again after a
crash, or a new application in the same work folder, carries the job on from its journal
(:mod:`gangmaster.am.core.recovery`). What it shows from outside (gauges, attempts,
``/why``, whether it waits on the cluster) is :class:`~gangmaster.am.ops.job_status.JobStatus`.

The job ends ``succeeded`` or ``failed`` by its own policy, ``killed`` or
``failed`` when the RM ends the application (a client killed it, its AM
attempts ran out: :meth:`ApplicationMaster.application_ended`), or ``failed``
when the driver finds it can make no progress
(:meth:`ApplicationMaster.cannot_progress`).
"""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.settings import SelectionSettings

from gangmaster.am.barrier.gang_barrier import GangBarrier
from gangmaster.am.ops.diagnosis import Occupant
from gangmaster.am.ops.job_status import JobStatus
from gangmaster.am.ops.metrics import AMMetrics
from gangmaster.am.ops.progress_log import ProgressLog, QuietLog
from gangmaster.am.ops.why_feed import WhyFeed
from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec_model import SUCCEEDED_EARLY, JobSpec
from gangmaster.protocol.rm_client import RMClient
from gangmaster.protocol.rm_protocol import ApplicationReport

from . import recovery
from .acquisition import AcquisitionContext
from .am_placement import AMPlacement
from .cluster_tracker import ClusterTracker
from .gang_dispatch import GangDispatch
from .gang_events import observers
from .gang_launch import GangLauncher
from .gang_run import GangRun, task_counts
from .job_shutdown import Shutdown
from .job_start import NeverRuns, first_attempts
from .journal import JOURNAL_FILE, Journal, MemoryJournal, NoJournal, avoidance_drops, read_records, read_state
from .lifecycle import TaskRecord
from .retry_scope import retry_failures
from .rm_conversation import RMConversation, ended_by_rm

__all__ = ["ApplicationMaster"]


class ApplicationMaster(JobStatus):
    """One job's AM. Build it once its application is ACCEPTED by the RM; then
    call :meth:`heartbeat` every ``settings.heartbeat_s`` until :attr:`done`."""

    #: the job ended (then :attr:`outcome` and :attr:`reason` say how)
    done = False
    outcome: str | None = None
    reason = ""
    #: the environment every task gets (``task_env``); read only
    task_env: Mapping[str, str] = MappingProxyType({})

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
        if task_env:
            self.task_env = dict(task_env)
        work_dir = Path(work_dir)
        self.conversation = RMConversation(rm, app_id)
        registration = self.conversation.register()
        self.am_attempt = registration.attempt
        self.queue = registration.queue
        #: the most the AM's queue may hold at once (None: the cluster), as the RM registered it
        self.queue_limit: ResourceDescriptor | None = registration.queue_limit
        records = read_records(work_dir / JOURNAL_FILE) if journal is None else journal.records()
        previous = read_state(records) if records else None   # None: nothing ran before
        self.log = log if log is not None else ProgressLog(
            work_dir / f"am-{len(previous.am_attempts) + 1 if previous else 1}.log", now, echo)
        self.journal = journal if journal is not None else Journal(work_dir / JOURNAL_FILE, now)
        self.events = observers(self.metrics, self.journal, self.log)   # who keeps what happens
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
        self.why = WhyFeed(job.name, app_id, self.gangs, self.placement, occupants, self.settings,
                           self.log, self.metrics, job.priority, lambda: self.placement.rm_reservation(self.now()))
        # barrier: the coordinator (the AM's calls to it: am.attempt_barrier)
        launcher = GangLauncher(rm, barrier, app_id, job, self.queue, self.task_env, running, asking.releases)
        self.shutdown = Shutdown(launcher, self.log)
        self.dispatch = GangDispatch(self.gangs, running, asking, self.placement, launcher, self.log, self.am_attempt,
                                     self.why.overdue)
        self._earlier_drops = avoidance_drops(previous) if previous is not None else []   # (earlier AMs')
        self.events.am_started(self.am_attempt, app_id, job.name, job.total_instances, len(job.gangs), work_dir)
        if previous is None or previous.empty:
            self._start_fresh()
        else:   # an earlier run's journal: failover, or a new application resuming it
            self._take_over(recovery.carry_on(job, previous, registration, asking, now, rm.container_status,
                                              self.log, earlier_tasks))

    # =============================================================== start
    def _start_fresh(self) -> None:
        """Every gang can run (else the job fails saying why): their first attempts begin
        (:mod:`~gangmaster.am.core.job_start`)."""
        try:
            self.gangs += first_attempts(self.job, self.placement, self.queue, self.queue_limit,
                                         self.dispatch.asking, self.now)
        except NeverRuns as exc:
            self._finish("failed", str(exc))

    # ============================================================ heartbeat
    def heartbeat(self) -> None:
        """One round of the RM conversation with the gangs (:meth:`RMConversation.heartbeat`:
        the pending gangs plan, the AM talks to the RM once, the gangs whose every instance
        was granted launch), then the AM decides on the tasks that ended."""
        if self.done:
            return
        now = self.now()
        dispatch = self.dispatch
        if not self.conversation.heartbeat(dispatch, now):   # the RM no longer accepts this AM attempt
            if dispatch.ended is not None:
                self.application_ended(dispatch.ended)
            else:   # a newer AM attempt took over: this one stops, deciding nothing; its files stay open
                # (should the application end before a new AM registers, it records the RM's verdict)
                self.done = True
        elif dispatch.must_fail:
            self._finish("failed", dispatch.must_fail)
        else:
            if dispatch.to_decide:   # else nothing ended (a task's end to journal is always a gang's to decide)
                self._decide(now)
            self.why.gangs_started()

    # ============================================================ decisions
    def _decide(self, now: float) -> None:
        """Decide on the gangs whose tasks ended: restart what their failed tasks call for
        (:mod:`~gangmaster.am.core.retry_scope`), else the job may have succeeded."""
        self.events.deciding(now)
        self.dispatch.keep_placeable(now)   # (before a restart plans the gang again)
        deciding = self.dispatch.take_decided()
        if not deciding:
            return
        # (no role fails without a failed task: a Completion's min_failed is at least 1)
        failing = [g for g in deciding if g.failed]
        if failing:   # restarts, or the job fails (:mod:`~gangmaster.am.core.retry_scope`)
            over = retry_failures(self.job, self.gangs, failing, self.shutdown, self.events, now, self.now)
            if over is not None:
                if over:
                    self._finish("failed", over)
                return
        verdict = self.job.verdict(*task_counts(self.gangs))
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
        outcome, reason = ended_by_rm(report)
        self.log(f"the RM ended {self.app_id} ({report.state.value}): {reason}")
        self._finish(outcome, reason, unregister=False)

    # ===================================================== no progress possible
    def cannot_progress(self, why: str) -> None:
        """The driver found that nothing still to come can change what this job waits for
        (:meth:`~gangmaster.am.ops.job_status.JobStatus.waiting_on_cluster` told it): the job
        fails, saying ``why`` and why each gang waits (:meth:`WhyFeed.waiting`)."""
        self._finish("failed", f"it can make no progress ({why}); {self.why.waiting()}")

    # ================================================= taken over from a journal
    def _take_over(self, recovered: recovery.Recovered) -> None:
        """Carry on from what a journal left (:meth:`GangDispatch.take_over`), and decide as
        after any heartbeat, unless the job had already finished."""
        now = self.now()
        self.dispatch.take_over(recovered, self.shutdown, now)
        if recovered.finished is not None:
            self._finish(*recovered.finished)
        else:
            self._decide(now)
