"""The workload a selector may plan for: the typical task shapes and how often each comes.

A fragmentation-aware strategy (``fgd``) judges a placement by what it leaves for the
tasks still to come, so it must know what those tasks look like. Following Weng et
al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent" (USENIX ATC'23, §3: the *target workload*), that is a distribution
over task shapes: each distinct ask (vcores, memory, whole GPUs or a share of one GPU,
acceptable GPU types) with its share of the tasks. The paper's simulator takes the
most popular shapes of the trace; :meth:`WorkloadShapes.from_asks` counts the asks it is
given and keeps the ``top`` most frequent, their weights renormalised to sum to 1.

A strategy receives the workload through :meth:`Selector.observe_workload
<gangmaster.selectors.selector.Selector.observe_workload>` (the replay calls it on
every selector it builds; ``--workload FILE`` where a user gives one), never through a
global. The file form, YAML or JSON::

    # workload.yaml: weights are any positive numbers (renormalised)
    top: 20                  # optional: keep the 20 heaviest shapes
    shapes:
      - {vcores: 3.152, memoryMB: 0, gpuMilli: 810, weight: 1047}
      - {vcores: 11.3, gpus: 1, weight: 874}
      - {vcores: 12.5, weight: 366}                 # a CPU-only task
      - {vcores: 8, gpus: 2, gpuTypes: [V100M32], weight: 3}
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from gangmaster.conf.fields import ConfigError, Fields, load_yaml
from gangmaster.conf.limits import MAX_GPUS_PER_NODE, MAX_MEMORY_MB, MAX_VCORES, MAX_WORKLOAD_SHAPES

from .fit import GPU_MILLI, milli

if TYPE_CHECKING:
    from .resources import ResourceDescriptor

SHAPE_FIELDS = ("vcores", "memoryMB", "gpus", "gpuMilli", "gpuTypes", "weight")
#: The share of the tasks the artifact's typical pods hold (``podPopularityThreshold: 95`` of
#: its ``scripts/generate_config_and_run.py``, step 1): :meth:`WorkloadShapes.artifact_typical`.
ARTIFACT_POPULARITY = 0.95
#: Kubernetes counts a container that requests no CPU as 100 m (``GetNonzeroRequests``).
ARTIFACT_MIN_MVCORES = 100


@dataclass(frozen=True, order=True)
class TaskShape:
    """One task's ask, in the fit model's units: vcores in millis, memory in MB, and
    either ``gpus`` whole GPUs or a ``gpu_milli`` share (1..999) of one GPU (never
    both); ``gpu_types``: the GPU models it accepts, empty for any."""

    mvcores: int
    memory_mb: int
    gpus: int = 0
    gpu_milli: int = 0
    gpu_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mvcores < 0 or self.memory_mb < 0 or self.gpus < 0:
            raise ValueError(f"a task shape asks for no negative amount, got {self}")
        if not 0 <= self.gpu_milli < GPU_MILLI:
            raise ValueError(f"gpu_milli is a share of one GPU, 1..{GPU_MILLI - 1} (0: none), got {self.gpu_milli}")
        if self.gpu_milli and self.gpus:
            raise ValueError(f"a task shape asks for whole GPUs or a share of one, not both: {self}")

    @property
    def gpu_need(self) -> int:
        """Milli-GPU the task needs on each GPU it takes: 1000 for whole GPUs, else its share."""
        return GPU_MILLI if self.gpus else self.gpu_milli

    @property
    def gpu_count(self) -> int:
        """How many GPUs the task takes (a share takes part of one)."""
        return self.gpus if self.gpus else (1 if self.gpu_milli else 0)

    @classmethod
    def of(cls, resource: "ResourceDescriptor", gpu_types: Iterable[str] = ()) -> "TaskShape":
        """The shape of one instance of a ``ResourceDescriptor`` (ports and named GPUs aside)."""
        return cls(milli(resource.vcores), resource.memory_mb, resource.gpus, resource.gpu_milli,
                   tuple(sorted(gpu_types)))

    def __str__(self) -> str:
        gpu = (f" gpus={self.gpus}" if self.gpus else "") + (f" gpu_milli={self.gpu_milli}" if self.gpu_milli else "")
        types = f" types={'|'.join(self.gpu_types)}" if self.gpu_types else ""
        return f"vcores={self.mvcores / 1000:g} memory={self.memory_mb}MB{gpu}{types}"


@dataclass(frozen=True)
class WorkloadShapes:
    """Typical task shapes with their weights (positive, summing to 1), heaviest first."""

    shapes: tuple[TaskShape, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.shapes:
            raise ValueError("a workload has at least one task shape")
        if len(self.shapes) != len(self.weights):
            raise ValueError(f"{len(self.shapes)} shapes but {len(self.weights)} weights")
        if len(set(self.shapes)) != len(self.shapes):
            raise ValueError("each task shape appears once in a workload")
        if not all(w > 0 and math.isfinite(w) for w in self.weights) or abs(math.fsum(self.weights) - 1) > 1e-9:
            raise ValueError(f"workload weights are positive and sum to 1, got {self.weights}")

    def __len__(self) -> int:
        return len(self.shapes)

    def __iter__(self) -> Iterator[tuple[TaskShape, float]]:
        return iter(zip(self.shapes, self.weights))

    @classmethod
    def weighted(cls, pairs: Iterable[tuple[TaskShape, float]], top: int | None = None) -> "WorkloadShapes":
        """From (shape, weight) pairs, weights any positive numbers (a shape given twice
        adds up): the ``top`` heaviest (all when None), weights renormalised to sum to 1.
        Heaviest first; equal weights in shape order, so the result never depends on the
        order the pairs came in."""
        total: dict[TaskShape, float] = {}
        for shape, weight in pairs:
            if not (weight > 0 and math.isfinite(weight)):
                raise ValueError(f"a shape's weight is a positive number, got {weight!r} for {shape}")
            total[shape] = total.get(shape, 0.0) + weight
        if top is not None and top < 1:
            raise ValueError(f"top keeps at least one shape, got {top}")
        ranked = sorted(total.items(), key=lambda item: (-item[1], item[0]))[:top]
        if not ranked:
            raise ValueError("a workload has at least one task shape")
        kept = sum(w for _, w in ranked)
        return cls(tuple(s for s, _ in ranked), tuple(w / kept for _, w in ranked))

    def artifact_typical(self, popularity: float = ARTIFACT_POPULARITY) -> "WorkloadShapes":
        """These shapes as the FGD artifact's scheduler plugin knows the workload
        (``GetTypicalPods`` in its ``pkg/utils/frag.go``, with the paper's run settings): no
        memory (its pod resource has none, so no shape ever lacks a node's memory), a
        CPU ask of 0 counted as :data:`ARTIFACT_MIN_MVCORES` (Kubernetes' non-zero request),
        then the most popular shapes one at a time until they hold ``popularity`` of the
        weight, renormalised (openb's default list: 35 of 151 shapes)."""
        merged = WorkloadShapes.weighted(
            (TaskShape(max(shape.mvcores, ARTIFACT_MIN_MVCORES), 0, shape.gpus, shape.gpu_milli, shape.gpu_types), weight)
            for shape, weight in self)
        kept, held = [], 0.0
        for shape, weight in merged:
            if held >= popularity:
                break
            kept.append((shape, weight))
            held += weight
        return WorkloadShapes.weighted(kept)

    @classmethod
    def from_asks(cls, asks: Iterable[TaskShape], top: int | None = None) -> "WorkloadShapes":
        """The empirical distribution of ``asks`` (one per task): each distinct shape
        weighted by how many tasks ask it; the ``top`` most frequent when given,
        renormalised (the paper's simulator keeps the most popular shapes)."""
        return cls.weighted(Counter(asks).items(), top)

    @classmethod
    def from_file(cls, path: str | Path) -> "WorkloadShapes":
        """Read the YAML/JSON file form (module docstring); a bad entry raises
        :class:`ConfigError` naming the file, the entry and the field."""
        doc = Fields(load_yaml(path), str(path))
        doc.reject_unknown(("shapes", "top"))
        entries = doc.list_of_mappings("shapes")
        if not entries:
            raise doc.error("shapes", "at least one task shape")
        if len(entries) > MAX_WORKLOAD_SHAPES:
            raise doc.error("shapes", f"at most {MAX_WORKLOAD_SHAPES:,} shapes (MAX_WORKLOAD_SHAPES in "
                                      f"conf/limits.py)", f"{len(entries):,} shapes")
        top = doc.integer("top", minimum=1) if "top" in doc else None
        pairs = [_read_shape(entry) for entry in entries]
        try:
            return cls.weighted(pairs, top)
        except ValueError as exc:
            raise ConfigError(str(path), "shapes", str(exc)) from None

    def to_dict(self) -> dict[str, Any]:
        """The file form (weights as fractions), for ``--workload`` files and reports."""
        out = []
        for shape, weight in self:
            entry: dict[str, Any] = {"vcores": shape.mvcores / 1000, "memoryMB": shape.memory_mb}
            if shape.gpus:
                entry["gpus"] = shape.gpus
            if shape.gpu_milli:
                entry["gpuMilli"] = shape.gpu_milli
            if shape.gpu_types:
                entry["gpuTypes"] = list(shape.gpu_types)
            entry["weight"] = weight
            out.append(entry)
        return {"shapes": out}


def _read_shape(entry: Fields) -> tuple[TaskShape, float]:
    entry.reject_unknown(SHAPE_FIELDS)
    vcores = entry.number("vcores", 0, minimum=0, maximum=MAX_VCORES, limit="MAX_VCORES")
    memory = entry.integer("memoryMB", 0, minimum=0, maximum=MAX_MEMORY_MB, limit="MAX_MEMORY_MB")
    gpus = entry.integer("gpus", 0, minimum=0, maximum=MAX_GPUS_PER_NODE)
    share = entry.integer("gpuMilli", 0, minimum=0, maximum=GPU_MILLI - 1)
    if gpus and share:
        raise entry.error("gpuMilli", "0 when gpus is set (a shape asks whole GPUs or a share of one)", share)
    types = tuple(sorted(entry.names("gpuTypes", [])))
    weight = entry.number("weight", 1, minimum=0, exclusive_minimum=True)
    return TaskShape(milli(vcores), memory, gpus, share, types), float(weight)

