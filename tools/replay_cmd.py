"""``gangmaster replay``: replay a workload trace through the AM and RM and compare
placement policies (issue 13). The pieces live in :mod:`gangmaster.tools.replay`."""
from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from gangmaster.conf.limits import (MAX_CLUSTER_NODES, MAX_DURATION_S, MAX_FAMILY_PROCESSES, MAX_FILL_INFLATE,
                                    MAX_GPUS_PER_NODE, MAX_HEARTBEAT_S, MAX_PREEMPTION_GRACE_S, MAX_PRIORITY,
                                    MAX_REPLAY_SEEDS, MAX_RESERVATIONS, MAX_SWEEP_POINTS)
from gangmaster.selectors.selector import UnknownSelector, get_selector, selector_classes
from gangmaster.tools.arg_types import allow_negative_values, count, count_list, real, seed

from gangmaster.am.core.reservation_plan import DEFAULT_CLUSTER_RESERVATIONS, DEFAULT_MAX_RESERVATIONS

from .replay import clusters, family, family_pages, openb
from .replay.artifact import ALLOCATION_FILE, PAPER_POLICY, read_expected
from .replay.comparison import Comparison, SweepPoint, metrics_document
from .replay.engine import ReplayOptions, replay
from .replay.metrics import DEFAULT_TRIM, METRIC_HELP, measurement_window
from .replay.pages import fill_rows, is_fill, not_drawn, summary_rows
from .replay.preempting import DEFAULT_GRACE_S
from .replay.progress import ProgressBar
from .replay.queue_policy import QUEUE_POLICIES
from .replay.readers import DATED_FORMATS, FORMATS, detect_format, read_trace
from .replay.report import INCOMPLETE, report_folder, write_report
from .replay.trace import JobTable
from .replay.trace_csv import ON_BAD_ROW, BadRows, parse_window

DEFAULT_GPUS_PER_NODE = 8
DEFAULT_INFER = "mean"
#: ``--nodes`` and ``--capacity-sweep``: a generated cluster's nodes, as many as the RM takes.
NODE_COUNT = count(1, MAX_CLUSTER_NODES, "MAX_CLUSTER_NODES")
NODE_COUNTS = count_list(1, MAX_CLUSTER_NODES, "MAX_CLUSTER_NODES")


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

