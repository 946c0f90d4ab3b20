"""Two applications of one job name are legitimate (YARN runs them side by side): each
meets its gangs at barriers of its own, keyed by application, in `run`, `run --live`
and `diagnose --after`. And an AM that fails on the clock's thread ends a live run at
once with the error, instead of leaving it to sit until --timeout."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import load_job
from gangmaster.am.core.master import ApplicationMaster
from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
from gangmaster.tools.job_runner import LiveRuns

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "conf" / "jobs" / "mpi-allreduce.yaml"

pytestmark = pytest.mark.slow


def gangmaster(*args, timeout_s=120):
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout_s, cwd=REPO)


@pytest.mark.parametrize("live", [(), ("--live", "--timeout", "60")], ids=["virtual", "live"])
def test_two_jobs_of_one_name_both_run_to_success(tmp_path, live):
    started = time.monotonic()
    result = gangmaster("run", JOB, JOB, *live, "--work-dir", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert re.findall(r"^job mpi-allreduce \((app_\d+)\): SUCCEEDED", result.stdout, re.M) == ["app_0001", "app_0002"]
    assert time.monotonic() - started < 45   # not the --timeout


def test_diagnose_after_jobs_of_the_diagnosed_name(tmp_path):
    result = gangmaster("diagnose", JOB, "--after", JOB, JOB)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "gang worker of job mpi-allreduce: can start now" in result.stdout


def test_an_am_failing_on_the_clock_thread_ends_a_live_run_with_the_error(tmp_path, monkeypatch):
    def failing(am):
        raise RuntimeError("the AM broke")

    monkeypatch.setattr(ApplicationMaster, "heartbeat", failing)
    runs = LiveRuns(load_cluster_specs(default_cluster_path()), tmp_path, AMSettings())
    try:
        runs.submit(load_job(JOB), tmp_path / "job")
        started = time.monotonic()
        finished = runs.run(timeout_s=30)
        took = time.monotonic() - started
    finally:
        runs.shutdown()
    assert not finished and not runs.timed_out
    assert took < 10, f"the run went on for {took:.1f} s after its AM failed"
    assert runs.failure == "the AM of job mpi-allreduce (app_0001) failed: RuntimeError: the AM broke"
