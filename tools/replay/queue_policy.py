"""Which waiting jobs of a queue may try to start, and in what order: FIFO, backfill, reserve or drop.

A *pass* over a queue offers its waiting jobs, in submission order, to ``try_start``
(which places the job's gang through its AM and returns whether it started):

* **FIFO** (strict): the head first; the pass stops at the first job that does not
  start, so a head that does not fit blocks every job behind it (head-of-line
  blocking, as in the Helios and Philly replays).
* **Backfill**: a job behind a blocked head may start when it fits now. The queue
  is indexed by gang shape (:func:`~.job_specs.gang_shape`): within a pass free
  capacity only shrinks, so a shape that failed stays failed, and the pass offers
  only the oldest job of each shape not yet failed — never a rescan of the whole
  queue. It starts exactly the jobs a pass trying every waiting job in order would.
* **Reserve**: backfill that never delays the head. When the oldest job does not start,
  the nodes where it will start earliest are reserved for it (planned from the running
  jobs' expected ends, as Slurm's backfill plans a start: :mod:`~gangmaster.am.core.reservation_plan`);
  a later job starts on reserved nodes only if it is expected to end before the
  reservation begins (or takes only what the reserved nodes will not need then), elsewhere
  freely. Each pass plans the queue's reservations again, so they move when the plan changes;
  at most ``max_reservations`` jobs of a queue hold one at a time
  (:data:`~gangmaster.am.core.reservation_plan.DEFAULT_MAX_RESERVATIONS`, the first-ranked
  jobs that did not start: by priority where there are priorities, then age), and the book
  bounds them in the whole cluster too (its ``bounds``). The driver keeps the book of reservations (``book``: the
  replay's :class:`~.reservations.ReplayReservations`), shared by its queues, so a job of
  any queue keeps off every queue's reservations. With no reservation held it starts
  exactly the jobs backfill starts.
* **Drop**: every job is offered once, at the first pass after it arrived; one that
  does not start then is dropped, never tried again (openb's fill mode: a pod that
  cannot be placed at its arrival is dropped, as in the FGD paper). The driver takes
  the dropped jobs (:func:`dropped`) and ends them.
"""
from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Callable, Hashable, Iterator, Protocol

from gangmaster.am.core.reservation_plan import DEFAULT_MAX_RESERVATIONS


class Waiting(Protocol):
    """What a queue holds of a waiting job: ``order``, its place in submission order, and
    ``shape``, what placing it depends on (read by the policies that index by shape: see
    :attr:`FifoQueue.by_shape`). The policies read nothing else, so a driver queues its own
    record of a job (the replay engine's job waits as itself) and is handed back that record."""

    order: int
    shape: Hashable


TryStart = Callable[[Waiting], bool]


class FifoQueue:
    name = "fifo"
    #: whether the policy reads a job's :attr:`Waiting.shape` (a driver need not work it out otherwise)
    by_shape = False

    def __init__(self) -> None:
        self._jobs: deque[Waiting] = deque()
        self.add = self._jobs.append   # (the deque's own: no call of a method per job)

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[Waiting]:
        return iter(self._jobs)

    def add(self, waiting: Waiting) -> None:
        """``waiting`` joins the queue's end (each queue's :attr:`add` is its deque's append)."""
        self._jobs.append(waiting)

    @property
    def head(self) -> Waiting | None:
        return self._jobs[0] if self._jobs else None

    def run_pass(self, try_start: TryStart) -> int:
        """Start jobs from the head until one does not start; how many started."""
        started = 0
        jobs = self._jobs
        while jobs and try_start(jobs[0]):
            jobs.popleft()
            started += 1
        return started


class BackfillQueue:
    name = "backfill"
    by_shape = True

    def __init__(self) -> None:
        self._by_shape: dict[Hashable, deque[Waiting]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Waiting]:
        return iter(sorted((w for jobs in self._by_shape.values() for w in jobs), key=lambda w: w.order))

    def add(self, waiting: Waiting) -> None:
        jobs = self._by_shape.get(waiting.shape)
        if jobs is None:
            jobs = self._by_shape[waiting.shape] = deque()
        jobs.append(waiting)
        self._count += 1

    @property
    def head(self) -> Waiting | None:
        heads = [jobs[0] for jobs in self._by_shape.values()]
        return min(heads, key=lambda w: w.order) if heads else None

    def run_pass(self, try_start: TryStart) -> int:
        """Offer the oldest job of each shape, oldest first; a shape that fails is not
        offered again in this pass. A queue of one shape (most passes of a trace replay:
        a queue that holds a job or two) is offered in order until one fails, as its heap
        would offer it."""
        if len(self._by_shape) == 1:
            [(shape, jobs)] = self._by_shape.items()
            started = 0
            while jobs and try_start(jobs[0]):
                jobs.popleft()
                self._count -= 1
                started += 1
            if not jobs:
                del self._by_shape[shape]
            return started
        heap = [(jobs[0].order, shape) for shape, jobs in self._by_shape.items()]
        heapq.heapify(heap)
        started = 0
        while heap:
            _, shape = heapq.heappop(heap)
            jobs = self._by_shape[shape]
            if not try_start(jobs[0]):
                continue   # this shape failed: not offered again in this pass
            jobs.popleft()
            self._count -= 1
            started += 1
            if jobs:
                heapq.heappush(heap, (jobs[0].order, shape))
            else:
                del self._by_shape[shape]
        return started


