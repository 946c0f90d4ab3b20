"""The plain backfill the replay engine's shape-indexed backfill is checked against (unit and
property tests): every pass tries every waiting job, oldest first. Register it as a queue
policy for one test with :func:`naive_backfill_registered`."""
from __future__ import annotations

from contextlib import contextmanager

from gangmaster.tools.replay import queue_policy


class NaiveBackfill:
    """The reference: every pass tries every waiting job, oldest first."""

    name = "naive-backfill"

    def __init__(self):
        self.jobs = []

    def __len__(self):
        return len(self.jobs)

    def add(self, waiting):
        self.jobs.append(waiting)

    @property
    def head(self):
        return self.jobs[0] if self.jobs else None

    def run_pass(self, try_start):
        still = [w for w in self.jobs if not try_start(w)]
        started = len(self.jobs) - len(still)
        self.jobs = still
        return started


@contextmanager
def naive_backfill_registered():
    """``queue_policy="naive-backfill"`` selects :class:`NaiveBackfill` inside the block."""
    queue_policy.QUEUE_POLICIES[NaiveBackfill.name] = NaiveBackfill
    try:
        yield
    finally:
        del queue_policy.QUEUE_POLICIES[NaiveBackfill.name]
