"""`gangmaster run` as a user runs it: the shipped jobs in virtual time, exit codes,
bad input, and the MPI-style job --live with a task killed mid-run."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from itertools import takewhile
from pathlib import Path

from urllib.request import urlopen

import pytest
from in_process import gangmaster
from task_procs import wait_until

REPO = Path(__file__).resolve().parents[2]
MPI_JOB = REPO / "conf" / "jobs" / "mpi-allreduce.yaml"




@pytest.mark.parametrize("name", ["mpi-allreduce", "parameter-server", "single-gpu"])
def test_every_shipped_job_succeeds_in_virtual_time(name, tmp_path):
    result = gangmaster("run", REPO / "conf" / "jobs" / f"{name}.yaml", "--work-dir", tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"job {name} (app_0001): SUCCEEDED" in result.stdout
    assert re.search(r"attempt 1: succeeded \(waited", result.stdout)
    assert (tmp_path / "am-1.log").read_text()


def test_a_failing_job_exits_non_zero_with_its_attempts(tmp_path):
    job = tmp_path / "fails.yaml"
    job.write_text(MPI_JOB.read_text().replace(
        "      simulatedDurationSeconds: 120", "      simulatedDurationSeconds: 120\n      failOnAttempts: [1, 2, 3]\n"
        "      failInstance: 1\n      failExitCode: 7"))
    result = gangmaster("run", job, "--work-dir", tmp_path / "run", "--quiet")
    assert result.returncode == 1
    assert "FAILED - attempt 3 of 3 failed: worker[1] exited with status 7" in result.stdout
    assert result.stdout.count("reason: worker[1] exited with status 7") == 3


def test_bad_job_file_names_the_field(tmp_path):
    job = tmp_path / "bad.yaml"
    job.write_text(MPI_JOB.read_text().replace("gpu: 1", 'gpu: "four"'))
    result = gangmaster("run", job, "--work-dir", tmp_path / "run")
    assert result.returncode == 2
    assert "taskRoles.worker.resourcePerInstance.gpu" in result.stderr


def test_metrics_are_served_over_http(tmp_path):
    from urllib.request import urlopen

    from gangmaster.am.spec.am_settings import AMSettings
    from gangmaster.am.spec.jobspec import load_job
    from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
    from gangmaster.tools.job_runner import SimulatedRuns

    runs = SimulatedRuns(load_cluster_specs(default_cluster_path()), AMSettings(metrics_port=0))
    job = load_job(MPI_JOB)
    runs.submit(job, tmp_path)
    try:
        runs.sim.run_until(10)
        text = urlopen(runs.metrics_url, timeout=5).read().decode()
    finally:
        runs.close()
    assert 'gangmaster_containers{state="running"} 4.0' in text
    assert "gangmaster_gang_attempts_total 1.0" in text
    assert "gangmaster_gang_wait_seconds_count 1.0" in text
    assert "gangmaster_pending_gangs 0.0" in text
    assert "gangmaster_selection_latency_seconds_count" in text
    assert "app_0001" not in text and "mpi-allreduce" not in text   # no job ids as labels


def _task_pid(output_dir: Path, rank: int) -> int | None:
    """The python process of the task with ``rank`` whose output goes to ``output_dir``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if not cmdline or not os.path.basename(cmdline[0].decode()).startswith("python"):
            continue
        if b"gangmaster.tools.rmsim.supervisor" in cmdline:   # the task's supervisor, not the task
            continue
        if (f"GANGMASTER_OUTPUT_DIR={output_dir}".encode() in environ
                and f"GANGMASTER_TASK_INDEX={rank}".encode() in environ
                and b"GANGMASTER_ATTEMPT=1" in environ):
            return int(entry.name)
    return None


#: the example task, with its barrier client's INFO log ("waiting for barrier (epoch e): n/N
#: arrived ...") on its output, which the RM keeps in ``tasks/<container>.log``
LOGGING_TASK = ("python -c 'import logging, sys; logging.basicConfig(level=logging.INFO); "
                "from gangmaster.tools.examples.mpi_style_task import main; sys.exit(main())'")


