"""The FGD paper's fragmentation measure on hand-worked nodes (selectors/fragmentation.py),
and the workload shapes it is measured against (selectors/workload.py)."""
import numpy as np
import pytest

from gangmaster.conf.fields import ConfigError
from gangmaster.selectors.fragmentation import (CANNOT_TAKE, fragment_units, fragmentation_increase,
                                                placement_options, shape_table)
from gangmaster.selectors.workload import TaskShape, WorkloadShapes

from fragmentation_reference import increases, node_fragment, shape_fragment

SHARE_500 = TaskShape(1000, 1024, gpu_milli=500)
ONE_GPU = TaskShape(1000, 1024, gpus=1)
CPU_ONLY = TaskShape(1000, 1024)
WORKLOAD = WorkloadShapes((SHARE_500, ONE_GPU, CPU_ONLY), (0.5, 0.3, 0.2))


class StandIn:
    """The node columns fragmentation reads, by hand (no booking, no cache)."""

    def __init__(self, gpu_free, mvcores_free, memory_free, gpu_type="T4"):
        self.gpu_milli_free = np.array(gpu_free, dtype=np.int32)
        self.mvcores_free = np.array(mvcores_free, dtype=np.int64)
        self.memory_free = np.array(memory_free, dtype=np.int64)
        self.gpu_types = [gpu_type]
        self.gpu_type_code = np.zeros(len(self.mvcores_free), dtype=np.int32)

    def __len__(self):
        return len(self.mvcores_free)

    def gpu_milli_free_rows(self, rows=None):
        return self.gpu_milli_free if rows is None or isinstance(rows, slice) else self.gpu_milli_free[rows]

    def cached_column(self, name, compute):
        return compute(self, slice(None))


def units(view, workload=WORKLOAD):
    table = shape_table(workload)
    access = table.access(view.gpu_types)[view.gpu_type_code]
    return fragment_units(view.gpu_milli_free, view.mvcores_free, view.memory_free, access, table) / table.total_units


def test_a_node_worked_by_hand():
    # GPUs 1000, 600, 300, 0 free: the 500-share runs and strands the 300 (and the 0);
    # one whole GPU runs and strands 600 + 300; a CPU-only task strands all 1,900 idle.
    node = StandIn([[1000, 600, 300, 0]], [8000], [65536])
    assert shape_fragment([1000, 600, 300, 0], 8000, 65536, "T4", SHARE_500) == 300
    assert shape_fragment([1000, 600, 300, 0], 8000, 65536, "T4", ONE_GPU) == 900
    assert shape_fragment([1000, 600, 300, 0], 8000, 65536, "T4", CPU_ONLY) == 1900
    assert units(node) == pytest.approx(0.5 * 300 + 0.3 * 900 + 0.2 * 1900)   # 800


def test_a_task_that_cannot_run_at_all_finds_every_idle_gpu_a_fragment():
    short_of_vcores = StandIn([[1000, 600, 300, 0]], [999], [65536])
    short_of_memory = StandIn([[1000, 600, 300, 0]], [8000], [1000])
    assert units(short_of_vcores)[0] == pytest.approx(1900)
    assert units(short_of_memory)[0] == pytest.approx(1900)
    two_gpus = WorkloadShapes((TaskShape(0, 0, gpus=2),), (1.0,))
    assert units(StandIn([[1000, 600, 300, 0]], [8000], [65536]), two_gpus)[0] == pytest.approx(1900)
    assert units(StandIn([[1000, 1000, 300, 0]], [8000], [65536]), two_gpus)[0] == pytest.approx(300)
    only_v100 = WorkloadShapes((TaskShape(0, 0, gpu_milli=100, gpu_types=("V100",)),), (1.0,))
    assert units(StandIn([[1000, 600]], [8000], [65536], gpu_type="T4"), only_v100)[0] == pytest.approx(1600)
    assert units(StandIn([[1000, 600]], [8000], [65536], gpu_type="V100"), only_v100)[0] == pytest.approx(0)


def test_nodes_without_idle_gpus_have_no_fragmentation():
    view = StandIn([[0, 0, 0, 0], [0, 0, 0, 0]], [8000, 0], [65536, 0])
    assert list(units(view)) == [0, 0]


def test_placing_a_share_on_each_gpu_by_hand():
    # 500 on GPU 0 leaves 500, 600, 300, 0 (no whole GPU: the one-GPU shape strands all
    # 1,400): F = .5*300 + .3*1400 + .2*1400 = 850, up 50; on GPU 1 it leaves 1000, 100,
    # 300, 0: F = .5*400 + .3*400 + .2*1400 = 600, down 200. GPU 2 and 3 cannot take it.
    view = StandIn([[1000, 600, 300, 0]], [8000], [65536])
    table = shape_table(WORKLOAD)
    options = sorted((round(d, 6), g) for d, g in increases([1000, 600, 300, 0], 8000, 65536, "T4", WORKLOAD,
                                                            1000, 1024, 0, 500))
    assert options == [(-200, 1), (50, 0)]
    delta, gpu = fragmentation_increase(view, table, 1000, 1024, 0, 500)
    assert delta[0] / table.total_units == pytest.approx(-200) and gpu[0] == 1


def test_a_node_that_cannot_take_the_ask_gets_the_sentinel():
    view = StandIn([[300, 0], [1000, 1000]], [8000, 500], [65536, 65536])
    delta, _ = fragmentation_increase(view, shape_table(WORKLOAD), 1000, 0, 0, 500)
    assert list(delta) == [CANNOT_TAKE, CANNOT_TAKE]   # no GPU with 500; too few vcores


