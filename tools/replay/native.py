"""gangmaster's own trace format, for jobs of several roles: CSV or YAML.

CSV, one row per role (rows of one job share its ``job_id``; ``submit_s``,
``duration_s`` and ``queue`` must agree across them)::

    job_id,submit_s,duration_s,queue,role,instances,gpus,vcores,memory_mb,gpu_types
    ps-1,0,3600,research,ps,2,0,4,16384,
    ps-1,0,3600,research,worker,4,2,,,V100;A100

==============  ========  =====================================================
column          required  meaning
==============  ========  =====================================================
``job_id``      yes       the job's name
``submit_s``    yes       submit time, seconds (any origin; ``--window`` in it)
``duration_s``  yes       how long the gang runs once every instance started, s
``queue``       no        the RM queue (default ``default``)
``role``        no        the task role (default ``worker``; unique within a job)
``instances``   no        instances of the role (default 1)
``gpus``        yes       GPUs of each instance (at most a node's: no splitting)
``vcores``      no        vcores of each instance (default: its GPUs' share of a node)
``memory_mb``   no        memory of each instance, MB (default: its GPUs' share)
``gpu_types``   no        acceptable GPU types, ``;``-separated (default: any)
``priority``    no        the job's priority, -1000..1000 (default 0; with
                          ``--preemption on`` higher preempts lower)
==============  ========  =====================================================

A role without GPUs must ask for vcores or memory (``vcores`` or ``memory_mb`` > 0): a
role that asks for nothing is refused. A bad row drops its whole job (a gang with a role
missing would be a different job). YAML holds the same::

    jobs:
      - {id: ps-1, submit: 0, duration: 3600, queue: research, priority: 0,
         roles: [{name: ps, instances: 2, gpus: 0, vcores: 4, memoryMB: 16384},
                 {name: worker, instances: 4, gpus: 2, gpuTypes: [V100, A100]}]}
"""
from __future__ import annotations

from pathlib import Path

from gangmaster.conf.fields import ConfigError, Fields, decode_utf8, parse_yaml, read_limited
from gangmaster.conf.limits import (MAX_DURATION_S, MAX_GPUS_PER_NODE, MAX_INSTANCES_PER_JOB,
                                    MAX_INSTANCES_PER_ROLE, MAX_MEMORY_MB, MAX_PRIORITY, MAX_TRACE_JOBS, MAX_VCORES,
                                    MAX_YAML_FILE_BYTES)

from .trace import JobTable, NodeShape, TraceRole, sha256_of
from .trace_csv import (BadRow, BadRows, Kept, Row, Submitted, TraceText, Window, csv_rows, job_table,
                        read_trace_text)

COLUMNS = ("job_id", "submit_s", "duration_s", "gpus")
OPTIONAL_COLUMNS = ("queue", "role", "instances", "vcores", "memory_mb", "gpu_types", "priority")
DEFAULT_QUEUE, DEFAULT_ROLE = "default", "worker"
#: What a role without GPUs must ask for (one that asks for nothing would be placed anywhere
#: and count for nothing); {memory} is the format's name of the memory field.
ASKS_NOTHING = "vcores > 0 or {memory} > 0 for a role without GPUs (it would ask for nothing)"


def read_native(path: str | Path, shape: NodeShape, bad_rows: BadRows | None = None,
                window: Window | None = None) -> JobTable:
    bad_rows = bad_rows or BadRows()
    if Path(path).suffix.lower() in (".yaml", ".yml"):
        return _read_yaml(path, shape, bad_rows, window)
    return _read_csv(read_trace_text(path), shape, bad_rows, window)


# ------------------------------------------------------------------- CSV

class _Job:
    """The rows of one job read so far (its first row's line names it in errors). A job
    outside ``--window`` keeps no roles: its rows are checked and let go."""

    def __init__(self, row: Row, submit: float, duration: float, queue: str, priority: int, kept: bool):
        self.line, self.submit, self.duration, self.queue = row.line, submit, duration, queue
        self.priority = priority
        self.roles: list[TraceRole] = []
        self.role_names: set[str] = set()
        self.instances = 0
        self.kept = kept
        self.broken = False


def _read_csv(trace: TraceText, shape: NodeShape, bad_rows: BadRows, window: Window | None) -> JobTable:
    jobs: dict[str, _Job] = {}
    kept = Kept(trace.source, window)
    for row in csv_rows(trace, bad_rows, COLUMNS, OPTIONAL_COLUMNS):
        job = None
        try:
            job_id = row.name("job_id")
            job = jobs.get(job_id)
            submit = row.seconds("submit_s")
            duration = row.seconds("duration_s", positive=True)
            queue = row.name("queue", DEFAULT_QUEUE)
            priority = row.integer("priority", minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY, limit="MAX_PRIORITY",
                                   default=0)
            if job is None:
                job = jobs[job_id] = _Job(row, submit, duration, queue, priority, kept.holds(submit))
            else:
                _agrees(row, job, submit, duration, queue, priority)
            role = _role(row, shape)
            if role.name in job.role_names:
                raise row.error("role", f"a role name not used before in job {job_id} (line {job.line})", role.name)
            job.role_names.add(role.name)
            job.instances += role.instances
            if job.kept:
                job.roles.append(role)
            if job.instances > MAX_INSTANCES_PER_JOB:
                raise row.error("instances", f"at most {MAX_INSTANCES_PER_JOB:,} instances in job {job_id}, "
                                             "all roles together (MAX_INSTANCES_PER_JOB)")
        except BadRow as error:
            if job is not None:
                job.broken = True
            bad_rows.add(error)
    for job_id, job in jobs.items():
        if job.kept and not job.broken and job.roles:
            kept.add(Submitted(job.submit, job_id, job.duration, job.queue, tuple(job.roles), job.priority),
                     f"line {job.line}")
    return job_table(kept, trace, "native")


