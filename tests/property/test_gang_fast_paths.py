"""The fast paths under story 3's gang placement, each held to the plain path it replaces
on small random clusters (selectors/placement.py, cluster.py, port_column.py):

* ``room_per_node`` counted on whole columns (the nodes that fail a filter zeroed after)
  is the fit model's room of each node that passes, counted at the survivors alone;
* a bulk booking of a :class:`PortChoice` (each (free set, count) worked out once, by the
  view's table, for good) books what the same booking of the sets it names books, and
  refuses a node whose free ports changed since the choice;
* the table's sequential choice is ``take_sequential`` split per instance, worked out once;
* a scratch copy without the node indexes keeps the cached columns, and booking on it
  never feeds the view's indexes;
* a role placed ``final`` (its last step not written into a view nothing reads after:
  the gang's last role on its scratch copy) is placed as the same role booked whole.

Whole placements (the first instance picked through the view's kept index, a step among
the job's hosts booked with the sweep after it) are held to one pick per instance by
``test_gang_placement_props``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gangmaster.selectors import port_column
from gangmaster.selectors.candidates import node_index
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.filters import BEFORE_ROOM, FilterContext
from gangmaster.selectors.fit import Demand, room
from gangmaster.selectors.job_packing import PACKING
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.placement import Placement, RecentHosts, _ports, place, room_per_node
from gangmaster.selectors.port_column import PortChoice, PortTable
from gangmaster.selectors.ports import PortError, PortRanges
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError
from gangmaster.selectors.settings import SelectionSettings
from tests.property.test_gang_placement_props import clusters, make_pipeline


@st.composite
def requests(draw) -> SelectionRequest:
    return SelectionRequest(
        role=draw(st.sampled_from(["r0", "r1", "r2"])),
        resource=ResourceDescriptor(memory_mb=draw(st.sampled_from([0, 512, 4096])),
                                    vcores=draw(st.sampled_from([0.0, 1.0, 2.5])), gpus=draw(st.integers(0, 2)),
                                    ports=draw(st.integers(0, 2))),
        node_label=draw(st.sampled_from([None, "fast"])), gpu_types=draw(st.sampled_from([(), ("V100",)])),
        max_instances_per_node=draw(st.sampled_from([None, 1, 2])))


def reference_room(view: ClusterView, request: SelectionRequest, settings: SelectionSettings,
                   limit: int | None) -> np.ndarray:
    """The room of each node, counted at the nodes that pass alone (the plain way)."""
    ctx = FilterContext(view, request, settings)
    passing = np.ones(len(view), dtype=bool)
    for stage in BEFORE_ROOM:
        ok = stage.passes(ctx)
        if ok is not None:
            passing &= ok
    failed = view.failed_here(request.role)
    if failed is not None and settings.skip_nodes_where_role_failed:
        passing &= ~failed
    rows = np.flatnonzero(passing)
    counts = room(view, request.demand, settings.port_min, rows=rows)
    if request.max_instances_per_node is not None:
        counts = np.minimum(counts, request.max_instances_per_node - view.instances_of(request.role)[rows])
    out = np.zeros(len(view), dtype=np.int64)
    out[rows] = np.clip(counts, 0, limit) if limit is not None else np.maximum(counts, 0)
    return out


@given(clusters(), requests(), st.sampled_from([None, 1, 3]), st.sampled_from([20000, 20001]), st.data())
def test_room_on_whole_columns_is_the_room_at_the_survivors(view, request, limit, port_min, data):
    for host in data.draw(st.lists(st.sampled_from(view.hosts), max_size=3)):
        view.mark_failed(request.role, host)
    settings = SelectionSettings(port_min=port_min)
    got = room_per_node(view, request, settings, limit)
    assert got.tolist() == reference_room(view, request, settings, limit).tolist()


@st.composite
def port_clusters(draw) -> ClusterView:
    """9..30 nodes (a bulk booking: more than allocate_many books one by one) of a few port
    sets, some ports already taken."""
    kinds = [PortRanges.of((20000, 20000 + draw(st.integers(1, 6)))) for _ in range(draw(st.integers(1, 3)))]
    view = ClusterView([NodeSpec(f"n{i:02d}", memory_mb=8192, vcores=8.0, ports=draw(st.sampled_from(kinds)))
                        for i in range(draw(st.integers(9, 30)))])
    for i in range(len(view)):
        if draw(st.integers(0, 3)) == 0:
            port = draw(st.sampled_from(list(view.ports_free[i])))
            view.allocate(i, ResourceDescriptor(ports=1, port_ranges=PortRanges.of((port, port))))
    return view


def state(view: ClusterView) -> tuple:
    return (view.memory_free.tolist(), view.mvcores_free.tolist(), list(map(str, view.ports_free)),
            view.ports_free_count.tolist(), view.instances_of("r").tolist())


@given(port_clusters(), st.integers(1, 2), st.data())
def test_a_port_choice_books_what_its_sets_book(view, each, data):
    rows = data.draw(st.lists(st.integers(0, len(view) - 1), min_size=9, max_size=len(view), unique=True))
    at = np.array(rows, dtype=np.int64)
    counts = np.array(data.draw(st.lists(st.integers(1, 2), min_size=at.size, max_size=at.size)), dtype=np.int64)
    demand = Demand.of(ResourceDescriptor(memory_mb=100, vcores=1.0, ports=each))
    fits = view.ports_free_at_or_above(20000)[at] >= counts * each
    at, counts = at[fits], counts[fits]
    if at.size <= 8:
        return
    pipeline = make_pipeline("job-packing", 0)
    _, choice = _ports(pipeline, view, demand, at, counts)
    assert isinstance(choice, PortChoice)
    sets = [choice.table.values[c] for c in choice.taken_per_node().tolist()]
    by_choice, by_sets = view.copy(), view.copy()
    by_choice.allocate_many(at, counts, demand, None, choice, role="r")
    by_sets.allocate_many(at, counts, demand, None, sets, role="r")
    assert state(by_choice) == state(by_sets)
    # a node whose free ports changed since the choice: refused, nothing changed
    changed = view.copy()
    node = int(at[data.draw(st.integers(0, at.size - 1))])
    first = min(changed.ports_free[node])
    changed.allocate(node, ResourceDescriptor(ports=1, port_ranges=PortRanges.of((first, first))))
    before = state(changed)
    with pytest.raises(ResourceError, match=changed.hosts[node]):
        changed.allocate_many(at, counts, demand, None, choice, role="r")
    assert state(changed) == before


@given(st.lists(st.tuples(st.integers(20000, 20020), st.integers(0, 5)), min_size=1, max_size=4),
       st.integers(1, 3), st.integers(1, 3), st.sampled_from([20000, 20003]))
def test_sequential_ports_are_take_sequential_split_worked_out_once(ranges, each, take, port_min):
    free = PortRanges(tuple(sorted({(b, b + w) for b, w in ranges})))
    try:
        union = free.take_sequential(each * take, port_min)
    except PortError:
        return   # (too few: never asked, the room counts them first)
    table = PortTable()
    code = table.code(free)
    calls = []
    original = PortRanges.take_sequential
    PortRanges.take_sequential = lambda self, *a: calls.append(a) or original(self, *a)
    try:
        lists, taken, left = table.sequential(code, each, take, port_min)
        assert table.sequential(code, each, take, port_min) == (lists, taken, left)
    finally:
        PortRanges.take_sequential = original
    ports = list(union)
    assert lists == [PortRanges.from_ports(ports[j * each:(j + 1) * each]) for j in range(take)]
    assert table.values[taken] == union and table.values[left] == free.subtract(union)
    assert len(calls) == 1


def test_a_copy_without_indexes_keeps_the_columns_and_feeds_no_index():
    view = ClusterView([NodeSpec(f"n{i:02d}", memory_mb=8192, vcores=8.0) for i in range(40)])
    index = node_index(view, PACKING, None)
    PACKING.column(view)
    scratch = view.copy(keep_indexes=False)
    assert "job-packing" in scratch._column_caches and not scratch._derived
    scratch.allocate_many(np.arange(40), np.ones(40, dtype=np.int64), Demand.of(ResourceDescriptor(memory_mb=100)),
                          None, None)
    assert not index.dirty and view.memory_free.tolist() == [8192] * 40
    assert PACKING.column(scratch).tolist() == PACKING.compute(scratch, slice(None)).tolist()


def test_a_table_keeps_its_sequential_choices_bounded(monkeypatch):
    monkeypatch.setattr(port_column, "CHOICES_KEPT", 2)
    table = PortTable()
    code = table.code(PortRanges.of((20000, 20009)))
    for take in (1, 2, 3):
        table.sequential(code, 1, take, 20000)
    assert len(table._sequential) <= 2


def _placed(pipeline, view: ClusterView, asks: list[tuple[SelectionRequest, int]], final: bool):
    """Each (request, count) placed in turn on ``view`` with the job's hosts carried, the
    last ``final``: each role's lists, or how many of the failing role were placed."""
    recent, out = RecentHosts(view, limit=3), []
    for k, (request, count) in enumerate(asks):
        try:
            got: Placement = place(pipeline, view, request, count, recent, final=final and k == len(asks) - 1)
        except NotAvailable as exc:
            return out, ("short", k, exc.placed.count)
        out.append((got.nodes, got.gpu_masks, [list(map(str, p)) for p in got.ports], list(map(int, got.keys))))
    return out, None


@given(clusters(), st.lists(st.tuples(requests(), st.integers(1, 12)), min_size=1, max_size=3),
       st.sampled_from(["job-packing", "best-fit", "topology", "random"]), st.integers(0, 3))
def test_a_final_role_is_placed_as_the_role_booked_whole(view, asks, strategy, seed):
    """The gang's last role on its scratch copy: the last step chosen, not written, and every
    step before it booked (the steps after the first read the view as they left it)."""
    pipeline = lambda: make_pipeline(strategy, seed)
    assert _placed(pipeline(), view.copy(), asks, final=True) == _placed(pipeline(), view.copy(), asks, final=False)
