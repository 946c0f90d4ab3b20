"""Invariants of the best-subset chooser, on random topologies and free masks:
the choice is a subset of the free GPUs with exactly n bits, no free subset scores
higher (brute force), ties keep the best sets free, and it is deterministic."""
from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gangmaster.gpu_topology.chooser import EXACT_MAX_GPUS, GpuChooser, chooser_for
from gangmaster.gpu_topology.links import parse_link
from gangmaster.gpu_topology.masks import indices_of, mask_from_indices, popcount
from gangmaster.gpu_topology.model import GpuAffinity, Topology
from gangmaster.gpu_topology.presets import load_preset, preset_names
from gangmaster.gpu_topology.topo_text import format_topo_text, parse_topo_text

LABELS = ["NV1", "NV2", "NV4", "NV12", "NV18", "BOARD", "PIX", "PXB", "PHB", "NODE", "SYS"]


@st.composite
def topologies(draw, min_gpus=1, max_gpus=9, labels=LABELS):
    g = draw(st.integers(min_gpus, max_gpus))
    links = [[None] * g for _ in range(g)]
    for i in range(g):
        for j in range(i + 1, g):
            links[i][j] = links[j][i] = parse_link(draw(st.sampled_from(labels)))
    cpus = draw(st.lists(st.sampled_from(["0-7", "8-15,24-31", None]), min_size=g, max_size=g))
    return Topology(f"random-{g}", links, affinity=[GpuAffinity(cpus=c, numa=None if c is None else "0")
                                                    for c in cpus])


@st.composite
def cases(draw, topology_strategy=topologies()):
    t = draw(topology_strategy)
    free = draw(st.integers(0, (1 << t.gpu_count) - 1))
    count = draw(st.integers(0, t.gpu_count))
    return t, free, count


def subsets(free: int, count: int):
    return [mask_from_indices(c) for c in combinations(indices_of(free), count)]


@given(cases())
def test_choice_is_a_free_subset_of_exactly_n(case):
    t, free, count = case
    chosen = chooser_for(t).choose(free, count)
    if count == 0 or popcount(free) < count:
        assert chosen == 0
    else:
        assert chosen & ~free == 0 and popcount(chosen) == count


@given(cases())
def test_no_free_subset_scores_higher(case):
    t, free, count = case
    chooser = chooser_for(t)
    chosen = chooser.choose(free, count)
    if not chosen:
        return
    best = max(t.set_score(s) for s in subsets(free, count))
    assert t.set_score(chosen) == best == chooser.score(chosen)
    assert chooser.best_score_of(free, count) == best
    assert chooser.best_score_table(count)[free] == best


@given(cases(topologies(max_gpus=6)))
def test_ties_leave_the_best_sets_free(case):
    """Among the best-scoring subsets, the chosen one leaves a remainder whose best
    sets of every size (summed) are at least as good as any other's."""
    t, free, count = case
    chosen = chooser_for(t).choose(free, count)
    if not chosen:
        return

    def future(rest: int) -> int:
        return sum(max(t.set_score(s) for s in subsets(rest, k))
                   for k in range(2, popcount(rest) + 1))

    best = t.set_score(chosen)
    rivals = [s for s in subsets(free, count) if t.set_score(s) == best]
    assert future(free & ~chosen) == max(future(free & ~s) for s in rivals)
    assert chosen == min(s for s in rivals if future(free & ~s) == future(free & ~chosen))


@given(cases())
def test_deterministic_and_independent_of_the_cache(case):
    t, free, count = case
    cached = chooser_for(t)
    fresh = GpuChooser(t)
    assert cached.choose(free, count) == cached.choose(free, count) == fresh.choose(free, count)


@settings(max_examples=30)
@given(st.sampled_from(preset_names()), st.data())
def test_presets_against_brute_force(name, data):
    t = load_preset(name)
    free = data.draw(st.integers(0, (1 << t.gpu_count) - 1))
    count = data.draw(st.integers(1, 4))
    chosen = chooser_for(t).choose(free, count)
    if popcount(free) < count:
        assert chosen == 0
        return
    assert chosen & ~free == 0 and popcount(chosen) == count
    assert t.set_score(chosen) == max(t.set_score(s) for s in subsets(free, count))


@given(topologies(max_gpus=10))
def test_subset_scores_are_sums_over_pairs(t):
    chooser = chooser_for(t)
    for mask in range(0, 1 << t.gpu_count, max(1, (1 << t.gpu_count) // 64)):
        idx = indices_of(mask)
        expected = sum(t.link(a, b).score for k, a in enumerate(idx) for b in idx[k + 1:])
        assert chooser.score(mask) == t.set_score(mask) == expected


@settings(max_examples=25)
@given(cases(topologies(min_gpus=EXACT_MAX_GPUS + 1, max_gpus=EXACT_MAX_GPUS + 4)))
def test_beyond_the_exact_size_the_choice_is_still_valid(case):
    t, free, count = case
    chooser = GpuChooser(t)
    assert not chooser.exact
    chosen = chooser.choose(free, count)
    if count == 0 or popcount(free) < count:
        assert chosen == 0
    else:
        assert chosen & ~free == 0 and popcount(chosen) == count
        assert chosen == chooser.choose(free, count)


@given(topologies(max_gpus=12), st.sampled_from(["\t", "  ", "    "]))
def test_topo_text_round_trip(t, sep):
    back = parse_topo_text(format_topo_text(t, sep))
    assert back.label_matrix() == t.label_matrix()
    assert [a.cpus for a in back.affinity] == [a.cpus for a in t.affinity]
    assert np.array_equal(back.pair_scores, t.pair_scores)