#: Queue policy reserve: how many jobs behind a shape's oldest a pass looks at for one short
#: enough to end before the reservations (as Slurm bounds the jobs its backfill tests, bf_max_job_test).
SHORT_SCAN = 100


class ReserveQueue(BackfillQueue):
    """Backfill, with reservations for the oldest jobs that do not start (see the module)."""

    name = "reserve"

    def __init__(self, max_reservations: int = DEFAULT_MAX_RESERVATIONS) -> None:
        super().__init__()
        self.max_reservations = max_reservations
        #: the driver's book of reservations (``clear``, ``reserve``, ``try_start``), set before the first pass
        self.book = None

    def run_pass(self, try_start: TryStart) -> int:
        """Backfill's pass, each job tried through the book (it keeps the job off the
        reservations it would delay); the first ``max_reservations`` jobs that do not start
        get one, planned again at every pass. Within a pass reservations only add up and
        free capacity only shrinks, so a shape that failed stays failed."""
        book = self.book
        book.clear(self)
        reserved = 0

        def start(waiting: Waiting) -> bool:
            nonlocal reserved
            if book.try_start(waiting, try_start):
                return True
            if reserved < self.max_reservations:
                if book.reserve(self, waiting):
                    reserved += 1
            elif book.outranks(self, waiting) and book.reserve(self, waiting):   # (priorities: it takes one over)
                book.keep_the_first(self, self.max_reservations)
            return False
        started = super().run_pass(start)
        if book.held:
            started += self._short_jobs(try_start)
        return started

    def _short_jobs(self, try_start: TryStart) -> int:
        """After the pass, while reservations are held: behind each shape's oldest job (which
        did not start), the first :data:`SHORT_SCAN` jobs are looked at, and one that ends
        before every reservation it could delay is tried (a shape's jobs differ in how long
        they run, so the oldest failing says nothing of a shorter one behind it). The first
        such job of a shape that does not start ends the shape's look: the next fits no better.
        A shape whose oldest job was free to use the reserved nodes and still did not start is
        not looked into at all (a shorter one fits no better)."""
        book, started = self.book, 0
        for shape, jobs in sorted(self._by_shape.items(), key=lambda item: item[1][0].order):
            if book.unhindered(jobs[0]):   # it failed with the reserved nodes open to it: so would a shorter one
                continue
            for waiting in list(itertools.islice(jobs, 1, SHORT_SCAN + 1)):
                if not book.unhindered(waiting):
                    continue
                if not book.try_start(waiting, try_start):
                    break
                jobs.remove(waiting)
                self._count -= 1
                started += 1
            if not jobs:
                del self._by_shape[shape]
        return started


class DropQueue(FifoQueue):
    """FIFO order, but a job is offered once: what does not start at its arrival is dropped."""

    name = "drop"

    def __init__(self) -> None:
        super().__init__()
        self._dropped: list[Waiting] = []

    def run_pass(self, try_start: TryStart) -> int:
        """Offer every job that arrived since the last pass, in order, once; how many
        started (the others are dropped: :meth:`take_dropped`)."""
        started = 0
        jobs = self._jobs
        while jobs:
            waiting = jobs.popleft()
            if try_start(waiting):
                started += 1
            else:
                self._dropped.append(waiting)
        return started

    def take_dropped(self) -> list[Waiting]:
        """The jobs dropped since the last call, in the order they were offered."""
        taken, self._dropped = self._dropped, []
        return taken


def dropped(queue) -> list[Waiting]:
    """The jobs ``queue`` gave up on since the last call (only the drop policy gives up on any)."""
    return queue.take_dropped() if isinstance(queue, DropQueue) else []


QUEUE_POLICIES = {"fifo": FifoQueue, "backfill": BackfillQueue, "reserve": ReserveQueue, "drop": DropQueue}


def queue_for(policy: str) -> FifoQueue | BackfillQueue | ReserveQueue | DropQueue:
    try:
        return QUEUE_POLICIES[policy]()
    except KeyError:
        raise ValueError(f"queue_policy: expected one of {', '.join(QUEUE_POLICIES)}, got {policy!r}") from None
