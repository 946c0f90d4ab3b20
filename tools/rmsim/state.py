"""The live RM's state file: everything needed to come back after ``kill -9``.

The file is JSON, rewritten atomically (write a temporary file, then rename)
whenever the RM's ``version`` moved. Each collaborator of the RM writes and reads
its own part: the nodes (spec, health, last change: :mod:`.nodes`), the queues
(:mod:`.queue_books`), the applications (attempt, blacklist, undelivered grants and
statuses, the priority, gang and duration they declared: :mod:`.applications`; their
pending asks: :mod:`.asks`) and every container (booking, state, process id and exit
file: :mod:`.containers`); this module keeps the
file itself (its format, its size limit, writing it whole) and the order of restoring.
Restoring re-books every live container through the ledger, so a corrupt file that
would double-book a GPU is refused, not obeyed. A reserving queue's reservations are not
written: they are planned from the applications' declared gangs and durations and the
containers' starts, all kept, so the restored RM plans them again as it comes back and holds
the same nodes for the same gangs.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from gangmaster.protocol.private_files import open_private
from gangmaster.conf.fields import ConfigError, decode_utf8, read_limited
from gangmaster.conf.limits import MAX_STATE_FILE_BYTES
from gangmaster.selectors.cluster import NodeSpec

from .core import ResourceManager
from .nodes import Nodes
from .queue_books import QueueBooks
from .queues import Queue

FORMAT = 1


def snapshot(core: ResourceManager) -> dict:
    return {
        "format": FORMAT,
        "time": core.clock.now(),
        "next_app": core.applications.next_seq,
        "next_container": core.granted.next_id,
        "node_changes": core.node_changes.seq,
        "nodes": core.nodes.snapshot(),
        "queues": core.books.snapshot(),
        "apps": core.applications.snapshot(core.ledger.hosts, core.intake.saved),
        "containers": core.granted.snapshot(),
    }


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


def restore(data: dict, clock, node_manager) -> ResourceManager:
    """The RM a state file's data describes: built with its nodes and queues, then each
    collaborator restores its part (containers before the applications that name them,
    asks with their applications, bookings last, through the ledger)."""
    specs = Nodes.specs_from(data["nodes"])
    queues = QueueBooks.queues_from(data["queues"])
    _check_counts(specs, queues)
    core = ResourceManager(specs, queues, clock=clock, node_manager=node_manager)
    core.nodes.restore_states(data["nodes"])
    core.granted.restore(data["containers"], data["next_container"])
    core.applications.restore(data["apps"], data["next_app"], core.ledger.host_index)
    for a in data["apps"]:
        app = core.apps[a["app_id"]]
        core.scheduler.restore(app, core.intake.restored(app, a["asks"]))
    core.granted.rebook()
    core.applications.watch_restored(data["apps"])
    core.books.check_restored()
    core.nodes.restore_changes(data)
    core.scheduler.plan_reservations()   # held again at once, from what the applications declared
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
