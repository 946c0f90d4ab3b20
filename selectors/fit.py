"""The fit model: whether one instance's ask fits on a node, how many fit, and if not, why.

Every "does it fit" in the project is answered here — by the filter chain of
select(), the gang placer, :class:`~gangmaster.selectors.cluster.ClusterView`'s
bookings, :meth:`ResourceDescriptor.fits_in` and the RM's ledger — so they cannot
disagree. The model counts in integers: memory in MB, vcores in millis (so
fractional asks add up and come back exactly), GPUs as a count and optionally the
exact GPUs as a mask, a share of one GPU in milli-GPU (``gpu_milli``: GPU sharing), and
ports as a count or as explicit ranges.

A share fits a node when one of its GPUs has that many milli free (a GPU that holds a
share is no longer wholly free, so whole-GPU asks never land on it); a share naming its
GPU (a booking) needs that GPU to have them free.

``port_min`` is applied here, once: a count of ports is served only by free ports
``>= port_min`` (the ports the port chooser may hand out), so a node whose free ports
all sit below it does not fit, with reason ``ports``. Explicit port ranges (reused
ports) must simply be free.

A demand is checked dimension by dimension, in a fixed order (memory, vcores, GPUs,
GPU share, GPU mask, ports); the first dimension that is short is the reason, a code from
:mod:`~gangmaster.selectors.explanation`. Each check has a vector form over the
node columns (:func:`fits`, :func:`room`: numpy expressions, fast at 100k nodes,
touching only ``rows`` when given) and a scalar form over one node's amounts
(:func:`shortfall`, for the RM's per-container booking and for descriptors)::

    demand = Demand.of(ResourceDescriptor(memory_mb=4096, vcores=0.5, gpus=1, ports=2))
    ok = fits(view, demand, port_min=20000)            # bool per node
    n = room(view, demand, port_min=20000, rows=nodes)  # instances that fit, per node in ``nodes``
    shortfall(demand, view.amounts(i), port_min=20000)  # None, or the reason code

``view`` is anything with the node columns of
:class:`~gangmaster.selectors.cluster.NodeColumns` (the AM's view, the RM's ledger).
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Callable, NamedTuple

from .values import value

import numpy as np

from . import explanation as why
from .ports import NO_PORTS, PORT_MIN, PortRanges

if TYPE_CHECKING:  # fit.py sits below resources.py and cluster.py: type names only
    from .cluster import NodeColumns
    from .resources import ResourceDescriptor

#: :func:`room` of a demand that asks for nothing a node can run out of.
UNBOUNDED = np.iinfo(np.int64).max

#: One whole GPU in milli-GPU: a share (``gpu_milli``) is 1 to GPU_MILLI − 1 of it.
GPU_MILLI = 1000


@lru_cache(maxsize=4096)
def milli(vcores: float) -> int:
    """vcores in integer millis: the unit every fit check and booking counts in, so that
    fractional asks (cpu x 0.7) add up and come back exactly. Remembered per value (a
    cluster's free vcores take few values; a node report's are converted at every update)."""
    return int(round(vcores * 1000))


def describe_ask(memory_mb: int, vcores: float, gpus: int, gpu_mask: int, ports: int,
                 port_ranges: PortRanges, gpu_milli: int = 0) -> str:
    """``memory=4096MB vcores=0.5 gpus=1 ports=2``: an ask as messages show it, the same
    for a :class:`Demand` and a ``ResourceDescriptor`` (the mask, share and ports only
    when set; a share shows its GPU when named: ``gpu_milli=250@gpu3``)."""
    parts = [f"memory={memory_mb}MB", f"vcores={vcores:g}"]
    if gpu_milli:
        parts.append(f"gpu_milli={gpu_milli}" + (f"@gpu{gpu_mask.bit_length() - 1}" if gpu_mask else ""))
    else:
        parts.append(f"gpus={gpus}")
        if gpu_mask:
            parts.append(f"gpu_mask={gpu_mask:#x}")
    if ports:
        parts.append(f"ports={ports}" + (f" [{port_ranges}]" if port_ranges else ""))
    return " ".join(parts)


@value
class Demand:
    """One instance's ask in integer units (the hot path's form of a ResourceDescriptor).
    A value, as a descriptor is: slotted, compared and hashed by its fields, never changed
    once built (by convention, not by ``frozen``, whose ``__init__`` costs four times as much).

    ``gpus`` is the mask's popcount when a mask is set, unless the demand is a share
    (``gpu_milli`` > 0: ``gpus`` is 0 and the mask names at most the one GPU shared);
    ``ports`` is the ranges' count when ranges are set (a descriptor guarantees all this)."""

    memory_mb: int
    mvcores: int
    gpus: int
    gpu_mask: int
    ports: int
    port_ranges: PortRanges = NO_PORTS
    gpu_milli: int = 0

    @classmethod
    def of(cls, resource: "ResourceDescriptor") -> "Demand":
        return cls(resource.memory_mb, milli(resource.vcores), resource.gpus, resource.gpu_mask,
                   resource.ports, resource.port_ranges, resource.gpu_milli)

    def __str__(self) -> str:
        return describe_ask(self.memory_mb, self.mvcores / 1000, self.gpus, self.gpu_mask, self.ports,
                            self.port_ranges, self.gpu_milli)

    def checks(self, port_min: int = PORT_MIN) -> tuple["Check", ...]:
        """The checks this demand needs, in the order reasons are given (dimensions it
        does not ask for are left out)."""
        return _checks(self, port_min)


