"""Loading job specs: a real-shaped OpenPAI file, defaults, our keys, the shipped
examples, and the model's derived values (resources, gangs, completion)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gangmaster.am.spec.jobspec import load_job, parse_job
from gangmaster.am.spec.jobspec_model import Completion, RetryPolicy
from gangmaster.conf import conf_path
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.tools.rmsim.workload import RoleBehaviour, TaskBehaviour
from shipped_jobs import JOBS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "jobspec"
OPENPAI = FIXTURES / "openpai-pytorch-ps.yaml"
SELECTORS = ["job-packing", "locality", "random"]


def test_a_real_openpai_v2_file_loads_and_reports_unused_fields():
    spec = load_job(OPENPAI, selectors=SELECTORS)
    assert spec.name == "pytorch_ps_imagenet"
    assert spec.role_names == ("ps", "trainer")
    assert spec.gangs == (("ps", "trainer"),)          # default: one gang of every role
    assert spec.unused == (
        "prerequisites", "secrets", "deployments", "defaults",
        "extras.submitFrom", "extras.gangAllocation", "extras.com.microsoft.pai.runtimeplugin",
        "extras.hivedScheduler",
        "taskRoles.ps.dockerImage", "taskRoles.ps.data", "taskRoles.ps.script",
        "taskRoles.ps.extraContainerOptions",
        "taskRoles.trainer.dockerImage", "taskRoles.trainer.data", "taskRoles.trainer.script",
        "taskRoles.trainer.extraContainerOptions",
    )
    assert spec.kept["taskRoles.ps.dockerImage"] == "torch_image"
    assert spec.kept["extras.hivedScheduler"]["jobPriorityClass"] == "test"
    assert (spec.description, spec.contributor, spec.version) == (
        "parameter-server ResNet training on an image folder", "bob", "1.2")
    trainer = spec.role("trainer")
    assert (trainer.instances, trainer.cpu, trainer.memory_mb, trainer.gpus) == (4, 8, 65536, 2)
    assert trainer.ports == {"grpc": 1, "tensorboard": 1}
    assert trainer.task_retry_count == 1
    assert trainer.completion == Completion(min_failed=1, min_succeeded=None)
    assert spec.role("ps").completion == Completion(1, None)     # -1 means "not by count"
    assert spec.retry == RetryPolicy("job", 3)                   # jobRetryCount 2 + the first


def test_parameters_are_substituted_and_other_references_kept():
    spec = load_job(OPENPAI, selectors=SELECTORS)
    command = spec.role("trainer").commands[1]
    assert "--arch resnet50 --epochs 10 --lr 0.1 --amp=true" in command
    assert "$PAI_WORK_DIR/data_<% $data.name %>" in command        # OpenPAI prerequisite
    assert "--token <% $secrets.storage_token %>" in command        # secret kept verbatim
    assert "<% $parameters" not in "".join(spec.role("ps").commands + spec.role("trainer").commands)


def test_secrets_are_resolved_only_when_given():
    spec = load_job(OPENPAI, secrets={"storage_token": "s3cr3t"}, selectors=SELECTORS)
    assert "--token s3cr3t" in spec.role("trainer").commands[1]


def test_a_missing_secret_is_an_error_when_secrets_are_given():
    from gangmaster.am.spec.jobspec import JobSpecError
    with pytest.raises(JobSpecError) as info:
        load_job(OPENPAI, secrets={}, selectors=SELECTORS)
    assert info.value.messages == [
        f"{OPENPAI}: taskRoles.trainer.commands[1]: expected a reference to a defined secret "
        '(defined: none), got "$secrets.storage_token"']


MINIMAL = """
protocolVersion: "2"
name: tiny
type: job
taskRoles:
  main:
    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
    commands: [run]
