"""The AM's "did the cluster grow?" with GPU shares: milli-GPU freed on a GPU that still
holds shares lets a waiting share fit, so it counts; shares taken do not."""
from gangmaster.am.core.cluster_tracker import _Room
from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.resources import ResourceDescriptor as R


def share(milli: int, gpu: int) -> R:
    return R(gpu_milli=milli, gpu_mask=1 << gpu)


def test_milli_freed_on_a_shared_gpu_is_growth_and_milli_taken_is_not():
    view = ClusterView([NodeSpec("n0", memory_mb=8192, vcores=8, gpus=2)])
    empty = _Room.of(view, 0)
    view.allocate(0, share(300, 1))
    one = _Room.of(view, 0)
    assert one.gpu_milli == (1000, 700) and not one.grew_from(empty)   # a wholly free GPU became shared
    view.allocate(0, share(500, 1))
    two = _Room.of(view, 0)
    assert not two.grew_from(one)                                        # 700 -> 200 on GPU 1
    view.release(0, share(500, 1))
    assert _Room.of(view, 0).grew_from(two)                              # 200 -> 700: a 500 share fits again
    view.release(0, share(300, 1))
    assert _Room.of(view, 0).grew_from(one)                              # wholly free again (the mask says)


def test_a_gpu_taken_whole_then_shared_is_growth():
    view = ClusterView([NodeSpec("n0", memory_mb=8192, vcores=8, gpus=2)])
    view.allocate(0, R(gpu_mask=0b10))
    whole = _Room.of(view, 0)
    assert whole.gpu_milli is None                                       # no shares: the mask says it all
    view.release(0, R(gpu_mask=0b10))
    view.allocate(0, share(900, 1))
    assert _Room.of(view, 0).grew_from(whole)                            # 0 -> 100 milli free on GPU 1
    view.allocate(0, share(100, 1))
    full = _Room.of(view, 0)
    assert full.gpu_milli == (1000, 0) and not full.grew_from(whole)     # full of shares reads as taken
