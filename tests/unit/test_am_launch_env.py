"""Every OpenPAI runtime variable the AM gives a task, in OpenPAI's format (see
gangmaster.am.core.launch_env for the list and where OpenPAI sets each one). Captured as
the RM's NodeManager receives them, in virtual time."""
from __future__ import annotations

import getpass
import re

import pytest

from gangmaster.am.spec.jobspec import parse_job
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.tools.job_runner import SimulatedRuns
from gangmaster.tools.rmsim.nodemanager import SimulatedNodeManager

JOB = """
protocolVersion: 2
name: envjob
type: job
taskRoles:
  ps:
    instances: 1
    completion: {minFailedInstances: -1}
    resourcePerInstance: {cpu: 2, memoryMB: 2048, gpu: 0, ports: {http: 1, grpc: 2}}
    commands: [serve]
  worker:
    instances: 3
    completion: {minSucceededInstances: 2}
    extraContainerOptions: {shmMB: 1024}
    resourcePerInstance: {cpu: 4, memoryMB: 4096, gpu: 1, ports: {ssh: 1, model_server: 2}}
    commands: [train]
"""

PORT_LIST = re.compile(r"^\d+(,\d+)*$")
CONTAINER_PORT_LIST = re.compile(r"^([A-Za-z_]\w*:\d+(,\d+)*;)+$")       # label:p,p;label:p;
HOST_LIST = re.compile(r"^[^:,]+:\d+(,[^:,]+:\d+)*$")


class RecordingNodeManager(SimulatedNodeManager):
    def __init__(self, sim):
        super().__init__(sim.loop, sim.workload, sim.barrier)
        self.envs: list[dict[str, str]] = []

    def launch(self, rec, ctx):
        self.envs.append(ctx.env_dict)
        super().launch(rec, ctx)


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    specs = [NodeSpec(f"n{i}", "rack-0", frozenset(), "V100", None, 65536, 16, 4, PortRanges.parse("20000-20099"))
             for i in range(2)]
    runs = SimulatedRuns(specs)
    core = runs.sim.core
    core.node_manager = recorder = RecordingNodeManager(runs.sim)
    recorder.bind(core)
    runs.submit(parse_job(JOB), tmp_path_factory.mktemp("run"))
    assert runs.run()
    by_task = {(e["PAI_CURRENT_TASK_ROLE_NAME"], int(e["PAI_TASK_INDEX"])): e for e in recorder.envs}
    assert sorted(by_task) == [("ps", 0), ("worker", 0), ("worker", 1), ("worker", 2)]
    return by_task


def test_job_and_task_role_variables(envs):
    user = getpass.getuser()
    expected = {
        "PAI_JOB_NAME": f"{user}~envjob", "PAI_FRAMEWORK_NAME": f"{user}~envjob",
        "PAI_USER_NAME": user, "PAI_USERNAME": user, "PAI_DEFAULT_FS_URI": "", "PAI_VIRTUAL_CLUSTER": "default",
        "PAI_TASK_ROLE_COUNT": "2", "PAI_TASK_ROLES_NUM": "2", "PAI_JOB_TASK_ROLE_COUNT": "2",
        "PAI_TASK_ROLE_LIST": "ps,worker", "PAI_JOB_TASK_ROLE_LIST": "ps,worker",
        "PAI_JOB_TASK_COUNT": "4", "PAI_TASKS_NUM": "4",
        "PAI_TASK_ROLE_TASK_COUNT_ps": "1", "PAI_TASK_ROLE_TASK_COUNT_worker": "3",
        "PAI_RESOURCE_ps": "0,2,2048,0", "PAI_RESOURCE_worker": "1,4,4096,1024",      # gpu,cpu,memMB,shmMB
        "PAI_MIN_FAILED_TASK_COUNT_ps": "-1", "PAI_MIN_FAILED_TASK_COUNT_worker": "1",
        "PAI_MIN_SUCCEEDED_TASK_COUNT_ps": "1", "PAI_MIN_SUCCEEDED_TASK_COUNT_worker": "2",
        "PAI_TASK_ROLE_INSTANCES": "ps:0,worker:0,worker:1,worker:2",
    }
    for env in envs.values():
        assert {k: env.get(k) for k in expected} == expected


def test_every_task_knows_every_peer(envs):
    env0 = envs[("ps", 0)]
    for env in envs.values():     # the same in every task of the gang
        for name in [k for k in env0 if k.startswith(("PAI_TASK_ROLE_", "PAI_HOST_IP_", "PAI_PORT_LIST_"))]:
            assert env[name] == env0[name], name
    for (role, index), own in envs.items():
        host = env0[f"PAI_HOST_IP_{role}_{index}"]
        labels = ("http", "grpc") if role == "ps" else ("ssh", "model_server")
        for label in labels:
            ports = env0[f"PAI_PORT_LIST_{role}_{index}_{label}"]
            assert PORT_LIST.match(ports)
            assert env0[f"PAI_{role}_{index}_{label}_PORT"] == ports              # OpenPAI's older name
            assert own[f"PAI_CONTAINER_HOST_{label}_PORT_LIST"] == ports
        main = env0[f"PAI_PORT_LIST_{role}_{index}_{labels[0]}"]                   # http, else the first label
        assert f"{host}:{main}" in env0[f"PAI_TASK_ROLE_{role}_HOST_LIST"].split(",")
    assert HOST_LIST.match(env0["PAI_TASK_ROLE_worker_HOST_LIST"])
    assert len(env0["PAI_TASK_ROLE_worker_HOST_LIST"].split(",")) == 3


