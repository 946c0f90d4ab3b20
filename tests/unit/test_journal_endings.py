"""Task endings in the journal: one ``tasks_finished`` line per gang attempt and heartbeat,
and the one-line-per-task ``task_finished`` of older folders still read the same way."""
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.am.core.journal import JOURNAL_FILE, read_records, read_state, task_endings
from gangmaster.am.core.lifecycle import TaskRecord, TaskState
from gangmaster.am.core.recovery import replay_gangs
from gangmaster.tools.job_runner import SimulatedRuns

from job_texts import one_role_job
from sim_cluster import nodes

JOB = one_role_job(instances=6, duration=30)


def launched(n: int) -> dict:
    tasks = [TaskRecord("worker", i, i, f"c{i}", "n0", (i,), {}, 1.0).to_dict() for i in range(n)]
    return {"t": 1.0, "kind": "launched", "gang": "worker", "attempt": 1, "started_at": 1.0, "tasks": tasks}


def test_a_heartbeat_that_sees_tasks_end_writes_one_line_for_them(tmp_path):
    specs = nodes(2)
    runs = SimulatedRuns(specs)
    run = runs.submit(parse_job(JOB), tmp_path)
    assert runs.run() and run.outcome == "succeeded"
    records = read_records(tmp_path / JOURNAL_FILE)
    (line,) = [r for r in records if r["kind"] == "tasks_finished"]
    assert not [r for r in records if r["kind"] == "task_finished"]
    assert sorted(end["index"] for end in task_endings(records)) == list(range(6))
    assert {(e["gang"], e["attempt"], e["state"], e["exit_status"]) for e in task_endings(records)} == {
        ("worker", 1, "succeeded", 0)}
    assert line["finished_at"] == run.am.history()[-1].tasks[0].finished_at


def test_both_kinds_of_ending_replay_alike():
    start = [{"t": 0.0, "kind": "am_started", "am_attempt": 1, "app_id": "app_0001", "job": "j"},
             {"t": 0.0, "kind": "gang_attempt", "gang": "worker", "attempt": 1, "waiting_since": 0.0},
             launched(3)]
    old = [{"t": 9.0, "kind": "task_finished", "gang": "worker", "attempt": 1, "role": "worker", "index": i,
            "state": state, "exit_status": code, "diagnostics": why, "finished_at": 9.0}
           for i, state, code, why in ((0, "succeeded", 0, ""), (2, "failed", 3, "exit 3"))]
    new = [{"t": 9.0, "kind": "tasks_finished", "gang": "worker", "attempt": 1, "finished_at": 9.0,
            "tasks": [["worker", 0, "succeeded", 0, ""], ["worker", 2, "failed", 3, "exit 3"]]}]
    replayed = [replay_gangs(parse_job(JOB), read_state(start + ends))["worker"].gang.tasks for ends in (old, new)]
    for tasks in replayed:
        assert [(t.state, t.exit_status, t.diagnostics, t.finished_at) for t in tasks] == [
            (TaskState.SUCCEEDED, 0, "", 9.0), (TaskState.RUNNING, None, "", None),
            (TaskState.FAILED, 3, "exit 3", 9.0)]
    assert task_endings(old) == task_endings(new)


def test_endings_of_another_attempt_change_nothing():
    start = [{"t": 0.0, "kind": "am_started", "am_attempt": 1, "app_id": "app_0001", "job": "j"},
             {"t": 0.0, "kind": "gang_attempt", "gang": "worker", "attempt": 1, "waiting_since": 0.0},
             launched(1)]
    stale = {"t": 9.0, "kind": "tasks_finished", "gang": "worker", "attempt": 2, "finished_at": 9.0,
             "tasks": [["worker", 0, "failed", 1, ""]]}
    (task,) = replay_gangs(parse_job(JOB), read_state(start + [stale]))["worker"].gang.tasks
    assert task.state is TaskState.RUNNING
