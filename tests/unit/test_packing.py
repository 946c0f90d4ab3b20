"""``packing``, the FGD paper's GPU-packing baseline, on hand-worked nodes: a GPU in use
first (tighter first), then wholly free GPUs of a used node, then empty nodes; its score
against a line-by-line port of the artifact's ``getPackingScore`` (its ties by the run's
seeded node order: tests/unit/test_artifact_ties.py)."""
import pytest
from hypothesis import given, strategies as st

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.packing import packing_scores
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings


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
                                                (3, 0, "c-empty4")])
def test_the_pick_follows_the_bands(gpus, share, host):
    pipeline = SelectionPipeline(selector=get_selector("packing"))
    request = SelectionRequest("w", ResourceDescriptor(1024, 1, gpus, gpu_milli=share))
    assert pipeline.select(cluster(), request).best.host == host


def artifact_packing_score(milli_left: list[int], gpus: int, milli: int) -> int:
    """``getPackingScore`` of the artifact (pkg/simulator/plugin/gpu_packing_score.go), line
    by line: ``milli_left`` per GPU; the pod asks ``gpus`` GPUs of ``milli`` each (a share:
    1 GPU of < 1000). -1 where the Go code returns its error (the pod does not fit)."""
    max_score = 100
    fully_free = sum(1 for left in milli_left if left == 1000)
    if fully_free == len(milli_left):                                   # case 3
        return max(max_score // 3 - fully_free, fully_free)
    ordered = sorted(range(len(milli_left)), key=lambda i: milli_left[i])   # SliceStable, ascending
    request, fully_free_to_use, to_use = gpus, 0, []
    for i in ordered:
        if request == 0:
            break
        if milli <= milli_left[i]:
            request -= 1
            to_use.append(i)
            fully_free_to_use += milli_left[i] == 1000
    if request:
        return -1
    if fully_free_to_use:                                               # case 2
        return max(max_score // 2 - fully_free_to_use, max_score // 3)
    ratio = sum(milli_left[i] * 100 // 1000 for i in to_use)            # case 1
    return max(max_score - ratio // 10, max_score // 2)


#: one GPU's state: wholly free, taken whole, or a share of 1..999 milli taken
GPU_STATES = st.one_of(st.just("free"), st.just("whole"), st.integers(1, 999))


@given(nodes=st.lists(st.lists(GPU_STATES, min_size=1, max_size=8), min_size=1, max_size=6),
       ask=st.one_of(st.tuples(st.integers(1, 8), st.just(0)), st.tuples(st.just(0), st.integers(1, 999))))
def test_the_score_is_the_artifacts(nodes, ask):
    view = ClusterView([NodeSpec(host=f"n{i}", memory_mb=65536, vcores=32, gpus=len(gpus_))
                        for i, gpus_ in enumerate(nodes)])
    for i, states in enumerate(nodes):
        for gpu, state in enumerate(states):
            if state == "whole":
                view.allocate(f"n{i}", ResourceDescriptor(1, 0.1, gpus=1, gpu_mask=1 << gpu))
            elif state != "free":
                view.allocate(f"n{i}", ResourceDescriptor(1, 0.1, gpu_milli=state, gpu_mask=1 << gpu))
    gpus, share = ask
    ours = packing_scores(view, slice(None), gpus, share).tolist()
    theirs = [artifact_packing_score(view.gpu_milli_free_row(i)[:len(states)], gpus or 1, share or 1000)
              for i, states in enumerate(nodes)]
    fits = [score >= 0 for score in ours]
    # the artifact scores only the nodes its filter passed: compare those; ours marks the rest -1
    assert [s for s, ok in zip(ours, fits) if ok] == [s for s, ok in zip(theirs, fits) if ok]
