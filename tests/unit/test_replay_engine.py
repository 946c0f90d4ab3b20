"""The replay engine: every job through the real AM and RM, event-driven, FIFO or backfill."""
from __future__ import annotations

import pytest

from gangmaster.tools.replay import engine as engine_module
from gangmaster.tools.replay import queue_policy
from gangmaster.tools.replay.engine import ReplayOptions, replay

from replay_helpers import allocated_gpu_seconds, cluster, job, nodes, synthetic, table
from replay_reference import NaiveBackfill


def by_id(result):
    return {j.job_id: j for j in result.jobs}


# ---------------------------------------------------------------- unlimited capacity
def test_with_room_for_everything_every_job_starts_at_submit_and_lasts_its_duration():
    trace = synthetic(300)
    assert sum(j.instances for j in trace.jobs) <= 400   # a node for every instance of every job at once
    result = replay(trace, cluster(400))
    assert [j.job_id for j in result.jobs] == [j.job_id for j in trace.jobs]
    for out in result.jobs:
        assert out.outcome == "succeeded"
        assert out.start_s == out.submit_s                          # queueing 0
        assert out.end_s - out.submit_s == pytest.approx(out.duration_s)   # JCT == duration
        assert out.gang_wait_s == 0.0
        assert len(out.hosts) >= 1 and len(out.racks) >= 1
    assert result.select_calls == len(trace.jobs)   # one placement per job: nothing was retried


def test_allocated_gpu_seconds_are_conserved_under_contention():
    trace = synthetic(400)
    result = replay(trace, cluster(8))
    assert any(j.start_s > j.submit_s for j in result.jobs)   # the cluster was contended
    end = max(j.end_s for j in result.jobs)
    asked = sum(j.gpus * j.duration_s for j in result.jobs)
    assert allocated_gpu_seconds(result.timeline, end) == pytest.approx(asked, rel=1e-9)
    assert result.timeline.allocated_gpus.max() <= result.timeline.capacity_gpus == 64
    assert result.timeline.allocated_gpus[-1] == 0 and result.timeline.queue_length[-1] == 0


def test_the_same_inputs_give_the_same_result():
    trace = synthetic(300)
    a = replay(trace, cluster(8), ReplayOptions(queue_policy="backfill", seed=3))
    b = replay(trace, cluster(8), ReplayOptions(queue_policy="backfill", seed=3))
    assert any(j.start_s > j.submit_s for j in a.jobs)
    assert a.jobs == b.jobs
    for name in ("t", "allocated_gpus", "queue_length", "pending_gpus", "hol_blocked_free_gpus"):
        assert getattr(a.timeline, name).tolist() == getattr(b.timeline, name).tolist()
    assert (a.events, a.select_calls) == (b.events, b.select_calls)


# ---------------------------------------------------------------- queue policies
def fragmented_then_small():
    """2 nodes of 8: two 6-GPU jobs take one node each (2 + 2 GPUs left); a 4-GPU job then
    finds 4 free GPUs but no node with 4; a 1-GPU job comes after it."""
    return table([job("a", 0, 100, 6), job("b", 0, 100, 6), job("big", 1, 10, 4), job("small", 3, 10, 1)])


def test_fifo_head_of_line_blocks_the_queue():
    result = replay(fragmented_then_small(), cluster(2))
    jobs = by_id(result)
    assert jobs["big"].start_s == 100.0            # after a and b end
    assert jobs["small"].start_s == 100.0          # behind the blocked head, though it fitted at 3
    hol = dict(zip(result.timeline.t.tolist(), result.timeline.hol_blocked_free_gpus.tolist()))
    assert hol[1.0] == 4                           # 4 free GPUs held back by the head that cannot use them
    assert hol[100.0] == 0


def test_head_of_line_free_gpus_follow_what_other_queues_take():
    trace = table([job("a", 0, 100, 6), job("b", 0, 100, 6), job("big", 1, 10, 4),
                   job("other", 2, 10, 1, queue="q2")])
    result = replay(trace, cluster(2))
    hol = dict(zip(result.timeline.t.tolist(), result.timeline.hol_blocked_free_gpus.tolist()))
    assert hol[1.0] == 4        # q's head cannot use the 4 free GPUs (2 + 2)
    assert hol[2.0] == 0        # q2's job took one: 3 free, fewer than the head's 4
    assert by_id(result)["other"].start_s == 2.0


