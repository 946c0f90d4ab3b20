"""NodeIndex: a view's nodes in a strategy's key order, per room for GPUs, kept up to date row by row.

select() wants the few best nodes that can take a request. When a strategy's key of
a node depends only on that node's state (:meth:`Selector.node_key
<gangmaster.selectors.selector.Selector.node_key>`), the nodes can be kept sorted by
key, and a request walks them best first and stops as soon as it has the nodes it
wants: it reads only the buckets of nodes that may have room for its GPUs
(:func:`min_bucket`), and in each only the first nodes in key order, a chunk at a time
(the caller checks the chunks of every bucket still read at once, with one numpy
expression per filter).

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

Layout. Per bucket that has nodes a *run*: a Python list of ``(key, tie rank, node)``
of its nodes, sorted (a run emptied is dropped); per node its entry and its bucket. Built with one numpy sort; then a node that
changes leaves its run and enters its new one by bisection (two list operations of a
few microseconds, where a replay changes a node or two between placements); a node
whose key and bucket did not change is left where it is. When more nodes changed at
once than a share of the cluster (a big gang booked), the runs are built again with
the sort (``len(view) // REBUILD_SHARE``, at least ``MIN_CHANGED_BEFORE_REBUILD``).
A node that changes into bucket 0 (no room for a GPU: a full node) is *parked* instead,
in no run, its key not worked out, until a walk reads bucket 0 (one that asks no GPU):
then every parked node enters bucket 0's run (:meth:`NodeIndex.take_in`).
A run's nodes are also kept as an array for the chunks a walk checks at once, made
when a walk first needs it, then kept in step with the run (a node that moves costs
two array copies, not the run's array made again in Python).

Copies. A copy shares the runs and the per-node lists, and copies one before it first
writes to it (so does the original, once copied): a scratch copy of the view costs
what differs from its original, not the cluster.

The view tells the index which rows changed (its ``dirty`` set, filled by
:meth:`ClusterView.derived <gangmaster.selectors.cluster.ClusterView.derived>`);
:meth:`NodeIndex.sync` takes them in from whole columns, :meth:`NodeIndex.take_in` row
by row (:func:`~gangmaster.selectors.candidates.node_index`: a changed node's key and
bucket worked out from the view's row, no column kept for them).
"""
from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter
from typing import Callable

import numpy as np

from .fit import GPU_MILLI

#: the runs are built again (one numpy sort) when more than len(view) // REBUILD_SHARE nodes
#: (at least MIN_CHANGED_BEFORE_REBUILD) changed at once, rather than moved one by one
REBUILD_SHARE = 16
MIN_CHANGED_BEFORE_REBUILD = 64
#: nodes checked in the first chunk of a run; each next chunk of the same run is 4x larger,
#: so a walk that must skip many nodes costs O(skipped) numpy work in few steps.
FIRST_CHUNK = 32
#: nodes of a walk checked one by one (in plain Python) before it checks chunks
ONE_BY_ONE = 4
#: buckets per wholly free GPU; a node with none has its share room in steps of a GPU's tenth
BUCKETS_PER_GPU = 10
SHARE_MILLI_PER_BUCKET = GPU_MILLI // BUCKETS_PER_GPU
#: the bucket of a parked node (:meth:`NodeIndex.take_in`): in no run (the buckets are >= 0)
PARKED = -1
#: an entry's node; a run's first entry
_NODE, _FIRST = itemgetter(2), itemgetter(0)


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