"""


def test_openpai_defaults():
    spec = parse_job(MINIMAL, selectors=SELECTORS)
    role = spec.role("main")
    assert role.instances == 1
    assert role.ports == {} and role.port_count == 0
    assert role.completion == Completion(min_failed=1, min_succeeded=None)
    assert role.task_retry_count == 0
    assert spec.job_retry_count == 0 and spec.retry == RetryPolicy("job", 1)
    assert spec.unused == () and spec.parameters == {}
    assert spec.barrier_timeout_s is None
    # our keys' defaults
    assert (role.request_ratio, role.max_instances_per_node, role.node_label, role.gpu_types,
            role.selector, role.rack_policy) == (1.0, None, None, (), None, None)
    assert spec.simulation == {}                  # nothing written, nothing carried
    simulated = RoleBehaviour.from_keys(spec.simulation.get(role.name, {}))   # the workload model's defaults
    assert (simulated.duration_s, simulated.exit_code, simulated.failure.attempts) == (60.0, 0, ())


GANGMASTER = """
protocolVersion: 2
name: ps
type: job
jobRetryCount: 1
taskRoles:
  coordinator:
    resourcePerInstance: {cpu: 2, memoryMB: 1024, gpu: 0}
    commands: [c]
  server:
    instances: 3
    taskRetryCount: 4
    resourcePerInstance: {cpu: 8, memoryMB: 4096, gpu: 0, ports: {grpc: 2}}
    commands: [s]
    gangmaster: {requestRatio: 0.5, maxInstancesPerNode: 1, rackPolicy: spread}
  worker:
    instances: 6
    resourcePerInstance: {cpu: 10, memoryMB: 8192, gpu: 2}
    commands: [w]
    completion: {minSucceededInstances: 2, minFailedInstances: null}
    gangmaster:
      requestRatio: 0.7
      maxInstancesPerNode: 2
      gpuTypes: V100          # a single string is a list of one
      simulatedDurationSeconds: 5
      failOnAttempts: [1]
      failInstance: 3
      failExitCode: 137
gangmaster:
  gangs: [[worker, server], [coordinator]]
  nodeLabel: fast             # a role key at job level: every role's default
  selector: locality
  simulatedDurationSeconds: 20
  barrierTimeoutSeconds: 30
