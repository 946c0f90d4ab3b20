"""Barrier semantics in simulation, in virtual time: the AM drives the in-process
coordinator exactly as it drives the gRPC one live, and the simulated tasks take part
(they arrive when they start and run their duration once the whole gang is there).

* a gang meets at its barrier before any task runs;
* a gang member that fails before the barrier keeps the others waiting; the AM fails
  the barrier, and every waiting task is told at once;
* a barrier that never completes times out after the job's barrierTimeoutSeconds of
  virtual time, and the waiting tasks fail;
* the in-process coordinator keeps a call on the clock only while an epoch waits."""
from __future__ import annotations

import pytest

from gangmaster.am.barrier.coordinator import Arrival, TaskInfo
from gangmaster.am.barrier.errors import AttemptFailed, BarrierTimeout
from gangmaster.am.barrier.in_process import InProcessBarrier
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.clock import VirtualLoop
from gangmaster.tools.rmsim.workload import BARRIER_ERROR_EXIT_CODE
from job_texts import one_role_job
from sim_cluster import nodes


#: Instance 2 of the worker role crashes on start in attempt 1, never reaching its barrier.
FAILS_BEFORE_BARRIER = "failOnAttempts: [1], failInstance: 2, failExitCode: 3, failBeforeBarrier: true"


def job(instances: int = 4, retry: int = 1, duration: float = 100, min_failed: int = 1, extra: str = "",
        failure: str = FAILS_BEFORE_BARRIER) -> str:
    return one_role_job(instances=instances, duration=duration, retry=retry, role_gangmaster=failure,
                        role_keys=[f"completion: {{minFailedInstances: {min_failed}}}"],
                        job_gangmaster=f"retryScope: job{extra}")


def test_a_gang_meets_at_its_barrier_then_runs_its_duration(tmp_path):
    runs = SimulatedRuns(nodes(2))
    run = runs.submit(parse_job(job(instances=4, failure="")), tmp_path)
    assert runs.run() and run.outcome == "succeeded"
    stats = runs.sim.barrier.statistics()
    assert (stats.arrivals, stats.releases, stats.attempts_open) == (4, 1, 0)   # closed when it succeeded
    (attempt,) = run.am.history()
    assert attempt.ended_at - attempt.started_at == pytest.approx(100, abs=1)
    env = runs.sim.core.containers[attempt.tasks[0].container_id].launch.env_dict
    assert env["GANGMASTER_BARRIER_ADDRESS"] == runs.sim.barrier.address
    assert env["GANGMASTER_TASK_COUNT"] == "4"


def test_a_member_failing_before_the_barrier_fails_the_barrier_and_the_waiters_are_told_at_once(tmp_path):
    runs = SimulatedRuns(nodes(2))
    run = runs.submit(parse_job(job(instances=4)), tmp_path)
    assert runs.run() and run.outcome == "succeeded"
    first, second = run.am.history()
    assert (first.outcome, second.outcome) == ("failed", "succeeded")
    assert "worker[2] exited with status 3" in first.reason
    # the others never ran their 100 s: they waited at the barrier until the AM failed it
    assert first.ended_at - first.started_at < 5
    assert {t.name: t.state.value for t in first.tasks} == {
        "worker[0]": "stopped", "worker[1]": "stopped", "worker[2]": "failed", "worker[3]": "stopped"}
    log = (tmp_path / "am-1.log").read_text()
    assert "gang worker attempt 1: barrier failed, 3 waiting task(s) told at once" in log
    stats = runs.sim.barrier.statistics()
    assert (stats.attempts_failed, stats.releases) == (1, 1)     # attempt 1 failed; attempt 2 met and ran


def test_a_barrier_that_never_completes_times_out_in_virtual_time(tmp_path):
    # The crashed member does not fail the attempt (two failures do): the others wait at the
    # barrier until the job's barrier timeout, in virtual time; then they fail too.
    runs = SimulatedRuns(nodes(2))
    run = runs.submit(parse_job(job(instances=4, min_failed=2, extra=", barrierTimeoutSeconds: 30")), tmp_path)
    assert runs.run() and run.outcome == "succeeded"
    first, second = run.am.history()
    assert first.outcome == "failed" and second.outcome == "succeeded"
    assert first.ended_at - first.started_at == pytest.approx(30, abs=2)
    timed_out = [t for t in first.tasks if t.name != "worker[2]"]
    assert all(t.exit_status == BARRIER_ERROR_EXIT_CODE for t in timed_out if t.state.value == "failed")
    assert sum(t.state.value == "failed" for t in timed_out) >= 1
    assert runs.sim.barrier.statistics().timeouts == 1


