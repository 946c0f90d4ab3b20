"""What the RM may preempt for a waiting application, read off the RM core: one reading for
every caller, so that the live preemption monitor (:mod:`.preemption_monitor`), a trace
replay's preemption (:mod:`gangmaster.tools.replay.preempting`) and the diagnosis of a
waiting gang (:class:`~gangmaster.am.core.victims.Outlook`) choose the same victims for
the same cluster state.

* **a running gang** is an application's live containers (none under a preemption notice
  already: those are making room): their GPUs (a share counts its fraction), and their
  work since the first of them was allocated, which a preemption would lose;
* **its priority** is its queue's, then its own as submitted
  (:class:`~gangmaster.am.core.victims.Priority`);
* **the candidates** for a waiting application are the running gangs of the others that
  the rule (the RM's :func:`~gangmaster.am.core.victims.may_preempt`, or an engine's read
  from a snapshot) lets it preempt; a gang of no lower priority is never one unless some
  queue has a guaranteed share (most running gangs then cost one comparison);
* **the choice** among them is :func:`~gangmaster.am.core.victims.choose_victims` with the
  real placement of the waiting application's own AM.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

from gangmaster.am.core.gang_placement import PipelineFor
from gangmaster.am.core.victims import (ON, MayPreempt, Outlook, Priority, QueueShare, RunningGang, candidates,
                                        choose_victims, fits_once_gone, may_preempt)
from gangmaster.am.spec.jobspec_model import RoleSpec
from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.fit import GPU_MILLI

from .records import Application


def gang_gpus(roles: Sequence[RoleSpec]) -> float:
    """The GPUs a gang of ``roles`` asks in all (a share counts its fraction)."""
    return float(sum(r.instances * (r.gpus or r.gpu_milli / GPU_MILLI) for r in roles))


class Standing(NamedTuple):
    """What preemption reads of an application beyond its containers: its queue, its
    priority, and when its work began (None: when its first live container was allocated)."""

    queue: str
    priority: Priority
    started_at: float | None = None


class Preemptible:
    """The running gangs of the RM core ``core`` a waiting application may preempt under
    ``may`` (the RM's rule by default), and which of them it would. A driver whose
    applications stand for jobs of another engine (a snapshot's placeholders) overrides
    :meth:`standing`."""

    def __init__(self, core, may: MayPreempt = may_preempt):
        self.core, self.may = core, may

    def standing(self, app: Application) -> Standing | None:
        """The application's queue and priority (its queue's, then its own); None: it is no
        candidate whatever its priority."""
        queue = self.core.queues.get(app.queue)
        return Standing(app.queue, Priority(queue.priority if queue is not None else 0, app.priority))

    def priority(self, app: Application) -> Priority:
        standing = self.standing(app)
        return standing.priority if standing is not None else Priority()

    def shares(self) -> dict[str, QueueShare]:
        """What each queue holds and is guaranteed, in GPUs (empty when no queue has a guarantee)."""
        queues = self.core.queues
        if not any(q.guaranteed_gpus for q in queues.values()):
            return {}
        return {name: QueueShare(q.gpu_milli_used / GPU_MILLI, q.guaranteed_gpus) for name, q in queues.items()}

    def running_gang(self, app: Application) -> RunningGang | None:
        """The application's gang as preemption sees it (None: it holds nothing live, or is
        under a notice already)."""
        live = [rec for rec in app.containers.values() if not rec.state.finished]
        standing = self.standing(app)
        if not live or app.state.finished or standing is None:
            return None
        under_notice = self.core.preemptions.under_notice
        if any(under_notice(rec.container_id) for rec in live):
            return None
        gpus = sum(rec.booking.resource.gpus + rec.booking.resource.gpu_milli / GPU_MILLI for rec in live)
        started = standing.started_at if standing.started_at is not None else min(rec.allocated_at for rec in live)
        return RunningGang(app.app_id, standing.queue, standing.priority, float(gpus), started,
                           tuple((rec.node, rec.booking.resource) for rec in live), app.name)

    def candidates(self, app_id: str, gpus: float) -> list[RunningGang]:
        """The running gangs of the other applications that ``app_id``, asking ``gpus``, may
        preempt, in submission order."""
        apps = self.core.apps
        app = apps[app_id]
        standing, shares = self.standing(app), self.shares()
        if standing is None:
            return []
        priority = standing.priority
        running = (gang for other in apps.values()   # (the cheap tests first: most hold nothing, or outrank it)
                   if other.containers and other.app_id != app_id and (shares or self.priority(other) < priority)
                   and (gang := self.running_gang(other)) is not None)
        return candidates(running, priority, standing.queue, gpus, shares, self.may)

    def choose(self, app_id: str, roles: tuple[RoleSpec, ...], view: ClusterView, pipeline: PipelineFor,
               now: float) -> tuple[RunningGang, ...] | None:
        """The gangs to preempt so that ``app_id``'s waiting gang ``roles`` starts, placed by its
        AM's ``pipeline`` on ``view``; None when no choice makes room (or it has room)."""
        found = self.candidates(app_id, gang_gpus(roles))
        return choose_victims(found, fits_once_gone(view, roles, pipeline), now) if found else None

    def outlook(self, app_id: str, roles: tuple[RoleSpec, ...], grace_s: float | None, *, engine: str = "",
                state: str = ON, why: str = "", judged: bool = True) -> Outlook:
        """What the diagnosis of ``app_id``'s waiting gang ``roles`` is told: these candidates,
        as of the RM's clock now, under the rule's ``engine`` in ``state`` (:class:`Outlook`;
        ``judged`` False: the rule cannot be applied, and no candidate is named)."""
        found = tuple(self.candidates(app_id, gang_gpus(roles))) if judged else ()
        return Outlook(found, self.core.clock.now(), grace_s, engine, state, why, judged)