class Amounts(NamedTuple):
    """What one node has (free, or its capacity), in the model's units, for the scalar
    checks. ``gpu_mask`` / ``port_ranges`` are None where only counts are known (a
    descriptor without a mask or ranges): then only counts are compared.
    ``gpu_milli_free`` is each GPU's milli free, by GPU index (None where unknown: then
    a share is served only by a wholly free GPU)."""

    memory_mb: int
    mvcores: int
    gpus: int
    gpu_mask: int | None
    port_ranges: PortRanges | None
    port_count: int
    gpu_milli_free: tuple[int, ...] | None = None

    def ports_at_or_above(self, port_min: int) -> int:
        if self.port_ranges is None or port_min <= PORT_MIN:
            return self.port_count
        return self.port_ranges.count_at_or_above(port_min)


# ------------------------------------------------------------------ the checks
class Check:
    """One dimension of a demand: a reason code, and the comparison over node columns —
    whether one instance fits (:meth:`meets`) and how many do (:meth:`room`). The
    scalar form over one node's :class:`Amounts` is :func:`shortfall`."""

    reason = ""
    #: Checks of one group are compared on capacity together, then on what is free
    #: (explanations blame "too small" in any of them before "full" in any).
    group = ""
    #: Whether a node whose capacity is too small is reported ``filtered`` (never fits)
    #: by the filter chain; ports have always been reported ``exhausted``.
    filtered_when_too_small = True
    #: Whether :meth:`meets` is a numpy expression (else a loop over the rows asked).
    vectorised = True
    #: What explanations show: the ask, in the unit shown (vcores, not millis).
    requested: object = None
    unit = 1

    def meets(self, view: "NodeColumns", rows, empty: bool = False) -> np.ndarray:
        """Bool per row: this dimension fits (in the node's capacity when ``empty``)."""
        raise NotImplementedError

    def short(self, view: "NodeColumns", rows, empty: bool = False) -> np.ndarray:
        """Bool per row: ``~meets`` (the vector checks compare directly, saving the
        inversion on select()'s hot path)."""
        return ~self.meets(view, rows, empty)

    def room(self, view: "NodeColumns", rows, empty: bool = False) -> np.ndarray:
        """int64 per row: how many instances this dimension alone lets in."""
        raise NotImplementedError

    def shown_column(self, view: "NodeColumns", empty: bool) -> np.ndarray | None:
        """The column explanations take "most free" (or, ``empty``, "capacity at most")
        from, in the model's units; None: this dimension shows no number."""
        return None


def _take(column, rows):
    return column if rows is None else column[rows]


class _AtLeast(Check):
    """Enough of an integer column: ``need`` per instance of what :meth:`shown_column`
    gives (the free amount, or the capacity when ``empty``)."""

    need = 1

    def meets(self, view, rows, empty=False):
        return _take(self.shown_column(view, empty), rows) >= self.need

    def short(self, view, rows, empty=False):
        return _take(self.shown_column(view, empty), rows) < self.need

    def room(self, view, rows, empty=False):
        return _take(self.shown_column(view, empty), rows) // self.need


class _Amount(_AtLeast):
    """Memory, vcores (in millis) or a GPU count: enough of an integer amount."""

    group = "amount"

    def __init__(self, reason: str, need: int, free: str, capacity: str, unit: int):
        self.reason, self.need, self.unit = reason, need, unit
        self.free, self.capacity = free, capacity  # column names
        self.requested = need if unit == 1 else need / unit

    def shown_column(self, view, empty):
        return getattr(view, self.capacity if empty else self.free)