def _agrees(row: Row, job: _Job, submit: float, duration: float, queue: str, priority: int) -> None:
    for column, mine, first in (("submit_s", submit, job.submit), ("duration_s", duration, job.duration),
                                ("queue", queue, job.queue), ("priority", priority, job.priority)):
        if mine != first:
            raise row.error(column, f"the value of this job's first row (line {job.line}): {first}",
                            row.values.get(column, ""))


def _role(row: Row, shape: NodeShape) -> TraceRole:
    gpus = row.integer("gpus", maximum=MAX_GPUS_PER_NODE, limit="MAX_GPUS_PER_NODE")
    vcores_share, memory_share = shape.share(gpus)
    vcores = row.number("vcores", maximum=MAX_VCORES, limit="MAX_VCORES", default=vcores_share)
    memory = row.integer("memory_mb", maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB", default=memory_share)
    if not (gpus or vcores or memory):
        raise row.error("vcores", ASKS_NOTHING.format(memory="memory_mb"))
    gpu_types = row.names("gpu_types", ";")
    return TraceRole(row.name("role", DEFAULT_ROLE),
                     row.integer("instances", minimum=1, maximum=MAX_INSTANCES_PER_ROLE,
                                 limit="MAX_INSTANCES_PER_ROLE", default=1),
                     gpus, vcores, memory, gpu_types)


# ------------------------------------------------------------------- YAML

JOB_FIELDS = ("id", "submit", "duration", "queue", "roles", "priority")
ROLE_FIELDS = ("name", "instances", "gpus", "vcores", "memoryMB", "gpuTypes")


def _read_yaml(path: str | Path, shape: NodeShape, bad_rows: BadRows, window: Window | None) -> JobTable:
    source = str(path)
    raw = read_limited(path, MAX_YAML_FILE_BYTES, "MAX_YAML_FILE_BYTES")
    doc = Fields(parse_yaml(decode_utf8(raw, source), source), source)
    doc.reject_unknown(("jobs",))
    entries = doc.list_of_mappings("jobs")
    if len(entries) > MAX_TRACE_JOBS:
        raise doc.error("jobs", f"at most {MAX_TRACE_JOBS:,} jobs (MAX_TRACE_JOBS)", f"{len(entries):,} jobs")
    seen: set[str] = set()
    read = Kept(source, window)
    for index, entry in enumerate(entries):
        try:
            job = _yaml_job(entry, shape)
            if job.job_id in seen:
                raise entry.error("id", "a job id not used before", job.job_id)
        except ConfigError as error:
            bad_rows.add(error)
            continue
        seen.add(job.job_id)
        read.add(job, f"jobs[{index}]")
    return job_table(read, TraceText(source, "", sha256_of(raw)), "native")


def _yaml_job(entry: Fields, shape: NodeShape) -> Submitted:
    entry.reject_unknown(JOB_FIELDS)
    roles = []
    for role in entry.list_of_mappings("roles"):
        role.reject_unknown(ROLE_FIELDS)
        gpus = role.integer("gpus", 0, minimum=0, maximum=MAX_GPUS_PER_NODE, limit="MAX_GPUS_PER_NODE")
        vcores_share, memory_share = shape.share(gpus)
        vcores = role.number("vcores", vcores_share, minimum=0, maximum=MAX_VCORES, limit="MAX_VCORES")
        memory = role.integer("memoryMB", memory_share, minimum=0, maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB")
        if not (gpus or vcores or memory):
            raise role.error("vcores", ASKS_NOTHING.format(memory="memoryMB"))
        roles.append(TraceRole(
            role.name("name", DEFAULT_ROLE),
            role.integer("instances", 1, minimum=1, maximum=MAX_INSTANCES_PER_ROLE, limit="MAX_INSTANCES_PER_ROLE"),
            gpus, vcores, memory, tuple(role.names("gpuTypes", []))))
    if not roles:
        raise entry.error("roles", "at least one role")
    names = [role.name for role in roles]
    if len(set(names)) != len(names):
        raise entry.error("roles", "unique role names", names)
    if sum(role.instances for role in roles) > MAX_INSTANCES_PER_JOB:
        raise entry.error("roles", f"at most {MAX_INSTANCES_PER_JOB:,} instances, all roles together "
                                   "(MAX_INSTANCES_PER_JOB)")
    return Submitted(entry.number("submit", minimum=0, maximum=MAX_DURATION_S, limit="MAX_DURATION_S"),
                     entry.name("id"),
                     entry.number("duration", minimum=0, exclusive_minimum=True, maximum=MAX_DURATION_S,
                                  limit="MAX_DURATION_S"),
                     entry.name("queue", DEFAULT_QUEUE), tuple(roles),
                     entry.integer("priority", 0, minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY, limit="MAX_PRIORITY"))
