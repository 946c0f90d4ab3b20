"""``dot-product``, the FGD paper's Tetris-style baseline, on hand-worked nodes: the least
dot product of what a node offers (free vcores; a GPU in use that fits, or its wholly free
GPUs) with the task's ask, both over the largest machine (128 vcores, 8 GPUs); then the
simulator's integer score of it, whose ties go to the smallest host name."""
import pytest

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.dot_product import dot_product_keys, exact_dot_products
from gangmaster.selectors.fragmentation import CANNOT_TAKE
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector

from test_packing import cluster   # c-empty4; b-used: 1000, 1000, 300, 0 free, 30 vcores; a-empty2


@pytest.mark.parametrize("ask, keys", [
    # c · vcores + 256 · d · g, g: the GPU offered (the least: a GPU in use that fits, else the free ones)
    ((1000, 200), [1000 * 32_000 + 256 * 200 * 4000, 1000 * 30_000 + 256 * 200 * 300, 1000 * 32_000 + 256 * 200 * 2000]),
    ((1000, 500), [1000 * 32_000 + 256 * 500 * 4000, 1000 * 30_000 + 256 * 500 * 2000, 1000 * 32_000 + 256 * 500 * 2000]),
    ((1000, 3000), [1000 * 32_000 + 256 * 3000 * 4000, CANNOT_TAKE, CANNOT_TAKE]),
    ((1000, 0), [32_000_000, 30_000_000, 32_000_000]),
    ((31_000, 200), [31_000 * 32_000 + 256 * 200 * 4000, CANNOT_TAKE, 31_000 * 32_000 + 256 * 200 * 2000]),
])
def test_exact_dot_products_by_hand(ask, keys):
    assert exact_dot_products(cluster(), slice(None), *ask).tolist() == keys


@pytest.mark.parametrize("ask, keys", [
    # ⌈100 · K / (2 · 128,000²)⌉: 100 less the simulator's integer score ⌊100 · (1 − dot / 2)⌋
    ((1000, 200), [1, 1, 1]),                          # K: 236.8 M, 45.36 M, 134.4 M of 32,768 M
    ((1000, 3000), [10, CANNOT_TAKE, CANNOT_TAKE]),    # 3,104 M: 9.47 → 10
    ((31_000, 200), [4, CANNOT_TAKE, 4]),              # 1,196.8 M → 3.65; 1,094.4 M → 3.34
    ((16_000, 2000), [8, 5, 5]),                       # 2,560 M → 7.8; 1,504 M → 4.6; 1,536 M → 4.7
])
def test_keys_are_the_simulators_integer_scores(ask, keys):
    assert dot_product_keys(cluster(), slice(None), *ask).tolist() == keys


@pytest.mark.parametrize("gpus, share, host, mask", [
    # every node scores 99 (the exact least is b-used's 300 left): the smallest name, its tightest GPU
    (0, 200, "a-empty2", 0b1), (0, 500, "a-empty2", 0b1),
    (2, 0, "a-empty2", 0b11),       # 7, 4, 4: a tie of b-used and a-empty2
    (3, 0, "c-empty4", 0b111), (0, 0, "a-empty2", 0)])
def test_the_pick_and_its_gpus(gpus, share, host, mask):
    pipeline = SelectionPipeline(selector=get_selector("dot-product"))
    best = pipeline.select(cluster(), SelectionRequest("w", ResourceDescriptor(1024, 1, gpus, gpu_milli=share))).best
    assert (best.host, best.gpu_mask) == (host, mask)


def test_the_least_score_beats_the_name():
    # "a-empty8" offers 8 free GPUs, "b-used8" a GPU with 300 left: for a share of 300 its
    # K is 32 M + 23 M (→ 1) against a-empty8's 32 M + 614.4 M (→ 2)
    view = ClusterView([NodeSpec(host="a-empty8", memory_mb=65536, vcores=32, gpus=8),
                        NodeSpec(host="b-used8", memory_mb=65536, vcores=32, gpus=8)])
    view.allocate("b-used8", ResourceDescriptor(1024, 0, gpu_milli=700, gpu_mask=0b10))
    assert dot_product_keys(view, slice(None), 1000, 300).tolist() == [2, 1]
    pipeline = SelectionPipeline(selector=get_selector("dot-product"))
    best = pipeline.select(view, SelectionRequest("w", ResourceDescriptor(1024, 1, gpu_milli=300))).best
    assert (best.host, best.gpu_mask) == ("b-used8", 0b10)