class _GpuMask(Check):
    """These exact GPUs (the count is checked by the GPU amount before)."""

    reason = why.GPU_MASK
    group = why.GPU_MASK

    def __init__(self, mask: int):
        self.mask = mask
        self.mask64 = np.uint64(mask)
        self.requested = f"{mask:#x}"

    def meets(self, view, rows, empty=False):
        column = view.gpu_capacity_mask if empty else view.gpu_free_mask
        return (_take(column, rows) & self.mask64) == self.mask64

    def short(self, view, rows, empty=False):
        column = view.gpu_capacity_mask if empty else view.gpu_free_mask
        return (_take(column, rows) & self.mask64) != self.mask64

    def room(self, view, rows, empty=False):
        return self.meets(view, rows, empty).astype(np.int64)  # the same GPUs cannot go twice


class _GpuShare(_AtLeast):
    """A share of one GPU: some GPU of the node with ``need`` milli free. On an empty
    node every GPU has 1000 free, so a node with a GPU is never too small for a share."""

    reason = why.GPU_SHARE
    group = "amount"

    def __init__(self, need: int):
        self.need = self.requested = need

    def shown_column(self, view, empty):
        return view.gpu_share_capacity if empty else view.gpu_share_max_free

    def room(self, view, rows, empty=False):
        if empty:
            return _take(view.gpu_capacity, rows) * (GPU_MILLI // self.need)
        return (view.gpu_milli_free_rows(rows) // self.need).sum(axis=1)


class _GpuShareOn(Check):
    """A share of one named GPU (a booking, or an ask pinned to a GPU): that GPU has
    ``need`` milli free (in the node's capacity when ``empty``: the GPU exists)."""

    reason = why.GPU_SHARE
    group = "amount"

    def __init__(self, gpu: int, need: int):
        self.gpu, self.need = gpu, need
        self.requested = need

    def meets(self, view, rows, empty=False):
        if empty:
            return _take(view.gpu_capacity, rows) > self.gpu
        return view.gpu_milli_free_rows(rows, self.gpu) >= self.need

    def room(self, view, rows, empty=False):
        # shares stack on the GPU named: as many as its milli free hold
        if empty:
            return (_take(view.gpu_capacity, rows) > self.gpu).astype(np.int64) * (GPU_MILLI // self.need)
        return (view.gpu_milli_free_rows(rows, self.gpu) // self.need).astype(np.int64)

    def shown_column(self, view, empty):
        return view.gpu_share_capacity if empty else view.gpu_share_max_free


class _PortCount(_AtLeast):
    """A count of ports, served only by free ports ``>= port_min``."""

    reason = why.PORTS
    group = why.PORTS
    filtered_when_too_small = False

    def __init__(self, count: int, port_min: int):
        self.need, self.port_min = count, port_min
        self.requested = count

    def shown_column(self, view, empty):
        return (view.ports_capacity_at_or_above if empty else view.ports_free_at_or_above)(self.port_min)


class _PortRangesFree(Check):
    """These exact ports (reused ports): all of them free, whatever ``port_min``."""

    reason = why.PORTS
    group = why.PORTS
    filtered_when_too_small = False
    vectorised = False

    def __init__(self, ranges: PortRanges):
        self.ranges = ranges
        self.requested = str(ranges)

    def meets(self, view, rows, empty=False):
        ports = view.port_capacity if empty else view.ports_free
        nodes = range(len(view)) if rows is None else rows
        return np.fromiter((self.ranges.fits_in(ports[int(i)]) for i in nodes), dtype=bool, count=len(nodes))

    def room(self, view, rows, empty=False):
        return self.meets(view, rows, empty).astype(np.int64)  # the same ports cannot go twice


@lru_cache(maxsize=4096)
def _checks(demand: Demand, port_min: int) -> tuple[Check, ...]:
    """Built once per (demand, port_min): a role asks the same thing again and again."""
    found: list[Check] = []
    if demand.memory_mb:
        found.append(_Amount(why.MEMORY, demand.memory_mb, "memory_free", "memory_capacity", 1))
    if demand.mvcores:
        found.append(_Amount(why.VCORES, demand.mvcores, "mvcores_free", "mvcores_capacity", 1000))
    if demand.gpus:
        found.append(_Amount(why.GPUS, demand.gpus, "gpus_free", "gpu_capacity", 1))
    if demand.gpu_milli:
        found.append(_GpuShareOn(demand.gpu_mask.bit_length() - 1, demand.gpu_milli) if demand.gpu_mask
                     else _GpuShare(demand.gpu_milli))
    elif demand.gpu_mask:
        found.append(_GpuMask(demand.gpu_mask))
    if demand.port_ranges:
        found.append(_PortRangesFree(demand.port_ranges))
    elif demand.ports:
        found.append(_PortCount(demand.ports, port_min))
    return tuple(found)


# ------------------------------------------------------------------ the answers
def fits(view: "NodeColumns", demand: Demand, port_min: int = PORT_MIN, rows=None,
         empty: bool = False) -> np.ndarray:
    """Bool per node (per entry of ``rows``, an index array, when given): one instance
    of ``demand`` fits in what is free now (in the node's capacity when ``empty``).
    Health, labels and per-role caps are the filter chain's business, not the fit's."""
    return fitting(view, demand, port_min, empty)(rows)


def fitting(view: "NodeColumns", demand: Demand, port_min: int = PORT_MIN,
            empty: bool = False) -> Callable[[object], np.ndarray]:
    """:func:`fits` of ``demand`` as a function of ``rows``, for the view as it stands
    (make it again after the view changes): the checks and the columns they compare are
    looked up once here, not at every call — select()'s index walk asks it of chunk
    after chunk of a few nodes. The dimensions compared per node in a loop (exact
    ports) are asked last, of the rows still in."""
    amounts: list[tuple[np.ndarray, int]] = []   # (column, need): the "at least" checks
    others: list[Check] = []
    loops: list[Check] = []
    for check in demand.checks(port_min):
        if not check.vectorised:
            loops.append(check)
        elif type(check).meets is _AtLeast.meets:
            amounts.append((check.shown_column(view, empty), check.need))
        else:
            others.append(check)

    def fit(rows=None) -> np.ndarray:
        if amounts:
            column, need = amounts[0]
            ok = (column if rows is None else column[rows]) >= need
            for column, need in amounts[1:]:
                ok &= (column if rows is None else column[rows]) >= need
        else:
            ok = np.ones(len(view) if rows is None else len(rows), dtype=bool)
        for check in others:
            ok &= check.meets(view, rows, empty)
        for check in loops:  # a per-node loop: only over the rows still in
            where = np.flatnonzero(ok)
            ok[where] = check.meets(view, _subset(rows, where), empty)
        return ok

    return fit


def room(view: "NodeColumns", demand: Demand, port_min: int = PORT_MIN, rows=None,
         empty: bool = False) -> np.ndarray:
    """int64 per node (per entry of ``rows``): how many instances of ``demand`` fit in
    what is free now (in the node's capacity when ``empty``); :data:`UNBOUNDED` for a
    demand of nothing. ``room >= 1`` exactly where :func:`fits` is True."""
    out = np.full(len(view) if rows is None else len(rows), UNBOUNDED, dtype=np.int64)
    for check in demand.checks(port_min):
        if check.vectorised:
            np.minimum(out, check.room(view, rows, empty), out=out)
        else:  # a per-node loop: only over the rows with room so far
            where = np.flatnonzero(out)
            out[where] = np.minimum(out[where], check.room(view, _subset(rows, where), empty))
    return out


def _subset(rows, where: np.ndarray) -> np.ndarray:
    """The node indices at positions ``where`` of ``rows`` (of every node when None)."""
    return where if rows is None else np.asarray(rows)[where]


def shortfall(demand: Demand, amounts: Amounts, port_min: int = PORT_MIN) -> str | None:
    """The scalar form of the checks, for one node (the RM books container by container,
    the AM instance by instance): None when ``demand`` fits in ``amounts``, else the
    reason code of the first dimension that is short, in the checks' order. Written
    out rather than built from :class:`Check` objects because every exact booking (its
    own ports) is a new demand; the property tests hold it equal to :func:`fits`."""
    if demand.memory_mb > amounts.memory_mb:
        return why.MEMORY
    if demand.mvcores > amounts.mvcores:
        return why.VCORES
    if demand.gpus > amounts.gpus:
        return why.GPUS
    if demand.gpu_milli:
        if _share_short(demand, amounts):
            return why.GPU_SHARE
    elif demand.gpu_mask and amounts.gpu_mask is not None and demand.gpu_mask & ~amounts.gpu_mask:
        return why.GPU_MASK
    if demand.port_ranges:
        if (not demand.port_ranges.fits_in(amounts.port_ranges) if amounts.port_ranges is not None
                else demand.ports > amounts.port_count):
            return why.PORTS
    elif demand.ports and demand.ports > amounts.ports_at_or_above(port_min):
        return why.PORTS
    return None


def _share_short(demand: Demand, amounts: Amounts) -> bool:
    """Whether no GPU of ``amounts`` can take the share (the named one, when named)."""
    per_gpu = amounts.gpu_milli_free
    if per_gpu is None:   # only whole GPUs known: a wholly free one serves any share
        if demand.gpu_mask and amounts.gpu_mask is not None:
            return not demand.gpu_mask & amounts.gpu_mask
        return amounts.gpus < 1
    if demand.gpu_mask:
        gpu = demand.gpu_mask.bit_length() - 1
        return gpu >= len(per_gpu) or per_gpu[gpu] < demand.gpu_milli
    return max(per_gpu, default=0) < demand.gpu_milli
