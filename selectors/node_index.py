"""NodeIndex: a view's nodes in a strategy's key order, per room for GPUs, kept up to date row by row.

select() wants the few best nodes that can take a request. When a strategy's key of
a node depends only on that node's state (:meth:`Selector.node_key
<gangmaster.selectors.selector.Selector.node_key>`), the nodes can be kept sorted by
key once, and a request walks them best first and stops as soon as it has the nodes
it wants: it reads only the buckets of nodes that may have room for its GPUs
(:func:`min_bucket`), and in each only the first nodes in key order, a chunk at a time
(the caller checks a chunk with one numpy expression per filter).

Buckets (:func:`room_buckets`) count a node's room for GPUs in tenths of a GPU:
``BUCKETS_PER_GPU`` per wholly free GPU, or, on a node with none, the most milli-GPU
free on one of its GPUs, in steps of ``SHARE_MILLI_PER_BUCKET`` (rounded down). A
request for ``g`` whole GPUs reads the buckets from ``g × BUCKETS_PER_GPU`` up; a share
of ``m`` milli-GPU those from ``m // SHARE_MILLI_PER_BUCKET`` up: the nodes full of
whole GPUs or of shares (most of a filled cluster) are never read, and every node with
room is (a node left out has less than asked; a node read may still fall short, and the
caller's check says so).

Equal keys are ordered by a tie rank per node: the node number (select()'s order),
or a permutation the caller gives (a seeded tie order), one index per rank.

Layout. Per bucket a *base run*: node numbers sorted by (key,
tie rank) when the index was last built, with their keys. The nodes that changed since
are marked *moved* and skipped in the base runs; they sit, unsorted, in one small table
of their current (key, tie rank, node, bucket), one row each, written in place as they
change again. A walk checks the moved nodes of its buckets all at once (one check of a
few dozen rows), then reads the base runs. Each base run remembers where its first
nodes not yet moved start (the nodes that change most lead a run). When the moved nodes
pass a share of the cluster the base runs are built again (a sort of every node once
per ``len(view) // REBUILD_SHARE`` changes).

Copies. A copy shares the base runs (never written in place) and copies what
changed: the moved table and the moved column, on its first change. So a scratch copy
of the view costs what differs from its original, not the cluster.

The view tells the index which rows changed (its ``dirty`` set, filled by
:meth:`ClusterView.derived <gangmaster.selectors.cluster.ClusterView.derived>`);
:meth:`NodeIndex.best` takes them in before it walks.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .fit import GPU_MILLI

#: the base runs are rebuilt once the moved nodes exceed len(view) // REBUILD_SHARE (at least
#: MIN_MOVED_BEFORE_REBUILD): a sort of n nodes then costs O(log n) per change, amortised.
REBUILD_SHARE = 16
MIN_MOVED_BEFORE_REBUILD = 64
#: nodes checked in the first chunk of a run; each next chunk of the same run is 4x larger,
#: so a walk that must skip many nodes costs O(skipped) numpy work in few steps.
FIRST_CHUNK = 32
#: buckets per wholly free GPU; a node with none has its share room in steps of a GPU's tenth
BUCKETS_PER_GPU = 10
SHARE_MILLI_PER_BUCKET = GPU_MILLI // BUCKETS_PER_GPU


def room_buckets(view, rows) -> np.ndarray:
    """The bucket of each node of ``rows`` (an index array, or ``slice(None)`` for every
    node): its room for GPUs (module docstring), int64."""
    free = np.asarray(view.gpus_free[rows], dtype=np.int64)
    buckets = free * BUCKETS_PER_GPU
    if view.gpus_shared[rows].any():
        shared = np.flatnonzero((free == 0) & (view.gpus_shared[rows] > 0))
        if shared.size:
            nodes = shared if isinstance(rows, slice) else np.asarray(rows)[shared]
            buckets[shared] = view.gpu_milli_free_rows(nodes).max(axis=1) // SHARE_MILLI_PER_BUCKET
    return buckets


def min_bucket(resource) -> int:
    """The first bucket that may hold nodes with room for one instance of ``resource`` (a
    ResourceDescriptor): whole GPUs, a share of one, or none."""
    if resource.gpus:
        return resource.gpus * BUCKETS_PER_GPU
    return resource.gpu_milli // SHARE_MILLI_PER_BUCKET



class NodeIndex:
    """The nodes sorted by (key, tie rank) per bucket, for the k best that pass a check.

    ``ties``: a rank per node for equal keys, lower first (the node number when None).
    The index keeps a reference to it: its order never changes."""

    def __init__(self, keys: np.ndarray, buckets: np.ndarray, what: str = "keys",
                 ties: np.ndarray | None = None):
        if not np.issubdtype(np.asarray(keys).dtype, np.integer):
            raise TypeError(f"{what}: a node-state key column must hold integers, got {np.asarray(keys).dtype}")
        self.dirty: set[int] = set()
        self.ties = None if ties is None else np.asarray(ties)
        self._build(keys, buckets)

    def _build(self, keys: np.ndarray, buckets: np.ndarray) -> None:
        if self.ties is None:  # stable: equal keys stay in node order
            order = np.argsort(keys, kind="stable")
        else:
            order = np.lexsort((self.ties, keys))
        order = order[np.argsort(buckets[order], kind="stable")]
        values, starts = np.unique(buckets[order], return_index=True)
        ends = np.append(starts[1:], order.size)
        self._base: dict[int, _Run] = {}
        for b, s, e in zip(values, starts, ends):
            nodes = order[s:e]
            self._base[int(b)] = _Run.of(nodes, keys[nodes], nodes if self.ties is None else self.ties[nodes])
        self._moved = np.zeros(len(keys), dtype=bool)
        # the moved nodes, a row each: (key, tie rank, node, bucket) now; at most as many as
        # sync lets move before it builds again
        self._table = np.zeros((max(MIN_MOVED_BEFORE_REBUILD, len(keys) // REBUILD_SHARE), 4), dtype=np.int64)
        self._shared = False  # the moved column and table are a copy's too: copied before a write
        self._where: dict[int, int] = {}  # moved node -> its row in the table
        # bucket -> (position, key there): the base run's nodes before it have all moved
        self._live_from: dict[int, tuple[int, int]] = {}

    def copy(self) -> "NodeIndex":
        clone = object.__new__(NodeIndex)
        clone.dirty = set(self.dirty)
        clone.ties = self.ties
        clone._base = self._base
        clone._moved, clone._table = self._moved, self._table
        clone._shared = self._shared = True
        clone._where = dict(self._where)
        clone._live_from = dict(self._live_from)
        return clone

    # ------------------------------------------------------------ keeping up
    def sync(self, keys: np.ndarray, buckets: np.ndarray) -> None:
        """Take in the rows that changed (``dirty``), given the current columns."""
        if not self.dirty:
            return
        if len(self._where) + len(self.dirty) > max(MIN_MOVED_BEFORE_REBUILD, len(keys) // REBUILD_SHARE):
            self.dirty.clear()
            self._build(keys, buckets)
            return
        if self._shared:
            self._moved, self._table, self._shared = self._moved.copy(), self._table.copy(), False
        where, table = self._where, self._table
        for node in self.dirty:
            row = where.get(node)
            if row is None:
                self._moved[node] = True
                row = where[node] = len(where)
            table[row] = (keys.item(node), self._tie(node), node, buckets.item(node))
        self.dirty.clear()

    def _tie(self, node: int) -> int:
        return node if self.ties is None else int(self.ties[node])

    # --------------------------------------------------------------- reading
    def best(self, k: int, min_bucket: int, passes: Callable[[np.ndarray], np.ndarray]
             ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` smallest (key, tie rank) among the nodes of buckets ``>= min_bucket``
        for which ``passes(nodes)`` (a bool array) holds: node numbers and keys, best
        first. The moved nodes are checked at once; then the base runs are read in order
        of their smallest key, and a run (or the rest of one) whose smallest key is above
        the k-th found is not read."""
        found: list[tuple[int, int, int]] = []  # (key, tie, node), sorted, at most k
        runs = []  # (smallest key, place, run, position to start from, bucket)
        if self._where:
            found = self._best_moved(k, min_bucket, passes)
            live_from = self._live_from
            for r, (bucket, run) in enumerate(self._base.items()):
                if bucket >= min_bucket:
                    start, first = live_from.get(bucket, (0, run.first))
                    if start < run.nodes.size:
                        runs.append((first, r, run, start, bucket))
            moved = self._moved
        else:
            runs = [(run.first, r, run, 0, bucket) for r, (bucket, run) in enumerate(self._base.items())
                    if bucket >= min_bucket]
            moved = None
        runs.sort()  # by smallest key, then place (unique: runs are never compared)
        for first, _, (nodes_run, keys_run, ties_run, _), start, bucket in runs:
            if len(found) >= k and first > found[-1][0]:
                break  # every later run starts even higher
            size, taken = FIRST_CHUNK, 0
            while start < nodes_run.size and taken < k:
                if len(found) >= k and keys_run[start] > found[-1][0]:
                    break
                end = start + size
                nodes = nodes_run[start:end]
                at = None
                if moved is not None:
                    at = np.flatnonzero(~moved[nodes])
                    if start == self._live_from.get(bucket, (0,))[0]:  # where the run starts now
                        live = start + int(at[0]) if at.size else end
                        self._live_from[bucket] = (live, int(keys_run[live]) if live < nodes_run.size else 0)
                    if not at.size:  # all moved
                        start, size = end, size * 4
                        continue
                    nodes = nodes[at]
                ok = np.flatnonzero(passes(nodes))[:k]
                if ok.size:
                    where = (ok if at is None else at[ok]) + start
                    new = list(zip(keys_run[where].tolist(), ties_run[where].tolist(), nodes[ok].tolist()))
                    taken += len(new)
                    found = sorted(found + new)[:k] if found else new
                start, size = end, size * 4
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        keys, _, nodes = zip(*found)
        return np.array(nodes, dtype=np.int64), np.array(keys, dtype=np.int64)

    def _best_moved(self, k: int, min_bucket: int, passes: Callable[[np.ndarray], np.ndarray]
                    ) -> list[tuple[int, int, int]]:
        """The ``k`` smallest (key, tie, node) among the moved nodes of buckets ``>= min_bucket``
        that pass, sorted."""
        table = self._table[:len(self._where)]
        rows = table[table[:, 3] >= min_bucket]
        if not rows.size:
            return []
        rows = rows[passes(rows[:, 2])]
        if not rows.size:
            return []
        best = rows[np.lexsort((rows[:, 1], rows[:, 0]))[:k], :3] if len(rows) > 1 else rows[:, :3]
        return [tuple(row) for row in best.tolist()]


class _Run(NamedTuple):
    """Nodes sorted by (key, tie rank), with their keys and tie ranks, and the smallest key
    as a Python int (a walk orders the runs by it)."""

    nodes: np.ndarray
    keys: np.ndarray
    ties: np.ndarray
    first: int

    @classmethod
    def of(cls, nodes: np.ndarray, keys: np.ndarray, ties: np.ndarray) -> "_Run":
        return cls(nodes, keys, ties, int(keys[0]))
