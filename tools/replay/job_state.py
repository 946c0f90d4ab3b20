"""What a replay keeps of its jobs' fates: columns indexed by job number (a job's row in
the table), filled as jobs start and end, and handed to the metrics as numpy columns
without a per-job object in between.

**Why columns.** A replay of the full Philly trace has 82,247 jobs; keeping each one's start,
end, hosts, gang wait and outcome on its own record meant gathering them record by record
into :class:`JobOutcome` values and again into the metrics' columns (1.8 % of the replay's
profile, and every reader of the figures looped over the values again: BENCHMARKS.md,
"Session 15 — the replay's job state in columns"). Here each is one list, written at the job's row as the driver learns it (a
list's item is set in C; a numpy array's costs a boxed scalar per write) and turned
into a numpy column once, at the end, in C (:meth:`JobState.columns`; ``None`` becomes
NaN). The table's own columns (submit, duration, GPUs, queue) are read once too.

**What stays per job.** A job waiting in its queue is still an object the queue policy
orders and reads (:class:`~.engine._Job`: its row, trace, queue, AM or lane task); only
what becomes of it lives here.

**The outcomes as values.** :class:`JobOutcomes` is the result's ``jobs``: a sequence of
:class:`JobOutcome` built from the columns only when read one by one (the per-job files,
the tests), while the metrics read its :attr:`JobOutcomes.columns` directly.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from gangmaster.selectors.values import value

from .metrics import JobColumns

__all__ = ["JobOutcome", "JobOutcomes", "JobState"]


@value
class JobOutcome:
    """What became of one job: a value (as the RM protocol's messages are, not frozen: a
    frozen ``__init__`` costs four times as much)."""

    job_id: str
    queue: str
    submit_s: float
    start_s: float | None
    end_s: float | None
    duration_s: float
    gpus: int
    instances: int
    hosts: tuple[str, ...]      # distinct hosts, in the gang's rank order
    racks: tuple[str, ...]      # distinct racks, likewise
    gang_wait_s: float          # last task start - first task start (0: all or nothing)
    outcome: str                # "succeeded" | "never-fits" | "unfinished" | "failed" | "dropped"


class JobState:
    """The fate of every job of one replay, a list per field indexed by the job's row:
    ``start`` and ``end`` (None until it starts or ends), ``hosts`` (its distinct hosts in
    rank order, () until it starts), ``gang_wait`` (last task start − first), ``outcome``."""

    __slots__ = ("start", "end", "hosts", "gang_wait", "outcome")

    def __init__(self, jobs: int):
        self.start: list[float | None] = [None] * jobs
        self.end: list[float | None] = [None] * jobs
        self.hosts: list[tuple[str, ...]] = [()] * jobs
        self.gang_wait: list[float] = [0.0] * jobs
        self.outcome: list[str] = ["unfinished"] * jobs

    def outcomes(self, traces, queues: list[str], submit_s: list[float], rack_of: dict[str, str]) -> "JobOutcomes":
        """The jobs' outcomes, in table order: ``traces`` the table's jobs, ``queues`` and
        ``submit_s`` their RM queues and (scaled) submit times, ``rack_of`` each host's rack."""
        return JobOutcomes(self, traces, queues, submit_s, rack_of)


class JobOutcomes(Sequence):
    """A replay's :class:`JobOutcome` values in table order, made from its :class:`JobState`
    when first read one by one; :attr:`columns` are the metrics' columns, made from the
    same lists without them. Equal to any sequence of the same outcomes (a tuple too)."""

    def __init__(self, state: JobState, traces, queues: list[str], submit_s: list[float], rack_of: dict[str, str]):
        self._state, self._traces, self._queues, self._submit_s = state, traces, queues, submit_s
        # the racks worked out once per distinct set of hosts
        self._racks = {gang: _racks_of(gang, rack_of) for gang in set(state.hosts)}

    @cached_property
    def _values(self) -> tuple[JobOutcome, ...]:
        s, traces = self._state, self._traces
        return tuple(map(JobOutcome, [t.job_id for t in traces], self._queues, self._submit_s, s.start, s.end,
                         [t.duration_s for t in traces], [t.gpus for t in traces], [t.instances for t in traces],
                         s.hosts, map(self._racks.__getitem__, s.hosts), s.gang_wait, s.outcome))

    @cached_property
    def columns(self) -> JobColumns:
        """The jobs as the metrics' numpy columns, each made in C from one list (NaN where a
        job never started or ended, as :meth:`JobColumns.of` of the values gives)."""
        s, traces = self._state, self._traces
        n = len(traces)
        if not n:
            return JobColumns.of(())
        start = np.array(s.start, dtype=float)
        end = np.array(s.end, dtype=float)
        end[np.isnan(start)] = math.nan
        racks = self._racks
        return JobColumns(np.array(self._submit_s, dtype=float), start, end,
                          np.fromiter((t.duration_s for t in traces), dtype=float, count=n),
                          np.fromiter((t.gpus for t in traces), dtype=np.int64, count=n),
                          np.fromiter(map(len, s.hosts), dtype=np.int64, count=n),
                          np.fromiter((len(racks[h]) for h in s.hosts), dtype=np.int64, count=n),
                          np.array(s.gang_wait, dtype=float), np.array(self._queues, dtype=object),
                          np.array(s.outcome, dtype=object))

    def __len__(self) -> int:
        return len(self._traces)

    def __getitem__(self, index):
        return self._values[index]

    def __iter__(self):
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JobOutcomes):
            return self._values == other._values
        if isinstance(other, (tuple, list)):
            return self._values == tuple(other)
        return NotImplemented

    __hash__ = None   # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JobOutcomes({self._values!r})"


def _racks_of(hosts: tuple[str, ...], rack_of: dict[str, str]) -> tuple[str, ...]:
    """The distinct racks of ``hosts``, in their order."""
    if not hosts:
        return ()
    return (rack_of[hosts[0]],) if len(hosts) == 1 else tuple(dict.fromkeys([rack_of[h] for h in hosts]))
