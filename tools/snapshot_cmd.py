"""``gangmaster snapshot FILE ...``: what gangmaster reads from a real cluster's snapshot.

Before asking ``gangmaster diagnose JOB --snapshot FILE ...`` whether a gang fits, an
operator can check what the dump says to gangmaster: the nodes and their capacity, which
are unavailable and why, what runs where and until when, and what could not be known.
"""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from .arg_types import epoch_seconds
from .snapshots import FORMATS, ClusterSnapshot, fields_read, load_snapshot

SHOWN = 10      # unavailable nodes, node shapes and jobs listed before "... and N more"


#: ``--topology-conf``'s help (this command's and ``gangmaster diagnose``'s)
TOPOLOGY_CONF_HELP = ("a Slurm snapshot's topology.conf (topology/tree's SwitchName=... Switches=... Nodes=..., "
                      "or topology/block's BlockName=... Nodes=...; Slurm keeps it beside slurm.conf, the SLURM_CONF "
                      "that `scontrol show config` prints): its switches become the nodes' network domains for "
                      "networkDomain, the leaf switches the level leaf, those above them spine, core, then level3 "
                      "and up (blocks: block)")


def add_parser(sub):
    p = sub.add_parser(
        "snapshot", help="read a real cluster's snapshot (YARN, Kubernetes or Slurm JSON) and show what it says",
        description="Read the JSON an operator can dump from a real cluster and print what gangmaster "
                    "takes from it, as `gangmaster diagnose --snapshot` would: the nodes (capacity, rack, "
                    "labels, GPU type), the unavailable ones with the engine's state and reason, what runs "
                    "where and until when, and notes on what the files cannot tell. Files: YARN's RM REST "
                    "answers (/ws/v1/cluster/nodes; optionally /ws/v1/cluster/apps, /scheduler and each attempt's "
                    ".../containers), `kubectl get nodes -o json` (optionally `kubectl get pods -A -o json`), "
                    "or Slurm's `sinfo --json` / `scontrol show node --json` (optionally `squeue --json`). "
                    "The format is told from the JSON; all files must come from one engine. A node state "
                    "gangmaster does not know counts as unavailable; usage a node reports that no job in the "
                    "files accounts for is held by \"(unattributed)\". Bad input exits 2 naming the file, the "
                    "JSON path and what was expected. The README's *Real clusters: snapshots* says what is "
                    "read from each engine and what cannot be known.",
        epilog="Examples: gangmaster snapshot conf/snapshots/slurm/sinfo.json conf/snapshots/slurm/squeue.json; "
               "gangmaster snapshot --fields  (the JSON fields read, per engine)")
    p.add_argument("files", metavar="FILE", nargs="*", help="snapshot files of one engine")
    p.add_argument("--yarn-rm", metavar="URL|DIR",
                   help="read the snapshot from a running YARN ResourceManager instead of files: its web address "
                        "(http://HOST:8088) or a `gangmaster yarn local-cluster` folder (whose nodes keep their "
                        "names and metadata); /ws/v1/cluster/nodes, /apps (those not ended) and /scheduler")
    p.add_argument("--time", type=epoch_seconds, metavar="EPOCH",
                   help="when the files were dumped, in seconds since the epoch (default: their own time "
                        "where they carry one, as newer Slurm does, else the newest file's modification "
                        "time); Slurm's end_time and pods' deadlines are counted from it")
    p.add_argument("--topology-conf", metavar="FILE", help=TOPOLOGY_CONF_HELP)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--fields", action="store_true", help="list the JSON fields read from each engine's files")
    p.set_defaults(func=run, parser=p)
    return p


