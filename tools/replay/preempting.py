"""Preemption in a trace replay (``replay --preemption on``): a waiting job whose gang does
not start may preempt running jobs of lower priority, whole gangs, the fewest GPU-hours of
lost work first, never without making room (the choice: :mod:`..rmsim.victims`, with the
real placement of the job's own AM on the shared view of the cluster). Each victim is
preempted through the RM (:meth:`~..rmsim.core.ResourceManager.preempt`), as YARN's
preemption monitor does: its AM is told, and ``grace_s`` later its containers end
preempted; its AM starts the gang again as a new attempt, and the job waits in its queue
again, behind the jobs already there (:meth:`Preempting.requeue_order`).

A job's priority is its queue's (the RM queue's ``priority``), then its own (a trace's
``priority``); a queue under its guaranteed GPUs may also preempt jobs of queues over theirs.
What each preemption cost is tallied (:class:`Preemption`): the victim's GPUs times the
time from its start to the deadline (a simulated task does not checkpoint: all of it is lost).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..rmsim.preemption import DEFAULT_GRACE_S
from ..rmsim.victims import Priority, QueueShare, RunningGang, choose_victims, fits_once_gone, may_preempt

if TYPE_CHECKING:   # (the engine's own job record)
    from .engine import _Job

__all__ = ["DEFAULT_GRACE_S", "Preemption", "Preempting"]


@dataclass(frozen=True)
class Preemption:
    """One gang preempted: whose (``victim``, a job id), for whom (``by``), when (``at``: the
    notice), its GPUs and the GPU-hours of work it lost."""

    victim: str
    by: str
    at: float
    gpus: int
    lost_gpu_hours: float


class Preempting:
    """The replay's preemptions: whom a waiting job may preempt, and what was preempted."""

    def __init__(self, core, queues: dict, grace_s: float, first_order: int):
        self.core, self.grace_s = core, grace_s
        self.queue_priority = {name: queue.priority for name, queue in queues.items()}
        self.queues = queues   # RM queues, by name (what each holds and is guaranteed)
        self.done: list[Preemption] = []
        #: job order -> the app ids it preempted whose containers have not all ended yet
        self._reclaiming: dict[int, set[str]] = {}
        self._orders = itertools.count(first_order)   # a requeued job's place: behind every job

    def priority(self, job: "_Job") -> Priority:
        return Priority(self.queue_priority.get(job.queue, 0), job.trace.priority)

    def try_for(self, job: "_Job", running: list["_Job"], now: float) -> bool:
        """Preempt what ``job`` (waiting, its AM's gang placed nowhere) needs, if it may and
        any choice makes room; True when it preempted some gang. A job whose earlier victims
        still hold containers preempts nothing more (they are making its room)."""
        pending = self._reclaiming.get(job.order)
        if pending:
            apps = self.core.apps
            pending.intersection_update([a for a in pending if a in apps and apps[a].containers])
            if pending:
                return False
        priority, gpus = self.priority(job), job.gpus
        shares = self._shares()
        job_of, candidates = {}, []
        for other in running:
            if not shares and self.priority(other) >= priority:   # (the cheap test first: most are not)
                continue
            gang = self._running_gang(other)
            if gang is not None and may_preempt(priority, job.queue, gpus, gang, shares):
                candidates.append(gang)
                job_of[gang.app_id] = other.trace.job_id
        if not candidates:
            return False
        am = job.am
        gang = am.gangs[0]
        victims = choose_victims(candidates, fits_once_gone(am.placement.cluster.view, gang.roles,
                                                            am.placement.pipeline_for), now)
        if not victims:
            return False
        deadline = now + self.grace_s
        reason = f"for job {job.trace.job_id} (priority {tuple(priority)})"
        for victim in victims:
            self.core.preempt(victim.app_id, self.grace_s, reason)
            self.done.append(Preemption(job_of[victim.app_id], job.trace.job_id, now, int(victim.gpus),
                                        victim.lost_gpu_hours(deadline)))
        self._reclaiming[job.order] = {v.app_id for v in victims}
        return True

    def requeue_order(self) -> int:
        """The place in submission order of a job whose gang was preempted: behind every job."""
        return next(self._orders)

    def _running_gang(self, job: "_Job") -> RunningGang | None:
        """The running job's gang as preemption sees it (None: it holds nothing any more,
        or it is already under a notice)."""
        app = self.core.apps.get(job.am.app_id)
        if app is None or not app.containers:
            return None
        under_notice = self.core.preemptions.under_notice
        if any(under_notice(cid) for cid in app.containers):
            return None
        return RunningGang(app.app_id, job.queue, self.priority(job), float(job.gpus), job.start_s,
                           tuple((rec.node, rec.booking.resource) for rec in app.containers.values()))

    def _shares(self) -> dict[str, QueueShare]:
        """What each queue holds and is guaranteed, in GPUs (only queues with a guarantee matter)."""
        if not any(q.guaranteed_gpus for q in self.queues.values()):
            return {}
        return {name: QueueShare(q.gpu_milli_used / 1000.0, q.guaranteed_gpus) for name, q in self.queues.items()}
