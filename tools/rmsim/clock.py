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


class Timer:
    """A handle to a scheduled call; ``cancel()`` makes it a no-op. ``periodic``: one
    tick of an :meth:`~VirtualLoop.every` (it schedules the next itself)."""

    __slots__ = ("when", "fn", "args", "cancelled", "periodic")

    def __init__(self, when: float, fn: Callable[..., Any], args: tuple):
        self.when = when
        self.fn = fn
        self.args = args
        self.cancelled = self.periodic = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualLoop:
    """A heapq of ``(time, seq, timer)``; time jumps to the next event."""

    def __init__(self, start: float = 0.0):
        self._now = float(start)
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self.events_run = 0

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> Timer:
        if when < self._now:
            when = self._now
        timer = Timer(when, fn, args)
        heapq.heappush(self._heap, (when, next(self._seq), timer))
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return self.call_at(self._now + max(0.0, delay), fn, *args)

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
        stream = Timer(max(calls[0][0], self._now), None, calls[0][1])

        def due(*args: Any) -> None:
            after = next(later, None)
            if after is not None:
                when, stream.args = after
                stream.when = when = when if when > self._now else self._now
                heapq.heappush(heap, (when, next(places), stream))
            fn(*args)

        stream.fn = due
        heapq.heappush(heap, (stream.when, first, stream))

    def every(self, interval: float, fn: Callable[[], Any], start: float | None = None) -> Timer:
        """Call ``fn()`` every ``interval`` seconds until the returned timer is cancelled."""
        if interval <= 0:
            raise ValueError(f"interval: expected a number > 0, got {interval}")
        handle = Timer(0.0, fn, ())

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
        return any(not timer.cancelled and not timer.periodic for _, _, timer in self._heap)

    def next_time(self) -> float | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def step(self) -> bool:
        """Run the next event; False when none is left."""
        heap = self._heap
        while heap:
            when, _, timer = heapq.heappop(heap)
            if timer.cancelled:
                continue
            self._now = when
            self.events_run += 1
            timer.fn(*timer.args)
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
        while heap and heap[0][0] <= when:
            t, _, timer = pop(heap)
            if timer.cancelled:
                continue
            self._now = t
            self.events_run += 1
            timer.fn(*timer.args)


class RealTimeLoop:
    """Wall-clock time; scheduled calls run on one background thread, holding
    ``lock`` (the RM core's lock) so they never interleave with RPC handlers."""

    def __init__(self, lock: threading.RLock | None = None, start: float = 0.0):
        self.lock = lock or threading.RLock()
        self._origin = time.monotonic() - start   # a restored RM continues its clock from `start`
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="rm-clock", daemon=True)
        self._thread.start()

    def now(self) -> float:
        return time.monotonic() - self._origin

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> Timer:
        timer = Timer(when, fn, args)
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._seq), timer))
            self._cond.notify()
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return self.call_at(self.now() + max(0.0, delay), fn, *args)

    def every(self, interval: float, fn: Callable[[], Any], start: float | None = None) -> Timer:
        handle = Timer(0.0, fn, ())

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
                _, _, timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            with self.lock:
                try:
                    timer.fn(*timer.args)
                except Exception:  # a failing timer must not stop the clock
                    import logging
                    logging.getLogger(__name__).exception("timer %r failed", timer.fn)
