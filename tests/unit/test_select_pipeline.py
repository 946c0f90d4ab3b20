"""Table-driven tests of each filter and strategy, asserting the explanation as
well as the choice."""
import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.explanation import NotAvailable, StaleExplanation
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.ports import PortRanges
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.selectors.selector import (Selector, UnknownSelector, get_selector, register_selector,
                                          selector_classes, selector_registered)
from gangmaster.selectors.settings import SelectionSettings

PORTS = PortRanges.of((20000, 20009))


def cluster():
    """a0 a1 (rack a, 8x V100, label nvlink), b0 b1 (rack b, 4x T4), c0 (rack c, CPU)."""
    return ClusterView([
        NodeSpec("a0", "a", frozenset({"nvlink"}), "V100", "dgx1-v100", 100_000, 40, 8, PORTS),
        NodeSpec("a1", "a", frozenset({"nvlink"}), "V100", "dgx1-v100", 100_000, 40, 8, PORTS),
        NodeSpec("b0", "b", frozenset(), "T4", "pcie-4gpu", 50_000, 16, 4, PORTS),
        NodeSpec("b1", "b", frozenset(), "T4", "pcie-4gpu", 50_000, 16, 4, PORTS),
        NodeSpec("c0", "c", frozenset(), None, None, 50_000, 16, 0, PORTS),
    ])


def pipeline(selector="job-packing", **settings):
    settings = SelectionSettings(**{"port_min": 20000, **settings})
    return SelectionPipeline(settings, get_selector(selector, settings.candidate_nodes_factor))


def req(role="w", memory=1000, vcores=1, gpus=0, **kw):
    return SelectionRequest(role, R(memory, vcores, gpus, ports=kw.pop("ports", 0)), **kw)


@pytest.mark.parametrize("request_, settings, expected_hosts, summary", [
    (req(node_label="nvlink", pending_tasks=3), {}, {"a0", "a1"},
     "2/5 nodes fit role w: 3 without label nvlink"),
    (req(gpus=1, gpu_types=("T4",), pending_tasks=3), {}, {"b0", "b1"},
     "2/5 nodes fit role w: 3 of another GPU type (want T4)"),
    (req(pending_tasks=3), {"allow_non_gpu_job_on_gpu_node": False}, {"c0"},
     "1/5 nodes fit role w: 4 GPU nodes kept for GPU jobs"),
    (SelectionRequest("w", R(1000, 1, gpu_milli=500), pending_tasks=3), {"allow_non_gpu_job_on_gpu_node": False},
     {"a0", "a1", "b0", "b1"}, "4/5 nodes fit role w: 1 without a GPU to share (need 500 milli)"),
    (req(gpus=6, pending_tasks=3), {}, {"a0", "a1"},
     "2/5 nodes fit role w: 3 gpus too small (need 6, capacity at most 4)"),
    (req(memory=60_000, pending_tasks=3), {}, {"a0", "a1"},
     "2/5 nodes fit role w: 3 memory (MB) too small (need 60000, capacity at most 50000)"),
])
def test_filters_choose_and_explain(request_, settings, expected_hosts, summary):
    result = pipeline(**settings).select(cluster(), request_)
    assert set(result.hosts) == expected_hosts
    assert result.explanation.summary() == summary


def test_exhausted_is_kept_apart_from_filtered_with_numbers():
    view = cluster()
    view.allocate("a0", R(1000, 39.5, 0))
    view.allocate("a1", R(1000, 33, 0))
    view.set_health("b0", False)
    with pytest.raises(NotAvailable) as err:
        pipeline().select(view, req(vcores=7.5, gpus=5))
    e = err.value.explanation
    assert str(err.value) == ("0/5 nodes fit role w: 1 unhealthy, 2 gpus too small (need 5, capacity at most 4), "
                              "2 vcores exhausted (need 7.5, most free 7)")
    assert (e.filtered, e.exhausted, e.count("unhealthy")) == (2, 3, 1)


def test_a_share_exhausted_is_explained_in_milli_with_the_most_free():
    view = cluster()
    for host, gpus in (("a0", 8), ("a1", 8), ("b0", 4)):
        for gpu in range(gpus):
            view.allocate(host, R(gpu_milli=600, gpu_mask=1 << gpu))
    view.allocate("b0", R(gpu_milli=100, gpu_mask=0b1))
    result = pipeline().select(view, SelectionRequest("w", R(1000, 1, gpu_milli=500)))
    assert result.hosts == ["b1"]
    assert result.explanation.summary() == ("1/5 nodes fit role w: 1 without a GPU to share (need 500 milli), "
                                            "3 no GPU with 500 milli free, most free 400")
    fitting = pipeline().select(view, SelectionRequest("w", R(1000, 1, gpu_milli=400), pending_tasks=5))
    assert set(fitting.hosts) == {"a0", "a1", "b0", "b1"}   # 400 fits where 600 is taken (b0: its GPU 1..3)


