"""What a job's gangs show from outside while it runs: the gauges a scrape reads, and
why each gang not running yet waits (the end-of-run report's lines and ``/why``).

Everything here reads the gangs and changes nothing; the gauges are read when scraped,
maybe from another thread, so they read copies and never iterate what the AM may be
changing. :class:`JobStatus` is what an AM answers when asked from outside (the
drivers, the end-of-run report, ``/why``, the metrics' scrape).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from .diagnosis import Diagnosis
from gangmaster.am.core.gang_run import GangRun, attempt_history
from gangmaster.am.core.lifecycle import ROLE_ACQUIRING, AttemptRecord, RoleState, TaskRecord
from .metrics import CONTAINER_STATES, GaugeValues

if TYPE_CHECKING:
    from gangmaster.am.core.gang_dispatch import GangDispatch
    from .why_feed import WhyFeed


class JobStatus:
    """What an AM shows of its job from outside (a base of
    :class:`~gangmaster.am.core.master.ApplicationMaster`): read from its gangs, the tasks
    they run (``dispatch.running``) and its ``/why`` feed; it changes nothing."""

    gangs: list[GangRun]
    dispatch: "GangDispatch"
    why: "WhyFeed"
    done: bool
    outcome: str | None
    now: Callable[[], float]
    _earlier_drops: list[tuple[str, int, str]]   # avoidance_drops of the AMs before this one (their journal)

    def gauge_values(self) -> GaugeValues:
        """What the job's gauges show now (:func:`gauge_values`)."""
        return gauge_values(self.gangs, self.dispatch.running)

    def role_states(self) -> dict[str, RoleState]:
        return {r.name: g.role_state(r) for g in self.gangs for r in g.roles}

    def history(self) -> list[AttemptRecord]:
        """Every attempt of every gang, finished ones first, in the order they ended."""
        return attempt_history(self.gangs)

    def why_waiting(self) -> dict[str, str]:
        """For each gang not running yet: why, in numbers (:func:`why_waiting`)."""
        return why_waiting(self.gangs)

    def avoidance_drops(self) -> list[tuple[str, int, str]]:
        """(gang, attempt, role) of each role placed again on the nodes where it failed
        (:meth:`~gangmaster.am.core.gang_dispatch.GangDispatch.keep_placeable`), this AM's and
        its predecessors', in order (the end-of-run report's lines)."""
        return self._earlier_drops + self.dispatch.dropped

    def why_report(self) -> dict:
        """What ``/why`` serves for this job: its outcome, and why its gangs wait
        (:meth:`~gangmaster.am.ops.why_feed.WhyFeed.report`)."""
        return self.why.report(self.outcome, self.now())

    def waiting_on_cluster(self) -> bool:
        """True when nothing this AM does by itself can move the job on: none of its tasks
        runs, and every gang not finished waits, holding and asking for nothing and not
        backing off, because its last placement found no room. Only a change from outside
        (a node coming back, another application's containers ending) can help it then.
        The driver, which knows whether any such change is still to come, decides whether to
        call :meth:`~gangmaster.am.core.master.ApplicationMaster.cannot_progress`."""
        return not self.done and self.dispatch.waiting_on_cluster(self.now())


def gauge_values(gangs: Sequence[GangRun], running: Mapping[str, tuple[GangRun, TaskRecord]]) -> GaugeValues:
    """What the job's gauges show now; ``running``: container id -> (gang, task) of each task running."""
    counts = dict.fromkeys(CONTAINER_STATES, 0)
    pending = 0
    for g in list(gangs):
        if g.pending:
            pending += 1
            acq = g.acquisition
            if acq is not None and g.state is ROLE_ACQUIRING:
                counts["requested"] += len(acq.by_request)
                counts["allocated"] += len(acq.by_container)
        for state, n in list(g.by_state.items()):
            counts[state.value] += n
    whole, milli = gpus_held(gangs, running)
    return GaugeValues(pending, counts, whole, milli)


def gpus_held(gangs: Sequence[GangRun], running: Mapping[str, tuple[GangRun, TaskRecord]]) -> tuple[int, int]:
    """Whole GPUs, and milli-GPU of shares of GPUs, that the job's containers hold now:
    those granted to gangs still acquiring, and those of running tasks."""
    whole = milli = 0
    for gang in list(gangs):
        acq = gang.acquisition
        if acq is not None and gang.state is ROLE_ACQUIRING:
            for slot in acq.granted:
                whole, milli = whole + slot.container.resource.gpus, milli + slot.container.resource.gpu_milli
    for _gang, task in list(running.values()):
        whole, milli = (whole, milli + task.gpu_milli) if task.gpu_milli else (whole + len(task.gpus), milli)
    return whole, milli


def why_waiting(gangs: Sequence[GangRun]) -> dict[str, str]:
    """For each gang not running yet: why, in numbers (empty when it is just being granted)."""
    out = {}
    for g in gangs:
        if g.pending and g.acquisition is not None:
            acq = g.acquisition
            pending = [f"{s.name} on {s.placement.host}: {s.pending_reason}" for s in acq.outstanding
                       if s.pending_reason]
            granted = f"{len(acq.by_container)}/{acq.total} granted"
            out[g.name] = acq.waiting_reason or "; ".join([granted, *pending[:3]])
    return out


def why_report(job: str, app_id: str, outcome: str | None, gangs: Sequence[GangRun], now: float,
               diagnoses: Mapping[str, Diagnosis]) -> dict:
    """What ``/why`` serves for a job: each gang still waiting, how long, and its last
    diagnosis (``diagnoses``, by gang; null until it has waited ``am.explain_after_s``)."""
    reasons = why_waiting(gangs)
    waiting = {}
    for g in gangs:
        if g.pending and g.acquisition is not None:
            diagnosis = diagnoses.get(g.name)
            waiting[g.name] = {"waiting_s": round(now - g.record.waiting_since, 3),
                               "reason": reasons.get(g.name, ""),
                               "diagnosis": diagnosis.to_dict() if diagnosis is not None else None}
    return {"job": job, "app_id": app_id, "outcome": outcome, "waiting": waiting}
