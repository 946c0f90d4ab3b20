"""Snapshots of real clusters: "will my gang fit, and if not, why?" on what runs today.

:func:`load_snapshot` reads the JSON an operator can already dump from a cluster and
returns one :class:`ClusterSnapshot`, whichever engine it came from:

* Hadoop YARN's RM REST API — ``/ws/v1/cluster/nodes``, optionally ``/ws/v1/cluster/apps``
  and each attempt's ``.../containers`` (:mod:`.yarn`);
* Kubernetes — ``kubectl get nodes -o json``, optionally ``kubectl get pods -A -o json``
  (:mod:`.kubernetes`);
* Slurm — ``sinfo --json`` or ``scontrol show node --json``, optionally ``squeue --json``
  (:mod:`.slurm`).

The format of each file is told from the shape of its JSON; all the files of one
snapshot must come from one engine, and exactly one of them lists the nodes::

    from gangmaster.tools.snapshots import load_snapshot
    snap = load_snapshot(["nodes.json", "pods.json"])
    snap.format, len(snap.specs), snap.unhealthy, snap.running[:3]

Checks every engine shares, after its reader: at most MAX_SNAPSHOT_FILES files and
MAX_SNAPSHOT_BYTES bytes, at most MAX_CLUSTER_NODES nodes and MAX_SNAPSHOT_ALLOCATIONS
allocations, at least one node (no job fits a cluster of none, and an empty reading
is more often JSON of another shape: Slurm's ``"nodes": {}`` looks like YARN's), each
host listed once, and what runs on a node never more than the node reports in use or
holds (:mod:`.attribution`). Anything wrong in a file is a :class:`SnapshotError`
naming the file, the JSON path and what was expected.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from gangmaster.conf.limits import (MAX_CLUSTER_NODES, MAX_SNAPSHOT_ALLOCATIONS, MAX_SNAPSHOT_BYTES,
                                    MAX_SNAPSHOT_FILES)
from gangmaster.selectors.ports import PortRanges

from . import kubernetes, slurm, slurm_topology, yarn
from .attribution import reconcile
from .json_doc import Value, read_json
from .model import UNATTRIBUTED, ClusterSnapshot, RunningAllocation, SnapshotError, first_few

__all__ = ["ClusterSnapshot", "RunningAllocation", "SnapshotError", "UNATTRIBUTED", "load_snapshot",
           "FORMATS", "fields_read"]

#: Each engine's reader, by the name ``ClusterSnapshot.format`` gives it.
READERS = {"yarn": yarn, "kubernetes": kubernetes, "slurm": slurm}
FORMATS = tuple(READERS)

#: The ports each node of a snapshot offers. No engine reports ports as a resource (a
#: YARN container, a pod or a Slurm step binds what it likes), so every node offers every
#: port from ``selection.port_min``'s default up: a job's ports never block it on a snapshot.
NODE_PORTS = PortRanges.parse("20000-65535")

_WHAT_FILES = ("JSON from YARN's RM REST API (/ws/v1/cluster/nodes, /ws/v1/cluster/apps, an attempt's "
               "containers), `kubectl get nodes|pods -o json`, or Slurm's `sinfo --json`, "
               "`scontrol show node --json` or `squeue --json`")


def fields_read(format: str) -> tuple[str, ...]:
    """The JSON fields the reader of ``format`` uses (for ``--help`` and the README)."""
    return READERS[format].FIELDS_READ


def load_snapshot(paths: Iterable[str | Path], taken_at: float | None = None,
                  topology_conf: str | Path | None = None) -> ClusterSnapshot:
    """Read one engine's snapshot files (see the module docstring).

    ``topology_conf``: a Slurm snapshot's ``topology.conf``, whose switches become the
    nodes' network domains (:mod:`.slurm_topology`).

    ``taken_at`` (seconds since the epoch) says when the files were dumped; without it the
    files' own time is used where they carry one (newer Slurm's ``last_update``), else the
    modification time of the newest file. It matters only for engines that give job ends as
    times of day (Slurm's ``end_time``, a pod's start time plus ``activeDeadlineSeconds``)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise SnapshotError("(no files)", "", f"at least one snapshot file: {_WHAT_FILES}")
    if len(paths) > MAX_SNAPSHOT_FILES:
        raise SnapshotError(str(paths[0]), "", f"at most {MAX_SNAPSHOT_FILES:,} snapshot files "
                                               f"(MAX_SNAPSHOT_FILES in conf/limits.py)", f"{len(paths):,} files")
    engine, docs = _read_files(paths)
    reader = READERS[engine]
    if not any(kind in docs for kind in reader.NODE_LISTINGS):
        raise SnapshotError(str(paths[0]), "", f"a node listing among the {engine} files "
                                               f"({' or '.join(reader.NODE_LISTING_COMMANDS)}); got only "
                                               f"{', '.join(sorted(docs))}")
    time_from = "given"
    if taken_at is None:
        taken_at, time_from = reader.document_time(docs), "the files' own time"
    if taken_at is None:
        newest = max(paths, key=lambda p: os.stat(p).st_mtime)
        taken_at, time_from = os.stat(newest).st_mtime, f"the modification time of {newest}"
    found = reader.read(docs, taken_at)
    if not found.nodes:
        listing = next(doc for kind in reader.NODE_LISTINGS for doc in docs.get(kind, []))
        raise SnapshotError(listing.source, reader.NODES_FIELD, f"at least one node (read as {engine} JSON: "
                                                                f"{' or '.join(reader.NODE_LISTING_COMMANDS)}), got none")
    specs = [replace(spec, ports=NODE_PORTS) for spec in _unique_nodes(found.nodes)]
    if topology_conf is not None:
        if engine != "slurm":
            raise SnapshotError(str(topology_conf), "", "a topology.conf with a Slurm snapshot (it is Slurm's)",
                                f"{engine} files")
        specs, topology_notes = slurm_topology.with_topology(specs, topology_conf)
        found.notes.extend(topology_notes)
        paths.append(Path(topology_conf))
    if len(found.named) > MAX_SNAPSHOT_ALLOCATIONS:
        raise SnapshotError(str(paths[-1]), "", f"at most {MAX_SNAPSHOT_ALLOCATIONS:,} running allocations "
                                                "(job x host) in a snapshot (MAX_SNAPSHOT_ALLOCATIONS in "
                                                "conf/limits.py)", f"{len(found.named):,}")
    running, notes = reconcile(specs, found.named, found.used)
    return ClusterSnapshot(format=engine, sources=tuple(paths), specs=specs, unhealthy=found.unhealthy,
                           running=running, fields_read=reader.FIELDS_READ, unhealthy_reasons=found.reasons,
                           taken_at=taken_at, taken_at_from=time_from, notes=tuple(found.notes + notes),
                           standing=found.standing, preemption=found.preemption)


