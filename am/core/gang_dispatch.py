"""A job's gangs through each heartbeat: what they ask the RM, and each item of its answer
handed to the gang it concerns.

The AM moves its gangs on events, never by re-examining everything each heartbeat:

* **before the heartbeat** each pending gang plans its asks, cancels and releases
  (:meth:`GangDispatch.before_heartbeat`), and they go to the RM in one allocate request with the
  job's progress (:meth:`GangDispatch.request`);
* **containers granted, rejected, pending** move the gang that asked for them; a gang
  whose every container is granted launches after the whole answer is read
  (:meth:`GangDispatch.after_heartbeat`, :class:`~gangmaster.am.core.gang_launch.GangLauncher`);
* **containers completed** end a task of the gang that runs it, and that gang is to be
  decided at the end of the heartbeat (:attr:`GangDispatch.to_decide`: the AM's verdict);
* **node updates** keep the AM's view of the cluster
  (:mod:`gangmaster.am.core.cluster_tracker`); a gang that did not fit is placed again only
  when one of them gave some node more room.

:class:`GangDispatch` is the AM's :class:`~gangmaster.am.core.rm_conversation.RMCallbacks`:
the AM's heartbeat is one round of :meth:`~gangmaster.am.core.rm_conversation.RMConversation.heartbeat`
with it. What it cannot decide for a gang it keeps for the AM to read once the round is
over: a gang that waited longer than it may, or an ask that can never be granted (the job
fails; nothing more is sent or read: :attr:`GangDispatch.must_fail`), the application the
RM ended (:attr:`GangDispatch.ended`). It holds no reference to the AM (the two make no
reference cycle: a trace replay's ended AMs are freed as they end).
"""
from __future__ import annotations

import math

from functools import partial
from typing import Callable, Sequence

from .acquisition import AcquisitionContext
from .am_placement import AMPlacement
from gangmaster.am.barrier.attempt_barrier import reopen_barrier
from .gang_launch import GangLauncher
from .gang_run import PENDING, GangRun, failure
from .lifecycle import ROLE_ACQUIRING, ROLE_LAUNCHING, ROLE_RUNNING, TASK_RUNNING, TaskRecord
from gangmaster.am.ops.progress_log import ProgressLog, QuietLog
from .job_shutdown import Shutdown
from .recovery import Recovered, TakenBack
from gangmaster.protocol.rm_protocol import (AllocateRequest, ApplicationReport, Container, ContainerStatus,
                                             ExitStatus, HeldReservation, NodeReport, PendingAsk, PreemptionMessage, PreemptionOutlook,
                                             Rejection, ReservedNode, RMError, WrongState)


