"""``gangmaster rm …``: the ResourceManager simulator, live.

``gangmaster rm serve --cluster FILE`` runs the RM core in real time behind a
gRPC server; an AM in another process connects with ``GrpcRMClient``. Task
processes are real local processes. ``gangmaster rm nodes`` and ``gangmaster rm
fault`` talk to a running server.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from gangmaster.am.rm_protocol import RMError


def add_parser(sub):
    parser = sub.add_parser(
        "rm", help="run the YARN-like ResourceManager simulator (live, over gRPC)",
        description="The ResourceManager simulator. `serve` runs it live; `nodes` and `fault` talk to a "
                    "running one. Virtual-time simulation is a library (gangmaster.tools.rmsim.simulation).")
    rm_sub = parser.add_subparsers(dest="rm_command", metavar="ACTION")
    rm_sub.required = True

    serve = rm_sub.add_parser(
        "serve", help="serve the RM over gRPC in real time",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve the RM core over gRPC in real time. Containers started through it are real local "
                    "processes, told their simulated host, ports and GPUs through the environment "
                    "(GANGMASTER_HOST, PAI_CONTAINER_HOST_PORT_LIST, CUDA_VISIBLE_DEVICES, ...).",
        epilog="With --state FILE the RM writes its state there after every change; started again with the "
               "same FILE (after a crash or kill -9) it restores nodes, queues, applications and running "
               "containers, and the cluster file's nodes are ignored in favour of the saved ones.\n"
               "Prints 'listening on HOST:PORT' on stdout once it accepts calls.")
    serve.add_argument("--cluster", required=True, help="cluster file (conf/clusters/*.yaml format)")
    serve.add_argument("--queues", help="queue file (see README: ResourceManager simulator); default: one "
                                        "queue 'default' with the whole cluster")
    serve.add_argument("--state", help="state file to save to and restore from")
    serve.add_argument("--scenario", help="fault scenario YAML to play on the real-time clock")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=0, help="port (default 0: any free port, printed)")
    serve.add_argument("--work-dir", help="where task logs and exit files go (default: next to --state, "
                                          "else ./rm-tasks)")
    serve.add_argument("--config", help="override file for conf/defaults.yaml (its `rm:` section: process "
                                        "poll interval, kill grace, state save interval, gRPC workers)")
    serve.add_argument("--verbose", "-v", action="store_true", help="log scheduling and scenario steps")
    serve.set_defaults(func=_serve)

    nodes = rm_sub.add_parser("nodes", help="list a running RM's nodes with their free resources")
    nodes.add_argument("--address", required=True, help="HOST:PORT of `gangmaster rm serve`")
    nodes.set_defaults(func=_nodes)

    fault = rm_sub.add_parser("fault", help="inject a fault into a running RM")
    fault.add_argument("--address", required=True, help="HOST:PORT of `gangmaster rm serve`")
    fault.add_argument("action", choices=["lose_node", "mark_unhealthy", "restore_node", "kill_container",
                                          "fail_container", "kill_am"])
    fault.add_argument("--host", default="")
    fault.add_argument("--container", default="")
    fault.add_argument("--app", default="")
    fault.add_argument("--exit-code", type=int, default=1)
    fault.set_defaults(func=_fault)
    return parser


def _serve(args) -> int:
    from gangmaster.selectors.cluster_file import load_cluster_specs
    from gangmaster.tools.rmsim.ledger import NodeLedger
    from gangmaster.tools.rmsim.queues import load_queues
    from gangmaster.tools.rmsim.scenario import Scenario
    from gangmaster.tools.rmsim.server import LiveRM, schedule_scenario, start_server

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from gangmaster.conf.settings import Settings
    knobs = Settings(args.config).section("rm")
    poll_s = knobs.number("process_poll_s", minimum=0, exclusive_minimum=True)
    grace_s = knobs.number("kill_grace_s", minimum=0)
    save_s = knobs.number("state_save_interval_s", minimum=0, exclusive_minimum=True)
    workers = knobs.integer("grpc_workers", minimum=1)
    expiry = knobs.raw("allocation_expiry_s", None)
    expiry = None if expiry is None else knobs.number("allocation_expiry_s", minimum=0, exclusive_minimum=True)
    specs = load_cluster_specs(args.cluster)
    queues = load_queues(args.queues, NodeLedger(specs)) if args.queues else None
    scenario = Scenario.load(args.scenario, {s.host for s in specs}) if args.scenario else None
    live = LiveRM(specs, queues, state_path=args.state, work_dir=args.work_dir, poll_s=poll_s,
                  save_every_s=save_s, kill_grace_s=grace_s, allocation_expiry_s=expiry)
    server, port = start_server(live, args.host, args.port, workers=workers)
    if scenario is not None:
        schedule_scenario(live, scenario)
    print(f"listening on {args.host}:{port}" + (" (restored from state)" if live.restored else ""), flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop(grace=1).wait()
    live.stop()
    return 0


def _nodes(args) -> int:
    from gangmaster.am.rm_client_grpc import GrpcRMClient
    with GrpcRMClient(args.address) as rm:
        try:
            nodes = rm.cluster_nodes()
        except RMError as exc:
            print(f"gangmaster rm nodes: {exc}", file=sys.stderr)
            return 1
    print(f"{'host':<16} {'rack':<10} {'state':<10} {'free memory':>12} {'free vcores':>11} {'free GPUs':<16} containers")
    for n in nodes:
        gpus = f"{n.free.gpus}/{n.capacity.gpus} {n.free.gpu_mask:#x}"
        print(f"{n.host:<16} {n.rack:<10} {n.state.value:<10} {n.free.memory_mb:>10}MB {n.free.vcores:>11g} "
              f"{gpus:<16} {n.containers}")
    return 0


def _fault(args) -> int:
    from gangmaster.am.rm_client_grpc import GrpcRMClient
    with GrpcRMClient(args.address) as rm:
        try:
            rm.inject_fault(args.action, host=args.host, container_id=args.container, app_id=args.app,
                            exit_code=args.exit_code)
        except RMError as exc:
            print(f"gangmaster rm fault: {exc}", file=sys.stderr)
            return 1
    return 0
