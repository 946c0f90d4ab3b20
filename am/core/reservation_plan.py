"""When and where a gang that cannot start now will start: the reservation planner.

A gang that waits at the head of its queue is given a *reservation*: the nodes where it
will start earliest, and that instant. The instant is worked out as Slurm's backfill
scheduler works out a pending job's start time: from what runs now and when each of
those containers is expected to end (a job's declared duration, or one observed for
jobs like it), the free GPUs of every node are followed forward in time, end after
end, until the gang's instances fit for the whole of its own expected duration (a
reservation already held by another gang counts as work that runs from its start to
its end). The nodes chosen are those where holding them idles the fewest GPUs: the
nodes that free up last, so that what is free now stays usable by smaller gangs.

Backfill never delays a reservation: a gang may start on reserved nodes only if it is
expected to end by the reservation's start (:meth:`Reservation.admits`); elsewhere it
starts freely, and on the reserved nodes too as far as they keep free what the reservation
needs there at its start (a node is not held whole). A reservation is planned again at every
scheduling pass, so it moves when the plan changes (a job ended early, a higher-priority
gang arrived). How many gangs hold reservations at once is bounded, per queue
(``max_reservations``) and in the whole cluster (:class:`ReservationBounds`), so big gangs
cannot idle the whole cluster holding room for all of them.

Only GPUs are planned: the gangs these traces and clusters carry ask memory and vcores in
proportion to their GPUs, so GPUs bind first; a gang whose memory binds is still placed
by select() when its start comes, and a plan that was wrong is planned again.

This module is pure (no RM, no AM): the trace replay's queues, the RM simulator and the
diagnosis (``expected to start in ~1h 59m on 90 reserved machines when xlibmpi ends``)
all read their plans from it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple, Sequence

from gangmaster.protocol.rm_protocol import GangRole

#: Default bound on the gangs of one queue holding reservations at once (Slurm's
#: ``bf_max_job_test``-like bound; YARN reserves one node per application at a time).
DEFAULT_MAX_RESERVATIONS = 1

#: Default bound on the gangs holding reservations at once in the whole cluster (in a replay,
#: in each partition of nodes), whatever their queue: the oldest that cannot start hold them.
#: Fifteen queues with one each made Philly's cluster (40 x 8 GPUs) run as one global FIFO
#: by age, with reserved GPUs held idle: mean JCT 24 % worse than FIFO's (BENCHMARKS.md).
DEFAULT_CLUSTER_RESERVATIONS = 1


@dataclass(frozen=True)
class ReservationBounds:
    """How many gangs may hold reservations, and from when (each queue's own bound,
    ``max_reservations``, is the queue's).

    ``cluster``: at most this many at once in the cluster (a replay's partition), given to
    the oldest gangs that cannot start, whichever their queue (as Slurm's
    ``bf_max_job_part`` bounds them per partition). ``after_s``: a gang reserves only once
    it has waited this long (Slurm's ``bf_min_age_reserve``): a gang that starts soon
    anyway holds nothing idle for it."""

    cluster: int = DEFAULT_CLUSTER_RESERVATIONS
    after_s: float = 0.0

#: How an expected end is known: the job declared its duration, one was observed for
#: jobs like it, or none is known (then the end is never: the plan cannot count on it).
DECLARED, OBSERVED, UNKNOWN = "declared", "observed", "unknown"


class Hold(NamedTuple):
    """GPUs of one node held from ``start_s`` to ``end_s``: a running container (start -inf,
    end its expected end, ``math.inf`` when unknown) or a reservation already planned. (A
    named tuple: a replay makes one for every job that starts, and a frozen dataclass's
    ``__init__`` costs several times as much.)"""

    host: str
    gpus: int
    start_s: float
    end_s: float
    owner: str = ""              # the job (or gang) holding them, for the explanation
    known: str = DECLARED        # how end_s is known: DECLARED, OBSERVED or UNKNOWN


@dataclass(frozen=True)
class Reservation:
    """Where and when a waiting gang is expected to start."""

    owner: str
    start_s: float                     # the instant the gang is expected to start
    end_s: float                       # start + its expected duration (inf when unknown)
    gpus_by_host: Mapping[str, int]    # the GPUs reserved on each node
    waits_for: tuple[str, ...]         # the jobs whose ends the start waits for (latest first)
    known: str                         # the least sure of the ends it waits for

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(self.gpus_by_host)

    def admits(self, end_s: float) -> bool:
        """Whether a gang expected to end at ``end_s`` may start on the reserved nodes now:
        only if it is gone by the reservation's start (backfill never delays it)."""
        return end_s <= self.start_s

    def holds(self) -> list[Hold]:
        """The reservation as holds, for planning the next gang after it."""
        return [Hold(host, gpus, self.start_s, self.end_s, self.owner) for host, gpus in self.gpus_by_host.items()]


#: an instance to place: its GPUs, or (GPUs, role, at most this many of the role per node or None)
Instance = "int | tuple[int, str, int | None]"


def gang_instances(roles, counts: Mapping[str, int] | None = None) -> list[Instance]:
    """The instances of a gang of ``roles`` that ask whole GPUs, as :func:`plan_start` takes them
    (GPUs, role, its cap per node); ``counts``: how many of a role are still to place (default
    all its instances)."""
    return [(role.gpus, role.name, role.max_instances_per_node) for role in roles if role.gpus
            for _ in range(counts[role.name] if counts and role.name in counts else role.instances)]


def declared_gang(job) -> tuple[tuple[GangRole, ...], float | None]:
    """What ``job`` declares to the RM when it is submitted: its largest gang (by GPUs), role
    by role, as a reserving queue plans it (:func:`gang_instances` of it) and the preemption
    monitor places it, and how long it is declared to run (the job's ``expectedDurationSeconds``;
    else its roles' longest ``simulatedDurationSeconds``; None when neither says: unknown)."""
    largest = max((roles for _, roles in job.named_gangs), key=lambda roles: sum(r.instances * r.gpus for r in roles),
                  default=())
    gang = tuple([GangRole(r.name, r.instances, r.gpus, r.gpu_milli, r.ask_vcores, r.memory_mb,
                           r.max_instances_per_node) for r in largest])
    if job.expected_duration_s is not None:
        return gang, float(job.expected_duration_s)
    declared = [job.simulation.get(role.name, {}).get("simulatedDurationSeconds") for role in job.roles]
    return gang, None if not declared or None in declared else float(max(declared))


def plan_start(now: float, free: Mapping[str, int], holds: Iterable[Hold], instances: Sequence[Instance],
               duration_s: float | None, owner: str = "") -> Reservation | None:
    """The earliest instant (>= ``now``) at which a gang of ``instances`` (GPUs of each
    instance, with its role's cap per node where it has one) fits on the nodes for
    ``duration_s`` (None: unknown, held forever), and the
    nodes it takes then; None when it never does (more than the cluster, or held forever
    by work whose end is unknown).

    ``free`` is each node's free GPUs now; ``holds`` what will hold GPUs from now on:
    running containers (their ``start_s`` is -inf) free theirs at ``end_s``, planned
    reservations (a finite ``start_s``, now or later) take theirs over ``[start_s, end_s)``."""
    running: list[Hold] = []
    planned: list[Hold] = []
    for hold in holds:   # (a reservation starting now is planned, not running: it gives nothing back)
        (running if hold.start_s == -math.inf else planned).append(hold)
    span = math.inf if duration_s is None else max(0.0, duration_s)
    need = sum(item[0] if isinstance(item, tuple) else item for item in instances)
    # Walk the running work's ends in order, giving each node back what ends by then (the
    # planned reservations' ends are instants too: their room comes back then).
    running.sort(key=lambda h: h.end_s)
    ends = sorted({h.end_s for h in running if now < h.end_s < math.inf} | {h.end_s for h in planned if h.end_s < math.inf})
    room = dict(free)
    total = sum(room.values())
    given = 0
    for start in [now, *ends]:
        if start < now:
            continue
        while given < len(running) and running[given].end_s <= start:
            hold = running[given]
            room[hold.host] = room.get(hold.host, 0) + hold.gpus
            total += hold.gpus
            given += 1
        if total < need:   # fewer GPUs in all than the gang asks: no node set holds it
            continue
        chosen = _fit(_less_planned(room, planned, start, start + span), instances, free)
        if chosen is not None:
            gated = running[:given] if start > now else []
            gated = [h for h in gated if h.end_s == start and h.host in chosen]
            gated += [h for h in planned if h.end_s == start and h.host in chosen]
            return Reservation(owner, start, start + span, chosen,
                               tuple(dict.fromkeys(h.owner for h in gated if h.owner)), _least_sure(gated))
    return None


def _less_planned(room: dict[str, int], planned: list[Hold], start: float, end: float) -> dict[str, int]:
    """``room`` (each node's GPUs free at ``start`` by the running work's ends) less the most
    the planned reservations hold at once inside ``[start, end)`` (their starts are where the
    free GPUs dip): what is free through the whole window."""
    inside = [h for h in planned if h.start_s < end and h.end_s > start]
    if not inside:
        return room
    room = dict(room)
    for host in {h.host for h in inside}:
        mine = [h for h in inside if h.host == host]
        dips = {max(start, h.start_s) for h in mine}
        room[host] = room.get(host, 0) - max(sum(h.gpus for h in mine if h.start_s <= t < h.end_s) for t in dips)
    return room


def _fit(room: Mapping[str, int], instances: Sequence[Instance], free: Mapping[str, int]) -> dict[str, int] | None:
    """The GPUs each node gives the gang when its instances (largest first) are placed
    first-fit on the nodes in order of least free now (holding those idles the fewest
    GPUs), then by name, each role's cap per node kept; None when they do not all fit."""
    left = {host: gpus for host, gpus in room.items() if gpus > 0}
    order = sorted(left, key=lambda host: (free.get(host, 0), host))
    chosen: dict[str, int] = {}
    placed: dict[tuple[str, str], int] = {}   # (role, host) -> its instances there
    items = [item if isinstance(item, tuple) else (item, "", None) for item in instances]
    for need, role, cap in sorted(items, key=lambda item: -item[0]):
        for host in order:
            if left[host] >= need and (cap is None or placed.get((role, host), 0) < cap):
                left[host] -= need
                chosen[host] = chosen.get(host, 0) + need
                placed[role, host] = placed.get((role, host), 0) + 1
                break
        else:
            return None
    return {host: chosen[host] for host in order if host in chosen}


def _least_sure(holds: Sequence[Hold]) -> str:
    kinds = {h.known for h in holds}
    return UNKNOWN if UNKNOWN in kinds else OBSERVED if OBSERVED in kinds else DECLARED


def expected_start_line(reservation: Reservation | None, now: float, reserved: bool = True) -> str:
    """The diagnosis's line for a waiting gang: when it is expected to start, on how many
    machines (``reserved``: held for it by a queue policy that reserves; else only where
    it would fit, with nothing holding them), and how sure that is (the ends it waits for
    are declared, observed or unknown)."""
    if reservation is None:
        return ("expected start: unknown (no expected end is known for the work holding the room it needs, "
                "or it needs more than the cluster)")
    wait = max(0.0, reservation.start_s - now)
    count = len(reservation.gpus_by_host)
    what = (f"expected to start {'now' if wait < 1 else 'in ~' + _duration(wait)} on {count} "
            f"{'reserved ' if reserved else ''}machine{'' if count == 1 else 's'}")
    if reservation.waits_for:
        names = reservation.waits_for
        what += " when " + (", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")) + \
            (" ends" if len(names) == 1 else " end")
    sure = {DECLARED: "from declared durations", OBSERVED: "from observed durations of similar jobs",
            UNKNOWN: "some ends are unknown"}[reservation.known]
    return f"{what} ({sure})"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h {m}m"
    return f"{m}m" if m and not s else f"{m}m {s}s" if m else f"{s}s"
