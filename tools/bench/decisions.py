"""``gangmaster bench decisions``: a digest of what the replay *decides*, to check that a
change meant to make it faster changed no decision. Run it before and after the change
(e.g. in two worktrees) and compare the lines: equal digests, equal decisions.

Each line replays one configuration and prints the sha256 (first 16 hex digits) of every
job's outcome (submit, start, end, hosts, racks, gang wait, outcome), the whole timeline
(allocation, queue length, pending GPUs, head-of-line fragmentation over time), and the
counts of clock events and placement decisions. Nothing timed goes in.

The configurations cover what a speed change can break without a test noticing: the first
``--jobs`` jobs of a Philly trace on 1,000 × 8 GPUs with FIFO and with backfill, with a
60-s heartbeat, and on a contended 40 × 8 cluster (thousands of failed placements, FIFO and
backfill); and, when the openb pod list is there, one fill-mode seed (42, inflate 1.3)
with ``random``, ``best-fit`` and ``fgd``.

With ``--opcodes`` each Philly line also gives the Python bytecodes executed per job (a
trace hook counts them; the run is then ~20× slower): a measure of work that does not
depend on what else the machine is doing, for changes too small for a noisy machine's
clock. Compare it between commits, never against wall time.
"""
from __future__ import annotations

import dataclasses
import hashlib
import sys
from pathlib import Path

from gangmaster.tools.arg_types import count
from gangmaster.tools.bench.cli import add_bench_parser
from gangmaster.tools.bench.openb_fill import OPENB_PODS
from gangmaster.tools.bench.replay import PHILLY

#: (name, share of --jobs, nodes, queue policy, heartbeat s)
PHILLY_CONFIGS = (
    ("fifo", 1.0, 1000, "fifo", 0.0),
    ("backfill", 1.0, 1000, "backfill", 0.0),
    ("heartbeat-60s", 0.6, 1000, "fifo", 60.0),
    ("contended-fifo", 0.6, 40, "fifo", 0.0),
    ("contended-backfill", 0.6, 40, "backfill", 0.0),
)
OPENB_SELECTORS = ("random", "best-fit", "fgd")


def add_parser(sub):
    p = add_bench_parser(sub, "decisions", "digests of the replay's decisions, to compare before and after a change",
                         __doc__)
    p.add_argument("--trace", default=PHILLY, help=f"a Philly CSV (default {PHILLY})")
    p.add_argument("--jobs", type=count(), default=5000, help="Philly jobs per configuration (default 5000)")
    p.add_argument("--pods", default=OPENB_PODS,
                   help=f"an openb pod list for the fill-mode lines (default {OPENB_PODS}; skipped when missing)")
    p.add_argument("--opcodes", action="store_true", help="also count Python bytecodes per Philly job (slow)")
    p.set_defaults(func=run)
    return p


def digest(result) -> str:
    """The first 16 hex digits of the sha256 of a replay's decisions (see the module text)."""
    h = hashlib.sha256()
    for job in result.jobs:
        h.update(repr(dataclasses.astuple(job)).encode())
    h.update(repr(result.timeline).encode())
    h.update(repr((result.events, result.select_calls)).encode())
    return h.hexdigest()[:16]


def run(args) -> int:
    from gangmaster.tools.replay import openb
    from gangmaster.tools.replay.clusters import sized
    from gangmaster.tools.replay.engine import ReplayOptions, replay
    from gangmaster.tools.replay.philly import read_philly
    from gangmaster.tools.replay.trace import JobTable

    if not Path(args.trace).exists():
        print(f"bench decisions: {args.trace} does not exist (--trace PATH)")
        return 2
    for name, share, nodes, policy, heartbeat in PHILLY_CONFIGS:
        cluster = sized(nodes, 8)
        table = read_philly(args.trace, cluster.gpu_node_shape())
        jobs = max(1, int(args.jobs * share))
        table = JobTable(table.jobs[:jobs], table.source, table.sha256, table.format, table.origin)
        options = ReplayOptions(queue_policy=policy, heartbeat_s=heartbeat)
        opcodes = None
        if args.opcodes:
            with _OpcodeCounter() as counter:
                result = replay(table, cluster, options)
            opcodes = counter.count / jobs
        else:
            result = replay(table, cluster, options)
        extra = f"   {opcodes:,.0f} bytecodes/job" if opcodes is not None else ""
        label = f"philly-{jobs}-{nodes}x8-{name}"
        print(f"{label:40s} {digest(result)}   {result.select_calls:,} placements{extra}", flush=True)
    if not Path(args.pods).exists():
        print(f"(openb lines skipped: {args.pods} does not exist)")
        return 0
    cluster = openb.read_openb_nodes(openb.default_nodes_file(args.pods))
    plan = openb.fill_plan(openb.read_openb_pods(args.pods), cluster.capacity_gpus, 42, 1.3)
    for selector in OPENB_SELECTORS:
        result = replay(plan.table, cluster, ReplayOptions(selector=selector, queue_policy="drop", seed=42))
        label = f"openb-fill-seed42-{selector}"
        print(f"{label:40s} {digest(result)}   {result.select_calls:,} placements", flush=True)
    return 0


class _OpcodeCounter:
    """Counts the Python bytecodes executed while it is entered: ``sys.monitoring``'s
    INSTRUCTION events from Python 3.12 on, ``sys.settrace`` with per-opcode events
    before (3.12 and 3.13 ignore ``f_trace_opcodes`` set from a trace function: the
    count came out 0, seen on a lent machine's 3.12.3). The two count alike within a
    few per cent, not exactly: compare counts taken on one Python version."""

    def __init__(self):
        self.count = 0

    def __enter__(self) -> "_OpcodeCounter":
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None:
            self._tool = next(t for t in range(6) if monitoring.get_tool(t) is None)
            monitoring.use_tool_id(self._tool, "gangmaster bench decisions --opcodes")
            monitoring.register_callback(self._tool, monitoring.events.INSTRUCTION, self._instruction)
            monitoring.set_events(self._tool, monitoring.events.INSTRUCTION)
            return self

        def local(frame, event, arg):
            if event == "opcode":
                self.count += 1
            return local

        def called(frame, event, arg):
            frame.f_trace_opcodes = True
            return local

        self._previous = sys.gettrace()
        sys.settrace(called)
        return self

    def _instruction(self, code, offset) -> None:
        self.count += 1

    def __exit__(self, *exc) -> None:
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None:
            monitoring.set_events(self._tool, 0)
            monitoring.register_callback(self._tool, monitoring.events.INSTRUCTION, None)
            monitoring.free_tool_id(self._tool)
            return
        sys.settrace(self._previous)
