"""What Slurm does to a running gang, through `gangmaster run --rm slurm`: a node dies
(its slurmd killed) and the gang restarts on the others; the AM dies (kill -9) and the
tasks run on, and the next run into the same work folder takes them back. Skipped,
saying why, where Slurm cannot run (see slurm_cluster.require_slurm)."""
from __future__ import annotations

import json
import signal

import pytest

from slurm_cluster import Runner, alive, job_yaml, records, start_cluster
from task_procs import killed_on_exit, marked, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("slurm-failover"))
    yield cluster
    cluster.stop()


@pytest.fixture
def runner(cluster, tmp_path):
    runner = Runner(cluster, tmp_path)
    yield runner
    runner.clean_up()


def _all_started(output, attempt: int, count: int = 4):
    found = records(output, "started", attempt)
    return found if len(found) == count else None


def test_a_dead_node_restarts_the_gang_on_the_other_nodes(runner, cluster, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("slurm-node-lost"))
    output = tmp_path / "run" / "output"
    with killed_on_exit(runner.start(job, work_dir=tmp_path / "run", GANG_TEST_HOLD_S="90")) as proc:
        started = wait_until(lambda: _all_started(output, 1), 60, "every task of attempt 1 to start")
        victim = next(r["host"] for r in started if r["rank"] == 1)
        try:
            assert cluster.stop_node(victim) is not None
            stdout, stderr = proc.communicate(timeout=150)
        finally:
            cluster.start_node(victim)
            cluster.wait_idle([victim], 60)
    assert proc.returncode == 0, stderr
    [report] = json.loads(stdout)
    first, second = report["attempts"]
    assert first["outcome"] == "failed"
    assert f"status -110 on {victim}" in first["reason"]                 # ExitStatus.NODE_LOST
    lost = [t for t in first["tasks"] if t["host"] == victim]
    assert lost and all(t["exit_status"] == -110 and "NODE_FAIL" in t["diagnostics"] for t in lost)
    assert all(t["exit_status"] != -110 for t in first["tasks"] if t["host"] != victim)
    assert second["outcome"] == "succeeded"
    assert victim not in {t["host"] for t in second["tasks"]}


def test_tasks_outlive_the_am_and_the_next_run_takes_them_back(runner, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("slurm-failover"))
    work = tmp_path / "run"
    output = work / "output"
    with killed_on_exit(runner.start(job, work_dir=work, GANG_TEST_HOLD_S="90")) as first:
        started = wait_until(lambda: _all_started(output, 1), 60, "every task of attempt 1 to start")
        first.send_signal(signal.SIGKILL)
        first.communicate()
    assert all(alive(r["pid"]) for r in started), "a task died with the AM"
    # the tasks go to their barrier now: they find no AM, then the second run's taking them back
    # (its coordinator listens before it has reopened their barrier)
    (output / "release").touch()
    with killed_on_exit(runner.start(job, work_dir=work, GANG_TEST_HOLD_S="90")) as second:
        stdout, stderr = second.communicate(timeout=120)
    assert second.returncode == 0, stderr
    [report] = json.loads(stdout)
    [attempt] = report["attempts"]          # the same attempt carried on: nothing restarted
    assert attempt["outcome"] == "succeeded"
    passed = records(output, "passed", 1)
    assert [p["pid"] for p in passed] == [s["pid"] for s in started]   # the very processes of the first run
    assert "recovering from the journal" in (work / "am-2.log").read_text()


def test_sigterm_cancels_the_run_and_nothing_of_it_outlives_it(runner, tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(job_yaml("slurm-sigterm"))
    output = tmp_path / "run" / "output"
    with killed_on_exit(runner.start(job, work_dir=tmp_path / "run", GANG_TEST_HOLD_S="90")) as proc:
        wait_until(lambda: _all_started(output, 1), 60, "every task of attempt 1 to start")
        proc.send_signal(signal.SIGTERM)
        _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "its Slurm jobs were cancelled" in stderr
    wait_until(lambda: not marked(runner.marker), 30, "every task, launcher and srun of the run to end")
