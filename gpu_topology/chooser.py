"""Choosing which free GPUs of a node to give a request: the best-scoring subset.

For a request of ``n`` GPUs and a node whose free GPUs are ``free_mask``, the
chooser returns the ``n``-GPU subset of the free GPUs with the highest set score
(:meth:`Topology.set_score`). Among subsets of equal score it keeps the future
open: it prefers the one whose *remainder* (the GPUs still free afterwards) offers
the best sets for later requests, measured as ``future(R) = Σ_k best_k(R)``, the
sum over every size ``k >= 2`` of the best ``k``-GPU set score left in ``R``. The
last tie-break is the lowest mask, so the choice is deterministic. On an empty
DGX-1 this turns a stream of 2-GPU requests into NVLink pairs taken from one quad
first, so a later 4-GPU request still finds an NVLink clique.

Why it is fast: node types are few, so everything that does not depend on the
free mask is computed once per topology (:func:`chooser_for` caches by pair-score
matrix):

* ``subset_score[m]`` for every mask ``m`` of the node (2^g entries, g ≤ 16);
* ``best_score[k][F]``, the best ``k``-set score inside every free mask ``F``,
  by a sum-over-subsets maximum (``O(g · 2^g)`` numpy steps per ``k``); this is
  also the table :meth:`GpuChooser.best_score_table` hands to ``rank()``, which
  looks up 100,000 nodes' best offer in one indexing operation;
* ``future[R]`` from those;
* for ``g ≤ 8`` (``TABLE_MAX_GPUS``) the answer itself for every ``(F, n)``:
  choosing is one array lookup;
* for ``8 < g ≤ 16`` the ``n``-subsets of the node sorted by score; choosing
  filters them against ``F`` in a few vector operations (≤ 12,870 subsets).

Beyond 16 GPUs no table fits; a greedy search (grown from every free GPU, adding
the GPU that adds the most score) is used and is NOT guaranteed optimal. No shipped preset has more
than 16 GPUs.
"""
from __future__ import annotations

import numpy as np

from .masks import MaskError, lowest_bits, popcount
from .model import Topology

TABLE_MAX_GPUS = 8
"""Up to this many GPUs the choice for every (free mask, count) is precomputed."""

EXACT_MAX_GPUS = 16
"""Up to this many GPUs the chooser is exact (tables over all 2^g masks)."""


