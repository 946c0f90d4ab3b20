"""Which nodes changed, and since when: what feeds each AM's ``node_updates``.

An AM builds its view of the cluster once and keeps it from the node updates of
its allocate responses, so a response must carry every node whose usage, health
or container count changed since that application's previous response — and
nothing else, so a quiet cluster costs a quiet heartbeat.

Every change gets the next sequence number: the node's entry of ``last`` holds the
number of its latest change and an append-only ``log`` lists the changed nodes in
order. An application remembers the number it has seen up to (its cursor), so
recording a change costs O(1) whatever the number of applications, and a
response costs O(changes since the cursor). The log is bounded: past twice the
number of nodes its older half is dropped, and a cursor older than the log is
answered from ``last`` (one vector scan) instead. ``last`` is a plain list: it is
written at every change and read entry by entry from the log, where a numpy column's
scalar reads and writes cost several times as much. A response carries
at most ``limit`` nodes, the oldest changes first; the cursor then stops there
and the rest follow in the next responses.

An RM whose responses carry no node updates (its AMs share a view their driver keeps)
has no reader until a driver first asks for the changes (:meth:`record`): until then a
change is not recorded, and costs one test.
"""
from __future__ import annotations

import numpy as np

#: The log never holds fewer entries than this before it is halved (a small cluster churns too).
MIN_LOG_ENTRIES = 1024


class NodeChanges:
    def __init__(self, nodes: int, recording: bool = True):
        #: whether changes are recorded (someone reads them): see :meth:`record`
        self.recording = recording
        self.seq = 0                                   # the number of the latest change
        self.last = [0] * nodes                        # per node: the number of its latest change (0: none)
        self.log: list[int] = []                       # changed nodes, in order; log[k] is change base + k
        self.base = 1
        self._max_log = max(MIN_LOG_ENTRIES, 2 * nodes)

    def touch(self, node: int) -> None:
        """Node ``node`` changed (usage, health, containers)."""
        if not self.recording:
            return
        self.seq = self.last[node] = self.seq + 1
        log = self.log
        log.append(node)
        if len(log) > self._max_log:
            drop = len(log) // 2
            del log[:drop]
            self.base += drop

    def record(self) -> None:
        """Record every change from now on (a reader's first cursor, :attr:`seq`, is taken
        after this: no change it could ask for went unrecorded)."""
        self.recording = True

    def touch_all(self) -> None:
        """Every node changed (the RM was rebuilt from its state file): every AM hears of all."""
        for node in range(len(self.last)):
            self.touch(node)

    def restore(self, seq: int, last: list[int]) -> None:
        """Take up the numbering a state file kept (its log is not kept: older cursors
        are answered from the column)."""
        if len(last) != len(self.last) or any(not 0 <= n <= seq for n in last):
            raise ValueError(f"node change numbers must lie in 0..{seq}, one per node")
        self.seq = seq
        self.last = list(last)
        self.log, self.base = [], seq + 1

    def since(self, cursor: int, limit: int) -> tuple[list[int], int]:
        """The nodes changed after change number ``cursor`` (each once, oldest change first,
        at most ``limit``) and the cursor to pass next time."""
        if cursor >= self.seq:
            return [], cursor
        if cursor + 1 >= self.base:
            return self._from_log(cursor, limit)
        return self._from_column(cursor, limit)

    def _from_log(self, cursor: int, limit: int) -> tuple[list[int], int]:
        out = self.log[cursor + 1 - self.base:]
        if len(set(out)) < len(out):   # some node changed twice: it is reported at its latest change only, once
            last = self.last
            # log[k] is change base + k
            out = [node for change, node in enumerate(out, cursor + 1) if last[node] == change]
        if len(out) > limit:   # the rest follow from just before the first change left out
            return out[:limit], self.last[out[limit]] - 1
        return out, self.seq

    def _from_column(self, cursor: int, limit: int) -> tuple[list[int], int]:
        last = np.array(self.last, dtype=np.int64)
        changed = np.flatnonzero(last > cursor)
        order = np.argsort(last[changed], kind="stable")
        changed = changed[order]
        if len(changed) > limit:
            changed = changed[:limit]
            return changed.tolist(), int(last[changed[-1]])
        return changed.tolist(), self.seq
