"""The RM's reserving queue (``policy: reserve``): a whole-cluster gang submitted into a stream
of small jobs starts when the jobs running at its submission end, where under ``fifo`` every
small job takes what frees up and the gang waits for the stream to end. Live-equivalent:
the jobs run through their AMs on the simulated RM (virtual time); the RM's books hold
(free + used = capacity) throughout."""
import pytest

from gangmaster.am.jobspec import parse_job
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.queues import Queue

from sim_cluster import nodes, worker_job

SMALL_S, BIG_S = 60, 30         # the small jobs' and the gang's declared durations
STREAM = range(1, 16)           # a small job every 8 s from t = 2 s to 114 s
SLACK_S = 5                     # heartbeats between an end and the gang's grant


def _job(name: str, instances: int, duration_s: float):
    return parse_job(worker_job(instances, duration_s).replace("name: j", f"name: {name}"))


def _run(tmp_path, policy: str):
    sim = SimulatedRuns(nodes(2), queues=[Queue("default", policy=policy)])   # 2 x 4 GPUs
    runs = {}

    def submit(name: str, instances: int, duration_s: float) -> None:
        runs[name] = sim.submit(_job(name, instances, duration_s), tmp_path / name)

    for i in range(6):                      # 6 of the 8 GPUs busy when the gang comes
        submit(f"first{i}", 1, SMALL_S)
    sim.sim.loop.call_later(1, lambda: submit("gang", 8, BIG_S))
    for k in STREAM:
        sim.sim.loop.call_later(8 * k + 2, lambda k=k: submit(f"small{k}", 1, SMALL_S))
    checked = []
    for k in range(1, 40):
        sim.sim.loop.call_later(5 * k + 0.5, lambda: checked.append(sim.sim.core.check_invariants()))
    assert sim.run()
    assert {run.outcome for run in runs.values()} == {"succeeded"} and len(checked) == 39
    return runs


@pytest.mark.parametrize("policy, starves", [("reserve", False), ("fifo", True)])
def test_a_whole_cluster_gang_starts_when_the_jobs_running_before_it_end(tmp_path, policy, starves):
    runs = _run(tmp_path, policy)
    bound = max(runs[f"first{i}"].am.gangs[0].record.ended_at for i in range(6)) + SLACK_S
    started = runs["gang"].am.gangs[0].record.started_at
    assert (started > bound) is starves, (policy, started, bound)
