"""``gangmaster bench replay``: a whole trace through the replay engine (every gang through
the real AM and RM, every job of one task through the single-task lane that decides as
they would: :func:`gangmaster.tools.replay.engine.replay`), against a floor measured in
the same run.

* **The figure**: the trace (default: the full Philly trace, 82,247 jobs) on
  ``--nodes`` × ``--gpus-per-node`` (default 1,000 × 8), job-packing, FIFO per queue
  (the trace's 15 VCs share the cluster), and with ``--policy both`` FIFO + backfill
  too, with ``--policy all`` reserve as well (issue 30: its cost against FIFO's in the
  same run): wall time, µs per job, events, placement decisions, the process's peak
  RSS, the longest wait of a gang of more than 8 GPUs, and reserve's idle reserved GPU-hours.
* **The floor**: a bare numpy + heapq FIFO replay of the same job table (same queues,
  same per-instant passes, the consolidating rule: a gang of at most a node's GPUs on
  the node with the fewest free GPUs that fit, a larger one on whole free nodes plus
  one node for the remainder, ties to the lowest node). It shows what the decisions
  alone cost in Python; the ratio is what running them through AMs and an RM costs.
  Its mean JCT is printed beside the engine's as a sanity check (they differ only
  where ties and rack locality choose differently).

Wall and CPU time are both printed: on a shared machine the CPU time of this process
is the steadier figure. The trace is read first (not timed). The peak RSS is the process's high-water mark
after each step (``resource.getrusage``), so it includes the job table.
"""
from __future__ import annotations

import argparse
import gc
import heapq
import resource
import time
from collections import deque
from pathlib import Path

import numpy as np

from gangmaster.am.core.reservation_plan import DEFAULT_CLUSTER_RESERVATIONS
from gangmaster.conf.limits import MAX_RESERVATIONS
from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser

PHILLY = "/work/shared/traces/philly/philly.csv"
#: --policy both and all: the policies replayed, in this order
_POLICIES = {"both": ("fifo", "backfill"), "all": ("fifo", "backfill", "reserve")}


def add_parser(sub):
    p = add_bench_parser(sub, "replay", "replay a whole trace through the AM + RM path, beside a bare floor",
                         __doc__)
    p.add_argument("--trace", default=PHILLY, help=f"a Philly CSV (default {PHILLY})")
    p.add_argument("--nodes", type=count(), default=1000)
    p.add_argument("--gpus-per-node", type=count(), default=8)
    p.add_argument("--policy", type=_policies, default="both", metavar="P[,P...]",
                   help="queue policies replayed in turn (fifo, backfill, reserve); both: fifo,backfill; "
                        "all: fifo,backfill,reserve (default both)")
    p.add_argument("--limit", type=count(), default=None, help="replay only the first N jobs")
    p.add_argument("--cluster-reservations", type=count(1, MAX_RESERVATIONS, "MAX_RESERVATIONS"),
                   default=DEFAULT_CLUSTER_RESERVATIONS, metavar="N",
                   help=f"reserve: at most N jobs of the cluster hold a reservation at once (default "
                        f"{DEFAULT_CLUSTER_RESERVATIONS}; {MAX_RESERVATIONS}: one per queue, as before the bound)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from gangmaster.tools.replay.clusters import sized
    from gangmaster.tools.replay.engine import ReplayOptions, replay
    from gangmaster.tools.replay.metrics import JobColumns
    from gangmaster.tools.replay.philly import read_philly
    from gangmaster.tools.replay.trace import JobTable

    if not Path(args.trace).exists():
        print(f"bench replay: {args.trace} does not exist (--trace PATH)")
        return 2
    cluster = sized(args.nodes, args.gpus_per_node)
    table = read_philly(args.trace, cluster.gpu_node_shape())
    if args.limit is not None:
        table = JobTable(table.jobs[:args.limit], table.source, table.sha256, table.format, table.origin)
    print(f"{len(table.jobs):,} jobs of {args.trace} on {cluster.describe()}")
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    floor_jct = floor_fifo(table, args.nodes, args.gpus_per_node)
    floor_s, floor_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"  floor (numpy + heapq FIFO): {floor_s:6.2f} s wall, {floor_cpu:6.2f} s CPU   mean JCT {floor_jct:,.0f} s   "
          f"peak RSS {_peak_rss_mb():,.0f} MiB")
    walls, cpus = {}, {}
    for policy in _POLICIES.get(args.policy, args.policy):
        gc.collect()
        cpu = time.process_time()
        result = replay(table, cluster, ReplayOptions(queue_policy=policy,
                                                      cluster_reservations=args.cluster_reservations))
        cpu = time.process_time() - cpu
        walls[policy] = result.wall_s
        jobs = JobColumns.of(result.jobs)   # (the replay's own columns: no per-job loop here)
        jct = float(np.sum(jobs.jct[jobs.finished])) / max(1, int(np.count_nonzero(jobs.finished)))
        print(f"  engine {policy:8s}: {result.wall_s:6.2f} s wall = {result.wall_s / floor_s:5.1f} x floor, "
              f"{cpu:6.2f} s CPU = {cpu / floor_cpu:5.1f} x floor   "
              f"{cpu / len(table.jobs) * 1e6:6.0f} us CPU/job   mean JCT {jct:,.0f} s   "
              f"{result.events:,} events   {result.select_calls:,} placements ({result.select_s:.2f} s)   "
              f"peak RSS {_peak_rss_mb():,.0f} MiB")
        big = jobs.queueing[jobs.started & (jobs.gpus > 8)]
        print(f"    gangs > 8 GPUs: {len(big):,}, longest wait {float(np.max(big, initial=0)):,.0f} s, "
              f"mean {float(np.sum(big)) / max(1, len(big)):,.0f} s   reserved GPUs held idle "
              f"{result.reservation_hold_gpu_s / 3600:,.1f} GPU-h")
        cpus[policy] = cpu
    for policy in walls:
        if policy != "fifo" and "fifo" in walls:
            print(f"  {policy} / FIFO: {walls[policy] / walls['fifo']:.2f} x wall, "
                  f"{cpus[policy] / cpus['fifo']:.2f} x CPU")
    return 0


