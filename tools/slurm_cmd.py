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
                    "as features rack.<rack>, topology presets as topo.<preset>, network domains above the rack as "
                    "net.<level>.<name>, labels as plain features), "
                    "starts slurmctld and one slurmd per node on 127.0.0.1 (where this machine's name resolves to "
                    "it: see below), each on its own port, waits until every node is idle and prints how to point "
                    "SLURM_CONF at it. `start` on a cluster some of whose daemons died starts those again with "
                    "the configuration and state it has, so its jobs carry on (--cluster, --port and "
                    "--slurmd-port, if given, must be the ones it was started with); on a cluster none of whose "
                    "daemons runs, it starts afresh. `stop` cancels every job and stops every daemon; `status` "
                    "shows each daemon, running or dead, where it listens, and each node's state.",
        epilog="Needs root and slurm-wlm (`apt-get install slurm-wlm`; tested with Slurm 22.05.8). A test "
               "cluster only: no munge (auth/none), every daemon and task runs as root, the nodes' CPUs and "
               "memory are taken as declared. Slurm binds its daemons only to every interface or to the address "
               "this machine's name resolves to: where that is not 127.0.0.1, they listen on every interface "
               "and `start` says so in a WARNING (map the name to 127.0.0.1 in /etc/hosts). A node whose slurmd "
               "dies is DOWN 20-30 s later.\n\n"
               "Example:\n"
               "  gangmaster slurm local-cluster start --cluster conf/clusters/default.yaml --work-dir /tmp/slurm\n"
               "  export SLURM_CONF=/tmp/slurm/slurm.conf\n"
               "  gangmaster run conf/jobs/mpi-allreduce.yaml --rm slurm\n"
               "  gangmaster slurm local-cluster stop --work-dir /tmp/slurm\n\n"
               "Exit status: 0 done (status: every daemon runs), 1 the cluster did not come up (the message "
               "says why; logs in DIR/log; status: a daemon does not run, or no cluster), 2 bad input, "
               "3 root or slurm-wlm missing.")
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
            _print_status(status, args.work_dir)
        return 0 if status["daemons"] and all(d["running"] for d in status["daemons"]) else 1
    if args.action == "stop":
        stopped = cluster.stop()
        print(f"stopped {len(stopped)} daemon(s)" + (f": {', '.join(stopped)}" if stopped else
                                                   f" (none ran from {cluster.work_dir})"))
        return 0
    path = args.cluster or default_cluster_path()
    specs = load_cluster_specs(path)
    ports = Ports(args.port or Ports().controller, args.slurmd_port or Ports().first_slurmd)
    daemons = cluster.daemons()
    partly = any(d.alive for d in daemons) and not all(d.alive for d in daemons)
    try:
        if partly:
            _check_same_cluster(args, cluster, specs, ports)
            started = cluster.restart()
        else:
            cluster.start(specs, ports, source=str(path))
    except SlurmUnavailable as exc:
        print(f"gangmaster slurm local-cluster: cannot start: {exc}", file=sys.stderr)
        return 3
    except RuntimeError as exc:
        print(f"gangmaster slurm local-cluster: {exc}", file=sys.stderr)
        return 1
    daemons = cluster.daemons()
    _warn_exposed(daemons)
    if partly:
        print(f"started again: {', '.join(started)}; the cluster in {cluster.work_dir} kept its configuration and "
              f"its jobs, and every node answers.")
        return 0
    print(f"a local Slurm cluster of {len(specs)} node(s) runs from {cluster.work_dir} "
          f"(slurmctld on {', '.join(daemons[0].listens) or f'port {ports.controller}'}); every node is idle.")
    print("Point Slurm's commands and gangmaster at it:")
    print(f"  export SLURM_CONF={cluster.conf_path}")
    print("  sinfo")
    print("  gangmaster run conf/jobs/mpi-allreduce.yaml --rm slurm")
    print(f"Stop it with: gangmaster slurm local-cluster stop --work-dir {args.work_dir}")
    return 0


def _check_same_cluster(args, cluster, specs, ports) -> None:
    """Refuse (RuntimeError) to start again a partly running cluster with a --cluster,
    --port or --slurmd-port other than the ones it runs with."""
    recorded = cluster.recorded()
    differs = []
    if args.cluster and [s.host for s in specs] != recorded["nodes"]:
        differs.append(f"--cluster {args.cluster} (its nodes are those of {recorded['source']})")
    if args.port and ports.controller != recorded["controller_port"]:
        differs.append(f"--port {ports.controller} (it uses {recorded['controller_port']})")
    if args.slurmd_port and ports.first_slurmd != recorded["first_slurmd_port"]:
        differs.append(f"--slurmd-port {ports.first_slurmd} (it uses {recorded['first_slurmd_port']})")
    if differs:
        raise RuntimeError(f"a local Slurm cluster partly runs from {cluster.work_dir}, not as asked: "
                           f"{'; '.join(differs)}; start it again without these options, or "
                           f"`gangmaster slurm local-cluster stop --work-dir {cluster.work_dir}` first")


def _warn_exposed(daemons) -> None:
    """Say loudly which daemons other machines can reach (Slurm could not be bound to loopback)."""
    exposed = [f"{d.name} on {', '.join(d.exposed)}" for d in daemons if d.exposed]
    if exposed:
        print(f"gangmaster slurm local-cluster: WARNING: other machines can reach this cluster: "
              f"{'; '.join(exposed)}. Its daemons take every request without authentication (auth/none) and "
              f"run jobs as root: anyone who reaches these ports can run commands here as root. Slurm 22.05 "
              f"binds them only to every interface or to the address this machine's name resolves to, and "
              f"that serves only where it is 127.0.0.1 (srun is called back on the address its requests come "
              f"from): map the name to 127.0.0.1 in /etc/hosts and start the cluster again, or block these "
              f"ports with a firewall.", file=sys.stderr)


def _print_status(status: dict, work_dir: str) -> None:
    if not status["configured"]:
        print(f"no local Slurm cluster in {status['work_dir']}")
        return
    daemons = status["daemons"]
    dead = [d["name"] for d in daemons if not d["running"]]
    running = len(daemons) - len(dead)
    summary = ("every daemon runs" if not dead else "stopped" if not running
               else f"{len(dead)} of {len(daemons)} daemons do not run: {', '.join(dead)}")
    print(f"local Slurm cluster in {status['work_dir']}: {summary}")
    if running:
        print(f"  export SLURM_CONF={status['slurm_conf']}")
    nodes = status.get("nodes", {})
    for d in daemons:
        where = f"pid {d['pid']}, on {', '.join(d['listens']) or 'no port yet'}" if d["running"] else ""
        state = nodes.get(d["name"].removeprefix("slurmd -N "), "") if d["name"] != "slurmctld" else ""
        print(f"  {d['name']:24} {'running' if d['running'] else 'DEAD':8} {where:34} {state}".rstrip())
    if status.get("error"):
        print(f"  slurmctld did not answer: {status['error']}")
    if dead and running:
        print(f"Start the dead daemons again, keeping the cluster's jobs: "
              f"gangmaster slurm local-cluster start --work-dir {work_dir}")
