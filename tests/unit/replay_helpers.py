"""Small traces and clusters for the replay engine's tests (no file from /work/shared)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from gangmaster.selectors.cluster import NodeSpec
from gangmaster.tools.replay.clusters import ReplayCluster
from gangmaster.tools.replay.trace import JobTable, NodeShape, TraceJob, sorted_jobs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "replay_engine" / "synthetic-2000.csv"

#: 8 GPUs, 80 vcores, 512 GiB: an instance asks for its GPUs' share, so only GPUs bind.
SHAPE = NodeShape(8, 80.0, 8 * 65536)


def nodes(count: int, prefix: str = "n", rack_nodes: int = 4) -> tuple[NodeSpec, ...]:
    return tuple(NodeSpec(f"{prefix}{i:03d}", rack=f"{prefix}-rack{i // rack_nodes}", vcores=SHAPE.vcores,
                          memory_mb=SHAPE.memory_mb, gpus=SHAPE.gpus) for i in range(count))


def cluster(count: int, queue_hosts=None, specs=None) -> ReplayCluster:
    return ReplayCluster(f"{count}x8", specs if specs is not None else nodes(count), queue_hosts)


def job(job_id: str, submit_s: float, duration_s: float, gpus: int, queue: str = "q") -> TraceJob:
    return TraceJob(job_id, float(submit_s), float(duration_s), queue, SHAPE.gang_roles(gpus))


def table(jobs: list[TraceJob]) -> JobTable:
    return JobTable(sorted_jobs(jobs), "test", "0" * 64, "native")


def synthetic(limit: int | None = None) -> JobTable:
    """The shipped 2,000-job trace: Philly's gang sizes (1 to 32 GPUs, mostly 1), log-normal
    durations, bursty arrivals, three queues (tests/fixtures/replay_engine/synthetic-2000.csv)."""
    with FIXTURE.open() as f:
        rows = list(csv.DictReader(f))[:limit]
    return table([job(r["job_id"], float(r["submit_s"]), float(r["duration_s"]), int(r["gpus"]), r["queue"])
                  for r in rows])


def allocated_gpu_seconds(timeline, end: float) -> float:
    """∫ allocated GPUs dt of the step function, up to ``end``."""
    t = np.append(timeline.t, end)
    return float(np.sum(timeline.allocated_gpus * np.diff(t)))