def _policies(text: str) -> str | tuple[str, ...]:
    """``--policy``: an alias of :data:`_POLICIES`, or a comma-separated list of queue policies."""
    if text in _POLICIES:
        return text
    names = tuple(text.split(","))
    for name in names:
        if name not in ("fifo", "backfill", "reserve"):
            raise argparse.ArgumentTypeError(f"expected fifo, backfill, reserve (comma-separated), both or all, "
                                             f"got {name!r}")
    return names


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def floor_fifo(table, nodes: int, gpus_per_node: int) -> float:
    """Strict FIFO per queue on one shared homogeneous cluster; returns the mean JCT."""
    free = np.full(nodes, gpus_per_node, dtype=np.int64)
    queues: dict[str, deque] = {}
    events: list = []   # (time, seq, gpus held as [(node, gpus)] | None, job index)
    for i, job in enumerate(table.jobs):
        events.append((job.submit_s, i, None, i))
        queues.setdefault(job.queue, deque())
    heapq.heapify(events)
    names = sorted(queues)
    seq = len(table.jobs)
    jct_sum = 0.0
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, held, i = heapq.heappop(events)
            if held is None:
                queues[table.jobs[i].queue].append(i)
            else:
                for node, gpus in held:
                    free[node] += gpus
        for name in names:
            queue = queues[name]
            while queue:
                job = table.jobs[queue[0]]
                held = _place(free, job.gpus, gpus_per_node)
                if held is None:
                    break
                queue.popleft()
                jct_sum += now + job.duration_s - job.submit_s
                heapq.heappush(events, (now + job.duration_s, seq, held, 0))
                seq += 1
    return jct_sum / max(1, len(table.jobs))


def _place(free: np.ndarray, gpus: int, per_node: int):
    """The consolidating rule; books and returns [(node, gpus)], or None (nothing booked)."""
    whole, rest = divmod(gpus, per_node) if gpus > per_node else (0, gpus)
    held = []
    if whole:
        empty = np.flatnonzero(free == per_node)[:whole]
        if empty.size < whole:
            return None
        free[empty] = 0
        held = [(int(n), per_node) for n in empty]
    if rest:
        fits = np.flatnonzero(free >= rest)
        if fits.size == 0:
            for node, g in held:
                free[node] += g
            return None
        node = int(fits[np.argmin(free[fits])])
        free[node] -= rest
        held.append((node, rest))
    return held
