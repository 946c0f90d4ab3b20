"""NodeIndex: a view's nodes in a strategy's key order, per free-GPU count, kept up to date row by row.

select() wants the few best nodes that can take a request. When a strategy's key of
a node depends only on that node's state (:meth:`Selector.node_key
<gangmaster.selectors.selector.Selector.node_key>`), the nodes can be kept sorted by
key once, and a request walks them best first and stops as soon as it has the nodes
it wants: a request for ``g`` GPUs reads only the buckets of nodes with at least
``g`` free GPUs, and in each only the first nodes in key order, a chunk at a time
(the caller checks a chunk with one numpy expression per filter).

Layout. Per bucket (a free-GPU count) a *base run*: node numbers sorted by (key,
node) when the index was last built, with their keys; and an *extra run*: the nodes
that changed since, sorted by their current (key, node). A changed node is marked
*moved* and skipped in the base runs. When the moved nodes pass a share of the
cluster the base runs are built again (a sort of every node once per
``len(view) // REBUILD_SHARE`` changes).

Copies. A copy shares the base runs (never written in place) and copies what
changed: the extra runs, and the moved column on its first change. So a scratch copy
of the view costs what differs from its original, not the cluster.

The view tells the index which rows changed (its ``dirty`` set, filled by
:meth:`ClusterView.derived <gangmaster.selectors.cluster.ClusterView.derived>`);
:meth:`NodeIndex.best` takes them in before it walks.
"""
from __future__ import annotations

from bisect import bisect_left, insort
from typing import Callable

import numpy as np

#: the base runs are rebuilt once the moved nodes exceed len(view) // REBUILD_SHARE (at least
#: MIN_MOVED_BEFORE_REBUILD): a sort of n nodes then costs O(log n) per change, amortised.
REBUILD_SHARE = 16
MIN_MOVED_BEFORE_REBUILD = 64
#: nodes checked in the first chunk of a run; each next chunk of the same run is 4x larger,
#: so a walk that must skip many nodes costs O(skipped) numpy work in few steps.
FIRST_CHUNK = 16


class NodeIndex:
    """The nodes sorted by (key, node) per bucket, for the k best that pass a check."""

    def __init__(self, keys: np.ndarray, buckets: np.ndarray, what: str = "keys"):
        if not np.issubdtype(np.asarray(keys).dtype, np.integer):
            raise TypeError(f"{what}: a node-state key column must hold integers, got {np.asarray(keys).dtype}")
        self.dirty: set[int] = set()
        self._build(keys, buckets)

    def _build(self, keys: np.ndarray, buckets: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")  # stable: equal keys stay in node order
        order = order[np.argsort(buckets[order], kind="stable")]
        values, starts = np.unique(buckets[order], return_index=True)
        ends = np.append(starts[1:], order.size)
        self._base: dict[int, tuple[np.ndarray, np.ndarray]] = {
            int(b): (order[s:e], keys[order[s:e]]) for b, s, e in zip(values, starts, ends)}
        self._moved = np.zeros(len(keys), dtype=bool)
        self._moved_shared = False
        self._extra: dict[int, list[tuple[int, int]]] = {}  # bucket -> sorted [(key, node)]
        self._extra_arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._where: dict[int, tuple[int, int]] = {}  # moved node -> (bucket, key) now

    def copy(self) -> "NodeIndex":
        clone = object.__new__(NodeIndex)
        clone.dirty = set(self.dirty)
        clone._base = self._base
        clone._moved = self._moved
        clone._moved_shared = self._moved_shared = True
        clone._extra = {b: list(entries) for b, entries in self._extra.items()}
        clone._extra_arrays = dict(self._extra_arrays)
        clone._where = dict(self._where)
        return clone

    def memory_bytes(self) -> int:
        """Bytes held in numpy arrays (the per-node part of the index)."""
        base = sum(nodes.nbytes + keys.nbytes for nodes, keys in self._base.values())
        return base + self._moved.nbytes

    # ------------------------------------------------------------ keeping up
    def sync(self, keys: np.ndarray, buckets: np.ndarray) -> None:
        """Take in the rows that changed (``dirty``), given the current columns."""
        if not self.dirty:
            return
        if len(self._where) + len(self.dirty) > max(MIN_MOVED_BEFORE_REBUILD, len(keys) // REBUILD_SHARE):
            self.dirty.clear()
            self._build(keys, buckets)
            return
        if self._moved_shared:
            self._moved, self._moved_shared = self._moved.copy(), False
        for node in self.dirty:
            old = self._where.get(node)
            if old is None:
                self._moved[node] = True
            else:
                entries = self._extra[old[0]]
                del entries[bisect_left(entries, (old[1], node))]
                self._extra_arrays.pop(old[0], None)
            bucket, key = int(buckets[node]), int(keys[node])
            insort(self._extra.setdefault(bucket, []), (key, node))
            self._extra_arrays.pop(bucket, None)
            self._where[node] = (bucket, key)
        self.dirty.clear()

    # --------------------------------------------------------------- reading
    def best(self, k: int, min_bucket: int, passes: Callable[[np.ndarray], np.ndarray]
             ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` smallest (key, node) among the nodes of buckets ``>= min_bucket``
        for which ``passes(nodes)`` (a bool array) holds: node numbers and keys, best
        first. Runs are read in order of their smallest key, and a run (or the rest of
        one) whose smallest key is above the k-th found is not read."""
        runs = [run for bucket, run in self._base.items() if bucket >= min_bucket]
        skip_moved = len(runs)  # the first runs are base runs: they may hold moved nodes
        runs += [self._extra_run(bucket) for bucket, entries in self._extra.items()
                 if bucket >= min_bucket and entries]
        order = sorted(range(len(runs)), key=lambda r: runs[r][1][0])
        found: list[tuple[int, int]] = []  # (key, node), sorted, at most k
        for r in order:
            nodes_run, keys_run = runs[r]
            if len(found) >= k and keys_run[0] > found[-1][0]:
                break  # every later run starts even higher
            moved = self._moved if r < skip_moved and self._where else None
            start, size, taken = 0, FIRST_CHUNK, 0
            while start < nodes_run.size and taken < k:
                if len(found) >= k and keys_run[start] > found[-1][0]:
                    break
                nodes, keys = nodes_run[start:start + size], keys_run[start:start + size]
                start, size = start + size, size * 4
                if moved is not None:
                    live = ~moved[nodes]
                    nodes, keys = nodes[live], keys[live]
                ok = passes(nodes)
                new = list(zip(keys[ok][:k].tolist(), nodes[ok][:k].tolist()))
                if not new:
                    continue
                taken += len(new)
                found = sorted(found + new)[:k] if found else new
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        keys, nodes = zip(*found)
        return np.array(nodes, dtype=np.int64), np.array(keys, dtype=np.int64)

    def _extra_run(self, bucket: int) -> tuple[np.ndarray, np.ndarray]:
        run = self._extra_arrays.get(bucket)
        if run is None:
            entries = self._extra[bucket]
            run = self._extra_arrays[bucket] = (np.array([n for _, n in entries], dtype=np.int64),
                                                np.array([k for k, _ in entries], dtype=np.int64))
        return run
