"""The replay's time series, recorded as it happens: one row per instant at which a
value changed (rows of one instant coalesced), never by rescanning the cluster."""
from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

import numpy as np

#: A row's time, and its values (``TimelineRecorder._rows``).
_TIME, _VALUES = itemgetter(0), itemgetter(1)


@dataclass(frozen=True)
class Timeline:
    """A step function: each value holds from ``t[i]`` until ``t[i + 1]`` (the last
    until the replay's end). ``hol_blocked_free_gpus``: the free GPUs (of the head
    gang's queue's nodes) while a queue's head gang cannot be placed although its
    queue's free GPUs are at least its size, summed over queues."""

    t: np.ndarray
    allocated_gpus: np.ndarray
    queue_length: np.ndarray
    pending_gpus: np.ndarray
    hol_blocked_free_gpus: np.ndarray
    capacity_gpus: int


class TimelineRecorder:
    def __init__(self, capacity_gpus: int):
        self.capacity_gpus = capacity_gpus
        self._rows: list[tuple[float, tuple[int, int, int, int]]] = []   # (t, the values from t on)
        self._last: tuple | None = None   # the values of the last row
        self._last_t: float | None = None   # its time

    def record(self, t: float, allocated: int, queue_length: int, pending_gpus: int, hol: int) -> None:
        values = (allocated, queue_length, pending_gpus, hol)
        if values == self._last:
            return
        rows = self._rows
        if t == self._last_t:   # the same instant: its last values stand
            if len(rows) > 1 and rows[-2][1] == values:
                rows.pop()   # (back to the row before, which holds them)
                self._last_t = rows[-1][0]
            else:
                rows[-1] = (t, values)
        else:
            rows.append((t, values))
            self._last_t = t
        self._last = values

    def timeline(self) -> Timeline:
        rows = self._rows
        t = np.array(list(map(_TIME, rows)), dtype=np.float64)
        columns = list(zip(*map(_VALUES, rows))) if rows else [(), (), (), ()]
        return Timeline(t, *(np.array(c, dtype=np.int64) for c in columns), capacity_gpus=self.capacity_gpus)