def run(args: argparse.Namespace) -> int:
    if args.fields:
        fields = {engine: list(fields_read(engine)) for engine in FORMATS}
        print(json.dumps(fields, indent=2) if args.json else
              "\n".join(f"{engine}:\n" + "\n".join(f"  {f}" for f in names) for engine, names in fields.items()))
        return 0
    if args.yarn_rm is not None:
        if args.topology_conf:
            args.parser.error("--topology-conf is a Slurm snapshot's: it cannot be used with --yarn-rm")
        if args.files:
            args.parser.error("either snapshot files or --yarn-rm, not both")
        from .yarn.live_snapshot import fetch_snapshot
        snap = fetch_snapshot(args.yarn_rm)
    elif not args.files:
        args.parser.error("give the snapshot files (or --yarn-rm, or --fields)")
    else:
        snap = load_snapshot(args.files, taken_at=args.time, topology_conf=args.topology_conf)
    print(json.dumps(to_json(snap), indent=2) if args.json else render(snap))
    return 0


def to_json(snap: ClusterSnapshot) -> dict:
    return {
        "format": snap.format, "sources": [str(p) for p in snap.sources],
        "taken_at": snap.taken_at, "taken_at_from": snap.taken_at_from,
        "nodes": [{"host": s.host, "rack": s.rack, "labels": sorted(s.labels), "gpuType": s.gpu_type,
                   "vcores": s.vcores, "memoryMB": s.memory_mb, "gpus": s.gpus,
                   "unavailable": snap.unhealthy.get(s.host), "reason": snap.unhealthy_reasons.get(s.host),
                   **({"domains": dict(s.domains)} if s.domains else {})}
                  for s in snap.specs],
        "running": [{"job": a.job, "host": a.host, "vcores": a.vcores, "memoryMB": a.memory_mb, "gpus": a.gpus,
                     "expectedEndSeconds": a.expected_end_s} for a in snap.running],
        "notes": list(snap.notes),
    }


def render(snap: ClusterSnapshot) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(snap.taken_at)) if snap.taken_at is not None else "?"
    lines = [f"{snap.format} snapshot: {len(snap.specs):,} nodes, {len(snap.unhealthy):,} unavailable, "
             f"{len({a.job for a in snap.running}):,} jobs running; taken {when} ({snap.taken_at_from})"]
    shapes = Counter((s.vcores, s.memory_mb, s.gpus, s.gpu_type, s.rack) for s in snap.specs)
    lines.append("nodes:")
    for (vcores, memory, gpus, gpu_type, rack), count in shapes.most_common(SHOWN):
        gpu = f", {gpus} GPUs" + (f" {gpu_type}" if gpu_type else "") if gpus else ""
        lines.append(f"  {count:,} x {vcores:g} vcores, {memory:,} MB{gpu}, rack {rack}")
    if len(shapes) > SHOWN:
        lines.append(f"  ... and {len(shapes) - SHOWN:,} more kinds")
    if snap.unhealthy:
        lines.append("unavailable:")
        for host, state in list(snap.unhealthy.items())[:SHOWN]:
            reason = snap.unhealthy_reasons.get(host)
            lines.append(f"  {host}: {state}" + (f" ({_clip(reason)})" if reason else ""))
        if len(snap.unhealthy) > SHOWN:
            lines.append(f"  ... and {len(snap.unhealthy) - SHOWN:,} more")
    jobs: dict[str, list] = {}
    for alloc in snap.running:
        jobs.setdefault(alloc.job, []).append(alloc)
    if jobs:
        lines.append("running (per job, all its hosts together):")
        ranked = sorted(jobs.items(), key=lambda kv: (-sum(a.gpus for a in kv[1]), -sum(a.vcores for a in kv[1])))
        for job, allocs in ranked[:SHOWN]:
            ends = allocs[0].expected_end_s
            hosts = len({a.host for a in allocs})
            lines.append(f"  {job}: {hosts:,} host{'s' * (hosts != 1)}, {sum(a.vcores for a in allocs):g} "
                         f"vcores, {sum(a.memory_mb for a in allocs):,} MB, {sum(a.gpus for a in allocs)} GPUs"
                         + (f"; ends within {_duration(ends)}" if ends is not None else ""))
        if len(jobs) > SHOWN:
            lines.append(f"  ... and {len(jobs) - SHOWN:,} more")
    for note in snap.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def _clip(text: str, keep: int = 100) -> str:
    return text if len(text) <= keep else text[:keep] + "..."
