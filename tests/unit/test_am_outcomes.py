"""How a job ends when something outside its own tasks decides, in virtual time and
through the public entry points (the SimulatedRuns driver and `gangmaster run`):

* a task the RM cannot launch fails its attempt (never wedges the AM);
* the RM ends the application (kill_app, AM attempts used up): KILLED / FAILED with
  the RM's reason, no task left "running";
* a job that can never progress stops at once with why it waits, instead of
  heartbeating through a virtual week."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.protocol.rm_protocol import InvalidRequest
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.nodemanager import SimulatedNodeManager
from gangmaster.tools.rmsim.scenario import Scenario
from job_texts import one_role_job
from sim_cluster import PORTS, nodes

REPO = Path(__file__).resolve().parents[2]
MPI_JOB = REPO / "conf" / "jobs" / "mpi-allreduce.yaml"


def job(instances: int = 2, retry: int = 0, command: str = "train", duration: float = 60, label: str = "",
        name: str = "j") -> str:
    return one_role_job(name, instances, command=command, duration=duration, retry=retry,
                        role_gangmaster=f"nodeLabel: {label}" if label else "")


def gangmaster(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gangmaster.tools.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


# ------------------------------------------------------------- launch failures
class RefusingNodeManager(SimulatedNodeManager):
    """A NodeManager whose ``exec`` refuses commands containing ``refuse`` (as the live one
    refuses a command over 128 KiB) in the first ``attempts`` gang attempts."""

    def __init__(self, sim, attempts=(1, 2, 3)):
        super().__init__(sim.loop, sim.workload, sim.barrier)
        self.attempts = attempts

    def launch(self, rec, ctx):
        env = ctx.env_dict
        if "refuse" in " ".join(ctx.command) and int(env["GANGMASTER_ATTEMPT"]) in self.attempts:
            raise InvalidRequest("launch.command: cannot start '/bin/sh': Argument list too long")
        super().launch(rec, ctx)


def runs_with(node_manager_attempts, specs, **kwargs) -> SimulatedRuns:
    runs = SimulatedRuns(specs, **kwargs)
    core = runs.sim.core
    core.node_manager = RefusingNodeManager(runs.sim, node_manager_attempts)
    core.node_manager.bind(core)
    return runs


def test_a_task_that_cannot_be_launched_fails_the_job_with_the_reason(tmp_path):
    runs = runs_with((1, 2, 3), nodes(2))
    run = runs.submit(parse_job(job(retry=1, command="refuse")), tmp_path)
    assert runs.run()
    assert run.outcome == "failed"
    assert "attempt 2 of 2 failed: task worker[0] could not be launched on" in run.am.reason
    assert "Argument list too long" in run.am.reason
    first, second = run.am.history()
    assert (first.outcome, second.outcome) == ("failed", "failed")
    assert all(t.state.value != "running" for a in (first, second) for t in a.tasks)
    runs.sim.core.check_invariants()
    assert not runs.sim.core.apps[run.app_id].containers      # every container given back


def test_a_launch_failure_restarts_the_gang_as_a_new_attempt_with_a_barrier(tmp_path, coordinated_runs):
    runs_class, _server = coordinated_runs
    runs = runs_class(nodes(2))
    core = runs.sim.core
    core.node_manager = RefusingNodeManager(runs.sim, (1,))
    core.node_manager.bind(core)
    run = runs.submit(parse_job(job(instances=3, retry=2, command="refuse")), tmp_path)
    assert runs.run()
    assert run.outcome == "succeeded"
    first, second = run.am.history()
    assert (first.attempt, first.outcome, second.attempt, second.outcome) == (1, "failed", 2, "succeeded")
    assert "could not be launched" in first.reason
    assert "could not be launched" in (tmp_path / "am-1.log").read_text()


# ------------------------------------------------------ the RM ends the application
def test_kill_app_reports_killed_with_the_rm_reason(tmp_path):
    scenario = tmp_path / "kill.yaml"
    scenario.write_text("events:\n  - {at: 40, do: kill_app, app: app_0001, diagnostics: \"operator said so\"}\n")
    result = gangmaster("run", MPI_JOB, "--scenario", scenario, "--work-dir", tmp_path / "run", "--quiet")
    assert result.returncode == 1
    assert "job mpi-allreduce (app_0001): KILLED - operator said so" in result.stdout
    assert " running" not in result.stdout                       # no task left "running"
    assert "max_virtual_time_s" not in result.stderr
    report = json.loads(gangmaster("run", MPI_JOB, "--scenario", scenario, "--work-dir", tmp_path / "run2",
                                   "--json").stdout)
    assert report[0]["outcome"] == "killed" and report[0]["reason"] == "operator said so"
    tasks = [t for a in report[0]["attempts"] for t in a["tasks"]]
    assert tasks and all(t["state"] == "stopped" for t in tasks)


def test_am_attempts_used_up_fail_the_job_with_the_rm_reason(tmp_path):
    scenario = Scenario.parse("events: [{at: 10, do: kill_am, app: app_0001}, {at: 20, do: kill_am, app: app_0001},"
                              " {at: 30, do: kill_am, app: app_0001}]")
    runs = SimulatedRuns(nodes(2), AMSettings(max_am_attempts=3), scenario=scenario)
    run = runs.submit(parse_job(job(duration=100)), tmp_path)
    assert runs.run()
    assert run.outcome == "failed"
    assert run.result.reason == "attempt 3 of 3 failed: AM process killed (scenario)"
    assert all(t.state.value == "stopped" for a in run.result.history() for t in a.tasks)


def test_an_app_killed_between_two_am_attempts_is_reported_killed(tmp_path):
    # the AM dies at 10; the driver starts the next one 2 s later, but the app is killed at 11
    scenario = Scenario.parse("events: [{at: 10, do: kill_am, app: app_0001}, {at: 11, do: kill_app, app: app_0001}]")
    runs = SimulatedRuns(nodes(2), scenario=scenario)
    run = runs.submit(parse_job(job(duration=100)), tmp_path)
    assert runs.run()
    assert run.outcome == "killed" and run.result.reason == "killed (scenario)"
    assert len(run.ams) == 1


# ------------------------------------------------------ no progress possible
def test_a_job_whose_nodes_are_lost_for_good_fails_at_once_saying_why(tmp_path):
    scenario = Scenario.parse("events: [{at: 0, do: lose_node, host: n0}, {at: 0, do: lose_node, host: n1}]")
    specs = nodes(2, label="nvlink") + [NodeSpec("cpu0", "rack-0", frozenset(), None, None, 65536, 16, 0, PORTS)]
    runs = SimulatedRuns(specs, AMSettings(max_virtual_time_s=86400), scenario=scenario)
    run = runs.submit(parse_job(job(label="nvlink")), tmp_path)
    assert runs.run()
    assert run.outcome == "failed"
    assert "it can make no progress (no task will end and no event is scheduled); gang worker is waiting: " \
        in run.result.reason
    assert ("worker 0/2 placeable, 2 short (2 machine(s) unhealthy, blacklisted or lost [waiting does not help], "
            "1 machine(s) without label nvlink [waiting does not help]); to unblock: 1 more machine(s) like n0, or "
            "restore 1 of the 2 unhealthy/blacklisted machines") in run.result.reason
    assert runs.sim.now() < 60                 # virtual seconds: it did not wait out the day


def test_gangmaster_run_says_why_a_job_can_never_start(tmp_path):
    scenario = tmp_path / "lost.yaml"
    scenario.write_text("events:\n" + "".join(f"  - {{at: 0, do: lose_node, host: dgx1-00{i}}}\n" for i in range(4)))
    day = tmp_path / "day.yaml"
    day.write_text("am:\n  max_virtual_time_s: 86400\n")
    result = gangmaster("run", MPI_JOB, "--scenario", scenario, "--config", day, "--work-dir", tmp_path / "run", "-q")
    assert result.returncode == 1
    assert "job mpi-allreduce (app_0001): FAILED - it can make no progress" in result.stdout
    assert ("worker 0/4 placeable, 4 short (4 machine(s) unhealthy, blacklisted or lost [waiting does not help], "
            "8 machine(s) without label nvlink [waiting does not help])") in result.stdout
    assert "max_virtual_time_s" not in result.stderr


def test_a_gang_restarted_after_its_nodes_died_and_blocked_for_good_fails_at_once(tmp_path):
    scenario = Scenario.parse("events: [{at: 30, do: lose_node, host: n0}, {at: 30, do: lose_node, host: n1}]")
    runs = SimulatedRuns(nodes(2), AMSettings(max_virtual_time_s=86400), scenario=scenario)
    run = runs.submit(parse_job(job(instances=2, retry=3)), tmp_path)
    assert runs.run()
    first, second = run.result.history()
    assert first.outcome == "failed" and "status -110" in first.reason     # NODE_LOST
    assert run.outcome == "failed" and "it can make no progress" in run.result.reason
    assert ("worker 0/2 placeable, 2 short (2 machine(s) unhealthy, blacklisted or lost [waiting does not help]); "
            "to unblock: 1 more machine(s) like n0, or restore 1 of the 2 unhealthy/blacklisted machines") \
        in run.result.reason
    assert runs.sim.now() < 120


@pytest.mark.parametrize("restore_at", [0.5, 3000])
def test_a_node_that_comes_back_later_is_waited_for(tmp_path, restore_at):
    scenario = Scenario.parse(f"events: [{{at: 0, do: lose_node, host: n0}}, {{at: {restore_at}, do: restore_node, "
                              f"host: n0}}]")
    runs = SimulatedRuns(nodes(1), AMSettings(max_virtual_time_s=86400 * 3), scenario=scenario)
    run = runs.submit(parse_job(job(instances=2)), tmp_path)
    assert runs.run()
    assert run.outcome == "succeeded"
    assert run.result.history()[0].started_at >= restore_at


def test_a_job_waiting_for_another_jobs_containers_is_not_stuck(tmp_path):
    runs = SimulatedRuns(nodes(1), AMSettings(max_virtual_time_s=86400))
    first = runs.submit(parse_job(job(instances=4, duration=5000)), tmp_path / "a")
    second = runs.submit(parse_job(job(instances=4, duration=10, name="k")), tmp_path / "b")
    assert runs.run()
    assert (first.outcome, second.outcome) == ("succeeded", "succeeded")
    assert second.result.history()[0].started_at >= first.result.history()[0].ended_at
