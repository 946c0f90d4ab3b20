"""The gRPC implementation of :class:`~gangmaster.protocol.rm_client.RMClient` (live mode).

gRPC status codes come back as the same exception classes the in-process core
raises: INVALID_ARGUMENT → ``InvalidRequest``, NOT_FOUND → ``NotFound``,
FAILED_PRECONDITION → ``WrongState``; UNAUTHENTICATED → ``Unauthenticated``, saying
what it means for what this client sent (no token, or the token in its file is not the
server's: :meth:`ClientSecurity.refused`); anything else (the server is down, a
deadline passed) → ``RMError`` with the gRPC detail.

A server started with TLS and/or a token (``gangmaster rm serve --tls-cert/--tls-key
--token-file``) is reached with ``security=ClientSecurity(tls_ca_file=..., token=...)``:
the channel trusts that certificate and every call carries the token.

Requests are checked here as the core checks them (:mod:`gangmaster.protocol.rm_validation`)
before they are encoded, so a bad one fails the same way with both clients (a value
out of a protobuf field's range would otherwise be a bare ValueError from encoding).
"""
from __future__ import annotations

import grpc

from gangmaster.conf import limits

from .grpc_security import ClientSecurity
from .proto import rm_pb2 as pb
from .proto import rm_pb2_grpc
from . import rm_codec as codec
from . import rm_validation as check
from .rm_client import RMClient
from .rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationReport, ApplicationSubmission, ContainerStatus,
    InvalidRequest, NodeReport, NotFound, RegisterResponse, RMError, StartContainers, StartRefused,
    Unauthenticated, WrongState,
)

_FROM_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: WrongState,
}


class GrpcRMClient(RMClient):
    """``GrpcRMClient("127.0.0.1:8032")``; every call has a deadline of ``timeout_s``."""

    def __init__(self, address: str, timeout_s: float = 10.0, security: ClientSecurity | None = None):
        self.address = address
        self.timeout_s = timeout_s
        security = security or ClientSecurity()
        self.channel = security.channel(address, options=[
            ("grpc.max_receive_message_length", limits.RM_MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", limits.RM_MAX_MESSAGE_BYTES)], ca_setting="--tls-ca")
        self._security, self._metadata = security, security.metadata
        self.stub = rm_pb2_grpc.ResourceManagerStub(self.channel)

    def call(self, method, msg):
        """One unary call of ``method`` (a stub's, on :attr:`channel`) with this client's
        deadline and token; gRPC's status codes come back as the protocol's errors. The RM
        simulator's own service calls through it too (tools/rmsim/control.py)."""
        try:
            return method(msg, timeout=self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.UNAUTHENTICATED:
                raise Unauthenticated(self._security.refused()) from None
            cls = _FROM_CODE.get(exc.code(), RMError)
            raise cls(exc.details() or str(exc.code())) from None

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        grpc.channel_ready_future(self.channel).result(timeout=timeout_s)

    # ---- client side
    def submit(self, submission: ApplicationSubmission) -> str:
        check.check_submission(submission)
        return self.call(self.stub.Submit, codec.submission_to_pb(submission)).app_id

    def kill(self, app_id: str, diagnostics: str = "") -> None:
        self.call(self.stub.Kill, pb.KillRequest(app_id=app_id, diagnostics=diagnostics))

    def application_report(self, app_id: str) -> ApplicationReport:
        return codec.report_from_pb(self.call(self.stub.GetApplicationReport, pb.AppId(app_id=app_id)))

    def cluster_nodes(self, usable_only: bool = False) -> list[NodeReport]:
        reply = self.call(self.stub.GetClusterNodes, pb.NodesRequest(usable_only=usable_only))
        return [codec.node_from_pb(n) for n in reply.nodes]

    # ---- AM side
    def register(self, app_id: str) -> RegisterResponse:
        return codec.register_from_pb(self.call(self.stub.Register, pb.RegisterRequest(app_id=app_id)))

    def allocate(self, request: AllocateRequest) -> AllocateResponse:
        check.check_allocate(request)
        return codec.allocate_response_from_pb(
            self.call(self.stub.Allocate, codec.allocate_request_to_pb(request)))

    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED", diagnostics: str = "") -> None:
        check.check_finish(app_id, attempt, final_status, diagnostics)
        self.call(self.stub.Finish, pb.FinishRequest(app_id=app_id, attempt=attempt, final_status=final_status,
                                                      diagnostics=diagnostics))

    # ---- NodeManager side
    def start_containers(self, request: StartContainers) -> StartRefused | None:
        shared_size = check.check_start(request)
        for k, item in enumerate(request.containers):
            try:
                check.check_launch(item.launch, f"containers[{k}].launch", shared_size)
            except InvalidRequest as exc:   # the core would refuse it in its turn: those before it still start
                before = self._start(StartContainers(request.containers[:k], request.shared)) if k else None
                return before or StartRefused(k, item.container_id, exc)
        return self._start(request)

    def _start(self, request: StartContainers) -> StartRefused | None:
        return codec.start_refused_from_pb(self.call(self.stub.StartContainers,
                                                      codec.start_containers_to_pb(request)))

    def stop_container(self, container_id: str) -> None:
        self.call(self.stub.StopContainer, pb.ContainerId(container_id=container_id))

    def container_status(self, container_id: str) -> ContainerStatus:
        return codec.status_from_pb(self.call(self.stub.GetContainerStatus, pb.ContainerId(container_id=container_id)))

    def close(self) -> None:
        self.channel.close()