def test_without_a_timeout_the_others_wait_until_the_job_runs_out_of_time(tmp_path):
    # The control: the same gang with the default (unlimited) barrier timeout never ends by itself.
    from gangmaster.am.spec.am_settings import AMSettings
    runs = SimulatedRuns(nodes(2), AMSettings(max_virtual_time_s=3600))
    run = runs.submit(parse_job(job(instances=4, min_failed=2)), tmp_path)
    assert not runs.run()
    assert run.outcome is None
    assert runs.sim.barrier.statistics().timeouts == 0


def test_the_in_process_coordinator_times_out_on_the_loop_and_leaves_no_call_behind():
    loop = VirtualLoop()
    barrier = InProcessBarrier(loop)
    tasks = [TaskInfo(0, "h0"), TaskInfo(1, "h1")]
    token = barrier.open_attempt("job", "g", 1, tasks, timeout_s=30)
    outcomes: list = []
    barrier.arrive(Arrival("job", "g", 1, token, task=0, epoch=0), outcomes.append)
    assert loop.has_one_shot_calls()                 # the epoch's deadline
    loop.run_until(29.9)
    assert outcomes == []
    loop.run_until(31)
    assert isinstance(outcomes[0], BarrierTimeout) and outcomes[0].missing == (1,)
    assert not loop.has_one_shot_calls()

    token = barrier.open_attempt("job", "g", 2, tasks, timeout_s=30)
    for task in (0, 1):
        barrier.arrive(Arrival("job", "g", 2, token, task=task, epoch=0), outcomes.append)
    assert [o.epoch for o in outcomes[1:]] == [0, 0]
    assert not loop.has_one_shot_calls()             # released: no deadline is left on the clock
    barrier.arrive(Arrival("job", "g", 2, token, task=0, epoch=1), outcomes.append)
    assert barrier.fail_attempt("job", "g", 2, "the AM restarts the gang") == 1
    assert isinstance(outcomes[-1], AttemptFailed)
    assert not loop.has_one_shot_calls()


def test_each_epoch_keeps_its_own_deadline_whoever_arrives_later():
    """An epoch's deadline runs from its first arrival: a later arrival in it does not move
    it, and an epoch of another gang that starts later with a shorter timeout ends first;
    an attempt opened again starts afresh."""
    loop = VirtualLoop()
    barrier = InProcessBarrier(loop)
    three = [TaskInfo(i, f"h{i}") for i in range(3)]
    long_token = barrier.open_attempt("job", "long", 1, three, timeout_s=100)
    short_token = barrier.open_attempt("job", "short", 1, three[:2], timeout_s=30)
    told: dict = {}
    barrier.arrive(Arrival("job", "long", 1, long_token, task=0, epoch=0),
                   lambda o: told.setdefault("long", loop.now()))
    loop.run_until(10)
    barrier.arrive(Arrival("job", "short", 1, short_token, task=0, epoch=0),
                   lambda o: told.setdefault("short", loop.now()))
    loop.run_until(50)
    barrier.arrive(Arrival("job", "long", 1, long_token, task=1, epoch=0), lambda o: None)
    loop.run_until(99.9)
    assert told == {"short": 40}
    loop.run_until(101)
    assert told == {"short": 40, "long": 100}
    again = barrier.open_attempt("job", "short", 2, three[:2], timeout_s=30)
    barrier.arrive(Arrival("job", "short", 2, again, task=1, epoch=0), lambda o: told.setdefault("again", loop.now()))
    loop.run_until(200)
    assert told["again"] == pytest.approx(131)


def test_tokens_are_numbered_so_a_simulation_replays(tmp_path):
    def tokens(where):
        runs = SimulatedRuns(nodes(2))
        runs.submit(parse_job(job(instances=3, retry=1)), where)
        assert runs.run()
        return [r.get("barrier_token") for r in map(_json, (where / "journal.jsonl").read_text().splitlines())
                if r["kind"] == "launched"]
    first = tokens(tmp_path / "a")
    assert len(first) == 2 and len(set(first)) == 2
    assert first == tokens(tmp_path / "b")


def _json(line: str) -> dict:
    import json
    return json.loads(line)


def test_gangmaster_run_shows_the_failed_barrier(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    path = tmp_path / "job.yaml"
    path.write_text(job(instances=4))
    cluster = Path(__file__).resolve().parents[2] / "conf" / "clusters" / "default.yaml"
    result = subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", "run", str(path), "--cluster", str(cluster),
                             "--work-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "gang worker attempt 1: barrier failed, 3 waiting task(s) told at once" in result.stdout
    assert "j (app_0001): SUCCEEDED" in result.stdout
