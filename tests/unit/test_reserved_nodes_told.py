"""A small job's AM is told which nodes a reserving queue holds for another gang (each
allocate answer's ``reserved``), so it places elsewhere instead of asking where it would wait
for that gang to start and end; a job declared to end before the gang starts is told nothing
and may backfill there. Virtual time, through the AMs, on 3 x 4 GPUs."""
from __future__ import annotations

import pytest

from gangmaster.am.spec.jobspec import parse_job
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.queues import Queue

from job_texts import one_role_job
from sim_cluster import nodes

LATE_AT_S = 10
RESELECT_S = 5          # an ask not granted is looked at again after this (am.reselect_after_s)


def job(name: str, instances: int, gpus: int, duration_s: float):
    return parse_job(one_role_job(name, instances, gpus=gpus, duration=duration_s))


@pytest.mark.parametrize("late_s, starts_by", [
    (1000, LATE_AT_S + RESELECT_S + 2),   # runs past the gang's start: placed off its reserved nodes
    (20, LATE_AT_S + 2),                  # ends before it: backfilled where it first asked
])
def test_a_small_job_is_placed_off_the_nodes_reserved_for_a_gang(tmp_path, late_s, starts_by):
    """3 GPUs of one node run until 60 s, 2 of another until 1,000 s; a gang of 2 x 4 GPUs
    comes at 1 s and is held the first node and the free one from 60 s. A 1-GPU job at 10 s
    would pack onto the first node's last GPU: told it is reserved, its AM selects again at
    its first look and it starts on the other node at once (before: its ask waited there
    until the gang had come and gone, 64 s); the gang starts at 60 s either way."""
    sim = SimulatedRuns(nodes(3), queues=[Queue("default", policy="reserve")])
    runs = {}

    def submit(name: str, *shape) -> None:
        runs[name] = sim.submit(job(name, *shape), tmp_path / name)

    submit("first", 1, 3, 60)
    submit("second", 1, 2, 1000)
    sim.sim.loop.call_later(1, lambda: submit("gang", 2, 4, 30))
    sim.sim.loop.call_later(LATE_AT_S, lambda: submit("late", 1, 1, late_s))
    assert sim.run()
    started = {name: run.am.gangs[0].record.started_at for name, run in runs.items()}
    assert started["late"] <= starts_by, started
    assert 60 <= started["gang"] <= 65, started
