"""``gangmaster bench openb_fill``: one fill-mode seed of Alibaba's openb trace through the
replay engine (every pod through the single-task lane, which decides as the real AM and RM do:
:func:`gangmaster.tools.replay.engine.replay` with the ``drop`` queue policy), per
selector, against a floor measured in the same run.

* **The figure**: the pods of ``--pods`` (default: the real openb pod list) filled to
  ``--inflate`` × the node list's GPUs with ``--seed`` (:func:`~gangmaster.tools.replay.openb.fill_plan`,
  about 10,800 pods for seed 42), on the cluster of ``--nodes-file`` (default: the GPU
  node list beside the pods): wall and CPU time per seed, µs per pod, pods placed and
  dropped, and the GPUs allocated at the end (% of capacity).
* **The floor**: a bare numpy first fit of the same arrival sequence (per node: vcores,
  memory and each GPU's milli-GPU free; a pod on the lowest node that fits, whole GPUs
  on wholly free GPUs, a share on the GPU with the least milli free that fits). It shows
  what the decisions alone cost in Python; the ratio is what running each pod through an
  AM and the RM costs. Its allocation is printed beside each selector's as a sanity
  check (first fit packs differently, so they differ).

Wall and CPU time are both printed: on a shared machine the CPU time of this process
is the steadier figure. Reading the trace and building the plan are not timed.
"""
from __future__ import annotations

import gc
import time
from pathlib import Path

import numpy as np

from gangmaster.tools.arg_types import real, seed
from gangmaster.tools.bench.cli import add_bench_parser

OPENB_PODS = "/work/shared/traces/alibaba_openb/openb_pod_list_default.csv"


def add_parser(sub):
    p = add_bench_parser(sub, "openb_fill", "one openb fill-mode seed through the AM + RM path, beside a bare floor",
                         __doc__)
    p.add_argument("--pods", default=OPENB_PODS, help=f"an openb pod list (default {OPENB_PODS})")
    p.add_argument("--nodes-file", help="the node list (default: openb_node_list_gpu_node.csv beside the pods)")
    p.add_argument("--seed", type=seed, default=42)
    p.add_argument("--inflate", type=real(0, 10, low_open=True), default=1.3)
    p.add_argument("--selector", nargs="+", default=["random"], metavar="NAME")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from gangmaster.tools.replay import openb
    from gangmaster.tools.replay.engine import ReplayOptions, replay
    from gangmaster.tools.replay.metrics import fill_curve

    if not Path(args.pods).exists():
        print(f"bench openb_fill: {args.pods} does not exist (--pods PATH)")
        return 2
    cluster = openb.read_openb_nodes(args.nodes_file or openb.default_nodes_file(args.pods))
    plan = openb.fill_plan(openb.read_openb_pods(args.pods), cluster.capacity_gpus, args.seed, args.inflate)
    capacity = plan.capacity_milli
    print(f"{len(plan.table):,} pods (seed {args.seed}, {plan.drawn_again:,} drawn again, asking "
          f"{plan.requested_milli / capacity:.1%}) on {cluster.describe()}")
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    floor_placed, floor_milli = floor_first_fit(plan.table, cluster)
    floor_s, floor_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"  floor (numpy first fit): {floor_s:6.2f} s wall, {floor_cpu:6.2f} s CPU   placed {floor_placed:,}, "
          f"allocated {floor_milli / capacity:.1%}")
    for name in args.selector:
        gc.collect()
        cpu = time.process_time()
        result = replay(plan.table, cluster, ReplayOptions(selector=name, queue_policy="drop", seed=args.seed))
        cpu = time.process_time() - cpu
        curve = fill_curve(plan.table, result, capacity)
        placed = sum(job.start_s is not None for job in result.jobs)
        dropped = sum(job.outcome == "dropped" for job in result.jobs)
        print(f"  {name:12s}: {result.wall_s:6.2f} s wall = {result.wall_s / floor_s:5.1f} x floor, "
              f"{cpu:6.2f} s CPU = {cpu / floor_cpu:5.1f} x floor, {1e6 * cpu / len(plan.table):,.0f} µs CPU/pod   "
              f"placed {placed:,}, dropped {dropped:,}, allocated {curve.percent(curve.allocated[-1]) / 100:.1%} "
              f"(at 100 % arrived: {curve.at(np.array([100]))[0] / 100:.1%})")
    return 0


def floor_first_fit(table, cluster) -> tuple[int, int]:
    """The floor: (pods placed, milli-GPU allocated) of a bare first fit of ``table``'s pods
    in order, each placed at its arrival or dropped, nothing released."""
    specs = cluster.specs
    width = max(spec.gpus for spec in specs)
    mvcores = np.array([round(spec.vcores * 1000) for spec in specs], dtype=np.int64)
    memory = np.array([spec.memory_mb for spec in specs], dtype=np.int64)
    gpu_free = np.zeros((len(specs), width), dtype=np.int64)
    for i, spec in enumerate(specs):
        gpu_free[i, :spec.gpus] = 1000
    types = np.array([spec.gpu_type or "" for spec in specs], dtype=object)
    placed = allocated = 0
    for job in table.jobs:
        role = job.roles[0]
        fits = (mvcores >= round(role.vcores * 1000)) & (memory >= role.memory_mb)
        if role.gpu_types:
            fits &= np.isin(types, role.gpu_types)
        if role.gpus:
            fits &= (gpu_free == 1000).sum(axis=1) >= role.gpus
        elif role.gpu_milli:
            fits &= gpu_free.max(axis=1) >= role.gpu_milli
        rows = np.flatnonzero(fits)
        if not len(rows):
            continue
        i = rows[0]
        mvcores[i] -= round(role.vcores * 1000)
        memory[i] -= role.memory_mb
        if role.gpus:
            gpu_free[i, np.flatnonzero(gpu_free[i] == 1000)[:role.gpus]] = 0
        elif role.gpu_milli:
            left = np.where(gpu_free[i] >= role.gpu_milli, gpu_free[i], 1 << 30)
            gpu_free[i, int(np.argmin(left))] -= role.gpu_milli
        placed += 1
        allocated += role.gpu_milli_each
    return placed, allocated
