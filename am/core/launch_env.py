"""The environment the AM gives each task: OpenPAI's runtime variables, in OpenPAI's
formats, so a program written for OpenPAI finds its peers, its ports and its folder
the same way here.

OpenPAI (protocol v2) sets them in three places, and so do we:

**Job and task role level** (OpenPAI's REST server; here :func:`gang_env`, the
same for every task of the gang; roles are every role of the job):

=====================================  ================================================
``PAI_JOB_NAME``, ``PAI_FRAMEWORK_NAME``  ``<user>~<job name>`` (OpenPAI's framework name)
``PAI_USER_NAME``, ``PAI_USERNAME``    the user running ``gangmaster``
``PAI_DEFAULT_FS_URI``                 empty (no default file system)
``PAI_VIRTUAL_CLUSTER``                the RM queue of the job
``PAI_TASK_ROLE_COUNT``, ``PAI_TASK_ROLES_NUM``, ``PAI_JOB_TASK_ROLE_COUNT``  number of roles
``PAI_TASK_ROLE_LIST``, ``PAI_JOB_TASK_ROLE_LIST``  the role names, comma separated, in file order
``PAI_JOB_TASK_COUNT``, ``PAI_TASKS_NUM``  number of instances of the job
``PAI_TASK_ROLE_TASK_COUNT_<role>``    instances of the role
``PAI_RESOURCE_<role>``                ``gpu,cpu,memoryMB,shmMB`` (shm 0 unless
                                       ``extraContainerOptions.shmMB``)
``PAI_MIN_FAILED_TASK_COUNT_<role>``   ``minFailedInstances`` (-1: failures never end it)
``PAI_MIN_SUCCEEDED_TASK_COUNT_<role>``  ``minSucceededInstances`` (the role's instances
                                       when not set)
=====================================  ================================================

**Every task of the gang** (OpenPAI's runtime; here :func:`gang_env` too):
``PAI_TASK_ROLE_<role>_HOST_LIST`` (``host:port`` of each instance by index, the port
being its ``http`` port, else its first; the host alone without ports),
``PAI_TASK_ROLE_INSTANCES`` (``role:index`` of every task, comma separated) and, for
gangs of up to :data:`PER_INSTANCE_VARIABLES_UP_TO` tasks, ``PAI_HOST_IP_<role>_<i>``,
``PAI_PORT_LIST_<role>_<i>_<label>`` and its older name ``PAI_<role>_<i>_<label>_PORT``
(comma separated ports).

**The task itself** (:func:`identity_env`, :func:`ports_env`): ``PAI_CURRENT_TASK_ROLE_NAME``,
``PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX``, ``PAI_TASK_INDEX``,
``PAI_CONTAINER_HOST_PORT_LIST`` (``label:port,port;label:port;``, every label
followed by ``;``), ``PAI_CONTAINER_HOST_<label>_PORT_LIST`` (comma separated),
``PAI_CONTAINER_HOST_PORT`` / ``PAI_CURRENT_CONTAINER_PORT`` (the ``http`` port, else
the first) and ``PAI_CONTAINER_SSH_PORT`` (with an ``ssh`` label); and the barrier's
``GANGMASTER_TASK_INDEX`` (its rank), ``GANGMASTER_TASK_ROLE``, ``GANGMASTER_TASK_ROLE_INDEX``
(:func:`gangmaster.am.barrier.task_context.own_env`). ``GANGMASTER_ATTEMPT`` and the rest of what a task
needs to reach its barrier are the gang's (the barrier's
:meth:`~gangmaster.am.barrier.gang_barrier.GangBarrier.attempt_env`).

:func:`launch_envs` puts a gang's launch together: what its tasks share, sent once, and
each task's own variables, from pieces worked out once per shape of gang, role and index,
kind of ports and share of a GPU: a replay launches tens of thousands of gangs of a few
hundred shapes, and a story-3 gang thousands of tasks of a few kinds.

**A share of one GPU** (:func:`gpu_share_env`, a task whose role asks ``gpuMilli``):
``GANGMASTER_GPU_MILLI``, the task's share of its GPU in milli-GPU (250: a quarter), and
``GANGMASTER_GPU_SHARE``, the same as a fraction (``0.25``); the GPU itself is the one in
``CUDA_VISIBLE_DEVICES``. A task holding whole GPUs gets neither. ``PAI_RESOURCE_<role>``
keeps OpenPAI's integer GPU count (0 for a share role: OpenPAI has no fractions).

The NodeManager adds what only it knows (``tools/rmsim/nodemanager.py``): the
container's id, its host's address (``PAI_CONTAINER_HOST_IP``,
``PAI_CURRENT_CONTAINER_IP``), its GPUs (``CUDA_VISIBLE_DEVICES``: a share's one GPU),
and ``PAI_WORK_DIR``, the folder the task's commands start in.
"""
from __future__ import annotations

