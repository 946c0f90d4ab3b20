"""Preemption's choice of victims (am/core/victims.py) over random clusters, running
gangs and priorities: whole gangs only, only lower-priority ones, never without making room
(checked again with the real placement), each victim needed, and nothing preempted when
even every candidate gone would not make room."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.am.core.gang_placement import place_gang
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.replay.job_specs import job_spec
from gangmaster.tools.replay.trace import TraceJob, TraceRole
from gangmaster.am.core.victims import Priority, RunningGang, choose_victims, fits_once_gone, may_preempt

PIPELINE = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))


def _roles(instances: int, gpus: int):
    return job_spec(TraceJob("j", 0.0, 60.0, "default", (TraceRole("worker", instances, gpus, 1.0, 1024),))).roles


@st.composite
def scenes(draw):
    nodes = draw(st.integers(1, 4))
    specs = [NodeSpec(f"n{i}", rack=f"r{i % 2}", memory_mb=65536, vcores=32.0, gpus=draw(st.sampled_from([2, 4, 8])))
             for i in range(nodes)]
    view = ClusterView(specs)
    running = []
    for k in range(draw(st.integers(0, 6))):   # gangs placed one after the other while they fit
        roles = _roles(draw(st.integers(1, 3)), draw(st.integers(1, 4)))
        try:
            placed = place_gang(view, roles, PIPELINE)
        except Exception:
            continue
        for p in placed.instances:
            view.allocate(p.host, p.resource)
        running.append(RunningGang(f"app{k}", "default", Priority(0, draw(st.integers(0, 2))),
                                   float(sum(p.resource.gpus for p in placed.instances)),
                                   draw(st.floats(0, 3600)),
                                   tuple((view.index(p.host), p.resource) for p in placed.instances)))
    waiting = _roles(draw(st.integers(1, 3)), draw(st.integers(1, 4)))
    return view, running, waiting, Priority(0, draw(st.integers(0, 3)))


@settings(max_examples=40)
@given(scenes())
def test_victims_are_whole_lower_priority_gangs_that_make_room(scene):
    view, running, roles, priority = scene
    before = view.copy()
    candidates = [g for g in running if may_preempt(priority, "default", 0, g, {})]
    fits = fits_once_gone(view, roles, PIPELINE)
    victims = choose_victims(candidates, fits, now=3600.0)
    assert (view.gpus_used == before.gpus_used).all()   # the choice changes nothing
    if victims is None:
        # nothing preempted: it fits already, or not even every candidate gone makes room
        assert fits(()) or not fits(candidates)
        return
    assert victims and not fits(())
    assert all(v.priority < priority for v in victims)
    assert len({v.app_id for v in victims}) == len(victims)
    # whole gangs: every container of each victim is given back, checked by placing again by hand
    scratch = view.copy()
    for v in victims:
        whole = next(g for g in running if g.app_id == v.app_id)
        assert v.holdings == whole.holdings
        for node, resource in v.holdings:
            scratch.release(node, resource)
    place_gang(scratch, roles, PIPELINE)   # raises GangDoesNotFit if they made no room
    for v in victims:   # each one needed
        assert not fits([g for g in victims if g is not v])


CHOICES = [
    # (running gangs on one 8-GPU node: (app, GPUs, started at, priority), waiting GPUs, victims)
    # two gangs either of which makes room: the one that has run for less loses its work
    ((("old", 4, 0.0, 0), ("new", 4, 3000.0, 0)), 4, ["new"]),
    # the cheapest alone makes no room: it is taken back once a costlier one made room by itself
    ((("small", 1, 3000.0, 0), ("big", 4, 0.0, 0), ("vip", 3, 0.0, 9)), 4, ["big"]),
    # not even every lower-priority gang gone makes room: none is preempted
    ((("small", 1, 3000.0, 0), ("vip", 7, 0.0, 9)), 4, None),
]


def test_victim_choice_table():
    for gangs, waiting_gpus, expected in CHOICES:
        view = ClusterView([NodeSpec("n0", memory_mb=65536, vcores=32.0, gpus=8)])
        running = []
        for app, gpus, started, priority in gangs:
            placed = place_gang(view, _roles(1, gpus), PIPELINE)
            for p in placed.instances:
                view.allocate(p.host, p.resource)
            running.append(RunningGang(app, "default", Priority(0, priority), float(gpus), started,
                                       tuple((0, p.resource) for p in placed.instances)))
        candidates = [g for g in running if may_preempt(Priority(0, 5), "default", waiting_gpus, g, {})]
        victims = choose_victims(candidates, fits_once_gone(view, _roles(1, waiting_gpus), PIPELINE), now=3600.0)
        assert (None if victims is None else [v.app_id for v in victims]) == expected, gangs


MAY_PREEMPT = [
    # (asking priority, asking queue, its GPUs, victim priority, victim queue, shares, expected)
    (Priority(0, 1), "a", 2, Priority(0, 0), "a", {}, True),
    (Priority(0, 0), "a", 2, Priority(0, 0), "a", {}, False),
    (Priority(1, 0), "a", 2, Priority(0, 5), "b", {}, True),          # the queue's priority comes first
    (Priority(0, 0), "a", 2, Priority(0, 0), "b", {"a": (0, 4), "b": (6, 4)}, True),   # reclaim a guarantee
    (Priority(0, 0), "a", 6, Priority(0, 0), "b", {"a": (0, 4), "b": (6, 4)}, False),  # past its guarantee
    (Priority(0, 0), "a", 2, Priority(0, 0), "b", {"a": (0, 4), "b": (4, 4)}, False),  # b not over its share
    (Priority(0, 0), "a", 2, Priority(0, 0), "b", {"a": (0, 0), "b": (6, 4)}, False),  # a has no guarantee
]


def test_may_preempt_table():
    from gangmaster.am.core.victims import QueueShare

    for priority, queue, gpus, victim_priority, victim_queue, shares, expected in MAY_PREEMPT:
        victim = RunningGang("v", victim_queue, victim_priority, 2.0, 0.0, ())
        got = may_preempt(priority, queue, gpus, victim, {q: QueueShare(*s) for q, s in shares.items()})
        assert got is expected, (priority, queue, gpus, victim_priority, victim_queue, shares)


# ------------------------------------------------------------------ in a replay
@st.composite
def prioritized_traces(draw):
    from gangmaster.tools.replay.trace import JobTable, sorted_jobs

    from tests.unit.replay_helpers import SHAPE

    jobs = [TraceJob(f"j{k}", float(draw(st.integers(0, 600))), float(draw(st.integers(60, 3600))), "q",
                     SHAPE.gang_roles(draw(st.sampled_from([1, 2, 4, 8, 16]))), draw(st.integers(0, 3)))
            for k in range(draw(st.integers(2, 8)))]
    return JobTable(sorted_jobs(jobs), "test", "0" * 64, "native")


@settings(max_examples=15)
@given(prioritized_traces(), st.sampled_from(["fifo", "backfill"]), st.sampled_from([0.0, 30.0]))
def test_replayed_preemption_takes_only_lower_priority_whole_gangs_and_every_job_still_runs_whole(
        trace, policy, grace):
    from gangmaster.tools.replay.clusters import ReplayCluster
    from gangmaster.tools.replay.engine import ReplayOptions, replay

    from tests.unit.replay_helpers import nodes

    result = replay(trace, ReplayCluster("2x8", nodes(2)),
                    ReplayOptions(queue_policy=policy, preemption=True, preemption_grace_s=grace))
    priority = {j.job_id: j.priority for j in trace.jobs}
    assert all(j.outcome == "succeeded" for j in result.jobs)
    for j in result.jobs:   # the last start ran the whole duration, on the whole gang
        assert j.end_s - j.start_s == pytest.approx(j.duration_s)
    for p in result.preemptions:   # the preemptor outranks every victim it took
        assert priority[p.victim] < priority[p.by] and p.lost_gpu_hours >= 0
    capacity = result.timeline.capacity_gpus
    assert min(result.timeline.allocated_gpus) >= 0 and max(result.timeline.allocated_gpus) <= capacity
