"""``gangmaster bench select``: microseconds per select() for each strategy.

A heterogeneous cluster (8-GPU, 4-GPU and CPU machines, racks of 40) with random
occupancy; a fixed, seeded stream of requests (1–8 GPUs, CPU-only, with and
without ports, with a job's placed hosts). Each strategy answers the same stream;
the ``random`` strategy (qizhi's pick) is the baseline measured in the same run.
"""
from __future__ import annotations

from gangmaster.tools.arg_types import count, seed
from gangmaster.tools.bench.cli import add_bench_parser

import gc
import random
import resource
import time
import tracemalloc

import numpy as np

from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector, selector_classes
from gangmaster.selectors.settings import SelectionSettings

from .synthetic import synthetic_cluster

BASELINE = "random"


def add_parser(sub):
    p = add_bench_parser(sub, "select", "p50/p99 microseconds per select() for each strategy", __doc__)
    p.add_argument("--nodes", type=count(), action="append",
                   help="cluster size (repeatable; default 1000, 10000 and 100000)")
    p.add_argument("--requests", type=count(), default=2000, help="requests timed per strategy")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--selector", action="append", help="only these strategies (repeatable)")
    p.set_defaults(func=run)
    return p


def request_stream(view, count: int, seed: int) -> list[SelectionRequest]:
    rng = random.Random(seed)
    hosts = view.hosts
    out = []
    for k in range(count):
        gpus = rng.choice([0, 1, 1, 2, 2, 4, 8])
        placed = tuple(rng.sample(hosts, rng.randint(0, 3)))
        out.append(SelectionRequest(
            role=f"role{k % 3}",
            resource=ResourceDescriptor(memory_mb=rng.choice([2048, 8192, 32768]),
                                        vcores=rng.choice([1, 2, 3.5, 8]), gpus=gpus,
                                        ports=rng.choice([0, 0, 2])),
            pending_tasks=rng.randint(1, 8), placed_hosts=placed))
    return out


def time_strategy(view, name: str, requests, seed: int) -> np.ndarray:
    pipeline = SelectionPipeline(SelectionSettings(seed=seed), get_selector(name))
    for request in requests[:50]:  # warm up
        _safe_select(pipeline, view, request)
    samples = np.empty(len(requests))
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for k, request in enumerate(requests):
            start = clock()
            _safe_select(pipeline, view, request)
            samples[k] = (clock() - start) / 1000
    finally:
        gc.enable()
    return samples


def _safe_select(pipeline, view, request):
    try:
        return pipeline.select_single_node(view, request)
    except NotAvailable:
        return None


def run(args) -> int:
    sizes = args.nodes or [1000, 10_000, 100_000]
    names = args.selector or list(selector_classes())
    if BASELINE not in names:
        names.append(BASELINE)
    print(f"{'nodes':>8} {'strategy':<12} {'p50 us':>9} {'p99 us':>9} {'p50/random':>11}")
    for nodes in sizes:
        # Memory is traced in a separate pass: tracing slows every numpy allocation.
        tracemalloc.start()
        view = synthetic_cluster(nodes, args.seed)
        requests = request_stream(view, args.requests, args.seed)
        pipelines = [SelectionPipeline(SelectionSettings(seed=args.seed), get_selector(n)) for n in names]
        for pipeline in pipelines:
            for request in requests[:100]:
                _safe_select(pipeline, view, request)
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        results = {name: time_strategy(view, name, requests, args.seed) for name in names}
        base = np.percentile(results[BASELINE], 50)
        for name, samples in results.items():
            p50, p99 = np.percentile(samples, [50, 99])
            print(f"{nodes:>8} {name:<12} {p50:>9.1f} {p99:>9.1f} {p50 / base:>10.2f}x")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{nodes:>8} peak memory: {traced_peak / 2**20:.1f} MB traced (view + selection), "
              f"{rss:.0f} MB process RSS so far")
    return 0
