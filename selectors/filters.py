"""The filter chain of select(): one small class per stage, wired in ``FILTER_CHAIN``.

Each filter looks at the nodes still alive and returns a :class:`Verdict`: which
of them pass, and a rejection (stable reason code, kind, numbers) for each group
it turned down. Filters are vector expressions over the :class:`ClusterView`
columns; a node rejected by one filter is not seen by the next, so the counts in
an explanation add up to the nodes that did not survive.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby

import numpy as np

from . import explanation as why
from .cluster import ClusterView
from .explanation import Rejection
from .fit import Check, Demand
from .request import SelectionRequest
from .settings import SelectionSettings


@dataclass
class Verdict:
    passed: np.ndarray
    rejections: list[Rejection] = field(default_factory=list)


@dataclass
class FilterContext:
    view: ClusterView
    request: SelectionRequest
    settings: SelectionSettings


class Filter:
    """One stage: ``verdict(ctx, alive)`` where ``alive`` is a bool column."""

    name = ""

    def verdict(self, ctx: FilterContext, alive: np.ndarray) -> Verdict:
        raise NotImplementedError

    def _reject(self, verdict: Verdict, rejected: np.ndarray, reason: str, kind: str, **numbers) -> None:
        """Record a rejection; a number given as a callable is computed only when
        some node was rejected (select() is hot, explanations are not)."""
        count = int(np.count_nonzero(rejected))
        if count:
            numbers = {k: (v() if callable(v) else v) for k, v in numbers.items()}
            verdict.rejections.append(Rejection(self.name, reason, kind, count, **numbers))


class HealthFilter(Filter):
    """Blacklisted or lost nodes. Transient, so counted as exhausted, not filtered."""

    name = "health"

    def verdict(self, ctx, alive):
        passed = alive & ctx.view.healthy
        v = Verdict(passed)
        self._reject(v, alive & ~ctx.view.healthy, why.UNHEALTHY, why.EXHAUSTED)
        return v


class NodeLabelFilter(Filter):
    name = "node-label"

    def verdict(self, ctx, alive):
        label = ctx.request.node_label
        if not label:
            return Verdict(alive)
        bit = ctx.view.label_bit.get(label, 0)
        has = (ctx.view.label_bits & np.uint64(bit)) != 0 if bit else np.zeros(len(ctx.view), bool)
        v = Verdict(alive & has)
        self._reject(v, alive & ~has, why.LABEL_MISMATCH, why.FILTERED, requested=label)
        return v


class GpuTypeFilter(Filter):
    name = "gpu-type"

    def verdict(self, ctx, alive):
        wanted = ctx.request.gpu_types
        if not wanted:
            return Verdict(alive)
        codes = [i for i, t in enumerate(ctx.view.gpu_types) if t in wanted]
        has = np.isin(ctx.view.gpu_type_code, codes)
        v = Verdict(alive & has)
        self._reject(v, alive & ~has, why.GPU_TYPE_MISMATCH, why.FILTERED, requested="|".join(wanted))
        return v


class NonGpuJobFilter(Filter):
    """Keeps jobs that need no GPU at all off GPU nodes, when configured to.

    qizhi had this filter but never reached it (non-GPU requests skipped select());
    here every request goes through the chain, and the job's GPU total decides."""

    name = "non-gpu-job"

    def verdict(self, ctx, alive):
        job_gpus = ctx.request.job_gpus if ctx.request.job_gpus is not None else ctx.request.resource.gpus
        if ctx.settings.allow_non_gpu_job_on_gpu_node or job_gpus > 0:
            return Verdict(alive)
        gpu_node = ctx.view.gpu_capacity > 0
        v = Verdict(alive & ~gpu_node)
        self._reject(v, alive & gpu_node, why.GPU_NODE_RESERVED, why.FILTERED)
        return v


class RoleCapFilter(Filter):
    """``maxInstancesPerNode``: at most N instances of the role on one node."""

    name = "role-cap"

    def verdict(self, ctx, alive):
        cap = ctx.request.max_instances_per_node
        if cap is None:
            return Verdict(alive)
        full = ctx.view.instances_of(ctx.request.role) >= cap
        v = Verdict(alive & ~full)
        self._reject(v, alive & full, why.ROLE_CAP_REACHED, why.EXHAUSTED, requested=cap)
        return v


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

    def verdict(self, ctx, alive):
        view = ctx.view
        v = Verdict(alive)
        remaining = alive
        if ctx.settings.skip_nodes_where_role_failed:
            failed = view.failed_here(ctx.request.role)
            if failed is not None:
                self._reject(v, remaining & failed, why.ROLE_FAILED_HERE, why.FILTERED)
                remaining = remaining & ~failed
        checks = Demand.of(ctx.request.resource).checks(ctx.settings.port_min)
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
        if not short.any():
            return remaining
        numbers = {"requested": check.requested}
        column = check.shown_column(view, empty)
        if column is not None:
            numbers["capacity" if empty else "most_free"] = lambda: _shown(_max(column, short), check.unit)
        self._reject(v, short, check.reason, why.FILTERED if empty else why.EXHAUSTED, **numbers)
        return remaining & ~short


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


def _shown(value, unit: int):
    """A number as an explanation shows it: millis back in vcores."""
    return value if value is None or unit == 1 else value / unit


def _max(values: np.ndarray, where: np.ndarray):
    if not where.any():
        return None
    top = values[where].max()
    return float(top) if isinstance(top, np.floating) else int(top)


# The chain, in qizhi's order. Cheap, "can never fit" filters come first so the
# explanation blames the most permanent reason; resource fit needs the role caps
# applied first; the rack policy narrows only among nodes that fit.
FILTER_CHAIN: tuple[Filter, ...] = (
    HealthFilter(),
    NodeLabelFilter(),
    GpuTypeFilter(),
    NonGpuJobFilter(),
    RoleCapFilter(),
    ResourceFitFilter(),
    RackPolicyFilter(),
)
