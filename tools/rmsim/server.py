"""The live RM behind a gRPC server (``gangmaster rm serve``); the live RM itself
(real time, real task processes, state file) is :class:`~.live_rm.LiveRM`.

Every RPC decodes its message, calls the core under the core's lock, and maps
the core's errors to gRPC status codes (INVALID_ARGUMENT names the field). A
bad request never stops the server and never costs a traceback: the server
decodes each request itself, so bytes that are not a valid message are answered
INVALID_ARGUMENT (gRPC's own decoder would answer INTERNAL and log one), and the
core checks every field against ``conf/limits.py``. After any call that changed
the core, the state file (if any) is rewritten before the reply leaves, so a
client never holds a grant the RM would forget after ``kill -9``.

Who may call: the server binds exclusively (a second ``rm serve`` on the same
port fails with "port N is in use"), on 127.0.0.1 unless told otherwise, and can
demand TLS and a token (:mod:`gangmaster.protocol.grpc_security`) — whoever can call
it can run any command as the user running it.
"""
from __future__ import annotations

import reprlib
from concurrent import futures

import grpc
from google.protobuf.message import DecodeError

from gangmaster.protocol import rm_codec as codec
from gangmaster.protocol.grpc_security import EXCLUSIVE_BIND, ServerSecurity, listen
from gangmaster.protocol.proto import rm_pb2 as pb
from gangmaster.protocol.proto import rm_pb2_grpc
from gangmaster.protocol.rm_protocol import InvalidRequest, NotFound, RMError, WrongState
from gangmaster.conf import limits
from gangmaster.selectors.resources import ResourceError

from .faults import FAULTS, Fault, apply
from .live_rm import LiveRM
from .proto import rmsim_pb2 as control_pb
from .proto import rmsim_pb2_grpc

_TO_CODE = {
    InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    WrongState: grpc.StatusCode.FAILED_PRECONDITION,
}

EMPTY = pb.Empty()
CONTROL_EMPTY = control_pb.Empty()


class RMServicer(rm_pb2_grpc.ResourceManagerServicer):
    def __init__(self, live: LiveRM):
        self.live = live
        self.core = live.core

    def run(self, context, fn, *args):
        """Call the core (decoding included): its typed errors become status codes, and the
        state file is brought up to date whatever happened (a refused call changes nothing,
        so then there is nothing to write)."""
        try:
            return fn(*args)
        except RMError as exc:
            context.abort(_TO_CODE.get(type(exc), grpc.StatusCode.INTERNAL), exc.message)
        except ResourceError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        finally:
            self.live.save()

    # ---- client side
    def Submit(self, request, context):
        return pb.AppId(app_id=self.run(context, lambda: self.core.submit(codec.submission_from_pb(request))))

    def Kill(self, request, context):
        self.run(context, self.core.kill, request.app_id, request.diagnostics)
        return EMPTY

    def GetApplicationReport(self, request, context):
        return codec.report_to_pb(self.run(context, self.core.application_report, request.app_id))

    def GetClusterNodes(self, request, context):
        nodes = self.run(context, self.core.cluster_nodes, request.usable_only)
        reply = pb.NodesResponse()
        for n in nodes:
            codec.node_to_pb(n, reply.nodes.add())
        return reply

    # ---- AM side
    def Register(self, request, context):
        return codec.register_to_pb(self.run(context, self.core.register, request.app_id))

    def Allocate(self, request, context):
        return codec.allocate_response_to_pb(self.run(context, self._allocate, request))

    def _allocate(self, request):
        """The heartbeat answered, then what the RM does after it (its preemption monitor, when on)."""
        response = self.core.allocate(codec.allocate_request_from_pb(request))
        self.live.heartbeat(request.app_id)
        return response

    def Finish(self, request, context):
        self.run(context, self.core.finish, request.app_id, request.attempt, request.final_status or "SUCCEEDED",
                  request.diagnostics)
        return EMPTY

    # ---- NodeManager side
    def StartContainer(self, request, context):
        self.run(context, lambda: self.core.start_container(request.container_id,
                                                             codec.launch_from_pb(request.launch)))
        return EMPTY

    def StartContainers(self, request, context):
        refused = self.run(context, lambda: self.core.start_containers(codec.start_containers_from_pb(request)))
        return codec.start_refused_to_pb(refused)

    def StopContainer(self, request, context):
        self.run(context, self.core.stop_container, request.container_id)
        return EMPTY

    def GetContainerStatus(self, request, context):
        status = self.run(context, self.core.container_status, request.container_id)
        msg = pb.ContainerStatus()
        codec.status_to_pb(status, msg)
        return msg

    def NotifyPreemption(self, request, context):
        deadline = self.run(context, self.core.notify_preemption, request.container_id)
        return pb.PreemptionDeadline(deadline=deadline)


