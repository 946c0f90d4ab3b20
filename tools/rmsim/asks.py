"""What an AM's heartbeat asks, checked against the RM's state before anything of it is
applied (a refused call changes nothing): its new asks (known hosts and racks, ids not
pending twice, the application's size within RM_MAX_CONTAINERS_PER_APP), its releases,
its blacklist; each ask compiled once into what the scheduler books (:meth:`AskIntake.
compiled`); and the asks that can never fit, with why.

The form of a request (types, ranges, names, list lengths) is :mod:`gangmaster.am.
rm_validation`'s to check; this module checks what it asks against the cluster.
"""
from __future__ import annotations

import numpy as np

from gangmaster.protocol.reasons import Reason, reason
from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.protocol.rm_protocol import AllocateRequest, InvalidRequest, ResourceRequest
from gangmaster.protocol import rm_validation as check
from gangmaster.conf import limits
from gangmaster.selectors.fit import Demand
from gangmaster.selectors.identity_memo import IdentityMemo
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

from .ledger import Booking, NodeLedger, exact_booking
from .queue_books import QueueBooks
from .records import Application, AskState, ContainerRecord

#: The most compiled ask resources :meth:`AskIntake.compiled` keeps (then it starts over).
COMPILED_MEMO = 4096


class AskIntake:
    """Checks an allocate's asks, releases and blacklist against the cluster (``ledger``),
    the queues (``books``) and the containers (``records``, by id)."""

    def __init__(self, ledger: NodeLedger, books: QueueBooks, records: dict[str, ContainerRecord]):
        self.ledger, self.books, self.records = ledger, books, records
        #: the largest node's resources (what an AM hears at registration)
        self.max_allocation = ResourceDescriptor(
            int(ledger.memory_capacity.max()), int(ledger.mvcores_capacity.max()) / 1000.0,
            int(ledger.gpu_capacity.max()))
        #: an ask's resource -> its compiled Demand and exact booking (a gang's asks share a few
        #: resources, and a trace's jobs a few thousand), by the descriptor's identity and by its
        #: value, each bounded by COMPILED_MEMO
        self._by_id: IdentityMemo[tuple[Demand, Booking | None]] = IdentityMemo(COMPILED_MEMO)
        self._by_value: dict[ResourceDescriptor, tuple[Demand, Booking | None]] = {}

    def compiled(self, resource: ResourceDescriptor) -> tuple[Demand, Booking | None]:
        """An ask's resource as the scheduler books it: its :class:`Demand`, and the booking
        every container of it holds when it names exactly what it takes
        (:func:`~gangmaster.tools.rmsim.ledger.exact_booking`), else None. Worked out once
        per distinct descriptor: found by its identity (a replay's AMs ask with the same few
        descriptor objects), else by its value (a gRPC call decodes fresh ones)."""
        answer = self._by_id.get(id(resource))
        if answer is None:
            values = self._by_value
            answer = values.get(resource)
            if answer is None:
                if len(values) >= COMPILED_MEMO:
                    values.clear()
                need = Demand.of(resource)
                answer = values[resource] = (need, exact_booking(resource, need))
            self._by_id.put(id(resource), (resource,), answer)
        return answer

    def asks(self, app: Application, request: AllocateRequest) -> tuple[list[AskState], int]:
        """The new asks, checked against the RM's state, and how many containers they ask for."""
        out = []
        seen = set()
        asked = 0
        ledger = self.ledger
        hosts = ledger.host_index
        for k, req in enumerate(request.asks):
            if req.request_id in app.asks or req.request_id in seen:
                raise InvalidRequest(f"asks[{k}].request_id: {req.request_id} is already pending for {app.app_id}")
            seen.add(req.request_id)
            host_i = None
            if req.host:   # (the field's name is spelled out only for an unknown host)
                host_i = hosts.get(req.host)
                if host_i is None:
                    self.known_host(req.host, f"asks[{k}].host")   # raises, naming it
            rack_code = None
            if req.rack:
                rack_code = ledger.rack_index.get(req.rack)
                if rack_code is None:
                    raise InvalidRequest(f"asks[{k}].rack: unknown rack {req.rack!r}; racks: "
                                         f"{', '.join(ledger.rack_names)}")
                if host_i is not None and int(ledger.rack_of[host_i]) != rack_code:
                    raise InvalidRequest(f"asks[{k}].rack: host {req.host} is in rack "
                                         f"{ledger.specs[host_i].rack}, not {req.rack}")
            need, exact = self.compiled(req.resource)
            out.append(AskState(app, req, need, exact, host_i, rack_code))
            asked += req.count
        return out, asked

    def check_size(self, app: Application, request: AllocateRequest, asked: int,
                   releases: list[ContainerRecord]) -> None:
        """Refuse new asks (``asked`` containers) that would have the application hold and
        wait for more than RM_MAX_CONTAINERS_PER_APP containers (what it holds, minus what
        it releases, plus what it still waits for after its cancels, plus the new asks)."""
        total = len(app.containers) - len(releases) + asked
        if app.asks:
            cancelled = set(request.cancel)
            total += sum([a.remaining for rid, a in app.asks.items() if rid not in cancelled])
        if total > limits.RM_MAX_CONTAINERS_PER_APP:
            raise InvalidRequest(f"asks: application {app.app_id} would hold and wait for {total} containers, "
                                 f"over the limit of {limits.RM_MAX_CONTAINERS_PER_APP} (RM_MAX_CONTAINERS_PER_APP)")

    def releases(self, app: Application, request: AllocateRequest) -> list[ContainerRecord]:
        """The live containers to release, each once (a container named twice is released once)."""
        out: dict[str, ContainerRecord] = {}
        for k, cid in enumerate(request.releases):
            rec = self.records.get(cid)
            if rec is None or rec.app_id != app.app_id:
                raise InvalidRequest(f"releases[{k}]: {cid!r} is not a container of {app.app_id}")
            if not rec.state.finished:
                out[cid] = rec
        return list(out.values())

    def host_field(self, host: str, field_name: str) -> int:
        """The node of ``host``, a name not checked yet."""
        check.check_name(host, field_name)
        return self.known_host(host, field_name)

    def known_host(self, host: str, field_name: str) -> int:
        """The node of ``host``, a name already checked (``check_allocate`` checks a whole call's)."""
        i = self.ledger.host_index.get(host)
        if i is None:
            raise InvalidRequest(f"{field_name}: unknown host {host!r}")
        return i

    def why_never(self, app: Application, ask: AskState) -> Reason | None:
        """Why ``ask`` can never fit (its queue's limit, a label or host that cannot hold it,
        no node large enough), or None."""
        need, req, ledger = ask.need, ask.request, self.ledger
        queue_reason = self.books.queues[app.queue].why_never(need.memory_mb, need.mvcores, need.gpus, need.gpu_milli)
        if queue_reason:
            return queue_reason
        scope = None
        if req.node_label:
            scope = ledger.label_nodes.get(req.node_label)
            if scope is None:
                return reason(R.NO_NODE_LABELLED, label=req.node_label)
        if ask.host_i is not None:
            host_reason = ledger.why_never(ask.host_i, need)
            if req.node_label and not scope[ask.host_i]:
                host_reason = reason(R.HOST_NOT_LABELLED, host=req.host, label=req.node_label)
            if host_reason is None:
                return None
            if not req.relax_locality:
                return host_reason
        if ask.rack_code is not None and not req.relax_locality:
            rack_scope = ledger.rack_of == ask.rack_code
            scope = rack_scope if scope is None else scope & rack_scope
        fits = ledger.nodes_by_capacity(need, scope)
        for i in np.flatnonzero(fits):
            if ledger.why_never(int(i), need) is None:
                return None
        return reason(R.NEVER_FITS, resource=str(req.resource), rack=req.rack if scope is not None and req.rack else "",
                      largest=str(self.max_allocation))

    # ---- asks in the state file (inside each application's entry)
    @staticmethod
    def saved(app: Application) -> list[dict]:
        return [{**_saved_request(s.request), "remaining": s.remaining} for s in app.asks.values()]

    def restored(self, app: Application, saved: list[dict]) -> list[AskState]:
        out = []
        for ask in saved:
            req = ResourceRequest(ask["request_id"], _resource_from(ask["resource"]), ask["count"], ask["host"],
                                  ask["rack"], ask["relax_locality"], ask["node_label"], ask["priority"])
            host_i = self.ledger.host_index[req.host] if req.host else None
            rack = self.ledger.rack_index[req.rack] if req.rack else None
            state = AskState(app, req, *self.compiled(req.resource), host_i, rack)
            state.remaining = ask["remaining"]
            out.append(state)
        return out


def _saved_request(r: ResourceRequest) -> dict:
    d = r.resource
    resource = {"memory_mb": d.memory_mb, "vcores": d.vcores, "gpus": d.gpus, "gpu_mask": d.gpu_mask,
                "ports": d.ports, "port_ranges": [list(p) for p in d.port_ranges.ranges], "gpu_milli": d.gpu_milli}
    return {"request_id": r.request_id, "resource": resource, "count": r.count, "host": r.host, "rack": r.rack,
            "relax_locality": r.relax_locality, "node_label": r.node_label, "priority": r.priority}


def _resource_from(d: dict) -> ResourceDescriptor:
    return ResourceDescriptor(d["memory_mb"], d["vcores"], d["gpus"], d["gpu_mask"], d["ports"],
                              PortRanges.of(*d["port_ranges"]), d.get("gpu_milli", 0))
