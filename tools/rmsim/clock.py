"""Clocks that drive the RM core: virtual time (a discrete-event loop) and real time.

Both expose the same calls — ``now()``, ``call_at(t, fn, *args)``,
``call_later(delay, fn, *args)``, ``every(interval, fn)`` and ``cancel(handle)`` of what
those returned — so the RM core, the simulated NodeManager and
scenario scripts are written once. The virtual loop orders events by
``(time, sequence)``: two events at the same time run in the order they were
scheduled, so a run is a pure function of its inputs and seed.

Example::

    loop = VirtualLoop()
    loop.call_later(5.0, print, "five")
    beat = loop.every(1.0, lambda: None)       # a periodic heartbeat
    loop.run_until(10.0)
    loop.cancel(beat)
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


#: A scheduled call, and its own entry on the clock's heap: the plain tuple ``(when, seq, fn,
#: args)``, ordered by ``(when, seq)`` (``seq`` is unique, so ``fn`` is never compared). It is
#: the one object an event costs, and a tuple literal is the cheapest one to build: a handle
#: class with a ``cancel()`` method (a list or tuple subclass built by a type call) took the
#: virtual loop from two thirds of a bare heapq loop to under a half. So the loop cancels it
#: (:meth:`VirtualLoop.cancel`: its ``seq`` goes into the loop's set of cancelled entries, and
#: the entry is skipped, and forgotten, when it comes off the heap); ``timer[0]`` is its time.
Timer = tuple


class Periodic:
    """What :meth:`VirtualLoop.every` returns (and the real-time loop's): the loop's
    ``cancel(handle)`` stops the ticks. Its ``tick`` is what each of them runs, and what tells
    them apart from one-shot calls on the heap (see :meth:`VirtualLoop.has_one_shot_calls`)."""

    __slots__ = ("cancelled", "_loop", "_interval", "_fn")

    def __init__(self, loop, interval: float, fn: Callable[[], Any]):
        self.cancelled, self._loop, self._interval, self._fn = False, loop, interval, fn

    def tick(self) -> None:
        if self.cancelled:
            return
        self._fn()
        if not self.cancelled:
            self._loop.call_later(self._interval, self.tick)


def _cancel(cancelled: set[int], handle: Timer | Periodic) -> None:
    if type(handle) is Periodic:
        handle.cancelled = True
    else:
        cancelled.add(handle[1])


def _is_tick(fn: Callable[..., Any]) -> bool:
    return type(getattr(fn, "__self__", None)) is Periodic


class VirtualLoop:
    """A heapq of :class:`Timer` entries (by time, then the order they were scheduled in);
    time jumps to the next event."""

    def __init__(self, start: float = 0.0):
        self._now = float(start)
        self._heap: list[Timer] = []
        self._seq = itertools.count()
        self._cancelled: set[int] = set()   # the seq of each cancelled entry still on the heap
        self.events_run = 0

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> Timer:
        if when < self._now:
            when = self._now
        entry = (when, next(self._seq), fn, args)
        _push(self._heap, entry)
        return entry

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """``call_at(now + max(0, delay), ...)``, written out (most events are scheduled so)."""
        now = self._now
        entry = (now + delay if delay > 0 else now, next(self._seq), fn, args)
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

        def due(*args: Any) -> None:
            # the next one goes on the heap before this one runs (it is off the heap now)
            after = next(later, None)
            if after is not None:
                when, next_args = after
                _push(heap, (when if when > self._now else self._now, next(places), due, next_args))
            fn(*args)

        _push(heap, (max(calls[0][0], self._now), first, due, calls[0][1]))

    def every(self, interval: float, fn: Callable[[], Any], start: float | None = None) -> Periodic:
        """Call ``fn()`` every ``interval`` seconds until the returned handle is cancelled."""
        if interval <= 0:
            raise ValueError(f"interval: expected a number > 0, got {interval}")
        handle = Periodic(self, interval, fn)
        self.call_at(self._now + interval if start is None else start, handle.tick)
        return handle

    def cancel(self, handle: Timer | Periodic) -> None:
        """Never run the call ``handle`` is (from :meth:`call_at`, :meth:`call_later`), or no
        more ticks of it (from :meth:`every`); nothing when it already ran."""
        _cancel(self._cancelled, handle)

    @property
    def pending(self) -> int:
        return len(self._heap)

    def has_one_shot_calls(self) -> bool:
        """Whether anything but the periodic calls of :meth:`every` is still scheduled. When
        nothing is, only those callbacks themselves can change what they will see."""
        cancelled = self._cancelled
        return any(entry[1] not in cancelled and not _is_tick(entry[2]) for entry in self._heap)

    def next_time(self) -> float | None:
        heap, cancelled = self._heap, self._cancelled
        while heap and heap[0][1] in cancelled:
            cancelled.discard(heapq.heappop(heap)[1])
        return heap[0][0] if heap else None

    def step(self) -> bool:
        """Run the next event; False when none is left."""
        heap, cancelled = self._heap, self._cancelled
        while heap:
            when, seq, fn, args = heapq.heappop(heap)
            if cancelled and seq in cancelled:
                cancelled.discard(seq)
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

    def run_instants(self, at_end: Callable[[], Any]) -> None:
        """Run every event, an instant at a time, calling ``at_end()`` after each instant:
        ``while run_instant(): at_end()``, with the loop written out (a trace replay runs
        150,000 instants; the calls per instant were a tenth of its clock's cost). What
        ``at_end`` schedules for now runs at this instant again, then ``at_end`` again."""
        heap, cancelled = self._heap, self._cancelled
        pop = heapq.heappop
        ran = 0
        try:
            while heap:
                t, seq, fn, args = pop(heap)
                if cancelled and seq in cancelled:
                    cancelled.discard(seq)
                    continue
                self._now = t
                ran += 1
                fn(*args)
                while heap and heap[0][0] <= t:
                    t, seq, fn, args = pop(heap)
                    if cancelled and seq in cancelled:
                        cancelled.discard(seq)
                    else:
                        ran += 1
                        fn(*args)
                at_end()
        finally:
            self.events_run += ran

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
        heap, cancelled = self._heap, self._cancelled
        pop = heapq.heappop
        ran = 0   # (added to events_run once, at the end: nothing reads it while the loop runs)
        try:
            if when == math.inf:   # (run(): every event, none compared with the end)
                while heap:
                    t, seq, fn, args = pop(heap)
                    if cancelled and seq in cancelled:
                        cancelled.discard(seq)
                    else:
                        self._now = t
                        ran += 1
                        fn(*args)
                return
            while heap and heap[0][0] <= when:
                t, seq, fn, args = pop(heap)
                if cancelled and seq in cancelled:
                    cancelled.discard(seq)
                else:
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
        self._cancelled: set[int] = set()   # (as the virtual loop's, under _cond)
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="rm-clock", daemon=True)
        self._thread.start()

    def now(self) -> float:
        return time.monotonic() - self._origin

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> Timer:
        with self._cond:
            entry = (when, next(self._seq), fn, args)
            heapq.heappush(self._heap, entry)
            self._cond.notify()
        return entry

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        return self.call_at(self.now() + max(0.0, delay), fn, *args)

    def every(self, interval: float, fn: Callable[[], Any], start: float | None = None) -> Periodic:
        handle = Periodic(self, interval, fn)
        self.call_at(self.now() + interval if start is None else start, handle.tick)
        return handle

    def cancel(self, handle: Timer | Periodic) -> None:
        """As :meth:`VirtualLoop.cancel` (from any thread)."""
        with self._cond:
            _cancel(self._cancelled, handle)

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
                _, seq, fn, args = heapq.heappop(self._heap)
                if seq in self._cancelled:
                    self._cancelled.discard(seq)
                    continue
            with self.lock:
                try:
                    fn(*args)
                except Exception:  # a failing timer must not stop the clock
                    import logging
                    logging.getLogger(__name__).exception("timer %r failed", fn)
