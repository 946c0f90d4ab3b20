"""The RM's book of node capacity: what every node has, what is free, and the one
place where a container's memory, vcores, GPUs and ports are booked and returned.

The ledger is the RM's *truth*; the AM's :class:`~gangmaster.selectors.cluster.ClusterView`
is its *opinion* (with per-role bookkeeping for selection). Both are built on
:class:`~gangmaster.selectors.cluster.NodeColumns` — the same integer columns (vcores
in millis, so ``free + used == capacity`` holds exactly) and the same fit checks
(:mod:`~gangmaster.selectors.fit`) — so the RM and the AM cannot disagree on whether
a container fits. The scheduler asks "which nodes could hold this?" once per ask (a
vector scan over the columns) and then books containers one by one with the scalar
checks; booking refuses anything that does not fit, so a GPU, a port or a byte of
memory can never be handed out twice. The RM has no ``port_min``: a count of ports
takes the lowest free ones. A share of one GPU (``gpu_milli``) goes on the GPU the ask
names, else on the tightest fit (the GPU with the least milli free that takes it); the
per-GPU share ledger is :class:`NodeColumns`' own (free + used = 1000 per GPU).
"""
from __future__ import annotations

from dataclasses import field

import numpy as np

from gangmaster.protocol.reasons import Reason, other, reason
from gangmaster.protocol.reasons import ReasonCode as R
from gangmaster.protocol.rm_protocol import NodeState
from gangmaster.gpu_topology.masks import lowest_bits, popcount
from gangmaster.selectors.values import value
from gangmaster.selectors import explanation as why
from gangmaster.selectors import fit
from gangmaster.selectors.cluster import NodeColumns, NodeSpec
from gangmaster.selectors.fit import GPU_MILLI, Demand
from gangmaster.selectors.ports import NO_PORTS, PortError, PortRanges
from gangmaster.selectors.resources import ResourceDescriptor, ResourceError
from gangmaster.selectors.selector import tightest_gpu


class Refused(ResourceError):
    """A booking refused: ``reason`` says why (``str()`` renders it, as a ResourceError's message)."""

    def __init__(self, why: Reason):
        super().__init__(why)
        self.reason = why


@value
class Booking:
    """Exactly what one container holds on its node, with its :attr:`resource` (what the
    AM is told) and its :attr:`demand` (what the ledger books and gives back), made with
    it: a container is booked, reported and given back once each. An ask that named its
    GPUs and ports is booked as it was asked (:func:`exact_booking`): its resource is
    ``asked`` and its demand the ask's own, compiled when the ask came, and every
    container of the ask holds that one booking. A value, as the protocol's messages are
    (:data:`~gangmaster.selectors.values.value`): never changed once made."""

    memory_mb: int
    mvcores: int
    gpu_mask: int
    port_ranges: PortRanges
    #: a share of the one GPU ``gpu_mask`` names, in milli-GPU (0: the mask's GPUs whole)
    gpu_milli: int = 0
    asked: ResourceDescriptor | None = field(default=None, compare=False, repr=False)
    #: the ask's compiled demand when the booking is exactly it (``asked`` is set): not built again
    asked_demand: Demand | None = field(default=None, compare=False, repr=False)
    resource: ResourceDescriptor = field(init=False, compare=False, repr=False)
    demand: Demand = field(init=False, compare=False, repr=False)
    #: what holding it counts in its queue's usage: memory MB, milli-vcores, whole GPUs, milli-GPU
    #: of a share, and all its GPU in milli (whole ones at 1000 each); :attr:`returned` is each
    #: of them negated (what giving it back counts). A shared booking works them out once.
    held: tuple[int, int, int, int, int] = field(init=False, compare=False, repr=False)
    returned: tuple[int, int, int, int, int] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        resource, demand = self.asked, self.asked_demand
        whole = 0 if self.gpu_milli else popcount(self.gpu_mask)
        if resource is None:   # checked: a booking may come from a state file
            resource = ResourceDescriptor(self.memory_mb, self.mvcores / 1000.0, whole, self.gpu_mask,
                                          port_ranges=self.port_ranges, gpu_milli=self.gpu_milli)
        if demand is None:
            demand = Demand(self.memory_mb, self.mvcores, whole, self.gpu_mask, self.port_ranges.count,
                            self.port_ranges, self.gpu_milli)
        self.resource, self.demand = resource, demand
        held = self.held = (self.memory_mb, self.mvcores, whole, self.gpu_milli, whole * GPU_MILLI + self.gpu_milli)
        self.returned = tuple([-amount for amount in held])