Alibaba openb (--format openb; the FGD paper's trace, USENIX ATC'23):
  TRACE is a pod list (openb_pod_list_*.csv); the cluster is the node list given by
  --nodes-file, by default {openb.DEFAULT_NODE_FILE} beside the pod list: one node
  per row (cpu_milli/1000 vcores, memory_mib MB, gpu GPUs of type model), all in one
  rack. A pod is a job of one instance: its CPU and memory, and num_gpu whole GPUs, or a
  share of one GPU when gpu_milli < 1000; gpu_spec (models separated by |) limits the GPU
  types. Pods that ask for no GPU are replayed too (CPU and memory on GPU nodes) and
  count for nothing in the GPU figures.
  --mode time  each pod submitted at creation_time, running deletion_time - creation_time.
               The trace sets deletion_time even for pods still running when it was
               collected (alibaba/clusterdata#218): they are read as ending then, so
               their durations are lower bounds.
  --mode fill  the paper's method, once per --seed: the pods shuffled with the seed, topped
               up by pods drawn again at random (with replacement) until they ask for
               --inflate x the cluster's GPUs (default {openb.DEFAULT_INFLATE:g}; cut there when they
               ask more), arriving one per second; a pod that cannot be placed at its
               arrival is dropped (queue policy drop) and none leaves while pods arrive.
               The headline: unallocated GPU % at each integer % of GPUs arrived, median
               and IQR over the seeds, per selector (metrics.json:
               unallocated_gpu_pct_at_arrived; report: fill.png). It needs no
               creation_time or deletion_time: the artifact's openb_pod_list_multigpu*
               lists, which have neither, replay in this mode only.
               --draws artifact draws what the FGD artifact draws with the same seed
               (Go's math/rand: its pod order and top-up, and its renamed nodes as the
               order of exact ties, whatever a strategy's tie rule): a port of its
               policies then gives its figure seed by seed (packing, best-fit,
               dot-product: GpuPacking's, BestFit's, DotProd's). The default, python,
               draws its own.

a family of workloads (--workloads DIR; issue 32): every openb_pod_list_*.csv in DIR
  (the FGD artifact's data/csv: default, cpu*, gpushare*, gpuspec*, multigpu*) in --mode
  fill against the node list (--nodes-file, default {openb.DEFAULT_NODE_FILE} in DIR),
  each --selector (default: every registered one) with each --seed (default the paper's
  42 ... 51), in --jobs N processes. A line per workload as it finishes (and a bar on a
  terminal), then one table: per workload, each policy's median unallocated GPU % at
  100 % arrived, with --expected DIR the artifact's figure for the paper's counterpart
  beside it ({', '.join(f'{ours} = {theirs}' for ours, theirs in PAPER_POLICY.items())}),
  the best policy and its margin over the paper's FGD and over our fgd; and each policy's
  decision time per pod, measured in the same run. --report DIR writes family.json,
  family.csv, report.html and report.md, and keeps each finished replay in
  DIR/{family.REPLAYS_FILE} as it ends: the same command with the same --report DIR after a
  stop (a kill, Ctrl-C, the machine's end) runs only the replays not yet there (their
  decision times are the earlier run's, and the report says how many). Another run's
  replays (other pod lists, --inflate or --draws) in DIR are refused; remove the file to
  start afresh.

output: a table on stdout (--json: metrics.json's document instead). --report DIR
writes metrics.json, jobs.csv, timeline.csv, figures (with matplotlib: pip install -e
'.[plots]'), report.html and report.md. The same inputs give the same files byte for
byte, except the wall-time figures (wall_s and cost in metrics.json). DIR is checked
before the replay; the files are written aside and moved in, so an interrupted run leaves
the earlier report or this run's whole one (a kill during the moves: a file INCOMPLETE);
an earlier report's files this run does not write are removed, other files kept.
Exit status 0 when every replay ran, 2 on bad input (the message names the file, line
and field), 130 when interrupted (Ctrl-C)."""


def add_parser(sub):
    p = sub.add_parser(
        "replay", help="replay a workload trace through the AM and RM and compare placement policies",
        description=textwrap.fill(
            "Replay a trace (Philly, Tiresias or gangmaster's native CSV/YAML) through the same ApplicationMaster, "
            "ResourceManager and Selector plugins as a real run, in virtual time, once per --selector and --seed, "
            "and compare the outcomes.", 88),
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    allow_negative_values(p)   # --capacity-sweep -3,4: the count says what is wrong, not argparse
    p.add_argument("trace", metavar="TRACE", nargs="?", help="the trace file (or --workloads DIR)")
    p.add_argument("--workloads", metavar="DIR",
                   help="openb --mode fill over a whole family: every openb_pod_list_*.csv in DIR against its node "
                        "list, each --selector with each --seed, in one comparison report; see below")
    p.add_argument("--expected", metavar="DIR",
                   help="--workloads: the FGD artifact's experiments/analysis/expected_results (or its "
                        f"{ALLOCATION_FILE}), set beside ours")
    p.add_argument("--jobs", type=count(1, MAX_FAMILY_PROCESSES, "MAX_FAMILY_PROCESSES"), metavar="N",
                   help="--workloads: replays run in N processes (default 1; each replay uses one core)")
    p.add_argument("--format", choices=FORMATS, help="the trace's format (default: from its header, or "
                                                     "native for .yaml)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="FILE", help="cluster YAML, or a Tiresias cluster spec (.csv)")
    where.add_argument("--preset", metavar="NAME", help=f"one of: {', '.join(clusters.PRESETS)}")
    where.add_argument("--nodes", type=NODE_COUNT, metavar="N", help="N nodes of --gpus-per-node GPUs")
    where.add_argument("--infer", choices=("peak", "mean"), help="size the cluster from the trace")
    p.add_argument("--gpus-per-node", type=count(1, 64), metavar="G",
                   help=f"GPUs of each node for --nodes, --infer and --capacity-sweep (default {DEFAULT_GPUS_PER_NODE})")
    p.add_argument("--queue-policy", choices=QUEUE_POLICIES,
                   help="fifo: a queue's head blocks those behind it; backfill: a later job that fits now starts; "
                        "reserve: backfill that never delays the head: a head that cannot start reserves the nodes "
                        "where it starts earliest (from the running jobs' expected ends), and a later job uses them "
                        "only if it ends before then; "
                        "drop: a job that cannot start at its arrival is dropped (default fifo, or the preset's; "
                        "drop in --mode fill)")
    p.add_argument("--max-reservations", type=count(1, MAX_RESERVATIONS, "MAX_RESERVATIONS"), metavar="N",
                   help=f"--queue-policy reserve: at most N jobs of a queue hold a reservation at once, the oldest "
                        f"that cannot start (default {DEFAULT_MAX_RESERVATIONS}): bounded, so a queue of big gangs "
                        f"cannot idle the cluster")
    p.add_argument("--cluster-reservations", type=count(1, MAX_RESERVATIONS, "MAX_RESERVATIONS"), metavar="N",
                   help=f"--queue-policy reserve: at most N jobs of the whole cluster (of each isolated queue's "
                        f"nodes) hold a reservation at once, whatever their queue: the oldest that cannot start "
                        f"(default {DEFAULT_CLUSTER_RESERVATIONS}; Slurm's bf_max_job_part). With one per queue of "
                        f"Philly's 15 the cluster ran as one FIFO by age, mean JCT +24 %% (BENCHMARKS.md)")
    p.add_argument("--reserve-after", type=_non_negative_seconds(MAX_DURATION_S), metavar="S",
                   help="--queue-policy reserve: a job reserves only once it has waited S seconds (default 0: at "
                        "once; Slurm's bf_min_age_reserve): a big gang then waits up to S more than its nodes' "
                        "running jobs, and jobs that would start soon anyway hold nothing idle")
    p.add_argument("--nodes-file", metavar="FILE",
                   help=f"openb: the node list (default: {openb.DEFAULT_NODE_FILE} beside the pod list)")
    p.add_argument("--mode", choices=("time", "fill"),
                   help="openb: replay pods at their creation times (time, the default) or fill the cluster the "
                        "FGD paper's way (fill); see below")
    p.add_argument("--inflate", type=real(0, MAX_FILL_INFLATE, low_open=True), metavar="F",
                   help=f"openb --mode fill: pods arrive until they ask F x the cluster's GPUs "
                        f"(default {openb.DEFAULT_INFLATE:g}, at most {MAX_FILL_INFLATE}: MAX_FILL_INFLATE)")
    p.add_argument("--draws", choices=openb.FILL_DRAWS,
                   help="openb --mode fill and --workloads: whose random draws order the pods, top them up and break "
                        "exact ties: python (the default: Python's random, ties by each strategy's tie rule) or artifact "
                        "(the FGD artifact's own with the same seed: Go's math/rand, its renamed nodes as every "
                        "strategy's tie order; a port of one of its policies then gives its figure seed by seed)")
    p.add_argument("--selector", nargs="+", metavar="NAME",
                   help="placement strategies to compare (see `gangmaster selectors`; default job-packing, with "
                        "--workloads every registered one)")
    p.add_argument("--window", nargs=2, metavar=("START", "END"),
                   help="replay only jobs submitted in [START, END]: dates for Philly ('2017-10-01 00:00:00'), "
                        "seconds otherwise (default: all, or the preset's)")
    p.add_argument("--time-scale", type=real(0, 1000, low_open=True), default=1.0, metavar="F",
                   help="multiply submit times by F (> 1 spreads arrivals out: less load; default 1)")
    p.add_argument("--capacity-sweep", type=NODE_COUNTS, metavar="N,N,...",
                   help="also replay on clusters of these node counts (of --gpus-per-node GPUs) for a load sweep")
    p.add_argument("--seed", nargs="+", type=seed, metavar="N",
                   help="seeds of the tie-breaking orders (and of the fill); several: medians and IQR (default 0, "
                        "with --workloads the paper's 42 ... 51)")
    p.add_argument("--heartbeat", type=_non_negative_seconds(MAX_HEARTBEAT_S), default=0.0, metavar="S",
                   help="AM/RM heartbeat, s: 0 reacts at each event (default); > 0 shows what latency costs")
    p.add_argument("--preemption", choices=("on", "off"), default="off",
                   help="on: a job that cannot start may preempt running jobs of lower priority (the trace's "
                        "priority; native traces have one), whole gangs, the fewest GPU-hours lost first, never "
                        "without making room; the victims wait again (default off)")
    p.add_argument("--preemption-grace", type=_non_negative_seconds(MAX_PREEMPTION_GRACE_S),
                   default=DEFAULT_GRACE_S, metavar="S",
                   help=f"with --preemption on: seconds between the notice and the victims' end "
                        f"(default {DEFAULT_GRACE_S:g})")
    p.add_argument("--queue-priority", type=_queue_priority, action="append", default=[],
                   metavar="QUEUE=PRIORITY[:GPUS]",
                   help="with --preemption on: the queue's priority (before each job's own) and the GPUs it is "
                        "guaranteed, which it may reclaim by preemption from queues over theirs; repeat per queue")
    p.add_argument("--measure-trim", type=real(0, 0.5, high_open=True), metavar="F",
                   help=f"share of jobs left out at each end of the submit order (default {DEFAULT_TRIM}, or the "
                        "preset's: philly-helios-11vc measures every job, as Helios does)")
    p.add_argument("--on-bad-row", choices=ON_BAD_ROW, default="stop",
                   help="stop at the first bad trace row (default), or skip bad rows and say how many")
    p.add_argument("--report", metavar="DIR", help="write the report folder")
    p.add_argument("--json", action="store_true", help="print metrics.json's document, no progress bar")
    p.set_defaults(func=run)
    return p


def _preemption(args) -> dict:
    """The replay options --preemption, --preemption-grace and --queue-priority give."""
    return {"preemption": args.preemption == "on", "preemption_grace_s": args.preemption_grace,
            "queue_priorities": tuple(args.queue_priority)}


def _reservations(args) -> dict:
    """The replay options --max-reservations, --cluster-reservations and --reserve-after give."""
    return {"max_reservations": args.max_reservations or DEFAULT_MAX_RESERVATIONS,
            "cluster_reservations": args.cluster_reservations or DEFAULT_CLUSTER_RESERVATIONS,
            "reserve_after_s": args.reserve_after or 0.0}


def _reserving(args) -> str:
    """The first reservation flag given (they go with --queue-policy reserve only), or ''."""
    given = [flag for flag, value in (("--max-reservations", args.max_reservations),
                                      ("--cluster-reservations", args.cluster_reservations),
                                      ("--reserve-after", args.reserve_after)) if value is not None]
    return given[0] if given else ""


def _unknown_queues(args, table: JobTable, cluster) -> str:
    """Why --queue-priority cannot be taken ("" when it can): it names a queue the replay does
    not have, or comes without --preemption on (only preemption reads it)."""
    if not args.queue_priority:
        return ""
    if args.preemption != "on":
        return "--queue-priority goes with --preemption on"
    known = {job.queue or "default" for job in table.jobs} | set(cluster.queue_hosts or ())
    unknown = [name for name, _, _ in args.queue_priority if name not in known]
    return (f"--queue-priority: queue {unknown[0]!r} is not one of the replay's: {', '.join(sorted(known))}"
            if unknown else "")


def _queue_priority(text: str) -> tuple[str, int, int]:
    """``QUEUE=PRIORITY[:GPUS]``: a queue's priority and guaranteed GPUs (default 0)."""
    name, equals, value = text.partition("=")
    priority, _, gpus = value.partition(":")
    if not (name and equals and priority):
        raise argparse.ArgumentTypeError(f"expected QUEUE=PRIORITY[:GPUS], got {text!r}")
    return (name, count(-MAX_PRIORITY, MAX_PRIORITY, "MAX_PRIORITY")(priority),
            count(0, MAX_CLUSTER_NODES * MAX_GPUS_PER_NODE)(gpus) if gpus else 0)


def _bad(message: str) -> int:
    print(f"gangmaster replay: {message}", file=sys.stderr)
    return 2


def run(args) -> int:
    try:
        return _run(args)
    except KeyboardInterrupt:
        print("gangmaster replay: interrupted" + (f"; {args.report} holds this run's whole report or none of it"
                                                  if args.report else ""), file=sys.stderr)
        return 130


def _run(args) -> int:
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    if args.workloads:
        return _run_family(args, say)
    if args.trace is None:
        return _bad("give a TRACE, or --workloads DIR for a family of openb pod lists")
    for flag, given in (("--expected", args.expected), ("--jobs", args.jobs)):
        if given is not None:
            return _bad(f"{flag} goes with --workloads")
    args.seed = args.seed or [0]
    args.selector = args.selector or ["job-packing"]
    if args.gpus_per_node is not None and not (args.nodes or args.infer or args.capacity_sweep):
        return _bad("--gpus-per-node goes with --nodes, --infer or --capacity-sweep")
    gpus_per_node = args.gpus_per_node or DEFAULT_GPUS_PER_NODE
    bad = _bad_selectors_or_seeds(args)
    if bad:
        return _bad(bad)
    if args.capacity_sweep and len(args.capacity_sweep) > MAX_SWEEP_POINTS:
        return _bad(f"--capacity-sweep: at most {MAX_SWEEP_POINTS} capacities (MAX_SWEEP_POINTS)")
    if args.capacity_sweep and (args.cluster or args.preset):
        return _bad("--capacity-sweep replays on clusters of N nodes of --gpus-per-node GPUs; "
                    "it does not go with --cluster or --preset")

    if args.report:
        report_folder(args.report)   # a folder the report cannot go to is refused before the replay
    trace_format = args.format or detect_format(args.trace)
    if trace_format == "openb":
        return _run_openb(args, say)
    for flag, value in (("--nodes-file", args.nodes_file), ("--mode", args.mode), ("--inflate", args.inflate),
                        ("--draws", args.draws)):
        if value is not None:
            return _bad(f"{flag} goes with --format openb")
    preset = clusters.preset(args.preset) if args.preset else None
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
    unknown = _unknown_queues(args, table, cluster)
    if unknown:
        return _bad(unknown)
    load = clusters.offered_load(table)
    queue_policy = args.queue_policy or (preset.queue_policy if preset and preset.queue_policy else "fifo")
    if queue_policy != "reserve" and _reserving(args):
        return _bad(f"{_reserving(args)} goes with --queue-policy reserve")
    base = ReplayOptions(queue_policy=queue_policy, heartbeat_s=args.heartbeat, time_scale=args.time_scale,
                         **_reservations(args), **_preemption(args))

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
    results = _replays(lambda _: table, cluster, base, args.selector, args.seed, interactive, "")
    measured = _measured(results, args, preset)
    sweep = []
    for nodes in args.capacity_sweep or ():
        point = clusters.sized(nodes, gpus_per_node)
        sweep.append(SweepPoint(nodes, point, _replays(lambda _: table, point, base, args.selector, args.seed,
                                                       interactive, f"{nodes:,} nodes: ")))
    comparison = Comparison(table, cluster, measured, results, " .. ".join(window_args) if window_args else "",
                            sweep)
    return _conclude(comparison, args, say)


def _bad_selectors_or_seeds(args) -> str:
    """Why --selector or --seed cannot be taken ("" when they can)."""
    for name in args.selector:
        try:
            get_selector(name)
        except UnknownSelector as exc:
            return str(exc)
    if len(args.seed) > MAX_REPLAY_SEEDS:
        return f"--seed: at most {MAX_REPLAY_SEEDS} seeds (MAX_REPLAY_SEEDS)"
    return ""


def _run_family(args, say) -> int:
    """``--workloads DIR``: every pod list of DIR in fill mode, one comparison (:mod:`.replay.family`)."""
    if args.trace is not None:
        return _bad(f"give a TRACE or --workloads DIR, not both (got {args.trace} and --workloads {args.workloads})")
    for flag, given in (("--format", args.format not in (None, "openb")), ("--mode", args.mode not in (None, "fill")),
                        ("--cluster", args.cluster), ("--preset", args.preset), ("--nodes", args.nodes),
                        ("--infer", args.infer), ("--gpus-per-node", args.gpus_per_node),
                        ("--capacity-sweep", args.capacity_sweep), ("--window", args.window),
                        ("--time-scale", args.time_scale != 1.0), ("--heartbeat", args.heartbeat != 0.0),
                        ("--queue-policy", args.queue_policy not in (None, "drop")),
                        ("--measure-trim", args.measure_trim is not None),
                        ("--on-bad-row", args.on_bad_row != "stop")):
        if given:
            return _bad(f"{flag} does not go with --workloads: each pod list is replayed in openb's fill mode "
                        "(every pod tried once at its arrival) on the node list, and a bad row stops the run")
    args.seed = args.seed or list(family.PAPER_SEEDS)
    args.selector = args.selector or list(selector_classes())
    bad = _bad_selectors_or_seeds(args)
    if bad:
        return _bad(bad)
    if args.report:
        report_folder(args.report)
    expected = read_expected(args.expected) if args.expected else None
    options = family.FamilyOptions(tuple(dict.fromkeys(args.seed)), tuple(dict.fromkeys(args.selector)),
                                   args.inflate if args.inflate is not None else openb.DEFAULT_INFLATE, args.jobs or 1,
                                   args.draws or "python")
    workloads, _, nodes_path, _ = family.read_family(args.workloads, args.nodes_file, options)   # all checked first
    log = family.ReplayLog.for_family(args.report, workloads, nodes_path, options) if args.report else None
    per_workload = len(options.seeds) * len(options.selectors)
    say(f"family: {_counted(len(workloads), 'pod list')} in {args.workloads} × {_counted(len(options.seeds), 'seed')} "
        f"× {_counted(len(options.selectors), 'policy', 'policies')} = {len(workloads) * per_workload:,} fill "
        f"replays, in {_counted(options.jobs, 'process', 'processes')}")
    if log is not None and log.figures():
        say(f"  resuming: {log.path} holds {_counted(len(log.figures()), 'finished replay')}; "
            "those of this run are not run again")
    bar = ProgressBar("family", enabled=not args.json and sys.stderr.isatty(), unit="replays")
    finished: dict[str, list[family.ReplayFigures]] = {}

    def done(figures: family.ReplayFigures, count: int, total: int) -> None:
        finished.setdefault(figures.workload, []).append(figures)
        if len(finished[figures.workload]) == per_workload:
            bar.clear()
            say(f"  {family.Workload(figures.workload, Path()).short}: {_medians(finished[figures.workload])} "
                f"({count:,}/{total:,} replays)")
        bar(count, total)

    try:
        result = family.run_family(args.workloads, args.nodes_file, options, done, log)
    finally:
        bar.close()
    document = family.family_document(result, expected)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(f"unallocated GPU % at {family.ARRIVED_PCT} % arrived, median over the seeds"
              + (" / the artifact's for the paper's counterpart" if expected else "") + ":")
        header, rows = family_pages.headline_rows(document)
        _print_table(header, [[cell.replace("**", "") for cell in row] for row in rows])
        print("decision time per pod (select() calls timed in the same run):")
        _print_table(*family_pages.decision_rows(document))
        if expected:
            print("below the paper's FGD on every workload: " + (", ".join(document["beat_paper_fgd_everywhere"])
                                                                   or "none"))
    if args.report:
        files = family_pages.write_family_report(document, args.report)
        say(f"report: {files.folder / 'report.html'} ({', '.join(files.written)})")
    return 0


def _counted(count: int, one: str, many: str = "") -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _medians(runs: list) -> str:
    """One workload's medians at 100 % arrived, by policy, lowest first."""
    by_selector: dict[str, list[float]] = {}
    for figures in runs:
        if figures.unallocated_pct is not None:
            by_selector.setdefault(figures.selector, []).append(figures.unallocated_pct)
    medians = sorted((family.spread_of(values)["median"], name) for name, values in by_selector.items())
    return "unallocated at 100 % arrived " + ", ".join(f"{name} {value:.2f}" for value, name in medians)


def _measured(results, args, preset: clusters.Preset | None = None):
    """The measurement window: ``--measure-trim``, else the preset's, else the default; it
    says which."""
    submits = [job.submit_s for job in results[args.selector[0]][args.seed[0]].jobs]
    if args.measure_trim is not None:
        trim, set_by = args.measure_trim, f"--measure-trim {args.measure_trim:g}"
    elif preset is not None and preset.measure_trim is not None:
        trim = preset.measure_trim
        set_by = f"--measure-trim {trim:g} of the preset {preset.name}: {preset.measure_trim_why}"
    else:
        trim, set_by = DEFAULT_TRIM, f"--measure-trim {DEFAULT_TRIM:g}, the default"
    return measurement_window(submits, trim, set_by)


def _conclude(comparison: Comparison, args, say) -> int:
    """Print (or --json) the comparison and write its report."""
    document = metrics_document(comparison)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        _print_summary(document)
    if args.report:
        files = write_report(comparison, args.report, document)
        say(f"report: {files.folder / 'report.html'} ({', '.join(files.written)})")
        if files.stale_removed:
            say(f"  removed {', '.join(files.stale_removed)}: left in {files.folder} by earlier runs that were "
                "killed while writing (their processes are gone)")
        if files.replaced or files.earlier_incomplete:
            say(f"  replaced the earlier report in {files.folder}"
                + (f"; removed its {', '.join(files.removed)}, which this run does not write" if files.removed else "")
                + (f"; it was incomplete (its {INCOMPLETE} said a run stopped while moving its files in)"
                   if files.earlier_incomplete else ""))
        for line in not_drawn(files.skipped_figures):
            say(f"  not drawn: {line}")
    return 0


def _run_openb(args, say) -> int:
    """``--format openb``: the cluster from the node list, pods at their creation times
    (``--mode time``) or one fill per seed (``--mode fill``)."""
    for flag, given in (("--cluster", args.cluster), ("--preset", args.preset), ("--nodes", args.nodes),
                        ("--infer", args.infer), ("--capacity-sweep", args.capacity_sweep),
                        ("--gpus-per-node", args.gpus_per_node)):
        if given:
            return _bad(f"{flag} does not go with --format openb: the cluster is the node list (--nodes-file)")
    fill = args.mode == "fill"
    for flag, value in (("--inflate", args.inflate), ("--draws", args.draws)):
        if value is not None and not fill:
            return _bad(f"{flag} goes with --mode fill")
    if fill:
        for flag, given in (("--window", args.window), ("--time-scale", args.time_scale != 1.0),
                            ("--heartbeat", args.heartbeat != 0.0),
                            ("--queue-policy", args.queue_policy not in (None, "drop")),
                            ("--preemption on", args.preemption == "on")):
            if given:
                return _bad(f"{flag} does not go with --mode fill: every pod is tried once, at its arrival, "
                            "one arrival per second (queue policy drop)")
    nodes_file = args.nodes_file or openb.default_nodes_file(args.trace)
    cluster = openb.read_openb_nodes(nodes_file)
    bad_rows = BadRows(args.on_bad_row)
    pods = openb.read_openb_pods(args.trace, bad_rows, need_times=not fill)
    if bad_rows.count:
        print(f"gangmaster replay: {bad_rows.summary()}", file=sys.stderr)
    window = parse_window(*args.window, dated=False) if args.window else None
    table = openb.pods_table(pods) if fill else openb.time_table(pods, window)
    if not table.jobs:
        return _bad(f"{args.trace}: no pods to replay" + (f" in the window {window}" if window else ""))
    unknown = _unknown_queues(args, table, cluster)
    if unknown:
        return _bad(unknown)
    say(f"trace: {table.source} (openb, {len(table):,} pods, --mode {args.mode or 'time'}), "
        f"sha256 {table.sha256[:16]}…")
    say(f"cluster: {cluster.describe()}, from {nodes_file}"
        + ("" if args.nodes_file else " (the node list beside the pods; --nodes-file to change)"))
    interactive = not args.json and sys.stderr.isatty()
    if not fill:
        base = ReplayOptions(queue_policy=args.queue_policy or "fifo", heartbeat_s=args.heartbeat,
                             time_scale=args.time_scale,
                             **_reservations(args), **_preemption(args))
        say(f"  offered load {clusters.offered_load(table).on(cluster.capacity_gpus) / args.time_scale:.2f} "
            "(whole GPUs; shares of a GPU not counted); deletion_time read as each pod's end, also for pods "
            "still running when the trace was collected")
        results = _replays(lambda _: table, cluster, base, args.selector, args.seed, interactive, "")
        comparison = Comparison(table, cluster, _measured(results, args), results,
                                " .. ".join(args.window) if args.window else "", reading=openb.TIME_MODE_READING)
        return _conclude(comparison, args, say)
    inflate = args.inflate if args.inflate is not None else openb.DEFAULT_INFLATE
    plans = {seed: openb.plan_for(args.draws or "python", pods, cluster, seed, inflate)
             for seed in dict.fromkeys(args.seed)}
    for drawn_seed, plan in plans.items():
        say(f"  fill, seed {drawn_seed}: {len(plan.table):,} pods ({plan.drawn_again:,} drawn again) asking "
            f"{plan.requested_milli / plan.capacity_milli:.1%} of {cluster.capacity_gpus:,} GPUs")
    base = ReplayOptions(queue_policy="drop")
    results = _replays(lambda seed: plans[seed].table, cluster, base, args.selector, args.seed, interactive, "",
                       lambda seed: plans[seed].tie_hosts)
    comparison = Comparison(table, cluster, _measured(results, args), results,
                            fill_tables={seed: plan.table for seed, plan in plans.items()}, inflate=inflate,
                            reading=openb.FILL_MODE_READING)
    return _conclude(comparison, args, say)


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


def _replays(table_for, cluster, base: ReplayOptions, selectors, seeds, interactive: bool, label: str,
             ties_for=lambda seed: ()):
    """Each selector's replay with each seed; ``table_for(seed)``: the table it replays,
    ``ties_for(seed)``: its hosts in tie order when its draws give one (ReplayOptions.tie_hosts)."""
    results = {}
    for name in selectors:
        results[name] = {}
        for one_seed in dict.fromkeys(seeds):
            bar = ProgressBar(f"{label}{name} seed {one_seed}", enabled=interactive)
            try:
                results[name][one_seed] = replay(table_for(one_seed), cluster,
                                                 replace(base, selector=name, seed=one_seed,
                                                         tie_hosts=ties_for(one_seed)), bar)
            finally:
                bar.close()
    return results


def _print_summary(document) -> None:
    if is_fill(document):
        several = len(document["run"]["seeds"]) > 1
        print("unallocated GPU % against GPUs arrived (fill mode" + ("; median (IQR) over the seeds" if several else "")
              + "; every 1 % in metrics.json):")
        _print_table(*fill_rows(document))
    print(f"window: {document['run']['window']['text']}")
    _print_table(*summary_rows(document))


def _print_table(header, rows) -> None:
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
