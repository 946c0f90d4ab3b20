"""The one interface the AM uses to talk to a ResourceManager.

Two implementations, chosen by whoever builds the AM, never by the AM itself:

* :class:`InProcessRMClient` wraps an RM core living in the same process (the
  simulator, in virtual time): every call is a direct method call, and the
  simulation driver advances the clock between the AM's heartbeats.
* :class:`~gangmaster.protocol.rm_client_grpc.GrpcRMClient` talks to
  ``gangmaster rm serve`` over gRPC (live, real time, real task processes).

Both raise the same :class:`~gangmaster.protocol.rm_protocol.RMError` subclasses
(``InvalidRequest``, ``NotFound``, ``WrongState``) and return the same
dataclasses from :mod:`gangmaster.protocol.rm_protocol`. Example::

    app_id = rm.submit(ApplicationSubmission("train", queue="default"))
    reg = rm.register(app_id)
    resp = rm.allocate(AllocateRequest(app_id, reg.attempt, asks=(
        ResourceRequest(1, ResourceDescriptor(4096, 2, gpu_mask=0b11), host="dgx1-000",
                        relax_locality=False),)))
    for c in resp.allocated:
        rm.start_container(c.container_id, LaunchContext.of(["python", "task.py"], env={...}))
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from functools import partial
from typing import Protocol

from .rm_protocol import (
    AllocateRequest, AllocateResponse, ApplicationReport, ApplicationSubmission, ContainerLaunch, ContainerStatus,
    LaunchContext, NodeReport, RegisterResponse, StartContainers, StartRefused, WrongState,
)


class RMClient(ABC):
    """YARN's YarnClient + AMRMClient + NMClient behind one object."""

    # ---- client side (YarnClient)
    @abstractmethod
    def submit(self, submission: ApplicationSubmission) -> str:
        """Submit an application to a queue; returns its id (state ACCEPTED)."""

    @abstractmethod
    def kill(self, app_id: str, diagnostics: str = "") -> None:
        """Kill an application and every container it holds."""

    @abstractmethod
    def application_report(self, app_id: str) -> ApplicationReport: ...

    @abstractmethod
    def cluster_nodes(self, usable_only: bool = False) -> list[NodeReport]:
        """Every node with its state, capacity and free resources (GPU mask, ports)."""

    # ---- AM side (AMRMClient)
    @abstractmethod
    def register(self, app_id: str) -> RegisterResponse:
        """Register the AM attempt; the response names the attempt to put in every
        :class:`AllocateRequest` and the containers kept from previous attempts."""

    @abstractmethod
    def allocate(self, request: AllocateRequest) -> AllocateResponse:
        """One heartbeat: new asks, cancels, releases, blacklist changes in; newly
        allocated containers, completed container statuses, node updates, rejected
        and still-pending asks out."""

    @abstractmethod
    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED",
               diagnostics: str = "") -> None:
        """Unregister: the application ends, its remaining containers are killed."""

    # ---- NodeManager side (NMClient)
    @abstractmethod
    def start_containers(self, request: StartContainers) -> StartRefused | None:
        """Start a batch of containers in order, their shared launch sent and checked once;
        stops at the first that cannot be started and says which and why (None: all started)."""

    def start_container(self, container_id: str, launch: LaunchContext) -> None:
        """Start one container: a batch of one, its refusal raised."""
        refused = self.start_containers(StartContainers((ContainerLaunch(container_id, launch),)))
        if refused is not None:
            raise refused.error

    @abstractmethod
    def stop_container(self, container_id: str) -> None: ...

    @abstractmethod
    def container_status(self, container_id: str) -> ContainerStatus: ...

    def notify_preemption(self, container_id: str) -> float:
        """Forward the RM's preemption notice to the container's task (YARN: the AM signals
        its container through the NodeManager); the deadline. An RM whose transport does not
        carry preemption never sends a notice, so it is never called there."""
        raise WrongState(f"container {container_id}: this RM client cannot forward a preemption notice")

    def close(self) -> None:
        """Release the connection (nothing to do in process)."""

    def __enter__(self) -> "RMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RMCore(Protocol):
    """What :class:`InProcessRMClient` needs of the core (``gangmaster.tools.rmsim.core.
    ResourceManager`` provides it; the AM layer does not import the tools layer).
    ``checked=True``: the call's form was checked already (see :class:`InProcessRMClient`)."""

    def submit(self, submission: ApplicationSubmission, checked: bool = False) -> str: ...
    def kill(self, app_id: str, diagnostics: str = "") -> None: ...
    def application_report(self, app_id: str) -> ApplicationReport: ...
    def cluster_nodes(self, usable_only: bool = False) -> list[NodeReport]: ...
    def register(self, app_id: str, checked: bool = False) -> RegisterResponse: ...
    def allocate(self, request: AllocateRequest, checked: bool = False) -> AllocateResponse: ...
    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED", diagnostics: str = "",
               checked: bool = False) -> None: ...
    def start_containers(self, request: StartContainers, checked: bool = False) -> StartRefused | None: ...
    def stop_container(self, container_id: str) -> None: ...
    def container_status(self, container_id: str) -> ContainerStatus: ...
    def notify_preemption(self, container_id: str) -> float: ...


class InProcessRMClient(RMClient):
    """Direct calls into an RM core in this process (simulation, virtual time).

    ``trusted``: every call comes from the AM's own code in this process, which builds its
    requests from a job spec already checked (a simulation driver such as trace replay).
    The RM then skips re-checking their *form* (types, number ranges, names, list and
    launch sizes: what protects it from a malformed message) and still checks what they
    *ask* against its state (known hosts, ids, application and container states, what
    can ever fit). Off by default; requests from the wire (``gangmaster rm serve``'s gRPC
    server) are always checked in full, whatever any client says."""

    def __init__(self, core: RMCore, trusted: bool = False):
        self.core = core
        self.trusted = trusted
        # The calls an AM makes for every job go straight to the core, ``checked`` bound once
        # (partials, called in C), not through methods that only forward them: a replay makes
        # six a job. The methods of the same names below are what they stand for.
        self.submit = partial(core.submit, checked=trusted)
        self.register = partial(core.register, checked=trusted)
        self.allocate = partial(core.allocate, checked=trusted)
        self.finish = partial(core.finish, checked=trusted)
        self.start_containers = partial(core.start_containers, checked=trusted)

    def submit(self, submission: ApplicationSubmission) -> str:
        return self.core.submit(submission, self.trusted)

    def kill(self, app_id: str, diagnostics: str = "") -> None:
        self.core.kill(app_id, diagnostics)

    def application_report(self, app_id: str) -> ApplicationReport:
        return self.core.application_report(app_id)

    def cluster_nodes(self, usable_only: bool = False) -> list[NodeReport]:
        return self.core.cluster_nodes(usable_only)

    def register(self, app_id: str) -> RegisterResponse:
        return self.core.register(app_id, self.trusted)

    def allocate(self, request: AllocateRequest) -> AllocateResponse:
        return self.core.allocate(request, self.trusted)

    def finish(self, app_id: str, attempt: int, final_status: str = "SUCCEEDED", diagnostics: str = "") -> None:
        self.core.finish(app_id, attempt, final_status, diagnostics, self.trusted)

    def start_containers(self, request: StartContainers) -> StartRefused | None:
        return self.core.start_containers(request, self.trusted)

    def stop_container(self, container_id: str) -> None:
        self.core.stop_container(container_id)

    def container_status(self, container_id: str) -> ContainerStatus:
        return self.core.container_status(container_id)

    def notify_preemption(self, container_id: str) -> float:
        return self.core.notify_preemption(container_id)
