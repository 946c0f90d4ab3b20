"""How gangmaster's node vocabulary is written in Slurm, and read back.

Slurm has no racks, labels or topology presets, but every node carries free-form
*features*; gangmaster writes each as a feature with a prefix, so a node reads back
as the :class:`~gangmaster.selectors.cluster.NodeSpec` it was written from:

    rack.rack-a          the node's rack         (none: ``default-rack``)
    topo.dgx1-v100       its GPU topology preset (none: unknown)
    net.switch.leaf-1    a network domain above the rack (level, then name; any number)
    nvlink               any other feature is a node label

A gang that asks a network domain gets it from gangmaster's own choice of hosts (each
component of the heterogeneous job is pinned by ``-w``), so Slurm's ``--switches`` is not
passed: with every node named it could only refuse what gangmaster already checked, and it
reads switches from ``topology.conf``, which describes Slurm's own tree, not these features.

Exact GPUs: Slurm lets a job name a GPU only by its GRES *type*, so each GPU is
declared as a type of its own, ``<gpu type>_<index>`` (``V100_5`` is GPU 5 of a V100
node). A node whose GPUs are declared that way offers exact GPU choice; one with
ordinary GRES (``gpu:a100:8``) does not: Slurm picks the GPUs, and the AM records
which it got.
"""
from __future__ import annotations

import re

RACK_PREFIX = "rack."
TOPOLOGY_PREFIX = "topo."
DOMAIN_PREFIX = "net."
DEFAULT_RACK = "default-rack"
#: The GPU type of a node whose GRES names none (``gpu:4``).
UNTYPED_GPU = "gpu"

_PER_GPU_TYPE = re.compile(r"^(?P<type>.+)_(?P<index>\d+)$")


def features_of(rack: str, labels, topology: str | None, domains: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """The node features that carry a rack, labels, a topology preset and network domains."""
    features = [RACK_PREFIX + rack] if rack != DEFAULT_RACK else []
    if topology:
        features.append(TOPOLOGY_PREFIX + topology)
    features += [f"{DOMAIN_PREFIX}{level}.{name}" for level, name in domains]
    return features + sorted(labels)


def read_domains(features) -> tuple[tuple[str, str], ...]:
    """The network domains (level, name) a node's ``net.<level>.<name>`` features name, in order."""
    found = []
    for feature in features:
        if feature.startswith(DOMAIN_PREFIX):
            level, _, name = feature[len(DOMAIN_PREFIX):].partition(".")
            if level and name:
                found.append((level, name))
    return tuple(found)


def read_features(features) -> tuple[str, frozenset[str], str | None]:
    """(rack, labels, topology) from a node's features."""
    rack, topology, labels = DEFAULT_RACK, None, set()
    for feature in features:
        if feature.startswith(RACK_PREFIX) and len(feature) > len(RACK_PREFIX):
            rack = feature[len(RACK_PREFIX):]
        elif feature.startswith(TOPOLOGY_PREFIX) and len(feature) > len(TOPOLOGY_PREFIX):
            topology = feature[len(TOPOLOGY_PREFIX):]
        elif feature.startswith(DOMAIN_PREFIX):
            continue   # (read_domains)
        elif feature:
            labels.add(feature)
    return rack, frozenset(labels), topology


def per_gpu_type(gpu_type: str | None, index: int) -> str:
    """The GRES type that names GPU ``index`` of a node alone: ``V100_5``."""
    return f"{gpu_type or UNTYPED_GPU}_{index}"


def split_per_gpu_type(gres_type: str) -> tuple[str, int] | None:
    """(GPU type, index) of a per-GPU GRES type, None for an ordinary type."""
    match = _PER_GPU_TYPE.match(gres_type)
    return (match["type"], int(match["index"])) if match else None
