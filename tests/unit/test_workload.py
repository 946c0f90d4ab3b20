"""The simulator's workload model: a started task is known by its launch environment,
its behaviour comes from its job file's simulation keys, and a container of no known
job follows its GANGMASTER_SIMULATED_* variables or runs until stopped."""
from __future__ import annotations

import pytest

from gangmaster.am.spec.jobspec import parse_job
from gangmaster.protocol.rm_protocol import (AllocateRequest, ApplicationSubmission, ContainerState, InvalidRequest,
                                       LaunchContext, ResourceRequest)
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.tools.rmsim.simulation import Simulation
from gangmaster.tools.rmsim.workload import (RUNS_UNTIL_STOPPED, JobWorkload, TaskBehaviour,
                                             raw_task_env)
from gangmaster.tools.validate_cmd import render, to_json

JOB = """
protocolVersion: 2
name: train-7
type: job
jobRetryCount: 2
taskRoles:
  ps:
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 0}
    commands: [serve]
  worker:
    instances: 3
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 1}
    commands: [train]
    gangmaster: {simulatedDurationSeconds: 5, failOnAttempts: [2], failInstance: 1, failExitCode: 9}
gangmaster: {simulatedExitCode: 4}
"""


def env(role: str, index: int, attempt: int, job: str = "train-7", user: str = "ann") -> dict[str, str]:
    """What the AM sets that tells a task which it is (gangmaster.am.core.launch_env)."""
    return {"PAI_JOB_NAME": f"{user}~{job}", "PAI_CURRENT_TASK_ROLE_NAME": role,
            "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(index), "GANGMASTER_ATTEMPT": str(attempt)}


@pytest.fixture
def workload() -> JobWorkload:
    w = JobWorkload()
    w.add_job(parse_job(JOB))
    return w


@pytest.mark.parametrize("role, index, attempt, expected", [
    ("ps", 0, 1, TaskBehaviour(60.0, 4)),           # the workload model's default duration, the job-level code
    ("worker", 0, 2, TaskBehaviour(5.0, 4)),
    ("worker", 1, 1, TaskBehaviour(5.0, 4)),
    ("worker", 1, 2, TaskBehaviour(5.0, 9)),        # the injected failure: that instance, that attempt
])
def test_a_task_is_known_by_its_launch_environment(workload, role, index, attempt, expected):
    assert workload.task(env(role, index, attempt)) == expected


def test_a_container_of_no_known_job(workload):
    assert workload.task({}) == RUNS_UNTIL_STOPPED
    assert workload.task(env("worker", 0, 1, job="other")) == RUNS_UNTIL_STOPPED
    assert workload.task(env("nobody", 0, 1)) == RUNS_UNTIL_STOPPED
    assert workload.task(raw_task_env(7.5, exit_code=3)) == TaskBehaviour(7.5, 3, joins_barrier=False)
    assert workload.task({"GANGMASTER_SIMULATED_DURATION_S": "2"}) == TaskBehaviour(2.0, 0, joins_barrier=False)


@pytest.mark.parametrize("bad, message", [
    ({"GANGMASTER_SIMULATED_DURATION_S": "soon"}, r"launch.env GANGMASTER_SIMULATED_DURATION_S: expected seconds"),
    ({"GANGMASTER_SIMULATED_DURATION_S": "-1"}, r"GANGMASTER_SIMULATED_DURATION_S: expected seconds within 0\.\."),
    ({"GANGMASTER_SIMULATED_DURATION_S": "inf"}, r"GANGMASTER_SIMULATED_DURATION_S"),
    ({"GANGMASTER_SIMULATED_DURATION_S": "nan"}, r"GANGMASTER_SIMULATED_DURATION_S"),
    ({"GANGMASTER_SIMULATED_DURATION_S": "1", "GANGMASTER_SIMULATED_EXIT_CODE": "x"},
     r"launch.env GANGMASTER_SIMULATED_EXIT_CODE: expected an integer, got 'x'"),
    ({"GANGMASTER_SIMULATED_DURATION_S": "1", "GANGMASTER_SIMULATED_EXIT_CODE": str(2 ** 40)},
     r"GANGMASTER_SIMULATED_EXIT_CODE: expected an exit code within"),
    ({**env("worker", 0, 1), "GANGMASTER_ATTEMPT": "first"}, r"launch.env GANGMASTER_ATTEMPT: expected an integer"),
])
def test_an_environment_the_workload_cannot_read_is_refused_at_start_and_changes_nothing(bad, message):
    sim = Simulation([NodeSpec("n0", "r", frozenset(), "V100", None, 65536, 16, 4, PortRanges.parse("20000-20009"))])
    sim.workload.add_job(parse_job(JOB))
    app = sim.client.submit(ApplicationSubmission("raw"))
    sim.client.register(app)
    (c,) = sim.client.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, R(512, 1)),))).allocated
    with pytest.raises(InvalidRequest, match=message):
        sim.client.start_container(c.container_id, LaunchContext.of(["x"], bad))
    assert sim.client.container_status(c.container_id).state is ContainerState.ALLOCATED
    assert not sim.loop.has_one_shot_calls()


