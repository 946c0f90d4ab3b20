"""The live RM's state file: everything needed to come back after ``kill -9``.

The file is JSON, rewritten atomically (write a temporary file, then rename)
whenever the core's ``version`` moved. It holds the nodes (spec and health), the
queues, the applications (attempt, pending asks, blacklist, undelivered
container grants and statuses) and every container (booking, state, process id
and exit file). Restoring re-books every live container through the ledger, so
a corrupt file that would double-book a GPU is refused, not obeyed.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from gangmaster.am.private_files import open_private
from gangmaster.am.rm_protocol import (
    AppState, ContainerState, ContainerStatus, LaunchContext, NodeState, Rejection, ResourceRequest,
)
from gangmaster.conf.fields import ConfigError, decode_utf8, read_limited
from gangmaster.conf.limits import MAX_STATE_FILE_BYTES
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.fit import GPU_MILLI
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

from .core import Application, AskState, ContainerRecord, ResourceManager
from .ledger import Booking
from .queues import Queue

FORMAT = 1


def _ranges(p: PortRanges) -> list:
    return [list(r) for r in p.ranges]


def snapshot(core: ResourceManager) -> dict:
    ledger = core.ledger
    return {
        "format": FORMAT,
        "time": core.clock.now(),
        "next_app": core.next_app,
        "next_container": core.next_container,
        "node_changes": core.node_changes.seq,
        "nodes": [{"host": s.host, "rack": s.rack, "labels": sorted(s.labels), "gpu_type": s.gpu_type,
                   "topology": s.topology, "memory_mb": s.memory_mb, "vcores": s.vcores, "gpus": s.gpus,
                   "ports": _ranges(s.ports), "state": ledger.states[i].value, "report": ledger.health_reports[i],
                   "changed": int(core.node_changes.last[i])}
                  for i, s in enumerate(ledger.specs)],
        "queues": [{"name": q.name, "max_mem": q.max_mem, "max_mvc": q.max_mvc, "max_gpus": q.max_gpus,
                    "apps": list(q.apps)} for q in core.queues.values()],
        "apps": [_app(core, a) for a in core.apps.values()],
        "containers": [_container(c) for c in core.containers.values()],
    }


def _app(core: ResourceManager, a: Application) -> dict:
    return {
        "app_id": a.app_id, "seq": a.seq, "name": a.name, "queue": a.queue, "submitted_at": a.submitted_at,
        "max_attempts": a.max_attempts, "keep_containers": a.keep_containers, "am_expiry_s": a.am_expiry_s,
        "state": a.state.value, "attempt": a.attempt, "finished_at": a.finished_at,
        "final_status": a.final_status, "diagnostics": a.diagnostics, "response_id": a.response_id,
        "asks": [{**_resource_request(s.request), "remaining": s.remaining} for s in a.asks.values()],
        "blacklist": sorted(core.ledger.hosts[i] for i in a.blacklist),
        "out_allocated": [r.container_id for r in a.out_allocated],
        "out_completed": [[s.container_id, s.host, s.state.value, s.exit_status, s.diagnostics, s.request_id]
                          for s in a.out_completed],
        "out_rejected": [[j.request_id, j.reason] for j in a.out_rejected],
        "node_cursor": a.node_cursor,
    }


def _resource(r: ResourceDescriptor) -> dict:
    return {"memory_mb": r.memory_mb, "vcores": r.vcores, "gpus": r.gpus, "gpu_mask": r.gpu_mask,
            "ports": r.ports, "port_ranges": _ranges(r.port_ranges), "gpu_milli": r.gpu_milli}


def _resource_request(r: ResourceRequest) -> dict:
    return {"request_id": r.request_id, "resource": _resource(r.resource), "count": r.count, "host": r.host,
            "rack": r.rack, "relax_locality": r.relax_locality, "node_label": r.node_label, "priority": r.priority}


def _container(c: ContainerRecord) -> dict:
    b = c.booking
    launch = None
    if c.launch is not None:
        launch = {"command": list(c.launch.command), "env": [list(e) for e in c.launch.env]}
    return {"container_id": c.container_id, "app_id": c.app_id, "attempt": c.attempt, "node": c.node,
            "memory_mb": b.memory_mb, "mvcores": b.mvcores, "gpu_mask": b.gpu_mask, "gpu_milli": b.gpu_milli,
            "port_ranges": _ranges(b.port_ranges), "request_id": c.request_id, "allocated_at": c.allocated_at,
            "state": c.state.value, "exit_status": c.exit_status, "diagnostics": c.diagnostics,
            "started_at": c.started_at, "finished_at": c.finished_at, "launch": launch, "handle": dict(c.handle),
            "held": c.held}


def save(core: ResourceManager, path: str | Path) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with core.lock:
        data = snapshot(core)
    with open_private(tmp, "w") as f:  # launch environments hold barrier tokens
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read(path: str | Path) -> dict:
    """The state file's JSON: a regular file of at most MAX_STATE_FILE_BYTES, in our format."""
    text = decode_utf8(read_limited(path, MAX_STATE_FILE_BYTES, "MAX_STATE_FILE_BYTES"), str(path))
    try:
        data = json.loads(text, parse_constant=_not_a_number)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(str(path), "", f"a readable RM state file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(str(path), "format", f"RM state format {FORMAT}", data.get("format") if isinstance(data, dict) else data)
    moment = data.get("time")
    if isinstance(moment, bool) or not isinstance(moment, (int, float)) or moment < 0:
        raise ConfigError(str(path), "time", "the RM clock's time, a number of seconds >= 0", moment)
    return data


def load(path: str | Path, clock, node_manager) -> ResourceManager:
    data = read(path)
    try:
        return restore(data, clock, node_manager)
    except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError) as exc:   # any inconsistency
        raise ConfigError(str(path), "", f"a consistent RM state file ({type(exc).__name__}: {exc})") from None


