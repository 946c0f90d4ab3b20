"""The RM's book of node capacity: what every node has, what is free, and the one
place where a container's memory, vcores, GPUs and ports are booked and returned.

Why not the AM's :class:`~gangmaster.selectors.cluster.ClusterView`? The view is
the AM's *opinion* of the cluster (with per-role bookkeeping for selection); the
ledger is the RM's *truth*, and its hot path is different: the scheduler asks
"which nodes could hold this?" once per ask (a vector scan over numpy columns)
and then books containers one by one with scalar checks. vcores are kept in
integer milli-vcores so ``free + used == capacity`` holds exactly, and booking
refuses anything that does not fit, so a GPU, a port or a byte of memory can
never be handed out twice.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gangmaster.am.rm_protocol import NodeState
from gangmaster.gpu_topology.masks import full_mask, is_subset, lowest_bits, popcount
from gangmaster.selectors.cluster import NodeSpec
from gangmaster.selectors.ports import NO_PORTS, PortError, PortRanges
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError, milli


@dataclass(frozen=True)
class Need:
    """A resource compiled for the scheduler's hot path (integers only)."""

    memory_mb: int
    mvcores: int
    gpus: int
    gpu_mask: int
    ports: int
    port_ranges: PortRanges

    @classmethod
    def of(cls, r: ResourceDescriptor) -> "Need":
        return cls(r.memory_mb, milli(r.vcores), r.gpus, r.gpu_mask, r.ports, r.port_ranges)


@dataclass(frozen=True)
class Booking:
    """Exactly what one container holds on its node."""

    memory_mb: int
    mvcores: int
    gpu_mask: int
    port_ranges: PortRanges

    @property
    def resource(self) -> ResourceDescriptor:
        return ResourceDescriptor(self.memory_mb, self.mvcores / 1000.0, popcount(self.gpu_mask),
                                  self.gpu_mask, port_ranges=self.port_ranges)


