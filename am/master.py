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

import gc
import hashlib
import weakref
from collections import Counter
from dataclasses import replace
from functools import lru_cache, partial
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.gpu_topology.masks import indices_of

from . import recovery
from .acquisition import AcquisitionContext, GangAcquisition
from .am_settings import AMSettings
from .attempt_barrier import end_barrier, open_barrier, reopen_barrier
from .cluster_tracker import ClusterTracker
from .collector import collector_paused
from .diagnosis import Diagnosis, Occupant, diagnose
from .gang_barrier import GangBarrier
from .gang_placement import GangDoesNotFit, GangPlacement, place_gang
from .gang_run import PENDING, GangRun, attempt_history, failed_attempts, failure, recorded_gangs
from .journal import JOURNAL_FILE, Journal, MemoryJournal, NoJournal, read_records, replay
from .jobspec_model import SUCCEEDED_EARLY, JobSpec, RoleSpec
from .launch_env import launch_envs
from .lifecycle import (ROLE_ACQUIRING, ROLE_FAILED, ROLE_LAUNCHING, ROLE_RUNNING, ROLE_SUCCEEDED, ROLE_WAITING,
                        TASK_FAILED, TASK_RUNNING, TASK_STOPPED, TASK_SUCCEEDED, AttemptRecord, LaunchedTasks, RoleState,
                        TaskEndings, TaskRecord)
from .metrics import CONTAINER_STATES, AMMetrics, GaugeValues
from .progress_log import ProgressLog, QuietLog, keeps_lines
from .rm_client import RMClient
from .rm_protocol import AllocateRequest, AllocateResponse, ApplicationReport, AppState, ContainerLaunch, \
    LaunchContext, RMError, StartContainers, StartRefused, WrongState
from .waiting_watch import WaitingWatch, watches

__all__ = ["ApplicationMaster", "GangRun", "ProgressLog", "attempt_history", "recorded_gangs", "pipeline_seed"]


