"""Topology presets: ``conf/topologies/<name>.yaml``, one per node type.

Cluster files name a preset per node group (``topology: dgx1-v100``); the
``topology`` strategy and ``gangmaster topo --preset`` load them from here. The
format mirrors ``nvidia-smi topo -m`` so a preset can be checked against a real
output by eye::

    name: pcie-4gpu
    description: 4 GPUs on one socket, two per PCIe switch
    gpus: 4
    links:                    # row i, column j: the link GPU i - GPU j; X on the diagonal
      - [X,   PIX, PHB, PHB]
      - [PIX, X,   PHB, PHB]
      - [PHB, PHB, X,   PIX]
      - [PHB, PHB, PIX, X  ]
    nics:                     # optional: NIC name -> its link to each GPU
      mlx5_0: [PIX, PIX, PHB, PHB]
    affinity:                 # optional: one entry per GPU
      - {cpus: "0-15", numa: 0}
      ...

Link labels are those of :mod:`gangmaster.gpu_topology.links` (``NV<k>``, BOARD,
PIX, PXB, PHB, NODE, SYS; SOC is read as SYS).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from gangmaster.conf import conf_path
from gangmaster.conf.fields import ConfigError, Fields, load_yaml

from .links import EXPECTED_LABELS, Link, LinkError, parse_link
from .masks import MAX_GPUS_PER_NODE
from .model import GpuAffinity, Topology, TopologyError

PRESET_DIR = "topologies"
PRESET_FIELDS = ("name", "description", "gpus", "links", "nics", "affinity")


class UnknownPreset(LookupError):
    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(f"unknown topology preset {name!r}; known presets: {', '.join(known)} "
                         f"(files in {conf_path(PRESET_DIR)})")


def preset_names() -> list[str]:
    """Every shipped preset, sorted."""
    return sorted(p.stem for p in conf_path(PRESET_DIR).glob("*.yaml"))


@lru_cache(maxsize=None)
def load_preset(name: str) -> Topology:
    """The shipped preset ``name`` (cached: presets are read once per process)."""
    path = conf_path(PRESET_DIR) / f"{name}.yaml"
    if not path.is_file():
        raise UnknownPreset(name, preset_names())
    topology = load_preset_file(path)
    if topology.name != name:
        raise ConfigError(str(path), "name", f'"{name}" (the file name)', topology.name)
    return topology


def load_preset_file(path: str | Path) -> Topology:
    """Read one preset file; errors name the file, the field and the cell."""
    source = str(path)
    doc = Fields(load_yaml(path), source)
    doc.reject_unknown(PRESET_FIELDS)
    name = doc.string("name")
    gpus = doc.integer("gpus", minimum=1, maximum=MAX_GPUS_PER_NODE)
    rows = doc.raw("links")
    if not isinstance(rows, list) or len(rows) != gpus:
        raise doc.error("links", f"a list of {gpus} rows (one per GPU)", rows)
    links: list[list[Link | None]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != gpus:
            raise doc.error(f"links[{i}]", f"a list of {gpus} link labels", row)
        links.append([_cell(doc, f"links[{i}][{j}]", cell, diagonal=(i == j)) for j, cell in enumerate(row)])
    nics = {}
    for nic, _ in doc.mapping("nics").data.items():
        row = doc.mapping("nics").raw(nic)
        if not isinstance(row, list) or len(row) != gpus:
            raise doc.error(f"nics.{nic}", f"a list of {gpus} link labels (one per GPU)", row)
        nics[str(nic)] = [_cell(doc, f"nics.{nic}[{j}]", cell, diagonal=False) for j, cell in enumerate(row)]
    affinity = None
    if "affinity" in doc:
        entries = doc.list_of_mappings("affinity")
        if len(entries) != gpus:
            raise doc.error("affinity", f"a list of {gpus} entries (one per GPU)", doc.raw("affinity"))
        affinity = []
        for entry in entries:
            entry.reject_unknown(("cpus", "numa"))
            cpus = entry.raw("cpus", None)
            numa = entry.raw("numa", None)
            affinity.append(GpuAffinity(cpus=None if cpus is None else str(cpus),
                                        numa=None if numa is None else str(numa)))
    description = doc.raw("description", "")
    if not isinstance(description, str):
        raise doc.error("description", "a string", description)
    try:
        return Topology(name, links, nic_links=nics, affinity=affinity,
                        description=description, source=source)
    except TopologyError as exc:
        raise ConfigError(source, "links", "a symmetric matrix", str(exc)) from None


def _cell(doc: Fields, field: str, cell: object, diagonal: bool) -> Link | None:
    if diagonal:
        if cell != "X":
            raise ConfigError(doc.source, field, "X (a GPU meets itself on the diagonal)", cell)
        return None
    if not isinstance(cell, str):
        raise ConfigError(doc.source, field, f"a link label ({EXPECTED_LABELS})", cell)
    try:
        return parse_link(cell)
    except LinkError:
        raise ConfigError(doc.source, field, f"a link label ({EXPECTED_LABELS})", cell) from None