class GpuChooser:
    """The best-subset chooser for one topology (see the module docstring).

    >>> from gangmaster.gpu_topology.presets import load_preset
    >>> c = chooser_for(load_preset("dgx1-v100"))
    >>> from gangmaster.gpu_topology.masks import indices_of
    >>> indices_of(c.choose(0b1111_1111, 4))
    [0, 1, 2, 3]
    """

    def __init__(self, topology: Topology):
        self.topology = topology
        self.gpu_count = g = topology.gpu_count
        self.full_mask = (1 << g) - 1
        self.exact = g <= EXACT_MAX_GPUS
        self._table: np.ndarray | None = None
        if not self.exact:
            return
        self.subset_score = _subset_scores(topology.pair_scores)
        self.popcounts = _popcounts(g)
        self.best_score = _best_by_size(self.subset_score, self.popcounts, g)
        self.future = np.maximum(self.best_score[2:], 0).sum(axis=0) if g >= 2 else np.zeros(1 << g, np.int64)
        self._by_size: list[tuple[np.ndarray, np.ndarray]] = []
        for k in range(g + 1):
            masks = np.flatnonzero(self.popcounts == k).astype(np.int64)
            order = np.argsort(-self.subset_score[masks], kind="stable")
            self._by_size.append((masks[order], self.subset_score[masks[order]]))
        if g <= TABLE_MAX_GPUS:
            table = np.zeros((g + 1, 1 << g), dtype=np.int64)
            for k in range(1, g + 1):
                for free in range(1 << g):
                    table[k, free] = self._search(free, k)
            self._table = table

    # ---------------------------------------------------------------- choosing
    def choose(self, free_mask: int, count: int) -> int:
        """The mask of ``count`` free GPUs to give; 0 when fewer are free (or ``count`` is 0)."""
        self._check(free_mask)
        if count <= 0 or count > self.gpu_count:
            return 0
        if self._table is not None:
            return int(self._table[count, free_mask])
        if self.exact:
            return self._search(free_mask, count)
        return self._greedy(free_mask, count)

    def best_score_of(self, free_mask: int, count: int) -> int:
        """The score of the best ``count``-set inside ``free_mask`` (-1: not enough free GPUs)."""
        self._check(free_mask)
        if self.exact:
            if not 0 <= count <= self.gpu_count:
                return -1
            return int(self.best_score[count, free_mask])
        chosen = self._greedy(free_mask, count)
        return self.topology.set_score(chosen) if chosen or count == 0 else -1

    def best_score_table(self, count: int) -> np.ndarray | None:
        """``table[free_mask]`` = best ``count``-set score (-1: too few free), or None
        beyond ``EXACT_MAX_GPUS``. Read-only; for vectorised ranking of many nodes."""
        if not self.exact or not 0 <= count <= self.gpu_count:
            return None
        return self.best_score[count]

    def score(self, mask: int) -> int:
        return int(self.subset_score[mask]) if self.exact else self.topology.set_score(mask)

    # ---------------------------------------------------------------- internals
    def _check(self, free_mask: int) -> None:
        if free_mask < 0 or free_mask >> self.gpu_count:
            raise MaskError(f"free mask {free_mask:#x} names GPUs that a {self.gpu_count}-GPU "
                            f"{self.topology.name} node does not have")

    def _search(self, free: int, count: int) -> int:
        if popcount(free) < count:
            return 0
        masks, scores = self._by_size[count]
        inside = (masks & ~free) == 0
        masks, scores = masks[inside], scores[inside]
        # sorted by score, best first: the ties for the best form a prefix
        top = masks[: int(np.searchsorted(-scores, -scores[0], side="right"))]
        if top.size == 1:
            return int(top[0])
        future = self.future[free & ~top]
        return int(top[future == future.max()].min())

    def _greedy(self, free: int, count: int) -> int:
        """Grow a set from every free GPU in turn, each time adding the GPU that adds
        the most score; keep the best grown set (ties: lowest mask). Not exact."""
        if popcount(free) < count:
            return 0
        idx = [i for i in range(self.gpu_count) if free >> i & 1]
        p = self.topology.pair_scores
        best: tuple[int, int] | None = None
        for seed in idx:
            chosen = [seed]
            rest = [i for i in idx if i != seed]
            score = 0
            while len(chosen) < count:
                gains = p[np.ix_(rest, chosen)].sum(axis=1)
                k = int(np.argmax(gains))
                score += int(gains[k])
                chosen.append(rest.pop(k))
            mask = sum(1 << i for i in chosen)
            if best is None or (score, -mask) > (best[0], -best[1]):
                best = (score, mask)
        return best[1]


_choosers: dict[bytes, GpuChooser] = {}


def chooser_for(topology: Topology) -> GpuChooser:
    """The (cached) chooser of a topology; topologies with equal pair scores share one."""
    key = topology.signature()
    chooser = _choosers.get(key)
    if chooser is None:
        chooser = _choosers[key] = GpuChooser(topology)
    return chooser


def _popcounts(g: int) -> np.ndarray:
    counts = np.zeros(1 << g, dtype=np.int64)
    for b in range(g):
        counts[1 << b: 2 << b] = counts[: 1 << b] + 1
    return counts


def _subset_scores(pair: np.ndarray) -> np.ndarray:
    """``out[m]`` = set score of mask ``m``, for all 2^g masks (built bit by bit)."""
    g = pair.shape[0]
    out = np.zeros(1 << g, dtype=np.int64)
    for b in range(1, g):
        low = np.arange(1 << b)
        bits = (low[:, None] >> np.arange(b)) & 1
        out[1 << b: 2 << b] = out[: 1 << b] + bits @ pair[b, :b]
    return out


def _best_by_size(subset_score: np.ndarray, popcounts: np.ndarray, g: int) -> np.ndarray:
    """``best[k][F]`` = max score of a ``k``-subset of ``F`` (-1 when ``|F| < k``):
    a maximum over subsets, one bit at a time."""
    size = 1 << g
    best = np.full((g + 1, size), -1, dtype=np.int64)
    for k in range(g + 1):
        exact = popcounts == k
        best[k, exact] = subset_score[exact]
    for b in range(g):
        blocks = best.reshape(g + 1, size >> (b + 1), 2, 1 << b)
        np.maximum(blocks[:, :, 1, :], blocks[:, :, 0, :], out=blocks[:, :, 1, :])
    best.setflags(write=False)
    return best
