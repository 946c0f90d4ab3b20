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
the first) and ``PAI_CONTAINER_SSH_PORT`` (with an ``ssh`` label); ``GANGMASTER_ATTEMPT``.

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
from operator import attrgetter, itemgetter
from typing import Callable, Mapping, Sequence

from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.values import value

from .jobspec_model import JobSpec, RoleSpec


@value
class PlacedTask:
    """One instance as launched: enough to tell every other task where it is."""

    role: str
    index: int
    host: str
    ports: Mapping[str, tuple[int, ...]]   # label -> the ports with that label

    @property
    def main_port(self) -> int | None:
        """The port OpenPAI names the task by (see :func:`main_port`)."""
        return main_port(self.ports)


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


class PortKinds:
    """The ports of a gang's tasks, by kind: the tasks of a role given the same port
    ranges (most tasks of a big gang: like nodes give their lowest free ports) share
    one labelled mapping, one mapping of each label's first port (what the barrier and
    the task's record keep) and one set of the task's own port variables
    (:func:`ports_env`), worked out once. They are read only."""

    def __init__(self, roles: Mapping[str, RoleSpec]):
        self.roles = roles
        self._kinds: dict[tuple[str, PortRanges], tuple[dict, dict, dict]] = {}

    def of(self, role: str, ranges: PortRanges) -> tuple[dict[str, tuple[int, ...]], dict[str, int], dict[str, str]]:
        """``(ports by label, first port by label, own port variables)`` of a task of ``role``
        holding ``ranges``."""
        spec = self.roles[role]
        if not spec.ports:   # most roles name no ports: one kind serves every such task
            return _NO_PORTS_KIND
        kind = self._kinds.get((role, ranges))
        if kind is None:
            ports = label_ports(spec.ports, ranges)
            named = {label: listed[0] for label, listed in ports.items() if listed}
            kind = self._kinds[(role, ranges)] = (ports, named, ports_env(ports))
        return kind


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


#: The kind of a task of a role without ports (see :meth:`PortKinds.of`).
_NO_PORTS_KIND: tuple[dict, dict, dict] = ({}, {}, ports_env({}))

#: Gangs up to this many tasks also get the per-instance variables (``PAI_HOST_IP_<role>_<i>``,
#: ``PAI_PORT_LIST_<role>_<i>_<label>``): every task would otherwise carry a variable per task
#: of the gang, which for a 6,000-task gang is 12,000 variables in each of 6,000 environments.
#: Bigger gangs read the same facts from ``PAI_TASK_ROLE_<role>_HOST_LIST``.
PER_INSTANCE_VARIABLES_UP_TO = 256


def job_env(job: JobSpec, queue: str, user: str | None = None) -> dict[str, str]:
    """OpenPAI's job and task-role variables (the same for every task of the job)."""
    user = user or current_user()
    framework = f"{user}~{job.name}"
    env = {"PAI_JOB_NAME": framework, "PAI_FRAMEWORK_NAME": framework}
    shm = tuple(_shm_mb(job, role) for role in job.roles) if job.kept else None
    env.update(_roles_env(job.roles, queue, user, shm))
    return env


@functools.lru_cache(maxsize=1024)
def _roles_env(roles: tuple[RoleSpec, ...], queue: str, user: str, shm: tuple[int, ...] | None) -> dict[str, str]:
    """The variables of :func:`job_env` but the job's name: worked out once per set of roles
    (a replay's jobs of one shape share their roles). ``shm``: each role's shared memory
    (None: 0 for every role). Read only: the caller copies it."""
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


