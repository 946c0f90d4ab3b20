"""``gangmaster bench rm``: how fast the ResourceManager simulator is.

Three figures, each against a baseline measured in the same run:

1. event loop: events/s of the virtual-time loop (self-rescheduling timers)
   vs a bare ``heapq`` push/pop of tuples (the floor any heap-based loop pays);
2. allocation: container allocations/s of AM heartbeats on a 10,000-node
   cluster in virtual time (host-named asks, as an AM that picks its nodes
   sends, and "anywhere" asks with a count), vs a naive first-fit scan of every
   node per container (what the numpy candidate index replaces);
3. gRPC: round trip of an ``Allocate`` heartbeat (one ask granted, then
   released) vs a bare unary ``Ping`` on the same server.

Targets (issue 4): >= 500,000 events/s, >= 20,000 allocations/s, gRPC allocate
within 2x of the bare call.
"""
from __future__ import annotations

from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser

import heapq
import json
import time

from gangmaster.protocol.rm_protocol import AllocateRequest, ApplicationSubmission, ResourceRequest
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

TARGET_EVENTS = 500_000
TARGET_ALLOCS = 20_000
TARGET_GRPC_RATIO = 2.0


def add_parser(sub):
    parser = add_bench_parser(sub, "rm", "RM simulator: event loop, allocation and gRPC round-trip speed",
                              __doc__)
    parser.add_argument("--nodes", type=count(), default=10_000, help="cluster size for the allocation figure")
    parser.add_argument("--events", type=count(), default=1_000_000, help="events to run in the loop figure")
    parser.add_argument("--allocations", type=count(), default=40_000, help="containers to allocate")
    parser.add_argument("--calls", type=count(), default=2_000, help="gRPC calls per figure")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(func=run)
    return parser


def cluster(n: int) -> list[NodeSpec]:
    """Half 8-GPU machines, half CPU machines, 40 racks."""
    ports = PortRanges.of((20000, 29999))
    specs = []
    for i in range(n):
        gpu = i % 2 == 0
        specs.append(NodeSpec(f"node-{i:05d}", f"rack-{i % 40:02d}", frozenset({"gpu"} if gpu else set()),
                              "V100" if gpu else None, None, 491520 if gpu else 131072, 80 if gpu else 32,
                              8 if gpu else 0, ports))
    return specs


def bench_events(n: int) -> dict:
    from gangmaster.tools.rmsim.clock import VirtualLoop
    # baseline: bare heapq of (time, seq, payload) tuples
    heap: list = []
    t0 = time.perf_counter()
    for k in range(1000):
        heapq.heappush(heap, (k * 0.001, k, None))
    seq = 1000
    for _ in range(n):
        t, _, _ = heapq.heappop(heap)
        seq += 1
        heapq.heappush(heap, (t + 1.0, seq, None))
    base = n / (time.perf_counter() - t0)

    loop = VirtualLoop()
    remaining = [n]

    def tick() -> None:
        remaining[0] -= 1
        if remaining[0] > 0:
            loop.call_later(1.0, tick)

    for k in range(1000):
        loop.call_at(k * 0.001, tick)
    t0 = time.perf_counter()
    loop.run()
    rate = loop.events_run / (time.perf_counter() - t0)
    return {"events_per_s": rate, "baseline_heapq_per_s": base, "ratio_vs_baseline": rate / base,
            "events": loop.events_run}


def _grant_all(core, app_id: str, asks_fn, total: int) -> tuple[int, float]:
    got = 0
    rid = 0
    t0 = time.perf_counter()
    while got < total:
        asks, rid = asks_fn(rid)
        resp = core.allocate(AllocateRequest(app_id, 1, asks=tuple(asks)))
        got += len(resp.allocated)
        if not resp.allocated and not resp.pending:
            break
    return got, time.perf_counter() - t0


