"""launch_envs (a gang's variables sent once, each task's own) against its definition:
every task's whole environment is the shared variables overlaid by its own."""
from hypothesis import given, strategies as st

from gangmaster.am.context import attempt_env
from gangmaster.am.jobspec_model import Completion, JobSpec, RetryPolicy, RoleSpec
from gangmaster.am.launch_env import PortKinds, identity_env, launch_envs
from gangmaster.am.lifecycle import TaskRecord
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
    from dataclasses import replace

    from gangmaster.am.launch_env import gang_env, gpu_share_env

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
