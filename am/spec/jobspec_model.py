"""What a validated job spec says: frozen dataclasses the AM reads.

A :class:`JobSpec` is built only by :func:`gangmaster.am.spec.jobspec.load_job` /
``parse_job``, which check every field first, so everything here can trust its
values. Mappings inside (``ports``, ``parameters``, ``simulation``) are plain dicts:
treat them as read-only (they are left out of the hash, so specs can be dict keys).

What a job's tasks do in simulation (how long they last, how they exit) is not the
AM's business: the reader checks those keys and carries them in
``JobSpec.simulation`` for the simulator's workload model
(``gangmaster.tools.rmsim.workload``), and nothing in ``am/`` reads them.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from operator import attrgetter
from typing import Any, Mapping, Sequence

from gangmaster.selectors.domains import DomainAsk
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.resources import ResourceDescriptor

RETRY_SCOPES = ("job", "role")
#: :meth:`JobSpec.verdict` of an attempt that succeeded because a role reached its ``min_succeeded``.
SUCCEEDED_EARLY = "succeeded early"
_instances_of = attrgetter("instances")


@dataclass(frozen=True)
class Completion:
    """OpenPAI's completion policy of one task role (FrameworkLauncher's
    ``ApplicationCompletionPolicy``, FrameworkController's
    ``FrameworkAttemptCompletionPolicy``).

    ``min_failed``: this many failed instances fail the job attempt; ``None``
    means failures never end it. ``min_succeeded``: this many succeeded instances
    end the attempt as a success; ``None`` means it succeeds only when every
    instance of the job has completed and no failure threshold was reached. These
    are the *effective* values the AM applies, each None or at least 1 (the AM
    relies on it: no role fails, or succeeds, by none of its instances); ``notes``
    says where they differ from what the job file wrote, and why (see
    :meth:`from_openpai`)."""

    min_failed: int | None = 1
    min_succeeded: int | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for key, count in (("min_failed", self.min_failed), ("min_succeeded", self.min_succeeded)):
            if count is not None and count < 1:
                raise ValueError(f"{key}: expected None or a count of at least 1, got {count}")

    @classmethod
    def from_openpai(cls, min_failed: int | None, min_succeeded: int | None,
                     instances: int) -> "Completion":
        """The policy as OpenPAI runs it, from any integer or null its schema accepts.

        OpenPAI's runtime passes the counts to FrameworkController, which checks
        ``count >= threshold`` each time an instance of the role fails (succeeds),
        unless the threshold is -1; an attempt that never meets a threshold ends when
        every instance has completed. So, per key:

        * ``null`` or ``-1``: not by count (``None``);
        * ``0``: OpenPAI's runtime reads a zero count as unset, i.e. the default
          (``minFailedInstances`` 1, ``minSucceededInstances`` null);
        * below ``-1``: met by the first failure (success), i.e. 1;
        * above the role's ``instances``: can never be met, i.e. not by count.
        """
        notes: list[str] = []
        failed = _effective(min_failed, 1, instances, "minFailedInstances", "failure", notes)
        succeeded = _effective(min_succeeded, None, instances, "minSucceededInstances", "success",
                               notes)
        return cls(failed, succeeded, tuple(notes))

    def failed(self, failed: int) -> bool:
        return self.min_failed is not None and failed >= self.min_failed

    def succeeded(self, succeeded: int) -> bool:
        return self.min_succeeded is not None and succeeded >= self.min_succeeded


def _effective(written: int | None, default: int | None, instances: int, key: str, event: str,
               notes: list[str]) -> int | None:
    """One count of :meth:`Completion.from_openpai`; a note when it is not what was written."""
    if written is None or written == -1:
        return None
    if written == 0:
        notes.append(f"{key}: 0 is read as unset, i.e. the default "
                     f"({'null' if default is None else default})")
        return default
    if written < 0:
        notes.append(f"{key}: {written} is met by the first {event}, i.e. 1")
        return 1
    if written > instances:
        notes.append(f"{key}: {written} is more than the role's {instances} instance(s) and can "
                     "never be met, i.e. not by count")
        return None
    return written


@dataclass(frozen=True)
class RetryPolicy:
    """How a failure is retried: ``scope`` "job" kills and re-places every task
    of the job, "role" only the tasks of the failed role; at most ``attempts``
    attempts in all (the first run counts)."""

    scope: str = "job"
    attempts: int = 1


@dataclass(frozen=True)
class RoleSpec:
    """One task role: ``instances`` identical containers.

    ``cpu`` is what the task is planned at; the AM asks the RM for
    ``cpu × request_ratio`` (:meth:`ask_resource`), which lets a role whose
    tasks idle most of the time (a parameter server) pack tighter."""

    name: str
    instances: int
    cpu: int
    memory_mb: int
    gpus: int
    ports: Mapping[str, int] = field(hash=False)
    commands: tuple[str, ...]
    completion: Completion
    task_retry_count: int
    retry: RetryPolicy
    request_ratio: float = 1.0
    max_instances_per_node: int | None = None
    node_label: str | None = None
    gpu_types: tuple[str, ...] = ()
    selector: str | None = None
    rack_policy: str | None = None  # None: selection.rack_policy
    #: a share of one GPU per instance, in milli-GPU (1..999; ``gpus`` is then 0); 0: whole GPUs
    gpu_milli: int = 0
    #: the role's instances inside one network domain (``required``) or as few as can be (None: anywhere)
    network_domain: DomainAsk | None = None
    #: the same for the whole gang the role is in (the job's ``networkDomain``; every role of the gang has it)
    gang_network_domain: DomainAsk | None = None

    def __hash__(self) -> int:
        """The dataclass's hash (every field but ``ports``), worked out once per role: what is
        worked out per set of roles is looked up by them, once or more per job (a trace
        replay's jobs of one shape share their roles). Not pickled (see __getstate__)."""
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = hash(tuple(getattr(self, f.name) for f in fields(self) if (f.compare if f.hash is None else f.hash)))
            object.__setattr__(self, "_hash", value)
            return value

    def __getstate__(self) -> dict:
        # A string's hash differs from process to process: the kept hash stays in this one.
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    @property
    def gpu_share(self) -> float:
        """The GPU one instance asks, in GPUs: ``gpus``, or the share (0.25 for 250 milli)."""
        return self.gpu_milli / GPU_MILLI if self.gpu_milli else float(self.gpus)

    @property
    def port_count(self) -> int:
        return sum(self.ports.values())

    @property
    def ask_vcores(self) -> float:
        return self.cpu * self.request_ratio

    def planned_resource(self) -> ResourceDescriptor:
        """One instance as planned: the full ``cpu``."""
        return self._planned

    def ask_resource(self) -> ResourceDescriptor:
        """One instance as asked of the RM: ``cpu × request_ratio`` vcores."""
        return self._asked

    @cached_property
    def _planned(self) -> ResourceDescriptor:
        """One instance as planned, worked out once per role (a role is immutable): every
        placement of the role reads it, and a trace replay's jobs of one shape share their RoleSpec."""
        return ResourceDescriptor(memory_mb=self.memory_mb, vcores=float(self.cpu),
                                  gpus=self.gpus, ports=self.port_count, gpu_milli=self.gpu_milli)

    @cached_property
    def _asked(self) -> ResourceDescriptor:
        return self._planned.with_(vcores=self.ask_vcores)


@dataclass(frozen=True)
class JobSpec:
    """A validated job: roles in file order, gangs (each a tuple of role names,
    every role in exactly one), retry and barrier policy, and what was read but
    only matters on an OpenPAI cluster (``unused``: field paths; ``kept``: their
    values, secrets included, so never print ``kept``).

    ``retry`` is the job-level policy; with scope "role" and no ``attempts`` key
    each role has its own (``RoleSpec.retry``, from its ``taskRetryCount``), and
    the AM should read the role's.

    ``simulation``: per role, the simulation keys its ``gangmaster:`` section set (its
    own or the job-level default), by their names in the job file, values checked
    (``{"worker": {"simulatedDurationSeconds": 5.0, "failOnAttempts": (1,)}}``); only
    the simulator reads them."""

    name: str
    roles: tuple[RoleSpec, ...]
    gangs: tuple[tuple[str, ...], ...]
    retry: RetryPolicy
    job_retry_count: int
    barrier_timeout_s: float | None
    parameters: Mapping[str, Any] = field(hash=False)
    unused: tuple[str, ...]
    source: str
    description: str = ""
    contributor: str = ""
    version: str = ""
    kept: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False,
                                    hash=False)
    simulation: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    #: ``gangmaster: priority``: a gang that cannot start may preempt gangs of lower priority
    priority: int = 0
    #: ``gangmaster: expectedDurationSeconds``: how long the job is declared to run (None: unknown),
    #: what a reserving RM queue counts on for its containers' ends (``declared_gang``)
    expected_duration_s: float | None = None

    def role(self, name: str) -> RoleSpec:
        role = self._roles_by_name.get(name)
        if role is None:
            raise KeyError(f"{self.name}: no task role {name!r}; roles: "
                           + ", ".join(r.name for r in self.roles))
        return role

    def __post_init__(self) -> None:
        """Name -> role, built with the spec: a scan per lookup made a job of n roles O(n^2),
        and every AM reads it (a cached_property takes a lock on its first read, which for a
        trace replay's tens of thousands of specs cost more than the dict)."""
        object.__setattr__(self, "_roles_by_name", {role.name: role for role in self.roles})
        # The roles that can succeed early (a min_succeeded): most jobs have none, and the AM
        # asks for the job's verdict each time its tasks end.
        object.__setattr__(self, "_early_roles", tuple([r for r in self.roles if r.completion.min_succeeded is not None]))

    def for_job(self, name: str, source: str, simulation: Mapping[str, Mapping[str, Any]],
                priority: int = 0) -> "JobSpec":
        """This spec for another job of the same roles, gangs and policies: ``dataclasses.replace``
        of ``name``, ``source``, ``simulation`` and ``priority``, without checking and deriving again what
        the two share (a trace replay builds one per job from one per shape). ``parameters``
        and ``kept`` are shared too: read-only, as every mapping here."""
        # A copy of this one's dict, the three fields then replaced in it: a dict's copy clones
        # its table whole, where ``{**state, ...}`` inserts its ~20 entries one by one (3x slower)
        state = self.__dict__.copy()
        state["name"], state["source"], state["simulation"], state["priority"] = name, source, simulation, priority
        spec = object.__new__(JobSpec)
        object.__setattr__(spec, "__dict__", state)
        return spec

    @cached_property
    def _gang_by_role(self) -> dict[str, int]:
        return {name: index for index, names in enumerate(self.gangs) for name in names}

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles)

    @property
    def completion(self) -> dict[str, Completion]:
        return {r.name: r.completion for r in self.roles}

    @cached_property
    def named_gangs(self) -> tuple[tuple[str, tuple[RoleSpec, ...]], ...]:
        """Each gang's name (:func:`gang_name`) and roles, in the gang's order."""
        return tuple(zip(map(gang_name, self.gangs), self._roles_of_gangs))

    def gang_roles(self, gang: int) -> tuple[RoleSpec, ...]:
        """The roles of gang number ``gang`` (0-based), in the gang's order (every gang's
        roles are roles of the job: the reader checked)."""
        return self._roles_of_gangs[gang]

    @cached_property
    def _roles_of_gangs(self) -> tuple[tuple[RoleSpec, ...], ...]:
        return tuple(tuple(map(self._roles_by_name.__getitem__, names)) for names in self.gangs)

    def gang_of(self, role: str) -> int:
        if role not in self._gang_by_role:
            raise KeyError(f"{self.name}: no task role {role!r}")
        return self._gang_by_role[role]

    @cached_property
    def total_instances(self) -> int:
        return sum(map(_instances_of, self.roles))

    @property
    def total_gpus(self) -> int:
        return sum(r.instances * r.gpus for r in self.roles)

    def outcome(self, succeeded: Mapping[str, int], failed: Mapping[str, int]) -> str | None:
        """The job attempt's outcome from per-role counts of completed instances,
        following FrameworkLauncher: "failed" as soon as any role reaches its
        ``min_failed``; else "succeeded" as soon as any role reaches its
        ``min_succeeded``, or when every instance has completed; else ``None``
        (still running)."""
        verdict = self.verdict(succeeded, failed)
        return "succeeded" if verdict is SUCCEEDED_EARLY else verdict

    def verdict(self, succeeded: Mapping[str, int], failed: Mapping[str, int]) -> str | None:
        """:meth:`outcome`, saying how a success came: :data:`SUCCEEDED_EARLY` when a role
        reached its ``min_succeeded``, "succeeded" when every instance completed (the AM
        asks this each time a task ends, and says which in the job's reason)."""
        # Loops, not any()/all() over generators: the AM asks this each time a task ends.
        if failed:   # (no failure fails no role: a min_failed is at least 1)
            for r in self.roles:
                if r.completion.failed(failed.get(r.name, 0)):
                    return "failed"
        for r in self._early_roles:
            if r.completion.succeeded(succeeded.get(r.name, 0)):
                return SUCCEEDED_EARLY
        for r in self.roles:
            if succeeded.get(r.name, 0) + failed.get(r.name, 0) < r.instances:
                return None
        return "succeeded"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``gangmaster validate --json``); ``kept`` left out."""
        data = asdict(self)
        data.pop("kept", None)
        for role, spec in zip(data["roles"], self.roles):
            role["ask_vcores"] = spec.ask_vcores
        return data


def shaped_role(name: str, instances: int, gpus: int, vcores: float, memory_mb: int, gpu_milli: int = 0,
                gpu_types: tuple[str, ...] = (), node_label: str | None = None,
                max_instances_per_node: int | None = None, command: str = "true") -> RoleSpec:
    """A role known only by its shape (a trace's role, the gang an application declared to the
    RM), as the AM would place it: asking ``vcores`` (planned as whole vcores, asked as
    ``cpu × request_ratio``: 1.25 vcores is 2 × 0.625), ``memory_mb``, ``gpus`` whole GPUs or a
    ``gpu_milli`` share of one, no ports, one attempt; ``command`` is what each task would run."""
    cpu = math.ceil(vcores)
    ratio = vcores / cpu if cpu else 1.0
    return RoleSpec(name=name, instances=instances, cpu=cpu, memory_mb=memory_mb, gpus=gpus, ports={},
                    commands=(command,), completion=Completion(), task_retry_count=0, retry=RetryPolicy("job", 1),
                    request_ratio=ratio, max_instances_per_node=max_instances_per_node, node_label=node_label,
                    gpu_types=gpu_types, gpu_milli=gpu_milli)


def gang_name(roles: Sequence[str]) -> str:
    """A gang's name: its roles' names, joined by ``+``."""
    return "+".join(roles)