def test_backfill_lets_a_later_job_start_when_it_fits_now():
    result = replay(fragmented_then_small(), cluster(2), ReplayOptions(queue_policy="backfill"))
    jobs = by_id(result)
    assert jobs["small"].start_s == 3.0
    assert jobs["big"].start_s == 100.0
    assert jobs["small"].hosts[0] in jobs["a"].hosts + jobs["b"].hosts   # packed into a used node


def test_a_gang_that_can_never_fit_fails_at_once_and_blocks_nobody():
    result = replay(table([job("huge", 0, 10, 64), job("next", 1, 10, 8)]), cluster(2))
    jobs = by_id(result)
    assert jobs["huge"].outcome == "never-fits" and jobs["huge"].start_s is None and jobs["huge"].end_s is None
    assert jobs["next"].outcome == "succeeded" and jobs["next"].start_s == 1.0


def test_backfill_by_shape_decides_exactly_as_rescanning_the_whole_queue(monkeypatch):
    monkeypatch.setitem(queue_policy.QUEUE_POLICIES, "naive-backfill", NaiveBackfill)
    offers = {"backfill": 0, "naive-backfill": 0}
    try_start = engine_module._Replay._try_start

    def counted(self, waiting):
        offers[self.options.queue_policy] += 1
        return try_start(self, waiting)

    monkeypatch.setattr(engine_module._Replay, "_try_start", counted)
    trace = synthetic(500)
    indexed = replay(trace, cluster(8), ReplayOptions(queue_policy="backfill"))
    naive = replay(trace, cluster(8), ReplayOptions(queue_policy="naive-backfill"))
    waited = [j for j in indexed.jobs if j.start_s > j.submit_s]
    assert len(waited) > 100                        # the queue was long: the comparison means something
    assert indexed.jobs == naive.jobs               # same starts, ends and hosts, job by job
    assert offers["backfill"] < offers["naive-backfill"]   # with fewer jobs tried
    assert indexed.select_calls <= naive.select_calls


def test_fifo_starts_each_queues_jobs_in_submission_order():
    result = replay(synthetic(500), cluster(8))
    for queue in {j.queue for j in result.jobs}:
        starts = [j.start_s for j in result.jobs if j.queue == queue]
        assert starts == sorted(starts)


# ---------------------------------------------------------------- isolated queues
def test_isolated_queues_never_use_each_others_nodes():
    specs = nodes(4, "a") + nodes(2, "b") + nodes(1, "s")
    hosts = {"qa": tuple(s.host for s in specs[:4]), "qb": tuple(s.host for s in specs[4:6])}
    jobs = [job(f"{q}{i}", i * 3.0, 50 + 7 * i, g, q) for i in range(40)
            for q, g in (("qa", (1, 2, 8, 16)[i % 4]), ("qb", (1, 4, 8)[i % 3]), ("other", 2))]
    jobs.append(job("qb-too-big", 500, 10, 24, "qb"))   # 24 GPUs: the cluster has them, qb's 2 nodes do not
    result = replay(table(jobs), cluster(7, hosts, specs))
    allowed = {**{q: set(h) for q, h in hosts.items()}, "other": {"s000"}}
    for out in result.jobs:
        if out.job_id == "qb-too-big":
            assert out.outcome == "never-fits"
            continue
        assert out.outcome == "succeeded"
        assert set(out.hosts) <= allowed[out.queue], out


def test_isolated_queue_hosts_must_be_cluster_hosts_given_once():
    with pytest.raises(ValueError, match="not in cluster"):
        replay(table([job("x", 0, 1, 1, "qa")]), cluster(1, {"qa": ("nowhere",)}))
    with pytest.raises(ValueError, match="given to queues"):
        replay(table([job("x", 0, 1, 1, "qa")]), cluster(1, {"qa": ("n000",), "qb": ("n000",)}))


# ---------------------------------------------------------------- the RM's books
@pytest.mark.parametrize("lane", [False, True])
def test_no_node_or_gpu_is_double_booked_at_any_instant(monkeypatch, lane):
    """Every job through its AM: the RM's books recount from its live containers. With the
    single-task lane (whose tasks hold no container) the RM's ledger books exactly the GPUs
    of the jobs running, as the driver counts them."""
    checks = []
    flush = engine_module._Replay._flush

    def checked(self):
        flush(self)
        ledger = self.core.ledger
        if lane:
            assert int(ledger.gpu_capacity.sum() - ledger.gpus_free.sum()) == self.allocated
        else:
            self.core.check_invariants()   # recounts every node from the live containers
        view = self.tracker.view
        self._sync()
        assert view.gpus_free.tolist() == ledger.gpus_free.tolist()   # the shared view is the RM's
        checks.append(self.sim.now())

    monkeypatch.setattr(engine_module._Replay, "_flush", checked)
    result = replay(synthetic(300), cluster(6), ReplayOptions(queue_policy="backfill"), lane=lane)
    assert len(checks) > 300
    assert all(j.outcome == "succeeded" for j in result.jobs)


