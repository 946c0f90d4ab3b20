"""``gangmaster bench topology``: does the ``topology`` strategy pick better GPUs than
qizhi's lowest free bits, and is it fast enough?

Quality, per preset: nodes with random occupancy (a uniform number of busy GPUs,
placed at random, leaving at least the requested count free) get a 2- or 4-GPU
request; both strategies choose on the same free masks. Reported: the mean set
score of each and the share of requests served entirely over NVLink.

Churn, per preset: the node's occupancy is made by the strategy itself. A stream
of 1-, 2- and 4-GPU requests arrives (the same stream for both strategies, from the
same seed) while random earlier allocations leave; reported: the share of 2- and
4-GPU requests served entirely over NVLink and their mean set score. This is
where choosing well now keeps good sets free for later.

Speed: the chooser on random (free mask, count) pairs of an 8-GPU DGX-1 and of
16-GPU nodes, next to ``lowest_bits`` timed in the same run, against the targets
(≤ 20 µs for 8 GPUs, ≤ 200 µs for 16); and ``rank()`` of the ``topology``
strategy over 100,000 nodes next to ``job-packing``'s.
"""
from __future__ import annotations

from gangmaster.tools.arg_types import count, seed
from gangmaster.tools.bench.cli import add_bench_parser

import json
import random
import time

import numpy as np

from gangmaster.gpu_topology.chooser import chooser_for
from gangmaster.gpu_topology.masks import lowest_bits, mask_from_indices, popcount
from gangmaster.gpu_topology.model import Topology
from gangmaster.gpu_topology.presets import load_preset, preset_names

TARGET_US = {8: 20.0, 16: 200.0}
REQUEST_SIZES = (2, 4)


