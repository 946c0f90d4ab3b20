"""select() and best_nodes() decide as a straightforward reference does, for every
registered strategy: run every filter of the chain on every node, rank all the
survivors, sort them by (key, node index; host name under the ``node-name`` tie rule),
keep ``keep()`` of them.

The pipeline finds its candidates through a node index kept up to date row by row
(selectors/node_index.py) or by a scan; these tests hold it to the reference on
fresh views, after random allocate / release / set_health / mark_failed / set_free
sequences (the index taken in incrementally, and rebuilt), and on copies of a view
changed apart from their original; best_nodes also with a seeded tie order (equal
keys by a rank per node instead of the node index); locality with the job's hosts
(searched by tier) also on clusters of many racks. Shares of one GPU are asked, booked,
given back and reported (``set_free`` with milli-GPU free per GPU) among the changes.
"""
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gangmaster.selectors import node_index
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.explanation import Explanation, NotAvailable, StaleExplanation
from gangmaster.selectors.filters import FILTER_CHAIN, FilterContext
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector as get_registered, selector_classes
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.selectors.workload import TaskShape, WorkloadShapes
from gangmaster.tools.bench.select import request_stream
from gangmaster.tools.bench.synthetic import occupy_randomly, synthetic_specs

SELECTORS = sorted(selector_classes())
#: every strategy is told the workload (fgd needs it; the others ignore it)
WORKLOAD = WorkloadShapes.weighted([(TaskShape(1000, 1024, gpus=1), 3), (TaskShape(2000, 8192, gpus=4), 1),
                                    (TaskShape(1000, 2048), 1)])


def get_selector(name, candidate_nodes_factor=2):
    selector = get_registered(name, candidate_nodes_factor)
    selector.observe_workload(WORKLOAD)
    return selector
MACHINES = [  # (gpu type, topology preset, gpus, vcores, memory)
    ("V100", "dgx1-v100", 8, 80, 491_520),
    ("T4", "pcie-4gpu", 4, 32, 196_608),
    (None, None, 0, 32, 131_072),
]


# ------------------------------------------------------------------ the reference
def reference_explained(view, request, settings) -> tuple[list[int], Explanation]:
    """Every filter of the chain on every node, in order: the survivors and the account."""
    explanation = Explanation(total=len(view), role=request.role)
    ctx = FilterContext(view, request, settings)
    alive = np.ones(len(view), dtype=bool)
    for stage in FILTER_CHAIN:
        verdict = stage.verdict(ctx, alive)
        explanation.rejections.extend(verdict.rejections)
        alive = verdict.passed
    explanation.survivors = int(alive.sum())
    return [i for i in range(len(view)) if alive[i]], explanation


def reference_best(view, request, settings, selector, k, ties=None) -> tuple[list[int], list, Explanation]:
    """The k best survivors by (key, node index), with their keys (by (key, ties[node])
    when a tie rank per node is given)."""
    if request.reuse_ports:
        resource = request.resource.with_(ports=request.reuse_ports.count, port_ranges=request.reuse_ports)
        request = replace(request, resource=resource)
    survivors, explanation = reference_explained(view, request, settings)
    if not survivors:
        return [], [], explanation
    keys = list(np.asarray(selector.rank(view, np.array(survivors), request)))
    rank = (lambda n: n) if ties is None else (lambda n: ties[n])
    ranked = sorted(zip(keys, survivors), key=lambda kn: (kn[0], rank(kn[1])))[:k]
    return [n for _, n in ranked], [key for key, _ in ranked], explanation


# ------------------------------------------------------------------ inputs
@st.composite
def clusters(draw, max_nodes=24):
    count = draw(st.integers(1, max_nodes))
    specs = []
    for i in range(count):
        gpu_type, topo, gpus, vcores, memory = draw(st.sampled_from(MACHINES))
        low = draw(st.sampled_from([19_990, 20_000]))  # some ports below port_min
        specs.append(NodeSpec(host=f"n{i}", rack=f"r{i % 4}",
                              labels=frozenset(draw(st.sets(st.sampled_from(["a", "b"])))),
                              gpu_type=gpu_type, topology=topo, memory_mb=memory, vcores=vcores, gpus=gpus,
                              ports=PortRanges.of((low, low + draw(st.integers(0, 12))))))
    view = ClusterView(specs)
    for _ in range(draw(st.integers(0, count))):
        random_change(draw, view)
    return view


