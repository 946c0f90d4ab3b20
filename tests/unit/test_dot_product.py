"""``dot-product``, the FGD paper's Tetris-style baseline, scored as the artifact's runs score
it (``-dimext merge -norm max -gpusel best``): a node's free (vcores, milli-GPU on all its GPUs)
against the task's ask, both over the largest machine (128 vcores, 8 GPUs), scored
``⌊100 · (1 − dot / 2)⌋`` in float64 as the Go code computes it; ties to the smallest host
name (the artifact's renamed one under ``--draws artifact``, test_artifact_draws.py)."""
import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.dot_product import dot_product_score, dot_product_scores
from gangmaster.selectors.fragmentation import CANNOT_TAKE
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector

from test_packing import cluster   # c-empty4; b-used: 1000, 1000, 300, 0 free, 30 vcores; a-empty2

#: (milli-vcores free, milli-GPU free, milli-vcores asked, milli-GPU asked, best-fit's score, dot-product's),
#: the scores as Go printed them from the artifact's arithmetic (getBestFitScore; calculateDotProductScore
#: with "merge" and "max"), transcribed line for line. The first three: 45 in exact arithmetic, 44 in float64.
GO_SCORES = [
    (16000, 8000, 0, 200, 44, 98), (17000, 8000, 1000, 200, 44, 98), (48000, 6000, 0, 200, 44, 99),
    (32000, 4000, 1000, 200, 64, 99), (32000, 4000, 1000, 0, 62, 99), (96000, 8000, 8000, 1000, 21, 91),
    (64000, 0, 0, 0, 75, 100), (128000, 8000, 0, 0, 0, 100), (30000, 2300, 1000, 300, 76, 99),
    (32000, 2000, 16000, 2000, 93, 95), (31000, 1000, 31000, 500, 96, 96), (104000, 2000, 4000, 2000, 60, 95),
    (96000, 3500, 12000, 500, 48, 95), (8000, 1000, 8000, 1000, 100, 99),
]


def free_view(free):
    """One node per (milli-vcores free, milli-GPU free): whole GPUs free, the rest free on one more GPU."""
    view = ClusterView([NodeSpec(host=f"n{i:02d}", memory_mb=65536, vcores=vcores / 1000, gpus=-(-gpu // 1000))
                        for i, (vcores, gpu) in enumerate(free)])
    for i, (_, gpu) in enumerate(free):
        if gpu % 1000:
            view.allocate(f"n{i:02d}", ResourceDescriptor(1024, 0, gpu_milli=1000 - gpu % 1000,
                                                         gpu_mask=1 << (gpu // 1000)))
    return view


@pytest.mark.parametrize("vcores, gpu, ask_vcores, ask_gpu, _, score", GO_SCORES)
def test_scores_are_the_artifacts_as_go_computes_them(vcores, gpu, ask_vcores, ask_gpu, _, score):
    view = free_view([(vcores, gpu)])
    assert dot_product_scores(view, slice(None), ask_vcores, ask_gpu).tolist() == [score]
    assert dot_product_score(view, 0, ask_vcores, ask_gpu) == score


@pytest.mark.parametrize("ask, keys", [
    # 100 less the score; the node's GPUs count together, whatever GPU the task would take
    ((1000, 200), [1, 1, 1]),
    ((1000, 500), [2, 1, 1]),                     # c-empty4's 4,000 free: 1.5 % of a dot product → 98
    ((1000, 3000), [10, CANNOT_TAKE, CANNOT_TAKE]),
    ((31_000, 200), [4, CANNOT_TAKE, 4]),         # b-used has 30 vcores
    ((16_000, 2000), [8, 6, 5]),
])
def test_keys_are_100_less_the_score(ask, keys):
    selector = get_selector("dot-product")
    request = SelectionRequest("w", ResourceDescriptor(1024, ask[0] / 1000, ask[1] // 1000, gpu_milli=ask[1] % 1000))
    assert selector.node_key(request).column(cluster()).tolist() == keys


@pytest.mark.parametrize("gpus, share, host, mask", [
    # a-empty2 ties for the best score (or has it alone): the smallest name, its tightest GPU(s)
    (0, 200, "a-empty2", 0b1), (0, 500, "a-empty2", 0b1), (2, 0, "a-empty2", 0b11),
    (3, 0, "c-empty4", 0b111), (0, 0, "a-empty2", 0)])
def test_the_pick_and_its_gpus(gpus, share, host, mask):
    pipeline = SelectionPipeline(selector=get_selector("dot-product"))
    best = pipeline.select(cluster(), SelectionRequest("w", ResourceDescriptor(1024, 1, gpus, gpu_milli=share))).best
    assert (best.host, best.gpu_mask) == (host, mask)


def test_the_node_with_less_gpu_left_scores_higher():
    # for a 700-milli share, "b-used8" (4,300 left: GPUs 0-2 taken, 300 on GPU 3) scores 97, "a-empty8" 95;
    # the share goes on b-used8's tightest GPU that takes it, GPU 4
    view = ClusterView([NodeSpec(host="a-empty8", memory_mb=65536, vcores=32, gpus=8),
                        NodeSpec(host="b-used8", memory_mb=65536, vcores=32, gpus=8)])
    view.allocate("b-used8", ResourceDescriptor(1024, 0, gpus=3, gpu_mask=0b111))
    view.allocate("b-used8", ResourceDescriptor(1024, 0, gpu_milli=700, gpu_mask=0b1000))
    assert dot_product_scores(view, slice(None), 1000, 700).tolist() == [95, 97]
    pipeline = SelectionPipeline(selector=get_selector("dot-product"))
    best = pipeline.select(view, SelectionRequest("w", ResourceDescriptor(1024, 1, gpu_milli=700))).best
    assert (best.host, best.gpu_mask) == ("b-used8", 0b10000)
