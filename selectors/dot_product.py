"""``dot-product``: the FGD paper's Tetris-style baseline — the node whose free resources align least with the task.

Source: Weng et al., "Beware of Fragmentation…" (USENIX ATC'23), the dot-product baseline
(after Tetris, SIGCOMM'14), as its simulator scores it with the settings of the paper's
runs (``dot_product_score.go``, read, not copied; the runs' ``-dimext merge -norm max
-gpusel best``, experiments/run_scripts). A node is the vector of what it has free,
(milli-vcores, milli-GPU on all its GPUs together: dimension "merge"), the task that of its
ask, (milli-vcores, milli-GPU in all: a share's milli, 1000 per whole GPU, 0 for none), both
divided by the largest machine (128 vcores, 8 GPUs: "max"); the node scores the integer
``⌊100 · (1 − dot / 2)⌋`` (the dot product averaged over the two dimensions), higher
better, and the scheduler compares nodes by that integer: the node the task fills most
tightly, and the many nodes it fills about as tightly tie, and the ties decide much of the
placement. They go to the smallest host name (``tie_rule``), as in the artifact, whose
names are the nodes renamed by the run's seed (``replay --draws artifact`` gives that
order). The key is ``100 − score``, computed in float64 in the Go code's order of
operations, one column per (vcores, milli-GPU) asked. On the chosen node a share goes on
the GPU with the least milli left that fits (the base class's GPU choice: the runs'
``best`` GPU selection), whole GPUs on the lowest free ones.

Before session 17 the node's vector was the GPU the task would use (the tightest GPU in use
that fits a share, else the wholly free GPUs: dimension "share", the artifact's default, which
its runs override): seed 42 of the default workload, with the artifact's draws and its tie
order, gave 8.97 % of the GPUs unallocated where the artifact has 9.66; with "merge", 9.66.
"""
from __future__ import annotations

import numpy as np

from .ask_scores import MAX_GPU_MILLI, MAX_MVCORES, AskScoreSelector, resource_vector, resource_vectors, vector_ask


def dot_product_scores(view, rows, mvcores: int, gpu_milli_total: int) -> np.ndarray:
    """Per node of ``rows``: the artifact's dot-product score of the task there,
    ``⌊100 · (1 − dot / 2)⌋`` (module docstring), -1 where the node's free vcores or milli-GPU are short."""
    cpu_left, gpu_left, fits = resource_vectors(view, rows, mvcores, gpu_milli_total)
    dot = (cpu_left / MAX_MVCORES) * (mvcores / MAX_MVCORES)
    dot += (gpu_left / MAX_GPU_MILLI) * (gpu_milli_total / MAX_GPU_MILLI)
    return np.where(fits, (100.0 * (1.0 - dot / 2.0)).astype(np.int64), -1)


def dot_product_score(view, i: int, mvcores: int, gpu_milli_total: int) -> int:
    """:func:`dot_product_scores` of node ``i``, in plain Python."""
    cpu_left, gpu_left = resource_vector(view, i)
    if cpu_left < mvcores or gpu_left < gpu_milli_total:
        return -1
    dot = (cpu_left / MAX_MVCORES) * (mvcores / MAX_MVCORES)
    dot += (gpu_left / MAX_GPU_MILLI) * (gpu_milli_total / MAX_GPU_MILLI)
    return int(100.0 * (1.0 - dot / 2.0))


class DotProduct(AskScoreSelector):
    name = "dot-product"
    description = ("the FGD paper's dot-product (Tetris) baseline: the node whose free vcores and GPU align "
                   "least with the task; ties by host name")
    tie_rule = "node-name"
    scores = staticmethod(dot_product_scores)
    row_score = staticmethod(dot_product_score)
    ask = staticmethod(vector_ask)
