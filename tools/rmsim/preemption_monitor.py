"""The RM's preemption monitor (``rm.preemption: true``, for ``gangmaster run`` and ``gangmaster rm serve``),
as YARN's ``ProportionalCapacityPreemptionPolicy`` monitor is to its scheduler: when a gang
cannot start and lower-priority gangs hold what it needs (or its queue is under its
guaranteed share and theirs over), the RM preempts them, whole gangs, the fewest GPU-hours
of lost work first, never without making room (the choice: :mod:`.victims`, with the real
placement of the waiting job's own AM), with the configured grace (:mod:`.preemption`).

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

from typing import Callable, Sequence

from gangmaster.am.core.am_placement import AMPlacement
from gangmaster.am.core.gang_placement import PipelineFor
from gangmaster.am.spec.jobspec_model import RoleSpec, shaped_role
from gangmaster.protocol.rm_protocol import AppState
from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.settings import SelectionSettings

from .records import Application
from .victims import Priority, QueueShare, RunningGang, choose_victims, fits_once_gone, may_preempt


class PreemptionMonitor:
    """Whom a waiting gang preempts, on the RM core ``core`` (its applications, queues and
    preemption contracts), each victim with ``grace_s`` seconds' notice."""

    def __init__(self, core, grace_s: float, log: Callable[[str], None] | None = None):
        self.core, self.grace_s, self.log = core, grace_s, log
        #: app id of a waiting gang's application -> the apps preempted for it, until it starts
        self._reclaiming: dict[str, set[str]] = {}

    def priority(self, app: Application) -> Priority:
        queue = self.core.queues.get(app.queue)
        return Priority(queue.priority if queue is not None else 0, app.priority)

    def preempt_for(self, app_id: str, roles: tuple[RoleSpec, ...], view: ClusterView, pipeline: PipelineFor,
                    now: float) -> tuple[RunningGang, ...]:
        """Preempt what the waiting gang ``roles`` of ``app_id`` needs (``view``: the cluster as
        its AM sees it; ``pipeline``: how its AM places), if it may and a choice makes room;
        the gangs preempted (none: nothing was)."""
        apps = self.core.apps
        if any(a in apps and _live(apps[a]) for a in self._reclaiming.get(app_id, ())):
            return ()
        app = apps[app_id]
        priority, shares = self.priority(app), self._shares()
        gpus = float(sum(r.instances * (r.gpus or r.gpu_milli / GPU_MILLI) for r in roles))
        candidates = [gang for other in apps.values() if other.app_id != app_id
                      and (gang := self._running_gang(other)) is not None
                      and may_preempt(priority, app.queue, gpus, gang, shares)]
        victims = choose_victims(candidates, fits_once_gone(view, roles, pipeline), now) if candidates else None
        if not victims:
            return ()
        reason = f"for {app_id} (priority {tuple(priority)})"
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

    def _running_gang(self, app: Application) -> RunningGang | None:
        """The application's gang as preemption sees it (None: it holds nothing live, or is
        under a notice already)."""
        live = [rec for rec in app.containers.values() if not rec.state.finished]
        if not live or app.state.finished:
            return None
        if any(self.core.preemptions.under_notice(rec.container_id) for rec in live):
            return None
        gpus = sum(rec.booking.resource.gpus + rec.booking.resource.gpu_milli / GPU_MILLI for rec in live)
        return RunningGang(app.app_id, app.queue, self.priority(app), float(gpus),
                           min(rec.allocated_at for rec in live),
                           tuple((rec.node, rec.booking.resource) for rec in live))

    def _shares(self) -> dict[str, QueueShare]:
        """What each queue holds and is guaranteed, in GPUs (only when some queue has a guarantee)."""
        queues = self.core.queues
        if not any(q.guaranteed_gpus for q in queues.values()):
            return {}
        return {name: QueueShare(q.gpu_milli_used / GPU_MILLI, q.guaranteed_gpus) for name, q in queues.items()}


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

