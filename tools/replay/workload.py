"""What a replay tells its selectors of the workload, and the FGD paper's fragmentation
measure over a replay's timeline.

**Typical shapes** (:func:`workload_shapes`): the empirical distribution of the replayed
job table's task asks — each distinct ask (vcores, memory, whole GPUs or a share of
one, GPU types) weighted by how many tasks ask it, as
:meth:`~gangmaster.selectors.workload.WorkloadShapes.from_asks` counts them. The replay
hands them to every selector it builds (:meth:`Selector.observe_workload`, before the
first job), and measures fragmentation against the same shapes.

**Fragmentation over time** (:class:`FragmentationRecorder`): Weng et al.'s measure
(:func:`~gangmaster.selectors.fragmentation.cluster_fragmentation`: the idle milli-GPU
that the typical shapes cannot use, in expectation), sampled on a grid of at most
:data:`FRAGMENTATION_SAMPLES` instants over the submit span (and on at the same pace
after it): at the end of the first instant at or after each grid point, the value then
holding until the next sample. A sample reads the sums the view keeps
(:class:`~gangmaster.selectors.fragmentation.FragmentationTotals`: only the nodes changed
since the last sample are looked at again), never every node per event.
"""
from __future__ import annotations

import itertools
import math
import operator
from collections import Counter
from dataclasses import dataclass

import numpy as np

from gangmaster.selectors.fit import milli
from gangmaster.selectors.fragmentation import cluster_fragmentation
from gangmaster.selectors.workload import TaskShape, WorkloadShapes

from .trace import JobTable

#: Samples of the fragmentation measure over the submit span: enough for a figure (an openb
#: fill seed takes about 1,900 in all, the release after the last arrival included).
FRAGMENTATION_SAMPLES = 1000
#: The typical shapes kept: None keeps every distinct ask (openb has a few hundred).
WORKLOAD_TOP: int | None = None


#: A role's ask and how many tasks ask it (:func:`workload_shapes` counts the roles by these).
_ROLE_ASK = operator.attrgetter("vcores", "memory_mb", "gpus", "gpu_milli", "gpu_types", "instances")


def workload_shapes(table: JobTable) -> "WorkloadShapes | None":
    """The table's typical task shapes: every distinct ask, weighed by how many tasks ask it
    (what :meth:`WorkloadShapes.from_asks` of every task's ask gives; the roles are counted
    by their distinct asks and instance counts first, not task by task); None for a table
    of no task."""
    roles = Counter(map(_ROLE_ASK, itertools.chain.from_iterable(map(operator.attrgetter("roles"), table.jobs))))
    shapes: dict[tuple, TaskShape] = {}
    weights: list[tuple[TaskShape, int]] = []
    for (vcores, memory_mb, gpus, gpu_milli, gpu_types, instances), count in roles.items():
        key = (vcores, memory_mb, gpus, gpu_milli, gpu_types)
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = TaskShape(milli(vcores), memory_mb, gpus, gpu_milli, tuple(sorted(gpu_types)))
        if instances > 0:
            weights.append((shape, instances * count))
    if not weights:
        return None
    return WorkloadShapes.weighted(weights, WORKLOAD_TOP)


def observe(selector, shapes: "WorkloadShapes | None") -> None:
    """Tell ``selector`` the workload (the hook every selector has once the fgd work is merged)."""
    if shapes is not None:
        selector.observe_workload(shapes)


@dataclass(frozen=True)
class FragmentationSeries:
    """A step function like :class:`~.timeline.Timeline`'s: from ``t[i]`` until ``t[i+1]``
    the cluster's fragmentation was ``frag_milli[i]`` of ``idle_milli[i]`` idle
    milli-GPU (``capacity_milli``: 1000 × the cluster's GPUs)."""

    t: np.ndarray
    frag_milli: np.ndarray
    idle_milli: np.ndarray
    capacity_milli: int


class FragmentationRecorder:
    """Samples the measure on a grid (module docstring): ``due(t)`` says whether the instant
    ending at ``t`` is the first at or after the next grid point (:attr:`next_at`);
    ``record(t, view)`` takes the sample."""

    def __init__(self, shapes: "WorkloadShapes", capacity_gpus: int, span_s: float,
                 samples: int = FRAGMENTATION_SAMPLES):
        self._measure = cluster_fragmentation
        self.shapes = shapes
        self.capacity_milli = 1000 * capacity_gpus
        self.step = span_s / samples if span_s > 0 else 0.0   # 0: no span to pace by, every instant
        self.next_at = 0.0   # the next grid point (a driver may compare its instants with it itself)
        self._rows: list[tuple[float, float, int]] = []

    def due(self, t: float) -> bool:
        return t >= self.next_at

    def record(self, t: float, view) -> None:
        frag, idle = self._measure(view, self.shapes)
        self._rows.append((t, frag, idle))
        self.next_at = (math.floor(t / self.step) + 1) * self.step if self.step else math.nextafter(t, math.inf)

    def series(self) -> FragmentationSeries:
        rows = self._rows
        t, frag, idle = (list(c) for c in zip(*rows)) if rows else ([], [], [])
        return FragmentationSeries(np.array(t, dtype=np.float64), np.array(frag, dtype=np.float64),
                                   np.array(idle, dtype=np.int64), self.capacity_milli)
