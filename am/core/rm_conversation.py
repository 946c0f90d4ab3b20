"""The AM's conversation with the RM: register, heartbeat, unregister.

As YARN's ``AMRMClientAsync``, the transport is apart from the reactions: one
:meth:`RMConversation.heartbeat` is one round of the loop. The AM's callbacks
(:class:`RMCallbacks`) plan what to ask first (:meth:`RMCallbacks.before_heartbeat`) and
make the request (:meth:`RMCallbacks.request`), the RM's answer is handed to them item by
item, in the order the answer holds them: node updates, the nodes reserved for other gangs
and the reservation held for its own (when there are some, or were), containers allocated,
asks rejected, asks still pending, a preemption notice, containers completed; then they act
on the whole answer (:meth:`RMCallbacks.after_heartbeat`: the gangs granted whole launch).
Once the callbacks say the job must end (:attr:`RMCallbacks.done`), nothing more is sent or
handed out in that round.
When the RM no longer accepts this AM attempt (``WrongState``), the callbacks hear why
instead (:meth:`RMCallbacks.on_shutdown_request`): the application ended (its report), or
a newer AM attempt took over (no report).
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

from gangmaster.protocol.rm_client import RMClient
from gangmaster.protocol.rm_protocol import (AllocateRequest, ApplicationReport, AppState, Container, ContainerStatus,
                                             HeldReservation, NodeReport, PendingAsk, PreemptionMessage, PreemptionOutlook,
                                             RegisterResponse, Rejection, ReservedNode, RMError, WrongState)


class RMCallbacks(Protocol):
    """What the AM does with each item of an allocate response."""

    done: bool   # the job must end: nothing more is sent, the rest of the response is not read

    def before_heartbeat(self, now: float) -> None: ...

    def request(self) -> AllocateRequest: ...

    def on_nodes_updated(self, updates: Sequence[NodeReport]) -> None: ...

    def on_nodes_reserved(self, nodes: Sequence[ReservedNode]) -> None: ...

    def on_reservation(self, held: HeldReservation | None, now: float) -> None: ...

    def on_preemption_outlook(self, outlook: PreemptionOutlook | None, now: float) -> None: ...

    def on_containers_allocated(self, containers: Sequence[Container], now: float) -> None: ...

    def on_requests_rejected(self, rejections: Sequence[Rejection]) -> None: ...

    def on_requests_pending(self, pending: Sequence[PendingAsk]) -> None: ...

    def on_preemption(self, message: PreemptionMessage, now: float) -> None: ...

    def on_containers_completed(self, statuses: Sequence[ContainerStatus], now: float) -> None: ...

    def on_shutdown_request(self, ended: ApplicationReport | None, why: WrongState) -> None: ...

    def after_heartbeat(self, now: float) -> None: ...


class RMConversation:
    """One AM attempt's conversation with the RM about application ``app_id``."""

    __slots__ = ("rm", "app_id", "attempt", "reserved", "holding", "preempting")

    def __init__(self, rm: RMClient, app_id: str):
        self.rm, self.app_id = rm, app_id
        self.attempt = 0   # this AM's attempt, once registered
        self.reserved = False   # the last answer named nodes reserved for other gangs
        self.holding = False    # the last answer named a reservation held for this application's gang
        self.preempting = False   # the last answer named gangs preempted for this application's gang

    def register(self) -> RegisterResponse:
        registration = self.rm.register(self.app_id)
        self.attempt = registration.attempt
        return registration

    def heartbeat(self, callbacks: RMCallbacks, now: float) -> bool:
        """One round (see the module docstring): ``callbacks`` plan and make the request, the
        RM's answer is handed to them, and they act on it; False when the RM no longer accepts
        this AM attempt (the callbacks heard why)."""
        callbacks.before_heartbeat(now)
        if callbacks.done:
            return True
        try:
            response = self.rm.allocate(callbacks.request())
        except WrongState as exc:
            callbacks.on_shutdown_request(self.ended_application(), exc)
            return False
        if response.node_updates:
            callbacks.on_nodes_updated(response.node_updates)
        if response.reserved or self.reserved:   # (each answer names them all: none is news too)
            self.reserved = bool(response.reserved)
            callbacks.on_nodes_reserved(response.reserved)
        if response.reservation is not None or self.holding:
            self.holding = response.reservation is not None
            callbacks.on_reservation(response.reservation, now)
        if response.outlook is not None or self.preempting:
            self.preempting = response.outlook is not None
            callbacks.on_preemption_outlook(response.outlook, now)
        if response.allocated:
            callbacks.on_containers_allocated(response.allocated, now)
        if response.rejected:
            callbacks.on_requests_rejected(response.rejected)
            if callbacks.done:
                return True
        if response.pending:
            callbacks.on_requests_pending(response.pending)
        if response.preemption is not None:
            callbacks.on_preemption(response.preemption, now)
        if response.completed:
            callbacks.on_containers_completed(response.completed, now)
        callbacks.after_heartbeat(now)
        return True

    def ended_application(self) -> ApplicationReport | None:
        """The RM's report of the application when the RM has ended it, else None."""
        try:
            report = self.rm.application_report(self.app_id)
        except RMError:
            return None
        return report if report.state.finished else None

    def unregister(self, succeeded: bool, reason: str, log: Callable[[str], None]) -> None:
        """Tell the RM the application ended (an RM error is logged, not raised)."""
        try:
            self.rm.finish(self.app_id, self.attempt, "SUCCEEDED" if succeeded else "FAILED", reason)
        except RMError as exc:
            log(f"unregistering from the RM: {exc}")


def ended_by_rm(report: ApplicationReport) -> tuple[str, str]:
    """The job's (outcome, reason) when the RM ended its application without the AM (a
    client killed it, or its AM attempts ran out): ``killed``, or the final status the RM
    gave (``failed`` when it gave none a job can end with), and the RM's diagnostics."""
    outcome = {AppState.KILLED: "killed", AppState.FINISHED: report.final_status.lower()}.get(report.state)
    if outcome not in ("killed", "succeeded", "failed"):
        outcome = "failed"
    return outcome, report.diagnostics or f"the ResourceManager ended {report.app_id} ({report.state.value})"
