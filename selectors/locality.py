"""``locality``: keep a job's tasks together: the hosts that already hold its tasks
first, then their racks, then qizhi's packing order.

Its key of a node depends on where the job runs, so it has no node key when the job
has hosts; but below the tier it is job packing's key (:meth:`Locality.key_within_tiers`),
so select() searches the job's hosts, then their racks, then the packing index, and
costs what those hold, not the cluster
(:func:`~gangmaster.selectors.candidates.best_by_tier`)."""
from __future__ import annotations

import numpy as np

from .job_packing import PACKING
from .selector import Selector

#: the packing key has 59 bits: the tier goes above them
TIER_SHIFT = 59


def locality_tiers(view, candidates: np.ndarray, placed_hosts) -> np.ndarray:
    """0 for a host holding the job's tasks, 1 for its rack, 2 elsewhere."""
    placed = [view.host_index[h] for h in placed_hosts if h in view.host_index]
    if not placed:
        return np.full(candidates.size, 2, dtype=np.int64)
    rack_held = np.zeros(len(view.racks), dtype=bool)
    rack_held[view.rack_code[placed]] = True
    tiers = np.where(rack_held[view.rack_code[candidates]], 1, 2)
    for node in placed:  # a few hosts: cheaper than np.isin over the candidates
        tiers[candidates == node] = 0
    return tiers


class Locality(Selector):
    name = "locality"
    description = "the job's own hosts first, then their racks, then job packing"

    def node_key(self, request):
        # with placed hosts a node's key depends on where the job runs: no node key
        return None if request.placed_hosts else PACKING

    def key_within_tiers(self, request):
        return PACKING

    def rank(self, view, candidates, request):
        packing = PACKING.column(view)[candidates]
        if not request.placed_hosts:
            return packing
        return (locality_tiers(view, candidates, request.placed_hosts) << TIER_SHIFT) | packing
