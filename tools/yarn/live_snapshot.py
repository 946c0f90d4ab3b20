"""A snapshot of a running YARN cluster, read from its ResourceManager at once.

``gangmaster snapshot --yarn-rm URL|DIR`` and ``gangmaster diagnose JOB --yarn-rm URL|DIR``
read what an operator would dump with curl (``/ws/v1/cluster/nodes``, the applications not
ended of ``/ws/v1/cluster/apps``, ``/ws/v1/cluster/scheduler``) straight from the RM, each
answer bounded in time and size (:mod:`gangmaster.tools.http_fetch`), and hand them to the
YARN snapshot reader as the files would be (:mod:`gangmaster.tools.snapshots.yarn`).

``--yarn-rm`` names the cluster as ``gangmaster run --rm yarn`` does (:mod:`.target`): the
RM's web address, or a ``gangmaster yarn local-cluster`` folder. For a local cluster its
nodes get the names, racks, labels, GPU types and topologies of its cluster file (YARN
knows none of them, and names its three NodeManagers on this host ``localhost:PORT``), so a
job diagnosed against it is diagnosed as it would be placed there.

Hadoop 3.4.2's Jersey writes a map of several entries as one key given several times
(an application's ``resourceSecondsMap``: ``{"entry": {...}, "entry": {...}}``), which the
snapshot reader refuses as ambiguous JSON: such keys are read here as the list they stand
for (:func:`repeated_keys_as_lists`).
"""
from __future__ import annotations

import json
import tempfile
import time
import urllib.parse
from dataclasses import replace
from pathlib import Path

from gangmaster.conf.limits import MAX_SNAPSHOT_BYTES
from gangmaster.tools.http_fetch import FetchError, fetch
from gangmaster.tools.snapshots import ClusterSnapshot, SnapshotError, load_snapshot

from .target import TargetError, YarnTarget, resolve

#: each answer read, by the name of the file it would be, and its path at the RM
ENDPOINTS = (
    ("nodes.json", "/ws/v1/cluster/nodes"),
    ("apps.json", "/ws/v1/cluster/apps?states=NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"),
    ("scheduler.json", "/ws/v1/cluster/scheduler"),
)
#: seconds each answer may take, all of it
TIMEOUT_S = 20.0


def fetch_snapshot(value: str | None, timeout_s: float = TIMEOUT_S) -> ClusterSnapshot:
    """The cluster ``value`` names (``--yarn-rm``; None: ``$YARN_RM``, else ./gangmaster-yarn),
    as it is now. A cluster that cannot be named or does not answer whole is a
    :class:`SnapshotError` (bad input: exit 2) saying which and why."""
    try:
        target = resolve(value)
    except TargetError as exc:
        raise SnapshotError("--yarn-rm", "", str(exc).split(": expected ", 1)[-1]) from None
    base = urllib.parse.urlsplit(target.rest)
    if base.scheme != "http" or not base.netloc:
        raise SnapshotError("--yarn-rm", "", "the ResourceManager's web address as http://HOST:PORT", target.rest)
    taken_at = time.time()
    with tempfile.TemporaryDirectory(prefix="gangmaster-yarn-snapshot-") as folder:
        paths = []
        for name, path in ENDPOINTS:
            try:
                body = fetch(base.netloc, path, timeout_s, MAX_SNAPSHOT_BYTES, "MAX_SNAPSHOT_BYTES")
            except FetchError as exc:
                raise SnapshotError(f"{target.rest}{path}", "", "the ResourceManager's JSON", str(exc)) from None
            paths.append(Path(folder) / name)
            paths[-1].write_bytes(repeated_keys_as_lists(body))
        snap = load_snapshot(paths, taken_at=taken_at)
    return _with_metadata(replace(snap, taken_at_from=f"read from {target.rest} then"), target)


def repeated_keys_as_lists(body: bytes) -> bytes:
    """The JSON ``body`` with each key an object repeats given once, its values as a list
    (Jersey's way of writing a map's entries); the body as it came when it is no JSON (the
    reader says what is wrong with it)."""
    def pairs(items: list[tuple[str, object]]) -> dict:
        found: dict = {}
        for key, value in items:
            if key not in found:
                found[key] = value
            elif isinstance(found[key], _Repeated):
                found[key].append(value)
            else:
                found[key] = _Repeated([found[key], value])
        return found

    try:
        return json.dumps(json.loads(body, object_pairs_hook=pairs)).encode()
    except (ValueError, RecursionError):
        return body


class _Repeated(list):
    """The values of a key an object gave more than once."""


def _with_metadata(snap: ClusterSnapshot, target: YarnTarget) -> ClusterSnapshot:
    """The snapshot's nodes under the names and with the metadata of ``target``'s node
    list (a local cluster's file), their capacity as YARN reports it."""
    if not target.nodes:
        return snap
    names = {spec.host: target.nodes[spec.host].host for spec in snap.specs if spec.host in target.nodes}
    specs = []
    for spec in snap.specs:
        known = target.nodes.get(spec.host)
        specs.append(spec if known is None else replace(
            spec, host=known.host, rack=known.rack, labels=known.labels,
            gpu_type=known.gpu_type if spec.gpus else None, topology=known.topology))
    return replace(snap, specs=specs,
                   unhealthy={names.get(h, h): s for h, s in snap.unhealthy.items()},
                   unhealthy_reasons={names.get(h, h): r for h, r in snap.unhealthy_reasons.items()},
                   running=[replace(a, host=names.get(a.host, a.host)) for a in snap.running],
                   notes=tuple(n for n in snap.notes if not (n.startswith("YARN does not report GPU models")
                                                            and all(s.gpu_type for s in specs if s.gpus))))
