"""``job-packing``: qizhi's default strategy, fill the fullest nodes first.

Order: fewer free GPUs, smaller GPU total, fewer free vcores, less free memory.
Packing keeps whole machines empty for the big jobs that need them."""
from __future__ import annotations

import numpy as np

from .selector import NodeKey, Selector, pack_keys, tenths


def packing_keys(view, candidates: np.ndarray) -> np.ndarray:
    """qizhi's node order as one int64 key per node (59 bits)."""
    return pack_keys(
        (view.gpus_free[candidates], 7),
        (view.gpu_capacity[candidates], 7),
        (tenths(view.mvcores_free[candidates]), 17),
        (view.memory_free[candidates], 28),
    )


def packing_key(view, i: int) -> int:
    """:func:`packing_keys` of node ``i``, in plain Python: :func:`~gangmaster.selectors.selector.pack_key`
    of the same fields, unrolled (the view's index asks it of every node that changes).
    A node's GPU counts need no clipping: a node has at most 64 GPUs (its masks are 64-bit)
    and never fewer than none free, so both fit their 7 bits as they are."""
    vcores, memory = (view.mvcores_free.item(i) + 50) // 100, view.memory_free.item(i)   # (tenths, of one value)
    if vcores >> 17 or memory >> 28:   # outside [0, 2**bits) (a negative one too): clipped into its width
        vcores, memory = min(max(vcores, 0), _17), min(max(memory, 0), _28)
    return view.gpus_free.item(i) << 52 | view.gpu_capacity.item(i) << 45 | vcores << 28 | memory


#: the largest value of a 17- and a 28-bit field
_17, _28 = (1 << 17) - 1, (1 << 28) - 1


#: the packing key of every node, whatever the request: one column and one index per view
PACKING = NodeKey("job-packing", packing_keys, packing_key)


class JobPacking(Selector):
    name = "job-packing"
    description = "fill the fullest nodes first: fewer free GPUs, fewer GPUs, fewer free vcores, less free memory"
    key_falls_when_booked = True   # (every field of the key is a free amount: booking lowers or keeps it)

    def node_key(self, request):
        return PACKING
