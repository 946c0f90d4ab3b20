"""select_single_node() decides through the pick the view keeps per request shape
(:class:`~gangmaster.selectors.placement.LonePick`), for a job with hosts too (the hosts,
their racks through the index by rack, then the index): the same node, GPUs, ports and
key as the placement loop, on views that change and on their copies."""
from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st

from gangmaster.gpu_topology.masks import lowest_bits
from gangmaster.selectors import placement
from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.explanation import NotAvailable
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.tools.bench.select import request_stream
from gangmaster.tools.bench.synthetic import occupy_randomly, synthetic_specs

from tests.property.test_select_differential import (clusters, get_selector, random_change, requests,
                                                     selection_settings)


def loop_pick(pipeline, view, request):
    """The placement loop's pick of one instance, not booked (reused ports asked as
    select() asks them): the reference."""
    loop = placement._Loop(pipeline, view, pipeline._with_reused_ports(request), 1, None, False)
    loop.run()
    placed = loop.placement
    return view.hosts[placed.nodes[0]], placed.gpu_masks[0][0], placed.ports[0][0], placed.keys[0]


def assert_picks_as_the_loop(pipeline, view, request):
    try:
        expected = loop_pick(pipeline, view, request)
    except NotAvailable:
        with pytest.raises(NotAvailable):
            pipeline.select_single_node(view, request)
        return
    result = pipeline.select_single_node(view, request)
    assert (result.best.host, result.best.gpu_mask, result.ports, list(result.keys)) == \
        (expected[0], expected[1], expected[2], [expected[3]])


@pytest.mark.parametrize("name", ["job-packing", "locality", "best-fit"])   # (seeded and node-name ties)
@settings(max_examples=10)
@given(data=st.data(), view=clusters(), config=selection_settings)
def test_a_single_pick_is_the_loops_as_the_view_changes(name, data, view, config):
    config = replace(config, port_choice="sequential")   # (a random port draw uses the RNG: one side only)
    pipeline = SelectionPipeline(config, get_selector(name, config.candidate_nodes_factor))
    if pipeline.selector.pick_at_random:   # (a draw uses the pipeline's RNG: one side only)
        return
    asked = [data.draw(requests()) for _ in range(3)]
    for _ in range(data.draw(st.integers(1, 10))):
        request = data.draw(st.sampled_from(asked))
        hosts = tuple(data.draw(st.lists(st.sampled_from(view.hosts + ["gone"]), max_size=3, unique=True)))
        assert_picks_as_the_loop(pipeline, view, replace(request, placed_hosts=hosts))
        random_change(data.draw, view)
    scratch = view.copy()   # a copy follows its own changes, the original stays
    random_change(data.draw, scratch)
    for request in asked:
        assert_picks_as_the_loop(pipeline, scratch, request)
        assert_picks_as_the_loop(pipeline, view, request)


@settings(max_examples=5)
@given(nodes=st.integers(41, 300), seed=st.integers(0, 1000), data=st.data())
def test_a_job_with_hosts_on_many_racks_picks_as_the_loop(nodes, seed, data):
    """Racks of 40, the job's hosts spread over them, bookings between picks (the index by
    rack follows them)."""
    view = ClusterView(synthetic_specs(nodes))
    occupy_randomly(view, seed)
    pipeline = SelectionPipeline(SelectionSettings(seed=seed), get_selector("job-packing"))
    for request in request_stream(view, 12, seed):
        assert_picks_as_the_loop(pipeline, view, request)
        if request.placed_hosts:
            chosen = view.host_index[data.draw(st.sampled_from(request.placed_hosts))]
            free = view.free(chosen)
            view.allocate(chosen, ResourceDescriptor(free.memory_mb // 2, free.vcores // 2,
                                                     gpu_mask=lowest_bits(free.gpu_mask, free.gpus // 2)))


def test_a_job_with_hosts_is_picked_without_the_loop():
    view = ClusterView(synthetic_specs(120))
    occupy_randomly(view, 0)
    pipeline = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
    request = SelectionRequest("w", ResourceDescriptor(2048, 1, gpus=1, ports=2), placed_hosts=("node-000003",))
    with mock.patch.object(placement, "_Loop", side_effect=AssertionError("the loop was built")):
        assert pipeline.select_single_node(view, request).best.host


def test_requests_of_one_shape_share_their_pick():
    """What a pick makes ready is made once per request shape, whatever the job's hosts
    and pending count: the bench's and a replay's requests are new objects of a few shapes."""
    view = ClusterView(synthetic_specs(80))
    pipeline = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
    resource = ResourceDescriptor(2048, 1, gpus=1)
    made = []
    real = placement.LonePick.__init__

    def counted(self, *args):
        made.append(self)
        real(self, *args)

    with mock.patch.object(placement.LonePick, "__init__", counted):
        for hosts, pending in (((), 1), (("node-000001",), 3), (("node-000002", "node-000041"), 5)):
            pipeline.select_single_node(view, SelectionRequest("w", resource, pending_tasks=pending,
                                                               placed_hosts=hosts))
    assert len(made) == 1
