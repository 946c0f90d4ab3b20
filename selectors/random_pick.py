"""``random``: qizhi's behaviour, kept as the baseline for comparisons.

Ranks by job packing, keeps pending tasks × factor candidates, then picks one of
them uniformly at random (the seeded RNG), ignoring where the job already runs."""
from __future__ import annotations

from .job_packing import PACKING
from .selector import Selector


class RandomPick(Selector):
    name = "random"
    description = "qizhi's pick: uniform among the job-packing candidates (the baseline)"
    prefer_locality = False
    pick_at_random = True

    def node_key(self, request):
        return PACKING