def add_parser(sub):
    parser = add_bench_parser(
        sub, "topology", "topology-aware GPU choice vs lowest free bits: set score, NVLink share, latency",
        __doc__)
    parser.add_argument("--trials", type=count(), default=2000, help="random occupancies per preset and size (default 2000)")
    parser.add_argument("--steps", type=count(), default=20000, help="requests per preset in the churn run (default 20000)")
    parser.add_argument("--calls", type=count(), default=20000, help="chooser calls timed per node size (default 20000)")
    parser.add_argument("--nodes", type=count(), default=100_000, help="nodes for the rank() timing (default 100000)")
    parser.add_argument("--seed", type=seed, default=1, help="RNG seed (default 1)")
    parser.add_argument("--presets", help="comma-separated presets (default: all)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(func=run)
    return parser


def run(args) -> int:
    rng = random.Random(args.seed)
    names = args.presets.split(",") if args.presets else preset_names()
    quality = [row for name in names for row in quality_rows(load_preset(name), args.trials, rng)]
    churn = [churn_row(load_preset(name), args.steps, args.seed) for name in names]
    latency = [chooser_latency(t, args.calls, rng) for t in latency_topologies()]
    ranking = rank_timing(args.nodes, args.seed)
    if args.json:
        print(json.dumps({"quality": quality, "churn": churn, "latency": latency, "rank": ranking}, indent=2))
        return 0
    print(f"quality: {args.trials} random occupancies per preset and request size (seed {args.seed})")
    print(f"{'preset':<19} {'GPUs':>4} {'mean score topo':>15} {'lowest':>8} {'ratio':>6} "
          f"{'NVLink share topo':>17} {'lowest':>7}")
    for r in quality:
        nv = (f"{r['nvlink_share_topology']:>17.1%} {r['nvlink_share_lowest']:>7.1%}"
              if r["has_nvlink"] else f"{'(no NVLink)':>17} {'':>7}")
        print(f"{r['preset']:<19} {r['gpus']:>4} {r['mean_score_topology']:>15.1f} "
              f"{r['mean_score_lowest']:>8.1f} {r['score_ratio']:>6.3f} {nv}")
    print()
    print(f"churn: {args.steps} requests of 1/2/4 GPUs per preset with random departures (seed {args.seed})")
    print(f"{'preset':<19} {'served':>7} {'mean 2/4 score topo':>19} {'lowest':>8} {'ratio':>6} "
          f"{'NVLink share 2/4 topo':>21} {'lowest':>7}")
    for r in churn:
        nv = (f"{r['nvlink_share_topology']:>21.1%} {r['nvlink_share_lowest']:>7.1%}"
              if r["has_nvlink"] else f"{'(no NVLink)':>21} {'':>7}")
        print(f"{r['preset']:<19} {r['served']:>7} {r['mean_score_topology']:>19.1f} "
              f"{r['mean_score_lowest']:>8.1f} {r['score_ratio']:>6.3f} {nv}")
    print()
    print(f"chooser latency ({args.calls} calls, random free mask and count)")
    for r in latency:
        verdict = "meets" if r["mean_us"] <= r["target_us"] else "MISSES"
        print(f"  {r['topology']:<28} {r['gpus']:>2} GPUs: mean {r['mean_us']:.2f} us, p99 {r['p99_us']:.2f} us "
              f"(lowest_bits {r['lowest_bits_mean_us']:.2f} us, x{r['ratio_vs_lowest_bits']:.1f}); "
              f"target <= {r['target_us']:.0f} us: {verdict}")
    print()
    print(f"rank() over the {ranking['nodes']} of {ranking['cluster_nodes']} nodes with 2 GPUs free "
          f"({ranking['gpus_used']} of {ranking['gpus']} GPUs in use), 2-GPU request, vs {ranking['baseline']}:")
    print(f"  all keys computed:  topology {ranking['cold_ms']:.2f} ms, {ranking['baseline']} "
          f"{ranking['cold_baseline_ms']:.2f} ms (x{ranking['cold_ratio']:.1f})")
    print(f"  cached key column:  topology {ranking['warm_ms']:.3f} ms, {ranking['baseline']} "
          f"{ranking['warm_baseline_ms']:.3f} ms (x{ranking['warm_ratio']:.1f})")
    return 0


def random_free_mask(gpus: int, need: int, rng: random.Random) -> int:
    """A uniform number of busy GPUs (leaving at least ``need`` free), placed at random."""
    busy = rng.randint(0, gpus - need)
    return ((1 << gpus) - 1) & ~mask_from_indices(rng.sample(range(gpus), busy))


def quality_rows(topology: Topology, trials: int, rng: random.Random) -> list[dict]:
    chooser = chooser_for(topology)
    has_nvlink = bool(topology.nvlink_cliques())
    rows = []
    for k in REQUEST_SIZES:
        if k > topology.gpu_count:
            continue
        score = {"topology": 0, "lowest": 0}
        nvlink = {"topology": 0, "lowest": 0}
        for _ in range(trials):
            free = random_free_mask(topology.gpu_count, k, rng)
            for who, mask in (("topology", chooser.choose(free, k)), ("lowest", lowest_bits(free, k))):
                assert popcount(mask) == k and mask & ~free == 0
                score[who] += chooser.score(mask)
                nvlink[who] += topology.all_nvlink(mask)
        rows.append({
            "preset": topology.name, "gpus": k, "trials": trials, "has_nvlink": has_nvlink,
            "mean_score_topology": score["topology"] / trials, "mean_score_lowest": score["lowest"] / trials,
            "score_ratio": score["topology"] / score["lowest"] if score["lowest"] else float("nan"),
            "nvlink_share_topology": nvlink["topology"] / trials, "nvlink_share_lowest": nvlink["lowest"] / trials,
        })
    return rows


def churn_row(topology: Topology, steps: int, seed: int) -> dict:
    chooser = chooser_for(topology)
    strategies = {"topology": chooser.choose, "lowest": lowest_bits}
    out: dict = {"preset": topology.name, "steps": steps, "has_nvlink": bool(topology.nvlink_cliques())}
    for who, choose in strategies.items():
        rng = random.Random(seed)  # the same arrivals and departures for both strategies
        free, active = (1 << topology.gpu_count) - 1, []
        served = nvlink = score = 0
        for _ in range(steps):
            if active and rng.random() < 0.45:
                free |= active.pop(rng.randrange(len(active)))
            k = rng.choice((1, 2, 2, 4))
            if popcount(free) < k:
                continue
            mask = choose(free, k)
            free &= ~mask
            active.append(mask)
            if k >= 2:
                served += 1
                score += chooser.score(mask)
                nvlink += topology.all_nvlink(mask)
        out[f"mean_score_{who}"] = score / served if served else 0.0
        out[f"nvlink_share_{who}"] = nvlink / served if served else 0.0
        out["served"] = served
    out["score_ratio"] = out["mean_score_topology"] / out["mean_score_lowest"] if out["mean_score_lowest"] else float("nan")
    return out


def latency_topologies() -> list[Topology]:
    """An 8-GPU DGX-1, the 16-GPU DGX-2 preset (all pairs equal), and a structured
    16-GPU node made of two DGX-1 V100 meshes joined across sockets (synthetic)."""
    dgx1 = load_preset("dgx1-v100")
    g = dgx1.gpu_count
    sys_link = dgx1.link(0, 5)
    links = [[None if i == j else dgx1.link(i % g, j % g) if i // g == j // g else sys_link
              for j in range(2 * g)] for i in range(2 * g)]
    twin = Topology("2x dgx1-v100 (synthetic)", links, description="two DGX-1 V100 meshes joined by SYS")
    return [dgx1, load_preset("dgx2"), twin]


def chooser_latency(topology: Topology, calls: int, rng: random.Random) -> dict:
    chooser = chooser_for(topology)  # tables are built here, outside the timing
    g = topology.gpu_count
    cases = []
    for _ in range(calls):
        k = rng.randint(1, g)
        cases.append((random_free_mask(g, k, rng), k))
    per_call = np.empty(calls)
    clock = time.perf_counter_ns
    for n, (free, k) in enumerate(cases):
        t0 = clock()
        chooser.choose(free, k)
        per_call[n] = clock() - t0
    t0 = clock()
    for free, k in cases:
        chooser.choose(free, k)
    mean = (clock() - t0) / calls / 1000
    t0 = clock()
    for free, k in cases:
        lowest_bits(free, k)
    base = (clock() - t0) / calls / 1000
    target = TARGET_US[16 if g > 8 else 8]
    return {"topology": topology.name, "gpus": g, "calls": calls, "mean_us": mean,
            "p99_us": float(np.percentile(per_call, 99)) / 1000, "lowest_bits_mean_us": base,
            "ratio_vs_lowest_bits": mean / base if base else float("nan"), "target_us": target,
            "meets_target": mean <= target}


def partly_used_cluster(nodes: int, seed: int):
    """A large mixed cluster (a third each DGX-1, 4-GPU PCIe and CPU nodes) with random
    GPU use: each GPU of a node busy with probability 1/2, booked through the view's own
    ``allocate`` so that every column select() and the strategies read says so (the
    used-GPU columns are worked out from the free ones: written to, they keep nothing)."""
    from gangmaster.selectors.cluster import ClusterView, NodeSpec
    from gangmaster.selectors.resources import ResourceDescriptor

    kinds = [("dgx1-v100", 8), ("pcie-4gpu", 4), (None, 0)]
    specs = [NodeSpec(host=f"n{i:06d}", topology=kinds[i % 3][0], gpus=kinds[i % 3][1],
                      memory_mb=262144, vcores=64) for i in range(nodes)]
    view = ClusterView(specs)
    np_rng = np.random.default_rng(seed)
    used = np_rng.integers(0, 1 << 8, size=nodes, dtype=np.uint64) & view.gpu_capacity_mask
    for i, mask in enumerate(used.tolist()):
        if mask:
            view.allocate(i, ResourceDescriptor(gpu_mask=mask))
    return view


def rank_timing(nodes: int, seed: int) -> dict:
    """rank() over :func:`partly_used_cluster`'s nodes that can take a 2-GPU request.
    What is reported of the cluster is read from the view ranked (its used GPUs) and
    from a select() on it (the nodes its filters let through), so a figure says what
    state it was measured in."""
    from gangmaster.selectors.pipeline import SelectionPipeline
    from gangmaster.selectors.request import SelectionRequest
    from gangmaster.selectors.resources import ResourceDescriptor
    from gangmaster.selectors.selector import get_selector

    view = partly_used_cluster(nodes, seed)
    request = SelectionRequest(role="worker", resource=ResourceDescriptor(memory_mb=1024, vcores=1, gpus=2))
    candidates = np.flatnonzero(view.gpus_free >= 2)
    topo = get_selector("topology")
    baseline = get_selector("job-packing")
    from gangmaster.selectors.job_packing import packing_keys

    def best_ms(fn) -> float:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times) * 1000

    # cold: every key computed (a fresh view); warm: rank() through the view's cached
    # key column, as select() calls it between changes to the cluster.
    cold = best_ms(lambda: topo.keys(view, candidates, 2))
    cold_base = best_ms(lambda: packing_keys(view, candidates))
    warm = best_ms(lambda: topo.rank(view, candidates, request))
    warm_base = best_ms(lambda: baseline.rank(view, candidates, request))
    survivors = SelectionPipeline().select(view, request).explanation.survivors   # (after the timing)
    return {"nodes": int(candidates.size), "cluster_nodes": nodes, "gpus": int(view.gpu_capacity.sum()),
            "gpus_used": int(view.gpus_used.sum()), "select_survivors": survivors, "baseline": "job-packing",
            "cold_ms": cold, "cold_baseline_ms": cold_base, "cold_ratio": cold / cold_base,
            "warm_ms": warm, "warm_baseline_ms": warm_base, "warm_ratio": warm / warm_base}
