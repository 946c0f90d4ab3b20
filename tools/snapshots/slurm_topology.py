"""Slurm's ``topology.conf``: its switches (or blocks) as the network domains of a job's
``networkDomain``.

Slurm keeps the network's shape out of its JSON: ``topology/tree`` reads it from
``topology.conf`` beside ``slurm.conf`` (the ``SLURM_CONF`` that ``scontrol show config``
prints, with ``TopologyPlugin = topology/tree``), one switch a line::

    SwitchName=leaf1 Nodes=dgx[01-04]
    SwitchName=leaf2 Nodes=dgx[05-08]
    SwitchName=spine Switches=leaf[1-2]

A leaf switch (one with ``Nodes=``) is level 0; a switch above others is one level above
the highest of them. The levels are named as NVIDIA's Topograph names them (it writes this
file for Slurm and the ``network.topology.nvidia.com/<level>`` labels a Kubernetes
snapshot reads, :mod:`.kubernetes`): ``leaf``, ``spine``, ``core``, then ``level3`` and up, so
``networkDomain: {required: leaf}`` means one switch on either engine. A node's domains
are its leaf switch and every switch above it, innermost first. ``topology/block``'s
``BlockName=b1 Nodes=...`` lines are read likewise, as the level ``block``. A snapshot takes
the file with ``--topology-conf``; the Slurm backend (:mod:`gangmaster.tools.slurm.client`)
reads it where ``scontrol show config`` says Slurm does (:func:`topology_conf_of`). A level a
node's ``net.<level>.<name>`` features name already is kept as they name it (:func:`merged`).

A line Slurm would refuse is refused here too, naming its line and key (``topology.conf:
line 7: Switches: expected switches named on their own SwitchName line, got spine9``):
an unknown key, a switch named twice, a child switch named nowhere, a loop, a node under
two switches, more than MAX_DOMAIN_LEVELS levels. ``LinkSpeed`` and ``BlockSizes`` are
read past (gangmaster places by domain, not speed).
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from gangmaster.conf.limits import MAX_DOMAIN_LEVELS, MAX_SNAPSHOT_BYTES
from gangmaster.selectors.cluster import NodeSpec

from .model import SnapshotError, first_few, named_domains

#: a switch's level (its height above the nodes) -> the level's name (Topograph's)
TREE_LEVELS = ("leaf", "spine", "core")
#: the level of topology/block's blocks
BLOCK_LEVEL = "block"
#: what a line may say: the switch or block it names first, then these
KEYS = {"SwitchName": ("Switches", "Nodes", "LinkSpeed"), "BlockName": ("Nodes",)}
#: read past: what says how fast, not where
IGNORED = ("LinkSpeed", "BlockSizes")
_KEY = re.compile(r"([A-Za-z]+)=(\S*)")


def level_name(height: int) -> str:
    """The domain level of a switch ``height`` levels above the nodes."""
    return TREE_LEVELS[height] if height < len(TREE_LEVELS) else f"level{height}"


class _Line:
    """One line of the file, for :func:`~.slurm.expand_hostlist`'s errors (``line N: Nodes``)."""

    def __init__(self, source: str, number: int):
        self.source, self.number = source, number

    def error(self, expected: str, got=None, key: str = "") -> SnapshotError:
        field = f"line {self.number}: {key}" if key else f"line {self.number}"
        return SnapshotError(self.source, field, expected, got) if got is not None else \
            SnapshotError(self.source, field, expected)


