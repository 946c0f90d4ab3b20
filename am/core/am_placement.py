"""Where an AM places its gangs: its view of the cluster and its selection pipelines.

The view (:class:`~gangmaster.am.core.cluster_tracker.ClusterTracker`) is read from the RM
when first needed and then kept from node updates, unless a driver shares one view among
all its AMs and keeps it itself. The pipelines are the AM's own, seeded from
``selection.seed`` and its application (:func:`pipeline_seed`: a run replays, and two AMs
do not break ties alike), or shared by every AM of a driver, seeded from ``selection.seed``
alone (one tie order for all of its jobs, as one scheduler breaks ties).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from typing import Callable, Mapping, Sequence

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings

from .cluster_tracker import ClusterTracker
from .gang_placement import GangPlacement, place_gang
from .gang_run import GangRun
from .reservation_plan import Reservation
from gangmaster.am.spec.jobspec_model import RoleSpec
from .lifecycle import TaskRecord
from gangmaster.protocol.rm_protocol import HeldReservation, NodeReport, ReservedNode


def pipeline_seed(seed: int, app_id: str) -> int:
    """The seed of one application's selection pipelines: the same for the same
    ``selection.seed`` and application (a run replays), different across applications."""
    digest = hashlib.sha256(f"{seed}:{app_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def over_queue_limit(roles: Sequence[RoleSpec], limit: ResourceDescriptor) -> str:
    """Why the whole gang of ``roles`` asks more than its queue may ever hold at once
    (``limit``; "" when it fits)."""
    memory = sum(r.instances * r.memory_mb for r in roles)
    vcores = sum(r.instances * r.ask_vcores for r in roles)
    gpus = sum(r.instances * r.gpu_share for r in roles)   # a share of a GPU counts its fraction
    over = [f"{need:g} {what} in all, the queue is limited to {cap:g}"
            for need, cap, what in ((memory, limit.memory_mb, "MB memory"), (vcores, limit.vcores, "vcores"),
                                    (gpus, limit.gpus, "GPUs")) if need > cap + 1e-9]
    return "; ".join(over)


class AMPlacement:
    """One AM's view of the cluster and pipelines; ``running``: the AM's running tasks
    (container id -> (gang, task)), counted on the view a gang is placed on. A gang is never
    placed on a node the RM holds for another application's gang and said is closed to this
    one (:meth:`reserved`): there its asks would only wait for that gang to start and end."""

    __slots__ = ("_nodes", "selection", "_seed", "pipelines", "_tracker", "_running", "_reserved", "_held")

    def __init__(self, nodes: Callable[[], list[NodeReport]], selection: SelectionSettings, app_id: str,
                 running: Mapping[str, tuple[GangRun, TaskRecord]], tracker: ClusterTracker | None = None,
                 shared_pipelines: dict[str, SelectionPipeline] | None = None):
        self._nodes, self.selection, self._running = nodes, selection, running
        self._tracker = tracker   # read from the RM on first use, then kept
        self._reserved: frozenset[str] = frozenset()   # hosts reserved for other gangs, closed to this AM
        self._held: tuple[HeldReservation, float] | None = None   # the RM's reservation for its gang, heard when
        if shared_pipelines is None:
            self.pipelines: dict[str, SelectionPipeline] = {}
            self._seed: int | None = pipeline_seed(selection.seed, app_id)
        else:
            self.pipelines, self._seed = shared_pipelines, None

    @property
    def cluster(self) -> ClusterTracker:
        """The AM's view of the cluster: read from the RM once, then kept from node updates."""
        tracker = self._tracker
        if tracker is None:
            tracker = self._tracker = ClusterTracker(self._nodes)
        return tracker

    def pipeline_for(self, role: RoleSpec) -> SelectionPipeline:
        name = role.selector or self.selection.selector
        pipeline = self.pipelines.get(name)
        if pipeline is None:
            pipeline = self.pipelines[name] = SelectionPipeline(
                replace(self.selection, seed=self.selection.seed if self._seed is None else self._seed),
                get_selector(name, self.selection.candidate_nodes_factor))
        return pipeline

    def reserved(self, nodes: Sequence[ReservedNode]) -> None:
        """The RM's word on the nodes reserved for other gangs that this application may not
        be granted on (every node of them, in each answer): its gangs are placed elsewhere,
        and a node no longer reserved is room again (a waiting gang is placed again)."""
        hosts = frozenset([node.host for node in nodes])
        if hosts != self._reserved:
            if self._reserved - hosts:
                self.cluster.opened()
            self._reserved = hosts

    def holding(self, held: HeldReservation | None, now: float) -> None:
        """The RM's word on the reservation it holds for this application's waiting gang (None:
        none), heard at ``now`` (the AM's clock)."""
        self._held = None if held is None else (held, now)

    def rm_reservation(self, now: float) -> Reservation | None:
        """The reservation the RM holds for this application's gang, counted from ``now`` (as a
        diagnosis counts: :func:`~gangmaster.am.ops.diagnosis.expected_start`); None when none."""
        if self._held is None:
            return None
        held, heard = self._held
        start = held.start_in_s - (now - heard)
        return Reservation("", max(0.0, start), math.inf if held.duration_s is None else start + held.duration_s,
                           dict(held.gpus_by_host), held.waits_for, held.known)

    def view_for(self, gang: GangRun | None = None) -> ClusterView:
        """A scratch copy of the view, with the per-node caps counting our running instances;
        for ``gang``'s planning, the view itself when there is nothing to count: no task
        runs and the gang holds and asks nothing (planning books only those on the view it
        gets, and placement works on a copy of its own)."""
        if gang is not None and self._reserved:   # a copy, the reserved nodes out of play
            view = self.cluster.scratch((task.role, task.host) for _gang, task in self._running.values())
            for host in self._reserved:
                if host in view.host_index:
                    view.set_health(host, False)
            return view
        if gang is not None and not self._running:
            acq = gang.acquisition
            if not acq.by_container and not acq.by_request:
                return self.cluster.view
        return self.cluster.scratch((task.role, task.host) for _gang, task in self._running.values())

    def place(self, gang: GangRun, view: ClusterView, wanted: Mapping[str, Sequence[int]]) -> GangPlacement:
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
        return place_gang(view, gang.roles, self.pipeline_for, indices=None if every else wanted)
