"""The RM simulator's own calls, beside the AM–RM protocol: inject a fault, ping.

A real RM offers neither, so they are not the protocol's (``protocol/``): the simulator
serves them as a service of its own (``tools/rmsim/proto/rmsim.proto``: ``SimulatorControl``)
on the same server and behind the same token as the protocol, and this client calls them
on a :class:`~gangmaster.protocol.rm_client_grpc.GrpcRMClient`'s channel, deadline and token::

    rm = GrpcRMClient(address, security=security)
    SimulatorControl(rm).inject_fault("lose_node", host="dgx-003")
"""
from __future__ import annotations

from gangmaster.protocol import rm_validation as check
from gangmaster.protocol.rm_client_grpc import GrpcRMClient

from .proto import rmsim_pb2 as pb
from .proto import rmsim_pb2_grpc

__all__ = ["SimulatorControl"]


class SimulatorControl:
    """The simulator's service on a live RM that ``rm`` talks to."""

    def __init__(self, rm: GrpcRMClient):
        self.rm = rm
        self.stub = rmsim_pb2_grpc.SimulatorControlStub(rm.channel)

    def inject_fault(self, action: str, host: str = "", container_id: str = "", app_id: str = "",
                     exit_code: int = 1, text: str = "") -> None:
        """A fault of the one table (:data:`~.faults.FAULTS`), as a scenario makes it."""
        check.check_int(exit_code, "exit_code", *check.INT32)
        self.rm.call(self.stub.InjectFault, pb.FaultRequest(action=action, host=host, container_id=container_id,
                                                            app_id=app_id, exit_code=exit_code, text=text))

    def ping(self) -> None:
        """A bare unary call: the benchmark's baseline."""
        self.rm.call(self.stub.Ping, pb.Empty())