def gang_env(job: JobSpec, tasks: Sequence[PlacedTask], attempt: int, queue: str = "default",
             user: str | None = None) -> dict[str, str]:
    """Every variable that is the same for all tasks of the gang (computed once)."""
    env = job_env(job, queue, user)
    env["GANGMASTER_ATTEMPT"] = str(attempt)
    per_instance = len(tasks) <= PER_INSTANCE_VARIABLES_UP_TO
    by_role: dict[str, list[PlacedTask]] = {}
    for t in tasks:
        by_role.setdefault(t.role, []).append(t)
    instances = []
    for role, of_role in by_role.items():
        if len(of_role) > 1:
            of_role.sort(key=_by_index)
        hosts = []
        for t in of_role:
            instances.append(f"{role}:{t.index}")
            port = main_port(t.ports) if t.ports else None
            hosts.append(t.host if port is None else f"{t.host}:{port}")
        env[f"PAI_TASK_ROLE_{role}_HOST_LIST"] = ",".join(hosts)
        if per_instance:
            for t in of_role:
                env[f"PAI_HOST_IP_{role}_{t.index}"] = t.host
                for label, ports in t.ports.items():
                    listed = ",".join(map(str, ports))
                    env[f"PAI_PORT_LIST_{role}_{t.index}_{label}"] = listed
                    env[f"PAI_{role}_{t.index}_{label}_PORT"] = listed
    env["PAI_TASK_ROLE_INSTANCES"] = ",".join(instances)
    return env


_by_index = attrgetter("index")


@functools.lru_cache(maxsize=4096)
def identity_env(role: str, index: int) -> dict[str, str]:
    """The variables that say which task this is. One mapping per task of a role (a
    replay's tasks are mostly instance 0 of a few role names); read only: merge it."""
    text = str(index)
    return {"PAI_CURRENT_TASK_ROLE_NAME": role, "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": text,
            "PAI_TASK_INDEX": text}


def gpu_share_env(resource: ResourceDescriptor) -> dict[str, str]:
    """A task's share of its one GPU, for a task that holds a share (else nothing): the
    program sizes its memory and batch by it (the GPU is not partitioned for it)."""
    if not resource.gpu_milli:
        return {}
    return {"GANGMASTER_GPU_MILLI": str(resource.gpu_milli), "GANGMASTER_GPU_SHARE": f"{resource.gpu_share:g}"}


def split_alike(envs: Sequence[Mapping[str, str]]) -> tuple[dict[str, str], list[tuple[tuple[str, str], ...]]]:
    """Tasks' own variables split into those every task has alike (sent once for the gang:
    the barrier's address and token, the attempt…) and, per task, the rest as launch pairs,
    in the order the task's mapping gives them.

    A gang has thousands of tasks and few layouts of variables (a role's tasks name the
    same ones, in the same order): the variables left to a task are found once per
    layout and then read out of each task's mapping in one pass. Equal pairs are one
    object (a role's tasks share most of theirs: the role, the ports): the launches of
    a gang hold a few pairs per task, not a dozen, and the cycle collector traverses
    that many fewer objects after the gang starts."""
    if len(envs) < 2:
        return {}, [tuple(env.items()) for env in envs]
    first, rest = envs[0], envs[1:]
    alike: dict[str, str] = {}
    for name, value in first.items():
        if rest[0].get(name, _ABSENT) != value:   # most variables differ at once: no need to look further
            continue
        values = [env.get(name, _ABSENT) for env in rest]
        if values.count(value) == len(values):
            alike[name] = value
    own_names: dict[tuple[str, ...], tuple[tuple[str, ...], Callable]] = {}   # layout -> its own names, their reader
    one_of: dict[tuple[str, str], tuple[str, str]] = {}   # each distinct pair, once
    own = []
    for env in envs:
        layout = tuple(env)
        known = own_names.get(layout)
        if known is None:
            names = tuple(name for name in layout if name not in alike)
            known = own_names[layout] = (names, _reader(names))
        names, read = known
        pairs = list(zip(names, read(env)))
        own.append(tuple(map(one_of.setdefault, pairs, pairs)))
    return alike, own


_ABSENT = object()


def _reader(names: tuple[str, ...]) -> Callable[[Mapping[str, str]], tuple[str, ...]]:
    """Reads the values of ``names`` from a mapping, as a tuple (``itemgetter`` gives a bare
    value for one name and fails for none)."""
    if not names:
        return lambda env: ()
    if len(names) == 1:
        return lambda env: (env[names[0]],)
    return itemgetter(*names)


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