def random_change(draw, view: ClusterView, booked: list | None = None) -> None:
    """One change a running AM makes: book, give back, health, a failure, an RM report."""
    i = draw(st.integers(0, len(view) - 1))
    host = view.hosts[i]
    what = draw(st.sampled_from(["allocate", "allocate", "share", "release", "health", "failed", "usage"]))
    if what == "share" and view.gpu_share_max_free[i] > 0:   # a share on a GPU with room for it
        milli = draw(st.sampled_from([250, 500, 700]))
        room = np.flatnonzero(view.gpu_milli_free[i] >= milli)
        if room.size:
            ask = ResourceDescriptor(gpu_milli=milli, gpu_mask=1 << int(draw(st.sampled_from(room.tolist()))))
            view.allocate(i, ask)
            if booked is not None:
                booked.append((i, ask, None))
    elif what == "allocate":
        free = view.free(i)
        mask = draw(st.integers(0, free.gpu_mask)) & free.gpu_mask
        ports = free.port_ranges.take_sequential(min(free.port_ranges.count, draw(st.integers(0, 2))), 0) \
            if free.port_ranges.count else PortRanges()
        ask = ResourceDescriptor(draw(st.integers(0, free.memory_mb)),
                                 draw(st.integers(0, int(free.vcores * 2))) / 2, gpu_mask=mask, port_ranges=ports)
        role = draw(st.sampled_from(["w", "s"]))
        view.allocate(i, ask, role=role)
        if booked is not None:
            booked.append((i, ask, role))
    elif what == "release" and booked:
        i, ask, role = booked.pop(draw(st.integers(0, len(booked) - 1)))
        view.release(i, ask, role=role)
    elif what == "health":
        view.set_health(host, draw(st.booleans()))
    elif what == "failed":
        view.mark_failed(draw(st.sampled_from(["w", "s"])), host)
    elif what == "usage" and booked is None:  # overwrites usage: only where nothing tracks bookings
        spec = view.specs[i]
        used = ResourceDescriptor(draw(st.integers(0, spec.memory_mb)), draw(st.integers(0, int(spec.vcores))),
                                  gpu_mask=draw(st.integers(0, (1 << spec.gpus) - 1)))
        shares = None
        if draw(st.booleans()):   # the report has shares: a GPU not wholly free is taken whole or shared
            shares = tuple(draw(st.sampled_from([0, 400, 750])) if used.gpu_mask >> k & 1 else 1000
                           for k in range(spec.gpus))
        view.set_free(host, spec.capacity.subtract(used), shares)


@st.composite
def requests(draw):
    named = draw(st.integers(0, 9)) == 0
    share = draw(st.sampled_from([0, 0, 0, 250, 500, 999]))   # a share of one GPU (milli), pinned when named
    gpus = 0 if named or share else draw(st.sampled_from([0, 1, 2, 3, 4, 8]))
    masks = [0b1, 0b100, 0b1000] if share else [0b1, 0b11, 0b1010]
    reuse = draw(st.sampled_from([PortRanges(), PortRanges(), PortRanges.of((20_001, 20_002))]))
    return SelectionRequest(
        role=draw(st.sampled_from(["w", "s"])),
        resource=ResourceDescriptor(draw(st.sampled_from([0, 1024, 200_000])), draw(st.sampled_from([0, 1, 7.5, 40])),
                                    gpus, gpu_mask=draw(st.sampled_from(masks)) if named else 0,
                                    ports=0 if reuse else draw(st.sampled_from([0, 0, 2, 5])), gpu_milli=share),
        node_label=draw(st.sampled_from([None, None, "a", "c"])),
        gpu_types=draw(st.sampled_from([(), (), ("V100",), ("V100", "T4")])),
        pending_tasks=draw(st.integers(1, 6)),
        reuse_ports=reuse,
        placed_hosts=tuple(draw(st.lists(st.sampled_from(["n0", "n1", "n5", "x"]), max_size=2, unique=True))),
        job_gpus=draw(st.sampled_from([None, 0, 4])),
        max_instances_per_node=draw(st.sampled_from([None, None, 1, 2])),
        rack_policy=draw(st.sampled_from(["none", "none", "none", "pack", "spread"])),
    )