import functools
import os
import pwd
from typing import Mapping, Sequence

from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.ports import PortRanges

from gangmaster.am.barrier.task_context import own_env
from gangmaster.am.spec.jobspec_model import JobSpec, RoleSpec
from .lifecycle import TaskRecord


def main_port(ports: Mapping[str, tuple[int, ...]]) -> int | None:
    """The port OpenPAI names a task by: its ``http`` port (which OpenPAI always
    reserves), else its first port; None without ports."""
    for listed in (ports.get("http", ()), *ports.values()):
        if listed:
            return listed[0]
    return None


def label_ports(labels: Mapping[str, int], ranges: PortRanges) -> dict[str, tuple[int, ...]]:
    """Hand the container's ports out to the role's port labels, in label order
    (``{ssh: 1, nccl: 2}`` over 20000-20002: ssh=20000, nccl=20001,20002)."""
    ports = list(ranges)
    out: dict[str, tuple[int, ...]] = {}
    at = 0
    for label, count in labels.items():
        out[label] = tuple(ports[at:at + count])
        at += count
    return out


def ports_env(ports: Mapping[str, tuple[int, ...]]) -> dict[str, str]:
    """A task's own port variables (the same for every task holding the same ports)."""
    listed = {label: ",".join(map(str, numbers)) for label, numbers in ports.items()}
    env = {"PAI_CONTAINER_HOST_PORT_LIST": "".join(f"{label}:{numbers};" for label, numbers in listed.items())}
    for label, numbers in listed.items():
        env[f"PAI_CONTAINER_HOST_{label}_PORT_LIST"] = numbers
    main = main_port(ports)
    if main is not None:
        env["PAI_CONTAINER_HOST_PORT"] = env["PAI_CURRENT_CONTAINER_PORT"] = str(main)
    if ports.get("ssh"):
        env["PAI_CONTAINER_SSH_PORT"] = str(ports["ssh"][0])
    return env


class PortKind:
    """The ports of one kind of task (a role's tasks given the same port ranges), worked out
    once: by label (``ports``), each label's first port (``named``: what the barrier and the
    task's record keep), each label's ports as OpenPAI lists them (``listed``, comma
    separated), the port OpenPAI names the task by (``main``, :func:`main_port`) and the
    task's own port variables as launch pairs (``pairs``, :func:`ports_env`). Read only."""

    __slots__ = ("ports", "named", "listed", "main", "pairs")

    def __init__(self, ports: Mapping[str, tuple[int, ...]]):
        self.ports = ports
        self.named = {label: listed[0] for label, listed in ports.items() if listed}
        self.listed = {label: ",".join(map(str, numbers)) for label, numbers in ports.items()}
        self.main = main_port(ports)
        self.pairs = tuple(ports_env(ports).items())


#: The kind of a task of a role without ports.
NO_PORTS = PortKind({})


class PortKinds:
    """The kinds of ports of the tasks of gangs of some roles (:class:`PortKind`): the tasks
    of a role given the same port ranges (most tasks of a big gang: like nodes give their
    lowest free ports) share one, in one gang and across the gangs of the same roles."""

    def __init__(self, roles: Mapping[str, RoleSpec]):
        self.roles = roles
        self._kinds: dict[tuple[str, PortRanges], PortKind] = {}

    def of(self, role: str, ranges: PortRanges) -> PortKind:
        """The kind of a task of ``role`` holding ``ranges``."""
        spec = self.roles[role]
        if not spec.ports:   # most roles name no ports: one kind serves every such task
            return NO_PORTS
        kind = self._kinds.get((role, ranges))
        if kind is None:
            kind = self._kinds[(role, ranges)] = PortKind(label_ports(spec.ports, ranges))
        return kind


#: Gangs up to this many tasks also get the per-instance variables (``PAI_HOST_IP_<role>_<i>``,
#: ``PAI_PORT_LIST_<role>_<i>_<label>``): every task would otherwise carry a variable per task
#: of the gang, which for a 6,000-task gang is 12,000 variables in each of 6,000 environments.
#: Bigger gangs read the same facts from ``PAI_TASK_ROLE_<role>_HOST_LIST``.
PER_INSTANCE_VARIABLES_UP_TO = 256


