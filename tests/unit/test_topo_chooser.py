"""The best-subset chooser on known machines: the choices a person would make."""
import pytest

from gangmaster.gpu_topology.chooser import GpuChooser, chooser_for
from gangmaster.gpu_topology.links import Link, nvlink
from gangmaster.gpu_topology.masks import MaskError, indices_of, mask_from_indices, popcount
from gangmaster.gpu_topology.model import Topology, TopologyError
from gangmaster.gpu_topology.presets import load_preset


def choose(preset: str, free: list[int], n: int) -> list[int]:
    return indices_of(chooser_for(load_preset(preset)).choose(mask_from_indices(free), n))


def test_nvlink_pair_instead_of_cross_socket_pair():
    # lowest bits would give GPU0+GPU2 (NV1); GPU5+GPU6 are NV2
    assert choose("dgx1-v100", [0, 2, 3, 5, 6], 2) == [5, 6]
    # lowest bits would give 0+5, joined across the sockets; 5+7 are NVLinked
    assert choose("dgx1-v100", [0, 5, 7], 2) == [5, 7]


def test_stream_of_pairs_keeps_a_clique_for_a_later_four():
    chooser = chooser_for(load_preset("dgx1-v100"))
    topology = chooser.topology
    free = 0xFF
    for _ in range(2):
        pair = chooser.choose(free, 2)
        assert topology.all_nvlink(pair) and chooser.score(pair) == 120  # an NV2 pair
        free &= ~pair
    four = chooser.choose(free, 4)
    assert topology.all_nvlink(four) and indices_of(four) in ([0, 1, 2, 3], [4, 5, 6, 7])
    free &= ~four
    # and the last two GPUs still form an NVLink pair
    assert topology.all_nvlink(chooser.choose(free, 2))


def test_full_stream_of_pairs_is_all_nvlink():
    chooser = chooser_for(load_preset("dgx1-v100"))
    free, pairs = 0xFF, []
    while free:
        pair = chooser.choose(free, 2)
        pairs.append(pair)
        free &= ~pair
    assert len(pairs) == 4 and all(chooser.topology.all_nvlink(p) for p in pairs)


def test_k80_prefers_a_board_then_a_socket():
    assert choose("k80-8gpu", [1, 2, 3, 4], 2) == [2, 3]
    assert choose("k80-8gpu", [0, 2, 4, 5, 6, 7], 4) == [4, 5, 6, 7]
    assert choose("k80-8gpu", [0, 3, 4, 7], 2) == [0, 3]  # PXB beats SYS


def test_a100_everything_equal_is_deterministic_lowest():
    assert choose("dgx-a100", list(range(8)), 3) == [0, 1, 2]


def test_sixteen_gpus_search_path():
    chooser = chooser_for(load_preset("dgx2"))
    assert chooser._table is None and chooser.exact
    assert popcount(chooser.choose(0xFFFF, 8)) == 8
    assert indices_of(chooser.choose(mask_from_indices([3, 9, 15]), 2)) == [3, 9]


def test_not_enough_free_gpus_gives_zero():
    chooser = chooser_for(load_preset("pcie-4gpu"))
    assert chooser.choose(0b0101, 3) == 0
    assert chooser.choose(0b1111, 0) == 0
    assert chooser.best_score_of(0b0101, 3) == -1


def test_free_mask_beyond_the_node_is_an_error():
    with pytest.raises(MaskError, match="4-GPU pcie-4gpu node"):
        chooser_for(load_preset("pcie-4gpu")).choose(0b1_0000, 1)


def test_topologies_with_equal_scores_share_a_chooser():
    a = load_preset("dgx1-v100")
    b = Topology("copy", [[None if i == j else a.link(i, j) for j in range(8)] for i in range(8)])
    assert chooser_for(a) is chooser_for(b)


def test_set_score_is_the_sum_over_pairs():
    t = load_preset("dgx1-v100")
    assert t.set_score([0, 1, 5]) == 110 + 10 + 120
    assert t.set_score(mask_from_indices([0, 1, 5])) == 240
    assert t.set_score([4]) == 0


def test_asymmetric_topology_is_rejected():
    with pytest.raises(TopologyError, match="the same both ways"):
        Topology("bad", [[None, nvlink(1)], [nvlink(2), None]])


def test_beyond_sixteen_gpus_greedy_still_returns_a_valid_set():
    links = [[None if i == j else (nvlink(2) if i // 4 == j // 4 else Link("SYS")) for j in range(20)]
             for i in range(20)]
    chooser = GpuChooser(Topology("20", links))
    assert not chooser.exact
    chosen = chooser.choose((1 << 20) - 1 & ~0b1, 4)
    assert popcount(chosen) == 4 and chooser.topology.all_nvlink(chosen)
