"""Free ports for the real engines' daemons the end-to-end tests start, each pytest-xdist
worker looking only in its own slice of a range.

Why slices: a test that kills a daemon and starts it again (test_slurm_restart) owns the
port in between, yet the port is free then. When every worker picked the lowest free port
of one shared range, a test on another worker took it in that moment, and the restart
found its own port in use (CI, after session 16)."""
from __future__ import annotations

import os
import socket


def _own_slice(start: int, stop: int) -> tuple[int, int]:
    """This worker's part of ``start..stop`` (all of it outside pytest-xdist)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0
    width = (stop - start) // max(workers, 1)
    return start + index * width, start + (index + 1) * width


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_block(start: int, count: int, stop: int) -> int:
    """The first port p of this worker's slice of ``start..stop`` such that p..p+count-1
    are all free on 127.0.0.1 now."""
    low, high = _own_slice(start, stop)
    for first in range(low, high - count + 1):
        if all(_bindable(port) for port in range(first, first + count)):
            return first
    raise RuntimeError(f"no {count} free ports in {low}..{high} (this worker's part of {start}..{stop})")
