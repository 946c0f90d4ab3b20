"""The one job table every trace reader produces and the replay engine consumes.

A trace says when each job was submitted, how long it ran and what it asked for; the
readers (:mod:`.philly`, :mod:`.tiresias`, :mod:`.native`) turn each format into these
types, so nothing downstream knows which format a job came from. Times are seconds
from the table's origin (the first submit, or the start of ``--window``); ``origin``
keeps that instant as a date for printing when the trace had one.
"""
from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class TraceRole:
    """One task role of a job: ``instances`` containers of the same shape, all part of
    the job's gang. Each asks ``gpus`` whole GPUs, or (``gpu_milli`` 1..999, ``gpus`` 0)
    a share of one GPU in milli-GPU, on a GPU of ``gpu_types`` when any are named."""

    name: str
    instances: int
    gpus: int
    vcores: float
    memory_mb: int
    gpu_types: tuple[str, ...] = ()
    gpu_milli: int = 0

    def __post_init__(self) -> None:
        if self.gpu_milli and not (0 < self.gpu_milli < 1000 and self.gpus == 0):
            raise ValueError(f"TraceRole {self.name}: gpu_milli is a share of one GPU, 1..999 with gpus 0; "
                             f"got gpus={self.gpus}, gpu_milli={self.gpu_milli}")

    @property
    def gpu_milli_each(self) -> int:
        """What one instance asks of GPUs, in milli-GPU (a whole GPU is 1000)."""
        return 1000 * self.gpus + self.gpu_milli


@dataclass(frozen=True)
class TraceJob:
    """A job as the trace gives it: every instance of every role is one gang."""

    job_id: str
    submit_s: float
    duration_s: float
    queue: str
    roles: tuple[TraceRole, ...]
    #: the job's priority where its trace gives one (higher may preempt lower: ``replay --preemption``)
    priority: int = 0
    #: GPUs of the whole gang (the job's gang size in GPU terms), and its container count.
    #: Summed once here because the replay reads them several times per job; a plain
    #: attribute, not ``cached_property`` (whose first read takes a lock on 3.11).
    gpus: int = field(init=False, repr=False, compare=False)
    instances: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", sum(role.instances * role.gpus for role in self.roles))
        object.__setattr__(self, "instances", sum(role.instances for role in self.roles))

    @property
    def gpu_milli(self) -> int:
        """GPUs of the whole gang in milli-GPU, shares included (``gpus`` counts whole GPUs only)."""
        return sum(role.instances * role.gpu_milli_each for role in self.roles)


@dataclass(frozen=True)
class JobTable:
    """Jobs sorted by (submit_s, job_id); ``source`` is the file read, ``sha256`` its
    bytes' digest (the run's identity), ``format`` the reader's name."""

    jobs: tuple[TraceJob, ...]
    source: str
    sha256: str
    format: str
    origin: datetime | None = None

    def __post_init__(self) -> None:
        keys = [(job.submit_s, job.job_id) for job in self.jobs]
        if keys != sorted(keys):
            raise ValueError("JobTable.jobs must be sorted by (submit_s, job_id)")

    def __len__(self) -> int:
        return len(self.jobs)


@dataclass(frozen=True)
class NodeShape:
    """What a trace that gives only GPU counts needs to know of the cluster: the GPUs of
    its GPU nodes (a gang larger than that spans nodes) and the vcores and memory that
    come with each GPU (an instance asks for its GPUs' share of the node, so CPU and
    memory never bind before GPUs do, as a GPU-only trace assumes)."""

    gpus: int
    vcores: float
    memory_mb: int

    def role(self, gpus: int, name: str = "worker") -> TraceRole:
        """One instance of ``gpus`` GPUs (at most a node's) with its share of the node."""
        return TraceRole(name, 1, gpus, *self.share(gpus))

    def share(self, gpus: int) -> tuple[float, int]:
        """(vcores, memory MB) that come with ``gpus`` GPUs: the node's, pro rata, rounded
        down to a milli-vcore and a MB so that G shares always fit one node."""
        vcores = math.floor(self.vcores * gpus / self.gpus * 1000) / 1000
        return vcores, self.memory_mb * gpus // self.gpus

    def gang_roles(self, gpus: int) -> tuple[TraceRole, ...]:
        """The roles of a gang of ``gpus`` GPUs: one instance when it fits a node, else
        ⌊gpus/G⌋ instances of G GPUs plus one of the remainder (the Philly rule)."""
        return _gang_roles(self, gpus)


@functools.lru_cache(maxsize=1024)
def _gang_roles(shape: NodeShape, gpus: int) -> tuple[TraceRole, ...]:
    """Cached: a trace has few gang sizes (Philly 10), and jobs of one size share one tuple."""
    if gpus <= shape.gpus:
        return (shape.role(gpus),)
    whole, rest = divmod(gpus, shape.gpus)
    roles = [TraceRole("worker", whole, shape.gpus, *shape.share(shape.gpus))]
    if rest:
        roles.append(TraceRole("rest", 1, rest, *shape.share(rest)))
    return tuple(roles)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sorted_jobs(jobs: list[TraceJob]) -> tuple[TraceJob, ...]:
    return tuple(sorted(jobs, key=lambda job: (job.submit_s, job.job_id)))