@pytest.mark.slow
def test_live_mpi_job_survives_a_killed_task_as_a_new_attempt(tmp_path):
    job, config, work = tmp_path / "mpi.yaml", tmp_path / "barrier.yaml", tmp_path / "run"
    job.write_text(MPI_JOB.read_text().replace("python -m gangmaster.tools.examples.mpi_style_task", LOGGING_TASK))
    # the coordinator holds a waiting call for up to a minute (the log interval), so ranks 0-2 stay
    # held there from when the gauge shows them until the AM reacts, at its next heartbeat
    config.write_text("barrier:\n  log_interval_s: 60\nam:\n  heartbeat_s: 0.25\n")
    env = dict(os.environ, GANGMASTER_EXAMPLE_HOLD_S="0.5", GANGMASTER_EXAMPLE_STALL="3:60")
    proc = subprocess.Popen([sys.executable, "-m", "gangmaster.tools.cli", "run", str(job), "--live",
                             "--work-dir", str(work), "--timeout", "90", "--config", str(config),
                             "--metrics-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        output = work / "output"
        head = [proc.stdout.readline()]   # the AM's first lines, then where its metrics are
        while head[-1] and not head[-1].startswith("metrics: "):
            head.append(proc.stdout.readline())
        metrics_url = head[-1].strip().removeprefix("metrics: ")
        # all_gather is the tasks' second call (epoch 1): every rank is past the first once rank 0
        # has written the host file, and ranks 0-2 have arrived in all_gather and the coordinator
        # holds their calls, waiting for the stalled rank 3, once the AM's gauge says 3
        held = "gangmaster_barrier_waiting_tasks 3.0"

        def held_in_gather() -> bool:
            try:
                return (output / "hostfile").exists() and held in urlopen(metrics_url, timeout=5).read().decode()
            except OSError:   # the run ended
                return False

        wait_until(lambda: held_in_gather() or proc.poll() is not None, 60,
                   f"the coordinator to hold ranks 0-2 ({held!r} at {metrics_url})")
        assert held_in_gather(), f"the run ended before ranks 0-2 waited in all_gather: {proc.communicate()}"
        pid = _task_pid(output, 3)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=90)
        stdout = "".join(head) + stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stdout + stderr
    assert "gang worker attempt 1: failed" in stdout and "gang worker attempt 2: succeeded" in stdout
    assert re.search(r"worker\[3\] exited with status 137", stdout)
    # The AM's reaction, in the order of its log (no timestamps compared): the death, then at
    # once (the very next line, before anything else the AM did) the barrier failing the ranks
    # still waiting in all_gather, then the restart.
    events = [line.split("] ", 1)[1] for line in (work / "am-1.log").read_text().splitlines()]
    died = next(i for i, e in enumerate(events) if re.match(r"gang worker attempt 1: worker\[3\] on \S+ failed", e))
    # Rank 3 may have been its host's barrier leader (the first task to call barrier() leads):
    # then the ranks waiting through it lose it with it, tell the coordinator, which fails the
    # attempt at once, and nobody is left waiting when the AM fails it; else the AM's failing
    # the barrier tells the 3 ranks it holds.
    rest = events[died + 1:]
    ended_too = list(takewhile(lambda e: re.match(r"gang worker attempt 1: worker\[[0-2]\] on \S+ failed", e), rest))
    told = re.fullmatch(r"gang worker attempt 1: barrier failed, (\d+) waiting task\(s\) told at once",
                        rest[len(ended_too)])
    leader_lost = any("barrier leader, task 3 " in log.read_text() for log in (work / "tasks").glob("*.log"))
    assert told and (leader_lost or int(told.group(1)) == 3), rest[:5]
    assert rest[len(ended_too) + 1] == "gang worker: restarting as attempt 2 of 3"
    gathered = [(output / f"gather-{r}.json").read_text() for r in range(4)]
    assert all('"attempt": 2' in g for g in gathered)
    assert re.fullmatch(r"dgx1-\d+ slots=4\n", (output / "hostfile").read_text())
