"""The RM's preemption monitor (``rm.preemption: true``, for ``gangmaster run`` and ``gangmaster rm serve``),
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

Which gangs wait for room, and how they are placed: ``gangmaster run`` asks the AMs in its
process (after each heartbeat, each gang whose last placement found no room, placed by that
AM's own view and pipelines). ``gangmaster rm serve`` has no AM in its process:
:class:`DeclaredGangs` looks, after each heartbeat of an application, at the gang it declared
when submitted (``SubmitRequest.gang``), while it holds no live container and asks nothing
(its AM found no room for it), placed as an AM with the RM's selection settings places it.
"""
from __future__ import annotations

from typing import Callable

from gangmaster.am.core.am_placement import AMPlacement
from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.protocol.reasons import reason as why
from gangmaster.am.core.gang_placement import PipelineFor
from gangmaster.am.core.victims import Outlook, RunningGang
from gangmaster.am.spec.jobspec_model import RoleSpec, shaped_role
from gangmaster.protocol.rm_protocol import AppState
from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.settings import SelectionSettings

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
        reason = why(R.PREEMPTED_FOR_APP, app_id=app_id, priority=str(tuple(self.preemptible.priority(apps[app_id]))))
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


class DeclaredGangs:
    """The preemption monitor's look at waiting gangs for an RM whose AMs run elsewhere
    (``gangmaster rm serve``): the gang each application declared, placed with an AM's
    placement (:class:`~gangmaster.am.core.am_placement.AMPlacement`) on ``selection``."""

    def __init__(self, monitor: PreemptionMonitor, selection: SelectionSettings):
        self.monitor, self.selection = monitor, selection
        self._roles: dict[str, tuple[RoleSpec, ...]] = {}   # app id -> its declared gang as roles
        #: app id -> the RM's version when its gang was last looked at and nothing was preempted:
        #: until the RM changes, the answer would be the same (the cluster is read whole to place it)
        self._looked: dict[str, int] = {}
        monitor.core.subscribe(lambda event: self._ended(event.app_id), kinds=("app_finished",))

    def heartbeat(self, app_id: str) -> tuple[RunningGang, ...]:
        """After ``app_id``'s AM heartbeat (under the RM's lock): preempt for its declared gang
        if it waits for room; the gangs preempted (none: nothing was)."""
        core = self.monitor.core
        app = core.apps.get(app_id)
        if app is None or app.state.finished or _live(app):
            self._ended(app_id)   # it started (or ended)
            return ()
        if app.state is not AppState.RUNNING or not app.roles or app.asks:   # none declared, or it found room
            return ()
        if self._looked.get(app_id) == core.version:
            return ()
        roles = self._roles.get(app_id)
        if roles is None:
            roles = self._roles[app_id] = tuple([
                shaped_role(r.name, r.instances, r.gpus, r.vcores, r.memory_mb, r.gpu_milli,
                            max_instances_per_node=r.max_instances_per_node) for r in app.roles])
        placement = AMPlacement(core.cluster_nodes, self.selection, app_id, {})
        preempted = self.monitor.preempt_for(app_id, roles, placement.cluster.view, placement.pipeline_for,
                                             core.clock.now())
        if not preempted:
            self._looked[app_id] = core.version
        return preempted


    def _ended(self, app_id: str) -> None:
        """``app_id``'s gang started or its application ended: the gangs it preempted ask again,
        and nothing of it is kept."""
        self.monitor.started(app_id)
        self._roles.pop(app_id, None)
        self._looked.pop(app_id, None)


def _live(app: Application) -> bool:
    return any(not rec.state.finished for rec in app.containers.values())
