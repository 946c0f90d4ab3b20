"""Which YARN cluster ``gangmaster run --rm yarn`` talks to, and what gangmaster knows of its nodes.

``--yarn-rm`` (or ``$YARN_RM``) is either the RM's web address (``http://HOST:8088``) or the
folder of a ``gangmaster yarn local-cluster`` (default ``./gangmaster-yarn`` when it holds one).

YARN knows each node's memory, vcores and GPU count; it does not know gangmaster's names,
racks, labels, GPU types, topology presets or task ports. Those come from a gangmaster
cluster file: the local cluster's own (recorded when it started, its host names mapped to
the NodeManagers it started), or ``--cluster FILE`` for a real cluster, whose host names are
YARN's node names (the NodeManager's host, or ``host:port`` where the RM has
``yarn.scheduler.include-port-in-node-name``). A node the file does not name is known by
YARN's name, in YARN's rack, with no labels.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges

ENV_VAR = "YARN_RM"
LOCAL_DEFAULT = "gangmaster-yarn"
STATE_FILE = "local-cluster.json"


class TargetError(ValueError):
    """``--yarn-rm`` names nothing usable (the message says what was expected)."""


@dataclass
class YarnTarget:
    """An RM's REST address, its scheduler address (None: asked of the RM) and the node metadata."""

    rest: str
    scheduler: str | None = None
    #: YARN node id (``host:port``) or node name -> the gangmaster node it is
    nodes: dict[str, NodeSpec] = field(default_factory=dict)
    name: str = ""            # how the cluster is named in messages and a work folder's identity
    argument: str = ""        # what the user gave, to hand on to the AM

    def spec_of(self, node_id: str, node_host: str) -> NodeSpec | None:
        return self.nodes.get(node_id) or self.nodes.get(node_host)


def spec_to_dict(spec: NodeSpec) -> dict:
    return {"host": spec.host, "rack": spec.rack, "labels": sorted(spec.labels), "gpu_type": spec.gpu_type,
            "topology": spec.topology, "memory_mb": spec.memory_mb, "vcores": spec.vcores, "gpus": spec.gpus,
            "ports": str(spec.ports), **({"domains": [list(d) for d in spec.domains]} if spec.domains else {})}


def spec_from_dict(d: dict) -> NodeSpec:
    return NodeSpec(d["host"], d["rack"], frozenset(d.get("labels") or ()), d.get("gpu_type"), d.get("topology"),
                    int(d["memory_mb"]), float(d["vcores"]), int(d["gpus"]), PortRanges.parse(d.get("ports") or ""),
                    tuple(map(tuple, d.get("domains") or ())))


def resolve(value: str | None, cluster_file: str | None = None) -> YarnTarget:
    """The target named by ``value`` (else ``$YARN_RM``, else ``./gangmaster-yarn``)."""
    given = value or os.environ.get(ENV_VAR) or ""
    where = value and "--yarn-rm" or os.environ.get(ENV_VAR) and f"${ENV_VAR}" or None
    if not given:
        if (Path(LOCAL_DEFAULT) / STATE_FILE).is_file():
            given, where = LOCAL_DEFAULT, "the default local cluster"
        else:
            raise TargetError(f"no YARN cluster named: set {ENV_VAR} (or --yarn-rm) to the RM's web address "
                              f"(http://HOST:8088) or to a `gangmaster yarn local-cluster` folder; none runs in "
                              f"./{LOCAL_DEFAULT}")
    if given.startswith(("http://", "https://")):
        target = YarnTarget(given.rstrip("/"), name=given, argument=given)
    else:
        target = _local(Path(given), where or "--yarn-rm")
    if cluster_file:
        from gangmaster.selectors.cluster_file import load_cluster_specs
        target.nodes = {s.host: s for s in load_cluster_specs(cluster_file)}
        target.name = f"{target.name} ({cluster_file})"
    return target


def _local(folder: Path, where: str) -> YarnTarget:
    try:
        state = json.loads((folder / STATE_FILE).read_text())
    except (OSError, ValueError):
        raise TargetError(f"{where}={folder}: expected http://HOST:PORT (the RM's web address) or the folder of "
                          f"a `gangmaster yarn local-cluster` (no readable {folder / STATE_FILE})") from None
    if state.get("stopped"):
        raise TargetError(f"{where}={folder}: its local YARN cluster was stopped (gangmaster yarn local-cluster "
                          f"start --work-dir {folder})")
    rm = state["ports"]["rm"]
    specs = [spec_from_dict(d) for d in state.get("specs", [])]
    if not specs:   # a cluster started before its specs were recorded
        from gangmaster.selectors.cluster_file import load_cluster_specs
        specs = load_cluster_specs(state["source"])
    nodes = {}
    for spec in specs:
        node_id = (state["nodes"].get(spec.host) or {}).get("node_id")
        if node_id:
            nodes[node_id] = spec
    folder = folder.resolve()
    return YarnTarget(f"http://127.0.0.1:{rm + 8}", f"127.0.0.1:{rm}", nodes, name=f"yarn:{folder}",
                      argument=str(folder))
