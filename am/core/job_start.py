"""A job's first attempts: every gang is checked against the idle cluster before any begins.

A gang that could not run even if it had the whole cluster (or the whole of its queue's
limit) to itself would wait forever; the job fails at once, saying which gang and why,
before anything is asked of the RM. Only when every gang can run do their first attempts
begin, in the job's order: all or nothing, as the gangs themselves.

The check places each gang on the idle cluster; while the AM's view still is that idle
cluster, that placement is the gang's first one (``placed_at_start``), so a job that
starts on an empty cluster places each gang once, not twice.
"""
from __future__ import annotations

from typing import Callable

from gangmaster.am.spec.jobspec_model import JobSpec
from gangmaster.selectors.resources import ResourceDescriptor

from .acquisition import AcquisitionContext
from .am_placement import AMPlacement, over_queue_limit
from .gang_placement import GangDoesNotFit
from .gang_run import GangRun

__all__ = ["NeverRuns", "first_attempts"]


class NeverRuns(Exception):
    """A gang of the job can never run here: the job fails with this reason."""


def first_attempts(job: JobSpec, placement: AMPlacement, queue: str, queue_limit: ResourceDescriptor | None,
                   context: AcquisitionContext, clock: Callable[[], float]) -> list[GangRun]:
    """The first attempt of each gang of ``job``, waiting since ``clock()`` (their
    acquisitions share ``context``); :class:`NeverRuns` when one of them could not run even on the idle
    cluster, or asks more than its queue (``queue_limit``) may ever hold at once."""
    cluster = placement.cluster
    checked = []   # (name, roles, its placement on the idle cluster or None) of each gang
    for name, roles in job.named_gangs:
        try:
            placed = cluster.check_fits_empty(roles, placement.pipeline_for)
        except GangDoesNotFit as exc:
            raise NeverRuns(f"gang {name} can never run on this cluster: {exc}") from None
        if queue_limit is not None:
            over = over_queue_limit(roles, queue_limit)
            if over:
                raise NeverRuns(f"gang {name} can never run in queue {queue}: {over}")
        # placed on the idle cluster itself: its first placement, while the view stays so
        checked.append((name, roles, None if placed is None else (placed, cluster.view, cluster.view.changes)))
    gangs = []
    for name, roles, placed in checked:   # every gang can run: their first attempts begin
        gang = GangRun.begin(name, roles, 1, [], context, clock())
        if placed is not None:
            gang.placed_at_start = placed
        gangs.append(gang)
    return gangs