"""


def test_gangmaster_keys_and_job_level_defaults():
    spec = parse_job(GANGMASTER, selectors=SELECTORS)
    server, worker, coordinator = spec.role("server"), spec.role("worker"), spec.role("coordinator")
    assert spec.gangs == (("worker", "server"), ("coordinator",))
    assert [r.name for r in spec.gang_roles(0)] == ["worker", "server"]
    assert spec.gang_of("coordinator") == 1 and spec.gang_of("server") == 0
    assert spec.barrier_timeout_s == 30.0
    assert {r.node_label for r in spec.roles} == {"fast"}
    assert {r.selector for r in spec.roles} == {"locality"}
    assert spec.simulation == {   # carried by the names the file uses, for the simulator
        "coordinator": {"simulatedDurationSeconds": 20.0}, "server": {"simulatedDurationSeconds": 20.0},
        "worker": {"simulatedDurationSeconds": 5.0, "failOnAttempts": (1,), "failInstance": 3,
                   "failExitCode": 137}}
    assert (server.request_ratio, server.max_instances_per_node, server.rack_policy) == (0.5, 1, "spread")
    assert worker.gpu_types == ("V100",)
    assert worker.completion == Completion(min_failed=None, min_succeeded=2)
    assert spec.retry == RetryPolicy("job", 2)
    assert {r.retry for r in spec.roles} == {RetryPolicy("job", 2)}


def test_role_retry_scope_takes_attempts_from_task_retry_count():
    spec = parse_job(GANGMASTER.replace("  barrierTimeoutSeconds: 30",
                                        "  barrierTimeoutSeconds: 30\n  retryScope: role"),
                     selectors=SELECTORS)
    assert spec.role("server").retry == RetryPolicy("role", 5)
    assert spec.role("worker").retry == RetryPolicy("role", 1)
    spec = parse_job(GANGMASTER.replace("  barrierTimeoutSeconds: 30",
                                        "  retryScope: role\n  attempts: 3"), selectors=SELECTORS)
    assert {r.retry for r in spec.roles} == {RetryPolicy("role", 3)}


def test_planned_and_asked_resources():
    spec = parse_job(GANGMASTER, selectors=SELECTORS)
    server, worker = spec.role("server"), spec.role("worker")
    assert server.planned_resource() == ResourceDescriptor(memory_mb=4096, vcores=8.0, ports=2)
    assert server.ask_resource() == ResourceDescriptor(memory_mb=4096, vcores=4.0, ports=2)
    assert worker.planned_resource() == ResourceDescriptor(memory_mb=8192, vcores=10.0, gpus=2)
    assert worker.ask_resource().vcores == pytest.approx(7.0)
    assert worker.ask_resource().with_(vcores=10.0) == worker.planned_resource()
    assert (spec.total_instances, spec.total_gpus) == (10, 12)


def test_simulated_failure_injection():
    worker = RoleBehaviour.from_keys(parse_job(GANGMASTER, selectors=SELECTORS).simulation["worker"])
    assert worker.task(3, 1) == TaskBehaviour(5.0, 137)
    assert worker.task(3, 2) == TaskBehaviour(5.0, 0)
    assert worker.task(0, 1) == TaskBehaviour(5.0, 0)


# (succeeded by role, failed by role) -> outcome, for the GANGMASTER job:
# coordinator x1 (fail at 1), server x3 (fail at 1), worker x6 (never fail by count,
# succeed at 2).
OUTCOMES = [
    ({}, {}, None),
    ({}, {"server": 1}, "failed"),
    ({}, {"coordinator": 1}, "failed"),
    ({}, {"worker": 5}, None),                       # worker failures never fail the job
    ({"worker": 2}, {}, "succeeded"),                # minSucceededInstances reached
    ({"worker": 2}, {"server": 1}, "failed"),        # failure is checked first
    ({"coordinator": 1, "server": 3, "worker": 1}, {"worker": 4}, None),
    ({"coordinator": 1, "server": 3}, {"worker": 6}, "succeeded"),   # all completed
]


@pytest.mark.parametrize("succeeded,failed,outcome", OUTCOMES)
def test_completion_outcome_follows_openpai(succeeded, failed, outcome):
    spec = parse_job(GANGMASTER, selectors=SELECTORS)
    assert spec.outcome(succeeded, failed) == outcome


def test_role_lookup_errors_name_the_roles():
    spec = parse_job(GANGMASTER, selectors=SELECTORS)
    with pytest.raises(KeyError, match="roles: coordinator, server, worker"):
        spec.role("ps")


EXAMPLES = sorted(conf_path("jobs").glob("*.yaml"))


def test_the_three_example_jobs_ship():
    assert {p.name for p in EXAMPLES} >= {"mpi-allreduce.yaml", "parameter-server.yaml",
                                          "single-gpu.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_jobs_load_with_registered_selectors_and_fit_their_cluster(path):
    spec = load_job(path)                # selectors from the real registry
    assert spec.unused == ()
    assert path.name in JOBS, f"{path.name}: add it to tests/shipped_jobs.py (the cluster it is meant for)"
    nodes = load_cluster_specs(conf_path(f"clusters/{JOBS[path.name][0]}"))
    # A necessary condition, not placement: every role has enough nodes that could
    # hold one instance, counting labels, GPU types and per-node caps.
    for role in spec.roles:
        fitting = [n for n in nodes
                   if (role.node_label is None or role.node_label in n.labels)
                   and (not role.gpu_types or n.gpu_type in role.gpu_types)
                   and n.capacity.gpus >= role.gpus
                   and n.capacity.vcores >= role.ask_vcores
                   and n.capacity.memory_mb >= role.memory_mb]
        per_node = role.max_instances_per_node or role.instances
        assert len(fitting) * per_node >= role.instances, role.name


def test_example_job_shapes():
    mpi = load_job(conf_path("jobs/mpi-allreduce.yaml"))
    assert mpi.gangs == (("worker",),)
    worker = mpi.role("worker")
    assert (worker.instances, worker.gpus) == (4, 1)
    assert "python -m gangmaster.tools.examples.mpi_style_task" in worker.commands[0]
    ps = load_job(conf_path("jobs/parameter-server.yaml"))
    assert ps.gangs == (("coordinator", "server", "worker"),)
    assert ps.role("server").request_ratio == 0.5 and ps.role("worker").request_ratio == 0.7
    assert ps.role("server").max_instances_per_node == 1
    assert ps.role("worker").max_instances_per_node == 2
    single = load_job(conf_path("jobs/single-gpu.yaml"))
    assert single.total_instances == 1 and single.total_gpus == 1


def test_to_dict_is_json_ready():
    spec = parse_job(GANGMASTER, selectors=SELECTORS)
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["gangs"] == [["worker", "server"], ["coordinator"]]
    assert [r["ask_vcores"] for r in data["roles"]] == [2.0, 4.0, pytest.approx(7.0)]
    assert "kept" not in data


def test_specs_are_frozen_and_hashable():
    import dataclasses
    spec = parse_job(GANGMASTER, selectors=SELECTORS)
    again = parse_job(GANGMASTER, selectors=SELECTORS)
    assert spec == again and hash(spec) == hash(again)
    assert {spec.role("worker"): "w"}[again.role("worker")] == "w"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.role("worker").instances = 7
