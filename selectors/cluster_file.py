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

Network domains above the rack (a switch, a block: :mod:`~gangmaster.selectors.domains`)
are declared once, innermost first, and named by each group as its racks are — one name,
or a list whose contiguous blocks of nodes each get one — and must nest (a rack inside
one switch, a switch inside one block)::

    domainLevels: [switch, block]
    nodeGroups:
      - name: dgx
        count: 8
        racks: [rack-a, rack-b]
        domains: {switch: sw-1, block: b0}
        ...

A file without ``domainLevels`` describes racks alone, as before.
"""
from __future__ import annotations

from pathlib import Path

from gangmaster.conf import conf_path
from gangmaster.conf.fields import ConfigError, Fields, load_yaml
from gangmaster.conf.limits import MAX_CLUSTER_NODES, MAX_DOMAIN_LEVELS, MAX_MEMORY_MB, MAX_NAME_CHARS, MAX_VCORES
from gangmaster.gpu_topology.masks import MAX_GPUS_PER_NODE

from .cluster import ClusterView, NodeSpec
from .domains import LEVEL_NAME, RACK, nesting_problem
from .ports import NO_PORTS, PortError, PortRanges

DEFAULT_CLUSTER = "clusters/default.yaml"

GROUP_FIELDS = ("name", "count", "hosts", "rack", "racks", "domains", "labels", "gpuType", "topology",
                "memoryMB", "vcores", "gpus", "ports")


def default_cluster_path() -> Path:
    return conf_path(DEFAULT_CLUSTER)


def load_cluster_specs(path: str | Path) -> list[NodeSpec]:
    doc = Fields(load_yaml(path), str(path))
    doc.reject_unknown(("name", "domainLevels", "nodeGroups"))
    levels = _domain_levels(doc)
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
        specs.extend(_group_specs(group, names, levels))
    problem = nesting_problem(specs, (RACK, *levels))
    if problem:
        raise doc.error("nodeGroups", problem)
    hosts = set()
    for spec in specs:
        if spec.host in hosts:
            raise ConfigError(str(path), "nodeGroups", f"unique host names; {spec.host!r} appears twice")
        hosts.add(spec.host)
    return specs


def load_cluster(path: str | Path | None = None) -> ClusterView:
    """Build a :class:`ClusterView` from a cluster file (default: the embedded one)."""
    return ClusterView(load_cluster_specs(path or default_cluster_path()))


def _domain_levels(doc: Fields) -> tuple[str, ...]:
    """``domainLevels``: the levels above the rack, innermost first (none: racks alone)."""
    if "domainLevels" not in doc:
        return ()
    levels = doc.names("domainLevels")
    if len(levels) > MAX_DOMAIN_LEVELS:
        raise doc.error("domainLevels", f"at most {MAX_DOMAIN_LEVELS} levels (MAX_DOMAIN_LEVELS in conf/limits.py)",
                        f"{len(levels)} levels")
    if RACK in levels or len(set(levels)) != len(levels) or not all(map(LEVEL_NAME.fullmatch, levels)):
        raise doc.error("domainLevels", f"distinct level names of letters, digits, _ and - above the rack "
                                        f"(not {RACK!r}), innermost first", ", ".join(levels))
    return tuple(levels)


def _split(names: list[str], hosts: list[str]) -> list[str]:
    """One name per host: the hosts split into contiguous blocks, one per name."""
    block = -(-len(hosts) // len(names))
    return [names[i // block] for i in range(len(hosts))]


def _group_domains(group: Fields, levels: tuple[str, ...], hosts: list[str]) -> list[tuple[tuple[str, str], ...]]:
    """Each host's domains above its rack (``domains: {switch: sw-1}`` or a list per level)."""
    if "domains" not in group:
        if levels:
            raise group.error("domains", f"a domain name for each level of domainLevels ({', '.join(levels)})")
        return [()] * len(hosts)
    if not levels:
        raise group.error("domains", "domainLevels at the top of the file, naming the levels (e.g. [switch])")
    section = group.mapping("domains")
    section.reject_unknown(levels)
    per_level = []
    for level in levels:
        if level not in section:
            raise section.error(level, f"a {level} name or a list of them (every group names each level of "
                                       "domainLevels)")
        value = section.raw(level)
        names = section.names(level) if isinstance(value, list) else [section.name(level)]
        if not names:
            raise section.error(level, f"at least one {level} name", [])
        per_level.append(_split(names, hosts))
    return [tuple(zip(levels, named)) for named in zip(*per_level)]


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


def _group_specs(group: Fields, hosts: list[str], levels: tuple[str, ...] = ()) -> list[NodeSpec]:
    """The nodes of one group, on ``hosts`` (:func:`_group_hosts`), in the domains of ``levels``."""
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
    domains = _group_domains(group, levels, hosts)
    return [
        NodeSpec(host=host, rack=rack, labels=labels, gpu_type=gpu_type, topology=topology,
                 memory_mb=memory, vcores=vcores, gpus=gpus, ports=ports, domains=above)
        for host, rack, above in zip(hosts, _split(racks, hosts), domains)
    ]
