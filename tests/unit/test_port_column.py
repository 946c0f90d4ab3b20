"""PortColumn (selectors/port_column.py): the free ports of every node as codes into a
table of distinct sets, read and written as the list of PortRanges it replaces; a bulk
booking works out each distinct (free, taken) pair once."""
import numpy as np
import pytest

from gangmaster.selectors import port_column
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.fit import Demand
from gangmaster.selectors.port_column import PortColumn, PortTable
from gangmaster.selectors.ports import NO_PORTS, PortRanges
from gangmaster.selectors.resources import ResourceDescriptor

A, B = PortRanges.of((20000, 20009)), PortRanges.of((30000, 30001))


def test_equal_sets_are_one_code_whatever_the_object():
    column = PortColumn([A, PortRanges.of((20000, 20009)), B, NO_PORTS])
    assert column.codes.tolist() == [0, 0, 1, 2] and len(column.table) == 3
    assert list(column) == [A, A, B, NO_PORTS] and column[1] is A
    assert column.counts().tolist() == [10, 10, 2, 0]


@pytest.mark.parametrize("write, expected", [
    (lambda c: c.__setitem__(1, B), [A, B, B]),
    (lambda c: c.__setitem__(slice(0, 2), [NO_PORTS, B]), [NO_PORTS, B, B]),
    (lambda c: c.__setitem__(slice(1, 3), PortColumn([A, A])), [A, A, A]),   # another table: by value
])
def test_written_as_a_list(write, expected):
    column = PortColumn([A, A, B])
    copy = column.copy()
    write(column)
    assert column == expected and list(column) == expected
    assert copy == [A, A, B] and copy.table is column.table   # a copy has its own codes, the same table


@pytest.mark.parametrize("free, taken, left, whole", [
    ([A, A, A], [PortRanges.of((20000, 20001))] * 3, [PortRanges.of((20002, 20009))] * 3, [True] * 3),
    ([A, B], [PortRanges.of((20000, 20000)), PortRanges.of((30001, 30002))],
     [PortRanges.of((20001, 20009)), PortRanges.of((30000, 30000))], [True, False]),   # 30002 was not free
])
def test_take_many_works_each_pair_out_once(free, taken, left, whole, monkeypatch):
    column = PortColumn(free)
    codes = column.table.codes(taken).astype(np.int64)
    worked = []
    changed = PortTable.changed
    monkeypatch.setattr(PortTable, "changed", lambda self, *a: worked.append(a) or changed(self, *a))
    got, fits = column.take_many(np.arange(len(free)), codes)
    assert [column.table.values[c] for c in got.tolist()] == left and fits.tolist() == whole
    assert len(worked) == len(set(zip(column.codes.tolist(), codes.tolist())))


def test_a_grown_table_is_started_afresh_with_the_sets_held(monkeypatch):
    monkeypatch.setattr(port_column, "TABLE_KEPT", 4)
    view = ClusterView([NodeSpec(f"h{i}", memory_mb=100, vcores=4, ports=A) for i in range(3)])
    for port in range(20000, 20008):   # each booking and return makes new sets
        taken = PortRanges.of((port, port))
        view.allocate(0, ResourceDescriptor(ports=1, port_ranges=taken))
        view.release(0, ResourceDescriptor(ports=1, port_ranges=taken))
        view.allocate(1, ResourceDescriptor(ports=1, port_ranges=taken))
    assert len(view.ports_free.table) <= 4 + 3
    assert list(view.ports_free) == [A, PortRanges.of((20008, 20009)), A]
    assert view.ports_free_count.tolist() == [10, 2, 10]


def test_a_gang_booking_of_many_nodes_adds_a_few_sets():
    view = ClusterView([NodeSpec(f"h{i}", memory_mb=100, vcores=4, ports=A) for i in range(2000)])
    taken = view.ports_free.table.codes([PortRanges.of((20000, 20001))] * 2000).astype(np.int64)
    view.allocate_many(np.arange(2000), np.full(2000, 2), Demand.of(ResourceDescriptor(memory_mb=1, ports=1)),
                       None, taken, role="w")
    assert len(view.ports_free.table) == 3 and view.ports_free_count.tolist() == [8] * 2000
    assert view.ports_free == [PortRanges.of((20002, 20009))] * 2000
