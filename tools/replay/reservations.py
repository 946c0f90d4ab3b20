"""The replay's reservations (queue policy ``reserve``): what runs and until when, the
reservations the queues hold, and the placement of a gang that must keep off them.

The queues (:class:`~.queue_policy.ReserveQueue`) ask this book two things during a
pass: to start a job without delaying any reservation (:meth:`ReplayReservations.try_start`),
and to reserve room for a job that did not start (:meth:`ReplayReservations.reserve`,
planned by :func:`~gangmaster.am.core.reservation_plan.plan_start`). A replayed job's
expected end is its trace duration, which the trace declares: the replay knows it exactly,
so a plan is only ever wrong where select() places a gang otherwise than the GPU count
says it could.

A gang that would outlast some reservations is placed by its own AM as any other, on the
shared view with those reservations' nodes shown with only the GPUs they can lend it (what
each will have free at the reservation's start beyond what the reservations then need there;
often none) for the time of its try (and shown as they are right after): the AM's select()
then picks elsewhere, or those lent GPUs, and the RM grants what it asks. Nothing of the RM
changes: free + used = capacity on every node throughout.

Which jobs hold a reservation: the first-ranked that did not start (:attr:`ReplayReservations.rank`:
age, or priority then age), at most ``max_reservations`` of a queue and
:attr:`~gangmaster.am.core.reservation_plan.ReservationBounds.cluster` of a partition, each
once it waited :attr:`~gangmaster.am.core.reservation_plan.ReservationBounds.after_s`.

It also measures what reservations cost: the GPU-seconds that reserved nodes held free
and idle for the gang they wait for (:attr:`ReplayReservations.hold_gpu_s`).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Callable

import numpy as np

from gangmaster.am.core.reservation_plan import DECLARED, Hold, Reservation, ReservationBounds, plan_start
from gangmaster.selectors.cluster import ClusterView, NodeColumns


def _ORDER(job) -> int:
    return job.order


class ReplayReservations:
    """The reservations of every queue of one replay, and the running jobs' holds they are planned from."""

    def __init__(self, now: Callable[[], float], ledger: NodeColumns, view: Callable[[], ClusterView],
                 sync: Callable[[], None], partition_of: dict[str, str | None],
                 bounds: ReservationBounds = ReservationBounds(), rank: Callable[[object], object] | None = None):
        self._now, self._ledger, self._view, self._sync = now, ledger, view, sync
        self.bounds = bounds
        #: a job's place among those that reserve (lower first): its order (its age), or with
        #: priorities (its queue's, then its own, higher first) before it; a reservation binds
        #: only the jobs ranked after its own
        self.rank = rank or _ORDER
        self._partition_of = partition_of                       # host -> partition (None: shared nodes)
        self._row = {host: i for i, host in enumerate(ledger.hosts)}
        self._hosts_of: dict[str | None, list[str]] = {}
        for host in ledger.hosts:
            self._hosts_of.setdefault(partition_of.get(host), []).append(host)
        self._rows_of = {partition: np.array([self._row[h] for h in hosts], dtype=np.int64)
                         for partition, hosts in self._hosts_of.items()}
        self._running: dict[int, list[Hold]] = {}                # job order -> its holds
        self._on_host: dict[str, dict[int, Hold]] = {}           # host -> job order -> its hold there
        self.held: dict[object, list[Reservation]] = {}          # queue -> its reservations, in order
        self._owner: dict[str, tuple[object, str | None]] = {}   # reservation owner -> (its rank, partition)
        self.hold_gpu_s = 0.0        # reserved GPUs held free and idle, integrated over time
        self.planned = 0             # reservations planned (each pass plans its queue's again)
        self._idle, self._since = 0, 0.0
        self._surprises = 0          # counts jobs that ended before their expected end: plans may start earlier
        self._plans: dict[int, tuple[tuple, Reservation | None]] = {}   # job order -> (what it was made from, plan)
        self._flat: list[tuple[object, str | None, Reservation]] | None = []   # held, as (rank, partition, r); None: to make

    # ------------------------------------------------------------ what runs
    def started(self, job, tasks=None) -> None:
        """``job`` started its gang's ``tasks`` (None: the single-task lane's one task, on
        ``job.hosts``): its GPUs on each host are held until its expected end."""
        end, order, on_host = job.start_s + job.trace.duration_s, job.order, self._on_host
        if tasks is None:   # (the lane's one task: most jobs of a trace)
            host = job.hosts[0]
            hold = Hold(host, job.gpus, -math.inf, end, job.trace.job_id, DECLARED)
            self._running[order] = [hold]
            if host in on_host:
                on_host[host][order] = hold
            else:
                on_host[host] = {order: hold}
        else:
            gpus = Counter()
            for task in tasks:
                gpus[task.host] += len(task.gpus)
            holds = self._running[order] = [Hold(host, n, -math.inf, end, job.trace.job_id, DECLARED)
                                            for host, n in gpus.items()]
            for hold in holds:
                on_host.setdefault(hold.host, {})[order] = hold
        if self._plans:
            self._plans.pop(order, None)

    def ended(self, job) -> None:
        """``job`` ended: its GPUs are free. A job ending when expected changes no plan (each
        counted on it); one ending earlier may let a reservation start earlier: every plan is
        made again."""
        holds = self._running.pop(job.order, None)
        for hold in holds or ():
            del self._on_host[hold.host][job.order]
        if holds and self._now() < holds[0].end_s:
            self._surprises += 1

    # ------------------------------------------------------------ a pass
    def clear(self, queue) -> None:
        """``queue`` starts a pass: its reservations are planned again (the plan may have changed)."""
        if self.held.pop(queue, None) is not None:
            self._flat = None

    def _before(self, job) -> list[Reservation]:
        """The reservations held for jobs of ``job``'s partition ranked before it (:attr:`rank`):
        those it must not delay."""
        flat = self._flat
        if flat is None:
            owner = self._owner
            flat = self._flat = [(*owner[r.owner], r) for reservations in self.held.values() for r in reservations]
        rank, partition = self.rank(job), job.partition
        return [r for before, where, r in flat if before < rank and where == partition]

    def reserve(self, queue, job) -> bool:
        """Reserve the nodes where ``job`` (which did not start) will start earliest, after
        the reservations of older jobs; whether it could be planned. Not before it waited
        :attr:`~ReservationBounds.after_s`, nor when as many older jobs of its partition as
        :attr:`~ReservationBounds.cluster` hold one already; one it takes beyond that
        bound is the last-ranked's (the youngest's), which loses it."""
        now = self._now()
        bounds = self.bounds
        if now - job.submit_s < bounds.after_s:
            return False
        before = self._before(job)
        if len(before) >= bounds.cluster:
            return False
        made_from = (self._surprises, tuple((r.owner, r.start_s, r.end_s, tuple(r.gpus_by_host.items())) for r in before))
        kept = self._plans.get(job.order)
        if kept is not None and kept[0] == made_from and (kept[1] is None or kept[1].start_s > now):
            # Nothing it was planned from changed, and its start is still to come: jobs started since
            # either end before it or keep off its nodes, and the running ones end as counted on.
            planned = kept[1]
        else:
            hosts = self._hosts_of.get(job.partition, [])
            free_col = self._ledger.gpus_free
            row = self._row
            free = {host: free_col.item(row[host]) for host in hosts}
            # (a job ending now may be freed in the ledger before it is told ended: counted in
            # ``free`` already, its hold would give its GPUs back twice)
            holds = [hold for run in self._running.values() for hold in run if hold.host in free and hold.end_s > now]
            for reservation in before:
                holds += reservation.holds()
            instances = [role.gpus for role in job.trace.roles for _ in range(role.instances)]
            planned = plan_start(now, free, holds, instances, job.trace.duration_s, job.trace.job_id)
            self._plans[job.order] = (made_from, planned)
        if planned is None:
            return False
        self.held.setdefault(queue, []).append(planned)
        self._flat = None
        self._owner[planned.owner] = (self.rank(job), job.partition)
        self.planned += 1
        self._keep_the_oldest(job.partition)
        return True

    def outranks(self, queue, job) -> bool:
        """Whether ``job`` ranks before one of the reservations ``queue`` holds (a higher-priority
        job behind them in the queue's pass: it takes one over, see :meth:`reserve`)."""
        held = self.held.get(queue)
        rank = self.rank(job)
        return bool(held) and any(rank < self._owner[r.owner][0] for r in held)

    def keep_the_first(self, queue, most: int) -> None:
        """At most ``most`` reservations held by ``queue``: those of its first-ranked jobs."""
        held = self.held.get(queue)
        if held and len(held) > most:
            held.sort(key=lambda r: self._owner[r.owner][0])
            del held[most:]
            self._flat = None

    def _keep_the_oldest(self, partition: str | None) -> None:
        """At most :attr:`~ReservationBounds.cluster` reservations in ``partition``: the
        youngest jobs' beyond it are dropped (their queues plan them again at their next pass)."""
        owner = self._owner
        mine = sorted(((owner[r.owner][0], id(queue), r) for queue, held in self.held.items() for r in held
                       if owner[r.owner][1] == partition), key=lambda item: item[:2])
        if len(mine) <= self.bounds.cluster:
            return
        dropped = {id(r) for _, _, r in mine[self.bounds.cluster:]}
        for queue in list(self.held):
            kept = [r for r in self.held[queue] if id(r) not in dropped]
            if kept:
                self.held[queue] = kept
            else:
                del self.held[queue]
        self._flat = None

    def unhindered(self, job) -> bool:
        """Whether ``job`` would end, if it started now, before every reservation it must not delay."""
        if not self.held:
            return True
        end = self._now() + job.trace.duration_s
        rank, partition = self.rank(job), job.partition
        if self._flat is None:
            self._before(job)
        return not any(before < rank and where == partition and not r.admits(end) for before, where, r in self._flat)

    def try_start(self, job, try_start: Callable[[object], bool]) -> bool:
        """Try ``job`` (through ``try_start``, the driver's) keeping off the nodes reserved for
        older jobs that it would still hold when their reservation begins; False without a
        try when the GPUs left it are fewer than it asks."""
        if not self.held:
            return try_start(job)
        end = self._now() + job.trace.duration_s
        before = self._before(job)
        delayed = [r for r in before if not r.admits(end)]
        if not delayed:
            return try_start(job)
        lent = self._lent(delayed, before)
        free_col, row = self._ledger.gpus_free, self._row
        withheld = {row[host]: keep for host, keep in lent.items() if keep < free_col.item(row[host])}
        if not withheld:
            return try_start(job)
        left = int(free_col[self._rows_of[job.partition]].sum()) if job.partition in self._rows_of else 0
        if job.am is not None and left - sum(free_col.item(i) - keep for i, keep in withheld.items()) < job.gpus:
            return False   # (admitted: not a never-fits)
        self._sync()   # the view is the ledger's before its rows are withheld (and given back as they were)
        view = self._view()
        masks = {i: view.withhold_gpus(i, keep) for i, keep in sorted(withheld.items())}
        try:
            return try_start(job)
        finally:
            for i, mask in masks.items():
                view.give_back_gpus(i, mask)

    def _lent(self, delayed: list[Reservation], before: list[Reservation]) -> dict[str, int]:
        """The GPUs a job that would still run when the ``delayed`` reservations start may
        take now on each of their nodes: what that node will have free at each one's start
        (free now, plus what its running jobs give back by then) beyond what the reservations
        ``before`` it (the job's elders') hold there at that instant. A node is not held
        whole: the GPUs its gang will not need there stay usable (Slurm reserves whole nodes;
        a GPU node's GPUs are what gangs share)."""
        free_col, row, on_host, now = self._ledger.gpus_free, self._row, self._on_host, self._now()
        lent: dict[str, int] = {}
        for r in delayed:
            start = r.start_s
            for host in r.gpus_by_host:
                free = free_col.item(row[host])
                back = sum(hold.gpus for hold in on_host.get(host, {}).values() if now < hold.end_s <= start)
                held = sum(other.gpus_by_host.get(host, 0) for other in before
                           if other.start_s <= start < other.end_s)
                lent[host] = max(0, min(lent.get(host, free), free + back - held))
        return lent

    # ------------------------------------------------------------ what it costs
    def tick(self, now: float) -> None:
        """The end of an instant: the idle reserved GPUs since the last one are counted, and
        those of now taken (per reserved node, its free GPUs up to what is reserved there)."""
        if not self.held and not self._idle:   # (nothing reserved, before or now: most instants of most traces)
            self._since = now
            return
        self.hold_gpu_s += self._idle * (now - self._since)
        free_col, row = self._ledger.gpus_free, self._row
        self._idle = sum(min(gpus, free_col.item(row[host]))
                         for reservations in self.held.values() for r in reservations
                         for host, gpus in r.gpus_by_host.items())
        self._since = now
