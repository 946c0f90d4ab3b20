"""``best-fit``: the node with the least left after the task, vcores and GPUs weighed alike.

Source: Weng et al., "Beware of Fragmentation…" (USENIX ATC'23), the best-fit baseline,
as its simulator scores it (``best_fit_score.go``, read, not copied): a node's score is
``Σ_r w_r (free_r − ask_r) / max_r`` over r ∈ {vcores, GPU}, lower is better, with
``w = ½, ½``, GPU counted as the node's total milli-GPU free, and the normalisers the
largest machine of the trace: 128 vcores and 8 GPUs (8,000 milli-GPU). The ask is the
same for every node, so the order is that of ``free_mvcores / 128,000 + free_milli /
8,000``, i.e. of the integer ``free_mvcores + 16 × free_milli``: a node key, kept row by
row. On the chosen node a share goes on the GPU with the least milli left that fits
(the base class's GPU choice); whole GPUs on the lowest free ones.

The simulator rounds the score to an integer 0..100 (and rescales it over the nodes)
before the scheduler compares nodes, which makes near-equal nodes ties; this key does
not round. Ties go to the smallest host name (``tie_rule``), as in the paper.
"""
from __future__ import annotations

import numpy as np

from .selector import NodeKey, Selector

#: the normalisers' ratio: 128 vcores (128,000 mvcores) against 8 GPUs (8,000 milli-GPU)
MVCORES_PER_GPU_MILLI = 128_000 // 8_000


def best_fit_keys(view, rows) -> np.ndarray:
    """Per node, what is left weighed as the paper's best-fit weighs it (module docstring)."""
    gpu_left = view.gpu_milli_free_rows(rows).sum(axis=1, dtype=np.int64)
    return np.asarray(view.mvcores_free[rows], dtype=np.int64) + MVCORES_PER_GPU_MILLI * gpu_left


def best_fit_key(view, i: int) -> int:
    """:func:`best_fit_keys` of node ``i``, in plain Python."""
    return view.mvcores_free.item(i) + MVCORES_PER_GPU_MILLI * sum(view.gpu_milli_free_row(i))


#: one column and one index per view, whatever the request
BEST_FIT = NodeKey("best-fit", best_fit_keys, best_fit_key)


class BestFit(Selector):
    name = "best-fit"
    description = "the node with the least vcores and milli-GPU left (the FGD paper's best-fit); ties by host name"
    tie_rule = "node-name"

    def node_key(self, request):
        return BEST_FIT