class NodeLedger(NodeColumns):
    """The node columns, with each node's state (running, unhealthy, lost), racks and labels."""

    def __init__(self, specs: list[NodeSpec]):
        super().__init__(specs)
        rack_code: dict[str, int] = {}
        for s in self.specs:
            rack_code.setdefault(s.rack, len(rack_code))
        self.rack_names = list(rack_code)
        self.rack_index = rack_code
        self.rack_of = np.array([rack_code[s.rack] for s in self.specs], dtype=np.int32)
        labels = sorted({l for s in self.specs for l in s.labels})
        self.label_nodes = {l: np.array([l in s.labels for s in self.specs], dtype=bool) for l in labels}
        self.states = [NodeState.RUNNING] * len(self.specs)
        self.health_reports = [""] * len(self.specs)
        self.usable = np.ones(len(self.specs), dtype=bool)
        self._capacity_amounts: list = [None] * len(self.specs)

    # ------------------------------------------------------------- health
    def set_state(self, i: int, state: NodeState, report: str = "") -> None:
        self.states[i] = state
        self.health_reports[i] = report
        self.usable[i] = state.usable
        self._touched(i)

    # ------------------------------------------------------------- reading
    def label_scope(self, label: str | None) -> np.ndarray | None:
        """Bool column of the nodes with ``label``: None when no label is asked (every node),
        all False for a label no node has."""
        if not label:
            return None
        scope = self.label_nodes.get(label)
        return np.zeros(len(self.specs), dtype=bool) if scope is None else scope

    def capacity(self, i: int) -> ResourceDescriptor:
        return self.specs[i].capacity

    def unused(self, i: int) -> bool:
        """True when nothing of node ``i`` is booked: all of it is free."""
        return (self.memory_free.item(i) == self.memory_capacity.item(i)
                and self.mvcores_free.item(i) == self.mvcores_capacity.item(i)
                and self.gpu_free_mask.item(i) == self.gpu_capacity_mask.item(i)
                and self.ports_free[i].count == self.port_capacity[i].count)   # free ports are some of its ports

    def why_not_now(self, i: int, need: Demand) -> Reason | None:
        """None when ``need`` fits in node ``i``'s free resources now, else the reason."""
        if not self.usable[i]:
            return reason(R.HOST_NOT_USABLE, host=self.hosts[i], state=self.states[i].value)
        free = self.amounts(i)
        short = fit.shortfall(need, free)
        if short is None:
            return None
        host = self.hosts[i]
        if short == why.MEMORY:
            return reason(R.MEMORY_SHORT, host=host, free_mb=free.memory_mb, asked_mb=need.memory_mb)
        if short == why.VCORES:
            return reason(R.VCORES_SHORT, host=host, free=free.mvcores / 1000, asked=need.mvcores / 1000)
        if short == why.GPU_SHARE:
            return self._share_shortfall(i, need)
        if short in (why.GPUS, why.GPU_MASK):
            if need.gpu_mask:  # name the GPUs that are taken (a short count follows from them)
                return reason(R.GPUS_TAKEN, host=host, taken=need.gpu_mask & ~free.gpu_mask, mask=need.gpu_mask)
            return reason(R.GPUS_SHORT, host=host, free=free.gpus, asked=need.gpus)
        if need.port_ranges:
            return reason(R.PORTS_TAKEN, host=host, ports=str(need.port_ranges.subtract(free.port_ranges)))
        return reason(R.PORTS_SHORT, host=host, free=free.port_count, asked=need.ports)

    def why_never(self, i: int, need: Demand) -> Reason | None:
        """None when ``need`` fits in node ``i``'s capacity (when empty), else the reason.
        A node's capacity never changes: its amounts are read from the columns once."""
        capacity = self._capacity_amounts[i]
        if capacity is None:
            capacity = self._capacity_amounts[i] = self.amounts(i, empty=True)
        short = fit.shortfall(need, capacity)
        if short is None:
            return None
        host = self.hosts[i]
        if short == why.MEMORY:
            return reason(R.MEMORY_NEVER, host=host, has=capacity.memory_mb, asked=need.memory_mb)
        if short == why.VCORES:
            return reason(R.VCORES_NEVER, host=host, has=capacity.mvcores / 1000, asked=need.mvcores / 1000)
        if short == why.GPUS:
            return reason(R.GPUS_NEVER, host=host, has=capacity.gpus, asked=need.gpus)
        if short == why.GPU_SHARE:
            if need.gpu_mask:
                return reason(R.SHARED_GPU_NEVER, host=host, has=capacity.gpus, gpu=need.gpu_mask.bit_length() - 1,
                              milli=need.gpu_milli)
            return reason(R.NO_GPU_TO_SHARE, host=host, has=capacity.gpus, milli=need.gpu_milli)
        if short == why.GPU_MASK:
            return reason(R.GPU_MASK_NEVER, host=host, has=capacity.gpus, mask=need.gpu_mask)
        if need.port_ranges:
            return reason(R.PORTS_NEVER, host=host, has=str(capacity.port_ranges), asked=str(need.port_ranges))
        return reason(R.PORT_COUNT_NEVER, host=host, has=capacity.port_count, asked=need.ports)

    def _share_shortfall(self, i: int, need: Demand) -> Reason:
        """Why a share does not fit node ``i`` now: the GPU it names, or the most any GPU has."""
        milli_free = self.gpu_milli_free_rows([i])[0]
        host = self.hosts[i]
        if need.gpu_mask:
            gpu = need.gpu_mask.bit_length() - 1
            if gpu >= self.gpu_capacity.item(i):
                return reason(R.SHARED_GPU_ABSENT, host=host, gpu=gpu, gpus=self.gpu_capacity.item(i),
                              milli=need.gpu_milli)
            return reason(R.GPU_SHARE_SHORT, host=host, gpu=gpu, free=int(milli_free[gpu]), milli=need.gpu_milli)
        return reason(R.NO_GPU_WITH_SHARE, host=host, milli=need.gpu_milli, most=int(milli_free.max()))

    def gpu_milli_free_of(self, i: int) -> tuple[int, ...]:
        """Node ``i``'s milli-GPU free per GPU it has: :meth:`gpu_milli_free_rows` of one node
        (1000 for a wholly free GPU, what shares leave on a shared one, 0 for one taken
        whole), worked out in plain Python: the RM asks for one node at a time (a node
        report), where numpy's ten calls on one row cost several times as much."""
        free_mask = self.gpu_free_mask.item(i)
        used = self.gpu_share_used[i].tolist()[:self.gpu_capacity.item(i)]
        return tuple([GPU_MILLI if free_mask >> k & 1 else (GPU_MILLI - u if u > 0 else 0)
                      for k, u in enumerate(used)])

    def nodes_by_capacity(self, need: Demand, scope: np.ndarray | None) -> np.ndarray:
        """Bool column: nodes whose capacity could ever hold ``need`` (within ``scope``)."""
        ok = fit.fits(self, need, empty=True)
        return ok if scope is None else ok & scope

    def candidates(self, need: Demand, scope: np.ndarray | None) -> np.ndarray:
        """Indices of usable nodes (within ``scope``) where ``need`` fits now."""
        ok = fit.fits(self, need) & self.usable
        if scope is not None:
            ok &= scope
        return np.flatnonzero(ok)

    # ------------------------------------------------------------- booking
    def book(self, i: int, need: Demand, exact: Booking | None = None) -> Booking:
        """Take ``need`` from node ``i``: the GPUs named by the mask or the lowest free
        ones; the ports named or the lowest free ones. ``exact``: the booking of ``need``
        on any node, when it names exactly what it takes (:func:`exact_booking`; the RM
        works it out once per ask), booked as it is. Raises, naming what is short as
        :meth:`why_not_now` does, if it does not fit. The fit is checked once, by the
        booking itself (the scheduler books without asking first); the reason is worked
        out only on a refusal."""
        if not self.usable.item(i):
            raise Refused(self.why_not_now(i, need))
        try:
            if exact is not None:   # (as take does)
                self._book(i, exact.demand)
                return exact
            if need.gpu_milli:
                mask = need.gpu_mask or self._tightest_gpu(i, need.gpu_milli)
            else:
                mask = need.gpu_mask or (lowest_bits(self.gpu_free_mask.item(i), need.gpus) if need.gpus else 0)
                if popcount(mask) != need.gpus:   # lowest_bits answers 0 when too few are free
                    raise ResourceError(f"{need.gpus} GPU(s) asked")
            if need.port_ranges:
                ports = need.port_ranges
            elif need.ports:
                ports = self.ports_free[i].take_sequential(need.ports)
            else:
                ports = NO_PORTS
            return self.take(i, Booking(need.memory_mb, need.mvcores, mask, ports, need.gpu_milli))
        except (ResourceError, PortError) as exc:
            raise Refused(self.why_not_now(i, need) or other(str(exc))) from None

    def _tightest_gpu(self, i: int, need: int) -> int:
        """The GPU a share that names none gets on node ``i`` (as a mask): the one with the
        least milli free that still takes it, so whole GPUs stay whole for whole-GPU asks (the
        AM's default choice, :func:`~gangmaster.selectors.selector.tightest_gpu`)."""
        try:
            return 1 << tightest_gpu(self.gpu_milli_free_rows([i])[0][:self.gpu_capacity.item(i)], need)
        except ValueError as exc:
            raise ResourceError(str(exc)) from None

    def take(self, i: int, b: Booking) -> Booking:
        """Book an exact :class:`Booking` (also used to rebuild state after a restart)."""
        self._book(i, b.demand)
        return b

    def give_back(self, i: int, b: Booking) -> None:
        self._unbook(i, b.demand)


def exact_booking(asked: ResourceDescriptor, need: Demand) -> Booking | None:
    """The booking ``need`` (``asked`` compiled) makes on whichever node takes it, when
    ``asked`` names exactly what it holds: its GPUs by mask (or none, and no share of one
    it does not name), its ports by range (or none), its vcores in whole millis. Then
    :meth:`NodeLedger.book` books it as it is, and every container of the ask shares it
    (a value): its resource is ``asked`` itself. None when the node decides (the lowest
    free GPUs or ports, the tightest GPU for a share): a booking is made per container."""
    gpus_named = need.gpu_mask if need.gpu_milli else (
        popcount(need.gpu_mask) == need.gpus if need.gpu_mask else not need.gpus)
    ports = need.port_ranges if need.port_ranges else (None if need.ports else NO_PORTS)
    if not (gpus_named and ports is not None and asked.gpu_mask == need.gpu_mask
            and (asked.port_ranges is ports or asked.port_ranges == ports)
            and asked.memory_mb == need.memory_mb and asked.vcores == need.mvcores / 1000.0
            and asked.gpus == need.gpus and asked.ports == need.ports):
        return None
    return Booking(need.memory_mb, need.mvcores, need.gpu_mask, ports, need.gpu_milli, asked, need)
