"""``random-fit``: the FGD paper's Random-fit baseline — a node drawn uniformly among all that fit.

Source: Weng et al., "Beware of Fragmentation…" (USENIX ATC'23), the Random-fit baseline,
as its simulator runs it (``random_score.go`` and the GPU share plugin's random GPU
choice; read, not copied): every pod goes to a node drawn uniformly among the nodes
that can take it; on that node a share goes on a GPU drawn uniformly among the GPUs with
enough milli-GPU left (wholly free ones included), whole GPUs on the lowest free ones.

It differs from ``random`` (qizhi's baseline), which draws among the job-packing key's
best ``pending tasks × candidate_nodes_factor`` nodes, two for a pod of one instance: a
packing policy with a coin toss, not a random one. The node draw is the pipeline's seeded
RNG; the GPU draw is this strategy's own RNG (a selector is not told the seed), seeded
alike in every run, so a replay is repeatable and its seeds differ by pod order and node
draws.
"""
from __future__ import annotations

import random

import numpy as np

from .selector import NodeKey, Selector


def _every_node_alike(view, rows) -> np.ndarray:
    return np.zeros(len(view) if isinstance(rows, slice) else len(rows), dtype=np.int64)


#: every node alike: the order among the fitting is left to the draw
ANY_NODE = NodeKey("random-fit", _every_node_alike)
#: the seed of the GPU draw (the same in every run: see the module docstring)
GPU_DRAW_SEED = 0


class RandomFit(Selector):
    name = "random-fit"
    description = ("the FGD paper's Random-fit: a node uniformly at random among all that fit, a share on a "
                   "random GPU that takes it")
    prefer_locality = False
    pick_at_random = True

    def __init__(self, candidate_nodes_factor: int = 2):
        super().__init__(candidate_nodes_factor)
        self._gpu_rng = random.Random(GPU_DRAW_SEED)

    def node_key(self, request):
        return ANY_NODE

    def keep(self, request, available: int) -> int:
        """Every node that fits: the draw is over all of them."""
        return max(1, available)

    def choose_gpus(self, view, node: int, request) -> int:
        resource = request.resource
        if resource.gpu_mask or not resource.gpu_milli:
            return super().choose_gpus(view, node, request)   # named GPUs; whole GPUs: the lowest free
        fitting = np.flatnonzero(view.gpu_milli_free_rows([node])[0] >= resource.gpu_milli)
        if not fitting.size:
            raise ValueError(f"no GPU with {resource.gpu_milli} milli free")
        return 1 << int(fitting[self._gpu_rng.randrange(fitting.size)])