def pipeline_seed(seed: int, app_id: str) -> int:
    """The seed of one application's selection pipelines: the same for the same
    ``selection.seed`` and application (a run replays), different across applications."""
    digest = hashlib.sha256(f"{seed}:{app_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


class ApplicationMaster:
    """One job's AM. Build it once its application is ACCEPTED by the RM; then
    call :meth:`heartbeat` every ``settings.heartbeat_s`` until :attr:`done`."""

    # An AM keeps at most 29 attributes of its own: CPython (3.11) keeps an object's attributes
    # in a key table shared by its class only while they are few (measured: 29 are, 30 are
    # not), and an AM past that costs twice as much to build, and every attribute read costs
    # more (a trace replay builds tens of thousands; tests/unit/test_replay_collector.py
    # pins it). What most AMs never set is read from the class instead:

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
    _seed: int | None = None   # the seed of the AM's own pipelines (None: shared ones, seeded from selection.seed)
    #: (gang, attempt, time) -> its tasks ended and not journaled yet (an AM that journals keeps its own)
    _endings: Mapping[tuple, list[TaskRecord]] = MappingProxyType({})

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
        registration = rm.register(app_id)
        self.am_attempt = registration.attempt
        self.queue = registration.queue
        if registration.queue_limit is not None:
            self.queue_limit = registration.queue_limit
        records = read_records(work_dir / JOURNAL_FILE) if journal is None else journal.records()
        previous = replay(records) if records else None   # None: nothing ran before
        self.log = log if log is not None else ProgressLog(
            work_dir / f"am-{len(previous.am_attempts) + 1 if previous else 1}.log", now, echo)
        self.journal = journal if journal is not None else Journal(work_dir / JOURNAL_FILE, now)
        self._logging = keeps_lines(self.log)   # lines that cost work to build are built only then
        self._journaling = self.journal.keeps_records   # records are built only then (as lines)
        if watches(self.settings):   # a pending gang's heartbeat checks its wait
            self._watch = WaitingWatch(self.settings, self.log, self.metrics, _weakly(self, "diagnose"))
        # what its gangs' acquisitions share: the outbox of what to send at the next heartbeat
        # among it, and the request ids, 1 up (those of different AM attempts never collide)
        self._asking = AcquisitionContext(self, self.settings,
                                          (self.selection.seed, job.name, app_id, self.am_attempt), self.log,
                                          self.metrics.selection_latency.observe, self.am_attempt * 1_000_000 + 1,
                                          reporting=self._logging)
        if shared_pipelines is None:
            self._pipelines: dict[str, SelectionPipeline] = {}
            self._seed = pipeline_seed(self.selection.seed, app_id)
        else:
            self._pipelines = shared_pipelines
        self._coordinator = barrier   # the barrier coordinator (the AM's calls to it: am.attempt_barrier)
        self._tracker: ClusterTracker | None = tracker   # read from the RM on first use, then kept
        self._running: dict[str, tuple[GangRun, TaskRecord]] = {}   # container id -> its task, while it runs
        self._to_decide: set[GangRun] = set()   # gangs whose tasks ended since the last decision
        self.gangs: list[GangRun] = []
        if self._journaling:
            self._endings = {}
            self.journal.write("am_started", am_attempt=self.am_attempt, app_id=app_id, job=job.name)
        if self._logging:
            self.log(f"AM attempt {self.am_attempt} of {app_id} for job {job.name!r} "
                     f"({job.total_instances} instance(s) in {len(job.gangs)} gang(s)); work folder {work_dir}")
        if previous is None or previous.empty:
            self._start_fresh()
        elif self.am_attempt == 1:
            # The first AM of a new application: the journal is an earlier run's, and that
            # run's containers went with its RM. Nothing of it can be recovered but the record.
            recovery.resume(self, previous, earlier_tasks)
        else:
            recovery.recover(self, previous, registration.containers_from_previous_attempts)

    @property
    def watch(self) -> WaitingWatch:
        """The watch on the gangs that wait (:mod:`~gangmaster.am.waiting_watch`): made with
        the AM when its settings diagnose waiting gangs or limit their wait, else when first
        needed (an AM is asked why a gang waits); a trace replay's AMs never need it."""
        watch = self._watch
        if watch is None:
            watch = self._watch = WaitingWatch(self.settings, self.log, self.metrics, _weakly(self, "diagnose"))
        return watch

    # =============================================================== start
    def _start_fresh(self) -> None:
        cluster = self._cluster()
        checked = []   # (name, roles, its placement on the idle cluster or None) of each gang
        for name, roles in self.job.named_gangs:
            try:
                placed = cluster.check_fits_empty(roles, self._pipeline_for)
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
        now = self.now()
        since = now if waiting_since is None else waiting_since
        gang = GangRun(name, roles, attempt, ROLE_WAITING, AttemptRecord(name, attempt, since), history=history)
        if waiting_since is None:
            if self._journaling:
                self.journal.write("gang_attempt", now, gang=name, attempt=attempt, waiting_since=since)
            self.metrics.attempts.inc()
        gang.acquisition = GangAcquisition(name, roles, self._asking)
        if self._logging:
            self.log(f"gang {name} attempt {attempt}: waiting for {sum(r.instances for r in roles)} instance(s)")
        return gang

    # ============================================================ heartbeat
    def heartbeat(self) -> None:
        """One round: decide, talk to the RM once, react."""
        if self.done:
            return
        if not gc.isenabled():   # held off already (a trace replay): nothing to pause
            self._heartbeat()
            return
        with collector_paused():   # a gang's start is one burst of long-lived objects
            self._heartbeat()

    def _heartbeat(self) -> None:
        now = self.now()
        finished = 0   # the tasks of the gangs' current attempts that ended (those of pending gangs: none yet)
        for gang in self.gangs:
            if gang.state in PENDING:
                self._plan(gang, now)
                if self._watch is not None:
                    waited_too_long = self._watch.check(gang, now)
                    if waited_too_long:
                        self._finish("failed", waited_too_long)
                        return
            else:
                finished += len(gang.tasks) - gang.running   # (GangRun.finished_tasks)
        request = self._request(finished)
        try:
            response = self.rm.allocate(request)
        except WrongState as exc:
            ended = self._ended_application()
            if ended is not None:
                self.application_ended(ended)
            else:   # a newer AM attempt took over (the RM declared this one dead)
                self.log(f"the RM no longer accepts AM attempt {self.am_attempt}: {exc}; stopping")
                self._stop_quietly()
            return
        self._absorb(response, now)
        if self.done:
            return
        if response.allocated:   # (a gang's last container comes in a grant)
            for gang in self.gangs:
                if gang.state is ROLE_ACQUIRING and gang.acquisition.complete:
                    self._launch(gang, now)
        if self._to_decide:   # else nothing ended (a task's end to journal is always a gang's to decide)
            self._decide(now)
        if self._watch is not None and self._watch.latest:
            self._watch.started(self.gangs)

    def _plan(self, gang: GangRun, now: float) -> None:
        acq = gang.acquisition
        growth = (self._tracker or self._cluster()).grown
        if acq.found_no_room and acq.first_grant_at is None and acq.stalled(now, growth):
            # Holding and asking for nothing, and nothing new could let it fit (only a gang whose
            # last placement found no room can be stalled: the first test): planning would
            # change nothing (releases and reselections happen only in it), so a stuck gang
            # costs this one check a heartbeat.
            gang.state = ROLE_WAITING
            return
        acq.plan(now, partial(self._view_for_placement, gang), partial(self._place, gang), growth)
        gang.state = ROLE_ACQUIRING if acq.by_request or acq.by_container else ROLE_WAITING

    def acquisition_released(self, acq: GangAcquisition, now: float, containers: list[str]) -> None:
        """A gang's acquisition gave back what it held (its partial hold timed out): counted,
        and journaled (:class:`~gangmaster.am.acquisition.AcquisitionOwner`)."""
        gang = self._gang_of(acq)
        gang.record.releases += 1
        self.metrics.releases.inc()
        if self._journaling:
            self.journal.write("released", now, gang=gang.name, attempt=gang.attempt, containers=list(containers),
                               reason="partial hold timed out")

    def acquisition_reselected(self, acq: GangAcquisition) -> None:
        """A gang's acquisition selected an instance again (its ask went stale): counted."""
        self._gang_of(acq).record.reselections += 1
        self.metrics.reselections.inc()

    def _gang_of(self, acq: GangAcquisition) -> GangRun:
        return next(g for g in self.gangs if g.acquisition is acq)

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

    def _absorb(self, response: AllocateResponse, now: float) -> None:
        """Every event of one response, in order: nodes, grants, rejections, pending asks, completions."""
        if response.node_updates:
            self._cluster().apply(response.node_updates)
        gangs = self.gangs
        for container in response.allocated:   # taken by the gang that asked for it, else given back
            for gang in gangs:
                if gang.state is ROLE_ACQUIRING and gang.acquisition.on_granted(container, now):
                    break
            else:
                self._asking.releases.append(container.container_id)
        for rejection in response.rejected:
            gang = self._asker(rejection.request_id)
            if gang is not None:
                gang.acquisition.on_rejected(rejection.request_id, rejection.reason)
                if gang.acquisition.never_reason:
                    self._finish("failed", f"gang {gang.name} can never be granted: {gang.acquisition.never_reason}")
                    return
        for pending in response.pending:
            gang = self._asker(pending.request_id)
            if gang is not None:
                gang.acquisition.on_pending(pending.request_id, pending.reason)
        running = self._running
        for status in response.completed:
            found = running.pop(status.container_id, None)
            if found is None:
                self._container_lost(status.container_id, status.diagnostics)
                continue
            gang, task = found
            if gang in self.gangs and task.state is TASK_RUNNING:   # not an older attempt (GangRun: eq is identity)
                self._task_finished(gang, task, status.exit_status, status.diagnostics, now)

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
        if exit_status == 0:
            gang.end_task(task, TASK_SUCCEEDED, now, diagnostics, exit_status)
        else:
            gang.end_task(task, TASK_FAILED, now, diagnostics, exit_status)
            if exit_status is not None and exit_status < 0:   # the node or the RM, not the program
                self._cluster().mark_failed(task.role, task.host)
            self.log(f"gang {gang.name} attempt {gang.attempt}: {task.name} on {task.host} failed with exit "
                     f"status {exit_status}" + (f" ({diagnostics})" if diagnostics else ""))
        if self._journaling:
            self._endings.setdefault((gang.name, gang.attempt, now), []).append(task)

    def _record_endings(self, at: float) -> None:
        """Journal the task endings not recorded yet, one line per gang attempt (a heartbeat
        that sees 6,001 tasks end writes one line, not 6,001), before anything is decided on
        them (at ``at``, the time the AM decides at)."""
        for (gang, attempt, now), tasks in self._endings.items():
            self.journal.write("tasks_finished", at, gang=gang, attempt=attempt, finished_at=now,
                               tasks=TaskEndings(tasks))
        self._endings.clear()

    # ============================================================ placement
    def _cluster(self) -> ClusterTracker:
        """The AM's view of the cluster: read from the RM once, then kept from node updates."""
        tracker = self._tracker
        if tracker is None:
            tracker = self._tracker = ClusterTracker(self.rm.cluster_nodes)
        return tracker

    def _pipeline_for(self, role: RoleSpec) -> SelectionPipeline:
        name = role.selector or self.selection.selector
        pipeline = self._pipelines.get(name)
        if pipeline is None:
            pipeline = self._pipelines[name] = SelectionPipeline(
                replace(self.selection, seed=self.selection.seed if self._seed is None else self._seed),
                get_selector(name, self.selection.candidate_nodes_factor))
        return pipeline

    def _view_for_placement(self, gang: GangRun | None = None) -> ClusterView:
        """A scratch copy of the view, with the per-node caps counting our running instances;
        for ``gang``'s planning, the view itself when there is nothing to count: no task
        runs and the gang holds and asks nothing (planning books only those on the view it
        gets, and placement works on a copy of its own)."""
        if gang is not None and not self._running:
            acq = gang.acquisition
            if not acq.by_container and not acq.by_request:
                return (self._tracker or self._cluster()).view
        return self._cluster().scratch((task.role, task.host) for _gang, task in self._running.values())

    def _place(self, gang: GangRun, view: ClusterView, wanted: Mapping[str, Sequence[int]]) -> GangPlacement:
        """The gang's placement on ``view``; its first one is the never-fits check's, when
        that placed it on the idle cluster and nothing has changed since (the same view,
        unchanged, nothing running, every instance wanted)."""
        every = wanted is gang.acquisition.layout.everything
        at_start = gang.placed_at_start
        if at_start is not None:
            gang.placed_at_start = None
            placed, checked, changes = at_start
            if self._tracker.view is checked and checked.changes == changes and not self._running and every:
                return placed
        # every instance of every role: place_gang's default, with no indices to check
        return place_gang(view, gang.roles, self._pipeline_for, indices=None if every else wanted)

    # =============================================================== launch
    def _launch(self, gang: GangRun, now: float) -> None:
        """Every instance is granted: start them all now. A task the RM cannot start is a
        failed task: the ones already started run on until :meth:`_decide` ends the attempt
        in this same heartbeat, and the containers never started are given back."""
        gang.state = ROLE_LAUNCHING
        acq = gang.acquisition
        roles = acq.roles
        kinds = acq.layout.port_kinds
        running = self._running   # each task is running from here on, unless the RM refuses it
        tasks, task_kinds = [], []
        for rank, s in enumerate(acq.slots.values()):   # (in rank order)
            c, role = s.container, s.role
            resource = c.resource
            kind = kinds.of(role, resource.port_ranges)
            task = TaskRecord(role, s.index, rank, c.container_id, c.host, _gpu_indices(resource.gpu_mask),
                              kind.named, now, gpu_milli=resource.gpu_milli)
            tasks.append(task)
            task_kinds.append(kind)
            running[c.container_id] = (gang, task)
        token, barrier_env = open_barrier(self._coordinator, self.app_id, self.job, gang, tasks)
        shared, own = launch_envs(self.job, gang.roles, tasks, task_kinds, barrier_env, self.queue,
                                  self.task_env)
        launches = []
        for t, env in zip(tasks, own):
            launches.append(ContainerLaunch(t.container_id,
                                            LaunchContext.of_variables(_command(roles[t.role].commands), env)))
        shared = LaunchContext(env=shared) if shared else _NOTHING_SHARED
        try:
            refused = self.rm.start_containers(StartContainers(tuple(launches), shared))
        except RMError as exc:   # the whole batch refused (its shared launch, the RM out of reach)
            refused = StartRefused(0, tasks[0].container_id, exc)
        if refused is not None:   # those before it run; it failed; those after it were never started
            for task in tasks[refused.index:]:
                del running[task.container_id]
            del tasks[refused.index + 1:]
            task = tasks[-1]
            task.state, task.finished_at, task.diagnostics = TASK_FAILED, now, refused.error.message
            self._asking.releases.extend([s.container.container_id for s in acq.in_order()[refused.index:]])
        gang.started(tasks)
        gang.state = ROLE_RUNNING
        record = gang.record
        record.started_at = now
        if self._journaling:
            self.journal.write("launched", now, gang=gang.name, attempt=gang.attempt, started_at=now,
                               barrier_token=token, tasks=LaunchedTasks(tasks))
        if refused is not None:
            self._to_decide.add(gang)
            self.log(f"gang {gang.name} attempt {gang.attempt}: {failure(tasks[-1])}; the attempt fails")
            return
        self.metrics.gang_wait.observe(now - record.waiting_since)
        if self._logging:
            self.log(f"gang {gang.name} attempt {gang.attempt}: started all {len(tasks)} task(s) after waiting "
                     f"{now - record.waiting_since:.1f}s on {len({t.host for t in tasks})} host(s)")

    # ============================================================ decisions
    def _decide(self, now: float) -> None:
        """Decide on the gangs whose tasks ended: a task never launched restarts its gang
        (a gang starts whole or not at all, whatever the completion policy says); a role
        that reached its failure threshold restarts its retry scope; else the job may have
        succeeded."""
        if self._endings:
            self._record_endings(now)
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
                self.metrics.restarts.inc()
                self.log(f"gang {gang.name}: restarting as attempt {gang.attempt + 1} of {limit}")
                self.gangs[i] = self._new_gang(gang.name, gang.roles, gang.attempt + 1, gang.history)

    def _end_attempt(self, gang: GangRun, outcome: str, reason: str, now: float) -> None:
        """Fail the barrier first (waiters are told at once), then stop the tasks, then record."""
        end_barrier(self._coordinator, self.app_id, gang, outcome, reason, self.log)
        if gang.running:
            for task in gang.tasks:
                if task.state is TASK_RUNNING:
                    self._stop(task.container_id)
                    self._running.pop(task.container_id, None)
                    gang.end_task(task, TASK_STOPPED, now, "stopped: its attempt ended")
        elif gang.state in PENDING and gang.acquisition is not None:
            gang.acquisition.abandon()   # (into the outbox)
        record = gang.record
        record.ended_at, record.outcome, record.reason, record.tasks = now, outcome, reason, gang.tasks
        gang.history.append(record)
        gang.state = ROLE_SUCCEEDED if outcome == "succeeded" else ROLE_FAILED
        if self._journaling:
            self.journal.write("attempt_ended", now, record=record)   # final now: written as its dict

    def _stop(self, container_id: str) -> None:
        try:
            self.rm.stop_container(container_id)
        except RMError as exc:
            self.log(f"stopping {container_id}: {exc}")

    def _finish(self, outcome: str, reason: str, unregister: bool = True) -> None:
        now = self.now()
        if self._endings:
            self._record_endings(now)
        for gang in self.gangs:
            if not gang.record.outcome:   # the attempts still open end with the job
                if outcome == "succeeded":
                    self._end_attempt(gang, outcome, reason, now)
                else:
                    self._end_attempt(gang, "stopped", f"job {outcome}: {reason}", now)
        self.outcome, self.reason, self.done = outcome, reason, True
        if self._journaling:
            self.journal.write("job_finished", now, outcome=outcome, reason=reason)
        if self._logging:
            self.log(f"job {self.job.name} {outcome}: {reason}")
        if unregister:
            try:
                self.rm.finish(self.app_id, self.am_attempt, "SUCCEEDED" if outcome == "succeeded" else "FAILED",
                               reason)
            except RMError as exc:
                self.log(f"unregistering from the RM: {exc}")
        self.close()

    def _stop_quietly(self) -> None:
        """This AM attempt was replaced (the RM declared it dead): stop without deciding anything.
        Its files stay open: should the application end before a new AM registers, this one
        records the RM's verdict (:meth:`application_ended`)."""
        self.done = True

    def close(self) -> None:
        """Close the log and the journal (the driver calls it when the run is over). An AM
        closed before its job finished records when it stopped, so a run that resumes the
        job later knows how long the interrupted attempts lasted."""
        if not self.done and not self.journal.closed:
            self.journal.write("am_stopped", reason="the run stopped before the job finished")
        self.log.close()
        self.journal.close()

    # ====================================================== ended from outside
    def _ended_application(self) -> ApplicationReport | None:
        """The RM's report of this application when the RM has ended it, else None."""
        try:
            report = self.rm.application_report(self.app_id)
        except RMError:
            return None
        return report if report.state.finished else None

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
                if not gang.acquisition.stalled(now, self._cluster().grown):
                    return False
                waiting = True
        return waiting

    def cannot_progress(self, why: str) -> None:
        """The driver found that nothing still to come can change what this job waits for:
        the job fails, saying ``why`` and why each gang waits (:meth:`why_waiting`)."""
        waiting = "; ".join(f"gang {g.name} is waiting: {self.watch.why(g)}" for g in self.gangs
                            if g.pending and g.acquisition is not None)
        self._finish("failed", f"it can make no progress ({why}); {waiting}")

    # ============================================================== status
    def gauge_values(self) -> GaugeValues:
        """What the job's gauges show now (read when they are scraped, maybe from another
        thread: it reads copies, never iterates what the AM may be changing)."""
        counts = dict.fromkeys(CONTAINER_STATES, 0)
        pending = 0
        for g in list(self.gangs):
            if g.pending:
                pending += 1
                acq = g.acquisition
                if acq is not None and g.state is ROLE_ACQUIRING:
                    counts["requested"] += len(acq.by_request)
                    counts["allocated"] += len(acq.by_container)
            for state, n in list(g.by_state.items()):
                counts[state.value] += n
        whole, milli = self.gpus_held()
        return GaugeValues(pending, counts, whole, milli)

    def gpus_held(self) -> tuple[int, int]:
        """Whole GPUs, and milli-GPU of shares of GPUs, that the job's containers hold now:
        those granted to gangs still acquiring, and those of running tasks."""
        whole = milli = 0
        for gang in list(self.gangs):
            acq = gang.acquisition
            if acq is not None and gang.state is ROLE_ACQUIRING:
                for slot in acq.granted:
                    whole, milli = whole + slot.container.resource.gpus, milli + slot.container.resource.gpu_milli
        for _gang, task in list(self._running.values()):
            whole, milli = (whole, milli + task.gpu_milli) if task.gpu_milli else (whole + len(task.gpus), milli)
        return whole, milli

    def role_states(self) -> dict[str, RoleState]:
        return {r.name: g.role_state(r) for g in self.gangs for r in g.roles}

    def history(self) -> list[AttemptRecord]:
        """Every attempt of every gang, finished ones first, in the order they ended."""
        return attempt_history(self.gangs)

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
        view = self._view_for_placement()
        for role, host, _resource in held:
            view.instances_of(role)[view.index(host)] += 1
        return diagnose(view, roles, self._pipeline_for, job=self.job.name, gang=name, occupants=self._occupants(),
                        indices=wanted, own=[(host, resource) for _role, host, resource in held])

    def why_report(self) -> dict:
        """What ``/why`` serves for this job: each gang still waiting, how long, and its last
        diagnosis (null until it has waited ``am.explain_after_s``)."""
        now, reasons = self.now(), self.why_waiting()
        gangs = {}
        for g in self.gangs:
            if g.pending and g.acquisition is not None:
                diagnosis = self._watch.latest.get(g.name) if self._watch is not None else None
                gangs[g.name] = {"waiting_s": round(now - g.record.waiting_since, 3),
                                 "reason": reasons.get(g.name, ""),
                                 "diagnosis": diagnosis.to_dict() if diagnosis is not None else None}
        return {"job": self.job.name, "app_id": self.app_id, "outcome": self.outcome, "waiting": gangs}

    def why_waiting(self) -> dict[str, str]:
        """For each gang not running yet: why, in numbers (empty when it is just being granted)."""
        out = {}
        for g in self.gangs:
            if g.pending and g.acquisition is not None:
                acq = g.acquisition
                pending = [f"{s.name} on {s.placement.host}: {s.pending_reason}" for s in acq.outstanding
                           if s.pending_reason]
                granted = f"{len(acq.by_container)}/{acq.total} granted"
                out[g.name] = acq.waiting_reason or "; ".join([granted, *pending[:3]])
        return out

    # ================================================= taken over from a journal
    # What am.recovery needs to rebuild gangs from a journal (failover, resume): the same
    # transitions a live AM makes, named for that use so recovery touches no private state.
    def begin_attempt(self, name: str, roles: tuple[RoleSpec, ...], attempt: int, history: list[AttemptRecord],
                      waiting_since: float | None = None) -> GangRun:
        """A gang attempt, waiting; with ``waiting_since`` it is one the journal already recorded
        (not journalled nor counted again). The caller adds it to :attr:`gangs`."""
        return self._new_gang(name, roles, attempt, history, waiting_since=waiting_since)

    def take_back_running(self, gang: GangRun) -> None:
        """Watch again the tasks of ``gang`` the journal recorded running (their containers the
        RM kept), and let the gang decide at the next :meth:`decide_gangs`."""
        self._running.update((t.container_id, (gang, t)) for t in gang.tasks if t.state is TASK_RUNNING)
        self._to_decide.add(gang)

    def task_ended_unwatched(self, gang: GangRun, task: TaskRecord, exit_status: int | None, diagnostics: str,
                             now: float) -> None:
        """A task ended while no AM was watching: it ends now, as any task of the attempt ends."""
        self._running.pop(task.container_id, None)
        self._task_finished(gang, task, exit_status, diagnostics, now)

    def reopen_barrier(self, gang: GangRun, token: str | None) -> None:
        """The recovered attempt's barrier takes up the token the previous AM gave its tasks."""
        reopen_barrier(self._coordinator, self.app_id, self.job, gang, token, self.log)

    def stop_container(self, container_id: str) -> None:
        """Stop a container no gang owns (an RM error is logged, not raised)."""
        self._stop(container_id)

    def decide_gangs(self, now: float) -> None:
        """The gangs whose tasks ended decide, as after any heartbeat."""
        self._decide(now)

    def end_attempt(self, gang: GangRun, outcome: str, reason: str, now: float) -> None:
        """End ``gang``'s attempt: barrier, running tasks and record, as any attempt ends."""
        self._end_attempt(gang, outcome, reason, now)

    def finish(self, outcome: str, reason: str) -> None:
        """The job ends with ``outcome`` (the open attempts end with it)."""
        self._finish(outcome, reason)


#: The shared launch of a batch of one container: it brings its whole launch itself.
_NOTHING_SHARED = LaunchContext()


def _weakly(owner: object, method: str) -> Callable:
    """``owner``'s ``method``, called without keeping ``owner`` alive: for what the AM owns
    and that calls back into it, so the AM and it make no reference cycle. An AM is then
    freed as soon as its driver drops it, not by the cycle collector (a trace replay ends
    tens of thousands of AMs; their cycles cost it a tenth of its time)."""
    ref = weakref.ref(owner)
    return lambda *args: getattr(ref(), method)(*args)


@lru_cache(maxsize=64)
def _folder(work_dir: str | Path) -> Path:
    """``work_dir`` as a Path: one per folder (a trace replay's AMs all name the same one)."""
    return Path(work_dir)


@lru_cache(maxsize=1024)
def _gpu_indices(mask: int) -> tuple[int, ...]:
    """A container's GPUs as indices: one tuple per mask (a gang's thousands of tasks hold a few masks)."""
    return tuple(indices_of(mask))


@lru_cache(maxsize=1024)
def _command(commands: tuple[str, ...]) -> tuple[str, ...]:
    """A role's container command: OpenPAI runs its commands as one shell script, and the
    first failing one fails the task. One per list of commands (a replay's roles share theirs)."""
    return ("/bin/sh", "-c", "set -e\n" + "\n".join(commands))