class NodeLedger:
    """Columns of capacity and free resources, one row per node."""

    def __init__(self, specs: list[NodeSpec]):
        self.specs = list(specs)
        self.hosts = [s.host for s in self.specs]
        self.host_index = {h: i for i, h in enumerate(self.hosts)}
        if len(self.host_index) != len(self.hosts):
            raise ValueError("a host is declared twice in the cluster")
        self.rack_names: list[str] = []
        rack_code: dict[str, int] = {}
        for s in self.specs:
            rack_code.setdefault(s.rack, len(rack_code))
        self.rack_names = list(rack_code)
        self.rack_index = rack_code
        self.rack_of = np.array([rack_code[s.rack] for s in self.specs], dtype=np.int32)
        labels = sorted({l for s in self.specs for l in s.labels})
        self.label_nodes = {l: np.array([l in s.labels for s in self.specs], dtype=bool) for l in labels}
        self.cap_mem = np.array([s.memory_mb for s in self.specs], dtype=np.int64)
        self.cap_mvc = np.array([milli(s.vcores) for s in self.specs], dtype=np.int64)
        self.cap_gpus = np.array([s.gpus for s in self.specs], dtype=np.int64)
        self.cap_mask = [full_mask(s.gpus) for s in self.specs]
        self.cap_ports = [s.ports for s in self.specs]
        self.free_mem = self.cap_mem.copy()
        self.free_mvc = self.cap_mvc.copy()
        self.free_gpus = self.cap_gpus.copy()
        self.free_mask = list(self.cap_mask)
        self.free_ports = list(self.cap_ports)
        self.states = [NodeState.RUNNING] * len(self.specs)
        self.health_reports = [""] * len(self.specs)
        self.usable = np.ones(len(self.specs), dtype=bool)

    def __len__(self) -> int:
        return len(self.hosts)

    # ------------------------------------------------------------- health
    def set_state(self, i: int, state: NodeState, report: str = "") -> None:
        self.states[i] = state
        self.health_reports[i] = report
        self.usable[i] = state.usable

    # ------------------------------------------------------------- reading
    def free(self, i: int) -> ResourceDescriptor:
        mask = self.free_mask[i]
        return ResourceDescriptor(int(self.free_mem[i]), int(self.free_mvc[i]) / 1000.0,
                                  popcount(mask), mask, port_ranges=self.free_ports[i])

    def used(self, i: int) -> ResourceDescriptor:
        mask = self.cap_mask[i] & ~self.free_mask[i]
        return ResourceDescriptor(int(self.cap_mem[i] - self.free_mem[i]),
                                  int(self.cap_mvc[i] - self.free_mvc[i]) / 1000.0,
                                  popcount(mask), mask,
                                  port_ranges=self.cap_ports[i].subtract(self.free_ports[i]))

    def capacity(self, i: int) -> ResourceDescriptor:
        return self.specs[i].capacity

    def why_not_now(self, i: int, need: Need) -> str | None:
        """None when ``need`` fits in node ``i``'s free resources now, else the reason."""
        host = self.hosts[i]
        if not self.usable[i]:
            return f"host {host} is {self.states[i].value}"
        if need.memory_mb > self.free_mem[i]:
            return f"host {host}: memory free {int(self.free_mem[i])}MB < {need.memory_mb}MB asked"
        if need.mvcores > self.free_mvc[i]:
            return f"host {host}: vcores free {int(self.free_mvc[i]) / 1000:g} < {need.mvcores / 1000:g} asked"
        free_mask = self.free_mask[i]
        if need.gpu_mask:
            if not is_subset(need.gpu_mask, free_mask):
                return f"host {host}: GPUs {need.gpu_mask & ~free_mask:#x} of mask {need.gpu_mask:#x} are taken"
        elif need.gpus > popcount(free_mask):
            return f"host {host}: GPUs free {popcount(free_mask)} < {need.gpus} asked"
        if need.port_ranges:
            if not need.port_ranges.fits_in(self.free_ports[i]):
                return f"host {host}: ports {need.port_ranges.subtract(self.free_ports[i])} are taken"
        elif need.ports > self.free_ports[i].count:
            return f"host {host}: ports free {self.free_ports[i].count} < {need.ports} asked"
        return None

    def why_never(self, i: int, need: Need) -> str | None:
        """None when ``need`` fits in node ``i``'s capacity (when empty), else the reason."""
        host = self.hosts[i]
        if need.memory_mb > self.cap_mem[i]:
            return f"host {host} has {int(self.cap_mem[i])}MB memory, {need.memory_mb}MB asked"
        if need.mvcores > self.cap_mvc[i]:
            return f"host {host} has {int(self.cap_mvc[i]) / 1000:g} vcores, {need.mvcores / 1000:g} asked"
        if need.gpus > self.cap_gpus[i]:
            return f"host {host} has {int(self.cap_gpus[i])} GPU(s), {need.gpus} asked"
        if need.gpu_mask and not is_subset(need.gpu_mask, self.cap_mask[i]):
            return f"host {host} has {int(self.cap_gpus[i])} GPU(s); mask {need.gpu_mask:#x} names others"
        if need.port_ranges and not need.port_ranges.fits_in(self.cap_ports[i]):
            return f"host {host} has ports {self.cap_ports[i]}; {need.port_ranges} asked"
        if need.ports > self.cap_ports[i].count:
            return f"host {host} has {self.cap_ports[i].count} port(s), {need.ports} asked"
        return None

    def nodes_by_capacity(self, need: Need, scope: np.ndarray | None) -> np.ndarray:
        """Bool column: nodes whose capacity could ever hold ``need`` (within ``scope``)."""
        ok = (self.cap_mem >= need.memory_mb) & (self.cap_mvc >= need.mvcores) & (self.cap_gpus >= need.gpus)
        return ok if scope is None else ok & scope

    def candidates(self, need: Need, scope: np.ndarray | None) -> np.ndarray:
        """Indices of usable nodes (within ``scope``) whose free memory, vcores and GPU
        count cover ``need``; masks and ports are checked per node when booking."""
        ok = (self.free_mem >= need.memory_mb) & (self.free_mvc >= need.mvcores) & self.usable
        if need.gpus:
            ok &= self.free_gpus >= need.gpus
        if scope is not None:
            ok &= scope
        return np.flatnonzero(ok)

    # ------------------------------------------------------------- booking
    def book(self, i: int, need: Need) -> Booking:
        """Take ``need`` from node ``i``: the GPUs named by the mask or the lowest free
        ones; the ports named or the lowest free ones. Raises if it does not fit."""
        reason = self.why_not_now(i, need)
        if reason:
            raise ResourceError(reason)
        mask = need.gpu_mask or (lowest_bits(self.free_mask[i], need.gpus) if need.gpus else 0)
        if need.port_ranges:
            ports = need.port_ranges
        elif need.ports:
            try:
                ports = self.free_ports[i].take_sequential(need.ports)
            except PortError as exc:  # unreachable after why_not_now, kept for safety
                raise ResourceError(str(exc)) from None
        else:
            ports = NO_PORTS
        return self.take(i, Booking(need.memory_mb, need.mvcores, mask, ports))

    def take(self, i: int, b: Booking) -> Booking:
        """Book an exact :class:`Booking` (also used to rebuild state after a restart)."""
        if (b.memory_mb > self.free_mem[i] or b.mvcores > self.free_mvc[i]
                or not is_subset(b.gpu_mask, self.free_mask[i])
                or (b.port_ranges and not b.port_ranges.fits_in(self.free_ports[i]))):
            raise ResourceError(f"host {self.hosts[i]}: booking {b.resource} does not fit in free {self.free(i)}")
        self.free_mem[i] -= b.memory_mb
        self.free_mvc[i] -= b.mvcores
        if b.gpu_mask:
            self.free_mask[i] &= ~b.gpu_mask
            self.free_gpus[i] -= popcount(b.gpu_mask)
        if b.port_ranges:
            self.free_ports[i] = self.free_ports[i].subtract(b.port_ranges)
        return b

    def give_back(self, i: int, b: Booking) -> None:
        if (self.free_mem[i] + b.memory_mb > self.cap_mem[i] or self.free_mvc[i] + b.mvcores > self.cap_mvc[i]
                or self.free_mask[i] & b.gpu_mask
                or (b.port_ranges and b.port_ranges.intersect(self.free_ports[i]))):
            raise ResourceError(f"host {self.hosts[i]}: returning {b.resource} that is not in use")
        self.free_mem[i] += b.memory_mb
        self.free_mvc[i] += b.mvcores
        if b.gpu_mask:
            self.free_mask[i] |= b.gpu_mask
            self.free_gpus[i] += popcount(b.gpu_mask)
        if b.port_ranges:
            self.free_ports[i] = self.free_ports[i].add(b.port_ranges)
