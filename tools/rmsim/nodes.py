"""The nodes as the RM reports them: their health (YARN's NodesListManager and
NMLivelinessMonitor, told by faults here), their reports, and which of them changed since
an AM last heard (its ``node_updates``).

What a node holds is the ledger's (:mod:`.ledger`) and which containers run on it the
containers' (:mod:`.containers`); this collaborator owns the node states' changes and the
reports made of all three. In the state file its part is the ``nodes`` list (spec, state,
health report, last change) and the change counter ``node_changes``.
"""
from __future__ import annotations

from typing import Callable

from gangmaster.protocol.rm_protocol import NodeReport, NodeState
from gangmaster.conf import limits
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

from .events import Events
from .ledger import NodeLedger
from .node_changes import NodeChanges
from .records import Application

#: The most reports :meth:`Nodes.report` keeps per node (then that node's start over).
REPORT_MEMO = 32


class Nodes:
    """Node states and reports. ``changes``: which nodes changed when (what each AM's
    node_updates carry; the containers touch it too); ``node_containers``: the containers on each node (the
    containers' own list, read here); ``wake``: tells the scheduler a node changed."""

    def __init__(self, ledger: NodeLedger, changes: NodeChanges, node_containers: list[set], events: Events,
                 wake: Callable[[], None]):
        self.ledger, self.changes, self.node_containers, self.events, self.wake = (
            ledger, changes, node_containers, events, wake)
        self._capacity: list = [None] * len(ledger)     # each node's, as node reports carry it (once built)
        #: per node: what it reports in each state it was reported in (see report)
        self._reports: list[dict[tuple, NodeReport]] = [{} for _ in range(len(ledger))]
        self.version = 0

    def set_state(self, i: int, state: NodeState, report: str, end_containers: Callable[[int], None] | None = None
                  ) -> None:
        """Node ``i`` is now ``state`` (LOST, UNHEALTHY, RUNNING again), for ``report``; the
        others hear of it (:meth:`changed`) after ``end_containers(i)`` ended what it ran, if
        given (a lost node's containers end first)."""
        self.ledger.set_state(i, state, report)
        if end_containers is not None:
            end_containers(i)
        self.changed(i)

    def changed(self, i: int) -> None:
        """Node ``i`` changed state: the scheduler, the AMs' node updates and the subscribers hear of it."""
        ledger = self.ledger
        self.wake()
        self.version += 1
        self.changes.touch(i)
        self.events.emit("node_state", host=ledger.hosts[i], detail=f"{ledger.states[i].value} {ledger.health_reports[i]}")

    def report(self, i: int) -> NodeReport:
        """Node ``i`` as it is now. A report is a value made of the node's state, health,
        container count and free resources: a node goes back and forth between a few of
        those (a job starts on it, another ends), so the report of each is made once and
        given again (a replay's nodes are reported some 1.7 times a job, four in five times
        in a state they were reported in before), at most :data:`REPORT_MEMO` per node.
        A node whose GPUs hold shares is reported afresh (its free milli-GPU per GPU is
        part of its report). A node with no container books nothing (every booking is a
        container's, on its node until given back: the audit holds it): all of it is free,
        and its report is a matter of its state and health alone."""
        ledger = self.ledger
        containers = len(self.node_containers[i])
        if not containers:
            key = (ledger.states[i], ledger.health_reports[i])
        elif ledger.gpus_shared.item(i):
            return self._new_report(i, ledger.gpu_milli_free_of(i))
        else:
            key = (ledger.memory_free.item(i), ledger.mvcores_free.item(i), ledger.gpu_free_mask.item(i),
                   ledger.ports_free[i].ranges, containers, ledger.states[i], ledger.health_reports[i])
        reports = self._reports[i]
        report = reports.get(key)
        if report is None:
            if len(reports) >= REPORT_MEMO:
                reports.clear()
            report = reports[key] = self._new_report(i, None)
        return report

    def _new_report(self, i: int, gpu_milli_free: tuple[int, ...] | None) -> NodeReport:
        """Node ``i``'s report, with the milli-GPU free per GPU its report carries when some
        GPU of it holds shares (None when none does)."""
        ledger = self.ledger
        spec = ledger.specs[i]
        capacity = self._capacity[i]
        if capacity is None:
            capacity = self._capacity[i] = spec.capacity
        state, health, containers = ledger.states[i], ledger.health_reports[i], len(self.node_containers[i])
        # No container on it books nothing of it (as report says): all of it is free.
        free = self._free_of_unused(i, capacity) if not containers else ledger.free(i)
        return NodeReport(spec.host, spec.rack, state, capacity, free, spec.labels, spec.gpu_type, spec.topology,
                          containers, health, gpu_milli_free, spec.domains)

    def _free_of_unused(self, i: int, capacity: ResourceDescriptor) -> ResourceDescriptor:
        """What an unused node has free: all of it. Its capacity itself when the ledger holds
        that exactly (vcores in whole millis), so a cluster's first report builds no copies."""
        ledger = self.ledger
        if (capacity.memory_mb == ledger.memory_capacity.item(i)
                and capacity.vcores == ledger.mvcores_capacity.item(i) / 1000.0
                and capacity.gpu_mask == ledger.gpu_capacity_mask.item(i)
                and capacity.port_ranges == ledger.port_capacity[i]):
            return capacity
        return ledger.free(i)

    def all(self, usable_only: bool) -> list[NodeReport]:
        return [self.report(i) for i in range(len(self.ledger)) if not usable_only or self.ledger.usable[i]]

    def changed_since(self, cursor: int | None) -> tuple[list[NodeReport], int]:
        """The reports of every node that changed after change number ``cursor``, and the
        cursor to pass next time (``None``: no reports, the cursor of now; changes are
        recorded from then on)."""
        if cursor is None:
            self.changes.record()
            return [], self.changes.seq
        nodes, cursor = self.changes.since(cursor, len(self.ledger))
        return [self.report(i) for i in nodes], cursor

    def updates_for(self, app: Application) -> tuple[NodeReport, ...]:
        """Every node that changed since the application's previous response (at most
        RM_MAX_NODE_UPDATES; the rest come in the next ones)."""
        nodes, app.node_cursor = self.changes.since(app.node_cursor, limits.RM_MAX_NODE_UPDATES)
        return tuple(self.report(i) for i in nodes)

    # ---- the state file's part
    def snapshot(self) -> list[dict]:
        ledger, last = self.ledger, self.changes.last
        return [{"host": s.host, "rack": s.rack, "labels": sorted(s.labels), "gpu_type": s.gpu_type,
                 "topology": s.topology, "memory_mb": s.memory_mb, "vcores": s.vcores, "gpus": s.gpus,
                 "ports": [list(r) for r in s.ports.ranges], "state": ledger.states[i].value,
                 "report": ledger.health_reports[i], "changed": int(last[i]),
                 **({"domains": [list(d) for d in s.domains]} if s.domains else {})}
                for i, s in enumerate(ledger.specs)]

    @staticmethod
    def specs_from(saved: list[dict]) -> list[NodeSpec]:
        """The nodes a state file holds, as the RM is built with them."""
        return [NodeSpec(n["host"], n["rack"], frozenset(n["labels"]), n["gpu_type"], n["topology"],
                         n["memory_mb"], n["vcores"], n["gpus"], PortRanges.of(*n["ports"]),
                         tuple(map(tuple, n.get("domains", ())))) for n in saved]

    def restore_states(self, saved: list[dict]) -> None:
        for i, n in enumerate(saved):
            self.ledger.set_state(i, NodeState(n["state"]), n["report"])

    def restore_changes(self, data: dict) -> None:
        """The change counter and each node's last change; a file from before node changes
        were kept: every AM hears of every node again."""
        if "node_changes" in data:
            self.changes.restore(int(data["node_changes"]), [int(n["changed"]) for n in data["nodes"]])
        else:
            self.changes.touch_all()