selection_settings = st.builds(
    SelectionSettings, port_min=st.sampled_from([0, 20_000, 20_005]),
    allow_non_gpu_job_on_gpu_node=st.booleans(), skip_nodes_where_role_failed=st.booleans(),
    candidate_nodes_factor=st.integers(1, 3), seed=st.integers(0, 3))


@contextmanager
def rebuild_after(moved: int):
    """Rebuild the node indexes after ``moved`` changed nodes (tiny test clusters would never)."""
    with mock.patch.object(node_index, "MIN_CHANGED_BEFORE_REBUILD", moved):
        yield


def assert_decides_as_reference(pipeline, view, request, k=None, ties=None):
    k = k or pipeline.selector.keep(request, len(view))
    nodes, keys, explanation = reference_best(view, request, pipeline.settings, pipeline.selector, k, ties)
    try:
        got_nodes, got_keys = pipeline.best_nodes(view, request, k, ties=ties)
    except NotAvailable as exc:
        assert nodes == [], f"NotAvailable, but the reference finds {nodes}"
        assert exc.explanation.to_dict() == explanation.to_dict()
        return
    assert got_nodes.tolist() == nodes
    assert list(got_keys) == keys


# ------------------------------------------------------------------ the tests
@pytest.mark.parametrize("name", SELECTORS)
@settings(max_examples=60)
@given(view=clusters(), request=requests(), config=selection_settings)
def test_select_decides_as_the_reference(name, view, request, config):
    pipeline = SelectionPipeline(config, get_selector(name, config.candidate_nodes_factor))
    k = pipeline.selector.keep(request, len(view))
    # select() breaks ties by node number, or by host name under the node-name tie rule
    by_name = pipeline.tie_order.of(len(view), view.hosts) if pipeline.selector.tie_rule == "node-name" else None
    nodes, keys, explanation = reference_best(view, request, config, pipeline.selector, k, by_name)
    try:
        result = pipeline.select(view, request)
    except NotAvailable as exc:
        assert nodes == [], f"NotAvailable, but the reference finds {nodes}"
        assert exc.explanation.to_dict() == explanation.to_dict()
        return
    # select() then keeps the longest prefix with common ports: the reference's, cut the same way
    ranked, _, ports = pipeline._choose_ports(view, result.request, np.array(nodes), np.array(keys))
    assert result.hosts == [view.hosts[i] for i in ranked]
    assert list(result.keys) == keys[:len(ranked)]
    assert result.ports == ports
    assert result.explanation.to_dict() == explanation.to_dict()


@pytest.mark.parametrize("name", ["job-packing", "topology", "locality", "random"])
@settings(max_examples=40)
@given(data=st.data(), view=clusters(), config=selection_settings, moved=st.sampled_from([0, 3, 64]),
       seeded_ties=st.booleans())
def test_the_index_follows_changes_and_copies(name, data, view, config, moved, seeded_ties):
    pipeline = SelectionPipeline(config, get_selector(name, config.candidate_nodes_factor))
    ties = np.random.default_rng(config.seed).permutation(len(view)) if seeded_ties else None
    asked = [data.draw(requests()) for _ in range(3)]
    booked: list = []

    def check(on, request, k=None):
        assert_decides_as_reference(pipeline, on, request, k, ties)

    with rebuild_after(moved):
        for request in asked:  # build the indexes before anything changes
            check(view, request)
        for _ in range(data.draw(st.integers(1, 12))):
            random_change(data.draw, view, booked)
            check(view, data.draw(st.sampled_from(asked)))
        scratch = view.copy()
        before = [reference_best(view, r, config, pipeline.selector, 4, ties)[:2] for r in asked]
        scratch_booked = list(booked)
        for _ in range(data.draw(st.integers(1, 8))):
            random_change(data.draw, scratch, scratch_booked)
            check(scratch, data.draw(st.sampled_from(asked)))
        for request, (nodes, keys) in zip(asked, before):  # the original did not move
            assert reference_best(view, request, config, pipeline.selector, 4, ties)[:2] == (nodes, keys)
            check(view, request, k=4)
        for _ in range(data.draw(st.integers(0, 4))):  # and still follows its own changes
            random_change(data.draw, view, booked)
            check(view, data.draw(st.sampled_from(asked)))


