"""The fault actions, in one table: what a scenario step (``do: lose_node``), ``gangmaster rm
fault`` and the gRPC ``InjectFault`` call can do to the RM, and how each is done.

All three read :data:`FAULTS`, so an action added here is there in all three (before this
table each kept its own list, and ``kill_app`` was missing from two of them). A fault names
its target as the scenario and the wire both do (a host, an application, a container);
:func:`apply` acts on the RM and says what it acted on::

    apply(rm, Fault("kill_container", app="app_0001", host="dgx1-001"), "injected")
    # -> the container it killed: the application's first live one on that host

The default text of an action names where the fault came from (``"node lost (scenario)"``,
``"node lost (injected)"``): the ``origin``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.protocol.reasons import reason
from gangmaster.protocol.rm_protocol import NotFound

from .preemption import DEFAULT_GRACE_S


@dataclass(frozen=True)
class Fault:
    """One fault to apply: the action and its target (empty: not given)."""

    action: str
    host: str = ""
    container: str = ""
    app: str = ""
    exit_code: int = 1
    text: str = ""
    grace_s: float = DEFAULT_GRACE_S   # preempt_app: seconds from the notice to the containers' end


@dataclass(frozen=True)
class FaultAction:
    """An action of the table: ``target`` is what it must name (``host``, ``app``, or
    ``container``: a container id, or an application and optionally a host); ``fields``
    the scenario fields it takes besides ``at`` and ``do``; ``act(rm, fault, origin)`` does
    it and returns what it acted on."""

    name: str
    target: str
    fields: tuple[str, ...]
    act: Callable[..., str]
    help: str


def _pick(rm, fault: Fault) -> str:
    """The container a fault names: its id, else its application's first live container (in
    id order), on its host when it names one. Raises NotFound when there is none."""
    if fault.container or not fault.app:
        return fault.container   # (an empty id: the RM names the missing field)
    with rm.lock:
        app = rm.apps.get(fault.app)
        for cid in sorted(app.containers) if app is not None else ():
            if not fault.host or rm.ledger.hosts[app.containers[cid].node] == fault.host:
                return cid
    raise NotFound(f"no live container of {fault.app}" + (f" on {fault.host}" if fault.host else ""))


def _lose_node(rm, f: Fault, origin: str) -> str:
    rm.lose_node(f.host, f.text or f"node lost ({origin})")
    return f.host


def _mark_unhealthy(rm, f: Fault, origin: str) -> str:
    rm.mark_unhealthy(f.host, f.text or f"blacklisted ({origin})")
    return f.host


def _restore_node(rm, f: Fault, origin: str) -> str:
    rm.restore_node(f.host)
    return f.host


def _kill_container(rm, f: Fault, origin: str) -> str:
    cid = _pick(rm, f)
    rm.kill_container(cid, f.text or f"killed ({origin})")
    return cid


def _fail_container(rm, f: Fault, origin: str) -> str:
    cid = _pick(rm, f)
    rm.fail_container(cid, f.exit_code, f.text)   # (no text: the RM names the exit code)
    return cid


def _kill_am(rm, f: Fault, origin: str) -> str:
    rm.kill_am(f.app, f.text or f"AM process killed ({origin})")
    return f.app


def _preempt_app(rm, f: Fault, origin: str) -> str:
    rm.preempt(f.app, f.grace_s, f.text or reason(R.PREEMPTED_BY_FAULT, origin=origin))   # (an operator's text is kept)
    return f.app


def _kill_app(rm, f: Fault, origin: str) -> str:
    rm.kill(f.app, f.text or f"killed ({origin})")
    return f.app


_CONTAINER_FIELDS = ("container", "app", "host")

#: Every fault action, by name, in the order help texts list them.
FAULTS: dict[str, FaultAction] = {a.name: a for a in (
    FaultAction("lose_node", "host", ("host", "report"), _lose_node,
                "the node is lost: its containers end KILLED with exit status NODE_LOST"),
    FaultAction("mark_unhealthy", "host", ("host", "report"), _mark_unhealthy,
                "the node is blacklisted: no new containers, running ones keep running"),
    FaultAction("restore_node", "host", ("host",), _restore_node, "the node is usable again"),
    FaultAction("kill_container", "container", (*_CONTAINER_FIELDS, "diagnostics"), _kill_container,
                "the container ends KILLED"),
    FaultAction("fail_container", "container", (*_CONTAINER_FIELDS, "exitCode", "diagnostics"), _fail_container,
                "the container ends FAILED with the exit code (default 1)"),
    FaultAction("kill_am", "app", ("app", "diagnostics"), _kill_am,
                "the AM attempt dies; a new attempt may register while attempts remain"),
    FaultAction("kill_app", "app", ("app", "diagnostics"), _kill_app, "the application is killed"),
    FaultAction("preempt_app", "app", ("app", "graceSeconds", "diagnostics"), _preempt_app,
                "the application's whole gang is preempted: its AM is told, and its containers end PREEMPTED "
                f"graceSeconds later (default {DEFAULT_GRACE_S:g}; over gRPC always the default)"),
)}


def apply(rm, fault: Fault, origin: str) -> str:
    """Do ``fault`` to ``rm`` (a :class:`~.core.ResourceManager`); what it acted on. Raises
    the RM's errors (an unknown host or application, NotFound for no live container) and
    KeyError for an action not in :data:`FAULTS` (the readers check names first)."""
    return FAULTS[fault.action].act(rm, fault, origin)
