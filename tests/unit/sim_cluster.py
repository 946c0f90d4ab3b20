"""A small uniform cluster for the simulated-AM tests: ``n`` V100 nodes on one rack,
each 64 GiB, 16 vcores, 4 GPUs and ports 20000-20099 (the one-role job they run:
tests/job_texts.py)."""
from __future__ import annotations

from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import PortRanges

PORTS = PortRanges.parse("20000-20099")


def nodes(n: int, label: str | None = None) -> list[NodeSpec]:
    """Nodes ``n0`` .. ``n{n-1}``, each carrying ``label`` when one is given."""
    labels = frozenset({label}) if label else frozenset()
    return [NodeSpec(f"n{i}", "rack-0", labels, "V100", None, 65536, 16, 4, PORTS) for i in range(n)]
