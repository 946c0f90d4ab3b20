"""The `topology` strategy inside a cluster view and through select()."""
import numpy as np

from gangmaster.gpu_topology.masks import indices_of, mask_from_indices, popcount
from gangmaster.gpu_topology.presets import load_preset
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.pipeline import select
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.topology_aware import TopologyAware


def node(host, topology, gpus, **kw):
    return NodeSpec(host=host, topology=topology, gpus=gpus, memory_mb=kw.get("memory_mb", 65536),
                    vcores=kw.get("vcores", 32))


def request(gpus, mask=0):
    return SelectionRequest(role="worker", resource=ResourceDescriptor(memory_mb=1024, vcores=1, gpus=gpus,
                                                                       gpu_mask=mask))


def use(view, host, gpus):
    mask = mask_from_indices(gpus)
    view.allocate(host, ResourceDescriptor(gpus=popcount(mask), gpu_mask=mask))


def test_registered_as_topology():
    assert isinstance(get_selector("topology"), TopologyAware)


def test_choose_gpus_uses_the_topology():
    view = ClusterView([node("dgx", "dgx1-v100", 8)])
    use(view, "dgx", [1, 4, 7])  # free: 0,2,3,5,6
    assert indices_of(TopologyAware().choose_gpus(view, 0, request(2))) == [5, 6]


def test_named_mask_and_no_gpus_are_respected():
    view = ClusterView([node("dgx", "dgx1-v100", 8)])
    s = TopologyAware()
    assert s.choose_gpus(view, 0, request(2, mask=0b101)) == 0b101
    assert s.choose_gpus(view, 0, request(0)) == 0


def test_nodes_without_a_known_topology_get_lowest_bits_and_offer_zero():
    view = ClusterView([node("plain", None, 4), node("odd", "no-such-preset", 4),
                        node("mismatch", "dgx1-v100", 4), node("cpu", None, 0)])
    s = TopologyAware()
    for i in range(3):
        use(view, view.hosts[i], [0])
        assert s.choose_gpus(view, i, request(2)) == 0b110
    offers = s.offers(view, np.arange(4), 2)
    assert offers.tolist() == [0, 0, 0, 0]


def test_rank_prefers_the_node_that_offers_nvlink_then_packing():
    view = ClusterView([node("a-sys-only", "dgx1-v100", 8), node("b-nvlink", "dgx1-v100", 8),
                        node("c-pcie", "pcie-4gpu", 4), node("d-nvlink-emptier", "dgx1-v100", 8)])
    use(view, "a-sys-only", [1, 2, 3, 4, 6, 7])      # free 0,5: SYS
    use(view, "b-nvlink", [0, 1, 2, 3, 4, 7])        # free 5,6: NV2
    use(view, "d-nvlink-emptier", [0, 1, 2, 3])      # free 4..7: NV2 pairs, more free
    s = TopologyAware()
    candidates = np.arange(4)
    assert s.offers(view, candidates, 2).tolist() == [10, 120, 50, 120]
    order = np.argsort(s.rank(view, candidates, request(2)), kind="stable")
    assert [view.hosts[i] for i in order] == ["b-nvlink", "d-nvlink-emptier", "c-pcie", "a-sys-only"]


def test_cached_keys_follow_changes_to_the_view():
    view = ClusterView([node(f"n{i}", "dgx1-v100", 8) for i in range(3)])
    s = TopologyAware()
    candidates = np.arange(3)
    first = s.rank(view, candidates, request(4))
    assert np.array_equal(first, s.keys(view, candidates, 4))
    use(view, "n1", [0, 4])  # 1,2,3 + 5,6,7 left: no NVLink 4-clique any more
    use(view, "n2", [0, 5])
    again = s.rank(view, candidates, request(4))
    assert np.array_equal(again, s.keys(view, candidates, 4))
    assert not np.array_equal(first, again)


def test_named_mask_rank_scores_that_mask():
    view = ClusterView([node("dgx", "dgx1-v100", 8), node("pcie", "pcie-4gpu", 4)])
    s = TopologyAware()
    assert s.offers(view, np.arange(2), 2, gpu_mask=0b1001).tolist() == [120, 30]


def test_select_gives_an_nvlink_pair_where_lowest_bits_would_not():
    view = ClusterView([node("dgx", "dgx1-v100", 8)])
    use(view, "dgx", [1, 4, 7])
    topo = select(view, request(2), selector="topology").best
    packing = select(view, request(2), selector="job-packing").best
    t = load_preset("dgx1-v100")
    assert t.all_nvlink(topo.gpu_mask) and t.set_score(topo.gpu_mask) == 120
    assert indices_of(packing.gpu_mask) == [0, 2] and t.set_score(packing.gpu_mask) == 110
