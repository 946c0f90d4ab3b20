"""The RM's reserving queue (``policy: reserve``): a whole-cluster gang submitted into a stream
of small jobs starts when the jobs running at its submission end, where under ``fifo`` every
small job takes what frees up and the gang waits for the stream to end. Live-equivalent:
the jobs run through their AMs on the simulated RM (virtual time); the RM's books hold
(free + used = capacity) throughout."""
import pytest

from gangmaster.am.spec.jobspec import parse_job
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.queues import Queue

from job_texts import one_role_job
from sim_cluster import nodes

SMALL_S, BIG_S = 60, 30         # the small jobs' and the gang's declared durations
STREAM = range(1, 16)           # a small job every 8 s from t = 2 s to 114 s
SLACK_S = 5                     # heartbeats between an end and the gang's grant
SHORT_AT_S = 31                 # a 10-s job comes then


def _job(name: str, instances: int, duration_s: float):
    return parse_job(one_role_job(name, instances, duration=duration_s))


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
    sim.sim.loop.call_later(SHORT_AT_S, lambda: submit("short", 1, 10))   # ends well before the gang's start
    checked, said = [], []
    for k in range(1, 40):
        sim.sim.loop.call_later(5 * k + 0.5, lambda: checked.append(sim.sim.core.check_invariants()))
    sim.sim.loop.call_later(30.5, lambda: said.append(runs["gang"].am.why.diagnose(runs["gang"].am.gangs[0])))
    assert sim.run()
    assert {run.outcome for run in runs.values()} == {"succeeded"} and len(checked) == 39
    return runs, said[0]


@pytest.mark.parametrize("policy, starves, machines", [("reserve", False, "2 reserved machines"),
                                                       ("fifo", True, "2 machines")])
def test_a_whole_cluster_gang_starts_when_the_jobs_running_before_it_end(tmp_path, policy, starves, machines):
    """Under ``reserve`` the gang starts by the end of the jobs running when it came, jobs that
    came after it and end by its planned start are backfilled (none is still running when it
    starts), and the gang's diagnosis at t = 30 s
    names the machines reserved for it; under ``fifo`` it waits for the stream (which takes what
    frees up, the short job waiting too), and its diagnosis plans the same start with nothing
    holding the machines."""
    runs, diagnosis = _run(tmp_path, policy)
    bound = max(runs[f"first{i}"].am.gangs[0].record.ended_at for i in range(6)) + SLACK_S
    started = runs["gang"].am.gangs[0].record.started_at
    assert (started > bound) is starves, (policy, started, bound)
    if starves:   # the short job waits behind the stream too
        assert runs["short"].am.gangs[0].record.started_at > SHORT_AT_S + SLACK_S
    else:         # jobs that came after the gang were backfilled, and each was gone by its start
        later = [run.am.gangs[0].record for name, run in runs.items() if name.startswith(("small", "short"))]
        backfilled = [record for record in later if record.started_at < started]
        assert backfilled and all(record.ended_at <= started for record in backfilled)
    start = diagnosis.expected_start
    assert start is not None and sorted(start.gpus_by_host) == ["n0", "n1"]
    assert diagnosis.reserved is (policy == "reserve")
    assert f"expected to start in ~{round(start.start_s)}s on {machines} when first" in diagnosis.text()