def test_a_raw_container_ends_as_its_environment_says():
    sim = Simulation([NodeSpec("n0", "r", frozenset(), "V100", None, 65536, 16, 4, PortRanges.parse("20000-20009"))])
    app = sim.client.submit(ApplicationSubmission("raw"))
    sim.client.register(app)
    asks = (ResourceRequest(1, R(512, 1), count=2),)
    timed, forever = sim.client.allocate(AllocateRequest(app, 1, asks=asks)).allocated
    sim.client.start_container(timed.container_id, LaunchContext.of(["x"], raw_task_env(12, exit_code=5)))
    sim.client.start_container(forever.container_id, LaunchContext.of(["x"]))
    sim.run_until(11.9)
    assert sim.client.container_status(timed.container_id).state is ContainerState.RUNNING
    sim.run_until(12)
    status = sim.client.container_status(timed.container_id)
    assert (status.state, status.exit_status) == (ContainerState.FAILED, 5)
    sim.run_until(1e6)
    assert sim.client.container_status(forever.container_id).state is ContainerState.RUNNING


def test_two_jobs_of_one_name_must_be_simulated_alike(workload):
    workload.add_job(parse_job(JOB))                                  # the same again: fine
    with pytest.raises(ValueError, match="job 'train-7': another job of that name, simulated differently"):
        workload.add_job(parse_job(JOB.replace("simulatedExitCode: 4", "simulatedExitCode: 5")))


def test_validate_shows_what_the_workload_model_makes_of_the_keys():
    spec = parse_job(JOB, source="job.yaml")
    text = render(spec)
    assert "testing aid: instance 1 exits 9 in attempt(s) 2" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("  ps ")
            or line.startswith("  worker ")}
    assert rows["ps"][-1] == "60" and rows["worker"][-1] == "5"
    worker = next(r for r in to_json(spec)["roles"] if r["name"] == "worker")
    assert (worker["simulated_duration_s"], worker["simulated_exit_code"], worker["simulated_failure"]) == (
        5.0, 4, {"attempts": [2], "instance": 1, "exit_code": 9, "before_barrier": False})
    before = render(parse_job(JOB.replace("failExitCode: 9}", "failExitCode: 9, failBeforeBarrier: true}")))
    assert "testing aid: instance 1 exits 9 at once, before its barrier, in attempt(s) 2" in before



def test_containers_that_exit_at_one_instant_share_one_clock_event_in_start_order():
    sim = Simulation([NodeSpec("n0", "r", frozenset(), "V100", None, 65536, 16, 4, PortRanges.parse("20000-20009"))])
    app = sim.client.submit(ApplicationSubmission("raw"))
    sim.client.register(app)
    cids = [c.container_id for c in sim.client.allocate(AllocateRequest(
        app, 1, asks=(ResourceRequest(1, R(512, 1), count=4),))).allocated]
    pending = sim.loop.pending
    for k, cid in enumerate(reversed(cids)):
        sim.client.start_container(cid, LaunchContext.of(["x"], raw_task_env(10, exit_code=k)))
    assert sim.loop.pending == pending + 1                     # one event for the four exits
    ended = []
    sim.core.subscribe(lambda e: ended.append(e.container_id) if e.kind == "container_finished" else None)
    sim.client.stop_container(cids[0])
    ended.clear()
    sim.run_until(10)
    assert ended == list(reversed(cids[1:]))                   # the order they were started in
    assert [sim.client.container_status(c).exit_status for c in reversed(cids[1:])] == [0, 1, 2]


def test_stopping_every_container_of_an_instant_takes_its_event_off_the_clock():
    sim = Simulation([NodeSpec("n0", "r", frozenset(), "V100", None, 65536, 16, 4, PortRanges.parse("20000-20009"))])
    app = sim.client.submit(ApplicationSubmission("raw"))
    sim.client.register(app)
    cids = [c.container_id for c in sim.client.allocate(AllocateRequest(
        app, 1, asks=(ResourceRequest(1, R(512, 1), count=2),))).allocated]
    for cid in cids:
        sim.client.start_container(cid, LaunchContext.of(["x"], raw_task_env(10)))
    assert sim.loop.has_one_shot_calls()
    sim.client.stop_container(cids[0])
    assert sim.loop.has_one_shot_calls()
    sim.client.stop_container(cids[1])
    assert not sim.loop.has_one_shot_calls()                   # no task will end: nothing left to wait for


def test_a_subscriber_hears_only_the_kinds_it_asked_for():
    sim = Simulation([NodeSpec("n0", "r", frozenset(), "V100", None, 65536, 16, 4, PortRanges.parse("20000-20009"))])
    starts, everything = [], []
    sim.core.subscribe(starts.append, kinds=("container_started",))
    app = sim.client.submit(ApplicationSubmission("raw"))
    sim.client.register(app)
    (c,) = sim.client.allocate(AllocateRequest(app, 1, asks=(ResourceRequest(1, R(512, 1)),))).allocated
    sim.client.start_container(c.container_id, LaunchContext.of(["x"], raw_task_env(1)))
    sim.core.subscribe(everything.append)
    sim.run_until(5)
    assert [(e.kind, e.container_id) for e in starts] == [("container_started", c.container_id)]
    assert [e.kind for e in everything] == ["container_finished"]