def _read_files(paths: list[Path]) -> tuple[str, dict[str, list[Value]]]:
    """Each file parsed and told apart: the engine, and its documents by kind."""
    budget = MAX_SNAPSHOT_BYTES
    engine_of: dict[Path, str] = {}
    docs: dict[str, list[Value]] = {}
    for path in paths:
        raw = read_json(path, budget)
        budget -= os.stat(path).st_size
        doc = Value(raw, str(path))
        engine, kind = _detect(doc)
        engine_of[path] = engine
        if len(set(engine_of.values())) > 1:
            first = next(p for p, e in engine_of.items() if e != engine)
            raise SnapshotError(str(path), "", f"files of one engine only; this one is {engine} JSON, "
                                               f"{first} is {engine_of[first]} JSON")
        docs.setdefault(kind, []).append(doc)
    return engine_of[paths[0]], docs


def _detect(doc: Value) -> tuple[str, str]:
    if not doc.is_object():
        raise doc.error(f"a JSON object: {_WHAT_FILES}", doc.raw)
    # An engine's own marks first: Slurm's "nodes" of a wrong shape is not a YARN answer.
    signed = ("slurm",) if slurm.is_signed(doc) else ()
    for engine in signed + tuple(e for e in READERS if e not in signed):
        kind = READERS[engine].kind_of(doc)
        if kind is not None:
            return engine, kind
    keys = sorted(doc.keys())
    shown = first_few(keys, 8)
    raise doc.error(_WHAT_FILES, f"an object with the keys {shown}" if keys else "an empty object")


def _unique_nodes(nodes: list) -> list:
    """The node specs, each host once (a host listed twice, in one file or two, is refused)."""
    if len(nodes) > MAX_CLUSTER_NODES:
        raise SnapshotError(nodes[MAX_CLUSTER_NODES][1].split(": ")[0], "",
                            f"at most {MAX_CLUSTER_NODES:,} nodes (MAX_CLUSTER_NODES in conf/limits.py)",
                            f"{len(nodes):,}")
    seen: dict[str, str] = {}
    for spec, where in nodes:
        if spec.host in seen:
            source, _, field = where.partition(": ")
            raise SnapshotError(source, field, f"each host once; {spec.host!r} is also at {seen[spec.host]} "
                                               "(give one node listing per snapshot)")
        seen[spec.host] = where
    return [spec for spec, _ in nodes]
