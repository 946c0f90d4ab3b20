"""Invariants of openb's fill mode on random pod lists: the arrival sequence asks at least
``inflate`` × capacity and stops at the first pod that reaches it, holds every listed pod
once when it had to be topped up, and draws only listed pods; the fill metric's
unallocated % stays within 0..100, never rises as more arrives, and its median lies
between its quartiles."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from gangmaster.tools.replay.metrics import FillCurve, unallocated_at_arrived
from gangmaster.tools.replay.openb import Pod, Pods, fill_plan
from gangmaster.tools.replay.trace import TraceRole

asks = st.one_of(st.tuples(st.integers(1, 8), st.just(0)), st.tuples(st.just(0), st.integers(0, 999)))


@st.composite
def pod_lists(draw) -> Pods:
    drawn = draw(st.lists(asks, min_size=1, max_size=30))
    if not any(g or m for g, m in drawn):
        drawn.append((1, 0))
    return Pods(tuple(Pod(f"p{i}", TraceRole("pod", 1, g, 1.0, 64, gpu_milli=m), 0.0, 1.0, i + 2)
                      for i, (g, m) in enumerate(drawn)), "test", "0" * 64)


@settings(max_examples=60)
@given(pod_lists(), st.integers(1, 64), st.floats(0.1, 3.0), st.integers(0, 2 ** 32))
def test_the_fill_reaches_inflate_at_its_last_pod(pods, capacity, inflate, seed):
    plan = fill_plan(pods, capacity, seed, inflate)
    target = inflate * capacity * 1000
    asked = np.cumsum([job.gpu_milli for job in plan.table.jobs])
    assert asked[-1] >= target and (len(asked) == 1 or asked[-2] < target or plan.table.jobs[-1].gpu_milli == 0)
    names = [job.job_id.split(".r")[0] for job in plan.table.jobs]
    listed = [pod.name for pod in pods.pods]
    assert set(names) <= set(listed)
    if plan.drawn_again:
        assert sorted(names[:len(listed)]) == sorted(listed)
    assert len(set(job.job_id for job in plan.table.jobs)) == len(plan.table)
    assert plan == fill_plan(pods, capacity, seed, inflate)


@settings(max_examples=60)
@given(st.lists(st.lists(st.tuples(st.integers(0, 3000), st.booleans()), min_size=1, max_size=40),
                min_size=1, max_size=5), st.integers(1, 8))
def test_unallocated_stays_within_bounds_and_never_rises(runs, capacity_gpus):
    curves = []
    for run in runs:
        held, placed = 0, []
        for milli, wanted in run:    # a pod is placed only where the capacity has room, as in a replay
            placed.append(wanted and held + milli <= 1000 * capacity_gpus)
            held += milli if placed[-1] else 0
        asked = np.array([a for a, _ in run], dtype=np.int64) * 100
        curves.append(FillCurve(np.cumsum(asked), np.cumsum(asked * np.array(placed)), 1000 * capacity_gpus))
    table = unallocated_at_arrived(curves)
    medians = [point["median"] for point in table.values()]
    assert all(0 <= point["p25"] <= point["median"] <= point["p75"] <= 100 for point in table.values())
    assert all(a >= b for a, b in zip(medians, medians[1:]))
    assert len(table) == min(int(c.arrived[-1] // c.capacity_milli) for c in curves)
