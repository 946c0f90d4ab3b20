"""``gangmaster slurm local-cluster start|stop|status``: a Slurm cluster on this machine."""
from __future__ import annotations

import argparse
import json
import sys

from gangmaster.tools.arg_types import port_number

DEFAULT_WORK_DIR = "gangmaster-slurm"


def add_parser(sub):
    parser = sub.add_parser(
        "slurm", help="a local Slurm cluster to run jobs on with `gangmaster run --rm slurm`",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Slurm as the ResourceManager behind the AM (see README: Slurm). `local-cluster` runs a "
                    "whole Slurm cluster on this machine, written from a gangmaster cluster file, for trying "
                    "gangmaster on Slurm and for tests.")
    commands = parser.add_subparsers(dest="slurm_command", metavar="COMMAND")
    commands.required = True
    local = commands.add_parser(
        "local-cluster", help="start, stop or show a Slurm cluster on this machine",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a Slurm cluster on this machine: `start` writes DIR/slurm.conf and DIR/gres.conf from "
                    "a gangmaster cluster file (one node per host of the file; each GPU its own GRES type, "
                    "<gpuType>_<index>, backed by a stand-in device file, so a job can name exact GPUs; racks "
                    "as features rack.<rack>, topology presets as topo.<preset>, labels as plain features), "
                    "starts slurmctld and one slurmd per node on 127.0.0.1, each on its own port, waits until "
                    "every node is idle and prints how to point SLURM_CONF at it. `stop` cancels every job and "
                    "stops every daemon; `status` shows what runs and each node's state.",
        epilog="Needs root and slurm-wlm (`apt-get install slurm-wlm`; tested with Slurm 22.05.8). A test "
               "cluster only: no munge (auth/none), every daemon and task runs as root, the nodes' CPUs and "
               "memory are taken as declared. A node whose slurmd dies is DOWN 20-30 s later.\n\n"
               "Example:\n"
               "  gangmaster slurm local-cluster start --cluster conf/clusters/default.yaml --work-dir /tmp/slurm\n"
               "  export SLURM_CONF=/tmp/slurm/slurm.conf\n"
               "  gangmaster run conf/jobs/mpi-allreduce.yaml --rm slurm\n"
               "  gangmaster slurm local-cluster stop --work-dir /tmp/slurm\n\n"
               "Exit status: 0 done, 1 the cluster did not come up (the message says why; logs in DIR/log), "
               "2 bad input, 3 root or slurm-wlm missing.")
    local.add_argument("action", choices=("start", "stop", "status"))
    local.add_argument("--cluster", help="with start: the gangmaster cluster file (default: the embedded "
                                         "conf/clusters/default.yaml)")
    local.add_argument("--work-dir", default=DEFAULT_WORK_DIR,
                       help=f"the cluster's folder: configuration, state, logs, pid files (default: "
                            f"./{DEFAULT_WORK_DIR}); the same for start, stop and status")
    local.add_argument("--port", type=port_number, default=None,
                       help="with start: slurmctld's port (default 6820)")
    local.add_argument("--slurmd-port", type=port_number, default=None,
                       help="with start: the first node's slurmd port, the next nodes the ports after it "
                            "(default 17000)")
    local.add_argument("--json", action="store_true", help="with status: print it as JSON")
    local.set_defaults(func=_local_cluster)
    return parser


def _local_cluster(args) -> int:
    from gangmaster.selectors.cluster_file import default_cluster_path, load_cluster_specs
    from gangmaster.tools.slurm.local_cluster import LocalCluster, Ports, SlurmUnavailable

    cluster = LocalCluster(args.work_dir)
    if args.action == "status":
        status = cluster.status()
        if args.json:
            print(json.dumps(status, indent=2))
        else:
            _print_status(status)
        return 0 if status["daemons"] else 1
    if args.action == "stop":
        stopped = cluster.stop()
        print(f"stopped {len(stopped)} daemon(s)" + (f": {', '.join(stopped)}" if stopped else
                                                   f" (none ran from {cluster.work_dir})"))
        return 0
    path = args.cluster or default_cluster_path()
    specs = load_cluster_specs(path)
    ports = Ports(args.port or Ports().controller, args.slurmd_port or Ports().first_slurmd)
    try:
        cluster.start(specs, ports, source=str(path))
    except SlurmUnavailable as exc:
        print(f"gangmaster slurm local-cluster: cannot start: {exc}", file=sys.stderr)
        return 3
    except RuntimeError as exc:
        print(f"gangmaster slurm local-cluster: {exc}", file=sys.stderr)
        return 1
    print(f"a local Slurm cluster of {len(specs)} node(s) runs from {cluster.work_dir} "
          f"(slurmctld on 127.0.0.1:{ports.controller}); every node is idle.")
    print("Point Slurm's commands and gangmaster at it:")
    print(f"  export SLURM_CONF={cluster.conf_path}")
    print("  sinfo")
    print("  gangmaster run conf/jobs/mpi-allreduce.yaml --rm slurm")
    print(f"Stop it with: gangmaster slurm local-cluster stop --work-dir {args.work_dir}")
    return 0


def _print_status(status: dict) -> None:
    if not status["configured"]:
        print(f"no local Slurm cluster in {status['work_dir']}")
        return
    daemons = status["daemons"]
    print(f"local Slurm cluster in {status['work_dir']}: {len(daemons)} daemon(s) running"
          + ("" if daemons else " (stopped)"))
    if daemons:
        print(f"  export SLURM_CONF={status['slurm_conf']}")
    for node, state in status.get("nodes", {}).items():
        print(f"  {node:24} {state}")
    if status.get("error"):
        print(f"  slurmctld did not answer: {status['error']}")