# ---------------------------------------------------------------- heartbeats
def test_a_positive_heartbeat_delays_each_step_to_the_next_beat():
    trace = table([job("a", 0.5, 10, 8), job("b", 1.2, 3, 8), job("c", 2.0, 4.5, 1)])
    instant = by_id(replay(trace, cluster(1)))
    beat = by_id(replay(trace, cluster(1), ReplayOptions(heartbeat_s=5)))
    assert (instant["a"].start_s, instant["b"].start_s) == (0.5, 10.5)
    assert beat["a"].start_s == 5.0                  # tried at the first beat after its submit
    assert beat["a"].end_s == 15.0                   # it ended at 15, and its AM heard it then
    assert beat["b"].start_s == 15.0
    for j in beat.values():
        assert j.start_s % 5 == 0 and j.end_s - j.start_s >= j.duration_s


def test_options_are_checked():
    with pytest.raises(ValueError, match="queue_policy"):
        ReplayOptions(queue_policy="lifo")
    with pytest.raises(ValueError, match="heartbeat_s"):
        ReplayOptions(heartbeat_s=-1)
    with pytest.raises(ValueError, match="time_scale"):
        ReplayOptions(time_scale=0)
    with pytest.raises(Exception, match="job-packing"):
        replay(table([job("x", 0, 1, 1)]), cluster(1), ReplayOptions(selector="no-such"))


def test_time_scale_stretches_arrivals_and_progress_counts_every_job():
    seen = []
    trace = table([job("a", 10, 5, 1), job("b", 20, 5, 1)])
    result = replay(trace, cluster(1), ReplayOptions(time_scale=2.0), progress=lambda d, t: seen.append((d, t)))
    assert [j.submit_s for j in result.jobs] == [20.0, 40.0]
    assert [j.start_s for j in result.jobs] == [20.0, 40.0]
    assert seen[-1] == (2, 2) and (1, 2) in seen


# ---------------------------------------------------------------- the consolidating rule
@pytest.mark.parametrize("seed", range(6))
def test_job_packing_consolidates_as_the_helios_setup_does(seed):
    """philly-helios-11vc's rule: a gang of at most 8 GPUs on the node with the fewest free
    GPUs that fit; a larger one on whole free nodes plus one node for the remainder. The
    setup has no racks: each VC's nodes are one rack (job-packing prefers a job's racks for
    the rest of its gang, which then is the whole VC), so the rule holds whatever the seed."""
    trace = table([job("a5", 0, 100, 5), job("b2", 1, 100, 2), job("c2", 2, 100, 2), job("d6", 3, 100, 6),
                   job("e17", 4, 100, 17)])
    result = replay(trace, cluster(6, specs=nodes(6, rack_nodes=6)), ReplayOptions(seed=seed))
    jobs = by_id(result)
    a, = jobs["a5"].hosts
    assert jobs["b2"].hosts == (a,)                 # 3 free on a: the fewest that fit
    b, = jobs["c2"].hosts
    assert b != a                                   # 1 free on a: does not fit; an empty node
    assert jobs["d6"].hosts == (b,)                 # 6 free on b: the fewest that fit
    big = jobs["e17"].hosts
    assert len(big) == 3 and big[-1] == a           # 2 whole free nodes, and the 1 GPU left on a (1 free)
    assert not {a, b} & set(big[:2])


def test_a_replay_explains_no_failed_placement_nobody_reads(monkeypatch):
    """A replay's AMs log nothing: a placement that finds no room keeps its failure and its
    explanation (the filter chain over the whole cluster) is never worked out — it was, for
    every failed placement, when the AM asked whether the gang had stalled by formatting why."""
    from gangmaster.selectors.pipeline import SelectionPipeline

    explained = []
    filter_chain = SelectionPipeline.filter
    monkeypatch.setattr(SelectionPipeline, "filter",
                        lambda self, *a, **k: explained.append(1) or filter_chain(self, *a, **k))
    trace = synthetic(300)
    result = replay(trace, cluster(8))
    assert result.select_calls > len(trace.jobs)   # placements found no room and were retried
    assert explained == []
