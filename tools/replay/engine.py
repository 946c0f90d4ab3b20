"""Replay a trace through the real AM and RM: every gang gets an ApplicationMaster that
places it with select() and the Selector plugins, asks the simulated RM for every
instance, starts them when all are granted, and finishes when the simulated workload
ends them — the same code ``gangmaster run`` runs, in virtual time. A job of one task
(most of a trace) goes through the single-task lane (:mod:`.lane`), which makes the
same decisions with the same code, step for step, without an AM, an application and a
container of its own (``replay(..., lane=False)`` sends it through its AM: a test holds
the two equal).

**Event-driven.** Nothing heartbeats on a clock of its own. With ``heartbeat_s == 0``
an AM is called at the instant something concerns it: its job is tried (submitted,
or capacity freed in its queue's nodes), or one of its containers ended. All that
happens at one instant is taken in before the queues are tried (one *pass* per
instant, at the instant's end: the driver runs the clock an instant at a time,
:meth:`~gangmaster.tools.rmsim.clock.VirtualLoop.run_instants`, and the pass is not an event
of its own; the jobs submitted at one instant are one event). With ``heartbeat_s = h > 0`` the AMs hear of events and the queues are
tried only at multiples of h (every AM heartbeats in step, every h seconds), so a
job waits up to h for each step, as with real heartbeats.

**Queues.** A job's queue is an RM queue of the same name. The queue policy
(:mod:`.queue_policy`) decides which waiting job may try to start: strict FIFO per
queue, or backfill. A job is admitted — its application submitted and its AM started —
when its queue first offers it; jobs behind a blocked head are table rows, not AMs.
A cluster with ``queue_hosts`` isolates queues: each queue's nodes carry a node label
named after the queue, and its jobs ask for that label (YARN's node labels, a
queue's accessible partition), so they can never land elsewhere; jobs of a queue not
listed ask for :data:`SHARED_LABEL`, given to the nodes no queue lists.

**One view of the cluster, one tie order.** All AMs share one :class:`ClusterTracker`
that the driver brings up to date from the RM's changed nodes before an AM places a
gang, reading their rows of the RM's ledger (the rows the ledger saw change,
``NodeColumns.watch_rows``; ``ClusterTracker.take_rows``: what their node reports say,
without building one each); the RM sends the AMs no node updates (each AM
would otherwise hear of every change since its last call). They share their selection pipelines too: one order of the nodes
for exact ties, drawn from ``seed`` (:func:`tie_rule`), as one scheduler breaks ties,
and one node index kept on the shared view, which each placement's copy starts from.
AMs keep no journal, log nothing, and are dropped when their job ends;
only a :class:`JobOutcome` is kept.

**How replay stays honest.** Every job goes through the code ``gangmaster run`` runs:
its application is submitted to the RM simulator's core and its AM registers; the AM
places the gang with select(), the Selector plugin and gang placement on its view of
the cluster, asks the RM for every instance on the hosts it chose, the RM's scheduling
pass grants them, the AM opens the gang's barrier and starts every container, the
simulated NodeManager's tasks arrive at that barrier and run the trace's duration, and
the AM hears of their end from an allocate response, decides, and unregisters. No
decision is made anywhere else. What the replay does differently, each for a measured
cost (BENCHMARKS.md, "issue 13"), and why none changes a decision:

* its in-process RM client is *trusted* (:class:`~gangmaster.protocol.rm_client.InProcessRMClient`):
  the RM does not re-check the *form* of what the AM's own code built (types, number
  ranges, names, list and launch sizes), while everything a call *asks* is checked
  against the RM's state as always (known hosts, ids, states, what can ever fit).
  Calls from the wire (``gangmaster rm serve``) and ``gangmaster run``'s simulator are
  checked in full. A trace's gangs (a few tasks, a few dozen variables each) are far
  inside every launch limit;
* its AMs keep no journal (:class:`~gangmaster.am.core.journal.NoJournal`): a replayed AM is
  never restarted and nobody reads its records, so the AM builds none. It makes every
  decision and every check of state as it would with a journal
  (tests/unit/test_journal_records.py replays the same jobs with a memory journal and
  with none: every outcome, start, end, host and the timeline are equal). Its log is
  quiet, so lines that cost work are not built;
* AMs share one view of the cluster and one set of selection pipelines (above);
* the clock runs fewer events, in the same order: the jobs submitted at one instant
  arrive in one event (in table order, as their own events ran), and the instant's
  pass runs at its end (``VirtualLoop.run_instants`` calls it after each instant) rather than as an event
  scheduled by the first thing that needed it. Both ran after every event of their
  instant already on the clock (arrivals are scheduled first, a task's exit when it
  starts), and a replay schedules nothing else for the current instant in between, so
  the order of everything that decides is the same; a flush's own news (a job that
  ended while its AM heard of its containers) is taken in by that flush, not by a
  second, empty one. ``ReplayResult.events`` counts the clock's events, so it is
  smaller than before this (94,881 → 38,000 for the first 20,000 Philly jobs) while
  every outcome, the timeline and the placements are unchanged (compared byte for byte
  with the engine that ran an event per job and per flush, on FIFO, backfill, drop, a
  positive heartbeat and a contended cluster: BENCHMARKS.md, "Session 7 — rmcore").
  The arrival instants take their places in that order up front, but only the next of
  them is on the clock's heap at a time (``VirtualLoop.call_each``), so every other
  event's push and pop is not paid against tens of thousands of arrivals to come;
* the RM's answers cost less to make, not less checked: its per-call totals (running
  applications, what the queues use) are kept as they change instead of summed per
  call, an allocate that carries no asks, releases or blacklist changes (how an AM
  hears that its containers ended) checks none, events are built only for the kinds
  someone subscribed to, an ask's resource is compiled once per distinct value, and the
  protocol's messages are slotted values built by plain assignment (not frozen: nothing
  changes a message once built, and a frozen ``__init__`` costs four times as much).

Kept whole on purpose: a task's OpenPAI environment is built at every launch, because
the simulated workload tells which task it runs the way a real program would, by that
environment (job, role, index, attempt, barrier address and token); one AM per job (its
construction is a small part of a job's cost, most of it the gang's own state); and two
allocate calls per job (the first asks, is granted and launches; the second is how the
AM hears that its containers ended, through the RM protocol as a live AM does: on the
RM's side it is now a quiet heartbeat that checks and schedules nothing it does not
carry).

Same inputs, same options → the same result (every tie is broken by seeded orders).
"""
from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import operator
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

