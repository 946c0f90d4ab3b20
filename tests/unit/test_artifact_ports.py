"""What the ports of the FGD artifact's policies take from the artifact (issue 32).

Ties: the ports whose exact ties the artifact breaks by its
renamed nodes take the run's seeded node order, not the trace's host names: the artifact's
scheduler picks the smallest node name among equal scores, but its simulator first renames
every node ``"%04d-" % rand.Perm(n)[i] + name`` with the run's seed, so the smallest name is
one seeded draw per run. Among ten empty nodes alike, each seed's pick (the AM's placement
loop's) is its own tie order's first node, and the seeds do not all pick the same node."""
import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.pipeline import SelectionPipeline
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.selector import get_selector
from gangmaster.selectors.settings import SelectionSettings
from gangmaster.selectors.workload import TaskShape, WorkloadShapes

WORKLOAD = WorkloadShapes.weighted([(TaskShape(1000, 1024, gpus=1), 2), (TaskShape(1000, 1024, gpu_milli=300), 1)])


@pytest.mark.parametrize("selector", ["packing", "clustering", "fgd", "fgd-k8s", "fgd-strand"])
def test_ties_go_to_the_runs_seeded_node_order_not_the_host_names(selector):
    hosts = [f"node-{i}" for i in range(10)]
    picks = set()
    for seed in range(8):
        view = ClusterView([NodeSpec(host=h, memory_mb=65536, vcores=32, gpus=2) for h in hosts])
        pipeline = SelectionPipeline(SelectionSettings(selector=selector, seed=seed))
        pipeline.selector.observe_workload(WORKLOAD)
        for gpus, share in [(1, 0), (0, 300), (0, 0)]:
            request = SelectionRequest("w", ResourceDescriptor(1024, 1, gpus, gpu_milli=share))
            pick = pipeline.select_single_node(view, request).best.host   # the AM's placement loop
            assert pick == hosts[int(pipeline.tie_order.of(len(view)).argmin())], (seed, gpus, share)
            picks.add(pick)
    assert len(picks) > 1


# ------------------------------------------------------------------ the typical pods

def test_the_artifacts_typical_pods_have_no_memory_and_hold_the_popular_95_percent():
    shapes = WorkloadShapes.weighted([
        (TaskShape(4000, 8192, gpu_milli=500), 40), (TaskShape(4000, 16384, gpu_milli=500), 20),   # one shape there
        (TaskShape(8000, 4096, gpus=1), 30), (TaskShape(0, 1024), 6),                  # no CPU: 100 m there
        (TaskShape(2000, 0, gpus=8), 3), (TaskShape(1000, 0, gpus=2), 1)])
    typical = shapes.artifact_typical()
    # 60 + 30 = 90 % < 95 %, + 6 = 96 %: the three most popular shapes, renormalised
    assert typical.shapes == (TaskShape(4000, 0, gpu_milli=500), TaskShape(8000, 0, gpus=1), TaskShape(100, 0))
    assert typical.weights == pytest.approx((60 / 96, 30 / 96, 6 / 96))
    assert shapes.artifact_typical(popularity=1.0).shapes[-1] == TaskShape(1000, 0, gpus=2)


def test_fgd_k8s_measures_against_the_artifacts_typical_pods_and_fgd_against_every_shape():
    shapes = WorkloadShapes.weighted([(TaskShape(4000, 8192, gpu_milli=500), 90), (TaskShape(8000, 4096, gpus=1), 8),
                                      (TaskShape(2000, 0, gpus=8), 2)])
    k8s, fgd = get_selector("fgd-k8s"), get_selector("fgd")
    k8s.observe_workload(shapes)
    fgd.observe_workload(shapes)
    assert len(k8s.table.memory) == 2 and not k8s.table.memory.any()
    assert len(fgd.table.memory) == 3
