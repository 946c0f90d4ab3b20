"""Clocks that drive the RM core: virtual time (a discrete-event loop) and real time.

Both expose the same three calls — ``now()``, ``call_at(t, fn, *args)``,
``call_later(delay, fn, *args)`` — so the RM core, the simulated NodeManager and
scenario scripts are written once. The virtual loop orders events by
``(time, sequence)``: two events at the same time run in the order they were
scheduled, so a run is a pure function of its inputs and seed.

Example::

    loop = VirtualLoop()
    loop.call_later(5.0, print, "five")
    loop.every(1.0, lambda: None)       # a periodic heartbeat
    loop.run_until(10.0)
"""
from __future__ import annotations

import heapq
import itertools
import math
import operator
import threading
import time
from typing import Any, Callable


_push = heapq.heappush


class Timer(list):
    """A scheduled call, and its own entry on the clock's heap: ``[when, seq, fn, args,
    periodic]``, ordered by ``(when, seq)`` (``seq`` is unique, so nothing after it is ever
    compared). Being the entry, it is the one object an event costs: a loop dispatches by
    indexing it (no ``(time, seq, timer)`` tuple beside it, no ``__init__`` run in Python:
    :func:`timer` builds it in C), which is what kept the virtual loop at a quarter of a bare
    heapq loop. ``cancel()`` makes it a no-op (its ``fn`` is dropped); ``periodic``: one tick
    of an :meth:`~VirtualLoop.every` (it schedules the next itself)."""

    __slots__ = ()

    when = property(operator.itemgetter(0))
    fn = property(operator.itemgetter(2))
    args = property(operator.itemgetter(3))

    @property
    def cancelled(self) -> bool:
        return self[2] is None

    @property
    def periodic(self) -> bool:
        return self[4]

    @periodic.setter
    def periodic(self, value: bool) -> None:
        self[4] = value

    def cancel(self) -> None:
        self[2], self[3] = None, ()


def timer(when: float, seq: int, fn: Callable[..., Any] | None, args: tuple) -> Timer:
    """A :class:`Timer` for ``fn(*args)`` at ``when``, ``seq``-th of its instant's order."""
    return Timer((when, seq, fn, args, False))