class GangDispatch:
    """The gangs of one AM attempt (``gangs``, in the job's order; the AM restarts them in
    place) and the tasks they run (``running``: container id -> (gang, task))."""

    #: why the job must fail: a gang waited longer than it may, or an ask of one of its gangs
    #: can never be granted ("": neither)
    must_fail = ""
    #: the application's report once the RM ended it (the RM no longer accepts this AM attempt)
    ended: ApplicationReport | None = None
    #: the deadline of the latest preemption notice (None: never preempted)
    preempted_until: float | None = None

    def __init__(self, gangs: list[GangRun], running: dict[str, tuple[GangRun, TaskRecord]],
                 asking: AcquisitionContext, placement: AMPlacement, launcher: GangLauncher,
                 log: ProgressLog | QuietLog, am_attempt: int, overdue: Callable[[GangRun, float], str]):
        """``am_attempt``: the AM attempt whose requests these are; ``overdue(gang, now)``: ""
        or why the job must fail, for a gang that has planned (it waited longer than it may:
        :meth:`~gangmaster.am.ops.why_feed.WhyFeed.overdue`)."""
        self.gangs, self.running, self.asking, self.placement = gangs, running, asking, placement
        self.launcher, self.log, self.am_attempt, self.overdue = launcher, log, am_attempt, overdue
        self.to_decide: set[GangRun] = set()   # gangs whose tasks ended since the last decision
        self.avoiding: set[GangRun] = set()    # ... of which a task failed because of its node (keep_placeable)
        self.dropped: list[tuple[str, int, str]] = []   # (gang, attempt, role) whose avoidance keep_placeable dropped
        self.granted = False                   # this heartbeat's answer granted containers

    @property
    def done(self) -> bool:
        """The job must end (:attr:`must_fail`): nothing more is sent, the rest of the RM's answer is not read."""
        return bool(self.must_fail)

    # ------------------------------------------------------ before the heartbeat
    def before_heartbeat(self, now: float) -> None:
        """Each pending gang decides this heartbeat's asks, cancels and releases, in the job's
        order, and then ``overdue(gang, now)`` says whether it waited longer than it may: if
        so, the job must fail (:attr:`must_fail`; the gangs after it do not plan)."""
        placement, overdue = self.placement, self.overdue
        for gang in self.gangs:
            if gang.state in PENDING:
                gang.plan(now, partial(placement.view_for, gang), partial(placement.place, gang),
                          placement.cluster.grown)
                too_long = overdue(gang, now)
                if too_long:
                    self.must_fail = too_long
                    return

    def request(self) -> AllocateRequest:
        """This heartbeat's allocate request: what the gangs' plans ask, cancel and give back,
        after what the AM itself had to (containers it did not want, attempts that ended),
        and its progress: the share of the job's instances whose task (of the current
        attempt) has ended."""
        finished = 0   # (those of pending gangs: none yet)
        for gang in self.gangs:
            if gang.state not in PENDING:
                finished += len(gang.tasks) - gang.running   # (GangRun.finished_tasks)
        total = self.launcher.job.total_instances
        progress = finished / total if total else 1.0   # (an attempt has at most its gang's instances as tasks)
        self.granted = False
        out = self.asking
        if not (out.asks or out.cancels or out.releases):   # a heartbeat that only hears what happened
            return AllocateRequest(self.launcher.app_id, self.am_attempt, progress=progress)
        asks, cancels, releases = out.take_outbox()
        return AllocateRequest(self.launcher.app_id, self.am_attempt, asks=tuple(asks), cancel=tuple(cancels),
                               releases=tuple(releases), progress=progress)

    # ------------------------------------------- what the RM answered (RMCallbacks)
    def on_nodes_updated(self, updates: Sequence[NodeReport]) -> None:
        self.placement.cluster.apply(updates)

    def on_nodes_reserved(self, nodes: Sequence[ReservedNode]) -> None:
        self.placement.reserved(nodes)

    def on_reservation(self, held: HeldReservation | None, now: float) -> None:
        self.placement.holding(held, now)

    def on_preemption_outlook(self, outlook: PreemptionOutlook | None, now: float) -> None:
        self.placement.preempting(outlook, now)

    def on_containers_allocated(self, containers: Sequence[Container], now: float) -> None:
        """Each container is taken by the gang that asked for it, else given back."""
        gangs = self.gangs
        self.granted = True   # some gang may have all it asked for: it launches after the whole response
        for container in containers:
            for gang in gangs:
                if gang.state is ROLE_ACQUIRING and gang.acquisition.on_granted(container, now):
                    break
            else:
                self.asking.releases.append(container.container_id)

    def on_requests_rejected(self, rejections: Sequence[Rejection]) -> None:
        """An ask the RM rejected is selected again, unless it was rejected too often (the job fails)."""
        for rejection in rejections:
            gang = self._asker(rejection.request_id)
            if gang is not None:
                gang.acquisition.on_rejected(rejection.request_id, rejection.reason)
                if gang.acquisition.never_reason:
                    self.must_fail = f"gang {gang.name} can never be granted: {gang.acquisition.never_reason}"
                    return

    def on_requests_pending(self, pending: Sequence[PendingAsk]) -> None:
        for ask in pending:
            gang = self._asker(ask.request_id)
            if gang is not None:
                gang.acquisition.on_pending(ask.request_id, ask.reason)

    def on_containers_completed(self, statuses: Sequence[ContainerStatus], now: float) -> None:
        """A running task's container ended: its task ended; else a granted one was lost."""
        running = self.running
        for status in statuses:
            found = running.pop(status.container_id, None)
            if found is None:
                self._container_lost(status.container_id, status.diagnostics)
                continue
            gang, task = found
            if gang in self.gangs and task.state is TASK_RUNNING:   # not an older attempt (GangRun: eq is identity)
                self.task_finished(gang, task, status.exit_status, status.diagnostics, now)

    def on_preemption(self, message: PreemptionMessage, now: float) -> None:
        """The RM preempts this job's gang (YARN's strict contract: these containers end at
        ``message.deadline``): each running task is told (a signal and a notice it can poll,
        ``BarrierTaskContext.preemption_notice``) so that it can checkpoint first. The gang
        restarts once its tasks have ended, without counting a failure
        (:func:`~.retry_scope.restart_preempted`)."""
        told = 0
        for container_id in message.containers:
            if container_id in self.running:
                try:
                    self.launcher.rm.notify_preemption(container_id)
                    told += 1
                except RMError as exc:
                    self.log(f"telling the task of {container_id} it is preempted: {exc}")
        self.preempted_until = message.deadline
        self.log(f"preempted{f' ({message.reason})' if message.reason else ''}: {len(message.containers)} "
                 f"container(s) end {by_deadline(message.deadline)}; {told} task(s) told")

    def on_shutdown_request(self, ended: ApplicationReport | None, why: WrongState) -> None:
        """The RM no longer accepts this AM attempt: the application ended (``ended``: its
        report, kept for the AM's verdict: :attr:`ended`), or a newer AM attempt took over (the
        RM declared this one dead): then the AM stops without deciding anything."""
        self.ended = ended
        if ended is None:
            self.log(f"the RM no longer accepts AM attempt {self.am_attempt}: {why}; stopping")

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

    def task_finished(self, gang: GangRun, task: TaskRecord, exit_status: int | None, diagnostics: str,
                      now: float) -> None:
        """A task of the gang's current attempt ended by itself (no longer in :attr:`running`):
        the gang is decided at the end of this heartbeat (:attr:`to_decide`)."""
        self.to_decide.add(gang)
        gang.task_ended(task, exit_status, diagnostics, now)
        if exit_status != 0:
            if exit_status is not None and exit_status < 0 and exit_status != ExitStatus.PREEMPTED:
                # the node or the RM, not the program (a preemption is no fault of the node)
                self.placement.cluster.mark_failed(task.role, task.host)
                self.avoiding.add(gang)
            self.log(f"gang {gang.name} attempt {gang.attempt}: {task.name} on {task.host} failed with exit "
                     f"status {exit_status}" + (f" ({diagnostics})" if diagnostics else ""))

    def keep_placeable(self, now: float) -> None:
        """The gangs whose tasks failed because of their nodes this heartbeat (their roles now
        avoid those nodes) are checked once each, however many of their tasks a lost node
        took: a role whose avoided nodes would leave its gang unable to start even on the
        idle cluster is placed on them again (:meth:`ClusterTracker.keep_placeable`), an
        event the log, the journal and so the run report keep."""
        placement = self.placement
        for gang in self.avoiding:
            for role in placement.cluster.keep_placeable(gang.roles, placement.pipeline_for):
                self.dropped.append((gang.name, gang.attempt, role))
                self.asking.events.avoidance_dropped(gang, role, now)
        self.avoiding.clear()

    def take_decided(self) -> list[GangRun]:
        """The gangs to decide on now, in the job's order: those still running whose tasks
        ended since the last decision (:attr:`to_decide`, emptied)."""
        to_decide = self.to_decide
        if not to_decide:
            return []
        deciding = [g for g in self.gangs if g in to_decide and g.state is ROLE_RUNNING]
        to_decide.clear()
        return deciding

    def take_over(self, recovered: Recovered, shutdown: Shutdown, now: float) -> None:
        """Carry on from what a journal left (:mod:`~gangmaster.am.core.recovery`): its gangs,
        in the job's order, are these; those launched are taken back (:meth:`take_back`); the
        containers no gang owns are stopped, unless the job had already finished."""
        for taken in recovered.gangs:
            if taken.launched:
                self.take_back(taken, now)
            self.gangs.append(taken.gang)
        if recovered.finished is None:
            for cid in recovered.strays:
                self.log(f"stopping container {cid}: its gang's launch was not completed by the previous AM")
                shutdown.stop(cid)

    def take_back(self, taken: TakenBack, now: float) -> None:
        """A launched gang taken back from a journal (:mod:`~gangmaster.am.core.recovery`): its
        tasks still running are watched again, those that ended while no AM watched end now,
        its barrier is reopened, and it is to be decided as after any heartbeat."""
        gang, running = taken.gang, self.running
        running.update((t.container_id, (gang, t)) for t in gang.tasks if t.state is TASK_RUNNING)
        self.to_decide.add(gang)
        for task, exit_status, diagnostics in taken.ended:
            running.pop(task.container_id, None)
            self.task_finished(gang, task, exit_status, diagnostics, now)
        self.log(f"gang {gang.name} attempt {gang.attempt}: recovered {len(gang.tasks)} task(s), "
                 f"{gang.running} still running")
        launcher = self.launcher
        reopen_barrier(launcher.coordinator, launcher.app_id, launcher.job, gang, taken.barrier_token, self.log)

    # ------------------------------------------------------ after the answer
    def after_heartbeat(self, now: float) -> None:
        """When the answer granted containers (a gang's last container comes in a grant),
        every gang whose every instance is granted starts them all now. A task the RM
        refused fails its attempt, in this same heartbeat (the gang is to be decided)."""
        if not self.granted:
            return
        for gang in self.gangs:
            if gang.state is ROLE_ACQUIRING and gang.acquisition.complete:
                if not self.launcher.launch(gang, now):
                    self.to_decide.add(gang)
                    self.log(f"gang {gang.name} attempt {gang.attempt}: {failure(gang.tasks[-1])}; the attempt fails")

    def waiting_for_room(self, now: float) -> list[GangRun]:
        """The gangs not started whose last placement found no room, with nothing new since
        (what a preemption could help: the RM's monitor asks, ``rm.preemption``)."""
        grown = self.placement.cluster.grown
        return [g for g in self.gangs if g.state in PENDING and g.acquisition.stalled(now, grown)]

    def waiting_on_cluster(self, now: float) -> bool:
        """True when nothing the AM does by itself can move the job on (see
        :meth:`~gangmaster.am.ops.job_status.JobStatus.waiting_on_cluster`)."""
        if self.running:
            return False
        waiting = False
        for gang in self.gangs:
            if gang.state is ROLE_LAUNCHING:
                return False
            if gang.state in PENDING:
                if not gang.acquisition.stalled(now, self.placement.cluster.grown):
                    return False
                waiting = True
        return waiting


def by_deadline(deadline: float) -> str:
    """When preempted containers end, as the AM's log says it: YARN's notice carries no
    deadline, and where its grace cannot be read the client's is ``inf`` (not known)."""
    return f"by {deadline:g}s" if math.isfinite(deadline) else "when the RM kills them (no deadline known)"
