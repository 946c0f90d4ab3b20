"""Job specs: OpenPAI job protocol v2 files, plus our ``gangmaster:`` key.

A job file in OpenPAI's v2 shape loads as is::

    protocolVersion: 2
    name: mnist
    type: job
    parameters: {epochs: 3}
    taskRoles:
      worker:
        instances: 4
        resourcePerInstance: {cpu: 8, memoryMB: 32768, gpu: 1, ports: {nccl: 1}}
        commands: ["python train.py --epochs <% $parameters.epochs %>"]

and in Python::

    spec = load_job("conf/jobs/mpi-allreduce.yaml")
    spec.gangs                           # (("worker",),)
    spec.role("worker").ask_resource()   # ResourceDescriptor the AM asks the RM for

Fields that only matter on a real OpenPAI cluster (``prerequisites``,
``dockerImage``, ``deployments``, ``secrets``, ``extras``, ...) are kept and listed
in ``JobSpec.unused``, never an error. A field that is neither OpenPAI's nor ours
is an error: it is almost always a typo, and a typo that silently does nothing is
how a job ends up with no GPUs.

Validation reports every problem in one :class:`JobSpecError`, one line each with
the file and the field path, e.g.::

    job.yaml: taskRoles.worker.resourcePerInstance.gpu: expected an integer >= 0, got "four"
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from gangmaster.conf.fields import (ConfigError, ConfigErrors, ErrorCollector, Fields,
                                    load_yaml, parse_yaml)
from gangmaster.conf.limits import (INT32, MAX_ATTEMPTS, MAX_INSTANCES_PER_JOB, MAX_INSTANCES_PER_ROLE,
                                    MAX_JOB_NAME_LENGTH, MAX_MEMORY_MB, MAX_PORTS_PER_LABEL,
                                    MAX_VCORES)
from gangmaster.gpu_topology.masks import MAX_GPUS_PER_NODE

from . import jobspec_gangmaster as ours
from .jobspec_model import Completion, JobSpec, RetryPolicy, RoleSpec
from .jobspec_params import substitute

__all__ = ["JobSpecError", "load_job", "parse_job", "read_job", "known_selectors",
           "JobSpec", "RoleSpec", "Completion", "RetryPolicy"]

#: OpenPAI fields we read.
JOB_FIELDS = ("protocolVersion", "name", "type", "version", "contributor", "description",
              "parameters", "jobRetryCount", "taskRoles")
#: OpenPAI fields kept but unused here (they need a real OpenPAI cluster).
JOB_UNUSED = ("prerequisites", "secrets", "deployments", "defaults", "extras")
ROLE_FIELDS = ("instances", "completion", "taskRetryCount", "resourcePerInstance", "commands")
ROLE_UNUSED = ("protocolVersion", "dockerImage", "data", "output", "script",
               "extraContainerOptions", "prerequisites")
RESOURCE_FIELDS = ("cpu", "memoryMB", "gpu", "ports")
COMPLETION_FIELDS = ("minFailedInstances", "minSucceededInstances")

#: Names are checked with ``fullmatch`` (``^...$`` with ``match`` let "name\n" through).
JOB_NAME = re.compile(r"[a-zA-Z0-9_-]+")
#: OpenPAI's rule for task role and port labels: a valid C identifier (they become
#: environment variable names such as PAI_TASK_ROLE_worker_HOST_LIST).
IDENTIFIER = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
IDENTIFIER_TEXT = "name of letters, digits and _ (not starting with a digit)"


class JobSpecError(ConfigErrors):
    """Every problem found in a job spec; ``errors`` holds one ConfigError each."""

    def __init__(self, source: str, errors: list[ConfigError], what: str = "job spec"):
        super().__init__(source, errors, what)


def known_selectors() -> list[str] | None:
    """Registered strategy names; None when the registry itself cannot load
    (then the selector name is checked where the job is placed)."""
    from gangmaster.selectors.selector import selector_classes
    try:
        return list(selector_classes())
    except Exception:    # a broken third-party plugin must not block validation
        return None


def load_job(path: str | Path, secrets: Mapping[str, Any] | None = None,
             selectors: list[str] | None = None) -> JobSpec:
    """Read and validate a job file. ``secrets`` resolves ``<% $secrets.x %>``
    (otherwise kept verbatim); ``selectors`` overrides the registered names."""
    try:
        data = load_yaml(path)
    except ConfigError as exc:
        raise JobSpecError(str(path), [exc]) from None
    return read_job(data, str(path), secrets, selectors)


def parse_job(text: str, source: str = "<job>", secrets: Mapping[str, Any] | None = None,
              selectors: list[str] | None = None) -> JobSpec:
    try:
        data = parse_yaml(text, source)
    except ConfigError as exc:
        raise JobSpecError(source, [exc]) from None
    return read_job(data, source, secrets, selectors)


def read_job(data: Any, source: str, secrets: Mapping[str, Any] | None = None,
             selectors: list[str] | None = None) -> JobSpec:
    """Validate an already-parsed YAML document."""
    errors = ErrorCollector()
    try:
        top = Fields(data, source)
    except ConfigError as exc:
        raise JobSpecError(source, [exc]) from None
    if selectors is None:
        selectors = known_selectors()
    errors.add(*top.unknown_fields(JOB_FIELDS + JOB_UNUSED + (ours.KEY,)))

    version = top.data.get("protocolVersion")
    if version not in (2, "2"):
        errors.add(top.error("protocolVersion", "2 (OpenPAI job protocol v2)")
                   if version is None else top.error("protocolVersion", "2", version))
    name = errors.read(lambda: _name(top), "")
    errors.read(lambda: top.string("type", choices=["job"]))
    # None when unreadable: then undefined references are not reported (one error, not many)
    parameters = errors.read(lambda: top.mapping("parameters").data)
    job_retry_count = errors.read(lambda: _retry_count(top, "jobRetryCount"), 0)

    role_sections = errors.read(lambda: _role_sections(top, errors), [])
    role_names = [n for n, _ in role_sections]
    job_section = errors.read(lambda: top.mapping(ours.KEY), Fields({}, source, ours.KEY))
    job_keys, role_defaults = ours.read_job_keys(job_section, errors, role_names, selectors)

    unused = [key for key in JOB_UNUSED if key in top and key != "extras"]
    if "extras" in top:
        extras = top.data["extras"]
        unused += ([f"extras.{k}" for k in extras] if isinstance(extras, dict) and extras
                   else ["extras"])
    roles = []
    simulation: dict[str, dict[str, Any]] = {}
    for role_name, section in role_sections:
        read = _read_role(role_name, section, errors, parameters, secrets, selectors,
                          role_defaults, job_keys, job_retry_count)
        unused += [section.field(k) for k in ROLE_UNUSED if k in section]
        if read is not None:
            role, simulation[role_name] = read
            roles.append(role)
    total = sum(role.instances for role in roles)
    if total > MAX_INSTANCES_PER_JOB:
        errors.add(top.error("taskRoles", f"at most {MAX_INSTANCES_PER_JOB:,} instances in all "
                                          "(MAX_INSTANCES_PER_JOB in conf/limits.py)",
                             f"{total:,} instances"))

    errors.raise_if_any(source, JobSpecError)
    retry = RetryPolicy(job_keys.retry_scope, job_keys.attempts or job_retry_count + 1)
    gangs = job_keys.gangs or (tuple(role_names),)
    return JobSpec(
        name=name, roles=tuple(roles), gangs=gangs, retry=retry,
        job_retry_count=job_retry_count, barrier_timeout_s=job_keys.barrier_timeout_s, priority=job_keys.priority,
        expected_duration_s=job_keys.expected_duration_s,
        parameters=dict(parameters or {}), unused=tuple(unused), source=source,
        description=str(top.data.get("description") or ""),
        contributor=str(top.data.get("contributor") or ""),
        version=str(top.data.get("version") or ""),
        kept={path: _value_at(top.data, path) for path in unused},
        simulation={name: keys for name, keys in simulation.items() if keys},
    )


def _name(top: Fields) -> str:
    name = top.string("name")
    if not JOB_NAME.fullmatch(name):
        raise top.error("name", "a name of letters, digits, _ and -", name)
    if len(name) > MAX_JOB_NAME_LENGTH:
        raise top.error("name", f"a name of at most {MAX_JOB_NAME_LENGTH} characters "
                                "(MAX_JOB_NAME_LENGTH in conf/limits.py)", f"{len(name)} characters")
    return name


def _role_sections(top: Fields, errors: ErrorCollector) -> list[tuple[str, Fields]]:
    """The task roles in file order; a badly named or shaped role is reported and
    skipped so the others are still checked."""
    top.raw("taskRoles")
    roles = top.mapping("taskRoles")
    if not roles.data:
        raise top.error("taskRoles", "at least one task role")
    sections = []
    for name, value in roles.data.items():
        if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
            errors.add(roles.error(str(name), f"a task role {IDENTIFIER_TEXT}", name))
            continue
        try:
            sections.append((name, Fields(value, top.source, roles.field(name))))
        except ConfigError as exc:
            errors.add(exc)
    return sections


def _required_mapping(f: Fields, key: str) -> Fields:
    f.raw(key)
    return f.mapping(key)


def _read_role(name: str, f: Fields, errors: ErrorCollector, parameters: Mapping[str, Any] | None,
               secrets: Mapping[str, Any] | None, selectors: list[str] | None,
               role_defaults: dict[str, Any], job_keys: ours.JobKeys,
               job_retry_count: int) -> tuple[RoleSpec, dict[str, Any]] | None:
    """The role, and its simulation keys by name (carried for the simulator); None when
    the role has errors (they went to ``errors``)."""
    before = len(errors.errors)
    errors.add(*f.unknown_fields(ROLE_FIELDS + ROLE_UNUSED + (ours.KEY,)))
    instances = errors.read(lambda: _instances(f))
    task_retry_count = errors.read(lambda: _retry_count(f, "taskRetryCount"), 0)

    resource = errors.read(lambda: _required_mapping(f, "resourcePerInstance"))
    cpu = memory_mb = gpus = 0
    asks_nothing = False
    ports: dict[str, int] = {}
    if resource is not None:
        errors.add(*resource.unknown_fields(RESOURCE_FIELDS))
        read_before = len(errors.errors)
        cpu = errors.read(lambda: resource.integer("cpu", minimum=0, maximum=MAX_VCORES,
                                                   limit="MAX_VCORES"), 0)
        memory_mb = errors.read(lambda: resource.integer("memoryMB", minimum=0, maximum=MAX_MEMORY_MB,
                                                         limit="MAX_MEMORY_MB"), 0)
        gpus = errors.read(lambda: resource.integer("gpu", minimum=0, maximum=MAX_GPUS_PER_NODE), 0)
        asks_nothing = not (cpu or memory_mb or gpus) and len(errors.errors) == read_before
        ports = errors.read(lambda: _ports(resource), {})

    commands = _commands(f, errors, parameters, secrets)
    instances = instances or 1
    completion = errors.read(lambda: _completion(f, instances), Completion())

    section = errors.read(lambda: f.mapping(ours.KEY), Fields({}, f.source, f.field(ours.KEY)))
    errors.add(*section.unknown_fields(ours.ROLE_KEYS + ours.ROLE_ONLY_KEYS))
    keys, simulation = ours.split_role_keys(ours.read_role_keys(section, errors, selectors,
                                                                base=role_defaults))

    if job_keys.retry_scope == "role":
        retry = RetryPolicy("role", job_keys.attempts or task_retry_count + 1)
    else:
        retry = RetryPolicy("job", job_keys.attempts or job_retry_count + 1)
    if simulation.get("failInstance", 0) >= instances:
        errors.add(section.error("failInstance", f"an instance index within 0..{instances - 1}",
                                 simulation["failInstance"]))
    late = [a for a in simulation.get("failOnAttempts", ()) if a > retry.attempts]
    if late:
        errors.add(section.error("failOnAttempts",
                                 f"attempt numbers within 1..{retry.attempts} (the job's attempts)",
                                 ", ".join(map(str, late))))
    if asks_nothing and not keys.gpu_milli and "gpuMilli" not in section:   # the RM refuses such an ask
        errors.add(resource.error("cpu", "cpu, memoryMB or gpu > 0, or gangmaster.gpuMilli (a task must ask "
                                         "for something)", 0))
    if keys.gpu_milli and gpus:
        errors.add(section.error("gpuMilli", f"{f.field('resourcePerInstance.gpu')} 0 with it (a share of one "
                                             "GPU asks no whole GPU; whole GPUs are asked with gpu alone)",
                                 f"gpuMilli {keys.gpu_milli} with gpu {gpus}"))
    if len(errors.errors) > before:
        return None
    return RoleSpec(
        name=name, instances=instances, cpu=cpu, memory_mb=memory_mb, gpus=gpus, ports=ports,
        commands=commands, completion=completion, task_retry_count=task_retry_count,
        retry=retry, request_ratio=keys.request_ratio,
        max_instances_per_node=keys.max_instances_per_node, node_label=keys.node_label,
        gpu_types=keys.gpu_types, selector=keys.selector, rack_policy=keys.rack_policy,
        gpu_milli=keys.gpu_milli, network_domain=keys.network_domain,
        gang_network_domain=job_keys.network_domain,
    ), simulation


def _ports(resource: Fields) -> dict[str, int]:
    """``ports: {ssh: 1, http: 1}``: a count per label (OpenPAI's shape)."""
    section = resource.mapping("ports")
    problems: list[ConfigError] = []
    ports: dict[str, int] = {}
    for label in section.keys():
        if not isinstance(label, str) or not IDENTIFIER.fullmatch(label):
            problems.append(section.error(str(label), f"a port label {IDENTIFIER_TEXT}", label))
            continue
        try:
            ports[label] = section.integer(label, minimum=0, maximum=MAX_PORTS_PER_LABEL,
                                           limit="MAX_PORTS_PER_LABEL")
        except ConfigError as exc:
            problems.append(exc)
    if problems:
        raise ConfigErrors(resource.source, problems)
    return ports


def _commands(f: Fields, errors: ErrorCollector, parameters: Mapping[str, Any] | None,
              secrets: Mapping[str, Any] | None) -> tuple[str, ...]:
    raw = errors.read(lambda: f.strings("commands"), [])
    if "commands" in f and raw == [] and f.data["commands"] == []:
        errors.add(f.error("commands", "a non-empty list of strings", []))
    commands = []
    for i, command in enumerate(raw):
        text, missing = substitute(command, parameters or {}, secrets)
        for reference in missing:
            if parameters is None and reference.startswith("$parameters."):
                continue    # the parameters section itself is already reported
            scope = reference[1:].split(".", 1)[0]
            defined = parameters if scope == "parameters" else (secrets or {})
            errors.add(ConfigError(
                f.source, f"{f.field('commands')}[{i}]",
                f"a reference to a defined {scope[:-1]} (defined: "
                + (", ".join(sorted(map(str, defined))) or "none") + ")", reference))
        commands.append(text)
    return tuple(commands)


def _instances(f: Fields) -> int:
    return f.integer("instances", 1, minimum=1, maximum=MAX_INSTANCES_PER_ROLE,
                     limit="MAX_INSTANCES_PER_ROLE")


def _retry_count(f: Fields, key: str) -> int:
    """``jobRetryCount`` / ``taskRetryCount``: retries, so at most MAX_ATTEMPTS - 1."""
    return f.integer(key, 0, minimum=0, maximum=MAX_ATTEMPTS - 1, limit="MAX_ATTEMPTS - 1")


def _completion(f: Fields, instances: int) -> Completion:
    """Any integer or null, as OpenPAI's schema takes them, with OpenPAI's meaning
    (:meth:`Completion.from_openpai`: -1, null, 0 and unreachable counts included)."""
    section = f.mapping("completion")
    problems = section.unknown_fields(COMPLETION_FIELDS)
    written: dict[str, int | None] = {"minFailedInstances": 1, "minSucceededInstances": None}
    for key in [k for k in written if k in section]:      # an absent key keeps its default
        try:
            written[key] = (None if section.data[key] is None
                            else section.integer(key, minimum=INT32[0], maximum=INT32[1]))
        except ConfigError as exc:
            problems.append(exc)
    if problems:
        raise ConfigErrors(f.source, problems)
    return Completion.from_openpai(written["minFailedInstances"], written["minSucceededInstances"],
                                   instances)


def _value_at(data: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path we produced (role names and keys have no dots,
    but extras keys may: ``extras.com.microsoft.pai.runtimeplugin``; and they may be
    written as numbers, ``extras: {1: x}``, so they are matched as text)."""
    if path.startswith("extras."):
        wanted = path[len("extras."):]
        return next(value for key, value in data["extras"].items() if str(key) == wanted)
    current: Any = data
    for part in path.split("."):
        current = current[part]
    return current