def test_role_cap_and_failed_here():
    view = cluster()
    view.allocate("a0", R(10, 1), role="w")
    view.mark_failed("w", "a1")
    result = pipeline().select(view, req(gpus=1, max_instances_per_node=1, pending_tasks=5))
    assert set(result.hosts) == {"b0", "b1"}
    assert "1 at the cap of 1 instance(s) of the role per node" in result.explanation.summary()
    assert "1 where the role already failed" in result.explanation.summary()
    unskipped = pipeline(skip_nodes_where_role_failed=False).select(view, req(gpus=1, max_instances_per_node=1, pending_tasks=5))
    assert "a1" in unskipped.hosts


def test_requested_gpu_mask_must_be_free():
    view = cluster()
    view.allocate("a0", R(gpu_mask=0b1))
    result = pipeline().select(view, SelectionRequest("w", R(gpu_mask=0b11), pending_tasks=4))
    assert set(result.hosts) == {"a1", "b0", "b1"}
    assert all(c.gpu_mask == 0b11 for c in result.candidates)
    assert "1 requested GPUs exhausted (need 0x3)" in result.explanation.summary()


def test_rack_policies():
    view = cluster()
    view.allocate("b0", R(10, 1), role="w")
    packed = pipeline().select(view, req(gpus=1, rack_policy="pack", pending_tasks=5))
    assert set(packed.hosts) == {"b0", "b1"}
    assert "2 outside the racks the pack rack policy allows" in packed.explanation.summary()
    spread = pipeline().select(view, req(gpus=1, rack_policy="spread", pending_tasks=5))
    assert set(spread.hosts) == {"a0", "a1"}
    first = pipeline().select(cluster(), req(rack_policy="pack", pending_tasks=5))
    assert {view.node(h).rack for h in first.hosts} == {"a"}  # the rack with the most candidates


def test_job_packing_order_is_qizhis():
    view = cluster()
    view.allocate("a1", R(gpu_mask=0b111111))   # 2 free GPUs
    view.allocate("b1", R(5000, 1, gpu_mask=0b1))  # 3 free GPUs, less memory
    result = pipeline().select(view, req(gpus=1, pending_tasks=5))
    assert result.hosts == ["a1", "b1", "b0", "a0"]


def test_keeps_pending_tasks_times_factor_candidates():
    result = pipeline(candidate_nodes_factor=1).select(cluster(), req(gpus=1, pending_tasks=2))
    assert len(result.candidates) == 2


def test_single_node_prefers_the_jobs_hosts_then_racks():
    view = cluster()
    p = pipeline()
    assert p.select_single_node(view, req(gpus=1, placed_hosts=("a0",), pending_tasks=4)).best.host == "a0"
    view.allocate("a0", R(gpu_mask=0xff))
    assert p.select_single_node(view, req(gpus=1, placed_hosts=("a0",), pending_tasks=4)).best.host == "a1"


def test_random_baseline_scatters_where_locality_does_not():
    hosts_random = {pipeline("random", seed=s).select_single_node(cluster(), req(gpus=1, placed_hosts=("a0",), pending_tasks=4)).best.host
                    for s in range(20)}
    hosts_local = {pipeline("job-packing", seed=s).select_single_node(cluster(), req(gpus=1, placed_hosts=("a0",), pending_tasks=4)).best.host
                   for s in range(20)}
    assert len(hosts_random) > 1 and hosts_local == {"a0"}


def test_ties_are_broken_by_the_seed_reproducibly():
    picks = [pipeline(seed=s).select_single_node(cluster(), req(gpus=1, gpu_types=("T4",), pending_tasks=2)).best.host
             for s in range(12)]
    assert set(picks) == {"b0", "b1"}
    assert picks == [pipeline(seed=s).select_single_node(cluster(), req(gpus=1, gpu_types=("T4",), pending_tasks=2)).best.host
                     for s in range(12)]


