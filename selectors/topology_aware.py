"""``topology``: give a task the best-connected free GPUs, and prefer the nodes that
can offer them.

qizhi gives a task the lowest free GPU bits; on a DGX-1 that can hand a 2-GPU task
two GPUs joined only across the CPU sockets while an NVLink pair sits free. This
strategy asks the node's interconnect model instead
(:mod:`gangmaster.gpu_topology`):

* **GPUs on a node** (:meth:`TopologyAware.choose_gpus`): the free subset with the
  best set score, ties broken to leave the best sets free for later requests (see
  :mod:`gangmaster.gpu_topology.chooser`). A share of one GPU gets the base class's
  tightest fit (no set to connect; it leaves the most GPUs whole).
* **Nodes** (:meth:`TopologyAware.node_key`, a column per GPU count that the view
  keeps row by row, so select() walks its node index): first by the best set score the node can
  offer for the request given its free GPUs (a lookup per node in a table indexed
  by free mask, one numpy indexing operation per node type), then by packing:
  fewer free GPUs, fewer GPUs, fewer free vcores, less free memory.

Nodes whose ``topology`` is unset (CPU nodes) or names no known preset, or whose
GPU count differs from the preset's, fall back to qizhi's lowest free bits and
offer a score of 0.
"""
from __future__ import annotations

import logging
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from gangmaster.gpu_topology.chooser import GpuChooser, chooser_for
from gangmaster.gpu_topology.masks import lowest_bits
from gangmaster.gpu_topology.presets import UnknownPreset, load_preset

from .selector import NodeKey, Selector, pack_keys, tenths

if TYPE_CHECKING:
    from .cluster import ClusterView
    from .request import SelectionRequest

log = logging.getLogger(__name__)

OFFER_BITS = 16
"""Set scores up to 65,535 order exactly (a 16-GPU NV18 node scores at most 33,600)."""


@lru_cache(maxsize=None)
def chooser_for_preset(name: str) -> GpuChooser | None:
    """The chooser of preset ``name``; None (logged once) for "" or an unknown preset."""
    if not name:
        return None
    try:
        return chooser_for(load_preset(name))
    except UnknownPreset as exc:
        log.warning("topology strategy: %s; nodes of that topology get the lowest free GPUs", exc)
        return None


class TopologyAware(Selector):
    name = "topology"
    description = ("best-connected free GPUs (NVLink first); nodes by the best GPU set they "
                   "offer, then packing")

    def __init__(self, candidate_nodes_factor: int = 2):
        super().__init__(candidate_nodes_factor)
        self._node_keys: dict[int, NodeKey] = {}  # per GPU count asked

    def choose_gpus(self, view: "ClusterView", node: int, request: "SelectionRequest") -> int:
        if request.resource.gpu_milli:
            # A share sits on one GPU: there is no set to connect, and the base class's
            # tightest fit keeps the most GPUs whole, so the NVLink sets stay free.
            return super().choose_gpus(view, node, request)
        wanted = request.resource.gpus
        if not wanted:
            return 0
        if request.resource.gpu_mask:
            return request.resource.gpu_mask
        free = view.free_mask(node)
        chooser = self._chooser(view, node)
        if chooser is None:
            return lowest_bits(free, wanted)
        return chooser.choose(free, wanted)

    def node_key(self, request: "SelectionRequest") -> NodeKey | None:
        # A node's key depends only on its state and the GPU count asked: one column
        # per count. Named GPUs are scored as named (rank, by a scan), which is rare.
        if request.resource.gpu_mask:
            return None
        gpus = request.resource.gpus
        if gpus not in self._node_keys:
            self._node_keys[gpus] = NodeKey(
                f"{self.name}:{gpus}-gpus", lambda view, rows: self.keys(view, _indices(view, rows), gpus, 0))
        return self._node_keys[gpus]

    def rank(self, view: "ClusterView", candidates: np.ndarray,
             request: "SelectionRequest") -> np.ndarray:
        if request.resource.gpu_mask:
            return self.keys(view, candidates, request.resource.gpus, request.resource.gpu_mask)
        return super().rank(view, candidates, request)

    def keys(self, view: "ClusterView", candidates: np.ndarray, gpus: int, gpu_mask: int = 0) -> np.ndarray:
        """The rank keys of ``candidates`` for a request of ``gpus`` GPUs (``gpu_mask``:
        the GPUs it names, 0 for any): best offered set first, then packing."""
        offer = self.offers(view, candidates, gpus, gpu_mask)
        return pack_keys(
            ((1 << OFFER_BITS) - 1 - offer, OFFER_BITS),
            (view.gpus_free[candidates], 7),
            (view.gpu_capacity[candidates], 7),
            (tenths(view.mvcores_free[candidates]), 17),
            (view.memory_free[candidates] >> 10, 15),  # GiB
        )

    def offers(self, view: "ClusterView", candidates: np.ndarray, gpus: int,
               gpu_mask: int = 0) -> np.ndarray:
        """Per candidate node, the score of the best set of ``gpus`` GPUs it can give
        (of the named ``gpu_mask`` if given); 0 for no GPUs asked, no topology, or
        a topology that does not fit the node."""
        offer = np.zeros(candidates.shape[0], dtype=np.int64)
        if not gpus or candidates.size == 0:
            return offer
        codes = view.topology_code[candidates]
        for code, name in enumerate(view.topologies):
            chooser = chooser_for_preset(name)
            if chooser is None:
                continue
            here = (codes == code) & (view.gpu_capacity[candidates] == chooser.gpu_count)
            if not here.any():
                continue
            if gpu_mask:
                offer[here] = chooser.score(gpu_mask) if gpu_mask <= chooser.full_mask else 0
                continue
            free = view.gpu_free_mask[candidates[here]].astype(np.int64)
            table = chooser.best_score_table(gpus)
            if table is not None:
                offer[here] = table[free]
            else:  # beyond the exact chooser's size: one search per node
                offer[here] = [chooser.best_score_of(int(f), gpus) for f in free]
        np.maximum(offer, 0, out=offer)
        return offer

    def _chooser(self, view: "ClusterView", node: int) -> GpuChooser | None:
        chooser = chooser_for_preset(view.topologies[view.topology_code[node]])
        if chooser is None or chooser.gpu_count != int(view.gpu_capacity[node]):
            return None
        return chooser


def _indices(view: "ClusterView", rows) -> np.ndarray:
    """The node indices a cached column asks for: every node (a slice) or a few rows."""
    return np.arange(len(view))[rows] if isinstance(rows, slice) else np.asarray(rows)
