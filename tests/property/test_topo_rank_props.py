"""The `topology` strategy over a random cluster: every node's offer is the best set
it can give (brute force), the cached keys equal freshly computed ones, and the
GPUs it chooses are free and as many as asked."""
from itertools import combinations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gangmaster.gpu_topology.masks import indices_of, popcount
from gangmaster.gpu_topology.presets import load_preset
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.topology_aware import TopologyAware

KINDS = [("dgx1-v100", 8), ("dgx1-p100", 8), ("k80-8gpu", 8), ("pcie-4gpu", 4), ("dgx-a100", 8),
         (None, 4), (None, 0), ("unknown-preset", 8)]


@st.composite
def clusters(draw):
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=12))
    specs = [NodeSpec(host=f"n{i}", topology=t, gpus=g, memory_mb=draw(st.integers(0, 1 << 20)),
                      vcores=draw(st.integers(0, 128))) for i, (t, g) in enumerate(kinds)]
    view = ClusterView(specs)
    for i, (_, g) in enumerate(kinds):
        used = draw(st.integers(0, (1 << g) - 1))
        if used:
            view.allocate(i, ResourceDescriptor(gpus=popcount(used), gpu_mask=used))
    return view


@given(clusters(), st.integers(1, 4))
def test_offers_are_the_best_sets_and_choices_are_valid(view, gpus):
    s = TopologyAware()
    nodes = np.arange(len(view))
    offers = s.offers(view, nodes, gpus)
    req = SelectionRequest(role="w", resource=ResourceDescriptor(gpus=gpus))
    for i in nodes:
        free = view.free_mask(int(i))
        name = view.specs[i].topology
        known = name in ("dgx1-v100", "dgx1-p100", "k80-8gpu", "pcie-4gpu", "dgx-a100")
        if known and popcount(free) >= gpus:
            t = load_preset(name)
            best = max(t.set_score(list(c)) for c in combinations(indices_of(free), gpus))
            assert offers[i] == best
            chosen = s.choose_gpus(view, int(i), req)
            assert t.set_score(chosen) == best
        else:
            assert offers[i] == 0
        if popcount(free) >= gpus:
            chosen = s.choose_gpus(view, int(i), req)
            assert chosen & ~free == 0 and popcount(chosen) == gpus


@given(clusters(), st.integers(0, 4), st.data())
def test_cached_rank_equals_fresh_keys_after_changes(view, gpus, data):
    s = TopologyAware()
    nodes = np.arange(len(view))
    req = SelectionRequest(role="w", resource=ResourceDescriptor(gpus=gpus))
    s.rank(view, nodes, req)
    i = data.draw(st.integers(0, len(view) - 1))
    free = view.free_mask(i)
    if free:
        view.allocate(i, ResourceDescriptor(gpus=1, gpu_mask=free & -free))
    assert np.array_equal(s.rank(view, nodes, req), s.keys(view, nodes, gpus))
