"""A trace's job as the AM reads it: a :class:`~gangmaster.am.spec.jobspec_model.JobSpec`
built directly from a :class:`~.trace.TraceJob` (no YAML: a replay builds tens of
thousands of them).

Every role of the job is one gang (all or nothing), retried never (a trace records
how long a job ran, not how it failed), asks its GPUs, vcores and memory, and in
an isolated queue the queue's node label (see :mod:`.engine`). What a task does in
virtual time — run the trace's duration, exit 0 — goes to the simulator's workload
model through the job's simulation keys, as a job file's would.
"""
from __future__ import annotations

from functools import lru_cache
from operator import attrgetter

from gangmaster.am.spec.jobspec_model import JobSpec, RetryPolicy, RoleSpec, shaped_role

from .trace import TraceJob, TraceRole

#: What each task's command would be on a real cluster; in virtual time nothing runs.
TASK_COMMAND = "true"


def job_spec(job: TraceJob, node_label: str | None = None) -> JobSpec:
    """The JobSpec of ``job``: one gang of all its roles, each task lasting the trace's
    duration (a replay's ``time_scale`` stretches arrivals, never durations)."""
    shape = _shape_spec(job.roles, node_label)
    # every role's keys are the same (read-only) mapping
    simulation = dict.fromkeys(shape.gangs[0], {"simulatedDurationSeconds": float(job.duration_s)})
    return shape.for_job(job.job_id, f"trace job {job.job_id}", simulation, job.priority)


@lru_cache(maxsize=4096)
def _shape_spec(roles: tuple[TraceRole, ...], node_label: str | None) -> JobSpec:
    """The JobSpec every job of these roles shares but for its name, source and simulation
    keys (:meth:`JobSpec.for_job` gives each job its own): its roles, gang and policies are
    built once per shape, not once per job (a trace has a few hundred shapes and tens of
    thousands of jobs)."""
    specs = tuple([_role(role, node_label) for role in roles])
    shape = JobSpec(name="", roles=specs, gangs=(tuple([role.name for role in specs]),),
                    retry=RetryPolicy("job", 1), job_retry_count=0, barrier_timeout_s=None, parameters={},
                    unused=(), source="", simulation={})
    shape.named_gangs, shape.total_instances   # what the AM reads of every job: worked out here, once
    return shape


@lru_cache(maxsize=4096)
def _role(role: TraceRole, node_label: str | None) -> RoleSpec:
    """One RoleSpec per role shape and label, shared by the jobs of that shape (a RoleSpec
    is immutable; a trace has a few hundred shapes and tens of thousands of jobs)."""
    # A share of one GPU is the role's gpu_milli (its gpus 0).
    return shaped_role(role.name, role.instances, role.gpus, role.vcores, role.memory_mb, role.gpu_milli,
                       role.gpu_types, node_label, command=TASK_COMMAND)


#: what placing one role depends on (read in C: a backfill replay works it out for every job)
_ROLE_SHAPE = attrgetter("instances", "gpus", "gpu_milli", "vcores", "memory_mb", "gpu_types")


def gang_shape(job: TraceJob) -> tuple:
    """What placing the job's gang depends on, besides the cluster: jobs of one queue with
    the same shape fit or do not fit alike."""
    return tuple(map(_ROLE_SHAPE, job.roles))


def job_roles(job: TraceJob, node_label: str | None = None) -> tuple[RoleSpec, ...]:
    """The roles of ``job``'s one gang as its AM places them (those of :func:`job_spec`'s
    JobSpec, shared by every job of the shape), for the single-task lane (:mod:`.lane`)."""
    return _shape_spec(job.roles, node_label).named_gangs[0][1]
