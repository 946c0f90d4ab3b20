"""``packing``, the FGD paper's GPU-packing baseline, on hand-worked nodes: a GPU in use
first (tighter first), then wholly free GPUs of a used node, then empty nodes."""
import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.packing import packing_scores
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector


def cluster() -> ClusterView:
    # "c-empty4": 4 free GPUs; "b-used": GPUs 1000, 1000, 300 (a 700 share), 0 (taken whole);
    # "a-empty2": 2 free GPUs
    view = ClusterView([NodeSpec(host="c-empty4", memory_mb=65536, vcores=32, gpus=4),
                        NodeSpec(host="b-used", memory_mb=65536, vcores=32, gpus=4),
                        NodeSpec(host="a-empty2", memory_mb=65536, vcores=32, gpus=2)])
    view.allocate("b-used", ResourceDescriptor(1024, 1, gpu_milli=700, gpu_mask=0b0100))
    view.allocate("b-used", ResourceDescriptor(1024, 1, gpus=1, gpu_mask=0b1000))
    return view


@pytest.mark.parametrize("gpus, share, scores", [
    (0, 200, [29, 97, 31]),    # empty: max(33 - GPUs, GPUs); on the 300 left: 100 - 30 // 10
    (0, 500, [29, 49, 31]),    # the used node must give a wholly free GPU: 50 - 1
    (2, 0, [29, 48, 31]),
    (3, 0, [29, -1, -1]),      # does not fit
    (0, 0, [0, 0, 0]),         # no GPU asked: every node alike
])
def test_scores_by_hand(gpus, share, scores):
    assert packing_scores(cluster(), slice(None), gpus, share).tolist() == scores


@pytest.mark.parametrize("gpus, share, host", [(0, 200, "b-used"), (0, 500, "b-used"), (2, 0, "b-used"),
                                                (3, 0, "c-empty4"), (0, 0, "a-empty2")])
def test_the_pick_follows_the_bands_then_the_host_name(gpus, share, host):
    pipeline = SelectionPipeline(selector=get_selector("packing"))
    request = SelectionRequest("w", ResourceDescriptor(1024, 1, gpus, gpu_milli=share))
    assert pipeline.select(cluster(), request).best.host == host