class ControlServicer(rmsim_pb2_grpc.SimulatorControlServicer):
    """The simulator's own service (:mod:`.control`): faults and the benchmark's ping. It is
    not the protocol's: a real RM has neither."""

    def __init__(self, rm: RMServicer):
        self.rm = rm

    def InjectFault(self, request, context):
        """A fault of the one table (:data:`~.faults.FAULTS`), as ``gangmaster rm fault`` sends it."""
        if request.action not in FAULTS:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"action: expected one of {', '.join(FAULTS)}, got {reprlib.repr(request.action)}")
        fault = Fault(request.action, request.host, request.container_id, request.app_id, request.exit_code,
                      request.text)
        self.rm.run(context, apply, self.rm.core, fault, "injected")
        return CONTROL_EMPTY

    def Ping(self, request, context):
        return CONTROL_EMPTY


def service_handler(servicer, messages=pb, name: str = "ResourceManager") -> grpc.GenericRpcHandler:
    """The service ``name`` of the stubs module ``messages`` (the protocol's ResourceManager;
    the simulator's SimulatorControl) with each request decoded by the method itself
    (the handlers take raw bytes): a message that does not parse is the caller's
    error, INVALID_ARGUMENT, where gRPC's own decoding would answer INTERNAL."""
    service = messages.DESCRIPTOR.services_by_name[name]
    handlers = {}
    for method in service.methods:
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            _decoding(getattr(servicer, method.name), getattr(messages, method.input_type.name)),
            response_serializer=getattr(messages, method.output_type.name).SerializeToString)
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


def _decoding(method, request_type):
    def handle(raw: bytes, context):
        try:
            request = request_type.FromString(raw)
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"request: not a valid {request_type.DESCRIPTOR.full_name} message ({exc})")
        return method(request, context)
    return handle


def _handlers(rm: RMServicer) -> list[grpc.GenericRpcHandler]:
    """The protocol's service and, beside it, the simulator's own."""
    return [service_handler(rm), service_handler(ControlServicer(rm), control_pb, "SimulatorControl")]


def server_options() -> list[tuple[str, int]]:
    """Exclusive bind, and messages up to RM_MAX_MESSAGE_BYTES both ways (a node list or
    an allocate reply of a big cluster is larger than gRPC's default 4 MiB)."""
    return [EXCLUSIVE_BIND,
            ("grpc.max_receive_message_length", limits.RM_MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", limits.RM_MAX_MESSAGE_BYTES)]


def start_server(live: LiveRM, host: str = "127.0.0.1", port: int = 0, workers: int = 8,
                 security: ServerSecurity | None = None) -> tuple[grpc.Server, int]:
    """Start serving; returns the server and the bound port (``port=0``: any free one).
    Raises :class:`~gangmaster.protocol.grpc_security.ListenError` ("port N is in use") when it
    cannot listen, and ConfigError for a TLS file that cannot be read."""
    security = security or ServerSecurity()
    credentials = security.credentials("--tls-cert", "--tls-key")
    interceptors = security.interceptors()
    for interceptor in interceptors:   # a burst of refused calls followed by quiet is summarized too
        live.clock.every(interceptor.refusals.interval_s, interceptor.refusals.flush)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                         handlers=_handlers(RMServicer(live)),
                         interceptors=interceptors, options=server_options())
    bound = listen(server, host, port, credentials)
    server.start()
    return server, bound

