"""``gangmaster bench replay_report``: time to write a replay's report folder (issue 13:
<= 5 s per selector) for a trace of Philly's size.

What is timed is :func:`~gangmaster.tools.replay.report.write_report` alone: metrics.json
(every figure, per queue and gang size), jobs.csv, timeline.csv, the figures and the
two pages. Its input is a replay result per selector built from the trace's own jobs
(the full Philly trace from ``../shared/traces`` when present, else ``--trace``): each
job starts after a seeded random wait on seeded hosts, and the timeline steps at every
start and end, as the engine records it. The report's cost depends on these sizes, not
on how the placements were decided, so the replays themselves are not run here.

The floor, measured in the same run on the same data: the bare minimum of such a report
— one csv.writer pass over the jobs, json.dump of a few means per selector, and two
matplotlib figures (a JCT CDF and allocation over time, the time series sampled as the
report samples it). Without matplotlib both sides skip the figures and say so."""
from __future__ import annotations

import csv
import json
import tempfile
from pathlib import Path

import numpy as np

from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.best_of import BestOf
from gangmaster.tools.bench.cli import add_bench_parser
from gangmaster.tools.replay.clusters import preset
from gangmaster.tools.replay.comparison import Comparison
from gangmaster.tools.replay.engine import JobOutcome, ReplayOptions, ReplayResult
from gangmaster.tools.replay.metrics import measurement_window
from gangmaster.tools.replay.plots import TIME_GRID_POINTS, matplotlib_missing, sample
from gangmaster.tools.replay.readers import detect_format, read_trace
from gangmaster.tools.replay.report import write_report
from gangmaster.tools.replay.timeline import Timeline

TARGET_S_PER_SELECTOR = 5.0
PHILLY = Path(__file__).resolve().parents[3] / "shared" / "traces" / "philly" / "philly.csv"
SELECTORS = ("job-packing", "random", "topology", "locality")


def add_parser(sub):
    p = add_bench_parser(sub, "replay_report", "time writing a replay report for a Philly-sized trace", __doc__)
    p.add_argument("--trace", default=str(PHILLY), help="trace file (default: the full Philly trace)")
    p.add_argument("--selectors", type=count(1, len(SELECTORS)), default=2, help="selectors in the report")
    p.add_argument("--repeat", type=count(), default=1)
    p.set_defaults(func=run)
    return p


def synthetic_result(table, cluster, selector: str, seed: int) -> ReplayResult:
    rng = np.random.default_rng(seed)
    hosts = [spec.host for spec in cluster.specs]
    rack_of = {spec.host: spec.rack for spec in cluster.specs}
    waits = rng.exponential(600.0, len(table.jobs))
    outcomes, events = [], []
    for job, wait in zip(table.jobs, waits):
        start = job.submit_s + float(round(wait))
        end = start + job.duration_s
        used = tuple(dict.fromkeys(hosts[i] for i in rng.integers(0, len(hosts), job.instances)))
        outcomes.append(JobOutcome(job.job_id, job.queue, job.submit_s, start, end, job.duration_s, job.gpus,
                                   job.instances, used, tuple(dict.fromkeys(rack_of[h] for h in used)), 0.0,
                                   "succeeded"))
        events += [(start, job.gpus), (end, -job.gpus)]
    events.sort()
    t = np.array([e[0] for e in events])
    allocated = np.cumsum([e[1] for e in events])
    keep = np.append(t[1:] != t[:-1], True)            # one row per instant, its last value
    t, allocated = t[keep], allocated[keep]
    queued = rng.integers(0, 50, len(t))
    timeline = Timeline(t, allocated, queued, queued * 2, rng.integers(0, 8, len(t)), cluster.capacity_gpus)
    return ReplayResult(tuple(outcomes), timeline, 0.0, len(events), len(outcomes), 0.0,
                        f"{selector}: synthetic", ReplayOptions(selector=selector, seed=seed))


def floor_report(comparison: Comparison, folder: Path) -> None:
    with (folder / "jobs.csv").open("w", newline="") as f:
        out = csv.writer(f)
        for name in comparison.selectors:
            out.writerows((name, j.job_id, j.submit_s, j.start_s, j.end_s, j.gpus)
                          for j in comparison.first_result(name).jobs)
    means = {name: float(np.mean([j.end_s - j.submit_s for j in comparison.first_result(name).jobs]))
             for name in comparison.selectors}
    (folder / "metrics.json").write_text(json.dumps(means))
    if matplotlib_missing():
        return
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    fig, (cdf, over_time) = plt.subplots(1, 2, figsize=(12, 4))
    for name in comparison.selectors:
        result = comparison.first_result(name)
        jct = np.sort([j.end_s - j.submit_s for j in result.jobs])
        cdf.plot(jct, np.arange(1, len(jct) + 1) / len(jct))
        grid = np.linspace(0, result.timeline.t[-1], TIME_GRID_POINTS)
        over_time.plot(grid, sample(result.timeline.t, result.timeline.allocated_gpus, grid))
    fig.savefig(folder / "floor.png")
    plt.close(fig)


def run(args) -> int:
    cluster = preset("philly-1000x8").build()
    trace = Path(args.trace)
    table = read_trace(trace, detect_format(trace), cluster.gpu_node_shape())
    selectors = SELECTORS[:args.selectors]
    results = {name: {0: synthetic_result(table, cluster, name, k)} for k, name in enumerate(selectors)}
    comparison = Comparison(table, cluster, measurement_window([j.submit_s for j in table.jobs]), results)
    timeline_rows = len(results[selectors[0]][0].timeline.t)
    print(f"trace: {trace} ({len(table):,} jobs), {len(selectors)} selectors, {timeline_rows:,} timeline rows each; "
          f"figures: {matplotlib_missing() or 'drawn'}")
    report, floor = BestOf(), BestOf()
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as folder:
            with report:
                write_report(Comparison(table, cluster, comparison.window, results), folder)
        with tempfile.TemporaryDirectory() as folder:
            with floor:
                floor_report(comparison, Path(folder))
    per_selector = report.wall / len(selectors)
    print(f"report: {report.wall:.2f} s wall, {report.cpu:.2f} s CPU ({per_selector:.2f} s wall per selector; "
          f"target <= {TARGET_S_PER_SELECTOR:g} s: {'met' if per_selector <= TARGET_S_PER_SELECTOR else 'NOT met'})")
    print(f"floor:  {floor.wall:.2f} s wall, {floor.cpu:.2f} s CPU (CSV + JSON + two figures); "
          f"report / floor = {report.wall / floor.wall:.2f}x wall, {report.cpu / floor.cpu:.2f}x CPU")
    return 0
