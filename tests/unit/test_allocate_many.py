"""ClusterView.allocate_many: a gang's bulk booking, the same rule as one allocate() per
instance; nodes of a kind share their port objects, worked out once per kind."""
import numpy as np
import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.fit import Demand
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError

PORTS = PortRanges.from_ports(range(20000, 20004))


def view(nodes=3):
    return ClusterView([NodeSpec(f"h{i}", memory_mb=100, vcores=4, ports=PORTS) for i in range(nodes)])


@pytest.mark.parametrize("rows, counts, taken, refused", [
    ([0, 1, 2], [2, 2, 2], [[20000, 20001]] * 3, None),
    ([0, 1, 0], [1, 1, 1], [[20000]] * 3, "named twice"),
    ([2, 1], [1, 1], [[20000], [20009]], "h1: 1 x"),       # a port the node does not have
    ([0, 1], [2, 2], [[20000, 20001], [20000]], "h1: 2 x"),  # fewer ports than instances ask
])
def test_allocate_many_books_or_refuses_changing_nothing(rows, counts, taken, refused):
    v = view()
    shared = {tuple(t): PortRanges.from_ports(t) for t in taken}   # (nodes of a kind share one object)
    ports = [shared[tuple(t)] for t in taken]
    each = Demand.of(ResourceDescriptor(memory_mb=10, vcores=1, ports=1))
    if refused:
        with pytest.raises(ResourceError, match=refused):
            v.allocate_many(np.array(rows), np.array(counts), each, None, ports)
        assert v.memory_free.tolist() == [100] * 3 and v.ports_free_count.tolist() == [4] * 3
        assert all(v.ports_free[i] is PORTS for i in range(3))
        return
    v.allocate_many(np.array(rows), np.array(counts), each, None, ports, role="r")
    assert v.memory_free.tolist() == [80] * 3 and v.ports_free_count.tolist() == [2] * 3
    assert [str(v.ports_free[i]) for i in range(3)] == [str(PortRanges.from_ports([20002, 20003]))] * 3
    assert v.instances_of("r").tolist() == [2] * 3


@pytest.mark.parametrize("booked", [[1], [0, 1, 2, 3, 4, 5, 6, 7]])   # a few rows, most rows (cached columns stale)
def test_cached_columns_follow_a_bulk_booking(booked):
    v = view(8)
    above = v.ports_free_at_or_above(20001).copy()
    watched = v.watch_rows()
    taken = [PortRanges.from_ports([20001])] * len(booked)
    v.allocate_many(np.array(booked), np.ones(len(booked)), Demand.of(ResourceDescriptor(memory_mb=10, ports=1)),
                    None, taken)
    above[booked] -= 1
    assert v.ports_free_at_or_above(20001).tolist() == above.tolist()
    assert watched == set(booked)   # a watcher is told every row
