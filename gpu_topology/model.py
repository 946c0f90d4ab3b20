"""The interconnect model of one node type: a networkx graph of GPUs (and NICs),
each edge labelled with the :class:`~gangmaster.gpu_topology.links.Link` between
its two ends, plus the CPU/NUMA affinity of each GPU when the source gives it.

The graph is what people read (``gangmaster topo``, NVLink cliques); the dense
``pair_scores`` matrix derived from it is what the chooser computes with.

>>> from gangmaster.gpu_topology.presets import load_preset
>>> dgx = load_preset("dgx1-v100")
>>> dgx.link(0, 3).label, dgx.link(0, 5).label
('NV2', 'SYS')
>>> dgx.set_score([0, 3])
120
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import networkx as nx
import numpy as np

from .links import Link, pair_score
from .masks import MAX_GPUS_PER_NODE, indices_of, mask_from_indices, validate_mask


class TopologyError(ValueError):
    """A topology that does not describe a node (asymmetric links, missing pairs …)."""


@dataclass(frozen=True)
class GpuAffinity:
    """Which CPUs and NUMA node a GPU is close to, as ``nvidia-smi topo -m`` prints them."""

    cpus: str | None = None
    numa: str | None = None


def gpu_node(index: int) -> str:
    """Graph node name of GPU ``index`` (``GPU3``)."""
    return f"GPU{index}"


class Topology:
    """GPUs ``0..gpu_count-1`` and NICs, joined by labelled links.

    ``gpu_links[i][j]`` is the link between GPU i and GPU j (``None`` on the
    diagonal); it must be symmetric. ``nic_links`` maps a NIC name to its links
    to each GPU, in GPU order."""

    def __init__(self, name: str, gpu_links: Sequence[Sequence[Link | None]], *,
                 nic_links: Mapping[str, Sequence[Link]] | None = None,
                 affinity: Sequence[GpuAffinity] | None = None,
                 description: str = "", source: str = ""):
        n = len(gpu_links)
        if not 1 <= n <= MAX_GPUS_PER_NODE:
            raise TopologyError(f"{name}: expected 1..{MAX_GPUS_PER_NODE} GPUs, got {n}")
        self.name, self.description, self.source = name, description, source
        self.graph = nx.Graph(name=name)
        affinity = list(affinity or [GpuAffinity()] * n)
        if len(affinity) != n:
            raise TopologyError(f"{name}: {len(affinity)} affinity entries for {n} GPUs")
        for i in range(n):
            self.graph.add_node(gpu_node(i), kind="gpu", index=i,
                                cpus=affinity[i].cpus, numa=affinity[i].numa)
        scores = np.zeros((n, n), dtype=np.int64)
        for i in range(n):
            if len(gpu_links[i]) != n:
                raise TopologyError(f"{name}: GPU{i} has {len(gpu_links[i])} links, expected {n}")
            for j in range(i + 1, n):
                a, b = gpu_links[i][j], gpu_links[j][i]
                if a is None or a != b:
                    raise TopologyError(f"{name}: GPU{i}-GPU{j} is {a} but GPU{j}-GPU{i} is {b}; "
                                        "expected one link per pair, the same both ways")
                self.graph.add_edge(gpu_node(i), gpu_node(j), link=a, score=pair_score(a))
                scores[i, j] = scores[j, i] = pair_score(a)
        for nic, links in (nic_links or {}).items():
            if len(links) != n:
                raise TopologyError(f"{name}: NIC {nic} has {len(links)} GPU links, expected {n}")
            self.graph.add_node(nic, kind="nic")
            for i, link in enumerate(links):
                self.graph.add_edge(nic, gpu_node(i), link=link, score=pair_score(link))
        scores.setflags(write=False)
        self.pair_scores = scores
        self.affinity = tuple(affinity)

    # ------------------------------------------------------------------ reading
    @property
    def gpu_count(self) -> int:
        return self.pair_scores.shape[0]

    @property
    def nics(self) -> list[str]:
        return [v for v, kind in self.graph.nodes(data="kind") if kind == "nic"]

    def link(self, i: int, j: int) -> Link:
        """The link between GPU ``i`` and GPU ``j`` (``i != j``)."""
        if i == j:
            raise TopologyError(f"{self.name}: GPU{i} has no link to itself")
        return self.graph.edges[gpu_node(i), gpu_node(j)]["link"]

    def nic_link(self, nic: str, gpu: int) -> Link:
        return self.graph.edges[nic, gpu_node(gpu)]["link"]

    def set_score(self, gpus: int | Iterable[int]) -> int:
        """Sum of :func:`pair_score` over every pair of the set (a mask or indices)."""
        idx = self._indices(gpus)
        return int(self.pair_scores[np.ix_(idx, idx)].sum() // 2)

    def all_nvlink(self, gpus: int | Iterable[int]) -> bool:
        """True when every pair of the set talks over NVLink (a set of one trivially does)."""
        idx = self._indices(gpus)
        return all(self.link(a, b).is_nvlink for k, a in enumerate(idx) for b in idx[k + 1:])

    def nvlink_cliques(self) -> list[list[int]]:
        """Maximal sets of GPUs that are pairwise joined by NVLink, largest first."""
        sub = nx.Graph()
        sub.add_nodes_from(range(self.gpu_count))
        sub.add_edges_from((self.graph.nodes[a]["index"], self.graph.nodes[b]["index"])
                           for a, b, link in self.graph.edges(data="link")
                           if link.is_nvlink and self.graph.nodes[a]["kind"] == "gpu"
                           and self.graph.nodes[b]["kind"] == "gpu")
        cliques = [sorted(c) for c in nx.find_cliques(sub) if len(c) >= 2]
        return sorted(cliques, key=lambda c: (-len(c), c))

    def label_matrix(self) -> list[list[str]]:
        """GPU-by-GPU link labels, ``X`` on the diagonal (for display and JSON)."""
        n = self.gpu_count
        return [["X" if i == j else self.link(i, j).label for j in range(n)] for i in range(n)]

    def signature(self) -> bytes:
        """Identical pair-score matrices choose identically: the chooser cache key."""
        return self.gpu_count.to_bytes(2, "little") + self.pair_scores.tobytes()

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "gpus": self.gpu_count,
            "matrix": self.label_matrix(),
            "nics": {nic: [self.nic_link(nic, i).label for i in range(self.gpu_count)]
                     for nic in self.nics},
            "affinity": [{"cpus": a.cpus, "numa": a.numa} for a in self.affinity],
            "nvlink_cliques": self.nvlink_cliques(),
        }

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, gpus={self.gpu_count}, nics={len(self.nics)})"

    def _indices(self, gpus: int | Iterable[int]) -> list[int]:
        if isinstance(gpus, (int, np.integer)):
            return indices_of(validate_mask(int(gpus), self.gpu_count))
        idx = list(gpus)
        validate_mask(mask_from_indices(idx), self.gpu_count)
        return idx
