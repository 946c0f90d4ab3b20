"""``job-packing``: qizhi's default strategy, fill the fullest nodes first.

Order: fewer free GPUs, smaller GPU total, fewer free vcores, less free memory.
Packing keeps whole machines empty for the big jobs that need them."""
from __future__ import annotations

import numpy as np

from .selector import NodeKey, Selector, pack_keys, tenth, tenths


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
    of the same fields, unrolled (the view's index asks it of every node that changes)."""
    return (_clipped(view.gpus_free.item(i), 7) << 52 | _clipped(view.gpu_capacity.item(i), 7) << 45
            | _clipped(tenth(view.mvcores_free.item(i)), 17) << 28 | _clipped(view.memory_free.item(i), 28))


def _clipped(value: int, bits: int) -> int:
    """``value`` clipped into ``[0, 2**bits - 1]``, as a packed key's field."""
    top = (1 << bits) - 1
    return 0 if value < 0 else top if value > top else value


#: the packing key of every node, whatever the request: one column and one index per view
PACKING = NodeKey("job-packing", packing_keys, packing_key)


class JobPacking(Selector):
    name = "job-packing"
    description = "fill the fullest nodes first: fewer free GPUs, fewer GPUs, fewer free vcores, less free memory"

    def node_key(self, request):
        return PACKING