@settings(max_examples=30)
@pytest.mark.parametrize("name", ["job-packing", "locality"])
@given(view=clusters(), request=requests(), k=st.integers(1, 30), data=st.data())
def test_best_nodes_among_rows(name, view, request, k, data):
    """Rows in any order: the best of them by (key, node index)."""
    pipeline = SelectionPipeline(SelectionSettings(port_min=20_000), get_selector(name))
    rows = data.draw(st.permutations(sorted(data.draw(st.sets(st.integers(0, len(view) - 1), min_size=1)))))
    everywhere, _, _ = reference_best(view, request, pipeline.settings, pipeline.selector, len(view))
    expected = [i for i in everywhere if i in rows][:k] if request.rack_policy == "none" else None
    try:
        nodes, _ = pipeline.best_nodes(view, request, k, rows=np.array(rows))
    except NotAvailable as exc:
        assert exc.explanation.total == len(rows) and exc.explanation.survivors == 0
        assert expected in ([], None)
        return
    assert set(nodes.tolist()) <= set(rows) and len(nodes) <= k
    if expected is not None:  # a rack policy judges racks by the rows given: checked above only
        assert nodes.tolist() == expected


@settings(max_examples=12)
@given(nodes=st.integers(41, 400), rack_size=st.sampled_from([4, 40]), seed=st.integers(0, 1000),
       seeded_ties=st.booleans(), data=st.data())
