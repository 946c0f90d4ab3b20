"""ResourceDescriptor: what a container asks for or a node has.

Memory in MB, vcores (fractional: the AM scales CPU requests by per-role ratios
such as 0.5), a GPU count and optionally the exact GPUs as a bitmask, or instead a
share of one GPU in milli-GPU (``gpu_milli``, 1-999: GPU sharing), and ports as a
count and/or explicit ranges.

Share rules: a share asks no whole GPU (``gpus`` is 0) and its mask names at most one
GPU — the one granted, in a booking. Shares do not add up into one value (two shares
may sit on two GPUs): a node's ledger keeps them per GPU
(:class:`~gangmaster.selectors.cluster.NodeColumns`).

Mask rules: when a mask is set the GPU count is the mask's popcount (a
mismatching pair is rejected at construction); a requested mask fits only when it
is a subset of the free mask; subtracting GPUs by count from a masked value is
not defined, because which GPUs would leave is unknown.
"""
from __future__ import annotations

import math
import sys
from dataclasses import field, replace
from typing import Any

from gangmaster.conf.limits import MAX_GPUS_PER_NODE
from gangmaster.gpu_topology.masks import popcount

from .fit import GPU_MILLI, Amounts, Demand, describe_ask, milli, shortfall
from .ports import NO_PORTS, PortRanges
from .values import value

__all__ = ["ResourceDescriptor", "ResourceError"]

#: The largest finite float: an amount above it is infinite, or an int too large for a float
#: (which ``math.isfinite`` refuses with OverflowError); either is left to :meth:`_reject_amounts`.
_LARGEST = sys.float_info.max


class ResourceError(ValueError):
    """A resource value that cannot exist (negative, inconsistent mask)."""


