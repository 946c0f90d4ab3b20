"""``gangmaster rm …``: the ResourceManager simulator, live.

``gangmaster rm serve --cluster FILE`` runs the RM core in real time behind a
gRPC server; an AM in another process connects with ``GrpcRMClient``. Task
processes are real local processes. ``gangmaster rm nodes`` and ``gangmaster rm
fault`` talk to a running server.

Whoever can call the server can run any command as the user running it: it
listens on 127.0.0.1 unless ``--host`` says otherwise, and ``--token-file`` and
``--tls-cert``/``--tls-key`` make every caller present a token over TLS.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from gangmaster.protocol.rm_protocol import RMError
from gangmaster.tools.arg_types import address, port_number
from gangmaster.tools.rmsim.faults import FAULTS

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def add_client_security(parser) -> None:
    """``--token-file`` and ``--tls-ca``: what every client of `rm serve` passes (see :func:`client_security`)."""
    parser.add_argument("--token-file", help="the server's token file (when it was started with --token-file)")
    parser.add_argument("--tls-ca", help="PEM certificate to trust (the server's --tls-cert, or its CA) "
                                         "when the server uses TLS")


def client_security(args):
    """The ClientSecurity of ``--token-file`` and ``--tls-ca`` (a bad token file is a ConfigError naming it)."""
    from gangmaster.protocol.grpc_security import ClientSecurity, read_token
    from gangmaster.conf.limits import RM_MAX_TOKEN_CHARS

    token = read_token(args.token_file, "--token-file", RM_MAX_TOKEN_CHARS) if args.token_file else None
    return ClientSecurity(tls_ca_file=args.tls_ca, token=token, token_file=args.token_file)


def _client(args):
    from gangmaster.protocol.rm_client_grpc import GrpcRMClient

    return GrpcRMClient(args.address, security=client_security(args))


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
               "same FILE (after a crash or kill -9) it restores nodes, queues, applications, running "
               "containers and the reservations held (planned again from what the applications declared), "
               "and the cluster file's nodes are ignored in favour of the saved ones.\n"
               "Prints 'listening on HOST:PORT' on stdout once it accepts calls.\n"
               "A job's submission declares its largest gang and its duration (gangmaster: "
               "expectedDurationSeconds): a --queues queue with policy: reserve holds nodes for a gang that "
               "cannot start, and with rm.preemption: true in --config a gang that waits for room preempts "
               "lower-priority gangs (placed with the same file's selection: settings).\n"
               "Security: whoever can call the server can run any command as you. It listens on 127.0.0.1 "
               "(this machine) unless --host says otherwise; --token-file makes every call present a token "
               "(the file is created, mode 0600, with a random token if it does not exist) and --tls-cert/"
               "--tls-key encrypt the connection. Clients (`rm nodes`, `rm fault`, GrpcRMClient) pass the "
               "same token file and --tls-ca.")
    serve.add_argument("--cluster", required=True, help="cluster file (conf/clusters/*.yaml format)")
    serve.add_argument("--queues", help="queue file (see README: ResourceManager simulator): limits, "
                                        "priorities, and policy: reserve for queues whose big gangs get nodes "
                                        "held; default: one queue 'default' with the whole cluster")
    serve.add_argument("--state", help="state file to save to and restore from")
    serve.add_argument("--scenario", help="fault scenario YAML to play on the real-time clock")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every "
                            "interface, use with --token-file and TLS)")
    serve.add_argument("--port", type=port_number, default=0, help="port 0..65535 (default 0: any free port, "
                                                                   "printed); refused when in use")
    serve.add_argument("--token-file", help="require this token on every call; created (mode 0600, random "
                                            "token) when the file does not exist")
    serve.add_argument("--tls-cert", help="PEM certificate to serve TLS with (needs --tls-key)")
    serve.add_argument("--tls-key", help="PEM private key of --tls-cert")
    serve.add_argument("--work-dir", help="where task logs and exit files go (default: next to --state, "
                                          "else ./rm-tasks)")
    serve.add_argument("--config", help="override file for conf/defaults.yaml (its `rm:` section: process "
                                        "poll interval, kill grace, state save interval, gRPC workers, "
                                        "allocation expiry, scheduling interval, preemption and its grace; "
                                        "with rm.preemption, its `selection:` section places the gangs "
                                        "waiting for room)")
    serve.add_argument("--verbose", "-v", action="store_true", help="log scheduling and scenario steps")
    serve.set_defaults(func=_serve)

    nodes = rm_sub.add_parser("nodes", help="list a running RM's nodes with their free resources")
    nodes.add_argument("--address", type=address, required=True, help="HOST:PORT of `gangmaster rm serve`")
    add_client_security(nodes)
    nodes.set_defaults(func=_nodes)

    fault = rm_sub.add_parser(
        "fault", help="inject a fault into a running RM", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Inject a fault into a running RM: the actions a scenario's steps take (`do:`).",
        epilog="actions:\n" + "\n".join(f"  {a.name:<15} ({a.target}) {a.help}" for a in FAULTS.values()))
    fault.add_argument("--address", type=address, required=True, help="HOST:PORT of `gangmaster rm serve`")
    fault.add_argument("action", choices=list(FAULTS))
    fault.add_argument("--host", default="", help="the node (host actions), or where to pick a container of --app")
    fault.add_argument("--container", default="", help="the container (container actions; or --app)")
    fault.add_argument("--app", default="", help="the application (app actions; container actions: its first "
                                                 "live container, on --host when given)")
    fault.add_argument("--exit-code", type=int, default=1, help="fail_container's exit code (default 1)")
    fault.add_argument("--text", default="", help="the report or diagnostics (default: the action's own)")
    add_client_security(fault)
    fault.set_defaults(func=_fault)
    return parser


def _serve_security(args):
    """The server's TLS files and token from the flags (files are read now: a bad one is a
    ConfigError naming it); warns when the RM would take unauthenticated calls from the network."""
    from gangmaster.protocol.grpc_security import ServerSecurity, load_or_create_token
    from gangmaster.conf.fields import ConfigError
    from gangmaster.conf.limits import RM_MAX_TOKEN_CHARS

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("gangmaster rm serve", "--tls-key" if args.tls_key is None else "--tls-cert",
                          "a PEM file (TLS needs both --tls-cert and --tls-key)")
    token = None
    if args.token_file:
        token, created = load_or_create_token(args.token_file, "--token-file", RM_MAX_TOKEN_CHARS)
        if created:
            print(f"gangmaster rm serve: wrote a new token to {args.token_file} (mode 0600)", file=sys.stderr)
    security = ServerSecurity(args.tls_cert, args.tls_key, token)
    security.credentials("--tls-cert", "--tls-key")   # read the files now, before anything starts
    if args.host not in _LOOPBACK and token is None:
        print(f"gangmaster rm serve: warning: listening on {args.host} without --token-file: anyone who can "
              f"reach this port can run any command as this user", file=sys.stderr)
    return security


def serve_settings(config: str | None):
    """``rm serve``'s settings from ``--config``: the ``rm:`` knobs, and with ``rm.preemption``
    the ``selection:`` settings its preemption monitor places waiting gangs with (None: off).
    Read before anything starts: a bad one is a ConfigError naming the file and the key."""
    from gangmaster.selectors.settings import SelectionSettings
    from gangmaster.tools.rmsim.rm_settings import RMSettings

    knobs = RMSettings.load(config)
    return knobs, (SelectionSettings.load(config) if knobs.preemption else None)


def _serve(args) -> int:
    from gangmaster.protocol.grpc_security import ListenError, check_bindable
    from gangmaster.selectors.cluster_file import load_cluster_specs
    from gangmaster.tools.rmsim.ledger import NodeLedger
    from gangmaster.tools.rmsim.live_rm import LiveRM
    from gangmaster.tools.rmsim.queues import load_queues
    from gangmaster.tools.rmsim.scenario import Scenario
    from gangmaster.tools.rmsim.server import start_server

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    knobs, selection = serve_settings(args.config)
    security = _serve_security(args)
    specs = load_cluster_specs(args.cluster)
    queues = load_queues(args.queues, NodeLedger(specs)) if args.queues else None
    scenario = Scenario.load(args.scenario, {s.host for s in specs}) if args.scenario else None
    try:
        if args.port:
            check_bindable(args.host, args.port)   # before the state file is touched
        live = LiveRM.from_settings(specs, queues, knobs, work_dir=args.work_dir, state_path=args.state,
                                    scenario=scenario)
        if selection is not None:
            live.monitor_preemption(knobs.preemption_grace_s, selection)
        try:
            server, port = start_server(live, args.host, args.port, workers=knobs.grpc_workers, security=security)
        except BaseException:
            live.stop()
            raise
    except ListenError as exc:
        print(f"gangmaster rm serve: {exc}", file=sys.stderr)
        return 2
    print(f"listening on {args.host}:{port}" + (" (restored from state)" if live.restored else ""), flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop(grace=1).wait()
    live.stop()
    return 0


def _nodes(args) -> int:
    with _client(args) as rm:
        try:
            nodes = rm.cluster_nodes()
        except RMError as exc:
            print(f"gangmaster rm nodes: {exc}", file=sys.stderr)
            return 1
    print(f"{'host':<16} {'rack':<10} {'state':<10} {'free memory':>12} {'free vcores':>11} {'free GPUs':<16} containers")
    for n in nodes:
        gpus = f"{n.free.gpus}/{n.capacity.gpus} {n.free.gpu_mask:#x}"
        print(f"{n.host:<16} {n.rack:<10} {n.state.value:<10} {n.free.memory_mb:>10}MB {n.free.vcores:>11g} "
              f"{gpus:<16} {n.containers}" + _shares(n))
    return 0


def _shares(node) -> str:
    """For a node whose GPUs hold shares, milli-GPU free per GPU (``  milli free per GPU: 0 750 1000 1000``)."""
    if node.gpu_milli_free is None:
        return ""
    return "  milli free per GPU: " + " ".join(map(str, node.gpu_milli_free))


def _fault(args) -> int:
    from gangmaster.tools.rmsim.control import SimulatorControl

    with _client(args) as rm:
        try:
            SimulatorControl(rm).inject_fault(args.action, host=args.host, container_id=args.container, app_id=args.app,
                            exit_code=args.exit_code, text=args.text)
        except RMError as exc:
            print(f"gangmaster rm fault: {exc}", file=sys.stderr)
            return 1
    return 0
