"""``gangmaster replay``: replay a workload trace through the AM and RM and compare
placement policies (issue 13). The pieces live in :mod:`gangmaster.tools.replay`."""
from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from dataclasses import replace

from gangmaster.conf.limits import MAX_HEARTBEAT_S, MAX_REPLAY_SEEDS, MAX_SWEEP_POINTS
from gangmaster.selectors.selector import UnknownSelector, get_selector
from gangmaster.tools.arg_types import count, counts, real, seed

from .replay import clusters
from .replay.comparison import Comparison, SweepPoint, metrics_document
from .replay.engine import ReplayOptions, replay
from .replay.metrics import DEFAULT_TRIM, METRIC_HELP, measurement_window
from .replay.pages import summary_rows
from .replay.progress import ProgressBar
from .replay.queue_policy import QUEUE_POLICIES
from .replay.readers import DATED_FORMATS, FORMATS, detect_format, read_trace
from .replay.report import write_report
from .replay.trace import JobTable
from .replay.trace_csv import ON_BAD_ROW, BadRows, parse_window

DEFAULT_GPUS_PER_NODE = 8
DEFAULT_INFER = "mean"


def _non_negative_seconds(maximum: float):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
        if not (math.isfinite(value) and 0 <= value <= maximum):
            raise argparse.ArgumentTypeError(f"expected seconds >= 0 and <= {maximum:,.0f}, got {text}")
        return value
    parse.__name__ = "seconds"
    return parse


def _listed(pairs, width: int = 88) -> str:
    """``name: text`` lines, the text wrapped under itself."""
    column = max(len(name) for name, _ in pairs) + 4
    return "\n".join(textwrap.fill(text, width, initial_indent=f"  {name + ':':<{column - 2}}",
                                    subsequent_indent=" " * column) for name, text in pairs)


def _epilog() -> str:
    metrics = _listed([(name, meaning) for _, name, _, meaning in METRIC_HELP])
    presets = _listed([(p.name, p.description) for p in clusters.PRESETS.values()])
    return f"""\
the cluster (one of; default --infer {DEFAULT_INFER}):
  --cluster FILE    a cluster YAML (conf/clusters/*.yaml) or a Tiresias cluster spec CSV
  --preset NAME     a named setup; it may also fix the submit window and queue policy
  --nodes N         N nodes of --gpus-per-node GPUs (default {DEFAULT_GPUS_PER_NODE}), racks of {clusters.RACK_NODES}
  --infer peak|mean nodes of --gpus-per-node GPUs for the trace's peak concurrent GPUs
                    (nothing would wait) or its mean (offered load 1.0); prints the offered load
  Generated nodes get {clusters.VCORES_PER_GPU} vcores and {clusters.MEMORY_MB_PER_GPU // 1024} GiB per GPU (a DGX-1's share); a job
  of a GPU-only trace asks for its GPUs' share, so only GPUs bind. A job of g GPUs
  larger than a node (G GPUs) is floor(g/G) instances of G plus one of the rest.

presets:
{presets}

the figures (over the measurement window: the first and last --measure-trim of jobs by
submit order are left out; printed beside every number; definitions in REPLAY.md):
{metrics}

output: a table on stdout (--json: metrics.json's document instead). --report DIR
writes metrics.json, jobs.csv, timeline.csv, figures (with matplotlib: pip install -e
'.[plots]'), report.html and report.md. The same inputs give the same files byte for
byte, except the wall-time figures (wall_s and cost in metrics.json).
Exit status 0 when every replay ran, 2 on bad input (the message names the file, line
and field)."""


