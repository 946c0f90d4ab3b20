"""``dot-product``: the FGD paper's Tetris-style baseline — the node whose free resources align least with the task.

Source: Weng et al., "Beware of Fragmentation…" (USENIX ATC'23), the dot-product baseline
(after Tetris, SIGCOMM'14), as its simulator scores it with the settings of the paper's
runs (``dot_product_score.go``, dimensions "share", normalisation "max"; read, not
copied). For a task asking ``c`` milli-vcores and ``d`` milli-GPU in all (a share's milli,
1000 per whole GPU, 0 for none), each way to place it on a node is a vector of what the
node offers, ``(free vcores, g)``, ``g`` the milli-GPU of the GPUs it would use: each GPU
in use with at least ``d`` left, when ``d`` is a share (or none); and the node's wholly
free GPUs together (``1000 ×`` their count), when that is at least ``d``. Both vectors are
divided by the largest machine (128 vcores, 8 GPUs), and the node scores by its way with
the **least** dot product ``c·vcores/128,000² + d·g/8,000²``: the node, and GPU, the task
fills most tightly.

The simulator scores a node ``⌊100 · (1 − dot / 2)⌋``, an integer 0..100 (the dot
product averaged over the two dimensions), and compares nodes by that integer: the many
nodes a pod fills about as tightly tie, and the ties decide much of the placement. The
key here is the same integer, lower better: ``⌈100 · K / (2 · 128,000²)⌉`` of the exact
integer ``K = c·vcores + 256·d·g`` (the dot product times 128,000²), one column per
(vcores, milli-GPU) asked, kept row by row. Ties go to the smallest host name
(``tie_rule``), as in the paper. On the node, the least ``g`` is the
tightest GPU in use that fits, else wholly free GPUs: the base class's GPU choice.
"""
from __future__ import annotations

import numpy as np

from gangmaster.gpu_topology.masks import MAX_GPUS_PER_NODE

from .fit import GPU_MILLI, milli
from .fragmentation import CANNOT_TAKE
from .selector import NodeKey, Selector

#: (128 vcores / 8 GPUs)², in the units of the key: milli-vcores against milli-GPU
GPU_WEIGHT = (128_000 // 8_000) ** 2
#: the exact dot product's denominator (128,000² milli-vcores) times its two dimensions
DOT_SCALE = 2 * 128_000 ** 2
#: the simulator's scores run 0..100
SCORE_STEPS = 100


def dot_product_keys(view, rows, mvcores: int, gpu_milli_total: int) -> np.ndarray:
    """Per node of ``rows``: 100 less the simulator's integer score of its best way to place
    the task (the least dot product), :data:`CANNOT_TAKE` where there is none."""
    exact = exact_dot_products(view, rows, mvcores, gpu_milli_total)
    fits = exact < CANNOT_TAKE
    return np.where(fits, -((-SCORE_STEPS * np.where(fits, exact, 0)) // DOT_SCALE), CANNOT_TAKE)


def exact_dot_products(view, rows, mvcores: int, gpu_milli_total: int) -> np.ndarray:
    """Per node of ``rows``: the least dot product (× 128,000²) of a way to place the task,
    :data:`CANNOT_TAKE` where there is none."""
    at = np.arange(len(view))[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
    free = view.gpu_milli_free_rows(at).astype(np.int64)
    present = np.arange(free.shape[1])[None, :] < view.gpu_capacity[at][:, None]
    idle = (free == GPU_MILLI).sum(axis=1) * GPU_MILLI
    offer = np.where(idle >= gpu_milli_total, idle, CANNOT_TAKE)          # the wholly free GPUs
    if gpu_milli_total < GPU_MILLI:                                       # or a GPU in use with enough left
        in_use = present & (free < GPU_MILLI) & (free >= gpu_milli_total)
        offer = np.minimum(offer, np.where(in_use, free, CANNOT_TAKE).min(axis=1, initial=CANNOT_TAKE))
    vcores = view.mvcores_free[at].astype(np.int64)
    fits = (offer < CANNOT_TAKE) & (vcores >= mvcores)
    offer = np.minimum(offer, GPU_MILLI * MAX_GPUS_PER_NODE)   # no overflow where it does not fit
    return np.where(fits, mvcores * vcores + GPU_WEIGHT * gpu_milli_total * offer, CANNOT_TAKE)


class DotProduct(Selector):
    name = "dot-product"
    description = ("the FGD paper's dot-product (Tetris) baseline: the node whose free vcores and GPU align "
                   "least with the task; ties by host name")
    tie_rule = "node-name"

    def __init__(self, candidate_nodes_factor: int = 2):
        super().__init__(candidate_nodes_factor)
        self._node_keys: dict[tuple[int, int], NodeKey] = {}

    def node_key(self, request):
        res = request.resource
        ask = (milli(res.vcores), res.gpus * GPU_MILLI + res.gpu_milli)
        key = self._node_keys.get(ask)
        if key is None:
            key = self._node_keys[ask] = NodeKey(f"dot-product:{ask[0]}:{ask[1]}",
                                                 lambda view, rows, ask=ask: dot_product_keys(view, rows, *ask))
        return key