@functools.lru_cache(maxsize=1024)
def _roles_env(roles: tuple[RoleSpec, ...], queue: str, user: str, shm: tuple[int, ...] | None) -> dict[str, str]:
    """OpenPAI's job and task-role variables but the job's name (the same for every task of
    the job). ``shm``: each role's shared memory (None: 0 for every role). Read only."""
    roles_list = ",".join(role.name for role in roles)
    count = str(len(roles))
    tasks = str(sum(role.instances for role in roles))
    env = {
        "PAI_USER_NAME": user,
        "PAI_USERNAME": user,
        "PAI_DEFAULT_FS_URI": "",
        "PAI_VIRTUAL_CLUSTER": queue,
        "PAI_TASK_ROLE_COUNT": count,
        "PAI_TASK_ROLES_NUM": count,
        "PAI_JOB_TASK_ROLE_COUNT": count,
        "PAI_TASK_ROLE_LIST": roles_list,
        "PAI_JOB_TASK_ROLE_LIST": roles_list,
        "PAI_JOB_TASK_COUNT": tasks,
        "PAI_TASKS_NUM": tasks,
    }
    for number, role in enumerate(roles):
        completion = role.completion
        env[f"PAI_TASK_ROLE_TASK_COUNT_{role.name}"] = str(role.instances)
        env[f"PAI_RESOURCE_{role.name}"] = f"{role.gpus},{role.cpu},{role.memory_mb},{shm[number] if shm else 0}"
        env[f"PAI_MIN_FAILED_TASK_COUNT_{role.name}"] = str(
            -1 if completion.min_failed is None else completion.min_failed)
        env[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{role.name}"] = str(
            role.instances if completion.min_succeeded is None else completion.min_succeeded)
    return env


def _host_ip_name(role: RoleSpec, index: int) -> str:
    """The name of the variable holding the host of ``role``'s instance ``index``."""
    return f"PAI_HOST_IP_{role.name}_{index}"


class _GangShape:
    """What :func:`gang_env` gives every gang of the same roles in a job of the same roles,
    queue and user, worked out once (a replay's jobs of one shape share their roles): the
    job's variables but its name (``job_vars``), and the names of the placement variables.
    A gang's tasks are every instance of its roles, by role in the gang's order, then
    index (rank order), so those names depend on the roles alone."""

    __slots__ = ("job_vars", "host_lists", "per_instance", "host_ips", "port_names", "instances", "first_host_list",
                 "first_host_ip", "lone_own", "_lone_templates")

    def __init__(self, job_roles: tuple[RoleSpec, ...], roles: tuple[RoleSpec, ...], queue: str, user: str,
                 shm: tuple[int, ...] | None):
        self.job_vars = _roles_env(job_roles, queue, user, shm)
        ranks = [(role, index) for role in roles for index in range(role.instances)]
        #: per role: its host list's name and the ranks of its tasks (first, end)
        self.host_lists = []
        rank = 0
        for role in roles:
            self.host_lists.append((f"PAI_TASK_ROLE_{role.name}_HOST_LIST", rank, rank + role.instances))
            rank += role.instances
        self.per_instance = len(ranks) <= PER_INSTANCE_VARIABLES_UP_TO
        #: by rank: the name of its host's variable, and of each label's ports (the current and the older name)
        self.host_ips = [_host_ip_name(role, index) for role, index in ranks] if self.per_instance else []
        self.port_names = [{label: (f"PAI_PORT_LIST_{role.name}_{index}_{label}",
                                    f"PAI_{role.name}_{index}_{label}_PORT") for label in role.ports}
                           for role, index in ranks] if self.per_instance else []
        self.instances = ",".join(f"{role.name}:{index}" for role, index in ranks)
        #: the names of the first task's host variables (a gang of one task has no other); named
        #: from its rank, not read from :attr:`host_ips`, which a gang of more than
        #: PER_INSTANCE_VARIABLES_UP_TO tasks does not have
        self.first_host_list = self.host_lists[0][0] if ranks else ""
        self.first_host_ip = _host_ip_name(*ranks[0]) if ranks else ""
        #: the first task's own variables when it has no ports (:func:`identity_env`, then its ports')
        self.lone_own = {**identity_env(0, ranks[0][0].name, ranks[0][1]), **dict(NO_PORTS.pairs)} if ranks else {}
        self._lone_templates: dict[tuple, dict[str, str] | None] = {}

    def lone_template(self, base: Mapping[str, str], barrier_names: tuple[str, ...]) -> dict[str, str] | None:
        """The whole environment of a lone task without ports (the general merge: ``base``,
        the job's name, :attr:`job_vars`, its host, the instances, the barrier's, its own),
        with every name in its place and the values that are the same for every such task:
        a task's environment is a copy with the job's name, the host and the barrier's
        values (``barrier_names``) set in. Worked out once per base and barrier names; None
        when a name set per task is set again by a later part of the merge (the copy would
        keep the wrong value: merge the parts instead)."""
        key = (tuple(base.items()), barrier_names)
        template = self._lone_templates.get(key, False)
        if template is False:
            per_task = ("PAI_JOB_NAME", "PAI_FRAMEWORK_NAME", self.first_host_list, self.first_host_ip, *barrier_names)
            template = {**base, **dict.fromkeys(per_task[:2], ""), **self.job_vars,
                        **dict.fromkeys(per_task[2:4], ""), "PAI_TASK_ROLE_INSTANCES": self.instances,
                        **dict.fromkeys(barrier_names, ""), **self.lone_own}
            later = [(per_task[:2], (*self.job_vars, self.first_host_list, self.first_host_ip,
                                    "PAI_TASK_ROLE_INSTANCES", *barrier_names, *self.lone_own)),
                     (per_task[2:4], ("PAI_TASK_ROLE_INSTANCES", *barrier_names, *self.lone_own)),
                     (barrier_names, tuple(self.lone_own))]
            if any(not set(names).isdisjoint(after) for names, after in later):
                template = None
            self._lone_templates[key] = template
        return template