def room_bucket(view, i: int) -> int:
    """:func:`room_buckets` of node ``i``, in plain Python."""
    free = view.gpus_free.item(i)
    if free == 0 and view.gpus_shared.item(i) > 0:
        return max(view.gpu_milli_free_row(i)) // SHARE_MILLI_PER_BUCKET
    return free * BUCKETS_PER_GPU


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
        ties = np.arange(len(keys)) if self.ties is None else self.ties
        order = np.lexsort((ties, keys, buckets))   # by bucket, then (key, tie rank)
        sorted_buckets = buckets[order]
        values, starts = np.unique(sorted_buckets, return_index=True)
        entries = list(zip(keys[order].tolist(), ties[order].tolist(), order.tolist()))
        ends = starts[1:].tolist() + [len(entries)]
        #: bucket -> its run: (key, tie rank, node) sorted
        self._runs: dict[int, list[tuple[int, int, int]]] = {
            b: entries[s:e] for b, s, e in zip(values.tolist(), starts.tolist(), ends)}
        self._entry: list[tuple[int, int, int]] = [None] * len(entries)   # per node, its entry
        for entry in entries:
            self._entry[entry[2]] = entry
        self._bucket: list[int] = buckets.tolist()   # per node, its bucket
        self._shared: set[int] = set()   # the buckets whose run a copy shares (see copy)
        self._arrays: dict[int, np.ndarray] = {}   # bucket -> its run's nodes as an array (see _nodes_of)
        self._rows_shared = False   # the per-node lists and the runs' dict are a copy's too
        #: the nodes parked (see :meth:`take_in`): their bucket ``PARKED``, their entry as it was
        self.parked: set[int] = set()

    def copy(self) -> "NodeIndex":
        clone = object.__new__(NodeIndex)
        clone.dirty = set(self.dirty)
        clone.ties = self.ties
        clone._runs, clone._entry, clone._bucket = self._runs, self._entry, self._bucket
        clone._arrays = dict(self._arrays)   # (never written in place)
        clone.parked = set(self.parked)
        # everything shared now: each side copies what it writes to first
        clone._shared, self._shared = set(self._runs), set(self._runs)
        clone._rows_shared = self._rows_shared = True
        return clone

    # ------------------------------------------------------------ keeping up
    def sync(self, keys: np.ndarray, buckets: np.ndarray, lowest: int = 0) -> None:
        """Take in the rows that changed (``dirty``), given the current columns
        (:meth:`take_in`)."""
        self.take_in(keys.item, buckets.item, lambda: (keys, buckets), lowest)

    def take_in(self, key_of: Callable[[int], int], bucket_of: Callable[[int], int],
                columns: Callable[[], tuple[np.ndarray, np.ndarray]], lowest: int = 0) -> None:
        """:meth:`sync`, each changed row's key and bucket asked of that row alone
        (``key_of(node)``, ``bucket_of(node)``: Python ints), and ``columns()`` giving
        every node's keys and buckets when so many rows changed that the runs are built
        again: the few rows a replay changes between two placements cost a few scalar
        reads, not a column each kept up to date.

        ``lowest``: the first bucket the caller reads next. A node that changed into
        bucket 0 (no room for any GPU: a full node) is *parked* (in :attr:`parked`, in
        no run, its key not asked) until a caller reads bucket 0 (``lowest`` 0): every
        walk for GPUs starts above it, and a replay fills a node at about every other
        placement."""
        dirty = self.dirty
        if dirty:
            if len(dirty) > MIN_CHANGED_BEFORE_REBUILD and len(dirty) > len(self._entry) // REBUILD_SHARE:
                dirty.clear()
                self._build(*columns())
                return
            entries, at = self._entry, self._bucket
            for node in dirty:
                was, bucket = at[node], bucket_of(node)
                entry = entries[node]
                if bucket:
                    key = key_of(node)
                    if bucket == was and key == entry[0]:
                        continue
                elif was == PARKED:   # (no room still)
                    continue
                if self._rows_shared:   # the first write since a copy
                    entries, at = self._own_rows()
                shared = self._shared
                if was == PARKED:
                    self.parked.discard(node)
                    left = None
                else:
                    run = self._writable(was) if was in shared else self._runs[was]
                    left = bisect_left(run, entry)
                    del run[left]
                    if not run:   # (a walk reads only the runs that have nodes)
                        del self._runs[was]
                if bucket:
                    moved = entries[node] = (key, entry[1], node)
                    run = self._runs.get(bucket)
                    if run is None or bucket in shared:
                        run = self._writable(bucket)
                    entered = bisect_left(run, moved)
                    run.insert(entered, moved)
                else:   # its entry kept for its tie rank
                    bucket = entered = PARKED
                    self.parked.add(node)
                at[node] = bucket
                if self._arrays:   # (made only once a walk checked chunks)
                    self._move_in_arrays(node, was, left, bucket, entered)
            dirty.clear()
        if not lowest and self.parked:
            self._unpark(key_of)

    def _unpark(self, key_of: Callable[[int], int]) -> None:
        """Every parked node into bucket 0's run, its key asked now."""
        entries, at = self._own_rows() if self._rows_shared else (self._entry, self._bucket)
        run = self._writable(0)
        for node in self.parked:
            moved = entries[node] = (key_of(node), entries[node][1], node)
            entered = bisect_left(run, moved)
            run.insert(entered, moved)
            at[node] = 0
            if self._arrays:
                self._move_in_arrays(node, PARKED, None, 0, entered)
        self.parked.clear()

    def _own_rows(self) -> tuple[list[tuple[int, int, int]], list[int]]:
        """The per-node lists and the runs' dict made this index's own (the first write
        since a copy); returns the two lists."""
        self._runs = dict(self._runs)
        self._entry, self._bucket = list(self._entry), list(self._bucket)
        self._rows_shared = False
        return self._entry, self._bucket

    def _move_in_arrays(self, node: int, was: int, left: int, bucket: int, entered: int) -> None:
        """Keep the runs' arrays (:meth:`_nodes_of`) in step with a node that left position
        ``left`` of run ``was`` and entered position ``entered`` of run ``bucket`` (a
        parked node is in no run: ``PARKED`` has no array): each array made anew (a copy
        may share it), with two slices copied."""
        arrays = self._arrays
        nodes = arrays.get(was)
        if nodes is not None:
            arrays[was] = np.concatenate((nodes[:left], nodes[left + 1:]))
        nodes = arrays.get(bucket)
        if nodes is not None:
            grown = arrays[bucket] = np.empty(len(nodes) + 1, dtype=np.int64)
            grown[:entered], grown[entered], grown[entered + 1:] = nodes[:entered], node, nodes[entered:]

    def _writable(self, bucket: int) -> list[tuple[int, int, int]]:
        """The run of ``bucket`` (a new one when none), this index's own to change."""
        run = self._runs.get(bucket)
        if run is None:
            run = self._runs[bucket] = []
        elif bucket in self._shared:
            self._shared.discard(bucket)
            run = self._runs[bucket] = list(run)
        return run

    def _nodes_of(self, bucket: int) -> np.ndarray:
        """The nodes of ``bucket``'s run, in its order, as an array (for the chunks a walk
        checks at once), made when first asked, then kept in step with the run."""
        nodes = self._arrays.get(bucket)
        if nodes is None:
            run = self._runs[bucket]
            nodes = self._arrays[bucket] = np.fromiter(map(_NODE, run), np.int64, len(run))
        return nodes

    # --------------------------------------------------------------- reading
    def rows(self) -> tuple[list[tuple[int, int, int]], list[int], dict[int, list[tuple[int, int, int]]]]:
        """Per node its entry ``(key, tie rank, node)`` (of a parked node, as it was when
        parked) and its bucket (``PARKED`` when parked), and bucket -> its run (the entries
        of its nodes, sorted; a bucket with none has no run), as of the last
        :meth:`take_in`, for a walk that reads a few nodes in a loop of its own: the caller
        only reads them, and asks them again after the next :meth:`take_in` (a copy's first
        write replaces them)."""
        return self._entry, self._bucket, self._runs

    def best(self, k: int, min_bucket: int, passes: Callable[[np.ndarray], np.ndarray],
             passes_one: Callable[[int], bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` smallest (key, tie rank) among the nodes of buckets ``>= min_bucket``
        for which ``passes(nodes)`` (a bool array) holds: node numbers and keys, best
        first (:meth:`best_entries` as two arrays)."""
        found = self.best_entries(k, min_bucket, passes, passes_one)
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        keys, _, nodes = zip(*found)
        return np.array(nodes, dtype=np.int64), np.array(keys, dtype=np.int64)

    def best_entries(self, k: int, min_bucket: int, passes: Callable[[np.ndarray], np.ndarray],
                     passes_one: Callable[[int], bool] | None = None) -> list[tuple[int, int, int]]:
        """:meth:`best` as ``(key, tie rank, node)`` of each node found, best first (the
        rows taken in for a read from ``min_bucket``: :meth:`take_in`). One node wanted
        (``k`` 1, with ``passes_one``): the smallest first entry of the runs read, when it
        passes (most walks); else (that entry not checked again) the
        runs are read in order of their first entry, each from its start: the first
        ``ONE_BY_ONE`` nodes of the walk one at a time with ``passes_one(node)`` (the same
        check of one node, in plain Python; when given: most walks end there), then every
        run still open a chunk at a time, the chunks of all of them checked together
        with one ``passes`` (each run's next chunk 4x its last). A run (or the rest of
        one) whose next entry comes after the k-th found, or that gave k, is not read
        further. Which nodes are checked together changes the work, not the answer: the
        k smallest entries that pass."""
        runs = self._runs
        failed = None   # the entry checked already and found failing (the walk's first: not checked again)
        if k == 1 and passes_one is not None:   # the smallest first entry, when it passes, is the answer
            smallest = min(map(_FIRST, map(runs.__getitem__, filter(min_bucket.__le__, runs))), default=None)
            if smallest is None or passes_one(smallest[2]):
                return [] if smallest is None else [smallest]
            failed = smallest
        found: list[tuple[int, int, int]] = []  # sorted, at most k
        one_by_one = 0 if passes_one is None else ONE_BY_ONE   # nodes left to check one at a time
        still: list[tuple[int, int, int]] = []   # (bucket, next position, passing taken) of each run still open
        for first, bucket in sorted(zip(map(_FIRST, runs.values()), runs)):   # (every run has nodes)
            if bucket < min_bucket:
                continue
            if len(found) >= k and first > found[-1]:
                break  # every later run starts even later
            run = runs[bucket]
            start = taken = 0
            if one_by_one:
                for entry in run[:one_by_one]:
                    if taken >= k or len(found) >= k and entry > found[-1]:
                        break
                    start += 1
                    if entry is not failed and passes_one(entry[2]):
                        taken += 1
                        found = sorted(found + [entry])[:k] if found else [entry]
                one_by_one -= start
            if taken < k and start < len(run):
                still.append((bucket, start, taken))
        size = FIRST_CHUNK
        while still:
            if len(found) >= k:
                last = found[-1]
                still = [open_run for open_run in still if self._runs[open_run[0]][open_run[1]] < last]
                if not still:
                    break
            pieces = [self._nodes_of(bucket)[start:start + size] for bucket, start, _ in still]
            hits = (passes(pieces[0] if len(pieces) == 1 else np.concatenate(pieces))).nonzero()[0].tolist()
            new, left, at = [], [], 0
            for (bucket, start, taken), piece in zip(still, pieces):
                end = at + len(piece)
                if hits:   # this piece's hits, the first k - taken of them
                    lo = bisect_left(hits, at)
                    hi = min(bisect_left(hits, end, lo), lo + k - taken)
                    if hi > lo:
                        run = self._runs[bucket]
                        new += [run[start + j - at] for j in hits[lo:hi]]
                        taken += hi - lo
                start, at = start + len(piece), end
                if taken < k and start < len(self._runs[bucket]):
                    left.append((bucket, start, taken))
            if new:
                found = sorted(found + new)[:k]
            still, size = left, size * 4
        return found
