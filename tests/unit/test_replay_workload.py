"""What a replay tells its selectors of the workload (the typical shapes of its job
table, before the first job) and the FGD fragmentation measure it samples over the run.

The measure itself is selectors/fragmentation.py's (its own tests); here a stand-in
measure with known numbers checks the replay's side: which shapes, which calls, when
sampled, and the figures made of them."""
import random
import types

import numpy as np
import pytest

from gangmaster.selectors.selector import Selector
from gangmaster.selectors.fit import milli
from gangmaster.selectors.workload import TaskShape, WorkloadShapes
from gangmaster.tools.replay import workload as workload_module
from gangmaster.tools.replay.engine import ReplayOptions, replay
from gangmaster.tools.replay.metrics import fgd_fragmentation, measurement_window
from gangmaster.tools.replay.trace import JobTable, TraceJob, TraceRole
from gangmaster.tools.replay.workload import FragmentationRecorder, workload_shapes

from replay_helpers import cluster, job, table


def stand_in_measure(view, shapes):
    """Half of every wholly free GPU is 'fragmented': frag / idle is 0.5 exactly."""
    idle = 1000 * int(np.sum(view.gpus_free))
    return idle / 2, idle


@pytest.fixture
def stand_in(monkeypatch):
    """The measure replaced by one whose numbers are known; the selectors' hook spied on."""
    monkeypatch.setattr(workload_module, "cluster_fragmentation", stand_in_measure)
    told = []
    monkeypatch.setattr(Selector, "observe_workload", lambda self, shapes: told.append((self.name, shapes)))
    return told


def test_the_shapes_count_every_instance_of_every_role(stand_in):
    shapes = workload_shapes(table([job("a", 0, 10, 8), job("b", 1, 10, 12), job("c", 2, 10, 1)]))
    eight, four, one = (TaskShape(10_000 * g, 65536 * g, g) for g in (8, 4, 1))
    assert dict(zip(shapes.shapes, shapes.weights)) == {eight: 0.5, four: 0.25, one: 0.25}   # 12 GPUs = 8 + 4


def test_the_shapes_are_what_every_tasks_ask_gives():
    """workload_shapes counts the roles by distinct ask and instance count; the result is
    WorkloadShapes.from_asks of one ask per task (asks that differ only in the order of their
    GPU types, or in vcores that round to the same millis, are one shape)."""
    rng = random.Random(7)
    for _ in range(200):
        jobs = []
        for i in range(rng.randint(0, 12)):
            roles = tuple(TraceRole(f"r{k}", rng.randint(0, 3), rng.choice([0, 1, 2, 8]), rng.choice([1.0, 1.0004, 2.5]),
                                    rng.choice([1024, 4096]), rng.choice([(), ("a",), ("a", "b"), ("b", "a")]))
                          for k in range(rng.randint(1, 3)))
            jobs.append(TraceJob(f"j{i}", float(i), 10.0, "q", roles))
        asks = [TaskShape(milli(role.vcores), role.memory_mb, role.gpus, role.gpu_milli, tuple(sorted(role.gpu_types)))
                for trace in jobs for role in trace.roles for _ in range(role.instances)]
        expected = WorkloadShapes.from_asks(asks) if asks else None
        assert workload_shapes(JobTable(tuple(jobs), "t", "", "native")) == expected


def test_the_selector_hears_of_the_workload_before_the_first_job_and_frag_is_sampled(stand_in):
    jobs = table([job(f"j{i}", 10 * i, 25, 1 + i % 3) for i in range(40)])
    result = replay(jobs, cluster(2), ReplayOptions(selector="random", seed=1))
    assert len(stand_in) == 1 and stand_in[0][0] == "random"
    assert abs(sum(stand_in[0][1].weights) - 1) < 1e-9 and len(stand_in[0][1].shapes) == 3
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


def test_without_a_measured_series_the_figures_say_none():
    assert fgd_fragmentation(None, measurement_window([0.0], 0.0)) == {"frag_fgd_mean": None,
                                                                       "frag_fgd_idle_share": None}
