"""``clustering``: the FGD paper's GPU-clustering baseline — tasks of one shape together.

Source: Weng et al., "Beware of Fragmentation…" (USENIX ATC'23), the GPU-clustering
baseline, as its simulator scores it (``gpu_clustering_score.go``, read, not copied). A
task's *affinity tag* is its shape: ``share`` (a share of one GPU), ``k-gpu`` (k whole
GPUs); a task that asks no GPU has none and scores every node alike. A node's tags are
those of the GPU tasks on it. The score, higher is better, in four bands of 25, each
topped up by how much of the largest machine's 8 GPUs the node has in use,
``⌊25 × (8000 − milli free) / 8000⌋``:

1. ``+75``: the node holds only tasks of the task's tag;
2. ``+50``: it holds tasks of that tag and of others;
3. ``+25``: it holds no GPU task;
4. ``+0``: it holds only tasks of other tags.

The key here is ``100 − score``, one integer column per tag, kept row by row. Ties go to
one seeded order of the nodes per run (``tie_rule``), as in the artifact, whose simulator
renames every node from a seeded permutation before its scheduler takes the smallest
name (see :mod:`~gangmaster.selectors.packing`). On the node, a share goes on the tightest
GPU that fits, whole GPUs on the lowest free (the base class's choice; the artifact's
default ``best`` GPU selection).

**The tags are inferred, not recorded.** The view keeps resources, not the tasks that
hold them: a share's tag is exact (a GPU holding shares), but whole-GPU tags are read
from the change of a node's whole GPUs in use between two placements (+k: a ``k-gpu``
task came; −k: one left). That is exact while the view is read between any two tasks
booked on one node (a bare view fed the openb fill sequence pod by pod gives the exact-shape
port's figure); a gang booking n tasks of k GPUs on one node in one step is read as one
``(n·k)-gpu`` task, a release of GPUs matching no tag drops the largest tags first, and a
view built afresh reads each node's whole GPUs in use as one task. Through the AM and RM
replay the shapes drift somewhat (default, seed 42: 8.87 % unallocated against the exact
port's 8.77 %; BENCHMARKS.md); recording shapes in the view would make it exact.
"""
from __future__ import annotations

import numpy as np

from .fit import GPU_MILLI
from .ask_scores import AskScoreSelector

#: the artifact's ``MaxSpecGpu``: the largest machine's GPUs, in milli-GPU
MAX_SPEC_MILLI = 8 * GPU_MILLI
#: the tag of a share of one GPU
SHARE = 0


class AffinityTags:
    """Per node, the whole-GPU tasks on it by size (``{k: count}``), inferred from the change
    of its whole GPUs in use (module docstring); the view marks the rows changed in
    ``dirty`` (:meth:`ClusterView.derived`)."""

    def __init__(self, view):
        self.dirty: set[int] = set()
        self.whole = whole_gpus_used(view)
        self.sizes: list[dict[int, int]] = [{int(k): 1} if k else {} for k in self.whole]

    def copy(self) -> "AffinityTags":
        clone = AffinityTags.__new__(AffinityTags)
        clone.dirty, clone.whole = set(self.dirty), self.whole.copy()
        clone.sizes = [dict(sizes) for sizes in self.sizes]
        return clone

    def refresh(self, view) -> "AffinityTags":
        """Bring the changed rows up to date; returns itself."""
        if self.dirty:
            rows = np.fromiter(self.dirty, dtype=np.int64)
            self.dirty.clear()
            now = whole_gpus_used(view, rows)
            for i, used in zip(rows.tolist(), now.tolist()):
                change = used - self.whole.item(i)
                if change:
                    _record(self.sizes[i], change)
                self.whole[i] = used
        return self

    def tags(self, view, i: int) -> set[int]:
        """Node ``i``'s tags: its whole-GPU task sizes, and :data:`SHARE` when a GPU holds shares."""
        tags = set(self.sizes[i])
        if view.gpus_shared.item(i):
            tags.add(SHARE)
        return tags


def _record(sizes: dict[int, int], change: int) -> None:
    """A task of ``change`` whole GPUs came (> 0), or tasks holding ``-change`` left (< 0)."""
    if change > 0:
        sizes[change] = sizes.get(change, 0) + 1
        return
    gone = -change
    if gone in sizes:
        sizes[gone] -= 1
        if not sizes[gone]:
            del sizes[gone]
        return
    for size in sorted(sizes, reverse=True):   # no task of that size: the largest first
        while sizes.get(size) and gone > 0:
            gone -= size
            sizes[size] -= 1
            if not sizes[size]:
                del sizes[size]


def whole_gpus_used(view, rows=None) -> np.ndarray:
    """GPUs taken whole per node (of ``rows``): capacity − wholly free − holding shares."""
    at = slice(None) if rows is None else rows
    return (view.gpu_capacity[at] - view.gpus_free[at] - view.gpus_shared[at]).astype(np.int64)


def affinity_tags(view) -> AffinityTags:
    """The view's :class:`AffinityTags`, up to date."""
    return view.derived("clustering-affinity-tags", AffinityTags).refresh(view)


def clustering_scores(view, rows, gpus: int, gpu_milli: int) -> np.ndarray:
    """The simulator's clustering score (0..100, higher better) of nodes ``rows`` for one task
    of ``gpus`` whole GPUs or a ``gpu_milli`` share; -1 where it does not fit."""
    at = np.arange(len(view))[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
    if not gpus and not gpu_milli:
        return np.zeros(at.size, dtype=np.int64)
    free = view.gpu_milli_free_rows(at).astype(np.int64)
    fits = (free >= gpu_milli).any(axis=1) if gpu_milli else (free == GPU_MILLI).sum(axis=1) >= gpus
    # Go: MaxNodeScore/4 * (MaxSpecGpu - left) / MaxSpecGpu, left to right, integers
    used = 25 * (MAX_SPEC_MILLI - free.sum(axis=1)) // MAX_SPEC_MILLI
    tag = SHARE if gpu_milli else gpus
    state = affinity_tags(view)
    band = np.empty(at.size, dtype=np.int64)
    for n, i in enumerate(at.tolist()):
        tags = state.tags(view, i)
        band[n] = (75 if len(tags) == 1 else 50) if tag in tags else (25 if not tags else 0)
    return np.where(fits, used + band, -1)


class GpuClustering(AskScoreSelector):
    name = "clustering"
    description = ("the FGD paper's GPU clustering: nodes holding only tasks of the same GPU shape first, "
                   "then mixed, then idle, then other shapes; ties by the run's seeded node order")
    tie_rule = "seeded"

    scores = staticmethod(clustering_scores)