def test_ports_common_to_candidates_reused_and_exhausted():
    view = cluster()
    view.allocate("a0", R(port_ranges=PortRanges.of((20000, 20001))))
    result = pipeline().select(view, req(gpus=1, ports=2, pending_tasks=5))
    assert str(result.ports) == "20002-20003"
    assert all(result.ports.fits_in(view.ports_free[view.index(h)]) for h in result.hosts)
    reused = pipeline().select(view, req(gpus=1, reuse_ports=PortRanges.of((20000, 20001)), pending_tasks=5))
    assert "a0" not in reused.hosts and str(reused.ports) == "20000-20001"
    with pytest.raises(NotAvailable, match=r"5 ports exhausted \(need 11, most free 10\)"):
        pipeline().select(cluster(), req(ports=11))


def test_unknown_selector_lists_the_known_ones():
    with pytest.raises(UnknownSelector, match="unknown selector: 'nope'; known selectors: .*job-packing"):
        get_selector("nope")


class CpuFirst(Selector):
    name = "test-cpu-first"
    description = "CPU nodes first"

    def rank(self, view, candidates, request):
        return view.gpu_capacity[candidates]


def test_a_selector_registered_in_process_is_used_and_only_for_the_block():
    before = selector_classes()
    with selector_registered(CpuFirst):
        assert selector_classes() == {**before, "test-cpu-first": CpuFirst}
        assert pipeline("test-cpu-first").select(cluster(), req(pending_tasks=1)).hosts == ["c0", "b0"]
    assert selector_classes() == before
    with pytest.raises(UnknownSelector):
        get_selector("test-cpu-first")


def test_a_selector_registered_over_a_known_name_gives_the_name_back_after_the_block():
    shadow = type("Shadow", (CpuFirst,), {"name": "job-packing"})
    before = selector_classes()
    with selector_registered(shadow):
        assert type(get_selector("job-packing")) is shadow
    assert selector_classes() == before and type(get_selector("job-packing")) is before["job-packing"]


def test_register_selector_refuses_what_is_not_a_strategy():
    before = selector_classes()
    with pytest.raises(TypeError):
        register_selector(object)
    with pytest.raises(ValueError, match="has no name"):
        register_selector(type("Nameless", (CpuFirst,), {"name": ""}))
    assert selector_classes() == before


def test_a_single_node_result_makes_what_is_rarely_read_when_read():
    """select_single_node()'s result makes its resource (naming the ports chosen), its keys
    and its explanation when first read: the same values as made at once, and an
    explanation first read after the view changed is refused."""
    view, chooser = cluster(), pipeline()
    result = chooser.select_single_node(view, req(gpus=2, ports=2))
    assert result.ports == PortRanges.of((20000, 20001))
    assert result.resource == R(1000, 1, 2, ports=2, port_ranges=result.ports)
    assert result.resource is result.resource   # (made once)
    assert result.keys.tolist() == chooser.selector.rank(view, [view.host_index[result.best.host]],
                                                         result.request).tolist()
    assert result.explanation.summary().startswith("4/5 nodes fit role w")
    plain = chooser.select_single_node(view, req())
    assert plain.resource is plain.request.resource and plain.ports == PortRanges()
    stale = chooser.select_single_node(view, req(gpus=1))
    view.allocate("b0", R(1000, 1, 0))
    with pytest.raises(StaleExplanation):
        stale.explanation


def test_requests_of_one_shape_share_their_pick_and_any_other_field_parts_them():
    """The pick the view keeps per request shape is found by value (the bench's and a
    trace's requests are distinct objects of a few shapes): the job's hosts and pending
    count are not part of the shape; every other field of the request and its resource is."""
    from dataclasses import replace

    from gangmaster.selectors.placement import lone_pick, request_shape

    view, chooser = cluster(), pipeline()
    base = req(gpus=1, ports=2, reuse_ports=PortRanges.of((20005, 20006)))
    same = req(gpus=1, ports=2, reuse_ports=PortRanges.of((20005, 20006)), placed_hosts=("a0",), pending_tasks=4)
    assert lone_pick(view, chooser, same) is lone_pick(view, chooser, base)
    others = [replace(base, role="x"), replace(base, node_label="nvlink"), replace(base, gpu_types=("T4",)),
              replace(base, reuse_ports=PortRanges.of((20007, 20008))), replace(base, job_gpus=3),
              replace(base, max_instances_per_node=1), replace(base, rack_policy="pack")]
    others += [replace(base, resource=replace(base.resource, **change)) for change in (
        {"memory_mb": 999}, {"vcores": 2}, {"gpus": 2}, {"ports": 3}, {"gpus": 1, "gpu_mask": 2},
        {"ports": 0, "port_ranges": PortRanges.of((20001, 20002))}, {"gpus": 0, "gpu_milli": 500})]
    shapes = {request_shape(request) for request in [base, *others]}
    assert len(shapes) == 1 + len(others)