@value
class ResourceDescriptor:
    """A value: slotted, compared and hashed by its fields as a frozen dataclass is, and
    never changed once built — by convention, not by ``frozen``, whose ``__init__`` sets
    every field through ``object.__setattr__`` at about four times the cost (node reports,
    bookings and asks build these per job). Nobody assigns to one after building it."""

    memory_mb: int = 0
    vcores: float = 0.0
    gpus: int = 0
    gpu_mask: int = 0
    ports: int = 0
    port_ranges: PortRanges = field(default=NO_PORTS)
    gpu_milli: int = 0

    def __post_init__(self) -> None:
        try:
            amounts_ok = (0 <= self.memory_mb <= _LARGEST and 0 <= self.vcores <= _LARGEST
                          and 0 <= self.gpus <= _LARGEST and 0 <= self.gpu_mask <= _LARGEST
                          and 0 <= self.ports <= _LARGEST and 0 <= self.gpu_milli <= _LARGEST)
        except TypeError:   # not a number
            amounts_ok = False
        if not amounts_ok:   # (NaN fails every comparison: it lands here too)
            self._reject_amounts()
        if self.gpu_mask >> MAX_GPUS_PER_NODE:
            raise ResourceError(f"gpu_mask: names GPU(s) beyond the {MAX_GPUS_PER_NODE}-GPU limit of a node, "
                                f"got {self.gpu_mask:#x}")
        if self.gpu_milli:
            self._check_share()
        elif self.gpu_mask and popcount(self.gpu_mask) != self.gpus:
            if self.gpus == 0:
                self.gpus = popcount(self.gpu_mask)
            else:
                raise ResourceError(
                    f"gpus={self.gpus} disagrees with gpu_mask {self.gpu_mask:#x} "
                    f"({popcount(self.gpu_mask)} GPU(s))"
                )
        if self.port_ranges and self.ports and self.port_ranges.count != self.ports:
            raise ResourceError(
                f"ports={self.ports} disagrees with port_ranges {self.port_ranges} "
                f"({self.port_ranges.count} port(s))"
            )
        if self.port_ranges and not self.ports:
            self.ports = self.port_ranges.count

    def _reject_amounts(self) -> None:
        """Raise for the first amount that is negative, not finite or not a number (each
        checked on its own: the errors name it)."""
        for name in ("memory_mb", "vcores", "gpus", "gpu_mask", "ports", "gpu_milli"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ResourceError(f"{name}: expected a finite number >= 0, got {value}")

    def _check_share(self) -> None:
        if self.gpu_milli != int(self.gpu_milli) or self.gpu_milli >= GPU_MILLI:
            raise ResourceError(f"gpu_milli: expected a whole number of milli-GPU from 1 to {GPU_MILLI - 1} "
                                f"(a share of one GPU; ask whole GPUs with gpus), got {self.gpu_milli}")
        if self.gpus:
            raise ResourceError(f"gpu_milli={self.gpu_milli} and gpus={self.gpus}: a share of one GPU and whole "
                                f"GPUs cannot be asked together")
        if popcount(self.gpu_mask) > 1:
            raise ResourceError(f"gpu_milli={self.gpu_milli}: a share sits on one GPU, but gpu_mask "
                                f"{self.gpu_mask:#x} names {popcount(self.gpu_mask)}")

    @property
    def gpu_share(self) -> float:
        """The GPU this asks as a fraction of GPUs: whole GPUs, or the share (0.25 for 250 milli)."""
        return self.gpu_milli / GPU_MILLI if self.gpu_milli else float(self.gpus)

    @classmethod
    def exactly(cls, memory_mb: int, vcores: float, gpu_mask: int, port_ranges: PortRanges,
                gpu_milli: int = 0) -> "ResourceDescriptor":
        """What a node or a container holds, named exactly: its GPUs by mask and its ports
        by range (the counts follow from them). Only for values made of ones already
        checked (a node's columns, a booking): they are not checked again, which the RM's
        node reports need (thousands of nodes a heartbeat). Whatever comes from a file or
        the wire goes through the constructor's checks."""
        value = object.__new__(cls)
        value.memory_mb = memory_mb
        value.vcores = vcores
        value.gpus = 0 if gpu_milli else gpu_mask.bit_count()
        value.gpu_mask = gpu_mask
        value.ports = port_ranges.count
        value.port_ranges = port_ranges
        value.gpu_milli = gpu_milli
        return value

    def __str__(self) -> str:
        return describe_ask(self.memory_mb, self.vcores, self.gpus, self.gpu_mask, self.ports, self.port_ranges,
                            self.gpu_milli)

    def with_(self, **changes: Any) -> "ResourceDescriptor":
        return replace(self, **changes)

    def with_ports(self, ports: PortRanges) -> "ResourceDescriptor":
        """The same ask naming these exact ports (the count follows from them). Made of
        this value, already checked, and the ranges, whose count it takes: nothing to
        check again (as :meth:`exactly`); select() names the ports of every pick."""
        value = object.__new__(type(self))
        value.memory_mb, value.vcores, value.gpus, value.gpu_mask = self.memory_mb, self.vcores, self.gpus, self.gpu_mask
        value.ports, value.port_ranges, value.gpu_milli = ports.count, ports, self.gpu_milli
        return value

    def add(self, other: "ResourceDescriptor") -> "ResourceDescriptor":
        self._no_share_arithmetic(other, "add")
        if self.gpu_mask & other.gpu_mask:
            raise ResourceError(
                f"GPU masks overlap: {self.gpu_mask:#x} and {other.gpu_mask:#x} (a GPU counted twice)"
            )
        overlap = self.port_ranges.intersect(other.port_ranges)
        if overlap:
            raise ResourceError(f"port ranges overlap on {overlap}")
        mask = self.gpu_mask | other.gpu_mask
        ranges = self.port_ranges.add(other.port_ranges)
        return ResourceDescriptor(
            memory_mb=self.memory_mb + other.memory_mb,
            vcores=self.vcores + other.vcores,
            gpus=popcount(mask) if mask else self.gpus + other.gpus,
            gpu_mask=mask,
            ports=ranges.count if ranges else self.ports + other.ports,
            port_ranges=ranges,
            gpu_milli=self.gpu_milli or other.gpu_milli,
        )

    def _no_share_arithmetic(self, other: "ResourceDescriptor", verb: str) -> None:
        """A share plus anything with GPUs has no single value (which GPU holds what?):
        refused, rather than silently merged."""
        if (self.gpu_milli and (other.gpu_milli or other.gpus)) or (other.gpu_milli and (self.gpus or self.gpu_milli)):
            raise ResourceError(f"cannot {verb} {other} and {self}: shares of GPUs are kept per GPU by a node's "
                                f"ledger, not summed into one value")

    def subtract(self, other: "ResourceDescriptor") -> "ResourceDescriptor":
        self._no_share_arithmetic(other, "subtract")
        if not other.fits_in(self):
            raise ResourceError(f"cannot subtract {other} from {self}: it does not fit")
        if self.gpu_mask:
            if other.gpus and not other.gpu_mask:
                raise ResourceError("cannot subtract a GPU count from a masked resource: name the GPUs")
            mask = self.gpu_mask & ~other.gpu_mask
            gpus = popcount(mask)
        else:
            mask = 0
            gpus = self.gpus - other.gpus
        ranges = self.port_ranges.subtract(other.port_ranges)
        return ResourceDescriptor(
            memory_mb=self.memory_mb - other.memory_mb,
            vcores=self.vcores - other.vcores,
            gpus=gpus,
            gpu_mask=mask,
            ports=ranges.count if self.port_ranges else self.ports - other.ports,
            port_ranges=ranges,
            gpu_milli=self.gpu_milli,
        )

    def fits_in(self, free: "ResourceDescriptor") -> bool:
        """True when this request can be carved out of ``free`` (the fit model's scalar
        check; a mask or port ranges ``free`` does not name are compared by count)."""
        return shortfall(Demand.of(self), free.amounts()) is None

    def amounts(self) -> Amounts:
        """This value as the fit model's :class:`~gangmaster.selectors.fit.Amounts`."""
        return Amounts(self.memory_mb, milli(self.vcores), self.gpus, self.gpu_mask or None,
                       self.port_ranges or None, self.port_ranges.count if self.port_ranges else self.ports)