def test_each_task_gets_its_own_ports_in_openpai_format(envs):
    ps = envs[("ps", 0)]
    http, grpc = ps["PAI_CONTAINER_HOST_http_PORT_LIST"], ps["PAI_CONTAINER_HOST_grpc_PORT_LIST"]
    assert len(grpc.split(",")) == 2
    assert ps["PAI_CONTAINER_HOST_PORT_LIST"] == f"http:{http};grpc:{grpc};"
    assert ps["PAI_CONTAINER_HOST_PORT"] == ps["PAI_CURRENT_CONTAINER_PORT"] == http
    assert "PAI_CONTAINER_SSH_PORT" not in ps
    for index in range(3):
        w = envs[("worker", index)]
        assert CONTAINER_PORT_LIST.match(w["PAI_CONTAINER_HOST_PORT_LIST"])
        ssh = w["PAI_CONTAINER_HOST_ssh_PORT_LIST"]
        assert w["PAI_CONTAINER_SSH_PORT"] == w["PAI_CONTAINER_HOST_PORT"] == ssh    # no http: the first port
        assert w["PAI_CURRENT_TASK_ROLE_NAME"] == "worker"
        assert w["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] == w["PAI_TASK_INDEX"] == str(index)


def test_what_every_task_has_alike_is_sent_once_and_each_task_brings_only_its_own():
    from gangmaster.am.core.launch_env import NO_PORTS, launch_envs
    from gangmaster.am.core.lifecycle import TaskRecord

    job = parse_job(JOB)
    roles = job.gang_roles(0)
    tasks = [TaskRecord(role, index, rank, f"c{rank}", f"h{rank}", (), {}, 0.0)
             for rank, (role, index) in enumerate([("ps", 0), ("worker", 0), ("worker", 1), ("worker", 2)])]
    barrier = {"GANGMASTER_BARRIER_TOKEN": "t", "GANGMASTER_TASK_COUNT": "4"}
    shared, own = launch_envs(job, roles, tasks, [NO_PORTS] * 4, barrier, base={"PATH": "/bin"})
    shared = dict(shared)
    assert shared["GANGMASTER_BARRIER_TOKEN"] == "t" and shared["PATH"] == "/bin"          # sent once
    assert shared["PAI_TASK_ROLE_worker_HOST_LIST"] == "h1,h2,h3"
    for task, mine in zip(tasks, own):
        assert shared.keys().isdisjoint(mine)                                      # the RM merges without looking
        assert (mine["PAI_CURRENT_TASK_ROLE_NAME"], mine["PAI_TASK_INDEX"], mine["GANGMASTER_TASK_INDEX"]) == \
            (task.role, str(task.index), str(task.rank))
    (alone,) = [tasks[0]]
    nothing, (whole,) = launch_envs(job, roles[:1], [alone], [NO_PORTS], barrier)
    assert nothing == ()                                                            # one task: nothing to share
    assert whole["PAI_TASK_ROLE_ps_HOST_LIST"] == "h0" and whole["GANGMASTER_BARRIER_TOKEN"] == "t"


SHARE_JOB = """
protocolVersion: 2
name: sharejob
type: job
taskRoles:
  nb:
    resourcePerInstance: {cpu: 1, memoryMB: 1024, gpu: 0}
    commands: [notebook]
    gangmaster: {gpuMilli: 125}
"""


def test_a_share_task_is_told_its_share_and_a_whole_gpu_task_is_not(envs, tmp_path):
    """GANGMASTER_GPU_MILLI / _SHARE only where a task holds a share; OpenPAI's GPU count stays
    an integer (0 for a share role). The GPU itself is the NodeManager's to set."""
    specs = [NodeSpec("n0", "rack-0", frozenset(), "V100", None, 65536, 16, 4, PortRanges.parse("20000-20099"))]
    runs = SimulatedRuns(specs)
    core = runs.sim.core
    core.node_manager = recorder = RecordingNodeManager(runs.sim)
    recorder.bind(core)
    runs.submit(parse_job(SHARE_JOB), tmp_path)
    assert runs.run()
    (env,) = recorder.envs
    assert (env["GANGMASTER_GPU_MILLI"], env["GANGMASTER_GPU_SHARE"], env["PAI_RESOURCE_nb"]) == \
        ("125", "0.125", "0,1,1024,0")
    for whole in envs.values():
        assert "GANGMASTER_GPU_MILLI" not in whole and "GANGMASTER_GPU_SHARE" not in whole
