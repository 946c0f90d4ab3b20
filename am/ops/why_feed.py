"""Why a job's gangs wait, as the AM tells it: the diagnosis of a gang on the AM's view
now (:mod:`~gangmaster.am.ops.diagnosis`), the watch that keeps each waiting gang's latest one
(:mod:`~gangmaster.am.ops.waiting_watch`), and what ``/why`` serves of them.

The watch is made with the feed when the AM's settings diagnose waiting gangs or limit
their wait, else when first needed (someone asks why a gang waits): a trace replay's AMs
never need it. The feed holds no reference to the AM (the two make no reference cycle).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from . import job_status
from gangmaster.am.core.am_placement import AMPlacement
from gangmaster.am.spec.am_settings import AMSettings
from .diagnosis import Diagnosis, Occupant, diagnose
from gangmaster.am.core.gang_run import GangRun
from gangmaster.am.spec.jobspec_model import RoleSpec
from .metrics import AMMetrics
from gangmaster.am.core.reservation_plan import Reservation
from gangmaster.am.core.victims import Outlook
from .waiting_watch import WaitingWatch, watches


class WhyFeed:
    """Why the gangs of job ``job`` (application ``app_id``) wait; ``gangs``: the AM's own
    list, ``occupants``: what other applications hold where (a driver that knows tells; None:
    :func:`nobody`)."""

    __slots__ = ("job", "app_id", "gangs", "placement", "occupants", "settings", "log", "metrics", "watching",
                 "priority", "preemption", "reserved")

    def __init__(self, job: str, app_id: str, gangs: list[GangRun], placement: AMPlacement,
                 occupants: Callable[[], Sequence[Occupant]] | None, settings: AMSettings, log: Callable[[str], None],
                 metrics: AMMetrics, priority: int = 0,
                 reserved: Callable[[], Reservation | None] | None = None):
        """``priority``: the job's (blocking jobs above it are work it waits behind);
        ``reserved``: the reservation the RM holds for the job now, if any (its AM's placement keeps
        what the RM's answers said: :meth:`~gangmaster.am.core.am_placement.AMPlacement.rm_reservation`)."""
        self.priority, self.reserved = priority, reserved
        #: how the RM preempts for a waiting gang of this job, (app id, the gang's roles) -> the
        #: candidates and its grace, when it does (its driver says so: ``rm.preemption``, or the
        #: rules of the engine a snapshot came from); None: the diagnosis says whom the RM told this
        #: AM it preempts for the job (an RM in another process: ``AMPlacement.rm_outlook``), if anyone
        self.preemption: Callable[[str, tuple[RoleSpec, ...]], Outlook] | None = None
        self.job, self.app_id, self.gangs, self.placement = job, app_id, gangs, placement
        self.occupants = occupants or nobody
        self.settings, self.log, self.metrics = settings, log, metrics
        #: the watch, when made (a pending gang's heartbeat then checks its wait)
        self.watching: WaitingWatch | None = WaitingWatch(settings, log, metrics) if watches(settings) else None

    @property
    def watch(self) -> WaitingWatch:
        """The watch on the gangs that wait, made when first needed."""
        watch = self.watching
        if watch is None:
            watch = self.watching = WaitingWatch(self.settings, self.log, self.metrics)
        return watch

    def overdue(self, gang: GangRun, now: float) -> str:
        """Each heartbeat, for a gang still pending: diagnosed when due, and "" or why the job
        must fail: it waited longer than it may (:meth:`WaitingWatch.check`; no watch: "")."""
        watch = self.watching
        return "" if watch is None else watch.check(gang, now, self.diagnose)

    def gangs_started(self) -> None:
        """After each heartbeat: the diagnoses of the gangs no longer pending are forgotten
        (:meth:`WaitingWatch.started`)."""
        watch = self.watching
        if watch is not None and watch.latest:
            watch.started(self.gangs)

    def report(self, outcome: str | None, now: float) -> dict:
        """What ``/why`` serves for the job (:func:`~gangmaster.am.ops.job_status.why_report`)."""
        return job_status.why_report(self.job, self.app_id, outcome, self.gangs, now,
                                     self.watching.latest if self.watching is not None else {})

    def diagnose(self, gang: GangRun) -> Diagnosis:
        """Why ``gang`` waits, as data (:mod:`~gangmaster.am.ops.diagnosis`), on the AM's view
        now: its granted containers count as placed, the rest is placed again."""
        acq = gang.acquisition
        wanted = {role: [s.index for s in acq.in_order() if s.role == role and s.container is None]
                  for role in acq.roles}
        return self.diagnose_roles(gang.name, gang.roles, wanted,
                                   [(s.role, s.container.host, s.container.resource) for s in acq.granted])

    def diagnose_roles(self, name: str, roles: tuple[RoleSpec, ...], wanted: Mapping[str, Sequence[int]] | None = None,
                       held: Sequence[tuple] = ()) -> Diagnosis:
        """:meth:`diagnose` for ``roles`` placed with the AM's pipelines on its view now;
        ``held``: the containers the gang holds, (role, host, resource)."""
        view = self.placement.view_for()
        for role, host, _resource in held:
            view.instances_of(role)[view.index(host)] += 1
        return diagnose(view, roles, self.placement.pipeline_for, job=self.job, gang=name, occupants=self.occupants(),
                        indices=wanted, own=[(host, resource) for _role, host, resource in held],
                        priority=self.priority,
                        preemption=(self.preemption(self.app_id, roles) if self.preemption is not None
                                    else self.placement.rm_outlook()),
                        reserved=self.reserved() if self.reserved is not None else None)

    def waiting(self) -> str:
        """Why each gang still pending waits, in one line (the reason a job that can make no
        progress fails with)."""
        return "; ".join(f"gang {g.name} is waiting: {self.watch.why(g, self.diagnose)}" for g in self.gangs
                         if g.pending and g.acquisition is not None)


def nobody() -> tuple:
    """What other applications hold, to a driver that does not tell: nothing known."""
    return ()
