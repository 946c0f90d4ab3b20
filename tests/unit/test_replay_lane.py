"""The single-task lane (tools/replay/lane.py) decides as the gang path does: the same
table replayed with the lane and with every job through its AM (``lane=False``) gives
the same outcomes (submit, start, end, hosts, racks, gang wait, outcome), the same
timeline, the same clock events and the same number of placements — on a roomy and a
contended cluster, FIFO, backfill and drop, with heartbeats, isolated queues, jobs that
can never fit, gangs beside one-task jobs, and openb pods (shares of a GPU, GPU types, a
strategy that draws at random)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gangmaster.tools.replay import engine as engine_module
from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.lane import takes
from gangmaster.tools.replay.openb import fill_plan, read_openb_nodes, read_openb_pods

from replay_helpers import cluster, job, synthetic, table

OPENB = Path(__file__).resolve().parents[1] / "fixtures" / "replay" / "openb"


def _never_fits_beside_others():
    """A 16-GPU job on a 1-node cluster can never fit; one-task jobs before and after it."""
    return table([job("a", 0, 5, 1), job("big", 1, 5, 16), job("b", 1, 3, 8), job("c", 2, 1, 4)])


def _isolated():
    return synthetic(100), cluster(4, {"q0": ("n000",), "q1": ("n001", "n002")})


def _ending_together():
    """Jobs of one task and gangs (16 GPUs: two nodes) submitted in bursts, each running 30 s
    on a 3-node cluster: many end at one instant (one clock event: their tasks exit in turn,
    containers and the lane's alike), and the queue's next jobs start then."""
    return table([job(f"j{i}", i // 6 * 10, 30, (1, 2, 4, 8, 16)[i % 5]) for i in range(60)])


CASES = {   # name: (table, cluster, options)
    "roomy-fifo": (synthetic(200), cluster(40), ReplayOptions()),
    "contended-fifo": (synthetic(150), cluster(2), ReplayOptions()),
    "contended-backfill": (synthetic(150), cluster(2), ReplayOptions(queue_policy="backfill")),
    "contended-drop": (synthetic(150), cluster(2), ReplayOptions(queue_policy="drop")),
    "heartbeat-30s": (synthetic(150), cluster(3), ReplayOptions(heartbeat_s=30.0)),
    "isolated-queues": (*_isolated(), ReplayOptions(queue_policy="backfill")),
    "never-fits": (_never_fits_beside_others(), cluster(1), ReplayOptions()),
    "random-strategy": (synthetic(150), cluster(2), ReplayOptions(selector="random", seed=5)),
    "ending-together": (_ending_together(), cluster(3), ReplayOptions()),
    "ending-together-backfill": (_ending_together(), cluster(3), ReplayOptions(queue_policy="backfill")),
}


def _decisions(result):
    return result.jobs, repr(result.timeline), result.events, result.select_calls


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_lane_decides_as_every_job_through_its_am(name):
    trace, where, options = CASES[name]
    assert any(takes(j) for j in trace.jobs) and (name == "never-fits" or not all(map(takes, trace.jobs)))
    assert _decisions(replay(trace, where, options)) == _decisions(replay(trace, where, options, lane=False))


@pytest.mark.parametrize("selector, seed", [("random", 3), ("best-fit", 4), ("fgd", 1)])
def test_the_lane_places_openb_pods_as_their_ams_do(selector, seed):
    where = read_openb_nodes(OPENB / "openb_node_list_gpu_node.csv")
    plan = fill_plan(read_openb_pods(OPENB / "pods_small.csv"), where.capacity_gpus, seed, inflate=1.5)
    options = ReplayOptions(selector=selector, queue_policy="drop", seed=seed)
    assert _decisions(replay(plan.table, where, options)) == _decisions(replay(plan.table, where, options,
                                                                               lane=False))


def test_jobs_of_one_task_and_gangs_end_at_one_instant_in_the_ending_together_case():
    """The case above does what it says: at some instant several jobs of one task and a gang end."""
    trace, where, options = CASES["ending-together"]
    ends: dict[float, list[bool]] = {}
    for trace_job, outcome in zip(trace.jobs, replay(trace, where, options).jobs):
        ends.setdefault(outcome.end_s, []).append(takes(trace_job))
    assert any(lone.count(True) >= 2 and False in lone for lone in ends.values())


def test_the_lane_runs_one_task_jobs_without_an_am(monkeypatch):
    """Only the gangs get an AM: the lane is taken, not merely allowed."""
    admitted = []
    admit = engine_module._Replay._admit
    monkeypatch.setattr(engine_module._Replay, "_admit", lambda self, j: (admitted.append(j.trace), admit(self, j)))
    trace = synthetic(200)
    replay(trace, cluster(40))
    assert admitted and not any(map(takes, admitted))
    assert len(admitted) == sum(not takes(j) for j in trace.jobs)