def _not_a_number(constant: str) -> float:
    """json.loads takes NaN and Infinity by default; no count or time in the state is either."""
    raise ValueError(f"{constant} is not a number this file can hold")


def _resource_from(d: dict) -> ResourceDescriptor:
    return ResourceDescriptor(d["memory_mb"], d["vcores"], d["gpus"], d["gpu_mask"], d["ports"],
                              PortRanges.of(*d["port_ranges"]), d.get("gpu_milli", 0))


def restore(data: dict, clock, node_manager) -> ResourceManager:
    specs = [NodeSpec(n["host"], n["rack"], frozenset(n["labels"]), n["gpu_type"], n["topology"], n["memory_mb"],
                      n["vcores"], n["gpus"], PortRanges.of(*n["ports"])) for n in data["nodes"]]
    queues = [Queue(q["name"], q["max_mem"], q["max_mvc"], q["max_gpus"], apps=dict.fromkeys(q["apps"]))
              for q in data["queues"]]
    _check_counts(specs, queues)
    core = ResourceManager(specs, queues, clock=clock, node_manager=node_manager)
    for i, n in enumerate(data["nodes"]):
        core.ledger.set_state(i, NodeState(n["state"]), n["report"])
    core.next_app, core.next_container = data["next_app"], data["next_container"]
    for c in data["containers"]:
        launch = c["launch"]
        rec = ContainerRecord(
            c["container_id"], c["app_id"], c["attempt"], c["node"],
            Booking(c["memory_mb"], c["mvcores"], c["gpu_mask"], PortRanges.of(*c["port_ranges"]),
                    c.get("gpu_milli", 0)),
            c["request_id"], c["allocated_at"])
        rec.state, rec.exit_status, rec.diagnostics = ContainerState(c["state"]), c["exit_status"], c["diagnostics"]
        rec.started_at, rec.finished_at = c["started_at"], c["finished_at"]
        # (files written before the workload model also hold "duration_s" and "exit_code": unused)
        rec.launch = (LaunchContext(tuple(launch["command"]), tuple(tuple(e) for e in launch["env"])) if launch
                      else None)
        rec.handle = c["handle"]
        rec.held = c.get("held", False) is True   # files before "held" hold none
        core.containers[rec.container_id] = rec
    for a in data["apps"]:
        app = Application(a["app_id"], a["seq"], a["name"], a["queue"], a["submitted_at"], a["max_attempts"],
                          a["keep_containers"], a["am_expiry_s"])
        app.state, app.attempt, app.finished_at = AppState(a["state"]), a["attempt"], a["finished_at"]
        app.final_status, app.diagnostics = a["final_status"], a["diagnostics"]
        app.last_heartbeat, app.response_id = clock.now(), a["response_id"]
        for ask in a["asks"]:
            req = ResourceRequest(ask["request_id"], _resource_from(ask["resource"]), ask["count"], ask["host"],
                                  ask["rack"], ask["relax_locality"], ask["node_label"], ask["priority"])
            host_i = core.ledger.host_index[req.host] if req.host else None
            rack = core.ledger.rack_index[req.rack] if req.rack else None
            state = AskState(app, req, *core.compiled(req.resource), host_i, rack)
            state.remaining = ask["remaining"]
            app.asks[req.request_id] = state
        if app.asks:
            core.asking[app.app_id] = app
        app.blacklist = frozenset([core.ledger.host_index[h] for h in a["blacklist"]])
        app.out_allocated = [core.containers[cid] for cid in a["out_allocated"]]
        app.out_completed = [ContainerStatus(s[0], s[1], ContainerState(s[2]), s[3], s[4], s[5])
                             for s in a["out_completed"]]
        app.out_rejected = tuple([Rejection(rid, reason) for rid, reason in a["out_rejected"]])
        app.node_cursor = int(a.get("node_cursor", 0))
        core.apps[app.app_id] = app
    for app in sorted((app for app in core.apps.values() if app.state.finished), key=lambda app: app.finished_at):
        core.finished_apps[app.app_id] = app   # in the order they finished
    for rec in core.containers.values():   # in grant order, as the RM listed them
        owner = core.apps.get(rec.app_id)
        if owner is not None:
            owner.container_ids.append(rec.container_id)
    for rec in core.containers.values():
        if rec.state.finished and not rec.held:
            continue
        core.ledger.take(rec.node, rec.booking)          # refuses a double booking
        core.node_containers[rec.node].add(rec.container_id)
        app = core.apps[rec.app_id]
        if not rec.held:
            app.containers[rec.container_id] = rec
        core._charge(core.queues[app.queue], rec.booking.held)
        if rec.state is ContainerState.RUNNING:
            node_manager.adopt(rec)
        elif rec.held:                                   # it was being stopped when the RM went down
            node_manager.adopt_stopping(rec)
    for a in data["apps"]:
        app = core.apps[a["app_id"]]
        if app.state is AppState.RUNNING:
            core._arm_expiry(app)
    _check_consistent(core)
    if "node_changes" in data:
        core.node_changes.restore(int(data["node_changes"]), [int(n["changed"]) for n in data["nodes"]])
    else:   # a file from before node changes were kept: every AM hears of every node again
        core.node_changes.touch_all()
    core.version += 1
    return core


