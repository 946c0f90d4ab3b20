"""``gangmaster bench am``: the AM on story 3's 6,001-instance gang and 3,040-node
cluster, in virtual time. Two figures, each against a baseline measured in the same run:

* **The whole run**: submit, place the gang, ask the RM for every instance, start
  them all, watch them finish (60 s of virtual time), unregister. Baseline: the
  placement decision alone (``place_gang`` on the same empty cluster), so the ratio
  is what everything around the decision costs.
* **A stuck gang**: ``--blacklisted`` nodes are unhealthy, so the gang's servers (at
  most one per machine) cannot all be placed; the AM waits an hour of virtual time
  (``--stuck-s``), one heartbeat a second. The gang's own CPU time over that wait
  (the AM planning it, placements included) is compared with one placement attempt
  of the gang on the same cluster (which finds no room): a waiting gang is placed
  again only when something could let it fit, so the ratio stays near 1 however long
  it waits. Printed beside it: the placement attempts the AM made, and the whole
  wait's CPU time (every heartbeat's round trip to the RM included, the floor any AM
  pays to stay alive) with its ratio to the same baseline. The gang's CPU time is taken
  around each of its heartbeats; what that timing itself costs inside the intervals is
  measured in the same run (:func:`stopwatch_share`) and left out.

Each measured run starts on a collected heap: the garbage an earlier run left (its
cluster, its AM, 6,001 tasks) is not charged to the next one, as no single
``gangmaster run`` pays it.
"""
from __future__ import annotations

import gc
import tempfile
import time

from gangmaster.am.core.gang_placement import GangDoesNotFit, place_gang
from gangmaster.am.spec.jobspec import load_job
from gangmaster.am.core.master import ApplicationMaster
from gangmaster.protocol.rm_protocol import ApplicationSubmission, view_from_nodes
from gangmaster.conf import conf_path
from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.cluster_file import load_cluster_specs
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.arg_types import count, seconds
from gangmaster.tools.bench.cli import add_bench_parser


def add_parser(sub):
    p = add_bench_parser(sub, "am", "time a whole AM run of story 3's gang, and a stuck one, in virtual time",
                         __doc__)
    p.add_argument("--cluster", default=str(conf_path("clusters/story3.yaml")))
    p.add_argument("--job", default=str(conf_path("jobs/story3-parameter-server.yaml")))
    p.add_argument("--repeat", type=count(), default=3)
    p.add_argument("--blacklisted", type=count(0), default=42,
                   help="unhealthy nodes in the stuck-gang figure (default 42: two servers find no machine)")
    p.add_argument("--stuck-s", type=seconds, default=3600.0,
                   help="virtual seconds the stuck gang waits (default 3600: an hour)")
    p.set_defaults(func=run)
    return p


def job_packing() -> SelectionPipeline:
    return SelectionPipeline(SelectionSettings(), get_selector("job-packing"))


def run(args) -> int:
    specs = load_cluster_specs(args.cluster)
    job = load_job(args.job)
    if whole_run(specs, job, args.repeat) != 0:
        return 1
    return stuck_gang(specs, job, args.blacklisted, args.stuck_s)


def whole_run(specs, job, repeat: int) -> int:
    from gangmaster.tools.job_runner import SimulatedRuns

    roles = job.gang_roles(0)
    best_decision = best_run = best_cpu = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        place_gang(ClusterView(specs), roles, job_packing())
        best_decision = min(best_decision, time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as work:
            gc.collect()   # the garbage of the run before is not this run's to pay for
            start, cpu = time.perf_counter(), time.process_time()
            runs = SimulatedRuns(specs)
            one = runs.submit(job, work)
            done = runs.run()
            best_run = min(best_run, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - cpu)
        if not done or one.outcome != "succeeded":
            print(f"the run did not succeed: {one.am.reason}")
            return 1
    tasks = len(one.am.history()[-1].tasks)
    print(f"{job.name}: {tasks} tasks on {len(specs)} nodes, started together, succeeded")
    print(f"whole AM run (virtual time {runs.sim.now():g} s): {best_run:.3f} s wall, {best_cpu:.3f} s CPU "
          f"(best of {repeat}; on a shared machine the CPU time is the steadier figure)")
    print(f"baseline, the placement decision alone: {best_decision:.3f} s; ratio {best_run / best_decision:.1f}x")
    return 0


def stuck_gang(specs, job, blacklisted: int, wait_s: float) -> int:
    from gangmaster.tools.rmsim.simulation import Simulation

    gc.collect()   # nor is the garbage of the whole runs the stuck gang's
    sim = Simulation(specs)
    for spec in specs[:blacklisted]:
        sim.core.mark_unhealthy(spec.host, "blacklisted (bench am)")
    sim.workload.add_job(job)
    app_id = sim.client.submit(ApplicationSubmission(job.name))
    with tempfile.TemporaryDirectory() as work:
        am = ApplicationMaster(job, sim.client, app_id, sim.now, work, barrier=sim.barrier)
        planning, calls = [0.0], [0]
        plan = am.dispatch.before_heartbeat

        def timed_plan(now):   # the gang's own share of each heartbeat
            start = time.process_time()
            plan(now)
            planning[0] += time.process_time() - start
            calls[0] += 1

        am.dispatch.before_heartbeat = timed_plan
        sim.every(1.0, am.heartbeat)
        start = time.process_time()
        sim.run_until(wait_s)
        waited = time.process_time() - start
        attempts = am.metrics.registry.get_sample_value("gangmaster_selection_latency_seconds_count")
        why = am.why_waiting()
        am.close()
    if am.done or not why:
        print(f"the gang was expected to wait, but the job {am.outcome or 'did not wait'}: {am.reason}")
        return 1
    stopwatch = stopwatch_share(calls[0])
    gang_cpu = max(0.0, planning[0] - stopwatch)
    view = view_from_nodes(sim.client.cluster_nodes())
    start = time.process_time()
    try:
        place_gang(view, job.gang_roles(0), job_packing())
    except GangDoesNotFit as exc:
        attempt = time.process_time() - start
        reason = str(exc)
    else:
        print("the gang was expected not to fit; it did")
        return 1
    heartbeats = int(wait_s)
    print(f"stuck gang ({blacklisted} of {len(specs)} nodes unhealthy): {reason}")
    print(f"waiting {wait_s:g} s of virtual time ({heartbeats} heartbeats, {attempts:g} placement attempt(s)): "
          f"the gang {gang_cpu:.3f} s CPU (the stopwatch's own {stopwatch:.3f} s left out); the whole wait "
          f"{waited:.3f} s CPU ({(waited - planning[0]) / heartbeats * 1e6:.1f} us per heartbeat besides the gang, "
          f"AM and RM)")
    print(f"baseline, one placement attempt of the gang: {attempt:.3f} s CPU; ratio {gang_cpu / attempt:.2f}x "
          f"(the whole wait: {waited / attempt:.2f}x)")
    return 0


def stopwatch_share(calls: int) -> float:
    """The CPU time that timing ``calls`` calls puts inside their own intervals (reading the
    process clock is a system call, about a microsecond, half of it inside the interval),
    measured in the same run by timing as many calls of nothing. A stuck gang costs a few
    microseconds a heartbeat: over an hour's heartbeats the stopwatch would be a third of it."""
    spent = 0.0
    for _ in range(calls):
        start = time.process_time()
        spent += time.process_time() - start
    return spent