def test_locality_searches_hosts_racks_then_the_index_as_the_reference(nodes, rack_size, seed, seeded_ties, data):
    """Clusters of many racks, the job's hosts spread over them, up to 60 nodes asked:
    the search by tier (hosts, their racks, the index walked past those racks, a chunk
    at a time) against the reference, before and after bookings."""
    view = ClusterView(synthetic_specs(nodes, rack_size))
    occupy_randomly(view, seed)
    pipeline = SelectionPipeline(SelectionSettings(seed=seed), get_selector("locality"))
    ties = np.random.default_rng(seed).permutation(nodes) if seeded_ties else None
    for request in request_stream(view, 8, seed):
        hosts = tuple(data.draw(st.lists(st.sampled_from(view.hosts), min_size=1, max_size=6, unique=True)))
        request = replace(request, placed_hosts=hosts)
        assert_decides_as_reference(pipeline, view, request, data.draw(st.integers(1, 60)), ties)
        chosen = view.host_index[data.draw(st.sampled_from(hosts))]  # the job books on one of its hosts
        free = view.free(chosen)
        view.allocate(chosen, ResourceDescriptor(free.memory_mb // 2, free.vcores // 2))


@pytest.mark.parametrize("name", SELECTORS)
@settings(max_examples=40)
@given(view=clusters(), request=requests(), config=selection_settings)
def test_a_single_pick_reports_the_strategys_rank_of_its_node(name, view, request, config):
    """select_single_node()'s key is what the strategy's rank says of the node it chose
    (locality's with the tier of the job's hosts), whichever search found it."""
    pipeline = SelectionPipeline(config, get_selector(name, config.candidate_nodes_factor))
    try:
        result = pipeline.select_single_node(view, request)
    except NotAvailable:   # then no node can take it: select() finds none either
        with pytest.raises(NotAvailable):
            pipeline.select(view, request)
        return
    node = np.array([view.index(result.best.host)])
    assert list(result.keys) == list(np.asarray(pipeline.selector.rank(view, node, result.request)))


def test_a_single_pick_for_hosts_the_view_does_not_know_reports_the_rank_as_asked():
    view = ClusterView([NodeSpec(f"n{i}", memory_mb=1000, vcores=4) for i in range(3)])
    pipeline = SelectionPipeline(SelectionSettings(), get_selector("locality"))
    request = SelectionRequest("w", ResourceDescriptor(500, 1), placed_hosts=("gone",))
    result = pipeline.select_single_node(view, request)
    node = np.array([view.index(result.best.host)])
    assert list(result.keys) == list(pipeline.selector.rank(view, node, request)) == list(pipeline.select(view, request).keys[:1])


def test_the_explanation_of_a_success_is_read_before_the_view_changes():
    view = ClusterView([NodeSpec(f"n{i}", memory_mb=1000, vcores=4) for i in range(3)])
    view.set_health("n2", False)
    pipeline = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
    request = SelectionRequest("w", ResourceDescriptor(500, 1))
    result = pipeline.select(view, request)
    assert result.explanation.summary() == "2/3 nodes fit role w: 1 unhealthy"
    stale = pipeline.select(view, request)
    view.allocate("n0", ResourceDescriptor(500, 1))
    with pytest.raises(StaleExplanation, match="read after the view changed"):
        stale.explanation


def test_a_node_key_column_must_hold_integers():
    with pytest.raises(TypeError, match="must hold integers"):
        node_index.NodeIndex(np.array([0.5, 1.0]), np.array([0, 0]), "float-keys")


@settings(max_examples=40)
@given(data=st.data(), view=clusters(), asked=st.lists(requests(), min_size=1, max_size=4))
def test_the_index_buckets_hold_every_node_with_room(data, view, asked):
    """A node index reads only the buckets from ``min_bucket(ask)`` up: every node where one
    instance fits must be there, as the view changes (each changed node's bucket is worked
    out from its row, one by one), and each node's bucket is the one a build gives it."""
    from gangmaster.selectors.candidates import node_index as index_of
    from gangmaster.selectors.fit import Demand, fits
    from gangmaster.selectors.job_packing import PACKING

    index_of(view, PACKING, None)   # kept from here on, row by row
    for _ in range(data.draw(st.integers(0, 10))):
        random_change(data.draw, view)
    index = index_of(view, PACKING, None)
    built = node_index.NodeIndex(PACKING.column(view), node_index.room_buckets(view, slice(None)))
    every = lambda rows: np.ones(rows.size, bool)
    for lowest in sorted({0} | {node_index.min_bucket(request.resource) for request in asked}):
        assert (index.best(len(view), lowest, every)[0].tolist()
                == built.best(len(view), lowest, every)[0].tolist())
    for request in asked:
        fitting = fits(view, Demand.of(request.resource))
        nodes = index.best(len(view), node_index.min_bucket(request.resource), lambda rows: fitting[rows])[0]
        assert sorted(nodes.tolist()) == np.flatnonzero(fitting).tolist()


@settings(max_examples=40)
@given(data=st.data(), view=clusters(), asked=st.lists(requests(), min_size=1, max_size=3),
       config=selection_settings)
def test_a_stage_checks_one_node_as_it_checks_many(data, view, asked, config):
    """Each stage's plain-Python check of one node (what an index walk asks of its first
    nodes) answers as its numpy check of every node, as the view changes."""
    from gangmaster.selectors.candidates import node_check, node_check_one
    from gangmaster.selectors.filters import NODE_STAGES

    for _ in range(data.draw(st.integers(0, 10))):
        random_change(data.draw, view)
    for request in asked:
        ctx = FilterContext(view, request, config)
        for stage in NODE_STAGES:
            many, one = stage.check(ctx), stage.check_one(ctx)
            assert (many is None) == (one is None), stage.name
            if many is not None:
                assert [bool(one(i)) for i in range(len(view))] == many(None).tolist(), stage.name
        every = node_check(ctx)
        expected = [True] * len(view) if every is None else every(None).tolist()
        assert [bool(node_check_one(ctx)(i)) for i in range(len(view))] == expected


@pytest.mark.parametrize("name", SELECTORS)
@settings(max_examples=30)
@given(data=st.data(), view=clusters(), asked=st.lists(requests(), min_size=1, max_size=3))
def test_a_node_key_kept_row_by_row_is_the_key_computed_afresh(name, data, view, asked):
    """A node key column brought up to date one changed row at a time (``compute_row``,
    where the strategy gives one) holds what ``compute`` gives for every node at once."""
    selector = get_selector(name)
    keys = [key for key in (selector.node_key(request) for request in asked) if key is not None]
    for key in keys:
        key.column(view)   # kept from here on, row by row
    for _ in range(data.draw(st.integers(0, 10))):
        random_change(data.draw, view)
    for key in keys:
        assert key.column(view).tolist() == np.asarray(key.compute(view, slice(None))).tolist(), key.name
        if key.compute_row is not None:
            assert [key.compute_row(view, i) for i in range(len(view))] == key.column(view).tolist(), key.name
