"""``gangmaster bench am``: the whole AM path for story 3's 6,001-instance gang on the
3,040-node cluster, in virtual time: submit, place the gang, ask the RM for every
instance, start them all, watch them finish (60 s of virtual time), unregister.
Baseline measured in the same run: the placement decision alone (``place_gang`` on
the same empty cluster), so the ratio is what everything around the decision costs."""
from __future__ import annotations

from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser

import tempfile
import time

from gangmaster.am.gang_placement import place_gang
from gangmaster.am.jobspec import load_job
from gangmaster.conf import conf_path
from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings


def add_parser(sub):
    p = add_bench_parser(sub, "am", "time a whole AM run of story 3's gang in virtual time", __doc__)
    p.add_argument("--cluster", default=str(conf_path("clusters/story3.yaml")))
    p.add_argument("--job", default=str(conf_path("jobs/story3-parameter-server.yaml")))
    p.add_argument("--repeat", type=count(), default=3)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from gangmaster.tools.job_runner import SimulatedRuns

    specs = load_cluster_specs(args.cluster)
    job = load_job(args.job)
    roles = job.gang_roles(0)
    best_decision = best_run = float("inf")
    for _ in range(args.repeat):
        pipeline = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
        start = time.perf_counter()
        place_gang(ClusterView(specs), roles, pipeline)
        best_decision = min(best_decision, time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as work:
            start = time.perf_counter()
            runs = SimulatedRuns(specs)
            one = runs.submit(job, work)
            done = runs.run()
            best_run = min(best_run, time.perf_counter() - start)
        if not done or one.outcome != "succeeded":
            print(f"the run did not succeed: {one.am.reason}")
            return 1
    tasks = len(one.am.history()[-1].tasks)
    print(f"{job.name}: {tasks} tasks on {len(specs)} nodes, started together, succeeded")
    print(f"whole AM run (virtual time {runs.sim.now():g} s): {best_run:.3f} s wall (best of {args.repeat})")
    print(f"baseline, the placement decision alone: {best_decision:.3f} s; ratio {best_run / best_decision:.1f}x")
    return 0
