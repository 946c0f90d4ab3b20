"""``gangmaster bench fgd``: a GPU-sharing pod stream placed pod by pod through select() and
the view's booking, per strategy, against ``random`` in the same run.

* **The cluster**, synthetic and openb-like (the shape of Alibaba's 2023 trace, not its
  data): ``--nodes`` nodes (default 1,213) of 8 GPUs (51 %), 2 (43 %), 4 (4 %) and 1 (2 %),
  seven GPU models, host names in an order unrelated to the machine kinds.
* **The stream**: ``--pods`` pods (default 10,000) drawn with the seed from a catalogue of
  120 shapes with Zipf-like popularity: about 13 % CPU-only, 38 % a share of one GPU
  (50–950 milli), 47 % one whole GPU, 2 % two to eight, a few restricted to GPU models.
* **Each strategy** places the same stream on a fresh view: ``select()`` for one pod, the
  best candidate booked with ``allocate``; a pod that finds no node is skipped and nothing
  ever leaves (the FGD paper's fill methodology, without its top-up). Every strategy is
  told the stream's shapes first (:meth:`Selector.observe_workload`): ``fgd`` needs them.

Printed per strategy: wall and CPU seconds, µs per pod, the ratio of its CPU time to
``random``'s, pods placed; when the pods seen so far ask as many GPUs as the cluster has,
the GPU allocated (% of capacity) and the fragmentation of what is idle (the FGD paper's
measure against the stream's shapes, % of idle GPU); the GPU allocated at the end. The
view is built before the clock starts. The full fill-mode figure through the AM path is
``gangmaster replay --format openb --mode fill``.
"""
from __future__ import annotations

import random
import time

import numpy as np

from gangmaster.tools.arg_types import count, seed
from gangmaster.tools.bench.cli import add_bench_parser

BASELINE = "random"
STRATEGIES = ["random", "best-fit", "dot-product", "packing", "fgd"]
# (GPUs per node, share of nodes, vcores, memory MB, [(GPU model, share of these nodes)])
MACHINES = [
    (8, 0.509, 96, 786_432, [("G2", 0.89), ("G3", 0.06), ("V100M32", 0.05)]),
    (2, 0.427, 64, 262_144, [("T4", 0.78), ("P100", 0.22)]),
    (4, 0.045, 64, 393_216, [("V100M16", 1.0)]),
    (1, 0.019, 32, 131_072, [("P100", 0.85), ("A10", 0.15)]),
]


def add_parser(sub):
    p = add_bench_parser(sub, "fgd", "place a GPU-sharing pod stream with the FGD paper's strategies",
                         __doc__)
    p.add_argument("--nodes", type=count(), default=1213, help="cluster size (default 1213, as openb)")
    p.add_argument("--pods", type=count(), default=10_000, help="pods in the stream (default 10000)")
    p.add_argument("--seed", type=seed, default=42)
    p.add_argument("--selector", action="append", help=f"only these strategies (repeatable; default "
                                                       f"{', '.join(STRATEGIES)}; {BASELINE} is always run)")
    p.set_defaults(func=run)
    return p


def openb_like_specs(nodes: int, seed: int):
    from gangmaster.selectors.cluster import NodeSpec
    rng = random.Random(seed)
    kinds = []
    for gpus, share, vcores, memory, models in MACHINES:
        for model, part in models:
            kinds += [(gpus, vcores, memory, model)] * round(nodes * share * part)
    kinds = (kinds + [kinds[0]] * nodes)[:nodes]
    rng.shuffle(kinds)
    return [NodeSpec(host=f"node-{i:04d}", rack=f"rack-{i // 40:03d}", gpu_type=model, memory_mb=memory,
                     vcores=vcores, gpus=gpus) for i, (gpus, vcores, memory, model) in enumerate(kinds)]