from gangmaster.am.spec.am_settings import AMSettings
from gangmaster.am.core.cluster_tracker import ClusterTracker
from gangmaster.am.core.journal import NoJournal
from gangmaster.am.core.lifecycle import ROLE_ACQUIRING
from gangmaster.am.core.master import ApplicationMaster
from gangmaster.am.ops.metrics import AMMetrics
from gangmaster.am.ops.progress_log import QuietLog
from gangmaster.am.core.reservation_plan import (DEFAULT_CLUSTER_RESERVATIONS, DEFAULT_MAX_RESERVATIONS,
                                                 ReservationBounds)
from gangmaster.protocol.rm_protocol import ApplicationSubmission
from gangmaster.conf import limits
from gangmaster.selectors.candidates import kept_node_index
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings

from ..rmsim.core import RMEvent
from ..rmsim.queues import Queue
from ..rmsim.simulation import Simulation
from .clusters import ReplayCluster
from .job_specs import gang_shape, job_spec
from .job_state import JobOutcome, JobOutcomes, JobState
from .lane import SingleTaskLane, takes
from .preempting import DEFAULT_GRACE_S, Preempting, Preemption
from .queue_policy import QUEUE_POLICIES, dropped, queue_for
from .reservations import ReplayReservations
from .timeline import Timeline, TimelineRecorder
from .trace import JobTable, TraceJob
from .workload import FragmentationRecorder, FragmentationSeries, observe, workload_shapes

__all__ = ["ReplayOptions", "JobOutcome", "ReplayResult", "Timeline", "replay", "SHARED_LABEL"]

#: The node label of the nodes no isolated queue lists, asked for by jobs of unlisted queues.
SHARED_LABEL = "shared"
#: The log of every replayed AM: it keeps nothing, so one serves them all.
_QUIET = QuietLog()
#: The journal of every replayed AM: it keeps nothing either (its ``closed`` only spares a
#: closing AM a write that would keep nothing), so one serves them all.
_NO_JOURNAL = NoJournal()
#: A job's submit time (as the replay's clock reads it), and the queue its trace names.
_SUBMIT_S, _QUEUE = operator.attrgetter("submit_s"), operator.attrgetter("queue")
#: The RM queue of jobs whose trace names none.
DEFAULT_QUEUE = "default"
#: The request a strategy's node key is asked for when the shared view's index is kept
#: (a node key depends on the node alone; see Selector.node_key).
_ANY_REQUEST = SelectionRequest("any", ResourceDescriptor())


