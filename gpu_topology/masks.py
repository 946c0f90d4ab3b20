"""GPU bitmasks: bit i set means GPU i of the node.

qizhi calls this the ``gpuAttribute``. Every conversion between masks and GPU
indices lives here and nowhere else, so the rest of the code never does bit
arithmetic by hand.
"""
from __future__ import annotations

from typing import Iterable

from gangmaster.conf.limits import MAX_GPUS_PER_NODE   # masks are 64-bit integers



class MaskError(ValueError):
    """A GPU mask or index list that does not describe GPUs of the node."""


def mask_from_indices(indices: Iterable[int]) -> int:
    """``[0, 2, 5]`` → ``0b100101``. Repeated or negative indices are errors."""
    mask = 0
    for index in indices:
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise MaskError(f"GPU index must be an integer >= 0, got {index!r}")
        if index >= MAX_GPUS_PER_NODE:
            raise MaskError(f"GPU index {index} is beyond the {MAX_GPUS_PER_NODE}-GPU limit")
        bit = 1 << index
        if mask & bit:
            raise MaskError(f"GPU index {index} is listed twice")
        mask |= bit
    return mask


def indices_of(mask: int) -> list[int]:
    """``0b100101`` → ``[0, 2, 5]`` (ascending)."""
    if mask < 0:
        raise MaskError(f"GPU mask must be >= 0, got {mask}")
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def popcount(mask: int) -> int:
    """Number of GPUs in the mask."""
    return int(mask).bit_count()


def full_mask(gpu_count: int) -> int:
    """The mask of every GPU of a node with ``gpu_count`` GPUs."""
    if not 0 <= gpu_count <= MAX_GPUS_PER_NODE:
        raise MaskError(f"GPU count must be within 0..{MAX_GPUS_PER_NODE}, got {gpu_count}")
    return (1 << gpu_count) - 1


def validate_mask(mask: int, gpu_count: int) -> int:
    """Return ``mask`` if it names only GPUs a node with ``gpu_count`` GPUs has."""
    if not isinstance(mask, int) or isinstance(mask, bool) or mask < 0:
        raise MaskError(f"GPU mask must be an integer >= 0, got {mask!r}")
    extra = mask & ~full_mask(gpu_count)
    if extra:
        raise MaskError(
            f"GPU mask {mask:#x} names GPU(s) {indices_of(extra)} but the node has {gpu_count} GPU(s)"
        )
    return mask


def is_subset(mask: int, of: int) -> bool:
    """True when every GPU in ``mask`` is also in ``of``."""
    return mask & ~of == 0


def lowest_bits(free_mask: int, count: int) -> int:
    """The ``count`` lowest set bits of ``free_mask`` (qizhi's GPU choice); 0 when short."""
    chosen = 0
    remaining = free_mask
    for _ in range(count):
        if not remaining:
            return 0
        low = remaining & -remaining
        chosen |= low
        remaining ^= low
    return chosen


def format_mask(mask: int) -> str:
    """Human form used in explanations: ``0x25 [0,2,5]``."""
    return f"{mask:#x} [{','.join(map(str, indices_of(mask)))}]"