_gang_shape = functools.lru_cache(maxsize=1024)(_GangShape)


def gang_env(job: JobSpec, roles: tuple[RoleSpec, ...], tasks: Sequence[TaskRecord], kinds: Sequence[PortKind],
             queue: str = "default", user: str | None = None) -> dict[str, str]:
    """Every variable that is the same for all tasks of the gang of ``roles`` (computed once):
    ``tasks`` are every instance of the roles, by rank, ``kinds`` their ports."""
    user = user or current_user()
    shape = _shape_of(job, roles, queue, user)
    framework = f"{user}~{job.name}"
    env = {"PAI_JOB_NAME": framework, "PAI_FRAMEWORK_NAME": framework}
    env.update(shape.job_vars)
    if len(tasks) == 1:   # most gangs
        host, kind = tasks[0].host, kinds[0]
        env[shape.first_host_list] = host if kind.main is None else f"{host}:{kind.main}"
        env[shape.first_host_ip] = host
        if kind.listed:
            _port_lists(env, shape.port_names[0], kind.listed)
    else:
        hosts = [t.host if k.main is None else f"{t.host}:{k.main}" for t, k in zip(tasks, kinds)]
        for host_list, first, end in shape.host_lists:
            env[host_list] = ",".join(hosts[first:end])
            if shape.per_instance:
                host_ips, port_names = shape.host_ips, shape.port_names
                for rank in range(first, end):
                    env[host_ips[rank]] = tasks[rank].host
                    if kinds[rank].listed:
                        _port_lists(env, port_names[rank], kinds[rank].listed)
    env["PAI_TASK_ROLE_INSTANCES"] = shape.instances
    return env


def _shape_of(job: JobSpec, roles: tuple[RoleSpec, ...], queue: str, user: str) -> _GangShape:
    return _gang_shape(job.roles, roles, queue, user, tuple(_shm_mb(job, role) for role in job.roles)
                       if job.kept else None)


def _port_lists(env: dict[str, str], names: Mapping[str, tuple[str, str]], listed: Mapping[str, str]) -> None:
    """A task's ports, label by label, as every task of its gang sees them."""
    for label, ports in listed.items():
        name, older_name = names[label]
        env[name] = env[older_name] = ports