class VirtualLoop:
    """A heapq of :class:`Timer` entries (by time, then the order they were scheduled in);
    time jumps to the next event."""

    def __init__(self, start: float = 0.0):
        self._now = float(start)
        self._heap: list[Timer] = []
        self._seq = itertools.count()
        self.events_run = 0

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> Timer:
        if when < self._now:
            when = self._now
        entry = Timer((when, next(self._seq), fn, args, False))
        heapq.heappush(self._heap, entry)
        return entry

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """``call_at(now + max(0, delay), ...)``, written out (most events are scheduled so)."""
        now = self._now
        entry = Timer((now + delay if delay > 0 else now, next(self._seq), fn, args, False))
        _push(self._heap, entry)
        return entry

    def call_each(self, fn: Callable[..., Any], calls: list[tuple[float, tuple]]) -> None:
        """``fn(*args)`` at each ``(when, args)`` of ``calls`` (in time order), exactly as
        ``call_at`` called now for each in turn would: they take their places in the order
        of events now. Only the next of them is on the heap at a time (it puts the one
        after it there as it runs), so a trace's tens of thousands of arrivals do not make
        every other event's push and pop dearer."""
        times = list(map(operator.itemgetter(0), calls))
        if any(map(operator.gt, times, itertools.islice(times, 1, None))):   # (in C: a trace's every arrival)
            raise ValueError("call_each: the calls must be in time order")
        if not calls:
            return
        first = next(self._seq)
        self._seq = itertools.count(first + len(calls))   # theirs: first, first + 1, ...
        heap, places, later = self._heap, itertools.count(first + 1), itertools.islice(calls, 1, None)
        # One timer carries them all, in turn, with the args of the one due: it is off the heap
        # while that one runs (popped), so it goes back on for the next one first.
        stream = timer(max(calls[0][0], self._now), first, None, calls[0][1])

        def due(*args: Any) -> None:
            after = next(later, None)
            if after is not None:
                when, stream[3] = after
                stream[0], stream[1] = when if when > self._now else self._now, next(places)
                heapq.heappush(heap, stream)
            fn(*args)

        stream[2] = due
        heapq.heappush(heap, stream)

    def every(self, interval: float, fn: Callable[[], Any], start: float | None = None) -> Timer:
        """Call ``fn()`` every ``interval`` seconds until the returned timer is cancelled."""
        if interval <= 0:
            raise ValueError(f"interval: expected a number > 0, got {interval}")
        handle = timer(0.0, -1, fn, ())

        def tick() -> None:
            if handle.cancelled:
                return
            fn()
            if not handle.cancelled:
                self.call_later(interval, tick).periodic = True

        self.call_at(self._now + interval if start is None else start, tick).periodic = True
        return handle

    @property
    def pending(self) -> int:
        return len(self._heap)

    def has_one_shot_calls(self) -> bool:
        """Whether anything but the periodic calls of :meth:`every` is still scheduled. When
        nothing is, only those callbacks themselves can change what they will see."""
        return any(entry[2] is not None and not entry[4] for entry in self._heap)

    def next_time(self) -> float | None:
        while self._heap and self._heap[0][2] is None:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def step(self) -> bool:
        """Run the next event; False when none is left."""
        heap = self._heap
        while heap:
            when, _, fn, args, _ = heapq.heappop(heap)
            if fn is None:   # cancelled
                continue
            self._now = when
            self.events_run += 1
            fn(*args)
            return True
        return False

    def run_instant(self) -> bool:
        """Run the next instant: every event due at the next event's time, those they schedule
        for it meanwhile included, then stop before the clock moves on; False when no event is
        left. A driver that does some work once per instant, whatever and however many events
        the instant held, does it after each call (events it schedules for now make the next
        call run at this instant again)."""
        t = self.next_time()
        if t is None:
            return False
        self._run_through(t)
        return True

    def run_until(self, when: float) -> None:
        """Run every event at or before ``when``, then set the clock to ``when``."""
        self._run_through(when)
        if when > self._now:
            self._now = float(when)

    def run(self, max_events: int | None = None) -> None:
        """Run until no event is left (or ``max_events`` ran)."""
        if max_events is not None:
            ran = 0
            while ran < max_events and self.step():
                ran += 1
            return
        self._run_through(math.inf)

    def _run_through(self, when: float) -> None:
        """Run every event at or before ``when`` (step() inlined)."""
        heap = self._heap
        pop = heapq.heappop
        ran = 0   # (added to events_run once, at the end: nothing reads it while the loop runs)
        try:
            if when == math.inf:   # (run(): every event, none compared with the end)
                while heap:
                    t, _, fn, args, _ = pop(heap)
                    if fn is not None:   # (else cancelled)
                        self._now = t
                        ran += 1
                        fn(*args)
                return
            while heap and heap[0][0] <= when:
                t, _, fn, args, _ = pop(heap)
                if fn is not None:   # (else cancelled)
                    self._now = t
                    ran += 1
                    fn(*args)
        finally:
            self.events_run += ran


class RealTimeLoop:
    """Wall-clock time; scheduled calls run on one background thread, holding
    ``lock`` (the RM core's lock) so they never interleave with RPC handlers."""

    def __init__(self, lock: threading.RLock | None = None, start: float = 0.0):
        self.lock = lock or threading.RLock()
        self._origin = time.monotonic() - start   # a restored RM continues its clock from `start`
        self._heap: list[Timer] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="rm-clock", daemon=True)
        self._thread.start()

    def now(self) -> float:
        return time.monotonic() - self._origin

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> Timer:
        with self._cond:
            entry = timer(when, next(self._seq), fn, args)
            heapq.heappush(self._heap, entry)
            self._cond.notify()
        return entry

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return self.call_at(self.now() + max(0.0, delay), fn, *args)

    def every(self, interval: float, fn: Callable[[], Any], start: float | None = None) -> Timer:
        handle = timer(0.0, -1, fn, ())

        def tick() -> None:
            if handle.cancelled:
                return
            fn()
            self.call_later(interval, tick)

        self.call_at(self.now() + interval if start is None else start, tick)
        return handle

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > self.now()):
                    timeout = None if not self._heap else max(0.0, self._heap[0][0] - self.now())
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                _, _, fn, args, _ = heapq.heappop(self._heap)
            if fn is None:   # cancelled
                continue
            with self.lock:
                try:
                    fn(*args)
                except Exception:  # a failing timer must not stop the clock
                    import logging
                    logging.getLogger(__name__).exception("timer %r failed", fn)