def add_parser(sub):
    p = sub.add_parser(
        "replay", help="replay a workload trace through the AM and RM and compare placement policies",
        description=textwrap.fill(
            "Replay a trace (Philly, Tiresias or gangmaster's native CSV/YAML) through the same ApplicationMaster, "
            "ResourceManager and Selector plugins as a real run, in virtual time, once per --selector and --seed, "
            "and compare the outcomes.", 88),
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", metavar="TRACE", help="the trace file")
    p.add_argument("--format", choices=FORMATS, help="the trace's format (default: from its header, or "
                                                     "native for .yaml)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="FILE", help="cluster YAML, or a Tiresias cluster spec (.csv)")
    where.add_argument("--preset", metavar="NAME", help=f"one of: {', '.join(clusters.PRESETS)}")
    where.add_argument("--nodes", type=count(1), metavar="N", help="N nodes of --gpus-per-node GPUs")
    where.add_argument("--infer", choices=("peak", "mean"), help="size the cluster from the trace")
    p.add_argument("--gpus-per-node", type=count(1, 64), metavar="G",
                   help=f"GPUs of each node for --nodes, --infer and --capacity-sweep (default {DEFAULT_GPUS_PER_NODE})")
    p.add_argument("--queue-policy", choices=QUEUE_POLICIES,
                   help="fifo: a queue's head blocks those behind it; backfill: a later job that fits now starts "
                        "(default fifo, or the preset's)")
    p.add_argument("--selector", nargs="+", metavar="NAME", default=["job-packing"],
                   help="placement strategies to compare (see `gangmaster selectors`; default job-packing)")
    p.add_argument("--window", nargs=2, metavar=("START", "END"),
                   help="replay only jobs submitted in [START, END]: dates for Philly ('2017-10-01 00:00:00'), "
                        "seconds otherwise (default: all, or the preset's)")
    p.add_argument("--time-scale", type=real(0, 1000, low_open=True), default=1.0, metavar="F",
                   help="multiply submit times by F (> 1 spreads arrivals out: less load; default 1)")
    p.add_argument("--capacity-sweep", type=counts, metavar="N,N,...",
                   help="also replay on clusters of these node counts (of --gpus-per-node GPUs) for a load sweep")
    p.add_argument("--seed", nargs="+", type=seed, default=[0], metavar="N",
                   help="seeds of the tie-breaking orders; several: medians and IQR (default 0)")
    p.add_argument("--heartbeat", type=_non_negative_seconds(MAX_HEARTBEAT_S), default=0.0, metavar="S",
                   help="AM/RM heartbeat, s: 0 reacts at each event (default); > 0 shows what latency costs")
    p.add_argument("--measure-trim", type=real(0, 0.5, high_open=True), default=DEFAULT_TRIM, metavar="F",
                   help=f"share of jobs left out at each end of the submit order (default {DEFAULT_TRIM})")
    p.add_argument("--on-bad-row", choices=ON_BAD_ROW, default="stop",
                   help="stop at the first bad trace row (default), or skip bad rows and say how many")
    p.add_argument("--report", metavar="DIR", help="write the report folder")
    p.add_argument("--json", action="store_true", help="print metrics.json's document, no progress bar")
    p.set_defaults(func=run)
    return p


def _bad(message: str) -> int:
    print(f"gangmaster replay: {message}", file=sys.stderr)
    return 2


def run(args) -> int:
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    if args.gpus_per_node is not None and not (args.nodes or args.infer or args.capacity_sweep):
        return _bad("--gpus-per-node goes with --nodes, --infer or --capacity-sweep")
    gpus_per_node = args.gpus_per_node or DEFAULT_GPUS_PER_NODE
    for name in args.selector:
        try:
            get_selector(name)
        except UnknownSelector as exc:
            return _bad(str(exc))
    if len(args.seed) > MAX_REPLAY_SEEDS:
        return _bad(f"--seed: at most {MAX_REPLAY_SEEDS} seeds (MAX_REPLAY_SEEDS)")
    if args.capacity_sweep and len(args.capacity_sweep) > MAX_SWEEP_POINTS:
        return _bad(f"--capacity-sweep: at most {MAX_SWEEP_POINTS} capacities (MAX_SWEEP_POINTS)")
    if args.capacity_sweep and (args.cluster or args.preset):
        return _bad("--capacity-sweep replays on clusters of N nodes of --gpus-per-node GPUs; "
                    "it does not go with --cluster or --preset")

    preset = clusters.preset(args.preset) if args.preset else None
    trace_format = args.format or detect_format(args.trace)
    cluster = _fixed_cluster(args, preset)
    shape = cluster.gpu_node_shape() if cluster else clusters.sized(1, gpus_per_node).gpu_node_shape()
    window_args = args.window or (preset.window if preset else None)
    window = parse_window(*window_args, dated=trace_format in DATED_FORMATS) if window_args else None
    bad_rows = BadRows(args.on_bad_row)
    table = read_trace(args.trace, trace_format, shape, bad_rows, window)
    if bad_rows.count:
        print(f"gangmaster replay: {bad_rows.summary()}", file=sys.stderr)
    if cluster is None:
        cluster = clusters.inferred(table, args.infer or DEFAULT_INFER, gpus_per_node)
    table = _only_listed_queues(table, cluster, say)
    if not table.jobs:
        return _bad(f"{args.trace}: no jobs to replay" + (f" in the window {window}" if window else ""))
    load = clusters.offered_load(table)
    queue_policy = args.queue_policy or (preset.queue_policy if preset and preset.queue_policy else "fifo")
    base = ReplayOptions(queue_policy=queue_policy, heartbeat_s=args.heartbeat, time_scale=args.time_scale)

    say(f"trace: {table.source} ({table.format}, {len(table):,} jobs"
        + (f" from {table.origin:%Y-%m-%d %H:%M:%S}" if table.origin else "") + f"), sha256 {table.sha256[:16]}…")
    peak = f"; peak {load.peak_gpus:,} GPUs at once" if args.time_scale == 1 else ""   # unscaled arrivals only
    say(f"cluster: {cluster.describe()}; offered load {load.on(cluster.capacity_gpus) / args.time_scale:.2f} "
        f"(GPU-seconds asked / offered over the submit span{peak})")
    if cluster.queue_hosts:
        say("  offered load by isolated queue: " + ", ".join(
            f"{queue} {clusters.offered_load(table, queue).on(cluster.queue_gpus(queue)) / args.time_scale:.2f}"
            for queue in sorted(cluster.queue_hosts)))
    if cluster.source:
        say(f"  source: {cluster.source}")
    interactive = not args.json and sys.stderr.isatty()
    results = _replays(table, cluster, base, args.selector, args.seed, interactive, "")
    submits = [job.submit_s for job in results[args.selector[0]][args.seed[0]].jobs]
    measured = measurement_window(submits, args.measure_trim)
    sweep = []
    for nodes in args.capacity_sweep or ():
        point = clusters.sized(nodes, gpus_per_node)
        sweep.append(SweepPoint(nodes, point, _replays(table, point, base, args.selector, args.seed, interactive,
                                                       f"{nodes:,} nodes: ")))
    comparison = Comparison(table, cluster, measured, results, " .. ".join(window_args) if window_args else "",
                            sweep)
    document = metrics_document(comparison)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        _print_summary(document)
    if args.report:
        files = write_report(comparison, args.report, document)
        say(f"report: {files.folder / 'report.html'} ({', '.join(files.written)})")
        for name, why in files.skipped_figures:
            say(f"  not drawn: {name}: {why}")
    return 0


def _fixed_cluster(args, preset) -> clusters.ReplayCluster | None:
    """The cluster named on the command line; None when it is to be inferred from the trace."""
    if preset:
        return preset.build()
    if args.cluster:
        if args.cluster.lower().endswith(".csv"):
            return clusters.from_tiresias_spec(args.cluster)
        return clusters.from_cluster_file(args.cluster)
    if args.nodes:
        return clusters.sized(args.nodes, args.gpus_per_node or DEFAULT_GPUS_PER_NODE)
    return None


def _only_listed_queues(table: JobTable, cluster: clusters.ReplayCluster, say) -> JobTable:
    """On a cluster of isolated queues with no shared nodes, the jobs of the listed queues
    only (the others could never run); says how many were left out."""
    if not cluster.queue_hosts:
        return table
    listed = {host for hosts in cluster.queue_hosts.values() for host in hosts}
    if any(spec.host not in listed for spec in cluster.specs):
        return table
    kept = tuple(job for job in table.jobs if job.queue in cluster.queue_hosts)
    if len(kept) != len(table.jobs):
        left = sorted({job.queue for job in table.jobs} - set(cluster.queue_hosts))
        say(f"left out {len(table.jobs) - len(kept):,} jobs of queues {cluster.name} has no nodes for: "
            f"{', '.join(left)}")
    return replace(table, jobs=kept)


def _replays(table, cluster, base: ReplayOptions, selectors, seeds, interactive: bool, label: str):
    results = {}
    for name in selectors:
        results[name] = {}
        for one_seed in dict.fromkeys(seeds):
            bar = ProgressBar(f"{label}{name} seed {one_seed}", enabled=interactive)
            try:
                results[name][one_seed] = replay(table, cluster, replace(base, selector=name, seed=one_seed), bar)
            finally:
                bar.close()
    return results


def _print_summary(document) -> None:
    print(f"window: {document['run']['window']['text']}")
    header, rows = summary_rows(document)
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
