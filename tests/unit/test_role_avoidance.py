"""The nodes where a role failed because of the node are avoided (qizhi's
amSkipLocalTriedResource) only while the gang can still start without them: on a small
cluster the avoidance alone must never leave a restarted gang waiting for good."""
from __future__ import annotations

import pytest

from gangmaster.am.core.cluster_tracker import ClusterTracker
from gangmaster.am.core.journal import JOURNAL_FILE, read_records, read_state
from gangmaster.am.ops.run_report import RecordedRun, format_report
from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.spec.jobspec import parse_job
from gangmaster.am.spec.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.scenario import Scenario
from gangmaster.tools.rmsim.simulation import Simulation
from job_texts import one_role_job
from sim_cluster import nodes

JOB = one_role_job(instances=3, duration=60, role_gangmaster="maxInstancesPerNode: 1", retry=2)
# n0 is lost while the first attempt runs (its task ends with NODE_LOST) and comes back at once
NODE_BLIP = "events: [{at: 30, do: lose_node, host: n0}, {at: 31, do: restore_node, host: n0}]"


def test_a_gang_that_needs_the_node_where_its_role_failed_is_placed_there_again(tmp_path):
    lines = []
    runs = SimulatedRuns(nodes(3), AMSettings(max_virtual_time_s=86400), scenario=Scenario.parse(NODE_BLIP),
                         echo=lines.append)
    core = runs.sim.core
    checked = []   # free + used = capacity at every grant and end, n0's loss and return included
    core.subscribe(lambda event: checked.append(core.check_invariants()),
                   kinds=("container_allocated", "container_finished"))
    run = runs.submit(parse_job(JOB), tmp_path)
    assert runs.run()
    first, second = run.result.history()
    assert first.outcome == "failed" and "status -110" in first.reason     # NODE_LOST
    assert run.outcome == "succeeded", run.result.reason
    assert "n0" in {task.host for task in second.tasks}
    assert len(checked) == 12   # two attempts: three grants and three ends each
    assert runs.sim.now() < 600
    said = ("role worker is placed again on the nodes where it failed: avoiding them would leave the gang unable "
            "to start even on the idle cluster")
    assert any(f"gang worker: {said}" in line for line in lines)
    # the run report says it too, whether read from the AM or, after the run, from its journal
    recorded = RecordedRun.of(run.job, read_state(read_records(tmp_path / JOURNAL_FILE)))
    for result in (run.result, recorded):
        assert result.avoidance_drops() == [("worker", 1, "worker")]
        assert f"  gang worker after attempt 1: {said}" in format_report(result).splitlines()


def test_with_a_node_to_spare_the_restarted_gang_still_avoids_the_node(tmp_path):
    runs = SimulatedRuns(nodes(4), AMSettings(max_virtual_time_s=86400), scenario=Scenario.parse(NODE_BLIP))
    run = runs.submit(parse_job(JOB), tmp_path)
    assert runs.run() and run.outcome == "succeeded"
    assert run.result.avoidance_drops() == [] and "placed again" not in format_report(run.result)
    first, second = run.result.history()
    assert "n0" in {task.host for task in first.tasks}
    assert "n0" not in {task.host for task in second.tasks}


def role(name: str, instances: int, cap: int | None = 1) -> RoleSpec:
    return RoleSpec(name=name, instances=instances, cpu=1, memory_mb=1024, gpus=1, ports={}, commands=("true",),
                    completion=Completion(), task_retry_count=0, retry=RetryPolicy(), max_instances_per_node=cap)


@pytest.mark.parametrize("gang, failed, skip, forgiven, still_avoided", [
    # 3 nodes, one instance of a role per node
    ((role("w", 2),), [("w", "n0")], True, [], {("w", "n0")}),                  # n1, n2 hold it: avoided
    ((role("w", 3),), [("w", "n0")], True, ["w"], set()),                      # needs n0: forgiven
    ((role("w", 2),), [("w", "n0"), ("w", "n1")], True, ["w"], set()),         # 1 node left for 2
    ((role("w", 1), role("s", 2)), [("w", "n0"), ("s", "n1")], True, [], {("w", "n0"), ("s", "n1")}),
    ((role("w", 2), role("s", 3)), [("w", "n0"), ("s", "n1")], True, ["s"], {("w", "n0")}),
    ((role("w", 3), role("s", 3)), [("w", "n0"), ("s", "n0")], True, ["w", "s"], set()),
    ((role("w", 3), role("o", 3)), [("w", "n0")], True, ["w"], set()),
    ((role("w", 4),), [("w", "n0")], True, [], {("w", "n0")}),                  # never fits anyway: not ours to say
    ((role("w", 3),), [("w", "n0")], False, [], {("w", "n0")}),                 # avoidance off: nothing to drop
])
def test_the_avoidance_is_dropped_exactly_when_the_gang_could_not_start_on_the_idle_cluster(
        gang, failed, skip, forgiven, still_avoided):
    tracker = ClusterTracker(Simulation(nodes(3)).client.cluster_nodes)
    for role_name, host in failed:
        tracker.mark_failed(role_name, host)
    pipeline = SelectionPipeline(SelectionSettings(skip_nodes_where_role_failed=skip))
    assert tracker.keep_placeable(gang, lambda r: pipeline) == forgiven
    view = tracker.view
    assert {(r, view.hosts[i]) for r, f in view.role_failed.items() for i in f.nonzero()[0]} == still_avoided
    tracker._rebuild()   # read afresh from the RM (a node it never knew): the forgiven stay forgiven
    assert {(r, view.hosts[i]) for r, f in tracker.view.role_failed.items() for i in f.nonzero()[0]} \
        == still_avoided
