"""``BestOf``: the best wall and CPU time of the runs a benchmark times with ``with best:``.

CPU time (this process) is kept beside wall time because on a machine shared with other
processes the wall clock also counts their turns; the best of several runs is the one
least disturbed."""
from __future__ import annotations

import time


class BestOf:
    def __init__(self):
        self.wall = self.cpu = float("inf")

    def __enter__(self):
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def __exit__(self, *exc):
        self.wall = min(self.wall, time.perf_counter() - self._wall)
        self.cpu = min(self.cpu, time.process_time() - self._cpu)

    def __str__(self) -> str:
        return f"{self.wall * 1e3:.1f} ms wall, {self.cpu * 1e3:.1f} ms CPU"
