"""The benchmarks' synthetic cluster is built in time linear in its nodes: a read of a
whole-column property of the view (``vcores_capacity`` and the like, worked out from the
columns on each read) per node made ``gangmaster bench select --nodes 1000000`` quadratic.
Counted in reads, not timed: twice the nodes, the same reads."""
import inspect

from gangmaster.selectors.cluster import ClusterView
from gangmaster.tools.bench.synthetic import synthetic_cluster

#: every property of the view, by name, with its getter
COLUMN_PROPERTIES = {name: value.fget for name, value in inspect.getmembers(ClusterView) if isinstance(value, property)}


def _reads(monkeypatch, nodes: int) -> dict[str, int]:
    reads = dict.fromkeys(COLUMN_PROPERTIES, 0)
    for name, getter in COLUMN_PROPERTIES.items():
        def counted(view, name=name, getter=getter):
            reads[name] += 1
            return getter(view)

        monkeypatch.setattr(ClusterView, name, property(counted))
    synthetic_cluster(nodes)
    return reads


def test_building_a_cluster_reads_each_column_property_a_fixed_number_of_times(monkeypatch):
    assert "vcores_capacity" in COLUMN_PROPERTIES
    small = _reads(monkeypatch, 2000)
    assert _reads(monkeypatch, 4000) == small
    assert sum(small.values()) < 20
