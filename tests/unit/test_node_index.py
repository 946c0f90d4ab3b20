"""The node index on small hand-made cases: equal keys in tie order whether a node
is where the build put it or moved since, copies apart from their original."""
from unittest import mock

import numpy as np
import pytest

from gangmaster.selectors import node_index

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.node_index import NodeIndex
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor as R
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings


def twins(n=6):
    """n identical nodes: every job-packing key is equal."""
    return ClusterView([NodeSpec(f"n{i}", memory_mb=1000, vcores=4, gpus=2) for i in range(n)])


def best(view, k, ties=None, gpus=0):
    pipeline = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
    return pipeline.best_nodes(view, SelectionRequest("w", R(100, 1, gpus)), k, ties=ties)[0].tolist()


def test_equal_keys_follow_the_tie_order_in_base_and_changed_nodes():
    view = twins()
    ties = np.array([3, 0, 5, 1, 4, 2])  # rank per node
    by_rank = [1, 3, 5, 0, 4, 2]
    assert best(view, 6, ties) == by_rank and best(view, 6) == list(range(6))
    for host in ("n1", "n4", "n2"):  # changed (moved out of the base run), keys unchanged
        view.set_health(host, True)
    assert best(view, 6, ties) == by_rank and best(view, 6) == list(range(6))


def test_a_node_that_changes_moves_to_its_new_key_and_bucket():
    view = twins()
    assert best(view, 1, gpus=1) == [0]
    view.allocate("n3", R(500, 1, gpu_mask=0b1))  # fewer free GPUs: packs first
    assert best(view, 2, gpus=1) == [3, 0]
    assert best(view, 1, gpus=2) == [0]
    view.release("n3", R(500, 1, gpu_mask=0b1))
    assert best(view, 2, gpus=1) == [0, 1]


def test_a_copy_changes_apart_from_its_original():
    view = twins()
    best(view, 1)  # the index exists before the copy
    scratch = view.copy()
    scratch.allocate("n5", R(900, 3, gpu_mask=0b11))
    view.set_health("n0", False)
    assert best(scratch, 2) == [5, 0] and best(view, 2) == [1, 2]


@pytest.mark.parametrize("threshold", [64, 1000])   # 100 changes: built again; moved one by one
def test_many_changes_at_once_rebuilt_or_moved(threshold):
    keys, buckets = np.arange(200)[::-1].copy(), np.zeros(200, dtype=np.int64)
    index = NodeIndex(keys, buckets)
    index.dirty.update(range(100))
    keys[:100] += 1000  # the first hundred nodes become the worst
    buckets[:50] = 10   # and half of them move to another bucket
    with mock.patch.object(node_index, "MIN_CHANGED_BEFORE_REBUILD", threshold):
        index.sync(keys, buckets)
    assert not index.dirty
    nodes, found = index.best(3, 0, lambda rows: np.ones(rows.size, bool))
    assert nodes.tolist() == [199, 198, 197] and found.tolist() == [0, 1, 2]
    nodes, found = index.best(2, 10, lambda rows: np.ones(rows.size, bool))
    assert nodes.tolist() == [49, 48] and found.tolist() == [1150, 1151]


def test_a_kept_walk_sees_role_counts_and_failures_that_came_after_it():
    """The lone pick keeps its walk on the view (placement.LonePick): a per-node cap or a
    failure of the role recorded after the walk was made still rules the node out, as on a
    copy of the view (which starts with no walk kept), and a copy walks on its own state."""
    from gangmaster.selectors.placement import place

    view = twins(4)
    pipeline = SelectionPipeline(SelectionSettings(), get_selector("job-packing"))
    capped = SelectionRequest("w", R(100, 1, 1), max_instances_per_node=1)

    def pick(v):
        return place(pipeline, v, capped, 1, book=False).nodes[0]

    first = pick(view)
    view.instances_of("w")[first] += 1       # the role's first count column: at its cap there
    second = pick(view)
    assert second != first and second == pick(view.copy())
    view.mark_failed("w", view.hosts[second])   # the role's first failure: skipped there too
    third = pick(view)
    assert third not in (first, second) and third == pick(view.copy())
    scratch = view.copy()
    scratch.instances_of("w")[third] += 1
    assert pick(scratch) not in (first, second, third) and pick(view) == third
