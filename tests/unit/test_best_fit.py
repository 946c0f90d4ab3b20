"""``best-fit``, the FGD paper's best-fit baseline, scored as the artifact scores it: the
integer ``⌊100 · (1 − s)⌋`` of what the node would have left, ``s = ½ (vcores left) / 128 +
½ (milli-GPU left) / 8,000``, in float64 as the Go code computes it; ties to the smallest host
name (the artifact's renamed one under ``--draws artifact``, test_artifact_draws.py)."""
import pytest

from gangmaster.selectors.best_fit import best_fit_score, best_fit_scores
from gangmaster.selectors.fragmentation import CANNOT_TAKE
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector

from test_dot_product import GO_SCORES, free_view
from test_packing import cluster   # c-empty4; b-used: 1000, 1000, 300, 0 free, 30 vcores; a-empty2


@pytest.mark.parametrize("vcores, gpu, ask_vcores, ask_gpu, score, _", GO_SCORES)
def test_scores_are_the_artifacts_as_go_computes_them(vcores, gpu, ask_vcores, ask_gpu, score, _):
    view = free_view([(vcores, gpu)])
    assert best_fit_scores(view, slice(None), ask_vcores, ask_gpu).tolist() == [score]
    assert best_fit_score(view, 0, ask_vcores, ask_gpu) == score


def test_a_node_short_of_the_ask_scores_minus_one():
    view = free_view([(2000, 700), (8000, 300), (8000, 1000)])
    assert best_fit_scores(view, slice(None), 4000, 500).tolist() == [-1, -1, 95]
    assert [best_fit_score(view, i, 4000, 500) for i in range(3)] == [-1, -1, 95]


def test_near_equal_nodes_tie_and_go_to_the_smallest_name():
    # one step of the score is 2.56 vcores (or 160 milli-GPU) left: n00, a vcore emptier than n01,
    # scores 76 as n01 does (76.25, 76.64) and takes the task by its name
    selector = get_selector("best-fit")
    request = SelectionRequest("w", ResourceDescriptor(1024, 1, 0, gpu_milli=200))
    view = free_view([(33000, 2000), (32000, 2000)])
    assert selector.node_key(request).column(view).tolist() == [24, 24]
    assert SelectionPipeline(selector=selector).select(view, request).best.host == "n00"
    too_big = SelectionRequest("w", ResourceDescriptor(1024, 40, 0))
    assert selector.node_key(too_big).column(view).tolist() == [CANNOT_TAKE] * 2


@pytest.mark.parametrize("gpus, share, host, mask", [
    (0, 200, "a-empty2", 0b1), (2, 0, "a-empty2", 0b11), (3, 0, "c-empty4", 0b111), (0, 0, "a-empty2", 0)])
def test_the_pick_and_its_gpus(gpus, share, host, mask):
    pipeline = SelectionPipeline(selector=get_selector("best-fit"))
    best = pipeline.select(cluster(), SelectionRequest("w", ResourceDescriptor(1024, 1, gpus, gpu_milli=share))).best
    assert (best.host, best.gpu_mask) == (host, mask)
