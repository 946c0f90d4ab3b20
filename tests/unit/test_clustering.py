"""``clustering``, the FGD paper's GPU-clustering baseline, on hand-worked nodes: nodes that
hold only tasks of the task's shape first, then mixed ones, then idle ones, then other
shapes, each band topped up by ⌊25 × (8000 − milli free) / 8000⌋ (the artifact's
``gpu_clustering_score.go``); and the shapes it infers from the view's GPUs in use."""
import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.clustering import affinity_tags, clustering_scores, SHARE
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.settings import SelectionSettings


def cluster() -> ClusterView:
    # a-idle: 8 free GPUs; b-shares: a 700 share (1300 milli free); c-mixed: a GPU taken
    # whole and a 500 share (2500 free); d-two: a 2-GPU task (2000 free)
    view = ClusterView([NodeSpec(host="a-idle", memory_mb=65536, vcores=32, gpus=8),
                        NodeSpec(host="b-shares", memory_mb=65536, vcores=32, gpus=2),
                        NodeSpec(host="c-mixed", memory_mb=65536, vcores=32, gpus=4),
                        NodeSpec(host="d-two", memory_mb=65536, vcores=32, gpus=4)])
    view.allocate("b-shares", ResourceDescriptor(1024, 1, gpu_milli=700, gpu_mask=0b1))
    view.allocate("c-mixed", ResourceDescriptor(1024, 1, gpus=1, gpu_mask=0b1))
    view.allocate("c-mixed", ResourceDescriptor(1024, 1, gpu_milli=500, gpu_mask=0b10))
    view.allocate("d-two", ResourceDescriptor(1024, 1, gpus=2, gpu_mask=0b11))
    return view


@pytest.mark.parametrize("gpus, share, scores", [
    # in use: a 0, b 25·6700//8000 = 20, c 25·5500//8000 = 17, d 25·6000//8000 = 18
    (0, 300, [0 + 25, 20 + 75, 17 + 50, 18 + 0]),    # idle; only shares; shares and more; only 2-GPU
    (1, 0, [0 + 25, 20 + 0, 17 + 50, 18 + 0]),       # b: only shares, another shape
    (2, 0, [0 + 25, -1, 17 + 0, 18 + 75]),           # b has one wholly free GPU
    (8, 0, [25, -1, -1, -1]),
    (0, 0, [0, 0, 0, 0]),                            # no GPU asked: every node alike
])
def test_scores_by_hand(gpus, share, scores):
    assert clustering_scores(cluster(), slice(None), gpus, share).tolist() == scores


def test_the_tags_follow_bookings_and_releases():
    view = cluster()
    tags = affinity_tags(view)
    assert [tags.tags(view, i) for i in range(4)] == [set(), {SHARE}, {1, SHARE}, {2}]
    view.allocate("a-idle", ResourceDescriptor(1024, 1, gpus=4, gpu_mask=0b1111))
    view.release("d-two", ResourceDescriptor(1024, 1, gpus=2, gpu_mask=0b11))
    tags = affinity_tags(view)
    assert [tags.tags(view, i) for i in range(4)] == [{4}, {SHARE}, {1, SHARE}, set()]
    copy = view.copy()
    copy.allocate("d-two", ResourceDescriptor(1024, 1, gpus=1, gpu_mask=0b1))
    assert affinity_tags(copy).tags(copy, 3) == {1} and affinity_tags(view).tags(view, 3) == set()


@pytest.mark.parametrize("gpus, share, host", [(0, 300, "b-shares"), (2, 0, "d-two"), (8, 0, "a-idle")])
def test_the_pick_follows_the_bands(gpus, share, host):
    pipeline = SelectionPipeline(SelectionSettings(selector="clustering"))
    request = SelectionRequest("w", ResourceDescriptor(1024, 1, gpus, gpu_milli=share))
    assert pipeline.select_single_node(cluster(), request).best.host == host
