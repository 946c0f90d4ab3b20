"""``gangmaster bench gang``: time to decide an all-or-nothing placement of story 3's
gang — 1 coordinator, 3,000 servers (at most 1 per machine, asked at cpu × 0.5),
3,000 workers (at most 2 per machine, cpu × 0.7) — on the 3,040-node, two-type
cluster ``conf/clusters/story3.yaml``, against a baseline measured in the same
run: one select() per instance without booking anything (what placing one
instance per select() cost at the least; place_gang now ranks once per role and
fills nodes, see am/gang_placement.py). ``--selector`` times another strategy."""
from __future__ import annotations

from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser

import time

from gangmaster.am.gang_placement import GangDoesNotFit, place_gang, role_request
from gangmaster.am.jobspec_model import Completion, RetryPolicy, RoleSpec
from gangmaster.conf import conf_path
from gangmaster.selectors.cluster_file import load_cluster
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings


def add_parser(sub):
    p = add_bench_parser(sub, "gang", "time an all-or-nothing placement of a 6,001-instance gang", __doc__)
    p.add_argument("--cluster", default=str(conf_path("clusters/story3.yaml")))
    p.add_argument("--selector", default="job-packing")
    p.add_argument("--servers", type=count(0), default=3000)
    p.add_argument("--workers", type=count(0), default=3000)
    p.add_argument("--repeat", type=count(), default=3)
    p.set_defaults(func=run)
    return p


def story3_roles(servers: int, workers: int) -> tuple[RoleSpec, ...]:
    def role(name, instances, cpu, memory, gpus, ratio, cap):
        return RoleSpec(name=name, instances=instances, cpu=cpu, memory_mb=memory, gpus=gpus, ports={"rpc": 1},
                        commands=("true",), completion=Completion(), task_retry_count=0,
                        retry=RetryPolicy(), request_ratio=ratio, max_instances_per_node=cap)
    return (role("coordinator", 1, 4, 8192, 0, 1.0, None),
            role("server", servers, 8, 16384, 0, 0.5, 1),
            role("worker", workers, 8, 32768, 1, 0.7, 2))


def run(args) -> int:
    view = load_cluster(args.cluster)
    roles = story3_roles(args.servers, args.workers)
    total = sum(r.instances for r in roles)
    pipeline_for = lambda: SelectionPipeline(SelectionSettings(), get_selector(args.selector))
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        try:
            placement = place_gang(view, roles, pipeline_for())
        except GangDoesNotFit as exc:
            print(f"no placement: {exc}")
            return 1
        best = min(best, time.perf_counter() - start)
    # baseline: the same number of select() calls, nothing booked
    pipeline = pipeline_for()
    request = role_request(roles[2], 1, ())
    start = time.perf_counter()
    for _ in range(total):
        pipeline.select_single_node(view, request)
    floor = time.perf_counter() - start
    hosts = len(set(placement.hosts()))
    print(f"placed {total} instances on {hosts} of {len(view)} nodes with {args.selector}")
    print(f"placement decision: {best:.3f} s (best of {args.repeat}); target <= 1 s")
    print(f"baseline, {total} select() calls without booking: {floor:.3f} s; ratio {best / floor:.2f}x")
    return 0
