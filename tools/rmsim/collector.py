"""The cycle collector around the simulated NodeManager's bursts of long-lived objects.

A gang of thousands of tasks that ends at one instant leaves hundreds of thousands of
objects that live on (statuses, records). Collecting during such a burst traverses the
young objects again and again, to find no garbage. :func:`collector_paused` holds the
collector off for the burst (objects freed by reference counting are freed at once
either way) and then collects once. The AM knows nothing of it: the simulator's cost of
being many processes in one is the simulator's to pay.
"""
from __future__ import annotations

import gc

__all__ = ["collector_paused"]


class collector_paused:   # noqa: N801 - used as a function: ``with collector_paused():``
    """Hold the cycle collector off inside the block and give it back as it was found.

    After a burst (more new objects than the youngest generation's threshold) one
    collection takes the two young generations together: what survives it goes straight
    to the oldest generation. Left to the collector, the burst would be traversed twice,
    by the youngest generation's next collection and again by the middle one's.

    Where someone else (a test, a trace replay) has paused the collector it does nothing."""

    __slots__ = ("_was_enabled",)

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        if self._was_enabled:
            gc.disable()

    def __exit__(self, *exc) -> None:
        if self._was_enabled:
            gc.enable()
            if gc.get_count()[0] > gc.get_threshold()[0]:
                gc.collect(1)
