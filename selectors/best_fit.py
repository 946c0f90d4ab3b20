"""``best-fit``: the node with the least left after the task, vcores and GPUs weighed alike,
scored as the FGD artifact scores it.

Source: Weng et al., "Beware of Fragmentation…" (USENIX ATC'23), the best-fit baseline,
as its simulator scores it (``best_fit_score.go``, read, not copied): with ``s = Σ_r w_r
(free_r − ask_r) / max_r`` over r ∈ {vcores, GPU}, ``w = ½, ½``, GPU counted as the node's
total milli-GPU free, and the normalisers the largest machine of the trace (128 vcores,
8 GPUs: :data:`~.ask_scores.MAX_MVCORES`, :data:`~.ask_scores.MAX_GPU_MILLI`), a node
scores the integer ``⌊100 · (1 − s)⌋``, higher better, and the scheduler compares nodes by
that integer. (It then rescales the scores over the nodes, min to 0 and max to 100 by
integer division; scores of at most 101 values keep their order and their ties.) One step
of the score is 2.56 vcores or 160 milli-GPU left: many near-equal nodes tie, and the ties
decide much of the placement. They go to the smallest host name (``tie_rule``), as in the
artifact, whose names are the nodes renamed by the run's seed (``replay --draws
artifact`` gives that order). The key is ``100 − score``, computed in float64 in the Go
code's order of operations (a score that is an integer in exact arithmetic may truncate to
the one below in floating point, and the artifact's does), one column per (vcores,
milli-GPU) asked: the score depends on the ask. On the chosen node a share goes on the GPU
with the least milli left that fits (the base class's GPU choice, the artifact's ``best``
GPU selection); whole GPUs on the lowest free ones.

Before session 17 the key was the exact, unrounded ``free_mvcores + 16 × free_milli``: the
same order with far fewer ties (seed 42 of the default workload, with the artifact's draws
and its tie order: 7.14 % of the GPUs unallocated where the artifact has 7.06; with the
integer score, 7.06).
"""
from __future__ import annotations

import numpy as np

from .ask_scores import MAX_GPU_MILLI, MAX_MVCORES, AskScoreSelector, resource_vector, resource_vectors, vector_ask

#: the artifact's weights of vcores and GPU
WEIGHT = 0.5


def best_fit_scores(view, rows, mvcores: int, gpu_milli_total: int) -> np.ndarray:
    """Per node of ``rows``: the artifact's best-fit score of placing the task there,
    ``⌊100 · (1 − s)⌋`` (module docstring), -1 where the node's free vcores or milli-GPU are short."""
    cpu_left, gpu_left, fits = resource_vectors(view, rows, mvcores, gpu_milli_total)
    left = (cpu_left - mvcores) / MAX_MVCORES * WEIGHT
    left += (gpu_left - gpu_milli_total) / MAX_GPU_MILLI * WEIGHT
    return np.where(fits, ((1.0 - left) * 100.0).astype(np.int64), -1)


def best_fit_score(view, i: int, mvcores: int, gpu_milli_total: int) -> int:
    """:func:`best_fit_scores` of node ``i``, in plain Python."""
    cpu_left, gpu_left = resource_vector(view, i)
    if cpu_left < mvcores or gpu_left < gpu_milli_total:
        return -1
    left = (cpu_left - mvcores) / MAX_MVCORES * WEIGHT
    left += (gpu_left - gpu_milli_total) / MAX_GPU_MILLI * WEIGHT
    return int((1.0 - left) * 100.0)


class BestFit(AskScoreSelector):
    name = "best-fit"
    description = ("the node with the least vcores and milli-GPU left, as the FGD paper's best-fit scores it "
                   "(an integer 0..100); ties by host name")
    tie_rule = "node-name"
    scores = staticmethod(best_fit_scores)
    row_score = staticmethod(best_fit_score)
    ask = staticmethod(vector_ask)
