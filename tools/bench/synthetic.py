"""Synthetic clusters for benchmarks: heterogeneous machine types, racks of 40,
seeded random occupancy. Shared by the selection and gang benchmarks."""
from __future__ import annotations

import random

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

PORTS = PortRanges.of((20000, 29999))
# (share of nodes, GPU type, topology preset, GPUs, vcores, memory MB)
MACHINE_TYPES = [
    (0.4, "V100", "dgx1-v100", 8, 80, 491_520),
    (0.3, "T4", "pcie-4gpu", 4, 32, 196_608),
    (0.3, None, None, 0, 64, 262_144),
]

def synthetic_specs(nodes: int, rack_size: int = 40) -> list[NodeSpec]:
    specs = []
    for i in range(nodes):
        share = (i % 10) / 10
        acc = 0.0
        for weight, gpu_type, topo, gpus, vcores, memory in MACHINE_TYPES:
            acc += weight
            if share < acc - 1e-9:
                break
        specs.append(NodeSpec(host=f"node-{i:06d}", rack=f"rack-{i // rack_size:04d}",
                              labels=frozenset({"gpu"} if gpus else set()), gpu_type=gpu_type,
                              topology=topo, memory_mb=memory, vcores=vcores, gpus=gpus, ports=PORTS))
    return specs

def occupy_randomly(view: ClusterView, seed: int, busy_share: float = 0.6) -> None:
    """Book a random part of each busy node, through ``allocate`` (so it is valid)."""
    rng = random.Random(seed)
    # each capacity read once for the whole cluster: ``vcores_capacity`` is worked out from the
    # columns on every read, so a read per node made building a cluster quadratic
    vcores_capacity = view.vcores_capacity.tolist()
    for i in range(len(view)):
        if rng.random() >= busy_share:
            continue
        gpus = int(view.gpu_capacity[i])
        used_gpus = rng.randint(0, gpus)
        free_mask = view.free_mask(i)
        mask = 0
        for _ in range(used_gpus):
            bit = rng.choice([b for b in range(gpus) if free_mask >> b & 1 and not mask >> b & 1])
            mask |= 1 << bit
        view.allocate(i, ResourceDescriptor(
            memory_mb=int(view.memory_capacity[i] * rng.random() * 0.9),
            vcores=round(vcores_capacity[i] * rng.random() * 0.9, 1),
            gpus=used_gpus, gpu_mask=mask))

def synthetic_cluster(nodes: int, seed: int = 0) -> ClusterView:
    view = ClusterView(synthetic_specs(nodes))
    occupy_randomly(view, seed)
    return view

