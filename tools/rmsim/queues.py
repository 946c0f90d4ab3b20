"""Queues: capacity shares ("N machines' worth", like a quota group), FIFO inside a
queue, fair between queues.

Queue file (``--queues FILE``)::

    queues:
      - name: research
        machines: 2          # 2 x the capacity of the machine named by `like`
        like: dgx1-000       # default: the largest node (most GPUs, then memory)
      - name: batch
        memoryMB: 262144     # or explicit limits (any of memoryMB, vcores, gpus)
        vcores: 64
        gpus: 0
      - name: prod
        priority: 10         # its jobs' priority comes first (then each job's own): they may preempt
        guaranteedGpus: 16   # a share preemption reclaims from queues over theirs (default 0: none)
      - name: training
        policy: reserve      # fifo (default) or reserve: its waiting gang's nodes are held for it
        maxReservations: 2   # how many of its waiting gangs hold reservations at once (default 1)
        reserveAfterSeconds: 600   # a gang reserves once it waited this long (default 0: at once)
    clusterReservations: 1   # how many gangs of all reserving queues hold reservations at once (default 1)

No file: one queue ``default`` that may use the whole cluster. A queue's limit is
enforced: a container that would take the queue past it is not granted (the ask
stays pending, reason "queue limit"); an ask larger than the limit itself is
rejected. GPU usage is counted in milli-GPU against ``gpus`` × 1000: a share of a GPU
(``gpu_milli``) uses its milli, a whole GPU 1000, so four 250-milli shares use one GPU
of the limit (and of the queue's dominant share). Between queues the scheduler serves the queue with the lowest dominant
share (its largest used/limit fraction) first.

``priority`` (-1000..1000, default 0) and ``guaranteedGpus`` (default 0) matter only when
preemption is on (``replay --preemption on``; :mod:`.victims`): a gang may preempt gangs of
a lower (queue priority, job priority), and a queue under its guaranteed GPUs may preempt
gangs of queues over theirs.

``policy: reserve`` keeps a big gang from starving among smaller jobs (:mod:`.reservations`):
while the oldest gangs of the queue that hold nothing cannot start whole, the nodes where each
starts earliest (planned from the running containers' expected ends, as Slurm's backfill
plans a start) are reserved for it, and another application's ask is granted there only if
that application is declared to end before the reservation starts; elsewhere it is granted
freely. At most ``maxReservations`` gangs of the queue hold reservations at once, so a queue
of big gangs cannot idle the cluster, and at most ``clusterReservations`` of every reserving
queue together (the oldest gangs that cannot start, whatever their queue; as Slurm's
``bf_max_job_part``): with one per queue of Philly's fifteen the replayed cluster ran as one
FIFO by age, every job's mean JCT 24 % worse than FIFO's. ``reserveAfterSeconds`` (Slurm's
``bf_min_age_reserve``) lets a gang reserve only once it waited that long: one that starts
soon anyway holds nothing idle, and a starving one starts at most that much later. A
reserved node lends the GPUs its gang will not need there at its start. Under ``fifo`` (the
default) nothing is reserved.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gangmaster.protocol.reasons import Reason, reason
from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.conf.fields import ConfigError, Fields, load_yaml
from gangmaster.am.core.reservation_plan import DEFAULT_CLUSTER_RESERVATIONS, DEFAULT_MAX_RESERVATIONS
from gangmaster.conf.limits import MAX_CLUSTER_NODES, MAX_DURATION_S, MAX_PRIORITY, MAX_RESERVATIONS
from gangmaster.selectors.fit import GPU_MILLI, milli

from .ledger import NodeLedger

#: The RM queues' policies: ``reserve`` holds nodes for its waiting gangs (:mod:`.reservations`).
QUEUE_POLICIES = ("fifo", "reserve")

#: No limit; also the largest explicit limit taken (sums and the state file stay in 64 bits).
UNLIMITED = 1 << 62


@dataclass
class Queue:
    name: str
    max_mem: int = UNLIMITED
    max_mvc: int = UNLIMITED
    max_gpus: int = UNLIMITED
    used_mem: int = 0
    used_mvc: int = 0
    used_gpus: int = 0          # whole GPUs held
    #: app ids in submission order (FIFO), as a dict's keys: an app leaves in O(1) (a fill keeps thousands)
    apps: dict = field(default_factory=dict)
    used_gpu_milli: int = 0     # milli-GPU held by shares of GPUs
    priority: int = 0           # its jobs' priority before their own (preemption: .victims)
    guaranteed_gpus: int = 0    # GPUs preemption may reclaim for it from queues over theirs
    policy: str = "fifo"        # fifo | reserve (its waiting gangs hold reservations: .reservations)
    max_reservations: int = DEFAULT_MAX_RESERVATIONS   # (policy reserve) its gangs holding one at once
    reserve_after_s: float = 0.0     # (policy reserve) a gang reserves once it waited this long
    #: (policy reserve) the gangs of every reserving queue holding one at once: the file's
    #: ``clusterReservations``, the same in each of its queues
    cluster_reservations: int = DEFAULT_CLUSTER_RESERVATIONS

    @property
    def gpu_milli_used(self) -> int:
        """GPU held, in milli-GPU: whole GPUs at 1000 each plus the shares. The GPU limit
        (``max_gpus``, in GPUs) is held against this: four shares of 250 use one GPU of it."""
        return self.used_gpus * GPU_MILLI + self.used_gpu_milli

    def share(self) -> float:
        """Dominant share: the largest used/limit fraction over the limited dimensions."""
        gpu_milli_used = self.used_gpus * GPU_MILLI + self.used_gpu_milli   # (as gpu_milli_used says)
        return max(self.used_mem / self.max_mem if self.max_mem else 0.0,
                   self.used_mvc / self.max_mvc if self.max_mvc else 0.0,
                   gpu_milli_used / (self.max_gpus * GPU_MILLI) if self.max_gpus else 0.0)

    def room_for(self, mem: int, mvc: int, gpus: int, gpu_milli: int = 0) -> bool:
        gpu_milli_used = self.used_gpus * GPU_MILLI + self.used_gpu_milli   # (as gpu_milli_used says)
        return (self.used_mem + mem <= self.max_mem and self.used_mvc + mvc <= self.max_mvc
                and gpu_milli_used + gpus * GPU_MILLI + gpu_milli <= self.max_gpus * GPU_MILLI)

    def why_never(self, mem: int, mvc: int, gpus: int, gpu_milli: int = 0) -> Reason | None:
        if mem > self.max_mem:
            return reason(R.QUEUE_MEMORY_LIMIT, queue=self.name, limit=self.max_mem, asked=mem)
        if mvc > self.max_mvc:
            return reason(R.QUEUE_VCORES_LIMIT, queue=self.name, limit=self.max_mvc / 1000, asked=mvc / 1000)
        if gpus > self.max_gpus:
            return reason(R.QUEUE_GPUS_LIMIT, queue=self.name, limit=self.max_gpus, asked=gpus)
        if gpu_milli > self.max_gpus * GPU_MILLI:
            return reason(R.QUEUE_SHARE_LIMIT, queue=self.name, limit=self.max_gpus, milli=gpu_milli)
        return None

    def limits(self) -> dict:
        return {"memoryMB": self.max_mem, "mvcores": self.max_mvc, "gpus": self.max_gpus}


def default_queues() -> list[Queue]:
    return [Queue("default")]


def load_queues(path: str | Path, ledger: NodeLedger) -> list[Queue]:
    doc = Fields(load_yaml(path), str(path))
    doc.reject_unknown(("queues", "clusterReservations"))
    queues = [parse_queue(q, ledger) for q in doc.list_of_mappings("queues")]
    if not queues:
        raise doc.error("queues", "at least one queue")
    if "clusterReservations" in doc and not any(q.policy == "reserve" for q in queues):
        raise doc.error("clusterReservations", "to be used together with a queue of policy: reserve")
    cluster_reservations = doc.integer("clusterReservations", DEFAULT_CLUSTER_RESERVATIONS, minimum=1,
                                       maximum=MAX_RESERVATIONS, limit="MAX_RESERVATIONS")
    for q in queues:
        q.cluster_reservations = cluster_reservations
    names = set()
    for q in queues:
        if q.name in names:
            raise ConfigError(str(path), "queues", f"unique queue names; {q.name!r} appears twice")
        names.add(q.name)
    return queues


def parse_queue(q: Fields, ledger: NodeLedger) -> Queue:
    q.reject_unknown(("name", "machines", "like", "memoryMB", "vcores", "gpus", "priority", "guaranteedGpus",
                      "policy", "maxReservations", "reserveAfterSeconds"))
    queue = _limited_queue(q, ledger)
    queue.priority = q.integer("priority", 0, minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY, limit="MAX_PRIORITY")
    queue.guaranteed_gpus = q.integer("guaranteedGpus", 0, minimum=0,   # at most what the queue may hold
                                      maximum=None if queue.max_gpus == UNLIMITED else queue.max_gpus)
    queue.policy = q.string("policy", "fifo", choices=QUEUE_POLICIES)
    for key in ("maxReservations", "reserveAfterSeconds"):
        if key in q and queue.policy != "reserve":
            raise q.error(key, "to be used together with policy: reserve")
    queue.max_reservations = q.integer("maxReservations", DEFAULT_MAX_RESERVATIONS, minimum=1,
                                       maximum=MAX_RESERVATIONS, limit="MAX_RESERVATIONS")
    queue.reserve_after_s = q.number("reserveAfterSeconds", 0.0, minimum=0, maximum=MAX_DURATION_S,
                                     limit="MAX_DURATION_S")
    return queue


def _limited_queue(q: Fields, ledger: NodeLedger) -> Queue:
    """The queue ``q`` names with the limits it sets (``machines`` like a node, or each)."""
    name = q.name("name")
    if "machines" in q:
        machines = q.number("machines", minimum=0, exclusive_minimum=True, maximum=MAX_CLUSTER_NODES,
                            limit="MAX_CLUSTER_NODES")
        if "like" in q:
            host = q.name("like")
            if host not in ledger.host_index:
                raise q.error("like", "a host of the cluster", host)
            i = ledger.host_index[host]
        else:
            i = max(range(len(ledger)),
                    key=lambda j: (int(ledger.gpu_capacity[j]), int(ledger.memory_capacity[j]), -j))
        return Queue(name, max_mem=int(machines * ledger.memory_capacity[i]),
                     max_mvc=int(machines * ledger.mvcores_capacity[i]),
                     max_gpus=int(machines * ledger.gpu_capacity[i]))
    if "like" in q:
        raise q.error("like", "to be used together with machines")
    return Queue(name,
                 max_mem=q.integer("memoryMB", UNLIMITED, minimum=0, maximum=UNLIMITED),
                 max_mvc=milli(q.number("vcores", UNLIMITED / 1000, minimum=0, maximum=UNLIMITED / 1000)),
                 max_gpus=q.integer("gpus", UNLIMITED, minimum=0, maximum=UNLIMITED))
