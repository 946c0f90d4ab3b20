"""The FGD paper's fragmentation measure, restated naively (loops over one node's GPUs and
the shapes, float weights) as the reference for the vectorised, cached computation in
selectors/fragmentation.py and for fgd's choice."""
from __future__ import annotations

GPU_MILLI = 1000


def shape_fragment(gpu_free: list[int], mvcores_free: int, memory_free: int, gpu_type: str, shape) -> int:
    """F_n(m): the node's idle milli-GPU that a task of ``shape`` cannot use."""
    idle = sum(gpu_free)
    if shape.gpus == 0 and shape.gpu_milli == 0:
        return idle                       # a CPU-only task uses no GPU
    if shape.gpu_types and gpu_type not in shape.gpu_types:
        return idle
    need = GPU_MILLI if shape.gpus else shape.gpu_milli
    count = shape.gpus if shape.gpus else 1
    serving = [f for f in gpu_free if f >= need]
    if len(serving) < count or mvcores_free < shape.mvcores or memory_free < shape.memory_mb:
        return idle
    return sum(f for f in gpu_free if f < need)


def node_fragment(gpu_free, mvcores_free, memory_free, gpu_type, workload) -> float:
    """F_n = Σ_m p_m F_n(m)."""
    return sum(p * shape_fragment(gpu_free, mvcores_free, memory_free, gpu_type, shape) for shape, p in workload)


def placements(gpu_free: list[int], gpus: int, gpu_milli: int) -> list[tuple[int, list[int]]]:
    """Every way to give one task its GPUs on a node: (GPU index or -1, GPUs after)."""
    if gpu_milli:
        return [(g, [f - gpu_milli if i == g else f for i, f in enumerate(gpu_free)])
                for g, f in enumerate(gpu_free) if f >= gpu_milli]
    if not gpus:
        return [(-1, list(gpu_free))]
    whole = [i for i, f in enumerate(gpu_free) if f == GPU_MILLI]
    if len(whole) < gpus:
        return []
    taken = set(whole[:gpus])
    return [(-1, [0 if i in taken else f for i, f in enumerate(gpu_free)])]


def increases(gpu_free, mvcores_free, memory_free, gpu_type, workload, mvcores, memory_mb, gpus, gpu_milli):
    """[(ΔF_n, GPU)] for every placement of the ask on the node (empty: it does not fit)."""
    if mvcores_free < mvcores or memory_free < memory_mb:
        return []
    now = node_fragment(gpu_free, mvcores_free, memory_free, gpu_type, workload)
    return [(node_fragment(after, mvcores_free - mvcores, memory_free - memory_mb, gpu_type, workload) - now, g)
            for g, after in placements(gpu_free, gpus, gpu_milli)]
