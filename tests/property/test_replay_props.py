"""Invariants of a replay on random small traces: nothing is double-booked at any instant,
GPU-seconds are conserved, no job starts before it is submitted or runs longer than its
duration, FIFO starts each queue in order, shape-indexed backfill decides exactly as
a pass that tries every waiting job, and backfill under reservations never delays one."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gangmaster.selectors.cluster import NodeSpec
from gangmaster.tools.replay import engine as engine_module
from gangmaster.tools.replay.clusters import ReplayCluster
from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.reservations import ReplayReservations
from gangmaster.tools.replay.trace import JobTable, NodeShape, TraceJob, sorted_jobs
from replay_reference import naive_backfill_registered

SHAPE = NodeShape(8, 80.0, 8 * 65536)


def cluster(count: int) -> ReplayCluster:
    return ReplayCluster(f"{count}x8", tuple(
        NodeSpec(f"n{i}", rack=f"r{i // 2}", vcores=SHAPE.vcores, memory_mb=SHAPE.memory_mb, gpus=8)
        for i in range(count)))


@st.composite
def traces(draw) -> JobTable:
    count = draw(st.integers(1, 18))
    jobs = []
    for i in range(count):
        gpus = draw(st.sampled_from([1, 1, 1, 2, 3, 4, 6, 8, 12, 16, 40]))
        submit = draw(st.integers(0, 60)) * 5.0            # shared instants happen often
        duration = draw(st.integers(1, 40)) * 5.0
        jobs.append(TraceJob(f"j{i:02d}", submit, duration, draw(st.sampled_from(["q1", "q2"])),
                             SHAPE.gang_roles(gpus)))
    return JobTable(sorted_jobs(jobs), "hypothesis", "0" * 64, "native")


@settings(max_examples=30)
@given(trace=traces(), nodes=st.integers(1, 4), policy=st.sampled_from(["fifo", "backfill", "reserve"]))
def test_a_replay_keeps_the_books(monkeypatch_flush, trace, nodes, policy):
    result = replay(trace, cluster(nodes), ReplayOptions(queue_policy=policy))
    capacity = nodes * 8
    asked = 0.0
    for job in result.jobs:
        if job.gpus > capacity:
            assert job.outcome == "never-fits" and job.start_s is None
            continue
        assert job.outcome == "succeeded"
        assert job.start_s >= job.submit_s
        assert job.end_s - job.start_s == job.duration_s
        asked += job.gpus * job.duration_s
    timeline = result.timeline
    end = max([j.end_s for j in result.jobs if j.end_s is not None], default=0.0)
    held = float(np.sum(timeline.allocated_gpus * np.diff(np.append(timeline.t, end)))) if timeline.t.size else 0.0
    assert held == asked
    assert timeline.allocated_gpus.max(initial=0) <= capacity
    assert np.all(np.diff(timeline.t) > 0)
    if policy == "fifo":
        for queue in ("q1", "q2"):
            starts = [j.start_s for j in result.jobs if j.queue == queue and j.start_s is not None]
            assert starts == sorted(starts)


@settings(max_examples=30)
@given(trace=traces(), nodes=st.integers(1, 3))
def test_backfill_by_shape_equals_trying_every_waiting_job(trace, nodes):
    with naive_backfill_registered():
        naive = replay(trace, cluster(nodes), ReplayOptions(queue_policy="naive-backfill"))
    assert replay(trace, cluster(nodes), ReplayOptions(queue_policy="backfill")).jobs == naive.jobs


@settings(max_examples=15)
@given(trace=traces(), nodes=st.integers(1, 4))
def test_backfill_never_delays_a_reservation(trace, nodes):
    """One queue: the oldest waiting job holds the reservation; every job ends when its duration
    says, so its reservation can only move earlier, and it starts no later than first planned."""
    trace = JobTable(sorted_jobs([dataclasses.replace(j, queue="q") for j in trace.jobs]), "hypothesis", "0" * 64,
                     "native")
    first: dict[str, float] = {}
    reserve = ReplayReservations.reserve

    def noted(self, queue, job):
        planned = reserve(self, queue, job)
        if planned:
            first.setdefault(job.trace.job_id, self.held[queue][-1].start_s)
        return planned
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ReplayReservations, "reserve", noted)
        result = replay(trace, cluster(nodes), ReplayOptions(queue_policy="reserve"))
    for job in result.jobs:
        if job.job_id in first:
            assert job.start_s <= first[job.job_id], (job.job_id, first[job.job_id])


@settings(max_examples=15)
@given(trace=traces(), nodes=st.integers(1, 4), bound=st.integers(1, 2), after=st.sampled_from([0.0, 20.0, 100.0]))
def test_backfill_never_delays_a_reservation_across_queues_and_lent_gpus(trace, nodes, bound, after):
    """Two queues, at most ``bound`` reservations in the cluster, a job reserving once it waited
    ``after`` s, and reserved nodes lending what their gang will not need: a reservation binds
    the jobs younger than its own (a job's priority is its age), so its job starts no later than
    first planned, unless an older job took over (its reservation was dropped for an older one's,
    or an older job reserved or started while it waited)."""
    first: dict[str, tuple[float, float]] = {}   # job -> (when first planned, its start then)
    older_moved: list[tuple[int, float]] = []      # (a job's order, when it reserved or started)
    dropped: set[str] = set()
    reserve, keep, started = (ReplayReservations.reserve, ReplayReservations._keep_the_oldest,
                              ReplayReservations.started)

    def noted(self, queue, job):
        planned = reserve(self, queue, job)
        if planned:
            first.setdefault(job.trace.job_id, (self._now(), self.held[queue][-1].start_s))
            older_moved.append((job.order, self._now()))
        return planned

    def kept(self, partition):
        before = {r.owner for held in self.held.values() for r in held}
        keep(self, partition)
        dropped.update(before - {r.owner for held in self.held.values() for r in held})

    def noted_start(self, job, tasks=None):
        older_moved.append((job.order, self._now()))
        started(self, job, tasks)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ReplayReservations, "reserve", noted)
        patch.setattr(ReplayReservations, "_keep_the_oldest", kept)
        patch.setattr(ReplayReservations, "started", noted_start)
        result = replay(trace, cluster(nodes), ReplayOptions(queue_policy="reserve", cluster_reservations=bound,
                                                             reserve_after_s=after))
    order = {job.job_id: i for i, job in enumerate(trace.jobs)}
    for job in result.jobs:
        if job.job_id not in first or job.job_id in dropped:
            continue
        planned_at, start = first[job.job_id]
        overtaken = any(o < order[job.job_id] and planned_at <= t <= job.start_s for o, t in older_moved)
        assert overtaken or job.start_s <= start, (job.job_id, start, job.start_s)


def _checked_flush(flush):
    def checked(self):
        flush(self)
        ledger = self.core.ledger   # (the RM's own recount from its containers cannot see the lane's tasks)
        assert int(ledger.gpu_capacity.sum() - ledger.gpus_free.sum()) == self.allocated   # free + used = capacity
        assert (ledger.gpus_free >= 0).all()
        if self.reservations is not None:   # the nodes withheld from a gang's view were given back
            self._sync()
            view, ledger = self.tracker.view, self.ledger
            assert view.gpu_free_mask.tolist() == ledger.gpu_free_mask.tolist()
    return checked


@pytest.fixture(scope="module")
def monkeypatch_flush():
    patch = pytest.MonkeyPatch()
    patch.setattr(engine_module._Replay, "_flush", _checked_flush(engine_module._Replay._flush))
    yield
    patch.undo()
