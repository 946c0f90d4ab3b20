"""What a snapshot of a real cluster says, whichever engine it came from.

Every reader (:mod:`.yarn`, :mod:`.kubernetes`, :mod:`.slurm`) turns its engine's JSON
into one :class:`ClusterSnapshot`: the machines as :class:`NodeSpec` (the same record a
cluster file or the RM gives), which of them cannot take work now and what the engine
calls their state, and what runs where as :class:`RunningAllocation`, so that the
diagnosis can tell "waiting will help, job X holds it" from "waiting will not help".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from gangmaster.conf.fields import ConfigError, is_name
from gangmaster.conf.limits import MAX_DOMAIN_LEVELS
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.domains import LEVEL_NAME

_MISSING: Any = object()

#: The job name of usage a snapshot shows on a node but does not say whose it is
#: (YARN's nodes API without the containers of each application, a Slurm node listing
#: without squeue's jobs, or usage the job listing does not account for).
UNATTRIBUTED = "(unattributed)"


def named_domains(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """A node's network domains as an engine names them, (level, name) innermost first: those
    whose level is a level name and whose name is a name, at most MAX_DOMAIN_LEVELS."""
    named = [(level, name) for level, name in pairs if LEVEL_NAME.fullmatch(level) and is_name(name)]
    return tuple(named[:MAX_DOMAIN_LEVELS])


def first_few(items: list[str], keep: int = 5) -> str:
    """The first ``keep`` items, comma-separated, "..." after them when there are more (a
    note names examples, not a listing of thousands of hosts)."""
    return ", ".join(items[:keep]) + (", ..." if len(items) > keep else "")


class SnapshotError(ConfigError):
    """A snapshot file that cannot be read: names the file, the JSON path of the bad
    field (``nodes.node[3].state``) and what was expected there.

    A :class:`ConfigError`, so every command reports it as bad input (exit 2)."""

    def __init__(self, source: str, field: str, expected: str, got: Any = _MISSING):
        if got is _MISSING:
            super().__init__(source, field, expected)
        else:
            super().__init__(source, field, expected, got)


@dataclass(frozen=True)
class Usage:
    """Resources in use on one node, as its engine reports them."""

    vcores: float = 0.0
    memory_mb: int = 0
    gpus: int = 0


@dataclass
class EngineRead:
    """What one engine's reader found in its files, before the checks every engine shares
    (:func:`~gangmaster.tools.snapshots.load_snapshot`): each node with where it was read
    (``file: nodes.node[3]``), the unavailable ones with the engine's state word and free
    text, the allocations the job listing names, and what each node reports in use
    (``None`` where the engine reports usage only per job)."""

    nodes: list[tuple[NodeSpec, str]] = field(default_factory=list)
    unhealthy: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    named: list["RunningAllocation"] = field(default_factory=list)
    used: dict[str, Usage] | None = None
    notes: list[str] = field(default_factory=list)
    standing: dict[str, "JobStanding"] = field(default_factory=dict)
    preemption: "EnginePreemption | None" = None


@dataclass(frozen=True)
class RunningAllocation:
    """What one job holds on one host at the time of the snapshot.

    ``expected_end_s``: seconds after the snapshot was taken when the engine says the
    allocation ends at the latest (Slurm's ``end_time``, a pod's ``activeDeadlineSeconds``,
    a YARN application's lifetime timeout); ``None`` when it does not say. 0.0 when that
    time has already passed."""

    job: str
    host: str
    vcores: float
    memory_mb: int
    gpus: int
    expected_end_s: float | None = None


@dataclass(frozen=True)
class JobStanding:
    """What preemption reads of a running job where its engine says it: its ``priority`` in
    the engine's own terms (a pod's ``spec.priority`` from its PriorityClass, a YARN
    application's priority, a Slurm job's scheduling priority; None: not said), its
    ``queue`` (YARN's; "" elsewhere) and how long it had run when the snapshot was taken
    (``ran_s``, the work a preemption would lose; None: not said)."""

    priority: int | None = None
    queue: str = ""
    ran_s: float | None = None


@dataclass(frozen=True)
class EnginePreemption:
    """How the snapshot's engine preempts for a waiting job, as far as its files tell
    (:mod:`.preemption_rules`): ``engine`` ("Kubernetes"), ``state`` (on, off or unknown:
    :data:`~gangmaster.am.core.victims.ON`...), ``why`` it is said so, and its ``rule``
    (whom a waiting job may preempt: :data:`~gangmaster.am.core.victims.MayPreempt`; None
    when the files do not carry what the engine decides by)."""

    engine: str
    state: str
    why: str
    rule: Callable | None


@dataclass(frozen=True)
class ClusterSnapshot:
    """A real cluster at one moment, read from one engine's JSON files.

    ``specs`` lists every node, healthy or not, with its capacity (what the engine lets
    jobs use: YARN's total resource, a Kubernetes node's allocatable, Slurm's CPUs and
    real memory), and the ports 20000-65535 (no engine reports ports). ``unhealthy`` maps each node that cannot take new work now to the
    engine's word for why ("UNHEALTHY", "NotReady", "cordoned", "DRAIN", ...);
    ``unhealthy_reasons`` the engine's free text for it where it gives one (a YARN
    health report, a Slurm reason). ``running`` is what holds resources now, by job and
    host; per host it never adds up to more than the host's capacity.

    ``taken_at`` is when the snapshot was taken (seconds since the epoch) and
    ``taken_at_from`` where that came from (the files' own time, or the modification time
    of the newest file when they carry none); ``notes`` says what the files could not tell
    (usage that could not be attributed to a job, capacities not reported, ...).
    ``fields_read`` names the JSON fields the reader used, for documentation."""

    format: str
    sources: tuple[Path, ...]
    specs: list[NodeSpec]
    unhealthy: dict[str, str]
    running: list[RunningAllocation]
    fields_read: tuple[str, ...]
    unhealthy_reasons: dict[str, str] = field(default_factory=dict)
    taken_at: float | None = None
    taken_at_from: str = ""
    notes: tuple[str, ...] = ()
    #: each running job's priority, queue and time run, where the engine says them
    standing: dict[str, JobStanding] = field(default_factory=dict)
    #: how the engine preempts (None: a reader that does not say)
    preemption: EnginePreemption | None = None

    @property
    def healthy_hosts(self) -> list[str]:
        return [s.host for s in self.specs if s.host not in self.unhealthy]