def _check_counts(specs: list[NodeSpec], queues: list[Queue]) -> None:
    """What rebuilding cannot catch by itself, since nodes and queues are plain records: a
    capacity or a queue limit that is not a count (null, negative: restored, it broke the
    first scheduling pass). Checked before the RM is built from them (it works out each
    queue's limit as it starts)."""
    def count(value, integer: bool = True) -> bool:
        kinds = int if integer else (int, float)
        return isinstance(value, kinds) and not isinstance(value, bool) and value >= 0

    for spec in specs:
        if not (count(spec.memory_mb) and count(spec.vcores, integer=False) and count(spec.gpus)):
            raise ValueError(f"node {spec.host}: memory_mb, vcores and gpus must be counts >= 0, got "
                             f"{spec.memory_mb!r}, {spec.vcores!r}, {spec.gpus!r}")
    for q in queues:
        limits = (q.max_mem, q.max_mvc, q.max_gpus)
        if not all(count(v) for v in limits):
            raise ValueError(f"queue {q.name}: limits must be integers >= 0, got {limits}")


def _check_consistent(core: ResourceManager) -> None:
    """A queue holding more than its limit (what its restored containers add up to)."""
    for q in core.queues.values():
        if q.used_mem > q.max_mem or q.used_mvc > q.max_mvc or q.gpu_milli_used > q.max_gpus * GPU_MILLI:
            raise ValueError(f"queue {q.name}: its containers exceed its limits {(q.max_mem, q.max_mvc, q.max_gpus)}")