@dataclass(frozen=True)
class ReplayOptions:
    selector: str = "job-packing"
    queue_policy: str = "fifo"          # | "backfill" | "reserve" | "drop"
    seed: int = 0
    heartbeat_s: float = 0.0
    time_scale: float = 1.0             # submit times are multiplied by it (> 1: arrivals spread out)
    #: queue policy reserve: at most this many jobs of a queue hold a reservation at once
    max_reservations: int = DEFAULT_MAX_RESERVATIONS
    #: queue policy reserve: at most this many jobs of the cluster (of each partition) at once,
    #: and only jobs that waited ``reserve_after_s`` (see ReservationBounds)
    cluster_reservations: int = DEFAULT_CLUSTER_RESERVATIONS
    reserve_after_s: float = 0.0
    preemption: bool = False            # a waiting job may preempt lower-priority jobs (.preempting)
    preemption_grace_s: float = DEFAULT_GRACE_S
    #: (queue, priority, guaranteed GPUs) of the RM queues that have them (``--queue-priority``)
    queue_priorities: tuple[tuple[str, int, int], ...] = ()
    #: the hosts in the order they win exact ties, replacing the strategy's tie order (fill mode
    #: with the FGD artifact's draws: its renamed nodes, ``openb.FillPlan.tie_hosts``); empty:
    #: the strategy's tie rule (the seed's order, or the host names)
    tie_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.queue_policy not in QUEUE_POLICIES:
            raise ValueError(f"queue_policy: expected one of {', '.join(QUEUE_POLICIES)}, got {self.queue_policy!r}")
        if not (self.heartbeat_s >= 0 and math.isfinite(self.heartbeat_s)):
            raise ValueError(f"heartbeat_s: expected a number >= 0, got {self.heartbeat_s}")
        if not (isinstance(self.max_reservations, int) and self.max_reservations >= 1):
            raise ValueError(f"max_reservations: expected an integer >= 1, got {self.max_reservations!r}")
        if not (isinstance(self.cluster_reservations, int) and self.cluster_reservations >= 1):
            raise ValueError(f"cluster_reservations: expected an integer >= 1, got {self.cluster_reservations!r}")
        if not (self.reserve_after_s >= 0 and math.isfinite(self.reserve_after_s)):
            raise ValueError(f"reserve_after_s: expected a number >= 0, got {self.reserve_after_s}")
        if not (self.time_scale > 0 and math.isfinite(self.time_scale)):
            raise ValueError(f"time_scale: expected a number > 0, got {self.time_scale}")
        if not (self.preemption_grace_s >= 0 and math.isfinite(self.preemption_grace_s)):
            raise ValueError(f"preemption_grace_s: expected a number >= 0, got {self.preemption_grace_s}")


@dataclass(frozen=True)
class ReplayResult:
    jobs: Sequence[JobOutcome]     # in table order (a replay's: JobOutcomes, whose .columns the metrics read)
    timeline: Timeline
    wall_s: float
    events: int                    # events the virtual clock ran
    select_calls: int              # gang placement decisions (each places every instance of a gang)
    select_s: float                # their wall time in all
    tie_rule: str
    options: ReplayOptions
    fragmentation: FragmentationSeries | None = None   # the FGD paper's measure, sampled (.workload)
    #: queue policy reserve: reserved GPUs held free and idle for the gangs they wait for,
    #: GPU-seconds, and the reservations planned (0 under the other policies)
    reservation_hold_gpu_s: float = 0.0
    reservations_planned: int = 0
    preemptions: tuple[Preemption, ...] = ()           # the gangs preempted, in order (--preemption on)


def replay(table: JobTable, cluster: ReplayCluster, options: ReplayOptions = ReplayOptions(),
           progress: Callable[[int, int], None] | None = None, lane: bool = True) -> ReplayResult:
    """Replay every job of ``table`` on ``cluster``; ``progress(done, total)`` is called
    as jobs end (and once at the end). The cycle collector is off while it runs
    (:func:`_collector_paused`) and left as it was found. ``lane``: the jobs of one task
    go through the single-task lane (:mod:`.lane`); False sends every job through its
    AM (the same decisions: the lane's differential test compares the two)."""
    get_selector(options.selector)   # an unknown name fails here, naming the known ones
    started = time.perf_counter()
    with _collector_paused():   # the outcomes too: made with the collector on, their many objects
        run = _Replay(table, cluster, options, progress, lane)   # would make it scan the run's heap
        run.run()                                                # again and again (a tenth of the time)
        result = ReplayResult(run.outcomes(), run.recorder.timeline(), time.perf_counter() - started,
                              run.sim.loop.events_run, *run.selection_cost(), tie_rule(options), options,
                              run.fragmentation.series() if run.fragmentation is not None else None,
                              *((run.reservations.hold_gpu_s, run.reservations.planned) if run.reservations
                                else (0.0, 0)),
                              tuple(run.preempting.done) if run.preempting is not None else ())
        del run                 # its cycles are collected on the way out
    return result