def read_topology(path: str | Path) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each node the file names -> its network domains (level, name), innermost first."""
    path = Path(path)
    source = str(path)
    try:
        if path.stat().st_size > MAX_SNAPSHOT_BYTES:
            raise SnapshotError(source, "", f"a topology.conf of at most {MAX_SNAPSHOT_BYTES:,} bytes "
                                            "(MAX_SNAPSHOT_BYTES in conf/limits.py)", f"{path.stat().st_size:,}")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SnapshotError(source, "", "a readable topology.conf", exc.strerror or str(exc)) from None
    except UnicodeDecodeError:
        raise SnapshotError(source, "", "a UTF-8 text file (Slurm's topology.conf)") from None
    return _domains(source, _switches(source, text))


def _switches(source: str, text: str) -> dict[str, tuple[str, int, list[str], list[str]]]:
    """name -> (kind, line, child switches, nodes), in the file's order."""
    from .slurm import expand_hostlist

    switches: dict[str, tuple[str, int, list[str], list[str]]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        line = _Line(source, number)
        pairs = [(m.group(1), m.group(2)) for m in _KEY.finditer(body)]
        if _KEY.sub("", body).strip() or not pairs:
            raise line.error("KEY=VALUE pairs separated by spaces (SwitchName=s1 Nodes=dgx[01-04])", body)
        first, name = pairs[0]
        kind = next((k for k in KEYS if k.lower() == first.lower()), None)
        if kind is None:
            if first.lower() == "blocksizes":
                continue
            raise line.error("a line that starts with SwitchName= or BlockName=", first, key=first)
        if not name:
            raise line.error("a name", "nothing", key=kind)
        if name in switches:
            raise line.error(f"each {kind} once (also on line {switches[name][1]})", name, key=kind)
        other = next((s for s in switches.values() if s[0] != kind), None)
        if other is not None:
            raise line.error(f"one kind of line a file (line {other[1]} has {other[0]}: topology/tree's "
                             "SwitchName or topology/block's BlockName)", kind, key=kind)
        children: list[str] = []
        nodes: list[str] = []
        for key, value in pairs[1:]:
            known = next((k for k in KEYS[kind] if k.lower() == key.lower()), None)
            if known is None:
                raise line.error(f"one of {', '.join(KEYS[kind])} on a {kind} line", key, key=key)
            if known in IGNORED:
                continue
            if not value:
                raise line.error("a hostlist such as dgx[01-04,07]", "nothing", key=known)
            (children if known == "Switches" else nodes).extend(expand_hostlist(value, line, known))
        switches[name] = (kind, number, children, nodes)
    return switches


def _domains(source: str, switches: dict[str, tuple[str, int, list[str], list[str]]]
             ) -> dict[str, tuple[tuple[str, str], ...]]:
    parent: dict[str, str] = {}
    leaf_of: dict[str, str] = {}
    for name, (kind, number, children, nodes) in switches.items():
        line = _Line(source, number)
        for child in children:
            if child not in switches:
                raise line.error("switches named on their own SwitchName line", child, key="Switches")
            if child in parent:
                raise line.error(f"each switch under one switch ({child} is under {parent[child]} too)", child,
                                 key="Switches")
            parent[child] = name
        for node in nodes:
            if node in leaf_of:
                raise line.error(f"each node under one {kind} ({node} is under {leaf_of[node]} too)", node,
                                 key="Nodes")
            leaf_of[node] = name
    heights: dict[str, int] = {}

    def height(name: str, below: tuple[str, ...] = ()) -> int:
        if name in below:
            raise _Line(source, switches[name][1]).error("switches that do not contain themselves",
                                                         " > ".join((*below, name)), key="Switches")
        if name not in heights:
            children = switches[name][2]
            heights[name] = 1 + max(height(c, (*below, name)) for c in children) if children else 0
            if heights[name] >= MAX_DOMAIN_LEVELS:
                raise _Line(source, switches[name][1]).error(
                    f"at most {MAX_DOMAIN_LEVELS} levels of switches (MAX_DOMAIN_LEVELS in conf/limits.py)",
                    heights[name] + 1, key="Switches")
        return heights[name]

    for name in switches:
        height(name)
    block = any(kind == "BlockName" for kind, *_ in switches.values())
    domains: dict[str, tuple[tuple[str, str], ...]] = {}
    for node, leaf in leaf_of.items():
        chain, switch = [], leaf
        while switch is not None:
            chain.append((BLOCK_LEVEL if block else level_name(heights[switch]), switch))
            switch = parent.get(switch)
        domains[node] = tuple(chain)
    return domains


def merged(features: tuple[tuple[str, str], ...], switches: tuple[tuple[str, str], ...]
           ) -> tuple[tuple[str, str], ...]:
    """A node's domains: those its features name (``net.<level>.<name>``), then its switches'
    of the levels the features do not name."""
    levels = {level for level, _ in features}
    return named_domains((*features, *(d for d in switches if d[0] not in levels)))


#: ``scontrol show config``'s plugins that read topology.conf
TOPOLOGY_PLUGINS = ("topology/tree", "topology/block")


def topology_conf_of(config: str) -> Path | None:
    """Where ``scontrol show config`` (its text, ``Key = value`` lines) says Slurm reads
    topology.conf: beside ``SLURM_CONF`` when ``TopologyPlugin`` is one of
    :data:`TOPOLOGY_PLUGINS` (None: Slurm knows no switches)."""
    said = {}
    for line in config.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            said[key.strip()] = value.strip()
    if said.get("TopologyPlugin") not in TOPOLOGY_PLUGINS or not said.get("SLURM_CONF"):
        return None
    return Path(said["SLURM_CONF"]).parent / "topology.conf"


def with_topology(specs: list[NodeSpec], path: str | Path) -> tuple[list[NodeSpec], list[str]]:
    """``specs`` with the domains ``path`` (a topology.conf) gives their nodes added after
    those their features name (a level the features name already is kept as they name
    it), and the notes on what the two do not share."""
    domains = read_topology(path)
    named = [replace(spec, domains=merged(spec.domains, domains[spec.host])) if spec.host in domains else spec
             for spec in specs]
    notes = []
    hosts = {spec.host for spec in specs}
    outside = [spec.host for spec in specs if spec.host not in domains]
    if outside:
        notes.append(f"{len(outside)} node(s) under no switch of {path}: in no network domain of its levels: "
                     f"{first_few(outside)}")
    unknown = [node for node in domains if node not in hosts]
    if unknown:
        notes.append(f"{len(unknown)} node(s) of {path} are not in the snapshot: {first_few(unknown)}")
    return named, notes
