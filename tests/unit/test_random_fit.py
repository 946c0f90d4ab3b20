"""``random-fit``, the FGD paper's Random-fit baseline: a node drawn uniformly among every
node that fits, a share on a GPU drawn among those that take it; and how it differs from
``random`` (qizhi's draw among job packing's best two)."""
from collections import Counter

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings

DRAWS = 600


def cluster() -> ClusterView:
    """Six 4-GPU nodes; "n5" holds a whole GPU on each of its GPUs but one, so it takes a
    one-GPU ask but not a two-GPU one; "n4" holds a share of 700 on GPU 2."""
    view = ClusterView([NodeSpec(host=f"n{i}", memory_mb=65536, vcores=32, gpus=4) for i in range(6)])
    view.allocate("n5", ResourceDescriptor(1024, 1, gpus=3, gpu_mask=0b0111))
    view.allocate("n4", ResourceDescriptor(1024, 1, gpu_milli=700, gpu_mask=0b0100))
    return view


def picks(selector: str, gpus: int, seed: int = 7) -> Counter:
    pipeline = SelectionPipeline(SelectionSettings(seed=seed), get_selector(selector))
    view, request = cluster(), SelectionRequest("w", ResourceDescriptor(1024, 1, gpus))
    return Counter(pipeline.select_single_node(view, request).best.host for _ in range(DRAWS))


def test_every_fitting_node_is_drawn_about_as_often():
    counts = picks("random-fit", gpus=2)
    assert set(counts) == {"n0", "n1", "n2", "n3", "n4"}      # n5 has one GPU free: never
    # 120 expected each; a uniform draw leaves [80, 160] with probability < 1e-3 per node
    assert all(80 <= n <= 160 for n in counts.values()), counts


def test_random_draws_among_job_packings_best_two_only():
    # qizhi's random keeps pending tasks × factor (2) candidates by job packing: the
    # fullest nodes, n5 then n4, whatever the seed
    assert set(picks("random", gpus=1)) == {"n5", "n4"}
    assert set(picks("random-fit", gpus=1)) == {f"n{i}" for i in range(6)}


def test_the_seed_changes_the_draws_and_repeats_them():
    assert picks("random-fit", gpus=1, seed=1) == picks("random-fit", gpus=1, seed=1)
    first_picks = {SelectionPipeline(SelectionSettings(seed=seed), get_selector("random-fit"))
                   .select_single_node(cluster(), SelectionRequest("w", ResourceDescriptor(1024, 1, 1))).best.host
                   for seed in range(20)}
    assert len(first_picks) > 1


def test_a_share_goes_on_a_random_gpu_that_takes_it():
    selector, view = get_selector("random-fit"), cluster()
    request = SelectionRequest("w", ResourceDescriptor(1024, 1, gpu_milli=300))
    masks = Counter(selector.choose_gpus(view, view.host_index["n4"], request) for _ in range(DRAWS))
    assert set(masks) == {0b0001, 0b0010, 0b0100, 0b1000}     # 300 left on GPU 2 takes it too
    big = SelectionRequest("w", ResourceDescriptor(1024, 1, gpu_milli=400))
    assert {selector.choose_gpus(view, view.host_index["n4"], big) for _ in range(100)} == {0b0001, 0b0010, 0b1000}


def test_whole_gpus_go_on_the_lowest_free():
    selector, view = get_selector("random-fit"), cluster()
    request = SelectionRequest("w", ResourceDescriptor(1024, 1, gpus=2))
    assert selector.choose_gpus(view, view.host_index["n4"], request) == 0b0011
