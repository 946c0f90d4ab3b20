"""``dot-product``, the FGD paper's Tetris-style baseline, on hand-worked nodes: the least
dot product of what a node offers (free vcores; a GPU in use that fits, or its wholly free
GPUs) with the task's ask, both over the largest machine (128 vcores, 8 GPUs)."""
import pytest

from gangmaster.selectors.cluster import ClusterView
from gangmaster.selectors.dot_product import dot_product_keys
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
def test_keys_by_hand(ask, keys):
    assert dot_product_keys(cluster(), slice(None), *ask).tolist() == keys


@pytest.mark.parametrize("gpus, share, host, mask", [(0, 200, "b-used", 0b100), (0, 500, "b-used", 0b1),
                                                      (2, 0, "b-used", 0b11), (3, 0, "c-empty4", 0b111),
                                                      (0, 0, "b-used", 0)])
def test_the_pick_and_its_gpus(gpus, share, host, mask):
    pipeline = SelectionPipeline(selector=get_selector("dot-product"))
    best = pipeline.select(cluster(), SelectionRequest("w", ResourceDescriptor(1024, 1, gpus, gpu_milli=share))).best
    assert (best.host, best.gpu_mask) == (host, mask)
