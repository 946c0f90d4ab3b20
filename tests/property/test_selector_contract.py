"""The contract every strategy must keep, run against EVERY registered selector
(built-ins, the topology plugin, and the example third-party plugin installed
through the entry point). Strategy authors run this same suite on theirs.

- never a node that fails a filter, never over capacity, never a GPU mask outside
  the free mask, and exactly the requested number of GPUs (for a share of one GPU:
  one GPU with that many milli free);
- NotAvailable only when no node could take the request (checked by brute force);
- the same view, request and seed give the same answer;
- booking selections one after another never double-books a GPU or a port, and
  free + used = capacity throughout (per GPU for shares: free + used = 1000 milli);
- where a strategy gives a node key (select() then walks an index sorted by it),
  its rank agrees with that key column, and the column holds integers;
- where it gives a key within the locality tiers and no node key (select() then
  searches the job's hosts, their racks, then that key's index), its rank orders the
  nodes by tier, then by that key.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from gangmaster.gpu_topology.masks import is_subset, popcount
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.locality import locality_tiers
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError
from gangmaster.selectors.selector import get_selector as get_registered, selector_classes
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.selectors.workload import TaskShape, WorkloadShapes

SELECTORS = sorted(selector_classes())
#: every strategy is told the workload (those that ignore it, ignore it: fgd needs it)
WORKLOAD = WorkloadShapes.weighted([(TaskShape(1000, 1024, gpus=1), 3), (TaskShape(7500, 200_000, gpus=2), 1),
                                    (TaskShape(1000, 1024, gpu_milli=500), 2), (TaskShape(40_000, 1024), 1),
                                    (TaskShape(1000, 1024, gpus=4, gpu_types=("T4",)), 1)])


def get_selector(name):
    """The registered strategy, given the workload through the hook."""
    selector = get_registered(name)
    selector.observe_workload(WORKLOAD)
    return selector
MACHINES = [  # (gpu type, topology preset, gpus, vcores, memory)
    ("V100", "dgx1-v100", 8, 80, 491_520),
    ("T4", "pcie-4gpu", 4, 32, 196_608),
    (None, None, 0, 32, 131_072),
]


def test_the_builtin_and_plugin_selectors_are_all_registered():
    assert {"job-packing", "locality", "random", "topology", "emptiest-first", "best-fit", "dot-product", "fgd",
            "packing", "random-fit"} <= set(SELECTORS)


@st.composite
def clusters(draw):
    count = draw(st.integers(1, 10))
    specs = []
    for i in range(count):
        gpu_type, topo, gpus, vcores, memory = draw(st.sampled_from(MACHINES))
        specs.append(NodeSpec(host=f"n{i}", rack=f"r{i % 3}", labels=frozenset(draw(st.sets(st.sampled_from(["a", "b"])))),
                              gpu_type=gpu_type, topology=topo, memory_mb=memory, vcores=vcores, gpus=gpus,
                              ports=PortRanges.of((20000, 20000 + draw(st.integers(0, 6))))))
    view = ClusterView(specs)
    for i in range(count):
        if draw(st.booleans()):
            free = view.free_mask(i)
            mask = draw(st.integers(0, free)) & free
            view.allocate(i, ResourceDescriptor(draw(st.integers(0, 100_000)), draw(st.sampled_from([0, 4, 16.5])),
                                                gpu_mask=mask), role=draw(st.sampled_from(["w", "s"])))
        if view.gpus_free[i] and draw(st.integers(0, 3)) == 0:   # shares on a wholly free GPU or two
            for gpu, milli in draw(st.lists(st.tuples(st.integers(0, 7), st.sampled_from([250, 500, 900])),
                                            max_size=3)):
                gpu %= int(view.gpu_capacity[i])
                if view.gpu_milli_free[i, gpu] >= milli:
                    view.allocate(i, ResourceDescriptor(gpu_milli=milli, gpu_mask=1 << gpu))
        if draw(st.integers(0, 9)) == 0:
            view.set_health(view.hosts[i], False)
        if draw(st.integers(0, 9)) == 0:
            view.mark_failed("w", view.hosts[i])
    return view


@st.composite
def requests(draw):
    gpus = draw(st.sampled_from([0, 1, 2, 3, 4, 8, "share"]))
    share = draw(st.sampled_from([250, 500, 750, 999])) if gpus == "share" else 0
    return SelectionRequest(
        role=draw(st.sampled_from(["w", "s"])),
        resource=ResourceDescriptor(draw(st.sampled_from([1024, 200_000])), draw(st.sampled_from([1, 7.5, 40])),
                                    0 if share else gpus, ports=draw(st.sampled_from([0, 0, 2])), gpu_milli=share),
        node_label=draw(st.sampled_from([None, "a"])),
        gpu_types=draw(st.sampled_from([(), ("V100",), ("V100", "T4")])),
        pending_tasks=draw(st.integers(1, 4)),
        max_instances_per_node=draw(st.sampled_from([None, 1, 2])),
        rack_policy=draw(st.sampled_from(["none", "pack", "spread"])),
        placed_hosts=tuple(draw(st.lists(st.sampled_from(["n0", "n1", "n2"]), max_size=2, unique=True))),
    )


def node_can_take(view, i, request, settings) -> bool:
    """The filters, restated independently of the pipeline (minus the rack policy,
    which only narrows the choice among nodes that fit)."""
    node = view.node(i)
    res = request.resource
    if not node.healthy:
        return False
    if request.node_label and request.node_label not in node.labels:
        return False
    if request.gpu_types and node.gpu_type not in request.gpu_types:
        return False
    if request.max_instances_per_node and node.role_instances.get(request.role, 0) >= request.max_instances_per_node:
        return False
    if settings.skip_nodes_where_role_failed and request.role in node.failed_roles:
        return False
    free = node.free
    share_fits = not res.gpu_milli or max(node.gpu_milli_free, default=0) >= res.gpu_milli
    return (res.memory_mb <= free.memory_mb and res.vcores <= free.vcores + 1e-9 and res.gpus <= free.gpus
            and share_fits and res.ports <= free.port_ranges.above(settings.port_min).count)


SETTINGS = SelectionSettings(port_min=20000)


@pytest.mark.parametrize("name", SELECTORS)
@given(view=clusters(), request=requests(), seed=st.integers(0, 3))
def test_selection_respects_filters_capacity_and_masks(name, view, request, seed):
    pipeline = SelectionPipeline(SelectionSettings(port_min=20000, seed=seed), get_selector(name))
    try:
        result = pipeline.select(view, request)
    except NotAvailable:
        assert not any(node_can_take(view, i, request, SETTINGS) for i in range(len(view)))
        return
    assert result.candidates
    for candidate in result.candidates:
        i = view.index(candidate.host)
        assert node_can_take(view, i, request, SETTINGS), candidate
        share = request.resource.gpu_milli
        if share:   # one GPU of the node, with the share's milli free (wholly free or shared)
            assert popcount(candidate.gpu_mask) == 1
            assert view.node(i).gpu_milli_free[candidate.gpu_mask.bit_length() - 1] >= share
        else:
            assert is_subset(candidate.gpu_mask, view.free_mask(i))
            assert popcount(candidate.gpu_mask) == request.resource.gpus
        assert result.resource.port_ranges.fits_in(view.ports_free[i])
        assert result.resource.ports == request.resource.ports


@pytest.mark.parametrize("name", SELECTORS)
@given(view=clusters(), request=requests(), seed=st.integers(0, 3))
def test_same_input_and_seed_give_the_same_choice(name, view, request, seed):
    def choose():
        pipeline = SelectionPipeline(SelectionSettings(port_min=20000, seed=seed), get_selector(name))
        try:
            result = pipeline.select_single_node(view.copy(), request)
        except NotAvailable as exc:
            return str(exc)
        return result.candidates, result.ports
    assert choose() == choose()


@pytest.mark.parametrize("name", SELECTORS)
@given(view=clusters(), request=requests())
def test_booking_selections_never_double_books(name, view, request):
    pipeline = SelectionPipeline(SelectionSettings(port_min=20000), get_selector(name))
    capacity_ports = {h: view.port_capacity[view.index(h)] for h in view.hosts}
    booked_gpus = {h: 0 for h in view.hosts}
    milli_before = view.gpu_milli_free.copy()
    shares = np.zeros_like(milli_before)   # milli booked per node and GPU by the shares selected
    share = request.resource.gpu_milli
    for _ in range(12):
        try:
            result = pipeline.select_single_node(view, request)
        except NotAvailable:
            break
        choice = result.best
        if share:
            gpu = choice.gpu_mask.bit_length() - 1
            shares[view.index(choice.host), gpu] += share
            assert shares[view.index(choice.host), gpu] <= milli_before[view.index(choice.host), gpu], \
                "a GPU's milli handed out twice"
        else:
            assert choice.gpu_mask & booked_gpus[choice.host] == 0, "GPU handed out twice"
        booked = result.resource.with_(gpu_mask=choice.gpu_mask, gpus=0)
        view.allocate(choice.host, booked, role=request.role)
        booked_gpus[choice.host] |= choice.gpu_mask
    if share:   # free + used = 1000 per GPU, counted apart from the view's ledger
        assert np.array_equal(view.gpu_milli_free, milli_before - shares)
    for i, host in enumerate(view.hosts):
        assert view.memory_free[i] + view.memory_used[i] == view.memory_capacity[i]
        assert 0 <= view.memory_free[i] and 0 <= view.gpus_free[i] and view.vcores_free[i] >= -1e-9
        assert view.gpus_free[i] == popcount(view.free_mask(i))
        assert view.ports_free[i].fits_in(capacity_ports[host])
    with pytest.raises(ResourceError):  # booking a GPU twice is refused by the view itself
        i = next((i for i in range(len(view)) if view.gpus_used[i]), None)
        if i is None:
            raise ResourceError("no GPU in use to double-book")
        used = int(view.gpu_used_mask[i])
        view.allocate(i, ResourceDescriptor(gpu_mask=used & -used))


@pytest.mark.parametrize("name", SELECTORS)
@given(view=clusters(), request=requests())
def test_rank_agrees_with_the_node_key(name, view, request):
    selector = get_selector(name)
    key = selector.node_key(request)
    if key is None:
        return
    column = key.column(view)
    assert np.issubdtype(column.dtype, np.integer) and column.shape == (len(view),)
    candidates = np.arange(len(view))[::-1]
    assert np.array_equal(np.asarray(selector.rank(view, candidates, request)), column[candidates])


@pytest.mark.parametrize("name", SELECTORS)
@given(view=clusters(), request=requests())
def test_rank_orders_by_tier_then_the_key_within_tiers(name, view, request):
    selector = get_selector(name)
    key = selector.key_within_tiers(request)
    if key is None:
        return
    nodes = np.arange(len(view))
    ranks = np.asarray(selector.rank(view, nodes, request))
    within = key.column(view)
    tiers = (locality_tiers(view, nodes, request.placed_hosts) if selector.node_key(request) is None
             else np.zeros(len(view), dtype=np.int64))  # a node key: the rank is that key (test above)
    order = np.lexsort((within, tiers))
    ranks, tiers, within = ranks[order], tiers[order], within[order]
    assert np.all(ranks[:-1] <= ranks[1:])
    alike = (tiers[:-1] == tiers[1:]) & (within[:-1] == within[1:])
    assert np.array_equal(ranks[:-1][alike], ranks[1:][alike])
