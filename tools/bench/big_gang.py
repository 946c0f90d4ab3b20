"""``gangmaster bench big_gang``: issue 30's scenario, a big gang in a stream of small jobs,
replayed under the queue policies FIFO, backfill and reserve in one run.

The cluster: ``--nodes`` × 8 GPUs (default 8). The stream: a 1-GPU job every 2 s for
``--minutes`` (default 40), each running 10, 30, 60, 120 or 300 s (drawn from a seeded
generator, the same every run). The big gang: ``--gang-gpus`` GPUs (default half the
cluster, in 8-GPU instances) for 100 s, submitted at 600 s, when the stream has filled
the cluster to its steady state.

Per policy it prints the big gang's wait, the small jobs' mean, 95th-percentile and
longest wait, the makespan, the reserved GPUs held free and idle (reserve's cost), and
the process's CPU time for the replay. Under backfill the big gang waits for the
stream to end (small jobs keep taking the room it waits for); under reserve it starts
when the jobs running on its reserved nodes end, while the small jobs that end before
then, or fit elsewhere, still start (FIFO holds them all behind the gang).
"""
from __future__ import annotations

import random
import time

from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser

#: how long the stream's small jobs run, seconds (one drawn per job)
SMALL_DURATIONS_S = (10, 30, 60, 120, 300)


def add_parser(sub):
    p = add_bench_parser(sub, "big_gang", "a big gang in a stream of small jobs under FIFO, backfill and reserve",
                         __doc__)
    p.add_argument("--nodes", type=count(1, 1000), default=8, help="nodes of 8 GPUs (default 8)")
    p.add_argument("--minutes", type=count(1, 600), default=40, help="how long the stream runs (default 40)")
    p.add_argument("--gang-gpus", type=count(1, 8000), default=None, help="the big gang's GPUs (default half)")
    p.set_defaults(func=run)
    return p


def scenario(nodes: int, minutes: int, gang_gpus: int):
    """The job table: the stream and the big gang (job id ``big``)."""
    from gangmaster.tools.replay.trace import JobTable, NodeShape, TraceJob, sorted_jobs

    shape = NodeShape(8, 80.0, 8 * 65536)
    rng = random.Random(7)
    jobs = [TraceJob(f"s{i:05d}", 2.0 * i, float(rng.choice(SMALL_DURATIONS_S)), "q", shape.gang_roles(1))
            for i in range(minutes * 30)]
    jobs.append(TraceJob("big", 600.0, 100.0, "q", shape.gang_roles(gang_gpus)))
    return JobTable(sorted_jobs(jobs), "big-gang", "0" * 64, "native")


def run(args) -> int:
    from gangmaster.tools.replay.clusters import sized
    from gangmaster.tools.replay.engine import ReplayOptions, replay

    gang_gpus = args.gang_gpus or args.nodes * 4
    table = scenario(args.nodes, args.minutes, gang_gpus)
    cluster = sized(args.nodes, 8)
    print(f"{len(table.jobs) - 1:,} 1-GPU jobs (one every 2 s) and a {gang_gpus}-GPU gang at 600 s on "
          f"{cluster.describe()}")
    print(f"  {'policy':9s} {'gang wait':>10s} {'small: mean':>12s} {'p95':>7s} {'max':>7s} {'makespan':>9s} "
          f"{'reserved idle':>14s} {'CPU':>7s}")
    for policy in ("fifo", "backfill", "reserve"):
        cpu = time.process_time()
        result = replay(table, cluster, ReplayOptions(queue_policy=policy))
        cpu = time.process_time() - cpu
        big = next(j for j in result.jobs if j.job_id == "big")
        small = sorted(j.start_s - j.submit_s for j in result.jobs if j.job_id != "big" and j.start_s is not None)
        gang = "never" if big.start_s is None else f"{big.start_s - big.submit_s:,.0f} s"
        print(f"  {policy:9s} {gang:>10s} {sum(small) / len(small):10.1f} s {small[int(0.95 * len(small))]:5.0f} s "
              f"{small[-1]:5.0f} s {max(j.end_s or 0 for j in result.jobs):7,.0f} s "
              f"{result.reservation_hold_gpu_s / 3600:8.2f} GPU-h {cpu:5.2f} s")
    return 0
