"""``fgd-strand`` (selectors/stranding.py) on hand-worked nodes: the CPU-per-GPU table, the
stranded milli-GPU, the GPU-model pressure, and the keys it gives against ``fgd-k8s``'s."""
import numpy as np
import pytest

from gangmaster.selectors.cluster import ClusterView, NodeSpec
from gangmaster.selectors.fgd import FgdAsScheduled
from gangmaster.selectors.fragmentation import WEIGHT_UNITS, fragmentation_increase
from gangmaster.selectors.request import SelectionRequest
from gangmaster.selectors.resources import ResourceDescriptor
from gangmaster.selectors.stranding import CpuPerGpu, FgdStranding, model_pressure
from gangmaster.selectors.workload import TaskShape, WorkloadShapes

ONE_GPU = TaskShape(12_000, 0, gpus=1)              # 12 vcores per GPU
SHARE = TaskShape(3_000, 0, gpu_milli=500)          # 3 vcores for half a GPU: 6 per GPU
CPU_ONLY = TaskShape(32_000, 0)
WORKLOAD = WorkloadShapes.weighted([(ONE_GPU, 1), (SHARE, 2), (CPU_ONLY, 1)])


def test_cpu_per_gpu_weights_the_gpu_shapes_by_the_gpu_they_ask():
    # ONE_GPU asks 1 x 1000 milli, SHARE 2 x 500: equal GPU, so equal weights; CPU_ONLY none
    table = CpuPerGpu(WORKLOAD)
    assert table.mvcores_per_gpu.tolist() == [6_000, 12_000]
    assert table.units.tolist() == [WEIGHT_UNITS // 2, WEIGHT_UNITS // 2]


def test_stranded_milli_by_hand():
    table = CpuPerGpu(WORKLOAD)
    # 4 GPUs free, 24 vcores: 12-per-GPU tasks fill 2 of them (2000 stranded), 6-per-GPU all 4 (0)
    # 4 GPUs, 12 vcores: 3000 and 2000 stranded; no GPU free: nothing; negative CPU counts as none
    got = table.stranded_units([4000, 4000, 0, 1000], [24_000, 12_000, 50_000, -5])
    assert (got / WEIGHT_UNITS).tolist() == [1000.0, 2500.0, 0.0, 1000.0]


def test_model_pressure_by_hand():
    # GPU asked: untyped 2 x 1000, T4-only 1 x 1000, V100-or-T4 2 x 500 -> 4000 in all; the cluster
    # has 8 GPUs: T4 is asked 1000/4000 x 8 = 2 plus half of the share's 1000/4000 x 8 = 1 -> 3 of
    # its 2 GPUs, V100 1 of 2; the untyped model "" none
    shapes = WorkloadShapes.weighted([(TaskShape(1000, 0, gpus=1), 2), (TaskShape(1000, 0, gpus=1, gpu_types=("T4",)), 1),
                                      (TaskShape(1000, 0, gpu_milli=500, gpu_types=("T4", "V100")), 2)])
    assert model_pressure(shapes, ["", "T4", "V100"], [4, 2, 2]).tolist() == pytest.approx([0, 1.5, 0.5])
    assert model_pressure(WORKLOAD, ["", "T4"], [4, 2]).tolist() == [0, 0]


def two_nodes(**kinds):
    return ClusterView([NodeSpec(host="dense", gpu_type=kinds.get("dense", "A"), memory_mb=1 << 20, vcores=96, gpus=8),
                        NodeSpec(host="roomy", gpu_type=kinds.get("roomy", "A"), memory_mb=1 << 20, vcores=104,
                                 gpus=2)])


def keys(selector, view, resource, gpu_types=()):
    request = SelectionRequest(role="w", resource=resource, gpu_types=gpu_types)
    return selector.rank(view, np.arange(len(view)), request).tolist()


def selectors(workload=WORKLOAD):
    made = FgdAsScheduled(), FgdStranding()
    for selector in made:
        selector.observe_workload(workload)
    return made


def test_a_cpu_only_task_goes_where_it_strands_no_gpu():
    # 32 vcores on "dense" (8 GPUs, 96 vcores): 64 left feed 5.33 GPUs at 12 each (2667 stranded,
    # weight 1/2) and 10.67 at 6 (none): +1333 milli -> floor(100 sigmoid(-1.333)) = 20, key 80;
    # on "roomy" (2 GPUs, 104 vcores) nothing is stranded: key 50. FGD alone sees no change on
    # either (every typical pod still runs): a tie at 50.
    k8s, strand = selectors()
    view = two_nodes()
    assert keys(k8s, view, ResourceDescriptor(1024, 32)) == [50, 50]
    assert keys(strand, view, ResourceDescriptor(1024, 32)) == [80, 50]


def test_untyped_tasks_keep_off_the_model_typed_tasks_need():
    # half of the GPU asked names model B, which has 2 of the 10 GPUs: P_B = 0.5 x 10 / 2 = 2.5,
    # counted as 2: one GPU there costs +2000 milli -> floor(100 sigmoid(-2)) = 11; the task
    # naming B pays nothing
    workload = WorkloadShapes.weighted([(TaskShape(1000, 0, gpus=1), 1), (TaskShape(1000, 0, gpus=1, gpu_types=("B",)), 1)])
    k8s, strand = selectors(workload)
    view = two_nodes(roomy="B")
    one_gpu = ResourceDescriptor(1024, 1, 1)
    assert keys(k8s, view, one_gpu) == keys(strand, view, one_gpu, ("A", "B"))
    plain = keys(k8s, view, one_gpu)
    assert keys(strand, view, one_gpu) == [plain[0], 100 - 11]


def test_the_node_key_and_the_rank_agree_and_a_named_gpu_is_ranked():
    k8s, strand = selectors()
    view = two_nodes()
    request = SelectionRequest(role="w", resource=ResourceDescriptor(1024, 32))
    assert strand.node_key(request).column(view).tolist() == [80, 50]
    # GPU 0 named, with 12 vcores: 7 GPUs and 84 vcores left on dense, 1 and 92 on roomy feed
    # every GPU, so nothing is added to FGD's increase
    named = SelectionRequest(role="w", resource=ResourceDescriptor(1024, 12, 1, gpu_mask=0b1))
    assert strand.node_key(named) is None
    assert strand.rank(view, np.arange(2), named).tolist() == k8s.rank(view, np.arange(2), named).tolist()
    # 60 vcores with it leave 36 for dense's 7 GPUs: 3 at 12 (4000 stranded, weight 1/2), 6 at 6
    # (1000): +2500 milli more than FGD's increase
    heavy = SelectionRequest(role="w", resource=ResourceDescriptor(1024, 60, 1, gpu_mask=0b1))
    table = strand._table()
    raw = fragmentation_increase(view, table, 60_000, 1024, 1, 0, rows=np.arange(1), gpu_mask=0b1)[0]
    expected = strand.score(raw + 2500 * table.total_units).tolist()
    assert strand.rank(view, np.arange(1), heavy).tolist() == expected != k8s.rank(view, np.arange(1), heavy).tolist()


def test_a_workload_without_gpu_or_typed_tasks_adds_nothing():
    # no GPU shape: nothing can be stranded; no typed shape: no pressure. The keys are fgd-k8s's.
    for workload in (WorkloadShapes.weighted([(CPU_ONLY, 1)]),
                     WorkloadShapes.weighted([(TaskShape(0, 0, gpus=1), 1), (CPU_ONLY, 1)])):
        k8s, strand = selectors(workload)
        view = two_nodes(roomy="B")
        for resource in (ResourceDescriptor(1024, 32), ResourceDescriptor(1024, 90, 1), ResourceDescriptor(1024, 1, 0, gpu_milli=300)):
            assert keys(strand, view, resource) == keys(k8s, view, resource)
