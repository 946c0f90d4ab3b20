"""`gangmaster run --live` with real task processes: a task that cannot be launched,
the OpenPAI environment as a task really sees it, and an interrupted run resumed in
the same work folder."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gangmaster.am.core.journal import JOURNAL_FILE, read_records
from job_texts import one_role_job

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def job_file(path: Path, commands: list[str], instances: int = 2, ports: str = "", retry: int = 0) -> Path:
    path.write_text(one_role_job("live", instances, gpus=0, command=commands, ports=ports, retry=retry))
    return path


def run_live(job: Path, work: Path, *extra, cwd=REPO, timeout_s=60):
    """``gangmaster run --live`` to its end, the AM's heartbeat a quarter second (each step
    of the run waits for the next heartbeat, 1 s by default)."""
    config = work.parent / "heartbeat.yaml"
    config.write_text("am: {heartbeat_s: 0.25}\n")
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", "run", str(job), "--live", "--work-dir",
                           str(work), "--timeout", str(timeout_s), "--config", str(config), "-q", *extra],
                          capture_output=True, text=True, timeout=timeout_s + 60, cwd=cwd)


def test_a_command_too_long_to_exec_fails_the_job_with_the_reason(tmp_path):
    job = job_file(tmp_path / "big.yaml", ["echo " + "x" * 140_000])       # one argument over 128 KiB: E2BIG
    result = run_live(job, tmp_path / "run", timeout_s=30)
    assert result.returncode == 1
    assert "job live (app_0001): FAILED - attempt 1 of 1 failed: task worker[0] could not be launched on" \
        in result.stdout
    assert "Argument list too long" in result.stdout
    assert "Traceback" not in result.stderr and "--timeout" not in result.stderr


@pytest.mark.parametrize("command, status", [("no-such-command-gangmaster", 127), ("./not-executable.sh", 126)])
def test_a_command_that_cannot_run_fails_the_job(tmp_path, command, status):
    (tmp_path / "not-executable.sh").write_text("#!/bin/sh\nexit 0\n")
    job = job_file(tmp_path / "job.yaml", [command], retry=1)
    result = run_live(job, tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 1
    # both tasks fail alike: the report names whichever the AM saw end first
    assert re.search(rf"FAILED - attempt 2 of 2 failed: worker\[[01]\] exited with status {status}\b", result.stdout), \
        result.stdout


def test_tasks_see_openpai_variables_in_openpai_format(tmp_path):
    job = job_file(tmp_path / "env.yaml", [
        'mkdir -p "$GANGMASTER_OUTPUT_DIR"',
        'env > "$GANGMASTER_OUTPUT_DIR/env-$PAI_TASK_INDEX.txt"',
        'echo "--data_dir=$PAI_WORK_DIR/data --port=$PAI_CONTAINER_HOST_model_server_PORT_LIST" '
        '> "$GANGMASTER_OUTPUT_DIR/args-$PAI_TASK_INDEX.txt"',
    ], ports="{http: 1, model_server: 2}")
    result = run_live(job, tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    output = tmp_path / "run" / "output"
    for index in range(2):
        env = dict(line.split("=", 1) for line in (output / f"env-{index}.txt").read_text().splitlines()
                   if "=" in line)
        assert env["PAI_WORK_DIR"] == str(tmp_path)                 # where the commands run
        http, model = env["PAI_CONTAINER_HOST_http_PORT_LIST"], env["PAI_CONTAINER_HOST_model_server_PORT_LIST"]
        assert len(model.split(",")) == 2 and http.isdigit()
        assert env["PAI_CONTAINER_HOST_PORT_LIST"] == f"http:{http};model_server:{model};"
        assert env["PAI_CONTAINER_HOST_PORT"] == env["PAI_CURRENT_CONTAINER_PORT"] == http
        assert env["PAI_PORT_LIST_worker_" + str(index) + "_model_server"] == model
        assert env["PAI_TASK_ROLE_INSTANCES"] == "worker:0,worker:1"
        assert env["PAI_CONTAINER_HOST_IP"] == "127.0.0.1"
        args = (output / f"args-{index}.txt").read_text().strip()
        assert args == f"--data_dir={tmp_path}/data --port={model}"


def test_an_interrupted_live_run_resumes_as_a_new_attempt(tmp_path):
    # attempt 1 runs until interrupted; attempt 2 (the resumed run) ends at once
    job = job_file(tmp_path / "long.yaml", ['if [ "$GANGMASTER_ATTEMPT" = 1 ]; then sleep 120; fi'])
    work = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "gangmaster.tools.cli", "run", str(job), "--live",
                              "--work-dir", str(work), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(r["kind"] == "launched"
                                                       for r in read_records(work / JOURNAL_FILE)):
            time.sleep(0.1)
        assert any(r["kind"] == "launched" for r in read_records(work / JOURNAL_FILE)), "attempt 1 never started"
        os.kill(first.pid, signal.SIGINT)
        stdout, _ = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 130 and "UNFINISHED" in stdout   # 128 + SIGINT, after stopping its tasks
    resumed = run_live(job, work)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "gang worker attempt 1: stopped" in resumed.stdout
    assert "reason: the run was interrupted: its tasks ended with it" in resumed.stdout
    assert "gang worker attempt 2: succeeded" in resumed.stdout
