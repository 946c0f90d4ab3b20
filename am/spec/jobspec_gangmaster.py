"""Our additions to the OpenPAI protocol: the ``gangmaster:`` key.

It appears once at job level and optionally once per task role
(``taskRoles.<role>.gangmaster``). Role keys written at job level are the
default of every role; a role's own value wins. ``conf/jobs/README.md``
documents every key; keep the two in step.

The simulation keys (:data:`SIMULATION_KEYS`: how long a task lasts and how it
exits when the job runs in virtual time) are checked here like any other, but
mean nothing to the AM: they are carried by name in ``JobSpec.simulation`` for the
simulator's workload model (``gangmaster.tools.rmsim.workload``). Checking them
here keeps one reader of the job file and one report of its problems, with the
file and field of each.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from gangmaster.conf.fields import ConfigError, ConfigErrors, ErrorCollector, Fields
from gangmaster.conf.limits import MAX_ATTEMPTS, MAX_DURATION_S, MAX_INSTANCES_PER_ROLE, MAX_PRIORITY
from gangmaster.selectors.domains import DOMAIN_MODES, DomainAsk
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.request import RACK_POLICIES

from .jobspec_model import RETRY_SCOPES

KEY = "gangmaster"

#: Keys a role may set; at job level they are every role's default.
ROLE_KEYS = ("maxInstancesPerNode", "requestRatio", "nodeLabel", "gpuTypes", "gpuMilli", "selector",
             "rackPolicy", "simulatedDurationSeconds", "simulatedExitCode")
#: Role level only: the testing aids (a job-wide injected failure would be a surprise), and
#: the role's network domain (at job level, ``networkDomain`` is the whole gang's, not a default).
ROLE_ONLY_KEYS = ("failOnAttempts", "failInstance", "failExitCode", "failBeforeBarrier", "networkDomain")
#: What the role's tasks do in simulation (see the module docstring).
SIMULATION_KEYS = ("simulatedDurationSeconds", "simulatedExitCode", "failOnAttempts", "failInstance",
                   "failExitCode", "failBeforeBarrier")
#: Keys that only make sense for the whole job.
JOB_ONLY_KEYS = ("gangs", "barrierTimeoutSeconds", "retryScope", "attempts", "networkDomain", "priority",
                 "expectedDurationSeconds")


@dataclass(frozen=True)
class RoleKeys:
    """The ``gangmaster:`` values of one role after defaults are applied."""

    max_instances_per_node: int | None = None
    request_ratio: float = 1.0
    node_label: str | None = None
    gpu_types: tuple[str, ...] = ()
    gpu_milli: int = 0              # 0: whole GPUs (resourcePerInstance.gpu); else a share of one GPU
    selector: str | None = None
    rack_policy: str | None = None  # None: selection.rack_policy
    network_domain: DomainAsk | None = None   # the role's instances inside one domain (or as few as can be)


@dataclass(frozen=True)
class JobKeys:
    gangs: tuple[tuple[str, ...], ...] | None = None   # None: one gang of all roles
    barrier_timeout_s: float | None = None              # None: wait forever
    retry_scope: str = "job"
    attempts: int | None = None                         # None: from jobRetryCount/taskRetryCount
    network_domain: DomainAsk | None = None             # each gang inside one domain (or as few as can be)
    priority: int = 0                                   # higher may preempt lower (am/core/victims.py)
    expected_duration_s: float | None = None            # how long the job is declared to run (None: unknown)


def _readers(selectors: list[str] | None) -> dict[str, tuple[str, Callable[[Fields, str], Any]]]:
    """Field name -> (RoleKeys attribute, or the field name itself for a simulation key; reader)."""
    def selector(f: Fields, key: str) -> str:
        if selectors is None:
            return f.string(key)
        return f.string(key, choices=selectors)

    return {
        "maxInstancesPerNode": ("max_instances_per_node",
                                lambda f, k: f.integer(k, minimum=1, maximum=MAX_INSTANCES_PER_ROLE,
                                                       limit="MAX_INSTANCES_PER_ROLE")),
        "requestRatio": ("request_ratio", _ratio),
        "nodeLabel": ("node_label", lambda f, k: f.name(k)),
        "gpuTypes": ("gpu_types", lambda f, k: tuple(f.names(k))),
        "gpuMilli": ("gpu_milli", _gpu_milli),
        "selector": ("selector", selector),
        "rackPolicy": ("rack_policy", lambda f, k: f.string(k, choices=RACK_POLICIES)),
        "simulatedDurationSeconds": ("simulatedDurationSeconds", _duration),
        "simulatedExitCode": ("simulatedExitCode", lambda f, k: f.integer(k, minimum=0, maximum=255)),
        "failOnAttempts": ("failOnAttempts", _attempt_list),
        "failInstance": ("failInstance", lambda f, k: f.integer(k, minimum=0)),
        "failExitCode": ("failExitCode", lambda f, k: f.integer(k, minimum=1, maximum=255)),
        "failBeforeBarrier": ("failBeforeBarrier", lambda f, k: f.boolean(k)),
        "networkDomain": ("network_domain", read_network_domain),
    }


def read_network_domain(f: Fields, key: str) -> DomainAsk:
    """``networkDomain: {required: rack}`` or ``{preferred: switch}``: one mode, naming a level
    (``rack``, or one of the cluster file's ``domainLevels``; a level the cluster does not
    describe is a domain no node is in)."""
    section = f.mapping(key)
    modes = list(section.keys())
    if len(modes) != 1 or modes[0] not in DOMAIN_MODES:
        raise f.error(key, f"one of {', '.join(DOMAIN_MODES)} naming a domain level, e.g. {{required: rack}}",
                      ", ".join(map(str, modes)) or "an empty mapping")
    return DomainAsk(section.name(modes[0]), required=modes[0] == DOMAIN_MODES[0])


def _duration(f: Fields, key: str) -> float:
    return f.number(key, minimum=0, maximum=MAX_DURATION_S, limit="MAX_DURATION_S")


def _gpu_milli(f: Fields, key: str) -> int:
    """A share of one GPU in milli-GPU: 1..999 (a whole GPU or more is asked with ``gpu``)."""
    value = f.raw(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < GPU_MILLI:
        raise f.error(key, f"an integer within 1..{GPU_MILLI - 1} (milli-GPU: a share of one GPU; whole GPUs "
                           "are asked with resourcePerInstance.gpu)", value)
    return value


def _ratio(f: Fields, key: str) -> float:
    value = f.raw(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise f.error(key, "a number > 0 and <= 1", value)
    return float(value)


def _attempt_list(f: Fields, key: str) -> tuple[int, ...]:
    value = f.raw(key)
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value):
        raise f.error(key, "a list of attempt numbers >= 1", value)
    return tuple(sorted(set(value)))


def read_role_keys(section: Fields, errors: ErrorCollector, selectors: list[str] | None,
                   base: dict[str, Any] | None = None, allowed: tuple[str, ...] = ROLE_KEYS
                   + ROLE_ONLY_KEYS) -> dict[str, Any]:
    """Read the role keys present in ``section`` on top of ``base`` (attribute ->
    value; a simulation key under its own name). Errors go to ``errors``; a bad value
    leaves the base value."""
    values = dict(base or {})
    readers = _readers(selectors)
    for key in allowed:
        if key in section and section.data[key] is not None:
            attribute, reader = readers[key]
            missing = object()
            value = errors.read(lambda: reader(section, key), fallback=missing)
            if value is not missing:
                values[attribute] = value
    return values


def split_role_keys(values: dict[str, Any]) -> tuple[RoleKeys, dict[str, Any]]:
    """What :func:`read_role_keys` read, as the role's :class:`RoleKeys` and its
    simulation keys (by name)."""
    simulation = {key: values[key] for key in SIMULATION_KEYS if key in values}
    return RoleKeys(**{k: v for k, v in values.items() if k not in simulation}), simulation


def read_job_keys(section: Fields, errors: ErrorCollector, role_names: list[str],
                  selectors: list[str] | None) -> tuple[JobKeys, dict[str, Any]]:
    """The job-level ``gangmaster:`` section: its own keys and the role defaults."""
    errors.add(*section.unknown_fields(JOB_ONLY_KEYS + ROLE_KEYS))
    present = {key for key in section.keys() if section.data[key] is not None}
    gangs = errors.read(lambda: _gangs(section, role_names)) if "gangs" in present else None
    timeout = (errors.read(lambda: section.number("barrierTimeoutSeconds", minimum=0,
                                                  exclusive_minimum=True, maximum=MAX_DURATION_S,
                                                  limit="MAX_DURATION_S"))
               if "barrierTimeoutSeconds" in present else None)
    scope = errors.read(lambda: section.string("retryScope", "job", choices=RETRY_SCOPES), "job")
    attempts = (errors.read(lambda: section.integer("attempts", minimum=1, maximum=MAX_ATTEMPTS,
                                                    limit="MAX_ATTEMPTS"))
                if "attempts" in present else None)
    domain = (errors.read(lambda: read_network_domain(section, "networkDomain"))
              if "networkDomain" in present else None)
    priority = (errors.read(lambda: section.integer("priority", minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY,
                                                    limit="MAX_PRIORITY"), 0)
                if "priority" in present else 0)
    expected = (errors.read(lambda: _duration(section, "expectedDurationSeconds"))
                if "expectedDurationSeconds" in present else None)
    defaults = read_role_keys(section, errors, selectors, allowed=ROLE_KEYS)
    return JobKeys(gangs=gangs, barrier_timeout_s=timeout, retry_scope=scope,
                   attempts=attempts, network_domain=domain, priority=priority,
                   expected_duration_s=expected), defaults


def _gangs(section: Fields, role_names: list[str]) -> tuple[tuple[str, ...], ...] | None:
    """``gangs: [[coordinator, server, worker]]``: every role in exactly one gang."""
    value = section.raw("gangs")
    where = section.field("gangs")
    if not isinstance(value, list) or not value:
        raise section.error("gangs", "a non-empty list of gangs, each a list of task role names",
                            value)
    problems: list[ConfigError] = []
    known = set(role_names)     # a list scan per name made this O(roles^2)
    seen: dict[str, int] = {}
    gangs: list[tuple[str, ...]] = []
    for i, gang in enumerate(value):
        if not isinstance(gang, list) or not gang:
            problems.append(ConfigError(section.source, f"{where}[{i}]",
                                        "a non-empty list of task role names", gang))
            continue
        names: list[str] = []
        for j, name in enumerate(gang):
            field = f"{where}[{i}][{j}]"
            if not isinstance(name, str) or name not in known:
                problems.append(ConfigError(section.source, field,
                                            "a task role (one of " + ", ".join(role_names) + ")",
                                            name))
            elif name in seen:
                problems.append(ConfigError(
                    section.source, field,
                    f"each task role in one gang only ({name!r} is already in gangs[{seen[name]}])",
                    name))
            else:
                seen[name] = i
                names.append(name)
        gangs.append(tuple(names))
    left_out = [name for name in role_names if name not in seen]
    if left_out and not problems:
        problems.append(ConfigError(section.source, where, "every task role in a gang; missing: "
                                    + ", ".join(left_out)))
    if problems:
        raise ConfigErrors(section.source, problems)
    return tuple(gangs)