@contextmanager
def _collector_paused():
    """The cycle collector off for the whole run, and left as it was found. The
    collector's own schedule cost a replay about a fifth of its time (its passes scan every
    live job's AM and the RM's records, again and again; measured in session 8).

    Everything is collected once, on the way out. The run leaves cycles (the RM's event
    callbacks hold the driver, a view's memos hold its walks) and cuts loose some made
    before it (a module's memo of idle views drops an earlier run's view, with its node
    indexes): left to the collector they would reach the oldest generation and stay while
    a process replays again and again (a family's workers grew by 40-75 MB a replay,
    session 17). The survivors go to the oldest generation, not the youngest, where the
    first allocation after the collector is back would traverse them (a fifth of a second
    for 10,000 jobs)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        if was_enabled:
            gc.enable()


def tie_rule(options: ReplayOptions) -> str:
    """How the replay breaks ties, for the report (REPLAY.md: tie-breaking is part of the policy)."""
    order = (f"the given order of the nodes (the FGD artifact's, renamed with seed {options.seed})"
             if options.tie_hosts else f"one order of the nodes drawn from seed {options.seed}")
    return (f"{options.selector}: equal keys ranked by {order}, "
            "the same for every job; a gang's later instances prefer the job's hosts, then their racks")


class _Job:
    """A job being replayed: its table row, its AM while it has one (or what the single-task
    lane keeps of it, :class:`~.lane.LaneTask`, while the lane runs it). It waits in its queue
    as itself: a queue policy reads its ``order`` (its row, until a preemption requeues it)
    and ``shape`` (:class:`~.queue_policy.Waiting`'s fields; the shape only where the policy
    reads it). What becomes of it (start, end, hosts, gang wait, outcome) is in the run's
    :class:`~.job_state.JobState` at its ``row``; ``start_s`` and ``hosts`` read it there."""

    __slots__ = ("order", "row", "trace", "submit_s", "gpus", "queue", "label", "partition", "shape", "am", "lane",
                 "state")

    def __init__(self, row: int, trace: TraceJob, submit_s: float, queue: str, label: str | None,
                 partition: str | None, state: JobState):
        self.order = self.row = row
        self.trace, self.submit_s = trace, submit_s   # (submit_s: the trace's, scaled)
        self.queue, self.label, self.partition = queue, label, partition
        self.gpus = trace.gpus   # read at every start, end and pass: summed once
        self.shape = None
        self.am: ApplicationMaster | None = None
        self.lane = None
        self.state = state

    @property
    def start_s(self) -> float | None:
        return self.state.start[self.row]

    @property
    def hosts(self) -> tuple[str, ...]:
        return self.state.hosts[self.row]


class _Replay:
    def __init__(self, table: JobTable, cluster: ReplayCluster, options: ReplayOptions,
                 progress: Callable[[int, int], None] | None, lane: bool = True):
        self.options, self.progress = options, progress
        isolated = dict(cluster.queue_hosts or {})
        named = set(map(_QUEUE, table.jobs))   # (every job's, in C; then the few distinct names)
        queue_names = sorted({name or DEFAULT_QUEUE for name in named} | set(isolated)) or [DEFAULT_QUEUE]
        specs, owner = _labelled(cluster, isolated)
        # Every job is an application, and in fill mode none ends: the RM takes as many at
        # once as the table has jobs (the readers hold a table to MAX_TRACE_JOBS), not the
        # RM_MAX_RUNNING_APPS it holds clients it does not know to.
        self.sim = Simulation(specs, [Queue(name) for name in queue_names], seed=options.seed, node_updates=False,
                              trusted_client=True, max_running_apps=max(limits.RM_MAX_RUNNING_APPS, len(table.jobs)))
        self.core = self.sim.core
        for name, priority, guaranteed in options.queue_priorities:   # (what preemption reads of a queue)
            if name not in self.core.queues:
                raise ValueError(f"queue_priorities: queue {name!r} is not one of the trace's: "
                                 f"{', '.join(queue_names)}")
            self.core.queues[name].priority, self.core.queues[name].guaranteed_gpus = priority, guaranteed
        self.rack_of = {spec.host: spec.rack for spec in specs}
        self.tracker = ClusterTracker(self.core.cluster_nodes)
        self.ledger = self.core.ledger   # the view follows its rows (_sync): the same nodes in the same order
        if list(self.tracker.view.hosts) != list(self.ledger.hosts):
            raise RuntimeError("replay: the shared view's nodes are not the RM ledger's, in its order")
        self._changed_rows = self.ledger.watch_rows()   # the ledger's rows changed since the last _sync
        self.pipelines: dict[str, SelectionPipeline] = {}   # shared by every AM (see ApplicationMaster)
        self._warmed_view = None   # the view _warm gave its indexes, and for how many pipelines
        self._warmed_pipelines = 0
        self.metrics = AMMetrics()
        # No live diagnoses: nobody reads a replayed AM's log, and a queue head that waits
        # would be diagnosed once a minute of virtual time. Nor a wait limit: a trace's job
        # waits as long as its queue makes it.
        self.settings = AMSettings(explain_after_s=None)
        self.selection = SelectionSettings(selector=options.selector, seed=options.seed)
        # The shared pipeline is built here, as the AMs would build it (they find it and use it
        # as is), so that its selector hears of the workload before the first job.
        self.shapes = workload_shapes(table)
        pipeline = SelectionPipeline(self.selection, get_selector(options.selector,
                                                                  self.selection.candidate_nodes_factor),
                                     options.tie_hosts)
        observe(pipeline.selector, self.shapes)
        self.pipelines[options.selector] = pipeline
        # Partitions: an isolated queue's nodes, or (None) the nodes no queue owns.
        self.partition_gpus: dict[str | None, int] = {}
        for spec in specs:
            partition = owner.get(spec.host)
            self.partition_gpus[partition] = self.partition_gpus.get(partition, 0) + spec.gpus
        self.free_gpus = dict(self.partition_gpus)
        self.queues = {name: queue_for(options.queue_policy) for name in queue_names}
        self._drops = options.queue_policy == "drop"   # only that policy gives up on jobs (queue_policy.dropped)
        # ---- queue policy reserve: one book of reservations for every queue (.reservations)
        self.reservations: ReplayReservations | None = None
        if options.queue_policy == "reserve":
            self.reservations = ReplayReservations(self.sim.loop.now, self.ledger, lambda: self.tracker.view,
                                                   self._sync, owner,
                                                   ReservationBounds(options.cluster_reservations,
                                                                     options.reserve_after_s), self._reserve_rank(table))
            for queue in self.queues.values():
                queue.book, queue.max_reservations = self.reservations, options.max_reservations
        # ---- end reserve
        self.partition_queues: dict[str | None, list[str]] = {}
        self.queue_partition: dict[str, str | None] = {}
        for name in queue_names:
            partition = self.queue_partition[name] = name if name in isolated else None
            self.partition_queues.setdefault(partition, []).append(name)
        # The jobs, made column by column (in C: a trace has tens of thousands): each in its
        # queue, which gives its node label (none when no queue is isolated) and partition.
        traces = self.table_jobs = table.jobs
        queues = list(map({name: name or DEFAULT_QUEUE for name in named}.__getitem__, map(_QUEUE, traces)))
        label_of = {name: (name if name in isolated else SHARED_LABEL) if isolated else None for name in queue_names}
        submit_s = map(operator.mul, map(_SUBMIT_S, traces), itertools.repeat(options.time_scale))
        self.state = JobState(len(traces))
        self.jobs: list[_Job] = list(map(_Job, itertools.count(), traces, submit_s, queues,
                                         map(label_of.__getitem__, queues),
                                         map(self.queue_partition.__getitem__, queues), itertools.repeat(self.state)))
        # Whether the queues read a job's shape (every queue has the one policy; one that does not
        # say is given it): then each job's is worked out once, here.
        if getattr(self.queues[queue_names[0]], "by_shape", True):
            for job in self.jobs:
                job.shape = gang_shape(job.trace)
        self.by_app: dict[str, _Job] = {}
        self.done = 0   # jobs ended (counted for progress, when there is one to tell)
        self.recorder = TimelineRecorder(sum(spec.gpus for spec in specs))
        span = (table.jobs[-1].submit_s - table.jobs[0].submit_s) * options.time_scale if table.jobs else 0.0
        self.fragmentation = (FragmentationRecorder(self.shapes, self.recorder.capacity_gpus, span)
                              if self.shapes is not None else None)
        self.allocated = 0
        self.waiting_jobs = 0
        self.pending_gpus = 0
        self.hol: dict[str, int] = {}       # queue -> free GPUs held back by its blocked head
        self.hol_total = 0                   # their sum
        # Read at every flush, start and end: looked up once.
        loop = self.sim.loop
        self._now = loop.now
        self._add_job, self._forget_job = self.sim.workload.add_job, self.sim.workload.forget_job
        self._submit = self.sim.client.submit
        self._beat = options.heartbeat_s
        # Every AM is made alike but for its job and application (_admit). Its clock is the
        # loop's own (Simulation.now is a call more, ten times a job).
        self._new_am = partial(ApplicationMaster, rm=self.sim.client, now=self._now, work_dir="",
                               settings=self.settings, selection=self.selection, barrier=self.sim.barrier,
                               metrics=self.metrics, journal=_NO_JOURNAL, log=_QUIET, tracker=self.tracker,
                               shared_pipelines=self.pipelines)
        # The next instant the fragmentation is sampled at (never, without a recorder).
        self._fragmentation_at = self.fragmentation.next_at if self.fragmentation is not None else math.inf
        self._dirty: set[str] = set()        # queues to try at the end of this instant
        self._wake: dict[str, _Job] = {}     # app id -> job whose AM is to heartbeat at the end of this instant
        self._flush_pending = False          # the end-of-instant work is scheduled
        self.core.subscribe(self._on_container_finished, kinds=("container_finished",))
        # (with preemption every job goes through its AM: the lane's tasks are no RM application
        # a preemption could take, and its jobs would never ask for one)
        self.lane = (SingleTaskLane(self.tracker, self.selection, self.pipelines, self.core, self.sim.node_manager,
                                    self.metrics.selection_latency.observe, self._lane_exited)
                     if lane and not options.preemption else None)
        #: preemption (--preemption on): whom a waiting job may preempt, what was preempted
        self.preempting = (Preempting(self.core, self.by_app, options.preemption_grace_s, len(self.jobs))
                           if options.preemption else None)

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        loop = self.sim.loop
        # One event per instant of arrivals, not one per job (the table is in submit order: a
        # time's jobs are next to each other), in table order; only the next on the clock's heap.
        instants = itertools.groupby(self.jobs, _SUBMIT_S)
        loop.call_each(self._submitted, [(when, (list(jobs),)) for when, jobs in instants])
        if self._beat == 0:   # the flush at the end of each instant that asked for one
            loop.run_instants(self._flush)
        else:   # the flushes are the clock's events, at the heartbeats
            loop.run()
        if self.progress is not None:
            self.progress(self.done, len(self.jobs))

    def _submitted(self, jobs: list[_Job]) -> None:
        """The jobs submitted at this instant join their queues (in table order)."""
        queues, dirty = self.queues, self._dirty
        gpus = 0
        for job in jobs:
            queues[job.queue].add(job)
            gpus += job.gpus
            dirty.add(job.queue)
        self.waiting_jobs += len(jobs)
        self.pending_gpus += gpus
        if not self._flush_pending:
            self._schedule_flush()

    def _on_container_finished(self, event: RMEvent) -> None:
        job = self.by_app.get(event.app_id)
        if job is not None and not job.am.done:   # (a job known by its application has its AM)
            self._wake[event.app_id] = job
            if not self._flush_pending:
                self._schedule_flush()

    def _lane_exited(self, job: _Job) -> None:
        """The task of a job the lane runs exited: the driver hears of it at the flush, as
        it hears of an AM's containers (in the same turn: the wake keeps the order they ended in)."""
        self._wake[job.order] = job
        if not self._flush_pending:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        """Have :meth:`_flush` run at the end of this instant (``heartbeat_s`` 0: once every
        event due now has run, not as an event of its own: :meth:`run` drives the clock an
        instant at a time) or at the next heartbeat. Called only while none is pending."""
        self._flush_pending = True
        beat = self._beat
        if beat:
            self.sim.loop.call_at(math.ceil(self._now() / beat - 1e-9) * beat, self._flush)

    def _flush(self) -> None:
        """The end of an instant (or a heartbeat): the AMs that have news hear it, then the
        queues whose nodes changed or that got jobs are tried, then the timeline is written.
        While the AMs hear their news this flush is still the one to come (a job that ends
        marks its queues, which this flush tries next); news from the queues' passes asks
        for another. Nothing when none is pending (an instant none of whose events asked for it)."""
        if not self._flush_pending:
            return
        woken = self._wake
        while woken:
            self._wake = {}
            for job in woken.values():
                if job.am is not None:
                    self._heartbeat(job)
                else:   # (the lane's: its task exited)
                    job.lane = None
                    self._finished(job, "succeeded")
                    self._counted()
            woken = self._wake
        self._flush_pending = False
        dirty = self._dirty
        if dirty:
            queues, try_start = self.queues, self._try_start
            for name in sorted(dirty):
                queue = queues[name]
                queue.run_pass(try_start)
                if self._drops:
                    for job in dropped(queue):
                        self._dropped(job)
        if self.hol:
            dirty.update(self._held_back_moved())
        if dirty:
            if self.waiting_jobs:
                for name in dirty:
                    self._update_hol(name)
            elif self.hol:   # every queue is empty: no head is held back (as _update_hol of each finds)
                self.hol.clear()
                self.hol_total = 0
            dirty.clear()
        now = self._now()
        self.recorder.record(now, self.allocated, self.waiting_jobs, self.pending_gpus, self.hol_total)
        if self.reservations is not None:
            self.reservations.tick(now)
        if now >= self._fragmentation_at:
            self._sync()
            self.fragmentation.record(now, self.tracker.view)
            self._fragmentation_at = self.fragmentation.next_at

    def _reserve_rank(self, table: JobTable):
        """Queue policy reserve: a job's rank among those that reserve, when priorities are set
        (the queue's, then the job's, higher first; then its age); None: its age alone."""
        if not self.options.queue_priorities and not any(job.priority for job in table.jobs):
            return None
        queues = self.core.queues
        return lambda job: (-queues[job.queue].priority, -job.trace.priority, job.order)

    # ------------------------------------------------------------------ AMs
    def _try_start(self, job: _Job) -> bool:
        """Place the job's gang through its AM (admitting the job first); True when it
        started or can never run (either way it leaves the queue). A job of one task goes
        through the single-task lane (:mod:`.lane`)."""
        lane = job.lane
        if lane is None and job.am is None and self.lane is not None and takes(job.trace):
            if not self.lane.admit(job, job.label):   # it can never run here
                job.lane = None
                self.state.outcome[job.row] = "never-fits"
                self._left_queue(job)
                self._counted()
                return True
            lane = job.lane
        if lane is not None:
            self._sync()
            host = self.lane.try_start(job)
            if host is None:
                return False
            state, row = self.state, job.row
            state.start[row], state.hosts[row] = self._now(), (host,)
            self._running(job)
            return True
        if job.am is None:
            self._admit(job)
            if job.am.done:   # refused at submission: it can never run here
                self._ended(job)
                return True
        self._sync()
        self._heartbeat(job)
        if job.start_s is not None or job.am is None:   # started, or ended without starting
            return True
        if self.preempting is not None and not job.am.done:   # it may preempt lower-priority jobs
            self.preempting.try_for(job, self._now())
        return False

    def _admit(self, job: _Job) -> None:
        spec = job_spec(job.trace, job.label)
        self._add_job(spec)
        app_id = self._submit(ApplicationSubmission(spec.name, job.queue, max_attempts=1, priority=job.trace.priority))
        self.by_app[app_id] = job
        job.am = self._new_am(spec, app_id=app_id)

    def _sync(self) -> None:
        """Bring the shared view up to what the RM holds now, before an AM places a gang on
        it (an AM that only hears of its containers' end does not read it): the rows of the
        nodes changed since the last sync, from the RM's ledger, which gathers them as it changes
        them (what their node reports would say, without a report each: ``ClusterTracker.take_rows``)."""
        rows = self._changed_rows
        if rows:
            self.tracker.take_rows(self.ledger, rows)
            rows.clear()
            if self.tracker.view is not self._warmed_view or len(self.pipelines) != self._warmed_pipelines:
                self._warm()

    def _warm(self) -> None:
        """Give the shared view its node indexes, built on the view itself: every AM places
        on it or on a copy of it, and a copy carries the index as it is, so an index kept
        here is built once, not once per placement. Each takes in the rows changed since
        it was last read when it is read (a gang of one is picked on the view itself), so
        the changes of many syncs are taken in at once, and none when no pick reads it.
        Done again only for a view the tracker built afresh, or a pipeline added since."""
        view = self.tracker.view
        self._warmed_view, self._warmed_pipelines = view, len(self.pipelines)
        for pipeline in self.pipelines.values():
            key = pipeline.selector.node_key(_ANY_REQUEST)
            if key is not None:
                kept_node_index(view, key, pipeline.tie_order.of(len(view), view.hosts))

    def _heartbeat(self, job: _Job) -> None:
        """The job's AM heartbeats; the driver takes in what became of the job: started (its
        gang, placed on the shared view, is granted at once, or the view and the RM disagree),
        or ended."""
        am = job.am
        am.heartbeat()
        if self.preempting is not None and job.start_s is not None and not am.done and \
                am.gangs[0].record.started_at is None:   # its gang was preempted and starts again
            self._requeued(job)
        if job.start_s is None and am.gangs:
            gang = am.gangs[0]
            if gang.record.started_at is not None:
                self._started(job, gang)
            elif gang.state is ROLE_ACQUIRING:
                raise RuntimeError(f"replay: job {job.trace.job_id}'s gang was placed on the shared view but its "
                                   "asks were not all granted at once (the view and the RM disagree)")
        if am.done:
            self._ended(job)

    def _dropped(self, job: _Job) -> None:
        """The queue policy gave up on the job (``drop``: no room at its arrival): the driver
        kills its application through the RM, as a user would, and its AM ends with it (a job
        in the single-task lane, never started, leaves it)."""
        if job.lane is not None:
            job.lane = None
            self._left_queue(job)
            self.state.outcome[job.row] = "dropped"
            self._counted()
            return
        self.sim.client.kill(job.am.app_id, "dropped: no room at its arrival (queue policy drop)")
        self._heartbeat(job)
        self.state.outcome[job.row] = "dropped"

    def _started(self, job: _Job, gang) -> None:
        state, row = self.state, job.row
        state.start[row] = gang.record.started_at
        tasks = gang.tasks
        if len(tasks) == 1:   # (one host, no wait for the others)
            state.hosts[row] = (tasks[0].host,)
        else:
            state.hosts[row] = tuple(dict.fromkeys([task.host for task in tasks]))
            starts = [task.started_at for task in tasks]
            state.gang_wait[row] = max(starts) - min(starts)
        self._running(job, tasks)

    def _running(self, job: _Job, tasks=None) -> None:
        """The job started (its gang's ``tasks``; None: the lane's one task on ``job.hosts``):
        its GPUs are allocated, and it left its queue."""
        gpus = job.gpus
        self.allocated += gpus
        self.free_gpus[job.partition] -= gpus
        self._left_queue(job)
        if self.reservations is not None:
            self.reservations.started(job, tasks)

    def _requeued(self, job: _Job) -> None:
        """The job's gang was preempted (:mod:`.preempting`): its GPUs are free again, and it
        waits in its queue again, behind every job there."""
        gpus = job.gpus
        self.allocated -= gpus
        self.free_gpus[job.partition] += gpus
        state, row = self.state, job.row
        state.start[row], state.hosts[row], state.gang_wait[row] = None, (), 0.0
        job.order = self.preempting.requeue_order()
        self.queues[job.queue].add(job)
        self.waiting_jobs += 1
        self.pending_gpus += gpus
        self._dirty.update(self.partition_queues.get(job.partition, ()))
        if not self._flush_pending:
            self._schedule_flush()

    def _left_queue(self, job: _Job) -> None:
        self.waiting_jobs -= 1
        self.pending_gpus -= job.gpus

    def _ended(self, job: _Job) -> None:
        am = job.am
        if job.start_s is None:   # refused, or its asks rejected: it can never run here
            self.state.outcome[job.row] = "never-fits" if am.outcome == "failed" else am.outcome or "unfinished"
            self._left_queue(job)
        else:
            self._finished(job, am.outcome or "unfinished")
        self._forget_job(am.job)
        self.by_app.pop(am.app_id, None)
        job.am = None
        self._counted()

    def _finished(self, job: _Job, outcome: str) -> None:
        """The started job ended ``outcome`` now: its GPUs are free, its partition's queues
        to be tried."""
        state, row = self.state, job.row
        state.outcome[row], state.end[row] = outcome, self._now()
        if self.reservations is not None:
            self.reservations.ended(job)
        gpus = job.gpus
        self.allocated -= gpus
        self.free_gpus[job.partition] += gpus
        if self.waiting_jobs:   # else every queue is empty: a pass would start nothing
            self._dirty.update(self.partition_queues.get(job.partition, ()))
        if not self._flush_pending:
            self._schedule_flush()

    def _counted(self) -> None:
        """The job ended (for progress)."""
        if self.progress is not None:
            self.done += 1
            self.progress(self.done, len(self.jobs))

    def _held_back_moved(self) -> list[str]:
        """The queues whose head is held back and whose partition's free GPUs are no longer
        what they held back (each flush leaves every held-back queue holding its partition's
        free GPUs then: :meth:`_update_hol`). Only such a queue's answer can change between
        passes: free GPUs grow only when a job ends, and that gives every queue of its
        partition a pass; when they shrink (a job started) a head not held back stays so (it
        was bigger than what was free, and is bigger still)."""
        free, partition_of = self.free_gpus, self.queue_partition
        return [name for name, held in self.hol.items() if free.get(partition_of[name], 0) != held]

    def _update_hol(self, name: str) -> None:
        """The free GPUs of the queue's nodes while its head waits although they would be
        enough for it (0 otherwise)."""
        head = self.queues[name].head
        hol = self.hol
        held = hol.pop(name, 0)
        if head is not None:
            free = self.free_gpus.get(head.partition, 0)
            if free >= head.gpus:
                hol[name] = free
                held -= free
        self.hol_total -= held

    # ------------------------------------------------------------------ results
    def outcomes(self) -> JobOutcomes:
        """Every job's outcome, in table order, from the run's :class:`JobState` (values made
        only when read one by one; the metrics read its columns)."""
        jobs = self.jobs
        return self.state.outcomes(self.table_jobs, [job.queue for job in jobs], [job.submit_s for job in jobs],
                                   self.rack_of)

    def selection_cost(self) -> tuple[int, float]:
        registry = self.metrics.registry
        count = registry.get_sample_value("gangmaster_selection_latency_seconds_count") or 0.0
        total = registry.get_sample_value("gangmaster_selection_latency_seconds_sum") or 0.0
        return int(count), float(total)


def _labelled(cluster: ReplayCluster, isolated: dict) -> tuple[list, dict[str, str]]:
    """The cluster's nodes, each isolated queue's carrying the queue's label and the
    others :data:`SHARED_LABEL` (no labels when no queue is isolated); and the queue
    owning each host."""
    if not isolated:
        return list(cluster.specs), {}
    owner: dict[str, str] = {}
    for queue, hosts in isolated.items():
        for host in hosts:
            if host in owner:
                raise ValueError(f"queue_hosts: host {host!r} is given to queues {owner[host]!r} and {queue!r}")
            owner[host] = queue
    known = {spec.host for spec in cluster.specs}
    unknown = sorted(set(owner) - known)
    if unknown:
        raise ValueError(f"queue_hosts: {len(unknown)} host(s) not in cluster {cluster.name}: {', '.join(unknown[:5])}")
    return [dataclasses.replace(spec, labels=spec.labels | {owner.get(spec.host, SHARED_LABEL)})
            for spec in cluster.specs], owner
