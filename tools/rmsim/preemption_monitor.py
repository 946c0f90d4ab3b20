"""The RM's preemption monitor for live runs (``gangmaster run``, with ``rm.preemption: true``),
as YARN's ``ProportionalCapacityPreemptionPolicy`` monitor is to its scheduler: when a gang
cannot start and lower-priority gangs hold what it needs (or its queue is under its
guaranteed share and theirs over), the RM preempts them, whole gangs, the fewest GPU-hours
of lost work first, never without making room (the candidates and the choice:
:mod:`.preemptible`, with the real placement of the waiting job's own AM), with the
configured grace (:mod:`.preemption`).

A job's priority is its queue's, then its own (as submitted: the job's ``gangmaster:
priority``). A gang's lost work counts from its first container's allocation. A waiting
gang whose victims still hold containers preempts nothing more: they are making its room.
Off by default: without it nothing is preempted but by a scenario's ``preempt_app``.
"""
from __future__ import annotations

from typing import Callable

from gangmaster.am.core.gang_placement import PipelineFor
from gangmaster.am.core.victims import Outlook, RunningGang
from gangmaster.am.spec.jobspec_model import RoleSpec
from gangmaster.selectors.cluster import ClusterView

from .preemptible import Preemptible
from .records import Application


class PreemptionMonitor:
    """Whom a waiting gang preempts, on the RM core ``core`` (its applications, queues and
    preemption contracts), each victim with ``grace_s`` seconds' notice."""

    def __init__(self, core, grace_s: float, log: Callable[[str], None] | None = None):
        self.core, self.grace_s, self.log = core, grace_s, log
        self.preemptible = Preemptible(core)
        #: app id of a waiting gang's application -> the apps preempted for it, until it starts
        self._reclaiming: dict[str, set[str]] = {}

    def outlook(self, app_id: str, roles: tuple[RoleSpec, ...]) -> Outlook:
        """What the diagnosis of ``app_id``'s waiting gang ``roles`` is told: the candidates this
        monitor would choose among now, and its grace."""
        return self.preemptible.outlook(app_id, roles, self.grace_s)

    def preempt_for(self, app_id: str, roles: tuple[RoleSpec, ...], view: ClusterView, pipeline: PipelineFor,
                    now: float) -> tuple[RunningGang, ...]:
        """Preempt what the waiting gang ``roles`` of ``app_id`` needs (``view``: the cluster as
        its AM sees it; ``pipeline``: how its AM places), if it may and a choice makes room;
        the gangs preempted (none: nothing was)."""
        apps = self.core.apps
        if any(a in apps and _live(apps[a]) for a in self._reclaiming.get(app_id, ())):
            return ()
        victims = self.preemptible.choose(app_id, roles, view, pipeline, now)
        if not victims:
            return ()
        reason = f"for {app_id} (priority {tuple(self.preemptible.priority(apps[app_id]))})"
        for victim in victims:
            self.core.preempt(victim.app_id, self.grace_s, reason)
            if self.log is not None:
                self.log(f"RM: preempting {victim.app_id} (priority {tuple(victim.priority)}, {victim.gpus:g} GPUs, "
                         f"{victim.lost_gpu_hours(now):.3g} GPU-h of work) {reason} in {self.grace_s:g} s")
        self._reclaiming.setdefault(app_id, set()).update(v.app_id for v in victims)
        self._hold_back()
        return victims

    def started(self, app_id: str) -> None:
        """``app_id``'s waiting gangs started (or it ended): the gangs it preempted ask again."""
        if self._reclaiming.pop(app_id, None) is not None:
            self._hold_back()

    def _hold_back(self) -> None:
        """The scheduler holds back the asks of every gang preempted for a gang still waiting,
        so that the room their preemption makes goes to it (their AMs restart at once, and
        would otherwise take it back at their next heartbeat)."""
        scheduler = self.core.scheduler
        scheduler.yielding = set().union(*self._reclaiming.values()) if self._reclaiming else set()
        scheduler.wake()


def _live(app: Application) -> bool:
    return any(not rec.state.finished for rec in app.containers.values())
