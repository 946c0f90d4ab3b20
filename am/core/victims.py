"""Which running gangs a waiting gang may preempt, and which it does: whole gangs only,
the fewest GPU-hours of lost work first, never one that would not make room.

A gang that cannot start may take the place of *lower-priority* gangs (a job's priority is
its queue's, then its own ``gangmaster: priority``: :class:`Priority`), or, when its queue
is under its guaranteed share, of gangs of queues over theirs (:func:`may_preempt`). The
choice (:func:`choose_victims`) is made before anything is preempted, on a copy of the
cluster with the victims' resources given back, by the real placement (``fits``: the
select() pipeline and gang placement the AM itself runs), so a preemption always makes
room for the gang that asked for it:

1. the candidates are taken in order of the work they would lose (GPU-hours since they
   started: :attr:`RunningGang.lost_gpu_hours`), fewest first, until the gang fits on
   the cluster with them gone; none fit even with every candidate gone → nothing is
   preempted;
2. then each chosen victim, the costliest first, is kept running if the gang still fits
   without it; so every victim left is needed (taking any one back leaves the gang
   without room).

A victim is an application's whole gang: every container it holds (the caller preempts
them all, :mod:`~gangmaster.tools.rmsim.preemption`), never some of them. This module
decides; it changes nothing.

It sits below the AM's diagnosis and the RM alike, so that what a diagnosis says a waiting
gang will preempt is what the RM does preempt: the RM's preemption monitor and a trace
replay's preemption read the candidates off the RM core
(:mod:`~gangmaster.tools.rmsim.preemptible`), and a diagnosis is handed those same
candidates (:class:`Outlook`), each choosing with :func:`choose_victims`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

from gangmaster.am.core.gang_placement import GangDoesNotFit, PipelineFor, place_gang
from gangmaster.am.spec.jobspec_model import RoleSpec
from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError


class Priority(NamedTuple):
    """A job's priority: its queue's first, then its own (higher is more important);
    tuples compare in that order. The default, (0, 0), preempts nothing."""

    queue: int = 0
    job: int = 0


@dataclass(frozen=True)
class RunningGang:
    """A running application's gang, as preemption sees it: ``holdings`` is what each of its
    containers holds ((node index, exact resource)); ``gpus`` its GPUs (a share of a GPU
    counts its fraction); ``started_at`` when its gang started (its work since then is
    what a preemption loses)."""

    app_id: str
    queue: str
    priority: Priority
    gpus: float
    started_at: float
    holdings: tuple[tuple[int, ResourceDescriptor], ...]
    #: its job's name, as a diagnosis names it ("": the app id)
    job: str = ""

    @property
    def name(self) -> str:
        return self.job or self.app_id

    def lost_gpu_hours(self, now: float) -> float:
        """The work a preemption now would lose: its GPUs times the hours since it started."""
        return self.gpus * max(0.0, now - self.started_at) / 3600.0


@dataclass(frozen=True)
class QueueShare:
    """What a queue holds and is guaranteed, in GPUs (``guaranteed`` 0: no guarantee)."""

    used_gpus: float
    guaranteed_gpus: float


def may_preempt(priority: Priority, queue: str, gpus: float, victim: RunningGang,
                shares: dict[str, QueueShare]) -> bool:
    """Whether a gang of ``priority`` in ``queue`` asking ``gpus`` may preempt ``victim``:
    the victim's priority is lower, or the asking queue would still be within its guaranteed
    share with the gang and the victim's queue is over its own (a guarantee is reclaimed from
    the queues over theirs, whatever the priorities)."""
    if victim.priority < priority:
        return True
    if victim.queue == queue:
        return False
    mine, theirs = shares.get(queue), shares.get(victim.queue)
    if mine is None or theirs is None or not mine.guaranteed_gpus:
        return False
    return (mine.used_gpus + gpus <= mine.guaranteed_gpus
            and theirs.used_gpus > theirs.guaranteed_gpus)


#: Who may preempt whom: (the waiting gang's priority, its queue, its GPUs, a running gang,
#: the queues' shares) -> whether it may (:func:`may_preempt` is the RM's rule; an engine
#: read from a snapshot has its own, :mod:`~gangmaster.tools.snapshots.preemption_rules`).
MayPreempt = Callable[[Priority, str, float, RunningGang, Mapping[str, QueueShare]], bool]


def candidates(running: Iterable[RunningGang], priority: Priority, queue: str, gpus: float,
               shares: Mapping[str, QueueShare], may: MayPreempt = may_preempt) -> list[RunningGang]:
    """The running gangs a waiting gang of ``priority`` in ``queue`` asking ``gpus`` may
    preempt (``may``: the rule, the RM's by default), in the order given."""
    return [gang for gang in running if may(priority, queue, gpus, gang, shares)]


def choose_victims(candidates: Sequence[RunningGang], fits: Callable[[Sequence[RunningGang]], bool],
                   now: float) -> tuple[RunningGang, ...] | None:
    """The gangs to preempt so that the waiting gang fits (``fits(victims)``: whether it can
    be placed once ``victims`` are gone), the fewest GPU-hours of lost work first, each of
    them needed (see the module docstring); None when it would not fit even with every
    candidate gone, when there is no candidate, or when it fits with none gone (then
    nothing is preempted)."""
    if not candidates or fits(()):   # nothing to take, or room already: preempting would change nothing
        return None
    order = sorted(candidates, key=lambda g: (g.lost_gpu_hours(now), g.gpus, g.app_id))
    chosen: list[RunningGang] = []
    for gang in order:
        chosen.append(gang)
        if fits(chosen):
            break
    else:
        return None
    # Every victim needed: the costliest first, each kept running if the gang fits without it.
    for gang in sorted(chosen, key=lambda g: (-g.lost_gpu_hours(now), -g.gpus, g.app_id)):
        if len(chosen) > 1:
            without = [g for g in chosen if g is not gang]
            if fits(without):
                chosen = without
    return tuple(chosen)


def fits_once_gone(view: ClusterView, roles: tuple[RoleSpec, ...], pipeline: PipelineFor,
                   indices: Mapping[str, Sequence[int]] | None = None) -> Callable[[Sequence[RunningGang]], bool]:
    """The ``fits`` of :func:`choose_victims` for a gang of ``roles``: whether the real gang
    placement (:func:`~gangmaster.am.core.gang_placement.place_gang`, with the selector the AM
    places with) finds room for every instance (``indices``: those still to place, when some
    are granted) on a copy of ``view`` with the victims' containers given back (one the view
    does not show in use, as an AM's view from node reports may not yet, is free there
    already). ``view`` itself is never changed."""
    def fits(victims: Sequence[RunningGang]) -> bool:
        scratch = view.copy()
        for gang in victims:
            for node, resource in gang.holdings:
                try:
                    scratch.release(node, resource)
                except ResourceError:   # a view read from node reports has not heard of it yet: free there
                    pass
        try:
            place_gang(scratch, roles, pipeline, indices=indices)
        except GangDoesNotFit:
            return False
        return True
    return fits


#: Whether preemption is on: the RM's monitor runs (or an engine's preemption is on), it is off,
#: or a snapshot does not say.
ON, OFF, UNKNOWN = "on", "off", "unknown"


@dataclass(frozen=True)
class Outlook:
    """What preemption would do for a waiting gang, as its diagnosis is told it: the running
    gangs it may preempt (``candidates``, their holdings on the view the diagnosis places
    on, their starts on the clock that reads ``now``), under whose rules (``engine``: ""
    for the RM's own, else the engine a snapshot came from, "Kubernetes"), whether that
    preemption is ``state`` ON, OFF or UNKNOWN and ``why`` it is said so when not plainly on
    ("intraQueuePreemptionDisabled on queue root.default"), the notice each victim gets
    (``grace_s``; None: not known), and whether the engine's rule could be applied at all
    (``judged``; False: the snapshot lacks what it decides by, whom it would preempt is not
    told). The RM builds it
    (:meth:`~gangmaster.tools.rmsim.preemptible.Preemptible.outlook`) from the same
    candidates its preemption chooses among."""

    candidates: tuple[RunningGang, ...]
    now: float
    grace_s: float | None = None
    engine: str = ""
    state: str = ON
    why: str = ""
    judged: bool = True

    def victims(self, fits: Callable[[Sequence[RunningGang]], bool]) -> tuple[RunningGang, ...]:
        """Whom the RM would preempt (:func:`choose_victims`; none: no choice makes room)."""
        return (choose_victims(self.candidates, fits, self.now) or ()) if self.candidates else ()
