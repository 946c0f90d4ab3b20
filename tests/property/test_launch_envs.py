"""launch_envs (a gang's variables sent once, each task's own) against its definition:
every task's whole environment is the shared variables overlaid by its own."""
from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from gangmaster.am.barrier.task_context import attempt_env
from gangmaster.am.spec.jobspec_model import Completion, JobSpec, RetryPolicy, RoleSpec
from gangmaster.am.core.launch_env import PortKinds, identity_env, launch_envs
from gangmaster.am.core.lifecycle import TaskRecord
from gangmaster.selectors.ports import PortRanges

labels = st.dictionaries(st.sampled_from(["http", "ssh", "nccl"]), st.integers(1, 2), max_size=2)
roles = st.lists(st.tuples(st.integers(1, 4), labels), min_size=1, max_size=3)


def _job(shapes) -> JobSpec:
    specs = tuple(RoleSpec(name=f"r{n}", instances=instances, cpu=1, memory_mb=64, gpus=0, ports=ports,
                           commands=("true",), completion=Completion(), task_retry_count=0,
                           retry=RetryPolicy("job", 1)) for n, (instances, ports) in enumerate(shapes))
    return JobSpec(name="j", roles=specs, gangs=(tuple(r.name for r in specs),), retry=RetryPolicy("job", 1),
                   job_retry_count=0, barrier_timeout_s=None, parameters={}, unused=(), source="")


@given(roles, st.integers(1, 3))
def test_each_task_gets_the_shared_variables_and_its_own_and_nothing_is_sent_twice(shapes, attempt):
    job = _job(shapes)
    gang = job.gang_roles(0)
    kinds_of = PortKinds({r.name: r for r in gang})
    tasks, kinds = [], []
    for rank, (role, index) in enumerate((r, i) for r in gang for i in range(r.instances)):
        kinds.append(kinds_of.of(role.name, PortRanges.parse(f"{20000 + 10 * index}-{20009 + 10 * index}")))
        tasks.append(TaskRecord(role.name, index, rank, f"c{rank}", f"h{rank}", (), kinds[-1].named, 0.0))
    barrier = attempt_env("127.0.0.1:1", job.name, "g", attempt, "t", len(tasks))   # what the gang's barrier gives
    shared, own = launch_envs(job, gang, tasks, kinds, barrier)
    assert len(own) == len(tasks)
    if len(tasks) == 1:
        assert shared == ()
    shared = dict(shared)
    for task, kind, mine in zip(tasks, kinds, own):
        assert shared.keys().isdisjoint(mine) or len(tasks) == 1
        env = {**shared, **mine}
        assert identity_env(task.rank, task.role, task.index).items() <= env.items()
        assert dict(kind.pairs).items() <= env.items()
        assert env["GANGMASTER_BARRIER_TOKEN"] == "t" and env["GANGMASTER_ATTEMPT"] == str(attempt)
        assert env["PAI_TASK_ROLE_INSTANCES"].split(",") == [f"{t.role}:{t.index}" for t in tasks]
        assert env[f"PAI_HOST_IP_{task.role}_{task.index}"] == task.host


@given(st.integers(0, 2), st.integers(0, 1), st.sampled_from([0, 250]), st.booleans(), st.booleans(),
       st.sampled_from([{}, {"A": "1"}, {"PAI_JOB_NAME": "base", "GANGMASTER_ATTEMPT": "0", "Z": "2"}]),
       st.sampled_from([{}, {"PAI_TASK_INDEX": "x"}, {"PAI_JOB_NAME": "b"}]))
def test_a_lone_task_gets_the_variables_of_the_general_merge_in_the_same_order(first, others, milli, ported, kept,
                                                                              base, clash):
    """A gang of one task without ports takes launch_envs' fast path: its variables are, name
    for name, value for value and in order, what the general merge gives (base, gang_env,
    the barrier's, the task's own), including names that several parts set."""
    from gangmaster.am.core.launch_env import gang_env, gpu_share_env

    job = _job([(0, {})] * first + [(1, {"http": 1} if ported else {})] + [(2, {})] * others)
    if kept:
        job = replace(job, kept={f"taskRoles.r{first}.extraContainerOptions": {"shmMB": 64}})
    gang = tuple(r for r in job.gang_roles(0) if r.instances < 2)   # one task, after roles of none
    lone = f"r{first}"
    kind = PortKinds({r.name: r for r in gang}).of(lone, PortRanges.parse("20000-20009"))
    task = TaskRecord(lone, 0, 0, "c0", "h0", (), kind.named, 0.0, gpu_milli=milli)
    barrier = {**attempt_env("127.0.0.1:1", job.name, "g", 1, "t", 1), **clash}   # (names the task's own set too)
    shared, (own,) = launch_envs(job, gang, [task], [kind], barrier, "q", base, "u")
    general = {**base, **gang_env(job, gang, [task], [kind], "q", "u"), **barrier,
               **identity_env(0, task.role, 0), **dict(kind.pairs), **gpu_share_env(milli)}
    assert shared == () and list(own.items()) == list(general.items())


