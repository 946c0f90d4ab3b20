"""`gangmaster am` as its own process against `gangmaster rm serve` (YARN's shape): the
tasks are the RM's processes and meet at the AM's gRPC barrier. A barrier job succeeds;
a task that fails once restarts the gang (and the job's gang and declared duration reach the
RM); SIGTERM kills the application at the RM and
its tasks end; and what the RM recorded (its state file) with the AM's journal shows
the AM's invariants held: nothing double-booked, every gang attempt started whole, no
task running twice at once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest

from gangmaster.protocol.grpc_security import ClientSecurity
from gangmaster.am.core.journal import JOURNAL_FILE, read_records
from gangmaster.protocol.rm_client_grpc import GrpcRMClient
from gangmaster.tools.rmsim.control import SimulatorControl
from gangmaster.protocol.rm_protocol import AppState
from job_texts import one_role_job
from rm_serve_helpers import start_rm_serve, stop_rm_serve
from task_procs import MARKER_VAR, kill_marked, killed_on_exit, new_marker, running, wait_until

REPO = Path(__file__).resolve().parents[2]
MPI_JOB = REPO / "conf" / "jobs" / "mpi-allreduce.yaml"
AM_CLI = [sys.executable, "-m", "gangmaster.tools.cli", "am"]

pytestmark = pytest.mark.slow

FAILS_ONCE = one_role_job("fails-once", 3, ports="{mpi: 1}", retry=1, job_gangmaster="expectedDurationSeconds: 600",
                          command=['if [ "$GANGMASTER_ATTEMPT" = 1 ] && [ "$PAI_TASK_INDEX" = 1 ]; then exit 3; fi',
                                   "python -m gangmaster.tools.examples.mpi_style_task"])


def sleeps(seconds: float) -> str:
    """Two tasks whose first attempt sleeps ``seconds`` (a later one ends at once)."""
    return one_role_job("sleeps", 2, command=f'if [ "$GANGMASTER_ATTEMPT" = 1 ]; then sleep {seconds}; fi')


def held(release: Path) -> str:
    """:func:`sleeps` whose first attempt runs until the test makes the file ``release`` (at
    most 120 s): as long as the test needs the tasks running, and not a fixed while longer."""
    return one_role_job("sleeps", 2, command=f'if [ "$GANGMASTER_ATTEMPT" = 1 ]; then for i in $(seq 1200); do '
                                             f'[ -e {release} ] && break; sleep 0.1; done; fi')


def am_argv(address: str, job: Path, work: Path, *extra) -> list[str]:
    return [*AM_CLI, "--rm", address, str(job), "--work-dir", str(work), *map(str, extra)]


def am(address: str, job: Path, work: Path, *extra, timeout_s: float = 90):
    """`gangmaster am` run to its end, quietly."""
    return subprocess.run(am_argv(address, job, work, "--timeout", timeout_s, "-q", *extra), capture_output=True,
                          text=True, timeout=timeout_s + 60, cwd=work.parent)


def am_started(address: str, job: Path, work: Path, *extra):
    """`gangmaster am` running in the background (its output piped), killed if still
    running when the ``with`` block ends."""
    proc = subprocess.Popen(am_argv(address, job, work, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=work.parent)
    return killed_on_exit(proc)


def wait_for_the_gang_to_start(work: Path) -> None:
    wait_until(lambda: any(r["kind"] == "launched" for r in read_records(work / JOURNAL_FILE)), 60,
               "the gang to start")


@pytest.fixture
def rm_serve(tmp_path):
    """`rm serve` with a token file and a state file: (address, token file, state file)."""
    token, state = tmp_path / "token", tmp_path / "rm-state.json"
    server, address = start_rm_serve(tmp_path, "--token-file", str(token), "--state", str(state),
                                     "--work-dir", str(tmp_path / "rm-tasks"))
    try:
        yield address, token, state
    finally:
        stop_rm_serve(server)


def check_am_invariants(state: dict, journal: list[dict], instances: int) -> int:
    """The AM's invariants, from what the RM recorded of every container and the AM's
    journal; returns how many gang attempts were launched."""
    containers = {c["container_id"]: c for c in state["containers"]}
    # Nothing double-booked: containers on one node whose bookings overlap in time share
    # no GPU and no port.
    by_node = defaultdict(list)
    for c in containers.values():
        by_node[c["node"]].append(c)
    for booked in by_node.values():
        for k, a in enumerate(booked):
            for b in booked[k + 1:]:
                a_end, b_end = a["finished_at"] or float("inf"), b["finished_at"] or float("inf")
                if a["allocated_at"] < b_end and b["allocated_at"] < a_end:
                    assert a["gpu_mask"] & b["gpu_mask"] == 0, (a, b)
                    ports_a = {p for lo, hi in a["port_ranges"] for p in range(lo, hi + 1)}
                    ports_b = {p for lo, hi in b["port_ranges"] for p in range(lo, hi + 1)}
                    assert not ports_a & ports_b, (a, b)
    # Every gang attempt started whole: all its instances, each started at the RM, and
    # nothing started at the RM that no launch names.
    launches = [r for r in journal if r["kind"] == "launched"]
    launched = set()
    for launch in launches:
        ids = [t["container_id"] for t in launch["tasks"]]
        assert len(ids) == instances, launch
        assert all(containers[i]["started_at"] is not None for i in ids), launch
        launched.update(ids)
    assert {i for i, c in containers.items() if c["started_at"] is not None} == launched
    # No task twice at once: the RM's run intervals of one (role, index) never overlap.
    runs = defaultdict(list)
    for launch in launches:
        for t in launch["tasks"]:
            c = containers[t["container_id"]]
            runs[(t["role"], t["index"])].append((c["started_at"], c["finished_at"]))
    for task, intervals in runs.items():
        intervals.sort()
        for (_, end), (start, _) in zip(intervals, intervals[1:]):
            assert end is not None and end <= start, (task, intervals)
    return len(launches)


def test_a_barrier_job_succeeds_through_a_standalone_am(rm_serve, tmp_path):
    address, token, state = rm_serve
    work = tmp_path / "run"
    result = am(address, MPI_JOB, work, "--token-file", token)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "job mpi-allreduce (app_0001): SUCCEEDED" in result.stdout
    output = work / "output"
    assert (output / "hostfile").read_text().endswith("slots=4\n")        # rank 0 wrote it after the barrier
    assert all('"attempt": 1' in (output / f"gather-{r}.json").read_text() for r in range(4))
    with GrpcRMClient(address, security=ClientSecurity(token=token.read_text().strip())) as rm:
        report = rm.application_report("app_0001")
        assert (report.state, report.final_status) == (AppState.FINISHED, "SUCCEEDED")
        assert all(n.free == n.capacity for n in rm.cluster_nodes())
    launches = check_am_invariants(json.loads(state.read_text()), read_records(work / JOURNAL_FILE), 4)
    assert launches == 1
    again = am(address, MPI_JOB, work, "--token-file", token)        # the folder's run finished: reported
    assert again.returncode == 0 and "already finished in an earlier run" in again.stdout
    assert "app_0002" not in again.stdout


def test_a_task_that_fails_once_restarts_the_gang(rm_serve, tmp_path):
    address, token, state = rm_serve
    (tmp_path / "job.yaml").write_text(FAILS_ONCE)
    work = tmp_path / "run"
    result = am(address, tmp_path / "job.yaml", work, "--token-file", token)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gang worker attempt 1: failed" in result.stdout and "worker[1] exited with status 3" in result.stdout
    assert "gang worker attempt 2: succeeded" in result.stdout
    assert all('"attempt": 2' in (work / "output" / f"gather-{r}.json").read_text() for r in range(3))
    saved = json.loads(state.read_text())
    launches = check_am_invariants(saved, read_records(work / JOURNAL_FILE), 3)
    assert launches == 2
    # the job's gang and declared duration reached `rm serve` over gRPC (what a reserving queue plans)
    app = next(a for a in saved["apps"] if a["app_id"] == "app_0001")
    assert (app["gang"], app["expected_s"]) == ([["worker", 3, 1, 0, 1.0, 1024, None]], 600.0)


def test_sigterm_kills_the_application_at_the_rm_and_its_tasks_end(tmp_path):
    marker = new_marker()
    server, address = start_rm_serve(tmp_path, "--work-dir", str(tmp_path / "rm-tasks"),
                                     env={**os.environ, MARKER_VAR: marker})
    (tmp_path / "job.yaml").write_text(sleeps(1000))        # attempt 1 runs until stopped; a later one ends at once
    try:
        with am_started(address, tmp_path / "job.yaml", tmp_path / "run", "-q") as proc:
            wait_until(lambda: len(running(marker, "sleep")) == 2, 60, "both tasks to start")
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
        assert "interrupted by SIGTERM; the application was killed at the RM" in stderr
        assert "UNFINISHED" in stdout
        wait_until(lambda: not running(marker, "sleep"), 30, "the RM to stop both tasks")
        with GrpcRMClient(address) as rm:
            report = rm.application_report("app_0001")
            assert report.state is AppState.KILLED and "interrupted by SIGTERM" in report.diagnostics
        resumed = am(address, tmp_path / "job.yaml", tmp_path / "run")   # the same folder: a new application
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "job sleeps (app_0002): SUCCEEDED" in resumed.stdout
        assert "gang worker attempt 1: stopped" in resumed.stdout
        assert "gang worker attempt 2: succeeded" in resumed.stdout
    finally:
        stop_rm_serve(server)
        kill_marked(marker)


def test_a_killed_am_attempt_is_replaced_and_the_new_am_recovers_the_job(rm_serve, tmp_path):
    address, token, state = rm_serve
    release = tmp_path / "release"
    (tmp_path / "job.yaml").write_text(held(release))   # the tasks run until the new AM has taken them over
    work = tmp_path / "run"
    with am_started(address, tmp_path / "job.yaml", work, "--token-file", token) as proc:
        wait_for_the_gang_to_start(work)
        with GrpcRMClient(address, security=ClientSecurity(token=token.read_text().strip())) as rm:
            SimulatorControl(rm).inject_fault("kill_am", app_id="app_0001")
        wait_until(lambda: any(r["kind"] == "am_started" and r["am_attempt"] == 2
                               for r in read_records(work / JOURNAL_FILE)), 60, "AM attempt 2 to start")
        release.touch()   # AM attempt 2 registered and recovered the running tasks
        stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stdout + stderr
    assert "AM attempt 2 of app_0001" in stdout and "job sleeps (app_0001): SUCCEEDED" in stdout
    assert "gang worker attempt 1: succeeded" in stdout          # its tasks were kept across AM attempts
    assert check_am_invariants(json.loads(state.read_text()), read_records(work / JOURNAL_FILE), 2) == 1


#: A task that writes "start|end ATTEMPT INDEX TIME" to the file it is given as it starts and ends
#: (on SIGTERM too); in its gang's first attempt it runs until stopped.
#: (bash: its clock is a variable, so a mark made while the task's process group is being
#: stopped loses no field to a killed `date`, as sh's command substitution did under load)
MARKING_TASK = """
marks=$1
mark() { echo "$1 $GANGMASTER_ATTEMPT $PAI_TASK_INDEX $EPOCHREALTIME" >> "$marks"; }
trap 'mark end; exit 143' TERM
mark start
if [ "$GANGMASTER_ATTEMPT" = 1 ]; then sleep 1000 & wait; fi
mark end
"""


def test_a_rerun_after_the_am_was_killed_stops_the_earlier_tasks_before_starting_again(tmp_path):
    """kill -9 of `gangmaster am` while its gang runs: the RM runs its tasks on. The same
    command again into its work folder kills that application at the RM and starts the
    job's next attempts only once every earlier task has ended; it says so, and the
    report says what became of them."""
    marker = new_marker()
    token, state = tmp_path / "token", tmp_path / "rm-state.json"
    server, address = start_rm_serve(tmp_path, "--token-file", str(token), "--state", str(state),
                                     "--work-dir", str(tmp_path / "rm-tasks"), env={**os.environ, MARKER_VAR: marker})
    (tmp_path / "task.sh").write_text(MARKING_TASK)
    marks = tmp_path / "marks"
    (tmp_path / "job.yaml").write_text(one_role_job("marks", 2, command=f"bash {tmp_path / 'task.sh'} {marks}"))
    work = tmp_path / "run"
    try:
        with am_started(address, tmp_path / "job.yaml", work, "--token-file", token) as first:
            wait_until(lambda: marks.exists() and marks.read_text().count("start 1") == 2, 60, "both tasks to start")
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        with am_started(address, tmp_path / "job.yaml", work, "--token-file", token, "--timeout", 120) as rerun:
            stdout, stderr = rerun.communicate(timeout=180)
        assert rerun.returncode == 0, stdout + stderr
        with GrpcRMClient(address, security=ClientSecurity(token=token.read_text().strip())) as rm:
            report = rm.application_report("app_0001")
            assert report.state is AppState.KILLED and "its AM is gone" in report.diagnostics
    finally:
        stop_rm_serve(server)
        kill_marked(marker)   # (with --state, tasks outlive the RM: none may outlive the test)
    lines = [line.split() for line in marks.read_text().splitlines()]
    ends_1 = [float(t) for what, attempt, _, t in lines if (what, attempt) == ("end", "1")]
    starts_2 = [float(t) for what, attempt, _, t in lines if (what, attempt) == ("start", "2")]
    assert len(ends_1) == 2 and len(starts_2) == 2, lines    # attempt 1's tasks ended (stopped), not ran on
    assert max(ends_1) <= min(starts_2), f"attempt 2 started beside attempt 1: {lines}"
    assert ("the earlier run's application app_0001 was still at the RM with 2 task(s) running; killed it "
            "there, and waiting for them to stop") in stdout
    assert "the tasks it was running were killed at the RM with app_0001 before this run started" in stdout
    assert "job marks (app_0002): SUCCEEDED" in stdout and "gang worker attempt 1: stopped" in stdout
    assert "reason: the run was interrupted: its tasks were killed at the RM with app_0001" in stdout
    assert check_am_invariants(json.loads(state.read_text()), read_records(work / JOURNAL_FILE), 2) == 2


def test_the_am_rides_out_an_rm_restarted_from_its_state_file(tmp_path):
    """kill -9 of `rm serve --state` while the gang runs, and the same RM started again on
    the same port: the AM's heartbeats fail meanwhile, then go on; the tasks, adopted by
    the restored RM, finish and the job succeeds."""
    state, token = tmp_path / "rm-state.json", tmp_path / "token"
    args = ("--state", str(state), "--token-file", str(token), "--work-dir", str(tmp_path / "rm-tasks"))
    server, address = start_rm_serve(tmp_path, *args)
    release = tmp_path / "release"
    (tmp_path / "job.yaml").write_text(held(release))   # the tasks run until the AM has found the RM again
    work = tmp_path / "run"
    try:
        with am_started(address, tmp_path / "job.yaml", work, "--token-file", token) as proc:
            wait_for_the_gang_to_start(work)
            lines: list[str] = []
            reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
            reader.start()
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=10)
            wait_until(lambda: any("the RM did not answer a heartbeat" in line for line in lines), 30,
                       "the AM to find the RM gone")
            server, again = start_rm_serve(tmp_path, *args, "--port", address.rsplit(":", 1)[1])
            assert again == address
            wait_until(lambda: any("the RM answers again" in line for line in lines), 60,
                       "the AM to find the RM again")
            release.touch()
            proc.wait(timeout=90)
            reader.join(timeout=10)
            stdout, stderr = "".join(lines), proc.stderr.read()
    finally:
        stop_rm_serve(server)
    assert proc.returncode == 0, stdout + stderr
    assert "the RM answers again" in stdout
    assert "job sleeps (app_0001): SUCCEEDED" in stdout and "gang worker attempt 1: succeeded" in stdout
    assert check_am_invariants(json.loads(state.read_text()), read_records(work / JOURNAL_FILE), 2) == 1


def test_an_rm_restarted_without_its_state_ends_the_am_saying_so(tmp_path):
    """kill -9 of `rm serve` without --state while the gang runs (its tasks end with it),
    and an RM started again on the same port: it does not know the application, and
    never will. The AM ends at once, saying so, and does not claim it killed anything."""
    marker = new_marker()
    args = ("--work-dir", str(tmp_path / "rm-tasks"))
    server, address = start_rm_serve(tmp_path, *args, env={**os.environ, MARKER_VAR: marker})
    (tmp_path / "job.yaml").write_text(sleeps(1000))
    work = tmp_path / "run"
    try:
        with am_started(address, tmp_path / "job.yaml", work, "--timeout", 120) as proc:
            wait_until(lambda: len(running(marker, "sleep")) == 2, 60, "both tasks to start")
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=10)
            wait_until(lambda: not running(marker, "sleep"), 30, "the tasks to end with the RM")
            server, again = start_rm_serve(tmp_path, *args, "--port", address.rsplit(":", 1)[1])
            assert again == address
            stdout, stderr = proc.communicate(timeout=30)   # not --timeout's 120 s
    finally:
        stop_rm_serve(server)
        kill_marked(marker)
    assert proc.returncode == 1, stdout + stderr
    assert "gangmaster am: the RM no longer knows application app_0001 (it restarted without --state?)" in stderr
    assert "could not kill app_0001 at the RM" in stderr
    assert "the application was killed" not in stderr and "Traceback" not in stderr


def test_an_rm_that_cannot_be_used_is_a_clear_error(rm_serve, tmp_path):
    address, token, _ = rm_serve
    wrong = am(address, MPI_JOB, tmp_path / "a", timeout_s=30)           # the RM wants a token
    assert wrong.returncode == 2 and f"gangmaster am: cannot use the RM at {address}:" in wrong.stderr
    gone = am("127.0.0.1:1", MPI_JOB, tmp_path / "b", timeout_s=30)
    assert gone.returncode == 2 and "cannot use the RM at 127.0.0.1:1" in gone.stderr
    queue = am(address, MPI_JOB, tmp_path / "c", "--token-file", token, "--queue", "nope", timeout_s=30)
    assert queue.returncode == 2 and "refused the job: queue: unknown queue 'nope'" in queue.stderr
    (tmp_path / "wrong.token").write_text("not-the-servers\n")
    not_its = am(address, MPI_JOB, tmp_path / "d", "--token-file", tmp_path / "wrong.token", timeout_s=30)
    assert not_its.returncode == 2
    assert f"cannot use the RM at {address}: the token in {tmp_path / 'wrong.token'} is not this server's" \
        in not_its.stderr
    for result in (wrong, gone, queue, not_its):
        assert "Traceback" not in result.stderr
