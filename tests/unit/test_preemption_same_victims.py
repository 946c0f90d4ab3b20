"""The same victims, whoever chooses them: for the same jobs on the same cluster, a trace
replay with ``--preemption on`` (tools/replay/preempting.py), the live RM's preemption
monitor of ``gangmaster run`` (tools/rmsim/preemption_monitor.py) and the waiting gang's
diagnosis just before the monitor acts (am/ops/diagnosis.py: "will preempt ...") name the
same gangs: the fewest GPU-hours of lost work first, each needed (issue 30: one reading of
the candidates, tools/rmsim/preemptible.py, and one choice, am/core/victims.py)."""
from __future__ import annotations

import dataclasses

import pytest

from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.job_specs import job_spec

from replay_helpers import cluster, job, nodes, table

URGENT_AT = 1_000.0

CASES = [
    # (running jobs (id, submitted at, GPUs; 8 a node, the cluster just full; priority, the urgent job's
    # is 5), the urgent job's GPUs, victims)
    # the job on the most machines has lost the most work: the newer one on one machine goes
    ((("old", 0, 16, 0), ("new", 500, 8, 0)), 8, ("new",)),
    # the cheapest alone makes no room: the costlier one that does, and the cheapest is not needed
    ((("old", 0, 16, 0), ("new", 500, 8, 0)), 16, ("old",)),
    # three alike on a machine each: the two that have run for the least time
    ((("a", 0, 8, 0), ("b", 100, 8, 0), ("c", 900, 8, 0)), 16, ("b", "c")),
    # ... but b outranks the urgent job: the oldest goes instead
    ((("a", 0, 8, 0), ("b", 100, 8, 9), ("c", 900, 8, 0)), 16, ("a", "c")),
]


def _jobs(running, urgent_gpus):
    low = [dataclasses.replace(job(name, at, 10_000, gpus), priority=priority) for name, at, gpus, priority in running]
    return low + [dataclasses.replace(job("urgent", URGENT_AT, 1_000, urgent_gpus), priority=5)]


def _replayed(jobs, machines) -> list[str]:
    result = replay(table(jobs), cluster(machines), ReplayOptions(preemption=True, preemption_grace_s=0.0))
    return sorted(p.victim for p in result.preemptions)


def _live(jobs, machines, tmp_path) -> tuple[list[str], list[str]]:
    """What the live monitor preempts, and what the urgent gang's diagnosis named just before."""
    runs = SimulatedRuns(list(nodes(machines)))
    runs.monitor_preemption(0.0)
    monitor, said, done = runs.preemption, [], []
    preempt_for = monitor.preempt_for

    def watched(app_id, roles, view, pipeline, now):
        run = next(r for r in runs.runs if r.app_id == app_id)
        if not done:
            said.extend(v["job"] for v in run.am.why.diagnose(run.am.gangs[0]).to_dict().get("preempts", []))
        victims = preempt_for(app_id, roles, view, pipeline, now)
        done.extend(runs.core.apps[v.app_id].name for v in victims)
        return victims

    monitor.preempt_for = watched
    for trace in jobs:
        runs.sim.loop.run_until(trace.submit_s)
        runs.submit(job_spec(trace), tmp_path / trace.job_id)
    runs.sim.loop.run_until(URGENT_AT + 60)
    runs.close()
    return sorted(done), sorted(said)


@pytest.mark.parametrize("running, urgent_gpus, victims", CASES)
def test_replay_live_monitor_and_diagnosis_choose_the_same_victims(tmp_path, running, urgent_gpus, victims):
    jobs = _jobs(running, urgent_gpus)
    machines = sum(gpus for _name, _at, gpus, _priority in running) // 8
    preempted, named = _live(jobs, machines, tmp_path)
    assert _replayed(jobs, machines) == preempted == named == sorted(victims)
