"""The queues' books: what each queue holds, and what the cluster has free.

Every booking is a queue's (the audit, :mod:`.audit`, holds the books equal), so the
cluster's free memory, milli-vcores and milli-GPU are its capacity less what the queues
hold, kept here with the queues' own counts by :meth:`QueueBooks.charge`: an allocate's
headroom reads them as they are, without summing the queues. A queue's limits never
change, so what registrations tell of them is worked out once.

In the state file the books are the ``queues`` list (name, limits, running applications);
what each holds is counted again from the restored containers.
"""
from __future__ import annotations

from gangmaster.am.core.reservation_plan import DEFAULT_CLUSTER_RESERVATIONS, DEFAULT_MAX_RESERVATIONS
from gangmaster.conf.limits import MAX_DURATION_S, MAX_PRIORITY, MAX_RESERVATIONS
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.resources import ResourceDescriptor

from .ledger import NodeLedger
from .queues import QUEUE_POLICIES, UNLIMITED, Queue, default_queues


class QueueBooks:
    """The queues (``queues``: by name, in their order) and the cluster's free totals."""

    def __init__(self, ledger: NodeLedger, queues: list[Queue] | None):
        self.queues: dict[str, Queue] = {q.name: q for q in (queues or default_queues())}
        #: the cluster's total memory, milli-vcores and GPUs (a node's capacity never changes)
        self.totals = (int(ledger.memory_capacity.sum()), int(ledger.mvcores_capacity.sum()),
                       int(ledger.gpu_capacity.sum()))
        self.free_mem, self.free_mvc = self.totals[0], self.totals[1]
        self.free_gpu_milli = self.totals[2] * GPU_MILLI
        #: queue -> its limit as registrations tell it
        self.limits = {name: self._limit(q) for name, q in self.queues.items()}
        #: the queues whose every limit is at least the cluster's total: such a queue's room
        #: (its limit less what it holds) is never less than what the cluster has free (what
        #: the other queues hold is not free), so its headroom is what is free
        self._unlimited = {name for name, limit in self.limits.items() if limit is None}
        #: the queues with no limit at all (each UNLIMITED, 2**62): such a queue always has room
        #: (the scheduler does not ask), as what it holds (at most the cluster: up to
        #: MAX_CLUSTER_NODES nodes, each within MAX_MEMORY_MB, MAX_VCORES and MAX_GPUS_PER_NODE)
        #: plus any ask (within the same limits, rm_validation) stays far below UNLIMITED
        self.boundless = {name for name, q in self.queues.items()
                          if q.max_mem == q.max_mvc == q.max_gpus == UNLIMITED}

    def _limit(self, queue: Queue) -> ResourceDescriptor | None:
        """The queue's limit, each unlimited dimension capped at the cluster's total; None
        when no dimension is limited below it."""
        limits, totals = (queue.max_mem, queue.max_mvc, queue.max_gpus), self.totals
        if all(limit >= total for limit, total in zip(limits, totals)):
            return None
        mem, mvc, gpus = (min(limit, total) for limit, total in zip(limits, totals))
        return ResourceDescriptor(mem, mvc / 1000.0, gpus)

    def running_apps(self) -> int:
        """Applications submitted and not finished (every queue's ``apps``)."""
        return sum(len(q.apps) for q in self.queues.values())

    def charge(self, queue: Queue, amounts: tuple[int, int, int, int, int]) -> None:
        """Count a booking in its queue's usage and out of the cluster's free totals, as its
        ``held`` amounts (its ``returned`` ones count it back)."""
        mem, mvc, gpus, gpu_milli, all_gpu_milli = amounts
        queue.used_mem += mem
        queue.used_mvc += mvc
        queue.used_gpus += gpus
        queue.used_gpu_milli += gpu_milli
        self.free_mem -= mem
        self.free_mvc -= mvc
        self.free_gpu_milli -= all_gpu_milli

    def headroom(self, name: str) -> tuple[int, int, int]:
        """What queue ``name`` could still be given: its room, at most what the cluster has
        free, as the amounts a response's headroom is made of when read (memory MB,
        milli-vcores, whole GPUs: :class:`~gangmaster.protocol.rm_protocol.AllocateResponse`)."""
        if name in self._unlimited:   # its room is never less than what is free
            return self.free_mem, self.free_mvc, self.free_gpu_milli // GPU_MILLI
        queue = self.queues[name]
        return (max(0, min(queue.max_mem - queue.used_mem, self.free_mem)),
                max(0, min(queue.max_mvc - queue.used_mvc, self.free_mvc)),
                max(0, min(queue.max_gpus * GPU_MILLI - queue.used_gpus * GPU_MILLI - queue.used_gpu_milli,
                           self.free_gpu_milli)) // GPU_MILLI)

    # ---- the state file's part
    def snapshot(self) -> list[dict]:
        """Each queue's limits and applications, and its priority, guarantee and policy where
        they are not the defaults (a file of default queues reads as before they were kept)."""
        saved = []
        for q in self.queues.values():
            entry = {"name": q.name, "max_mem": q.max_mem, "max_mvc": q.max_mvc, "max_gpus": q.max_gpus,
                     "apps": list(q.apps)}
            entry.update({key: getattr(q, key) for key, default in _POLICY_DEFAULTS.items()
                          if getattr(q, key) != default})
            saved.append(entry)
        return saved

    @staticmethod
    def queues_from(saved: list[dict]) -> list[Queue]:
        """The queues a state file holds, as the RM is built with them (a policy setting out of
        its range is a ValueError naming the queue)."""
        queues = []
        for q in saved:
            queue = Queue(q["name"], q["max_mem"], q["max_mvc"], q["max_gpus"], apps=dict.fromkeys(q["apps"]),
                          **{key: q.get(key, default) for key, default in _POLICY_DEFAULTS.items()})
            _check_policy(queue)
            queues.append(queue)
        return queues

    def check_restored(self) -> None:
        """A queue holding more than its limit (what its restored containers add up to)."""
        for q in self.queues.values():
            if q.used_mem > q.max_mem or q.used_mvc > q.max_mvc or q.gpu_milli_used > q.max_gpus * GPU_MILLI:
                raise ValueError(f"queue {q.name}: its containers exceed its limits "
                                 f"{(q.max_mem, q.max_mvc, q.max_gpus)}")


#: A queue's settings besides its limits, with their defaults (what a queue file's ``priority``,
#: ``guaranteedGpus``, ``policy`` and ``maxReservations`` set: :func:`~.queues.parse_queue`).
_POLICY_DEFAULTS = {"priority": 0, "guaranteed_gpus": 0, "policy": "fifo",
                    "max_reservations": DEFAULT_MAX_RESERVATIONS, "reserve_after_s": 0.0,
                    "cluster_reservations": DEFAULT_CLUSTER_RESERVATIONS}


def _check_policy(q: Queue) -> None:
    """What :func:`~.queues.parse_queue` would have refused in a queue file."""
    def integer(value, low: int, high: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    if not (integer(q.priority, -MAX_PRIORITY, MAX_PRIORITY) and integer(q.guaranteed_gpus, 0, 2 ** 63)
            and q.policy in QUEUE_POLICIES and integer(q.max_reservations, 1, MAX_RESERVATIONS)
            and integer(q.cluster_reservations, 1, MAX_RESERVATIONS)
            and isinstance(q.reserve_after_s, (int, float)) and not isinstance(q.reserve_after_s, bool)
            and 0 <= q.reserve_after_s <= MAX_DURATION_S):
        raise ValueError(f"queue {q.name}: priority -{MAX_PRIORITY}..{MAX_PRIORITY}, guaranteed_gpus >= 0, "
                         f"policy one of {', '.join(QUEUE_POLICIES)}, max_reservations and cluster_reservations "
                         f"1..{MAX_RESERVATIONS} and reserve_after_s 0..{MAX_DURATION_S} expected, got "
                         f"{q.priority!r}, {q.guaranteed_gpus!r}, {q.policy!r}, {q.max_reservations!r}, "
                         f"{q.cluster_reservations!r}, {q.reserve_after_s!r}")
