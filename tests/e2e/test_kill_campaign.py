"""A kill campaign on the shipped MPI-style job: kill a random process of a random
task at a random moment, again and again (seeded), while ``gangmaster run --live``
runs it. Whichever process dies — the task's program, its shell, or its
supervisor, by SIGKILL or SIGTERM — the attempt fails and the gang restarts; the
run succeeds, no process is left behind (each task also starts a sidecar in the
background, as real tasks do), and no task completion is lost or counted twice."""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from gangmaster.am.core.journal import JOURNAL_FILE, read_records, task_endings
from task_procs import MARKER_VAR, kill_marked, marked, new_marker, wait_until

REPO = Path(__file__).resolve().parents[2]
MPI_JOB = REPO / "conf" / "jobs" / "mpi-allreduce.yaml"
SEED = 10
KILLS = 5
RANKS = 4
HOLD_S = 0.5            # each rank pauses this long before each of its three steps
pytestmark = pytest.mark.slow

#: What to kill in a task, by its command line: the program, its shell, its supervisor.
VICTIMS = {
    "program": lambda argv: argv[1:3] == ["-m", "gangmaster.tools.examples.mpi_style_task"],
    "shell": lambda argv: argv[:2] == ["/bin/sh", "-c"] and argv[2].startswith("set -e"),
    "supervisor": lambda argv: argv[1:3] == ["-m", "gangmaster.tools.rmsim.supervisor"],
}


def task_processes(marker: str, attempt: int) -> dict[tuple[int, str], int]:
    """(rank, victim kind) -> pid, for the processes of ``attempt``'s tasks."""
    found = {}
    for pid, argv, env in marked(marker):
        if env.get("GANGMASTER_ATTEMPT") != str(attempt):
            continue
        for kind, matches in VICTIMS.items():
            if matches(argv):
                found[(int(env["GANGMASTER_TASK_INDEX"]), kind)] = pid
    return found


def all_ranks_started(marker: str, attempt: int) -> dict | None:
    found = task_processes(marker, attempt)
    return found if all((rank, "program") in found for rank in range(RANKS)) else None


def test_random_kills_during_a_live_run_lose_nothing_and_leave_nothing(tmp_path):
    rng = random.Random(SEED)
    marker = new_marker()
    job = tmp_path / "mpi.yaml"   # the shipped job, with enough attempts for every kill, and a sidecar
    job.write_text(MPI_JOB.read_text().replace("jobRetryCount: 2 ", f"jobRetryCount: {KILLS} ").replace(
        "      - python -m", "      - sleep 1000 &\n      - python -m"))
    assert f"jobRetryCount: {KILLS} " in job.read_text() and "sleep 1000 &" in job.read_text()
    config = tmp_path / "fast.yaml"
    config.write_text("am:\n  heartbeat_s: 0.2\nrm:\n  kill_grace_s: 0.5\n")
    work = tmp_path / "run"
    env = dict(os.environ, **{MARKER_VAR: marker, "GANGMASTER_EXAMPLE_HOLD_S": str(HOLD_S)})
    proc = subprocess.Popen([sys.executable, "-m", "gangmaster.tools.cli", "run", str(job), "--live",
                             "--work-dir", str(work), "--config", str(config), "--timeout", "300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    kills: list[tuple[int, int, str]] = []       # (attempt, rank, victim) of every kill that landed
    try:
        for attempt in range(1, KILLS + 1):
            wait_until(lambda: all_ranks_started(marker, attempt) or proc.poll() is not None, 120,
                       f"attempt {attempt}'s tasks to start")
            if proc.poll() is not None:
                break
            time.sleep(rng.uniform(0, 2 * HOLD_S))             # a random moment of the attempt
            rank, victim = rng.randrange(RANKS), rng.choice(sorted(VICTIMS))
            sig = rng.choice([signal.SIGKILL, signal.SIGTERM])
            pid = task_processes(marker, attempt).get((rank, victim))
            if pid is not None:
                os.kill(pid, sig)
                kills.append((attempt, rank, victim))
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        left = marked(marker)
        kill_marked(marker)

    assert left == [], f"left behind: {[argv for _, argv, _ in left]}"
    assert proc.returncode == 0, stdout + stderr
    assert len(kills) >= KILLS - 1, f"too few kills landed: {kills}"
    final = len(kills) + 1
    assert f"gang worker attempt {final}: succeeded" in stdout
    assert re.findall(r"^  gang worker attempt (\d+): (\w+) \(", stdout, re.M) == (     # the report
        [(str(a), "failed") for a in range(1, final)] + [(str(final), "succeeded")])

    records = read_records(work / JOURNAL_FILE)
    finished = Counter((r["attempt"], r["index"]) for r in task_endings(records))
    assert max(finished.values()) == 1, f"a completion recorded twice: {finished}"
    for attempt, rank, victim in kills:   # each kill's completion arrived, as a failure, in its attempt
        assert (attempt, rank) in finished, f"attempt {attempt}: the completion of rank {rank} ({victim}) was lost"
    ended = [r["record"] for r in records if r["kind"] == "attempt_ended"]
    assert [(e["attempt"], e["outcome"]) for e in ended] == (
        [(a, "failed") for a in range(1, final)] + [(final, "succeeded")])
    for e in ended:                        # every task of every attempt appears once, in an end state
        assert sorted(t["index"] for t in e["tasks"]) == list(range(RANKS))
        assert all(t["state"] != "running" for t in e["tasks"]), e
    assert sorted(r["state"] for r in task_endings(records) if r["attempt"] == final) == (
        ["succeeded"] * RANKS)

    output = work / "output"
    for rank in range(RANKS):
        assert (output / f"part-{rank}.txt").read_text().startswith(f"attempt {final} ")
        assert f'"attempt": {final}' in (output / f"gather-{rank}.json").read_text()
    assert re.fullmatch(r"(dgx1-\d+ slots=\d\n)+", (output / "hostfile").read_text())
