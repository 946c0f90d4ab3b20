"""A work folder belongs to one job: `gangmaster run` into a folder that holds a run
refuses another job, reports a finished run without running it again, and resumes
an interrupted one as a new attempt (virtual time here; live in
test_am_live_reliability.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gangmaster.am.core.journal import JOURNAL_FILE, read_records

REPO = Path(__file__).resolve().parents[2]
JOBS = REPO / "conf" / "jobs"
MPI_JOB = JOBS / "mpi-allreduce.yaml"


def gangmaster(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


def test_another_job_into_a_folder_with_a_finished_run_is_refused_naming_both(tmp_path):
    work = tmp_path / "run"
    assert gangmaster("run", MPI_JOB, "--work-dir", work, "-q").returncode == 0
    journal = read_records(work / JOURNAL_FILE)
    result = gangmaster("run", JOBS / "single-gpu.yaml", "--work-dir", work, "-q")
    assert result.returncode == 2
    assert "job 'mpi-allreduce'" in result.stderr and "job 'single-gpu'" in result.stderr
    assert "SUCCEEDED" not in result.stdout
    assert read_records(work / JOURNAL_FILE) == journal         # nothing ran


def test_the_same_job_changed_or_on_another_cluster_is_refused(tmp_path):
    work = tmp_path / "run"
    assert gangmaster("run", MPI_JOB, "--work-dir", work, "-q").returncode == 0
    changed = tmp_path / "mpi-allreduce.yaml"
    changed.write_text(MPI_JOB.read_text().replace("instances: 4", "instances: 2"))
    result = gangmaster("run", changed, "--work-dir", work, "-q")
    assert result.returncode == 2 and "belongs to job 'mpi-allreduce'" in result.stderr
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text((REPO / "conf" / "clusters" / "default.yaml").read_text().replace("count: 4", "count: 5", 1))
    result = gangmaster("run", MPI_JOB, "--cluster", cluster, "--work-dir", work, "-q")
    assert result.returncode == 2 and str(cluster) in result.stderr and "on cluster default" in result.stderr


def test_a_finished_run_is_reported_not_run_again(tmp_path):
    work = tmp_path / "run"
    first = gangmaster("run", MPI_JOB, "--work-dir", work, "-q")
    assert first.returncode == 0
    journal = read_records(work / JOURNAL_FILE)
    recommented = tmp_path / "mpi-allreduce.yaml"            # the same job: a comment does not change it
    recommented.write_text("# the same job\n" + MPI_JOB.read_text())
    again = gangmaster("run", recommented, "--work-dir", work)
    assert again.returncode == 0, again.stderr
    assert "already finished in an earlier run" in again.stdout
    assert "job mpi-allreduce (app_0001): SUCCEEDED - every role completed" in again.stdout
    assert "gang worker attempt 1: succeeded" in again.stdout          # its history, from the journal
    assert read_records(work / JOURNAL_FILE) == journal
    assert not (work / "am-2.log").exists()
    report = json.loads(gangmaster("run", MPI_JOB, "--work-dir", work, "--json").stdout)
    assert report[0]["already_finished"] is True and report[0]["outcome"] == "succeeded"


def test_the_same_cluster_named_another_way_is_the_same_job(tmp_path):
    work = tmp_path / "run"
    assert gangmaster("run", MPI_JOB, "--work-dir", work, "-q").returncode == 0    # the default cluster
    named = gangmaster("run", MPI_JOB, "--work-dir", work, "-q", "--cluster", REPO / "conf/clusters/default.yaml")
    assert named.returncode == 0, named.stderr
    assert "already finished in an earlier run" in named.stdout


def test_a_failed_run_is_reported_failed_again(tmp_path):
    job = tmp_path / "fails.yaml"
    job.write_text(MPI_JOB.read_text().replace("jobRetryCount: 2", "jobRetryCount: 0").replace(
        "      simulatedDurationSeconds: 120", "      simulatedDurationSeconds: 120\n      failOnAttempts: [1]"))
    work = tmp_path / "run"
    assert gangmaster("run", job, "--work-dir", work, "-q").returncode == 1
    again = gangmaster("run", job, "--work-dir", work, "-q")
    assert again.returncode == 1
    assert "FAILED - attempt 1 of 1 failed: worker[0] exited with status 1" in again.stdout
    assert "already finished" in again.stdout


def test_an_interrupted_run_resumes_as_a_new_attempt(tmp_path):
    short = tmp_path / "short.yaml"
    short.write_text("am:\n  max_virtual_time_s: 50\n")          # the run stops 50 s in; the tasks last 120 s
    work = tmp_path / "run"
    stopped = gangmaster("run", MPI_JOB, "--work-dir", work, "--config", short, "-q")
    assert stopped.returncode == 1 and "UNFINISHED" in stopped.stdout
    resumed = gangmaster("run", MPI_JOB, "--work-dir", work)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming the job from the journal of an earlier run" in resumed.stdout
    assert "job mpi-allreduce (app_0001): SUCCEEDED" in resumed.stdout
    assert "gang worker attempt 1: stopped" in resumed.stdout
    assert "reason: the run was interrupted: its tasks ended with it" in resumed.stdout
    assert "gang worker attempt 2: succeeded" in resumed.stdout
    assert (work / "am-1.log").exists() and (work / "am-2.log").exists()   # one log per AM process
    report = json.loads(gangmaster("run", MPI_JOB, "--work-dir", work, "--json").stdout)   # and now it is done
    (run,) = report
    assert run["already_finished"] and [a["outcome"] for a in run["attempts"]] == ["stopped", "succeeded"]
    first, second = run["attempts"]
    assert second["waiting_since"] >= first["ended_at"]            # the AM's clock went on


def test_an_interruption_does_not_count_against_the_retries(tmp_path):
    job = tmp_path / "once.yaml"                                  # a single attempt allowed
    job.write_text(MPI_JOB.read_text().replace("jobRetryCount: 2", "jobRetryCount: 0"))
    short = tmp_path / "short.yaml"
    short.write_text("am:\n  max_virtual_time_s: 50\n")
    work = tmp_path / "run"
    assert gangmaster("run", job, "--work-dir", work, "--config", short, "-q").returncode == 1
    resumed = gangmaster("run", job, "--work-dir", work, "-q")
    assert resumed.returncode == 0 and "gang worker attempt 2: succeeded" in resumed.stdout


def test_a_killed_run_resumes_as_a_new_attempt(tmp_path):
    scenario = tmp_path / "kill.yaml"
    scenario.write_text("events:\n  - {at: 40, do: kill_app, app: app_0001}\n")
    work = tmp_path / "run"
    killed = gangmaster("run", MPI_JOB, "--scenario", scenario, "--work-dir", work, "-q")
    assert killed.returncode == 1 and "KILLED - killed (scenario)" in killed.stdout
    resumed = gangmaster("run", MPI_JOB, "--work-dir", work, "-q")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "gang worker attempt 1: stopped" in resumed.stdout and "gang worker attempt 2: succeeded" in resumed.stdout


def test_a_journal_written_by_an_earlier_version_is_resumed(tmp_path):
    """A work folder left by the AM as of commit 067aeb2 (before the gangs owned their
    transitions and their events became the journal): attempt 1 failed (a task killed),
    attempt 2 was running, the AM was killed and replaced, and the run stopped. Its journal
    is a user's artifact: today's AM resumes the job from it."""
    fixture = REPO / "tests" / "fixtures" / "journal" / "written-by-067aeb2"
    work = tmp_path / "run"
    work.mkdir()
    for name in ("journal.jsonl", "job.json"):
        (work / name).write_bytes((fixture / name).read_bytes())
    resumed = gangmaster("run", fixture / "mpi-allreduce.yaml", "--work-dir", work, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    (run,) = json.loads(resumed.stdout)
    attempts = [(a["attempt"], a["outcome"]) for a in run["attempts"]]
    assert attempts == [(1, "failed"), (2, "stopped"), (3, "succeeded")]
    assert "worker[1] exited with status -106" in run["attempts"][0]["reason"]
    assert run["attempts"][1]["reason"] == "the run was interrupted: its tasks ended with it"
    old = [r["kind"] for r in read_records(fixture / "journal.jsonl")]
    kinds = [r["kind"] for r in read_records(work / JOURNAL_FILE)]
    assert kinds[:len(old) + 2] == old + ["am_started", "resumed"] and kinds[-1] == "job_finished"