def _plain_env(job: JobSpec, gang, tasks, kinds, barrier, queue, base, user) -> list[dict[str, str]]:
    """Each task's whole environment written out from the module's definition, variable by
    variable, with nothing worked out once or shared: the reference the fast paths answer to."""
    from gangmaster.am.core.launch_env import PER_INSTANCE_VARIABLES_UP_TO, gpu_share_env, ports_env

    framework = f"{user}~{job.name}"
    count, total = str(len(job.roles)), str(sum(r.instances for r in job.roles))
    names = ",".join(r.name for r in job.roles)
    gang_vars = {"PAI_JOB_NAME": framework, "PAI_FRAMEWORK_NAME": framework, "PAI_USER_NAME": user,
                 "PAI_USERNAME": user, "PAI_DEFAULT_FS_URI": "", "PAI_VIRTUAL_CLUSTER": queue,
                 "PAI_TASK_ROLE_COUNT": count, "PAI_TASKS_NUM": total, "PAI_JOB_TASK_COUNT": total,
                 "PAI_TASK_ROLES_NUM": count, "PAI_JOB_TASK_ROLE_COUNT": count, "PAI_TASK_ROLE_LIST": names,
                 "PAI_JOB_TASK_ROLE_LIST": names}
    for role in job.roles:
        gang_vars[f"PAI_TASK_ROLE_TASK_COUNT_{role.name}"] = str(role.instances)
        gang_vars[f"PAI_RESOURCE_{role.name}"] = f"{role.gpus},{role.cpu},{role.memory_mb},0"
        gang_vars[f"PAI_MIN_FAILED_TASK_COUNT_{role.name}"] = "1"
        gang_vars[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{role.name}"] = str(role.instances)
    for role in gang:
        gang_vars[f"PAI_TASK_ROLE_{role.name}_HOST_LIST"] = ",".join(
            t.host if k.main is None else f"{t.host}:{k.main}" for t, k in zip(tasks, kinds) if t.role == role.name)
    if len(tasks) <= PER_INSTANCE_VARIABLES_UP_TO:
        for task, kind in zip(tasks, kinds):
            gang_vars[f"PAI_HOST_IP_{task.role}_{task.index}"] = task.host
            for label, ports in kind.listed.items():
                gang_vars[f"PAI_PORT_LIST_{task.role}_{task.index}_{label}"] = ports
                gang_vars[f"PAI_{task.role}_{task.index}_{label}_PORT"] = ports
    gang_vars["PAI_TASK_ROLE_INSTANCES"] = ",".join(f"{t.role}:{t.index}" for t in tasks)
    return [{**base, **gang_vars, **barrier, **identity_env(t.rank, t.role, t.index), **ports_env(k.ports),
             **gpu_share_env(t.gpu_milli)} for t, k in zip(tasks, kinds)]


#: (tasks in the gang, its roles' ports, a share of a GPU for every other task): a lone
#: task (the fast path), a gang of one with ports, two, one past PER_INSTANCE_VARIABLES_UP_TO
#: (no per-instance variables) and story 3's 6,001
GANG_SIZES = [(1, {}, False), (1, {"http": 1}, True), (2, {"ssh": 1, "nccl": 2}, True), (257, {"http": 1}, False),
              (257, {}, True), (6001, {"rpc": 1}, True)]


@pytest.mark.parametrize("size, ports, shares", GANG_SIZES, ids=[f"{n}-{'ported' if p else 'bare'}"
                                                                  for n, p, _ in GANG_SIZES])
def test_every_gang_size_gets_the_plain_environment(size, ports, shares):
    """Gangs of every size, below and above PER_INSTANCE_VARIABLES_UP_TO, give each task
    (shared overlaid by its own) what the plain definition gives it (a gang of 257 crashed
    at launch when the lone task's names were read from per-instance names it did not have)."""
    counts = [1] if size == 1 else [1, (size - 1) // 2, size - 1 - (size - 1) // 2]
    job = _job([(n, ports if number != 1 else {}) for number, n in enumerate(counts)] + [(3, {})])
    job = replace(job, gangs=(job.gangs[0][:-1], job.gangs[0][-1:]))   # the last role in a gang of its own
    gang = job.gang_roles(0)
    kinds_of = PortKinds({r.name: r for r in gang})
    tasks, kinds = [], []
    for rank, (role, index) in enumerate((r, i) for r in gang for i in range(r.instances)):
        kinds.append(kinds_of.of(role.name, PortRanges.parse(f"{20000 + 10 * index}-{20009 + 10 * index}")))
        tasks.append(TaskRecord(role.name, index, rank, f"c{rank}", f"h{rank % 97}", (), kinds[-1].named, 0.0,
                                gpu_milli=250 if shares and rank % 2 else 0))
    barrier = attempt_env("127.0.0.1:1", job.name, "g", 2, "t", len(tasks))
    base = {"A": "1", "PAI_JOB_NAME": "base"}
    shared, own = launch_envs(job, gang, tasks, kinds, barrier, "q", base, "u")
    got = [{**dict(shared), **mine} for mine in own]
    assert got == _plain_env(job, gang, tasks, kinds, barrier, "q", base, "u")
