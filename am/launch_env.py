"""The environment the AM gives each task: OpenPAI's runtime variables, so a
program written for OpenPAI finds its peers the same way here.

Per job and role: ``PAI_JOB_NAME``, ``PAI_TASK_ROLE_COUNT``, ``PAI_TASK_ROLE_LIST``,
``PAI_TASK_ROLE_TASK_COUNT_<role>``, ``PAI_TASK_ROLE_<role>_HOST_LIST`` (``host:port``
of every instance, by index; the first port of the instance, or the host alone).
Per instance: ``PAI_HOST_IP_<role>_<i>`` and ``PAI_PORT_LIST_<role>_<i>_<label>``
(gangs of up to :data:`PER_INSTANCE_VARIABLES_UP_TO` tasks).
For the task itself: ``PAI_CURRENT_TASK_ROLE_NAME``,
``PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX``, ``PAI_TASK_INDEX`` and
``GANGMASTER_ATTEMPT``. The NodeManager adds what only it knows (the container's
own host, ports, GPUs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from gangmaster.selectors.ports import PortRanges


@dataclass(frozen=True)
class PlacedTask:
    """One instance as launched: enough to tell every other task where it is."""

    role: str
    index: int
    host: str
    ports: Mapping[str, tuple[int, ...]]   # label -> the ports with that label

    @property
    def first_port(self) -> int | None:
        for ports in self.ports.values():
            if ports:
                return ports[0]
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


#: Gangs up to this many tasks also get the per-instance variables (``PAI_HOST_IP_<role>_<i>``,
#: ``PAI_PORT_LIST_<role>_<i>_<label>``): every task would otherwise carry a variable per task
#: of the gang, which for a 6,000-task gang is 12,000 variables in each of 6,000 environments.
#: Bigger gangs read the same facts from ``PAI_TASK_ROLE_<role>_HOST_LIST``.
PER_INSTANCE_VARIABLES_UP_TO = 256


def gang_env(job_name: str, tasks: Sequence[PlacedTask], attempt: int) -> dict[str, str]:
    """OpenPAI's variables that are the same for every task of the gang (computed once)."""
    roles = list(dict.fromkeys(t.role for t in tasks))
    env = {
        "PAI_JOB_NAME": job_name,
        "PAI_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLE_LIST": ",".join(roles),
        "GANGMASTER_ATTEMPT": str(attempt),
    }
    per_instance = len(tasks) <= PER_INSTANCE_VARIABLES_UP_TO
    by_role: dict[str, list[PlacedTask]] = {role: [] for role in roles}
    for t in tasks:
        by_role[t.role].append(t)
    for role, of_role in by_role.items():
        of_role.sort(key=lambda t: t.index)
        env[f"PAI_TASK_ROLE_TASK_COUNT_{role}"] = str(len(of_role))
        env[f"PAI_TASK_ROLE_{role}_HOST_LIST"] = ",".join(
            t.host if t.first_port is None else f"{t.host}:{t.first_port}" for t in of_role)
        if per_instance:
            for t in of_role:
                env[f"PAI_HOST_IP_{role}_{t.index}"] = t.host
                for label, ports in t.ports.items():
                    env[f"PAI_PORT_LIST_{role}_{t.index}_{label}"] = ",".join(map(str, ports))
    return env


def own_env(me: PlacedTask) -> dict[str, str]:
    """The variables that say which task this is."""
    return {
        "PAI_CURRENT_TASK_ROLE_NAME": me.role,
        "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(me.index),
        "PAI_TASK_INDEX": str(me.index),
    }
