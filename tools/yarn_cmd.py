"""``gangmaster yarn local-cluster start|stop|status``: an Apache Hadoop YARN cluster on this machine."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gangmaster.tools.arg_types import port_number, seconds

DEFAULT_WORK_DIR = "gangmaster-yarn"
DEFAULT_CLUSTER = "yarn-local.yaml"


def add_parser(sub):
    from gangmaster.tools.yarn.local_cluster import (DEFAULT_HADOOP_VERSION, KNOWN_HADOOP_VERSIONS, START_TIMEOUT_S,
                                                     Ports)
    parser = sub.add_parser(
        "yarn", help="a local Apache Hadoop YARN cluster (ResourceManager + NodeManagers) on this machine",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Apache Hadoop YARN as the ResourceManager behind the AM (see README: YARN): a local "
                    "cluster to run jobs on with `gangmaster run JOB --rm yarn`.")
    commands = parser.add_subparsers(dest="yarn_command", metavar="COMMAND")
    commands.required = True
    local = commands.add_parser(
        "local-cluster", help="start, stop or show a YARN cluster on this machine",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a real YARN cluster on this machine from Apache's own jars: `start` resolves Hadoop's "
                    "ResourceManager and NodeManager jars with Maven (once, into a cache folder), writes one "
                    "configuration folder per daemon under DIR/conf, starts one ResourceManager and one "
                    "NodeManager per node of a gangmaster cluster file as `java` processes on 127.0.0.1, and waits "
                    "until the RM lists every NodeManager RUNNING. Node names include the port "
                    "(localhost:PORT), each node declares its memory, vcores and GPUs (the countable resource "
                    "yarn.io/gpu) from the file, and the capacity scheduler counts all three. `stop` stops every "
                    "daemon by its pid; `status` names every daemon and says which are dead.",
        epilog="Needs a JDK (17) and Maven, and Maven Central the first time (about 80 MB of jars). A test "
               "cluster only: no security, containers run as this user, resources are taken as declared.\n\n"
               "Example:\n"
               "  gangmaster yarn local-cluster start --work-dir /tmp/yarn\n"
               "  curl http://127.0.0.1:18038/ws/v1/cluster/nodes\n"
               "  gangmaster yarn local-cluster stop --work-dir /tmp/yarn\n\n"
               "Exit status: 0 done, 1 the cluster did not come up or (status) a daemon is dead (the message "
               "says which; logs in DIR/logs), 2 bad input, java or mvn missing, or Maven Central unreachable.")
    local.add_argument("action", choices=("start", "stop", "status"))
    local.add_argument("--cluster", help=f"with start: the gangmaster cluster file, one NodeManager per node "
                                         f"(default: the embedded conf/clusters/{DEFAULT_CLUSTER}, 3 nodes)")
    local.add_argument("--queues", help="with start: a gangmaster queue file (the format of `gangmaster rm "
                                        "serve --queues`): each queue's limit becomes its maximum-capacity in the "
                                        "capacity scheduler (default: one queue, default)")
    local.add_argument("--work-dir", default=DEFAULT_WORK_DIR,
                       help=f"the cluster's folder: configuration, state, logs, container dirs (default: "
                            f"./{DEFAULT_WORK_DIR}); the same for start, stop and status")
    local.add_argument("--hadoop-version", default=DEFAULT_HADOOP_VERSION,
                       help=f"with start: the Hadoop release to run (default {DEFAULT_HADOOP_VERSION}; "
                            f"tried: {', '.join(KNOWN_HADOOP_VERSIONS)})")
    local.add_argument("--cache-dir", type=Path, default=None,
                       help="with start: where the resolved jars are kept (default: "
                            "$GANGMASTER_YARN_CACHE or ~/.cache/gangmaster, then yarn-VERSION/)")
    local.add_argument("--rm-port", type=port_number, default=Ports().rm,
                       help=f"with start: the RM's first port: scheduler PORT, resource tracker +1, client +2, "
                            f"admin +3, web (REST) +8 (default {Ports().rm})")
    local.add_argument("--nm-port", type=port_number, default=Ports().first_nm,
                       help=f"with start: the first NodeManager's port (its localizer +1, web +2); the next "
                            f"NodeManagers 10 ports apart (default {Ports().first_nm})")
    local.add_argument("--timeout", type=seconds, default=START_TIMEOUT_S,
                       help=f"with start: how long to wait for every NodeManager RUNNING (default "
                            f"{START_TIMEOUT_S:.0f} s)")
    local.add_argument("--json", action="store_true", help="with status: print it as JSON")
    local.set_defaults(func=_local_cluster)
    return parser


def _fail(text: str, code: int) -> int:
    print(f"gangmaster yarn local-cluster: {text}", file=sys.stderr)
    return code


def _local_cluster(args) -> int:
    from gangmaster.conf import conf_path
    from gangmaster.selectors.cluster_file import load_cluster_specs
    from gangmaster.tools.yarn.local_cluster import (ClusterStartError, LocalCluster, Ports, YarnUnavailable,
                                                     default_cache_dir, ensure_jars)

    cluster = LocalCluster(args.work_dir)
    if args.action == "status":
        status = cluster.status()
        if args.json:
            print(json.dumps(status, indent=2))
        else:
            _print_status(status)
        return 0 if status["daemons"] and not status["stopped"] and not status["dead"] else 1
    if args.action == "stop":
        stopped = cluster.stop()
        print(f"stopped {len(stopped)} daemon(s)" + (f": {', '.join(stopped)}" if stopped else
                                                   f" (none ran from {cluster.work_dir})"))
        return 0
    path = args.cluster or conf_path(f"clusters/{DEFAULT_CLUSTER}")
    specs = load_cluster_specs(path)
    queues = None
    if args.queues:
        from gangmaster.tools.rmsim.ledger import NodeLedger
        from gangmaster.tools.rmsim.queues import load_queues
        queues = load_queues(args.queues, NodeLedger(specs))
    if args.rm_port == 0 or args.nm_port == 0:
        return _fail("--rm-port and --nm-port need fixed ports (0 is not allowed here)", 2)
    started = time.monotonic()
    try:
        cache = args.cache_dir / f"yarn-{args.hadoop_version}" if args.cache_dir else default_cache_dir(args.hadoop_version)
        print(f"resolving Hadoop {args.hadoop_version}'s jars into {cache} ...", flush=True)
        lib = ensure_jars(args.hadoop_version, cache)
        print(f"jars ready after {time.monotonic() - started:.1f} s; starting the ResourceManager", flush=True)
        state = cluster.start(specs, Ports(args.rm_port, args.nm_port), lib=lib, version=args.hadoop_version,
                              timeout_s=args.timeout, progress=lambda line: print(line, flush=True), source=str(path),
                              queues=queues)
    except YarnUnavailable as exc:
        return _fail(f"cannot start: {exc}", 2)
    except ClusterStartError as exc:
        return _fail(str(exc), 1)
    web = cluster.rm_web
    print(f"a local YARN cluster (Hadoop {args.hadoop_version}) of {len(specs)} NodeManager(s) runs from "
          f"{cluster.work_dir}, up in {time.monotonic() - started:.1f} s:")
    print(f"  ResourceManager REST  {web}/ws/v1/cluster   scheduler (for AMs) 127.0.0.1:{args.rm_port}")
    for host, node in state["nodes"].items():
        print(f"  {host:16} {node['node_id']}")
    print(f"Run a job on it: YARN_RM={cluster.work_dir} gangmaster run JOB.yaml --rm yarn")
    print(f"Stop it with: gangmaster yarn local-cluster stop --work-dir {args.work_dir}")
    return 0


def _print_status(status: dict) -> None:
    if not status["configured"]:
        print(f"no local YARN cluster in {status['work_dir']}")
        return
    daemons = status["daemons"]
    alive = sum(d["alive"] for d in daemons.values())
    print(f"local YARN cluster (Hadoop {status['version']}) in {status['work_dir']}: {alive} of {len(daemons)} "
          f"daemon(s) running" + (" (stopped)" if status["stopped"] else "")
          + (f"; DEAD: {', '.join(status['dead'])}" if status["dead"] else ""))
    if daemons.get("resourcemanager", {}).get("alive"):
        print(f"  ResourceManager REST {status['rm_web']}/ws/v1/cluster, scheduler {status['rm_scheduler']}")
    for name, d in daemons.items():
        print(f"  {name:24} pid {d['pid']:<8} {'running' if d['alive'] else 'stopped' if status['stopped'] else 'DEAD'}   log {d['log']}")
    for node, state in status.get("nodes", {}).items():
        print(f"  node {node:19} {state}")
