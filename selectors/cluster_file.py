"""Cluster files (``conf/clusters/*.yaml``): node groups → :class:`NodeSpec` list.

::

    name: lab
    nodeGroups:
      - name: dgx                 # used for host names: dgx-000, dgx-001, ...
        count: 4
        racks: [rack-a, rack-b]   # nodes are split into contiguous blocks, one per rack
        labels: [nvlink]
        gpuType: V100
        topology: dgx1-v100       # a preset in conf/topologies/
        memoryMB: 491520
        vcores: 80
        gpus: 8
        ports: "20000-29999"
      - name: cpu
        count: 2
        rack: rack-c
        memoryMB: 65536
        vcores: 32

``hosts:`` may list host names instead of ``count`` (for RM node reports or hand
written clusters).
"""
from __future__ import annotations

from pathlib import Path

from gangmaster.conf import conf_path
from gangmaster.conf.fields import ConfigError, Fields, load_yaml
from gangmaster.conf.limits import MAX_CLUSTER_NODES, MAX_MEMORY_MB, MAX_NAME_CHARS, MAX_VCORES
from gangmaster.gpu_topology.masks import MAX_GPUS_PER_NODE

from .cluster import ClusterView, NodeSpec
from .ports import NO_PORTS, PortError, PortRanges

DEFAULT_CLUSTER = "clusters/default.yaml"
GROUP_FIELDS = ("name", "count", "hosts", "rack", "racks", "labels", "gpuType", "topology",
                "memoryMB", "vcores", "gpus", "ports")


def default_cluster_path() -> Path:
    return conf_path(DEFAULT_CLUSTER)


def load_cluster_specs(path: str | Path) -> list[NodeSpec]:
    doc = Fields(load_yaml(path), str(path))
    doc.reject_unknown(("name", "nodeGroups"))
    specs: list[NodeSpec] = []
    groups = doc.list_of_mappings("nodeGroups")
    if not groups:
        raise doc.error("nodeGroups", "at least one node group")
    named = 0
    group_hosts = []
    for group in groups:   # every group's size first: a file over the limit costs no node built
        group.reject_unknown(GROUP_FIELDS)
        group_hosts.append(_group_hosts(group, room=MAX_CLUSTER_NODES - named))
        named += len(group_hosts[-1])
    for group, names in zip(groups, group_hosts):
        specs.extend(_group_specs(group, names))
    hosts = set()
    for spec in specs:
        if spec.host in hosts:
            raise ConfigError(str(path), "nodeGroups", f"unique host names; {spec.host!r} appears twice")
        hosts.add(spec.host)
    return specs


def load_cluster(path: str | Path | None = None) -> ClusterView:
    """Build a :class:`ClusterView` from a cluster file (default: the embedded one)."""
    return ClusterView(load_cluster_specs(path or default_cluster_path()))


def _group_hosts(group: Fields, room: int) -> list[str]:
    """The host names of one group; ``room``: how many more nodes the file may still describe
    (MAX_CLUSTER_NODES in all), checked before a single host name is made."""
    name = group.name("name")
    too_many = (f"at most {MAX_CLUSTER_NODES:,} nodes in the cluster file, all groups together "
                f"(MAX_CLUSTER_NODES in conf/limits.py); {room:,} left for this group")
    if "hosts" in group:
        hosts = group.names("hosts")
        if not hosts:
            raise group.error("hosts", "at least one host name", [])
        if len(hosts) > room:
            raise group.error("hosts", too_many, f"{len(hosts):,} hosts")
    else:
        count = group.integer("count", minimum=1)
        if count > room:
            raise group.error("count", too_many, count)
        width = max(3, len(str(count - 1)))
        if len(name) + 1 + width > MAX_NAME_CHARS:   # the host names made from it must be names too
            raise group.error("name", f"at most {MAX_NAME_CHARS - 1 - width} characters, so that host names "
                                      f"like {name[:8]}...-{0:0{width}d} stay within MAX_NAME_CHARS", name)
        hosts = [f"{name}-{i:0{width}d}" for i in range(count)]
    return hosts


def _group_specs(group: Fields, hosts: list[str]) -> list[NodeSpec]:
    """The nodes of one group, on ``hosts`` (:func:`_group_hosts`)."""
    if "racks" in group:
        racks = group.names("racks")
        if not racks:
            raise group.error("racks", "at least one rack name", [])
    else:
        racks = [group.name("rack", "default-rack")]
    try:
        ports = PortRanges.parse(group.raw("ports")) if "ports" in group else NO_PORTS
    except PortError as exc:
        raise group.error("ports", f"port ranges like '20000-29999' ({exc})", group.raw("ports")) from None
    gpus = group.integer("gpus", 0, minimum=0, maximum=MAX_GPUS_PER_NODE)
    gpu_type = group.name("gpuType") if "gpuType" in group else None
    topology = group.name("topology") if "topology" in group else None
    if gpus == 0 and (gpu_type or topology):
        raise group.error("gpus", "an integer >= 1 when gpuType or topology is set", gpus)
    labels = frozenset(group.names("labels", []))
    memory = group.integer("memoryMB", minimum=1, maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB")
    vcores = group.number("vcores", minimum=0, exclusive_minimum=True, maximum=MAX_VCORES,
                          limit="MAX_VCORES")
    block = -(-len(hosts) // len(racks))
    return [
        NodeSpec(host=host, rack=racks[i // block], labels=labels, gpu_type=gpu_type,
                 topology=topology, memory_mb=memory, vcores=vcores, gpus=gpus, ports=ports)
        for i, host in enumerate(hosts)
    ]
