"""What a replay tells its selectors of the workload (the typical shapes of its job
table, before the first job) and the FGD fragmentation measure it samples over the run.

The measure and the shapes are the fgd work's (selectors/workload.py,
selectors/fragmentation.py); here a tiny stand-in with the same names checks the
replay's side: which shapes, which calls, when sampled, and the figures made of them."""
import sys
import types
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from gangmaster.selectors.selector import Selector
from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.metrics import fgd_fragmentation, measurement_window
from gangmaster.tools.replay.workload import FragmentationRecorder, workload_shapes

from replay_helpers import cluster, job, table


@dataclass(frozen=True)
class StandInShape:
    mvcores: int
    memory_mb: int
    gpus: int = 0
    gpu_milli: int = 0
    gpu_types: tuple = ()


class StandInShapes:
    def __init__(self, counts):
        self.counts = counts

    @classmethod
    def from_asks(cls, asks, top=None):
        return cls(Counter(asks))


def stand_in_measure(view, shapes):
    """Half of every wholly free GPU is 'fragmented': frag / idle is 0.5 exactly."""
    idle = 1000 * int(np.sum(view.gpus_free))
    return idle / 2, idle


@pytest.fixture
def stand_in(monkeypatch):
    workload = types.ModuleType("gangmaster.selectors.workload")
    workload.TaskShape, workload.WorkloadShapes = StandInShape, StandInShapes
    fragmentation = types.ModuleType("gangmaster.selectors.fragmentation")
    fragmentation.cluster_fragmentation = stand_in_measure
    monkeypatch.setitem(sys.modules, "gangmaster.selectors.workload", workload)
    monkeypatch.setitem(sys.modules, "gangmaster.selectors.fragmentation", fragmentation)
    told = []
    monkeypatch.setattr(Selector, "observe_workload", lambda self, shapes: told.append((self.name, shapes)),
                        raising=False)
    return told


def test_the_shapes_count_every_instance_of_every_role(stand_in):
    shapes = workload_shapes(table([job("a", 0, 10, 8), job("b", 1, 10, 12), job("c", 2, 10, 1)]))
    eight, four, one = (StandInShape(10_000 * g, 65536 * g, g) for g in (8, 4, 1))
    assert shapes.counts == {eight: 2, four: 1, one: 1}    # 12 GPUs = 8 + 4 (the Philly split)


def test_the_selector_hears_of_the_workload_before_the_first_job_and_frag_is_sampled(stand_in):
    jobs = table([job(f"j{i}", 10 * i, 25, 1 + i % 3) for i in range(40)])
    result = replay(jobs, cluster(2), ReplayOptions(selector="random", seed=1))
    assert len(stand_in) == 1 and stand_in[0][0] == "random"
    assert sum(stand_in[0][1].counts.values()) == 40
    series = result.fragmentation
    assert series is not None and series.capacity_milli == 16_000
    assert 1 < len(series.t) and np.all(np.diff(series.t) > 0)
    assert np.all(np.diff(np.floor(series.t / (390 / 1000))) > 0)   # one sample per grid step at most
    assert np.array_equal(series.frag_milli, series.idle_milli / 2)
    figures = fgd_fragmentation(series, measurement_window([j.submit_s for j in jobs.jobs], 0.0))
    assert figures["frag_fgd_idle_share"] == 0.5
    assert 0 < figures["frag_fgd_mean"] <= 0.5


def test_the_recorder_samples_at_the_first_instant_of_each_grid_step(stand_in):
    recorder = FragmentationRecorder(None, capacity_gpus=1, span_s=80.0, samples=8)   # a sample every 10 s
    view = types.SimpleNamespace(gpus_free=np.array([1]))
    for t in (0.0, 3.0, 9.9, 10.0, 10.5, 35.0, 36.0, 40.0, 95.0):
        if recorder.due(t):
            recorder.record(t, view)
    series = recorder.series()
    assert series.t.tolist() == [0.0, 10.0, 35.0, 40.0, 95.0]   # on after the span at the same pace
    assert series.frag_milli.tolist() == [500.0] * 5 and series.capacity_milli == 1000


def test_without_the_fgd_modules_a_replay_runs_unmeasured(monkeypatch):
    monkeypatch.setitem(sys.modules, "gangmaster.selectors.workload", None)   # import raises ImportError
    result = replay(table([job("a", 0, 10, 1)]), cluster(1), ReplayOptions())
    assert result.fragmentation is None
    assert fgd_fragmentation(None, measurement_window([0.0], 0.0)) == {"frag_fgd_mean": None,
                                                                       "frag_fgd_idle_share": None}