def bench_allocations(n_nodes: int, total: int) -> dict:
    from gangmaster.tools.rmsim.core import ResourceManager
    from gangmaster.selectors.fit import Demand

    specs = cluster(n_nodes)
    gpu_hosts = [s.host for s in specs if s.gpus]
    one_gpu = ResourceDescriptor(8192, 4, 1)
    per_beat = 1000

    # 1. host-named asks, one container each (the AM chose the node and the GPU)
    core = ResourceManager(specs)
    app = core.submit(ApplicationSubmission("bench-hosts"))
    core.register(app)
    half = total // 2

    def host_asks(rid):
        asks = []
        for _ in range(per_beat):
            k = rid
            host = gpu_hosts[(k // 8) % len(gpu_hosts)]
            asks.append(ResourceRequest(rid, ResourceDescriptor(8192, 4, gpu_mask=1 << (k % 8)), host=host,
                                        relax_locality=False))
            rid += 1
        return asks, rid

    got_h, t_h = _grant_all(core, app, host_asks, half)
    core.check_invariants()

    # 2. anywhere asks with a count (the RM picks the node)
    core2 = ResourceManager(specs)
    app2 = core2.submit(ApplicationSubmission("bench-any"))
    core2.register(app2)

    def any_asks(rid):
        return [ResourceRequest(rid + j, one_gpu, count=100) for j in range(per_beat // 100)], rid + per_beat // 100

    got_a, t_a = _grant_all(core2, app2, any_asks, total - half)
    core2.check_invariants()

    # baseline: naive first-fit, a Python scan of every node per container
    core3 = ResourceManager(specs)
    ledger = core3.ledger
    need = Demand.of(one_gpu)
    naive = min(2000, total)
    # fill the first nodes so the scan has to walk, as it would on a busy cluster
    for i in range(0, len(ledger) // 2, 2):
        while ledger.why_not_now(i, need) is None:
            ledger.book(i, need)
    t0 = time.perf_counter()
    for _ in range(naive):
        for i in range(len(ledger)):
            if ledger.why_not_now(i, need) is None:
                ledger.book(i, need)
                break
    t_naive = time.perf_counter() - t0
    rate = (got_h + got_a) / (t_h + t_a)
    base = naive / t_naive
    return {"nodes": n_nodes, "allocations_per_s": rate,
            "host_named_per_s": got_h / t_h, "anywhere_per_s": got_a / t_a,
            "allocations": got_h + got_a, "baseline_naive_scan_per_s": base, "ratio_vs_baseline": rate / base}


def bench_grpc(calls: int) -> dict:
    from gangmaster.protocol.rm_client_grpc import GrpcRMClient
    from gangmaster.tools.rmsim.control import SimulatorControl
    from gangmaster.tools.rmsim.server import LiveRM, start_server

    live = LiveRM(cluster(100), work_dir="/tmp/gangmaster-bench-rm-tasks")
    server, port = start_server(live)
    try:
        rm = GrpcRMClient(f"127.0.0.1:{port}")
        rm.wait_ready()
        control = SimulatorControl(rm)
        app = rm.submit(ApplicationSubmission("bench-grpc"))
        reg = rm.register(app)
        for _ in range(200):   # warm up both paths
            control.ping()
        ask = ResourceRequest(0, ResourceDescriptor(1024, 1, 1))
        held: list[str] = []

        def beat(k: int) -> None:
            resp = rm.allocate(AllocateRequest(app, reg.attempt, asks=(ask.__class__(k, ask.resource),),
                                               releases=tuple(held)))
            held[:] = [c.container_id for c in resp.allocated]

        for k in range(1, 201):
            beat(k)
        t0 = time.perf_counter()
        for _ in range(calls):
            control.ping()
        t_ping = (time.perf_counter() - t0) / calls
        t0 = time.perf_counter()
        for k in range(1000, 1000 + calls):
            beat(k)
        t_alloc = (time.perf_counter() - t0) / calls
        rm.close()
    finally:
        server.stop(0)
        live.stop()
    return {"ping_us": t_ping * 1e6, "allocate_us": t_alloc * 1e6, "ratio": t_alloc / t_ping}


def run(args) -> int:
    ev = bench_events(args.events)
    al = bench_allocations(args.nodes, args.allocations)
    gr = bench_grpc(args.calls)
    if args.json:
        print(json.dumps({"event_loop": ev, "allocation": al, "grpc": gr}, indent=2))
        return 0
    ok = lambda good: "meets target" if good else "BELOW TARGET"
    print(f"event loop:  {ev['events_per_s']:>12,.0f} events/s  (bare heapq {ev['baseline_heapq_per_s']:,.0f}/s, "
          f"x{ev['ratio_vs_baseline']:.2f})  target {TARGET_EVENTS:,}: {ok(ev['events_per_s'] >= TARGET_EVENTS)}")
    print(f"allocation:  {al['allocations_per_s']:>12,.0f} containers/s on {al['nodes']:,} nodes "
          f"(host-named {al['host_named_per_s']:,.0f}/s, anywhere {al['anywhere_per_s']:,.0f}/s; "
          f"naive scan {al['baseline_naive_scan_per_s']:,.0f}/s, x{al['ratio_vs_baseline']:.0f})  "
          f"target {TARGET_ALLOCS:,}: {ok(al['allocations_per_s'] >= TARGET_ALLOCS)}")
    print(f"gRPC:        allocate {gr['allocate_us']:.0f} us vs bare ping {gr['ping_us']:.0f} us per call "
          f"(x{gr['ratio']:.2f})  target x{TARGET_GRPC_RATIO:g}: {ok(gr['ratio'] <= TARGET_GRPC_RATIO)}")
    return 0