def test_equal_gpus_are_one_option_and_whole_gpus_take_the_lowest_free():
    node, gpu, after = placement_options(np.array([[1000, 400, 1000, 400]]), 0, 300)
    assert list(gpu) == [0, 1]
    assert after.tolist() == [[700, 400, 1000, 400], [1000, 100, 1000, 400]]
    node, gpu, after = placement_options(np.array([[400, 1000, 1000, 1000]]), 2, 0)
    assert after.tolist() == [[400, 0, 0, 1000]]
    node, _, _ = placement_options(np.array([[400, 1000, 0, 0]]), 2, 0)
    assert node.size == 0


def test_the_reference_and_the_vector_form_agree_on_many_nodes():
    rng = np.random.default_rng(7)
    gpu_free = rng.choice([0, 150, 300, 500, 800, 1000], size=(200, 8))
    gpu_free[:, 6:] = np.where(rng.random((200, 1)) < 0.5, 0, gpu_free[:, 6:])
    mv = rng.integers(0, 20_000, 200)
    mem = rng.integers(0, 100_000, 200)
    workload = WorkloadShapes.weighted([(SHARE_500, 3), (ONE_GPU, 2), (CPU_ONLY, 1),
                                        (TaskShape(4000, 50_000, gpus=2), 1),
                                        (TaskShape(2000, 0, gpu_milli=250, gpu_types=("T4",)), 2)])
    got = units(StandIn(gpu_free, mv, mem), workload)
    want = [node_fragment(list(gpu_free[i]), mv[i], mem[i], "T4", workload) for i in range(200)]
    assert np.allclose(got, want, atol=0.05)


# ------------------------------------------------------------------ workload shapes
def test_from_asks_counts_and_keeps_the_top_renormalised():
    asks = [SHARE_500] * 5 + [ONE_GPU] * 3 + [CPU_ONLY] * 2
    shapes = WorkloadShapes.from_asks(asks)
    assert shapes.shapes == (SHARE_500, ONE_GPU, CPU_ONLY) and shapes.weights == (0.5, 0.3, 0.2)
    top = WorkloadShapes.from_asks(reversed(asks), top=2)
    assert top.shapes == (SHARE_500, ONE_GPU) and top.weights == pytest.approx((5 / 8, 3 / 8))


def test_shapes_refuse_what_cannot_be_asked():
    with pytest.raises(ValueError, match="not both"):
        TaskShape(0, 0, gpus=1, gpu_milli=500)
    with pytest.raises(ValueError, match="share of one GPU"):
        TaskShape(0, 0, gpu_milli=1000)
    with pytest.raises(ValueError, match="sum to 1"):
        WorkloadShapes((SHARE_500,), (0.5,))


def test_the_file_form_round_trips_and_names_bad_fields(tmp_path):
    good = tmp_path / "w.yaml"
    good.write_text("top: 2\nshapes:\n  - {vcores: 1, memoryMB: 1024, gpuMilli: 500, weight: 5}\n"
                    "  - {vcores: 1, memoryMB: 1024, gpus: 1, weight: 3}\n  - {vcores: 1, memoryMB: 1024}\n")
    shapes = WorkloadShapes.from_file(good)
    assert shapes.shapes == (SHARE_500, ONE_GPU) and shapes.weights == pytest.approx((5 / 8, 3 / 8))
    as_json = tmp_path / "w.json"
    import json
    as_json.write_text(json.dumps(WORKLOAD.to_dict()))
    assert WorkloadShapes.from_file(as_json) == WORKLOAD
    bad = tmp_path / "bad.yaml"
    bad.write_text("shapes:\n  - {vcores: 1, gpus: 1, gpuMilli: 500}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml.*shapes\[0\].gpuMilli"):
        WorkloadShapes.from_file(bad)
    bad.write_text("shapes:\n  - {vcores: 1, weight: 0}\n")
    with pytest.raises(ConfigError, match=r"shapes\[0\].weight"):
        WorkloadShapes.from_file(bad)
    bad.write_text("shapes: []\n")
    with pytest.raises(ConfigError, match="at least one"):
        WorkloadShapes.from_file(bad)


def test_a_named_gpu_is_judged_as_named():
    # the same node as above: the share named on GPU 0 raises F by 50, whatever GPU 1 would do
    view = StandIn([[1000, 600, 300, 0]], [8000], [65536])
    table = shape_table(WORKLOAD)
    delta, gpu = fragmentation_increase(view, table, 1000, 1024, 0, 500, gpu_mask=0b1)
    assert delta[0] / table.total_units == pytest.approx(50) and gpu[0] == 0
    delta, _ = fragmentation_increase(view, table, 1000, 1024, 0, 500, gpu_mask=0b100)   # 300 left: no room
    assert delta[0] == CANNOT_TAKE


def test_fgd_k8s_compares_the_schedulers_integer_score():
    # increases of -200 and +50 milli-GPU score floor(100 sigmoid(0.2)) = 54 and
    # floor(100 sigmoid(-0.05)) = 48: keys 46 and 52, still GPU 1 first
    from gangmaster.selectors.fgd import FgdAsScheduled
    selector = FgdAsScheduled()
    selector.observe_workload(WORKLOAD)
    table = shape_table(WORKLOAD)
    delta, gpu = fragmentation_increase(StandIn([[1000, 600, 300, 0]], [8000], [65536]), table, 1000, 1024, 0, 500,
                                        score=selector.score)
    assert delta.tolist() == [46] and gpu.tolist() == [1]
    # within ~40 milli the scores agree: a tie, which the exact fgd would not have
    assert selector.score(np.array([10, 30]) * table.total_units).tolist() == [51, 51]   # both score 49