def launch_envs(job: JobSpec, roles: tuple[RoleSpec, ...], tasks: Sequence[TaskRecord], kinds: Sequence[PortKind],
                barrier_env: Mapping[str, str], queue: str = "default",
                base: Mapping[str, str] | None = None,
                user: str | None = None) -> tuple[tuple[tuple[str, str], ...], list[dict[str, str]]]:
    """Every task's whole environment: what all tasks of the gang share, as launch pairs
    (sent once: ``base``, then :func:`gang_env`, then ``barrier_env``, what the gang's
    barrier gives every task), and each task's own, by rank (:func:`identity_env`, its
    ports, its share of a GPU), which wins, as a mapping of its own in launch order (a
    launch sends its items as they are and reads it by name:
    :meth:`~gangmaster.protocol.rm_protocol.LaunchContext.of_variables`). A gang of one task
    shares nothing: its own variables are its whole environment.

    A gang has thousands of tasks and few kinds of them: a task's own pairs are put together
    from pairs worked out once per role and index, per kind of ports and per share.

    Most gangs are one task without ports: its variables are a copy of its shape's
    (:meth:`_GangShape.lone_template`) with the job's, the host's and the barrier's values set
    in, the same variables in the same order as the general merge's (tests/property/test_launch_envs.py
    holds the two to it); where the template cannot say it (a name set twice), the general merge does."""
    if len(tasks) == 1 and not kinds[0].listed:
        user = user or current_user()
        shape = _shape_of(job, roles, queue, user)
        template = shape.lone_template(base or {}, tuple(barrier_env))
        if template is not None:   # (else a name is set twice in the merge: the general one below)
            task = tasks[0]
            env = template.copy()
            env["PAI_JOB_NAME"] = env["PAI_FRAMEWORK_NAME"] = f"{user}~{job.name}"
            env[shape.first_host_list] = env[shape.first_host_ip] = task.host   # (no ports: the host alone)
            env.update(barrier_env)
            if task.gpu_milli:
                env.update(gpu_share_env(task.gpu_milli))
            return (), [env]
    shared = gang_env(job, roles, tasks, kinds, queue, user)
    if base:
        shared = {**base, **shared}
    shared.update(barrier_env)
    if len(tasks) == 1:
        task = tasks[0]
        shared.update(identity_env(task.rank, task.role, task.index))
        shared.update(kinds[0].pairs)
        if task.gpu_milli:
            shared.update(gpu_share_env(task.gpu_milli))
        return (), [shared]
    own = []
    for task, kind in zip(tasks, kinds):
        pairs = _identity_pairs(task.rank, task.role, task.index) + kind.pairs
        own.append(dict(pairs + _share_pairs(task.gpu_milli) if task.gpu_milli else pairs))
    return tuple(shared.items()), own


@functools.lru_cache(maxsize=4096)
def identity_env(rank: int, role: str, index: int) -> dict[str, str]:
    """The variables that say which task this is: OpenPAI's (role, index in the role) and
    the barrier's (:func:`~gangmaster.am.barrier.task_context.own_env`, rank too). One mapping per task
    of a shape (a replay's tasks are mostly instance 0 of a few role names); read only:
    merge it."""
    text = str(index)
    return {"PAI_CURRENT_TASK_ROLE_NAME": role, "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": text,
            "PAI_TASK_INDEX": text, **own_env(rank, role, index)}


@functools.lru_cache(maxsize=8192)
def _identity_pairs(rank: int, role: str, index: int) -> tuple[tuple[str, str], ...]:
    return tuple(identity_env(rank, role, index).items())


@functools.lru_cache(maxsize=1024)
def gpu_share_env(milli: int) -> dict[str, str]:
    """A task's share of its one GPU, ``milli`` milli-GPU (0: whole GPUs: nothing): the
    program sizes its memory and batch by it (the GPU is not partitioned for it). Read only."""
    if not milli:
        return {}
    return {"GANGMASTER_GPU_MILLI": str(milli), "GANGMASTER_GPU_SHARE": f"{milli / GPU_MILLI:g}"}


@functools.lru_cache(maxsize=1024)
def _share_pairs(milli: int) -> tuple[tuple[str, str], ...]:
    return tuple(gpu_share_env(milli).items())


@functools.lru_cache(maxsize=1)
def current_user() -> str:
    """Who runs this process (OpenPAI's submitting user), or "unknown" when the system cannot say.
    As :func:`getpass.getuser`: the login variables first, then the password database. The
    answer is kept for the process (a replay launches tens of thousands of gangs, and each
    missing login variable costs a raised and caught KeyError)."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        user = os.environ.get(name)
        if user:
            return user
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, OSError):
        return "unknown"


def _shm_mb(job: JobSpec, role: RoleSpec) -> int:
    """``extraContainerOptions.shmMB`` of the role (0 when not given, as OpenPAI reports it)."""
    options = job.kept.get(f"taskRoles.{role.name}.extraContainerOptions")
    shm = options.get("shmMB", 0) if isinstance(options, Mapping) else 0
    return shm if isinstance(shm, int) and not isinstance(shm, bool) else 0
