"""Preemption in a trace replay (``replay --preemption on``): a waiting job whose gang does
not start may preempt running jobs of lower priority, whole gangs, the fewest GPU-hours of
lost work first, never without making room (the candidates and the choice, as the live
preemption monitor's: :mod:`..rmsim.preemptible`, with the real placement of the job's own
AM on the shared view of the cluster). Each victim is
preempted through the RM (:meth:`~..rmsim.core.ResourceManager.preempt`), as YARN's
preemption monitor does: its AM is told, and ``grace_s`` later its containers end
preempted; its AM starts the gang again as a new attempt, and the job waits in its queue
again, behind the jobs already there (:meth:`Preempting.requeue_order`).

A job's priority is its queue's (the RM queue's ``priority``), then its own (a trace's
``priority``, submitted with its application); a queue under its guaranteed GPUs may also
preempt jobs of queues over theirs.
What each preemption cost is tallied (:class:`Preemption`): the victim's GPUs times the
time from its start to the deadline (a simulated task does not checkpoint: all of it is lost).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.protocol.reasons import reason as why

from ..rmsim.preemptible import Preemptible
from ..rmsim.preemption import DEFAULT_GRACE_S

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
    """The replay's preemptions: whom a waiting job preempts, and what was preempted;
    ``jobs``: the replay's jobs by app id (whose job each victim is)."""

    def __init__(self, core, jobs: Mapping[str, "_Job"], grace_s: float, first_order: int):
        self.core, self.jobs, self.grace_s = core, jobs, grace_s
        self.preemptible = Preemptible(core)
        self.done: list[Preemption] = []
        #: job order -> the app ids it preempted whose containers have not all ended yet
        self._reclaiming: dict[int, set[str]] = {}
        self._orders = itertools.count(first_order)   # a requeued job's place: behind every job

    def try_for(self, job: "_Job", now: float) -> bool:
        """Preempt what ``job`` (waiting, its AM's gang placed nowhere) needs, if it may and
        any choice makes room; True when it preempted some gang. A job whose earlier victims
        still hold containers preempts nothing more (they are making its room)."""
        pending = self._reclaiming.get(job.order)
        if pending:
            apps = self.core.apps
            pending.intersection_update([a for a in pending if a in apps and apps[a].containers])
            if pending:
                return False
        am = job.am
        victims = self.preemptible.choose(am.app_id, am.gangs[0].roles, am.placement.cluster.view,
                                          am.placement.pipeline_for, now)
        if not victims:
            return False
        deadline = now + self.grace_s
        reason = why(R.PREEMPTED_FOR_JOB, job=str(job.trace.job_id),
                     priority=str(tuple(self.preemptible.priority(self.core.apps[am.app_id]))))
        for victim in victims:
            self.core.preempt(victim.app_id, self.grace_s, reason)
            self.done.append(Preemption(self.jobs[victim.app_id].trace.job_id, job.trace.job_id, now,
                                        int(victim.gpus), victim.lost_gpu_hours(deadline)))
        self._reclaiming[job.order] = {v.app_id for v in victims}
        return True

    def requeue_order(self) -> int:
        """The place in submission order of a job whose gang was preempted: behind every job."""
        return next(self._orders)