def pod_stream(pods: int, seed: int):
    """(ResourceDescriptor, GPU models) per pod, from a seeded catalogue of 120 shapes."""
    from gangmaster.selectors.resources import ResourceDescriptor
    rng = random.Random(seed)
    catalogue = []
    for _ in range(120):
        vcores = rng.choice([1, 2, 4, 6, 8, 12, 16, 24, 32])
        memory = rng.choice([2, 4, 8, 16, 32, 64]) * 1024
        kind = rng.random()
        if kind < 0.13:
            ask = ResourceDescriptor(memory, vcores)
        elif kind < 0.51:
            ask = ResourceDescriptor(memory, vcores, gpu_milli=rng.randrange(50, 951, 10))
        elif kind < 0.98:
            ask = ResourceDescriptor(memory, vcores, 1)
        else:
            ask = ResourceDescriptor(memory, vcores, rng.choice([2, 4, 8]))
        types = (rng.choice(["V100M32", "T4", "G2"]),) if ask.gpus and rng.random() < 0.05 else ()
        catalogue.append((ask, types))
    weights = [1 / (k + 1) ** 1.1 for k in range(len(catalogue))]
    return rng.choices(catalogue, weights, k=pods)


def place_stream(name: str, specs, stream, workload, seed: int) -> dict:
    from gangmaster.selectors.cluster import ClusterView
    from gangmaster.selectors.explanation import NotAvailable
    from gangmaster.selectors.pipeline import SelectionPipeline
    from gangmaster.selectors.request import SelectionRequest
    from gangmaster.selectors.selector import get_selector
    from gangmaster.selectors.settings import SelectionSettings

    view = ClusterView(specs)
    selector = get_selector(name)
    selector.observe_workload(workload)
    pipeline = SelectionPipeline(SelectionSettings(seed=seed), selector)
    requests = [SelectionRequest("pod", ask, gpu_types=types) for ask, types in stream]
    capacity = int(view.gpu_capacity.sum()) * 1000
    placed, asked, at_full = 0, 0, None
    wall, cpu = time.perf_counter(), time.process_time()
    for request in requests:
        asked += request.resource.gpus * 1000 + request.resource.gpu_milli
        if at_full is None and asked >= capacity:   # as much asked as the cluster has: a snapshot
            at_full = _state(view, workload, capacity)
        try:
            result = pipeline.select(view, request)
        except NotAvailable:
            continue
        best = result.best
        view.allocate(best.host, result.resource.with_(gpu_mask=best.gpu_mask))
        placed += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall": wall, "cpu": cpu, "placed": placed, "tie_rule": selector.tie_rule,
            "at_full": at_full or _state(view, workload, capacity), "at_end": _state(view, workload, capacity)}


def _state(view, workload, capacity: int) -> tuple[float, float]:
    """(GPU allocated, % of capacity; fragmentation, % of the idle GPU) of the view now."""
    from gangmaster.selectors.fragmentation import cluster_fragmentation
    frag, idle = cluster_fragmentation(view, workload)
    return 100 * (capacity - idle) / capacity, (100 * frag / idle if idle else 0.0)


def run(args) -> int:
    from gangmaster.selectors.workload import TaskShape, WorkloadShapes

    names = list(dict.fromkeys([BASELINE] + (args.selector or STRATEGIES)))
    specs = openb_like_specs(args.nodes, args.seed)
    stream = pod_stream(args.pods, args.seed)
    workload = WorkloadShapes.from_asks(TaskShape.of(ask, types) for ask, types in stream)
    gpus = sum(s.gpus for s in specs)
    print(f"{args.nodes:,} nodes, {gpus:,} GPUs; {args.pods:,} pods of {len(workload)} shapes "
          f"asking {sum(a.gpus * 1000 + a.gpu_milli for a, _ in stream) / (gpus * 10):.0f} % of the GPUs; seed {args.seed}")
    print(f"{'':<65} {'at 100 % asked':>19} {'at end':>8}")
    print(f"{'strategy':<12} {'ties':<10} {'wall s':>7} {'cpu s':>7} {'us/pod':>8} {'/random':>8} "
          f"{'placed':>7} {'alloc %':>8} {'frag %idle':>10} {'alloc %':>8}")
    baseline = None
    for name in names:
        r = place_stream(name, specs, stream, workload, args.seed)
        baseline = baseline or r["cpu"]
        print(f"{name:<12} {r['tie_rule']:<10} {r['wall']:7.2f} {r['cpu']:7.2f} {1e6 * r['cpu'] / args.pods:8.0f} "
              f"{r['cpu'] / baseline:7.2f}x {r['placed']:7,} {r['at_full'][0]:8.1f} {r['at_full'][1]:10.1f} "
              f"{r['at_end'][0]:8.1f}")
    return 0
