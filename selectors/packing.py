"""``packing``: the FGD paper's GPU-packing baseline — shared GPUs first, then used nodes, then empty ones.

Source: Weng et al., "Beware of Fragmentation…" (USENIX ATC'23), the GPU-packing
baseline, as its simulator scores it (``gpu_packing_score.go``, read, not copied). A
node's score for a task that asks GPUs, higher is better, in three bands:

1. the task fits on a GPU already in use (a share; the GPU is the tightest that fits):
   ``100 − ⌊p / 10⌋``, at least 50, ``p`` the percent that GPU has left;
2. it must take wholly free GPUs of a node that has a GPU in use:
   ``50 − (wholly free GPUs it takes)``, at least 33;
3. the node's GPUs are all free: ``max(33 − its GPUs, its GPUs)``.

A task that asks no GPU scores every node alike. The key here is ``100 − score``, one
integer column per (GPUs, share) asked, kept row by row; the bands make many ties (every
node ties for a task that asks no GPU), which go to one seeded order of the nodes per run
(``tie_rule``), as in the artifact: its scheduler takes the smallest node name, but its
simulator first renames every node with a prefix from a seeded permutation, so the smallest
renamed node is a random one, fixed for the run. Taking the trace's names instead (all the
CPU-only pods on ``openb-node-0000`` on) left about 1 pp more GPUs unallocated. On the node, a share goes
on the tightest GPU that fits (the base class's choice), whole GPUs on the lowest free.

Nothing else differs: given the artifact's own draws (``replay --draws artifact``: its pod
order and its renamed nodes as the tie order), ``packing`` gives GpuPacking's published
figure seed by seed; with Python's draws (the default) its medians over ten seeds differ from
the artifact's by what ten draws spread (BENCHMARKS.md, session 16).
"""
from __future__ import annotations

import numpy as np

from .fit import GPU_MILLI
from .ask_scores import AskScoreSelector


def packing_scores(view, rows, gpus: int, gpu_milli: int) -> np.ndarray:
    """The simulator's packing score (0..100, higher better) of nodes ``rows`` for one task
    of ``gpus`` whole GPUs or a ``gpu_milli`` share; -1 where it does not fit."""
    at = np.arange(len(view))[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
    if not gpus and not gpu_milli:
        return np.zeros(at.size, dtype=np.int64)
    free = view.gpu_milli_free_rows(at).astype(np.int64)
    capacity = view.gpu_capacity[at]
    wholly_free = (free == GPU_MILLI).sum(axis=1)
    if gpu_milli:
        fitting = np.where(free >= gpu_milli, free, GPU_MILLI + 1)
        tightest = fitting.min(axis=1)
        fits = tightest <= GPU_MILLI
        on_used = np.maximum(100 - (tightest * 100 // GPU_MILLI) // 10, 50)
        score = np.where(tightest < GPU_MILLI, on_used, max(50 - 1, 33))
    else:
        fits = wholly_free >= gpus
        score = np.full(at.size, max(50 - gpus, 33), dtype=np.int64)
    empty = wholly_free == capacity
    score = np.where(empty, np.maximum(33 - capacity, capacity), score)
    return np.where(fits, score, -1)


class GpuPacking(AskScoreSelector):
    name = "packing"
    description = ("the FGD paper's GPU packing: a GPU in use first, then wholly free GPUs of a used node, "
                   "then empty nodes; ties by the run's seeded node order (the artifact's renamed nodes)")
    #: the artifact's ties are not by the trace's host names: its simulator renames every
    #: node ``"%04d-" % rand.Perm(n)[i] + name`` with the run's seed before scheduling
    #: (``syncClusterResourceList``), so its "smallest name" is one seeded permutation of
    #: the nodes per run: the pipeline's ``seeded`` rule.
    tie_rule = "seeded"

    scores = staticmethod(packing_scores)
