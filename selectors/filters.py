"""The filter chain of select(): one small class per stage, wired in ``FILTER_CHAIN``.

Each filter looks at the nodes still alive and returns a :class:`Verdict`: which
of them pass, and a rejection (stable reason code, kind, numbers) for each group
it turned down. Filters are vector expressions over the :class:`ClusterView`
columns; a node rejected by one filter is not seen by the next, so the counts in
an explanation add up to the nodes that did not survive.

The stages that judge each node on its own also answer :meth:`Filter.passes` for a
few rows at a time, without explaining: select() walks a strategy's node index and
asks that of each chunk; the explaining chain runs only when nothing fits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import Callable, Optional

import numpy as np

from . import explanation as why
from .cluster import ClusterView
from .explanation import Rejection
from .fit import Check, Demand, fitting, shortfall
from .ports import PORT_MIN
from .request import SelectionRequest
from .settings import SelectionSettings


#: A stage's check bound to one request: bool per entry of ``rows`` (an index array; every
#: node when None).
RowCheck = Callable[[Optional[np.ndarray]], np.ndarray]
#: The same check of one node (its number), in plain Python.
NodeCheck = Callable[[int], bool]


@dataclass
class Verdict:
    passed: np.ndarray
    rejections: list[Rejection] = field(default_factory=list)


@dataclass
class FilterContext:
    view: ClusterView
    request: SelectionRequest
    settings: SelectionSettings

    @property
    def demand(self) -> Demand:
        return self.request.demand


class Filter:
    """One stage: ``verdict(ctx, alive)`` where ``alive`` is a bool column."""

    name = ""

    def verdict(self, ctx: FilterContext, alive: np.ndarray) -> Verdict:
        raise NotImplementedError

    def passes(self, ctx: FilterContext, rows: np.ndarray | None = None) -> np.ndarray | None:
        """Bool per node (per entry of ``rows``, an index array): the node passes this
        stage; None when the stage lets every node pass. No explanation. Only for stages
        that judge each node on its own (not the rack policy)."""
        check = self.check(ctx)
        return None if check is None else check(rows)

    def check(self, ctx: FilterContext) -> RowCheck | None:
        """:meth:`passes` for this request, as a function of ``rows`` (None: every node
        passes), for the view as it stands: what depends on the request alone is worked
        out once here, not at every call — select()'s indexed search asks it of a few
        rows at a time, chunk after chunk."""
        raise NotImplementedError(f"{type(self).__name__} compares nodes with each other")

    def check_one(self, ctx: FilterContext) -> NodeCheck | None:
        """:meth:`check` of one node at a time, in plain Python (the same answer: the
        select() differential tests hold it); None when every node passes. An index walk
        asks it of the first nodes in key order, where one usually passes, before it
        checks chunks with :meth:`check`."""
        raise NotImplementedError(f"{type(self).__name__} compares nodes with each other")

    def _reject(self, verdict: Verdict, rejected: np.ndarray, reason: str, kind: str, **numbers) -> None:
        """Record a rejection; a number given as a callable is computed only when
        some node was rejected (select() is hot, explanations are not)."""
        count = int(np.count_nonzero(rejected))
        if count:
            numbers = {k: (v() if callable(v) else v) for k, v in numbers.items()}
            verdict.rejections.append(Rejection(self.name, reason, kind, count, nodes=rejected, **numbers))


class NodeFilter(Filter):
    """A stage that judges each node on its own, for one reason: :meth:`passes` says
    which nodes pass, the verdict explains the others."""

    reason = ""
    kind = why.FILTERED

    def numbers(self, ctx: FilterContext) -> dict:
        """The numbers its rejection shows (``requested``...)."""
        return {}

    def verdict(self, ctx, alive):
        ok = self.passes(ctx)
        if ok is None:
            return Verdict(alive)
        v = Verdict(alive & ok)
        self._reject(v, alive & ~ok, self.reason, self.kind, **self.numbers(ctx))
        return v


class HealthFilter(NodeFilter):
    """Blacklisted or lost nodes. Transient, so counted as exhausted, not filtered."""

    name = "health"
    reason, kind = why.UNHEALTHY, why.EXHAUSTED

    def check(self, ctx):
        view = ctx.view
        return lambda rows: _take(view.healthy, rows)

    def check_one(self, ctx):
        return ctx.view.healthy.item


class NodeLabelFilter(NodeFilter):
    name = "node-label"
    reason = why.LABEL_MISMATCH

    def numbers(self, ctx):
        return {"requested": ctx.request.node_label}

    def check(self, ctx):
        label = ctx.request.node_label
        if not label:
            return None
        view = ctx.view
        bit = view.label_bit.get(label, 0)
        if not bit:
            return lambda rows: np.zeros(_size(view, rows), bool)
        bit = np.uint64(bit)
        return lambda rows: (_take(view.label_bits, rows) & bit) != 0

    def check_one(self, ctx):
        label = ctx.request.node_label
        if not label:
            return None
        bits, bit = ctx.view.label_bits, ctx.view.label_bit.get(label, 0)
        return lambda i: bool(bits.item(i) & bit)


class GpuTypeFilter(NodeFilter):
    name = "gpu-type"
    reason = why.GPU_TYPE_MISMATCH

    def numbers(self, ctx):
        return {"requested": "|".join(ctx.request.gpu_types)}

    def check(self, ctx):
        wanted = ctx.request.gpu_types
        if not wanted:
            return None
        view = ctx.view
        allowed = np.array([t in wanted for t in view.gpu_types], dtype=bool)  # per GPU type code
        return lambda rows: allowed[_take(view.gpu_type_code, rows)]

    def check_one(self, ctx):
        wanted = ctx.request.gpu_types
        if not wanted:
            return None
        codes = ctx.view.gpu_type_code
        allowed = [t in wanted for t in ctx.view.gpu_types]
        return lambda i: allowed[codes.item(i)]


class NonGpuJobFilter(NodeFilter):
    """Keeps jobs that need no GPU at all off GPU nodes, when configured to.

    qizhi had this filter but never reached it (non-GPU requests skipped select());
    here every request goes through the chain, and the job's GPU total decides. A share
    of one GPU is a GPU ask: it needs a GPU node."""

    name = "non-gpu-job"
    reason = why.GPU_NODE_RESERVED

    def check(self, ctx):
        if not self._applies(ctx):
            return None
        view = ctx.view
        return lambda rows: _take(view.gpu_capacity, rows) == 0

    def check_one(self, ctx):
        if not self._applies(ctx):
            return None
        capacity = ctx.view.gpu_capacity
        return lambda i: capacity.item(i) == 0

    @staticmethod
    def _applies(ctx) -> bool:
        job_gpus = ctx.request.job_gpus if ctx.request.job_gpus is not None else ctx.request.resource.gpus
        return not (ctx.settings.allow_non_gpu_job_on_gpu_node or job_gpus > 0 or ctx.request.resource.gpu_milli)


class RoleCapFilter(NodeFilter):
    """``maxInstancesPerNode``: at most N instances of the role on one node."""

    name = "role-cap"
    reason, kind = why.ROLE_CAP_REACHED, why.EXHAUSTED

    def numbers(self, ctx):
        return {"requested": ctx.request.max_instances_per_node}

    def check(self, ctx):
        cap = ctx.request.max_instances_per_node
        counts = ctx.view.role_count.get(ctx.request.role)
        if cap is None or counts is None:  # no column yet: no instance anywhere (cap >= 1)
            return None
        return lambda rows: _take(counts, rows) < cap

    def check_one(self, ctx):
        cap = ctx.request.max_instances_per_node
        counts = ctx.view.role_count.get(ctx.request.role)
        if cap is None or counts is None:
            return None
        return lambda i: counts.item(i) < cap


class ResourceFitFilter(Filter):
    """Memory, vcores, GPUs (count and mask) and ports, capacity before usage, answered
    by the fit model (:mod:`~gangmaster.selectors.fit`), so a node passes here exactly
    when :func:`~gangmaster.selectors.fit.fits` says one instance fits (ports counted
    at or above ``port_min``, as the port chooser hands them out).

    A node is charged to the first dimension it fails, in the model's order, and to
    ``filtered`` when even its capacity is too small, ``exhausted`` when only its
    current usage is in the way (memory, vcores and GPU counts are compared on
    capacity together before usage; a port shortage is always ``exhausted``). Nodes
    where the role already failed are skipped first when configured (qizhi's
    amSkipLocalTriedResource)."""

    name = "resource-fit"

    def check(self, ctx):
        fit = fitting(ctx.view, ctx.demand, ctx.settings.port_min)
        failed = ctx.view.failed_here(ctx.request.role) if ctx.settings.skip_nodes_where_role_failed else None
        if failed is None:
            return fit
        return lambda rows: fit(rows) & ~_take(failed, rows)

    def check_one(self, ctx):
        """The fit model's scalar form (:func:`~gangmaster.selectors.fit.shortfall` of the
        node's :meth:`~gangmaster.selectors.cluster.NodeColumns.amounts`). A demand of
        memory, vcores and whole GPUs by count alone (no share, no GPUs or ports named),
        with or without a count of ports, is what ``shortfall`` then compares: the free
        amounts, read as they are, and the free ports at or above ``port_min`` as
        ``Amounts.ports_at_or_above`` counts them."""
        view, demand, port_min = ctx.view, ctx.demand, ctx.settings.port_min
        failed = view.failed_here(ctx.request.role) if ctx.settings.skip_nodes_where_role_failed else None
        if demand.gpu_milli or demand.gpu_mask or demand.port_ranges:
            def fits(i: int) -> bool:
                return shortfall(demand, view.amounts(i), port_min) is None
        elif demand.ports:   # and a count of ports at or above port_min (Amounts.ports_at_or_above)
            memory, mvcores, gpus, ports = demand.memory_mb, demand.mvcores, demand.gpus, demand.ports

            def fits(i: int) -> bool:
                if not (view.memory_free.item(i) >= memory and view.mvcores_free.item(i) >= mvcores
                        and view.gpus_free.item(i) >= gpus):
                    return False
                if port_min <= PORT_MIN:
                    return view.ports_free_count.item(i) >= ports
                # the count of the node's set of free ports, kept per set by the column's table
                # (the nodes of a kind share a few sets): no sum over its ranges per node
                column = view.ports_free
                return column.table.counts_at_or_above(port_min).item(column.codes.item(i)) >= ports
        else:
            memory, mvcores, gpus = demand.memory_mb, demand.mvcores, demand.gpus

            def fits(i: int) -> bool:
                return (view.memory_free.item(i) >= memory and view.mvcores_free.item(i) >= mvcores
                        and view.gpus_free.item(i) >= gpus)
        if failed is None:
            return fits
        return lambda i: not failed.item(i) and fits(i)

    def verdict(self, ctx, alive):
        view = ctx.view
        v = Verdict(alive)
        remaining = alive
        if ctx.settings.skip_nodes_where_role_failed:
            failed = view.failed_here(ctx.request.role)
            if failed is not None:
                self._reject(v, remaining & failed, why.ROLE_FAILED_HERE, why.FILTERED)
                remaining = remaining & ~failed
        checks = ctx.demand.checks(ctx.settings.port_min)
        for _, group in groupby(checks, key=lambda check: check.group):
            group = list(group)
            for check in group:  # can never fit here: blamed first
                if check.filtered_when_too_small:
                    remaining = self._charge(v, view, check, remaining, empty=True)
            for check in group:  # full right now
                remaining = self._charge(v, view, check, remaining, empty=False)
        v.passed = remaining
        return v

    def _charge(self, v: Verdict, view: ClusterView, check: Check, remaining: np.ndarray,
                empty: bool) -> np.ndarray:
        """Reject the ``remaining`` nodes where ``check`` is short; the nodes left."""
        if check.vectorised:
            short = remaining & check.short(view, None, empty)
        else:
            rows = np.flatnonzero(remaining)
            short = np.zeros(len(view), bool)
            short[rows[check.short(view, rows, empty)]] = True
        if not np.count_nonzero(short):
            return remaining
        numbers = {"requested": check.requested}
        column = check.shown_column(view, empty)
        if column is not None:
            numbers["capacity" if empty else "most_free"] = lambda: _shown(_max(column, short), check.unit)
        self._reject(v, short, check.reason, why.FILTERED if empty else why.EXHAUSTED, **numbers)
        return remaining ^ short   # (short is some of remaining)


class RackPolicyFilter(Filter):
    """Rack policy of the role (qizhi left this a TODO).

    ``pack``: keep the candidates in the racks that already hold the role's
    instances (or, for the first instance, the rack with the most candidates), so
    the role spans as few racks as possible. ``spread``: keep the candidates in the
    racks holding the fewest instances of the role. Never removes every candidate:
    it only narrows the choice among nodes that fit."""

    name = "rack-policy"

    def verdict(self, ctx, alive):
        policy = ctx.request.rack_policy
        if policy == "none" or not alive.any():
            return Verdict(alive)
        view = ctx.view
        racks = len(view.racks)
        candidates_per_rack = np.bincount(view.rack_code[alive], minlength=racks)
        held = np.bincount(view.rack_code, weights=view.instances_of(ctx.request.role), minlength=racks)
        usable = candidates_per_rack > 0
        if policy == "pack":
            preferred = usable & (held > 0)
            if not preferred.any():
                preferred = candidates_per_rack == candidates_per_rack.max()
                preferred[np.argmax(preferred) + 1:] = False  # the first such rack only
        else:
            fewest = held[usable].min()
            preferred = usable & (held == fewest)
        keep = preferred[view.rack_code]
        v = Verdict(alive & keep)
        self._reject(v, alive & ~keep, why.RACK_POLICY, why.FILTERED, requested=policy)
        return v


def _take(column: np.ndarray, rows) -> np.ndarray:
    return column if rows is None else column[rows]


def _size(view: ClusterView, rows) -> int:
    return len(view) if rows is None else len(rows)


def _shown(value, unit: int):
    """A number as an explanation shows it: millis back in vcores."""
    return value if value is None or unit == 1 else value / unit


def _max(values: np.ndarray, where: np.ndarray):
    chosen = values[where]
    if not chosen.size:
        return None
    top = chosen.max()
    return float(top) if isinstance(top, np.floating) else int(top)


# The chain, in qizhi's order. Cheap, "can never fit" filters come first so the
# explanation blames the most permanent reason; resource fit needs the role caps
# applied first; the rack policy narrows only among nodes that fit.
#: the stages that judge each node on its own (they answer Filter.passes)
NODE_STAGES: tuple[Filter, ...] = (
    HealthFilter(),
    NodeLabelFilter(),
    GpuTypeFilter(),
    NonGpuJobFilter(),
    RoleCapFilter(),
    ResourceFitFilter(),
)
#: the stages that judge a node alone before it is counted: the role's cap and the fit are
#: counted as a number of instances by :func:`~gangmaster.selectors.placement.room_per_node`
#: (0 exactly where these two stages would say no), which keeps off the nodes where the role
#: failed itself
BEFORE_ROOM: tuple[Filter, ...] = tuple(stage for stage in NODE_STAGES
                                        if not isinstance(stage, (RoleCapFilter, ResourceFitFilter)))
#: the stage that compares racks, last
RACK_STAGE = RackPolicyFilter()
FILTER_CHAIN: tuple[Filter, ...] = NODE_STAGES + (RACK_STAGE,)
