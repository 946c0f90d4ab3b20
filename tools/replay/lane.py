"""The replay's single-task lane: a job of one task (one role of one instance, 99.6 % of
the Philly trace's jobs and every openb pod) placed, booked, run and ended by the driver
itself, making the decisions its ApplicationMaster would make, without an AM, an RM
application, a container record, a barrier or a launch environment per job.

**The same decisions as the gang path**, step for step, because each step is the code the
gang path runs for such a job:

* admitted (its queue first offers it): the never-fits check on the idle cluster,
  :meth:`ClusterTracker.check_fits_empty` on the shared tracker, before the view is
  synced (as an AM makes it when it is built); a job that can never fit ends
  ``never-fits``. A placement that check made on the idle cluster is the job's first
  placement while the view stays unchanged (``AMPlacement.place``'s rule);
* placed: :func:`~gangmaster.am.core.gang_placement.place_gang` on the shared view with the
  shared pipelines (the AM's ``AMPlacement.pipeline_for``), each attempt timed into the
  same selection histogram; after a placement that found no room the job is not placed
  again until the cluster has grown (``GangAcquisition.plan``'s stall rule);
* booked: on the RM's own ledger, the ask's resource compiled by the RM
  (``ResourceManager.compiled``) and booked on the chosen host as the scheduler books a
  host-named ask (``NodeLedger.book``), so the shared view, synced from the ledger's
  changed rows, sees it as it sees a container;
* run: its task exits at the instant, in the clock event and turn where a container of
  that duration started then would
  (:meth:`~gangmaster.tools.rmsim.nodemanager.SimulatedNodeManager.run_outside`), gives
  its booking back, and the driver hears of its end at the instant's flush (or the next
  heartbeat), as it hears of an AM's.

So the clock runs the same events, the view the same rows, the pipelines the same picks in
the same order (random strategies draw alike): the outcomes, the timeline and the counts
are those of the gang path, which tests/unit/test_replay_lane.py holds them to job by job
(``replay(..., lane=False)`` sends every job through its AM). What the RM no longer holds
of these jobs: their applications, containers and queue usage (nothing in a replay reads
them; a replay has no scheduler pass that would: every ask is granted at once).
"""
from __future__ import annotations

from time import perf_counter
from typing import Callable

from gangmaster.am.core.am_placement import AMPlacement
from gangmaster.am.core.cluster_tracker import ClusterTracker
from gangmaster.am.core.gang_placement import GangDoesNotFit, place_gang
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.resources import ResourceError
from gangmaster.selectors.settings import SelectionSettings

from .job_specs import job_roles
from .trace import TraceJob


def takes(trace: TraceJob) -> bool:
    """Whether the lane runs ``trace``'s job: one role of one instance."""
    roles = trace.roles
    return len(roles) == 1 and roles[0].instances == 1


class LaneTask:
    """What the lane keeps of one job between its steps: its roles, its booking while it
    runs, and what its AM's acquisition would remember of its last placement."""

    __slots__ = ("roles", "at_start", "no_room", "placed_at_growth", "node", "booking")

    def __init__(self, roles):
        self.roles = roles
        self.at_start = None          # (placement, view, view.changes) from the never-fits check
        self.no_room = False          # the last placement found no room
        self.placed_at_growth = -1    # the cluster's growth count at the last placement
        self.node = -1
        self.booking = None


class SingleTaskLane:
    """The lane of one replay: the shared tracker, pipelines and selection settings (the
    AMs' own), the RM (its ledger, compiled asks and NodeManager), and
    ``ended(job)``, the driver's call when a job's task has exited."""

    def __init__(self, tracker: ClusterTracker, selection: SelectionSettings,
                 pipelines: dict[str, SelectionPipeline], core, node_manager,
                 observe_selection: Callable[[float], None], ended: Callable[[object], None]):
        placement = AMPlacement(lambda: [], selection, "", {}, tracker, pipelines)
        self.pipeline_for = placement.pipeline_for
        self.tracker, self.core, self.ledger = tracker, core, core.ledger
        self.compiled = core.intake.compiled   # (ResourceManager.compiled's own, without its call)
        self.node_manager = node_manager
        self.observe_selection, self.ended = observe_selection, ended

    def admit(self, job, label: str | None) -> bool:
        """The job's never-fits check (an AM's, when built); False when it can never fit."""
        task = job.lane = LaneTask(job_roles(job.trace, label))
        tracker = self.tracker
        try:
            placed = tracker.check_fits_empty(task.roles, self.pipeline_for)
        except GangDoesNotFit:
            return False
        if placed is not None:
            view = tracker.view
            task.at_start = (placed, view, view.changes)
        return True

    def try_start(self, job) -> str | None:
        """Place and book the job's task on the view (synced by the caller), and start it:
        the host it started on (now, by the clock; the driver keeps both), or None when it
        found no room (or, the cluster unchanged since its last try, would find none). The
        placement is the one an AM's first gang attempt makes (``AMPlacement.place``): the
        never-fits check's, while the view is the one it placed on, unchanged; else
        :func:`place_gang` on the shared view."""
        task = job.lane
        tracker = self.tracker
        growth = tracker.grown
        if task.no_room and growth == task.placed_at_growth:
            return None
        task.placed_at_growth = growth
        started = perf_counter()
        try:
            at_start, task.at_start = task.at_start, None
            if at_start is not None and at_start[1] is tracker.view and at_start[1].changes == at_start[2]:
                placement = at_start[0]
            else:
                placement = place_gang(tracker.view, task.roles, self.pipeline_for)
        except GangDoesNotFit:
            task.no_room = True
            return None
        finally:
            self.observe_selection(perf_counter() - started)
        task.no_room = False
        placed = placement.instances[0]
        ledger = self.ledger
        node = ledger.host_index[placed.host]
        try:
            task.booking = ledger.book(node, *self.compiled(placed.resource))
        except ResourceError as exc:
            raise RuntimeError(f"replay: job {job.trace.job_id}'s task was placed on the shared view but "
                               f"{placed.host} cannot hold it (the view and the RM disagree): {exc}") from None
        task.node = node
        self.node_manager.run_outside(job, float(job.trace.duration_s), self._exited)
        return placed.host

    def _exited(self, job) -> None:
        task = job.lane
        self.ledger.give_back(task.node, task.booking)
        task.booking = None
        self.ended(job)
